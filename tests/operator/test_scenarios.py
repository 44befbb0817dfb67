"""The operator against kubesim with the simulated scheduler and kubelet (spec §5.4 and more)."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator
from typing import Any

import pytest

from kubesim import harness
from tests.operator import cluster as sim

SLOT = {"cpu": "500m", "memory": "512Mi"}
TWO_SMALL_NODES = ("n1:cpu=2,memory=2048Mi", "n2:cpu=2,memory=2048Mi")


@pytest.fixture
def kube(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[harness.Cluster, sim.Client]]:
    for cluster, client in sim.start(tmp_path, *TWO_SMALL_NODES):
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


def test_an_ungated_unschedulable_pod_reserves_queue_capacity_until_deleted(
    kube: tuple[harness.Cluster, sim.Client], operator: sim.OperatorThread
) -> None:
    _, client = kube
    client.create_queue("capacity-test-queue", capability=SLOT)
    created = client.create_pod("pod-1", queue="capacity-test-queue", requests=SLOT)
    assert sim.gates_of(created) == [sim.GATE]
    sim.eventually(lambda: running_without_gates(client.pod("pod-1")), what="pod-1 runs")
    client.delete_pod("pod-1")
    client.create_pod(
        "pod-2",
        queue="capacity-test-queue",
        requests=SLOT,
        node_selector={"kubernetes.io/fake-node": "fake"},
    )
    sim.eventually(lambda: not sim.gates_of(client.pod("pod-2")), what="pod-2 ungated")
    client.create_pod("pod-3", queue="capacity-test-queue", requests=SLOT)
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
    client.delete_pod("pod-2")
    sim.eventually(lambda: running_without_gates(client.pod("pod-3")), what="pod-3 runs")


def test_the_queue_gate_is_removed_only_once_it_is_the_last_gate(
    kube: tuple[harness.Cluster, sim.Client], operator: sim.OperatorThread
) -> None:
    _, client = kube
    client.create_queue("capacity-multigate-queue", capability=SLOT)
    client.create_pod(
        "pod-multigate",
        queue="capacity-multigate-queue",
        requests=SLOT,
        gates=("example.com/other-gate", sim.GATE),
    )
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
