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
from hypothesis import given, settings
from hypothesis import strategies as st

from queuetree.core import conditions, decisions, inqueue_bounds, objects, sessions
from tests import builders as b
from tests import properties

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


# -- a tenant's edits of its admitted PodGroup ------------------------------------------------


def running(name: str, group_name: str, queue: str) -> b.PodBuilder:
    """A pod of PodGroup ``group_name`` admitted to ``queue`` and running on n1."""
    return (
        b.pod("ns", name)
        .group(group_name)
        .requests(cpu="1")
        .admitted_to(queue)
        .running_on("n1")
        .created(3)
    )


class EditCase(NamedTuple):
    items: tuple[Any, ...]
    expected: tuple[Any, ...]
    """(phase of ns/g, reason of its condition or None, ungate, cpu held (allocated plus
    inqueue, in millicores) in queues a, one and org)."""


def held(result: decisions.SessionResult) -> tuple[int, ...]:
    return tuple(
        int(result.queues[name].allocated.milli_cpu + result.queues[name].inqueue.milli_cpu)
        for name in ("a", "one", "org")
    )


EDITS = {
    "fix: minResources raised past its queue's ancestor while Inqueue: Pending again, told why, "
    "and the sibling queue's pod is admitted (it held 5 CPU of org's 2)": EditCase(
        items=(group("g", "a", cpu="5").admitted_at(NOW - 10), *lone("p", "b", cpu="1")),
        expected=(PENDING, REASON.NOT_ENOUGH_RESOURCES, ("ns/p",), (0, 0, 1000)),
    ),
    "minResources raised within the room while Inqueue: still Inqueue, holding the new figure": (
        EditCase(
            items=(group("g", "a", cpu="1500m").admitted_at(NOW - 10), *lone("p", "b", cpu="1")),
            expected=(INQUEUE, None, (), (1500, 0, 1500)),
        )
    ),
    "minResources raised past the room a group admitted before it holds: Pending again, the "
    "other group keeps its room": EditCase(
        items=(
            group("honest", "b").admitted_at(NOW - 100),
            group("g", "a", cpu="2").admitted_at(NOW - 10),
        ),
        expected=(PENDING, REASON.NOT_ENOUGH_RESOURCES, (), (0, 0, 1000)),
    ),
    "a group whose pods run keeps its room before any Inqueue group, however old": EditCase(
        items=(
            group("g", "a").admitted_at(NOW - 100),
            group("runs", "b", cpu="2").phase(objects.PodGroupPhase.RUNNING),
            running("r", "runs", "b"),
        ),
        expected=(PENDING, REASON.NOT_ENOUGH_RESOURCES, (), (0, 0, 2000)),
    ),
    "fix: minResources raised on a Running group: its pod runs on, the room beyond it is not "
    "held (it held 5 CPU of org's 2 for ever, no bound applies to a group with pods)": EditCase(
        items=(
            group("g", "a", cpu="5").phase(objects.PodGroupPhase.RUNNING),
            running("m", "g", "a"),
            *lone("p", "b", cpu="1"),
        ),
        expected=(objects.PodGroupPhase.RUNNING, None, ("ns/p",), (1000, 0, 2000)),
    ),
    "minMember raised while Inqueue, more pods than the queue has room for: none admitted": (
        EditCase(
            items=(
                group("g", "one").min_member(3).admitted_at(NOW - 10),
                *(member(f"m{i}", "g") for i in range(3)),
            ),
            expected=(INQUEUE, None, (), (0, 1000, 0)),
        )
    ),
    "minMember and minResources lowered while Inqueue, pods beyond them: only what the queue "
    "has room for is admitted": EditCase(
        items=(
            group("g", "one", cpu="0").admitted_at(NOW - 10),
            *(member(f"m{i}", "g") for i in range(3)),
        ),
        expected=(INQUEUE, None, ("ns/m0",), (0, 0, 0)),
    ),
    "moved to a full queue while Inqueue (before the webhook saw it admitted): Pending, the "
    "group admitted there keeps its room": EditCase(
        items=(
            group("g", "one").admitted_at(NOW - 100),
            group("there", "one").admitted_at(NOW - 200),
        ),
        expected=(PENDING, REASON.NOT_ENOUGH_RESOURCES, (), (0, 1000, 0)),
    ),
}


@pytest.mark.parametrize(("items", "expected"), EDITS.values(), ids=EDITS.keys())
def test_a_tenants_edits_of_its_admitted_group_never_hold_a_queue_past_capability(
    items: tuple[Any, ...], expected: tuple[Any, ...]
) -> None:
    result = decide(*items)
    written = result.group_conditions.get("ns/g")
    assert (
        result.pod_groups["ns/g"],
        written.reason if written is not None and written.unschedulable else None,
        result.ungate,
        held(result),
    ) == expected


@st.composite
def edited_groups(draw: st.DrawFn) -> list[Any]:
    """Up to 8 PodGroups, each admitted (Inqueue) at some time, then edited by its tenant to
    any minResources, queue or minMember, with or without pods; and a few lone pods."""
    items: list[Any] = []
    leaves = ("a", "b", "one")
    for i in range(draw(st.integers(min_value=0, max_value=8))):
        name = f"g{i}"
        built = (
            group(name, draw(st.sampled_from(leaves)), cpu=f"{draw(st.integers(0, 3000))}m")
            .min_member(draw(st.integers(min_value=1, max_value=3)))
            .admitted_at(NOW - draw(st.integers(min_value=0, max_value=299)))
        )
        items.append(built)
        items.extend(member(f"{name}-m{j}", name) for j in range(draw(st.integers(0, 2))))
    for i in range(draw(st.integers(min_value=0, max_value=3))):
        items.extend(lone(f"p{i}", draw(st.sampled_from(leaves)), created=i))
    return items


@settings(max_examples=properties.examples(100))
@given(edited_groups())
def test_no_edit_of_admitted_groups_holds_a_queue_past_its_capability(items: list[Any]) -> None:
    result = decide(*items)
    over = {
        name: (int(figures.inqueue.milli_cpu), int(figures.real_capability.milli_cpu))
        for name, figures in result.queues.items()
        if figures.allocated.milli_cpu + figures.inqueue.milli_cpu
        > figures.real_capability.milli_cpu
    }
    assert over == {}
