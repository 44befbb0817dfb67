"""The queue state machine (spec §4.4) and the close cascade, as tables."""

from __future__ import annotations

from typing import Any, NamedTuple

import pytest

from queuetree.core import objects
from queuetree.operator import queue_states

OPEN = objects.QueueState.OPEN
CLOSED = objects.QueueState.CLOSED
CLOSING = objects.QueueState.CLOSING
UNKNOWN = objects.QueueState.UNKNOWN
OPEN_Q = queue_states.QueueAction.OPEN
CLOSE_Q = queue_states.QueueAction.CLOSE
SYNC_Q = queue_states.QueueAction.SYNC


# (current, action, has pod groups) -> next: every cell of the table in spec §4.4.
class TransitionsCase(NamedTuple):
    current: Any
    action: Any
    has_pod_groups: Any
    expected: Any


TRANSITIONS = {
    "open stays open on open": TransitionsCase(
        current=OPEN, action=OPEN_Q, has_pod_groups=True, expected=OPEN
    ),
    "open without pod groups closes at once": TransitionsCase(
        current=OPEN, action=CLOSE_Q, has_pod_groups=False, expected=CLOSED
    ),
    "open with pod groups starts closing": TransitionsCase(
        current=OPEN, action=CLOSE_Q, has_pod_groups=True, expected=CLOSING
    ),
    "open stays open on sync": TransitionsCase(
        current=OPEN, action=SYNC_Q, has_pod_groups=True, expected=OPEN
    ),
    "closed reopens": TransitionsCase(
        current=CLOSED, action=OPEN_Q, has_pod_groups=False, expected=OPEN
    ),
    "closed stays closed on close": TransitionsCase(
        current=CLOSED, action=CLOSE_Q, has_pod_groups=True, expected=CLOSED
    ),
    "closed stays closed on sync": TransitionsCase(
        current=CLOSED, action=SYNC_Q, has_pod_groups=True, expected=CLOSED
    ),
    "closing reopens": TransitionsCase(
        current=CLOSING, action=OPEN_Q, has_pod_groups=True, expected=OPEN
    ),
    "closing finishes on close without pod groups": TransitionsCase(
        current=CLOSING, action=CLOSE_Q, has_pod_groups=False, expected=CLOSED
    ),
    "closing stays closing on close with pod groups": TransitionsCase(
        current=CLOSING, action=CLOSE_Q, has_pod_groups=True, expected=CLOSING
    ),
    "closing finishes on sync without pod groups": TransitionsCase(
        current=CLOSING, action=SYNC_Q, has_pod_groups=False, expected=CLOSED
    ),
    "closing stays closing on sync with pod groups": TransitionsCase(
        current=CLOSING, action=SYNC_Q, has_pod_groups=True, expected=CLOSING
    ),
    "unknown opens": TransitionsCase(
        current=UNKNOWN, action=OPEN_Q, has_pod_groups=True, expected=OPEN
    ),
    "unknown closes without pod groups": TransitionsCase(
        current=UNKNOWN, action=CLOSE_Q, has_pod_groups=False, expected=CLOSED
    ),
    "unknown starts closing with pod groups": TransitionsCase(
        current=UNKNOWN, action=CLOSE_Q, has_pod_groups=True, expected=CLOSING
    ),
    "unknown stays unknown on sync": TransitionsCase(
        current=UNKNOWN, action=SYNC_Q, has_pod_groups=False, expected=UNKNOWN
    ),
}


@pytest.mark.parametrize(
    ("current", "action", "has_pod_groups", "expected"),
    list(TRANSITIONS.values()),
    ids=list(TRANSITIONS),
)
def test_transition_follows_the_table_of_the_spec(
    current: objects.QueueState,
    action: queue_states.QueueAction,
    has_pod_groups: bool,
    expected: objects.QueueState,
) -> None:
    assert queue_states.transition(current, action, has_pod_groups=has_pod_groups) is expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("", OPEN), ("Open", OPEN), ("Closing", CLOSING), ("Closed", CLOSED), ("Weird", UNKNOWN)],
    ids=["empty reads as open", "open", "closing", "closed", "anything else is unknown"],
)
def test_read_state_maps_written_values(raw: str, expected: objects.QueueState) -> None:
    assert queue_states.read_state(raw) is expected


def node(
    name: str,
    parent: str,
    state: objects.QueueState = OPEN,
    *,
    marked: bool = False,
    busy: bool = False,
    request: queue_states.QueueAction = SYNC_Q,
) -> queue_states.QueueNode:
    return queue_states.QueueNode(
        name=name,
        parent=parent,
        state=state,
        closed_by_parent=marked,
        has_pod_groups=busy,
        request=request,
    )


def verdict(
    name: str, state: objects.QueueState, *, marked: bool = False, message: str = ""
) -> queue_states.QueueVerdict:
    return queue_states.QueueVerdict(
        name=name, state=state, closed_by_parent=marked, message=message
    )


REFUSED = (
    "Failed to open queue leaf because its parent queue team is closing or closed. "
    "Open the parent queue first."
)


class TreesCase(NamedTuple):
    nodes: Any
    expected: Any


TREES = {
    "an open tree stays open": TreesCase(
        nodes=[node("root", ""), node("team", "root"), node("leaf", "team")],
        expected=[verdict("root", OPEN), verdict("team", OPEN), verdict("leaf", OPEN)],
    ),
    "closing a parent closes every descendant and marks them": TreesCase(
        nodes=[
            node("root", ""),
            node("team", "root", CLOSED),
            node("leaf", "team", busy=True),
            node("idle", "team"),
            node("deep", "leaf"),
        ],
        expected=[
            verdict("root", OPEN),
            verdict("team", CLOSED),
            verdict("deep", CLOSED, marked=True),
            verdict("idle", CLOSED, marked=True),
            verdict("leaf", CLOSING, marked=True),
        ],
    ),
    "reopening a parent reopens only the children it closed": TreesCase(
        nodes=[
            node("root", ""),
            node("team", "root", OPEN),
            node("leaf", "team", CLOSED, marked=True),
            node("own", "team", CLOSED),
        ],
        expected=[
            verdict("root", OPEN),
            verdict("team", OPEN),
            verdict("leaf", OPEN),
            verdict("own", CLOSED),
        ],
    ),
    "a closing queue finishes once its pod groups are gone": TreesCase(
        nodes=[node("root", ""), node("leaf", "root", CLOSING)],
        expected=[verdict("root", OPEN), verdict("leaf", CLOSED)],
    ),
    "opening a child of a closed parent is refused": TreesCase(
        nodes=[
            node("root", ""),
            node("team", "root", CLOSED),
            node("leaf", "team", OPEN, marked=True, request=OPEN_Q),
        ],
        expected=[
            verdict("root", OPEN),
            verdict("team", CLOSED),
            verdict("leaf", CLOSED, marked=True, message=REFUSED),
        ],
    ),
    "the root queue is never closed": TreesCase(
        nodes=[node("root", "", CLOSED), node("leaf", "root")],
        expected=[
            verdict("root", OPEN, message="the root queue can never be closed; it stays Open"),
            verdict("leaf", OPEN),
        ],
    ),
    "queues on a parent cycle are decided on their own": TreesCase(
        nodes=[node("root", ""), node("a", "b"), node("b", "a", CLOSING)],
        expected=[verdict("root", OPEN), verdict("a", OPEN), verdict("b", CLOSED)],
    ),
}


@pytest.mark.parametrize(("nodes", "expected"), list(TREES.values()), ids=list(TREES))
def test_reconcile_states_decides_the_whole_tree(
    nodes: list[queue_states.QueueNode], expected: list[queue_states.QueueVerdict]
) -> None:
    verdicts = queue_states.reconcile_states({n.name: n for n in nodes})
    assert verdicts == {v.name: v for v in expected}
