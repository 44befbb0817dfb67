"""Fluent builders for core objects (STYLE rule 10): tests never spell records out by hand.

Quantities are Kubernetes strings or numbers, parsed by ``resources.Resource.from_resource_list``
exactly as manifests are (``rdma`` without a domain is dropped, ``rdma/hca`` is kept)::

    queue("team-a").parent("org").deserved(cpu="2", memory="2Gi").capability(cpu="4").build()
    pod("ns1", "p1").requests(cpu="1", memory="1Gi").group("ns1/pg1").running_on("n1").build()
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterable
from types import MappingProxyType
from typing import Any

from queuetree.core import conditions, configs, objects, resources

GPU = "nvidia.com/gpu"
A100 = "nvidia.com/a100"
HCA = "rdma/hca"


def res(**quantities: str | int) -> resources.Resource:
    """``res(cpu="2", memory="2Gi", **{"nvidia.com/gpu": 1})``; no arguments: an empty vector."""
    if not quantities:
        return resources.EMPTY
    return resources.Resource.from_resource_list(dict(quantities))


def _scalar_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    # Keyword names cannot hold "/" or ".": a100="1" means nvidia.com/a100, hca means rdma/hca.
    aliases = {"gpu": GPU, "a100": A100, "hca": HCA}
    return {aliases.get(k, k): v for k, v in kwargs.items()}


def at(seconds: int) -> datetime.datetime:
    """A creation time ``seconds`` after a fixed instant."""
    return datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC) + datetime.timedelta(seconds=seconds)


class QueueBuilder:
    def __init__(self, name: str) -> None:
        self._queue = objects.Queue(name=name)

    def parent(self, parent: str) -> QueueBuilder:
        self._queue = dataclasses.replace(self._queue, parent=parent)
        return self

    def deserved(self, **quantities: str | int) -> QueueBuilder:
        self._queue = dataclasses.replace(self._queue, deserved=res(**_scalar_kwargs(quantities)))
        return self

    def capability(self, **quantities: str | int) -> QueueBuilder:
        self._queue = dataclasses.replace(
            self._queue, capability=res(**_scalar_kwargs(quantities)) if quantities else None
        )
        return self

    def guarantee(self, **quantities: str | int) -> QueueBuilder:
        self._queue = dataclasses.replace(self._queue, guarantee=res(**_scalar_kwargs(quantities)))
        return self

    def state(self, state: objects.QueueState) -> QueueBuilder:
        self._queue = dataclasses.replace(self._queue, state=state)
        return self

    def priority(self, priority: int) -> QueueBuilder:
        self._queue = dataclasses.replace(self._queue, priority=priority)
        return self

    def reclaimable(self, value: bool) -> QueueBuilder:
        self._queue = dataclasses.replace(self._queue, reclaimable=value)
        return self

    def created(self, seconds: int) -> QueueBuilder:
        self._queue = dataclasses.replace(self._queue, created=at(seconds))
        return self

    def deleting(self) -> QueueBuilder:
        """Deleted, held by a finalizer (``metadata.deletionTimestamp`` set)."""
        self._queue = dataclasses.replace(self._queue, deleting=True)
        return self

    def build(self) -> objects.Queue:
        return self._queue


def queue(name: str) -> QueueBuilder:
    return QueueBuilder(name)


class PodGroupBuilder:
    def __init__(self, namespace: str, name: str) -> None:
        self._group = objects.PodGroup(namespace=namespace, name=name, uid=f"{namespace}-{name}")

    def queue(self, name: str) -> PodGroupBuilder:
        self._group = dataclasses.replace(self._group, queue=name)
        return self

    def min_member(self, count: int) -> PodGroupBuilder:
        self._group = dataclasses.replace(self._group, min_member=count)
        return self

    def min_resources(self, **quantities: str | int) -> PodGroupBuilder:
        self._group = dataclasses.replace(
            self._group, min_resources=res(**_scalar_kwargs(quantities))
        )
        return self

    def phase(self, phase: objects.PodGroupPhase) -> PodGroupBuilder:
        self._group = dataclasses.replace(self._group, phase=phase)
        return self

    def priority_class(self, name: str) -> PodGroupBuilder:
        self._group = dataclasses.replace(self._group, priority_class_name=name)
        return self

    def created(self, seconds: int) -> PodGroupBuilder:
        self._group = dataclasses.replace(self._group, created=at(seconds))
        return self

    def admitted_at(self, seconds: int) -> PodGroupBuilder:
        """Inqueue since ``at(seconds)``, as the operator records it (the admission condition
        False, reason Inqueue)."""
        return self.phase(objects.PodGroupPhase.INQUEUE).condition(
            unschedulable=False, reason=conditions.GroupReason.INQUEUE, seconds=seconds
        )

    def released_at(self, seconds: int) -> PodGroupBuilder:
        """Pending since its release for lack of pods at ``at(seconds)``, as recorded."""
        return self.phase(objects.PodGroupPhase.PENDING).condition(
            unschedulable=True, reason=conditions.GroupReason.INQUEUE_TIMEOUT, seconds=seconds
        )

    def condition(
        self, *, unschedulable: bool, reason: str, seconds: int, message: str = ""
    ) -> PodGroupBuilder:
        """The admission condition (``conditions.GROUP_CONDITION``) as written."""
        written = objects.Condition(
            type=conditions.GROUP_CONDITION,
            status="True" if unschedulable else "False",
            reason=str(reason),
            message=message,
            last_transition=at(seconds),
        )
        kept = tuple(c for c in self._group.conditions if c.type != written.type)
        self._group = dataclasses.replace(self._group, conditions=(*kept, written))
        return self

    def build(self) -> objects.PodGroup:
        return self._group


def pod_group(namespace: str, name: str) -> PodGroupBuilder:
    return PodGroupBuilder(namespace, name)


class PodBuilder:
    def __init__(self, namespace: str, name: str) -> None:
        self._pod = objects.Pod(
            namespace=namespace, name=name, group=f"{namespace}/{name}", uid=f"{namespace}-{name}"
        )

    def group(self, name: str) -> PodBuilder:
        """The pod group's name in the pod's namespace (or a full ``namespace/name`` key), and
        the group-name annotation that names it, as on a real pod."""
        key = name if "/" in name else f"{self._pod.namespace}/{name}"
        annotations = {**self._pod.annotations, objects.GROUP_NAME_ANNOTATION: key.split("/")[1]}
        self._pod = dataclasses.replace(
            self._pod, group=key, annotations=MappingProxyType(annotations)
        )
        return self

    def admitted_to(self, queue: str) -> PodBuilder:
        """The operator's admission record: the pod was ungated into ``queue``."""
        annotations = {**self._pod.annotations, objects.ADMITTED_QUEUE_ANNOTATION: queue}
        self._pod = dataclasses.replace(self._pod, annotations=MappingProxyType(annotations))
        return self

    def annotate(self, **annotations: str) -> PodBuilder:
        merged = {**self._pod.annotations, **annotations}
        self._pod = dataclasses.replace(self._pod, annotations=MappingProxyType(merged))
        return self

    def native(self, group: str) -> PodBuilder:
        """``spec.schedulingGroup.podGroupName``: the pod names a native PodGroup."""
        self._pod = dataclasses.replace(self._pod, native_group=group)
        return self

    def scheduler(self, name: str) -> PodBuilder:
        self._pod = dataclasses.replace(self._pod, scheduler_name=name)
        return self

    def requests(self, **quantities: str | int) -> PodBuilder:
        resource = res(**_scalar_kwargs(quantities))
        self._pod = dataclasses.replace(self._pod, resreq=resource)
        return self

    def running_on(self, node: str) -> PodBuilder:
        self._pod = dataclasses.replace(
            self._pod, node_name=node, status=objects.TaskStatus.RUNNING
        )
        return self

    def status(self, status: objects.TaskStatus) -> PodBuilder:
        self._pod = dataclasses.replace(self._pod, status=status)
        return self

    def priority(self, value: int) -> PodBuilder:
        self._pod = dataclasses.replace(self._pod, priority=value)
        return self

    def not_preemptable(self) -> PodBuilder:
        self._pod = dataclasses.replace(self._pod, preemptable=False)
        return self

    def gated(self, *gates: str) -> PodBuilder:
        """Scheduling gates; no argument means only the queue-allocation gate."""
        self._pod = dataclasses.replace(
            self._pod, scheduling_gates=gates or (objects.QUEUE_ALLOCATION_GATE,)
        )
        return self

    def opted_in(self) -> PodBuilder:
        annotations = {**self._pod.annotations, objects.QUEUE_ALLOCATION_GATE: "true"}
        self._pod = dataclasses.replace(self._pod, annotations=MappingProxyType(annotations))
        return self

    def admission(self) -> PodBuilder:
        """An opted-in pod still behind the queue-allocation gate (what the webhook makes)."""
        return self.opted_in().gated()

    def node_selector(self, **labels: str) -> PodBuilder:
        self._pod = dataclasses.replace(self._pod, node_selector=MappingProxyType(labels))
        return self

    def tolerations(self, *tolerations: objects.Toleration) -> PodBuilder:
        self._pod = dataclasses.replace(self._pod, tolerations=tolerations)
        return self

    def affinity(self, *terms: objects.NodeSelectorTerm) -> PodBuilder:
        self._pod = dataclasses.replace(self._pod, required_node_affinity=terms)
        return self

    def unschedulable(self) -> PodBuilder:
        self._pod = dataclasses.replace(self._pod, unschedulable=True)
        return self

    def created(self, seconds: int) -> PodBuilder:
        self._pod = dataclasses.replace(self._pod, created=at(seconds))
        return self

    def build(self) -> objects.Pod:
        return self._pod


def pod(namespace: str, name: str) -> PodBuilder:
    return PodBuilder(namespace, name)


class NodeBuilder:
    def __init__(self, name: str) -> None:
        self._node = objects.Node(name=name)

    def allocatable(self, **quantities: str | int) -> NodeBuilder:
        self._node = dataclasses.replace(self._node, allocatable=res(**_scalar_kwargs(quantities)))
        return self

    def labels(self, **labels: str) -> NodeBuilder:
        self._node = dataclasses.replace(self._node, labels=MappingProxyType(labels))
        return self

    def taints(self, *taints: objects.Taint) -> NodeBuilder:
        self._node = dataclasses.replace(self._node, taints=taints)
        return self

    def unschedulable(self) -> NodeBuilder:
        self._node = dataclasses.replace(self._node, unschedulable=True)
        return self

    def build(self) -> objects.Node:
        return self._node


def node(name: str) -> NodeBuilder:
    return NodeBuilder(name)


Buildable = objects.Queue | objects.PodGroup | objects.Pod | objects.Node | objects.PriorityClass


def snapshot(
    *items: Buildable | QueueBuilder | PodGroupBuilder | PodBuilder | NodeBuilder,
) -> objects.Snapshot:
    """A snapshot of the given objects (builders are built)."""
    built = [i.build() if not isinstance(i, Buildable) else i for i in items]
    return objects.Snapshot(
        queues=MappingProxyType({q.name: q for q in built if isinstance(q, objects.Queue)}),
        pod_groups=MappingProxyType({g.key: g for g in built if isinstance(g, objects.PodGroup)}),
        pods=MappingProxyType({p.key: p for p in built if isinstance(p, objects.Pod)}),
        nodes=MappingProxyType({n.name: n for n in built if isinstance(n, objects.Node)}),
        priority_classes=MappingProxyType(
            {c.name: c for c in built if isinstance(c, objects.PriorityClass)}
        ),
    )


def plugin(
    name: str,
    *only: str,
    hierarchy: bool = False,
    arguments: dict[str, object] | None = None,
) -> configs.PluginOption:
    """A plugin option. With flag names in ``only``, exactly those flags are on and every other
    known flag is off (as Volcano's unit tests build their tiers); without, all flags are on."""
    flags: dict[str, bool] = {}
    if only:
        flags = {flag: flag in only for flag in configs.KNOWN_FLAGS}
    flags["enableHierarchy"] = hierarchy
    return configs.PluginOption(
        name=name, flags=MappingProxyType(flags), arguments=MappingProxyType(arguments or {})
    )


def config(
    *tiers: Iterable[configs.PluginOption], actions: tuple[str, ...] = ("enqueue", "allocate")
) -> configs.SchedulerConfiguration:
    return configs.SchedulerConfiguration(
        actions=actions, tiers=tuple(configs.Tier(plugins=tuple(t)) for t in tiers)
    )


GATES_ON = MappingProxyType({objects.FEATURE_SCHEDULING_GATES_QUEUE_ADMISSION: True})
GATES_OFF = MappingProxyType({objects.FEATURE_SCHEDULING_GATES_QUEUE_ADMISSION: False})
