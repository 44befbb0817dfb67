"""The rules both pod readers share (:mod:`pod_manifests`, checked, and :mod:`pod_fast_path`):
the task status of a phase, the task priority annotation, the default priority and whether a
pod may be preempted. One place, so the two readers cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from queuetree.api import readers
from queuetree.core import objects

DEFAULT_SCHEDULER: Final = objects.DEFAULT_SCHEDULER
DEFAULT_TASK_PRIORITY: Final = 1
"""Volcano's task priority when the pod sets none (spec §2.3)."""


# -- Pod ----------------------------------------------------------------------------------------


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
