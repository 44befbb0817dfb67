"""What the queue controller writes: queue states, marks, parents and status, as pure plans.

:func:`plan_queue_writes` compares what the watches show (``StateView.queue_records``) with what
the last session decided (``SessionResult.queues``) and the state machine's verdicts, and returns
only the writes that change something: a status merge patch with just the keys that differ, a
metadata/spec merge patch for the ``closed-by-parent`` mark and a defaulted ``spec.parent``, and
the Warning events of refused requests. Writing nothing when nothing changed keeps the API quiet
(kueue #8095: status writes of idle objects slow admission down).

Each queue's readiness condition (``core.conditions.readiness`` over its decided state and the
session's faults) is written only when its status, reason or message changes; such a write
carries the transition, which the cycle turns into one event on the queue and one log line.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from queuetree.api import bodies, statuses
from queuetree.core import conditions, decisions, inqueue_bounds, objects, resources
from queuetree.operator import queue_states, state

_PHASE_COUNTERS = {
    objects.PodGroupPhase.UNKNOWN: "unknown",
    objects.PodGroupPhase.PENDING: "pending",
    objects.PodGroupPhase.RUNNING: "running",
    objects.PodGroupPhase.INQUEUE: "inqueue",
    objects.PodGroupPhase.COMPLETED: "completed",
}
_CLOSED_OR_CLOSING = frozenset({objects.QueueState.CLOSED, objects.QueueState.CLOSING})


@dataclasses.dataclass(frozen=True, slots=True)
class QueueWrite:
    """The writes for one queue; an empty mapping means "nothing to write there"."""

    name: str
    status: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """Merge patch of the ``status`` subresource."""
    meta: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """Merge patch of the main resource (annotations, ``spec.parent``)."""
    warning: str = ""
    """Text of a Warning event on the queue, "" for none."""
    transition: conditions.Readiness | None = None
    """The queue's new readiness condition, when this write changes it (an event to raise)."""
    uid: str = ""
    """The queue's uid: ``kubectl describe queue`` selects its events by it."""


def count_pod_groups(snapshot: objects.Snapshot) -> dict[str, dict[str, int]]:
    """Queue name -> the five PodGroup phase counters of ``status``, every phase present."""
    tally: collections.Counter[tuple[str, objects.PodGroupPhase]] = collections.Counter(
        (group.queue, group.phase) for group in snapshot.pod_groups.values()
    )
    return counts_of(snapshot.queues, tally)


def counts_of(
    queues: Iterable[str], tally: Mapping[tuple[str, objects.PodGroupPhase], int]
) -> dict[str, dict[str, int]]:
    """:func:`count_pod_groups` from a tally of pod groups by (queue, phase), such as the one
    the state keeps (``state.StateView.group_tally``)."""
    counts: dict[str, dict[str, int]] = {
        name: dict.fromkeys(_PHASE_COUNTERS.values(), 0) for name in queues
    }
    for (queue, phase), number in tally.items():
        queue_counts = counts.get(queue)
        if queue_counts is not None:
            queue_counts[_PHASE_COUNTERS[phase]] += number
    return counts


def view_counts(view: state.StateView) -> dict[str, dict[str, int]]:
    """:func:`count_pod_groups` of ``view.snapshot``, from the state's tally when it has one."""
    if view.group_tally is None:
        return count_pod_groups(view.snapshot)
    return counts_of(view.snapshot.queues, view.group_tally)


def derive_request(
    record: state.QueueRecord, *, parent_state: objects.QueueState | None, has_pod_groups: bool
) -> queue_states.QueueAction:
    """The request a person expressed by writing ``status.state`` themselves.

    queuetree has no ``bus.volcano.sh`` Command objects: a person closes or opens a queue by
    writing its ``status.state``. ``Closed`` written on a queue that still has pod groups is read
    as a close request (it becomes Closing until they are gone); ``Open`` written on a queue that
    is marked closed by a parent that is still closed is read as an open request, which is then
    refused with the message of spec §4.4. Everything else is a plain sync.
    """
    current = queue_states.read_state(str(record.status.get("state", "")))
    closed_by_parent = record.queue.annotations.get(objects.CLOSED_BY_PARENT_ANNOTATION) == "true"
    if current is objects.QueueState.CLOSED and has_pod_groups and not closed_by_parent:
        return queue_states.QueueAction.CLOSE
    if (
        current is objects.QueueState.OPEN
        and closed_by_parent
        and parent_state in _CLOSED_OR_CLOSING
    ):
        return queue_states.QueueAction.OPEN
    return queue_states.QueueAction.SYNC


def decide_states(
    view: state.StateView, *, counts: Mapping[str, Mapping[str, int]]
) -> dict[str, queue_states.QueueVerdict]:
    """Run the state machine over every queue the watches show (``counts``: the view's
    :func:`count_pod_groups`)."""
    nodes: dict[str, queue_states.QueueNode] = {}
    for name, record in view.queue_records.items():
        has_pod_groups = any(counts.get(name, {}).values())
        parent_record = view.queue_records.get(record.queue.parent_name)
        parent_state = (
            None
            if parent_record is None
            else queue_states.read_state(str(parent_record.status.get("state", "")))
        )
        current = queue_states.read_state(str(record.status.get("state", "")))
        request = derive_request(record, parent_state=parent_state, has_pod_groups=has_pod_groups)
        if request is queue_states.QueueAction.CLOSE and current is objects.QueueState.CLOSED:
            # The Closed a person wrote is the request, not the state: the queue was open until
            # then, and is Closing while it has pod groups (spec §4.4's close of an Open queue).
            current = objects.QueueState.OPEN
        nodes[name] = queue_states.QueueNode(
            name=name,
            parent=record.queue.parent_name,
            state=current,
            closed_by_parent=(
                record.queue.annotations.get(objects.CLOSED_BY_PARENT_ANNOTATION) == "true"
            ),
            has_pod_groups=has_pod_groups,
            request=request,
        )
    return queue_states.reconcile_states(nodes)


def desired_status(
    *,
    verdict: queue_states.QueueVerdict,
    counts: Mapping[str, int],
    figures: decisions.QueueFigures | None,
) -> dict[str, Any]:
    """The status keys the controller owns for one queue.

    Figures are written only when the last session produced them for the queue (it does not
    for a queue on a parent cycle, for instance); otherwise the previous figures are left alone.
    """
    status: dict[str, Any] = {"state": str(verdict.state), **counts}
    if figures is not None:
        # ``pods`` counts pods, as Volcano's scheduler writes it: the webhook reads it to keep
        # a busy queue from being deleted or getting a first child.
        status["allocated"] = {
            **statuses.amount_value(figures.allocated),
            resources.PODS: str(figures.allocated_pods),
        }
        status["reserved"] = {
            **statuses.amount_value(figures.reserved),
            resources.PODS: str(figures.reserved_pods),
        }
        status["deserved"] = statuses.amount_value(figures.deserved)
        status["realCapability"] = resources.to_resource_list(figures.real_capability)
    return status


def busy_changed(write: QueueWrite) -> bool:
    """Whether ``write`` changes how many pods a queue counts (allocated or reserved): what
    ``kubectl get queues`` and the webhook's deletion and first-child checks read, so it is
    written at the next cycle, never paced (issue 35: a queue whose two pods were admitted
    together showed none until its figures were next refreshed). The other figures ride along.
    """
    for figure in ("allocated", "reserved"):
        patch = write.status.get(figure)
        # The patch carries only what changed: a count in it is a count that moved.
        if isinstance(patch, Mapping) and resources.PODS in patch:
            return True
    return False


def merge_patch_value(current: Any, desired: Any) -> Any:
    """The merge-patch value that turns ``current`` into ``desired`` (RFC 7386).

    A merge patch only adds and replaces map keys, so a resource that left a quantity map (the
    last GPU pod of a queue finished) must be sent as ``null``, or the stale figure stays in the
    status for ever and the status is rewritten every cycle.
    """
    if not isinstance(desired, Mapping) or not isinstance(current, Mapping):
        return desired
    patch: dict[str, Any] = {key: None for key in current if key not in desired}
    for key, value in desired.items():
        if current.get(key) != value:
            patch[key] = merge_patch_value(current.get(key), value)
    return patch


class _PlanInputs(NamedTuple):
    """What one queue's plan is computed from."""

    record: state.QueueRecord
    verdict: queue_states.QueueVerdict
    counts: Mapping[str, int]
    figures: decisions.QueueFigures | None
    faults: tuple[conditions.Fault, ...]
    without_result: bool

    def same_as(self, other: _PlanInputs) -> bool:
        # The record by identity (its status is a deep mapping, and a watch event always
        # brings a new object); the rest by value.
        return self.record is other.record and self[1:] == other[1:]


PlanMemo = dict[str, tuple[_PlanInputs, "QueueWrite | None"]]
"""Queue name -> what one queue's plan was computed from, and the write it gave (None: none);
what :func:`plan_queue_writes` reuses while a queue's inputs stay the same."""


def plan_queue_writes(
    view: state.StateView,
    result: decisions.SessionResult | None,
    *,
    now: str = "",
    memo: PlanMemo | None = None,
) -> list[QueueWrite]:
    """Every queue write that changes something, by queue name. ``now`` (RFC 3339) is the
    ``lastTransitionTime`` of a readiness condition that flips; without a session result no
    condition is planned (the faults are the session's).

    ``memo`` (kept by the caller from one call to the next) skips the queues whose inputs are
    what they were at the last call: the same record (the same object: a watch event replaces
    it), verdict, counters, figures and faults give the same write, so it is reused, with the
    ``now`` of the call that computed it (the time the flip was first seen). Under a stream of
    pods most queues' figures change at every cycle, but their records only when a write of
    ours comes back; tests/operator/test_queue_status.py checks that a memo never changes a
    plan.
    """
    counts = view_counts(view)
    verdicts = decide_states(view, counts=counts)
    figures = result.queues if result is not None else {}
    faults = result.queue_faults if result is not None else {}
    writes: list[QueueWrite] = []
    for name in sorted(view.queue_records):
        record = view.queue_records[name]
        inputs = _PlanInputs(
            record,
            verdicts[name],
            counts.get(name, {}),
            figures.get(name),
            faults.get(name, ()),
            result is None,
        )
        if memo is not None:
            previous = memo.get(name)
            if previous is not None and previous[0].same_as(inputs):
                if previous[1] is not None:
                    writes.append(previous[1])
                continue
        write = _plan_queue_write(name, inputs, now=now)
        if memo is not None:
            memo[name] = (inputs, write)
        if write is not None:
            writes.append(write)
    if memo is not None and len(memo) > len(view.queue_records):
        for name in memo.keys() - view.queue_records.keys():
            del memo[name]
    return writes


def _plan_queue_write(name: str, inputs: _PlanInputs, *, now: str) -> QueueWrite | None:
    """The write of one queue from the inputs :func:`plan_queue_writes` gathered, or None."""
    record, verdict, counts, figures, faults, without_result = inputs
    desired = desired_status(verdict=verdict, counts=counts, figures=figures)
    status_patch = {
        key: merge_patch_value(record.status.get(key), value)
        for key, value in desired.items()
        if record.status.get(key) != value
    }
    transition = None
    if not without_result:
        ready = conditions.readiness(
            name,
            state=verdict.state,
            faults=faults,
            closed_by_parent=verdict.closed_by_parent,
        )
        if not statuses.same_condition(statuses.read_condition(record.status), ready):
            status_patch["conditions"] = statuses.conditions_value(record.status, ready, now=now)
            transition = ready
    marked = record.queue.annotations.get(objects.CLOSED_BY_PARENT_ANNOTATION)
    wanted_mark = "true" if verdict.closed_by_parent else "false"
    mark = None
    if (marked == "true") != verdict.closed_by_parent and (
        marked is not None or verdict.closed_by_parent
    ):
        mark = {objects.CLOSED_BY_PARENT_ANNOTATION: wanted_mark}
    orphan = name != objects.ROOT_QUEUE and not record.queue.parent
    meta = bodies.queue_patch(annotations=mark, parent=objects.ROOT_QUEUE if orphan else None)
    if not (status_patch or meta or verdict.message):
        return None
    return QueueWrite(
        name=name,
        status=status_patch,
        meta=meta,
        warning=verdict.message,
        transition=transition,
        uid=record.queue.uid,
    )


COUNT_FIELDS = frozenset({"running", "succeeded", "failed"})
"""The pod counts of a PodGroup's status (figures: the cycle paces writes of these alone)."""


def plan_pod_group_status(
    groups: Mapping[str, objects.PodGroup], result: decisions.SessionResult | None
) -> dict[str, dict[str, Any]]:
    """PodGroup key -> a merge patch of its ``status`` with what the session decided and the
    object does not show yet (``phase``, and the counts ``running``, ``succeeded`` and
    ``failed``, as Volcano's scheduler writes them), in key order.

    Only real PodGroups (``groups``: the view's ``pod_groups``): the single-pod group of a pod
    without one exists in no API object. Walks the real groups, not the result, which also
    holds the single-pod group of every lone pod of the cluster.
    """
    if result is None:
        return {}
    changed: dict[str, dict[str, Any]] = {}
    for key in sorted(groups):
        group = groups[key]
        if group.synthetic:
            continue
        patch: dict[str, Any] = {}
        phase = result.pod_groups.get(key)
        fresh = not group.status_written  # never written: fill the columns, defaults included
        if phase is not None and (fresh or group.phase is not phase):
            patch["phase"] = str(phase)
        counts = result.group_counts.get(key)
        if counts is not None and (fresh or counts != group.counts):
            patch.update(running=counts.running, succeeded=counts.succeeded, failed=counts.failed)
        if patch:
            changed[key] = patch
    return changed


@dataclasses.dataclass(frozen=True, slots=True)
class GroupEvent:
    """An Event about a PodGroup whose admission condition changed (sent once its status is
    written)."""

    key: str
    uid: str
    type: str
    """``Normal`` or ``Warning``."""
    reason: str
    message: str
    owner: objects.OwnerReference | None = None
    """The group's workload, told the same (``kubectl describe job`` shows it)."""


_GROUP_EVENTS: Mapping[conditions.GroupReason, tuple[str, str]] = {
    conditions.GroupReason.INQUEUE: ("Normal", "Inqueue"),
    conditions.GroupReason.NOT_ENOUGH_RESOURCES: ("Normal", "Unschedulable"),
    conditions.GroupReason.QUEUE_NOT_ADMITTING: ("Normal", "Unschedulable"),
    conditions.GroupReason.OUTSIDE_QUEUE_ADMISSION: ("Warning", "OutsideQueueAdmission"),
    conditions.GroupReason.INQUEUE_TIMEOUT: ("Warning", "InqueueTimeout"),
}
"""The type and reason of the Event each condition raises (``Unschedulable`` is the reason of
Volcano's event when enqueue refuses a group)."""


def plan_group_conditions(
    groups: Mapping[str, objects.PodGroup],
    result: decisions.SessionResult | None,
    *,
    now: str,
    budget: int,
) -> tuple[dict[str, list[dict[str, Any]]], list[GroupEvent]]:
    """PodGroup key -> the ``status.conditions`` to write, with the admission condition the
    session wants (``SessionResult.group_conditions``) where the group shows another, and the
    Events of the changes, in key order. ``now`` (RFC 3339) stamps a condition that flips.

    A change of status or reason (the group was admitted, refused, released), and a group
    entering Inqueue again (``renew``), is always planned, with its Event; a new message alone
    (the figures of a refusal moved) is planned for at most ``budget`` groups, without one, so
    a busy cluster's waiting groups do not cost a status write each per cycle.
    """
    if result is None:
        return {}, []
    changes: dict[str, list[dict[str, Any]]] = {}
    events: list[GroupEvent] = []
    refreshes = 0
    for key, wanted in result.group_conditions.items():
        group = groups.get(key)
        if group is None or group.synthetic:
            continue
        current = inqueue_bounds.admission_condition(group)
        status = "True" if wanted.unschedulable else "False"
        changed = current is None or (current.status, current.reason) != (status, wanted.reason)
        if not (changed or wanted.renew):
            if current is not None and current.message == wanted.message:
                continue
            if refreshes >= budget:
                continue
            refreshes += 1
        changes[key] = statuses.group_conditions_value(group.conditions, wanted, now=now)
        if changed:
            kind, reason = _GROUP_EVENTS[wanted.reason]
            events.append(
                GroupEvent(key, group.uid, kind, reason, wanted.message, owner=group.owner)
            )
    return changes, events
