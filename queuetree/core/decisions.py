"""Decisions: the output of one scheduling session.

The session decides; callers act. ``queuetree session`` prints these as JSON (DESIGN.md's
contract); the operator applies them (removes gates, evicts, writes status and events).
Keys are pod keys (``namespace/name``), pod group keys and queue names; every sequence is sorted
or in decision order as documented per field, so the same snapshot always gives the same result.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from queuetree.core import conditions, objects, resources


def _empty_mapping() -> Mapping[str, Any]:
    """The shared empty read-only mapping (Python 3.11 refuses a mappingproxy as a default)."""
    return _EMPTY


_EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclasses.dataclass(frozen=True, slots=True)
class QueueFigures:
    """A queue's figures at the end of the session (capacity plugin's view)."""

    allocated: resources.Resource
    deserved: resources.Resource
    capability: resources.Resource
    real_capability: resources.Resource
    guarantee: resources.Resource = resources.EMPTY
    reserved: resources.Resource = resources.EMPTY
    """Requests of ungated-but-unplaced opted-in pods (spec §5.3), counted at every ancestor."""
    inqueue: resources.Resource = resources.EMPTY
    share: float = 0.0
    state: objects.QueueState = objects.QueueState.OPEN
    allocated_pods: int = 0
    """How many pods ``allocated`` holds (Volcano's ``status.allocated["pods"]``), subtree
    included: what keeps a busy queue from being deleted or getting a first child."""
    reserved_pods: int = 0
    """How many pods ``reserved`` holds (admitted, not placed yet), subtree included."""


@dataclasses.dataclass(frozen=True, slots=True)
class Event:
    """A Kubernetes Event the caller may record (involved object, type, reason, message)."""

    kind: str
    """``Pod``, ``PodGroup`` or ``Queue``."""
    key: str
    """``namespace/name`` for namespaced objects, the name for queues."""
    type: str
    """``Normal`` or ``Warning``."""
    reason: str
    message: str


class EvictionRule(enum.StrEnum):
    """The rule that chose a victim: a short, bounded label (the operator's metric label).

    Reclaim rules are the capacity plugin's (spec §3.9) when it voted in the tier that chose the
    victims; ``reclaim`` and ``preempt`` alone mean other plugins' votes chose them (the reason
    names those plugins).
    """

    RECLAIM_OVER_DESERVED = "reclaim-over-deserved"
    """The victim's queue uses more than its deserved share of a resource the victim holds."""
    RECLAIM_UNDESERVED = "reclaim-undeserved"
    """The victim's queue deserves none of the resources the victim holds (Volcano's
    "immediate victim")."""
    RECLAIM = "reclaim"
    """Reclaim, the victims chosen without the capacity plugin's vote."""
    PREEMPT_LOWER_PRIORITY = "preempt-lower-priority"
    """Preempt: a pod of a lower-priority pod group of the same queue (priority plugin)."""
    PREEMPT_LOWER_PRIORITY_TASK = "preempt-lower-priority-task"
    """Preempt: a lower-priority pod of the preemptor's own pod group (priority plugin)."""
    PREEMPT = "preempt"
    """Preempt, the victims chosen without the priority plugin's vote."""
    CLAIM_OUTGROWN = "claim-outgrown"
    """Not a session's choice: an admitted pod whose own DRA claims now ask for more devices
    than it was admitted with (``devices.outgrown``); evicted whatever the configuration."""


@dataclasses.dataclass(frozen=True, slots=True)
class Eviction:
    """One eviction: whom it makes room for and the rule that chose the victim.

    Recorded when the victim is evicted inside the session, so ``reason`` quotes the figures the
    vote saw (earlier victims of the same reclaimer already subtracted).
    """

    victim: str
    """Pod key of the pod to evict."""
    reclaimer: str
    """Pod key of the pod the room is for: the reclaimer (``reclaim``) or the preemptor
    (``preempt``). Never empty: every eviction is made for one pending pod."""
    action: str
    """``reclaim`` (another queue's pod) or ``preempt`` (a pod of the same queue)."""
    rule: EvictionRule
    reason: str
    """The rule in words for a person, with the queues and the figures, e.g. ``queue 'b' is
    above its deserved share (cpu 2 > 1); its ancestor 'org' is above its deserved share
    (cpu 5 > 4); ancestorReclaimLevel 1`` (the level only in hierarchy mode)."""
    node: str
    """The victim's node, where the reclaimer was placed (pipelined) in the session."""
    victim_queue: str
    reclaimer_queue: str


@dataclasses.dataclass(frozen=True, slots=True)
class SessionResult:
    ready: bool
    """False when the queue tree has a structural fault (a parent cycle, a missing parent, a pod
    group in a non-leaf queue; each is listed in ``errors``). Volcano would then admit nothing;
    queuetree holds back only the queues and pod groups involved (docs/compatibility.md)."""
    errors: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    bind: Mapping[str, str] = dataclasses.field(default_factory=_empty_mapping)
    """Pod key -> node name, for pods allocated and bound in this session."""
    pipeline: Mapping[str, str] = dataclasses.field(default_factory=_empty_mapping)
    """Pod key -> node name, for pods pipelined onto resources being released."""
    evict: tuple[str, ...] = ()
    """Pod keys to evict, in eviction order (the victims of ``evictions``, kept for callers
    that only need the keys)."""
    ungate: tuple[str, ...] = ()
    """Pod keys whose queue-allocation gate may be removed, in admission order."""
    admitted_to: Mapping[str, str] = dataclasses.field(default_factory=_empty_mapping)
    """Pod key -> the queue each pod of ``ungate`` was admitted to (the leaf whose chain its
    request was checked against): what the operator records on the pod with the gate
    removal, so the pod stays charged there."""
    pod_groups: Mapping[str, objects.PodGroupPhase] = dataclasses.field(
        default_factory=_empty_mapping
    )
    """Pod group key -> its phase at the end of the session, for every group (the single-pod
    groups of lone pods included), in key order; in a compacted admission session the settled
    lone pods' groups come last (``compaction.Compacted.restore_phases``). Volcano's rule
    (``jobStatus``): Unknown while some pods run but the gang cannot be whole; Running once
    minMember pods hold resources or succeeded, Completed when all of those succeeded;
    otherwise Pending, unless the group was Inqueue."""
    group_counts: Mapping[str, objects.GroupCounts] = dataclasses.field(
        default_factory=_empty_mapping
    )
    """PodGroup key -> its running, succeeded and failed pods, for real PodGroups only (the
    single-pod groups of lone pods have no object to write them to), in key order."""
    queues: Mapping[str, QueueFigures] = dataclasses.field(default_factory=_empty_mapping)
    reasons: Mapping[str, str] = dataclasses.field(default_factory=_empty_mapping)
    """Pod key -> why a pending or gated pod was not admitted, for a person to act on."""
    events: tuple[Event, ...] = ()
    evictions: tuple[Eviction, ...] = ()
    """One record per entry of ``evict``, in the same (eviction) order: the victim, the pod it
    was evicted for and the rule that chose it. A victim is evicted at most once per session."""
    queue_faults: Mapping[str, tuple[conditions.Fault, ...]] = dataclasses.field(
        default_factory=_empty_mapping
    )
    """Queue name -> the problems the session found with it (a cycle, a missing parent, work
    in a non-leaf queue, ...), in the order found, for the queues that have any; the input of
    its readiness condition (``conditions.readiness``)."""
    order: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=_empty_mapping)
    """Queue name -> the pods waiting behind the gate in it, in the order the session
    considers them (``ordering.admission_order``): a pod's position in its queue."""
    remedies: Mapping[str, str] = dataclasses.field(default_factory=_empty_mapping)
    """Pod key -> what would have to change for the pod to be admitted, for the pods whose
    reason is a capacity rejection (``explaining.remedy``)."""
    briefs: Mapping[str, str] = dataclasses.field(default_factory=_empty_mapping)
    """Pod key -> the same rejection in a few words, for a table (``explaining.brief``)."""
    released: tuple[str, ...] = ()
    """PodGroup keys whose Inqueue bound ran out with no pod in this session
    (``inqueue_bounds``): Pending again, their room given back, in key order."""
    group_conditions: Mapping[str, conditions.GroupCondition] = dataclasses.field(
        default_factory=_empty_mapping
    )
    """PodGroup key -> the admission condition the session wants the group to show, for the
    real PodGroups it admitted (Inqueue), refused at enqueue, or released, in key order; a
    group not listed keeps whatever condition it has (``explaining.group_conditions``)."""

    @property
    def evicted_for(self) -> Mapping[str, str]:
        """Victim pod key -> the pod key it was evicted for, in eviction order."""
        return MappingProxyType({e.victim: e.reclaimer for e in self.evictions})
