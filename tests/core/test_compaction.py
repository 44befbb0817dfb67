"""Compaction: an admission session over the folded snapshot decides exactly as over the original.

The generated clusters mix every kind of pod the operator sees: gated lone pods, admitted lone
pods not placed yet (opted in or not), lone pods running on nodes, gang members, pods with a
foreign gate, pods in non-leaf queues, pods with GPU requests, and now and then an
unschedulable one (then nothing may be folded, since reclaim picks individual victims).
"""

from __future__ import annotations

import dataclasses
from types import MappingProxyType
from typing import Any, NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from queuetree.core import compaction, configs, decisions, objects, resources, sessions
from tests import builders as b
from tests import properties

GATE = objects.QUEUE_ALLOCATION_GATE
OPT_IN = MappingProxyType({GATE: "true"})
NO_ANNOTATIONS: MappingProxyType[str, str] = MappingProxyType({})
KINDS = ("gated", "reserved", "ungated", "running", "gang", "foreign-gate", "completed")


def _lone(pod: objects.Pod, queue: str, phase: objects.PodGroupPhase) -> objects.PodGroup:
    # As the operator builds a lone pod's group, with the phase the case needs.
    group = objects.pod_group_for_lone_pod(pod, default_queue=queue)
    return dataclasses.replace(group, phase=phase)


@st.composite
def snapshots(draw: st.DrawFn) -> objects.Snapshot:
    queues: dict[str, objects.Queue] = {"root": objects.Queue(name="root")}
    names: list[str] = []
    for i in range(draw(st.integers(min_value=1, max_value=6))):
        name = f"q{i}"
        parent = draw(st.sampled_from(["root", *names]))
        capability = draw(
            st.one_of(
                st.none(),
                st.builds(
                    lambda cpu, gpu, pods: b.res(
                        cpu=cpu,
                        **({"nvidia.com/gpu": gpu} if gpu else {}),
                        **({"pods": pods} if pods is not None else {}),
                    ),
                    st.integers(min_value=0, max_value=12),
                    st.integers(min_value=0, max_value=4),
                    st.one_of(st.none(), st.none(), st.integers(min_value=0, max_value=12)),
                ),
            )
        )
        deserved = b.res(cpu=draw(st.integers(min_value=0, max_value=8)))
        queues[name] = objects.Queue(
            name=name,
            parent=parent,
            capability=capability,
            deserved=deserved,
            guarantee=b.res(
                cpu=draw(st.integers(min_value=0, max_value=2)),
                pods=draw(st.integers(min_value=0, max_value=2)),
            ),
            state=draw(st.sampled_from(list(objects.QueueState))),
        )
        names.append(name)
    nodes = {
        f"n{i}": b.node(f"n{i}").allocatable(cpu="16", memory="64Gi", pods="110").build()
        for i in range(draw(st.integers(min_value=1, max_value=3)))
    }
    pods: dict[str, objects.Pod] = {}
    groups: dict[str, objects.PodGroup] = {}
    unschedulable = draw(st.integers(min_value=0, max_value=9)) == 0
    for p in range(draw(st.integers(min_value=0, max_value=40))):
        kind = draw(st.sampled_from(KINDS))
        queue = draw(st.sampled_from(names))
        cpu = draw(st.integers(min_value=0, max_value=3))
        gpu = draw(st.integers(min_value=0, max_value=1))
        request = b.res(
            cpu=cpu,
            memory=f"{draw(st.integers(0, 3))}Gi",
            **({"nvidia.com/gpu": gpu} if gpu else {}),
        )
        node = draw(st.sampled_from(sorted(nodes)))
        opted_in = draw(st.booleans())
        pod = objects.Pod(
            namespace="ns",
            name=f"p{p}",
            group=f"ns/p{p}",
            resreq=request,
            annotations=OPT_IN if opted_in or kind == "gated" else NO_ANNOTATIONS,
            created=b.at(p),
            uid=f"uid-{p}",
        )
        phase = objects.PodGroupPhase.PENDING
        if kind == "gated":
            pod = dataclasses.replace(pod, scheduling_gates=(GATE,))
        elif kind == "foreign-gate":
            pod = dataclasses.replace(pod, scheduling_gates=(GATE, "example.com/other"))
        elif kind == "reserved":
            phase = objects.PodGroupPhase.INQUEUE
        elif kind == "ungated":
            phase = draw(st.sampled_from(list(objects.PodGroupPhase)))
        elif kind == "running":
            status = draw(st.sampled_from(sorted(objects.ALLOCATED_STATUSES)))
            pod = dataclasses.replace(pod, status=status, node_name=node)
            phase = objects.PodGroupPhase.RUNNING
        elif kind == "completed":
            pod = dataclasses.replace(pod, status=objects.TaskStatus.SUCCEEDED, node_name=node)
            phase = objects.PodGroupPhase.COMPLETED
        if kind == "gang":
            gang = f"gang{draw(st.integers(min_value=0, max_value=2))}"
            pod = dataclasses.replace(
                pod, group=f"ns/{gang}", scheduling_gates=draw(st.sampled_from([(), (GATE,)]))
            )
            groups.setdefault(
                f"ns/{gang}",
                objects.PodGroup(
                    namespace="ns",
                    name=gang,
                    queue=queue,
                    min_member=draw(st.integers(min_value=1, max_value=3)),
                    phase=objects.PodGroupPhase.INQUEUE,
                ),
            )
        else:
            groups[pod.group] = _lone(pod, queue, phase)
        if unschedulable and p == 0:
            pod = dataclasses.replace(pod, unschedulable=True)
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
}


def _session(
    snapshot: objects.Snapshot, config: configs.SchedulerConfiguration, *, compact: bool
) -> decisions.SessionResult:
    return sessions.run_session(
        snapshot, config=config, feature_gates=b.GATES_ON, admission_only=True, compact=compact
    )


@pytest.mark.parametrize("config", CONFIGS.values(), ids=CONFIGS.keys())
@settings(max_examples=properties.examples(150))
@given(snapshot=snapshots())
def test_an_admission_session_decides_the_same_over_the_compacted_snapshot(
    config: configs.SchedulerConfiguration, snapshot: objects.Snapshot
) -> None:
    assert _session(snapshot, config, compact=True) == _session(snapshot, config, compact=False)


@settings(max_examples=properties.examples(100))
@given(snapshot=snapshots())
def test_compaction_folds_only_settled_lone_pods_and_keeps_their_sums(
    snapshot: objects.Snapshot,
) -> None:
    folded = compaction.compact(snapshot).snapshot
    if any(pod.unschedulable for pod in snapshot.pods.values()):
        assert folded is snapshot
        return
    kept = {key: pod for key, pod in folded.pods.items() if pod.namespace}
    assert kept.items() <= snapshot.pods.items()
    gone = [pod for key, pod in snapshot.pods.items() if key not in kept]
    total = resources.EMPTY
    for pod in gone:
        total = total + pod.resreq
    new = resources.EMPTY
    for pod in folded.pods.values():
        if not pod.namespace:
            new = new + pod.resreq
    assert (new.milli_cpu, new.memory, dict(new.scalars or {})) == (
        total.milli_cpu,
        total.memory,
        dict(total.scalars or {}),
    )
    assert all(not pod.scheduling_gates for pod in gone)


class CasesCase(NamedTuple):
    kinds: Any
    expected: Any


CASES = {
    "two reserved pods of one queue become one": CasesCase(
        kinds=["reserved", "reserved"],
        expected={"/folded:q:Pending:reserving": (3000, "", objects.PodGroupPhase.INQUEUE)},
    ),
    "running pods of one queue on two nodes become one, on no node": CasesCase(
        kinds=["running:n1", "running:n2", "running:n1"],
        expected={"/folded:q:Running:reserving": (6000, "", objects.PodGroupPhase.RUNNING)},
    ),
    "a lone reserved pod is kept as it is": CasesCase(kinds=["reserved"], expected={}),
    "a gated pod is never folded": CasesCase(kinds=["gated", "gated"], expected={}),
}


@pytest.mark.parametrize(("kinds", "expected"), CASES.values(), ids=CASES.keys())
def test_compaction_of_small_queues(
    kinds: list[str], expected: dict[str, tuple[int, str, objects.PodGroupPhase]]
) -> None:
    pods = {}
    groups = {}
    for index, spelled in enumerate(kinds):
        kind, _, node = spelled.partition(":")
        request = b.res(cpu=index + 1)
        pod = objects.Pod(
            namespace="ns",
            name=f"p{index}",
            group=f"ns/p{index}",
            resreq=request,
            annotations=OPT_IN,
            scheduling_gates=(GATE,) if kind == "gated" else (),
            status=objects.TaskStatus.RUNNING if kind == "running" else objects.TaskStatus.PENDING,
            node_name=node,
        )
        phase = {
            "reserved": objects.PodGroupPhase.INQUEUE,
            "running": objects.PodGroupPhase.RUNNING,
        }.get(kind, objects.PodGroupPhase.PENDING)
        pods[pod.key] = pod
        groups[pod.group] = _lone(pod, "q", phase)
    snapshot = objects.Snapshot(
        queues=MappingProxyType({"root": objects.Queue(name="root"), "q": objects.Queue(name="q")}),
        pod_groups=MappingProxyType(groups),
        pods=MappingProxyType(pods),
        nodes=MappingProxyType({}),
    )
    folded = compaction.compact(snapshot).snapshot
    assert {
        key: (pod.resreq.milli_cpu, pod.node_name, folded.pod_groups[pod.group].phase)
        for key, pod in folded.pods.items()
        if not pod.namespace
    } == expected
    assert (folded is snapshot) == (not expected)
