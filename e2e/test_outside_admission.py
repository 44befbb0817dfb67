"""A pod that names a queue without opting in runs outside queue admission.

Such a pod never reaches the pod webhooks (their matchConditions need the opt-in key, so pods
that do not ask to be queued never depend on the webhook: e2e/test_match_conditions.py), is
never gated, and runs. Before the fix the operator charged it to the queue it named and to
every ancestor (``b`` 8 of capability 3, its parent 8 of 4), and every honest pod below the
parent was refused; a tenant could fill another team's queue by annotating any running pod.
Now a queue counts only the pods governed by queue admission (``objects.Pod.governed``): such a
pod is in no figure, holds nothing, and is told so (a Warning Event, ``kubectl queuetree
explain``); a running pod cannot opt in after its creation (the webhook refuses it).

Everything a tenant does here is done with the tenant's own credentials
(:meth:`support.Kube.as_tenant`).
"""

from __future__ import annotations

from typing import Any

from e2e import support
from queuetree.core import quantities

TENTH = {"cpu": "100m", "memory": "64Mi"}
REASON = "OutsideQueueAdmission"


def cpu(figures: dict[str, dict[str, str]], figure: str = "allocated") -> int:
    """A queue figure's cpu, in milli-CPU (0 when absent)."""
    return quantities.to_milli(quantities.parse(figures[figure].get("cpu", "0")))


def outside_events(kube: support.Kube, pod: str) -> list[dict[str, Any]]:
    """The operator's events telling ``pod`` that it runs outside queue admission (filtered
    here: not every API server indexes events by reason)."""
    return [
        event
        for event in kube.client.items("events", "-n", kube.namespace)
        if event.get("reason") == REASON and (event.get("involvedObject") or {}).get("name") == pod
    ]


def not_opted_in(name: str, kube: support.Kube, **fields: Any) -> dict[str, Any]:
    return support.pod(name, namespace=kube.namespace, opted_in=False, **fields)


def figures_at(kube: support.Kube, queue: str, milli_cpu: int) -> dict[str, dict[str, str]] | None:
    """The queue's figures once its allocated cpu is ``milli_cpu``; None until then."""
    found = support.queue_figures(kube, queue)
    return found if cpu(found) == milli_cpu else None


def pending_and_counted(kube: support.Kube, name: str) -> dict[str, Any] | None:
    """The PodGroup once the operator has written it Pending with its counts; None before."""
    found = kube.get(support.PODGROUP, name) or {}
    status = found.get("status") or {}
    return found if status.get("phase") == "Pending" and "running" in status else None


def test_a_pod_that_names_a_full_queue_without_opting_in_runs_and_is_not_counted(
    kube: support.Kube,
) -> None:
    team, b = support.unique("outside-team"), support.unique("outside-b")
    kube.must(
        kube.apply(
            support.queue(team, capability={"cpu": "400m"}),
            support.queue(b, parent=team, capability={"cpu": "300m"}),
        )
    )
    tenant = kube.as_tenant()
    kube.must(
        tenant.apply(
            *(
                support.pod(name, namespace=kube.namespace, queue=b, requests=TENTH)
                for name in ("b1", "b2")
            )
        )
    )
    support.eventually(lambda: kube.running("b1") and kube.running("b2"), what="b1, b2 run")
    # Five times b's room, three times team's: it is not gated, so it runs at once.
    kube.must(tenant.apply(not_opted_in("noopt", kube, queue=b, requests={"cpu": "1500m"})))
    support.eventually(lambda: kube.running("noopt"), what="noopt runs, ungated")
    # The operator has seen it: it tells the pod (or, before the fix, it charged b for it).
    support.eventually(
        lambda: outside_events(kube, "noopt") or cpu(support.queue_figures(kube, b)) > 200,
        what="the operator sees noopt",
        diagnose=lambda: kube.describe_pod("noopt"),
    )
    # An honest pod still finds b's last tenth (before: b 1700m of 300m, honest refused).
    kube.must(
        tenant.apply(support.pod("honest", namespace=kube.namespace, queue=b, requests=TENTH))
    )
    support.eventually(
        lambda: kube.running("honest"),
        what="honest is admitted and runs",
        diagnose=lambda: kube.describe_pod("honest") + kube.describe_queue(b),
    )
    figures = support.eventually(
        lambda: figures_at(kube, b, 300),
        what=f"{b} counts its three opted-in pods (300m), not noopt",
        diagnose=lambda: kube.describe_queue(b),
    )
    explained = kube.must(kube.plugin("explain", "noopt", "-n", kube.namespace, "--width=400"))
    event = outside_events(kube, "noopt")[0]
    assert (
        cpu(figures),
        cpu(support.queue_figures(kube, team)),
        kube.gates("noopt"),
        event["type"],
        f"names queue '{b}'" in event["message"],
        "runs outside queue admission" in explained.stdout,
        f"names queue '{b}'" in explained.stdout,
    ) == (300, 300, [], "Warning", True, True, True), explained.stdout
    if kube.cluster.sandbox is not None:
        assert (
            support.metric(kube.cluster, "operator", "queuetree_queue_outside_pods", queue=b) == 1
        )


def test_annotating_a_running_pod_with_another_teams_queue_moves_none_of_its_figures(
    kube: support.Kube,
) -> None:
    other = support.unique("outside-other")
    kube.must(kube.apply(support.queue(other, capability={"cpu": "200m"})))
    tenant = kube.as_tenant()
    kube.must(
        tenant.apply(support.pod("theirs", namespace=kube.namespace, queue=other, requests=TENTH))
    )
    kube.must(tenant.apply(not_opted_in("plain", kube, requests={"cpu": "1"})))
    support.eventually(
        lambda: kube.running("theirs") and kube.running("plain"), what="theirs and plain run"
    )
    # The tenant points its running pod at another team's queue: the webhook never sees it.
    kube.must(
        tenant.kubectl(
            "annotate", "pod", "plain", "-n", kube.namespace, f"{support.QUEUE_NAME}={other}"
        )
    )
    # The operator has seen the annotation: it tells the pod (before the fix: charged other).
    support.eventually(
        lambda: outside_events(kube, "plain") or cpu(support.queue_figures(kube, other)) > 100,
        what="the operator sees plain name the queue",
    )
    # Opting in now, to be counted in that queue, is refused: opt-in is read at creation.
    late = tenant.kubectl("annotate", "pod", "plain", "-n", kube.namespace, f"{support.GATE}=true")
    # The other team's next pod still has its queue's room (before: other 1100m of 200m).
    kube.must(
        tenant.apply(support.pod("next", namespace=kube.namespace, queue=other, requests=TENTH))
    )
    support.eventually(
        lambda: kube.running("next"),
        what="next is admitted and runs",
        diagnose=lambda: kube.describe_pod("next") + kube.describe_queue(other),
    )
    figures = support.eventually(
        lambda: figures_at(kube, other, 200),
        what=f"{other} counts theirs and next (200m), not plain",
        diagnose=lambda: kube.describe_queue(other),
    )
    assert (
        cpu(figures),
        [event["type"] for event in outside_events(kube, "plain")],
        late.ok,
        "was created without opting in to queue admission" in late.stderr,
    ) == (200, ["Warning"], False, True), late.describe()


def test_a_pod_group_whose_pods_did_not_opt_in_holds_nothing_in_its_queue(
    kube: support.Kube,
) -> None:
    q = support.unique("outside-group")
    kube.must(kube.apply(support.queue(q, capability={"cpu": "200m"})))
    tenant = kube.as_tenant()
    kube.must(
        tenant.apply(
            support.pod_group("pg", namespace=kube.namespace, queue=q, minResources={"cpu": "200m"})
        )
    )
    kube.must(tenant.apply(not_opted_in("member", kube, group="pg", requests={"cpu": "200m"})))
    support.eventually(lambda: kube.running("member"), what="member runs, ungated")
    group = support.eventually(
        lambda: pending_and_counted(kube, "pg"),
        what="the operator writes pg Pending with no pod running",
        diagnose=lambda: str(kube.get(support.PODGROUP, "pg")),
    )
    # Neither the group's minResources nor its pod take q's room (before: q 400m of 200m).
    kube.must(
        tenant.apply(
            support.pod("honest", namespace=kube.namespace, queue=q, requests={"cpu": "200m"})
        )
    )
    support.eventually(
        lambda: kube.running("honest"),
        what="honest is admitted and runs",
        diagnose=lambda: kube.describe_pod("honest") + kube.describe_queue(q),
    )
    explained = kube.must(
        kube.plugin("explain", "podgroup/pg", "-n", kube.namespace, "--width=400")
    )
    assert (group["status"]["running"], "none of its pods opted in" in explained.stdout) == (
        0,
        True,
    ), explained.stdout


RECORD = "scheduling.queuetree.io/admitted-queue"


def test_a_forged_admission_record_charges_nothing_where_the_webhook_does_not_look(
    kube: support.Kube,
) -> None:
    """Issue 35: in a namespace taken out of the pod webhooks (the break-glass label), anyone
    may create a pod carrying an admission record. The operator does not believe it there: the
    pod fills no queue, and an honest pod in a reviewed namespace takes the room. In a reviewed
    namespace the same pod is refused by the webhook."""
    queue = support.unique("forge")
    kube.must(kube.apply(support.queue(queue, capability={"cpu": "100m", "memory": "1Gi"})))
    elsewhere = support.unique("e2e-forge")
    kube.must(kube.kubectl("create", "namespace", elsewhere))
    try:
        kube.must(kube.kubectl("label", "namespace", elsewhere, "queuetree.io/admission=disabled"))
        forged = support.pod(
            "forged", namespace=elsewhere, queue=queue, requests=TENTH, opted_in=False
        )
        forged["metadata"]["annotations"][RECORD] = queue
        kube.must(kube.apply(forged))

        def forged_runs() -> bool:
            found = kube.client.get_json("pod", "forged", "-n", elsewhere)
            return bool((found.get("status") or {}).get("phase") == "Running")

        support.eventually(forged_runs, what="the forged pod runs (nothing gated it)")
        kube.must(
            kube.apply(support.pod("honest", namespace=kube.namespace, queue=queue, requests=TENTH))
        )
        support.eventually(lambda: kube.running("honest"), what="the honest pod is admitted")
        support.eventually(
            lambda: support.queue_figures(kube, queue)["allocated"].get("pods") == "1",
            what="the queue counts the honest pod only",
        )
        copied = support.pod(
            "forged", namespace=kube.namespace, queue=queue, requests=TENTH, opted_in=False
        )
        copied["metadata"]["annotations"][RECORD] = queue
        refused = kube.apply(copied)
        assert (refused.ok, "admission record" in refused.stderr) == (False, True), (
            refused.describe()
        )
    finally:
        kube.kubectl("delete", "namespace", elsewhere, "--wait=false")
