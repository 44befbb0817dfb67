"""The rules both pod readers share (:mod:`pod_manifests`, checked, and :mod:`pod_fast_path`):
the pod's request from its containers' requests, the task status of a phase, the task
priority annotation, the default priority and whether a pod may be preempted. One place, so
the two readers cannot drift apart.
"""

from __future__ import annotations

import dataclasses
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


OVERCOMMITTABLE_POD_LEVEL: Final = frozenset({resources.CPU, resources.MEMORY})
"""The pod-level resources whose pod-level request the API server defaults from the
containers' aggregate (``IsOvercommitAllowed``: not hugepages)."""


def is_pod_level_resource(name: str) -> bool:
    """Kubernetes' ``IsSupportedPodLevelResource``: ``cpu``, ``memory`` and ``hugepages-*``
    may be stated for the whole pod (``spec.resources``); the API server refuses any other."""
    return name in OVERCOMMITTABLE_POD_LEVEL or name.startswith("hugepages-")


@dataclasses.dataclass(frozen=True, slots=True)
class PodLevel:
    """A pod's ``spec.resources`` (PodLevelResources, beta and on by default since Kubernetes
    1.34), read: the pod-level resources only (:func:`is_pod_level_resource`)."""

    requests: resources.Resource
    """``spec.resources.requests``, in the units of ``resources``."""
    requested: frozenset[str]
    """The names ``spec.resources.requests`` states."""
    limits: resources.Resource
    """``spec.resources.limits``."""
    limited: frozenset[str]
    """The names ``spec.resources.limits`` states."""
    stated: frozenset[str]
    """The names some container or init container requests or limits (even at 0): those
    whose pod-level request the API server defaults from the containers."""


def pod_request(
    containers: Iterable[resources.Resource],
    init_containers: Iterable[tuple[resources.Resource, bool]],
    *,
    overhead: resources.Resource | None,
    pod_level: PodLevel | None = None,
) -> resources.Resource:
    """The pod's request as Kubernetes computes it (``PodRequests`` of
    k8s.io/component-helpers/resource): what kube-scheduler reserves for the pod on its node,
    and ResourceQuota charges, for the pod's whole life.

    ``containers``: each container's request; ``init_containers``: each init container's
    request, and whether it is a sidecar (``restartPolicy: Always``: it keeps running beside
    the containers); ``overhead``: ``spec.overhead`` (None when absent); ``pod_level``:
    ``spec.resources`` (None when absent).

    The containers' aggregate is the larger, per dimension, of the containers plus every
    sidecar, and of each regular init container plus the sidecars started before it (it runs
    alone, before the containers): an init container that asks for more than the containers
    raises the pod's request, even after it has finished, since kube-scheduler keeps the
    node's room for it. A pod-level request replaces the aggregate on its resource, as
    kube-scheduler reads it; a pod-level limit without a pod-level request is the request
    where the API server defaults it so (:func:`_pod_level_request`). Then the overhead is
    added.
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
    if pod_level is not None:
        total = _with_pod_level(total, pod_level)
    return total if overhead is None else total + overhead


def _with_pod_level(aggregate: resources.Resource, pod_level: PodLevel) -> resources.Resource:
    """``aggregate`` with each pod-level request in place of the containers' (Kubernetes'
    ``applyPodLevelResources``)."""
    cpu, memory = aggregate.milli_cpu, aggregate.memory
    scalars = dict(aggregate.scalars or {})
    for name in sorted(pod_level.requested | pod_level.limited):
        value = _pod_level_request(name, pod_level)
        if value is None:
            continue
        if name == resources.CPU:
            cpu = value
        elif name == resources.MEMORY:
            memory = value
        else:
            scalars[name] = value
    return resources.Resource(milli_cpu=cpu, memory=memory, scalars=scalars)


def _pod_level_request(name: str, pod_level: PodLevel) -> resources.Amount | None:
    """The pod-level request of ``name`` after the API server's defaulting (1.37:
    ``DefaultPodLevelResources`` at creation; earlier releases in ``SetDefaults_Pod``), None
    where the containers' aggregate stands.

    Stated: that value. Not stated, with a pod-level limit: the containers' aggregate for
    ``cpu`` or ``memory`` that some container states (the API server copies it, which changes
    nothing), else the limit (the request of a pod whose containers say nothing is its limit,
    as for a container; hugepages are never copied from the containers).
    """
    if name in pod_level.requested:
        return pod_level.requests.get(name)
    if name in OVERCOMMITTABLE_POD_LEVEL and name in pod_level.stated:
        return None
    return pod_level.limits.get(name)


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
