"""Reclaim: evict pods of queues above their deserved share for pods kube-scheduler cannot place.
And the one eviction that is not reclaim's: an admitted pod whose own DRA claims outgrew its
admission (:func:`plan_outgrown`).

The core session's reclaim action (run in the admission session when the configuration lists
``reclaim``, with the capacity plugin's ``ancestorReclaimLevel``) chooses the victims, for pods
that kube-scheduler already tried and left unschedulable (``PodScheduled=False``, reason
``Unschedulable``; ``Pod.unschedulable``), and records for each victim the pod it makes room for
and the rule that chose it (``decisions.SessionResult.evictions``). :func:`plan_reclaim` turns
those records into the evictions to make and the events on both pods.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Set
from types import MappingProxyType

from queuetree.core import decisions, objects


@dataclasses.dataclass(frozen=True, slots=True)
class Eviction:
    victim: str
    reclaimer: str
    """The pod the room is for; "" when the session did not say (then only the victim is told)."""
    rule: str
    """The label of the rule that chose the victim (``decisions.EvictionRule``; the metric's
    ``reason``)."""
    victim_message: str
    reclaimer_message: str
    victim_uid: str = ""
    reclaimer_uid: str = ""
    """Pod uids, so the events match ``kubectl describe pod``'s ``involvedObject.uid`` selector."""
    event_type: str = "Normal"
    event_reason: str = "Reclaim"
    """The type and reason of the Events that tell both pods."""


def plan_reclaim(snapshot: objects.Snapshot, result: decisions.SessionResult) -> list[Eviction]:
    """The evictions the core chose, in eviction order, each with the pod it makes room for.

    The messages name the counterpart, its queue, the node and the core's reason, which quotes
    the ``ancestorReclaimLevel`` the capacity plugin applied.

    A victim in ``result.evict`` without a record (a result built by hand) is still evicted,
    with a message that names no reclaimer.
    """
    records = {record.victim: record for record in result.evictions}
    evictions: list[Eviction] = []
    for victim in result.evict:
        victim_pod = snapshot.pods.get(victim)
        victim_uid = victim_pod.uid if victim_pod is not None else ""
        record = records.get(victim)
        if record is None:
            evictions.append(
                Eviction(
                    victim=victim,
                    reclaimer="",
                    victim_uid=victim_uid,
                    rule=str(decisions.EvictionRule.RECLAIM),
                    victim_message="Evicted by queuetree reclaim",
                    reclaimer_message="",
                )
            )
            continue
        reclaimer_pod = snapshot.pods.get(record.reclaimer)
        evictions.append(
            Eviction(
                victim=victim,
                reclaimer=record.reclaimer,
                victim_uid=victim_uid,
                reclaimer_uid=reclaimer_pod.uid if reclaimer_pod is not None else "",
                rule=str(record.rule),
                victim_message=(
                    f"Evicted by queuetree {record.action} for pod {record.reclaimer} of queue "
                    f"{record.reclaimer_queue}: {record.reason}"
                ),
                reclaimer_message=(
                    f"{_verb(record.action)} resources from pod {victim} of queue "
                    f"{record.victim_queue} on node {record.node or '?'}: {record.reason}"
                ),
            )
        )
    return evictions


OUTGROWN_REASON = "ClaimOutgrown"
"""The reason of the Warning Event on a pod evicted because its claims outgrew its admission."""


def plan_outgrown(
    snapshot: objects.Snapshot, outgrown: Mapping[str, tuple[str, str]], *, skip: Set[str]
) -> list[Eviction]:
    """The evictions of admitted pods whose own DRA claims outgrew their admission
    (``state.StateView.outgrown``: key -> (uid, why)), in key order, but for those in ``skip``
    (chosen already, or refused a moment ago) and those being deleted; no pod is told of a
    reclaimer, as none is one."""
    leaving = {
        key for key, pod in snapshot.pods.items() if pod.status is objects.TaskStatus.RELEASING
    }
    return [
        Eviction(
            victim=key,
            reclaimer="",
            victim_uid=uid,
            rule=str(decisions.EvictionRule.CLAIM_OUTGROWN),
            victim_message=f"Evicted by queuetree: {why}",
            reclaimer_message="",
            event_type="Warning",
            event_reason=OUTGROWN_REASON,
        )
        for key, (uid, why) in sorted(outgrown.items())
        if key not in skip and key not in leaving
    ]


def _verb(action: str) -> str:
    return "Preempting" if action == "preempt" else "Reclaiming"


def protect(snapshot: objects.Snapshot, keys: Set[str]) -> objects.Snapshot:
    """``snapshot`` with the pods of ``keys`` not preemptable (``volcano.sh/preemptable:
    "false"``), so reclaim chooses other victims: the pods whose eviction the API server just
    refused (a PodDisruptionBudget, 429). Keys of pods not in the snapshot are ignored; with
    none present, ``snapshot`` itself is returned."""
    present = [key for key in sorted(keys) if key in snapshot.pods]
    if not present:
        return snapshot
    pods = dict(snapshot.pods)
    for key in present:
        pods[key] = dataclasses.replace(pods[key], preemptable=False)
    return dataclasses.replace(snapshot, pods=MappingProxyType(pods))


def refusal_message(eviction: Eviction, *, refusal: str, retry_seconds: float) -> str:
    """What the reclaimer's event says when the victim's eviction was refused (429)."""
    victim = eviction.victim
    return (
        f"Reclaim waits: the eviction of {victim} was refused ({refusal.rstrip('.')}); other "
        f"victims are considered meanwhile, and {victim} again in {retry_seconds:g}s"
    )
