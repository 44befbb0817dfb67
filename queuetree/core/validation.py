"""Queue-tree validation: every rule of Volcano's queue webhook, as pure functions.

Each function returns a list of ``problems.Problem`` and never stops at the first problem, so a
person sees everything to fix in one answer. The admission webhook joins them into one denial
message; the operator reports them on queues (the same rules, one implementation).

Paths are relative to the Queue object, in the one syntax of ``problems.FieldPath``
(``spec.deserved["cpu"]``); the webhook prefixes them with ``requestBody.`` as Volcano does.
Quantities in messages are canonical Kubernetes strings and sums use
:func:`resources.format_human` (``cpu 9, memory 18Gi``), never raw milli-units or bytes.

The rules (spec-volcano-semantics.md §4.1), in the order the webhook applies them:

1. :func:`validate_fields`: quantities (>= 0, whole numbers for integer resources; the reader
   reports the ones that do not parse),
   ``guarantee <= deserved <= capability`` per resource, the state, the legacy hierarchy
   annotations.
2. :func:`validate_parent`: self-parenting, the depth limit, a parent that already runs pods
   cannot get its first child; beyond the reference, a parent that does not exist and a parent
   that would close a cycle (Volcano's cycle detection is unreachable, spec §7 item 2).
3. :func:`validate_root_update`: root's quota cannot change (``--enable-root-queue-protection``).
4. :func:`validate_quota_in_tree`: a child's capability against its nearest capped ancestor, the
   sums of siblings against the parent, a parent's update against its whole subtree.
5. :func:`validate_deletion`: root, default, queues with children, queues with allocated pods.

:func:`validate_tree` applies the structural and quota rules to a whole existing tree (the
operator's view: queues created while no webhook ran).

:func:`soft_problems` lists what is allowed but probably wrong (the webhook returns them as
warnings, which kubectl prints).

Edge semantics kept from the reference: a queue whose ``spec.parent`` is "" or ``root`` is a
direct child of root, and direct children of root get no sibling-sum or ancestor checks (root's
deserved and guarantee are recomputed by the scheduler, spec §7 item 8); resource vectors follow
``Resource.from_resource_list``, so names the scheduler ignores (``gpu`` without a domain) take
part in no sum (:func:`soft_problems` warns about them).
"""

from __future__ import annotations

import dataclasses
import decimal
import difflib
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from types import MappingProxyType

from queuetree.core import objects, problems, quantities, resources

MAX_LISTED = 20
"""Most problems one message lists; the rest are counted (a map with thousands of bad entries
must not become a megabyte of text)."""


def aggregate(messages: list[str]) -> str:
    """One message for many, as Kubernetes' ``utilerrors.NewAggregate`` prints them:
    one error alone, several as ``[e1, e2]``; beyond :data:`MAX_LISTED`, the first ones and
    ``and N more``."""
    if len(messages) == 1:
        return messages[0]
    if len(messages) > MAX_LISTED:
        rest = len(messages) - MAX_LISTED
        messages = [*messages[:MAX_LISTED], f"and {rest} more"]
    return "[" + ", ".join(messages) + "]"


# -- the tree ----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class QueueTree:
    """The existing queues by name, and their children by effective parent.

    Root is implicit: a queue whose parent is ``root`` (or "") has a valid parent even when no
    ``root`` Queue object exists yet (the operator creates it). Build with :meth:`of`.
    """

    queues: Mapping[str, objects.Queue]
    children: Mapping[str, tuple[str, ...]]
    """Effective parent name -> child names, sorted (listing order of the reference)."""

    @classmethod
    def of(cls, queues: Iterable[objects.Queue]) -> QueueTree:
        by_name = {queue.name: queue for queue in queues}
        children: dict[str, list[str]] = {}
        for name in sorted(by_name):
            parent = by_name[name].parent_name
            if parent:
                children.setdefault(parent, []).append(name)
        return cls(
            queues=MappingProxyType(by_name),
            children=MappingProxyType({k: tuple(v) for k, v in children.items()}),
        )

    _sums: dict[str, tuple[resources.Resource, resources.Resource]] = dataclasses.field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    """Memo of :meth:`children_sums` (the tree never changes, so neither do they)."""
    _users: dict[str, Mapping[str, frozenset[str]]] = dataclasses.field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    """Memo of :meth:`scalar_users` (under the key "")."""

    def children_of(self, name: str) -> tuple[str, ...]:
        return self.children.get(name, ())

    def scalar_users(self) -> Mapping[str, frozenset[str]]:
        """Scalar resource name -> the queues whose capability, deserved or guarantee name it."""
        found = self._users.get("")
        if found is None:
            users: dict[str, set[str]] = {}
            for queue in self.queues.values():
                for name in _scalar_names(queue):
                    users.setdefault(name, set()).add(queue.name)
            found = {name: frozenset(names) for name, names in users.items()}
            self._users[""] = found
        return found

    def children_sums(self, name: str) -> tuple[resources.Resource, resources.Resource]:
        """The sums of the guarantee and of the deserved of ``name``'s children."""
        found = self._sums.get(name)
        if found is None:
            children = [self.queues[c] for c in self.children_of(name) if c in self.queues]
            found = (
                resources.sum_all(c.guarantee for c in children),
                resources.sum_all(c.deserved for c in children),
            )
            self._sums[name] = found
        return found

    def exists(self, name: str) -> bool:
        return name == objects.ROOT_QUEUE or name in self.queues

    def iter_ancestors(
        self, parent: str, *, start: str, limit: int = objects.MAX_QUEUE_DEPTH
    ) -> Iterator[str]:
        """Walk up from ``parent`` (exclusive of root), stopping before a repeat or a missing queue.

        ``start`` is the name of the queue whose parent ``parent`` is: reaching it means a
        cycle, and the walk yields it once and stops. At most ``limit`` names are yielded (a
        chain that long is refused whatever lies above it, so no walk goes further).
        """
        seen = {start}
        current = parent
        for _ in range(limit):
            if not current or current == objects.ROOT_QUEUE:
                return
            yield current
            if current in seen or current not in self.queues:
                return
            seen.add(current)
            current = self.queues[current].parent_name


EMPTY_TREE = QueueTree.of(())


# -- 1. fields of one queue --------------------------------------------------------------------


ALLOWED_STATES = (objects.QueueState.OPEN, objects.QueueState.CLOSED)
"""States a user may write (the controller alone moves a queue to Closing or Unknown)."""

_INTEGER_RESOURCES = frozenset(
    {
        "pods",
        "services",
        "replicationcontrollers",
        "resourcequotas",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "services.nodeports",
        "services.loadbalancers",
    }
)


def is_integer_resource_name(name: str) -> bool:
    """Kubernetes ``IsIntegerResourceName``: object counts (``pods``...) and extended resources
    (``nvidia.com/gpu``) must be whole numbers."""
    return name in _INTEGER_RESOURCES or resources.is_extended_resource_name(name)


def check_quantities(
    quota: Mapping[str, quantities.Quantity], *, path: str
) -> list[problems.Problem]:
    """A problem for each quantity of a quota map (as written) that is negative, or fractional
    where the resource is counted in whole units. (Quantities that do not parse are the
    reader's problems: ``quota`` holds the ones that did.)"""
    trouble: list[problems.Problem] = []
    for name, quantity in quota.items():
        where = f"{path}{problems.key(problems.shorten(name))}"
        text = quantities.format_quantity(quantity)
        if quantity.value < 0:
            trouble.append(
                problems.Problem(
                    where, problems.ErrorType.INVALID, "must be greater than or equal to 0", text
                )
            )
        if is_integer_resource_name(name) and quantity.value != quantity.value.to_integral_value():
            trouble.append(
                problems.Problem(where, problems.ErrorType.INVALID, "must be an integer", text)
            )
    return trouble


def validate_fields(
    queue: objects.Queue,
    *,
    tree: QueueTree = EMPTY_TREE,
    previous: objects.Queue | None = None,
) -> list[problems.Problem]:
    """Rules that need only the queue itself (and, for the legacy annotations, the others),
    on the quota and state as written (``queue.as_written``: exact, every name).

    ``previous`` is the stored queue on an UPDATE: a state the queue already has is accepted
    even when a user could not write it (the controller sets Closing and Unknown; the reference
    refuses every edit of a Closing queue).

    In Volcano's order: capability entries, deserved entries, guarantee entries and
    ``deserved >= guarantee`` per guaranteed resource (a guarantee without a deserved of the same
    name is an error), ``deserved <= capability`` per resource both set (a resource missing from
    capability is unlimited), the state, the legacy ``volcano.sh/hierarchy`` annotations.
    Quantities that do not parse are not here: the reader reports them.
    """
    written = queue.as_written
    capability, deserved, guarantee = written.capability, written.deserved, written.guarantee
    trouble = check_quantities(capability, path="spec.capability")
    trouble += check_quantities(deserved, path="spec.deserved")
    trouble += check_quantities(guarantee, path="spec.guarantee.resource")
    for name, minimum in guarantee.items():
        shown_minimum = quantities.format_quantity(minimum)
        if name not in deserved:
            trouble.append(
                problems.Problem(
                    f"spec.deserved{problems.key(name)}",
                    problems.ErrorType.INVALID,
                    f"deserved[{name}] must be >= guarantee[{name}]={shown_minimum}",
                    value="<nil>",
                )
            )
        elif deserved[name].value < minimum.value:
            shown = quantities.format_quantity(deserved[name])
            trouble.append(
                problems.Problem(
                    f"spec.deserved{problems.key(name)}",
                    problems.ErrorType.INVALID,
                    f"deserved[{name}]={shown} must be >= guarantee[{name}]={shown_minimum}",
                    value=shown,
                )
            )
    for name, share in deserved.items():
        limit = capability.get(name)
        if limit is not None and share.value > limit.value:
            shown = quantities.format_quantity(share)
            trouble.append(
                problems.Problem(
                    f"spec.deserved{problems.key(name)}",
                    problems.ErrorType.INVALID,
                    f"deserved[{name}]={shown} must be <= "
                    f"capability[{name}]={quantities.format_quantity(limit)}",
                    value=shown,
                )
            )
    state = written.state
    unchanged_state = previous is not None and previous.as_written.state == state
    if state and state not in ALLOWED_STATES and not unchanged_state:
        trouble.append(
            problems.Problem(
                "spec.state",
                problems.ErrorType.INVALID,
                "queue state must be in [Open Closed]",
                value=state,
            )
        )
    trouble += _validate_legacy_hierarchy(queue, tree)
    return trouble


_GO_FLOAT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|[+-]?(?i:inf|infinity|nan)")


def _validate_legacy_hierarchy(queue: objects.Queue, tree: QueueTree) -> list[problems.Problem]:
    full_hierarchy = queue.annotations.get(objects.HIERARCHY_ANNOTATION, "")
    full_weights = queue.annotations.get(objects.HIERARCHY_WEIGHTS_ANNOTATION, "")
    if not full_hierarchy and not full_weights:
        return []
    # Texts in messages are shortened: annotations may hold up to 256 KiB.
    hierarchy, weights = problems.shorten(full_hierarchy), problems.shorten(full_weights)
    # Each problem names the annotation it is about (Volcano's path stops at
    # metadata.annotations, which leaves a reader guessing which of the two is wrong).
    hierarchy_path = f"metadata.annotations{problems.key(objects.HIERARCHY_ANNOTATION)}"
    weights_path = f"metadata.annotations{problems.key(objects.HIERARCHY_WEIGHTS_ANNOTATION)}"
    trouble: list[problems.Problem] = []
    parts, weight_parts = full_hierarchy.split("/"), full_weights.split("/")
    if len(parts) != len(weight_parts):
        trouble.append(
            problems.Problem(
                hierarchy_path,
                problems.ErrorType.INVALID,
                f"{objects.HIERARCHY_ANNOTATION} must have the same length with "
                f"{objects.HIERARCHY_WEIGHTS_ANNOTATION}",
                value=hierarchy,
            )
        )
    for full_weight in weight_parts:
        weight = problems.shorten(full_weight, 20)
        if not _GO_FLOAT.fullmatch(full_weight):
            trouble.append(
                problems.Problem(
                    weights_path,
                    problems.ErrorType.INVALID,
                    f"{weight} in the {weights} is invalid number: "
                    f'strconv.ParseFloat: parsing "{weight}": invalid syntax',
                    value=weights,
                )
            )
        elif not float(full_weight) > 0:
            trouble.append(
                problems.Problem(
                    weights_path,
                    problems.ErrorType.INVALID,
                    f"{weight} in the {weights} must be larger than 0",
                    value=weights,
                )
            )
    for other in tree.queues.values():
        theirs = other.annotations.get(objects.HIERARCHY_ANNOTATION, "")
        if other.name != queue.name and theirs.startswith(full_hierarchy + "/"):
            trouble.append(
                problems.Problem(
                    hierarchy_path,
                    problems.ErrorType.INVALID,
                    f"{hierarchy} is not allowed to be in the sub path of "
                    f"{problems.shorten(theirs)} of queue {other.name}",
                    value=hierarchy,
                )
            )
    return trouble


# -- 2. the parent -----------------------------------------------------------------------------


def validate_parent(
    queue: objects.Queue, *, tree: QueueTree, max_depth: int
) -> list[problems.Problem]:
    """Check ``queue``'s parent, for a CREATE or an UPDATE that changes ``spec.parent``.

    - a parent "" or ``root`` is always valid (root is implicit);
    - a queue cannot be its own parent;
    - the parent must exist, and following parents upward must never lead back to ``queue``
      (both beyond the reference, which only bounds cycles through the depth walk);
    - depth: ``queue`` is level 1 and each ancestor below root adds one; more than
      ``max_depth`` levels is refused. Beyond the reference, an UPDATE that moves a queue with
      descendants also counts the deepest of them;
    - a parent with no children yet whose ``status.allocated`` has pods cannot become a parent
      (its pods would run in a non-leaf queue). A parent that already has children is not
      checked (as in the reference: spec §7 item 1).
    """
    parent = queue.parent
    if not parent or parent == objects.ROOT_QUEUE:
        return _validate_subtree_depth(queue, depth=1, tree=tree, max_depth=max_depth)
    path = "spec.parent"
    if parent == queue.name:
        return [
            problems.Problem(
                path,
                problems.ErrorType.INVALID,
                f"queue {queue.name} cannot use itself as parent",
                value=parent,
            )
        ]
    # No walk goes above the depth allowed: a chain that reaches it is refused for depth,
    # before any cycle or missing queue further up (as the reference's walk does).
    chain = list(tree.iter_ancestors(parent, start=queue.name, limit=max_depth))
    if len(chain) >= max_depth:
        return [
            problems.Problem(
                path,
                problems.ErrorType.INVALID,
                f"queue {queue.name} exceeds the maximum allowed depth of {max_depth}",
                value=parent,
            )
        ]
    if chain[-1] in chain[:-1]:
        loop = " -> ".join(chain[chain.index(chain[-1]) :])
        return [
            problems.Problem(
                path,
                problems.ErrorType.INVALID,
                f"the ancestors of queue {queue.name} form the cycle {loop}",
                value=parent,
            )
        ]
    if chain[-1] == queue.name:
        loop = " -> ".join([queue.name, *chain])
        return [
            problems.Problem(
                path,
                problems.ErrorType.INVALID,
                f"queue {queue.name} cannot have parent {parent}: "
                f"that would create the cycle {loop}",
                value=parent,
            )
        ]
    if chain[-1] not in tree.queues:
        missing = chain[-1]
        detail = (
            f"parent queue {parent} of queue {queue.name} does not exist"
            if missing == parent
            else f"ancestor queue {missing} of queue {queue.name} does not exist"
        )
        return [problems.Problem(path, problems.ErrorType.NOT_FOUND, detail, value=parent)]
    depth = 1 + len(chain)  # at most max_depth: a longer chain was refused above
    trouble = _validate_subtree_depth(queue, depth=depth, tree=tree, max_depth=max_depth)
    pods = tree.queues[parent].allocated.get(resources.PODS)
    if not tree.children_of(parent) and pods:
        trouble.append(
            problems.Problem(
                path,
                problems.ErrorType.FORBIDDEN,
                f"queue {parent} cannot be the parent queue of queue {queue.name} "
                f"because it has allocated Pods: {_count(pods)}",
            )
        )
    return trouble


def _validate_subtree_depth(
    queue: objects.Queue, *, depth: int, tree: QueueTree, max_depth: int
) -> list[problems.Problem]:
    height, deepest = _subtree_height(queue.name, tree)
    if height == 0 or depth + height <= max_depth:
        return []
    return [
        problems.Problem(
            "spec.parent",
            problems.ErrorType.INVALID,
            f"moving queue {queue.name} to level {depth} puts its descendant {deepest} at level "
            f"{depth + height}, beyond the maximum allowed depth of {max_depth}",
            value=queue.parent,
        )
    ]


def _subtree_height(name: str, tree: QueueTree) -> tuple[int, str]:
    """Levels below ``name`` and the deepest descendant (first by name); cycles are cut."""
    best, deepest = 0, ""
    frontier, seen, level = [name], {name}, 0
    while frontier:
        level += 1
        below = [c for n in frontier for c in tree.children_of(n) if c not in seen]
        if not below:
            break
        seen.update(below)
        best, deepest = level, min(below)
        frontier = below
    return best, deepest


# -- 3. root protection ------------------------------------------------------------------------


def validate_root_update(new: objects.Queue, old: objects.Queue) -> list[problems.Problem]:
    """Root's capability, deserved and guarantee cannot change (quantities compared by value,
    so ``1`` and ``1000m`` are the same, and an absent map equals an empty one)."""
    if new.name != objects.ROOT_QUEUE:
        return []
    changed = [
        field
        for field, before, after in (
            ("capability", old.as_written.capability, new.as_written.capability),
            ("deserved", old.as_written.deserved, new.as_written.deserved),
            ("guarantee", old.as_written.guarantee, new.as_written.guarantee),
        )
        if _values(before) != _values(after)
    ]
    if not changed:
        return []
    return [
        problems.Problem(
            "spec",
            problems.ErrorType.FORBIDDEN,
            "root queue's resource attributes (capability, deserved, guarantee) cannot be "
            f"modified (changed: {', '.join(changed)})",
        )
    ]


def _values(quota: Mapping[str, quantities.Quantity]) -> dict[str, decimal.Decimal]:
    """Quantities by name, by value."""
    return {name: quantity.value for name, quantity in quota.items()}


def quota_changed(new: objects.Queue, old: objects.Queue) -> bool:
    """Whether an UPDATE touches what :func:`validate_quota_in_tree` checks (the reference's
    ``needsValidate``): the parent, capability, deserved or guarantee."""
    return (
        new.parent != old.parent
        or new.capability != old.capability
        or new.deserved != old.deserved
        or new.guarantee != old.guarantee
    )


# -- 4. quota in the tree ----------------------------------------------------------------------


def validate_quota_in_tree(queue: objects.Queue, *, tree: QueueTree) -> list[problems.Problem]:
    """Check ``queue``'s quota against its ancestors, its siblings and its subtree.

    Nothing is checked for root (its figures are the scheduler's). For a queue below a non-root
    parent: each capability dimension against the nearest ancestor that caps it, and the sums of
    guarantee and deserved over all children of the parent (this queue included) against the
    parent's (``less_partly`` with the Zero default: the parent must cover the sum in every
    dimension, so a parent without deserved admits no child deserved). For a queue with
    children: its capability against the largest capability in each child's subtree, and the
    sums of its children against its own guarantee and deserved.
    """
    if queue.name == objects.ROOT_QUEUE:
        return []
    trouble: list[problems.Problem] = []
    parent = queue.parent_name
    if parent != objects.ROOT_QUEUE and parent in tree.queues:
        trouble += _validate_against_ancestors(queue, tree)
        siblings = [tree.queues[name] for name in tree.children_of(parent) if name != queue.name]
        totals = None
        if len(siblings) == len(tree.children_of(parent)):
            # A new child (CREATE, or a move): the existing children's sums are shared by
            # every such review of this tree, so they are computed once.
            guarantee, deserved = tree.children_sums(parent)
            totals = (guarantee + queue.guarantee, deserved + queue.deserved)
        trouble += _validate_sums(
            tree.queues[parent], [*siblings, queue], child=True, totals=totals
        )
    children = [tree.queues[name] for name in tree.children_of(queue.name) if name in tree.queues]
    if children:
        trouble += _validate_subtree_capability(queue, children, tree=tree)
        trouble += _validate_sums(queue, children, child=False)
    return trouble


def _validate_against_ancestors(queue: objects.Queue, tree: QueueTree) -> list[problems.Problem]:
    if queue.capability is None:
        return []
    trouble = []
    for name in queue.capability.resource_names():
        value = queue.capability.get(name)
        for ancestor in tree.iter_ancestors(queue.parent_name, start=queue.name):
            found = tree.queues.get(ancestor)
            if found is None or found.name == queue.name:
                break
            limit = found.capability.get(name) if found.capability is not None else 0
            if limit > 0:
                if value > limit:
                    shown = format_amount(name, value)
                    trouble.append(
                        problems.Problem(
                            f"spec.capability{problems.key(name)}",
                            problems.ErrorType.INVALID,
                            f"queue {queue.name} capability[{name}]={shown} exceeds its "
                            f"ancestor's capability={format_amount(name, limit)} "
                            f"(queue {ancestor})",
                            value=shown,
                        )
                    )
                break
    return trouble


def _validate_sums(
    parent: objects.Queue,
    children: list[objects.Queue],
    *,
    child: bool,
    totals: tuple[resources.Resource, resources.Resource] | None = None,
) -> list[problems.Problem]:
    """The children's guarantee and deserved sums against ``parent``'s.

    ``child`` says whose request is under review: a child's (the error is on the child's
    fields) or the parent's (the error is on the parent's fields). ``totals`` are the two sums
    when the caller has them already.
    """
    guarantee_total, deserved_total = totals or (
        resources.sum_all(c.guarantee for c in children),
        resources.sum_all(c.deserved for c in children),
    )
    trouble = []
    for field, path, limit, total in (
        ("guarantee", "spec.guarantee.resource", parent.guarantee, guarantee_total),
        ("deserved", "spec.deserved", parent.deserved, deserved_total),
    ):
        if limit.less_partly(total, resources.ZERO):
            subject = "parent queue" if child else "queue"
            trouble.append(
                problems.Problem(
                    path,
                    problems.ErrorType.FORBIDDEN,
                    f"{subject} {parent.name} validation failed: sum of children's {field} "
                    f"({resources.format_human(total)}) exceeds parent's {field} limit "
                    f"({resources.format_human(limit)}) (children: {_names(children)})",
                )
            )
    return trouble


def _validate_subtree_capability(
    queue: objects.Queue, children: list[objects.Queue], *, tree: QueueTree
) -> list[problems.Problem]:
    if queue.capability is None:
        return []
    trouble = []
    for name in queue.capability.resource_names():
        value = queue.capability.get(name)
        widest: resources.Amount = 0
        holder = ""
        for child in children:
            found, who = _subtree_max_capability(child, name, tree=tree, seen={queue.name})
            if found > widest:
                widest, holder = found, who
        if value < widest:
            shown = format_amount(name, value)
            trouble.append(
                problems.Problem(
                    f"spec.capability{problems.key(name)}",
                    problems.ErrorType.INVALID,
                    f"queue {queue.name} capability[{name}]={shown} is smaller than its "
                    f"descendants' max capability={format_amount(name, widest)} "
                    f"(queue {holder})",
                    value=shown,
                )
            )
    return trouble


def _subtree_max_capability(
    queue: objects.Queue, name: str, *, tree: QueueTree, seen: set[str]
) -> tuple[resources.Amount, str]:
    """The queue's own capability of ``name`` when positive, else the largest in its children's
    subtrees, each found where it is first set on the way down (0 when nobody caps it), and
    the queue that sets it (the first met, depth first in name order, among equals).
    Iterative; cycles and queues in ``seen`` are cut."""
    best: tuple[resources.Amount, str] = (0, "")
    visited = set(seen)
    stack = [queue]
    while stack:
        current = stack.pop()
        if current.name in visited:
            continue
        visited.add(current.name)
        own = current.capability.get(name) if current.capability is not None else 0
        if own > 0:
            if own > best[0]:
                best = (own, current.name)
            continue
        stack.extend(
            tree.queues[child]
            for child in reversed(tree.children_of(current.name))
            if child in tree.queues
        )
    return best


# -- the whole tree (for the operator) ---------------------------------------------------------


def validate_tree(tree: QueueTree, *, max_depth: int) -> dict[str, list[problems.Problem]]:
    """Every problem of an existing tree, by queue name (queues without problems are absent).

    For the operator, which reports them on the queues: what the webhook would have refused
    had it seen the tree change by change (queues created before it ran, or while it was down):
    parents that are missing or on a cycle, depth, capability above an ancestor's, and each
    parent whose children's guarantee or deserved sum exceeds its own or whose capability is
    below a descendant's (reported once, on the parent).
    """
    trouble: dict[str, list[problems.Problem]] = {}
    for name in sorted(tree.queues):
        queue = tree.queues[name]
        found = [
            p
            for p in validate_parent(queue, tree=tree, max_depth=max_depth)
            if p.type
            is not problems.ErrorType.FORBIDDEN  # "cannot get its first child": admission only
            and not p.message.startswith("moving queue")  # the deepest queue reports depth itself
        ]
        parent = queue.parent_name
        if not found and parent not in ("", objects.ROOT_QUEUE) and parent in tree.queues:
            found += _validate_against_ancestors(queue, tree)
        children = [tree.queues[c] for c in tree.children_of(name) if c in tree.queues]
        if children and name != objects.ROOT_QUEUE:
            found += _validate_subtree_capability(queue, children, tree=tree)
            found += _validate_sums(queue, children, child=False)
        if found:
            trouble[name] = found
    return trouble


# -- 5. deletion -------------------------------------------------------------------------------


def validate_deletion(
    name: str,
    *,
    queue: objects.Queue | None,
    tree: QueueTree,
    check_allocated_pods: bool,
) -> list[problems.Problem]:
    """Whether the queue ``name`` may be deleted.

    ``default`` and ``root`` never; with ``check_allocated_pods``, not while ``status.allocated``
    counts pods (Volcano's message) or, beyond the reference, ``status.reserved`` does (pods
    admitted and not yet placed: deleting their queue would drop them from every ancestor's
    figures just as well); not while it has child queues. The queue's state does not matter
    (an Open queue may be deleted, as in the reference). ``queue`` is the object being deleted
    when known.
    """
    path = "metadata.name"
    if name == objects.DEFAULT_QUEUE:
        return [
            problems.Problem(
                path, problems.ErrorType.FORBIDDEN, "`default` queue can not be deleted"
            )
        ]
    if name == objects.ROOT_QUEUE:
        return [
            problems.Problem(path, problems.ErrorType.FORBIDDEN, "`root` queue can not be deleted")
        ]
    trouble = []
    pods = queue.allocated.get(resources.PODS) if queue is not None else 0
    waiting = queue.reserved.get(resources.PODS) if queue is not None else 0
    if check_allocated_pods and pods:
        trouble.append(
            problems.Problem(
                path,
                problems.ErrorType.FORBIDDEN,
                f"queue {name} cannot be deleted because it has allocated Pods: {_count(pods)}",
            )
        )
    if check_allocated_pods and waiting:
        trouble.append(
            problems.Problem(
                path,
                problems.ErrorType.FORBIDDEN,
                f"queue {name} cannot be deleted because it has admitted Pods not placed yet: "
                f"{_count(waiting)}",
            )
        )
    children = tree.children_of(name)
    if children:
        trouble.append(
            problems.Problem(
                path,
                problems.ErrorType.FORBIDDEN,
                f"queue {name} can not be deleted because it has {len(children)} child queues: "
                f"{list_names(children)}",
            )
        )
    return trouble


# -- soft problems -----------------------------------------------------------------------------


def soft_problems(
    queue: objects.Queue,
    *,
    tree: QueueTree,
    node_resources: frozenset[str] = frozenset(),
    sound: bool = True,
) -> list[str]:
    """What is allowed but almost certainly not meant, as sentences (webhook warnings).

    - a resource name the scheduler ignores (not ``cpu``, ``memory``, ``pods``,
      ``ephemeral-storage`` or a Kubernetes scalar name such as ``nvidia.com/gpu``): the quota
      silently does nothing (spec §1.2);
    - a root capability that is set but omits a scalar resource that nodes offer
      (``node_resources``) or that some queue of the tree names: every request for it is
      refused, since children inherit no key for it (spec §7 item 7);
    - a new child of a Closed or Closing parent: the queue controller closes it at once;
    - a zero ``cpu`` or ``memory`` capability, which in the capacity policy means "inherit the
      parent's", not "nothing" (spec §3.3): someone who wrote 0 to stop a queue gets the
      opposite;
    - a capability, deserved or guarantee on a domain-qualified resource that no node offers
      and no other queue names: most likely a misspelling (:func:`_misspelt_resources`).
    - a deserved number of ``pods`` without a guarantee of them (which it must cover): shares
      and reclaim compare what pods request, and a pod requests no ``pods``, so it changes
      nothing (a ``pods`` capability limits the pods, and a guarantee keeps them from
      siblings and from reclaim: ``capacity``).

    With ``sound`` False (the queue has problems, so its place in the tree means little), only
    the first.
    """
    warnings = []
    written = queue.as_written
    for field, values in _quota_maps(written):
        for name in values:
            if not _scheduler_reads(name):
                warnings.append(
                    f"{field}{problems.key(name)}: the scheduler ignores the resource name "
                    f'"{name}": extended resources need a domain prefix such as nvidia.com/gpu'
                )
    for name in (resources.CPU, resources.MEMORY):
        amount = written.capability.get(name)
        if amount is not None and amount.value == 0:
            warnings.append(
                f"spec.capability{problems.key(name)}: 0 does not stop queue {queue.name}: a "
                f"zero {name} capability means the parent's (unlimited up to it), as in "
                f"Volcano; to stop admitting, close the queue (kubectl queuetree close "
                f"{queue.name}), or set a small amount such as 1m"
            )
    warnings += _misspelt_resources(queue, tree=tree, node_resources=node_resources)
    if resources.PODS in written.deserved and resources.PODS not in written.guarantee:
        warnings.append(
            f"spec.deserved{problems.key(resources.PODS)}: a deserved number of pods changes "
            "nothing: shares and reclaim compare the resources pods request, and a pod "
            "requests no pods; to limit how many pods run in the queue, set "
            f"spec.capability{problems.key(resources.PODS)} (a guarantee of pods keeps them "
            "from siblings and from reclaim)"
        )
    if not sound:
        return warnings
    root = queue if queue.name == objects.ROOT_QUEUE else tree.queues.get(objects.ROOT_QUEUE)
    if root is not None and root.capability is not None:
        in_use = {n for n, users in tree.scalar_users().items() if users - {queue.name}}
        wanted = (in_use | _scalar_names(queue) | node_resources) - {resources.PODS}
        omitted = sorted(wanted - set(root.capability.resource_names()))
        if omitted:
            it = "them" if len(omitted) > 1 else "it"
            warnings.append(
                f"root queue capability ({resources.format_human(root.capability)}) omits "
                f"{', '.join(omitted)}, which nodes or queues have: every request for {it} "
                f"will be refused; add {it} to root's capability or leave it empty (unlimited)"
            )
    parent = tree.queues.get(queue.parent_name)
    if (
        parent is not None
        and queue.name not in tree.queues
        and parent.state in (objects.QueueState.CLOSED, objects.QueueState.CLOSING)
    ):
        warnings.append(
            f"parent queue {parent.name} is {parent.state}: queue {queue.name} will be closed "
            "by the queue controller until the parent is opened"
        )
    return warnings


WELL_KNOWN_DEVICES: frozenset[str] = frozenset(
    {
        "nvidia.com/gpu",
        "amd.com/gpu",
        "gpu.intel.com/i915",
        "gpu.intel.com/xe",
        "habana.ai/gaudi",
        "aws.amazon.com/neuron",
        "aws.amazon.com/neuroncore",
        "google.com/tpu",
    }
)
"""Extended resources of common device plugins: what a misspelt name is compared with when
the webhook does not watch nodes (``--watch-nodes``)."""


def _misspelt_resources(
    queue: objects.Queue, *, tree: QueueTree, node_resources: frozenset[str]
) -> list[str]:
    """Warnings for quota on a domain-qualified resource that no node offers and no other
    queue names, with the closest names that exist.

    With ``node_resources`` (the webhook watches nodes) every such name is warned about: pods
    never request it, so the quota limits nothing. Without, only a name close to one of
    :data:`WELL_KNOWN_DEVICES` or to a name another queue uses is (``nvidia.com/gpus``): the
    webhook cannot tell an unknown device from a typo.
    """
    others: set[str] = set()
    for other in tree.queues.values():
        if other.name != queue.name:
            others |= _scalar_names(other)
    exist = node_resources | others
    known = sorted(exist | (WELL_KNOWN_DEVICES if not node_resources else frozenset()))
    warnings = []
    for field, values in _quota_maps(queue.as_written):
        for name in values:
            if "/" not in name or name in exist or name in known:
                continue
            close = difflib.get_close_matches(name, known, n=3, cutoff=0.75)
            if not close and not node_resources:
                continue
            hint = f" (did you mean {' or '.join(close)}?)" if close else ""
            if node_resources:
                why = f"no node offers {name} and no other queue names it{hint}"
            else:
                why = f"no other queue names {name}{hint}"
            warnings.append(
                f"{field}{problems.key(name)}: {why}: pods request resources by their exact "
                "name, so a quota on a misspelt one limits nothing"
            )
    return warnings


def usage_warnings(
    queue: objects.Queue,
    *,
    old: objects.Queue,
    tree: QueueTree,
) -> list[str]:
    """What an UPDATE of an existing queue leaves over its limits, as sentences (webhook
    warnings). The update is allowed: a capability change evicts nothing, and the queue
    admits again once its use falls back under it.

    - a capability below what the queue uses now (``status.allocated`` plus
      ``status.reserved``, the operator's figures over its subtree, ``pods`` included);
    - on a parent change, an ancestor on the new path (up to, not including, root) whose
      capability is below its use plus the moved queue's (an ancestor on the old path as well
      already counts it).

    Queues compare ``old``'s status (an update of the spec does not change it); ``tree`` is the
    tree before the update.
    """
    warnings: list[str] = []
    in_use = old.allocated + old.reserved
    if queue.capability != old.capability and queue.capability is not None:
        over = _over(in_use, queue.capability)
        if over:
            warnings.append(
                f"spec.capability: queue {queue.name} uses {_amounts(over, in_use)} now "
                f"(status.allocated plus status.reserved), above the new capability "
                f"({_amounts(over, queue.capability)}): nothing running is evicted; the queue "
                "admits no more pods that request "
                f"{_either(over)} until its use falls below it (kubectl queuetree pending "
                f"{queue.name} lists what waits)"
            )
    if queue.parent_name != old.parent_name:
        before = set(_ancestors(old.name, tree))
        for name in _ancestors_of_parent(queue.parent_name, tree):
            if name in before or name == objects.ROOT_QUEUE:
                continue
            ancestor = tree.queues[name]
            if ancestor.capability is None:
                continue
            total = ancestor.allocated + ancestor.reserved + in_use
            over = _over(total, ancestor.capability)
            if over:
                warnings.append(
                    f"spec.parent: under {queue.parent_name}, queue {name} would use "
                    f"{_amounts(over, total)} with queue {queue.name}'s "
                    f"{_amounts(over, in_use)}, above its capability "
                    f"({_amounts(over, ancestor.capability)}): nothing running is evicted; "
                    f"no queue under {name} admits pods that request {_either(over)} until "
                    "its use falls below it"
                )
    return warnings


def _quota_maps(
    written: objects.QueueAsWritten,
) -> tuple[tuple[str, Mapping[str, quantities.Quantity]], ...]:
    """Each quota map as written, with its field path."""
    return (
        ("spec.capability", written.capability),
        ("spec.deserved", written.deserved),
        ("spec.guarantee.resource", written.guarantee),
    )


def _over(use: resources.Resource, capability: resources.Resource) -> list[str]:
    """The dimensions of ``capability`` that ``use`` exceeds. A zero cpu or memory capability
    is the parent's (spec §3.3), so it is never exceeded here."""
    over = []
    for name in capability.resource_names():
        limit = capability.get(name)
        if name in (resources.CPU, resources.MEMORY) and limit == 0:
            continue
        if use.get(name) > limit:
            over.append(name)
    return over


def _amounts(names: list[str], vector: resources.Resource) -> str:
    return ", ".join(f"{name} {format_amount(name, vector.get(name))}" for name in names)


def _either(names: list[str]) -> str:
    return " or ".join(names)


def _ancestors_of_parent(parent: str, tree: QueueTree) -> Iterator[str]:
    """``parent`` and its ancestors, nearest first, up to root (a cycle or a missing queue
    ends the walk: the parent rules report those)."""
    seen: set[str] = set()
    name = parent
    while name and name not in seen and name in tree.queues:
        seen.add(name)
        yield name
        name = tree.queues[name].parent_name


def _ancestors(name: str, tree: QueueTree) -> Iterator[str]:
    """The ancestors of queue ``name`` in ``tree``, nearest first (see
    :func:`_ancestors_of_parent`)."""
    queue = tree.queues.get(name)
    if queue is not None:
        yield from _ancestors_of_parent(queue.parent_name, tree)


def _scheduler_reads(name: str) -> bool:
    return (
        name in (resources.CPU, resources.MEMORY, resources.PODS, "ephemeral-storage")
        or name.startswith("count/")
        or resources.is_scalar_resource_name(name)
    )


def _scalar_names(queue: objects.Queue) -> set[str]:
    names: set[str] = set()
    for vector in (queue.capability, queue.deserved, queue.guarantee):
        if vector is not None and vector.scalars:
            names.update(n for n, v in vector.scalars.items() if v >= resources.EPS)
    return names


# -- formatting --------------------------------------------------------------------------------


def format_amount(name: str, value: resources.Amount) -> str:
    """One dimension of a vector as a canonical quantity (``20``, ``500m``, ``40Gi``, ``2``)."""
    if value == resources.UNLIMITED:
        return "unlimited"
    whole = value if isinstance(value, int) else int(-(-value // 1))
    if name == resources.MEMORY:
        return quantities.format_bytes(whole)
    if name == resources.PODS:
        return str(whole)
    return quantities.format_milli(whole)


def _names(queues: list[objects.Queue]) -> str:
    return list_names([q.name for q in queues])


def list_names(names: Sequence[str], *, shown: int = 10) -> str:
    """``a, b, c`` or, for long lists, the first ``shown`` names and how many more."""
    if len(names) <= shown:
        return ", ".join(names)
    return f"{', '.join(names[:shown])} and {len(names) - shown} more"


def _count(value: resources.Amount) -> str:
    return format_amount(resources.PODS, value)
