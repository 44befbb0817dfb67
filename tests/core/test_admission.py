"""Gate admission (spec §5.3), the seed's reservation race, and the deliberate fixes.

Each deliberate fix has a case whose expectation differs from what the reference scheduler
does; the id says what the reference would do instead.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import pytest

from queuetree.core import configs, objects, sessions
from tests import builders as b

INQUEUE = objects.PodGroupPhase.INQUEUE


def _config(
    *, hierarchy: bool, actions: tuple[str, ...] = ("enqueue", "allocate")
) -> configs.SchedulerConfiguration:
    return b.config(
        [b.plugin("priority"), b.plugin("gang"), b.plugin("conformance")],
        [
            b.plugin("predicates"),
            b.plugin("capacity", hierarchy=hierarchy),
            b.plugin("nodeorder"),
        ],
        actions=actions,
    )


NODE = b.node("n1").allocatable(cpu="8", memory="8Gi", pods="20")


def _race_pod(name: str, seconds: int) -> b.PodBuilder:
    return (
        b.pod("ns", name)
        .group(f"pg-{name}")
        .requests(cpu="1", memory="1Gi")
        .admission()
        .created(seconds)
    )


def _race_group(name: str) -> b.PodGroupBuilder:
    return b.pod_group("ns", f"pg-{name}").queue("q").phase(INQUEUE)


RACE_QUEUES = (b.queue("root"), b.queue("q").capability(cpu="1", memory="1Gi"))
UNPLACED = (
    "kube-scheduler found no node for the pod (Unschedulable) although its queue admitted it; "
    "reclaim cannot help: "
)
QUOTA_Q = "queue 'q' has no room for cpu: requested 1, used 1 of capability 1"


class RaceStepsCase(NamedTuple):
    objs: Any
    ungate: Any
    reasons: Any


RACE_STEPS = {
    "1: three gated pods, room for one: the oldest is ungated": RaceStepsCase(
        objs=(
            _race_group("pod-1"),
            _race_pod("pod-1", 1),
            _race_group("pod-2"),
            _race_pod("pod-2", 2),
            _race_group("pod-3"),
            _race_pod("pod-3", 3),
        ),
        ungate=("ns/pod-1",),
        reasons={
            "ns/pod-2": QUOTA_Q + " (0 allocated, 1 reserved by admitted pods not yet placed)",
            "ns/pod-3": QUOTA_Q + " (0 allocated, 1 reserved by admitted pods not yet placed)",
        },
    ),
    "2: pod-1 runs and holds the queue": RaceStepsCase(
        objs=(
            _race_group("pod-1"),
            b.pod("ns", "pod-1")
            .group("pg-pod-1")
            .requests(cpu="1", memory="1Gi")
            .opted_in()
            .running_on("n1")
            .created(1),
            _race_group("pod-2"),
            _race_pod("pod-2", 2),
            _race_group("pod-3"),
            _race_pod("pod-3", 3),
        ),
        ungate=(),
        reasons={"ns/pod-2": QUOTA_Q, "ns/pod-3": QUOTA_Q},
    ),
    "3: pod-1 is gone: pod-2 is ungated": RaceStepsCase(
        objs=(
            _race_group("pod-2"),
            _race_pod("pod-2", 2),
            _race_group("pod-3"),
            _race_pod("pod-3", 3),
        ),
        ungate=("ns/pod-2",),
        reasons={
            "ns/pod-3": QUOTA_Q + " (0 allocated, 1 reserved by admitted pods not yet placed)"
        },
    ),
    "4: pod-2 is ungated but unplaceable: its reservation keeps pod-3 gated": RaceStepsCase(
        objs=(
            _race_group("pod-2"),
            b.pod("ns", "pod-2")
            .group("pg-pod-2")
            .requests(cpu="1", memory="1Gi")
            .opted_in()
            .node_selector(**{"kubernetes.io/fake-node": "fake"})
            .unschedulable()
            .created(2),
            _race_group("pod-3"),
            _race_pod("pod-3", 3),
        ),
        ungate=(),
        reasons={
            "ns/pod-2": UNPLACED + "queue 'q' may not reclaim: the pod would take it (and the "
            "ancestors reclaim consults) past its deserved share on every requested resource, "
            "or past its capability",
            "ns/pod-3": QUOTA_Q + " (0 allocated, 1 reserved by admitted pods not yet placed)",
        },
    ),
    "5: pod-2 is deleted: pod-3 is ungated": RaceStepsCase(
        objs=(_race_group("pod-3"), _race_pod("pod-3", 3)),
        ungate=("ns/pod-3",),
        reasons={},
    ),
}


@pytest.mark.parametrize("hierarchy", [False, True], ids=["flat", "hierarchical"])
@pytest.mark.parametrize(("objs", "ungate", "reasons"), RACE_STEPS.values(), ids=RACE_STEPS.keys())
def test_reservation_race_of_the_seed_admits_one_pod_at_a_time(
    hierarchy: bool, objs: tuple[object, ...], ungate: tuple[str, ...], reasons: dict[str, str]
) -> None:
    result = sessions.run_session(
        b.snapshot(NODE, *RACE_QUEUES, *objs),  # type: ignore[arg-type]
        config=_config(hierarchy=hierarchy, actions=("enqueue", "allocate", "reclaim")),
        feature_gates=b.GATES_ON,
        admission_only=True,
    )
    assert (result.errors, result.ungate, dict(result.reasons), result.evict) == (
        (),
        ungate,
        reasons,
        (),
    )


@dataclasses.dataclass(frozen=True)
class Case:
    objects: tuple[object, ...]
    ungate: tuple[str, ...] = ()
    bind: dict[str, str] = dataclasses.field(default_factory=dict)
    reasons: dict[str, str] = dataclasses.field(default_factory=dict)
    errors: tuple[str, ...] = ()
    hierarchy: bool = True
    admission_only: bool = True
    gates: object = dataclasses.field(default_factory=lambda: b.GATES_ON)


def _gated(
    name: str, queue: str, *, cpu: str = "1", seconds: int = 0, **extra: str
) -> tuple[b.PodGroupBuilder, b.PodBuilder]:
    return (
        b.pod_group("ns", name).queue(queue).phase(INQUEUE),
        b.pod("ns", name)
        .group(name)
        .requests(cpu=cpu, memory="1Gi", **extra)
        .admission()
        .created(seconds),
    )


TREE = (
    b.queue("root"),
    b.queue("org").capability(cpu="2"),
    b.queue("team-a").parent("org"),
    b.queue("team-b").parent("org"),
)

CASES = {
    "a gated pod that fits every ancestor is ungated": Case(
        objects=(NODE, *TREE, *_gated("p1", "team-a")),
        ungate=("ns/p1",),
    ),
    "a leaf inherits its parent's capability when it has none": Case(
        objects=(NODE, *TREE, *_gated("p1", "team-a", cpu="3")),
        reasons={
            "ns/p1": "queue 'team-a' has no room for cpu: requested 3, used 0 of capability 2"
        },
    ),
    "a sibling's usage fills the ancestor, and the reason names the ancestor": Case(
        objects=(
            NODE,
            *TREE,
            b.pod_group("ns", "busy").queue("team-b").phase(objects.PodGroupPhase.RUNNING),
            b.pod("ns", "busy")
            .group("busy")
            .requests(cpu="2", memory="1Gi")
            .admitted_to("team-b")
            .running_on("n1"),
            *_gated("p1", "team-a"),
        ),
        reasons={
            "ns/p1": "queue 'org' (ancestor of leaf queue 'team-a') has no room for cpu: "
            "requested 1, used 2 of capability 2"
        },
    ),
    "GPUs: a request for a scalar the queue may not use is refused": Case(
        objects=(
            b.node("g1").allocatable(cpu="8", memory="8Gi", gpu="4", pods="20"),
            b.queue("root"),
            b.queue("gpu-team").capability(gpu="2"),
            *_gated("p1", "gpu-team", gpu="2"),
            *_gated("p2", "gpu-team", gpu="1", seconds=1),
        ),
        ungate=("ns/p1",),
        reasons={
            "ns/p2": "queue 'gpu-team' has no room for nvidia.com/gpu: requested 1, used 2 of "
            "capability 2 (0 allocated, 2 reserved by admitted pods not yet placed)"
        },
    ),
    "a Closed queue admits nothing": Case(
        objects=(
            NODE,
            b.queue("root"),
            b.queue("shut").state(objects.QueueState.CLOSED),
            *_gated("p1", "shut"),
        ),
        reasons={"ns/p1": "queue 'shut' is Closed: only Open queues admit pods"},
    ),
    "a pod with another gate is left alone until only ours is left": Case(
        objects=(
            NODE,
            *TREE,
            b.pod_group("ns", "p1").queue("team-a").phase(INQUEUE),
            b.pod("ns", "p1")
            .group("p1")
            .requests(cpu="1")
            .opted_in()
            .gated(objects.QUEUE_ALLOCATION_GATE, "example.com/other"),
        ),
        reasons={
            "ns/p1": "waiting for other scheduling gates (example.com/other) to be removed; "
            "queue admission starts once only the queue-allocation gate is left"
        },
    ),
    "our gate without the opt-in annotation is never removed": Case(
        objects=(
            NODE,
            *TREE,
            b.pod_group("ns", "p1").queue("team-a").phase(INQUEUE),
            b.pod("ns", "p1").group("p1").requests(cpu="1").gated(),
        ),
        reasons={
            "ns/p1": "pod ns/p1 has the scheduling gate scheduling.volcano.sh/queue-allocation-gate"
            ' but not the opt-in annotation scheduling.volcano.sh/queue-allocation-gate: "true"; '
            "the gate will not be removed automatically"
        },
    ),
    "with the feature gate off nothing is ungated": Case(
        objects=(NODE, *TREE, *_gated("p1", "team-a")),
        gates=b.GATES_OFF,
        reasons={
            "ns/p1": "the feature gate SchedulingGatesQueueAdmission is off: gates are not removed"
        },
    ),
    "flat mode: the leaf's own capability is the only limit": Case(
        objects=(
            NODE,
            b.queue("flat").capability(cpu="1"),
            *_gated("p1", "flat"),
            *_gated("p2", "flat", seconds=1),
        ),
        hierarchy=False,
        ungate=("ns/p1",),
        reasons={
            "ns/p2": "queue 'flat' has no room for cpu: requested 1, used 1 of capability 1 "
            "(0 allocated, 1 reserved by admitted pods not yet placed)"
        },
    ),
    "an unbalanced tree: a shallow and a deep leaf share their ancestor's capability": Case(
        objects=(
            NODE,
            b.queue("root"),
            b.queue("top").capability(cpu="2"),
            b.queue("shallow").parent("top"),
            b.queue("mid").parent("top"),
            b.queue("deep").parent("mid"),
            *_gated("p1", "deep", seconds=1),
            *_gated("p2", "shallow", seconds=2),
            *_gated("p3", "deep", seconds=3),
        ),
        ungate=("ns/p1", "ns/p3"),
        reasons={
            "ns/p2": "queue 'top' (ancestor of leaf queue 'shallow') has no room for cpu: "
            "requested 1, used 2 of capability 2 (0 allocated, 2 reserved by admitted pods "
            "not yet placed)"
        },
    ),
    # -- deliberate fixes -------------------------------------------------------------------
    "fix: a parent cycle blocks only its queues (reference: nothing is admitted)": Case(
        objects=(
            NODE,
            b.queue("root"),
            b.queue("a").parent("b"),
            b.queue("b").parent("a"),
            b.queue("ok"),
            *_gated("p1", "ok"),
            *_gated("p2", "a"),
        ),
        ungate=("ns/p1",),
        errors=(
            "queue 'a': spec.parent forms a cycle (a -> b -> a); queues on it and below it "
            "admit nothing",
        ),
        reasons={
            "ns/p2": "queue 'a' cannot admit pods: queue 'a' is on a parent cycle (a -> b -> a)"
        },
    ),
    "fix: a chain 1,000 queues deep blocks only what lies past 100 levels (reference: a "
    "stack overflow)": Case(
        objects=(
            NODE,
            b.queue("root"),
            *(b.queue(f"q{i}").parent(f"q{i - 1}" if i else "root") for i in range(1000)),
            *_gated("p1", "q99"),
            *_gated("p2", "q999"),
        ),
        ungate=("ns/p1",),
        errors=(
            "queue 'q100': 101 levels below root, deeper than the 100 levels queuetree "
            "supports; it and the queues below it admit nothing",
        ),
        reasons={
            "ns/p2": "queue 'q999' cannot admit pods: queue 'q999' is 1000 levels below root, "
            "deeper than the 100 levels queuetree supports (the most --max-queue-depth "
            "allows); move it closer to root"
        },
    ),
    "fix: a pod group in a non-leaf queue blocks only itself (reference: nothing admitted)": Case(
        objects=(NODE, *TREE, *_gated("p1", "org"), *_gated("p2", "team-b")),
        ungate=("ns/p2",),
        errors=(
            "pod group ns/p1: spec.queue 'org' is not a leaf queue (it has children team-a, "
            "team-b); only this pod group is held back",
        ),
        reasons={"ns/p1": "queue 'org' has child queues: only leaf queues admit pods"},
    ),
    "fix: a missing parent blocks only its subtree (reference: nothing is admitted)": Case(
        objects=(
            NODE,
            b.queue("root"),
            b.queue("lost").parent("gone"),
            b.queue("ok"),
            *_gated("p1", "lost"),
            *_gated("p2", "ok"),
        ),
        ungate=("ns/p2",),
        errors=(
            "queue 'lost': spec.parent 'gone' does not exist; it and the queues below it admit "
            "nothing",
        ),
        reasons={
            "ns/p1": "queue 'lost' cannot admit pods: queue 'lost' has a missing parent 'gone'"
        },
    ),
    "fix: reserved pods count at the ancestor (reference: p2 is ungated past org's limit)": Case(
        objects=(
            NODE,
            *TREE,
            b.pod_group("ns", "p1").queue("team-a").phase(INQUEUE),
            b.pod("ns", "p1")
            .group("p1")
            .requests(cpu="2", memory="1Gi")
            .opted_in()
            .unschedulable(),
            *_gated("p2", "team-b"),
        ),
        reasons={
            "ns/p1": "kube-scheduler found no node for the pod (Unschedulable) although its "
            "queue admitted it",
            "ns/p2": "queue 'org' (ancestor of leaf queue 'team-b') has no room for cpu: "
            "requested 1, used 2 of capability 2 (0 allocated, 2 reserved by admitted pods not "
            "yet placed)",
        },
    ),
    "fix: a gang is ungated only when minMember pods fit (reference: two of three ungated)": Case(
        objects=(
            NODE,
            *TREE,
            b.pod_group("ns", "gang").queue("team-a").phase(INQUEUE).min_member(3),
            *(
                b.pod("ns", f"g{i}")
                .group("gang")
                .requests(cpu="1", memory="1Gi")
                .admission()
                .created(i)
                for i in range(3)
            ),
        ),
        reasons={
            "ns/g0": "pod group ns/gang: only 2 of minMember 3 pods fit in queue 'team-a'; its "
            "gated pods stay gated together",
            "ns/g1": "pod group ns/gang: only 2 of minMember 3 pods fit in queue 'team-a'; its "
            "gated pods stay gated together",
            "ns/g2": "pod group ns/gang: only 2 of minMember 3 pods fit in queue 'team-a'; its "
            "gated pods stay gated together",
        },
    ),
    "fix: a pod being deleted keeps its room from gated pods (reference: p1 is ungated)": Case(
        objects=(
            NODE,
            *TREE,
            b.pod_group("ns", "leaving").queue("team-b").phase(objects.PodGroupPhase.RUNNING),
            b.pod("ns", "leaving")
            .group("leaving")
            .requests(cpu="2", memory="1Gi")
            .opted_in()
            .running_on("n1")
            .status(objects.TaskStatus.RELEASING),
            *_gated("p1", "team-a"),
        ),
        reasons={
            "ns/p1": "queue 'org' (ancestor of leaf queue 'team-a') has no room for cpu: "
            "requested 1, used 2 of capability 2 (0 allocated, 2 held by pods being deleted)"
        },
    ),
    "a gated pod being deleted holds no node, and no room": Case(
        objects=(
            NODE,
            *TREE,
            b.pod_group("ns", "leaving").queue("team-b").phase(INQUEUE),
            b.pod("ns", "leaving")
            .group("leaving")
            .requests(cpu="2", memory="1Gi")
            .admission()
            .status(objects.TaskStatus.RELEASING),
            *_gated("p1", "team-a"),
        ),
        ungate=("ns/p1",),
    ),
    "a gang whose minMember fits is ungated together": Case(
        objects=(
            NODE,
            *TREE,
            b.pod_group("ns", "gang").queue("team-a").phase(INQUEUE).min_member(2),
            *(
                b.pod("ns", f"g{i}")
                .group("gang")
                .requests(cpu="1", memory="1Gi")
                .admission()
                .created(i)
                for i in range(2)
            ),
        ),
        ungate=("ns/g0", "ns/g1"),
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_gate_admission_decides_and_explains(case: Case) -> None:
    result = sessions.run_session(
        b.snapshot(*case.objects),  # type: ignore[arg-type]
        config=_config(hierarchy=case.hierarchy),
        feature_gates=case.gates,  # type: ignore[arg-type]
        admission_only=case.admission_only,
    )
    assert (result.errors, result.ungate, dict(result.bind), dict(result.reasons)) == (
        case.errors,
        case.ungate,
        case.bind,
        case.reasons,
    )


def test_running_pods_of_a_non_leaf_queue_still_count_against_its_ancestors() -> None:
    result = sessions.run_session(
        b.snapshot(
            NODE,
            *TREE,
            b.pod_group("ns", "old").queue("org").phase(objects.PodGroupPhase.RUNNING),
            b.pod("ns", "old")
            .group("old")
            .requests(cpu="2", memory="1Gi")
            .admitted_to("org")
            .running_on("n1"),
            *_gated("p1", "team-a"),
        ),
        config=_config(hierarchy=True),
        feature_gates=b.GATES_ON,
        admission_only=True,
    )
    assert (result.ungate, dict(result.reasons), result.queues["org"].allocated) == (
        (),
        {
            "ns/p1": "queue 'org' (ancestor of leaf queue 'team-a') has no room for cpu: "
            "requested 1, used 2 of capability 2"
        },
        b.res(cpu="2", memory="1Gi"),
    )


class ReclaimReasonsCase(NamedTuple):
    owner: Any
    reasons: Any


RECLAIM_REASONS = {
    "a queue over its deserved share cannot reclaim": ReclaimReasonsCase(
        owner=b.queue("owner").deserved(cpu="500m"),
        reasons={
            "ns/claim": "kube-scheduler found no node for the pod (Unschedulable) although its "
            "queue admitted it; reclaim cannot help: queue 'owner' may not reclaim: the pod "
            "would take it (and the ancestors reclaim consults) past its deserved share on every "
            "requested resource, or past its capability"
        },
    ),
    "no victim may be taken": ReclaimReasonsCase(
        owner=b.queue("owner").deserved(cpu="1"),
        reasons={
            "ns/claim": "kube-scheduler found no node for the pod (Unschedulable) although its "
            "queue admitted it; reclaim cannot help: no node has running pods that reclaim may "
            "take (their queues are within their deserved share or guarantee, or not "
            "reclaimable)"
        },
    ),
}


RECLAIM_REASONS["a Closed queue does not reclaim"] = (
    b.queue("owner").deserved(cpu="1").state(objects.QueueState.CLOSED),
    {
        "ns/claim": "kube-scheduler found no node for the pod (Unschedulable) although its "
        "queue admitted it; reclaim cannot help: queue 'owner' is Closed: only Open queues "
        "admit pods"
    },
)


@pytest.mark.parametrize(("owner", "reasons"), RECLAIM_REASONS.values(), ids=RECLAIM_REASONS.keys())
def test_an_unschedulable_pod_that_reclaim_cannot_help_is_explained(
    owner: b.QueueBuilder, reasons: dict[str, str]
) -> None:
    result = sessions.run_session(
        b.snapshot(
            b.node("n1").allocatable(cpu="1", memory="8Gi"),
            owner,
            b.queue("keeper").deserved(cpu="1"),
            b.pod_group("ns", "held").queue("keeper").phase(objects.PodGroupPhase.RUNNING),
            b.pod("ns", "held").group("held").requests(cpu="1").running_on("n1"),
            b.pod_group("ns", "claim").queue("owner").phase(INQUEUE),
            b.pod("ns", "claim").group("claim").requests(cpu="1").opted_in().unschedulable(),
        ),
        config=b.config(
            [b.plugin("gang", "enableJobStarving", "enableJobPipelined")],
            [b.plugin("predicates"), b.plugin("capacity")],
            actions=("enqueue", "allocate", "reclaim"),
        ),
        feature_gates=b.GATES_ON,
        admission_only=True,
    )
    assert (result.evict, dict(result.reasons)) == ((), reasons)


def test_a_closed_queue_refuses_to_enqueue_a_pod_group_with_min_resources() -> None:
    result = sessions.run_session(
        b.snapshot(
            NODE,
            b.queue("root"),
            b.queue("shut").state(objects.QueueState.CLOSING),
            b.pod_group("ns", "g").queue("shut").min_resources(cpu="1"),
            b.pod("ns", "g").group("g").requests(cpu="1").admission(),
        ),
        config=_config(hierarchy=True),
        feature_gates=b.GATES_ON,
        admission_only=True,
    )
    assert (result.ungate, dict(result.pod_groups), dict(result.reasons)) == (
        (),
        {"ns/g": objects.PodGroupPhase.PENDING},
        {
            "ns/g": "pod group ns/g is not admitted: queue 'shut' is Closing: only Open queues "
            "admit pods"
        },
    )


def _member(name: str, seconds: int, *, native: bool, running: bool = False) -> b.PodBuilder:
    pod = b.pod("ns", name).group("gang").requests(cpu="1", memory="1Gi").created(seconds)
    if native:
        pod = pod.native("gang")
    if running:
        return pod.opted_in().admitted_to("team-a").running_on("n1")
    return pod.admission()


def _gang(min_member: int, phase: objects.PodGroupPhase = INQUEUE) -> b.PodGroupBuilder:
    return b.pod_group("ns", "gang").queue("team-a").phase(phase).min_member(min_member)


ROOM_FOR_3 = (b.queue("root"), b.queue("team-a").capability(cpu="3"))
RUNNING = objects.PodGroupPhase.RUNNING
NATIVE_WAIT = (
    "pod group ns/gang: its 5 gated pods name the native PodGroup gang "
    "(podgroups.scheduling.k8s.io), whose pending pods kube-scheduler places only once none of "
    "them is gated, so they are admitted together; only 3 of them fit in queue 'team-a', and "
    "they stay gated together"
)

NATIVE_CASES = {
    "without native members, pods beyond minMember are admitted one by one (Volcano)": Case(
        objects=(
            NODE,
            *ROOM_FOR_3,
            _gang(2),
            *(_member(f"p{i}", i, native=False) for i in range(5)),
        ),
        ungate=("ns/p0", "ns/p1", "ns/p2"),
        reasons={
            "ns/p3": "queue 'team-a' has no room for cpu: requested 1, used 3 of capability 3 "
            "(0 allocated, 3 reserved by admitted pods not yet placed)",
            "ns/p4": "queue 'team-a' has no room for cpu: requested 1, used 3 of capability 3 "
            "(0 allocated, 3 reserved by admitted pods not yet placed)",
        },
    ),
    "gated members of one native group are admitted all together or not at all": Case(
        objects=(
            NODE,
            *ROOM_FOR_3,
            _gang(2),
            *(_member(f"p{i}", i, native=True) for i in range(5)),
        ),
        reasons={f"ns/p{i}": NATIVE_WAIT for i in range(5)},
    ),
    "a running gang's later pods name no native group and go in one by one": Case(
        objects=(
            NODE,
            *ROOM_FOR_3,
            _gang(2, RUNNING),
            _member("p0", 0, native=True, running=True),
            _member("p1", 1, native=True, running=True),
            *(_member(f"p{i}", i, native=False) for i in range(2, 5)),
        ),
        ungate=("ns/p2",),
        reasons={
            "ns/p3": "queue 'team-a' has no room for cpu: requested 1, used 3 of capability 3 "
            "(2 allocated, 1 reserved by admitted pods not yet placed)",
            "ns/p4": "queue 'team-a' has no room for cpu: requested 1, used 3 of capability 3 "
            "(2 allocated, 1 reserved by admitted pods not yet placed)",
        },
    ),
    "a native gang its queue cannot take whole is told its minMember, not its native group": Case(
        objects=(
            NODE,
            *ROOM_FOR_3,
            _gang(4),
            *(_member(f"p{i}", i, native=True) for i in range(4)),
        ),
        reasons={
            f"ns/p{i}": "pod group ns/gang: only 3 of minMember 4 pods fit in queue 'team-a'; "
            "its gated pods stay gated together"
            for i in range(4)
        },
    ),
    "native members that all fit are ungated together with the gang": Case(
        objects=(
            NODE,
            *ROOM_FOR_3,
            _gang(2),
            *(_member(f"p{i}", i, native=True) for i in range(3)),
        ),
        ungate=("ns/p0", "ns/p1", "ns/p2"),
    ),
}


@pytest.mark.parametrize("case", NATIVE_CASES.values(), ids=NATIVE_CASES.keys())
def test_members_of_a_native_pod_group_are_ungated_together(case: Case) -> None:
    result = sessions.run_session(
        b.snapshot(*case.objects),  # type: ignore[arg-type]
        config=_config(hierarchy=True),
        feature_gates=case.gates,  # type: ignore[arg-type]
        admission_only=True,
    )
    assert (result.errors, result.ungate, dict(result.reasons)) == (
        case.errors,
        case.ungate,
        case.reasons,
    )
