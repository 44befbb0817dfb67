"""In admission mode a queue counts only the pods governed by queuetree's admission: a
pod that never opted in runs outside queue admission whatever queue it names. It
is charged to no queue (figures, shares, PodGroup counts), is never a reclaim victim or a
reclaimer, and never blocks an admission; it still holds room on its node. Volcano mode keeps
Volcano's rule: every pod counts.

Each table compares whole outcomes of one session; ids say what happened before the fix.
"""

from __future__ import annotations

import dataclasses
from types import MappingProxyType

import pytest

from queuetree.core import configs, decisions, governing, objects, sessions
from tests import builders as b

GATE = objects.QUEUE_ALLOCATION_GATE
RUNNING = objects.PodGroupPhase.RUNNING
INQUEUE = objects.PodGroupPhase.INQUEUE
PENDING = objects.PodGroupPhase.PENDING


def _pod(name: str = "p") -> b.PodBuilder:
    return b.pod("ns", name).requests(cpu="1")


GOVERNED = {
    "a gated pod that opted in": (_pod().admission(), True),
    "a gated pod whose opt-in annotation was removed (its gate still holds it)": (
        _pod().gated(),
        True,
    ),
    "an admitted pod (it carries the admission record)": (_pod().admitted_to("q"), True),
    "a pod admitted before the record existed (opted in, gate gone)": (_pod().opted_in(), True),
    "an opted-in pod held only by another controller's gate": (
        _pod().opted_in().gated("example.com/other"),
        True,
    ),
    "a pod that names a queue without opting in": (
        _pod().annotate(**{objects.QUEUE_NAME_ANNOTATION: "q"}),
        False,
    ),
    "a pod that names nothing": (_pod(), False),
    'an opt-in value other than "true"': (_pod().annotate(**{GATE: "True"}), False),
    "a pod held only by another controller's gate, not opted in": (
        _pod().gated("example.com/other"),
        False,
    ),
}


@pytest.mark.parametrize(("pod", "governed"), GOVERNED.values(), ids=GOVERNED.keys())
def test_which_pods_are_governed_by_queue_admission(pod: b.PodBuilder, governed: bool) -> None:
    assert pod.build().governed is governed


CONFIG = b.config(
    [
        b.plugin("priority"),
        b.plugin("gang", "enableJobStarving", "enableJobValid", "enableJobReady"),
        b.plugin("conformance"),
    ],
    [
        b.plugin(
            "capacity",
            "enabledAllocatable",
            "enablePreemptive",
            "enableReclaimable",
            "enableQueueOrder",
            "enableJobEnqueued",
            "enableJobEnqueueable",
            hierarchy=True,
        ),
        b.plugin("predicates", "enablePredicate"),
    ],
    actions=("enqueue", "allocate", "reclaim"),
)
NODE = b.node("n1").allocatable(cpu="32", memory="64Gi", pods="110")
TREE = (
    b.queue("root"),
    b.queue("default"),
    b.queue("team").capability(cpu="4"),
    b.queue("a").parent("team").capability(cpu="2"),
    b.queue("b").parent("team").capability(cpu="3"),
)


def _lone(name: str, queue: str, *, cpu: str = "1") -> b.PodBuilder:
    """A pod without a PodGroup that names ``queue`` by its annotation."""
    return b.pod("ns", name).requests(cpu=cpu).annotate(**{objects.QUEUE_NAME_ANNOTATION: queue})


def _with_group(pod: b.PodBuilder) -> tuple[objects.PodGroup, b.PodBuilder]:
    """``pod`` and its single-pod group, as the operator makes it for a live pod."""
    return (objects.admission_lone_pod_group(pod.build()), pod)


def _admitted(name: str, queue: str, *, cpu: str = "1") -> tuple[object, ...]:
    """A running pod admitted to ``queue`` through the gate."""
    return _with_group(_lone(name, queue, cpu=cpu).admitted_to(queue).running_on("n1"))


def _outside(name: str, queue: str, *, cpu: str = "1") -> tuple[object, ...]:
    """A running pod that names ``queue`` and never opted in."""
    return _with_group(_lone(name, queue, cpu=cpu).running_on("n1"))


def _gated(name: str, queue: str, *, cpu: str = "1", seconds: int = 9) -> tuple[object, ...]:
    """A pod waiting behind the gate for ``queue``."""
    return _with_group(_lone(name, queue, cpu=cpu).admission().created(seconds))


@dataclasses.dataclass(frozen=True)
class Outcome:
    ungate: tuple[str, ...] = ()
    reasons: dict[str, str] = dataclasses.field(default_factory=dict)
    allocated: dict[str, str] = dataclasses.field(default_factory=dict)
    """Queue -> its allocated cpu ("0" when nothing), for the queues named."""
    pods: dict[str, int] = dataclasses.field(default_factory=dict)
    """Queue -> how many pods it counts as allocated."""
    evict: tuple[str, ...] = ()


def outcome(
    result: decisions.SessionResult, *, queues: tuple[str, ...] = ("a", "b", "team", "default")
) -> Outcome:
    return Outcome(
        ungate=result.ungate,
        reasons=dict(result.reasons),
        allocated={q: str(result.queues[q].allocated.milli_cpu // 1000) for q in queues},
        pods={q: result.queues[q].allocated_pods for q in queues},
        evict=result.evict,
    )


def run(
    *items: object,
    admission_only: bool = True,
    config: configs.SchedulerConfiguration = CONFIG,
) -> decisions.SessionResult:
    return sessions.run_session(
        b.snapshot(*items),  # type: ignore[arg-type]
        config=config,
        feature_gates=b.GATES_ON,
        admission_only=admission_only,
    )


NONE = {"a": "0", "b": "0", "team": "0", "default": "0"}
NO_PODS = {"a": 0, "b": 0, "team": 0, "default": 0}
CHARGING = {
    "a pod that names a full queue without opting in runs outside it (before: b 8 of 3, team "
    "8 of 4, the honest pod refused)": (
        (NODE, *TREE, *_admitted("b1", "b"), *_outside("noopt", "b", cpu="5"), *_gated("h", "b")),
        Outcome(
            ungate=("ns/h",),
            allocated={**NONE, "b": "1", "team": "1"},
            pods={**NO_PODS, "b": 1, "team": 1},
        ),
    ),
    "the honest pod waits only for what governed pods use": (
        (NODE, *TREE, *_admitted("b1", "b", cpu="3"), *_outside("noopt", "b"), *_gated("h", "b")),
        Outcome(
            reasons={
                "ns/h": "pod ns/h is not admitted: queue 'b' cannot take the pod's requests on "
                "cpu: requested 1, used 3 of capability 3 (allocated plus inqueue groups)"
            },
            allocated={**NONE, "b": "3", "team": "3"},
            pods={**NO_PODS, "b": 1, "team": 1},
        ),
    ),
    "pods that name no queue are not charged to the default queue (before: default 2)": (
        (NODE, *TREE, *_outside("plain", "default", cpu="2"), *_gated("d", "default")),
        Outcome(ungate=("ns/d",), allocated=NONE, pods=NO_PODS),
    ),
    "a pod outside admission that no node takes reclaims nothing (before: it evicted b1)": (
        (
            b.node("n1").allocatable(cpu="2", memory="64Gi", pods="110"),
            b.queue("root"),
            b.queue("owner").deserved(cpu="2"),
            b.queue("b"),
            b.queue("a"),
            b.queue("team"),
            b.queue("default"),
            *_admitted("b1", "b", cpu="2"),
            *_with_group(_lone("claim", "owner", cpu="2").unschedulable()),
        ),
        Outcome(allocated={**NONE, "b": "2"}, pods={**NO_PODS, "b": 1}),
    ),
}


@pytest.mark.parametrize(("items", "expected"), CHARGING.values(), ids=CHARGING.keys())
def test_a_pod_outside_queue_admission_is_charged_to_no_queue(
    items: tuple[object, ...], expected: Outcome
) -> None:
    assert outcome(run(*items)) == expected


def test_volcano_mode_counts_every_pod_as_volcano_does() -> None:
    items = (NODE, *TREE, *_admitted("b1", "b"), *_outside("noopt", "b", cpu="5"))
    assert outcome(run(*items, admission_only=False), queues=("b", "team")) == Outcome(
        allocated={"b": "6", "team": "6"}, pods={"b": 2, "team": 2}
    )


RECLAIM_TREE = (
    b.queue("root"),
    b.queue("owner").deserved(cpu="4"),
    b.queue("default"),
    b.queue("borrower"),
)
CLAIM = _with_group(_lone("claim", "owner", cpu="4").admitted_to("owner").unschedulable())
NO_ROOM = (
    "kube-scheduler found no node for the pod (Unschedulable) although its queue admitted it; "
    "reclaim cannot help: no node has running pods that reclaim may take (their queues are "
    "within their deserved share or guarantee, or not reclaimable)"
)
FOUR = b.node("n1").allocatable(cpu="4", memory="64Gi", pods="110")
RECLAIM = {
    "pods outside queue admission are never victims, not even in the reclaimable default "
    "queue (before: both evicted)": (
        (
            FOUR,
            *RECLAIM_TREE,
            *_outside("x", "default", cpu="2"),
            *_outside("y", "default"),
            *CLAIM,
        ),
        (),
        {"ns/claim": NO_ROOM},
    ),
    "an admitted pod of a reclaimable queue still is": (
        (FOUR, *RECLAIM_TREE, *_admitted("v", "borrower", cpu="4"), *CLAIM),
        ("ns/v",),
        {},
    ),
    "their room stays on the node: evicting the borrower alone would not make room, so nothing "
    "is evicted (before: the borrower was evicted for nothing)": (
        (
            FOUR,
            *RECLAIM_TREE,
            *_outside("x", "default", cpu="2"),
            *_admitted("v", "borrower", cpu="2"),
            *CLAIM,
        ),
        (),
        {
            "ns/claim": "kube-scheduler found no node for the pod (Unschedulable) although its "
            "queue admitted it; reclaim cannot help: no node has running pods that reclaim may "
            "take (their queues are within their deserved share or guarantee, or not "
            "reclaimable)"
        },
    ),
    "room that a pod outside admission gives back once deleted counts as coming back": (
        (
            FOUR,
            *RECLAIM_TREE,
            *_with_group(
                _lone("x", "default", cpu="2").running_on("n1").status(objects.TaskStatus.RELEASING)
            ),
            *_admitted("v", "borrower", cpu="2"),
            *CLAIM,
        ),
        ("ns/v",),
        {},
    ),
}


@pytest.mark.parametrize(("items", "evict", "reasons"), RECLAIM.values(), ids=RECLAIM.keys())
def test_reclaim_takes_no_victim_outside_queue_admission_and_counts_its_room_on_nodes(
    items: tuple[object, ...], evict: tuple[str, ...], reasons: dict[str, str]
) -> None:
    result = run(*items)
    assert (result.evict, dict(result.reasons)) == (evict, reasons)


def _member(name: str, group: str) -> b.PodBuilder:
    return b.pod("ns", name).group(group).requests(cpu="1").running_on("n1")


SMALL = (NODE, b.queue("root"), b.queue("q").capability(cpu="2"))
GROUPS = {
    "a PodGroup whose pods all run outside admission holds nothing, is Pending and counts "
    "none (before: Running 2, the honest pod refused)": (
        (
            *SMALL,
            b.pod_group("ns", "pg").queue("q").min_member(2).min_resources(cpu="2").phase(INQUEUE),
            _member("m1", "pg"),
            _member("m2", "pg"),
            *_gated("h", "q", cpu="2"),
        ),
        ("ns/h",),
        PENDING,
        objects.GroupCounts(),
        "0",
    ),
    "a PodGroup with no pod yet is enqueued and holds its minResources, as in Volcano": (
        (
            *SMALL,
            b.pod_group("ns", "pg").queue("q").min_member(2).min_resources(cpu="2"),
            *_gated("h", "q", cpu="2"),
        ),
        (),
        INQUEUE,
        objects.GroupCounts(),
        "0",
    ),
    "a group counts only its governed pods (before: running 2)": (
        (
            *SMALL,
            b.pod_group("ns", "pg").queue("q").min_member(1).phase(RUNNING),
            _member("m1", "pg"),
            _member("m2", "pg").admitted_to("q"),
        ),
        (),
        RUNNING,
        objects.GroupCounts(running=1),
        "1",
    ),
}


@pytest.mark.parametrize(
    ("items", "ungate", "phase", "counts", "allocated"), GROUPS.values(), ids=GROUPS.keys()
)
def test_a_pod_group_counts_only_its_governed_pods(
    items: tuple[object, ...],
    ungate: tuple[str, ...],
    phase: objects.PodGroupPhase,
    counts: objects.GroupCounts,
    allocated: str,
) -> None:
    result = run(*items)
    assert (
        result.ungate,
        result.pod_groups["ns/pg"],
        result.group_counts["ns/pg"],
        str(result.queues["q"].allocated.milli_cpu // 1000),
    ) == (ungate, phase, counts, allocated)


def test_the_whole_snapshot_is_kept_when_every_pod_is_governed() -> None:
    snapshot = b.snapshot(NODE, *TREE, *_admitted("b1", "b"), *_gated("h", "b"))
    assert governing.admission_snapshot(snapshot) is snapshot


def test_the_split_leaves_pods_out_and_adds_their_room_to_what_their_nodes_already_show() -> None:
    already = objects.Occupancy(used=b.res(cpu="1"), releasing=b.res())
    snapshot = dataclasses.replace(
        b.snapshot(
            NODE,
            *TREE,
            *_admitted("b1", "b"),
            *_outside("x", "b", cpu="2"),
            _lone("y", "b", cpu="3").running_on("n1").status(objects.TaskStatus.RELEASING),
            _lone("z", "b", cpu="4"),  # Pending, on no node: it holds no room
            b.pod_group("ns", "pg").queue("b"),
            _member("m", "pg"),
        ),
        outside=MappingProxyType({"n1": already}),
    )
    split = governing.admission_snapshot(snapshot)
    assert (
        sorted(split.pods),
        sorted(split.pod_groups),
        split.pod_groups["ns/pg"].outside,
        dict(split.outside),
    ) == (
        ["ns/b1"],
        ["ns/b1", "ns/pg"],
        1,
        {"n1": objects.Occupancy(used=b.res(cpu="7"), releasing=b.res(cpu="3"))},
    )


NAMED = {
    "its annotation": (
        _lone("p", "b"),
        governing.NamedQueue("b", f"its annotation {objects.QUEUE_NAME_ANNOTATION}"),
    ),
    "its PodGroup's queue, over its annotation": (
        _lone("p", "b").group("pg"),
        governing.NamedQueue("a", "its PodGroup ns/pg"),
    ),
    "a PodGroup that does not exist": (
        _lone("p", "b").group("gone"),
        governing.NamedQueue("b", "its PodGroup ns/gone, which does not exist"),
    ),
    "nothing: the rest of the cluster's pods are told nothing": (b.pod("ns", "p"), None),
}


@pytest.mark.parametrize(("pod", "named"), NAMED.values(), ids=NAMED.keys())
def test_the_queue_a_pod_outside_admission_names(
    pod: b.PodBuilder, named: governing.NamedQueue | None
) -> None:
    groups = {"ns/pg": b.pod_group("ns", "pg").queue("a").build()}
    assert governing.named_queue(pod.build(), groups) == named
