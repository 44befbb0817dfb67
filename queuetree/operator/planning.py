"""The writes one admission cycle plans: decided in full before anything is written.

After the core session has decided (admissions, reasons, figures, victims), the cycle plans
what follows from its decisions as one :class:`Writes` batch, with pure functions over the
cycle's immutable view and result: the queue controller's writes (``queue_status``), the
PodGroup statuses, the explanations of pods that stay gated and the notices of pods outside
queue admission (``explaining``), and the evictions of reclaim (``reclaiming``). What the
writer remembers of earlier batches comes in as plain values (:class:`Written`), so the same
inputs plan the same batch. ``writing.Writer`` then applies the batch (Volcano's statements:
operations recorded, then committed; kueue's scheduler: nominate and admit, then apply).

Every planner is level-triggered: a diff between what the session decided and what the
watches show, so a batch skipped while the last one is still being written is planned afresh
by a later cycle, never lost.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping, Set
from typing import Any

from queuetree.core import decisions
from queuetree.operator import explaining, queue_status, reclaiming, state, workload_groups


@dataclasses.dataclass(frozen=True, slots=True)
class Writes:
    """One cycle's batch of writes, in the order the writer sends them."""

    queues: tuple[queue_status.QueueWrite, ...] = ()
    """Queue states, marks, parents and status, with the Events they raise."""
    pod_groups: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    """PodGroup key -> a merge patch of its status."""
    group_events: tuple[queue_status.GroupEvent, ...] = ()
    """Events of PodGroups whose admission condition changed, each sent once the status
    patch of its group is written."""
    explanations: tuple[explaining.Explanation, ...] = ()
    """Why pods stay gated (an annotation each, then an Event), or their removal."""
    notices: tuple[explaining.Explanation, ...] = ()
    """Pods that name a queue without opting in, told once by an Event."""
    evictions: tuple[reclaiming.Eviction, ...] = ()
    """Reclaim's victims, evicted one after the other."""
    group_creations: tuple[workload_groups.GroupCreation, ...] = ()
    """The PodGroups of workloads whose pods wait for them (``workload_groups``)."""
    group_resizes: tuple[workload_groups.GroupResize, ...] = ()
    """Generated PodGroups whose workload declares another ``group-min-member`` now."""
    native_groups: tuple[workload_groups.NativeGroup, ...] = ()
    """The ``scheduling.k8s.io`` PodGroups to create, or whose ``minCount`` to write
    (``--native-pod-groups``)."""
    unplaced_events: tuple[queue_status.GroupEvent, ...] = ()
    """Gangs admitted that the nodes do not fit, told once (``workload_groups``)."""
    unplaced: frozenset[str] = frozenset()
    """The uids of every gang unplaced now (the writer forgets having told the others)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Written:
    """What the writer remembers that a plan must respect (``writing.Writer.written``)."""

    noticed: Set[str] = frozenset()
    """``explaining.notice_token`` of each pod outside queue admission told so already."""
    evicting: Set[str] = frozenset()
    """Victims whose eviction is in flight: not chosen again until it is answered."""
    refused: Set[str] = frozenset()
    """Victims whose eviction was refused and whose retry time has not come."""
    creating: Set[str] = frozenset()
    """Generated PodGroups created (or being created) that the view does not show yet."""
    resizing: Mapping[str, int] = dataclasses.field(default_factory=dict)
    """Generated PodGroups being given a new ``minMember`` -> that minimum."""
    native: Mapping[str, tuple[str, int]] | None = None
    """With ``--native-pod-groups``: each Volcano PodGroup whose native PodGroup exists (or is
    being written) -> the Volcano group's uid and the minimum the native one says; None: off."""
    unplaced_told: Set[str] = frozenset()
    """The uids of the unplaced gangs told so already."""


def plan_writes(
    view: state.StateView,
    result: decisions.SessionResult,
    *,
    written: Written,
    explained: Mapping[str, str],
    stamp: str,
    budget: int,
    reclaim: bool,
    memo: queue_status.PlanMemo,
    now: datetime.datetime | None = None,
) -> Writes:
    """The batch of writes that follows from ``result`` over ``view``.

    ``explained`` is the explanation each pod shows (``state.ClusterState.explanations``);
    ``stamp`` (RFC 3339) is the transition time of a readiness or admission condition that
    flips; ``budget`` bounds the explanations and notices together, explanations first, and
    apart from them the PodGroup conditions whose message alone changed; ``reclaim``
    says whether the configuration reclaims at all; ``memo`` is
    ``queue_status.plan_queue_writes``'s, kept by the caller from one plan to the next; ``now``
    (the time ``stamp`` says) leaves pods too young to be explained for later cycles
    (``explaining.EXPLAIN_AFTER``; None: none is too young). Every queue write that changes
    something is planned: how often a write that only refreshes figures goes out is the
    cycle's pacing (``cycle.AdmissionCycle``).
    """
    queues = queue_status.plan_queue_writes(view, result, now=stamp, memo=memo)
    explanations = explaining.plan_explanations(view, result, explained, budget=budget, now=now)
    notices = explaining.plan_outside_notices(
        view, written.noticed, budget=budget - len(explanations)
    )
    victims = reclaiming.plan_reclaim(view.snapshot, result) if reclaim else []
    # A pod whose claims outgrew its admission is evicted whether or not reclaim is configured:
    # it may hold more than its queue admitted (core.devices.outgrown).
    chosen = {e.victim for e in victims} | written.refused
    victims += reclaiming.plan_outgrown(view.snapshot, view.outgrown, skip=chosen)
    evictions = [e for e in victims if e.victim not in written.evicting]
    groups = queue_status.plan_pod_group_status(view.pod_groups, result)
    changed, group_events = queue_status.plan_group_conditions(
        view.pod_groups, result, now=stamp, budget=budget
    )
    for key, value in changed.items():
        groups[key] = {**groups.get(key, {}), "conditions": value}
    creations = workload_groups.plan_group_creations(view, creating=written.creating)
    resizes = workload_groups.plan_group_resizes(view, resizing=written.resizing)
    native = (
        workload_groups.plan_native_groups(view, known=written.native)
        if written.native is not None
        else []
    )
    unplaced_events, unplaced = workload_groups.plan_unplaced_gangs(
        view, told=written.unplaced_told, native=written.native is not None
    )
    return Writes(
        queues=tuple(queues),
        pod_groups=dict(sorted(groups.items())),
        group_events=tuple(group_events),
        explanations=tuple(explanations),
        notices=tuple(notices),
        evictions=tuple(evictions),
        group_creations=tuple(creations),
        group_resizes=tuple(resizes),
        native_groups=tuple(native),
        unplaced_events=tuple(unplaced_events),
        unplaced=unplaced,
    )
