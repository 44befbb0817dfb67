"""A malformed queue tree blocks only its own queues, each with a reason; the rest admits.

The webhook keeps the tree well formed (depth, parents that exist, no cycles), so a malformed
tree comes from queues created while nothing validated them: before queuetree was installed,
or, as here, by an administrator who took some queues out of the webhook's rules (an
``objectSelector`` on ``validatequeue.volcano.sh``). The operator must then still admit pods in
every sound queue, and tell the pods of the broken ones why they wait.
"""

from __future__ import annotations

import json
import threading
import time

from e2e import support
from queuetree.sandbox import kubectl

DEPTH = 1000
"""Far beyond the deepest tree queuetree supports: a recursive walk of it would fail."""
CREATE_DEADLINE = 600.0
"""Seconds for creating the :data:`DEPTH` queues of the chain on a loaded 2-core machine."""


def blocks_only_itself(kube: support.Kube, *, queue: str, sound: str, says: str) -> None:
    """A pod in the broken ``queue`` waits and is told why (``says``), while a pod in the
    ``sound`` queue runs; the first is deleted again, before its queue goes (the fixture's
    cleanup comes after the broken queues are gone)."""
    kube.must(kube.apply(support.pod("broken", namespace=kube.namespace, queue=queue)))
    kube.must(kube.apply(support.pod("elsewhere", namespace=kube.namespace, queue=sound)))
    support.eventually(lambda: kube.running("elsewhere"), what="a pod in a sound queue runs")
    # The first reason may be that the queue does not exist (yet, for the operator).
    support.eventually(
        lambda: says in kube.explanation("broken"), what=f"the waiting pod is told {says!r}"
    )
    assert kube.gated("broken")
    kube.delete_pod("broken")


def test_a_chain_deeper_than_supported_blocks_only_its_own_queues(kube: support.Kube) -> None:
    sound = support.unique("fault-sound")
    prefix = support.unique("fault-chain")
    kube.must(kube.apply(support.queue(sound)))
    with support.unvalidated_queues(kube, prefix):
        # One kubectl for the 1,000 creations, one request each: about 20 s on a quiet machine;
        # a CI run on a loaded one had made 767 when a 60 s deadline stopped it.
        chain = support.chain(prefix, DEPTH, label=prefix)
        kube.must(kube.create(*chain, timeout=CREATE_DEADLINE))
        blocks_only_itself(kube, queue=f"{prefix}-{DEPTH}", sound=sound, says="levels below root")


def test_a_parent_cycle_blocks_only_the_queues_on_and_below_it(kube: support.Kube) -> None:
    sound = support.unique("fault-sound")
    prefix = support.unique("fault-cycle")
    first, second, below = f"{prefix}-a", f"{prefix}-b", f"{prefix}-c"
    kube.must(kube.apply(support.queue(sound)))
    with support.unvalidated_queues(kube, prefix):
        queues = [
            support.queue(first),
            support.queue(second, parent=first),
            support.queue(below, parent=second),
        ]
        for manifest in queues:
            manifest["metadata"]["labels"] = {support.UNVALIDATED: prefix}
        kube.must(kube.apply(*queues))
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
        # The pod's own queue is a sound leaf; the cycle is above it.
        blocks_only_itself(kube, queue=below, sound=sound, says="cycle")


def test_a_chain_too_deep_is_refused_at_once_while_other_queues_admit(kube: support.Kube) -> None:
    """Issue 35: each queue below the deepest allowed names a parent that was refused. The
    webhook reads that parent once from the API server instead of waiting ``--cache-wait`` for
    it, so no review waits in vain: the count of waits that ran out stays (nearly) flat, where
    it grew by one a refusal, a second each. A sound queue admits a pod meanwhile."""
    sound = support.unique("fault-sound")
    prefix = support.unique("fault-refused")
    kube.must(kube.apply(support.queue(sound)))
    chain = support.chain(prefix, DEPTH, label=prefix)
    for manifest in chain:
        del manifest["metadata"]["labels"]  # validated: the webhook refuses what is too deep

    def misses(outcome: str) -> float:
        return support.metric(
            kube.cluster, "webhook", "queuetree_webhook_cache_misses_total", outcome=outcome
        )

    timeouts, absent = misses("timeout"), misses("absent")
    created: list[kubectl.Result] = []
    started = time.monotonic()
    creating = threading.Thread(
        target=lambda: created.append(kube.create(*chain, timeout=CREATE_DEADLINE))
    )
    creating.start()
    try:
        kube.must(kube.apply(support.pod("elsewhere", namespace=kube.namespace, queue=sound)))
        support.eventually(lambda: kube.running("elsewhere"), what="a pod in a sound queue runs")
        ran_at = time.monotonic() - started
    finally:
        creating.join()
    took = time.monotonic() - started
    (result,) = created
    existing = {q["metadata"]["name"] for q in kube.client.items("queues")}
    made = [m["metadata"]["name"] for m in chain if m["metadata"]["name"] in existing]
    refused = DEPTH - len(made)
    print(f"{refused} refusals in {took:.1f} s; the sound queue's pod ran after {ran_at:.1f} s")
    assert (
        result.ok,
        0 < len(made) <= 100,
        made == [f"{prefix}-{level}" for level in range(1, len(made) + 1)],
        misses("timeout") - timeouts <= 5,
        misses("absent") - absent >= refused - 5,
    ) == (False, True, True, True, True), (len(made), misses("timeout") - timeouts)
    # A generous bound for a loaded 2-core machine (about 10 s when idle; it was 15 minutes).
    assert took < 180, f"{refused} refusals took {took:.0f} s"
