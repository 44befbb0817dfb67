"""The eleven ancestor-reclaim scenarios of spec §3.12.1, run on the engine directly.

Actions enqueue, reclaim, allocate; tiers as Volcano's unit test builds them: capacity
(allocatable, preemptive, reclaimable, queueOrder, jobEnqueued; hierarchy on; ancestorReclaimLevel
per case), predicates (predicate), gang (jobStarving), plus priority (jobOrder, taskOrder) where
the spec notes "prio". Every expectation is whole: evictions (and whom each victim was evicted
for), pipelines and (no) binds.
"""

from __future__ import annotations

import dataclasses

import pytest

from queuetree.core import objects, sessions
from tests import builders as b

RUNNING = objects.PodGroupPhase.RUNNING
INQUEUE = objects.PodGroupPhase.INQUEUE
PENDING = objects.PodGroupPhase.PENDING
SMALL = {"cpu": "1", "memory": "1Gi", "a100": "1", "hca": "1"}


def _config(level: int, *, prio: bool) -> object:
    tiers = [
        b.plugin(
            "capacity",
            "enabledAllocatable",
            "enablePreemptive",
            "enableReclaimable",
            "enableQueueOrder",
            "enableJobEnqueued",
            hierarchy=True,
            arguments={"ancestorReclaimLevel": level},
        ),
        b.plugin("predicates", "enablePredicate"),
        b.plugin("gang", "enableJobStarving"),
    ]
    if prio:
        tiers.append(b.plugin("priority", "enableJobOrder", "enableTaskOrder"))
    return b.config(tiers, actions=("enqueue", "reclaim", "allocate"))


def _group(name: str, queue: str, phase: objects.PodGroupPhase) -> b.PodGroupBuilder:
    return b.pod_group("ns1", name).queue(queue).phase(phase)


def _running(name: str, group: str, **req: str) -> b.PodBuilder:
    return b.pod("ns1", name).group(group).requests(**req).running_on("n1")


def _pending(name: str, group: str, **req: str) -> b.PodBuilder:
    return b.pod("ns1", name).group(group).requests(**req)


N1 = b.node("n1").allocatable(cpu="16", memory="16Gi", a100="4", hca="1001", pods="11")
ROOT_DESERVED = b.queue("root").deserved(cpu="16", memory="16Gi", a100="4", rdma="1000")
PROJECT_TREE = (
    ROOT_DESERVED,
    b.queue("project1_root").deserved(a100="1").capability(a100="2"),
    b.queue("project1_non-preemptable")
    .parent("project1_root")
    .deserved(a100="1")
    .capability(a100="1"),
    b.queue("project1_preemptable").parent("project1_root"),
    b.queue("project2_root").deserved(a100="3").capability(a100="4"),
    b.queue("project2_non-preemptable")
    .parent("project2_root")
    .deserved(a100="3")
    .capability(a100="3"),
    b.queue("project2_preemptable").parent("project2_root"),
)
LEVEL_TREE = (
    b.queue("root"),
    b.queue("grand-a").deserved(cpu="2", memory="2Gi").capability(cpu="4", memory="4Gi"),
    b.queue("parent-a")
    .parent("grand-a")
    .deserved(cpu="2", memory="2Gi")
    .capability(cpu="2", memory="2Gi"),
    b.queue("queue-a")
    .parent("parent-a")
    .deserved(cpu="2", memory="2Gi")
    .capability(cpu="2", memory="2Gi"),
    b.queue("grand-b").deserved(cpu="3", memory="3Gi").capability(cpu="4", memory="4Gi"),
    b.queue("parent-b")
    .parent("grand-b")
    .deserved(cpu="1", memory="1Gi")
    .capability(cpu="2", memory="2Gi"),
    b.queue("queue-b")
    .parent("parent-b")
    .deserved(cpu="1", memory="1Gi")
    .capability(cpu="2", memory="2Gi"),
)
SMALL_NODE = b.node("n1").allocatable(cpu="2", memory="2Gi", pods="10")


def _victim_and_reclaimer(victim_queue: str, reclaimer_queue: str) -> tuple[object, ...]:
    return (
        _group("pg-victim", victim_queue, RUNNING),
        _running("p-victim", "pg-victim", cpu="2", memory="2Gi"),
        _group("pg-reclaimer", reclaimer_queue, INQUEUE),
        _pending("p-reclaimer", "pg-reclaimer", cpu="2", memory="2Gi"),
    )


@dataclasses.dataclass(frozen=True)
class Case:
    level: int
    prio: bool
    objects: tuple[object, ...]
    evict: tuple[str, ...] = ()
    pipeline: tuple[tuple[str, str], ...] = ()
    evicted_for: dict[str, str] = dataclasses.field(default_factory=dict)
    """Victim -> the pod it was evicted for (``SessionResult.evicted_for``)."""


CASES = {
    "case 1: a parent under its deserved reclaims from a queue without deserved": Case(
        level=1,
        prio=True,
        objects=(
            N1,
            ROOT_DESERVED,
            b.queue("case1_queue1").deserved(a100="1"),
            b.queue("case1_queue11").parent("case1_queue1"),
            b.queue("case1_queue2"),
            _group("pg1", "case1_queue2", RUNNING),
            _running("p1", "pg1", cpu="1", memory="1Gi", a100="4", hca="1"),
            _group("pg2", "case1_queue11", INQUEUE),
            _pending("p2", "pg2", **SMALL),
        ),
        evict=("ns1/p1",),
        pipeline=(("ns1/p2", "n1"),),
        evicted_for={"ns1/p1": "ns1/p2"},
    ),
    "case 2: the lowest-priority victim goes when the victim's parent is over deserved": Case(
        level=1,
        prio=True,
        objects=(
            N1,
            *PROJECT_TREE,
            *(
                item
                for i, prio in ((1, 2), (2, 2), (3, 2), (4, 1))
                for item in (
                    _group(f"pg{i}", "project2_preemptable", RUNNING),
                    _running(f"p{i}", f"pg{i}", **SMALL).priority(prio),
                )
            ),
            _group("pg5", "project1_preemptable", PENDING),
            _pending("p5", "pg5", **SMALL),
        ),
        evict=("ns1/p4",),
        pipeline=(("ns1/p5", "n1"),),
        evicted_for={"ns1/p4": "ns1/p5"},
    ),
    "case 3: a sibling's borrowed pod is evicted first, the largest uid first": Case(
        level=1,
        prio=True,
        objects=(
            N1,
            *PROJECT_TREE,
            *(
                item
                for i in (1, 2, 3)
                for item in (
                    _group(f"pg{i}", "project2_preemptable", RUNNING),
                    _running(f"p{i}", f"pg{i}", **SMALL).priority(2),
                )
            ),
            _group("pg4_reclaimed", "project2_preemptable", INQUEUE),
            _pending("p4", "pg4_reclaimed", **SMALL),
            _group("pg5_pipelined", "project1_preemptable", RUNNING),
            _running("p5", "pg5_pipelined", **SMALL),
            _group("pg6", "project2_non-preemptable", PENDING),
            _pending("p6", "pg6", **SMALL),
        ),
        evict=("ns1/p3",),
        pipeline=(("ns1/p6", "n1"),),
        evicted_for={"ns1/p3": "ns1/p6"},
    ),
    "case 4: a victim queue within its deserved is not reclaimed": Case(
        level=1,
        prio=True,
        objects=(
            b.node("n1").allocatable(cpu="8", memory="8Gi", a100="1", hca="1001", pods="11"),
            ROOT_DESERVED,
            b.queue("case4_parent1").deserved(a100="1"),
            b.queue("case4_child1").parent("case4_parent1").deserved(a100="1"),
            b.queue("case4_child1_sibling").parent("case4_parent1"),
            b.queue("case4_parent2").deserved(a100="1"),
            b.queue("case4_child2").parent("case4_parent2").deserved(a100="1"),
            _group("pg1", "case4_child1", RUNNING),
            _running("p1", "pg1", **SMALL),
            _group("pg3", "case4_child1_sibling", RUNNING),
            _running("p3", "pg3", **SMALL).not_preemptable(),
            _group("pg2", "case4_child2", PENDING),
            _pending("p2", "pg2", **SMALL),
        ),
    ),
    "case 5: level 0 reclaims on the leaf's deserved alone": Case(
        level=0,
        prio=False,
        objects=(SMALL_NODE, *LEVEL_TREE, *_victim_and_reclaimer("queue-b", "queue-a")),
        evict=("ns1/p-victim",),
        pipeline=(("ns1/p-reclaimer", "n1"),),
        evicted_for={"ns1/p-victim": "ns1/p-reclaimer"},
    ),
    "case 6: level 1 reclaims when the victim's parent is over deserved": Case(
        level=1,
        prio=False,
        objects=(SMALL_NODE, *LEVEL_TREE, *_victim_and_reclaimer("queue-b", "queue-a")),
        evict=("ns1/p-victim",),
        pipeline=(("ns1/p-reclaimer", "n1"),),
        evicted_for={"ns1/p-victim": "ns1/p-reclaimer"},
    ),
    "case 7: level 2 stops at a grandparent within its deserved": Case(
        level=2,
        prio=False,
        objects=(SMALL_NODE, *LEVEL_TREE, *_victim_and_reclaimer("queue-b", "queue-a")),
    ),
    "case 8: siblings without deserved are held apart by the contention gate": Case(
        level=1,
        prio=False,
        objects=(
            SMALL_NODE,
            b.queue("root"),
            b.queue("parent").deserved(cpu="4", memory="4Gi").capability(cpu="4", memory="4Gi"),
            b.queue("queue-a").parent("parent"),
            b.queue("queue-b").parent("parent"),
            *_victim_and_reclaimer("queue-b", "queue-a"),
        ),
    ),
    "case 9: cousins under a shared grandparent over deserved do not reclaim": Case(
        level=2,
        prio=False,
        objects=(
            SMALL_NODE,
            b.queue("root"),
            b.queue("grand").deserved(cpu="2", memory="2Gi").capability(cpu="2", memory="2Gi"),
            b.queue("parent-a").parent("grand"),
            b.queue("queue-a").parent("parent-a"),
            b.queue("parent-b").parent("grand"),
            b.queue("queue-b").parent("parent-b"),
            *_victim_and_reclaimer("queue-b", "queue-a"),
        ),
    ),
    "case 10: an unbalanced tree sharing a grandparent does not reclaim": Case(
        level=2,
        prio=False,
        objects=(
            SMALL_NODE,
            b.queue("root"),
            b.queue("grand").deserved(cpu="1", memory="1Gi").capability(cpu="2", memory="2Gi"),
            b.queue("parent-deep")
            .parent("grand")
            .deserved(cpu="1", memory="1Gi")
            .capability(cpu="2", memory="2Gi"),
            b.queue("queue-deep").parent("parent-deep"),
            b.queue("queue-shallow").parent("grand"),
            *_victim_and_reclaimer("queue-deep", "queue-shallow"),
        ),
    ),
    "case 11: a depth-2 ancestor within its deserved blocks reclaim": Case(
        level=2,
        prio=False,
        objects=(
            b.node("n1").allocatable(cpu="4", memory="4Gi", pods="10", a100="2"),
            b.queue("root"),
            b.queue("shallow-parent").deserved(a100="1"),
            b.queue("queue-shallow").parent("shallow-parent").deserved(a100="1"),
            b.queue("deep-grand").deserved(a100="2"),
            b.queue("deep-parent").parent("deep-grand").deserved(a100="1"),
            b.queue("queue-deep").parent("deep-parent").deserved(a100="1"),
            _group("pg-victim", "queue-deep", RUNNING),
            _running("p-victim", "pg-victim", cpu="1", memory="1Gi", a100="2"),
            _group("pg-reclaimer", "queue-shallow", INQUEUE),
            _pending("p-reclaimer", "pg-reclaimer", cpu="1", memory="1Gi", a100="1"),
        ),
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_ancestor_reclaim_scenario_evicts_and_pipelines_as_volcano(case: Case) -> None:
    result = sessions.run_session(
        b.snapshot(*case.objects),  # type: ignore[arg-type]
        config=_config(case.level, prio=case.prio),  # type: ignore[arg-type]
        feature_gates=b.GATES_OFF,
    )
    got = (
        result.errors,
        result.evict,
        tuple(result.pipeline.items()),
        dict(result.bind),
        dict(result.evicted_for),
    )
    assert got == ((), case.evict, case.pipeline, {}, case.evicted_for)
