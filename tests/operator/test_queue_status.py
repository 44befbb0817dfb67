"""What the queue controller writes: only what changed, with the spec's states and marks."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from types import MappingProxyType
from typing import Any, NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from queuetree.api import statuses
from queuetree.core import conditions, decisions, objects, resources
from queuetree.operator import queue_status, state
from tests import builders as b
from tests import properties
from tests.operator import fakes

COUNTS = {"unknown": 0, "pending": 0, "running": 0, "inqueue": 0, "completed": 0}
CPU2 = resources.Resource.from_resource_list({"cpu": "2"})
ZERO = resources.Resource.from_resource_list({"cpu": "0"})


def record(
    name: str,
    parent: str = "",
    *,
    status: dict[str, Any] | None = None,
    mark: str | None = None,
) -> state.QueueRecord:
    annotations = {} if mark is None else {objects.CLOSED_BY_PARENT_ANNOTATION: mark}
    queue = objects.Queue(name=name, parent=parent, annotations=annotations)
    return state.QueueRecord(queue=queue, status=status if status is not None else {})


def view_of(
    records: Sequence[state.QueueRecord], pods: Sequence[objects.Pod] = ()
) -> state.StateView:
    cluster = state.ClusterState()
    for item in records:
        cluster.upsert_queue(item)
    for pod in pods:
        cluster.upsert_pod(pod)
    cluster.mark_synced()
    return cluster.view()


def figures(
    allocated: resources.Resource, *, pods: int = 0, waiting: int = 0
) -> decisions.QueueFigures:
    return decisions.QueueFigures(
        allocated=allocated,
        deserved=ZERO,
        capability=resources.Resource.infinite(),
        real_capability=resources.Resource.infinite(),
        reserved=ZERO,
        allocated_pods=pods,
        reserved_pods=waiting,
    )


OPEN_STATUS = {"state": "Open", **COUNTS}


def ready(name: str, since: str = "2026-01-01T00:00:00Z") -> dict[str, str]:
    """The readiness condition of an Open, sound queue, as the operator writes it."""
    return {
        "type": "Ready",
        "status": "True",
        "reason": "Ready",
        "message": f"queue {name!r} is Open",
        "lastTransitionTime": since,
    }


class CasesCase(NamedTuple):
    records: Any
    pods: Any
    expected: Any


CASES = {
    "a fresh queue gets its parent defaulted and its status written": CasesCase(
        records=[record("root", status=OPEN_STATUS), record("team")],
        pods=[],
        expected=[
            queue_status.QueueWrite(
                name="team", status={"state": "Open", **COUNTS}, meta={"spec": {"parent": "root"}}
            )
        ],
    ),
    "nothing is written when nothing changed": CasesCase(
        records=[record("root", status=OPEN_STATUS), record("team", "root", status=OPEN_STATUS)],
        pods=[],
        expected=[],
    ),
    "a queue a person closed closes its children and marks them": CasesCase(
        records=[
            record("root", status=OPEN_STATUS),
            record("dept", "root", status={**OPEN_STATUS, "state": "Closed"}),
            record("team", "dept", status={**OPEN_STATUS, "running": 1}),
        ],
        # An ungated pod not placed yet was admitted: its single-pod group counts as Inqueue.
        pods=[fakes.pod("worker", gates=(), queue="team")],
        expected=[
            queue_status.QueueWrite(
                name="team",
                status={"state": "Closing", "inqueue": 1, "running": 0},
                meta={"metadata": {"annotations": {objects.CLOSED_BY_PARENT_ANNOTATION: "true"}}},
            )
        ],
    ),
    "a leaf a person closed is Closing while it has pods": CasesCase(
        records=[
            record("root", status=OPEN_STATUS),
            record("team", "root", status={**OPEN_STATUS, "state": "Closed"}),
        ],
        pods=[fakes.pod("worker", gates=(), queue="team")],
        expected=[queue_status.QueueWrite(name="team", status={"state": "Closing", "inqueue": 1})],
    ),
    "reopening the parent unmarks and reopens the child": CasesCase(
        records=[
            record("root", status=OPEN_STATUS),
            record("dept", "root", status=OPEN_STATUS),
            record("team", "dept", status={**OPEN_STATUS, "state": "Closed"}, mark="true"),
        ],
        pods=[],
        expected=[
            queue_status.QueueWrite(
                name="team",
                status={"state": "Open"},
                meta={"metadata": {"annotations": {objects.CLOSED_BY_PARENT_ANNOTATION: "false"}}},
            )
        ],
    ),
}


@pytest.mark.parametrize(("records", "pods", "expected"), list(CASES.values()), ids=list(CASES))
def test_plan_queue_writes_writes_only_what_changed(
    records: list[state.QueueRecord],
    pods: list[objects.Pod],
    expected: list[queue_status.QueueWrite],
) -> None:
    assert queue_status.plan_queue_writes(view_of(records, pods), None) == expected


def test_figures_of_the_last_session_are_written_as_quantities_with_pod_counts() -> None:
    view = view_of([record("root", status={**OPEN_STATUS, "conditions": [ready("root")]})])
    result = decisions.SessionResult(
        ready=True, queues=MappingProxyType({"root": figures(CPU2, pods=3, waiting=1)})
    )
    assert queue_status.plan_queue_writes(view, result) == [
        queue_status.QueueWrite(
            name="root",
            status={
                # The GPU columns of kubectl get queues show 0, not nothing (issue 35).
                "allocated": {"cpu": "2", "memory": "0", "nvidia.com/gpu": "0", "pods": "3"},
                "reserved": {"cpu": "0", "memory": "0", "nvidia.com/gpu": "0", "pods": "1"},
                "deserved": {"cpu": "0", "memory": "0", "nvidia.com/gpu": "0"},
                "realCapability": {},
            },
        )
    ]


def test_a_resource_that_left_a_figure_is_removed_with_null() -> None:
    written = {
        **OPEN_STATUS,
        "allocated": {"cpu": "2", "memory": "0", "example.com/nic": "2", "pods": "0"},
        "reserved": {"cpu": "0", "memory": "0", "nvidia.com/gpu": "0", "pods": "0"},
        "deserved": {"cpu": "0", "memory": "0", "nvidia.com/gpu": "0"},
        "realCapability": {},
        "conditions": [ready("root")],
    }
    view = view_of([record("root", status=written)])
    result = decisions.SessionResult(ready=True, queues=MappingProxyType({"root": figures(CPU2)}))
    assert queue_status.plan_queue_writes(view, result) == [
        queue_status.QueueWrite(
            name="root",
            status={"allocated": {"example.com/nic": None, "nvidia.com/gpu": "0"}},
        )
    ]


@pytest.mark.parametrize(
    ("amount", "value"),
    [
        pytest.param(
            b.res(),
            {"cpu": "0", "memory": "0", "nvidia.com/gpu": "0"},
            id="every-shown-resource-is-written-zero",
        ),
        pytest.param(
            b.res(cpu="1", **{"example.com/nic": "1", "nvidia.com/gpu": "2"}),
            {"cpu": "1", "memory": "0", "example.com/nic": "1", "nvidia.com/gpu": "2"},
            id="figures-are-kept",
        ),
    ],
)
def test_amounts_show_zero_for_the_resources_of_the_columns(
    amount: resources.Resource, value: dict[str, str]
) -> None:
    assert statuses.amount_value(amount) == value


@pytest.mark.parametrize(
    ("current", "desired", "patch"),
    [
        pytest.param(None, {"cpu": "1"}, {"cpu": "1"}, id="absent-map-is-written-whole"),
        pytest.param({"cpu": "1"}, {"cpu": "2"}, {"cpu": "2"}, id="changed-key-is-replaced"),
        pytest.param(
            {"cpu": "1", "nvidia.com/gpu": "1"},
            {"cpu": "1"},
            {"nvidia.com/gpu": None},
            id="removed-key-is-null",
        ),
        pytest.param("Open", "Closed", "Closed", id="scalars-are-replaced"),
        pytest.param({"a": {"b": 1, "c": 2}}, {"a": {"b": 1}}, {"a": {"c": None}}, id="nested"),
    ],
)
def test_merge_patch_value_turns_current_into_desired(
    current: Any, desired: Any, patch: Any
) -> None:
    assert queue_status.merge_patch_value(current, desired) == patch


class BusyChangesCase(NamedTuple):
    status: Any
    urgent: Any


BUSY_CHANGES = {
    "a first pod": BusyChangesCase(status={"allocated": {"pods": "1"}}, urgent=True),
    "the last pod gone": BusyChangesCase(status={"reserved": {"pods": "0"}}, urgent=True),
    "two pods admitted together": BusyChangesCase(status={"reserved": {"pods": "2"}}, urgent=True),
    "a count between two others": BusyChangesCase(
        status={"allocated": {"pods": "7", "cpu": "3"}}, urgent=True
    ),
    "figures without pods": BusyChangesCase(status={"allocated": {"cpu": "3"}}, urgent=False),
    "only the state": BusyChangesCase(status={"state": "Open"}, urgent=False),
}


@pytest.mark.parametrize(("status", "urgent"), list(BUSY_CHANGES.values()), ids=list(BUSY_CHANGES))
def test_a_change_of_a_queues_pod_count_is_urgent(status: dict[str, Any], urgent: bool) -> None:
    write = queue_status.QueueWrite(name="q", status=status)
    assert queue_status.busy_changed(write) is urgent


NOW = "2026-02-02T00:00:00Z"
MISSING = conditions.Fault(conditions.QueueReason.PARENT_NOT_FOUND, "spec.parent 'gone' ...")


class ConditionCase(NamedTuple):
    status: Any
    faults: Any
    expected: Any


CONDITION_CASES = {
    "a queue without a condition gets Ready, now": ConditionCase(
        status=OPEN_STATUS,
        faults=(),
        expected=[ready("team", NOW)],
    ),
    "an unchanged condition is not written again": ConditionCase(
        status={**OPEN_STATUS, "conditions": [ready("team")]},
        faults=(),
        expected=None,
    ),
    "a fault flips it to False, with the reason and a new transition time": ConditionCase(
        status={**OPEN_STATUS, "conditions": [ready("team")]},
        faults=(MISSING,),
        expected=[
            {
                "type": "Ready",
                "status": "False",
                "reason": "ParentNotFound",
                "message": MISSING.message,
                "lastTransitionTime": NOW,
            }
        ],
    ),
    "another reason of the same status keeps the time of the last flip": ConditionCase(
        status={**OPEN_STATUS, "conditions": [ready("team")]},
        faults=(conditions.Fault(conditions.QueueReason.CAPABILITY_ABOVE_PARENT, "above"),),
        expected=[
            {
                "type": "Ready",
                "status": "True",
                "reason": "CapabilityAboveParent",
                "message": "above",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ],
    ),
    "conditions of other types are kept": ConditionCase(
        status={**OPEN_STATUS, "conditions": [{"type": "Audited", "status": "True"}]},
        faults=(),
        expected=[{"type": "Audited", "status": "True"}, ready("team", NOW)],
    ),
}


@pytest.mark.parametrize(
    ("status", "faults", "expected"), CONDITION_CASES.values(), ids=CONDITION_CASES.keys()
)
def test_the_readiness_condition_is_written_only_when_it_changes(
    status: dict[str, Any], faults: tuple[conditions.Fault, ...], expected: Any
) -> None:
    view = view_of([record("root", status=OPEN_STATUS), record("team", "root", status=status)])
    result = decisions.SessionResult(ready=True, queue_faults=MappingProxyType({"team": faults}))
    writes = {w.name: w for w in queue_status.plan_queue_writes(view, result, now=NOW)}
    team = writes.get("team")
    written = team.status.get("conditions") if team is not None else None
    told = team.transition if team is not None else None
    assert (written, told is not None) == (expected, expected is not None)


class GroupCase(NamedTuple):
    group: Any
    expected: Any


GROUP_CASES = {
    "a group whose status nobody wrote gets phase and counts, defaults included": GroupCase(
        group=objects.PodGroup(namespace="ns", name="g"),
        expected={"phase": "Pending", "running": 0, "succeeded": 0, "failed": 0},
    ),
    "a written group that says what the session decided gets nothing": GroupCase(
        group=objects.PodGroup(namespace="ns", name="g", status_written=True),
        expected=None,
    ),
    "a written group whose phase changed gets the phase only": GroupCase(
        group=objects.PodGroup(namespace="ns", name="g", status_written=True),
        expected={"phase": "Inqueue"},
    ),
}


@pytest.mark.parametrize(("group", "expected"), GROUP_CASES.values(), ids=GROUP_CASES.keys())
def test_pod_group_status_fills_the_columns_once_then_follows_changes(
    group: objects.PodGroup, expected: dict[str, Any] | None
) -> None:
    phase = objects.PodGroupPhase.INQUEUE if expected == {"phase": "Inqueue"} else None
    result = decisions.SessionResult(
        ready=True,
        pod_groups=MappingProxyType({"ns/g": phase or objects.PodGroupPhase.PENDING}),
        group_counts=MappingProxyType({"ns/g": objects.NO_COUNTS}),
    )
    planned = queue_status.plan_pod_group_status({"ns/g": group}, result)
    assert planned.get("ns/g") == expected


ADMITTED = conditions.GroupCondition(
    unschedulable=False, reason=conditions.GroupReason.INQUEUE, message="admitted"
)
RELEASED = conditions.GroupCondition(
    unschedulable=True, reason=conditions.GroupReason.INQUEUE_TIMEOUT, message="no pod came"
)
REFUSED = conditions.GroupCondition(
    unschedulable=True,
    reason=conditions.GroupReason.NOT_ENOUGH_RESOURCES,
    message="queue 'q' cannot take the pod group's minResources on cpu: requested 2, used 1",
)
BEFORE = "2026-01-01T00:01:40Z"
"""``b.at(100)``, as written."""


def admission(status: str, reason: str, message: str, since: str = BEFORE) -> dict[str, Any]:
    return {
        "type": "Unschedulable",
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
    }


class ConditionPlanCase(NamedTuple):
    group: Any
    wanted: Any
    expected: Any
    """(the conditions planned or None, the (type, reason) of the event or None)."""
    budget: int = 10


CONDITION_PLANS = {
    "admitted for the first time: Inqueue as of now, told by an event": ConditionPlanCase(
        group=b.pod_group("ns", "g"),
        wanted=ADMITTED,
        expected=([admission("False", "Inqueue", "admitted", NOW)], ("Normal", "Inqueue")),
    ),
    "already says what the session wants: nothing written": ConditionPlanCase(
        group=b.pod_group("ns", "g").condition(
            unschedulable=False, reason="Inqueue", seconds=100, message="admitted"
        ),
        wanted=ADMITTED,
        expected=(None, None),
    ),
    "released: a Warning event, and the time of the release": ConditionPlanCase(
        group=b.pod_group("ns", "g").admitted_at(100),
        wanted=RELEASED,
        expected=(
            [admission("True", "InqueueTimeout", "no pod came", NOW)],
            ("Warning", "InqueueTimeout"),
        ),
    ),
    "refused, then refused with other figures: the message, the time of the flip kept, no "
    "event": ConditionPlanCase(
        group=b.pod_group("ns", "g").condition(
            unschedulable=True, reason="NotEnoughResources", seconds=100, message="before"
        ),
        wanted=REFUSED,
        expected=([admission("True", "NotEnoughResources", REFUSED.message)], None),
    ),
    "new figures past the budget wait for a later cycle": ConditionPlanCase(
        group=b.pod_group("ns", "g").condition(
            unschedulable=True, reason="NotEnoughResources", seconds=100, message="before"
        ),
        wanted=REFUSED,
        expected=(None, None),
        budget=0,
    ),
    "released, then refused once its window is over: the reason, the time of the release "
    "kept": ConditionPlanCase(
        group=b.pod_group("ns", "g").released_at(100),
        wanted=REFUSED,
        expected=(
            [admission("True", "NotEnoughResources", REFUSED.message)],
            ("Normal", "Unschedulable"),
        ),
        budget=0,
    ),
    "admitted again after it ran and lost its pods: its bound starts now, no new event": (
        ConditionPlanCase(
            group=b.pod_group("ns", "g").condition(
                unschedulable=False, reason="Inqueue", seconds=100, message="admitted"
            ),
            wanted=conditions.GroupCondition(
                unschedulable=False,
                reason=conditions.GroupReason.INQUEUE,
                message="admitted",
                renew=True,
            ),
            expected=([admission("False", "Inqueue", "admitted", NOW)], None),
        )
    ),
}


@pytest.mark.parametrize(
    ("group", "wanted", "expected", "budget"),
    CONDITION_PLANS.values(),
    ids=CONDITION_PLANS.keys(),
)
def test_the_admission_condition_is_written_when_the_session_wants_another(
    group: b.PodGroupBuilder,
    wanted: conditions.GroupCondition,
    expected: tuple[Any, ...],
    budget: int,
) -> None:
    result = decisions.SessionResult(
        ready=True, group_conditions=MappingProxyType({"ns/g": wanted})
    )
    changes, events = queue_status.plan_group_conditions(
        {"ns/g": group.build()}, result, now=NOW, budget=budget
    )
    assert (
        changes.get("ns/g"),
        (events[0].type, events[0].reason) if events else None,
    ) == expected


def test_other_conditions_of_a_group_are_kept_before_the_admission_condition() -> None:
    other = objects.Condition(
        type="Scheduled", status="True", reason="ready", transition_id="session-1"
    )
    group = b.pod_group("ns", "g").build()
    group = dataclasses.replace(group, conditions=(other,))
    result = decisions.SessionResult(
        ready=True, group_conditions=MappingProxyType({"ns/g": ADMITTED})
    )
    changes, _ = queue_status.plan_group_conditions({"ns/g": group}, result, now=NOW, budget=1)
    assert changes["ns/g"] == [
        {"type": "Scheduled", "status": "True", "transitionID": "session-1", "reason": "ready"},
        admission("False", "Inqueue", "admitted", NOW),
    ]


# The memo of plan_queue_writes: over any history of views and results, a plan computed with
# the memo of the earlier steps is the plan computed afresh.
MEMO_STATUSES = (
    {},
    OPEN_STATUS,
    {**OPEN_STATUS, "conditions": [ready("q")]},
    {"state": "Closed", **COUNTS},
    {**OPEN_STATUS, "allocated": {"cpu": "2", "memory": "0", "pods": "1"}},
)
MEMO_FIGURES = (None, figures(CPU2, pods=1), figures(ZERO), figures(CPU2, pods=2, waiting=1))
MEMO_FAULTS = (
    (),
    (conditions.Fault(reason=conditions.QueueReason.PARENT_NOT_FOUND, message="x"),),
)


@st.composite
def memo_histories(draw: st.DrawFn) -> list[tuple[Any, ...]]:
    names = ("root", "a", "b")
    records: dict[str, state.QueueRecord] = {}
    steps = []
    for _ in range(draw(st.integers(min_value=1, max_value=8))):
        for name in names:
            # Kept (the same object, as when no watch event came) or replaced.
            if name not in records or draw(st.booleans()):
                records[name] = record(
                    name,
                    "" if name == "root" else draw(st.sampled_from(["root", "", "a"])),
                    status=dict(draw(st.sampled_from(MEMO_STATUSES))),
                    mark=draw(st.sampled_from([None, "true", "false"])),
                )
        pods = [fakes.pod("p", gates=(), queue="a")] if draw(st.booleans()) else []
        result = (
            None
            if draw(st.integers(min_value=0, max_value=4)) == 0
            else decisions.SessionResult(
                ready=True,
                queues=MappingProxyType(
                    {name: f for name in names if (f := draw(st.sampled_from(MEMO_FIGURES)))}
                ),
                queue_faults=MappingProxyType({"b": draw(st.sampled_from(MEMO_FAULTS))}),
            )
        )
        steps.append((view_of(list(records.values()), pods), result))
    return steps


@settings(max_examples=properties.examples(150))
@given(history=memo_histories())
def test_a_memo_never_changes_a_plan(history: list[tuple[Any, ...]]) -> None:
    memo: queue_status.PlanMemo = {}
    for view, result in history:
        assert queue_status.plan_queue_writes(
            view, result, now=NOW, memo=memo
        ) == queue_status.plan_queue_writes(view, result, now=NOW)
