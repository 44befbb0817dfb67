"""Pods that used to hang or hold capacity: best effort, and pods for another scheduler.

A best-effort pod (it requests nothing) is admitted as soon as its queue is Open: it uses no
capacity. A pod whose ``spec.schedulerName`` is not one queuetree admits for
(``--scheduler-name``, kube-scheduler's ``default-scheduler`` by default) would never be
placed once ungated and would keep its queue's room reserved for ever, so it stays gated and
is told why, and the webhook warns when it is created (docs/compatibility.md).
"""

from __future__ import annotations

from e2e import support

TENTH = {"cpu": "100m", "memory": "64Mi"}


def test_a_best_effort_pod_is_admitted_by_a_full_open_queue(kube: support.Kube) -> None:
    name = support.unique("best-effort")
    kube.must(kube.apply(support.queue(name, capability={"cpu": "100m"})))
    kube.must(
        kube.apply(support.pod("filler", namespace=kube.namespace, queue=name, requests=TENTH))
    )
    support.eventually(lambda: kube.running("filler"), what="the filler runs")
    manifest = support.pod("free", namespace=kube.namespace, queue=name)
    manifest["spec"]["containers"][0]["resources"] = {}
    kube.must(kube.apply(manifest))
    support.eventually(lambda: kube.running("free"), what="the best-effort pod runs")


def test_a_pod_for_another_scheduler_waits_without_holding_capacity(kube: support.Kube) -> None:
    name = support.unique("foreign")
    kube.must(kube.apply(support.queue(name, capability={"cpu": "100m"})))
    manifest = support.pod("foreign-pod", namespace=kube.namespace, queue=name, requests=TENTH)
    manifest["spec"]["schedulerName"] = "my-scheduler"
    created = kube.create(manifest)
    reason = support.eventually(
        lambda: kube.explanation("foreign-pod"), what="the foreign pod is told why it waits"
    )
    kube.must(kube.apply(support.pod("ours", namespace=kube.namespace, queue=name, requests=TENTH)))
    support.eventually(lambda: kube.running("ours"), what="a pod for kube-scheduler runs")
    assert (
        created.ok,
        "spec.schedulerName" in created.stderr,
        "schedulerName my-scheduler" in reason,
        kube.gated("foreign-pod"),
    ) == (True, True, True, True), (created.describe(), reason)
