"""What an allowed queue probably did not mean: the webhook's warnings, as sentences.

- :func:`soft_problems`: names the scheduler ignores, a root capability that omits a resource
  in use, a new child of a closed parent, a zero cpu or memory capability (which means the
  parent's), a probably misspelt device name, a deserved number of pods;
- :func:`usage_warnings`: an UPDATE that leaves the queue, or an ancestor on its new path,
  above its capability (allowed: nothing running is evicted).

The webhook returns them with its answer, allowed or denied alike (kubectl prints them). Unlike
the rules (``field_rules``, ``tree_rules``, ``deletion_rules``), nothing here refuses.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping

from queuetree.core import objects, problems, quantities, queue_trees, resources


def soft_problems(
    queue: objects.Queue,
    *,
    tree: queue_trees.QueueTree,
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
        wanted = (in_use | queue_trees.scalar_names(queue) | node_resources) - {resources.PODS}
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
    queue: objects.Queue, *, tree: queue_trees.QueueTree, node_resources: frozenset[str]
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
            others |= queue_trees.scalar_names(other)
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
    tree: queue_trees.QueueTree,
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
    return ", ".join(f"{name} {resources.format_amount(name, vector.get(name))}" for name in names)


def _either(names: list[str]) -> str:
    return " or ".join(names)


def _ancestors_of_parent(parent: str, tree: queue_trees.QueueTree) -> Iterator[str]:
    """``parent`` and its ancestors, nearest first, up to root (a cycle or a missing queue
    ends the walk: the parent rules report those)."""
    seen: set[str] = set()
    name = parent
    while name and name not in seen and name in tree.queues:
        seen.add(name)
        yield name
        name = tree.queues[name].parent_name


def _ancestors(name: str, tree: queue_trees.QueueTree) -> Iterator[str]:
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
