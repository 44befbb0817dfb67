"""Pods written for Volcano's scheduler, applied unchanged: the webhook adopts them.

Volcano's examples and every Volcano integration (the Kubeflow training operator, KubeRay,
Spark) create pods with ``spec.schedulerName: volcano``, in code their users cannot change. No
Volcano scheduler runs beside queuetree, so the webhook hands such a pod, at creation, to the
scheduler that places admitted pods (the first ``--scheduler-name``), records the name it had
in ``scheduling.queuetree.io/adopted-scheduler-name``, opts it in and gates it; the gang then
waits for its queue as any other (docs/compatibility.md). A pod that names any other
scheduler is not adopted: it stays gated and is told why (``test_pod_kinds.py``).
"""

from __future__ import annotations

from typing import Any

from e2e import support

EXAMPLE = support.REPO / "examples" / "volcano" / "pod-group.yaml"
ADOPTED = "scheduling.queuetree.io/adopted-scheduler-name"


def _example(namespace: str, queue: str) -> list[dict[str, Any]]:
    """examples/volcano/pod-group.yaml in ``namespace``, its group in ``queue``."""
    found = support.documents(EXAMPLE.read_text())
    for item in found:
        item["metadata"]["namespace"] = namespace
        if item["kind"] == "PodGroup":
            item["spec"]["queue"] = queue
    return found


def _adopted(kube: support.Kube, name: str) -> tuple[Any, ...]:
    found = kube.pod(name) or {}
    annotations = (found.get("metadata") or {}).get("annotations") or {}
    return (
        (found.get("spec") or {}).get("schedulerName"),
        annotations.get(ADOPTED),
        annotations.get(support.GATE),
    )


def test_a_gang_written_for_volcano_is_adopted_and_admitted_whole(kube: support.Kube) -> None:
    name = support.unique("adopted")
    kube.must(kube.apply(support.queue(name, capability={"cpu": "100m", "memory": "1Gi"})))
    members = ("pg-demo-0", "pg-demo-1")
    kube.must(kube.as_tenant().apply(*_example(kube.namespace, name)))
    support.eventually(
        lambda: all("minMember 2" in kube.explanation(m) for m in members),
        what="both members are told the whole gang does not fit a queue with room for one",
    )
    gated = [kube.gated(m) for m in members]
    kube.must(
        kube.kubectl(
            "patch", "queue", name, "--type=merge", "-p", '{"spec":{"capability":{"cpu":"200m"}}}'
        )
    )
    support.eventually(
        lambda: all(kube.running(m) for m in members), what="the whole gang runs once it fits"
    )
    assert (gated, [_adopted(kube, m) for m in members]) == (
        [True, True],
        [("default-scheduler", "volcano", "true")] * 2,
    )
