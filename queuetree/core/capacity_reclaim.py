"""The capacity plugin's part in reclaim (spec §3.8-3.9): whether a queue may reclaim, which
pods it may take, and why a victim was taken.

:func:`preemptive` says whether a queue may reclaim at all (it must stay within its real
capability and under its deserved share, or an ancestor's within ``ancestorReclaimLevel``);
:func:`reclaimable` chooses the victims it may take from other queues (guarantees protected,
only from queues above their deserved share or deserving none of what the pod holds, and in
hierarchy mode only across ancestors that are above theirs); :func:`reclaim_reason` words the
verdict for the eviction record. The figures are ``capacity_tree``'s and ``capacity_usage``'s;
the action that asks is ``actions.reclaim``.
"""

from __future__ import annotations

from collections.abc import Mapping

from queuetree.core import capacity_tree, decisions, frameworks, objects, vectors


def preemptive(
    attr: capacity_tree.QueueAttr,
    tasks: list[frameworks.Task],
    *,
    dims: vectors.Dims,
    hierarchy: bool,
    level: int,
) -> bool:
    """Whether the usable queue ``attr`` may reclaim for ``tasks`` (``frameworks.Plugin.
    preemptive``): with their requests its allocation stays within its real capability (and
    its pods within a ``pods`` capability), and within its deserved share on the dimensions
    the tasks request, or, up to ``level`` ancestors in hierarchy mode (``ancestorReclaimLevel``,
    root never), within an ancestor's."""
    total = dims.zero()
    for task in tasks:
        vectors.iadd(total, task.resreq)
    future = vectors.add(attr.allocated, total)
    if (
        vectors.first_exceeding(
            future,
            attr.real_capability,
            req_dims=vectors.requested_dims(total, dims),
        )
        >= 0
    ):
        return False
    if (
        attr in attr.pods_chain
        and attr.allocated_pods + sum(task.pod.count for task in tasks)
        > attr.real_capability[dims.pods]
    ):
        return False
    if vectors.partly_within_zero_filtered(future, attr.deserved, req=total, dims=dims):
        return True
    if hierarchy and level > 0:
        for up in range(1, level + 1):
            ancestor = attr.depth_ancestor(up)
            if ancestor is None or ancestor.name == objects.ROOT_QUEUE:
                continue
            if vectors.partly_within_zero_filtered(
                vectors.add(ancestor.allocated, total),
                ancestor.deserved,
                req=total,
                dims=dims,
            ):
                return True
    return False


def reclaimable(
    attrs: Mapping[str, capacity_tree.QueueAttr],
    reclaimer: frameworks.Task,
    reclaimees: list[frameworks.Task],
    *,
    session: frameworks.Session,
    hierarchy: bool,
    level: int,
) -> tuple[frameworks.Victims, int]:
    """The victims among ``reclaimees`` the capacity plugin lets ``reclaimer`` take
    (``frameworks.Plugin.reclaimable``), in the session's victim order: never below a
    queue's guarantee (``pods`` included: :func:`_with_pods`); from a queue that deserves none
    of what the victim holds, or that is above its deserved share on the dimensions the victim
    holds; and in hierarchy mode, up to ``level`` ancestors (``ancestorReclaimLevel``), each
    ancestor on the victim's side that the reclaimer's queue does not share must be above its
    deserved share too. Each victim taken lowers the working figures the next is judged by.
    REJECT when the reclaimer's queue is broken or unknown."""
    rattr = attrs.get(reclaimer.job.queue)
    if rattr is None or rattr.broken:
        return [], frameworks.REJECT
    dims = session.dims
    working: dict[str, vectors.Vec] = {}
    victims: frameworks.Victims = []
    candidates = sorted(
        reclaimees,
        key=session.victim_key(reclaimer),
    )
    reclaimer_names = vectors.names(reclaimer.resreq)
    for ee in candidates:
        attr = attrs.get(ee.job.queue)
        if attr is None:
            continue
        ee_names = vectors.names(ee.resreq)
        if not (ee_names & reclaimer_names) - {dims.pods}:
            continue
        alloc = working.get(attr.name)
        if alloc is None:
            alloc = working[attr.name] = _with_pods(attr.allocated, attr.allocated_pods, dims)
        after = vectors.sub(alloc, ee.resreq)
        if dims.pods >= 0:
            after[dims.pods] -= ee.pod.count
        if not vectors.less_equal_zero(attr.guarantee, after):
            continue  # guarantee protection
        if not ee_names & vectors.names(attr.deserved):
            # An immediate victim: the victim's queue deserves nothing of what it holds.
            if (
                hierarchy
                and level > 0
                and _shares_non_root_ancestor(rattr, attr, level)
                and not vectors.names(reclaimer.resreq) & vectors.names(rattr.deserved)
            ):
                continue  # leaf-level contention-avoidance gate
        elif not vectors.greater_on_relevant(
            alloc, attr.deserved, deserved_keys=attr.deserved_keys, req=ee.resreq, dims=dims
        ):
            continue
        checked: dict[str, vectors.Vec] = {}
        if hierarchy and level > 0:
            blocked = False
            for up in range(1, level + 1):
                ancestor, need = _ancestor_to_check(rattr, attr, up)
                if not need:
                    continue
                if ancestor is None:
                    blocked = True
                    break
                a = working.setdefault(ancestor.name, list(ancestor.allocated))
                checked[ancestor.name] = a
                if not ee_names & vectors.names(ancestor.deserved):
                    continue
                if not vectors.greater_on_relevant(
                    a,
                    ancestor.deserved,
                    deserved_keys=ancestor.deserved_keys,
                    req=ee.resreq,
                    dims=dims,
                ):
                    blocked = True
                    break
            if blocked:
                continue
        vectors.isub(alloc, ee.resreq)
        if dims.pods >= 0:
            alloc[dims.pods] -= ee.pod.count
        for a in checked.values():
            vectors.isub(a, ee.resreq)
        victims.append(ee)
    return victims, frameworks.PERMIT


def _with_pods(allocated: vectors.Vec, pods: int, dims: vectors.Dims) -> vectors.Vec:
    """A copy of ``allocated`` with its pods counted in the ``pods`` dimension (where the
    vectors keep 0), for reclaim's guarantee protection: a guarantee of ``pods`` keeps that
    many of the queue's pods (the reference, whose figures never count pods, protects
    every pod of such a queue)."""
    copy = list(allocated)
    if dims.pods >= 0:
        copy[dims.pods] = pods
    return copy


def _shares_non_root_ancestor(
    a: capacity_tree.QueueAttr, b: capacity_tree.QueueAttr, level: int
) -> bool:
    mine = {a.depth_ancestor(i) for i in range(1, level + 1)}
    mine.discard(None)
    mine = {x for x in mine if x is not None and x.name != objects.ROOT_QUEUE}
    theirs = {b.depth_ancestor(i) for i in range(1, level + 1)}
    return bool(mine & theirs)


def _ancestor_to_check(
    rattr: capacity_tree.QueueAttr, eattr: capacity_tree.QueueAttr, level: int
) -> tuple[capacity_tree.QueueAttr | None, bool]:
    mine = eattr.depth_ancestor(level)
    if mine is None or mine.name == objects.ROOT_QUEUE:
        return None, False
    theirs = rattr.depth_ancestor(level)
    if theirs is mine:
        return None, False
    return mine, True


def reclaim_reason(
    attr: capacity_tree.QueueAttr,
    rattr: capacity_tree.QueueAttr,
    victim: frameworks.Task,
    *,
    dims: vectors.Dims,
    hierarchy: bool,
    level: int,
) -> tuple[decisions.EvictionRule, str]:
    """Why :func:`reclaimable` let a pod of ``rattr`` take ``victim`` from ``attr``: the leaf's
    verdict, then every ancestor reclaim checked (``ancestorReclaimLevel``): those on the
    victim's side that the reclaimer's queue does not share.

    Read when the victim is evicted. Evictions of a reclaimer happen in the order its vote
    accepted them and each one is deallocated before the next, so the figures read here are the
    vote's own: its working copies subtract the victims accepted before (an ancestor's copy
    only those that checked it, so an ancestor's figure here may be lower by a victim that did
    not)."""
    held = vectors.names(victim.resreq)
    if held & vectors.names(attr.deserved):
        rule = decisions.EvictionRule.RECLAIM_OVER_DESERVED
        parts = [f"queue {attr.name!r} is above its deserved share{_over(attr, victim, dims)}"]
    else:
        rule = decisions.EvictionRule.RECLAIM_UNDESERVED
        parts = [
            f"queue {attr.name!r} deserves none of the resources the pod holds "
            f"({dims.format(victim.resreq)})"
        ]
    if hierarchy:
        for up in range(1, level + 1):
            ancestor = attr.depth_ancestor(up)
            if ancestor is None or ancestor.name == objects.ROOT_QUEUE:
                continue
            if rattr.depth_ancestor(up) is ancestor:
                # Shared with the reclaimer's queue: not checked (spec §3.9).
                parts.append(f"its ancestor {ancestor.name!r} is shared with queue {rattr.name!r}")
            elif held & vectors.names(ancestor.deserved):
                parts.append(
                    f"its ancestor {ancestor.name!r} is above its deserved share"
                    f"{_over(ancestor, victim, dims)}"
                )
            else:
                parts.append(f"its ancestor {ancestor.name!r} deserves none of them")
        parts.append(f"ancestorReclaimLevel {level}")
    return rule, "; ".join(parts)


def _over(attr: capacity_tree.QueueAttr, victim: frameworks.Task, dims: vectors.Dims) -> str:
    """`` (cpu 2 > 1)``: the dimensions the vote compares (``greater_on_relevant``) on which
    the queue holds more than it deserves; "" when none (then nothing to quote)."""
    found = []
    for i, value in enumerate(victim.resreq):
        if value <= 0 or i == dims.pods:
            continue
        relevant = attr.deserved[i] >= vectors.EPS if i < 2 else i in attr.deserved_keys
        if relevant and attr.allocated[i] > attr.deserved[i]:
            found.append(
                f"{dims.names[i]} {dims.format_value(i, attr.allocated[i])} > "
                f"{dims.format_value(i, attr.deserved[i])}"
            )
    return f" ({', '.join(found)})" if found else ""
