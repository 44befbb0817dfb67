"""The rules both pod readers share (:mod:`pod_manifests`, checked, and :mod:`pod_fast_path`):
the pod's request from its containers' requests, the task status of a phase, the task
priority annotation, the default priority and whether a pod may be preempted. One place, so
the two readers cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from queuetree.api import readers
from queuetree.core import objects, resources

DEFAULT_SCHEDULER: Final = objects.DEFAULT_SCHEDULER
DEFAULT_TASK_PRIORITY: Final = 1
"""Volcano's task priority when the pod sets none (spec §2.3)."""


# -- Pod ----------------------------------------------------------------------------------------

WITH_SCALARS: Final = resources.Resource(milli_cpu=0, memory=0, scalars={})
"""Zero with an (empty) scalar mapping: a pod's request always has one, as Volcano's
``GetPodResourceRequest`` gives (``resources.Resource`` tells an empty mapping from none)."""


def pod_request(
    containers: Iterable[resources.Resource],
    init_containers: Iterable[tuple[resources.Resource, bool]],
    *,
    overhead: resources.Resource | None,
) -> resources.Resource:
    """The pod's request as Kubernetes computes it (``PodRequests`` of
    k8s.io/component-helpers/resource): what kube-scheduler reserves for the pod on its node,
    and ResourceQuota charges, for the pod's whole life.

    ``containers``: each container's request; ``init_containers``: each init container's
    request, and whether it is a sidecar (``restartPolicy: Always``: it keeps running beside
    the containers); ``overhead``: ``spec.overhead`` (None when absent). The request is the
    larger, per dimension, of the containers plus every sidecar, and of each regular init
    container plus the sidecars started before it (it runs alone, before the containers),
    plus the overhead. An init container that asks for more than the containers therefore
    raises the pod's request, even after it has finished: kube-scheduler keeps the node's
    room for it.
    """
    total = WITH_SCALARS
    for request in containers:
        total = total + request
    sidecars = resources.EMPTY
    init_peak = resources.EMPTY
    for request, sidecar in init_containers:
        if sidecar:
            sidecars = sidecars + request
        else:
            init_peak = init_peak.set_max_resource(request + sidecars)
    total = (total + sidecars).set_max_resource(init_peak)
    return total if overhead is None else total + overhead


def task_status(phase: str, *, deleting: bool, node_name: str) -> objects.TaskStatus:
    """Volcano's ``getTaskStatus``: the scheduler's view of a pod.

    Running → Releasing when it is being deleted, else Running; Pending → Releasing when being
    deleted, Bound when it has a node, else Pending; Succeeded; Failed; anything else Unknown.
    """
    if phase == "Running":
        return objects.TaskStatus.RELEASING if deleting else objects.TaskStatus.RUNNING
    if phase == "Pending":
        if deleting:
            return objects.TaskStatus.RELEASING
        return objects.TaskStatus.BOUND if node_name else objects.TaskStatus.PENDING
    if phase == "Succeeded":
        return objects.TaskStatus.SUCCEEDED
    if phase == "Failed":
        return objects.TaskStatus.FAILED
    return objects.TaskStatus.UNKNOWN


def task_priority(annotation: str) -> int | None:
    """The ``volcano.sh/task-priority`` annotation's value; None when not a 32-bit integer."""
    try:
        value = int(annotation, 10)
    except ValueError:
        return None
    return value if -(2**31) <= value < 2**31 else None


def default_priority(priority_classes: Mapping[str, objects.PriorityClass] | None) -> int:
    """The lowest-valued global default PriorityClass's value, else 1."""
    if not priority_classes:
        return DEFAULT_TASK_PRIORITY
    defaults = [pc for pc in (priority_classes or {}).values() if pc.global_default]
    if defaults:
        return min(defaults, key=lambda pc: (pc.value, pc.name)).value
    return DEFAULT_TASK_PRIORITY


def preemptable(annotations: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    """``volcano.sh/preemptable`` from the annotation, else the label; absent → True;
    a value that is not a Go boolean → False (Volcano's ``GetPodPreemptable``)."""
    for source in (annotations, labels):
        text = source.get(objects.PREEMPTABLE_KEY)
        if text is not None:
            return readers.parse_bool(text) is True
    return True
