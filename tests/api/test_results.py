"""Session results rendered as the JSON object of DESIGN.md's contract."""

from __future__ import annotations

from types import MappingProxyType

from queuetree.api import results
from queuetree.core import decisions, objects, resources

GPU = "nvidia.com/gpu"


def test_a_session_result_renders_every_contract_key_with_quantity_maps() -> None:
    result = decisions.SessionResult(
        ready=False,
        errors=("queue q9 has a missing parent nope",),
        warnings=("plugin drf ignored",),
        bind=MappingProxyType({"ns/a": "n1"}),
        pipeline=MappingProxyType({"ns/b": "n2"}),
        evict=("ns/c", "ns/d"),
        evictions=(
            decisions.Eviction(
                victim="ns/c",
                reclaimer="ns/b",
                action="reclaim",
                rule=decisions.EvictionRule.RECLAIM_UNDESERVED,
                reason="queue 'q2' deserves none of the resources the pod holds (cpu 1)",
                node="n2",
                victim_queue="q2",
                reclaimer_queue="q1",
            ),
            decisions.Eviction(
                victim="ns/d",
                reclaimer="ns/b",
                action="preempt",
                rule=decisions.EvictionRule.PREEMPT_LOWER_PRIORITY,
                reason="pod group ns/d (priority 0) has a lower priority than pod group ns/b",
                node="n2",
                victim_queue="q1",
                reclaimer_queue="q1",
            ),
        ),
        ungate=("ns/e",),
        pod_groups=MappingProxyType({"ns/pg": objects.PodGroupPhase.INQUEUE}),
        queues=MappingProxyType(
            {
                "root": decisions.QueueFigures(
                    allocated=resources.Resource(1500, 2 * 2**30, {GPU: 1000}),
                    deserved=resources.Resource(4000, 8 * 2**30),
                    capability=resources.Resource.infinite(),
                    real_capability=resources.Resource(
                        resources.UNLIMITED, resources.UNLIMITED, {GPU: 8000}
                    ),
                    share=0.375,
                    state=objects.QueueState.CLOSING,
                )
            }
        ),
        reasons=MappingProxyType({"ns/f": "queue q1: requested 1, used 4 of capability 4"}),
    )
    assert results.render_session_result(result, warnings=["input: ignored"]) == {
        "ready": False,
        "errors": ["queue q9 has a missing parent nope"],
        "warnings": ["input: ignored", "plugin drf ignored"],
        "bind": {"ns/a": "n1"},
        "pipeline": {"ns/b": "n2"},
        "evict": ["ns/c", "ns/d"],
        "evictions": [
            {
                "victim": "ns/c",
                "reclaimer": "ns/b",
                "action": "reclaim",
                "rule": "reclaim-undeserved",
                "reason": "queue 'q2' deserves none of the resources the pod holds (cpu 1)",
                "node": "n2",
                "victimQueue": "q2",
                "reclaimerQueue": "q1",
            },
            {
                "victim": "ns/d",
                "reclaimer": "ns/b",
                "action": "preempt",
                "rule": "preempt-lower-priority",
                "reason": "pod group ns/d (priority 0) has a lower priority than pod group ns/b",
                "node": "n2",
                "victimQueue": "q1",
                "reclaimerQueue": "q1",
            },
        ],
        "ungate": ["ns/e"],
        "podGroups": {"ns/pg": "Inqueue"},
        "queues": {
            "root": {
                "allocated": {"cpu": "1500m", "memory": "2Gi", GPU: "1"},
                "deserved": {"cpu": "4", "memory": "8Gi"},
                "capability": {},
                "realCapability": {GPU: "8"},
                "share": 0.375,
                "state": "Closing",
            }
        },
        "reasons": {"ns/f": "queue q1: requested 1, used 4 of capability 4"},
    }
