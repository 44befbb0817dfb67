"""The queue state machine and the close cascade (spec §4.4), as pure functions.

Volcano's queue controller moves a queue between ``Open``, ``Closing`` and ``Closed`` on three
actions: ``OpenQueue`` and ``CloseQueue`` (requests) and ``SyncQueue`` (any change to the queue
or to its pod groups). Closing a parent closes its children first and marks them
``volcano.sh/closed-by-parent: "true"``; reopening the parent reopens exactly those children.
The root queue is never closed.

queuetree holds the whole tree in memory, so instead of Volcano's work queue of per-queue
actions it decides the whole tree at once, top-down (:func:`reconcile_states`): a parent's new
state is known before its children are decided, so one call reaches the fixed point that
Volcano reaches after a chain of re-queued actions. Neighbours: ``queuetree.operator.cycle``
derives the requests from what it observes and writes the verdicts back as queue status.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping

from queuetree.core import objects

_CLOSED_OR_CLOSING = frozenset({objects.QueueState.CLOSED, objects.QueueState.CLOSING})


class QueueAction(enum.StrEnum):
    """Volcano's queue actions (``bus.volcano.sh`` Command actions and the controller's sync)."""

    OPEN = "OpenQueue"
    CLOSE = "CloseQueue"
    SYNC = "SyncQueue"


def read_state(raw: str) -> objects.QueueState:
    """``status.state`` as written: "" reads as Open, anything unrecognised as Unknown."""
    if raw == "":
        return objects.QueueState.OPEN
    try:
        return objects.QueueState(raw)
    except ValueError:
        return objects.QueueState.UNKNOWN


def transition(
    current: objects.QueueState, action: QueueAction, *, has_pod_groups: bool
) -> objects.QueueState:
    """The next state of one queue, exactly the table of spec §4.4.

    ``has_pod_groups`` counts every pod group of the queue in any phase, Completed included: a
    queue only becomes Closed when all of them are deleted. A sync leaves Open, Closed and
    Unknown as they are and finishes a Closing queue once it has no pod groups left.
    """
    closed_or_closing = objects.QueueState.CLOSING if has_pod_groups else objects.QueueState.CLOSED
    if action is QueueAction.OPEN:
        return objects.QueueState.OPEN
    if action is QueueAction.CLOSE:
        if current is objects.QueueState.CLOSED:
            return objects.QueueState.CLOSED
        return closed_or_closing
    if current is objects.QueueState.CLOSING:
        return closed_or_closing
    return current


@dataclasses.dataclass(frozen=True, slots=True)
class QueueNode:
    """What the controller knows of one queue when it decides."""

    name: str
    parent: str
    """The effective parent (``root`` for an empty ``spec.parent``; "" for root itself)."""
    state: objects.QueueState
    closed_by_parent: bool = False
    """The ``volcano.sh/closed-by-parent`` annotation is ``"true"``."""
    has_pod_groups: bool = False
    request: QueueAction = QueueAction.SYNC
    """An explicit open or close request for this queue; SYNC when there is none."""


@dataclasses.dataclass(frozen=True, slots=True)
class QueueVerdict:
    """The decided state of one queue and why, when it is worth telling a person."""

    name: str
    state: objects.QueueState
    closed_by_parent: bool
    message: str = ""
    """A Warning for the queue's events when a request was refused or overridden; else ""."""


_DETACHED = 1_000_000
"""Depth given to queues not connected to root, so they sort after the well-formed tree."""


def _depth_order(nodes: Mapping[str, QueueNode]) -> tuple[list[str], set[str]]:
    """Queue names, parents before children, and the names of the queues connected to root.

    Queues on a parent cycle or under a missing parent come after the well-formed tree, by name;
    they are decided on their own (their parent, if any, is ignored).
    """
    depths: dict[str, int] = {}

    def depth_of(name: str) -> int:
        seen: list[str] = []
        current = name
        while current not in depths:
            node = nodes.get(current)
            if node is None or not node.parent or current in seen:
                break
            seen.append(current)
            current = node.parent
        # A walk that ended on a cycle or a missing parent gives its whole path a large depth,
        # so such queues sort last and never wait for a parent that cannot be decided.
        base = depths.get(current, 0 if current == objects.ROOT_QUEUE else _DETACHED)
        for offset, visited in enumerate(reversed(seen), start=1):
            depths[visited] = base + offset
        return depths.get(name, base)

    order = sorted(nodes, key=lambda name: (depth_of(name), name))
    return order, {name for name in nodes if depth_of(name) < _DETACHED}


def reconcile_states(nodes: Mapping[str, QueueNode]) -> dict[str, QueueVerdict]:
    """Decide every queue's state and ``closed-by-parent`` mark, parents first.

    For each queue: apply its own request (an open request is refused, with a message, while a
    non-root parent is Closing or Closed); then follow the parent: a queue under a Closing or
    Closed parent is closed and marked closed by parent; a queue marked closed by parent under an
    Open parent is reopened and unmarked. The root queue is never closed: a request or a written
    state that would close it is reverted to Open, with a message.
    """
    verdicts: dict[str, QueueVerdict] = {}
    order, rooted = _depth_order(nodes)
    for name in order:
        node = nodes[name]
        if name == objects.ROOT_QUEUE:
            message = ""
            if node.state in _CLOSED_OR_CLOSING or node.request is QueueAction.CLOSE:
                message = "the root queue can never be closed; it stays Open"
            verdicts[name] = QueueVerdict(
                name=name,
                state=objects.QueueState.OPEN,
                closed_by_parent=node.closed_by_parent,
                message=message,
            )
            continue
        parent = verdicts.get(node.parent) if name in rooted else None
        parent_closed = parent is not None and parent.state in _CLOSED_OR_CLOSING
        message = ""
        state = node.state
        closed_by_parent = node.closed_by_parent
        request = node.request
        if request is QueueAction.OPEN and parent_closed and parent is not None:
            message = (
                f"Failed to open queue {name} because its parent queue {parent.name} is "
                "closing or closed. Open the parent queue first."
            )
            request = QueueAction.SYNC
        state = transition(state, request, has_pod_groups=node.has_pod_groups)
        if request is QueueAction.OPEN:
            closed_by_parent = False
        if parent_closed and state not in _CLOSED_OR_CLOSING:
            state = transition(state, QueueAction.CLOSE, has_pod_groups=node.has_pod_groups)
            closed_by_parent = True
        elif (
            parent is not None
            and parent.state is objects.QueueState.OPEN
            and state in _CLOSED_OR_CLOSING
            and closed_by_parent
        ):
            state = objects.QueueState.OPEN
            closed_by_parent = False
        verdicts[name] = QueueVerdict(
            name=name, state=state, closed_by_parent=closed_by_parent, message=message
        )
    return verdicts
