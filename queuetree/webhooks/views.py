"""What the review functions know about the cluster: a plain, immutable view.

The server's watch-backed caches (``caching``) and ``queuetree review``'s ``--queues`` file both
produce a :class:`ClusterView`; the review functions read nothing else, so tests need no server.

- queues: the queue tree (``queue_trees.QueueTree``), from Queue objects, status included;
- namespaces: each namespace's annotations (the queue-name default) and its opt-in label;
- pod groups: ``namespace/name`` -> ``spec.queue``, to find the queue of a pod in a group, and
  whether the group's gang has started (:class:`GangStart`), to decide whether a new pod of it
  joins its native PodGroup;
- node resources: the scalar resources nodes offer (for the root-capability warning).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

from queuetree.api import bodies, queue_manifests
from queuetree.core import errors, objects, quantities, queue_trees, resources

STARTED_PHASES = frozenset({"Running", "Completed"})
"""PodGroup phases in which at least ``minMember`` of the group's pods were placed."""


@dataclasses.dataclass(frozen=True, slots=True)
class GangStart:
    """What ``/pods/mutate`` needs of a Volcano PodGroup to decide whether a new pod of it
    names its native PodGroup (``pods.joins_native_group``)."""

    min_member: int
    started: bool
    """``status.phase`` is Running or Completed: the gang was placed; pods created since are
    beyond its minimum, and are placed one by one."""


@dataclasses.dataclass(frozen=True, slots=True)
class ClusterView:
    tree: queue_trees.QueueTree = queue_trees.EMPTY_TREE
    namespaces: Mapping[str, Mapping[str, str]] = dataclasses.field(default_factory=dict)
    """Namespace name -> its annotations (absent namespaces have none), the opt-in key holding
    the value of the namespace's opt-in *label* (:func:`namespace_annotations`)."""
    pod_groups: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """PodGroup ``namespace/name`` -> the queue it names, ``""`` when it names none (the
    review, which knows ``--default-queue``, decides what that means)."""
    node_resources: frozenset[str] = frozenset()
    """Scalar resources some node offers (``nvidia.com/gpu``, ``ephemeral-storage``...)."""
    gang_starts: Mapping[str, GangStart] = dataclasses.field(default_factory=dict)
    """PodGroup ``namespace/name`` -> its minimum and whether its gang has started."""

    @classmethod
    def of(
        cls,
        *,
        queues: Iterable[objects.Queue] = (),
        namespaces: Mapping[str, Mapping[str, str]] | None = None,
        pod_groups: Mapping[str, str] | None = None,
        node_resources: Iterable[str] = (),
        gang_starts: Mapping[str, GangStart] | None = None,
    ) -> ClusterView:
        return cls(
            tree=queue_trees.QueueTree.of(queues),
            namespaces=MappingProxyType(dict(namespaces or {})),
            pod_groups=MappingProxyType(dict(pod_groups or {})),
            node_resources=frozenset(node_resources),
            gang_starts=MappingProxyType(dict(gang_starts or {})),
        )

    def namespace_annotations(self, namespace: str) -> Mapping[str, str]:
        return self.namespaces.get(namespace, objects.NO_LABELS)


def queue_from_manifest(manifest: Mapping[str, Any], *, name: str = "") -> objects.Queue | None:
    """A stored Queue as a core object, or None when it has no name (``name`` stands in for a
    missing ``metadata.name``: an admission request names its object)."""
    return queue_from_reading(queue_manifests.read_queue(manifest, name=name))


def queue_from_reading(reading: queue_manifests.QueueReading) -> objects.Queue | None:
    """The queue of a reading as the tree counts it, or None when it has no name.

    Stored queues are read tolerantly: one that ``queue_manifests.parse_queue`` refuses (written
    before the webhook ran, or with a quantity the scheduler drops) still counts in the tree with
    its name, parent, state and annotations (and no quota), because leaving it out would hide
    children and siblings from every rule.
    """
    queue = reading.queue
    if not queue.name:
        return None
    if not reading.problems and not queue_manifests.unusable_queue_problems(queue):
        return queue
    return objects.Queue(
        name=queue.name, parent=queue.parent, state=queue.state, annotations=queue.annotations
    )


def namespace_annotations(manifest: Mapping[str, Any]) -> tuple[str, Mapping[str, str]] | None:
    """``(name, annotations)`` of a Namespace manifest, or None without a name.

    The opt-in key (``scheduling.volcano.sh/queue-allocation-gate``) is the namespace's
    *label*, whatever its annotations say: the webhook configurations send the pods of a
    namespace to the webhook by a ``namespaceSelector`` on that label, and a CEL
    ``matchCondition`` cannot see namespaces, so on a cluster an annotation alone never brings
    a pod here. Honouring it would gate pods only where every pod reaches the webhook (kubesim,
    a configuration without matchConditions): the view takes the label, and the namespace
    webhook (``namespaces.validate``) warns whoever writes the annotation.
    """
    metadata = bodies.metadata_of(manifest)
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        return None
    annotations = {
        k: v
        for k, v in _mapping(metadata.get("annotations")).items()
        if isinstance(v, str) and k != objects.QUEUE_ALLOCATION_GATE
    }
    label = _mapping(metadata.get("labels")).get(objects.QUEUE_ALLOCATION_GATE)
    if isinstance(label, str):
        annotations[objects.QUEUE_ALLOCATION_GATE] = label
    return name, MappingProxyType(annotations)


def pod_group_queue(manifest: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(namespace/name, queue)`` of a PodGroup manifest, or None without a name.

    The queue is ``""`` when ``spec.queue`` is absent, empty or not a string: the view records
    what the object says, and the review resolves ``""`` to the configured default queue (the
    same rule as ``queue_manifests.parse_pod_group`` in the operator). With the shipped CRD the API
    server has already written ``spec.queue: default`` into a PodGroup created without one.
    """
    metadata = bodies.metadata_of(manifest)
    name, namespace = metadata.get("name"), metadata.get("namespace") or "default"
    if not isinstance(name, str) or not name or not isinstance(namespace, str):
        return None
    return f"{namespace}/{name}", queue_manifests.named_queue(manifest)


def gang_start(manifest: Mapping[str, Any]) -> tuple[str, GangStart] | None:
    """``(namespace/name, GangStart)`` of a PodGroup manifest, or None without a name.
    ``spec.minMember`` that is not a whole number reads as 1 (no gang to place whole)."""
    found = pod_group_queue(manifest)
    if found is None:
        return None
    count = bodies.spec_of(manifest).get("minMember")
    phase = bodies.status_of(manifest).get("phase")
    return found[0], GangStart(
        min_member=count if isinstance(count, int) and not isinstance(count, bool) else 1,
        started=phase in STARTED_PHASES,
    )


def node_resource_names(manifest: Mapping[str, Any]) -> tuple[str, frozenset[str]] | None:
    """``(name, scalar resources)`` of a Node manifest: the scalar names (extended resources,
    ``hugepages-*``, ``ephemeral-storage``...) its ``status.allocatable`` (else ``capacity``)
    offers in a non-zero amount. None without a name. Unparsable amounts are skipped."""
    name = bodies.metadata_of(manifest).get("name")
    if not isinstance(name, str) or not name:
        return None
    status = bodies.status_of(manifest)
    offered = _mapping(status.get("allocatable")) or _mapping(status.get("capacity"))
    names = set()
    for resource, amount in offered.items():
        if not (resource == "ephemeral-storage" or resources.is_scalar_resource_name(resource)):
            continue
        try:
            if quantities.parse(str(amount)).value > 0:
                names.add(resource)
        except errors.QuantityError:
            continue
    return name, frozenset(names)


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else MappingProxyType({})
