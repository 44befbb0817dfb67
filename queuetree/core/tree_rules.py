"""The rules of a queue's place in the tree (spec-volcano-semantics.md §4.1), as pure functions.

- :func:`validate_parent`: self-parenting, the depth limit, a parent that already runs pods
  cannot get its first child; beyond the reference, a parent that does not exist and a parent
  that would close a cycle (Volcano's cycle detection is unreachable, spec §7 item 2);
- :func:`validate_quota_in_tree`: a child's capability against its nearest capped ancestor,
  the sums of siblings against the parent, a parent's update against its whole subtree
  (:func:`quota_changed` says when an UPDATE needs it);
- :func:`validate_tree`: the structural and quota rules over a whole existing tree, by queue
  (what the webhook would have refused had it seen the tree built change by change).

Edge semantics kept from the reference: a queue whose ``spec.parent`` is "" or ``root`` is a
direct child of root, and direct children of root get no sibling-sum or ancestor checks
(root's deserved and guarantee are recomputed by the scheduler, spec §7 item 8); resource
vectors follow ``Resource.from_resource_list``, so names the scheduler ignores (``gpu``
without a domain) take part in no sum (``queue_warnings`` warns about them). Problems and
paths as in ``field_rules``.
"""

from __future__ import annotations

from queuetree.core import objects, problems, queue_trees, resources


def validate_parent(
    queue: objects.Queue, *, tree: queue_trees.QueueTree, max_depth: int
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
                f"because it has allocated Pods: {resources.format_amount(resources.PODS, pods)}",
            )
        )
    return trouble


def _validate_subtree_depth(
    queue: objects.Queue, *, depth: int, tree: queue_trees.QueueTree, max_depth: int
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


def _subtree_height(name: str, tree: queue_trees.QueueTree) -> tuple[int, str]:
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


def quota_changed(new: objects.Queue, old: objects.Queue) -> bool:
    """Whether an UPDATE touches what :func:`validate_quota_in_tree` checks (the reference's
    ``needsValidate``): the parent, capability, deserved or guarantee."""
    return (
        new.parent != old.parent
        or new.capability != old.capability
        or new.deserved != old.deserved
        or new.guarantee != old.guarantee
    )


def validate_quota_in_tree(
    queue: objects.Queue, *, tree: queue_trees.QueueTree
) -> list[problems.Problem]:
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


def _validate_against_ancestors(
    queue: objects.Queue, tree: queue_trees.QueueTree
) -> list[problems.Problem]:
    trouble = []
    for name, value in _capabilities(queue):
        for ancestor in tree.iter_ancestors(queue.parent_name, start=queue.name):
            found = tree.queues.get(ancestor)
            if found is None or found.name == queue.name:
                break
            limit = found.capability.get(name) if found.capability is not None else 0
            if limit > 0:
                if value > limit:
                    trouble.append(
                        _capability_problem(
                            queue,
                            name,
                            value,
                            f"exceeds its ancestor's capability="
                            f"{resources.format_amount(name, limit)} (queue {ancestor})",
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
            names = problems.list_names([c.name for c in children])
            trouble.append(
                problems.Problem(
                    path,
                    problems.ErrorType.FORBIDDEN,
                    f"{subject} {parent.name} validation failed: sum of children's {field} "
                    f"({resources.format_human(total)}) exceeds parent's {field} limit "
                    f"({resources.format_human(limit)}) (children: {names})",
                )
            )
    return trouble


def _validate_subtree_capability(
    queue: objects.Queue, children: list[objects.Queue], *, tree: queue_trees.QueueTree
) -> list[problems.Problem]:
    trouble = []
    for name, value in _capabilities(queue):
        widest: resources.Amount = 0
        holder = ""
        for child in children:
            found, who = _subtree_max_capability(child, name, tree=tree, seen={queue.name})
            if found > widest:
                widest, holder = found, who
        if value < widest:
            trouble.append(
                _capability_problem(
                    queue,
                    name,
                    value,
                    f"is smaller than its descendants' max capability="
                    f"{resources.format_amount(name, widest)} (queue {holder})",
                )
            )
    return trouble


def _capabilities(queue: objects.Queue) -> list[tuple[str, resources.Amount]]:
    """``queue``'s capability by resource name (none when it sets no capability)."""
    if queue.capability is None:
        return []
    return [(name, queue.capability.get(name)) for name in queue.capability.resource_names()]


def _capability_problem(
    queue: objects.Queue, name: str, value: resources.Amount, relation: str
) -> problems.Problem:
    """``queue Q capability[name]=V <relation>``, on ``spec.capability[name]``."""
    shown = resources.format_amount(name, value)
    return problems.Problem(
        f"spec.capability{problems.key(name)}",
        problems.ErrorType.INVALID,
        f"queue {queue.name} capability[{name}]={shown} {relation}",
        value=shown,
    )


def _subtree_max_capability(
    queue: objects.Queue, name: str, *, tree: queue_trees.QueueTree, seen: set[str]
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


def validate_tree(
    tree: queue_trees.QueueTree, *, max_depth: int
) -> dict[str, list[problems.Problem]]:
    """Every problem of an existing tree, by queue name (queues without problems are absent).

    What the webhook would have refused had it seen the tree change by change (queues created
    before it ran, or while it was down): parents that are missing or on a cycle, depth,
    capability above an ancestor's, and each parent whose children's guarantee or deserved sum
    exceeds its own or whose capability is below a descendant's (reported once, on the
    parent). The tests check the shipped examples with it; the operator does not call it (it
    reports a running tree's faults as the capacity plugin finds them, ``conditions``).
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
