"""Reclaim evictions name the reclaimer the core chose them for; metrics export queue figures
in display units."""

from __future__ import annotations

import dataclasses
from types import MappingProxyType
from typing import Any, NamedTuple

import pytest

from queuetree.core import decisions, objects, resources, sessions
from queuetree.operator import metrics, reclaiming
from tests import builders as b
from tests.operator import fakes


def snapshot(*pods: objects.Pod) -> objects.Snapshot:
    groups = {
        pod.key: objects.PodGroup(
            namespace=pod.namespace,
            name=pod.name,
            queue=pod.annotations[objects.QUEUE_NAME_ANNOTATION],
            synthetic=True,
        )
        for pod in pods
    }
    return objects.Snapshot(
        queues=MappingProxyType({}),
        pod_groups=MappingProxyType(groups),
        pods=MappingProxyType({pod.key: pod for pod in pods}),
        nodes=MappingProxyType({}),
    )


def test_no_victims_means_no_evictions() -> None:
    assert reclaiming.plan_reclaim(snapshot(), decisions.SessionResult(ready=True)) == []


def _record(
    victim: str,
    reclaimer: str,
    *,
    rule: decisions.EvictionRule = decisions.EvictionRule.RECLAIM_OVER_DESERVED,
    **fields: str,
) -> decisions.Eviction:
    defaults = {
        "action": "reclaim",
        "reason": "queue 'queue-b' is above its deserved share (cpu 2 > 1); ancestorReclaimLevel 1",
        "node": "n1",
        "victim_queue": "queue-b",
        "reclaimer_queue": "queue-a",
    }
    defaults.update(fields)
    return decisions.Eviction(
        victim=victim,
        reclaimer=reclaimer,
        rule=rule,
        **defaults,
    )


class PlansCase(NamedTuple):
    records: Any
    expected: Any


PLANS = {
    "the victim and its reclaimer are told of each other, the rule and the node": PlansCase(
        records=(_record("ns/victim", "ns/second"),),
        expected=[
            reclaiming.Eviction(
                victim="ns/victim",
                reclaimer="ns/second",
                victim_uid="uid-victim",
                reclaimer_uid="uid-second",
                rule="reclaim-over-deserved",
                victim_message=(
                    "Evicted by queuetree reclaim for pod ns/second of queue queue-a: queue "
                    "'queue-b' is above its deserved share (cpu 2 > 1); ancestorReclaimLevel 1"
                ),
                reclaimer_message=(
                    "Reclaiming resources from pod ns/victim of queue queue-b on node n1: queue "
                    "'queue-b' is above its deserved share (cpu 2 > 1); ancestorReclaimLevel 1"
                ),
            )
        ],
    ),
    "a preemption is worded as one": PlansCase(
        records=(
            _record(
                "ns/victim",
                "ns/first",
                action="preempt",
                rule=decisions.EvictionRule.PREEMPT_LOWER_PRIORITY,
                reason="pod group ns/victim (priority 0) has a lower priority than pod group "
                "ns/first (priority 100) in queue 'queue-a'",
                victim_queue="queue-a",
            ),
        ),
        expected=[
            reclaiming.Eviction(
                victim="ns/victim",
                reclaimer="ns/first",
                victim_uid="uid-victim",
                reclaimer_uid="uid-first",
                rule="preempt-lower-priority",
                victim_message=(
                    "Evicted by queuetree preempt for pod ns/first of queue queue-a: pod group "
                    "ns/victim (priority 0) has a lower priority than pod group ns/first "
                    "(priority 100) in queue 'queue-a'"
                ),
                reclaimer_message=(
                    "Preempting resources from pod ns/victim of queue queue-a on node n1: pod "
                    "group ns/victim (priority 0) has a lower priority than pod group ns/first "
                    "(priority 100) in queue 'queue-a'"
                ),
            )
        ],
    ),
    "a victim without a record is evicted with no reclaimer named": PlansCase(
        records=(),
        expected=[
            reclaiming.Eviction(
                victim="ns/victim",
                reclaimer="",
                victim_uid="uid-victim",
                rule="reclaim",
                victim_message="Evicted by queuetree reclaim",
                reclaimer_message="",
            )
        ],
    ),
}


@pytest.mark.parametrize(("records", "expected"), list(PLANS.values()), ids=list(PLANS))
def test_planned_evictions_name_the_core_s_reclaimer(
    records: tuple[decisions.Eviction, ...], expected: list[reclaiming.Eviction]
) -> None:
    victim = dataclasses.replace(fakes.pod("victim", gates=(), queue="queue-b"), node_name="n1")
    # Both wait for room in queue-a; the first in creation order is not the core's reclaimer.
    first, second = (
        dataclasses.replace(fakes.pod(name, gates=(), queue="queue-a"), unschedulable=True)
        for name in ("first", "second")
    )
    result = decisions.SessionResult(ready=True, evict=("ns/victim",), evictions=records)
    plan = reclaiming.plan_reclaim(snapshot(victim, first, second), result)
    assert plan == expected


def test_events_from_a_real_session_pair_each_victim_with_its_own_reclaimer() -> None:
    """Two teams wait for room, one victim on each node: each team's pod is told of the victim
    evicted for it (a guess by queue or creation order would name the same pod twice)."""
    two = {"cpu": "2", "memory": "2Gi"}
    items: list[object] = [
        b.node("n1").allocatable(cpu="2", memory="2Gi", pods="10"),
        b.node("n2").allocatable(cpu="2", memory="2Gi", pods="10"),
        b.queue("root"),
        b.queue("team-a").deserved(**two),
        b.queue("team-b").deserved(**two),
        b.queue("borrower"),
    ]
    for name, queue, node in (("v1", "borrower", "n1"), ("v2", "borrower", "n2")):
        items += [
            b.pod_group("ns", name).queue(queue).phase(objects.PodGroupPhase.RUNNING),
            b.pod("ns", name).group(name).requests(**two).admitted_to(queue).running_on(node),
        ]
    for name, queue in (("r-a", "team-a"), ("r-b", "team-b")):
        items += [
            b.pod_group("ns", name).queue(queue).phase(objects.PodGroupPhase.INQUEUE),
            b.pod("ns", name).group(name).requests(**two).admitted_to(queue).unschedulable(),
        ]
    view = b.snapshot(*items)  # type: ignore[arg-type]
    config = b.config(
        [
            b.plugin(
                "capacity",
                "enabledAllocatable",
                "enablePreemptive",
                "enableReclaimable",
                "enableQueueOrder",
                hierarchy=True,
            ),
            b.plugin("predicates", "enablePredicate"),
            b.plugin("gang", "enableJobStarving"),
        ],
        actions=("enqueue", "allocate", "reclaim"),
    )
    result = sessions.run_session(
        view, config=config, feature_gates=b.GATES_ON, admission_only=True
    )
    plan = reclaiming.plan_reclaim(view, result)
    reason = (
        "queue 'borrower' deserves none of the resources the pod holds (cpu 2, memory 2Gi); "
        "ancestorReclaimLevel 0"
    )
    assert [(e.victim, e.reclaimer, e.rule, e.reclaimer_message) for e in plan] == [
        (
            "ns/v1",
            "ns/r-a",
            "reclaim-undeserved",
            f"Reclaiming resources from pod ns/v1 of queue borrower on node n1: {reason}",
        ),
        (
            "ns/v2",
            "ns/r-b",
            "reclaim-undeserved",
            f"Reclaiming resources from pod ns/v2 of queue borrower on node n2: {reason}",
        ),
    ]


class DimensionsCase(NamedTuple):
    quantities: Any
    expected: Any


DIMENSIONS = {
    "cpu in cores and memory in bytes": DimensionsCase(
        quantities={"cpu": "1500m", "memory": "2Gi"},
        expected=[("cpu", 1.5), ("memory", 2.0 * 2**30)],
    ),
    "gpus in units and pods as a count": DimensionsCase(
        quantities={"cpu": "0", "memory": "0", "nvidia.com/gpu": "2", "pods": "10"},
        expected=[("cpu", 0.0), ("memory", 0.0), ("nvidia.com/gpu", 2.0), ("pods", 10.0)],
    ),
}


@pytest.mark.parametrize(
    ("quantities", "expected"), list(DIMENSIONS.values()), ids=list(DIMENSIONS)
)
def test_iter_dimensions_uses_display_units(
    quantities: dict[str, str], expected: list[tuple[str, float]]
) -> None:
    vector = resources.Resource.from_resource_list(quantities)
    assert metrics.iter_dimensions(vector) == expected


def test_unlimited_dimensions_are_not_exported_and_gone_queues_disappear() -> None:
    exported = metrics.create()
    infinite = resources.Resource.infinite()
    used = resources.Resource.from_resource_list({"cpu": "2"})
    figures = decisions.QueueFigures(
        allocated=used, deserved=used, capability=infinite, real_capability=infinite
    )
    exported.record_queues({"team": figures}, {"team": 3})
    sample = exported.registry.get_sample_value
    assert (
        sample("queuetree_queue_allocated_cpu_cores", {"queue": "team"}),
        sample("queuetree_queue_capability_cpu_cores", {"queue": "team"}),
        sample("queuetree_queue_gated_pods", {"queue": "team"}),
    ) == (2.0, None, 3.0)
    more = resources.Resource.from_resource_list({"cpu": "3"})
    exported.record_queues(
        {"team": dataclasses.replace(figures, allocated=more, deserved=infinite)}, {"team": 1}
    )
    assert (
        sample("queuetree_queue_allocated_cpu_cores", {"queue": "team"}),
        sample("queuetree_queue_deserved_cpu_cores", {"queue": "team"}),
        sample("queuetree_queue_gated_pods", {"queue": "team"}),
    ) == (3.0, None, 1.0)
    exported.record_queues({}, {})
    assert sample("queuetree_queue_allocated_cpu_cores", {"queue": "team"}) is None


def test_protected_pods_are_not_preemptable_and_the_rest_are_untouched() -> None:
    pods = [fakes.pod(name, gates=()) for name in ("a", "b")]
    original = snapshot(*pods)
    protected = reclaiming.protect(original, {"ns/a", "ns/gone"})
    assert {key: pod.preemptable for key, pod in protected.pods.items()} == {
        "ns/a": False,
        "ns/b": True,
    }
    assert (original.pods["ns/a"].preemptable, reclaiming.protect(original, {"ns/gone"})) == (
        True,
        original,
    )


def test_every_unit_has_its_own_gauge_and_the_oldest_gated_age_is_exported() -> None:
    exported = metrics.create()
    used = resources.Resource.from_resource_list(
        {"cpu": "1500m", "memory": "1Gi", "nvidia.com/gpu": "2", "pods": "3"}
    )
    figures = decisions.QueueFigures(
        allocated=used, deserved=used, capability=used, real_capability=used
    )
    exported.record_queues({"team": figures}, {"team": 1}, {"team": 42.0})
    sample = exported.registry.get_sample_value
    assert (
        sample("queuetree_queue_allocated_cpu_cores", {"queue": "team"}),
        sample("queuetree_queue_allocated_memory_bytes", {"queue": "team"}),
        sample("queuetree_queue_allocated_pods", {"queue": "team"}),
        sample(
            "queuetree_queue_allocated_scalar_resources",
            {"queue": "team", "resource": "nvidia.com/gpu"},
        ),
        sample("queuetree_queue_oldest_gated_pod_age_seconds", {"queue": "team"}),
    ) == (1.5, 2.0**30, 3.0, 2.0, 42.0)


OUTGROWN = {
    "ns/a": ("uid-a", "its claims outgrew its admission"),
    "ns/b": ("uid-b", "so did these"),
}


@pytest.mark.parametrize(
    ("pods", "skip", "evicted"),
    [
        pytest.param(
            [fakes.pod("a"), fakes.pod("b")], set(), ["ns/a", "ns/b"], id="each-in-key-order"
        ),
        pytest.param(
            [fakes.pod("a"), fakes.pod("b")],
            {"ns/a"},
            ["ns/b"],
            id="not-one-chosen-already-or-refused-a-moment-ago",
        ),
        pytest.param(
            [
                dataclasses.replace(fakes.pod("a"), status=objects.TaskStatus.RELEASING),
                fakes.pod("b"),
            ],
            set(),
            ["ns/b"],
            id="not-one-being-deleted",
        ),
    ],
)
def test_pods_whose_claims_outgrew_their_admission_are_evicted(
    pods: list[objects.Pod], skip: set[str], evicted: list[str]
) -> None:
    plan = reclaiming.plan_outgrown(snapshot(*pods), OUTGROWN, skip=skip)
    assert [(e.victim, e.victim_uid, e.reclaimer, e.rule, e.event_type) for e in plan] == [
        (key, OUTGROWN[key][0], "", "claim-outgrown", "Warning") for key in evicted
    ]
    assert all(OUTGROWN[e.victim][1] in e.victim_message for e in plan)
