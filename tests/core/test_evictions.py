"""Every eviction names the pod it makes room for and the rule that chose the victim.

``SessionResult.evictions`` pairs each victim with its reclaimer (or preemptor) and words the
rule: the capacity plugin's for reclaim (the victim's queue above its deserved share, or
deserving none of what the pod holds, and each ancestor checked within ancestorReclaimLevel),
the priority plugin's for preempt. The records follow ``evict`` one to one.
"""

from __future__ import annotations

import dataclasses

import pytest

from queuetree.core import configs, decisions, objects, sessions
from tests import builders as b

RUNNING = objects.PodGroupPhase.RUNNING
INQUEUE = objects.PodGroupPhase.INQUEUE
TWO = {"cpu": "2", "memory": "2Gi"}
OVER = decisions.EvictionRule.RECLAIM_OVER_DESERVED
UNDESERVED = decisions.EvictionRule.RECLAIM_UNDESERVED


def _reclaim_config(
    level: int, *, hierarchy: bool = True, capacity_votes: bool = True
) -> configs.SchedulerConfiguration:
    flags = ["enabledAllocatable", "enablePreemptive", "enableQueueOrder", "enableJobEnqueued"]
    if capacity_votes:
        flags.append("enableReclaimable")
    tiers = [
        b.plugin(
            "capacity", *flags, hierarchy=hierarchy, arguments={"ancestorReclaimLevel": level}
        ),
        b.plugin("predicates", "enablePredicate"),
        b.plugin("gang", "enableJobStarving"),
    ]
    if not capacity_votes:
        tiers.append(b.plugin("conformance", "enableReclaimable"))
    return b.config(tiers, actions=("enqueue", "reclaim", "allocate"))


def _preempt_config() -> configs.SchedulerConfiguration:
    return b.config(
        [
            b.plugin("priority"),
            b.plugin("gang", "enableJobReady", "enableJobPipelined", "enableJobStarving"),
            b.plugin("conformance", "enablePreemptable"),
        ],
        [b.plugin("predicates"), b.plugin("capacity", hierarchy=True), b.plugin("nodeorder")],
        actions=("enqueue", "allocate", "preempt"),
    )


def _running(
    name: str, queue: str, node: str = "n1", *, admitted: bool = False, **req: str
) -> tuple[object, ...]:
    """A running pod of ``queue``; ``admitted``: it carries the admission record (in admission
    mode only such pods are in a queue, and so may be victims)."""
    pod = b.pod("ns", name).group(name).requests(**(req or TWO)).running_on(node)
    return (
        b.pod_group("ns", name).queue(queue).phase(RUNNING),
        pod.admitted_to(queue) if admitted else pod,
    )


def _waiting(name: str, queue: str, *, admitted: bool = False, **req: str) -> tuple[object, ...]:
    """An ungated pod kube-scheduler found no node for; ``admitted`` as for :func:`_running`
    (in admission mode only such pods may reclaim)."""
    pod = b.pod("ns", name).group(name).requests(**(req or TWO)).unschedulable()
    return (
        b.pod_group("ns", name).queue(queue).phase(INQUEUE),
        pod.admitted_to(queue) if admitted else pod,
    )


def _level_tree(*, grand_b_deserved: str) -> tuple[object, ...]:
    """Two branches: ``grand-a/parent-a/queue-a`` (the reclaimer's, within its deserved) and
    ``grand-b/parent-b/queue-b`` (the victim's; leaf and parent deserve 1 cpu, 1Gi)."""
    one = {"cpu": "1", "memory": "1Gi"}
    two = {"cpu": "2", "memory": "2Gi"}
    four = {"cpu": "4", "memory": "4Gi"}
    g = grand_b_deserved
    return (
        b.node("n1").allocatable(cpu="2", memory="2Gi", pods="10"),
        b.queue("root"),
        b.queue("grand-a").deserved(**two).capability(**four),
        b.queue("parent-a").parent("grand-a").deserved(**two).capability(**two),
        b.queue("queue-a").parent("parent-a").deserved(**two).capability(**two),
        b.queue("grand-b").deserved(cpu=g, memory=f"{g}Gi").capability(**four),
        b.queue("parent-b").parent("grand-b").deserved(**one).capability(**two),
        b.queue("queue-b").parent("parent-b").deserved(**one).capability(**two),
        *_running("victim", "queue-b"),
        *_waiting("reclaimer", "queue-a"),
    )


def _eviction(
    victim: str,
    reclaimer: str,
    *,
    rule: decisions.EvictionRule,
    reason: str,
    queues: tuple[str, str],
    node: str = "n1",
    action: str = "reclaim",
) -> decisions.Eviction:
    return decisions.Eviction(
        victim=f"ns/{victim}",
        reclaimer=f"ns/{reclaimer}",
        action=action,
        rule=rule,
        reason=reason,
        node=node,
        victim_queue=queues[0],
        reclaimer_queue=queues[1],
    )


QUEUE_B_OVER = "queue 'queue-b' is above its deserved share (cpu 2 > 1, memory 2Gi > 1Gi)"
TWO_NODES = (
    b.node("n1").allocatable(cpu="2", memory="2Gi", pods="10"),
    b.node("n2").allocatable(cpu="2", memory="2Gi", pods="10"),
)
TWO_TEAMS_AND_A_BORROWER = (
    *TWO_NODES,
    b.queue("root"),
    b.queue("team-a").deserved(**TWO),
    b.queue("team-b").deserved(**TWO),
    b.queue("borrower"),
    *_running("v1", "borrower", "n1"),
    *_running("v2", "borrower", "n2"),
    *_waiting("r-a", "team-a"),
    *_waiting("r-b", "team-b"),
)
TWO_TEAMS_AND_A_BORROWER_ADMITTED = (
    *TWO_NODES,
    b.queue("root"),
    b.queue("team-a").deserved(**TWO),
    b.queue("team-b").deserved(**TWO),
    b.queue("borrower"),
    *_running("v1", "borrower", "n1", admitted=True),
    *_running("v2", "borrower", "n2", admitted=True),
    *_waiting("r-a", "team-a", admitted=True),
    *_waiting("r-b", "team-b", admitted=True),
)
"""The same pods, admitted through the gate: what an admission-mode session counts."""
TWO_TEAMS = (
    _eviction(
        "v1",
        "r-a",
        rule=UNDESERVED,
        reason=(
            "queue 'borrower' deserves none of the resources the pod holds (cpu 2, memory 2Gi); "
            "ancestorReclaimLevel 0"
        ),
        queues=("borrower", "team-a"),
    ),
    _eviction(
        "v2",
        "r-b",
        rule=UNDESERVED,
        reason=(
            "queue 'borrower' deserves none of the resources the pod holds (cpu 2, memory 2Gi); "
            "ancestorReclaimLevel 0"
        ),
        queues=("borrower", "team-b"),
        node="n2",
    ),
)


@dataclasses.dataclass(frozen=True)
class Case:
    objects: tuple[object, ...]
    config: configs.SchedulerConfiguration
    evictions: tuple[decisions.Eviction, ...]
    admission_only: bool = False


CASES = {
    "level 0 reclaims across parents on the leaf's deserved share alone": Case(
        objects=_level_tree(grand_b_deserved="3"),
        config=_reclaim_config(0),
        evictions=(
            _eviction(
                "victim",
                "reclaimer",
                rule=OVER,
                reason=f"{QUEUE_B_OVER}; ancestorReclaimLevel 0",
                queues=("queue-b", "queue-a"),
            ),
        ),
    ),
    "level 1 names the victim's parent above its deserved share too": Case(
        objects=_level_tree(grand_b_deserved="3"),
        config=_reclaim_config(1),
        evictions=(
            _eviction(
                "victim",
                "reclaimer",
                rule=OVER,
                reason=(
                    f"{QUEUE_B_OVER}; its ancestor 'parent-b' is above its deserved share "
                    "(cpu 2 > 1, memory 2Gi > 1Gi); ancestorReclaimLevel 1"
                ),
                queues=("queue-b", "queue-a"),
            ),
        ),
    ),
    "level 2 names the parent and the grandparent above their deserved shares": Case(
        objects=_level_tree(grand_b_deserved="1"),
        config=_reclaim_config(2),
        evictions=(
            _eviction(
                "victim",
                "reclaimer",
                rule=OVER,
                reason=(
                    f"{QUEUE_B_OVER}; its ancestor 'parent-b' is above its deserved share "
                    "(cpu 2 > 1, memory 2Gi > 1Gi); its ancestor 'grand-b' is above its "
                    "deserved share (cpu 2 > 1, memory 2Gi > 1Gi); ancestorReclaimLevel 2"
                ),
                queues=("queue-b", "queue-a"),
            ),
        ),
    ),
    "level 2 evicts nothing when the grandparent is within its deserved share": Case(
        objects=_level_tree(grand_b_deserved="3"),
        config=_reclaim_config(2),
        evictions=(),
    ),
    "a parent shared with the reclaimer's queue is named as not checked": Case(
        objects=(
            b.node("n1").allocatable(cpu="2", memory="2Gi", pods="10"),
            b.queue("root"),
            b.queue("org").deserved(cpu="4", memory="4Gi"),
            b.queue("queue-a").parent("org").deserved(**TWO),
            b.queue("queue-b").parent("org").deserved(cpu="1", memory="1Gi"),
            *_running("victim", "queue-b"),
            *_waiting("reclaimer", "queue-a"),
        ),
        config=_reclaim_config(1),
        evictions=(
            _eviction(
                "victim",
                "reclaimer",
                rule=OVER,
                reason=(
                    f"{QUEUE_B_OVER}; its ancestor 'org' is shared with queue 'queue-a'; "
                    "ancestorReclaimLevel 1"
                ),
                queues=("queue-b", "queue-a"),
            ),
        ),
    ),
    "a victim queue that deserves nothing is reclaimed when its parent is over its share": Case(
        objects=(
            b.node("n1").allocatable(cpu="2", memory="2Gi", pods="10"),
            b.queue("root"),
            b.queue("org-a").deserved(**TWO),
            b.queue("queue-a").parent("org-a").deserved(**TWO),
            b.queue("org-b").deserved(cpu="1", memory="1Gi"),
            b.queue("queue-b").parent("org-b"),
            *_running("victim", "queue-b"),
            *_waiting("reclaimer", "queue-a"),
        ),
        config=_reclaim_config(1),
        evictions=(
            _eviction(
                "victim",
                "reclaimer",
                rule=UNDESERVED,
                reason=(
                    "queue 'queue-b' deserves none of the resources the pod holds (cpu 2, "
                    "memory 2Gi); its ancestor 'org-b' is above its deserved share (cpu 2 > 1, "
                    "memory 2Gi > 1Gi); ancestorReclaimLevel 1"
                ),
                queues=("queue-b", "queue-a"),
            ),
        ),
    ),
    "two reclaimers in two queues each get the victim on their own node": Case(
        objects=TWO_TEAMS_AND_A_BORROWER,
        config=_reclaim_config(0),
        evictions=TWO_TEAMS,
    ),
    "two reclaimers in two queues each get their own victim in admission mode": Case(
        objects=TWO_TEAMS_AND_A_BORROWER_ADMITTED,
        config=_reclaim_config(0),
        evictions=TWO_TEAMS,
        admission_only=True,
    ),
    "one reclaimer takes two victims from two queues, the closer relative first": Case(
        objects=(
            b.node("n1").allocatable(cpu="4", memory="4Gi", pods="10"),
            b.queue("root"),
            b.queue("org-a").deserved(cpu="4", memory="4Gi"),
            b.queue("queue-a").parent("org-a").deserved(cpu="4", memory="4Gi"),
            b.queue("sibling").parent("org-a"),
            b.queue("stranger"),
            *_running("far", "stranger"),
            *_running("near", "sibling"),
            *_waiting("reclaimer", "queue-a", cpu="4", memory="4Gi"),
        ),
        config=_reclaim_config(0),
        evictions=(
            _eviction(
                "near",
                "reclaimer",
                rule=UNDESERVED,
                reason=(
                    "queue 'sibling' deserves none of the resources the pod holds (cpu 2, "
                    "memory 2Gi); ancestorReclaimLevel 0"
                ),
                queues=("sibling", "queue-a"),
            ),
            _eviction(
                "far",
                "reclaimer",
                rule=UNDESERVED,
                reason=(
                    "queue 'stranger' deserves none of the resources the pod holds (cpu 2, "
                    "memory 2Gi); ancestorReclaimLevel 0"
                ),
                queues=("stranger", "queue-a"),
            ),
        ),
    ),
    "flat queues word the leaf's rule without ancestorReclaimLevel": Case(
        objects=(
            b.node("n1").allocatable(cpu="2", memory="2Gi", pods="10"),
            b.queue("owner").deserved(**TWO),
            b.queue("borrower").deserved(cpu="1", memory="1Gi"),
            *_running("victim", "borrower"),
            *_waiting("claim", "owner"),
        ),
        config=_reclaim_config(1, hierarchy=False),
        evictions=(
            _eviction(
                "victim",
                "claim",
                rule=OVER,
                reason="queue 'borrower' is above its deserved share (cpu 2 > 1, memory 2Gi > 1Gi)",
                queues=("borrower", "owner"),
            ),
        ),
    ),
    "victims chosen without the capacity plugin's vote name the plugins that chose them": Case(
        objects=(
            b.node("n1").allocatable(cpu="2", memory="2Gi", pods="10"),
            b.queue("root"),
            b.queue("owner").deserved(**TWO),
            b.queue("borrower").deserved(**TWO),
            *_running("victim", "borrower"),
            *_waiting("claim", "owner"),
        ),
        config=_reclaim_config(0, capacity_votes=False),
        evictions=(
            _eviction(
                "victim",
                "claim",
                rule=decisions.EvictionRule.RECLAIM,
                reason=(
                    "a pod of queue 'borrower', chosen by the conformance plugin (not a "
                    "kube-system or system-critical pod)"
                ),
                queues=("borrower", "owner"),
            ),
        ),
    ),
    "the default tiers let gang and conformance choose a pod group's pods beyond minMember": Case(
        objects=(
            b.node("n1").allocatable(cpu="2", memory="2Gi", pods="10"),
            b.queue("root"),
            b.queue("owner").deserved(**TWO),
            b.queue("borrower"),
            b.pod_group("ns", "elastic").queue("borrower").phase(RUNNING),
            *(
                b.pod("ns", f"e-{i}").group("elastic").requests(cpu="1").running_on("n1")
                for i in (0, 1)
            ),
            *_waiting("claim", "owner", cpu="1"),
        ),
        config=b.config(
            [b.plugin("priority"), b.plugin("gang"), b.plugin("conformance")],
            [b.plugin("predicates"), b.plugin("capacity", hierarchy=True), b.plugin("nodeorder")],
            actions=("enqueue", "allocate", "reclaim"),
        ),
        evictions=(
            _eviction(
                "e-0",
                "claim",
                rule=decisions.EvictionRule.RECLAIM,
                reason=(
                    "a pod of queue 'borrower', chosen by the gang, conformance plugins (its pod "
                    "group runs more pods than its minMember; not a kube-system or "
                    "system-critical pod)"
                ),
                queues=("borrower", "owner"),
            ),
        ),
    ),
    "preempt: a higher-priority pod group evicts a lower one of its queue": Case(
        objects=(
            b.node("n1").allocatable(cpu="1", memory="8Gi"),
            objects.PriorityClass(name="high", value=100),
            b.queue("root"),
            b.queue("q"),
            *_running("low", "q", cpu="1"),
            b.pod_group("ns", "high").queue("q").phase(INQUEUE).priority_class("high"),
            b.pod("ns", "high").group("high").requests(cpu="1"),
        ),
        config=_preempt_config(),
        evictions=(
            _eviction(
                "low",
                "high",
                action="preempt",
                rule=decisions.EvictionRule.PREEMPT_LOWER_PRIORITY,
                reason=(
                    "pod group ns/low (priority 0) has a lower priority than pod group ns/high "
                    "(priority 100) in queue 'q'"
                ),
                queues=("q", "q"),
            ),
        ),
    ),
    "preempt: a pod evicts a lower-priority pod of its own group": Case(
        objects=(
            b.node("n1").allocatable(cpu="1", memory="8Gi"),
            b.queue("root"),
            b.queue("q"),
            # minMember 2: the group starves with one pod running, so it may preempt.
            b.pod_group("ns", "job").queue("q").phase(RUNNING).min_member(2),
            b.pod("ns", "worker").group("job").requests(cpu="1").priority(1).running_on("n1"),
            b.pod("ns", "leader").group("job").requests(cpu="1").priority(10),
        ),
        config=_preempt_config(),
        evictions=(
            _eviction(
                "worker",
                "leader",
                action="preempt",
                rule=decisions.EvictionRule.PREEMPT_LOWER_PRIORITY_TASK,
                reason=(
                    "the pod's priority 1 is below 10 of pod ns/leader in the same pod group ns/job"
                ),
                queues=("q", "q"),
            ),
        ),
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_each_eviction_names_its_reclaimer_and_rule(case: Case) -> None:
    result = sessions.run_session(
        b.snapshot(*case.objects),  # type: ignore[arg-type]
        config=case.config,
        feature_gates=b.GATES_OFF,
        admission_only=case.admission_only,
    )
    expected_pairs = {e.victim: e.reclaimer for e in case.evictions}
    assert (result.errors, result.evictions, dict(result.evicted_for), result.evict) == (
        (),
        case.evictions,
        expected_pairs,
        tuple(expected_pairs),
    )


def test_the_records_and_pairs_are_the_same_for_the_same_snapshot() -> None:
    def run() -> decisions.SessionResult:
        return sessions.run_session(
            b.snapshot(*TWO_TEAMS_AND_A_BORROWER),  # type: ignore[arg-type]
            config=_reclaim_config(0),
            feature_gates=b.GATES_OFF,
        )

    first, second = run(), run()
    assert (first.evictions, dict(first.evicted_for)) == (
        second.evictions,
        dict(second.evicted_for),
    )


def test_a_session_without_evictions_pairs_nothing() -> None:
    result = decisions.SessionResult(ready=True)
    assert (result.evictions, dict(result.evicted_for)) == ((), {})
