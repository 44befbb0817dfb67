"""PodGroups that controllers wait on (issue 33, item 6): a group with no pod yet is enqueued
as Volcano's enqueue does, holds its minResources in its queue and every ancestor while
Inqueue, gives that room back when no pod comes within the bound, yields for one more bound,
then takes its turn again; each decision has the condition a person and a controller read.

Each table runs one admission session as the operator does (``admission_only``, the
operator's scheduler names, a bound of 300 s as of ``NOW``) and compares whole outcomes.
"""

from __future__ import annotations

import datetime
from typing import Any, NamedTuple

import pytest

from queuetree.core import conditions, decisions, inqueue_bounds, objects, sessions
from tests import builders as b

INQUEUE = objects.PodGroupPhase.INQUEUE
PENDING = objects.PodGroupPhase.PENDING
REASON = conditions.GroupReason

CONFIG = b.config(
    [b.plugin("priority"), b.plugin("gang"), b.plugin("conformance")],
    [b.plugin("predicates"), b.plugin("capacity", hierarchy=True), b.plugin("nodeorder")],
)
NODE = b.node("n1").allocatable(cpu="16", memory="16Gi", pods="100")
TIMEOUT = datetime.timedelta(seconds=300)
NOW = 1000
"""Seconds after ``b.at(0)``: the sessions' now."""
SCHEDULERS = frozenset({objects.DEFAULT_SCHEDULER})
QUEUES = (
    b.queue("root"),
    b.queue("org").capability(cpu="2"),
    b.queue("a").parent("org"),
    b.queue("b").parent("org"),
    b.queue("one").capability(cpu="1"),
    b.queue("closed").state(objects.QueueState.CLOSED),
)


def decide(*items: Any, bound: bool = True) -> decisions.SessionResult:
    """The operator's admission session over ``items``, bounded (or not) as of ``NOW``."""
    return sessions.run_session(
        b.snapshot(NODE, *QUEUES, *items),
        config=CONFIG,
        feature_gates=b.GATES_ON,
        admission_only=True,
        scheduler_names=SCHEDULERS,
        bound=inqueue_bounds.InqueueBound(timeout=TIMEOUT, now=b.at(NOW)) if bound else None,
    )


def group(name: str, queue: str, *, cpu: str = "1") -> b.PodGroupBuilder:
    """A PodGroup of minMember 1 and minResources ``cpu`` that no controller made pods for."""
    return b.pod_group("ns", name).queue(queue).min_member(1).min_resources(cpu=cpu).created(1)


def lone(name: str, queue: str, *, cpu: str = "500m", created: int = 5) -> tuple[Any, ...]:
    """A gated, opted-in pod of ``queue`` without a PodGroup, with the single-pod group the
    operator gives it."""
    pod = (
        b.pod("ns", name)
        .requests(cpu=cpu)
        .admission()
        .annotate(**{objects.QUEUE_NAME_ANNOTATION: queue})
        .created(created)
        .build()
    )
    return pod, objects.admission_lone_pod_group(pod)


def member(name: str, group_name: str) -> b.PodBuilder:
    """A gated, opted-in pod of PodGroup ``group_name``."""
    return b.pod("ns", name).group(group_name).requests(cpu="1").admission().created(7)


def condition(result: decisions.SessionResult, key: str) -> tuple[Any, ...] | None:
    found = result.group_conditions.get(key)
    if found is None:
        return None
    return (found.unschedulable, found.reason, found.message)


# -- enqueue: a group with no pod yet -----------------------------------------------------------


class EnqueueCase(NamedTuple):
    items: tuple[Any, ...]
    expected: tuple[Any, ...]
    """(phase, condition as ``condition`` gives it)."""


ADMITTED_ONE = (
    "admitted to queue 'one', which holds its minResources (cpu 1) for its pods; the room is "
    "given back if the group has no pod 5m after admission"
)

ENQUEUE = {
    "fix: a group with no pod yet and room in its queue is Inqueue (it stayed Pending in the "
    "operator's sessions until a pod came)": EnqueueCase(
        items=(group("g", "one"),),
        expected=(INQUEUE, (False, REASON.INQUEUE, ADMITTED_ONE)),
    ),
    "no room in its queue: Pending, told the queue, the resource and the figures": EnqueueCase(
        items=(group("g", "one", cpu="2"),),
        expected=(
            PENDING,
            (
                True,
                REASON.NOT_ENOUGH_RESOURCES,
                "queue 'one' cannot take the pod group's minResources on cpu: requested 2, "
                "used 0 of capability 1 (allocated plus inqueue groups)",
            ),
        ),
    ),
    "no room in an ancestor, which a sibling's group holds: Pending, told which": EnqueueCase(
        items=(group("g", "a", cpu="1500m"), group("sibling", "b").admitted_at(NOW - 10)),
        expected=(
            PENDING,
            (
                True,
                REASON.NOT_ENOUGH_RESOURCES,
                "queue 'org' (ancestor of leaf queue 'a') cannot take the pod group's "
                "minResources on cpu: requested 1500m, used 1 of capability 2 (allocated plus "
                "inqueue groups)",
            ),
        ),
    ),
    "its queue is closed: Pending, the queue does not admit": EnqueueCase(
        items=(group("g", "closed"),),
        expected=(
            PENDING,
            (
                True,
                REASON.QUEUE_NOT_ADMITTING,
                "queue 'closed' is Closed: only Open queues admit pods",
            ),
        ),
    ),
    "its queue does not exist: Pending, told so": EnqueueCase(
        items=(group("g", "nowhere"),),
        expected=(
            PENDING,
            (
                True,
                REASON.QUEUE_NOT_ADMITTING,
                "queue 'nowhere' does not exist: create it or name an existing leaf queue in "
                "the pod group's spec.queue",
            ),
        ),
    ),
    "its only pod did not opt in: Pending, holding nothing, told why": EnqueueCase(
        items=(
            group("g", "one"),
            b.pod("ns", "outside").group("g").requests(cpu="1").running_on("n1"),
        ),
        expected=(
            PENDING,
            (
                True,
                REASON.OUTSIDE_QUEUE_ADMISSION,
                "none of its pods opted in to queue admission: they run outside it, and the "
                "group holds nothing in queue 'one'",
            ),
        ),
    ),
    "without minResources: Inqueue, holding nothing": EnqueueCase(
        items=(b.pod_group("ns", "g").queue("one").min_member(1),),
        expected=(
            INQUEUE,
            (
                False,
                REASON.INQUEUE,
                "admitted to queue 'one'; the group declares no minResources, so its queue "
                "holds nothing for its pods",
            ),
        ),
    ),
    "the second of two groups that each fill the queue waits for the first": EnqueueCase(
        items=(group("first", "one"), group("g", "one").created(2)),
        expected=(
            PENDING,
            (
                True,
                REASON.NOT_ENOUGH_RESOURCES,
                "queue 'one' cannot take the pod group's minResources on cpu: requested 1, "
                "used 1 of capability 1 (allocated plus inqueue groups)",
            ),
        ),
    ),
}


@pytest.mark.parametrize(("items", "expected"), ENQUEUE.values(), ids=ENQUEUE.keys())
def test_a_pod_group_without_pods_is_enqueued_as_volcano_does(
    items: tuple[Any, ...], expected: tuple[Any, ...]
) -> None:
    result = decide(*items)
    assert (result.pod_groups["ns/g"], condition(result, "ns/g")) == expected


# -- the reservation Inqueue implies --------------------------------------------------------------


def test_an_inqueue_group_holds_its_min_resources_in_its_queue_and_every_ancestor() -> None:
    result = decide(group("g", "a").admitted_at(NOW - 10), *lone("p", "b", cpu="1500m"))
    figures = {name: result.queues[name].inqueue.milli_cpu for name in ("a", "b", "org")}
    assert (figures, result.ungate, result.reasons["ns/p"]) == (
        {"a": 1000, "b": 0, "org": 1000},
        (),
        "pod ns/p is not admitted: queue 'org' (ancestor of leaf queue 'b') cannot take the "
        "pod's requests on cpu: requested 1500m, used 1 of capability 2 (allocated plus "
        "inqueue groups)",
    )


class HoldCase(NamedTuple):
    items: tuple[Any, ...]
    ungate: tuple[str, ...]


HOLD = {
    "a pod that fits beside the reservation is admitted": HoldCase(
        items=(group("g", "a").admitted_at(NOW - 10), *lone("p", "b", cpu="1")),
        ungate=("ns/p",),
    ),
    "a pod that does not fit beside it waits": HoldCase(
        items=(group("g", "a").admitted_at(NOW - 10), *lone("p", "b", cpu="1500m")),
        ungate=(),
    ),
    "a group admitted in the same session holds its room at once": HoldCase(
        items=(group("g", "a").created(1), *lone("p", "b", cpu="1500m", created=9)),
        ungate=(),
    ),
    "the group's own pods take the room it held": HoldCase(
        items=(group("g", "one").admitted_at(NOW - 10), member("m", "g")),
        ungate=("ns/m",),
    ),
    "a finished group holds nothing: the pod is admitted": HoldCase(
        items=(
            group("g", "one").phase(objects.PodGroupPhase.COMPLETED),
            b.pod("ns", "done")
            .group("g")
            .requests(cpu="1")
            .admitted_to("one")
            .status(objects.TaskStatus.FAILED),
            *lone("p", "one", cpu="1"),
        ),
        ungate=("ns/p",),
    ),
}


@pytest.mark.parametrize(("items", "ungate"), HOLD.values(), ids=HOLD.keys())
def test_the_inqueue_reservation_holds_other_pods_back_while_it_lasts(
    items: tuple[Any, ...], ungate: tuple[str, ...]
) -> None:
    assert decide(*items).ungate == ungate


# -- the bound --------------------------------------------------------------------------------


class BoundCase(NamedTuple):
    items: tuple[Any, ...]
    expected: tuple[Any, ...]
    """(phase of ns/g, released, ungate, the reason of condition ns/g or None)."""
    bound: bool = True


BOUND = {
    "within the bound: Inqueue, holding its room": BoundCase(
        items=(group("g", "one").admitted_at(NOW - 299), *lone("p", "one")),
        expected=(INQUEUE, (), (), REASON.INQUEUE),
    ),
    "fix: no pod by the bound: Pending, its room given back to the pod that waited (Volcano "
    "holds it for ever)": BoundCase(
        items=(group("g", "one").admitted_at(NOW - 300), *lone("p", "one")),
        expected=(PENDING, ("ns/g",), ("ns/p",), REASON.INQUEUE_TIMEOUT),
    ),
    "a pod of its own by the bound: Inqueue, its gang admitted": BoundCase(
        items=(group("g", "one").admitted_at(NOW - 900), member("m", "g"), *lone("p", "one")),
        expected=(INQUEUE, (), ("ns/m",), REASON.INQUEUE),
    ),
    "only a failed pod short of its minMember: released (no pod will use the room)": BoundCase(
        items=(
            group("g", "one").min_member(2).admitted_at(NOW - 900),
            b.pod("ns", "failed")
            .group("g")
            .requests(cpu="1")
            .admitted_to("one")
            .status(objects.TaskStatus.FAILED),
        ),
        expected=(PENDING, ("ns/g",), (), REASON.INQUEUE_TIMEOUT),
    ),
    "no minResources: never released (it holds nothing)": BoundCase(
        items=(
            b.pod_group("ns", "g").queue("one").min_member(1).admitted_at(NOW - 900),
            *lone("p", "one"),
        ),
        expected=(INQUEUE, (), ("ns/p",), REASON.INQUEUE),
    ),
    "no admission time recorded yet: Inqueue until the operator records one": BoundCase(
        items=(group("g", "one").phase(INQUEUE), *lone("p", "one")),
        expected=(INQUEUE, (), (), REASON.INQUEUE),
    ),
    "no bound (Volcano): Inqueue for ever": BoundCase(
        items=(group("g", "one").admitted_at(NOW - 90_000), *lone("p", "one")),
        expected=(INQUEUE, (), (), REASON.INQUEUE),
        bound=False,
    ),
}


@pytest.mark.parametrize(("items", "expected", "bound"), BOUND.values(), ids=BOUND.keys())
def test_an_inqueue_group_without_pods_gives_its_room_back_after_the_bound(
    items: tuple[Any, ...], expected: tuple[Any, ...], bound: bool
) -> None:
    result = decide(*items, bound=bound)
    written = result.group_conditions.get("ns/g")
    assert (
        result.pod_groups["ns/g"],
        result.released,
        result.ungate,
        written.reason if written is not None else None,
    ) == expected


def test_a_released_group_says_why_and_how_it_comes_back() -> None:
    result = decide(group("g", "one").admitted_at(NOW - 300))
    assert condition(result, "ns/g") == (
        True,
        REASON.INQUEUE_TIMEOUT,
        "no pod of the group came within 5m of its admission to queue 'one': the room held "
        "for it (cpu 1) is given back; it is admitted again when room allows, for the next 5m "
        "only with room no other waiting work takes, then in its turn",
    )


# -- after a release: yield, then take its turn ---------------------------------------------------


class YieldCase(NamedTuple):
    items: tuple[Any, ...]
    expected: tuple[Any, ...]
    """(phase of ns/g, ungate, the condition of ns/g: (status, reason, renew) or None; renew:
    it enters Inqueue in this session, and its bound starts then)."""


YIELD = {
    "released a moment ago, a pod waits for the room: the pod takes it, the group keeps telling "
    "why it was released": YieldCase(
        items=(group("g", "one").released_at(NOW - 1), *lone("p", "one", cpu="1")),
        expected=(PENDING, ("ns/p",), None),
    ),
    "released a moment ago, a younger group waits: the younger one is enqueued first": YieldCase(
        items=(group("g", "one").released_at(NOW - 1), group("young", "one").created(50)),
        expected=(PENDING, (), None),
    ),
    "released a moment ago, nobody else waits: Inqueue again, its bound started anew": YieldCase(
        items=(group("g", "one").released_at(NOW - 1),),
        expected=(INQUEUE, (), (False, REASON.INQUEUE, True)),
    ),
    "released a bound ago: back in its turn, before the younger group": YieldCase(
        items=(group("g", "one").released_at(NOW - 300), group("young", "one").created(50)),
        expected=(INQUEUE, (), (False, REASON.INQUEUE, True)),
    ),
    "released a bound ago and the room is taken: waits, told why": YieldCase(
        items=(
            group("g", "one").released_at(NOW - 300),
            *lone("p", "one", cpu="1", created=0),
        ),
        expected=(PENDING, ("ns/p",), (True, REASON.NOT_ENOUGH_RESOURCES, False)),
    ),
    "released a moment ago and its pods came: in its turn again, its gang admitted": YieldCase(
        items=(
            group("g", "one").min_member(1).released_at(NOW - 1),
            member("m", "g"),
            *lone("p", "one", cpu="1", created=50),
        ),
        expected=(INQUEUE, ("ns/m",), (False, REASON.INQUEUE, True)),
    ),
    "enqueued again after it ran and lost its pods: its bound starts anew": YieldCase(
        items=(
            group("g", "one").condition(
                unschedulable=False, reason=REASON.INQUEUE, seconds=NOW - 5000
            ),
        ),
        expected=(INQUEUE, (), (False, REASON.INQUEUE, True)),
    ),
}


@pytest.mark.parametrize(("items", "expected"), YIELD.values(), ids=YIELD.keys())
def test_a_released_group_yields_for_a_bound_then_takes_its_turn_again(
    items: tuple[Any, ...], expected: tuple[Any, ...]
) -> None:
    result = decide(*items)
    written = result.group_conditions.get("ns/g")
    assert (
        result.pod_groups["ns/g"],
        result.ungate,
        None if written is None else (written.unschedulable, written.reason, written.renew),
    ) == expected


# -- when time alone changes the decisions ----------------------------------------------------


class DueCase(NamedTuple):
    group: b.PodGroupBuilder
    due: bool


DUE = {
    "Inqueue within the bound": DueCase(group("g", "one").admitted_at(NOW - 299), due=False),
    "Inqueue past the bound": DueCase(group("g", "one").admitted_at(NOW - 300), due=True),
    "released within the bound": DueCase(group("g", "one").released_at(NOW - 10), due=False),
    "released a bound ago": DueCase(group("g", "one").released_at(NOW - 300), due=True),
    "Running past the bound": DueCase(
        group("g", "one").admitted_at(NOW - 900).phase(objects.PodGroupPhase.RUNNING),
        due=False,
    ),
    "no condition": DueCase(group("g", "one").phase(INQUEUE), due=False),
}


@pytest.mark.parametrize(("built", "due"), DUE.values(), ids=DUE.keys())
def test_due_lists_the_groups_whose_bound_or_window_ran_out(
    built: b.PodGroupBuilder, due: bool
) -> None:
    bound = inqueue_bounds.InqueueBound(timeout=TIMEOUT, now=b.at(NOW))
    assert inqueue_bounds.due([built.build()], bound=bound) == (
        frozenset({"ns/g"}) if due else frozenset()
    )


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(300, "5m"), (20, "20s"), (90, "1m30s"), (5400, "1h30m"), (0.5, "0.5s")],
    ids=["minutes", "seconds", "both", "hours", "a fraction"],
)
def test_the_bound_is_written_as_a_person_writes_it(seconds: float, text: str) -> None:
    assert inqueue_bounds.describe_timeout(datetime.timedelta(seconds=seconds)) == text
