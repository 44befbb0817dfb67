"""Folding: an admission session that decides runs of interchangeable gated lone pods in one
step decides exactly as the per-pod path (``run_session(..., fold=False)``).

The generated clusters put many gated lone pods of a few shapes into a small queue tree (so
runs form, and queues fill up part way through a run), with priorities, creation times that
interleave shapes, pods that did not opt in or name another scheduler, real single-pod
PodGroups (with and without minResources, Pending or Inqueue) beside synthetic ones, gangs,
running and admitted pods in the same queues, closed queues, GPU requests, and node
constraints that admission never reads. The whole result is compared: ungated pods and their
order, reasons, remedies, queue figures, pod group phases and counts, events, admission order.
"""

from __future__ import annotations

import dataclasses
from types import MappingProxyType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from queuetree.core import configs, decisions, folding, objects, sessions
from tests import builders as b
from tests import properties

GATE = objects.QUEUE_ALLOCATION_GATE
OPT_IN = MappingProxyType({GATE: "true"})
NO_ANNOTATIONS: MappingProxyType[str, str] = MappingProxyType({})
SHAPES = (
    b.res(cpu=1, memory="1Gi"),
    b.res(cpu=2, memory="1Gi"),
    b.res(cpu=1, memory="2Gi", **{"nvidia.com/gpu": 1}),
)
KINDS = ("gated",) * 8 + ("gang", "running", "reserved", "other-scheduler", "not-opted-in")


@st.composite
def snapshots(draw: st.DrawFn) -> objects.Snapshot:
    queues: dict[str, objects.Queue] = {"root": objects.Queue(name="root")}
    names: list[str] = []
    for i in range(draw(st.integers(min_value=1, max_value=5))):
        name = f"q{i}"
        parent = draw(st.sampled_from(["root", *names]))
        capability = draw(
            st.one_of(
                st.none(),
                st.builds(
                    lambda cpu, gpu, pods: b.res(
                        cpu=cpu,
                        memory="64Gi",
                        **({"nvidia.com/gpu": gpu} if gpu else {}),
                        **({"pods": pods} if pods is not None else {}),
                    ),
                    st.integers(min_value=0, max_value=24),
                    st.integers(min_value=0, max_value=6),
                    st.one_of(st.none(), st.none(), st.integers(min_value=0, max_value=12)),
                ),
            )
        )
        queues[name] = objects.Queue(
            name=name,
            parent=parent,
            capability=capability,
            deserved=b.res(cpu=draw(st.integers(min_value=0, max_value=8))),
            state=draw(
                st.sampled_from([objects.QueueState.OPEN] * 5 + [objects.QueueState.CLOSED])
            ),
            created=b.at(i),
        )
        names.append(name)
    nodes = {
        f"n{i}": b.node(f"n{i}").allocatable(cpu="32", memory="128Gi", pods="110").build()
        for i in range(2)
    }
    pods: dict[str, objects.Pod] = {}
    groups: dict[str, objects.PodGroup] = {}
    shapes = draw(st.lists(st.sampled_from(SHAPES), min_size=1, max_size=3))
    real_groups = draw(st.booleans())
    for p in range(draw(st.integers(min_value=0, max_value=60))):
        kind = draw(st.sampled_from(KINDS))
        queue = draw(st.sampled_from(names))
        request = draw(st.sampled_from(shapes))
        pod = objects.Pod(
            namespace="ns",
            name=f"p{p:02d}",
            group=f"ns/p{p:02d}",
            resreq=request,
            annotations=OPT_IN,
            scheduling_gates=(GATE,),
            priority=draw(st.sampled_from([1, 1, 1, 5])),
            # Creation times repeat and go back and forth: runs split and interleave.
            created=b.at(draw(st.integers(min_value=0, max_value=20))),
            uid=f"uid-{p:02d}",
            node_selector=draw(st.sampled_from([{}, {"zone": "a"}])),
        )
        phase = objects.PodGroupPhase.PENDING
        if kind == "not-opted-in":
            pod = dataclasses.replace(pod, annotations=NO_ANNOTATIONS)
        elif kind == "other-scheduler":
            pod = dataclasses.replace(pod, scheduler_name="other")
        elif kind == "reserved":
            pod = dataclasses.replace(pod, scheduling_gates=())
            phase = objects.PodGroupPhase.INQUEUE
        elif kind == "running":
            pod = dataclasses.replace(
                pod, scheduling_gates=(), status=objects.TaskStatus.RUNNING, node_name="n0"
            )
            phase = objects.PodGroupPhase.RUNNING
        if kind == "gang":
            gang = f"gang{draw(st.integers(min_value=0, max_value=1))}"
            pod = dataclasses.replace(pod, group=f"ns/{gang}")
            groups.setdefault(
                f"ns/{gang}",
                objects.PodGroup(
                    namespace="ns",
                    name=gang,
                    queue=queue,
                    min_member=draw(st.integers(min_value=1, max_value=3)),
                    phase=objects.PodGroupPhase.INQUEUE,
                    created=pod.created,
                    uid=gang,
                ),
            )
        elif real_groups and kind == "gated":
            # A PodGroup of its own (as a job controller makes one), maybe with minResources.
            groups[pod.group] = objects.PodGroup(
                namespace="ns",
                name=pod.name,
                queue=queue,
                min_member=draw(st.sampled_from([0, 1])),
                min_resources=draw(st.sampled_from([None, request])),
                phase=draw(st.sampled_from([phase, objects.PodGroupPhase.INQUEUE])),
                created=pod.created,
                uid=pod.uid,
            )
        else:
            group = objects.pod_group_for_lone_pod(pod, default_queue=queue)
            groups[pod.group] = dataclasses.replace(group, phase=phase)
        pods[pod.key] = pod
    return objects.Snapshot(
        queues=MappingProxyType(queues),
        pod_groups=MappingProxyType(groups),
        pods=MappingProxyType(pods),
        nodes=MappingProxyType(nodes),
    )


CONFIGS = {
    "hierarchical, enqueue and allocate": b.config(
        [b.plugin("priority"), b.plugin("gang")],
        [b.plugin("capacity", hierarchy=True)],
    ),
    "flat capacity, allocate only": b.config(
        [b.plugin("priority"), b.plugin("gang")], [b.plugin("capacity")], actions=("allocate",)
    ),
    "hierarchical with reclaim": b.config(
        [b.plugin("priority"), b.plugin("gang")],
        [b.plugin("capacity", hierarchy=True)],
        actions=("enqueue", "allocate", "reclaim"),
    ),
    "no capacity plugin": b.config([b.plugin("priority"), b.plugin("gang")], []),
}


def _session(
    snapshot: objects.Snapshot,
    config: configs.SchedulerConfiguration,
    *,
    fold: bool,
    gates: MappingProxyType[str, bool] = b.GATES_ON,
    compact: bool = True,
    scheduler_names: frozenset[str] | None = None,
) -> decisions.SessionResult:
    return sessions.run_session(
        snapshot,
        config=config,
        feature_gates=gates,
        admission_only=True,
        compact=compact,
        fold=fold,
        scheduler_names=scheduler_names,
    )


def _comparable(result: decisions.SessionResult) -> decisions.SessionResult:
    # Pod group phases of run members follow their run rather than key order: compare them
    # as maps (the other mappings compare as maps already; tuples keep their order).
    return dataclasses.replace(result, pod_groups=MappingProxyType(dict(result.pod_groups)))


@pytest.mark.parametrize("config", CONFIGS.values(), ids=CONFIGS.keys())
@settings(max_examples=properties.examples(200))
@given(
    snapshot=snapshots(),
    gates=st.sampled_from([b.GATES_ON, b.GATES_OFF]),
    compact=st.booleans(),
    scheduler_names=st.sampled_from([None, frozenset({objects.DEFAULT_SCHEDULER})]),
)
def test_a_folded_admission_session_decides_exactly_as_the_per_pod_one(
    config: configs.SchedulerConfiguration,
    snapshot: objects.Snapshot,
    gates: MappingProxyType[str, bool],
    compact: bool,
    scheduler_names: frozenset[str] | None,
) -> None:
    options = {"gates": gates, "compact": compact, "scheduler_names": scheduler_names}
    folded = _session(snapshot, config, fold=True, **options)  # type: ignore[arg-type]
    plain = _session(snapshot, config, fold=False, **options)  # type: ignore[arg-type]
    assert _comparable(folded) == _comparable(plain)
    assert folded.pod_groups.keys() == plain.pod_groups.keys()


def _queue_of_identical_pods(count: int, *, capability_cpu: int) -> objects.Snapshot:
    request = b.res(cpu=1, memory="1Gi")
    pods = {}
    groups = {}
    for i in range(count):
        pod = objects.Pod(
            namespace="ns",
            name=f"p{i:03d}",
            group=f"ns/p{i:03d}",
            resreq=request,
            annotations=OPT_IN,
            scheduling_gates=(GATE,),
            created=b.at(i),
            uid=f"uid-{i:03d}",
        )
        pods[pod.key] = pod
        groups[pod.group] = objects.pod_group_for_lone_pod(pod, default_queue="team")
    return objects.Snapshot(
        queues=MappingProxyType(
            {
                "root": objects.Queue(name="root"),
                "team": objects.Queue(name="team", capability=b.res(cpu=capability_cpu)),
            }
        ),
        pod_groups=MappingProxyType(groups),
        pods=MappingProxyType(pods),
        nodes=MappingProxyType({}),
    )


HIERARCHICAL = CONFIGS["hierarchical, enqueue and allocate"]


def test_a_queue_of_identical_gated_pods_is_one_run_that_admits_as_many_as_fit() -> None:
    snapshot = _queue_of_identical_pods(100, capability_cpu=30)
    candidates = folding.find_candidates(
        snapshot, leaves=frozenset({"team"}), task_priority=lambda pod: pod.priority
    )
    assert [len(run) for run in folding.iter_runs(candidates, others={})] == [100]
    result = _session(snapshot, HIERARCHICAL, fold=True)
    assert result.ungate == tuple(f"ns/p{i:03d}" for i in range(30))
    assert len(result.reasons) == 70
    assert result.queues["team"].reserved_pods == 30
    assert _comparable(result) == _comparable(_session(snapshot, HIERARCHICAL, fold=False))


def test_a_pod_of_another_shape_created_in_between_splits_the_run() -> None:
    snapshot = _queue_of_identical_pods(10, capability_cpu=30)
    middle = snapshot.pods["ns/p005"]
    other = dataclasses.replace(middle, resreq=b.res(cpu=2))
    pods = dict(snapshot.pods, **{other.key: other})
    groups = dict(snapshot.pod_groups)
    groups[other.group] = objects.pod_group_for_lone_pod(other, default_queue="team")
    split = dataclasses.replace(
        snapshot, pods=MappingProxyType(pods), pod_groups=MappingProxyType(groups)
    )
    candidates = folding.find_candidates(
        split, leaves=frozenset({"team"}), task_priority=lambda pod: pod.priority
    )
    assert [len(run) for run in folding.iter_runs(candidates, others={})] == [5, 1, 4]


SECOND_POD = {
    "gated too (two candidates name the group)": (GATE,),
    "admitted already (found while the session is built)": (),
}


@pytest.mark.parametrize("gates", SECOND_POD.values(), ids=SECOND_POD.keys())
def test_a_second_pod_naming_a_lone_pods_group_keeps_that_group_out_of_runs(
    gates: tuple[str, ...],
) -> None:
    snapshot = _queue_of_identical_pods(6, capability_cpu=3)
    second = dataclasses.replace(
        snapshot.pods["ns/p002"],
        name="extra",
        annotations=MappingProxyType({**OPT_IN, objects.GROUP_NAME_ANNOTATION: "p002"}),
        scheduling_gates=gates,
        uid="uid-extra",
    )
    crowded = dataclasses.replace(
        snapshot, pods=MappingProxyType({**snapshot.pods, second.key: second})
    )
    folded = _session(crowded, HIERARCHICAL, fold=True)
    assert _comparable(folded) == _comparable(_session(crowded, HIERARCHICAL, fold=False))
    assert folded.ungate  # the queue has room for some of them


def test_folding_is_off_when_a_plugin_other_than_capacity_would_vote() -> None:
    assert folding.supported(HIERARCHICAL)
    twice = b.config([b.plugin("capacity")], [b.plugin("capacity", hierarchy=True)])
    assert not folding.supported(twice)
