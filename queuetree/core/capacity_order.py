"""The capacity plugin's orders: which queue goes first, and whose pods are evicted first.

:func:`queue_order` compares two queues by priority, then by share (``allocated / deserved``,
the largest over the dimensions deserved names; spec §3.5), in hierarchy mode leaves before
other queues and two leaves by their ancestors' shares where their paths from root part.
:func:`queue_order_key` gives the same order as a sort key where one exists (the session then
sorts instead of comparing pairs). :func:`victim_queue_order` puts the queues closest to a
reclaimer in the tree first. The figures compared are ``capacity_tree``'s and
``capacity_usage``'s; ties are left to the session's default tie-break (creation time, then
name).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Mapping
from typing import Any

from queuetree.core import capacity_tree


def queue_order(
    attrs: Mapping[str, capacity_tree.QueueAttr], left: str, right: str, *, hierarchy: bool
) -> int:
    """The capacity plugin's queue order (``frameworks.Plugin.queue_order``): higher priority
    first; then in flat mode, and between two non-leaf queues, :func:`_compare_share`; in
    hierarchy mode a leaf before a non-leaf queue, and two leaves by the shares of their
    ancestors' children where their paths part (:func:`_queue_level`). 0 for a queue without
    figures."""
    la = attrs.get(left)
    ra = attrs.get(right)
    if la is None or ra is None:
        return 0
    if la.queue.priority != ra.queue.priority:
        return ra.queue.priority - la.queue.priority
    if not hierarchy:
        return _compare_share(la, ra)
    if la.is_leaf != ra.is_leaf:
        return -1 if la.is_leaf else 1
    if not la.is_leaf:
        return _compare_share(la, ra)
    level = _queue_level(la, ra)
    lrep = la.ancestors[level + 1] if level + 1 < len(la.ancestors) else la
    rrep = ra.ancestors[level + 1] if level + 1 < len(ra.ancestors) else ra
    return _compare_share(lrep, rrep)


def queue_order_key(
    attrs: Mapping[str, capacity_tree.QueueAttr], names: Collection[str], *, hierarchy: bool
) -> Callable[[str], Any] | None:
    """:func:`queue_order` as a sort key for ``names``, when one exists (see
    ``frameworks.Plugin.queue_order_key``): priority (higher first), then in hierarchy
    mode leaves before the other queues, then shares (:func:`_share_key`): a queue's own
    for a non-leaf queue and in flat mode, and for a leaf the shares along its path from
    root that :func:`_leaf_paths` keeps. None when a queue has no figures or a share is
    NaN, or when equal shares make the comparator's order one no key gives."""
    found: list[capacity_tree.QueueAttr] = []
    for name in names:
        attr = attrs.get(name)
        if attr is None or attr.share != attr.share:
            return None  # compared as equal to every queue; NaN compares as neither
        found.append(attr)
    if not hierarchy:
        keys = {a.name: (-a.queue.priority, _share_key(a)) for a in found}
        return keys.__getitem__
    paths = _leaf_paths([a for a in found if a.is_leaf])
    if paths is None:
        return None
    ordered: dict[str, tuple[Any, ...]] = {}
    for a in found:
        if a.is_leaf:
            ordered[a.name] = (-a.queue.priority, False, paths[a.name])
        else:
            ordered[a.name] = (-a.queue.priority, True, (_share_key(a),))
    return ordered.__getitem__


def victim_queue_order(
    attrs: Mapping[str, capacity_tree.QueueAttr],
    left: str,
    right: str,
    preemptor: str,
    *,
    hierarchy: bool,
) -> int:
    """The capacity plugin's victim queue order (``frameworks.Plugin.victim_queue_order``): in
    hierarchy mode, the queue whose path from root shares more of the preemptor's goes first
    (its pods are evicted before those of a queue farther away); 0 in flat mode, and for a
    queue without figures."""
    if not hierarchy:
        return 0
    la, ra, pa = attrs.get(left), attrs.get(right), attrs.get(preemptor)
    if la is None or ra is None or pa is None:
        return 0
    ll = _queue_level(la, pa)
    rl = _queue_level(ra, pa)
    if ll == rl:
        return 0
    return -1 if ll > rl else 1


def _compare_share(left: capacity_tree.QueueAttr, right: capacity_tree.QueueAttr) -> int:
    """``compareShareWithDeserved``: smaller share first; on equal shares a queue with a
    deserved quota goes before a best-effort one."""
    if left.share == right.share:
        if left.has_deserved == right.has_deserved:
            return 0
        return -1 if left.has_deserved else 1
    return -1 if left.share < right.share else 1


def _share_key(attr: capacity_tree.QueueAttr) -> tuple[float, bool]:
    """:func:`_compare_share` as a key: smaller share first, then a queue with a deserved
    quota before a best-effort one."""
    return (attr.share, not attr.has_deserved)


ShareKeys = tuple[tuple[float, bool], ...]


def _leaf_paths(leaves: list[capacity_tree.QueueAttr]) -> dict[str, ShareKeys] | None:
    """Leaf name -> a key that orders ``leaves`` as the hierarchical :func:`queue_order`
    orders two leaves of one priority, or None when no key can.

    The comparator compares the children of the deepest common ancestor of two leaves that
    lead to each (:func:`_queue_level`); on equal shares it leaves the order to the default
    tie-break (creation time, then name) of the leaves themselves. Take the tree of the
    leaves' paths from root. Where a queue's children in that tree have distinct shares, the
    key goes on with the share of the child on the leaf's path; where they all have one share
    (every two leaves through two of them are equal for the comparator), it stops, and every
    queue below must then have children of one share too: otherwise the comparator finds
    some of those leaves equal and orders others by share, which no key expresses (the
    comparator need not even be transitive then). None also where some children of a queue
    have one share and others another, and for leaves without one common root.
    """
    children: dict[int, dict[int, capacity_tree.QueueAttr]] = {}
    paths: list[tuple[capacity_tree.QueueAttr, ...]] = []
    for leaf in leaves:
        path = (*leaf.ancestors, leaf)
        if len(path) < 2 or leaf.broken or (paths and path[0] is not paths[0][0]):
            return None
        paths.append(path)
        for parent, child in itertools.pairwise(path):
            children.setdefault(id(parent), {})[id(child)] = child
    tied: set[int] = set()
    for parent_id, kids in children.items():
        if len(kids) < 2:
            continue
        shares = {_share_key(kid) for kid in kids.values()}
        if len(shares) == 1:
            tied.add(parent_id)
        elif len(shares) < len(kids):
            return None
    found: dict[str, ShareKeys] = {}
    for path in paths:
        key: list[tuple[float, bool]] = []
        stopped = False
        for parent, child in itertools.pairwise(path):
            if stopped:
                if len(children[id(parent)]) > 1 and id(parent) not in tied:
                    return None
            elif id(parent) in tied:
                stopped = True
            else:
                key.append(_share_key(child))
        found[path[-1].name] = tuple(key)
    return found


def _queue_level(left: capacity_tree.QueueAttr, right: capacity_tree.QueueAttr) -> int:
    """``getQueueLevel``: index of the deepest common entry of the two ancestor lists."""
    level = 0
    for i in range(min(len(left.ancestors), len(right.ancestors))):
        if left.ancestors[i] is right.ancestors[i]:
            level = i
        else:
            return level
    return level
