"""``kubectl get queues`` shows a figure in every column of its default view: a queue without
GPUs shows ``0`` GPUs deserved and allocated, not an empty cell (issue 35, item 5).

A printer column cannot default a missing key, so the operator writes ``0`` for each resource a
column shows (``statuses.amount_value``); cells are read by the header's positions, so that an
empty cell would be seen as one.
"""

from __future__ import annotations

from e2e import support

SHOWN = ("CPU-DESERVED", "CPU-ALLOCATED", "MEM-DESERVED", "MEM-ALLOCATED")
GPU_CELLS = ("GPU-DESERVED", "GPU-ALLOCATED")


def test_a_queue_without_gpus_shows_zero_gpus(kube: support.Kube) -> None:
    name = support.unique("columns")
    kube.must(kube.apply(support.queue(name, capability={"cpu": "2", "memory": "2Gi"})))
    kube.must(kube.apply(support.pod("p", namespace=kube.namespace, queue=name)))
    support.eventually(lambda: kube.running("p"), what="the pod runs")

    def allocated() -> dict[str, str] | None:
        found = support.queue_cells(kube, name)
        return found if found["CPU-ALLOCATED"] == "10m" else None

    shown = support.eventually(
        allocated,
        what=f"kubectl get queue {name} shows the pod's CPU allocated",
        diagnose=lambda: kube.kubectl("get", "queue", name).stdout,
    )
    assert {header: shown[header] for header in GPU_CELLS} == dict.fromkeys(GPU_CELLS, "0"), shown
    assert all(shown[header] for header in SHOWN), shown
