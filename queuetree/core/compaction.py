"""Snapshot compaction for admission sessions: settled lone pods folded into one pod per bucket.

An admission session (``sessions.run_session(..., admission_only=True)``) decides only about
pods that still carry the queue-allocation gate (and, with reclaim, pods kube-scheduler left
unschedulable). Every other pod it counts (it counts the pods governed by queue admission
only: ``governing.admission_snapshot`` leaves the others out first) matters to it only through
sums: the requests its queue (and every ancestor) has allocated, requested, holds in
``inqueue`` and keeps reserved. A cluster holds thousands of such pods and few gated ones,
so a session that walks every pod costs time in proportion to the cluster, not to the work.

:func:`compact` replaces the *settled* lone pods of each bucket (same queue, same status, same
opt-in) by one pod whose request is their sum, with a single-pod group of the same phase. A
pod is settled when it is in a single-pod group (``synthetic``, ``minMember`` 1,
``minResources`` its own request) of a leaf queue and either

- is Pending with no scheduling gate at all and its group Inqueue (admitted, not placed yet:
  kube-scheduler's to place; its request is requested, in ``inqueue`` and, when it opted in,
  reserved), or
- holds resources (Allocated, Binding, Bound, Running) on a node and its group is Running.

For such a pod every figure the session computes is a sum over pods (allocated, request,
inqueue, elastic, reserved, and how many pods are allocated and reserved, at its queue and
every ancestor: the folded pod's ``count`` is the number of pods it stands for), no action
chooses it (enqueue takes Pending groups, admission takes gated pods), and none of its own
fields reaches the result. The folded pod is on no node: the pods it stands for may be on
many, and an admission session reads no node's usage (it places nothing; reclaim, the one
action that looks at what runs on each node, runs only for unschedulable pods, and then
nothing is folded), only the nodes' allocatable, which folding leaves alone. So the
session's result over the compacted snapshot equals the result over the original one
(tests/core/test_compaction.py checks this on generated clusters with several nodes). The
exception, where nothing is compacted and the snapshot is returned as it is: any pod is
unschedulable (reclaim may then run, choose victims among individual running pods, and count
the pods on each node). Sums are exact: requests are integers.

The folded pods have the empty namespace, which no real pod has, so their keys cannot collide
with a real pod's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from types import MappingProxyType

from queuetree.core import objects, resources

_HOLDING = objects.ALLOCATED_STATUSES
_PENDING = objects.TaskStatus.PENDING
_INQUEUE = objects.PodGroupPhase.INQUEUE
_RUNNING = objects.PodGroupPhase.RUNNING

_NOTHING: Mapping[str, tuple[str, ...]] = MappingProxyType({})

Bucket = tuple[str, objects.TaskStatus, bool]
"""(queue, status, reserves: ``objects.Pod.reserves``)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Compacted:
    snapshot: objects.Snapshot
    folded: Mapping[str, tuple[str, ...]]
    """Key of each folded pod group -> the keys of the groups it replaces."""

    def restore_phases(
        self, phases: Mapping[str, objects.PodGroupPhase]
    ) -> Mapping[str, objects.PodGroupPhase]:
        """A session's pod group phases over the original snapshot: each folded group's phase
        given back to the groups it replaced (a settled group's phase is its own: nothing
        changes it). The replaced groups come after the others, not in key order: sorting
        the whole cluster's groups every cycle would cost more than the session saved."""
        if not self.folded:
            return phases
        restored = dict(phases)
        for key, members in self.folded.items():
            phase = restored.pop(key, None)
            if phase is not None:
                restored.update(dict.fromkeys(members, phase))
        return MappingProxyType(restored)


def settled_bucket(key: str, pod: objects.Pod, group: objects.PodGroup | None) -> Bucket | None:
    """The bucket of a settled lone pod (``key`` its key, ``group`` its pod group), or None
    when the pod is not settled (see the module docstring). Whether the bucket's queue is a
    leaf is the caller's check (:func:`leaves`): it depends on the whole tree."""
    if group is None or not group.synthetic or pod.group != key or pod.unschedulable:
        return None
    status = pod.status
    if status is _PENDING:
        if pod.scheduling_gates or group.phase is not _INQUEUE:
            return None
    elif status not in _HOLDING or not pod.node_name or group.phase is not _RUNNING:
        return None
    minimum = group.min_resources
    if group.min_member != 1 or (minimum is not pod.resreq and minimum != pod.resreq):
        return None
    return (group.queue, status, pod.reserves)


def leaves(queues: Mapping[str, objects.Queue]) -> frozenset[str]:
    """The queues no queue names as its parent."""
    parents = {queue.parent_name for queue in queues.values()}
    return frozenset(name for name in queues if name not in parents)


def compact(snapshot: objects.Snapshot) -> Compacted:
    """``snapshot`` with its settled lone pods folded per bucket (see the module docstring).

    The snapshot is ``snapshot`` itself, with nothing folded, when no bucket has two pods or
    when any pod is unschedulable.
    """
    leaf_queues = leaves(snapshot.queues)
    groups = snapshot.pod_groups
    buckets: dict[Bucket, list[objects.Pod]] = {}
    settled: set[str] = set()
    for key, pod in snapshot.pods.items():
        if pod.unschedulable:
            return Compacted(snapshot=snapshot, folded=_NOTHING)
        if pod.scheduling_gates:
            # Never settled (settled_bucket says so too): the common case of a session with
            # many pods to admit, kept cheap.
            continue
        bucket = settled_bucket(key, pod, groups.get(pod.group))
        if bucket is None or bucket[0] not in leaf_queues:
            continue
        settled.add(key)
        members = buckets.get(bucket)
        if members is None:
            buckets[bucket] = [pod]
        else:
            members.append(pod)
    if all(len(members) < 2 for members in buckets.values()):
        return Compacted(snapshot=snapshot, folded=_NOTHING)
    # The pods in no bucket, in snapshot order; then each bucket's (one, or its folded pod).
    pods = {key: pod for key, pod in snapshot.pods.items() if key not in settled}
    pod_groups = dict(groups)
    folded_groups: dict[str, tuple[str, ...]] = {}
    for bucket in sorted(buckets):
        members = buckets[bucket]
        if len(members) == 1:
            pods[members[0].key] = members[0]
            continue
        for member in members:
            del pod_groups[member.group]
        folded, folded_group = fold(bucket, members)
        pods[folded.key] = folded
        pod_groups[folded_group.key] = folded_group
        folded_groups[folded_group.key] = tuple(member.group for member in members)
    compacted = dataclasses.replace(
        snapshot, pod_groups=MappingProxyType(pod_groups), pods=MappingProxyType(pods)
    )
    return Compacted(snapshot=compacted, folded=MappingProxyType(folded_groups))


def fold(bucket: Bucket, members: Iterable[objects.Pod]) -> tuple[objects.Pod, objects.PodGroup]:
    """One pod whose request is the sum of ``members``' (all of ``bucket``), and its single-pod
    group, in the phase the members' groups have (Inqueue when Pending, else Running), on no
    node (see the module docstring)."""
    queue, status, reserves = bucket
    phase = _INQUEUE if status is _PENDING else _RUNNING
    # Summed as Resource.__add__ does (scalars stay None until a member has one), without
    # building a Resource per member: this runs once per settled pod of the cluster.
    cpu: resources.Amount = 0
    memory: resources.Amount = 0
    scalars: dict[str, resources.Amount] | None = None
    count = 0
    for member in members:
        count += member.count
        request = member.resreq
        cpu += request.milli_cpu
        memory += request.memory
        if request.scalars:
            if scalars is None:
                scalars = {}
            for name, value in request.scalars.items():
                scalars[name] = scalars.get(name, 0) + value
    total = resources.Resource._trusted(cpu, memory, scalars)
    name = f"folded:{queue}:{status}:{'reserving' if reserves else 'not-reserving'}"
    # The opt-in annotation is what makes the folded pod reserve as its members do.
    annotations: Mapping[str, str] = (
        MappingProxyType({objects.QUEUE_ALLOCATION_GATE: "true"})
        if reserves
        else MappingProxyType({})
    )
    pod = objects.Pod(
        namespace="",
        name=name,
        group=f"/{name}",
        status=status,
        resreq=total,
        annotations=annotations,
        count=count,
    )
    group = objects.PodGroup(
        namespace="",
        name=name,
        queue=queue,
        min_member=1,
        min_resources=total,
        phase=phase,
        synthetic=True,
    )
    return pod, group
