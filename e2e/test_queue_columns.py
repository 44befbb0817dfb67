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


def cells(kube: support.Kube, name: str) -> dict[str, str]:
    """The cells of ``kubectl get queue NAME`` by header, cut at the headers' positions."""
    header, row = kube.must(kube.kubectl("get", "queue", name)).stdout.splitlines()[:2]
    starts = [
        index
        for index, char in enumerate(header)
        if char != " " and (index == 0 or header[index - 1] == " ")
    ]
    bounds = [*starts[1:], max(len(row), len(header)) + 1]
    return {
        header[start:end].strip(): row[start:end].strip()
        for start, end in zip(starts, bounds, strict=True)
    }


def test_a_queue_without_gpus_shows_zero_gpus(kube: support.Kube) -> None:
    name = support.unique("columns")
    kube.must(kube.apply(support.queue(name, capability={"cpu": "2", "memory": "2Gi"})))
    kube.must(kube.apply(support.pod("p", namespace=kube.namespace, queue=name)))
    support.eventually(lambda: kube.running("p"), what="the pod runs")

    def allocated() -> dict[str, str] | None:
        found = cells(kube, name)
        return found if found["CPU-ALLOCATED"] == "10m" else None

    shown = support.eventually(
        allocated,
        what=f"kubectl get queue {name} shows the pod's CPU allocated",
        diagnose=lambda: kube.kubectl("get", "queue", name).stdout,
    )
    assert {header: shown[header] for header in GPU_CELLS} == dict.fromkeys(GPU_CELLS, "0"), shown
    assert all(shown[header] for header in SHOWN), shown
