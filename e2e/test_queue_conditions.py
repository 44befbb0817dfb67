"""Broken queues say so: the Ready condition, the CONDITION column and the events that
``kubectl describe queue`` shows, as a platform engineer would look at them."""

from __future__ import annotations

import json

from e2e import support


def column(kube: support.Kube, name: str, header: str) -> str:
    """The cell of ``header`` in ``kubectl get queue NAME`` (cells are never empty here)."""
    lines = kube.must(kube.kubectl("get", "queue", name)).stdout.splitlines()
    headers = lines[0].split()
    return lines[1].split()[headers.index(header)]


def test_a_queue_under_a_missing_parent_is_not_ready_and_says_so_until_the_parent_exists(
    kube: support.Kube,
) -> None:
    prefix = support.unique("cond")
    child, parent = f"{prefix}-child", f"{prefix}-parent"
    with support.unvalidated_queues(kube, prefix):
        manifest = support.queue(child, parent=parent)
        manifest["metadata"]["labels"] = {support.UNVALIDATED: prefix}
        kube.must(kube.apply(manifest))
        support.eventually(
            lambda: kube.readiness(child) == ("False", "ParentNotFound"),
            what="the orphan's Ready condition is False, ParentNotFound",
        )
        assert column(kube, child, "CONDITION") == "ParentNotFound"
        described = kube.describe_queue(child)
        assert "Warning  ParentNotFound" in described, described
        assert f"spec.parent '{parent}' does not exist" in described.replace("\n", " "), described
        kube.must(kube.apply(support.queue(parent)))
        support.eventually(
            lambda: kube.readiness(child) == ("True", "Ready"),
            what="once the parent exists, the child is Ready again",
        )
        support.eventually(
            lambda: "Normal   Ready" in kube.describe_queue(child),
            what="a Normal event tells that the queue is ready again",
        )
        # Told once: the one transition to ParentNotFound raised one event.
        assert kube.describe_queue(child).count("ParentNotFound") == 1


def test_a_parent_cycle_is_reported_on_every_queue_on_it(kube: support.Kube) -> None:
    prefix = support.unique("cyc")
    first, second = f"{prefix}-a", f"{prefix}-b"
    with support.unvalidated_queues(kube, prefix):
        queues = [support.queue(first), support.queue(second, parent=first)]
        for manifest in queues:
            manifest["metadata"]["labels"] = {support.UNVALIDATED: prefix}
        kube.must(kube.apply(*queues))
        support.eventually(
            lambda: kube.readiness(second) == ("True", "Ready"), what="the sound tree is Ready"
        )
        kube.must(
            kube.kubectl(
                "patch",
                "queue",
                first,
                "--type=merge",
                "-p",
                json.dumps({"spec": {"parent": second}}),
            )
        )
        support.eventually(
            lambda: (
                {kube.readiness(first), kube.readiness(second)} == {("False", "HierarchyCycle")}
            ),
            what="both queues on the cycle are HierarchyCycle",
        )
        assert f"{first} -> {second} -> {first}" in kube.describe_queue(first).replace("\n", " ")
        # Break the cycle before the cleanup deletes the queues.
        kube.must(
            kube.kubectl(
                "patch",
                "queue",
                first,
                "--type=merge",
                "-p",
                json.dumps({"spec": {"parent": "root"}}),
            )
        )


def test_closing_a_queue_turns_its_condition_to_closed_and_opening_it_back(
    kube: support.Kube,
) -> None:
    name = support.unique("closing")
    kube.must(kube.apply(support.queue(name)))
    support.eventually(lambda: kube.readiness(name) == ("True", "Ready"), what="Ready at first")
    kube.set_queue_state(name, "Closed")
    support.eventually(
        lambda: kube.readiness(name) == ("False", "Closed"), what="Closed once closed"
    )
    kube.set_queue_state(name, "Open")
    support.eventually(lambda: kube.readiness(name) == ("True", "Ready"), what="Ready again")
    described = kube.describe_queue(name)
    assert ("Warning  Closed" in described, "Normal   Ready" in described) == (True, True)


def test_a_parent_with_pods_of_its_own_is_not_a_leaf_with_workloads(kube: support.Kube) -> None:
    prefix = support.unique("nl")
    parent, leaf = f"{prefix}-p", f"{prefix}-l"
    kube.must(kube.apply(support.queue(parent)))
    # A PodGroup that names the parent, admitted while it was a leaf; then it gets a child
    # (the webhook refuses a busy leaf its first child, so the group is pending, not running).
    kube.must(kube.apply(support.pod_group("pg", namespace=kube.namespace, queue=parent)))
    with support.unvalidated_queues(kube, prefix):
        manifest = support.queue(leaf, parent=parent)
        manifest["metadata"]["labels"] = {support.UNVALIDATED: prefix}
        kube.must(kube.apply(manifest))
        support.eventually(
            lambda: kube.readiness(parent) == ("False", "NotLeafWithWorkloads"),
            what="the parent with a pod group is NotLeafWithWorkloads",
        )
        assert kube.readiness(leaf) == ("True", "Ready")
        kube.must(kube.kubectl("delete", support.PODGROUP, "pg", "-n", kube.namespace))
        support.eventually(
            lambda: kube.readiness(parent) == ("True", "Ready"), what="Ready once it is empty"
        )
