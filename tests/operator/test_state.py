"""The cluster state: assumed gate removals show in every snapshot until the truth catches up."""

from __future__ import annotations

import dataclasses
from types import MappingProxyType
from typing import Any, NamedTuple

import pytest

from queuetree.core import objects, resources
from queuetree.operator import state
from tests import builders as b
from tests.operator import fakes

GATE = objects.QUEUE_ALLOCATION_GATE


def gates_in_view(cluster: state.ClusterState) -> dict[str, tuple[str, ...]]:
    return {key: pod.scheduling_gates for key, pod in cluster.view().snapshot.pods.items()}


def test_an_assumed_pod_appears_ungated_and_keeps_other_gates_out_of_reach() -> None:
    cluster = state.ClusterState()
    cluster.upsert_pod(fakes.pod("a"))
    cluster.upsert_pod(fakes.pod("b", gates=("example.com/other", GATE)))
    assert cluster.assume_ungated("ns/a", decided_at=1.0)
    assert not cluster.assume_ungated("ns/a", decided_at=2.0)
    assert not cluster.assume_ungated("ns/b", decided_at=1.0)
    assert not cluster.assume_ungated("ns/missing", decided_at=1.0)
    assert gates_in_view(cluster) == {"ns/a": (), "ns/b": ("example.com/other", GATE)}
    assert dict(cluster.view().assumed) == {"ns/a": 1.0}


def test_the_watch_confirming_the_removal_ends_the_assumption() -> None:
    cluster = state.ClusterState()
    cluster.upsert_pod(fakes.pod("a"))
    cluster.assume_ungated("ns/a", decided_at=1.0)
    cluster.upsert_pod(fakes.pod("a", gates=()))
    assert dict(cluster.view().assumed) == {}


def test_a_failed_removal_restores_the_gate_in_the_next_snapshot() -> None:
    cluster = state.ClusterState()
    cluster.upsert_pod(fakes.pod("a"))
    cluster.upsert_pod(fakes.pod("b", gates=()))
    steps = [cluster.view().gated]
    cluster.assume_ungated("ns/a", decided_at=1.0)
    steps.append(cluster.view().gated)
    cluster.forget_ungate("ns/a")
    steps.append(cluster.view().gated)
    assert gates_in_view(cluster) == {"ns/a": (GATE,), "ns/b": ()}
    assert steps == [frozenset({"ns/a"}), frozenset(), frozenset({"ns/a"})]


def test_lone_pods_get_their_single_pod_group_in_the_snapshot() -> None:
    cluster = state.ClusterState()
    cluster.upsert_pod(fakes.pod("a", queue="team"))
    groups = cluster.view().snapshot.pod_groups
    assert {key: (g.queue, g.synthetic) for key, g in groups.items()} == {"ns/a": ("team", True)}
    cluster.delete_pod("ns/a")
    assert dict(cluster.view().snapshot.pod_groups) == {}


def test_lone_pods_that_name_no_queue_go_to_the_configured_default_queue() -> None:
    cluster = state.ClusterState(default_queue="batch")
    cluster.upsert_pod(dataclasses.replace(fakes.pod("a"), annotations={GATE: "true"}))
    cluster.upsert_pod(fakes.pod("b", queue="team"))
    cluster.assume_ungated("ns/a", decided_at=1.0)
    groups = cluster.view().snapshot.pod_groups
    assert {key: group.queue for key, group in groups.items()} == {"ns/a": "batch", "ns/b": "team"}


def phases_in_view(cluster: state.ClusterState) -> dict[str, objects.PodGroupPhase]:
    return {key: group.phase for key, group in cluster.view().snapshot.pod_groups.items()}


def test_an_admitted_lone_pod_has_an_inqueue_group_from_assumption_to_placement() -> None:
    cluster = state.ClusterState()
    cluster.upsert_pod(fakes.pod("a"))
    cluster.upsert_pod(fakes.pod("b"))
    steps = [phases_in_view(cluster)]
    cluster.assume_ungated("ns/a", decided_at=1.0)
    cluster.assume_ungated("ns/b", decided_at=1.0)
    steps.append(phases_in_view(cluster))
    cluster.forget_ungate("ns/b")
    cluster.upsert_pod(fakes.pod("a", gates=()))
    steps.append(phases_in_view(cluster))
    cluster.upsert_pod(
        dataclasses.replace(
            fakes.pod("a", gates=()), status=objects.TaskStatus.RUNNING, node_name="n1"
        )
    )
    steps.append(phases_in_view(cluster))
    pending, inqueue, running = (
        objects.PodGroupPhase.PENDING,
        objects.PodGroupPhase.INQUEUE,
        objects.PodGroupPhase.RUNNING,
    )
    assert steps == [
        {"ns/a": pending, "ns/b": pending},
        {"ns/a": inqueue, "ns/b": inqueue},
        {"ns/a": inqueue, "ns/b": pending},
        {"ns/a": running, "ns/b": pending},
    ]


class LoneGroupPhasesCase(NamedTuple):
    pod: Any
    phase: Any


LONE_GROUP_PHASES = {
    "gated and pending": LoneGroupPhasesCase(
        pod=fakes.pod("p"), phase=objects.PodGroupPhase.PENDING
    ),
    "ungated and pending": LoneGroupPhasesCase(
        pod=fakes.pod("p", gates=()), phase=objects.PodGroupPhase.INQUEUE
    ),
    "held by another gate only": LoneGroupPhasesCase(
        pod=fakes.pod("p", gates=("example.com/other",)),
        phase=objects.PodGroupPhase.PENDING,
    ),
    "running": LoneGroupPhasesCase(
        pod=dataclasses.replace(fakes.pod("p", gates=()), status=objects.TaskStatus.RUNNING),
        phase=objects.PodGroupPhase.RUNNING,
    ),
    "succeeded": LoneGroupPhasesCase(
        pod=dataclasses.replace(fakes.pod("p", gates=()), status=objects.TaskStatus.SUCCEEDED),
        phase=objects.PodGroupPhase.COMPLETED,
    ),
}


@pytest.mark.parametrize(("pod", "phase"), LONE_GROUP_PHASES.values(), ids=LONE_GROUP_PHASES.keys())
def test_the_phase_of_a_lone_pods_group_follows_its_admission(
    pod: objects.Pod, phase: objects.PodGroupPhase
) -> None:
    assert objects.admission_lone_pod_group(pod).phase is phase


def test_changes_wake_the_cycle_and_no_ops_do_not() -> None:
    wakes: list[int] = []
    cluster = state.ClusterState(wake=lambda: wakes.append(1))
    cluster.upsert_pod(fakes.pod("a"))
    cluster.upsert_pod(fakes.pod("a"))
    cluster.delete_pod("ns/missing")
    cluster.mark_synced()
    cluster.mark_synced()
    assert len(wakes) == 2


_ADMITTED = fakes.pod("a", gates=())
"""Ungated and opted in: it reserves its queue's room until it is placed."""
_BOUND = dataclasses.replace(_ADMITTED, status=objects.TaskStatus.BOUND, node_name="n1")
_RUNNING = dataclasses.replace(_BOUND, status=objects.TaskStatus.RUNNING)
_NOT_RESERVING = fakes.pod("a", gates=(), opted_in=False)


class Progress(NamedTuple):
    before: objects.Pod | None
    after: objects.Pod
    wakes: bool


PROGRESS = {
    "an admitted pod bound: figures only": Progress(_ADMITTED, _BOUND, wakes=False),
    "a bound pod started: figures only": Progress(_BOUND, _RUNNING, wakes=False),
    "a finished pod gives its room back": Progress(
        _RUNNING, dataclasses.replace(_RUNNING, status=objects.TaskStatus.SUCCEEDED), wakes=True
    ),
    "a pod that reserved nothing takes room when bound": Progress(
        _NOT_RESERVING,
        dataclasses.replace(_NOT_RESERVING, status=objects.TaskStatus.BOUND, node_name="n1"),
        wakes=False,
    ),
    "a new opted-in pod without the gate": Progress(None, _ADMITTED, wakes=False),
    "a new gated pod asks for a decision": Progress(None, fakes.pod("a"), wakes=True),
    "a new pod kube-scheduler found unschedulable": Progress(
        None, dataclasses.replace(_ADMITTED, unschedulable=True), wakes=True
    ),
    "an admitted pod whose gate came back": Progress(_ADMITTED, fakes.pod("a"), wakes=True),
    "an admitted pod found unschedulable (reclaim may act)": Progress(
        _ADMITTED, dataclasses.replace(_ADMITTED, unschedulable=True), wakes=True
    ),
    "a placed pod's labels changed": Progress(
        _BOUND, dataclasses.replace(_RUNNING, labels={"x": "y"}), wakes=True
    ),
    "a gated pod placed by someone else": Progress(
        fakes.pod("a"),
        dataclasses.replace(fakes.pod("a"), status=objects.TaskStatus.BOUND, node_name="n1"),
        wakes=True,
    ),
}


@pytest.mark.parametrize("case", list(PROGRESS.values()), ids=list(PROGRESS))
def test_changes_that_only_take_room_wait_for_the_periodic_cycle(case: Progress) -> None:
    wakes: list[int] = []
    cluster = state.ClusterState(wake=lambda: wakes.append(1))
    if case.before is not None:
        cluster.upsert_pod(case.before)
    wakes.clear()
    version = cluster.view().version
    cluster.upsert_pod(case.after)
    # Either way the version moves: the periodic cycle decides again from the new figures.
    assert (len(wakes), cluster.view().version) == (case.wakes, version + 1)


def test_status_figures_written_back_do_not_wake_the_cycle_but_states_do() -> None:
    wakes: list[int] = []
    cluster = state.ClusterState(wake=lambda: wakes.append(1))
    queue = objects.Queue(name="team", parent="root")
    cluster.upsert_queue(state.QueueRecord(queue=queue, status={"state": "Open"}))
    figures = {"state": "Open", "allocated": {"cpu": "1"}, "running": 1}
    cluster.upsert_queue(state.QueueRecord(queue=queue, status=figures))
    version = cluster.view().version
    cluster.upsert_queue(state.QueueRecord(queue=queue, status={**figures, "state": "Closed"}))
    assert (len(wakes), cluster.view().queue_records["team"].status["running"]) == (2, 1)
    assert cluster.view().version == version + 1


def test_priority_classes_reach_every_snapshot_so_pod_groups_get_their_priority() -> None:
    wakes: list[int] = []
    cluster = state.ClusterState(wake=lambda: wakes.append(1))
    urgent = objects.PriorityClass(name="urgent", value=1000)
    cluster.upsert_priority_class(urgent)
    cluster.upsert_priority_class(urgent)
    seen = [dict(cluster.view().snapshot.priority_classes)]
    cluster.upsert_priority_class(dataclasses.replace(urgent, value=2000))
    seen.append({k: v.value for k, v in cluster.view().snapshot.priority_classes.items()})
    cluster.delete_priority_class("urgent")
    cluster.delete_priority_class("urgent")
    seen.append(dict(cluster.view().snapshot.priority_classes))
    assert (seen, len(wakes)) == ([{"urgent": urgent}, {"urgent": 2000}, {}], 3)


_OUTSIDE = dataclasses.replace(
    fakes.pod("x", gates=(), opted_in=False, queue="b"),
    resreq=resources.Resource(milli_cpu=1000),
)
"""Names queue b without opting in (one CPU): outside queue admission."""
_OUTSIDE_BOUND = dataclasses.replace(_OUTSIDE, status=objects.TaskStatus.BOUND, node_name="n1")
_OUTSIDE_RUNNING = dataclasses.replace(_OUTSIDE_BOUND, status=objects.TaskStatus.RUNNING)


class Outside(NamedTuple):
    steps: tuple[objects.Pod | str, ...]
    """Pods upserted, or keys deleted, in order."""
    wakes: int
    version_moves: bool
    """Whether the last step moved the version (a decision may differ: a node's room)."""
    named: tuple[str, ...]
    """``StateView.outside`` after the steps: the pods told that no queue counts them."""
    occupancy: dict[str, str]
    """Node -> the cpu pods outside queue admission hold there."""


OUTSIDE = {
    "a new pod that never opted in changes no decision": Outside(
        (_OUTSIDE,), wakes=0, version_moves=False, named=("ns/x",), occupancy={}
    ),
    "bound, it takes room on its node, for reclaim only": Outside(
        (_OUTSIDE, _OUTSIDE_BOUND),
        wakes=0,
        version_moves=True,
        named=("ns/x",),
        occupancy={"n1": "1"},
    ),
    "running on the same node, nothing changes": Outside(
        (_OUTSIDE, _OUTSIDE_BOUND, _OUTSIDE_RUNNING),
        wakes=0,
        version_moves=False,
        named=("ns/x",),
        occupancy={"n1": "1"},
    ),
    "unschedulable, it reclaims nothing": Outside(
        (_OUTSIDE, dataclasses.replace(_OUTSIDE, unschedulable=True)),
        wakes=0,
        version_moves=False,
        named=("ns/x",),
        occupancy={},
    ),
    "finished, it is told nothing more": Outside(
        (_OUTSIDE_RUNNING, dataclasses.replace(_OUTSIDE, status=objects.TaskStatus.SUCCEEDED)),
        wakes=0,
        version_moves=True,
        named=(),
        occupancy={},
    ),
    "deleted from its node": Outside(
        (_OUTSIDE_RUNNING, "ns/x"), wakes=0, version_moves=True, named=(), occupancy={}
    ),
    "a pod that names no queue is not told": Outside(
        (dataclasses.replace(_OUTSIDE_RUNNING, annotations={}),),
        wakes=0,
        version_moves=True,
        named=(),
        occupancy={"n1": "1"},
    ),
    "a pod admitted before the record whose opt-in is removed leaves its queue": Outside(
        (
            dataclasses.replace(fakes.pod("x", gates=(), queue="b"), node_name="n1"),
            dataclasses.replace(_OUTSIDE, node_name="n1"),
        ),
        wakes=1,
        version_moves=True,
        named=("ns/x",),
        occupancy={},
    ),
}


@pytest.mark.parametrize("case", list(OUTSIDE.values()), ids=list(OUTSIDE))
def test_pods_outside_queue_admission_are_kept_apart_and_only_their_nodes_see_them(
    case: Outside,
) -> None:
    wakes: list[int] = []
    cluster = state.ClusterState(wake=lambda: wakes.append(1))
    version = 0
    for step in case.steps:
        wakes.clear()
        version = cluster.view().version
        if isinstance(step, str):
            cluster.delete_pod(step)
        else:
            cluster.upsert_pod(step)
    view = cluster.view()
    assert (
        len(wakes),
        view.version != version,
        tuple(view.outside),
        {node: str(held.used.milli_cpu // 1000) for node, held in view.snapshot.outside.items()},
        sorted(view.snapshot.pods),
        sorted(view.snapshot.pod_groups),
    ) == (case.wakes, case.version_moves, case.named, case.occupancy, [], [])


def test_a_pod_group_whose_last_governed_pod_goes_is_marked_and_wakes_the_cycle() -> None:
    wakes: list[int] = []
    cluster = state.ClusterState(wake=lambda: wakes.append(1))
    cluster.upsert_pod_group(
        objects.PodGroup(namespace="ns", name="pg", queue="b", phase=objects.PodGroupPhase.INQUEUE)
    )
    member = {objects.GROUP_NAME_ANNOTATION: "pg"}
    outside = dataclasses.replace(
        _OUTSIDE_RUNNING, group="ns/pg", annotations={**_OUTSIDE.annotations, **member}
    )
    governed = dataclasses.replace(
        fakes.pod("g"), group="ns/pg", annotations={**fakes.pod("g").annotations, **member}
    )
    cluster.upsert_pod(governed)
    cluster.upsert_pod(outside)
    marked = cluster.view().snapshot.pod_groups["ns/pg"]
    wakes.clear()
    cluster.delete_pod("ns/g")
    alone = cluster.view().snapshot.pod_groups["ns/pg"]
    assert (marked.outside, marked.phase, alone.outside, alone.phase, len(wakes)) == (
        1,
        objects.PodGroupPhase.INQUEUE,
        1,
        objects.PodGroupPhase.PENDING,
        1,
    )
    assert cluster.view().pod_groups["ns/pg"].phase is objects.PodGroupPhase.INQUEUE


def _admitted_group(seconds: int = 100) -> b.PodGroupBuilder:
    return b.pod_group("ns", "g").min_resources(cpu="1").admitted_at(seconds)


class GroupStatusEchoCase(NamedTuple):
    after: Any
    wakes: bool


GROUP_STATUS_ECHOES = {
    "new figures in its condition's message: stored, no cycle": GroupStatusEchoCase(
        after=_admitted_group().condition(
            unschedulable=False, reason="Inqueue", seconds=100, message="other figures"
        ),
        wakes=False,
    ),
    "new counts: stored, no cycle": GroupStatusEchoCase(
        after=dataclasses.replace(_admitted_group().build(), counts=objects.GroupCounts(running=1)),
        wakes=False,
    ),
    "a new time of admission (it bounds the reservation): a cycle": GroupStatusEchoCase(
        after=_admitted_group(200), wakes=True
    ),
    "released (the phase and the condition): a cycle": GroupStatusEchoCase(
        after=b.pod_group("ns", "g").min_resources(cpu="1").released_at(400), wakes=True
    ),
}


@pytest.mark.parametrize(
    ("after", "wakes"), GROUP_STATUS_ECHOES.values(), ids=GROUP_STATUS_ECHOES.keys()
)
def test_a_pod_groups_status_echo_wakes_the_cycle_only_when_a_decision_reads_it(
    after: b.PodGroupBuilder | objects.PodGroup, wakes: bool
) -> None:
    woken: list[int] = []
    cluster = state.ClusterState(wake=lambda: woken.append(1))
    cluster.upsert_pod_group(_admitted_group().build())
    woken.clear()
    version = cluster.view().version
    built = after.build() if isinstance(after, b.PodGroupBuilder) else after
    cluster.upsert_pod_group(built)
    assert (
        cluster.view().pod_groups["ns/g"] == built,
        bool(woken),
        cluster.view().version != version,
    ) == (True, wakes, wakes)


def forged(namespace: str, *, opted_in: bool = False) -> objects.Pod:
    """An ungated pod carrying an admission record for queue ``q`` (nobody admitted it)."""
    made = fakes.pod("forged", gates=(), namespace=namespace, queue="q", opted_in=opted_in)
    annotations = {**made.annotations, objects.ADMITTED_QUEUE_ANNOTATION: "q"}
    return dataclasses.replace(made, annotations=MappingProxyType(annotations))


class RecordCase(NamedTuple):
    pod: objects.Pod
    disabled: tuple[str, ...]
    enabled: tuple[str, ...]
    charged: str | None
    """The record the snapshot shows (None: the pod runs outside queue admission)."""


RECORDS = {
    "a record in a reviewed namespace is believed": RecordCase(forged("team"), (), (), "q"),
    "not in kube-system": RecordCase(forged("kube-system"), (), (), None),
    "not in queuetree's own namespace": RecordCase(forged("queuetree-system"), (), (), None),
    "not in a namespace taken out of the webhooks": RecordCase(forged("team"), ("team",), (), None),
    "again once the namespace is back": RecordCase(forged("team"), ("team",), ("team",), "q"),
    "an opted-in pod there still counts as its annotations say": RecordCase(
        forged("team", opted_in=True), ("team",), (), ""
    ),
    "kube-system cannot be taken back in": RecordCase(
        forged("kube-system"), (), ("kube-system",), None
    ),
}


@pytest.mark.parametrize(RecordCase._fields, list(RECORDS.values()), ids=list(RECORDS))
def test_admission_records_are_believed_only_where_the_webhook_reviews_pods(
    pod: objects.Pod,
    disabled: tuple[str, ...],
    enabled: tuple[str, ...],
    charged: str | None,
) -> None:
    cluster = state.ClusterState()
    cluster.upsert_pod(pod)  # stored first: a later label change reads it again
    for namespace in disabled:
        cluster.set_namespace_reviewed(namespace, False)
    for namespace in enabled:
        cluster.set_namespace_reviewed(namespace, True)
    stored = cluster.view().snapshot.pods.get(pod.key)
    assert (None if stored is None else stored.admitted_queue) == charged
