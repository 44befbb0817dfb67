"""In-place resize (``pods/resize``) cannot grow a pod past its queue: what a tenant tries with
``kubectl patch --subresource=resize``, refused, on both backends.

A resize is the only write that changes a pod's requests (kube-apiserver refuses requests
changes on the pod itself since 1.32, shown here too; the webhook would refuse a growth there
as well, for older clusters). The queue admitted a pod at the size it had, and nothing checks
the room again, so ``/pods/validate`` refuses raising the requests of an admitted pod, and of
a pod that still waits (the operator removes the gate after checking the size it read).
Lowering them is allowed.

Both backends refuse to resize a running pod whose containers report no resources ("Pod running
on node without support for resize"): a kubelet of 1.33 or later reports them, kwok's nodes and
kubesim's kubelet do not. The administrator writes them into the pod's status, as such a kubelet
would, before the tenant resizes.
"""

from __future__ import annotations

import json
from typing import Any

from e2e import support

TENTH = {"cpu": "100m", "memory": "64Mi"}


def cpu_of(cpu: str) -> dict[str, Any]:
    """Request and limit of ``cpu`` (equal: the pod stays Guaranteed)."""
    return {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}}


def container_resources(kube: support.Kube, name: str) -> dict[str, Any]:
    return dict(((kube.pod(name) or {}).get("spec") or {})["containers"][0]["resources"])


def allocated_cpu(kube: support.Kube, queue: str) -> str:
    return str(support.queue_figures(kube, queue)["allocated"].get("cpu", ""))


def test_an_admitted_pod_cannot_grow_in_place_and_may_shrink(kube: support.Kube) -> None:
    parent, leaf = support.unique("resize-parent"), support.unique("resize-leaf")
    kube.must(
        kube.apply(
            support.queue(parent, capability={"cpu": "300m"}),
            support.queue(leaf, parent=parent, capability={"cpu": "200m"}),
        )
    )
    tenant = kube.as_tenant()
    kube.must(
        tenant.apply(support.pod("rs1", namespace=kube.namespace, queue=leaf, requests=TENTH))
    )
    support.eventually(lambda: kube.running("rs1"), what="rs1 runs")
    support.eventually(lambda: allocated_cpu(kube, leaf) == "100m", what="rs1 is charged")
    kube.report_container_resources("rs1")
    grown = tenant.resize("rs1", cpu_of("2"))
    after_growth = (container_resources(kube, "rs1"), allocated_cpu(kube, leaf))
    shrunk = tenant.resize("rs1", cpu_of("50m"))
    support.eventually(
        lambda: allocated_cpu(kube, leaf) == "50m" and allocated_cpu(kube, parent) == "50m",
        what="the queue and its parent are charged the smaller size",
    )
    assert (
        grown.ok,
        f"pod {kube.namespace}/rs1 was admitted to queue {leaf}" in grown.stderr,
        "cpu from 100m to 2" in grown.stderr,
        "delete the pod and create it again with the new requests" in grown.stderr,
        after_growth,
        shrunk.ok,
        container_resources(kube, "rs1")["requests"]["cpu"],
    ) == (
        False,
        True,
        True,
        True,
        ({"requests": TENTH, "limits": TENTH}, "100m"),
        True,
        "50m",
    ), (grown.describe(), shrunk.describe())


def test_a_waiting_pod_cannot_grow_in_place_and_may_shrink(kube: support.Kube) -> None:
    name = support.unique("resize-wait")
    # No room (5m of CPU, the pod asks a tenth): the pod waits while the tenant resizes it.
    kube.must(kube.apply(support.queue(name, capability={"cpu": "5m"})))
    tenant = kube.as_tenant()
    kube.must(tenant.apply(support.pod("p", namespace=kube.namespace, queue=name, requests=TENTH)))
    support.eventually(lambda: name in kube.explanation("p"), what="p is told it waits")
    grown = tenant.resize("p", cpu_of("1"))
    shrunk = tenant.resize("p", cpu_of("50m"))
    assert (
        grown.ok,
        f"pod {kube.namespace}/p waits for room in queue {name}" in grown.stderr,
        "cpu from 100m to 1" in grown.stderr,
        shrunk.ok,
        container_resources(kube, "p")["requests"]["cpu"],
        kube.gated("p"),
    ) == (False, True, True, True, "50m", True), (grown.describe(), shrunk.describe())


def test_the_requests_of_a_pod_cannot_change_outside_a_resize(kube: support.Kube) -> None:
    """kube-apiserver's rule since 1.32, before any webhook: pods/resize is the one path (on
    both backends; this test passes without queuetree, it shows the premise)."""
    name = support.unique("resize-update")
    kube.must(kube.apply(support.queue(name)))
    tenant = kube.as_tenant()
    kube.must(tenant.apply(support.pod("p", namespace=kube.namespace, queue=name, requests=TENTH)))
    support.eventually(lambda: kube.running("p"), what="p runs")
    body = {"spec": {"containers": [{"name": support.CONTAINER, "resources": cpu_of("2")}]}}
    updated = tenant.kubectl("patch", "pod", "p", "-n", kube.namespace, "-p", json.dumps(body))
    assert (
        updated.ok,
        "pod updates may not change fields other than" in updated.stderr,
        container_resources(kube, "p")["requests"],
    ) == (False, True, TENTH), updated.describe()


def validations(cluster: support.Cluster) -> float | None:
    """How many reviews ``/pods/validate`` answered so far (None without the sandbox's
    webhook to ask)."""
    if cluster.sandbox is None:
        return None
    return support.metric(
        cluster, "webhook", "queuetree_webhook_reviews_total", endpoint="/pods/validate"
    )


def test_a_pod_queuetree_does_not_govern_is_resized_without_the_webhook(
    kube: support.Kube,
) -> None:
    """The matchConditions leave it out: it must never depend on the webhook being up."""
    tenant = kube.as_tenant()
    kube.must(
        tenant.apply(support.pod("other", namespace=kube.namespace, requests=TENTH, opted_in=False))
    )
    support.eventually(lambda: kube.running("other"), what="other runs")
    kube.report_container_resources("other")
    before = validations(kube.cluster)
    grown = tenant.resize("other", cpu_of("1"))
    after = validations(kube.cluster)
    assert (
        grown.ok,
        container_resources(kube, "other")["requests"]["cpu"],
        None if before is None or after is None else after - before,
    ) == (True, "1", None if before is None else 0.0), grown.describe()
