"""Admission order: in which order each queue considers the pods waiting behind the gate.

The order is the session's own: queues by the tiers' queue order, pod groups by job order
(priority, gang, then creation time and uid), pods by task order, exactly the keys
``actions.enqueue`` and ``actions.allocate`` walk. :func:`admission_order` reads it off a
session after its actions ran, so the positions a tool shows (``kubectl queuetree pending``,
``explain``) are the ones the operator's session uses, with no second implementation.
"""

from __future__ import annotations

from queuetree.core import frameworks, objects


def admission_order(session: frameworks.Session) -> dict[str, tuple[str, ...]]:
    """Queue name -> the keys of the pods that carry the queue-allocation gate and are
    Pending in it, first in order first (those this session admits included: they were
    still waiting when it started). Queues by name; a queue without waiting pods is absent."""
    jobs: dict[str, list[frameworks.Job]] = {}
    waiting: dict[str, list[frameworks.Task]] = {}
    for job in session.jobs.values():
        tasks = [
            task
            for task in job.tasks
            if task.status is objects.TaskStatus.PENDING
            and objects.QUEUE_ALLOCATION_GATE in task.pod.scheduling_gates
        ]
        if tasks:
            waiting[job.key] = tasks
            jobs.setdefault(job.queue, []).append(job)
    order: dict[str, tuple[str, ...]] = {}
    for queue in sorted(jobs):
        keys: list[str] = []
        for job in sorted(jobs[queue], key=lambda j: (session.job_key(j), j.key)):
            if job.run is not None:
                # A run's one task stands for all its members, in order (``folding``).
                keys.extend(job.run.pods)
                continue
            keys.extend(task.key for task in sorted(waiting[job.key], key=session.task_key))
        order[queue] = tuple(keys)
    return order
