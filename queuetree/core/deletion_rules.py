"""The rule of a queue's deletion (spec-volcano-semantics.md §4.1), as a pure function.

:func:`validate_deletion`: never ``root`` or ``default``; not while the queue has child queues;
with the allocated-pods check, not while its status counts pods. Problems and paths as in
``field_rules`` (the path is ``metadata.name``).
"""

from __future__ import annotations

from queuetree.core import objects, problems, queue_trees, resources


def validate_deletion(
    name: str,
    *,
    queue: objects.Queue | None,
    tree: queue_trees.QueueTree,
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
    if check_allocated_pods and queue is not None:
        for what, pods in (
            ("allocated Pods", queue.allocated.get(resources.PODS)),
            ("admitted Pods not placed yet", queue.reserved.get(resources.PODS)),
        ):
            if pods:
                shown = resources.format_amount(resources.PODS, pods)
                trouble.append(
                    problems.Problem(
                        path,
                        problems.ErrorType.FORBIDDEN,
                        f"queue {name} cannot be deleted because it has {what}: {shown}",
                    )
                )
    children = tree.children_of(name)
    if children:
        trouble.append(
            problems.Problem(
                path,
                problems.ErrorType.FORBIDDEN,
                f"queue {name} can not be deleted because it has {len(children)} child queues: "
                f"{problems.list_names(children)}",
            )
        )
    return trouble
