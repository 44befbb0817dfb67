"""``queuetree.core.quota_reclaim``: gated pods blocked by an ancestor's capability reclaim.

The scenario of benchmarks/peer_features.py: parent ``cmp-parent`` (deserved and capability
4 CPU) over ``cmp-borrower`` and ``cmp-lender`` (deserved 2, capability 4 each). The borrower
runs four 1-CPU pods (two of them the lender's share) and waits with a fifth; then 1-CPU pods
arrive in the lender. Each case is one admission session, compared whole: evictions (and for
whom), ungated pods and the reasons of the pods that wait. The cycle cases follow the victims
from Running to Releasing to gone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from types import MappingProxyType
from typing import Any

import pytest

from queuetree.core import compaction, configs, decisions, objects, sessions
from tests import builders as b

RUNNING = objects.TaskStatus.RUNNING
RELEASING = objects.TaskStatus.RELEASING
WITH_RECLAIM = ("enqueue", "allocate", "reclaim")


def _config(
    actions: tuple[str, ...] = WITH_RECLAIM, *, level: int = 0
) -> configs.SchedulerConfiguration:
    return b.config(
        [b.plugin("priority"), b.plugin("gang"), b.plugin("conformance")],
        [
            b.plugin("predicates"),
            b.plugin("capacity", hierarchy=True, arguments={"ancestorReclaimLevel": level}),
            b.plugin("nodeorder"),
        ],
        actions=actions,
    )


def _lone(
    pod: b.PodBuilder | objects.Pod, *, pending: bool = False
) -> list[objects.Pod | objects.PodGroup]:
    """A pod with the single-pod group the operator makes for it: Running with a running pod,
    else Inqueue, or (``pending``) Pending, as a new pod's is until enqueue admits it."""
    built = pod if isinstance(pod, objects.Pod) else pod.build()
    group = objects.pod_group_for_lone_pod(built, default_queue="")
    phase = objects.PodGroupPhase.RUNNING if built.node_name else objects.PodGroupPhase.INQUEUE
    if pending:
        phase = objects.PodGroupPhase.PENDING
    return [built, dataclasses.replace(group, phase=phase)]


def _pod(name: str, queue: str, seconds: int, *, cpu: str = "1") -> b.PodBuilder:
    return (
        b.pod("ns", name)
        .annotate(**{objects.QUEUE_NAME_ANNOTATION: queue})
        .requests(cpu=cpu)
        .created(seconds)
    )


def running(
    name: str, queue: str, seconds: int, *, status: objects.TaskStatus = RUNNING
) -> b.PodBuilder:
    """An admitted pod on node n1 (``status`` Releasing: being deleted, still there)."""
    return _pod(name, queue, seconds).opted_in().admitted_to(queue).running_on("n1").status(status)


def gated(name: str, queue: str, seconds: int, *, cpu: str = "1") -> b.PodBuilder:
    return _pod(name, queue, seconds, cpu=cpu).admission()


def borrower(
    *,
    gone: Iterable[int] = (),
    releasing: Iterable[int] = (),
    pending: bool = False,
    fifth: bool = True,
) -> list[objects.Pod | objects.PodGroup]:
    """The borrower's pods b1..b4 running (but those ``gone``, and ``releasing`` ones being
    deleted) and b5 gated."""
    out: list[objects.Pod | objects.PodGroup] = []
    for i in range(1, 5):
        if i in gone:
            continue
        status = RELEASING if i in releasing else RUNNING
        out += _lone(running(f"b{i}", "cmp-borrower", i, status=status))
    if fifth:
        out += _lone(gated("b5", "cmp-borrower", 5), pending=pending)
    return out


def tree(
    *, borrower_reclaimable: bool = True, lender_capability: str = "4"
) -> list[b.NodeBuilder | b.QueueBuilder]:
    return [
        b.node("n1").allocatable(cpu="16", memory="16Gi", pods="110"),
        b.queue("root"),
        b.queue("cmp-parent").deserved(cpu="4").capability(cpu="4"),
        b.queue("cmp-borrower")
        .parent("cmp-parent")
        .deserved(cpu="2")
        .capability(cpu="4")
        .reclaimable(borrower_reclaimable),
        b.queue("cmp-lender")
        .parent("cmp-parent")
        .deserved(cpu="2")
        .capability(cpu=lender_capability),
    ]


def lender(
    *names: str, cpu: str = "1", pending: bool = False
) -> list[objects.Pod | objects.PodGroup]:
    return [
        item
        for i, name in enumerate(names)
        for item in _lone(gated(name, "cmp-lender", 10 + i, cpu=cpu), pending=pending)
    ]


def gang(name: str, size: int, min_member: int) -> list[objects.Pod | objects.PodGroup]:
    """A gang of the lender: ``size`` gated 1-CPU pods, ``minMember`` ``min_member``."""
    group = b.pod_group("ns", name).queue("cmp-lender").min_member(min_member).created(10)
    pods = [
        b.pod("ns", f"{name}-{i}").group(name).requests(cpu="1").admission().created(10 + i)
        for i in range(size)
    ]
    return [group.phase(objects.PodGroupPhase.INQUEUE).build(), *(p.build() for p in pods)]


def _for(reclaimer: str, victims: str) -> str:
    return (
        "queue 'cmp-parent' has no room under its capability for it: quota reclaim is "
        f"reclaiming {victims} of queue 'cmp-borrower' for it (queue 'cmp-lender' is under its "
        "deserved share); it is admitted once they are gone"
    )


WAITING = (
    "queue 'cmp-parent' has no room under its capability yet: quota reclaim waits for pods "
    "being deleted there to be gone (room promised to this pod)"
)
B5 = "queue 'cmp-borrower' has no room for cpu: requested 1, used 4 of capability 4"
PARENT = (
    "queue 'cmp-parent' (ancestor of leaf queue '{leaf}') has no room for cpu: requested {cpu}, "
)
B5_ENQUEUE = (
    "pod ns/b5 is not admitted: queue {queue} cannot take the pod's requests on cpu: "
    "requested 1, used 4 of capability 4 (allocated plus inqueue groups)"
)
PARENT_FULL = PARENT.format(leaf="cmp-lender", cpu=1) + "used 4 of capability 4"


@dataclasses.dataclass(frozen=True)
class Case:
    objects: tuple[object, ...]
    evicted: dict[str, str]
    """Victim -> the pod it was evicted for."""
    ungate: tuple[str, ...]
    reasons: dict[str, str]
    actions: tuple[str, ...] = WITH_RECLAIM


CASES = {
    "cycle 1: the lender's two pods each evict one borrower pod, newest first": Case(
        objects=(*tree(), *borrower(), *lender("l1", "l2")),
        evicted={"ns/b4": "ns/l1", "ns/b3": "ns/l2"},
        ungate=(),
        reasons={
            "ns/b5": B5,
            "ns/l1": _for("ns/l1", "1 pod"),
            "ns/l2": _for("ns/l2", "1 pod"),
        },
    ),
    "cycle 2: the victims are being deleted: their room is promised, nothing more is evicted": Case(
        objects=(*tree(), *borrower(releasing=(3, 4)), *lender("l1", "l2")),
        evicted={},
        ungate=(),
        reasons={
            "ns/b5": B5 + " (2 allocated, 2 held by pods being deleted)",
            "ns/l1": WAITING,
            "ns/l2": WAITING,
        },
    ),
    "cycle 2': one victim gone, one being deleted: one pod admitted, the other waits": Case(
        objects=(*tree(), *borrower(gone=(4,), releasing=(3,)), *lender("l1", "l2")),
        evicted={},
        ungate=("ns/l1",),
        reasons={
            "ns/b5": PARENT.format(leaf="cmp-borrower", cpu=1)
            + "used 4 of capability 4 (2 allocated, 1 reserved by admitted pods not yet placed, "
            "1 held by pods being deleted)",
            "ns/l2": WAITING,
        },
    ),
    "cycle 3: the victims are gone: the lender's pods are admitted, the borrower's waits": Case(
        objects=(*tree(), *borrower(gone=(3, 4)), *lender("l1", "l2")),
        evicted={},
        ungate=("ns/l1", "ns/l2"),
        reasons={
            "ns/b5": PARENT.format(leaf="cmp-borrower", cpu=1)
            + "used 4 of capability 4 (2 allocated, 2 reserved by admitted pods not yet placed)",
        },
    ),
    "cycle 1, the lender's groups Pending (refused at enqueue): the same two victims": Case(
        objects=(*tree(), *borrower(pending=True), *lender("l1", "l2", pending=True)),
        evicted={"ns/b4": "ns/l1", "ns/b3": "ns/l2"},
        ungate=(),
        reasons={
            "ns/b5": B5_ENQUEUE.format(queue="'cmp-borrower'"),
            "ns/l1": _for("ns/l1", "1 pod"),
            "ns/l2": _for("ns/l2", "1 pod"),
        },
    ),
    "cycle 2, the lender's groups Pending: enqueued now, they wait for the victims": Case(
        objects=(
            *tree(),
            *borrower(releasing=(3, 4), pending=True),
            *lender("l1", "l2", pending=True),
        ),
        evicted={},
        ungate=(),
        reasons={
            "ns/b5": B5_ENQUEUE.format(
                queue="'cmp-parent' (ancestor of leaf queue 'cmp-borrower')"
            ),
            "ns/l1": WAITING,
            "ns/l2": WAITING,
        },
    ),
    "a victim being deleted, two lender pods: one more victim, for the one enqueue refused": Case(
        objects=(
            *tree(),
            *borrower(releasing=(4,), pending=True),
            *lender("l1", "l2", pending=True),
        ),
        evicted={"ns/b3": "ns/l2"},
        ungate=(),
        reasons={
            "ns/b5": B5_ENQUEUE.format(
                queue="'cmp-parent' (ancestor of leaf queue 'cmp-borrower')"
            ),
            "ns/l1": WAITING,
            "ns/l2": _for("ns/l2", "1 pod"),
        },
    ),
    "one lender pod takes one victim only (never more than the shortfall)": Case(
        objects=(*tree(), *borrower(), *lender("l1")),
        evicted={"ns/b4": "ns/l1"},
        ungate=(),
        reasons={"ns/b5": B5, "ns/l1": _for("ns/l1", "1 pod")},
    ),
    "a 2-CPU lender pod takes two victims": Case(
        objects=(*tree(), *borrower(), *lender("l1", cpu="2")),
        evicted={"ns/b4": "ns/l1", "ns/b3": "ns/l1"},
        ungate=(),
        reasons={"ns/b5": B5, "ns/l1": _for("ns/l1", "2 pods")},
    ),
    "a lender pod past its deserved share does not reclaim (preemptive)": Case(
        objects=(*tree(), *borrower(), *lender("l1", cpu="3")),
        evicted={},
        ungate=(),
        reasons={
            "ns/b5": B5,
            "ns/l1": PARENT.format(leaf="cmp-lender", cpu=3) + "used 4 of capability 4",
        },
    ),
    "without the reclaim action nothing is evicted": Case(
        objects=(*tree(), *borrower(), *lender("l1")),
        evicted={},
        ungate=(),
        reasons={"ns/b5": B5, "ns/l1": PARENT_FULL},
        actions=("enqueue", "allocate"),
    ),
    "a borrower that is not reclaimable keeps its pods": Case(
        objects=(*tree(borrower_reclaimable=False), *borrower(), *lender("l1")),
        evicted={},
        ungate=(),
        reasons={"ns/b5": B5, "ns/l1": PARENT_FULL},
    ),
    "pods that are not preemptable are not taken: the older ones are": Case(
        objects=(
            *tree(),
            *borrower(gone=(3, 4)),
            *_lone(running("b3", "cmp-borrower", 3).not_preemptable()),
            *_lone(running("b4", "cmp-borrower", 4).not_preemptable()),
            *lender("l1", "l2"),
        ),
        evicted={"ns/b2": "ns/l1", "ns/b1": "ns/l2"},
        ungate=(),
        reasons={
            "ns/b5": B5,
            "ns/l1": _for("ns/l1", "1 pod"),
            "ns/l2": _for("ns/l2", "1 pod"),
        },
    ),
    "a pod whose preemptionPolicy is Never does not reclaim": Case(
        objects=(
            *tree(),
            *borrower(),
            *_lone(
                dataclasses.replace(
                    gated("l1", "cmp-lender", 10).build(), preemption_policy="Never"
                )
            ),
        ),
        evicted={},
        ungate=(),
        reasons={"ns/b5": B5, "ns/l1": PARENT_FULL},
    ),
    "a gang of two takes a victim for each of its pods, together": Case(
        objects=(*tree(), *borrower(), *gang("g", 2, 2)),
        evicted={"ns/b4": "ns/g-0", "ns/b3": "ns/g-1"},
        ungate=(),
        reasons={"ns/b5": B5, "ns/g-0": _for("ns/g-0", "1 pod"), "ns/g-1": _for("ns/g-1", "1 pod")},
    ),
    "a gang of two, one of whose pods fits: one victim, for the other": Case(
        objects=(*tree(), *borrower(gone=(4,), fifth=False), *gang("g", 2, 2)),
        evicted={"ns/b3": "ns/g-1"},
        ungate=(),
        reasons={
            "ns/g-0": "quota reclaim keeps room for it while it takes back room for the other "
            "pods of its pod group ns/g",
            "ns/g-1": _for("ns/g-1", "1 pod"),
        },
    ),
    "a gang of three, of which only two fit its deserved share, takes nothing": Case(
        objects=(*tree(), *borrower(), *gang("g", 3, 3)),
        evicted={},
        ungate=(),
        reasons={
            "ns/b5": B5,
            **{f"ns/g-{i}": PARENT_FULL for i in range(3)},
        },
    ),
    "a lender at its own capability does not reclaim (the leaf blocks, not the ancestor)": Case(
        objects=(
            *tree(lender_capability="1"),
            *borrower(gone=(4,)),
            *_lone(running("l0", "cmp-lender", 9)),
            *lender("l1"),
        ),
        evicted={},
        ungate=(),
        reasons={
            "ns/b5": PARENT.format(leaf="cmp-borrower", cpu=1) + "used 4 of capability 4",
            "ns/l1": "queue 'cmp-lender' has no room for cpu: requested 1, used 1 of capability 1",
        },
    ),
}


FOLDING = {
    "the session folds": "session",
    "the caller folds (the operator's state) and gives the unfolded cluster": "caller",
    "nothing folded": "exact",
}


def _session(
    snapshot: objects.Snapshot, *, folding: str, actions: tuple[str, ...], level: int = 0
) -> decisions.SessionResult:
    """One admission session, its lone pods folded by the session, by its caller (as the
    operator's state does: ``unfolded`` then holds the cluster as it is), or not at all."""
    folded = compaction.compact(snapshot).snapshot if folding == "caller" else snapshot
    return sessions.run_session(
        folded,
        config=_config(actions, level=level),
        feature_gates=b.GATES_ON,
        admission_only=True,
        compact=folding == "session",
        fold=folding != "exact",
        unfolded=snapshot if folding == "caller" else None,
    )


def _run(
    items: Iterable[object], *, actions: tuple[str, ...], compact: bool
) -> decisions.SessionResult:
    return _session(
        b.snapshot(*items),  # type: ignore[arg-type]
        folding="session" if compact else "exact",
        actions=actions,
    )


@pytest.mark.parametrize("folding", FOLDING.values(), ids=FOLDING.keys())
@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_quota_reclaim_evicts_only_the_shortfall_and_admits_later(case: Case, folding: str) -> None:
    result = _session(
        b.snapshot(*case.objects),  # type: ignore[arg-type]
        folding=folding,
        actions=case.actions,
    )
    assert (
        result.errors,
        {e.victim: e.reclaimer for e in result.evictions},
        result.evict,
        result.ungate,
        dict(result.reasons),
    ) == ((), case.evicted, tuple(case.evicted), case.ungate, case.reasons)


def _apply(
    snapshot: objects.Snapshot, result: decisions.SessionResult, *, gone: bool
) -> objects.Snapshot:
    """What the cluster looks like after the operator applied ``result``: the victims being
    deleted (or, ``gone``, deleted), the ungated pods placed on n1."""
    pods = dict(snapshot.pods)
    groups = dict(snapshot.pod_groups)
    for key in result.evict:
        if gone:
            del groups[pods.pop(key).group]
        else:
            pods[key] = dataclasses.replace(pods[key], status=RELEASING)
    for key in result.ungate:
        pod = pods[key]
        pods[key] = dataclasses.replace(pod, scheduling_gates=(), status=RUNNING, node_name="n1")
        groups[pod.group] = dataclasses.replace(
            groups[pod.group], phase=objects.PodGroupPhase.RUNNING
        )
    return dataclasses.replace(
        snapshot, pods=MappingProxyType(pods), pod_groups=MappingProxyType(groups)
    )


@pytest.mark.parametrize("level", [0, 1], ids=["ancestorReclaimLevel 0", "level 1"])
@pytest.mark.parametrize("pending", [True, False], ids=["groups Pending", "groups Inqueue"])
@pytest.mark.parametrize("folding", FOLDING.values(), ids=FOLDING.keys())
def test_cycles_evict_once_then_admit_once_the_victims_are_gone(
    folding: str, pending: bool, level: int
) -> None:
    """Cycle after cycle: two victims, then none while they terminate, then the lender's pods
    are admitted, and the parent never holds more than its 4 CPU."""

    def cycle(snapshot: objects.Snapshot) -> decisions.SessionResult:
        return _session(snapshot, folding=folding, actions=WITH_RECLAIM, level=level)

    snapshot = b.snapshot(*tree(), *borrower(pending=pending), *lender("l1", "l2", pending=pending))
    first = cycle(snapshot)
    assert (first.evict, first.ungate) == (("ns/b4", "ns/b3"), ())
    terminating = _apply(snapshot, first, gone=False)
    steps = [cycle(terminating), cycle(terminating)]
    assert [(r.evict, r.ungate) for r in steps] == [((), ()), ((), ())]
    settled = _apply(terminating, first, gone=True)
    last = cycle(settled)
    assert (last.evict, last.ungate) == ((), ("ns/l1", "ns/l2"))
    after = cycle(_apply(settled, last, gone=True))
    assert (after.evict, after.ungate, after.queues["cmp-parent"].allocated) == (
        (),
        (),
        b.res(cpu="4"),
    )


SECOND_SESSION = {
    "victims to choose: run again with every pod as itself": (tree(), True),
    "nothing to take (the borrower is not reclaimable): one session": (
        tree(borrower_reclaimable=False),
        False,
    ),
}


@pytest.mark.parametrize(("queues", "again"), SECOND_SESSION.values(), ids=SECOND_SESSION.keys())
def test_a_folded_session_runs_again_only_when_quota_reclaim_has_victims_to_choose(
    queues: list[b.NodeBuilder | b.QueueBuilder], again: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    exact = sessions._exact
    runs: list[int] = []

    def counted(*args: Any, **kwargs: Any) -> decisions.SessionResult:
        runs.append(1)
        return exact(*args, **kwargs)

    monkeypatch.setattr(sessions, "_exact", counted)
    _session(
        b.snapshot(*queues, *borrower(), *lender("l1")),
        folding="session",
        actions=WITH_RECLAIM,
    )
    assert bool(runs) == again
