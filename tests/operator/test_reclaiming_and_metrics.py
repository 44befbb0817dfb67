"""Reclaim evictions name their reclaimer; metrics export queue figures in display units."""

from __future__ import annotations

import dataclasses
from types import MappingProxyType

import pytest

from queuetree.core import decisions, objects, resources
from queuetree.operator import metrics, reclaiming
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


def test_a_victim_is_paired_with_the_pod_waiting_in_another_queue() -> None:
    victim = dataclasses.replace(fakes.pod("victim", gates=(), queue="queue-b"), node_name="n1")
    waiting = dataclasses.replace(
        fakes.pod("waiting", gates=(), queue="queue-a"), unschedulable=True
    )
    result = decisions.SessionResult(ready=True, evict=("ns/victim",))
    plan = reclaiming.plan_reclaim(snapshot(victim, waiting), result, ancestor_reclaim_level=1)
    assert plan == [
        reclaiming.Eviction(
            victim="ns/victim",
            reclaimer="ns/waiting",
            victim_uid="uid-victim",
            reclaimer_uid="uid-waiting",
            rule="reclaim",
            victim_message=(
                "Evicted by queuetree reclaim: queue queue-b uses more than its deserved share "
                "and pod ns/waiting of queue queue-a is below its own; victim chosen by the "
                "capacity plugin with ancestorReclaimLevel=1"
            ),
            reclaimer_message=(
                "Reclaiming resources from pod ns/victim of queue queue-b (over its deserved "
                "share) on node n1, chosen with ancestorReclaimLevel=1"
            ),
        )
    ]


DIMENSIONS = {
    "cpu in cores and memory in bytes": (
        {"cpu": "1500m", "memory": "2Gi"},
        [("cpu", 1.5), ("memory", 2.0 * 2**30)],
    ),
    "gpus in units and pods as a count": (
        {"cpu": "0", "memory": "0", "nvidia.com/gpu": "2", "pods": "10"},
        [("cpu", 0.0), ("memory", 0.0), ("nvidia.com/gpu", 2.0), ("pods", 10.0)],
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
        sample("queuetree_queue_allocated", {"queue": "team", "resource": "cpu"}),
        sample("queuetree_queue_capability", {"queue": "team", "resource": "cpu"}),
        sample("queuetree_queue_gated_pods", {"queue": "team"}),
    ) == (2.0, None, 3.0)
    more = resources.Resource.from_resource_list({"cpu": "3"})
    exported.record_queues(
        {"team": dataclasses.replace(figures, allocated=more, deserved=infinite)}, {"team": 1}
    )
    assert (
        sample("queuetree_queue_allocated", {"queue": "team", "resource": "cpu"}),
        sample("queuetree_queue_deserved", {"queue": "team", "resource": "cpu"}),
        sample("queuetree_queue_gated_pods", {"queue": "team"}),
    ) == (3.0, None, 1.0)
    exported.record_queues({}, {})
    assert sample("queuetree_queue_allocated", {"queue": "team", "resource": "cpu"}) is None
