"""Which pods a queue counts in admission mode: the pods governed by queuetree's admission.

Volcano's queues count only the pods its own scheduler places (kube-scheduler's pods are in no
Volcano queue). The pods queuetree places are the ones it admits through its gate, so in
admission mode (the operator, and every tool that shows or explains what it decides) a queue
counts only the pods that :attr:`objects.Pod.governed` says are governed: they carry the gate,
the admission record, or the opt-in annotation. Every other pod runs outside queue admission,
whatever queue it names: it is charged to no queue, is never a reclaim victim and never blocks
an admission; it still uses its node, so what it holds stays on that node
(:class:`objects.Occupancy` in ``Snapshot.outside``).

:func:`admission_snapshot` applies the rule to a whole snapshot (``sessions.run_session`` does
in admission mode, so ``queuetree session --admission-only`` follows it); the operator's state
applies it pod by pod as the watches deliver them (``operator.state``), with the same pieces
(:func:`holds_node`, :func:`occupancy`, :func:`group_in_admission`), and its tests compare the
two. :func:`named_queue` and :func:`outside_message` tell a person whose pod names a queue that
the pod is not in it, and how to put it there.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Iterable, Mapping
from types import MappingProxyType

from queuetree.core import objects, resources

OPT_IN_HOW = (
    f'create it again with the annotation {objects.QUEUE_ALLOCATION_GATE}: "true", or in a '
    f"namespace labelled {objects.QUEUE_ALLOCATION_GATE}=true"
)
"""How a pod gets into queue admission: at creation, which is when the gate is added."""


def holds_node(pod: objects.Pod) -> bool:
    """``pod`` holds room on a node: it has a node name and an occupying status."""
    return bool(pod.node_name) and pod.status in objects.OCCUPYING_STATUSES


def occupancy(pods: Iterable[objects.Pod]) -> objects.Occupancy:
    """What ``pods`` (outside queue admission, on one node) hold there; pods that do not hold
    a node (:func:`holds_node`) add nothing."""
    used = releasing = resources.EMPTY
    for pod in pods:
        if not holds_node(pod):
            continue
        used = used + pod.resreq
        if pod.status is objects.TaskStatus.RELEASING:
            releasing = releasing + pod.resreq
    return objects.Occupancy(used=used, releasing=releasing)


def merge_occupancy(left: objects.Occupancy, right: objects.Occupancy) -> objects.Occupancy:
    """Both together (one node's, from two sources)."""
    return objects.Occupancy(
        used=left.used + right.used, releasing=left.releasing + right.releasing
    )


def group_in_admission(group: objects.PodGroup, *, outside: int, governed: int) -> objects.PodGroup:
    """``group`` as an admission session sees it, given how many of its pods are ``outside``
    queue admission and how many are ``governed``: itself when none is outside; else with
    ``outside`` set; and when it has no governed pod, also Pending, whatever phase was written
    (a group whose pods all run outside its queue has nothing in it: enqueued, or left Inqueue
    from before, it would hold its ``minResources`` there for pods that never come). A group
    with no pod at all is left alone: its pods may be about to come (Volcano enqueues it)."""
    if not outside:
        return group
    if governed:
        return dataclasses.replace(group, outside=outside)
    return dataclasses.replace(group, outside=outside, phase=objects.PodGroupPhase.PENDING)


def admission_snapshot(snapshot: objects.Snapshot) -> objects.Snapshot:
    """``snapshot`` as admission sees it: the pods that are not governed left out, with what
    they hold on their nodes added to ``outside``, the single-pod groups of the lone ones left
    out, and every real PodGroup with such pods marked (:func:`group_in_admission`).
    ``snapshot`` itself when every pod is governed (one pass over the pods)."""
    pods = snapshot.pods
    left_out = [pod for pod in pods.values() if not pod.governed]
    if not left_out:
        return snapshot
    groups = snapshot.pod_groups
    kept = dict(pods)
    pod_groups = dict(groups)
    on_nodes: dict[str, list[objects.Pod]] = collections.defaultdict(list)
    outside_members: collections.Counter[str] = collections.Counter()
    for pod in left_out:
        del kept[pod.key]
        if holds_node(pod):
            on_nodes[pod.node_name].append(pod)
        group = groups.get(pod.group)
        if group is None:
            continue
        if group.synthetic:
            pod_groups.pop(pod.group, None)  # a lone pod's own group: nothing else is in it
        else:
            outside_members[pod.group] += 1
    if outside_members:
        governed_members = collections.Counter(
            pod.group for pod in kept.values() if pod.group in outside_members
        )
        for key, count in outside_members.items():
            pod_groups[key] = group_in_admission(
                groups[key], outside=count, governed=governed_members[key]
            )
    outside = dict(snapshot.outside)
    for node, found in on_nodes.items():
        held = occupancy(found)
        before = outside.get(node)
        outside[node] = held if before is None else merge_occupancy(before, held)
    return dataclasses.replace(
        snapshot,
        pods=MappingProxyType(kept),
        pod_groups=MappingProxyType(pod_groups),
        outside=MappingProxyType(outside),
    )


@dataclasses.dataclass(frozen=True, slots=True)
class NamedQueue:
    """The queue a pod outside queue admission names, and where the name comes from."""

    queue: str
    source: str
    """``its annotation scheduling.volcano.sh/queue-name``, ``its PodGroup ns/pg``, ..."""


def named_queue(pod: objects.Pod, pod_groups: Mapping[str, objects.PodGroup]) -> NamedQueue | None:
    """The queue ``pod`` names, as the operator and the webhook would read it: its PodGroup's
    (``pod_groups``: the real ones), else its queue-name annotation; None when it names neither
    (the rest of the cluster's pods, which name no queue and are told nothing). A pod naming a
    PodGroup that does not exist names that group's stand-in queue: its annotation's, else
    ``default``. Namespaces' annotations are not read: the webhook copies them onto the pods
    it sees, and a pod it does not see names the queue only if it says so itself."""
    annotated = pod.annotations.get(objects.QUEUE_NAME_ANNOTATION, "")
    if pod.names_group:
        group = pod_groups.get(pod.group)
        if group is not None and not group.synthetic:
            return NamedQueue(queue=group.queue, source=f"its PodGroup {pod.group}")
        return NamedQueue(
            queue=annotated or objects.DEFAULT_QUEUE,
            source=f"its PodGroup {pod.group}, which does not exist",
        )
    if annotated:
        return NamedQueue(queue=annotated, source=f"its annotation {objects.QUEUE_NAME_ANNOTATION}")
    return None


def outside_message(key: str, named: NamedQueue | None) -> str:
    """What a person is told about pod ``key``, which is not governed by queue admission and
    names the queue ``named`` (None: none): that no queue counts it, and how to queue it."""
    if named is None:
        return (
            f"pod {key} names no queue and did not opt in to queue admission: it runs outside "
            f"it, and no queue counts it; to queue it, {OPT_IN_HOW}"
        )
    return (
        f"pod {key} names queue {named.queue!r} ({named.source}) but did not opt in to queue "
        "admission: it runs outside it, and neither that queue nor any ancestor counts it; "
        f"to queue it, {OPT_IN_HOW}"
    )
