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
    """The pod the room is for; "" when it cannot be told (then only the victim is told)."""
    rule: str
    """A short label of the rule that chose the victim (the metric's ``reason``)."""
    victim_message: str
    reclaimer_message: str
    victim_uid: str = ""
    reclaimer_uid: str = ""
    """Pod uids, so the events match ``kubectl describe pod``'s ``involvedObject.uid`` selector."""


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
    # In admission mode the core pipelines nothing (kube-scheduler places the reclaimer), so
    # the reclaimer is named by its queue: the first pod waiting for room (PodScheduled=False,
    # Unschedulable) of another queue, in creation order.
    # TODO(queuetree): use the core's victim -> reclaimer pairs once SessionResult carries them.
    waiting = sorted(
        (
            pod
            for pod in snapshot.pods.values()
            if pod.unschedulable and not pod.sch_gated and not pod.node_name
        ),
        key=lambda pod: (pod.created, pod.uid or pod.key),
    )
    rule = f"ancestorReclaimLevel={ancestor_reclaim_level}"
    evictions: list[Eviction] = []
    for victim in result.evict:
        victim_pod = snapshot.pods.get(victim)
        node = victim_pod.node_name if victim_pod is not None else ""
        victim_queue = _queue_of(snapshot, victim_pod)
        reclaimer = reclaimer_on_node.get(node, "") or next(
            (pod.key for pod in waiting if _queue_of(snapshot, pod) != victim_queue), ""
        )
        reclaimer_pod = snapshot.pods.get(reclaimer)
        reclaimer_queue = _queue_of(snapshot, reclaimer_pod)
        evictions.append(
            Eviction(
                victim=victim,
                reclaimer=reclaimer,
                victim_uid=victim_pod.uid if victim_pod is not None else "",
                reclaimer_uid=reclaimer_pod.uid if reclaimer_pod is not None else "",
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
