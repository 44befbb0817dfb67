"""The one small interface of a workload kind, and the fallback for kinds nobody described.

A *workload* is the controller that owns a pod (its ``ownerReferences`` entry with
``controller: true``): a Job, a ReplicaSet (a Deployment's), a StatefulSet, or any other. Its
opted-in pods that name no PodGroup go through their queue as one PodGroup that the operator
creates for it (``queuetree.api.workloads``). What differs from kind to kind is only where the
owner keeps the annotations that size the group; everything else (the group's name, its
queue, its minimum, its resources) is the same for every kind. A kind is one module with one
:class:`WorkloadKind` (its ``KIND``), listed once in ``workloads.registry``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from queuetree.api import bodies


@dataclasses.dataclass(frozen=True, slots=True)
class WorkloadKind:
    """How queuetree reads one kind of pod owner.

    ``plural`` is the resource the operator GETs the owner from (its ClusterRole grants
    ``get`` on exactly the registered kinds); None for a kind it does not read (the fallback:
    the pod's own annotations are all it has, as its template's are the pod's)."""

    api_version: str
    """``group/version`` as an ownerReference names it (``batch/v1``)."""
    kind: str
    plural: str | None
    template: tuple[str, ...] = ("spec", "template")
    """Where the owner keeps the pod template (whose annotations every pod carries)."""

    def annotations(self, owner: Mapping[str, Any] | None) -> Mapping[str, str]:
        """The owner's annotations, then its pod template's for keys it does not set (a
        template's annotations are on the pod too, so the owner's own come first)."""
        if owner is None:
            return {}
        found = _strings(bodies.annotations_of(owner))
        template: object = owner
        for step in self.template:
            template = template.get(step) if isinstance(template, Mapping) else None
        for key, value in _strings(bodies.annotations_of(template)).items():
            found.setdefault(key, value)
        return found


def _strings(value: Mapping[str, Any]) -> dict[str, str]:
    return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str)}


def fallback(api_version: str, kind: str) -> WorkloadKind:
    """Any other owner: its pods still go through their queue as one group, sized by the
    pods' own annotations (queuetree has no permission to read an arbitrary kind)."""
    return WorkloadKind(api_version=api_version, kind=kind, plural=None)
