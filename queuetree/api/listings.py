"""A listed cluster: what ``kubectl get queues,podgroups,pods,nodes -A -o json`` prints, parsed.

Tools that look at a live cluster (``kubectl queuetree``, the sandbox's view) read one List and
get a :class:`Listing`: the queues, pod groups, pods and nodes as core objects, parsed exactly
as the operator's watches parse them, plus each queue's status as the operator wrote it
(:class:`statuses.QueueStatus`). A live cluster is never clean: an object that does not parse is
left out with a warning naming it, never an error, so one odd pod cannot hide the tree.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

from queuetree.api import pod_manifests, queue_manifests, readers, statuses
from queuetree.core import objects

KINDS = ("Queue", "PodGroup", "Pod", "Node", "Namespace")
"""What a listing reads; other kinds in the List are skipped."""


@dataclasses.dataclass(frozen=True, slots=True)
class Listing:
    queues: Mapping[str, objects.Queue]
    statuses: Mapping[str, statuses.QueueStatus]
    pod_groups: Mapping[str, objects.PodGroup]
    """The real PodGroups, by key."""
    pods: Mapping[str, objects.Pod]
    nodes: Mapping[str, objects.Node]
    namespaces: Mapping[str, Mapping[str, str]]
    """Namespace -> its annotations (for the webhook's opt-in and queue rules)."""
    manifests: tuple[Mapping[str, Any], ...] = ()
    """Every item read, as listed (the what-if adds its changes to these)."""
    warnings: tuple[str, ...] = ()


def items_of(document: Any) -> list[Mapping[str, Any]]:
    """The objects of a decoded ``kubectl get -o json|yaml`` output: a List's items, or the
    one object itself."""
    if isinstance(document, Mapping) and document.get("kind") == "List":
        return [item for item in document.get("items") or [] if isinstance(item, Mapping)]
    return [document] if isinstance(document, Mapping) else []


def read_listing(items: Iterable[Mapping[str, Any]]) -> Listing:
    """Parse ``items`` (Queue, PodGroup, Pod, Node and Namespace objects in any order)."""
    queues: dict[str, objects.Queue] = {}
    queue_statuses: dict[str, statuses.QueueStatus] = {}
    groups: dict[str, objects.PodGroup] = {}
    pods: dict[str, objects.Pod] = {}
    nodes: dict[str, objects.Node] = {}
    namespaces: dict[str, Mapping[str, str]] = {}
    warnings: list[str] = []
    kept: list[Mapping[str, Any]] = []
    for item in items:
        kind = item.get("kind")
        if kind not in KINDS:
            continue
        kept.append(item)
        try:
            if kind == "Queue":
                queue = queue_manifests.parse_queue(item)
                queues[queue.name] = queue
                queue_statuses[queue.name] = statuses.read_queue_status(item)
            elif kind == "PodGroup":
                group = queue_manifests.parse_pod_group(item)
                groups[group.key] = group
            elif kind == "Pod":
                pod = pod_manifests.parse_pod(item)
                pods[pod.key] = pod
            elif kind == "Node":
                node = pod_manifests.parse_node(item)
                nodes[node.name] = node
            else:
                name, _ = pod_manifests.parse_namespace_queue(item)
                meta = item.get("metadata")
                found = meta.get("annotations") if isinstance(meta, Mapping) else None
                namespaces[name] = MappingProxyType(
                    {str(k): str(v) for k, v in (found or {}).items()}
                    if isinstance(found, Mapping)
                    else {}
                )
        except readers.ManifestError as error:
            warnings.append(f"{kind} left out: {error}")
    return Listing(
        queues=MappingProxyType(dict(sorted(queues.items()))),
        statuses=MappingProxyType(queue_statuses),
        pod_groups=MappingProxyType(dict(sorted(groups.items()))),
        pods=MappingProxyType(dict(sorted(pods.items()))),
        nodes=MappingProxyType(dict(sorted(nodes.items()))),
        namespaces=MappingProxyType(namespaces),
        manifests=tuple(kept),
        warnings=tuple(warnings),
    )


def queue_of(pod: objects.Pod, listing: Listing, *, default_queue: str) -> str:
    """The queue ``pod`` is charged to, when it is governed by queue admission
    (``objects.Pod.governed``; a pod that is not is charged to none: ask that first): the one
    it was admitted to, else its PodGroup's, else the queue its (or its namespace's) queue-name
    annotation names, else ``default_queue`` — the rules of the operator and the webhook."""
    if pod.admitted_queue:
        return pod.admitted_queue
    if pod.names_group:
        group = listing.pod_groups.get(pod.group)
        if group is not None:
            return group.queue
    namespace_queue = listing.namespaces.get(pod.namespace, {}).get(
        objects.QUEUE_NAME_ANNOTATION, ""
    )
    return objects.pod_group_for_lone_pod(
        pod, namespace_queue=namespace_queue, default_queue=default_queue
    ).queue
