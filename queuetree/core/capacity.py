"""The capacity plugin: queue quotas, flat (spec §3.3) and hierarchical (§3.4-3.10).

Each queue gets a :class:`QueueAttr` with dense figures (``vectors``): ``deserved``,
``allocated``, ``request``, ``elastic``, ``inqueue``, ``capability``, ``real_capability``,
``guarantee`` and, for gate admission (§5.3), ``reserved``. Work runs only in leaf queues; in
hierarchy mode every figure a leaf gains is added to each ancestor (bottom-up accounting), and
capacity checks walk the leaf-first chain ``[leaf, parent, ..., root]``.

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
  queue and every ancestor whose real capability of ``pods`` is finite (:attr:`QueueAttr.
  pods_chain`), counted from ``allocated_pods``, ``reserved_pods`` and ``releasing_pods`` as
  the requests are from the vectors; a guarantee of ``pods`` keeps that many pods from reclaim.
  The reference never counts pods: a pod's request has no ``pods``, and its checks skip it.
  The vectors keep ``pods`` at 0, so shares, the deserved comparisons and the node figures are
  the reference's.

Rejections are recorded (:class:`Blocker`) so that ``explaining`` can tell a person which queue
blocks a pod, on which resource, with the figures.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Collection
from typing import Any

from queuetree.core import conditions, configs, decisions, frameworks, objects, vectors

NAME = "capacity"


@dataclasses.dataclass(slots=True, eq=False)
class QueueAttr:
    """The capacity figures of one queue in one session (Volcano's ``queueAttr``)."""

    name: str
    queue: objects.Queue
    deserved: vectors.Vec
    deserved_keys: frozenset[int]
    guarantee: vectors.Vec
    capability: vectors.Vec
    capability_keys: frozenset[int]
    capability_set: bool
    allocated: vectors.Vec
    request: vectors.Vec
    elastic: vectors.Vec
    inqueue: vectors.Vec
    reserved: vectors.Vec
    releasing: vectors.Vec
    """Requests of the queue's pods that are being deleted but still hold a node (subtree)."""
    real_capability: vectors.Vec
    allocated_pods: int = 0
    """Pods in ``allocated`` (what ``status.allocated["pods"]`` reports), subtree included."""
    reserved_pods: int = 0
    """Pods in ``reserved``: admitted, not yet placed, subtree included."""
    releasing_pods: int = 0
    """Pods in ``releasing``: being deleted, still on a node, subtree included."""
    pods_chain: tuple[QueueAttr, ...] = ()
    """The members of ``chain`` that limit how many pods run in their subtree, leaf first: those
    with a ``pods`` capability (their own, or inherited in hierarchy mode) and so a finite real
    capability of ``pods`` (siblings' guarantees of ``pods`` are carved out of it, as of any
    resource). Empty for nearly every queue: the hot path checks pods only when it is not."""
    ancestors: tuple[QueueAttr, ...] = ()
    """Root first, parent last; empty for root (and for every queue in flat mode)."""
    chain: tuple[QueueAttr, ...] = ()
    """Leaf first: the queue itself, its parent, ..., root."""
    children: list[QueueAttr] = dataclasses.field(default_factory=list)
    share: float = 0.0
    has_deserved: bool = False
    """``deserved`` is not empty (pods aside): set once the deserved figure is final."""
    broken: str = ""
    """Why the queue cannot admit anything (cycle, missing parent); "" when it is sound."""
    usable: bool = False
    """Open, sound and (in hierarchy mode) a leaf: set once the tree is built."""
    figures: tuple[tuple[vectors.Vec, vectors.Vec, vectors.Vec, vectors.Vec, QueueAttr], ...] = ()
    """``(allocated, reserved, releasing, real_capability, queue)`` along the chain, for the
    hot path (the lists are updated in place, so this stays current)."""

    @property
    def is_leaf(self) -> bool:
        return not self.children

    @property
    def ancestor_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.ancestors)

    def depth_ancestor(self, level: int) -> QueueAttr | None:
        """The ancestor ``level`` steps up (1 = parent), or None above root."""
        if level > len(self.ancestors):
            return None
        return self.ancestors[len(self.ancestors) - level]


@dataclasses.dataclass(frozen=True, slots=True)
class Blocker:
    """Why the capacity plugin refused a task (the input of an explanation)."""

    kind: str
    """``quota``, ``state``, ``not-leaf``, ``broken`` or ``enqueue``."""
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
        self.attrs: dict[str, QueueAttr] = {}
        self.reserved_tasks: dict[str, QueueAttr] = {}
        """Task key -> the leaf whose chain holds the task's reserved request (for a run, its
        one task stands for the members it admitted: ``frameworks.Run.ungated`` counts them,
        and the other members are no tasks, so nothing looks them up here)."""
        self.blockers: dict[str, Blocker] = {}
        """Task key or job key -> the last rejection."""
        self.faults: dict[str, list[conditions.Fault]] = {}
        """Queue name -> what is wrong with it, in the order found (its readiness condition)."""
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
        if self.hierarchy:
            self._build_hierarchy(session)
        else:
            self._build_flat(session)
        for attr in self.attrs.values():
            attr.share = vectors.share(attr.allocated, attr.deserved, self.dims)
            attr.has_deserved = not vectors.is_empty(attr.deserved, self.dims)
            attr.usable = (
                attr.queue.state == objects.QueueState.OPEN
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

    def _new_attr(self, queue: objects.Queue) -> QueueAttr:
        dims = self.dims
        zero = dims.zero
        return QueueAttr(
            name=queue.name,
            queue=queue,
            deserved=dims.vec(queue.deserved),
            deserved_keys=dims.present(queue.deserved),
            guarantee=dims.vec(queue.guarantee),
            capability=dims.vec(queue.capability),
            capability_keys=dims.present(queue.capability),
            # ``objects.Queue.capability`` is None when spec.capability is absent or {}; a map
            # of zeros is "set" (Volcano: non-empty ResourceList), so a {gpu: 0} caps GPUs at 0.
            capability_set=queue.capability is not None,
            allocated=zero(),
            request=zero(),
            elastic=zero(),
            inqueue=zero(),
            reserved=zero(),
            releasing=zero(),
            real_capability=zero(),
        )

    def _account_jobs(self, session: frameworks.Session) -> None:
        """Spec §3.2, then bottom-up: every figure of a leaf is added to its ancestors.

        Sums are gathered per leaf first and pushed up the chain once per leaf (not once per
        job), which keeps session open linear in pods with a small constant.
        """
        dims = self.dims
        leaves: dict[str, tuple[vectors.Vec, vectors.Vec, vectors.Vec, vectors.Vec]] = {}
        leaf_pods: dict[str, int] = {}
        """Leaf -> allocated pods."""
        allocated_statuses = objects.ALLOCATED_STATUSES
        pending = objects.TaskStatus.PENDING
        releasing = objects.TaskStatus.RELEASING
        leaf_releasing: dict[str, vectors.Vec] = {}
        leaf_releasing_pods: dict[str, int] = {}
        pending_requests: dict[str, dict[int, list[Any]]] = {}
        """Leaf -> id of a pending request vector -> [vector, count]."""
        for job in session.jobs.values():
            attr = self.attrs.get(job.queue)
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
                        self._add_releasing(leaf_releasing, leaf_releasing_pods, attr.name, task)
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
                    self._add_releasing(leaf_releasing, leaf_releasing_pods, attr.name, task)
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
                rest = self._deduct_gated(rest, gated)
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
            for target in self.attrs[name].chain:
                if allocates:
                    vectors.iadd(target.allocated, allocated_sum)
                vectors.iadd(target.request, request_sum)
                if enqueues:
                    vectors.iadd(target.inqueue, inqueue_sum)
                if lends:
                    vectors.iadd(target.elastic, elastic_sum)
                target.allocated_pods += pods
        for name, releasing_sum in leaf_releasing.items():
            releasing_pods = leaf_releasing_pods[name]
            for target in self.attrs[name].chain:
                vectors.iadd(target.releasing, releasing_sum)
                target.releasing_pods += releasing_pods

    def _add_releasing(
        self,
        sums: dict[str, vectors.Vec],
        counts: dict[str, int],
        leaf: str,
        task: frameworks.Task,
    ) -> None:
        """A pod being deleted that still holds its node: its request (and its place among the
        queue's pods) stays in use (a grace period can last minutes), so gated pods of its
        queue wait until it is gone."""
        total = sums.get(leaf)
        if total is None:
            total = sums[leaf] = self.dims.zero()
        vectors.iadd(total, task.resreq)
        counts[leaf] = counts.get(leaf, 0) + task.pod.count

    def _deduct_gated(self, res: vectors.Vec, gated: vectors.Vec | None) -> vectors.Vec:
        """``DeductSchGated``: pods held by other gates do not count as inqueue."""
        if gated is None or vectors.is_empty(gated, self.dims):
            return res
        return [r - g if r > g else 0.0 for r, g in zip(res, gated, strict=True)]

    def _build_flat(self, session: frameworks.Session) -> None:
        dims = self.dims
        total_guarantee = dims.zero()
        for queue in session.queues.values():
            vectors.iadd(total_guarantee, dims.vec(queue.guarantee))
        total = session.total_resource
        spare = vectors.exceeded(total, total_guarantee)
        spare_keys = frozenset(
            i for i in range(2, dims.size) if total[i] > total_guarantee[i] and total[i] != 0
        )
        for queue in session.queues.values():
            attr = self._new_attr(queue)
            attr.chain = (attr,)
            if attr.capability_set:
                for i in (vectors.CPU, vectors.MEMORY):
                    if attr.capability[i] <= 0:
                        attr.capability[i] = vectors.MAXF
            real = vectors.add(spare, attr.guarantee)
            real_keys = spare_keys | dims.present(queue.guarantee)
            if attr.capability_set:
                for i in range(dims.size):
                    if (i < 2 or i in attr.capability_keys) and attr.capability[i] < real[i]:
                        real[i] = attr.capability[i]
            attr.real_capability = real
            # deserved.MinDimensionResource(realCapability, Infinity), then Max(., guarantee).
            for i in range(dims.size):
                if (i < 2 or i in real_keys) and real[i] < attr.deserved[i]:
                    attr.deserved[i] = real[i]
            self._max_with_guarantee(attr)
            self.attrs[queue.name] = attr
        self._account_jobs(session)

    def _max_with_guarantee(self, attr: QueueAttr) -> None:
        for i, g in enumerate(attr.guarantee):
            if g > attr.deserved[i]:
                attr.deserved[i] = g
        attr.deserved_keys = attr.deserved_keys | frozenset(
            i for i in range(2, self.dims.size) if attr.guarantee[i] != 0
        )

    def _build_hierarchy(self, session: frameworks.Session) -> None:
        dims = self.dims
        queues = dict(session.queues)
        if objects.ROOT_QUEUE not in queues:
            # Volcano's cache creates root at start-up; a snapshot without it gets an implicit one.
            queues[objects.ROOT_QUEUE] = objects.Queue(name=objects.ROOT_QUEUE, reclaimable=False)
            session.warnings.append(
                'queue "root" is not in the snapshot: using an implicit root with unlimited '
                "capability"
            )
        for queue in queues.values():
            self.attrs[queue.name] = self._new_attr(queue)
        self._link_tree(session, queues)
        root = self.attrs[objects.ROOT_QUEUE]
        self._block_jobs_in_parents(session)
        self._account_jobs(session)
        # 4. root: an empty capability is infinite (every node scalar too): jobs may exceed the
        # cluster's current size; a set capability is used as written.
        if vectors.is_empty(root.capability, dims):
            infinite = dims.zero()
            infinite[vectors.CPU] = vectors.MAXF
            infinite[vectors.MEMORY] = vectors.MAXF
            keys: set[int] = set()
            for node in session.node_list:
                scalars = node.node.allocatable.scalars
                if scalars:
                    keys.update(dims.index[name] for name in scalars)
            for i in keys:
                infinite[i] = vectors.MAXI
            root.capability = infinite
            root.capability_keys = frozenset(keys)
        if dims.pods >= 0 and dims.pods not in root.capability_keys:
            # Root limits pods only when its capability says so: a cluster without nodes yet
            # (an autoscaler scales it from zero) or a root capability that leaves pods out
            # must not refuse every pod under a queue with a pods capability.
            root.capability[dims.pods] = vectors.MAXI
            root.capability_keys = root.capability_keys | {dims.pods}
        root.real_capability = list(root.capability)
        self._check_hierarchy(session, root)

    def _link_tree(self, session: frameworks.Session, queues: dict[str, objects.Queue]) -> None:
        """Ancestors and children; queues on a cycle, under a missing parent or more than
        ``objects.MAX_QUEUE_DEPTH`` levels below root (and the queues below them) are broken.

        Iterative, and linear in the number of queues: each queue is walked once, and no chain
        longer than the depth limit is ever built.
        """
        attrs = self.attrs
        limit = objects.MAX_QUEUE_DEPTH
        resolved: dict[str, tuple[QueueAttr, ...] | None] = {objects.ROOT_QUEUE: ()}
        """Queue -> its ancestors (root first), None when it is broken."""
        depths: dict[str, int] = {objects.ROOT_QUEUE: 0}
        """Levels below root, of every queue whose path to root is known (too deep or not)."""
        causes: dict[str, str] = {}
        """Broken queue -> what broke it: ``cycle``, ``missing parent`` or ``too deep``."""
        for name in sorted(attrs):
            path: list[str] = []
            on_path: set[str] = set()
            current = name
            while current not in resolved:
                if current in on_path:
                    cycle = path[path.index(current) :]
                    session.errors.append(
                        f"queue {current!r}: spec.parent forms a cycle "
                        f"({' -> '.join([*cycle, current])}); queues on it and below it admit "
                        "nothing"
                    )
                    for at, member in enumerate(cycle):
                        # The loop as seen from this member: it starts and ends there.
                        loop = " -> ".join([*cycle[at:], *cycle[:at], member])
                        attrs[member].broken = f"queue {member!r} is on a parent cycle ({loop})"
                        self._fault(
                            member,
                            conditions.QueueReason.HIERARCHY_CYCLE,
                            f"queue {member!r} is on a parent cycle ({loop}): it and the queues "
                            "below it admit nothing; set spec.parent of one queue on the cycle "
                            "to a queue outside it (root, for instance)",
                        )
                        resolved[member] = None
                        causes[member] = "cycle"
                    break
                path.append(current)
                on_path.add(current)
                parent = attrs[current].queue.parent_name
                if parent not in attrs:
                    session.errors.append(
                        f"queue {current!r}: spec.parent {parent!r} does not exist; it and the "
                        "queues below it admit nothing"
                    )
                    attrs[current].broken = f"queue {current!r} has a missing parent {parent!r}"
                    self._fault(
                        current,
                        conditions.QueueReason.PARENT_NOT_FOUND,
                        f"queue {current!r}: spec.parent {parent!r} does not exist, so it and "
                        f"the queues below it admit nothing; create queue {parent!r} or set "
                        "spec.parent to an existing queue",
                    )
                    resolved[current] = None
                    causes[current] = "missing parent"
                    break
                current = parent
            # Walk the recorded path back down: each queue's parent is resolved by then.
            for member in reversed(path):
                if member in resolved:
                    continue
                parent = attrs[member].queue.parent_name
                above = resolved[parent]
                parent_depth = depths.get(parent)
                depth = None if parent_depth is None else parent_depth + 1
                if depth is not None:
                    depths[member] = depth
                if above is not None and depth is not None and depth <= limit:
                    resolved[member] = (*above, attrs[parent])
                    continue
                resolved[member] = None
                if above is not None:
                    session.errors.append(
                        f"queue {member!r}: {depth} levels below root, deeper than the {limit} "
                        "levels queuetree supports; it and the queues below it admit nothing"
                    )
                cause = "too deep" if above is not None else causes.get(parent, "missing parent")
                causes[member] = cause
                if cause == "too deep":
                    attrs[member].broken = (
                        f"queue {member!r} is {depth} levels below root, deeper than the "
                        f"{limit} levels queuetree supports (the most --max-queue-depth "
                        "allows); move it closer to root"
                    )
                    self._fault(member, conditions.QueueReason.TOO_DEEP, attrs[member].broken)
                elif not attrs[member].broken:
                    attrs[member].broken = f"queue {member!r} is below a broken queue ({cause})"
                    self._fault(
                        member,
                        conditions.QueueReason.ANCESTOR_NOT_READY,
                        f"queue {member!r} admits nothing: an ancestor is broken ({cause}); "
                        f"fix the ancestor (kubectl get queues shows its condition)",
                    )
        for name, attr in sorted(attrs.items()):
            ancestors = resolved.get(name)
            if name == objects.ROOT_QUEUE or ancestors is None:
                attr.chain = (attr,)
                continue
            attr.ancestors = ancestors
            attr.chain = (attr, *reversed(ancestors))
            ancestors[-1].children.append(attr)

    def _block_jobs_in_parents(self, session: frameworks.Session) -> None:
        seen: set[str] = set()
        for job in sorted(session.jobs.values(), key=lambda j: j.key):
            attr = self.attrs.get(job.queue)
            if attr is None or attr.is_leaf or attr.broken:
                continue
            session.errors.append(
                f"pod group {job.key}: spec.queue {job.queue!r} is not a leaf queue (it has "
                f"children {', '.join(sorted(c.name for c in attr.children))}); only this "
                "pod group is held back"
            )
            if job.queue not in seen:
                self._fault(
                    job.queue,
                    conditions.QueueReason.NOT_LEAF_WITH_WORKLOADS,
                    f"queue {job.queue!r} has child queues "
                    f"({', '.join(sorted(c.name for c in attr.children))}) and pod groups of "
                    f"its own (first: {job.key}): only leaf queues admit, so they wait; move "
                    "them to a leaf queue (spec.queue, or the pods' queue-name annotation)",
                )
            seen.add(job.queue)

    def _check_hierarchy(self, session: frameworks.Session, root: QueueAttr) -> None:
        """``checkHierarchicalQueue``: inheritance, real capability, sums (warnings only), each
        parent before its children, depth first (as the reference recurses), without
        recursion."""
        stack = [root]
        while stack:
            parent = stack.pop()
            self._check_children(session, parent)
            stack.extend(reversed(parent.children))

    def _check_children(self, session: frameworks.Session, parent: QueueAttr) -> None:
        """One step of :meth:`_check_hierarchy`: ``parent``'s children against ``parent``."""
        dims = self.dims
        total_deserved = dims.zero()
        total_guarantee = dims.zero()
        for child in parent.children:
            self._max_with_guarantee(child)
            vectors.iadd(total_deserved, child.deserved)
            vectors.iadd(total_guarantee, child.guarantee)
            for i in (vectors.CPU, vectors.MEMORY):
                if child.capability[i] <= 0:
                    child.capability[i] = parent.capability[i]
            for i in parent.capability_keys - child.capability_keys:
                child.capability[i] = parent.capability[i]
            child.capability_keys = child.capability_keys | parent.capability_keys
            exceeding = [
                dims.names[i]
                for i in range(dims.size)
                if (i < 2 or i in child.capability_keys)
                and (i < 2 or i in parent.capability_keys)
                and not vectors.le(child.capability[i], parent.capability[i])
            ]
            if exceeding:
                session.warnings.append(
                    f"queue {child.name!r}: capability exceeds parent {parent.name!r} on "
                    f"{', '.join(exceeding)}; the parent's limit applies"
                )
                self._fault(
                    child.name,
                    conditions.QueueReason.CAPABILITY_ABOVE_PARENT,
                    f"queue {child.name!r}: spec.capability exceeds parent {parent.name!r}'s "
                    f"on {', '.join(exceeding)}, so the parent's limit applies; lower it to at "
                    "most the parent's to say what holds",
                )
        if parent.name == objects.ROOT_QUEUE:
            parent.guarantee = total_guarantee
            parent.deserved = total_deserved
            parent.deserved_keys = frozenset().union(*(c.deserved_keys for c in parent.children))
        for child in parent.children:
            real = vectors.add(
                vectors.exceeded(parent.real_capability, total_guarantee), child.guarantee
            )
            for i in range(dims.size):
                if (i < 2 or i in child.capability_keys) and child.capability[i] < real[i]:
                    real[i] = child.capability[i]
            child.real_capability = real
        if parent.children and parent.name != objects.ROOT_QUEUE:
            over = [
                dims.names[i]
                for i in range(dims.size)
                if total_deserved[i] > parent.deserved[i] and i != dims.pods
            ]
            if over:
                session.warnings.append(
                    f"queue {parent.name!r}: the children's deserved "
                    f"({dims.format(total_deserved)}) "
                    f"exceeds its deserved ({dims.format(parent.deserved)}) on {', '.join(over)}"
                )
                self._fault(
                    parent.name,
                    conditions.QueueReason.CHILDREN_OVER_PARENT,
                    f"queue {parent.name!r}: its children's deserved "
                    f"({dims.format(total_deserved)}) exceeds its own "
                    f"({dims.format(parent.deserved)}) on {', '.join(over)}, so they cannot all "
                    "get their share at once; lower theirs or raise its spec.deserved",
                )
            over = [
                dims.names[i]
                for i in range(dims.size)
                if total_guarantee[i] > parent.guarantee[i] and i != dims.pods
            ]
            if over:
                session.warnings.append(
                    f"queue {parent.name!r}: the children's guarantee "
                    f"({dims.format(total_guarantee)}) exceeds its guarantee "
                    f"({dims.format(parent.guarantee)}) on {', '.join(over)}"
                )
                self._fault(
                    parent.name,
                    conditions.QueueReason.CHILDREN_OVER_PARENT,
                    f"queue {parent.name!r}: its children's guarantee "
                    f"({dims.format(total_guarantee)}) exceeds its own "
                    f"({dims.format(parent.guarantee)}) on {', '.join(over)}; lower theirs or "
                    "raise its spec.guarantee",
                )

    def _fault(self, queue: str, reason: conditions.QueueReason, message: str) -> None:
        self.faults.setdefault(queue, []).append(conditions.Fault(reason, message))

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

    def _reserve(self, task: frameworks.Task, attr: QueueAttr) -> None:
        if task.key in self.reserved_tasks:
            return
        self.reserved_tasks[task.key] = attr
        req = task.resreq
        dims = task.nonzero
        count = task.pod.count
        for target in attr.chain:
            reserved = target.reserved
            for i in dims:
                reserved[i] += req[i]
            target.reserved_pods += count

    def _unreserve(self, task: frameworks.Task) -> None:
        attr = self.reserved_tasks.pop(task.key, None)
        if attr is None:
            return
        req = task.resreq
        dims = task.nonzero
        count = task.pod.count
        for target in attr.chain:
            reserved = target.reserved
            for i in dims:
                reserved[i] -= req[i]
            target.reserved_pods -= count

    def on_reserve(self, task: frameworks.Task) -> None:
        attr = self.attrs.get(task.job.queue)
        if attr is not None:
            self._reserve(task, attr)

    def on_unreserve(self, task: frameworks.Task) -> None:
        self._unreserve(task)

    # -- 3. events --------------------------------------------------------------------------

    def on_allocate(self, task: frameworks.Task) -> None:
        attr = self.attrs.get(task.job.queue)
        if attr is None:
            return
        for target in attr.chain:
            vectors.iadd(target.allocated, task.resreq)
            target.allocated_pods += task.pod.count
            # Deliberate fix: every ancestor's share follows its allocation.
            target.share = vectors.share(target.allocated, target.deserved, self.dims)
        if self.gate_on:
            self._unreserve(task)

    def on_deallocate(self, task: frameworks.Task) -> None:
        attr = self.attrs.get(task.job.queue)
        if attr is None:
            return
        for target in attr.chain:
            vectors.isub(target.allocated, task.resreq)
            target.allocated_pods -= task.pod.count
            target.share = vectors.share(target.allocated, target.deserved, self.dims)
        if self.gate_on and task.pod.reserves and task.status != objects.TaskStatus.RELEASING:
            # Volcano re-reserves every annotated task, even a running one being evicted
            # (spec §7.6); a task that is leaving its node no longer needs its queue's room.
            self._reserve(task, attr)

    # -- 4. ordering ------------------------------------------------------------------------

    def queue_order(self, left: str, right: str) -> int:
        la = self.attrs.get(left)
        ra = self.attrs.get(right)
        if la is None or ra is None:
            return 0
        if la.queue.priority != ra.queue.priority:
            return ra.queue.priority - la.queue.priority
        if not self.hierarchy:
            return _compare_share(la, ra)
        if la.is_leaf != ra.is_leaf:
            return -1 if la.is_leaf else 1
        if not la.is_leaf:
            return _compare_share(la, ra)
        level = _queue_level(la, ra)
        lrep = la.ancestors[level + 1] if level + 1 < len(la.ancestors) else la
        rrep = ra.ancestors[level + 1] if level + 1 < len(ra.ancestors) else ra
        return _compare_share(lrep, rrep)

    def queue_order_key(self, names: Collection[str]) -> Callable[[str], Any] | None:
        """:meth:`queue_order` as a sort key for ``names``, when one exists (see
        ``frameworks.Plugin.queue_order_key``): priority (higher first), then in hierarchy
        mode leaves before the other queues, then shares (:func:`_share_key`): a queue's own
        for a non-leaf queue and in flat mode, and for a leaf the shares along its path from
        root that :func:`_leaf_paths` keeps. None when a queue has no figures or a share is
        NaN, or when equal shares make the comparator's order one no key gives."""
        attrs: list[QueueAttr] = []
        for name in names:
            attr = self.attrs.get(name)
            if attr is None or attr.share != attr.share:
                return None  # compared as equal to every queue; NaN compares as neither
            attrs.append(attr)
        if not self.hierarchy:
            keys = {a.name: (-a.queue.priority, _share_key(a)) for a in attrs}
            return keys.__getitem__
        paths = _leaf_paths([a for a in attrs if a.is_leaf])
        if paths is None:
            return None
        ordered: dict[str, tuple[Any, ...]] = {}
        for a in attrs:
            if a.is_leaf:
                ordered[a.name] = (-a.queue.priority, False, paths[a.name])
            else:
                ordered[a.name] = (-a.queue.priority, True, (_share_key(a),))
        return ordered.__getitem__

    def victim_queue_order(self, left: str, right: str, preemptor: str) -> int:
        if not self.hierarchy:
            return 0
        la, ra, pa = self.attrs.get(left), self.attrs.get(right), self.attrs.get(preemptor)
        if la is None or ra is None or pa is None:
            return 0
        ll = _queue_level(la, pa)
        rl = _queue_level(ra, pa)
        if ll == rl:
            return 0
        return -1 if ll > rl else 1

    # -- 5. checks --------------------------------------------------------------------------

    def _usable(self, attr: QueueAttr | None, key: str) -> bool:
        if attr is None:
            return False
        if attr.usable:
            return True
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

    def _pods_fit(self, task: frameworks.Task, attr: QueueAttr, *, held: bool, gated: bool) -> bool:
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

    def _refuse(
        self,
        task: frameworks.Task,
        *,
        target: QueueAttr,
        leaf: QueueAttr,
        dim: int,
        held: bool,
    ) -> bool:
        self.blockers[task.key] = self._quota_blocker(
            task, target=target, leaf=leaf, dim=dim, held=held
        )
        return False

    def _quota_blocker(
        self,
        task: frameworks.Task,
        *,
        target: QueueAttr,
        leaf: QueueAttr,
        dim: int,
        held: bool,
    ) -> Blocker:
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
        facts = (target.name, leaf.name, dim, req, allocated, reserved, releasing)
        blocker = self._interned.get(facts)
        if blocker is None:
            # Pods refused by the same queue at the same figures share one record (and later
            # one sentence): a full queue refuses thousands of identical pods.
            blocker = self._interned[facts] = Blocker(
                kind="quota",
                queue=target.name,
                leaf=leaf.name,
                dim=dim,
                requested=req,
                allocated=allocated,
                reserved=reserved,
                releasing=releasing,
                capability=target.real_capability[dim],
            )
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
        delta = self._deduct_gated(list(minimum), gated)
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
        if enqueued:
            for target in attr.chain:
                inqueue = target.inqueue
                for i, value in enumerate(delta):
                    inqueue[i] = vectors.repeat_add(inqueue[i], value, enqueued)
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
                    self.blockers[job.key] = Blocker(
                        kind="enqueue",
                        queue=target.name,
                        leaf=attr.name,
                        dim=i,
                        requested=minimum[i],
                        allocated=target.allocated[i] + target.inqueue[i] - target.elastic[i],
                        capability=target.real_capability[i],
                    )
                    self.session.events.append(
                        decisions.Event(
                            kind="PodGroup",
                            key=job.key,
                            type="Normal",
                            reason="Unschedulable",
                            message="queue resource quota insufficient: "
                            f"insufficient {self.dims.names[i]}",
                        )
                    )
                    return frameworks.REJECT
        return frameworks.PERMIT

    def job_enqueued(self, job: frameworks.Job) -> None:
        attr = self.attrs.get(job.queue)
        if attr is None or job.min_resources is None:
            return
        gated = self.dims.zero()
        for task in job.tasks:
            if task.pod.held_by_other_gates:
                vectors.iadd(gated, task.resreq)
        delta = self._deduct_gated(list(job.min_resources), gated)
        for target in attr.chain:
            vectors.iadd(target.inqueue, delta)

    def preemptive(self, queue: str, tasks: list[frameworks.Task]) -> bool:
        attr = self.attrs.get(queue)
        if not self._usable(attr, tasks[0].key if tasks else queue):
            return False
        assert attr is not None
        total = self.dims.zero()
        for task in tasks:
            vectors.iadd(total, task.resreq)
        future = vectors.add(attr.allocated, total)
        if (
            vectors.first_exceeding(
                future,
                attr.real_capability,
                req_dims=vectors.requested_dims(total, self.dims),
            )
            >= 0
        ):
            return False
        if (
            attr in attr.pods_chain
            and attr.allocated_pods + sum(task.pod.count for task in tasks)
            > attr.real_capability[self.dims.pods]
        ):
            return False
        if vectors.partly_within_zero_filtered(future, attr.deserved, req=total, dims=self.dims):
            return True
        if self.hierarchy and self.level > 0:
            for level in range(1, self.level + 1):
                ancestor = attr.depth_ancestor(level)
                if ancestor is None or ancestor.name == objects.ROOT_QUEUE:
                    continue
                if vectors.partly_within_zero_filtered(
                    vectors.add(ancestor.allocated, total),
                    ancestor.deserved,
                    req=total,
                    dims=self.dims,
                ):
                    return True
        return False

    def reclaimable(
        self, reclaimer: frameworks.Task, reclaimees: list[frameworks.Task]
    ) -> tuple[frameworks.Victims, int]:
        rattr = self.attrs.get(reclaimer.job.queue)
        if rattr is None or rattr.broken:
            return [], frameworks.REJECT
        dims = self.dims
        session = self.session
        working: dict[str, vectors.Vec] = {}
        victims: frameworks.Victims = []
        candidates = sorted(
            reclaimees,
            key=session.victim_key(reclaimer),
        )
        reclaimer_names = vectors.names(reclaimer.resreq)
        for ee in candidates:
            attr = self.attrs.get(ee.job.queue)
            if attr is None:
                continue
            ee_names = vectors.names(ee.resreq)
            if not (ee_names & reclaimer_names) - {dims.pods}:
                continue
            alloc = working.get(attr.name)
            if alloc is None:
                alloc = working[attr.name] = self._with_pods(attr.allocated, attr.allocated_pods)
            after = vectors.sub(alloc, ee.resreq)
            if dims.pods >= 0:
                after[dims.pods] -= ee.pod.count
            if not vectors.less_equal_zero(attr.guarantee, after):
                continue  # guarantee protection
            if not ee_names & vectors.names(attr.deserved):
                # An immediate victim: the victim's queue deserves nothing of what it holds.
                if (
                    self.hierarchy
                    and self.level > 0
                    and _shares_non_root_ancestor(rattr, attr, self.level)
                    and not vectors.names(reclaimer.resreq) & vectors.names(rattr.deserved)
                ):
                    continue  # leaf-level contention-avoidance gate
            elif not vectors.greater_on_relevant(
                alloc, attr.deserved, deserved_keys=attr.deserved_keys, req=ee.resreq, dims=dims
            ):
                continue
            checked: dict[str, vectors.Vec] = {}
            if self.hierarchy and self.level > 0:
                blocked = False
                for level in range(1, self.level + 1):
                    ancestor, need = _ancestor_to_check(rattr, attr, level)
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

    def _with_pods(self, allocated: vectors.Vec, pods: int) -> vectors.Vec:
        """A copy of ``allocated`` with its pods counted in the ``pods`` dimension (where the
        vectors keep 0), for reclaim's guarantee protection: a guarantee of ``pods`` keeps that
        many of the queue's pods (the reference, whose figures never count pods, protects
        every pod of such a queue)."""
        copy = list(allocated)
        if self.dims.pods >= 0:
            copy[self.dims.pods] = pods
        return copy


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


def _compare_share(left: QueueAttr, right: QueueAttr) -> int:
    """``compareShareWithDeserved``: smaller share first; on equal shares a queue with a
    deserved quota goes before a best-effort one."""
    if left.share == right.share:
        if left.has_deserved == right.has_deserved:
            return 0
        return -1 if left.has_deserved else 1
    return -1 if left.share < right.share else 1


def _share_key(attr: QueueAttr) -> tuple[float, bool]:
    """:func:`_compare_share` as a key: smaller share first, then a queue with a deserved
    quota before a best-effort one."""
    return (attr.share, not attr.has_deserved)


ShareKeys = tuple[tuple[float, bool], ...]


def _leaf_paths(leaves: list[QueueAttr]) -> dict[str, ShareKeys] | None:
    """Leaf name -> a key that orders ``leaves`` as the hierarchical :meth:`queue_order`
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
    children: dict[int, dict[int, QueueAttr]] = {}
    paths: list[tuple[QueueAttr, ...]] = []
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


def _queue_level(left: QueueAttr, right: QueueAttr) -> int:
    """``getQueueLevel``: index of the deepest common entry of the two ancestor lists."""
    level = 0
    for i in range(min(len(left.ancestors), len(right.ancestors))):
        if left.ancestors[i] is right.ancestors[i]:
            level = i
        else:
            return level
    return level


def _shares_non_root_ancestor(a: QueueAttr, b: QueueAttr, level: int) -> bool:
    mine = {a.depth_ancestor(i) for i in range(1, level + 1)}
    mine.discard(None)
    mine = {x for x in mine if x is not None and x.name != objects.ROOT_QUEUE}
    theirs = {b.depth_ancestor(i) for i in range(1, level + 1)}
    return bool(mine & theirs)


def _ancestor_to_check(
    rattr: QueueAttr, eattr: QueueAttr, level: int
) -> tuple[QueueAttr | None, bool]:
    mine = eattr.depth_ancestor(level)
    if mine is None or mine.name == objects.ROOT_QUEUE:
        return None, False
    theirs = rattr.depth_ancestor(level)
    if theirs is mine:
        return None, False
    return mine, True
