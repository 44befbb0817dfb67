"""Quota reclaim: gated pods of a queue under its deserved share take back what other queues
borrowed when an ancestor's capability, not a node, is what keeps them out (admission mode).

A deliberate divergence from Volcano (docs/compatibility.md): Volcano's reclaim skips gated
tasks, and ``actions.reclaim`` follows it for node pressure (only pods kube-scheduler left
Unschedulable reclaim). With a shared parent at its capability, a queue under its deserved share
would then wait for ever behind the queues that borrowed its share. Here such a gated job (a
lone pod, or a gang for the pods it lacks to reach ``minMember``) evicts, in victim order, the
running pods the plugins' reclaim vote lets it take (``Session.reclaimable``: the capacity
plugin's rule, the gang and conformance protections) from the other reclaimable queues under
its blocking ancestors, only as many as free the shortfall at every one of them. No node is
involved, and nothing is admitted: the pods stay gated, and a later session admits them once
the victims are gone, so no queue ever runs more than its capability.

Room coming free: pods being deleted (``releasing``, which gate admission still counts until
they are gone) are taken as free for the reclaimer, and every reclaimer of the session claims
the room it was promised (by those pods or by its own victims), so that the next reclaimer,
and the next session while the victims terminate, evicts nothing more for the same room.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from queuetree.core import capacity, capacity_tree, decisions, frameworks, objects, vectors

Describe = Callable[[frameworks.Task, frameworks.Task, tuple[str, ...]], decisions.Eviction]
"""``(evictor, victim, voters) -> record``: whom a victim is evicted for and why, called just
before the victim is evicted (so the figures are the ones the vote saw). ``actions`` names it
too (it imports this module, so the type lives here)."""


@dataclasses.dataclass(slots=True)
class _Claims:
    """Room promised to this session's reclaimers, per queue (subtree included): by every
    reclaimer (``room``), and by those whose group is Pending (``pending``: the requests that
    ``inqueue`` does not hold yet, which enqueue's figure must add)."""

    room: dict[str, vectors.Vec] = dataclasses.field(default_factory=dict)
    pending: dict[str, vectors.Vec] = dataclasses.field(default_factory=dict)

    def of(self, attr: capacity_tree.QueueAttr, *, enqueue: bool) -> vectors.Vec | None:
        """What gate admission's figure (``enqueue`` False) or enqueue's must add."""
        return (self.pending if enqueue else self.room).get(attr.name)

    def add(self, task: frameworks.Task, attr: capacity_tree.QueueAttr, *, sign: int) -> None:
        req = task.resreq
        for claims in (self.room, self.pending) if task.job.is_pending else (self.room,):
            for target in attr.chain:
                held = claims.get(target.name)
                if held is None:
                    held = claims[target.name] = [0.0] * len(req)
                for i, value in enumerate(req):
                    held[i] += sign * value


def needs_exact_pods(session: frameworks.Session, plugin: capacity.CapacityPlugin) -> bool:
    """Whether some gated job may reclaim by quota: then the session must see every pod as
    itself (no folded pods, no runs: ``sessions.run_session`` runs it again so). Only while
    there is something to do, so that a queue that waits with nothing to take costs no second
    session every cycle: its blocking ancestors hold another queue that may give victims
    (:func:`_may_give`, the queue-level part of the capacity plugin's rule; the vote itself is
    the exact session's), or pods being deleted whose room it waits for (to say so)."""
    asked: set[tuple[str, str, tuple[int, ...]]] = set()
    """(leaf, top blocking ancestor, requested dimensions) already found with nothing to give."""
    for job, tasks in _candidates(session, plugin):
        attr = plugin.attrs[job.queue]
        task = tasks[0]
        if task.pod.preemption_policy == "Never" or not session.preemptive(attr.name, [task]):
            continue
        short = _shortfalls(attr, task, _Claims(), pods=plugin.dims.pods)
        if short is None:
            continue
        if not short:
            return True
        top = max((plugin.attrs[name] for name in short), key=lambda a: len(a.chain))
        question = (attr.name, top.name, task.req_dims)
        if question in asked:
            continue
        if any(_may_give(session, other, attr, top, task) for other in plugin.attrs.values()):
            return True
        asked.add(question)
    return False


def _may_give(
    session: frameworks.Session,
    other: capacity_tree.QueueAttr,
    attr: capacity_tree.QueueAttr,
    top: capacity_tree.QueueAttr,
    task: frameworks.Task,
) -> bool:
    """``other``, under ``top`` and not ``attr``, is reclaimable, runs pods, and holds more
    than it deserves of (or deserves none of) a resource ``task`` requests."""
    if other is attr or top not in other.chain or not other.allocated_pods:
        return False
    queue = session.queues.get(other.name)
    if queue is None or not queue.is_reclaimable:
        return False
    return any(
        other.allocated[i] > 0
        and (other.deserved[i] < vectors.EPS or other.allocated[i] > other.deserved[i])
        for i in task.req_dims
    )


def reclaim_by_quota(
    session: frameworks.Session, plugin: capacity.CapacityPlugin, *, describe: Describe
) -> None:
    """Evict for the gated jobs whose blocking ancestors are at their capability (see the
    module docstring), in queue order, then job order; each job all or nothing."""
    claims = _Claims()
    running = _running_by_queue(session)
    for job, tasks in _candidates(session, plugin):
        attr = plugin.attrs[job.queue]
        stmt = frameworks.Statement(session)
        claimed: list[frameworks.Task] = []
        messages: dict[str, str] = {}
        for task in tasks:
            message = _reclaim_for(
                session,
                plugin,
                attr,
                task,
                tasks=[*claimed, task],
                claims=claims,
                running=running,
                stmt=stmt,
                describe=describe,
            )
            if message is None:
                break
            claims.add(task, attr, sign=1)
            claimed.append(task)
            messages[task.key] = message
        if len(claimed) == len(tasks):
            stmt.commit()
            session.task_messages.update(messages)
            continue
        stmt.discard()
        for task in claimed:
            claims.add(task, attr, sign=-1)


def _candidates(
    session: frameworks.Session, plugin: capacity.CapacityPlugin
) -> list[tuple[frameworks.Job, list[frameworks.Task]]]:
    """The starving jobs with gated pods the session did not admit, whose leaf has room and
    some ancestor does not, each with the pods to reclaim for (as many as its ``minMember``
    lacks, first in task order)."""
    if not session.feature_gates.get(objects.FEATURE_SCHEDULING_GATES_QUEUE_ADMISSION, False):
        return []
    ungated = set(session.ungated)
    pending = objects.TaskStatus.PENDING

    def waiting(task: frameworks.Task) -> bool:
        """Gated by the queue only, opted in, not admitted here, not told otherwise."""
        gates = task.pod.scheduling_gates
        return bool(
            task.status is pending
            and gates
            and task.req_dims
            and task.pod.opted_in
            and objects.only_queue_gate(gates)
            and task.key not in ungated
            and task.key not in session.task_messages
        )

    # Cheap filters first: most jobs of a cluster run, or have no pod left to admit.
    by_queue: dict[str, list[tuple[frameworks.Job, list[frameworks.Task]]]] = {}
    for job in session.jobs.values():
        run = job.run
        if run is not None:
            gated = job.tasks[:1] if run.ungated < len(run) else []
        else:
            gated = [t for t in job.tasks if waiting(t)]
        if not gated or job.group.missing or job.queue not in session.queues:
            continue
        attr = plugin.attrs.get(job.queue)
        if attr is None or not attr.usable or len(attr.chain) < 2:
            continue
        if any(t.status is pending and t.pod.unschedulable for t in job.tasks):
            continue  # node reclaim's
        by_queue.setdefault(job.queue, []).append((job, gated))
    found = []
    for queue in session.sorted_queues(set(by_queue)):
        attr = plugin.attrs[queue]
        entries = sorted(by_queue[queue], key=lambda e: (session.job_key(e[0]), e[0].key))
        for job, gated in entries:
            run = job.run
            if run is not None:
                # A folded session only asks whether to run again: one member that waits
                # stands for the run (they are alike).
                if _blocked_above_leaf(plugin, attr, run.pods[run.ungated]) or _blocked_above_leaf(
                    plugin, attr, run.groups[run.ungated]
                ):
                    found.append((job, gated))
                continue
            admitted = sum(1 for t in job.tasks if t.key in ungated)
            lacking = (
                job.min_member
                - job.ready
                - job.waiting
                - session.in_flight.get(job.key, 0)
                - admitted
            )
            if lacking <= 0 or lacking > len(gated):
                continue
            if session.job_valid(job) is not None:
                continue
            gated.sort(key=session.task_key)
            tasks = gated[:lacking]
            # Refused at enqueue (a Pending group: its whole request at once), or at the gate
            # (a gang: some of its pods may have fitted, and were rolled back with the others).
            keys = [job.key] if job.is_pending else [t.key for t in tasks]
            if any(_blocked_above_leaf(plugin, attr, key) for key in keys):
                found.append((job, tasks))
    return found


def _blocked_above_leaf(
    plugin: capacity.CapacityPlugin, attr: capacity_tree.QueueAttr, key: str
) -> bool:
    """The capacity plugin refused pod (or Pending pod group) ``key`` at an ancestor of its
    leaf ``attr`` on quota."""
    blocker = plugin.blockers.get(key)
    return (
        blocker is not None and blocker.kind in ("quota", "enqueue") and blocker.queue != attr.name
    )


def _shortfalls(
    attr: capacity_tree.QueueAttr,
    task: frameworks.Task,
    claims: _Claims,
    *,
    pods: int,
) -> dict[str, dict[int, float]] | None:
    """Per member of ``attr``'s chain, how much of each requested dimension must come free for
    ``task`` (pods being deleted taken as free, room claimed by earlier reclaimers as taken);
    only the members short of room. None when the leaf itself is short (no other queue's
    pods can make room there) or a ``pods`` capability is short (not reclaimed by quota).

    The room taken is what the check that refused the task counts: for a Pending group,
    enqueue's (what admitted groups hold, ``inqueue - elastic``: the group's own request is
    not among it yet), otherwise gate admission's (``reserved``; the group's own request is
    in ``inqueue`` then)."""
    pending = task.job.is_pending
    short: dict[str, dict[int, float]] = {}
    for target in attr.chain:
        claimed = claims.of(target, enqueue=pending)
        found: dict[int, float] = {}
        for i in task.req_dims:
            held = target.inqueue[i] - target.elastic[i] if pending else target.reserved[i]
            used = target.allocated[i] + max(held, 0.0) + (claimed[i] if claimed else 0.0)
            need = used + task.resreq[i] - target.real_capability[i]
            if need > vectors.EPS:
                found[i] = need
        if found:
            if target is attr:
                return None
            short[target.name] = found
    for target in attr.pods_chain:
        used = target.allocated_pods + target.reserved_pods
        if used + task.pod.count > target.real_capability[pods]:
            return None
    return short


def _reclaim_for(
    session: frameworks.Session,
    plugin: capacity.CapacityPlugin,
    attr: capacity_tree.QueueAttr,
    task: frameworks.Task,
    *,
    tasks: list[frameworks.Task],
    claims: _Claims,
    running: dict[str, list[frameworks.Task]],
    stmt: frameworks.Statement,
    describe: Describe,
) -> str | None:
    """Make room for ``task`` at every blocking ancestor; the reclaimer's explanation, or None
    when it cannot (the statement then holds what was evicted, for the caller to discard)."""
    if task.pod.preemption_policy == "Never":
        return None
    if not session.preemptive(attr.name, tasks):
        return None
    short = _shortfalls(attr, task, claims, pods=plugin.dims.pods)
    if short is None:
        return None
    if not short:
        if not any(t.releasing[i] > vectors.EPS for t in attr.chain[1:] for i in task.req_dims):
            # A gang's pod that fits once its other pods' victims are gone.
            return (
                "quota reclaim keeps room for it while it takes back room for the other pods "
                f"of its pod group {task.job.key}"
            )
        return (
            f"queue {_blocking_names(plugin, attr, task)} has no room under its capability "
            "yet: quota reclaim waits "
            "for pods being deleted there to be gone (room promised to this pod)"
        )
    top = max((plugin.attrs[name] for name in short), key=lambda a: len(a.chain))
    candidates = _reclaimees(session, plugin, attr, top, running)
    if not candidates:
        return None
    victims = sorted(session.reclaimable(task, candidates), key=session.victim_key(task))
    voters = session.victim_voters
    taken: dict[str, int] = {}
    for victim in victims:
        if not short:
            break
        vattr = plugin.attrs[victim.job.queue]
        helps = [
            t.name
            for t in vattr.chain
            if t.name in short and any(victim.resreq[i] > 0 for i in short[t.name])
        ]
        if not helps:
            continue
        stmt.evict(victim, describe(task, victim, voters))
        taken[victim.job.queue] = taken.get(victim.job.queue, 0) + 1
        for name in helps:
            left = short[name]
            for i in list(left):
                left[i] -= victim.resreq[i]
                if left[i] <= vectors.EPS:
                    del left[i]
            if not left:
                del short[name]
    if short:
        return None
    names = ", ".join(
        f"{count} pod{'s' if count > 1 else ''} of queue {queue!r}"
        for queue, count in sorted(taken.items())
    )
    return (
        f"queue {top.name!r} has no room under its capability for it: quota reclaim is "
        f"reclaiming {names} for it (queue {attr.name!r} is under its deserved share); it is "
        "admitted once they are gone"
    )


def _blocking_names(
    plugin: capacity.CapacityPlugin, attr: capacity_tree.QueueAttr, task: frameworks.Task
) -> str:
    blocker = plugin.blockers.get(task.key)
    return repr(blocker.queue) if blocker is not None else repr(attr.name)


def _running_by_queue(session: frameworks.Session) -> dict[str, list[frameworks.Task]]:
    """The running, preemptable pods on a node of the session, by queue (read once)."""
    running = objects.TaskStatus.RUNNING
    out: dict[str, list[frameworks.Task]] = {}
    for job in session.jobs.values():
        for task in job.tasks:
            if task.status is running and task.pod.preemptable and task.node in session.nodes:
                out.setdefault(job.queue, []).append(task)
    return out


def _reclaimees(
    session: frameworks.Session,
    plugin: capacity.CapacityPlugin,
    attr: capacity_tree.QueueAttr,
    top: capacity_tree.QueueAttr,
    running: dict[str, list[frameworks.Task]],
) -> list[frameworks.Task]:
    """The running pods (``running``, still so) of the other reclaimable queues under
    ``top``, by key."""
    out: list[frameworks.Task] = []
    status = objects.TaskStatus.RUNNING
    for name, tasks in running.items():
        if name == attr.name:
            continue
        vattr = plugin.attrs.get(name)
        if vattr is None or top not in vattr.chain:
            continue
        queue = session.queues.get(name)
        if queue is None or not queue.is_reclaimable:
            continue
        out.extend(task for task in tasks if task.status is status)
    return sorted(out, key=lambda t: t.key)
