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

from queuetree.api import native_groups, workloads
from queuetree.core import resources
from queuetree.operator import queue_status, state


class _OfGroup:
    """A write about the PodGroup ``group``, a key (``namespace/name``)."""

    __slots__ = ()
    group: str

    @property
    def namespace(self) -> str:
        return self.group.partition("/")[0]

    @property
    def name(self) -> str:
        return self.group.partition("/")[2]


@dataclasses.dataclass(frozen=True, slots=True)
class GroupCreation(_OfGroup):
    """Create the group ``group`` (``namespace/name``) from its pod ``pod`` (a key)."""

    group: str
    pod: str


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
class GroupResize(_OfGroup):
    """Give generated group ``group`` the ``minMember`` its workload now declares
    (``api.workloads.resize_patch``)."""

    group: str
    min_member: int
    problem: str
    min_resources: resources.Resource | None
    """The pod's requests times ``min_member``; None when no pod of the group is in view
    (``minResources`` is then left as it is: too large holds more room than needed, too
    small admits nothing more, since each pod is checked again when it is ungated)."""


def plan_group_resizes(view: state.StateView, *, resizing: Mapping[str, int]) -> list[GroupResize]:
    """One resize per generated group whose workload (known to the watches) declares a
    ``group-min-member`` other than the group's ``minMember``, unless that very resize is in
    flight (``resizing``: group key -> the minimum being written), in the order of the keys.

    The group is patched as its tenant could patch it: the same admission rules hold for the
    new figures (no pod is ungated before the new minimum fits the queue, and a pod beyond it
    only when it fits itself), so a queue never runs past its capability."""
    wanted: dict[str, tuple[int, str]] = {}
    declared = view.declared_minimums
    for key, group in view.pod_groups.items():
        owner = group.owner
        if owner is None or not workloads.is_generated(group.name):
            continue
        if workloads.group_name_for_uid(owner.uid) != group.name:
            continue
        text = declared.get(owner.uid)
        if text is None:
            continue  # not known yet, or says nothing: the group stays as it is
        count, problem = workloads.min_member({workloads.MIN_MEMBER_ANNOTATION: text})
        if count != group.min_member and resizing.get(key) != count:
            wanted[key] = (count, problem)
    if not wanted:
        return []
    requests: dict[str, resources.Resource] = {}
    for pod in view.snapshot.pods.values():
        if pod.group in wanted and pod.group not in requests:
            requests[pod.group] = pod.request_before_devices or pod.resreq
    planned = []
    for key in sorted(wanted):
        count, problem = wanted[key]
        request = requests.get(key)
        planned.append(
            GroupResize(
                key,
                count,
                problem,
                request.multi(count) if request is not None and not request.is_empty() else None,
            )
        )
    return planned


@dataclasses.dataclass(frozen=True, slots=True)
class NativeGroup(_OfGroup):
    """Create the ``scheduling.k8s.io`` PodGroup of Volcano PodGroup ``group``
    (``namespace/name``, uid ``uid``) with ``min_member`` as its ``minCount``
    (``api.native_groups``)."""

    group: str
    uid: str
    min_member: int
    exists: bool = False
    """It was written before with another minimum: its ``minCount`` is patched."""


def plan_native_groups(
    view: state.StateView, *, known: Mapping[str, tuple[str, int]]
) -> list[NativeGroup]:
    """One creation per Volcano PodGroup whose native PodGroup is not known (``known``: group
    key -> the uid of the Volcano group and the minimum its native group says) to exist, in
    the order of the groups' keys. Only groups that exist (not a lone pod's, not
    the stand-in of a missing one): the pods of a missing group wait for it in their queue."""
    planned = []
    for key in sorted(view.pod_groups):
        group = view.pod_groups[key]
        if group.synthetic or group.missing or not group.uid:
            continue
        have = known.get(key)
        wanted = max(1, group.min_member)
        if have is not None and have == (group.uid, wanted):
            # Its policy is immutable, and kube-apiserver keeps it (its podgroup-protection
            # finalizer) while pods name it, so it is never replaced; its gang.minCount is
            # mutable (v1.37), so a new minMember is written into it.
            continue
        planned.append(
            NativeGroup(key, group.uid, wanted, exists=have is not None and have[0] == group.uid)
        )
    return planned


UNPLACED_REASON = "GangUnplaced"
"""The reason of the Warning Event on a PodGroup (and its workload) that its queue admitted
and that kube-scheduler cannot place whole (:func:`plan_unplaced_gangs`)."""


def plan_unplaced_gangs(
    view: state.StateView, *, told: Set[str], native: bool
) -> tuple[list[queue_status.GroupEvent], frozenset[str]]:
    """The Events of gangs that their queue admitted but the nodes do not fit, and the uids of
    every such group now (the writer tells a group once while it stays unplaced).

    A gang (a PodGroup of ``minMember`` > 1) is unplaced when fewer than ``minMember`` of its
    pods are on nodes and one of its admitted pods (gate removed) is ``Unschedulable``. Its
    reservation stays held in its queue, as Volcano holds an admitted gang (no timeout evicts
    it, unlike Kueue's ``waitForPodsReady``): a gang evicted for lack of nodes would be
    admitted again at once while the queue has room, and the room is what keeps it first in
    line once nodes come. So it is said, where a person looks: the PodGroup's events and the
    workload's. With native PodGroups none of its pods runs meanwhile; without, the pods that
    fit run and hold their nodes while the rest wait (``docs/gangs.md``)."""
    # Only gangs with fewer pods running than their minimum (as their status last said) can
    # be unplaced: a cluster of running gangs costs no walk over its pods.
    gangs = {
        key: group
        for key, group in view.pod_groups.items()
        if group.min_member > 1
        and not group.synthetic
        and group.uid
        and group.counts.running + group.counts.succeeded < group.min_member
    }
    if not gangs:
        return [], frozenset()
    placed: dict[str, int] = {}
    stuck: dict[str, int] = {}
    for pod in view.snapshot.pods.values():
        if pod.group not in gangs or pod.queue_gated or not pod.governed:
            continue
        if pod.node_name:
            placed[pod.group] = placed.get(pod.group, 0) + pod.count
        elif pod.unschedulable:
            stuck[pod.group] = stuck.get(pod.group, 0) + pod.count
    events = []
    now: set[str] = set()
    for key in sorted(stuck):
        group = gangs[key]
        on_nodes = placed.get(key, 0)
        if on_nodes >= group.min_member:
            continue
        now.add(group.uid)
        if group.uid in told:
            continue
        held = (
            f"its minResources ({resources.format_human(group.min_resources)})"
            if group.min_resources is not None
            else "its pods' requests"
        )
        if native:
            placing = (
                f"kube-scheduler cannot place {group.min_member} of its pods together on the "
                f"nodes, so none starts (kubectl get {native_groups.RESOURCE} "
                f"{group.name} -n {group.namespace} shows the scheduler's reason)"
            )
        else:
            placing = (
                f"the nodes fit only {on_nodes} of its {group.min_member} pods: those run "
                f"and hold their nodes while the rest wait (--native-pod-groups places a gang "
                "all or nothing where the API server serves it)"
            )
        events.append(
            queue_status.GroupEvent(
                key,
                group.uid,
                "Warning",
                UNPLACED_REASON,
                f"queue {group.queue} admitted this gang of {group.min_member} pods, but "
                f"{placing}; {held} stay reserved in queue {group.queue} until the nodes fit "
                "it, as Volcano holds an admitted gang: add nodes, lower minMember, or delete "
                "the workload to give them back",
                owner=group.owner,
            )
        )
    return events, frozenset(now)
