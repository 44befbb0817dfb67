"""Admission that cannot be talked around (issue 12): a pod stays charged to the queue it was
admitted to, a gang is never split by pods that come before their PodGroup, best-effort pods
and pods for another scheduler are decided instead of hanging or holding room, PodGroup status
is Volcano's, queue figures count pods, and a tree that is too deep blocks only itself.

Each table compares whole outcomes of one admission session (``admission_only=True``, as the
operator runs it); ids say what the reference does differently where it does.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import pytest

from queuetree.core import configs, objects, sessions
from tests import builders as b

INQUEUE = objects.PodGroupPhase.INQUEUE
RUNNING = objects.PodGroupPhase.RUNNING
COMPLETED = objects.PodGroupPhase.COMPLETED
RUN = objects.TaskStatus.RUNNING

CONFIG = b.config(
    [b.plugin("priority"), b.plugin("gang"), b.plugin("conformance")],
    [b.plugin("predicates"), b.plugin("capacity", hierarchy=True), b.plugin("nodeorder")],
)
NODE = b.node("n1").allocatable(cpu="16", memory="16Gi", pods="100")
QUEUES = (
    b.queue("root"),
    b.queue("full").capability(cpu="1"),
    b.queue("roomy").capability(cpu="8"),
)
FULL = "queue 'full' has no room for cpu: requested 1, used 1 of capability 1"


def session(
    *items: object,
    config: configs.SchedulerConfiguration = CONFIG,
    scheduler_names: frozenset[str] | None = None,
) -> tuple[tuple[str, ...], dict[str, str]]:
    result = sessions.run_session(
        b.snapshot(*items),  # type: ignore[arg-type]
        config=config,
        feature_gates=b.GATES_ON,
        admission_only=True,
        scheduler_names=scheduler_names,
    )
    return result.ungate, dict(result.reasons)


def lone(name: str, queue: str) -> tuple[b.PodGroupBuilder, b.PodBuilder]:
    """A gated, opted-in pod of one CPU in its own Inqueue group of ``queue``."""
    return (
        b.pod_group("ns", name).queue(queue).phase(INQUEUE),
        b.pod("ns", name).group(name).requests(cpu="1").admission().created(9),
    )


@dataclasses.dataclass(frozen=True)
class Case:
    items: tuple[object, ...]
    ungate: tuple[str, ...] = ()
    reasons: dict[str, str] = dataclasses.field(default_factory=dict)


BOUND = {
    "a running pod whose group moved away stays charged to the queue it was admitted to": Case(
        items=(
            NODE,
            *QUEUES,
            b.pod_group("ns", "moved").queue("roomy").phase(RUNNING),
            b.pod("ns", "old")
            .group("moved")
            .requests(cpu="1")
            .admitted_to("full")
            .running_on("n1"),
            *lone("new", "full"),
        ),
        reasons={"ns/new": FULL},
    ),
    "a running pod whose annotations now name another queue stays charged where admitted": Case(
        items=(
            NODE,
            *QUEUES,
            b.pod_group("ns", "old").queue("roomy").phase(RUNNING),
            b.pod("ns", "old").group("old").requests(cpu="1").admitted_to("full").running_on("n1"),
            *lone("new", "full"),
        ),
        reasons={"ns/new": FULL},
    ),
    "an admitted pod not placed yet reserves even with its opt-in annotation removed": Case(
        items=(
            NODE,
            *QUEUES,
            b.pod_group("ns", "waiting").queue("full").phase(INQUEUE),
            b.pod("ns", "waiting").group("waiting").requests(cpu="1").admitted_to("full"),
            *lone("new", "full"),
        ),
        reasons={"ns/new": FULL + " (0 allocated, 1 reserved by admitted pods not yet placed)"},
    ),
    "an admitted pod whose group is gone stays charged to its queue": Case(
        items=(
            NODE,
            *QUEUES,
            b.pod("ns", "old").group("gone").requests(cpu="1").admitted_to("full").running_on("n1"),
            *lone("new", "full"),
        ),
        reasons={"ns/new": FULL},
    ),
    "a pod with no record is charged where its group says (as before the record)": Case(
        items=(
            NODE,
            *QUEUES,
            b.pod_group("ns", "moved").queue("roomy").phase(RUNNING),
            b.pod("ns", "old").group("moved").requests(cpu="1").opted_in().running_on("n1"),
            *lone("new", "full"),
        ),
        ungate=("ns/new",),
    ),
}


@pytest.mark.parametrize("case", BOUND.values(), ids=BOUND.keys())
def test_a_pod_stays_charged_to_the_queue_it_was_admitted_to(case: Case) -> None:
    assert session(*case.items) == (case.ungate, case.reasons)


def gang(count: int, *, queue: str | None = None) -> list[b.PodBuilder]:
    pods = [
        b.pod("ns", f"m{i}").group("gang").requests(cpu="1").admission().created(i)
        for i in range(count)
    ]
    if queue is not None:
        pods = [p.annotate(**{objects.QUEUE_NAME_ANNOTATION: queue}) for p in pods]
    return pods


MISSING = (
    "pod group ns/gang does not exist (yet): its pods stay gated until it is created and its "
    "whole minMember fits in its queue"
)
GANGS = {
    "pods of a group that does not exist yet all wait (Volcano admits each alone)": Case(
        items=(NODE, *QUEUES, *gang(3, queue="roomy")),
        reasons={f"ns/m{i}": MISSING for i in range(3)},
    ),
    "once the group exists and two of its three fit, none is admitted": Case(
        items=(
            NODE,
            b.queue("root"),
            b.queue("two").capability(cpu="2"),
            b.pod_group("ns", "gang").queue("two").min_member(3).phase(INQUEUE),
            *gang(3, queue="two"),
        ),
        reasons={
            f"ns/m{i}": "pod group ns/gang: only 2 of minMember 3 pods fit in queue 'two'; its "
            "gated pods stay gated together"
            for i in range(3)
        },
    ),
    "once the group exists and all of it fits, all of it is admitted": Case(
        items=(
            NODE,
            *QUEUES,
            b.pod_group("ns", "gang").queue("roomy").min_member(3).phase(INQUEUE),
            *gang(3),
        ),
        ungate=("ns/m2", "ns/m1", "ns/m0"),
    ),
}


@pytest.mark.parametrize("case", GANGS.values(), ids=GANGS.keys())
def test_a_gang_is_never_split_by_pods_that_come_before_their_group(case: Case) -> None:
    ungate, reasons = session(*case.items)
    assert (sorted(ungate), reasons) == (sorted(case.ungate), case.reasons)


def best_effort(name: str, queue: str) -> tuple[b.PodGroupBuilder, b.PodBuilder]:
    return (
        b.pod_group("ns", name).queue(queue).phase(INQUEUE),
        b.pod("ns", name).group(name).admission(),
    )


RUNNER = (
    b.pod_group("ns", "runner").queue("full").phase(RUNNING),
    b.pod("ns", "runner").group("runner").requests(cpu="1").opted_in().running_on("n1"),
)


class KindsCase(NamedTuple):
    items: Any
    names: Any
    expected: Any


KINDS = {
    "a best-effort pod in a full Open queue is admitted (Volcano never ungates it)": KindsCase(
        items=(NODE, *QUEUES, *RUNNER, *best_effort("free", "full")),
        names=None,
        expected=Case(items=(), ungate=("ns/free",)),
    ),
    "a best-effort pod in a Closed queue waits": KindsCase(
        items=(
            NODE,
            b.queue("root"),
            b.queue("shut").state(objects.QueueState.CLOSED),
            *best_effort("free", "shut"),
        ),
        names=None,
        expected=Case(
            items=(), reasons={"ns/free": "queue 'shut' is Closed: only Open queues admit pods"}
        ),
    ),
    "a pod for another scheduler stays gated and holds nothing, not even at enqueue": KindsCase(
        items=(
            NODE,
            *QUEUES,
            # As the operator builds a lone pod's group: Pending, minResources its request.
            b.pod_group("ns", "foreign").queue("full").min_resources(cpu="1"),
            b.pod("ns", "foreign")
            .group("foreign")
            .requests(cpu="1")
            .admission()
            .scheduler("volcano"),
            b.pod_group("ns", "ours").queue("full").min_resources(cpu="1").created(5),
            b.pod("ns", "ours").group("ours").requests(cpu="1").admission().created(9),
        ),
        names=frozenset({"default-scheduler"}),
        expected=Case(
            items=(),
            ungate=("ns/ours",),
            reasons={
                "ns/foreign": "pod ns/foreign has schedulerName volcano, and queuetree admits "
                "pods for default-scheduler only (--scheduler-name): ungated, it would never be "
                "placed and would hold its queue's room for ever; create it again without "
                "spec.schedulerName (or with one of those)"
            },
        ),
    ),
    "without scheduler names any scheduler's pods are admitted (queuetree session)": KindsCase(
        items=(
            NODE,
            *QUEUES,
            b.pod_group("ns", "foreign").queue("roomy").phase(INQUEUE),
            b.pod("ns", "foreign")
            .group("foreign")
            .requests(cpu="1")
            .admission()
            .scheduler("volcano"),
        ),
        names=None,
        expected=Case(items=(), ungate=("ns/foreign",)),
    ),
}


@pytest.mark.parametrize(("items", "names", "expected"), KINDS.values(), ids=KINDS.keys())
def test_best_effort_and_foreign_scheduler_pods_are_decided(
    items: tuple[object, ...], names: frozenset[str] | None, expected: Case
) -> None:
    assert session(*items, scheduler_names=names) == (expected.ungate, expected.reasons)


def test_a_pod_that_escaped_adoption_is_told_to_be_created_again() -> None:
    """The webhook adopts pods for Volcano's scheduler at creation; one that still names it
    (created before adoption was turned on) stays gated, and the reason says why."""
    result = sessions.run_session(
        b.snapshot(  # type: ignore[arg-type]
            NODE,
            *QUEUES,
            b.pod_group("ns", "old").queue("roomy").phase(INQUEUE),
            b.pod("ns", "old").group("old").requests(cpu="1").admission().scheduler("volcano"),
        ),
        config=CONFIG,
        feature_gates=b.GATES_ON,
        admission_only=True,
        scheduler_names=frozenset({"default-scheduler"}),
        adopted_scheduler_names=frozenset({"volcano"}),
    )
    assert (result.ungate, dict(result.reasons)) == (
        (),
        {
            "ns/old": "pod ns/old has schedulerName volcano, which the webhook hands to "
            "default-scheduler when a pod is created (--adopt-scheduler-names), but this pod was "
            "created without it (before adoption was turned on, or with the webhook skipping "
            "it): ungated, nothing would place it; create it again"
        },
    )


def member(name: str, status: objects.TaskStatus) -> b.PodBuilder:
    """A member of group ``job``: running on n1, or pending and admitted (ungated)."""
    pod = b.pod("ns", name).group("job").requests(cpu="1").opted_in()
    return pod.running_on("n1") if status is RUN else pod.status(status)


def _finished(name: str, status: objects.TaskStatus) -> b.PodBuilder:
    return b.pod("ns", name).group("job").requests(cpu="1").opted_in().status(status)


class PhasesCase(NamedTuple):
    phase: Any
    pods: Any
    expected: Any
    min_member: int = 2


PHASES = {
    "both members running: Running, running 2": PhasesCase(
        phase=RUNNING,
        pods=(member("a", RUN), member("b", RUN)),
        expected=(objects.PodGroupPhase.RUNNING, objects.GroupCounts(running=2)),
    ),
    "both succeeded: Completed, succeeded 2": PhasesCase(
        phase=RUNNING,
        pods=(
            _finished("a", objects.TaskStatus.SUCCEEDED),
            _finished("b", objects.TaskStatus.SUCCEEDED),
        ),
        expected=(objects.PodGroupPhase.COMPLETED, objects.GroupCounts(succeeded=2)),
    ),
    "one runs, one succeeded: Running": PhasesCase(
        phase=RUNNING,
        pods=(member("a", RUN), _finished("b", objects.TaskStatus.SUCCEEDED)),
        expected=(objects.PodGroupPhase.RUNNING, objects.GroupCounts(running=1, succeeded=1)),
    ),
    "one runs and the other is gone: Unknown": PhasesCase(
        phase=RUNNING,
        pods=(member("a", RUN),),
        expected=(objects.PodGroupPhase.UNKNOWN, objects.GroupCounts(running=1)),
    ),
    "one runs, one admitted and about to be placed: not Unknown, still Inqueue": PhasesCase(
        phase=INQUEUE,
        pods=(member("a", RUN), member("b", objects.TaskStatus.PENDING)),
        expected=(INQUEUE, objects.GroupCounts(running=1)),
    ),
    "one succeeded, one failed: Completed, both counted (a failed pod was scheduled)": PhasesCase(
        phase=RUNNING,
        pods=(
            _finished("a", objects.TaskStatus.SUCCEEDED),
            _finished("b", objects.TaskStatus.FAILED),
        ),
        expected=(COMPLETED, objects.GroupCounts(succeeded=1, failed=1)),
    ),
    "the only pod failed: Completed, not Inqueue for ever": PhasesCase(
        phase=INQUEUE,
        pods=(_finished("a", objects.TaskStatus.FAILED),),
        expected=(COMPLETED, objects.GroupCounts(failed=1)),
        min_member=1,
    ),
    "one runs, one failed: Unknown (the gang is one short of ready)": PhasesCase(
        phase=RUNNING,
        pods=(member("a", RUN), _finished("b", objects.TaskStatus.FAILED)),
        expected=(objects.PodGroupPhase.UNKNOWN, objects.GroupCounts(running=1, failed=1)),
    ),
    "one failed, the other still gated: Inqueue (fewer than minMember scheduled)": PhasesCase(
        phase=INQUEUE,
        pods=(
            _finished("a", objects.TaskStatus.FAILED),
            b.pod("ns", "b").group("job").requests(cpu="1").admission(),
        ),
        expected=(INQUEUE, objects.GroupCounts(failed=1)),
    ),
    "a member being deleted from its node still holds its slot: Running, not Unknown": PhasesCase(
        phase=RUNNING,
        pods=(
            member("a", RUN),
            member("b", RUN).status(objects.TaskStatus.RELEASING),
        ),
        expected=(RUNNING, objects.GroupCounts(running=1)),
    ),
    "fix: a Completed group whose pods were deleted stays Completed (Volcano: Pending, then "
    "enqueued again, holding minResources for pods that never come)": PhasesCase(
        phase=COMPLETED,
        pods=(),
        expected=(COMPLETED, objects.NO_COUNTS),
    ),
    "a Completed group with a new pod is Pending again, to be enqueued": PhasesCase(
        phase=COMPLETED,
        pods=(b.pod("ns", "c").group("job").requests(cpu="1").admission(),),
        expected=(objects.PodGroupPhase.PENDING, objects.NO_COUNTS),
    ),
    "an Inqueue group with no pod yet stays Inqueue": PhasesCase(
        phase=INQUEUE, pods=(), expected=(INQUEUE, objects.NO_COUNTS)
    ),
}


@pytest.mark.parametrize(
    ("phase", "pods", "expected", "min_member"), PHASES.values(), ids=PHASES.keys()
)
def test_pod_group_status_is_what_volcanos_scheduler_writes(
    phase: objects.PodGroupPhase,
    pods: tuple[b.PodBuilder, ...],
    expected: tuple[objects.PodGroupPhase, objects.GroupCounts],
    min_member: int,
) -> None:
    result = sessions.run_session(
        b.snapshot(
            NODE,
            *QUEUES,
            b.pod_group("ns", "job").queue("roomy").min_member(min_member).phase(phase),
            *pods,
        ),
        config=CONFIG,
        feature_gates=b.GATES_ON,
        admission_only=True,
    )
    assert (result.pod_groups["ns/job"], result.group_counts["ns/job"]) == expected


def small(name: str, queue: str, *, created: int) -> tuple[b.PodGroupBuilder, b.PodBuilder]:
    """A gated, opted-in pod of 500m in its own Inqueue group of ``queue``."""
    return (
        b.pod_group("ns", name).queue(queue).phase(INQUEUE).created(created),
        b.pod("ns", name).group(name).requests(cpu="500m").admission().created(created),
    )


def smalls(prefix: str, queue: str, count: int) -> list[object]:
    return [item for i in range(count) for item in small(f"{prefix}{i}", queue, created=i)]


def full_pods(queue: str, used: str, capability: str, detail: str = "") -> str:
    return (
        f"queue {queue!r} has no room for pods: requested 1, used {used} of capability "
        f"{capability}{detail}"
    )


PODS_TEAM = (
    NODE,
    b.queue("root"),
    b.queue("team").capability(cpu="4", memory="8Gi", pods="2"),
    b.queue("a").parent("team"),
    b.queue("b").parent("team").capability(cpu="3", memory="4Gi"),
)
PODS = {
    "fix: a pods capability of 1 admits one of three pods (Volcano admits all three)": Case(
        items=(
            NODE,
            b.queue("root"),
            b.queue("b").capability(cpu="3", memory="4Gi", pods="1"),
            *smalls("pc", "b", 3),
        ),
        ungate=("ns/pc0",),
        reasons={
            f"ns/pc{i}": full_pods(
                "b", "1", "1", " (0 allocated, 1 reserved by admitted pods not yet placed)"
            )
            for i in (1, 2)
        },
    ),
    "a parent's pods capability counts the pods of every child": Case(
        items=(
            *PODS_TEAM,
            b.pod_group("ns", "run").queue("a").phase(RUNNING),
            b.pod("ns", "run").group("run").requests(cpu="1").opted_in().running_on("n1"),
            *smalls("pb", "b", 2),
        ),
        ungate=("ns/pb0",),
        reasons={
            "ns/pb1": "queue 'team' (ancestor of leaf queue 'b') has no room for pods: requested "
            "1, used 2 of capability 2 (1 allocated, 1 reserved by admitted pods not yet placed)"
        },
    ),
    "running, admitted and deleting pods all hold a place": Case(
        items=(
            NODE,
            b.queue("root"),
            b.queue("b").capability(pods="3"),
            b.pod_group("ns", "run").queue("b").phase(RUNNING),
            b.pod("ns", "run").group("run").requests(cpu="1").opted_in().running_on("n1"),
            b.pod_group("ns", "waiting").queue("b").phase(INQUEUE),
            b.pod("ns", "waiting").group("waiting").requests(cpu="1").admitted_to("b"),
            b.pod_group("ns", "going").queue("b").phase(RUNNING),
            b.pod("ns", "going")
            .group("going")
            .requests(cpu="1")
            .opted_in()
            .running_on("n1")
            .status(objects.TaskStatus.RELEASING),
            *small("next", "b", created=9),
        ),
        reasons={
            "ns/next": full_pods(
                "b",
                "3",
                "3",
                " (1 allocated, 1 reserved by admitted pods not yet placed, 1 held by pods being "
                "deleted)",
            )
        },
    ),
    "a gang whose minMember pods do not fit in the pods capability waits whole": Case(
        items=(
            NODE,
            b.queue("root"),
            b.queue("b").capability(cpu="8", pods="2"),
            b.pod_group("ns", "gang").queue("b").min_member(3).phase(INQUEUE),
            *gang(3, queue="b"),
        ),
        reasons={
            f"ns/m{i}": "pod group ns/gang: only 2 of minMember 3 pods fit in queue 'b'; its "
            "gated pods stay gated together"
            for i in range(3)
        },
    ),
    "a best-effort pod takes a place too": Case(
        items=(
            NODE,
            b.queue("root"),
            b.queue("full").capability(pods="1"),
            *RUNNER,
            *best_effort("free", "full"),
        ),
        reasons={"ns/free": full_pods("full", "1", "1")},
    ),
    "a sibling's guarantee of pods is carved out of the parent's": Case(
        items=(
            NODE,
            b.queue("root"),
            b.queue("team").capability(pods="4"),
            b.queue("a").parent("team").guarantee(pods="3"),
            b.queue("b").parent("team"),
            *smalls("pb", "b", 2),
        ),
        ungate=("ns/pb0",),
        reasons={
            "ns/pb1": full_pods(
                "b", "1", "1", " (0 allocated, 1 reserved by admitted pods not yet placed)"
            )
        },
    ),
    "a root capability without pods does not limit them (as it would any other scalar)": Case(
        items=(
            NODE,
            b.queue("root").capability(cpu="100", memory="100Gi"),
            b.queue("b").capability(cpu="3", pods="2"),
            *smalls("pb", "b", 3),
        ),
        ungate=("ns/pb0", "ns/pb1"),
        reasons={
            "ns/pb2": full_pods(
                "b", "2", "2", " (0 allocated, 2 reserved by admitted pods not yet placed)"
            )
        },
    ),
    "a cluster without nodes admits up to the pods capability (scale from zero)": Case(
        items=(b.queue("root"), b.queue("b").capability(cpu="3", pods="2"), *smalls("pb", "b", 3)),
        ungate=("ns/pb0", "ns/pb1"),
        reasons={
            "ns/pb2": full_pods(
                "b", "2", "2", " (0 allocated, 2 reserved by admitted pods not yet placed)"
            )
        },
    ),
    "a pods capability of 0 admits nothing": Case(
        items=(NODE, b.queue("root"), b.queue("b").capability(pods="0"), *smalls("pb", "b", 1)),
        reasons={"ns/pb0": full_pods("b", "0", "0")},
    ),
}


@pytest.mark.parametrize("case", PODS.values(), ids=PODS.keys())
@pytest.mark.parametrize("fold", [True, False], ids=["folded", "pod by pod"])
def test_a_pods_capability_limits_the_pods_of_the_queue_and_its_subtree(
    case: Case, fold: bool
) -> None:
    result = sessions.run_session(
        b.snapshot(*case.items),  # type: ignore[arg-type]
        config=CONFIG,
        feature_gates=b.GATES_ON,
        admission_only=True,
        fold=fold,
    )
    assert (sorted(result.ungate), dict(result.reasons)) == (sorted(case.ungate), case.reasons)


def test_queue_figures_count_allocated_and_reserved_pods_up_the_tree() -> None:
    result = sessions.run_session(
        b.snapshot(
            NODE,
            b.queue("root"),
            b.queue("org"),
            b.queue("team").parent("org"),
            *(
                item
                for name in ("r1", "r2")
                for item in (
                    b.pod_group("ns", name).queue("team").phase(RUNNING),
                    b.pod("ns", name).group(name).requests(cpu="1").opted_in().running_on("n1"),
                )
            ),
            b.pod_group("ns", "w").queue("team").phase(INQUEUE),
            b.pod("ns", "w").group("w").requests(cpu="1").admitted_to("team"),
            *lone("g", "team"),
        ),
        config=CONFIG,
        feature_gates=b.GATES_ON,
        admission_only=True,
    )
    counts = {
        name: (figures.allocated_pods, figures.reserved_pods)
        for name, figures in result.queues.items()
    }
    # g is admitted in this session: it reserves too.
    assert counts == {"root": (2, 2), "org": (2, 2), "team": (2, 2)}


def chain(depth: int) -> list[b.QueueBuilder]:
    return [
        b.queue(f"q{level}").parent(f"q{level - 1}" if level > 1 else "root")
        for level in range(1, depth + 1)
    ]


def test_a_chain_deeper_than_the_limit_blocks_only_itself() -> None:
    depth = objects.MAX_QUEUE_DEPTH + 5
    ungate, reasons = session(
        NODE,
        b.queue("root"),
        b.queue("sound"),
        *chain(depth),
        *lone("deep", f"q{depth}"),
        *lone("elsewhere", "sound"),
    )
    assert (ungate, reasons) == (
        ("ns/elsewhere",),
        {
            "ns/deep": f"queue 'q{depth}' cannot admit pods: queue 'q{depth}' is {depth} levels "
            f"below root, deeper than the {objects.MAX_QUEUE_DEPTH} levels queuetree supports "
            "(the most --max-queue-depth allows); move it closer to root"
        },
    )


def test_a_chain_of_thousands_of_queues_neither_fails_the_session_nor_blocks_others() -> None:
    """A recursive walk of the tree would fail far below this depth (Python's recursion limit),
    and so would every cycle of the operator; the depth limit also keeps each queue's chain
    short, so the tree costs the session its size, not its size times its depth."""
    result = sessions.run_session(
        b.snapshot(NODE, b.queue("root"), b.queue("sound"), *chain(5000), *lone("p", "sound")),
        config=CONFIG,
        feature_gates=b.GATES_ON,
        admission_only=True,
    )
    assert (result.ungate, result.errors, len(result.queues)) == (
        ("ns/p",),
        (
            f"queue 'q{objects.MAX_QUEUE_DEPTH + 1}': {objects.MAX_QUEUE_DEPTH + 1} levels below "
            f"root, deeper than the {objects.MAX_QUEUE_DEPTH} levels queuetree supports; it and "
            "the queues below it admit nothing",
        ),
        5002,
    )


MISSING_QUEUES = {
    "a lone pod is told to fix its queue-name annotation": Case(
        items=(
            NODE,
            *QUEUES,
            b.pod("ns", "p")
            .requests(cpu="1")
            .admission()
            .annotate(**{objects.QUEUE_NAME_ANNOTATION: "gone"}),
        ),
        reasons={
            "ns/p": "queue 'gone' does not exist: create it or name an existing leaf in the "
            "pod's scheduling.volcano.sh/queue-name annotation"
        },
    ),
    "a pod of a group is told to fix the group's spec.queue": Case(
        items=(
            NODE,
            *QUEUES,
            b.pod_group("ns", "g").queue("gone"),
            b.pod("ns", "p").group("g").requests(cpu="1").admission(),
        ),
        reasons={
            "ns/p": "queue 'gone' does not exist: create it or name an existing leaf in the "
            "pod group's spec.queue"
        },
    ),
}


@pytest.mark.parametrize("case", MISSING_QUEUES.values(), ids=MISSING_QUEUES.keys())
def test_a_pod_whose_queue_does_not_exist_is_told_where_to_name_one(case: Case) -> None:
    assert session(*case.items) == (case.ungate, case.reasons)
