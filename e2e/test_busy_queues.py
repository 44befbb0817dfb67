"""A queue that has pods keeps them: it cannot be deleted, and it cannot become a parent.

The operator writes the number of allocated pods into ``status.allocated["pods"]`` (as Volcano's
scheduler does), bottom-up over the subtree; the webhook reads it and refuses, with Volcano's
messages, to delete such a queue (its pods' usage would vanish from every ancestor) or to put
a first child under it (its pods would run in a non-leaf queue).
"""

from __future__ import annotations

from typing import Any

from e2e import support

TENTH = {"cpu": "100m", "memory": "64Mi"}


def allocated_pods(kube: support.Kube, name: str) -> str | None:
    found: dict[str, Any] = kube.queue(name) or {}
    return ((found.get("status") or {}).get("allocated") or {}).get("pods")


def run_two(kube: support.Kube, queue: str, prefix: str) -> list[str]:
    names = [f"{prefix}-{i}" for i in range(2)]
    kube.must(
        kube.apply(
            *(
                support.pod(name, namespace=kube.namespace, queue=queue, requests=TENTH)
                for name in names
            )
        )
    )
    support.eventually(lambda: all(kube.running(n) for n in names), what=f"{names} run")
    return names


def test_the_operator_counts_allocated_pods_in_the_status_of_every_ancestor(
    kube: support.Kube,
) -> None:
    parent, leaf = support.unique("busy-parent"), support.unique("busy-leaf")
    kube.must(kube.apply(support.queue(parent), support.queue(leaf, parent=parent)))
    run_two(kube, leaf, "p")
    support.eventually(
        lambda: (allocated_pods(kube, leaf), allocated_pods(kube, parent)) == ("2", "2"),
        what="status.allocated.pods is 2 on the leaf and its parent",
    )


def test_a_queue_with_allocated_pods_cannot_be_deleted(kube: support.Kube) -> None:
    parent = support.unique("busy-parent")
    leaf, sibling = support.unique("busy-leaf"), support.unique("busy-sibling")
    kube.must(
        kube.apply(
            support.queue(parent, capability={"cpu": "200m"}),
            support.queue(leaf, parent=parent),
            support.queue(sibling, parent=parent),
        )
    )
    run_two(kube, leaf, "p")
    support.eventually(lambda: allocated_pods(kube, leaf) == "2", what="the leaf counts 2 pods")
    deleted = kube.kubectl("delete", "queue", leaf, "--wait=false")
    # Had the leaf gone, its two pods would vanish from the parent and these would run too.
    kube.must(
        kube.apply(support.pod("more", namespace=kube.namespace, queue=sibling, requests=TENTH))
    )
    support.eventually(lambda: kube.judged("more", parent), what="the pod in the sibling is judged")
    assert (
        deleted.ok,
        f"queue {leaf} cannot be deleted because it has allocated Pods: 2" in deleted.stderr,
        kube.queue(leaf) is not None,
        kube.gated("more"),
    ) == (False, True, True, True), deleted.describe()


def test_a_leaf_with_allocated_pods_cannot_get_a_first_child(kube: support.Kube) -> None:
    leaf, child = support.unique("busy-leaf"), support.unique("busy-child")
    kube.must(kube.apply(support.queue(leaf)))
    run_two(kube, leaf, "p")
    support.eventually(lambda: allocated_pods(kube, leaf) == "2", what="the leaf counts 2 pods")
    created = kube.apply(support.queue(child, parent=leaf))
    says = (
        f"queue {leaf} cannot be the parent queue of queue {child} because it has allocated Pods: 2"
    )
    assert (created.ok, says in created.stderr) == (False, True), created.describe()


def test_an_admin_is_warned_when_a_change_leaves_a_busy_queue_over_its_capability(
    kube: support.Kube,
) -> None:
    """Lowering a busy queue's capability, or moving it under a parent without room, is allowed
    (nothing running is evicted) but said: the queue admits nothing more until its use falls."""
    small, small_leaf = support.unique("small"), support.unique("small-leaf")
    big, leaf = support.unique("big"), support.unique("moved")
    kube.must(
        kube.apply(
            support.queue(small, capability={"cpu": "200m", "memory": "1Gi"}),
            support.queue(small_leaf, parent=small),
            support.queue(big),
            support.queue(leaf, parent=big),
        )
    )
    run_two(kube, small_leaf, "s")
    run_two(kube, leaf, "m")
    support.eventually(
        lambda: allocated_pods(kube, leaf) == "2" and allocated_pods(kube, small) == "2",
        what="both queues count their 2 pods",
    )
    lowered = kube.must(
        kube.kubectl(
            "patch", "queue", leaf, "--type=merge", "-p", '{"spec":{"capability":{"cpu":"100m"}}}'
        )
    )
    moved = kube.must(
        kube.kubectl(
            "patch", "queue", leaf, "--type=merge", "-p", f'{{"spec":{{"parent":"{small}"}}}}'
        )
    )
    zero = kube.must(
        kube.kubectl(
            "patch", "queue", leaf, "--type=merge", "-p", '{"spec":{"capability":{"cpu":"0"}}}'
        )
    )
    assert (
        f"queue {leaf} uses cpu 200m now" in lowered.stderr,
        "above the new capability (cpu 100m): nothing running is evicted" in lowered.stderr,
        f"queue {small} would use cpu 400m with queue {leaf}'s cpu 200m" in moved.stderr,
        "0 does not stop queue" in zero.stderr,
        kube.running("m-0") and kube.running("m-1"),
    ) == (True, True, True, True, True), (lowered.describe(), moved.describe(), zero.describe())


def test_a_person_cannot_zero_the_figures_the_deletion_check_reads(kube: support.Kube) -> None:
    leaf = support.unique("busy-leaf")
    kube.must(kube.apply(support.queue(leaf)))
    run_two(kube, leaf, "p")
    support.eventually(lambda: allocated_pods(kube, leaf) == "2", what="the leaf counts 2 pods")
    zeroed = kube.kubectl(
        "patch",
        "queue",
        leaf,
        "--subresource=status",
        "--type=merge",
        "-p",
        '{"status":{"allocated":{"pods":"0"}}}',
    )
    deleted = kube.kubectl("delete", "queue", leaf, "--wait=false")
    assert (
        zeroed.ok,
        f"status.allocated of queue {leaf} is written by the queuetree operator" in zeroed.stderr,
        deleted.ok,
        allocated_pods(kube, leaf),
    ) == (False, True, False, "2"), (zeroed.describe(), deleted.describe())
