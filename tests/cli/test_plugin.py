"""kubectl queuetree without a cluster: the what-if's changes through the webhook, the
operator's decision over a listing, and what a refused read says."""

from __future__ import annotations

from typing import Any

import pytest

from queuetree.api import listings, schedconf
from queuetree.cli import plugin, reading
from queuetree.core import objects
from queuetree.operator import offline, settings
from queuetree.views import reports, trees

GATE = "scheduling.volcano.sh/queue-allocation-gate"
CONFIG = settings.OperatorSettings(scheduler_config=schedconf.parse_default().configuration)


def queue(name: str, parent: str = "root", **spec: Any) -> dict[str, Any]:
    body = {"parent": parent, **spec} if name != "root" else dict(spec)
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name, "uid": f"u-{name}"},
        "spec": body,
        "status": {"state": "Open"},
    }


def pod(
    name: str,
    *,
    gated: bool,
    node: str = "",
    queue_name: str = "q",
    opted_in: bool = True,
    cpu: str = "1",
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
    if gated:
        spec["schedulingGates"] = [{"name": GATE}]
    if node:
        spec["nodeName"] = node
    annotations = {"scheduling.volcano.sh/queue-name": queue_name}
    if opted_in:
        annotations[GATE] = "true"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"u-{name}",
            "creationTimestamp": f"2026-01-01T00:00:0{len(name) % 10}Z",
            "annotations": annotations,
        },
        "spec": spec,
        "status": {"phase": "Running" if node else "Pending"},
    }


NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "n1"},
    "status": {"allocatable": {"cpu": "8", "memory": "8Gi", "pods": "100"}},
}
LISTING = listings.read_listing(
    [
        queue("root"),
        queue("q", capability={"cpu": "1"}),
        NODE,
        pod("run", gated=False, node="n1"),
        pod("wait", gated=True),
    ]
)


def test_the_operators_decision_over_a_listing_keeps_the_full_queue_waiting() -> None:
    result = offline.decide(LISTING, CONFIG).result
    assert (result.ungate, dict(result.order), result.briefs["ns/wait"]) == (
        (),
        {"q": ("ns/wait",)},
        "no room for cpu 1 in 'q' (1 of 1 used)",
    )


def test_changes_go_through_the_webhook_gated_refused_or_expanded() -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns"},
        "spec": {
            "parallelism": 2,
            "template": {
                "metadata": {
                    "annotations": {GATE: "true", "scheduling.volcano.sh/queue-name": "q"}
                },
                "spec": {"containers": [{"name": "c"}]},
            },
        },
    }
    bad = pod("bad", gated=False, queue_name="root")
    submitted, refused, items = plugin.apply_changes(LISTING, [job, bad], config=CONFIG)
    gates = {
        item["metadata"]["name"]: [g["name"] for g in item["spec"].get("schedulingGates", [])]
        for item in items
        if item["kind"] == "Pod"
    }
    assert (submitted, list(refused), gates["j-0"], gates["j-1"], "bad" in gates) == (
        ["ns/j-0", "ns/j-1"],
        ["Pod ns/bad"],
        [GATE],
        [GATE],
        False,
    )


def test_whatif_raising_the_capability_admits_the_waiting_pod() -> None:
    raised = queue("q", capability={"cpu": "2"})
    changed, refused, items = plugin.apply_changes(LISTING, [raised], config=CONFIG)
    after_listing = listings.read_listing(items)
    before = offline.decide(LISTING, CONFIG).result
    after = offline.decide(after_listing, CONFIG).result
    placed = offline.decide_full(after_listing, CONFIG, ungated=after.ungate)
    report = reports.what_if(
        changed=changed, before=before, after=after, placed=placed, refused=refused
    )
    assert (dict(report.admitted), dict(report.waiting), report.unchanged) == (
        {"ns/wait": "queue 'q', kube-scheduler can place it on n1"},
        {},
        0,
    )


OUTSIDE = (
    "pod ns/noopt names queue 'q' (its annotation scheduling.volcano.sh/queue-name) but did not "
    "opt in to queue admission: it runs outside it, and neither that queue nor any ancestor "
    "counts it; to queue it, create it again with the annotation scheduling.volcano.sh/queue-"
    'allocation-gate: "true", or in a namespace labelled scheduling.volcano.sh/queue-allocation-'
    "gate=true"
)
WITH_NOOPT = listings.read_listing(
    [
        queue("root"),
        queue("q", capability={"cpu": "2"}),
        NODE,
        pod("run", gated=False, node="n1"),
        pod("noopt", gated=False, node="n1", opted_in=False, cpu="5"),
        pod("wait", gated=True),
    ]
)


def test_a_pod_that_names_a_queue_without_opting_in_is_explained_and_not_counted() -> None:
    """A pod that did not opt in counts in no queue: before, noopt's 5 CPU filled q (6 of 2)
    and wait was refused."""
    result = offline.decide(WITH_NOOPT, CONFIG).result
    lines = reports.explain_pod(
        "ns/noopt", listing=WITH_NOOPT, result=result, default_queue="default", width=2000
    )
    assert (result.ungate, lines[1:3], lines[3].split(None, 1)[1]) == (
        ("ns/wait",),
        ["  queue       none: it runs outside queue admission", "  pod group   none (a lone pod)"],
        OUTSIDE,
    )


def test_the_tree_counts_only_governed_pods_and_notes_the_others() -> None:
    rows = {row.name: row for row in trees.build_rows(WITH_NOOPT)}
    assert (dict(rows["q"].counts), rows["q"].outside, trees.notes(list(rows.values()))) == (
        {"gated": 1, "admitted": 0, "running": 1},
        1,
        [
            "q: 1 pod names it without opting in: outside queue admission, not counted "
            "(kubectl queuetree explain POD)"
        ],
    )


def test_a_pod_group_whose_pods_all_run_outside_queue_admission_holds_nothing() -> None:
    group = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "ns", "uid": "u-pg"},
        "spec": {"queue": "q", "minMember": 1, "minResources": {"cpu": "2"}},
        "status": {"phase": "Inqueue"},
    }
    member = pod("m", gated=False, node="n1", opted_in=False)
    member["metadata"]["annotations"]["scheduling.k8s.io/group-name"] = "pg"
    listing = listings.read_listing(
        [
            queue("root"),
            queue("q", capability={"cpu": "2"}),
            NODE,
            group,
            member,
            pod("w", gated=True, cpu="2"),
        ]
    )
    result = offline.decide(listing, CONFIG).result
    text = reports.explain_group(
        "ns/pg", listing=listing, result=result, default_queue="default", width=200
    )
    assert (result.ungate, result.pod_groups["ns/pg"], text.splitlines()[:2]) == (
        ("ns/w",),
        objects.PodGroupPhase.PENDING,
        [
            "PodGroup ns/pg: queue 'q', minMember 1, phase Pending",
            "├── none of its pods opted in to queue admission: they run outside it, and the group "
            "holds nothing in queue 'q' (it stays Pending, counting no pod)",
        ],
    )


def test_a_pod_group_without_pods_is_explained_by_its_queue() -> None:
    groups = [
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}"},
            "spec": {"queue": "q", "minMember": 1, "minResources": {"cpu": cpu}},
        }
        for name, cpu in (("fits", "1"), ("big", "3"))
    ]
    listing = listings.read_listing([queue("root"), queue("q", capability={"cpu": "2"}), *groups])
    result = offline.decide(listing, CONFIG).result
    lines = [
        reports.explain_group(
            f"ns/{name}", listing=listing, result=result, default_queue="default", width=300
        ).splitlines()
        for name in ("fits", "big")
    ]
    assert lines == [
        [
            "PodGroup ns/fits: queue 'q', minMember 1, phase Inqueue",
            "└── no pods yet: admitted to queue 'q', which holds its minResources (cpu 1) for "
            "its pods; the room is given back if the group has no pod 5m after admission",
        ],
        [
            "PodGroup ns/big: queue 'q', minMember 1, phase Pending",
            "└── no pods yet: queue 'q' cannot take the pod group's minResources on cpu: "
            "requested 3, used 0 of capability 2 (allocated plus inqueue groups)",
        ],
    ]


def test_whatif_says_a_pod_submitted_without_opting_in_runs_outside_queue_admission() -> None:
    noopt = pod("noopt", gated=False, opted_in=False, cpu="5")
    changed, refused, items = plugin.apply_changes(LISTING, [noopt], config=CONFIG)
    after_listing = listings.read_listing(items)
    before = offline.decide(LISTING, CONFIG).result
    after = offline.decide(after_listing, CONFIG).result
    placed = offline.decide_full(after_listing, CONFIG, ungated=after.ungate)
    report = reports.what_if(
        changed=changed,
        before=before,
        after=after,
        placed=placed,
        refused=refused,
        outside=reports.outside_of(changed, after_listing),
    )
    assert (dict(report.outside), dict(report.waiting), dict(report.admitted)) == (
        {"ns/noopt": OUTSIDE},
        {},
        {},
    )


def test_a_forbidden_read_names_the_viewer_role() -> None:
    cluster = reading.Cluster(executable="false")
    try:
        cluster.get_json("queues")
    except reading.ReadError as error:
        message = str(error)
    assert message == "kubectl get queues failed: (no output)"
    forbidden = reading._explain_failure("kubectl get pods", 'pods is forbidden: User "x"')
    assert "--clusterrole=queuetree-viewer" in forbidden


def _owned(name: str, kind: str, owner: str) -> objects.PodGroup:
    return objects.PodGroup(
        namespace="ml",
        name=name,
        owner=objects.OwnerReference("v1", kind, owner, f"uid-{name}"),
    )


WORKLOAD_LISTING = listings.Listing(
    queues={},
    statuses={},
    pod_groups={
        group.key: group
        for group in (
            _owned("podgroup-1", "Job", "train"),
            _owned("podgroup-2", "ReplicaSet", "web-7c9f8"),
            _owned("podgroup-3", "ReplicaSet", "web-api-1a2b"),
            _owned("mnist", "PyTorchJob", "mnist"),
            objects.PodGroup(namespace="ml", name="hand-written"),
        )
    },
    pods={},
    nodes={},
    namespaces={},
)


@pytest.mark.parametrize(
    ("kind", "key", "expected"),
    [
        pytest.param("job", "ml/train", ["ml/podgroup-1"], id="a-job"),
        pytest.param("jobs", "ml/train", ["ml/podgroup-1"], id="the-plural"),
        pytest.param("pytorchjob", "ml/mnist", ["ml/mnist"], id="a-group-its-operator-made"),
        pytest.param("deployment", "ml/web", ["ml/podgroup-2"], id="a-deployments-replica-sets"),
        pytest.param("deploy", "ml/web-api", ["ml/podgroup-3"], id="kubectls-short-name"),
        pytest.param("replicaset", "ml/web-7c9f8", ["ml/podgroup-2"], id="a-replica-set"),
        pytest.param("job", "other/train", [], id="another-namespace"),
    ],
)
def test_explain_finds_the_groups_a_workload_owns(kind: str, key: str, expected: list[str]) -> None:
    assert plugin.workload_groups(WORKLOAD_LISTING, kind, key) == expected
