"""The rules of one queue's own fields (spec-volcano-semantics.md §4.1), as pure functions.

- :func:`validate_fields`: quantities (>= 0, whole numbers for integer resources; the reader
  reports the ones that do not parse), ``guarantee <= deserved <= capability`` per resource,
  the state, the legacy hierarchy annotations (the one rule here that reads other queues: a
  hierarchy path may not lie under another queue's);
- :func:`validate_root_update`: root's quota cannot change (``--enable-root-queue-protection``).

Each returns a list of ``problems.Problem`` and never stops at the first (STYLE rule 6), with
paths relative to the Queue object (``spec.deserved["cpu"]``); the webhook prefixes them with
``requestBody.`` as Volcano does. The rules of the queue's place in the tree are
``tree_rules``; deletion is ``deletion_rules``; what is allowed but probably wrong is
``queue_warnings``.
"""

from __future__ import annotations

import decimal
import re
from collections.abc import Mapping

from queuetree.core import objects, problems, quantities, queue_trees, resources

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
    tree: queue_trees.QueueTree = queue_trees.EMPTY_TREE,
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


def _validate_legacy_hierarchy(
    queue: objects.Queue, tree: queue_trees.QueueTree
) -> list[problems.Problem]:
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
