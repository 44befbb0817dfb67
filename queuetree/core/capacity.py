"""The capacity plugin: queue quotas, flat (spec §3.3) and hierarchical (§3.4-3.10).

:class:`CapacityPlugin` is the one plugin that knows queue quotas. It answers the session's
hooks over the figures of its family of modules:

* ``capacity_tree``: each queue's quota figures (deserved, capability, real capability,
  guarantee) and the tree's faults, built at session open;
* ``capacity_usage``: what each queue uses, counted at session open and moved by the session's
  events (reserve, allocate and their inverses);
* ``capacity_order``: the queue order and the victim queue order;
* ``capacity_reclaim``: whether a queue may reclaim and which victims it may take;
* here: the admission checks (:meth:`CapacityPlugin.allocatable` for a pod,
  :meth:`CapacityPlugin.job_enqueueable` for a pod group, and their forms for a run of
  identical members, :meth:`CapacityPlugin.admit_run` and :meth:`CapacityPlugin.enqueue_run`),
  which walk the leaf-first chain ``[leaf, parent, ..., root]`` in hierarchy mode.

Deliberate fixes over the reference (docs/compatibility.md):

* structural faults are isolated: a queue on a parent cycle, a queue whose parent is missing
  (and the queues below them), and a job in a non-leaf queue block only themselves and are
  reported in ``errors``; the reference stops the whole session;
* a missing ``root`` queue is synthesised (infinite, as Volcano's cache creates it) with a warning;
* reserved (ungated, not yet placed) pods count at every ancestor, not only at their leaf;
* every ancestor's share is recomputed when allocations change;
* pods being deleted that still hold their node (``releasing``) keep their queue's room from
  gated pods until they are gone: a grace period must not let a queue run more than its
  capability. They count nowhere else (not in ``allocated``, not against reclaim), as in the
  reference;
* a ``pods`` capability limits the number of pods: each pod takes one (its ``count``) in its
  queue and every ancestor whose real capability of ``pods`` is finite
  (``capacity_tree.QueueAttr.pods_chain``), counted from ``allocated_pods``, ``reserved_pods``
  and ``releasing_pods`` as the requests are from the vectors; a guarantee of ``pods`` keeps
  that many pods from reclaim. The reference never counts pods: a pod's request has no
  ``pods``, and its checks skip it. The vectors keep ``pods`` at 0, so shares, the deserved
  comparisons and the node figures are the reference's.

Rejections are recorded (:class:`Blocker`) so that ``explaining`` can tell a person which queue
blocks a pod, on which resource, with the figures.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Collection
from typing import Any, TypedDict, Unpack

from queuetree.core import (
    capacity_order,
    capacity_reclaim,
    capacity_tree,
    capacity_usage,
    configs,
    decisions,
    frameworks,
    objects,
    vectors,
)

NAME = "capacity"


class _Where(TypedDict):
    """Where a quota check refused a task (:meth:`CapacityPlugin._quota_blocker`)."""

    target: capacity_tree.QueueAttr
    leaf: capacity_tree.QueueAttr
    dim: int
    held: bool


@dataclasses.dataclass(frozen=True, slots=True)
class Blocker:
    """Why the capacity plugin refused a task (the input of an explanation)."""

    kind: str
    """``quota``, ``state``, ``deleting``, ``not-leaf``, ``broken`` or ``enqueue``."""
    queue: str
    leaf: str
    dim: int = -1
    requested: float = 0.0
    allocated: float = 0.0
    reserved: float = 0.0
    releasing: float = 0.0
    """Held by the queue's pods that are being deleted (counted for gated pods only)."""
    capability: float = 0.0
    detail: str = ""


class CapacityPlugin(frameworks.Plugin):
    name = NAME

    def __init__(self, option: configs.PluginOption) -> None:
        super().__init__(option)
        self.hierarchy = option.enabled("enableHierarchy")
        self.level = 0
        self.attrs: dict[str, capacity_tree.QueueAttr] = {}
        self.reserved_tasks: dict[str, capacity_tree.QueueAttr] = {}
        """Task key -> the leaf whose chain holds the task's reserved request (for a run, its
        one task stands for the members it admitted: ``frameworks.Run.ungated`` counts them,
        and the other members are no tasks, so nothing looks them up here)."""
        self.blockers: dict[str, Blocker] = {}
        """Task key or job key -> the last rejection."""
        self.faults: capacity_tree.Faults = {}
        self._interned: dict[tuple[str, str, int, float, float, float, float], Blocker] = {}
        self.gate_on = False

    # -- 1. session open --------------------------------------------------------------------

    def on_session_open(self, session: frameworks.Session) -> None:
        self.session = session
        self.dims = session.dims
        self._parse_arguments(session)
        self.gate_on = session.feature_gates.get(
            objects.FEATURE_SCHEDULING_GATES_QUEUE_ADMISSION, False
        )
        # The quota figures, then what the queues use, then what follows from both.
        self.attrs, self.faults = capacity_tree.build(session, hierarchy=self.hierarchy)
        capacity_usage.account_jobs(session, self.attrs)
        if session.admission_only:
            # What a tenant wrote into an admitted PodGroup never holds room past capability.
            capacity_usage.recheck_held(session, self.attrs)
        for attr in self.attrs.values():
            attr.share = vectors.share(attr.allocated, attr.deserved, self.dims)
            attr.has_deserved = not vectors.is_empty(attr.deserved, self.dims)
            attr.usable = (
                attr.queue.state == objects.QueueState.OPEN
                and not attr.queue.deleting
                and not attr.broken
                and (not self.hierarchy or attr.is_leaf)
            )
        pods = self.dims.pods
        for attr in self.attrs.values():
            attr.figures = tuple(
                (t.allocated, t.reserved, t.releasing, t.real_capability, t) for t in attr.chain
            )
            if pods >= 0:
                attr.pods_chain = tuple(
                    t
                    for t in attr.chain
                    if pods in t.capability_keys and t.real_capability[pods] < vectors.MAXF
                )
        if self.gate_on:
            self._rebuild_reserved(session)

    def _parse_arguments(self, session: frameworks.Session) -> None:
        raw = self.option.arguments.get("ancestorReclaimLevel")
        if raw is None:
            return
        if isinstance(raw, bool) or not isinstance(raw, int):
            session.warnings.append(
                f"capacity plugin: argument ancestorReclaimLevel must be an integer, "
                f"got {raw!r}; using 0"
            )
            return
        if raw < 0:
            session.warnings.append(
                f"ancestorReclaimLevel should be non-negative, got {raw}. Falling back to 0."
            )
            return
        self.level = raw

    def _rebuild_reserved(self, session: frameworks.Session) -> None:
        """§5.3: pending, ungated, opted-in pods keep holding their queue's capacity."""
        for key in session.in_flight:
            job = session.jobs[key]
            attr = self.attrs.get(job.queue)
            if attr is None:
                continue
            for task in job.tasks:
                # At session open a task's status is its pod's.
                if task.pod.holds_reservation:
                    self._reserve(task, attr)

    # -- 2. reserved capacity ---------------------------------------------------------------

    def _reserve(self, task: frameworks.Task, attr: capacity_tree.QueueAttr) -> None:
        if task.key in self.reserved_tasks:
            return
        self.reserved_tasks[task.key] = attr
        capacity_usage.reserve(attr, task)

    def _unreserve(self, task: frameworks.Task) -> None:
        attr = self.reserved_tasks.pop(task.key, None)
        if attr is not None:
            capacity_usage.unreserve(attr, task)

    def on_reserve(self, task: frameworks.Task) -> None:
        attr = self.attrs.get(task.job.queue)
        if attr is not None:
            self._reserve(task, attr)

    def on_unreserve(self, task: frameworks.Task) -> None:
        self._unreserve(task)

    # -- 3. events --------------------------------------------------------------------------

    def on_allocate(self, task: frameworks.Task) -> None:
        attr = capacity_usage.allocate(self.attrs, task, self.dims)
        if attr is not None and self.gate_on:
            self._unreserve(task)

    def on_deallocate(self, task: frameworks.Task) -> None:
        attr = capacity_usage.deallocate(self.attrs, task, self.dims)
        # Volcano re-reserves every annotated task, even a running one being evicted (spec
        # §7.6); a task that is leaving its node no longer needs its queue's room.
        leaving = task.status == objects.TaskStatus.RELEASING
        if attr is not None and self.gate_on and task.pod.reserves and not leaving:
            self._reserve(task, attr)

    # -- 4. ordering ------------------------------------------------------------------------

    def queue_order(self, left: str, right: str) -> int:
        return capacity_order.queue_order(self.attrs, left, right, hierarchy=self.hierarchy)

    def queue_order_key(self, names: Collection[str]) -> Callable[[str], Any] | None:
        return capacity_order.queue_order_key(self.attrs, names, hierarchy=self.hierarchy)

    def victim_queue_order(self, left: str, right: str, preemptor: str) -> int:
        return capacity_order.victim_queue_order(
            self.attrs, left, right, preemptor, hierarchy=self.hierarchy
        )

    # -- 5. checks --------------------------------------------------------------------------

    def _usable(self, attr: capacity_tree.QueueAttr | None, key: str) -> bool:
        if attr is None:
            return False
        if attr.usable:
            return True
        if attr.queue.deleting:
            self.blockers[key] = Blocker(kind="deleting", queue=attr.name, leaf=attr.name)
            return False
        if attr.queue.state != objects.QueueState.OPEN:
            self.blockers[key] = Blocker(
                kind="state", queue=attr.name, leaf=attr.name, detail=attr.queue.state.value
            )
            return False
        if attr.broken:
            self.blockers[key] = Blocker(
                kind="broken", queue=attr.name, leaf=attr.name, detail=attr.broken
            )
            return False
        if self.hierarchy and not attr.is_leaf:
            self.blockers[key] = Blocker(kind="not-leaf", queue=attr.name, leaf=attr.name)
            return False
        return True

    def allocatable(self, queue: str, task: frameworks.Task) -> bool:
        """Spec §3.6 along the leaf-first chain, reserved requests included at every level;
        then the number of pods, where a queue of the chain limits it (:meth:`_pods_fit`).

        This is the per-pod hot path of admission: a few list reads per chain member.
        """
        attr = self.attrs.get(queue)
        if attr is None or not attr.usable:
            return self._usable(attr, task.key)
        req = task.resreq
        dims = task.req_dims
        if task.key in self.reserved_tasks:
            # Already holding its own reservation: do not count it twice.
            for allocated, reserved, _, limit, target in attr.figures:
                for i in dims:
                    if allocated[i] + reserved[i] > limit[i]:
                        return self._refuse(task, target=target, leaf=attr, dim=i, held=True)
            return not attr.pods_chain or self._pods_fit(task, attr, held=True, gated=False)
        if task.pod.scheduling_gates:
            # Gate admission: pods being deleted still use their nodes until they are gone.
            for allocated, reserved, releasing, limit, target in attr.figures:
                for i in dims:
                    if allocated[i] + reserved[i] + releasing[i] + req[i] > limit[i]:
                        return self._refuse(task, target=target, leaf=attr, dim=i, held=False)
            return not attr.pods_chain or self._pods_fit(task, attr, held=False, gated=True)
        for allocated, reserved, _, limit, target in attr.figures:
            for i in dims:
                if allocated[i] + reserved[i] + req[i] > limit[i]:
                    return self._refuse(task, target=target, leaf=attr, dim=i, held=False)
        return not attr.pods_chain or self._pods_fit(task, attr, held=False, gated=False)

    def _pods_fit(
        self, task: frameworks.Task, attr: capacity_tree.QueueAttr, *, held: bool, gated: bool
    ) -> bool:
        """:meth:`allocatable` on ``pods``: the task's pods (``count``) with the pods each
        limiting member of the chain counts (allocated, reserved, and for a gated task being
        deleted) within its real capability of ``pods``. ``held``: the task's own reservation
        is among the reserved already."""
        count = 0 if held else task.pod.count
        pods = self.dims.pods
        for target in attr.pods_chain:
            used = target.allocated_pods + target.reserved_pods
            if gated:
                used += target.releasing_pods
            if used + count > target.real_capability[pods]:
                return self._refuse(task, target=target, leaf=attr, dim=pods, held=held)
        return True

    def _refuse(self, task: frameworks.Task, **where: Unpack[_Where]) -> bool:
        """Record why ``task`` is refused (:meth:`_quota_blocker` with ``where``); False."""
        self.blockers[task.key] = self._quota_blocker(task, **where)
        return False

    def _quota_blocker(
        self,
        task: frameworks.Task,
        *,
        target: capacity_tree.QueueAttr,
        leaf: capacity_tree.QueueAttr,
        dim: int,
        held: bool,
    ) -> Blocker:
        """The blocker of ``task`` refused by ``target`` (of ``leaf``'s chain) on dimension
        ``dim``, at its figures; ``held``: the task's own reservation is among them."""
        if dim == self.dims.pods:
            req = float(task.pod.count)
            allocated = float(target.allocated_pods)
            reserved = target.reserved_pods - (req if held else 0.0)
            releasing = float(target.releasing_pods)
        else:
            req = task.resreq[dim]
            allocated = target.allocated[dim]
            reserved = target.reserved[dim] - (req if held else 0.0)
            releasing = target.releasing[dim]
        if not task.pod.scheduling_gates or held:
            releasing = 0.0
        # The blocker's fields from ``queue`` to ``releasing``, in order.
        facts = (target.name, leaf.name, dim, req, allocated, reserved, releasing)
        blocker = self._interned.get(facts)
        if blocker is None:
            # Pods refused by the same queue at the same figures share one record (and later
            # one sentence): a full queue refuses thousands of identical pods.
            capability = target.real_capability[dim]
            blocker = self._interned[facts] = Blocker("quota", *facts, capability=capability)
        return blocker

    def admit_run(
        self, queue: str, task: frameworks.Task, keys: list[str], *, reserve: bool
    ) -> int:
        """:meth:`allocatable` for the members ``keys`` of a run (``frameworks.Run``), each a
        gated pod like ``task``, in order: how many of the first of them are admitted, each
        reserving its request when ``reserve`` (as ``session.reserve`` would, one after the
        other; recorded in :attr:`reserved_tasks` once, for ``task``), and the refused ones
        get the blocker the first refused one gets, which the per-pod path gives every one of
        them (nothing changes after a refusal).

        The count per chain member and resource is arithmetic (``vectors.repeat_add`` keeps
        it exactly what repeated additions give), checked against the per-pod comparison at
        the boundary.
        """
        n = len(keys)
        attr = self.attrs.get(queue)
        if attr is None or not attr.usable:
            if self._usable(attr, task.key):
                return n
            blocker = self.blockers.get(task.key)
            if blocker is not None:
                self.blockers.update(zip(keys, itertools.repeat(blocker)))
            return 0
        req = task.resreq
        dims = task.req_dims
        admitted = n
        for allocated, reserved, releasing, limit, _ in attr.figures:
            for i in dims:
                if admitted == 0:
                    break
                if limit[i] == vectors.MAXF:
                    continue  # no figure exceeds an unlimited one: every member passes here
                admitted = _prefix(
                    admitted,
                    allocated=allocated[i],
                    reserved=reserved[i],
                    releasing=releasing[i],
                    step=req[i] if reserve else 0.0,
                    req=req[i],
                    limit=limit[i],
                )
        members = task.pod.count  # the pods each member stands for
        pods = self.dims.pods
        for target in attr.pods_chain:
            if admitted == 0:
                break
            admitted = _prefix(
                admitted,
                allocated=target.allocated_pods,
                reserved=target.reserved_pods,
                releasing=target.releasing_pods,
                step=members if reserve else 0,
                req=members,
                limit=target.real_capability[pods],
            )
        if reserve and admitted:
            count = members * admitted
            for target in attr.chain:
                target_reserved = target.reserved
                for i in task.nonzero:
                    target_reserved[i] = vectors.repeat_add(target_reserved[i], req[i], admitted)
                target.reserved_pods += count
            self.reserved_tasks[task.key] = attr
        if admitted < n:
            # The first refused member, at the figures the admissions before it left (the
            # order of :meth:`allocatable`: the requests along the chain, then the pods).
            found = next(
                (
                    (target, i)
                    for allocated, reserved, releasing, limit, target in attr.figures
                    for i in dims
                    if allocated[i] + reserved[i] + releasing[i] + req[i] > limit[i]
                ),
                None,
            ) or next(
                (
                    (target, pods)
                    for target in attr.pods_chain
                    if target.allocated_pods
                    + target.reserved_pods
                    + target.releasing_pods
                    + members
                    > target.real_capability[pods]
                ),
                None,
            )
            if found is not None:
                target, i = found
                blocker = self._quota_blocker(task, target=target, leaf=attr, dim=i, held=False)
                self.blockers.update(
                    zip(itertools.islice(keys, admitted, None), itertools.repeat(blocker))
                )
        return admitted

    def enqueue_run(self, job: frameworks.Job, groups: list[str]) -> int:
        """:meth:`job_enqueueable` then :meth:`job_enqueued` for the member groups ``groups``
        of a run, each like ``job``, in order: how many of the first of them are enqueued
        (each adding its minResources to ``inqueue`` before the next is asked), and the
        refused ones get the blocker and the event the first refused one gets, which the
        per-pod path gives every one of them."""
        n = len(groups)
        attr = self.attrs.get(job.queue)
        if not self._usable(attr, job.key):
            blocker = self.blockers.get(job.key)
            if blocker is not None:
                self.blockers.update(zip(groups, itertools.repeat(blocker)))
            return 0
        assert attr is not None
        minimum = job.min_resources
        if minimum is None:
            return n
        gated = self.dims.zero()
        for task in job.tasks:
            if task.sch_gated and not task.pod.only_queue_gate:
                vectors.iadd(gated, task.resreq)
        delta = capacity_usage.deduct_gated(list(minimum), gated, self.dims)
        req_dims = vectors.requested_dims(minimum, self.dims)
        enqueued = n
        for target in attr.chain:
            for i in req_dims:
                if enqueued == 0:
                    break
                if target.real_capability[i] == vectors.MAXF:
                    continue  # no figure exceeds an unlimited one: every member passes here
                # minimum + allocated + inqueue - elastic > realCapability refuses.
                enqueued = _enqueue_prefix(
                    enqueued,
                    minimum=minimum[i],
                    allocated=target.allocated[i],
                    inqueue=target.inqueue[i],
                    elastic=target.elastic[i],
                    step=delta[i],
                    limit=target.real_capability[i],
                )
        # Runs are lone pods: their pods are checked at allocate (_pods_fit), not here; what
        # they hold is counted all the same (job_enqueued).
        need = max(0, job.min_member - job.ready)
        if enqueued:
            for target in attr.chain:
                inqueue = target.inqueue
                for i, value in enumerate(delta):
                    inqueue[i] = vectors.repeat_add(inqueue[i], value, enqueued)
                if attr.pods_chain:
                    target.inqueue_pods += need * enqueued
        if enqueued < n:
            refused = groups[enqueued:]
            before = self.blockers.get(job.key)
            events = len(self.session.events)
            if self.job_enqueueable(job) != frameworks.REJECT:  # pragma: no cover - invariant
                raise AssertionError("enqueue_run: the first refused member was admitted")
            blocker = self.blockers[job.key]
            event = self.session.events[events]
            del self.session.events[events:]
            if before is None:
                del self.blockers[job.key]
            else:
                self.blockers[job.key] = before
            self.blockers.update(zip(refused, itertools.repeat(blocker)))
            self.session.events.extend(dataclasses.replace(event, key=key) for key in refused)
        return enqueued

    def job_enqueueable(self, job: frameworks.Job) -> int:
        attr = self.attrs.get(job.queue)
        if not self._usable(attr, job.key):
            return frameworks.REJECT
        assert attr is not None
        minimum = job.min_resources
        if minimum is None:
            return frameworks.PERMIT
        req_dims = vectors.requested_dims(minimum, self.dims)
        for target in attr.chain:
            for i in req_dims:
                future = minimum[i] + target.allocated[i] + target.inqueue[i] - target.elastic[i]
                if future > target.real_capability[i]:
                    self._refuse_enqueue(
                        job,
                        target,
                        leaf=attr.name,
                        dim=i,
                        requested=minimum[i],
                        allocated=target.allocated[i] + target.inqueue[i] - target.elastic[i],
                    )
                    return frameworks.REJECT
        if attr.pods_chain and not job.group.synthetic and not self._group_pods_fit(job, attr):
            return frameworks.REJECT
        return frameworks.PERMIT

    def _group_pods_fit(self, job: frameworks.Job, attr: capacity_tree.QueueAttr) -> bool:
        """Enqueue on ``pods``, beyond the reference (whose requests carry no ``pods``): the
        group's ``minMember`` pods not running yet, with the pods each limiting queue of the
        chain runs (``allocated``) and holds for admitted groups (``inqueue``), within its
        real capability of ``pods``. Otherwise a gang larger than the room a ``pods``
        capability leaves would be Inqueue, holding its ``minResources``, and never run. Real
        PodGroups only: a lone pod's single-pod group is checked at allocate
        (:meth:`_pods_fit`), whose reason speaks of the pod."""
        pods = self.dims.pods
        need = max(0, job.min_member - job.ready)
        for target in attr.pods_chain:
            used = target.allocated_pods + target.inqueue_pods
            if need + used > target.real_capability[pods]:
                self._refuse_enqueue(
                    job,
                    target,
                    leaf=attr.name,
                    dim=pods,
                    requested=float(need),
                    allocated=float(used),
                )
                return False
        return True

    def _refuse_enqueue(
        self,
        job: frameworks.Job,
        target: capacity_tree.QueueAttr,
        *,
        leaf: str,
        dim: int,
        requested: float,
        allocated: float,
    ) -> None:
        """Record why ``job`` is not enqueued: ``target`` (``leaf`` or an ancestor) has no room
        for ``requested`` on dimension ``dim`` beside ``allocated``; and the PodGroup's event,
        in Volcano's words."""
        self.blockers[job.key] = Blocker(
            kind="enqueue",
            queue=target.name,
            leaf=leaf,
            dim=dim,
            requested=requested,
            allocated=allocated,
            capability=target.real_capability[dim],
        )
        self.session.events.append(
            decisions.Event(
                kind="PodGroup",
                key=job.key,
                type="Normal",
                reason="Unschedulable",
                message=f"queue resource quota insufficient: insufficient {self.dims.names[dim]}",
            )
        )

    def job_enqueued(self, job: frameworks.Job) -> None:
        attr = self.attrs.get(job.queue)
        if attr is None or job.min_resources is None:
            return
        if attr.pods_chain:
            held_pods = max(0, job.min_member - job.ready)
            for target in attr.chain:
                target.inqueue_pods += held_pods
        gated = self.dims.zero()
        for task in job.tasks:
            if task.pod.held_by_other_gates:
                vectors.iadd(gated, task.resreq)
        delta = capacity_usage.deduct_gated(list(job.min_resources), gated, self.dims)
        for target in attr.chain:
            vectors.iadd(target.inqueue, delta)

    # -- 6. reclaim -------------------------------------------------------------------------

    def preemptive(self, queue: str, tasks: list[frameworks.Task]) -> bool:
        attr = self.attrs.get(queue)
        if not self._usable(attr, tasks[0].key if tasks else queue):
            return False
        assert attr is not None
        return capacity_reclaim.preemptive(
            attr, tasks, dims=self.dims, hierarchy=self.hierarchy, level=self.level
        )

    def reclaimable(
        self, reclaimer: frameworks.Task, reclaimees: list[frameworks.Task]
    ) -> tuple[frameworks.Victims, int]:
        return capacity_reclaim.reclaimable(
            self.attrs,
            reclaimer,
            reclaimees,
            session=self.session,
            hierarchy=self.hierarchy,
            level=self.level,
        )

    def reclaim_reason(
        self, victim: frameworks.Task, reclaimer: frameworks.Task
    ) -> tuple[decisions.EvictionRule, str] | None:
        """Why this plugin let ``reclaimer`` take ``victim`` (``capacity_reclaim.
        reclaim_reason``); None when either queue has no figures."""
        attr = self.attrs.get(victim.job.queue)
        rattr = self.attrs.get(reclaimer.job.queue)
        if attr is None or rattr is None:
            return None
        return capacity_reclaim.reclaim_reason(
            attr, rattr, victim, dims=self.dims, hierarchy=self.hierarchy, level=self.level
        )


def _prefix(
    n: int,
    *,
    allocated: float,
    reserved: float,
    releasing: float,
    step: float,
    req: float,
    limit: float,
) -> int:
    """How many of ``n`` identical gated pods pass ``allocated + reserved + releasing + req >
    limit`` (the refusal of :meth:`CapacityPlugin.allocatable`) one after the other, each
    admitted one adding ``step`` to ``reserved``: a prefix, since the left side only grows."""

    def passes(j: int) -> bool:
        return not (allocated + vectors.repeat_add(reserved, step, j) + releasing + req > limit)

    return _count_prefix(
        n, passes, slack=limit - (allocated + reserved + releasing + req), step=step
    )


def _enqueue_prefix(
    n: int,
    *,
    minimum: float,
    allocated: float,
    inqueue: float,
    elastic: float,
    step: float,
    limit: float,
) -> int:
    """As :func:`_prefix`, for :meth:`CapacityPlugin.job_enqueueable`'s refusal ``minimum +
    allocated + inqueue - elastic > limit``, each enqueued group adding ``step`` to
    ``inqueue``."""

    def passes(j: int) -> bool:
        future = minimum + allocated + vectors.repeat_add(inqueue, step, j) - elastic
        return not future > limit

    return _count_prefix(
        n, passes, slack=limit - (minimum + allocated + inqueue - elastic), step=step
    )


def _count_prefix(n: int, passes: Callable[[int], bool], *, slack: float, step: float) -> int:
    """The number of leading ``j`` in ``range(n)`` with ``passes(j)`` (a monotone predicate:
    true then false), guessed from ``slack / step`` and settled by ``passes`` itself at the
    boundary, so rounding in the guess never changes the answer."""
    if not passes(0):
        return 0
    if step <= 0 or slack == math.inf:
        return n if step <= 0 or passes(n - 1) else _bisect(n, passes)
    guess = min(n, int(slack // step) + 1) if slack == slack else 1
    guess = max(guess, 1)
    while guess > 1 and not passes(guess - 1):
        guess -= 1
    while guess < n and passes(guess):
        guess += 1
    return guess


def _bisect(n: int, passes: Callable[[int], bool]) -> int:
    """The prefix length by bisection (``passes(0)`` holds, ``passes(n - 1)`` does not)."""
    low, high = 1, n - 1
    while low < high:
        middle = (low + high) // 2
        if passes(middle):
            low = middle + 1
        else:
            high = middle
    return low
