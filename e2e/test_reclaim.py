"""Reclaim: a queue below its deserved share takes back what another queue borrowed, within the
reach ``ancestorReclaimLevel`` allows (spec §3.12.1, cases 5 to 8).

The node that the two pods compete for advertises two of an extended resource
(``slot_node``); each pod asks for both (and CPU and memory in proportion). The victim runs
first, then the reclaimer is admitted by its queue but finds no room on the node. Whether the
victim is evicted depends on the operator's configured level, which the suite reads from the
cluster (the sandbox runs level 1).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from e2e import support


def units(count: int) -> dict[str, str]:
    """``count`` slots, with CPU and memory in proportion: every dimension tells the same story,
    as the 2 CPU / 2Gi figures of the spec's cases do."""
    return {support.SLOT: str(count), "cpu": f"{count * 100}m", "memory": f"{count * 100}Mi"}


ONE, TWO, THREE, FOUR = units(1), units(2), units(3), units(4)


@dataclasses.dataclass(frozen=True)
class Tree:
    """Queues (built from a name suffix), the victim's and reclaimer's leaves, and for which
    levels the victim is evicted."""

    queues: Callable[[str], list[dict[str, Any]]]
    victim_queue: str
    reclaimer_queue: str
    evicts: Callable[[int], bool]


def separate_subtrees(s: str) -> list[dict[str, Any]]:
    """Spec §3.12.1 cases 5-7: the victim's parent borrows, its grandparent does not."""
    return [
        support.queue(f"grand-a-{s}", deserved=TWO, capability=FOUR),
        support.queue(f"parent-a-{s}", parent=f"grand-a-{s}", deserved=TWO, capability=TWO),
        support.queue(f"queue-a-{s}", parent=f"parent-a-{s}", deserved=TWO, capability=TWO),
        support.queue(f"grand-b-{s}", deserved=THREE, capability=FOUR),
        support.queue(f"parent-b-{s}", parent=f"grand-b-{s}", deserved=ONE, capability=TWO),
        support.queue(f"queue-b-{s}", parent=f"parent-b-{s}", deserved=ONE, capability=TWO),
    ]


def shared_parent(s: str) -> list[dict[str, Any]]:
    """Spec §3.12.1 case 8: both leaves under one parent that is within its deserved share,
    neither with a deserved share of its own. At level 0 the reclaimer's leaf, deserving
    nothing, may not reclaim; from level 1 the shared parent blocks it."""
    return [
        support.queue(f"parent-{s}", deserved=FOUR, capability=FOUR),
        support.queue(f"queue-a-{s}", parent=f"parent-{s}"),
        support.queue(f"queue-b-{s}", parent=f"parent-{s}"),
    ]


TREES = {
    "across subtrees: evicted at levels 0 and 1, not at 2": Tree(
        separate_subtrees, "queue-b", "queue-a", lambda level: level <= 1
    ),
    "between siblings deserving nothing: never evicted": Tree(
        shared_parent, "queue-b", "queue-a", lambda level: False
    ),
}


def unschedulable(found: dict[str, Any] | None) -> bool:
    conditions = ((found or {}).get("status") or {}).get("conditions") or []
    return any(
        c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable" for c in conditions
    )


def reclaim_events(kube: support.Kube) -> dict[str, str]:
    """Pod name -> the message of its Reclaim event."""
    events = kube.client.items("events", "-n", kube.namespace)
    return {
        e["involvedObject"]["name"]: e.get("message", "")
        for e in events
        if e.get("reason") == "Reclaim"
    }


def cycles_pass(kube: support.Kube, rounds: int = 2) -> None:
    """Evidence that the operator ran admission cycles since now: pods in a queue of their own
    get admitted one after the other."""
    canary_queue = support.unique("canary")
    kube.must(kube.apply(support.queue(canary_queue)))
    for index in range(rounds):
        name = f"canary-{index}"
        kube.must(kube.apply(support.pod(name, namespace=kube.namespace, queue=canary_queue)))
        support.eventually(lambda n=name: kube.gates(n) == [], what=f"{name} admitted")


@pytest.mark.parametrize("tree", list(TREES.values()), ids=list(TREES))
def test_reclaim_follows_the_ancestor_reclaim_level(
    kube: support.Kube, slot_node: str, tree: Tree
) -> None:
    suffix = support.unique("r").removeprefix("r-")
    kube.must(kube.apply(*tree.queues(suffix)))
    victim_queue, reclaimer_queue = (
        f"{tree.victim_queue}-{suffix}",
        f"{tree.reclaimer_queue}-{suffix}",
    )
    kube.must(
        kube.apply(
            support.pod("victim", namespace=kube.namespace, queue=victim_queue, requests=TWO)
        )
    )
    support.eventually(lambda: kube.running("victim"), what=f"the victim runs on {slot_node}")
    kube.must(
        kube.apply(
            support.pod("reclaimer", namespace=kube.namespace, queue=reclaimer_queue, requests=TWO)
        )
    )
    level = kube.cluster.reclaim_level
    if tree.evicts(level):
        # Admitted by its queue, no room on the node, reclaim: often faster than a poll sees
        # the Unschedulable step in between, so the test waits for the outcome.
        support.eventually(lambda: kube.pod("victim") is None, what="the victim is evicted")
        support.eventually(lambda: kube.running("reclaimer"), what="the reclaimer runs")
        events = support.eventually(
            lambda: (found := reclaim_events(kube)).keys() >= {"victim", "reclaimer"} and found,
            what="Reclaim events on the victim and the reclaimer",
        )
        # Each event names the other pod and quotes the capacity plugin's rule with its level.
        assert (
            f"ancestorReclaimLevel {level}" in events["victim"],
            "reclaimer" in events["victim"],
            victim_queue in events["reclaimer"],
            f"ancestorReclaimLevel {level}" in events["reclaimer"],
        ) == (True, True, True, True), events
    else:
        support.eventually(
            lambda: kube.gates("reclaimer") == [] and unschedulable(kube.pod("reclaimer")),
            what="the reclaimer is admitted by its queue but finds no room on the node",
        )
        cycles_pass(kube)
        assert (kube.running("victim"), unschedulable(kube.pod("reclaimer"))) == (True, True)


GRACE_SECONDS = 12
"""How long the evicted victim stays Terminating: several cycles of the operator."""


def test_a_terminating_victim_is_counted_as_freeing_room_and_no_second_pod_is_evicted(
    kube: support.Kube, slot_node: str
) -> None:
    """Evicted pods stay on their node for their grace period (a kubelet's, or kwok's on the
    real backend; kubesim's simulated kubelet does the same). Reclaim must count that room as
    coming (Volcano's Releasing), not evict another pod for the same reclaimer each cycle."""
    if kube.cluster.reclaim_level > 1:
        pytest.skip(
            f"reclaim across these subtrees needs level 0 or 1, not {kube.cluster.reclaim_level}"
        )
    suffix = support.unique("t").removeprefix("t-")
    kube.must(kube.apply(*separate_subtrees(suffix)))
    victims, reclaimers = f"queue-b-{suffix}", f"queue-a-{suffix}"
    for name in ("first", "second"):
        manifest = support.pod(name, namespace=kube.namespace, queue=victims, requests=ONE)
        manifest["spec"]["terminationGracePeriodSeconds"] = GRACE_SECONDS
        kube.must(kube.apply(manifest))
    for name in ("first", "second"):
        support.eventually(lambda n=name: kube.running(n), what=f"{name} runs on {slot_node}")
    kube.must(
        kube.apply(
            support.pod("reclaimer", namespace=kube.namespace, queue=reclaimers, requests=ONE)
        )
    )

    def terminating() -> list[str]:
        return sorted(
            p["metadata"]["name"]
            for p in kube.client.items("pods", "-n", kube.namespace)
            if p["metadata"].get("deletionTimestamp")
        )

    evicted = support.eventually(lambda: terminating() or None, what="one victim is evicted")
    survivor = ({"first", "second"} - set(evicted)).pop()
    # While the victim terminates, the reclaimer waits for its room; nothing else goes.
    seen: list[list[str]] = []
    support.eventually(
        lambda: seen.append(terminating()) or kube.running("reclaimer"),
        what="the reclaimer runs once the victim is gone",
        deadline=GRACE_SECONDS + 60,
    )
    assert (
        len(evicted),
        all(survivor not in sample for sample in seen),
        kube.running(survivor),
    ) == (1, True, True), seen
