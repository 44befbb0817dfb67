"""Which explanations a cycle plans: changed reasons only, oldest pods first, within a budget."""

from __future__ import annotations

import dataclasses
import datetime
from types import MappingProxyType
from typing import Any, NamedTuple

import pytest

from queuetree.core import decisions
from queuetree.operator import explaining, state
from tests.operator import fakes

T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
FULL = "queue team: cpu 2 > 1"


def aged(name: str, second: int, **changes: Any) -> Any:
    return dataclasses.replace(
        fakes.pod(name, **changes), created=T0 + datetime.timedelta(seconds=second)
    )


class PlanCase(NamedTuple):
    pods: Any
    reasons: Any
    explained: Any
    budget: Any
    planned: Any
    now: Any = None
    """The planning time (None: no pod is too young to be explained)."""


CASES = {
    "the oldest pods go first, whatever their names": PlanCase(
        pods=[aged("b", 1), aged("a", 3), aged("c", 2)],
        reasons={"ns/a": FULL, "ns/b": FULL, "ns/c": FULL},
        explained={},
        budget=2,
        planned=[("ns/b", FULL), ("ns/c", FULL)],
    ),
    "pods of the same age go by key": PlanCase(
        pods=[aged("b", 1), aged("a", 1)],
        reasons={"ns/a": FULL, "ns/b": FULL},
        explained={},
        budget=5,
        planned=[("ns/a", FULL), ("ns/b", FULL)],
    ),
    "a reason already written is not written again": PlanCase(
        pods=[aged("a", 1), aged("b", 2)],
        reasons={"ns/a": FULL, "ns/b": FULL},
        explained={"ns/a": FULL},
        budget=5,
        planned=[("ns/b", FULL)],
    ),
    "a pod no longer held loses its explanation, in its turn": PlanCase(
        pods=[aged("a", 2), aged("b", 1, gates=())],
        reasons={"ns/a": FULL},
        explained={"ns/b": FULL},
        budget=5,
        planned=[("ns/b", ""), ("ns/a", FULL)],
    ),
    "a held pod the core gave no reason gets nothing": PlanCase(
        pods=[aged("a", 1)], reasons={}, explained={}, budget=5, planned=[]
    ),
    # explaining.EXPLAIN_AFTER: 3 s.
    "a pod younger than the delay is not explained yet": PlanCase(
        pods=[aged("a", 1), aged("b", 8)],
        reasons={"ns/a": FULL, "ns/b": FULL},
        explained={},
        budget=5,
        planned=[("ns/a", FULL)],
        now=T0 + datetime.timedelta(seconds=10),
    ),
    "a pod exactly as old as the delay is explained": PlanCase(
        pods=[aged("a", 7)],
        reasons={"ns/a": FULL},
        explained={},
        budget=5,
        planned=[("ns/a", FULL)],
        now=T0 + datetime.timedelta(seconds=10),
    ),
    "a young pod's changed reason is written at once": PlanCase(
        pods=[aged("a", 9)],
        reasons={"ns/a": FULL},
        explained={"ns/a": "queue team is Closed"},
        budget=5,
        planned=[("ns/a", FULL)],
        now=T0 + datetime.timedelta(seconds=10),
    ),
    "a young pod no longer held loses its explanation at once": PlanCase(
        pods=[aged("a", 9, gates=())],
        reasons={},
        explained={"ns/a": FULL},
        budget=5,
        planned=[("ns/a", "")],
        now=T0 + datetime.timedelta(seconds=10),
    ),
    "young pods left for later take no share of the budget": PlanCase(
        pods=[aged("a", 9), aged("b", 1), aged("c", 2)],
        reasons={"ns/a": FULL, "ns/b": FULL, "ns/c": FULL},
        explained={},
        budget=2,
        planned=[("ns/b", FULL), ("ns/c", FULL)],
        now=T0 + datetime.timedelta(seconds=10),
    ),
}


@pytest.mark.parametrize(
    ("pods", "reasons", "explained", "budget", "planned", "now"), CASES.values(), ids=CASES.keys()
)
def test_plan_explanations(
    pods: list[Any],
    reasons: dict[str, str],
    explained: dict[str, str],
    budget: int,
    planned: list[tuple[str, str]],
    now: datetime.datetime | None,
) -> None:
    cluster = state.ClusterState()
    for pod in pods:
        cluster.upsert_pod(pod)
    cluster.mark_synced()
    result = decisions.SessionResult(ready=True, reasons=MappingProxyType(reasons))
    plan = explaining.plan_explanations(cluster.view(), result, explained, budget=budget, now=now)
    assert [(item.key, item.reason) for item in plan] == planned
