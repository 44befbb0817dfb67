"""Reclaim: evict pods of queues above their deserved share for pods kube-scheduler cannot place.

The core session's reclaim action (run in the admission session when the configuration lists
``reclaim``, with the capacity plugin's ``ancestorReclaimLevel``) chooses the victims, for pods
that kube-scheduler already tried and left unschedulable (``PodScheduled=False``, reason
``Unschedulable``; ``Pod.unschedulable``). :func:`plan_reclaim` pairs each victim with the
reclaimer placed on its node and words the rule for the events on both pods.
"""

from __future__ import annotations

import dataclasses

from queuetree.core import decisions, objects


@dataclasses.dataclass(frozen=True, slots=True)
class Eviction:
    victim: str
    reclaimer: str
    rule: str
    """A short label of the rule that chose the victim (the metric's ``reason``)."""
    victim_message: str
    reclaimer_message: str


def _queue_of(snapshot: objects.Snapshot, pod: objects.Pod | None) -> str:
    if pod is None:
        return "?"
    group = snapshot.pod_groups.get(pod.group)
    return group.queue if group is not None else objects.DEFAULT_QUEUE


def plan_reclaim(
    snapshot: objects.Snapshot,
    result: decisions.SessionResult,
    *,
    ancestor_reclaim_level: int = 0,
) -> list[Eviction]:
    """The evictions the core's reclaim chose, each paired with its reclaimer, in order."""
    if not result.evict:
        return []
    reclaimer_on_node = {node: key for key, node in sorted(result.pipeline.items())}
    rule = f"ancestorReclaimLevel={ancestor_reclaim_level}"
    evictions: list[Eviction] = []
    for victim in result.evict:
        victim_pod = snapshot.pods.get(victim)
        node = victim_pod.node_name if victim_pod is not None else ""
        reclaimer = reclaimer_on_node.get(node, "")
        reclaimer_pod = snapshot.pods.get(reclaimer)
        victim_queue = _queue_of(snapshot, victim_pod)
        reclaimer_queue = _queue_of(snapshot, reclaimer_pod)
        evictions.append(
            Eviction(
                victim=victim,
                reclaimer=reclaimer or victim,
                rule="reclaim",
                victim_message=(
                    f"Evicted by queuetree reclaim: queue {victim_queue} uses more than its "
                    f"deserved share and pod {reclaimer or '?'} of queue {reclaimer_queue} is "
                    f"below its own; victim chosen by the capacity plugin with {rule}"
                ),
                reclaimer_message=(
                    f"Reclaiming resources from pod {victim} of queue {victim_queue} (over its "
                    f"deserved share) on node {node or '?'}, chosen with {rule}"
                ),
            )
        )
    return evictions
