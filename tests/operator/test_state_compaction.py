"""The state keeps settled lone pods folded between cycles, and the pods outside queue admission
apart; the admission session decides over that snapshot exactly as over the whole cluster,
whatever happened before, and the state's split is the core's (``governing``)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from queuetree.api import schedconf
from queuetree.core import decisions, governing, objects, resources, sessions
from queuetree.operator import queue_status, state
from tests import properties
from tests.operator import fakes

GATE = objects.QUEUE_ALLOCATION_GATE
CONFIG = schedconf.parse_default().configuration
GATES_ON = {objects.FEATURE_SCHEDULING_GATES_QUEUE_ADMISSION: True}
QUEUES = ("team-a", "team-b", "dept")
KINDS = (
    "gated",
    "admitted",
    "running",
    "foreign-gate",
    "gang",
    "unschedulable",
    "not-opted-in",
    "not-opted-in running",
    "not-opted-in releasing",
    "not-opted-in gang",
    "not-opted-in unschedulable",
    "not-opted-in gated",
)
"""A pod "not opted in" is outside queue admission unless it carries our gate (gated)."""


def make_pod(kind: str, index: int, queue: str, cpu: int) -> objects.Pod:
    request = resources.Resource(milli_cpu=cpu * 100, memory=2**20)
    opted_in = not kind.startswith("not-opted-in")
    kind = kind.removeprefix("not-opted-in").strip()
    pod = dataclasses.replace(
        fakes.pod(f"p{index}", queue=queue, opted_in=opted_in),
        resreq=request,
        scheduling_gates=(),
    )
    if kind == "releasing":
        return dataclasses.replace(pod, status=objects.TaskStatus.RELEASING, node_name="n1")
    if kind == "gated":
        return dataclasses.replace(pod, scheduling_gates=(GATE,))
    if kind == "foreign-gate":
        return dataclasses.replace(pod, scheduling_gates=(GATE, "example.com/other"))
    if kind == "running":
        return dataclasses.replace(pod, status=objects.TaskStatus.RUNNING, node_name="n1")
    if kind == "unschedulable":
        return dataclasses.replace(pod, unschedulable=True)
    if kind == "gang":
        annotations = {**pod.annotations, objects.GROUP_NAME_ANNOTATION: "gang"}
        if not opted_in:
            # A member that never opted in and runs: outside queue admission.
            return dataclasses.replace(
                pod,
                group="ns/gang",
                annotations=annotations,
                status=objects.TaskStatus.RUNNING,
                node_name="n1",
            )
        return dataclasses.replace(
            pod, group="ns/gang", annotations=annotations, scheduling_gates=(GATE,)
        )
    return pod


operations = st.lists(
    st.one_of(
        st.tuples(
            st.just("upsert"),
            st.sampled_from(KINDS),
            st.integers(0, 7),
            st.sampled_from(QUEUES),
            st.integers(1, 4),
        ),
        st.tuples(st.sampled_from(["assume", "forget", "delete"]), st.integers(0, 7)),
        st.tuples(st.just("shadow"), st.integers(0, 7), st.booleans()),
        st.tuples(st.just("forget-all")),
        st.tuples(st.just("grow-tree"), st.booleans()),
    ),
    max_size=40,
)


def apply(
    cluster: state.ClusterState, operation: tuple[Any, ...], pods: dict[str, objects.Pod]
) -> None:
    """Apply ``operation`` to ``cluster``, and to ``pods`` (every pod the watches show)."""
    name = operation[0]
    if name == "upsert":
        _, kind, index, queue, cpu = operation
        pod = make_pod(kind, index, queue, cpu)
        cluster.upsert_pod(pod)
        pods[pod.key] = pod
    elif name == "assume":
        cluster.assume_ungated(f"ns/p{operation[1]}", decided_at=1.0)
    elif name == "forget":
        cluster.forget_ungate(f"ns/p{operation[1]}")
    elif name == "delete":
        cluster.delete_pod(f"ns/p{operation[1]}")
        pods.pop(f"ns/p{operation[1]}", None)
    elif name == "shadow":
        # A real PodGroup with a lone pod's key takes the pod over, and gives it back.
        _, index, present = operation
        if present:
            cluster.upsert_pod_group(
                objects.PodGroup(
                    namespace="ns",
                    name=f"p{index}",
                    queue="team-b",
                    phase=objects.PodGroupPhase.INQUEUE,
                )
            )
        else:
            cluster.delete_pod_group(f"ns/p{index}")
    elif name == "forget-all":
        cluster.forget_all_ungates()
    elif name == "grow-tree":
        # team-a gains a child (it is no longer a leaf), or loses it.
        if operation[1]:
            cluster.upsert_queue(
                state.QueueRecord(queue=objects.Queue(name="sub", parent="team-a"))
            )
        else:
            cluster.delete_queue("sub")


def comparable(result: decisions.SessionResult, real_groups: set[str]) -> tuple[object, ...]:
    return (
        result.ungate,
        result.evict,
        result.errors,
        result.warnings,
        dict(result.reasons),
        dict(result.queues),
        result.events,
        {key: phase for key, phase in result.pod_groups.items() if key in real_groups},
    )


def decide_both_ways(operations: list[tuple[Any, ...]], *, every_step: bool = False) -> None:
    """Apply ``operations``, taking a view after each (as cycles do, which fills the state's
    cache of folds), and compare the two sessions at the end, or after every step."""
    cluster = state.ClusterState()
    for name, parent, capability in (
        ("root", "", None),
        ("dept", "root", None),
        ("team-a", "dept", resources.Resource(milli_cpu=1500, memory=2**40)),
        ("team-b", "dept", resources.Resource(milli_cpu=800, memory=2**40)),
    ):
        cluster.upsert_queue(
            state.QueueRecord(queue=objects.Queue(name=name, parent=parent, capability=capability))
        )
    cluster.upsert_node(
        objects.Node(
            name="n1",
            allocatable=resources.Resource(milli_cpu=4000, memory=2**40, scalars={"pods": 110}),
        )
    )
    cluster.upsert_pod_group(
        objects.PodGroup(namespace="ns", name="gang", queue="team-b", min_member=2)
    )
    cluster.mark_synced()
    pods: dict[str, objects.Pod] = {}
    for step, operation in enumerate(operations, start=1):
        apply(cluster, operation, pods)
        view = cluster.view()
        if every_step or step == len(operations):
            compare(view, pods)
    if not operations:
        compare(cluster.view(), pods)


def unsplit(view: state.StateView, pods: dict[str, objects.Pod]) -> objects.Snapshot:
    """The snapshot of ``view`` with the pods outside queue admission put back, as the state
    showed it before it kept them apart: every pod, every lone pod in its own group, the real
    PodGroups as written, nothing outside."""
    outside = {key: pod for key, pod in pods.items() if not pod.governed}
    shown = view.snapshot.pod_groups
    return dataclasses.replace(
        view.snapshot,
        pods={**view.snapshot.pods, **outside},
        pod_groups={
            **{
                key: objects.admission_lone_pod_group(pod)
                for key, pod in outside.items()
                if not pod.names_group
            },
            **{key: group for key, group in shown.items() if key not in view.pod_groups},
            **view.pod_groups,
        },
        outside={},
    )


def compare(view: state.StateView, pods: dict[str, objects.Pod]) -> None:
    folded = sessions.run_session(
        view.for_session, config=CONFIG, feature_gates=GATES_ON, admission_only=True
    )
    whole = sessions.run_session(
        view.snapshot, config=CONFIG, feature_gates=GATES_ON, admission_only=True, compact=False
    )
    everything = unsplit(view, pods)
    every_pod = sessions.run_session(
        everything, config=CONFIG, feature_gates=GATES_ON, admission_only=True, compact=False
    )
    real = set(view.pod_groups)
    assert comparable(folded, real) == comparable(whole, real) == comparable(every_pod, real)
    # The state's split, kept pod by pod, is the core's over every pod.
    split = governing.admission_snapshot(everything)
    assert (dict(split.pods), dict(split.pod_groups), dict(split.outside)) == (
        dict(view.snapshot.pods),
        dict(view.snapshot.pod_groups),
        dict(view.snapshot.outside),
    )
    # The state's tally of pod groups by queue and phase is the snapshot's, counted.
    assert queue_status.view_counts(view) == queue_status.count_pod_groups(view.snapshot)


@settings(max_examples=properties.examples(400))
@given(operations=operations)
def test_the_session_decides_the_same_over_the_folded_snapshot_after_any_history(
    operations: list[tuple[Any, ...]],
) -> None:
    decide_both_ways(operations)


ADMITTED_TWICE: list[tuple[Any, ...]] = [
    ("upsert", "admitted", 0, "team-a", 2),
    ("upsert", "admitted", 1, "team-a", 3),
    ("upsert", "running", 2, "team-a", 1),
    ("upsert", "running", 3, "team-a", 1),
    ("upsert", "gated", 4, "team-a", 4),
]
HISTORIES: dict[str, list[tuple[Any, ...]]] = {
    "settled pods, as they are": ADMITTED_TWICE,
    "a real PodGroup takes a settled lone pod over": [*ADMITTED_TWICE, ("shadow", 0, True)],
    "and gives it back": [*ADMITTED_TWICE, ("shadow", 0, True), ("shadow", 0, False)],
    "the queue stops being a leaf": [*ADMITTED_TWICE, ("grow-tree", True)],
    "an admitted pod is assumed, then forgotten": [
        *ADMITTED_TWICE,
        ("assume", 4),
        ("forget", 4),
    ],
    "an assumed pod settles with the others": [*ADMITTED_TWICE, ("assume", 4)],
    "every assumption is dropped": [*ADMITTED_TWICE, ("assume", 4), ("forget-all",)],
    "a settled pod is deleted": [*ADMITTED_TWICE, ("delete", 1)],
    "a settled pod is gated again by its owner": [
        *ADMITTED_TWICE,
        ("upsert", "gated", 1, "team-a", 3),
    ],
    "a settled pod moves to another queue": [
        *ADMITTED_TWICE,
        ("upsert", "admitted", 0, "team-b", 2),
    ],
    "an unschedulable pod turns folding off": [
        *ADMITTED_TWICE,
        ("upsert", "unschedulable", 5, "team-b", 1),
    ],
}


@pytest.mark.parametrize("history", HISTORIES.values(), ids=HISTORIES.keys())
def test_the_folded_snapshot_follows_each_kind_of_change(history: list[tuple[Any, ...]]) -> None:
    decide_both_ways(history, every_step=True)


def test_settled_pods_of_a_leaf_are_folded_and_a_change_refolds_only_their_bucket() -> None:
    cluster = state.ClusterState()
    cluster.upsert_queue(state.QueueRecord(queue=objects.Queue(name="root")))
    cluster.upsert_queue(state.QueueRecord(queue=objects.Queue(name="team-a", parent="root")))
    for index in range(3):
        cluster.upsert_pod(make_pod("admitted", index, "team-a", 1))
    cluster.upsert_pod(make_pod("gated", 3, "team-a", 2))
    cluster.mark_synced()
    first = cluster.view().for_session
    cluster.upsert_pod(make_pod("admitted", 4, "team-a", 1))
    second = cluster.view().for_session
    assert {key: pod.resreq.milli_cpu for key, pod in first.pods.items()} == {
        "/folded:team-a:Pending:reserving": 300,
        "ns/p3": 200,
    }
    assert {key: pod.resreq.milli_cpu for key, pod in second.pods.items()} == {
        "/folded:team-a:Pending:reserving": 400,
        "ns/p3": 200,
    }
