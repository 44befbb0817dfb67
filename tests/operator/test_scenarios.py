"""The operator against kubesim with the simulated scheduler and kubelet (spec §5.4 and more)."""

from __future__ import annotations

import logging
import pathlib
import threading
import urllib.request
from collections.abc import Iterator
from typing import Any, NamedTuple

import pytest
import yaml

from kubesim import harness, server, simulation
from queuetree.api import schedconf
from queuetree.core import objects
from tests.operator import cluster as sim

SLOT = {"cpu": "500m", "memory": "512Mi"}
TWO_SMALL_NODES = ("n1:cpu=2,memory=2048Mi", "n2:cpu=2,memory=2048Mi")


BIG_NODES = ("n1:cpu=16,memory=64Gi", "n2:cpu=16,memory=64Gi")


@pytest.fixture
def node_flags() -> tuple[str, ...]:
    """The simulated nodes; a test overrides it with ``pytest.mark.parametrize``."""
    return TWO_SMALL_NODES


@pytest.fixture
def webhook() -> bool:
    """Whether the real webhook injects the gates; a test overrides it with parametrize."""
    return False


@pytest.fixture
def kube(
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
    node_flags: tuple[str, ...],
    webhook: bool,
) -> Iterator[tuple[harness.Cluster, sim.Client]]:
    for cluster, client in sim.start(tmp_path, *node_flags, webhook=webhook):
        monkeypatch.setenv("KUBECONFIG", str(cluster.kubeconfig))
        monkeypatch.setenv("KUBECACHEDIR", str(cluster.cache_dir))
        yield cluster, client


@pytest.fixture
def operator(kube: tuple[harness.Cluster, sim.Client]) -> Iterator[sim.OperatorThread]:
    thread = sim.OperatorThread(sim.operator_settings()).start()
    try:
        yield thread
    finally:
        thread.stop()


def running_without_gates(pod: dict[str, Any] | None) -> bool:
    return (
        pod is not None
        and not sim.gates_of(pod)
        and pod.get("status", {}).get("phase") == "Running"
    )


@pytest.mark.parametrize("webhook", [True], ids=["gates injected by the webhook"])
def test_an_ungated_unschedulable_pod_reserves_queue_capacity_until_deleted(
    kube: tuple[harness.Cluster, sim.Client], operator: sim.OperatorThread
) -> None:
    _, client = kube
    client.create_queue("capacity-test-queue", capability=SLOT)
    # Pods are created without gates: the webhook injects ours on CREATE.
    created = client.create_pod("pod-1", queue="capacity-test-queue", requests=SLOT, gates=())
    assert sim.gates_of(created) == [sim.GATE]
    sim.eventually(lambda: running_without_gates(client.pod("pod-1")), what="pod-1 runs")
    client.delete_pod("pod-1")
    client.create_pod(
        "pod-2",
        queue="capacity-test-queue",
        requests=SLOT,
        node_selector={"kubernetes.io/fake-node": "fake"},
        gates=(),
    )
    sim.eventually(lambda: not sim.gates_of(client.pod("pod-2")), what="pod-2 ungated")
    client.create_pod("pod-3", queue="capacity-test-queue", requests=SLOT, gates=())
    # Held back while pod-2 reserves the queue: wait for the operator to explain why.
    sim.eventually(
        lambda: (
            (client.pod("pod-3") or {})
            .get("metadata", {})
            .get("annotations", {})
            .get("scheduling.queuetree.io/admission-reason")
        ),
        what="pod-3 explained",
    )
    assert sim.gates_of(client.pod("pod-3")) == [sim.GATE]
    assert client.pod("pod-2")["status"]["phase"] == "Pending"
    explained = (client.pod("pod-3") or {})["metadata"]["annotations"][
        "scheduling.queuetree.io/admission-reason"
    ]
    sim.eventually(
        lambda: (
            [
                (event["reason"], event["message"])
                for event in client.sim.list_objects("", "events", "default")
                if event["involvedObject"]["name"] == "pod-3"
            ]
            == [("QueueAdmissionPending", explained)]
        ),
        what="one event with the same text",
    )
    client.delete_pod("pod-2")
    sim.eventually(lambda: running_without_gates(client.pod("pod-3")), what="pod-3 runs")


@pytest.mark.parametrize("webhook", [True], ids=["gates injected by the webhook"])
def test_the_queue_gate_is_removed_only_once_it_is_the_last_gate(
    kube: tuple[harness.Cluster, sim.Client], operator: sim.OperatorThread
) -> None:
    _, client = kube
    client.create_queue("capacity-multigate-queue", capability=SLOT)
    created = client.create_pod(
        "pod-multigate",
        queue="capacity-multigate-queue",
        requests=SLOT,
        gates=("example.com/other-gate",),
    )
    assert sim.gates_of(created) == ["example.com/other-gate", sim.GATE]
    sim.eventually(
        lambda: operator.state is not None and operator.state.get_pod("default/pod-multigate")
    )
    seen = operator.cycles()
    sim.eventually(lambda: operator.cycles() >= seen + 3, what="three cycles")
    assert sim.gates_of(client.pod("pod-multigate")) == ["example.com/other-gate", sim.GATE]
    status, answer = client.request(
        "PATCH",
        "/api/v1/namespaces/default/pods/pod-multigate",
        [{"op": "replace", "path": "/spec/schedulingGates", "value": [{"name": sim.GATE}]}],
        content_type="application/json-patch+json",
    )
    assert status == 200, answer
    sim.eventually(lambda: running_without_gates(client.pod("pod-multigate")), what="runs")


def ungated_by_queue(client: sim.Client) -> dict[str, int]:
    counts: dict[str, int] = {}
    for pod in client.pods():
        if not sim.gates_of(pod):
            queue = sim.queue_of(pod)
            counts[queue] = counts.get(queue, 0) + 1
    return counts


@pytest.mark.parametrize("node_flags", [BIG_NODES], ids=["two 16-cpu nodes"])
def test_hierarchical_caps_hold_under_a_burst_across_sibling_queues(
    kube: tuple[harness.Cluster, sim.Client], operator: sim.OperatorThread
) -> None:
    _, client = kube
    client.create_queue("dept-a", capability={"cpu": "4", "memory": "16Gi"})
    client.create_queue("team-a1", parent="dept-a", capability={"cpu": "3"})
    client.create_queue("team-a2", parent="dept-a", capability={"cpu": "3"})
    client.create_queue("dept-b", capability={"cpu": "2"})
    client.create_queue("team-b1", parent="dept-b")
    with sim.InvariantWatch(client) as watch:
        for index in range(20):
            for team in ("team-a1", "team-a2", "team-b1"):
                client.create_pod(f"{team}-{index}", queue=team, requests=SLOT)
        # dept-a admits 4 cpu (8 slots) across both teams, dept-b 2 cpu (4 slots).
        sim.eventually(
            lambda: (
                (counts := ungated_by_queue(client)).get("team-a1", 0) + counts.get("team-a2", 0)
                == 8
                and counts.get("team-b1", 0) == 4
            ),
            what="both departments full",
        )
        seen = operator.cycles()
        sim.eventually(lambda: operator.cycles() >= seen + 3, what="three more cycles")
    counts = ungated_by_queue(client)
    assert (watch.violations, counts.get("team-a1", 0) <= 6, counts.get("team-a2", 0) <= 6) == (
        [],
        True,
        True,
    )
    assert watch.checks > 0
    assert counts.get("team-a1", 0) + counts.get("team-a2", 0) == 8
    assert counts.get("team-b1", 0) == 4


def queue_state(client: sim.Client, name: str) -> tuple[str, str]:
    queue = client.queue(name) or {}
    mark = (queue.get("metadata", {}).get("annotations") or {}).get("volcano.sh/closed-by-parent")
    return queue.get("status", {}).get("state", ""), mark or ""


def write_state(client: sim.Client, name: str, state: str) -> None:
    status, answer = client.request(
        "PATCH",
        f"{sim.QUEUES}/{name}/status",
        {"status": {"state": state}},
        content_type="application/merge-patch+json",
    )
    assert status == 200, answer


@pytest.mark.parametrize("node_flags", [BIG_NODES], ids=["two 16-cpu nodes"])
def test_closing_a_parent_closes_its_children_and_reopening_reopens_them(
    kube: tuple[harness.Cluster, sim.Client], operator: sim.OperatorThread
) -> None:
    _, client = kube
    client.create_queue("dept")
    client.create_queue("busy", parent="dept")
    client.create_queue("idle", parent="dept")
    client.create_pod("worker", queue="busy", requests=SLOT)
    sim.eventually(lambda: running_without_gates(client.pod("worker")), what="worker runs")
    sim.eventually(lambda: queue_state(client, "dept") == ("Open", ""), what="dept open")
    write_state(client, "dept", "Closed")
    expected_closed = {
        "dept": ("Closed", ""),
        "busy": ("Closing", "true"),
        "idle": ("Closed", "true"),
    }
    sim.eventually(
        lambda: {name: queue_state(client, name) for name in expected_closed} == expected_closed,
        what="cascade closed",
    )
    client.create_pod("late", queue="busy", requests=SLOT)
    sim.eventually(lambda: operator.state is not None and operator.state.get_pod("default/late"))
    seen = operator.cycles()
    sim.eventually(lambda: operator.cycles() >= seen + 3, what="three cycles")
    assert sim.gates_of(client.pod("late")) == [sim.GATE]
    write_state(client, "dept", "Open")
    expected_open = {"dept": ("Open", ""), "busy": ("Open", "false"), "idle": ("Open", "false")}
    sim.eventually(
        lambda: {name: queue_state(client, name) for name in expected_open} == expected_open,
        what="cascade reopened",
    )
    sim.eventually(lambda: running_without_gates(client.pod("late")), what="late runs")
    client.delete_pod("worker")
    client.delete_pod("late")
    write_state(client, "busy", "Closed")
    sim.eventually(lambda: queue_state(client, "busy") == ("Closed", "false"), what="busy closed")


def test_root_and_default_queues_are_created_and_parents_defaulted(
    kube: tuple[harness.Cluster, sim.Client], operator: sim.OperatorThread
) -> None:
    _, client = kube
    client.create(
        sim.QUEUES,
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": "orphan"},
            "spec": {},
        },
    )
    sim.eventually(
        lambda: (client.queue("orphan") or {}).get("spec", {}).get("parent") == "root",
        what="parent defaulted",
    )
    root = client.queue("root") or {}
    default = client.queue("default") or {}
    assert (root.get("spec", {}).get("reclaimable"), default.get("spec", {}).get("parent")) == (
        False,
        "root",
    )
    sim.eventually(
        lambda: (client.queue("orphan") or {}).get("status", {}).get("state") == "Open",
        what="status written",
    )
    # kopf only indexes and watches: it marks nothing it sees. The one annotation the operator
    # adds is the queue it admitted the pod to, with the gate removal; the one finalizer, the
    # one that keeps a queue while pods are charged to it (gone once they are).
    client.create_pod("plain", queue="orphan", requests=SLOT)
    sim.eventually(lambda: running_without_gates(client.pod("plain")), what="plain runs")
    metadata = [
        (obj["metadata"].get("finalizers"), sorted(obj["metadata"].get("annotations") or {}))
        for obj in (client.queue("orphan"), client.pod("plain"))
        if obj is not None
    ]
    assert metadata == [
        ([objects.QUEUE_IN_USE_FINALIZER], []),
        (None, [objects.ADMITTED_QUEUE_ANNOTATION, sim.GATE, "scheduling.volcano.sh/queue-name"]),
    ]
    client.delete_pod("plain")
    sim.eventually(
        lambda: not (client.queue("orphan") or {}).get("metadata", {}).get("finalizers"),
        what="the finalizer gone with the last pod",
    )


NOWHERE = {"kubernetes.io/fake-node": "fake"}
"""A node selector no node matches: ungated pods stay Pending and keep reserving capacity."""


def gated_and_ungated(client: sim.Client, prefix: str) -> tuple[set[str], set[str]]:
    gated, ungated = set(), set()
    for pod in client.pods():
        name = pod["metadata"]["name"]
        if name.startswith(prefix):
            (gated if sim.gates_of(pod) else ungated).add(name)
    return gated, ungated


@pytest.mark.parametrize("node_flags", [BIG_NODES], ids=["two 16-cpu nodes"])
def test_a_restart_in_the_middle_of_a_burst_neither_over_admits_nor_loses_a_pod(
    kube: tuple[harness.Cluster, sim.Client],
) -> None:
    _, client = kube
    first = sim.OperatorThread(sim.operator_settings()).start()
    try:
        sim.eventually(lambda: client.queue("root"), what="root queue")
        client.create_queue("tight", capability={"cpu": "2"})
        with sim.InvariantWatch(client) as watch:
            for index in range(6):
                client.create_pod(
                    f"job-{index}", queue="tight", requests=SLOT, node_selector=NOWHERE
                )
            sim.eventually(lambda: gated_and_ungated(client, "job-")[1], what="some admitted")
            first.stop()
            for index in range(6, 12):
                client.create_pod(
                    f"job-{index}", queue="tight", requests=SLOT, node_selector=NOWHERE
                )
            second = sim.OperatorThread(sim.operator_settings()).start()
            try:
                sim.eventually(
                    lambda: len(gated_and_ungated(client, "job-")[1]) == 4, what="queue full"
                )
                seen = second.cycles()
                sim.eventually(lambda: second.cycles() >= seen + 3, what="three more cycles")
                assert len(gated_and_ungated(client, "job-")[1]) == 4
                admitted: set[str] = set()
                # Free the room pod by pod: every pod is admitted in the end, none is lost.
                while len(admitted) < 12:
                    ungated = sim.eventually(
                        lambda: gated_and_ungated(client, "job-")[1] - admitted,
                        what="next pods admitted",
                    )
                    for name in ungated:
                        admitted.add(name)
                        client.delete_pod(name)
            finally:
                second.stop()
    finally:
        if first.alive:
            first.stop()
    assert (watch.violations, sorted(admitted)) == ([], sorted(f"job-{i}" for i in range(12)))


def elected(identity: str) -> Any:
    return sim.operator_settings(
        leader_elect=True,
        identity=identity,
        lease_name="queuetree-operator",
        lease_namespace="default",
        lease_duration=3.0,
        renew_deadline=2.0,
        retry_period=1.0,
    )


class LeaderWatch:
    """Records, in a thread, every moment at which both replicas claim to lead."""

    def __init__(self, *replicas: sim.OperatorThread) -> None:
        self.replicas = replicas
        self.overlaps = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, name="leader watch")

    def _main(self) -> None:
        while not self._stop.is_set():
            if sum(replica.leading() for replica in self.replicas) > 1:
                self.overlaps += 1
            self._stop.wait(0.005)

    def __enter__(self) -> LeaderWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)


@pytest.mark.parametrize("node_flags", [BIG_NODES], ids=["two 16-cpu nodes"])
def test_of_two_replicas_only_the_lease_holder_acts_and_the_other_takes_over(
    kube: tuple[harness.Cluster, sim.Client],
) -> None:
    _, client = kube
    one = sim.OperatorThread(elected("replica-one")).start()
    two = sim.OperatorThread(elected("replica-two")).start()
    replicas = {"replica-one": one, "replica-two": two}
    try:
        with LeaderWatch(one, two) as watch:
            sim.eventually(lambda: one.leading() or two.leading(), what="a leader")
            leader_name = "replica-one" if one.leading() else "replica-two"
            leader = replicas.pop(leader_name)
            (follower,) = replicas.values()
            lease = client.sim.get_object(
                "coordination.k8s.io", "leases", "default", "queuetree-operator"
            )
            assert (lease or {}).get("spec", {}).get("holderIdentity") == leader_name
            client.create_pod("before", queue="default", requests=SLOT)
            sim.eventually(lambda: running_without_gates(client.pod("before")), what="admitted")
            assert not follower.leading()
            leader.stop()
            client.create_pod("after", queue="default", requests=SLOT)
            sim.eventually(follower.leading, what="the follower takes over")
            sim.eventually(lambda: running_without_gates(client.pod("after")), what="admitted")
        patches = [
            record.user
            for record in client.sim.audit()
            if record.resource == "pods" and record.verb == "patch"
        ]
        assert (watch.overlaps, bool(patches)) == (0, True)
    finally:
        sim.stop_all(one, two)


@pytest.mark.parametrize("node_flags", [BIG_NODES], ids=["two 16-cpu nodes"])
def test_api_faults_and_broken_watches_never_break_the_capacity_invariant(
    kube: tuple[harness.Cluster, sim.Client], operator: sim.OperatorThread
) -> None:
    cluster, client = kube
    client.create_queue("faulty", capability={"cpu": "2"})
    for fault in (
        server.Fault(method="PATCH", path=r"/pods/", count=5, status=500),
        server.Fault(method="PATCH", path=r"/pods/", count=3, status=409),
        server.Fault(method="PATCH", path=r"/queues/.*/status", count=3, status=500),
        server.Fault(method="POST", path=r"/events", count=3, status=500),
        server.Fault(method="PATCH", path=r"/pods/", count=2, status=None, disconnect=True),
    ):
        cluster.sim.add_fault(fault)
    with sim.InvariantWatch(client) as watch:
        for index in range(16):
            client.create_pod(
                f"short-{index}",
                queue="faulty",
                requests=SLOT,
                annotations={simulation.RUN_SECONDS_ANNOTATION: "0.3"},
            )
            if index in (4, 10):
                cluster.sim.drop_watches()
            if index == 7:
                cluster.sim.compact()
                cluster.sim.drop_watches()

        def finished() -> bool:
            phases = [
                pod.get("status", {}).get("phase")
                for pod in client.pods()
                if pod["metadata"]["name"].startswith("short-")
            ]
            return phases.count("Succeeded") == 16

        sim.eventually(finished, deadline=60, what="every pod admitted and finished")
    errors = operator.metrics.registry.get_sample_value(
        "queuetree_api_errors_total", {"verb": "patch", "code": "500"}
    )
    assert (watch.violations, bool(errors)) == ([], True)


def reclaim_config(level: int) -> Any:
    text = f"""
actions: "enqueue, allocate, reclaim"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: capacity
    enableHierarchy: true
    arguments:
      ancestorReclaimLevel: {level}
"""
    return schedconf.parse_configuration(text, source=f"level {level}").configuration


def unschedulable(pod: dict[str, Any] | None) -> bool:
    conditions = (pod or {}).get("status", {}).get("conditions") or []
    return any(
        c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable" for c in conditions
    )


class ReclaimsCase(NamedTuple):
    level: Any
    evicted: Any


RECLAIMS = {
    "level 0 reclaims across the tree": ReclaimsCase(level=0, evicted=True),
    "level 1 checks the parents, which allow it": ReclaimsCase(level=1, evicted=True),
    "level 2 checks the grandparents, which forbid it": ReclaimsCase(level=2, evicted=False),
}


@pytest.mark.parametrize("node_flags", [("n1:cpu=2,memory=2Gi",)], ids=["one 2-cpu node"])
@pytest.mark.parametrize(("level", "evicted"), list(RECLAIMS.values()), ids=list(RECLAIMS))
def test_reclaim_across_parents_follows_the_ancestor_reclaim_level(
    kube: tuple[harness.Cluster, sim.Client], level: int, evicted: bool
) -> None:
    cluster, client = kube
    # A disruption budget refuses the first two evictions (429): later cycles try again.
    cluster.sim.add_fault(
        server.Fault(
            method="POST", path=r"/eviction", count=2, status=429, headers=(("Retry-After", "1"),)
        )
    )
    two = {"cpu": "2", "memory": "2Gi"}
    operator = sim.OperatorThread(sim.operator_settings(scheduler_config=reclaim_config(level)))
    operator.start()
    try:
        sim.eventually(lambda: client.queue("root"), what="root queue")
        for name, parent, deserved, capability in (
            ("grand-a", "root", two, {"cpu": "4", "memory": "4Gi"}),
            ("parent-a", "grand-a", two, two),
            ("queue-a", "parent-a", two, two),
            ("grand-b", "root", {"cpu": "3", "memory": "3Gi"}, {"cpu": "4", "memory": "4Gi"}),
            ("parent-b", "grand-b", {"cpu": "1", "memory": "1Gi"}, two),
            ("queue-b", "parent-b", {"cpu": "1", "memory": "1Gi"}, two),
        ):
            client.create_queue(name, parent=parent, capability=capability, deserved=deserved)
        client.create_pod("p-victim", queue="queue-b", requests=two)
        sim.eventually(lambda: running_without_gates(client.pod("p-victim")), what="victim runs")
        client.create_pod("p-reclaimer", queue="queue-a", requests=two)
        sim.eventually(lambda: unschedulable(client.pod("p-reclaimer")), what="no room")
        if evicted:
            sim.eventually(lambda: client.pod("p-victim") is None, what="victim evicted")
            sim.eventually(
                lambda: running_without_gates(client.pod("p-reclaimer")), what="reclaimer runs"
            )

            def reclaim_events() -> set[str]:
                return {
                    event["involvedObject"]["name"]
                    for event in client.sim.list_objects("", "events", "default")
                    if event["reason"] == "Reclaim"
                }

            sim.eventually(
                lambda: reclaim_events() == {"p-victim", "p-reclaimer"}, what="events on both"
            )
            refused = operator.metrics.registry.get_sample_value(
                "queuetree_api_errors_total", {"verb": "create", "code": "429"}
            )
            assert refused == 2.0
        else:
            seen = operator.cycles()
            sim.eventually(lambda: operator.cycles() >= seen + 5, what="five more cycles")
            assert running_without_gates(client.pod("p-victim"))
    finally:
        sim.stop_all(operator)


RBAC = sim.ROOT / "manifests" / "base" / "cluster" / "rbac-operator.yaml"


def allowed_by(rules: list[dict[str, Any]], record: server.AuditRecord) -> bool:
    resource = f"{record.resource}/{record.subresource}" if record.subresource else record.resource
    return any(
        record.group in rule.get("apiGroups", [])
        and resource in rule.get("resources", [])
        and record.verb in rule.get("verbs", [])
        for rule in rules
    )


@pytest.mark.parametrize("node_flags", [("n1:cpu=2,memory=2Gi",)], ids=["one 2-cpu node"])
def test_every_request_of_the_operator_is_allowed_by_its_rbac_manifest(
    kube: tuple[harness.Cluster, sim.Client], monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster, client = kube
    documents = list(yaml.safe_load_all(RBAC.read_text()))
    cluster_rules = [rule for d in documents if d["kind"] == "ClusterRole" for rule in d["rules"]]
    lease_rules = [rule for d in documents if d["kind"] == "Role" for rule in d["rules"]]
    client.create(
        "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "queuetree-system"}},
    )
    monkeypatch.setenv("KUBECONFIG", str(sim.operator_kubeconfig(cluster)))
    config = sim.operator_settings(
        scheduler_config=reclaim_config(0),
        leader_elect=True,
        lease_namespace="queuetree-system",
        lease_duration=3.0,
        renew_deadline=2.0,
        retry_period=1.0,
    )
    operator = sim.OperatorThread(config).start()
    two = {"cpu": "2", "memory": "2Gi"}
    try:
        sim.eventually(lambda: client.queue("root"), what="root queue")
        client.create_queue("lender", deserved={"cpu": "0"})
        client.create_queue("owner", deserved=two, capability=two)
        client.create_pod("borrower", queue="lender", requests=two)
        sim.eventually(lambda: running_without_gates(client.pod("borrower")), what="borrower runs")
        client.create_pod("reclaimer", queue="owner", requests=two)
        sim.eventually(lambda: client.pod("borrower") is None, what="borrower evicted")
        client.create_pod("waiting", queue="owner", requests=two)
        sim.eventually(
            lambda: (
                (client.pod("waiting") or {})
                .get("metadata", {})
                .get("annotations", {})
                .get("scheduling.queuetree.io/admission-reason")
            ),
            what="waiting explained",
        )
    finally:
        sim.stop_all(operator)
    records = [r for r in cluster.sim.audit() if r.user == sim.OPERATOR_USER]
    refused = sorted(
        {
            (r.verb, r.group, r.resource, r.subresource, r.namespace)
            for r in records
            if not allowed_by(lease_rules if r.resource == "leases" else cluster_rules, r)
            or (r.resource == "leases" and r.namespace != "queuetree-system")
        }
    )
    verbs = {(r.verb, r.resource, r.subresource) for r in records}
    assert refused == []
    assert {
        ("patch", "pods", ""),
        ("create", "pods", "eviction"),
        ("create", "events", ""),
        ("patch", "queues", "status"),
        ("update", "leases", ""),
    } <= verbs


def create_pod_group(
    client: sim.Client, name: str, *, queue: str, min_member: int, min_resources: dict[str, str]
) -> None:
    client.create(
        "/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups",
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name},
            "spec": {"minMember": min_member, "queue": queue, "minResources": min_resources},
        },
    )


def pod_group_phase(client: sim.Client, name: str) -> str:
    group = client.sim.get_object("scheduling.volcano.sh", "podgroups", "default", name) or {}
    return str(group.get("status", {}).get("phase", ""))


@pytest.mark.parametrize("node_flags", [BIG_NODES], ids=["two 16-cpu nodes"])
def test_a_pod_group_is_admitted_whole_and_its_phase_is_written(
    kube: tuple[harness.Cluster, sim.Client], operator: sim.OperatorThread
) -> None:
    _, client = kube
    client.create_queue("gang", capability={"cpu": "1500m", "memory": "4Gi"})
    create_pod_group(client, "fits", queue="gang", min_member=2, min_resources={"cpu": "1"})
    create_pod_group(client, "too-big", queue="gang", min_member=2, min_resources={"cpu": "2"})
    for group in ("fits", "too-big"):
        for index in range(2):
            client.create_pod(f"{group}-{index}", queue="gang", requests=SLOT, group=group)
    sim.eventually(
        lambda: all(running_without_gates(client.pod(f"fits-{i}")) for i in range(2)),
        what="the group that fits runs",
    )
    sim.eventually(lambda: pod_group_phase(client, "fits") == "Running", what="phase written")
    seen = operator.cycles()
    sim.eventually(lambda: operator.cycles() >= seen + 3, what="three more cycles")
    assert [sim.gates_of(client.pod(f"too-big-{i}")) for i in range(2)] == [[sim.GATE]] * 2
    assert pod_group_phase(client, "too-big") in ("", "Pending")


def test_metrics_are_served_per_queue_and_resource(
    kube: tuple[harness.Cluster, sim.Client],
) -> None:
    _, client = kube
    port = sim.free_port()
    operator = sim.OperatorThread(sim.operator_settings(metrics_port=port)).start()
    try:
        sim.eventually(lambda: client.queue("root"), what="root queue")
        client.create_queue("observed", capability={"cpu": "1"})
        client.create_pod("measured", queue="observed", requests=SLOT)
        sim.eventually(lambda: running_without_gates(client.pod("measured")), what="runs")

        def scrape() -> str:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as page:
                return str(page.read().decode())

        wanted = (
            'queuetree_queue_allocated_cpu_cores{queue="observed"} 0.5',
            'queuetree_queue_real_capability_cpu_cores{queue="observed"} 1.0',
            "queuetree_ungate_latency_seconds_count 1.0",
            'queuetree_gate_removals_total{outcome="removed"} 1.0',
            "queuetree_leader 1.0",
        )
        sim.eventually(lambda: all(line in scrape() for line in wanted), what="metrics")
    finally:
        sim.stop_all(operator)


def test_a_leading_operator_stops_with_nothing_left_for_kopf_to_cancel(
    kube: tuple[harness.Cluster, sim.Client], caplog: pytest.LogCaptureFixture
) -> None:
    """The election (its lease renewal, and the leader's cycle, gate workers and writers) and the
    informer end in kopf's cleanup activity: kopf counts every task started after it as its own
    and, finding any still running once it has stopped, waits 5 s for them before cancelling
    them ("Hung tasks"). Without the cleanup handler this fails, and the stop takes 5 s more."""
    operator = sim.OperatorThread(sim.operator_settings(leader_elect=True)).start()
    try:
        sim.eventually(operator.leading, what="the operator leads")
        sim.eventually(lambda: operator.cycles() > 0, what="an admission cycle ran")
        caplog.set_level(logging.DEBUG, logger="kopf")
    finally:
        operator.stop()
    hung = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Hung tasks")]
    assert hung == ["Hung tasks stopping is skipped: no tasks given."]
