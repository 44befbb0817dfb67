"""PodGroups that controllers wait on (issue 33, item 6), with kubectl as a tenant would.

Volcano's job controller and the Kubeflow training operator create a PodGroup, wait until it is
``Inqueue``, and only then create pods. So a PodGroup with room in its queue must become
Inqueue before any pod exists, and hold that room while its pods are on their way; one without
room must say why; the room must come back when no pod comes within the operator's bound
(``--inqueue-timeout``, short in the e2e stack: ``support.INQUEUE_TIMEOUT``); and a group whose
pod failed is finished, holding nothing.
"""

from __future__ import annotations

from typing import Any

from e2e import support

ONE_CPU = {"cpu": "1"}
HALF = {"cpu": "500m", "memory": "64Mi"}


def phase(kube: support.Kube, name: str) -> str:
    return str(kube.group_status(name).get("phase", ""))


def event_reasons(kube: support.Kube, name: str) -> list[str]:
    return [str(event.get("reason")) for event in kube.events_of("PodGroup", name)]


def test_a_pod_group_with_room_is_inqueue_before_any_pod_exists(kube: support.Kube) -> None:
    q = support.unique("inqueue-room")
    kube.must(kube.apply(support.queue(q, capability=ONE_CPU)))
    tenant = kube.as_tenant()
    kube.must(
        tenant.apply(
            support.pod_group("job", namespace=kube.namespace, queue=q, minResources=ONE_CPU)
        )
    )
    support.eventually(
        lambda: phase(kube, "job") == "Inqueue",
        what="the operator writes the group Inqueue, with no pod",
        diagnose=lambda: str(kube.get(support.PODGROUP, "job")),
    )
    condition = kube.group_condition("job")
    reasons = support.eventually(
        lambda: event_reasons(kube, "job"), what="the group's event says it was admitted"
    )
    pods = support.pods_in(kube)
    assert (
        condition.get("status"),
        condition.get("reason"),
        f"admitted to queue '{q}'" in str(condition.get("message")),
        reasons,
        pods,
    ) == ("False", "Inqueue", True, ["Inqueue"], [])


def test_a_gang_of_more_pods_than_its_queue_allows_is_not_admitted(kube: support.Kube) -> None:
    """Issue 35: enqueue counts ``pods``. A gang of three in a queue capped at two pods was
    Inqueue, holding its minResources, and could never run; it now waits, and says why."""
    q = support.unique("inqueue-pods")
    kube.must(kube.apply(support.queue(q, capability={"pods": "2"})))
    kube.must(
        kube.as_tenant().apply(
            support.pod_group(
                "job", namespace=kube.namespace, queue=q, min_member=3, minResources=ONE_CPU
            )
        )
    )
    condition = support.eventually(
        lambda: (
            kube.group_condition("job").get("reason") == "NotEnoughResources"
            and kube.group_condition("job")
        ),
        what="the group is told its queue has no room for its pods",
        diagnose=lambda: str(kube.get(support.PODGROUP, "job")),
    )
    message = str(condition.get("message"))
    assert (
        kube.group_status("job").get("phase"),
        "on pods: requested 3, used 0 of capability 2" in message,
    ) == ("Pending", True), message


def test_a_pod_group_without_room_stays_pending_and_says_why(kube: support.Kube) -> None:
    q = support.unique("inqueue-full")
    kube.must(kube.apply(support.queue(q, capability=ONE_CPU)))
    kube.must(
        kube.as_tenant().apply(
            support.pod_group("job", namespace=kube.namespace, queue=q, minResources={"cpu": "2"})
        )
    )
    condition = support.eventually(
        lambda: (
            kube.group_condition("job").get("reason") == "NotEnoughResources"
            and kube.group_condition("job")
        ),
        what="the group is told its queue has no room",
        diagnose=lambda: str(kube.get(support.PODGROUP, "job")),
    )
    events = support.eventually(
        lambda: kube.events_of("PodGroup", "job"), what="the group's event says why it waits"
    )
    expected = (
        f"queue '{q}' cannot take the pod group's minResources on cpu: requested 2, used 0 of "
        "capability 1 (allocated plus inqueue groups)"
    )
    assert (
        phase(kube, "job"),
        condition.get("status"),
        condition.get("message"),
        [(e.get("type"), e.get("reason"), e.get("message")) for e in events],
    ) == ("Pending", "True", expected, [("Normal", "Unschedulable", expected)])


def test_an_inqueue_group_holds_its_room_until_its_bound_then_gives_it_back(
    kube: support.Kube,
) -> None:
    """The reservation holds another pod back while it lasts; with no pod by the bound the
    group is Pending again (condition and Warning event), the waiting pod takes the room, and
    the group's pods, when they come, are admitted as a gang once the room is back."""
    q = support.unique("inqueue-bound")
    kube.must(kube.apply(support.queue(q, capability=ONE_CPU)))
    tenant = kube.as_tenant()
    kube.must(
        tenant.apply(
            support.pod_group(
                "job", namespace=kube.namespace, queue=q, min_member=2, minResources=ONE_CPU
            )
        )
    )
    support.eventually(lambda: phase(kube, "job") == "Inqueue", what="the group is Inqueue")
    kube.must(tenant.apply(support.pod("other", namespace=kube.namespace, queue=q, requests=HALF)))
    held = support.eventually(
        lambda: kube.explanation("other"), what="the other pod is told why it waits"
    )
    held_while = (kube.gated("other"), phase(kube, "job"))
    released = support.eventually(
        lambda: (
            kube.group_condition("job").get("reason") == "InqueueTimeout"
            and kube.group_condition("job")
        ),
        what="the group goes back to Pending once its bound runs out",
        deadline=kube.cluster.inqueue_timeout + support.DEFAULT_DEADLINE,
        diagnose=lambda: str(kube.get(support.PODGROUP, "job")),
    )
    support.eventually(lambda: kube.running("other"), what="the other pod takes the room")
    warned = support.eventually(
        lambda: [
            e for e in kube.events_of("PodGroup", "job") if e.get("reason") == "InqueueTimeout"
        ],
        what="a Warning event says the group was released",
    )
    members = [
        support.pod(f"member-{i}", namespace=kube.namespace, requests=HALF, group="job")
        for i in range(2)
    ]
    kube.must(tenant.apply(*members))
    support.eventually(
        lambda: all(kube.explanation(f"member-{i}") for i in range(2)),
        what="the group's pods wait, told why",
    )
    waiting = [kube.gated(f"member-{i}") for i in range(2)]
    kube.delete_pod("other")
    support.eventually(
        lambda: all(kube.running(f"member-{i}") for i in range(2)),
        what="the whole gang runs once the room is back",
    )
    # The group's phase follows its pods in a later cycle than their admission.
    support.eventually(
        lambda: phase(kube, "job") == "Running", what="the group is Running with its pods"
    )
    assert (
        "used 1 of capability 1 (allocated plus inqueue groups)" in held,
        held_while,
        released.get("status"),
        [(e.get("type"), e.get("message")) for e in warned],
        waiting,
    ) == (
        True,
        (True, "Inqueue"),
        "True",
        [("Warning", released.get("message"))],
        [True, True],
    ), held


def test_a_pod_group_whose_pod_failed_ends_completed_and_frees_its_queue(
    kube: support.Kube,
) -> None:
    q = support.unique("inqueue-failed")
    kube.must(kube.apply(support.queue(q, capability=ONE_CPU)))
    tenant = kube.as_tenant()
    kube.must(
        tenant.apply(
            support.pod_group("job", namespace=kube.namespace, queue=q, minResources=ONE_CPU),
            support.pod("worker", namespace=kube.namespace, requests=ONE_CPU, group="job"),
        )
    )
    support.eventually(lambda: phase(kube, "job") == "Running", what="the group runs")
    kube.fail_pod("worker")
    status: dict[str, Any] = support.eventually(
        lambda: phase(kube, "job") == "Completed" and kube.group_status("job"),
        what="the group whose only pod failed is Completed",
        diagnose=lambda: str(kube.get(support.PODGROUP, "job")),
    )
    kube.must(
        tenant.apply(support.pod("next", namespace=kube.namespace, queue=q, requests=ONE_CPU))
    )
    support.eventually(
        lambda: kube.running("next"),
        what="the queue's room is free for the next pod",
        diagnose=lambda: kube.describe_pod("next") + kube.describe_queue(q),
    )
    assert (status.get("failed"), status.get("running", 0), phase(kube, "job")) == (
        1,
        0,
        "Completed",
    )


def test_raising_an_admitted_groups_min_resources_never_holds_its_parent_past_capability(
    kube: support.Kube,
) -> None:
    """A tenant raises the minResources of its Inqueue group past its parent's capability: the
    group is Pending again, told why, and the parent's room goes to a sibling's pod (the group
    has a pod, so no bound would ever have released it)."""
    parent = support.unique("inqueue-edit")
    mine, theirs = f"{parent}-mine", f"{parent}-theirs"
    kube.must(
        kube.apply(
            support.queue(parent, capability={"cpu": "2"}),
            support.queue(mine, parent=parent),
            support.queue(theirs, parent=parent),
        )
    )
    tenant = kube.as_tenant()
    kube.must(
        tenant.apply(
            support.pod_group(
                "job", namespace=kube.namespace, queue=mine, min_member=2, minResources=ONE_CPU
            ),
            support.pod("member", namespace=kube.namespace, requests=HALF, group="job"),
        )
    )
    support.eventually(lambda: phase(kube, "job") == "Inqueue", what="the group is Inqueue")
    kube.must(
        tenant.kubectl(
            "patch", support.PODGROUP, "job", "-n", kube.namespace, "--type=merge",
            "-p", '{"spec": {"minResources": {"cpu": "4"}}}',
        )
    )  # fmt: skip
    condition = support.eventually(
        lambda: (
            kube.group_condition("job").get("reason") == "NotEnoughResources"
            and kube.group_condition("job")
        ),
        what="the inflated group is sent back to Pending, told why",
        diagnose=lambda: str(kube.get(support.PODGROUP, "job")),
    )
    kube.must(
        tenant.apply(
            support.pod("other", namespace=kube.namespace, queue=theirs, requests={"cpu": "1500m"})
        )
    )
    support.eventually(
        lambda: kube.running("other"),
        what="the sibling's pod takes the parent's room",
        diagnose=lambda: kube.describe_pod("other") + kube.describe_queue(parent),
    )
    assert (
        phase(kube, "job"),
        condition.get("status"),
        # Its leaf inherits the parent's capability, so the leaf is the queue named.
        "requested 4, used 0 of capability 2" in str(condition.get("message")),
        kube.gated("member"),
    ) == ("Pending", "True", True, True), condition
