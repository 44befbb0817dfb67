"""The capacity figures of each queue in one session, and how the tree derives them.

Each queue gets a :class:`QueueAttr` with dense figures (``vectors``). :func:`build` makes them
from the session's queues (spec §3.3 flat, §3.4-3.5 hierarchical): ``deserved`` (capped by the
real capability, at least the guarantee; root's is its children's sum), ``capability`` (a zero
cpu or memory, and in hierarchy mode every resource the queue leaves out, inherited from the
parent; root's empty capability infinite) and ``real_capability`` (what is left of the
parent's after the siblings' guarantees, plus the queue's own guarantee, capped by its
capability). It links the tree (``ancestors``, ``chain``, ``children``) and isolates its
structural faults: a queue on a parent cycle, under a missing parent or too deep (and the
queues below it), and a pod group in a non-leaf queue, block only themselves; each is an error
or warning of the session and a ``conditions.Fault`` of the queue.

What the queues use (``allocated``, ``request``, ``inqueue``, ``elastic``, ``releasing``,
``reserved``) is ``capacity_usage``'s; the admission checks over these figures are
``capacity``'s.
"""

from __future__ import annotations

import dataclasses

from queuetree.core import conditions, devices, frameworks, objects, vectors

Faults = dict[str, list[conditions.Fault]]
"""Queue name -> what is wrong with it, in the order found (its readiness condition)."""


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
    inqueue_pods: int = 0
    """Pods admitted PodGroups still hold room for (``minMember`` less their pods that run),
    subtree included: ``inqueue`` on ``pods``, which enqueue checks (only for queues with a
    ``pods_chain``)."""
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


def build(session: frameworks.Session, *, hierarchy: bool) -> tuple[dict[str, QueueAttr], Faults]:
    """The figures of every queue of ``session`` by name (root included in hierarchy mode,
    synthesised with a warning when the snapshot has none) and the faults found on the way.
    Usage figures start at zero (``capacity_usage.account_jobs`` fills them); ``share``,
    ``usable``, ``figures`` and ``pods_chain`` are set by the plugin once usage is known."""
    builder = _Builder(session.dims)
    if hierarchy:
        builder.build_hierarchy(session)
    else:
        builder.build_flat(session)
    for name, attr in builder.attrs.items():
        if attr.queue.deleting:
            builder.fault_deleting(name)
    return builder.attrs, builder.faults


class _Builder:
    """One build of the tree's figures (the methods share the attrs and faults being built)."""

    def __init__(self, dims: vectors.Dims) -> None:
        self.dims = dims
        self.attrs: dict[str, QueueAttr] = {}
        self.faults: Faults = {}

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

    def build_flat(self, session: frameworks.Session) -> None:
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

    def _max_with_guarantee(self, attr: QueueAttr) -> None:
        for i, g in enumerate(attr.guarantee):
            if g > attr.deserved[i]:
                attr.deserved[i] = g
        attr.deserved_keys = attr.deserved_keys | frozenset(
            i for i in range(2, self.dims.size) if attr.guarantee[i] != 0
        )

    def build_hierarchy(self, session: frameworks.Session) -> None:
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
            # DRA devices too, though no node lists them (core.devices).
            keys.update(devices.claimed_dimensions(session.config.device_classes, dims))
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
            for field, total, own, consequence in (
                (
                    "deserved",
                    total_deserved,
                    parent.deserved,
                    ", so they cannot all get their share at once",
                ),
                ("guarantee", total_guarantee, parent.guarantee, ""),
            ):
                over = [
                    dims.names[i] for i in range(dims.size) if total[i] > own[i] and i != dims.pods
                ]
                if not over:
                    continue
                listed = ", ".join(over)
                session.warnings.append(
                    f"queue {parent.name!r}: the children's {field} ({dims.format(total)}) "
                    f"exceeds its {field} ({dims.format(own)}) on {listed}"
                )
                self._fault(
                    parent.name,
                    conditions.QueueReason.CHILDREN_OVER_PARENT,
                    f"queue {parent.name!r}: its children's {field} ({dims.format(total)}) "
                    f"exceeds its own ({dims.format(own)}) on {listed}{consequence}; lower "
                    f"theirs or raise its spec.{field}",
                )

    def fault_deleting(self, name: str) -> None:
        """A deleted queue held by a finalizer: it admits nothing new (``capacity`` does not
        use it) and its pods count until they finish."""
        self._fault(
            name,
            conditions.QueueReason.TERMINATING,
            f"queue {name!r} is being deleted: it admits no new pods, and stays (finalizer "
            f"{objects.QUEUE_IN_USE_FINALIZER}) while pods are charged to it "
            "(status.allocated.pods, status.reserved.pods); it goes once they finish. To let it "
            "go now, delete those pods; if the queuetree operator is not running, remove the "
            f"finalizer by hand: kubectl patch queue {name} --type=json "
            """-p '[{"op":"remove","path":"/metadata/finalizers"}]'""",
        )

    def _fault(self, queue: str, reason: conditions.QueueReason, message: str) -> None:
        self.faults.setdefault(queue, []).append(conditions.Fault(reason, message))
