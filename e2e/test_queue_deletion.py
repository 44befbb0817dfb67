"""A busy queue never goes while its pods run, whenever it is deleted (issue 35).

The webhook refuses to delete a queue whose status counts pods (Volcano's check, in
test_busy_queues.py), but a status is written after the pods are admitted: an admin quick
enough, or a cluster whose webhook does not look, got past it. The operator now holds a
finalizer (``scheduling.queuetree.io/queue-in-use``) on every queue pods are charged to,
written before the first pod's gate goes: a deletion that gets through leaves the queue
Terminating, admitting nothing, still counting its pods at every ancestor, with a condition and
an Event that say why it stays and how to let it go; it goes once its pods do.

These tests take the queues out of the webhook's rules (``support.unvalidated_queues``) so that
every deletion is accepted at once, which is what the race looked like: the finalizer alone
must hold.
"""

from __future__ import annotations

from typing import Any

from e2e import support

FINALIZER = "scheduling.queuetree.io/queue-in-use"
TENTH = {"cpu": "100m", "memory": "64Mi"}


def labelled(prefix: str, *queues: dict[str, Any]) -> list[dict[str, Any]]:
    for manifest in queues:
        manifest["metadata"]["labels"] = {support.UNVALIDATED: prefix}
    return list(queues)


def terminating(kube: support.Kube, name: str) -> bool:
    """The queue exists, was deleted, and our finalizer holds it."""
    metadata = (kube.queue(name) or {}).get("metadata") or {}
    return bool(metadata.get("deletionTimestamp")) and FINALIZER in (
        metadata.get("finalizers") or []
    )


def admit(kube: support.Kube, queue: str, names: list[str]) -> None:
    kube.must(
        kube.apply(
            *(
                support.pod(name, namespace=kube.namespace, queue=queue, requests=TENTH)
                for name in names
            )
        )
    )


def test_a_queue_deleted_right_after_its_pods_are_admitted_stays_until_they_go(
    kube: support.Kube,
) -> None:
    """Issue 35's case: parent 200m, two 100m pods in leaf a, a deleted as soon as they are
    admitted; a pod in sibling b must not run while they do."""
    prefix = support.unique("del-now")
    parent, leaf, sibling = f"{prefix}-p", f"{prefix}-a", f"{prefix}-b"
    with support.unvalidated_queues(kube, prefix):
        kube.must(
            kube.apply(
                *labelled(
                    prefix,
                    support.queue(parent, capability={"cpu": "200m"}),
                    support.queue(leaf, parent=parent),
                    support.queue(sibling, parent=parent),
                )
            )
        )
        names = ["a-0", "a-1"]
        admit(kube, leaf, names)
        support.eventually(
            lambda: all(kube.gates(n) == [] for n in names), what="both pods are admitted"
        )
        deleted = kube.must(kube.kubectl("delete", "queue", leaf, "--wait=false"))
        admit(kube, sibling, ["more"])
        support.eventually(lambda: kube.judged("more", parent), what="the sibling's pod is judged")
        support.eventually(
            lambda: kube.readiness(leaf) == ("False", "Terminating"),
            what="the deleted queue says it is Terminating",
        )
        described = kube.describe_queue(leaf)
        assert (
            terminating(kube, leaf),
            kube.gated("more"),
            "is being deleted: it admits no new pods" in described,
            f"kubectl patch queue {leaf} --type=json" in described,
        ) == (True, True, True, True), (deleted.describe(), described)
        for name in names:
            kube.delete_pod(name)
        support.eventually(lambda: kube.queue(leaf) is None, what="the queue goes with its pods")
        support.eventually(lambda: kube.running("more"), what="the sibling's pod runs then")
        kube.delete_pod("more")


def test_a_queue_deleted_during_a_burst_admits_nothing_more_and_keeps_what_it_admitted(
    kube: support.Kube,
) -> None:
    prefix = support.unique("del-burst")
    leaf = f"{prefix}-q"
    names = [f"burst-{i}" for i in range(12)]
    with support.unvalidated_queues(kube, prefix):
        kube.must(kube.apply(*labelled(prefix, support.queue(leaf, capability={"cpu": "600m"}))))
        admit(kube, leaf, names)
        kube.must(kube.kubectl("delete", "queue", leaf, "--wait=false"))

        def settled() -> list[str] | None:
            """The pods admitted before the deletion, once they run and the queue (if still
            there) counts exactly them."""
            pods = {p["metadata"]["name"]: p for p in support.pods_in(kube)}
            admitted = sorted(n for n in names if not pods[n]["spec"].get("schedulingGates"))
            if not all((pods[n].get("status") or {}).get("phase") == "Running" for n in admitted):
                return None
            if not admitted:
                return [] if kube.queue(leaf) is None else None
            counted = support.queue_figures(kube, leaf)["allocated"].get("pods")
            ready = kube.readiness(leaf) == ("False", "Terminating")
            return admitted if ready and counted == str(len(admitted)) else None

        admitted = support.eventually(
            settled, what="the pods admitted before the deletion run, and the queue counts them"
        )
        assert len(admitted) <= 6, admitted
        waiting = sorted(set(names) - set(admitted))
        if admitted:
            assert terminating(kube, leaf), kube.queue(leaf)
            support.eventually(
                lambda: "is being deleted" in kube.explanation(waiting[0]),
                what="a pod left behind its gate is told the queue is being deleted",
            )
            # Room made in a deleted queue admits nothing.
            kube.delete_pod(admitted[0])
            support.eventually(
                lambda: (
                    support.queue_figures(kube, leaf)["allocated"].get("pods")
                    == str(len(admitted) - 1)
                ),
                what="the queue counts one pod less",
            )
            assert all(kube.gated(n) for n in waiting), waiting
        kube.must(kube.kubectl("delete", "pods", "--all", "-n", kube.namespace, "--wait=true"))
        support.eventually(lambda: kube.queue(leaf) is None, what="the queue goes with its pods")


def test_a_parent_deleted_while_its_leaf_is_busy_stays_and_the_admin_is_told_what_to_do(
    kube: support.Kube,
) -> None:
    """With the webhook, the deletion is refused (the parent has a child); without it, the
    parent stays Terminating while the leaf's pods are charged to it. Its condition names the
    way out when the operator cannot help: removing the finalizer by hand, which works."""
    prefix = support.unique("del-parent")
    parent, leaf = f"{prefix}-p", f"{prefix}-a"
    kube.must(kube.apply(support.queue(parent), support.queue(leaf, parent=parent)))
    admit(kube, leaf, ["a-0"])
    support.eventually(lambda: kube.running("a-0"), what="the leaf's pod runs")
    refused = kube.kubectl("delete", "queue", parent, "--wait=false")
    assert (refused.ok, "because it has 1 child queues" in refused.stderr) == (False, True), (
        refused.describe()
    )
    with support.unvalidated_queues(kube, prefix):
        kube.must(kube.kubectl("label", "queue", parent, leaf, f"{support.UNVALIDATED}={prefix}"))
        kube.must(kube.kubectl("delete", "queue", parent, "--wait=false"))
        support.eventually(
            lambda: kube.readiness(parent) == ("False", "Terminating"),
            what="the parent says it is Terminating",
        )
        assert (terminating(kube, parent), kube.running("a-0")) == (True, True)
        # The documented way out (the operator down, say): remove the finalizer by hand.
        kube.must(
            kube.kubectl(
                "patch",
                "queue",
                parent,
                "--type=json",
                "-p",
                '[{"op":"remove","path":"/metadata/finalizers"}]',
            )
        )
        support.eventually(lambda: kube.queue(parent) is None, what="the parent is gone")
        kube.delete_pod("a-0")
