"""The incremental compaction index: the settled lone pods of the cluster, folded per bucket.

``core.compaction`` folds a snapshot's settled lone pods in one pass over every pod. The
operator cannot afford that pass every cycle, so :class:`CompactionIndex` keeps the buckets
current pod by pod instead: :class:`state.ClusterState` feeds it every change to a pod (as
snapshots show it) and to the pod group of the same key, under its lock, and asks it for the
folded snapshot when a cycle takes its view. A fold is recomputed only when its bucket changed.

The index decides nothing of its own: which pods are settled, which queues are leaves and what
a fold is are ``core.compaction``'s (``settled_bucket``, ``leaves``, ``fold``), so the folded
snapshot is exactly what ``compaction.compact`` would give (tests/operator/
test_state_compaction.py).
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable, Mapping
from types import MappingProxyType

from queuetree.core import compaction, objects

GroupOfFn = Callable[[objects.Pod], objects.PodGroup | None]
"""The pod group snapshots show for a pod (a real PodGroup shadows a lone pod's own)."""


class CompactionIndex:
    """Pods by compaction bucket, the unsettled pods, and the unschedulable ones.

    Not thread-safe by itself: its owner calls it under the owner's lock.
    """

    def __init__(self) -> None:
        self._bucket_of: dict[str, compaction.Bucket] = {}
        self._buckets: dict[compaction.Bucket, dict[str, objects.Pod]] = {}
        self._shown: dict[
            compaction.Bucket, tuple[dict[str, objects.Pod], dict[str, objects.PodGroup]]
        ] = {}
        """What each bucket puts in the session's snapshot (its fold, or its one pod, and the
        group), computed by :meth:`folded` when the bucket changed or the leaves did."""
        self._shown_pods: dict[str, objects.Pod] = {}
        self._shown_groups: dict[str, objects.PodGroup] = {}
        """Every bucket's part of ``_shown``, merged (no two buckets share a key)."""
        self._dirty: set[compaction.Bucket] = set()
        self._leaves: frozenset[str] | None = None
        """The leaf queues ``_shown`` was computed for."""
        self._unsettled: dict[str, objects.Pod] = {}
        """The pods that are not folded, as snapshots show them."""
        self._unsettled_groups: collections.Counter[str] = collections.Counter()
        """Group key -> how many of ``_unsettled`` are in it."""
        self._unschedulable: set[str] = set()

    def update(self, key: str, pod: objects.Pod | None, group: objects.PodGroup | None) -> None:
        """Put pod ``key`` (``pod`` as snapshots show it, in ``group``) in its bucket, or among
        the unsettled pods, or nowhere when ``pod`` is None (gone)."""
        old = self._bucket_of.pop(key, None)
        if old is not None:
            members = self._buckets[old]
            del members[key]
            self._dirty.add(old)
            if not members:
                del self._buckets[old]
        unsettled = self._unsettled.pop(key, None)
        if unsettled is not None:
            self._unsettled_groups[unsettled.group] -= 1
            if not self._unsettled_groups[unsettled.group]:
                del self._unsettled_groups[unsettled.group]
        self._unschedulable.discard(key)
        if pod is None:
            return
        if pod.unschedulable:
            self._unschedulable.add(key)
        bucket = compaction.settled_bucket(key, pod, group)
        if bucket is None:
            self._unsettled[key] = pod
            self._unsettled_groups[pod.group] += 1
            return
        self._bucket_of[key] = bucket
        self._buckets.setdefault(bucket, {})[key] = pod
        self._dirty.add(bucket)

    def folded(
        self,
        snapshot: objects.Snapshot,
        *,
        pod_groups: Mapping[str, objects.PodGroup],
        group_of: GroupOfFn,
    ) -> objects.Snapshot | None:
        """``snapshot`` with the settled lone pods folded per bucket; ``pod_groups`` are the
        real PodGroups and ``group_of`` finds the group of any other pod. None (the session
        reads ``snapshot``) when any pod is unschedulable: reclaim needs every pod."""
        if self._unschedulable:
            return None
        leaf_queues = compaction.leaves(snapshot.queues)
        # The unsettled pods and their groups, copied by dict and set operations: during a
        # burst they are thousands, and this runs every cycle. ``snapshot.pod_groups`` shows
        # every group with the precedence of ``group_of`` (real, assumed, lone), and the real
        # groups are the same objects in both.
        pods: dict[str, objects.Pod] = dict(self._unsettled)
        shown_groups = snapshot.pod_groups
        wanted = self._unsettled_groups.keys() & shown_groups.keys()
        groups: dict[str, objects.PodGroup] = {key: shown_groups[key] for key in wanted}
        self._refresh(leaf_queues, group_of)
        pods.update(self._shown_pods)
        groups.update(self._shown_groups)
        groups.update(pod_groups)
        return dataclasses.replace(
            snapshot, pod_groups=MappingProxyType(groups), pods=MappingProxyType(pods)
        )

    def _refresh(self, leaf_queues: frozenset[str], group_of: GroupOfFn) -> None:
        """Bring ``_shown`` up to date: the buckets that changed since the last call, or every
        bucket when the leaves changed. A bucket of two pods or more in a leaf queue shows its
        fold; any other shows its pods, each in its group."""
        if leaf_queues != self._leaves:
            self._leaves = leaf_queues
            self._dirty.update(self._shown)
            self._dirty.update(self._buckets)
        # Every old part goes before any new one: a pod that moved between two changed buckets
        # has the same key in both.
        for bucket in self._dirty:
            old = self._shown.pop(bucket, None)
            if old is not None:
                for key in old[0]:
                    del self._shown_pods[key]
                for key in old[1]:
                    del self._shown_groups[key]
        for bucket in self._dirty:
            members = self._buckets.get(bucket)
            if not members:
                continue
            pods: dict[str, objects.Pod] = {}
            groups: dict[str, objects.PodGroup] = {}
            if len(members) > 1 and bucket[0] in leaf_queues:
                pod, group = compaction.fold(bucket, members.values())
                pods[pod.key] = pod
                groups[group.key] = group
            else:
                for key, pod in members.items():
                    pods[key] = pod
                    member_group = group_of(pod)
                    if member_group is not None:
                        groups[pod.group] = member_group
            self._shown[bucket] = (pods, groups)
            self._shown_pods.update(pods)
            self._shown_groups.update(groups)
        self._dirty.clear()
