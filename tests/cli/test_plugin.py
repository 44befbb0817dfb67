"""kubectl queuetree without a cluster: the what-if's changes through the webhook, the
operator's decision over a listing, and what a refused read says."""

from __future__ import annotations

from typing import Any

from queuetree.api import listings, schedconf
from queuetree.cli import plugin, reading
from queuetree.operator import offline, settings
from queuetree.views import reports

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


def pod(name: str, *, gated: bool, node: str = "", queue_name: str = "q") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
    if gated:
        spec["schedulingGates"] = [{"name": GATE}]
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"u-{name}",
            "creationTimestamp": f"2026-01-01T00:00:0{len(name) % 10}Z",
            "annotations": {GATE: "true", "scheduling.volcano.sh/queue-name": queue_name},
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


def test_a_forbidden_read_names_the_viewer_role() -> None:
    cluster = reading.Cluster(executable="false")
    try:
        cluster.get_json("queues")
    except reading.ReadError as error:
        message = str(error)
    assert message == "kubectl get queues failed: (no output)"
    forbidden = reading._explain_failure("kubectl get pods", 'pods is forbidden: User "x"')
    assert "--clusterrole=queuetree-viewer" in forbidden
