"""What each queue uses in one session: the figures the capacity checks compare with its quota.

:func:`account_jobs` counts, at session open, what the snapshot's pods use (spec §3.2):
``allocated`` (pods on a node, and their number in ``allocated_pods``), ``request``
(allocated plus pending), ``inqueue`` (the minResources of admitted pod groups not yet
running, less what other gates hold: :func:`deduct_gated`), ``elastic`` (allocated beyond
minResources) and ``releasing`` (pods being deleted that still hold a node). Work runs in
leaf queues; in hierarchy mode every figure a leaf gains is added to each of its ancestors
(bottom-up accounting), and pods already running in a broken or non-leaf queue still count
where they are.

As the session's actions run, the figures move with each task: :func:`reserve` and
:func:`unreserve` (``reserved``: gated pods admitted and not yet placed, counted at every
ancestor, not only at the leaf as the reference does), :func:`allocate` and
:func:`deallocate` (``allocated``, with every ancestor's share recomputed, not only the
leaf's). Quota figures are ``capacity_tree``'s; the plugin that calls these is ``capacity``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from queuetree.core import capacity_tree, frameworks, inqueue_bounds, objects, vectors


def account_jobs(session: frameworks.Session, attrs: dict[str, capacity_tree.QueueAttr]) -> None:
    """Spec §3.2, then bottom-up: every figure of a leaf is added to its ancestors.

    Sums are gathered per leaf first and pushed up the chain once per leaf (not once per
    job), which keeps session open linear in pods with a small constant.
    """
    dims = session.dims
    leaves: dict[str, tuple[vectors.Vec, vectors.Vec, vectors.Vec, vectors.Vec]] = {}
    leaf_pods: dict[str, int] = {}
    """Leaf -> allocated pods."""
    allocated_statuses = objects.ALLOCATED_STATUSES
    pending = objects.TaskStatus.PENDING
    releasing = objects.TaskStatus.RELEASING
    leaf_releasing: dict[str, vectors.Vec] = {}
    leaf_releasing_pods: dict[str, int] = {}
    leaf_inqueue_pods: dict[str, int] = {}
    """Leaf -> pods its admitted groups hold room for (``QueueAttr.inqueue_pods``)."""
    pending_requests: dict[str, dict[int, list[Any]]] = {}
    """Leaf -> id of a pending request vector -> [vector, count]."""
    for job in session.jobs.values():
        attr = attrs.get(job.queue)
        if attr is None:
            continue
        # Pods already running in a non-leaf or broken queue admit nothing new, but they do
        # use the cluster: their figures still count where they are (and above, if anywhere).
        sums = leaves.get(attr.name)
        if sums is None:
            sums = leaves[attr.name] = (dims.zero(), dims.zero(), dims.zero(), dims.zero())
            pending_requests[attr.name] = {}
        counts = pending_requests[attr.name]
        # A run's one task stands for every member (``frameworks.Run``).
        members = 1 if job.run is None else len(job.run)
        if job.min_resources is None and job.ready == 0:
            # The common pending group: nothing allocated, no inqueue or elastic share.
            for task in job.tasks:
                if task.status is pending:
                    entry = counts.get(id(task.resreq))
                    if entry is None:
                        counts[id(task.resreq)] = [task.resreq, members]
                    else:
                        entry[1] += members
                elif task.status is releasing and task.pod.node_name:
                    _add_releasing(leaf_releasing, leaf_releasing_pods, attr.name, task, dims)
            continue
        leaf_allocated, leaf_request, leaf_inqueue, leaf_elastic = sums
        allocated: vectors.Vec | None = None
        gated: vectors.Vec | None = None
        ready = 0
        pods = 0
        for task in job.tasks:
            status = task.status
            if status in allocated_statuses:
                if allocated is None:
                    allocated = dims.zero()
                vectors.iadd(allocated, task.resreq)
                ready += 1
                pods += task.pod.count
            elif status == pending:
                # Counted per distinct request vector (pods share them), added once per leaf.
                entry = counts.get(id(task.resreq))
                if entry is None:
                    counts[id(task.resreq)] = [task.resreq, members]
                else:
                    entry[1] += members
            elif status is releasing and task.pod.node_name:
                _add_releasing(leaf_releasing, leaf_releasing_pods, attr.name, task, dims)
            if task.pod.held_by_other_gates:
                if gated is None:
                    gated = dims.zero()
                vectors.iadd(gated, task.resreq)
        if allocated is not None:
            vectors.iadd(leaf_allocated, allocated)
            vectors.iadd(leaf_request, allocated)
            leaf_pods[attr.name] = leaf_pods.get(attr.name, 0) + pods
        minimum = job.min_resources
        if minimum is not None and (
            job.phase == objects.PodGroupPhase.INQUEUE
            or (job.phase == objects.PodGroupPhase.RUNNING and ready >= job.min_member)
        ):
            rest = (
                [m - a if m > a else 0.0 for m, a in zip(minimum, allocated, strict=True)]
                if allocated is not None
                else minimum
            )
            rest = deduct_gated(rest, gated, dims)
            if dims.pods >= 0:  # some queue limits pods: enqueue checks them
                held_pods = max(0, job.min_member - ready) * members
                leaf_inqueue_pods[attr.name] = leaf_inqueue_pods.get(attr.name, 0) + held_pods
            if members == 1:
                vectors.iadd(leaf_inqueue, rest)
            else:
                for i, value in enumerate(rest):
                    leaf_inqueue[i] = vectors.repeat_add(leaf_inqueue[i], value, members)
        if allocated is not None:
            vectors.iadd(
                leaf_elastic,
                vectors.exceeded(allocated, minimum if minimum is not None else dims.zero()),
            )
    for name, (allocated_sum, request_sum, inqueue_sum, elastic_sum) in leaves.items():
        for vec, count in pending_requests[name].values():
            for i, value in enumerate(vec):
                if value:
                    request_sum[i] += value * count
        pods = leaf_pods.get(name, 0)
        # Adding a zero vector changes nothing: a leaf of pending pods only moves requests.
        allocates, enqueues, lends = any(allocated_sum), any(inqueue_sum), any(elastic_sum)
        for target in attrs[name].chain:
            if allocates:
                vectors.iadd(target.allocated, allocated_sum)
            vectors.iadd(target.request, request_sum)
            if enqueues:
                vectors.iadd(target.inqueue, inqueue_sum)
            if lends:
                vectors.iadd(target.elastic, elastic_sum)
            target.allocated_pods += pods
    for name, held_pods in leaf_inqueue_pods.items():
        for target in attrs[name].chain:
            target.inqueue_pods += held_pods
    for name, releasing_sum in leaf_releasing.items():
        releasing_pods = leaf_releasing_pods[name]
        for target in attrs[name].chain:
            vectors.iadd(target.releasing, releasing_sum)
            target.releasing_pods += releasing_pods


def _add_releasing(
    sums: dict[str, vectors.Vec],
    counts: dict[str, int],
    leaf: str,
    task: frameworks.Task,
    dims: vectors.Dims,
) -> None:
    """A pod being deleted that still holds its node: its request (and its place among the
    queue's pods) stays in use (a grace period can last minutes), so gated pods of its
    queue wait until it is gone."""
    total = sums.get(leaf)
    if total is None:
        total = sums[leaf] = dims.zero()
    vectors.iadd(total, task.resreq)
    counts[leaf] = counts.get(leaf, 0) + task.pod.count


def deduct_gated(res: vectors.Vec, gated: vectors.Vec | None, dims: vectors.Dims) -> vectors.Vec:
    """``DeductSchGated``: pods held by other gates do not count as inqueue."""
    if gated is None or vectors.is_empty(gated, dims):
        return res
    return [r - g if r > g else 0.0 for r, g in zip(res, gated, strict=True)]


def reserve(attr: capacity_tree.QueueAttr, task: frameworks.Task) -> None:
    """Hold ``task``'s request, and its pods, as ``reserved`` along ``attr``'s chain."""
    _move_reserved(attr, task, sign=1)


def unreserve(attr: capacity_tree.QueueAttr, task: frameworks.Task) -> None:
    """Give back what :func:`reserve` held for ``task`` along ``attr``'s chain."""
    _move_reserved(attr, task, sign=-1)


def _move_reserved(attr: capacity_tree.QueueAttr, task: frameworks.Task, *, sign: int) -> None:
    # On the dimensions the task requests only: this runs once per admitted pod.
    req = task.resreq
    dims = task.nonzero
    count = sign * task.pod.count
    for target in attr.chain:
        reserved = target.reserved
        for i in dims:
            reserved[i] += sign * req[i]
        target.reserved_pods += count


def allocate(
    attrs: Mapping[str, capacity_tree.QueueAttr], task: frameworks.Task, dims: vectors.Dims
) -> capacity_tree.QueueAttr | None:
    """``task`` placed: its request and pods are ``allocated`` along the chain of its queue
    (None, and nothing counted, for a queue without figures), and every member's share
    follows (a deliberate fix: the reference updates the leaf's only)."""
    return _move_allocated(attrs, task, dims, sign=1)


def deallocate(
    attrs: Mapping[str, capacity_tree.QueueAttr], task: frameworks.Task, dims: vectors.Dims
) -> capacity_tree.QueueAttr | None:
    """The inverse of :func:`allocate`: an eviction, or an allocation a statement discards."""
    return _move_allocated(attrs, task, dims, sign=-1)


def _move_allocated(
    attrs: Mapping[str, capacity_tree.QueueAttr],
    task: frameworks.Task,
    dims: vectors.Dims,
    *,
    sign: int,
) -> capacity_tree.QueueAttr | None:
    attr = attrs.get(task.job.queue)
    if attr is None:
        return None
    move = vectors.iadd if sign > 0 else vectors.isub
    for target in attr.chain:
        move(target.allocated, task.resreq)
        target.allocated_pods += sign * task.pod.count
        target.share = vectors.share(target.allocated, target.deserved, dims)
    return attr


def recheck_held(session: frameworks.Session, attrs: dict[str, capacity_tree.QueueAttr]) -> None:
    """Keep every queue and ancestor within its real capability, counting what admitted pod
    groups hold (``allocated + inqueue - elastic``, the figure enqueue checks), whatever their
    owners wrote since their admission (admission mode).

    Enqueue admits a group only when its ``minResources`` fit, but the PodGroup stays the
    tenant's object: raising its ``minResources`` once it is Inqueue (or Running), or moving it
    to another queue before the webhook sees it admitted, makes :func:`account_jobs` count
    room no enqueue granted, which keeps every other group and lone pod of the queue and its
    siblings out (Volcano counts it so). Where a queue is over, the groups of real PodGroups
    that hold room in it are admitted again, as enqueue would, in the order they were: those
    with their pods running first, then the Inqueue ones by the time they entered Inqueue
    (their admission condition), oldest first. One that no longer fits holds nothing: an
    Inqueue one is Pending again (enqueue then tells it why), a running one keeps its pods
    and phase but not the room beyond them. Nothing changes while no queue is over.
    """
    dims = session.dims
    over = {name for name, attr in attrs.items() if _over(attr)}
    if not over:
        return
    held: list[tuple[tuple[Any, ...], frameworks.Job, vectors.Vec, capacity_tree.QueueAttr]] = []
    for job in session.jobs.values():
        attr = attrs.get(job.queue)
        minimum = job.min_resources
        if (
            attr is None
            or minimum is None
            or job.run is not None
            or job.group.synthetic
            or not any(target.name in over for target in attr.chain)
        ):
            continue
        running = job.phase == objects.PodGroupPhase.RUNNING
        if not (job.phase == objects.PodGroupPhase.INQUEUE or running):
            continue
        allocated = dims.zero()
        gated: vectors.Vec | None = None
        ready = 0
        for task in job.tasks:
            if task.status in objects.ALLOCATED_STATUSES:
                vectors.iadd(allocated, task.resreq)
                ready += 1
            if task.pod.held_by_other_gates:
                if gated is None:
                    gated = dims.zero()
                vectors.iadd(gated, task.resreq)
        if running and ready < job.min_member:
            continue  # :func:`account_jobs` counted nothing for it
        rest = deduct_gated(
            [m - a if m > a else 0.0 for m, a in zip(minimum, allocated, strict=True)],
            gated,
            dims,
        )
        if not any(rest):
            continue
        since = inqueue_bounds.inqueue_since(job.group) or job.group.created
        held.append(((not running, since, job.group.created, job.key), job, rest, attr))
        for target in attr.chain:
            vectors.isub(target.inqueue, rest)
    for _, job, rest, attr in sorted(held, key=lambda item: item[0]):
        if all(
            target.allocated[i] + target.inqueue[i] + value - target.elastic[i]
            <= target.real_capability[i]
            for target in attr.chain
            for i, value in enumerate(rest)
            if value > 0
        ):
            for target in attr.chain:
                vectors.iadd(target.inqueue, rest)
        elif job.phase == objects.PodGroupPhase.INQUEUE:
            job.phase = objects.PodGroupPhase.PENDING


def _over(attr: capacity_tree.QueueAttr) -> bool:
    """The queue's admitted groups hold more than its real capability on a dimension where
    some of it is held room (``inqueue``)."""
    return any(
        held > 0 and allocated + held - elastic > limit
        for allocated, held, elastic, limit in zip(
            attr.allocated, attr.inqueue, attr.elastic, attr.real_capability, strict=True
        )
    )
