"""The PodGroups the operator creates for workloads (``queuetree.api.workloads``).

The webhook gives an opted-in pod of a workload (a pod a controller owns, naming no group) the
group-name annotation ``podgroup-<owner uid>``; the pod waits, gated, for that group. Each
cycle plans, from the view, one creation per such group that does not exist yet (the first of
its gated pods by key stands for it); the writer then reads the pod and its owner and creates
the group (``writing.Writer``). Level-triggered: a creation that failed is planned again by a
later cycle, since the pods still wait for the group.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Set

from queuetree.api import workloads
from queuetree.operator import state


@dataclasses.dataclass(frozen=True, slots=True)
class GroupCreation:
    """Create the group ``group`` (``namespace/name``) from its pod ``pod`` (a key)."""

    group: str
    pod: str

    @property
    def namespace(self) -> str:
        return self.group.partition("/")[0]

    @property
    def name(self) -> str:
        return self.group.partition("/")[2]


def plan_group_creations(view: state.StateView, *, creating: Set[str]) -> list[GroupCreation]:
    """One creation per generated group that gated pods wait for, missing from the view and
    not being created already (``creating``), in the order of the groups' keys."""
    first: dict[str, str] = {}
    """Group key -> the least key of its gated pods (the same pod every cycle)."""
    pods, groups = view.snapshot.pods, view.pod_groups
    for key in view.gated:
        pod = pods.get(key)
        if pod is None or pod.group in groups or pod.group in creating:
            continue
        known = first.get(pod.group)
        if known is not None:
            first[pod.group] = min(known, key)
        elif pod.names_group and workloads.is_generated(pod.group.partition("/")[2]):
            first[pod.group] = key
    return [GroupCreation(group=group, pod=first[group]) for group in sorted(first)]


@dataclasses.dataclass(frozen=True, slots=True)
class NativeGroup:
    """Make the ``scheduling.k8s.io`` PodGroup of Volcano PodGroup ``group`` (``namespace/name``,
    uid ``uid``) say ``min_member`` (``api.native_groups``): create it, or, when ``replace``,
    delete the one that says another minimum first (its policy is immutable)."""

    group: str
    uid: str
    min_member: int
    replace: bool = False

    @property
    def namespace(self) -> str:
        return self.group.partition("/")[0]

    @property
    def name(self) -> str:
        return self.group.partition("/")[2]


def plan_native_groups(
    view: state.StateView, *, known: Mapping[str, tuple[str, int]]
) -> list[NativeGroup]:
    """One write per Volcano PodGroup whose native PodGroup is not known (``known``: group key
    -> the uid of the Volcano group and the minimum its native group says) to exist as it
    should, in the order of the groups' keys. Only groups that exist (not a lone pod's, not
    the stand-in of a missing one): the pods of a missing group wait for it in their queue."""
    planned = []
    for key in sorted(view.pod_groups):
        group = view.pod_groups[key]
        if group.synthetic or group.missing or not group.uid:
            continue
        wanted = (group.uid, max(1, group.min_member))
        have = known.get(key)
        if have == wanted:
            continue
        replace = have is not None and have[0] == group.uid
        planned.append(NativeGroup(key, group.uid, wanted[1], replace=replace))
    return planned
