"""Conditions: whether a queue admits pods, and if not, the one reason a person acts on; and
whether a PodGroup is admitted to its queue (:class:`GroupCondition`).

Every queue carries one readiness condition. Its inputs are the queue's state (decided by the
operator's state machine) and the faults the session found in the tree (:class:`Fault`,
recorded by the capacity plugin while it links and checks the tree: a parent cycle, a missing
parent, work in a non-leaf queue, a capability above the parent's, ...). :func:`readiness`
turns them into one :class:`Readiness`: the first fault in :class:`QueueReason` order wins,
so the same inputs always give the same condition, and a queue with several problems reports
the one that blocks it first.

Some faults do not stop a queue from admitting (a capability above the parent's is capped by
the parent; children whose deserved exceeds the parent's are only over-promised): the queue
stays ready, and the reason says what is off. Neighbours: ``capacity`` records the faults,
``sessions`` returns them (``SessionResult.queue_faults``), the operator writes the condition
and raises an event when it changes.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable

from queuetree.core import objects


class QueueReason(enum.StrEnum):
    """The reason of a queue's readiness condition, most urgent first (the order is the
    precedence :func:`readiness` applies)."""

    TERMINATING = "Terminating"
    """The queue was deleted and stays while pods are charged to it: it admits no new pods."""
    HIERARCHY_CYCLE = "HierarchyCycle"
    """The queue is on a ``spec.parent`` cycle: it and the queues below it admit nothing."""
    PARENT_NOT_FOUND = "ParentNotFound"
    """``spec.parent`` names a queue that does not exist."""
    TOO_DEEP = "TooDeep"
    """More than ``objects.MAX_QUEUE_DEPTH`` levels below root."""
    ANCESTOR_NOT_READY = "AncestorNotReady"
    """An ancestor is on a cycle, misses its parent or is too deep."""
    CLOSED = "Closed"
    CLOSING = "Closing"
    STATE_UNKNOWN = "StateUnknown"
    NOT_LEAF_WITH_WORKLOADS = "NotLeafWithWorkloads"
    """The queue has child queues and pod groups of its own: those pod groups are held back
    (only leaf queues admit)."""
    CAPABILITY_ABOVE_PARENT = "CapabilityAboveParent"
    """``spec.capability`` exceeds the parent's on some resource: the parent's limit applies."""
    CHILDREN_OVER_PARENT = "ChildrenOverParent"
    """The children's deserved (or guarantee) add up to more than the queue's own."""
    READY = "Ready"


BLOCKING = frozenset(
    {
        QueueReason.TERMINATING,
        QueueReason.HIERARCHY_CYCLE,
        QueueReason.PARENT_NOT_FOUND,
        QueueReason.TOO_DEEP,
        QueueReason.ANCESTOR_NOT_READY,
        QueueReason.CLOSED,
        QueueReason.CLOSING,
        QueueReason.STATE_UNKNOWN,
        QueueReason.NOT_LEAF_WITH_WORKLOADS,
    }
)
"""Reasons whose queue is not ready: it admits none of its pods."""

_PRECEDENCE = {reason: rank for rank, reason in enumerate(QueueReason)}


@dataclasses.dataclass(frozen=True, slots=True)
class Fault:
    """One problem of one queue, found by the session, in words a person can act on."""

    reason: QueueReason
    message: str


@dataclasses.dataclass(frozen=True, slots=True)
class Readiness:
    """A queue's readiness condition: ready or not, the reason, and what to do."""

    ready: bool
    reason: QueueReason
    message: str


def readiness(
    name: str,
    *,
    state: objects.QueueState,
    faults: Iterable[Fault] = (),
    closed_by_parent: bool = False,
) -> Readiness:
    """The readiness of queue ``name`` in ``state`` with the session's ``faults``.

    The tree's faults come before the state (a queue on a cycle that is also closed is told
    about the cycle: opening it would not help). Ties between faults of the same reason keep
    their order (the session reports them in a stable order).
    """
    found = list(faults)
    if state is not objects.QueueState.OPEN:
        found.append(_state_fault(name, state, closed_by_parent=closed_by_parent))
    if not found:
        return Readiness(ready=True, reason=QueueReason.READY, message=f"queue {name!r} is Open")
    first = min(found, key=lambda fault: _PRECEDENCE[fault.reason])
    return Readiness(ready=first.reason not in BLOCKING, reason=first.reason, message=first.message)


def _state_fault(name: str, state: objects.QueueState, *, closed_by_parent: bool) -> Fault:
    if state is objects.QueueState.UNKNOWN:
        return Fault(
            QueueReason.STATE_UNKNOWN,
            f"queue {name!r}: status.state is not Open, Closed or Closing; it admits nothing "
            "until it is written Open or Closed",
        )
    reason = QueueReason.CLOSED if state is objects.QueueState.CLOSED else QueueReason.CLOSING
    cause = " with its parent" if closed_by_parent else ""
    what = (
        "open the parent first"
        if closed_by_parent
        else f"open it with `kubectl queuetree open {name}` (writes status.state Open)"
    )
    pending = (
        "; it becomes Closed once its pod groups are gone" if reason is QueueReason.CLOSING else ""
    )
    return Fault(
        reason, f"queue {name!r} is {state}{cause}: it admits no new pods{pending}; {what}"
    )


GROUP_CONDITION = "Unschedulable"
"""The type of a PodGroup's admission condition: Volcano's ``PodGroupUnschedulableType``.
``True`` while the group waits for its queue (or was sent back to wait), ``False`` once its
queue admitted it (Inqueue). Volcano's job controller turns the latest ``True`` condition of a
job's PodGroup that is not ``Scheduled`` into a Warning event on the job, so the reason a
group waits reaches ``kubectl describe`` of the job too."""


class GroupReason(enum.StrEnum):
    """The reason of a PodGroup's admission condition."""

    INQUEUE = "Inqueue"
    """False: the queue admitted the group; its ``minResources`` are held there for its pods.
    ``lastTransitionTime`` is when it last entered Inqueue: the start of its bound."""
    NOT_ENOUGH_RESOURCES = "NotEnoughResources"
    """True: the queue (or an ancestor) has no room for the group's ``minResources`` (Volcano's
    reason for a gang that does not fit)."""
    QUEUE_NOT_ADMITTING = "QueueNotAdmitting"
    """True: the queue admits nothing (not Open, not a leaf, cut off from the tree, or it does
    not exist)."""
    OUTSIDE_QUEUE_ADMISSION = "OutsideQueueAdmission"
    """True: the group's pods run outside queue admission (none opted in), so its queue admits
    nothing for it and it holds nothing there."""
    INQUEUE_TIMEOUT = "InqueueTimeout"
    """True: the group had no pod within the bound after it entered Inqueue, and its room was
    given back (``--inqueue-timeout``). ``lastTransitionTime`` is when."""


@dataclasses.dataclass(frozen=True, slots=True)
class GroupCondition:
    """The admission condition a session wants a PodGroup to show (type
    :data:`GROUP_CONDITION`)."""

    unschedulable: bool
    """The condition's status: True while the group waits."""
    reason: GroupReason
    message: str
    renew: bool = False
    """The group enters Inqueue in this session (its written phase is another): should its
    condition already say Inqueue (it ran, lost its pods and was enqueued anew),
    ``lastTransitionTime`` still moves to now, since it starts the group's bound again."""
