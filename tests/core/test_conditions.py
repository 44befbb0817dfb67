"""Queue conditions, admission order and remedies: what the session tells about queues and pods.

The faults come from the capacity plugin as it links the tree; ``conditions.readiness`` turns
them, with the queue's state, into the one condition a queue carries.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import pytest

from queuetree.core import conditions, configs, objects, sessions
from tests import builders as b

R = conditions.QueueReason
INQUEUE = objects.PodGroupPhase.INQUEUE
NODE = b.node("n1").allocatable(cpu="8", memory="8Gi", pods="20")
CONFIG = b.config(
    [b.plugin("priority"), b.plugin("gang"), b.plugin("conformance")],
    [b.plugin("predicates"), b.plugin("capacity", hierarchy=True), b.plugin("nodeorder")],
)


def _run(
    *items: b.Buildable | b.QueueBuilder | b.PodGroupBuilder | b.PodBuilder | b.NodeBuilder,
    config: configs.SchedulerConfiguration = CONFIG,
) -> sessions.decisions.SessionResult:
    return sessions.run_session(
        b.snapshot(NODE, *items), config=config, feature_gates=b.GATES_ON, admission_only=True
    )


def _ready(result: sessions.decisions.SessionResult, queue: objects.Queue) -> tuple[bool, str]:
    found = conditions.readiness(
        queue.name, state=queue.state, faults=result.queue_faults.get(queue.name, ())
    )
    return found.ready, found.reason


def _gated(
    name: str, queue: str, *, cpu: str = "1", seconds: int = 0, priority: bool = False
) -> tuple[b.PodGroupBuilder, b.PodBuilder]:
    return (
        b.pod_group("ns", name)
        .queue(queue)
        .phase(INQUEUE)
        .priority_class("high" if priority else "")
        .created(seconds),
        b.pod("ns", name).group(name).requests(cpu=cpu, memory="1Gi").admission().created(seconds),
    )


@dataclasses.dataclass(frozen=True)
class Case:
    queues: tuple[b.QueueBuilder, ...]
    expected: dict[str, tuple[bool, str]]
    extra: tuple[b.PodGroupBuilder | b.PodBuilder, ...] = ()


CASES = {
    "a sound tree is ready everywhere": Case(
        queues=(b.queue("root"), b.queue("a"), b.queue("b").parent("a")),
        expected={"root": (True, R.READY), "a": (True, R.READY), "b": (True, R.READY)},
    ),
    "a missing parent is ParentNotFound, and the queue below it AncestorNotReady": Case(
        queues=(b.queue("root"), b.queue("a").parent("gone"), b.queue("b").parent("a")),
        expected={"a": (False, R.PARENT_NOT_FOUND), "b": (False, R.ANCESTOR_NOT_READY)},
    ),
    "every queue on a cycle is HierarchyCycle": Case(
        queues=(b.queue("root"), b.queue("a").parent("b"), b.queue("b").parent("a")),
        expected={"a": (False, R.HIERARCHY_CYCLE), "b": (False, R.HIERARCHY_CYCLE)},
    ),
    "a closed queue is Closed, and a closing one Closing": Case(
        queues=(
            b.queue("root"),
            b.queue("a").state(objects.QueueState.CLOSED),
            b.queue("b").state(objects.QueueState.CLOSING),
        ),
        expected={"a": (False, R.CLOSED), "b": (False, R.CLOSING)},
    ),
    "a queue being deleted is Terminating, whatever else is off": Case(
        queues=(
            b.queue("root"),
            b.queue("a").deleting().state(objects.QueueState.CLOSED),
            b.queue("b").deleting().parent("gone"),
        ),
        expected={"a": (False, R.TERMINATING), "b": (False, R.TERMINATING)},
    ),
    "a cycle outranks a closed state (opening would not help)": Case(
        queues=(
            b.queue("root"),
            b.queue("a").parent("b").state(objects.QueueState.CLOSED),
            b.queue("b").parent("a"),
        ),
        expected={"a": (False, R.HIERARCHY_CYCLE)},
    ),
    "a parent with pod groups of its own is NotLeafWithWorkloads": Case(
        queues=(b.queue("root"), b.queue("org"), b.queue("team").parent("org")),
        extra=_gated("p1", "org"),
        expected={"org": (False, R.NOT_LEAF_WITH_WORKLOADS), "team": (True, R.READY)},
    ),
    "a capability above the parent's is reported, and the queue still admits": Case(
        queues=(
            b.queue("root"),
            b.queue("org").capability(cpu="2"),
            b.queue("team").parent("org").capability(cpu="4"),
        ),
        expected={"team": (True, R.CAPABILITY_ABOVE_PARENT), "org": (True, R.READY)},
    ),
    "children deserving more than their parent are reported on the parent": Case(
        queues=(
            b.queue("root"),
            b.queue("org").deserved(cpu="2"),
            b.queue("x").parent("org").deserved(cpu="2"),
            b.queue("y").parent("org").deserved(cpu="1"),
        ),
        expected={"org": (True, R.CHILDREN_OVER_PARENT), "x": (True, R.READY)},
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_each_queue_gets_the_readiness_its_tree_and_state_give(case: Case) -> None:
    result = _run(*case.queues, *case.extra)
    queues = {q.build().name: q.build() for q in case.queues}
    actual = {name: _ready(result, queues[name]) for name in case.expected}
    assert actual == case.expected


class MessagesCase(NamedTuple):
    queues: Any
    name: Any
    words: Any


MESSAGES = {
    "a missing parent names it and says what to do": MessagesCase(
        queues=(b.queue("root"), b.queue("a").parent("gone")),
        name="a",
        words="queue 'a': spec.parent 'gone' does not exist, so it and the queues below it admit "
        "nothing; create queue 'gone' or set spec.parent to an existing queue",
    ),
    "a cycle names its loop": MessagesCase(
        queues=(b.queue("root"), b.queue("a").parent("b"), b.queue("b").parent("a")),
        name="b",
        words="queue 'b' is on a parent cycle (b -> a -> b)",
    ),
}


@pytest.mark.parametrize(("queues", "name", "words"), MESSAGES.values(), ids=MESSAGES.keys())
def test_a_fault_message_names_the_object_the_field_and_the_fix(
    queues: tuple[b.QueueBuilder, ...], name: str, words: str
) -> None:
    (fault,) = _run(*queues).queue_faults[name]
    assert words in fault.message


class StatesCase(NamedTuple):
    state: Any
    by_parent: Any
    words: Any


STATES = {
    "closed by hand": StatesCase(
        state=objects.QueueState.CLOSED, by_parent=False, words="kubectl queuetree open a"
    ),
    "closed with its parent": StatesCase(
        state=objects.QueueState.CLOSED, by_parent=True, words="open the parent first"
    ),
    "closing": StatesCase(
        state=objects.QueueState.CLOSING,
        by_parent=False,
        words="Closed once its pod groups are gone",
    ),
    "an unknown state": StatesCase(
        state=objects.QueueState.UNKNOWN,
        by_parent=False,
        words="until it is written Open or Closed",
    ),
}


@pytest.mark.parametrize(("state", "by_parent", "words"), STATES.values(), ids=STATES.keys())
def test_a_queue_that_is_not_open_is_told_how_to_open_it(
    state: objects.QueueState, by_parent: bool, words: str
) -> None:
    found = conditions.readiness("a", state=state, closed_by_parent=by_parent)
    assert (found.ready, words in found.message) == (False, True)


def test_the_admission_order_puts_higher_priority_then_older_pods_first() -> None:
    result = _run(
        b.queue("root"),
        b.queue("q").capability(cpu="1"),
        *_gated("old", "q", seconds=1),
        *_gated("young", "q", seconds=2),
        *_gated("urgent", "q", seconds=3, priority=True),
        objects.PriorityClass(name="high", value=1000),
    )
    assert dict(result.order) == {"q": ("ns/urgent", "ns/old", "ns/young")}


def test_a_pod_blocked_by_quota_is_told_how_much_room_it_needs() -> None:
    result = _run(
        b.queue("root"),
        b.queue("org").capability(cpu="2"),
        b.queue("team").parent("org"),
        *_gated("p1", "team", cpu="3"),
    )
    assert result.remedies == {
        "ns/p1": "1 more cpu must be free in queue 'team' (pods charged to it finishing or "
        "deleted), or its capability for cpu must be at least 3, for the pod to fit"
    }


def test_a_queue_being_deleted_admits_nothing_and_keeps_counting_its_pods() -> None:
    running = b.pod("ns", "running").requests(cpu="1", memory="1Gi").opted_in().admitted_to("q")
    result = _run(
        b.queue("root"), b.queue("q").deleting(), running.running_on("n1"), *_gated("p", "q")
    )
    (fault,) = result.queue_faults["q"]
    assert (
        result.ungate,
        result.remedies["ns/p"],
        result.queues["q"].allocated_pods,
        result.queues["root"].allocated_pods,
    ) == ((), "the pod group must move to another queue: 'q' goes once its pods finish", 1, 1)
    assert "kubectl patch queue q --type=json" in fault.message


def test_a_pod_of_a_closed_queue_is_told_to_open_it() -> None:
    result = _run(b.queue("root"), b.queue("q").state(objects.QueueState.CLOSED), *_gated("p", "q"))
    assert result.remedies == {"ns/p": "queue 'q' must be Open: kubectl queuetree open q"}
