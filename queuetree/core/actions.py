"""The actions of a session: enqueue, allocate (and its admission-only form), backfill, reclaim,
preempt. Each is a function over a :class:`frameworks.Session`; statements make every job's
operations all-or-nothing (gang scheduling).

Orders follow Volcano: queues by the tier-dispatched queue order, jobs by job order within a
queue, tasks by task order within a job; after each job the first queue is chosen again. Three
shortcuts keep large admission cycles linear without changing any result:

* enqueue changes no figure the queue order reads (shares follow ``allocated`` only), and a job
  without ``minResources`` is admitted without a vote, so the queue order is computed once;
* in allocate, when a job changed nothing (``Session.version`` is unchanged: no allocation or
  eviction happened), the queue that was first is still first and is kept without a heap round
  trip; when something changed, every queue's place is re-established (deliberate fix: Volcano
  only re-pushes the current queue, leaving the others where stale shares put them);
* admission mode changes neither order at all, so it walks queues and jobs in sorted order.
"""

from __future__ import annotations

import functools
import heapq
import itertools
from collections.abc import Callable

from queuetree.core import capacity, decisions, frameworks, objects, quota_reclaim, vectors

Statement = frameworks.Statement

Describe = quota_reclaim.Describe


class _QueueItem:
    """A heap entry ordered by the session's queue order."""

    __slots__ = ("name", "session")

    def __init__(self, session: frameworks.Session, name: str) -> None:
        self.session = session
        self.name = name

    def __lt__(self, other: _QueueItem) -> bool:
        return self.session.queue_order(self.name, other.name) < 0


# -- enqueue ---------------------------------------------------------------------------------


def enqueue(session: frameworks.Session) -> None:
    """Move pending pod groups to Inqueue when their queue admits their ``minResources``.

    A group without ``minResources`` is admitted without asking any plugin (spec §3.7). A group
    with no pod yet is enqueued as any other (Volcano's enqueue looks at the PodGroup, not its
    pods): controllers such as Volcano's job controller and the Kubeflow training operator
    create pods only once their group is Inqueue. A group released for lack of pods in this
    session (``Session.released``) is not enqueued again here, and one released less than a
    bound ago (``Session.yielding``) only after every other group (``inqueue_bounds``). Left
    Pending: the stand-in of a PodGroup that
    does not exist, a group whose pods all run outside queue admission
    (``objects.PodGroup.outside``, none governed), and, in admission mode, a group that has
    pods and whose pods all name a scheduler outside ``Session.scheduler_names``.
    """
    pending: dict[str, list[frameworks.Job]] = {}
    last: dict[str, list[frameworks.Job]] = {}
    """Queue -> its yielding groups (``Session.yielding``), enqueued after every other one."""
    free: list[frameworks.Job] = []
    queues = session.queues
    phase_pending = objects.PodGroupPhase.PENDING
    foreign = session.scheduler_names
    released = set(session.released)
    yielding = session.yielding
    for job in session.jobs.values():
        if job.phase is not phase_pending or job.queue not in queues or job.group.missing:
            continue
        if released and job.key in released:
            continue  # its bound ran out in this very session: its room goes to others first
        if job.group.outside and not job.tasks:
            continue  # its pods run outside queue admission: nothing of it is in the queue
        if (
            foreign is not None
            and job.tasks
            and all(_placed_by_another_scheduler(session, t) for t in job.tasks)
        ):
            # Its pods are never ungated (each is told why): admitted, its minResources would
            # hold the queue's room for pods that can never use it.
            if job.run is not None:
                _tell_run_members(session, job, job.run.pods)
            continue
        if job.min_resources is None:
            # Admitted without a vote (spec §3.7); such a job moves no figure that another job's
            # vote reads, so its place in the order cannot change any outcome.
            free.append(job)
        elif yielding and job.key in yielding:
            last.setdefault(job.queue, []).append(job)
        else:
            pending.setdefault(job.queue, []).append(job)
    # JobEnqueued is told of these too in Volcano; the only implementation (capacity) adds a
    # job's minResources to its queue's inqueue, so for jobs without them it is skipped.
    inqueue = objects.PodGroupPhase.INQUEUE
    for job in free:
        job.phase = inqueue
        if job.run is not None:
            job.run.inqueue = len(job.run)
    # The yielding groups (released for lack of pods less than a bound ago) come after every
    # other group of every queue: they take only the room no other waiting work takes.
    for waiting in (pending, last):
        for queue in session.sorted_queues(set(waiting)):
            for job in sorted(waiting[queue], key=lambda j: (session.job_key(j), j.key)):
                if job.run is not None:
                    _enqueue_run(session, job, job.run)
                elif session.job_enqueueable(job):
                    session.job_enqueued(job)
                    job.phase = objects.PodGroupPhase.INQUEUE


def _enqueue_run(session: frameworks.Session, job: frameworks.Job, run: frameworks.Run) -> None:
    """Enqueue for the members of a run, in order (``folding``): the capacity plugin, the
    only plugin that votes on enqueueing (``folding.supported``), counts how many fit."""
    plugin = _run_voter(session, frameworks.Hook.JOB_ENQUEUEABLE)
    enqueued = len(run) if plugin is None else plugin.enqueue_run(job, run.groups)
    if enqueued:
        job.phase = objects.PodGroupPhase.INQUEUE
        run.inqueue = enqueued


def _run_voter(
    session: frameworks.Session, hook: frameworks.Hook
) -> capacity.CapacityPlugin | None:
    """The plugin that votes on ``hook`` for a run: none (every member passes), or the
    capacity plugin, the only one that may (``folding.supported`` folds nothing else)."""
    votes = session.flat(hook)
    if not votes:
        return None
    plugin = getattr(votes[0], "__self__", None)
    assert len(votes) == 1
    assert isinstance(plugin, capacity.CapacityPlugin)
    return plugin


def _tell_run_members(session: frameworks.Session, job: frameworks.Job, keys: list[str]) -> None:
    """Give every member of ``keys`` the message its run's first task got (with its own key)."""
    task = job.tasks[0]
    if task.key not in session.task_messages:
        return
    for key in keys:
        message = _scheduler_message(session, key, task.pod.scheduler_name)
        if message is not None:
            session.task_messages[key] = message


# -- allocate --------------------------------------------------------------------------------


def _worksheet(
    session: frameworks.Session, job: frameworks.Job, *, gated_only: bool
) -> list[frameworks.Task]:
    tasks = []
    pending = objects.TaskStatus.PENDING
    for task in job.tasks:
        gates = task.pod.scheduling_gates
        if task.status is not pending or not (task.req_dims or gates):
            # Placed already, or best effort (an empty request) and ungated: backfill's job.
            # A gated best-effort task is admitted here (deliberate fix: Volcano skips it, and
            # nothing ever removes its gate).
            continue
        if gates:
            if not objects.only_queue_gate(gates):
                continue  # an external gate: not ours to judge until it is the only one left
        elif gated_only:
            continue  # admission mode: kube-scheduler places ungated pods
        tasks.append(task)
    # Reversed: the worksheet is consumed with pop() from the end, first task first.
    if len(tasks) > 1:
        tasks.sort(key=session.task_key, reverse=True)
    return tasks


def allocate(session: frameworks.Session, *, admission_only: bool = False) -> None:
    """Volcano's allocate: per queue, per job, per task: capacity, gate admission, then nodes.

    Gated tasks are never placed: a gated, opted-in task that its queue admits is reserved and
    reported in ``ungate`` (spec §5.3). Deliberate fix (gang-aware ungating): a job's gated
    tasks are ungated only when, counting the job's running and already-ungated tasks, at least
    ``minMember`` of them fit; otherwise none is.
    """
    gate_on = session.feature_gates.get(objects.FEATURE_SCHEDULING_GATES_QUEUE_ADMISSION, False)
    enqueue_configured = "enqueue" in session.config.actions
    worksheets: dict[str, list[frameworks.Task]] = {}
    job_heaps: dict[str, list[tuple[frameworks.OrderKey, int, frameworks.Job]]] = {}
    counter = itertools.count()
    # Snapshot order; the job key ends with a unique tie-break, so order does not depend on it.
    phase_pending = objects.PodGroupPhase.PENDING
    task_pending = objects.TaskStatus.PENDING
    queues = session.queues
    job_valid = session.job_valid
    job_key = session.job_key
    for job in session.jobs.values():
        if job.group.missing:
            # Deliberate fix: the pods of a gang created before their PodGroup wait for it
            # (Volcano's controller would make each a group of its own, splitting the gang).
            session.job_messages[job.key] = (
                f"pod group {job.key} does not exist (yet): its pods stay gated until it is "
                "created and its whole minMember fits in its queue"
            )
            continue
        if job.group.outside and not job.tasks:
            continue  # its pods all run outside queue admission: it stays Pending
        if job.phase is phase_pending:
            if enqueue_configured:
                continue
            job.phase = objects.PodGroupPhase.INQUEUE
            if job.run is not None:
                job.run.inqueue = len(job.run)
        if job.queue not in queues:
            continue
        if len(job.tasks) == 1:
            # The common single-pod group, without building a worksheet first.
            task = job.tasks[0]
            gates = task.pod.scheduling_gates
            if (
                task.status is not task_pending
                or not (task.req_dims or gates)
                or (gates and not objects.only_queue_gate(gates))
                or (admission_only and not gates)
            ):
                continue
            tasks = [task]
        else:
            tasks = _worksheet(session, job, gated_only=admission_only)
            if not tasks:
                continue
        invalid = job_valid(job)
        if invalid is not None:
            session.job_messages[job.key] = invalid
            if job.run is not None:
                session.job_messages.update(
                    dict.fromkeys(job.run.groups[: job.run.inqueue], invalid)
                )
            continue
        worksheets[job.key] = tasks
        job_heaps.setdefault(job.queue, []).append((job_key(job), next(counter), job))
    if admission_only:
        # Admission places nothing, so no share (hence no queue order) and no gang readiness
        # (hence no job order) changes: the heap walk below reduces to two sorted loops.
        allocatable = session.allocatable_check()
        for queue in session.sorted_queues(set(job_heaps)):
            # Ties of the job key (equal creation time and uid) go by the job's own key, so the
            # order never depends on the snapshot's (``folding`` forms runs in this order).
            for _, _, job in sorted(job_heaps[queue], key=_by_key_then_name):
                if job.run is not None:
                    _admit_run(
                        session,
                        job,
                        job.run,
                        gate_on=gate_on,
                    )
                    continue
                _admit_job(
                    session,
                    job,
                    tasks=worksheets[job.key],
                    gate_on=gate_on,
                    allocatable=allocatable,
                )
        return
    for entries in job_heaps.values():
        heapq.heapify(entries)
    heap = [_QueueItem(session, name) for name in job_heaps]
    heapq.heapify(heap)
    current: _QueueItem | None = heapq.heappop(heap) if heap else None
    while current is not None:
        jobs = job_heaps[current.name]
        if not jobs:
            current = heapq.heappop(heap) if heap else None
            continue
        _, _, job = heapq.heappop(jobs)
        version = session.version
        tasks = worksheets[job.key]
        again = _allocate_job(
            session, job, tasks=tasks, gate_on=gate_on, admission_only=admission_only
        )
        if again and tasks:
            heapq.heappush(jobs, (session.job_key(job), next(counter), job))
        if session.version != version and heap:
            # Shares changed, possibly of every queue under a common ancestor: re-establish the
            # order of all queues (Volcano only pushes this one back, leaving the others where
            # their stale shares put them), then take the first.
            heap.append(current)
            heapq.heapify(heap)
            current = heapq.heappop(heap)


def _by_key_then_name(
    entry: tuple[frameworks.OrderKey, int, frameworks.Job],
) -> tuple[frameworks.OrderKey, str]:
    return entry[0], entry[2].key


def _admit_run(
    session: frameworks.Session, job: frameworks.Job, run: frameworks.Run, *, gate_on: bool
) -> None:
    """:func:`_admit_job` for the Inqueue members of a run (``folding``), in one step: the
    capacity plugin, the only plugin that votes on admission (``folding.supported``), counts
    how many of them fit; each member gets what the per-pod path would give it."""
    task = job.tasks[0]
    keys = run.pods[: run.inqueue]
    if _placed_by_another_scheduler(session, task):
        _tell_run_members(session, job, keys)
        return
    opted_in = task.pod.opted_in
    reserve = gate_on and opted_in
    plugin = _run_voter(session, frameworks.Hook.ALLOCATABLE)
    admitted = (
        len(keys) if plugin is None else plugin.admit_run(job.queue, task, keys, reserve=reserve)
    )
    if reserve:
        run.ungated = admitted
        job.ungated += admitted
        session.ungated.extend(keys[:admitted])
    elif not opted_in:
        for key in keys[:admitted]:
            session.task_messages[key] = _not_opted_in_message(key)


def _admit_job(
    session: frameworks.Session,
    job: frameworks.Job,
    *,
    tasks: list[frameworks.Task],
    gate_on: bool,
    allocatable: Callable[[str, frameworks.Task], bool],
) -> None:
    """Admission mode: the capacity check of a job's gated tasks, all-or-nothing per gang."""
    queue = job.queue
    if len(tasks) == 1 and job.min_member <= 1:
        # One pod, no gang to wait for: admit it or not.
        task = tasks[0]
        if _placed_by_another_scheduler(session, task):
            return
        if allocatable(queue, task):
            if gate_on and task.pod.opted_in:
                session.reserve(task)
                session.ungated.append(task.key)
            elif not task.pod.opted_in:
                session.task_messages[task.key] = _not_opted_in(task)
        return
    reserved: list[frameworks.Task] = []
    for task in reversed(tasks):
        if _placed_by_another_scheduler(session, task) or not allocatable(queue, task):
            continue
        if gate_on and task.pod.opted_in:
            session.reserve(task)
            reserved.append(task)
        elif not task.pod.opted_in:
            session.task_messages[task.key] = _not_opted_in(task)
    # minMember first: a gang its queue cannot take whole is told so, whether or not its pods
    # name a native PodGroup; only a gang that fits is held back for its native members.
    if reserved and not _short_of_min_member(session, job, reserved=reserved):
        reserved = _together_for_kube_scheduler(session, job, tasks=tasks, reserved=reserved)
        if reserved:
            _settle_gang(session, job, reserved=reserved)


def _together_for_kube_scheduler(
    session: frameworks.Session,
    job: frameworks.Job,
    *,
    tasks: list[frameworks.Task],
    reserved: list[frameworks.Task],
) -> list[frameworks.Task]:
    """``reserved`` less the members of a native PodGroup (``Pod.native_group``) when not all
    of the job's gated members of that group are among them, each of those rolled back.

    kube-scheduler (v1.37, ``PriorityQueue.runPreEnqueuePlugins``) queues the pending pods of
    a native PodGroup as one entity, and keeps the whole entity back while any of its pods is
    gated: ungating some members of a group while others stay gated places none of them, and
    holds their room in the queue with nothing to show for it (docs/gangs.md). So they are
    ungated together or not at all; pods of the job that name no native group (created after
    the gang started, ``/pods/mutate``) are admitted one by one as before."""
    native: dict[str, int] = {}
    for task in tasks:
        if task.pod.native_group:
            native[task.pod.native_group] = native.get(task.pod.native_group, 0) + 1
    if not native:
        return reserved
    chosen: dict[str, int] = {}
    for task in reserved:
        if task.pod.native_group:
            chosen[task.pod.native_group] = chosen.get(task.pod.native_group, 0) + 1
    short = {group for group, count in native.items() if chosen.get(group, 0) < count}
    if not short:
        return reserved
    kept: list[frameworks.Task] = []
    for task in reversed(reserved):
        if task.pod.native_group in short:
            session.unreserve(task)
        else:
            kept.append(task)
    kept.reverse()
    group = min(short)
    session.job_messages[job.key] = (
        f"pod group {job.key}: its {native[group]} gated pods name the native PodGroup {group} "
        "(podgroups.scheduling.k8s.io), whose pending pods kube-scheduler places only once "
        f"none of them is gated, so they are admitted together; only {chosen.get(group, 0)} of "
        f"them fit in queue {job.queue!r}, and they stay gated together"
    )
    return kept


def _placed_by_another_scheduler(session: frameworks.Session, task: frameworks.Task) -> bool:
    """Whether ``task`` names a scheduler that does not place the pods this session admits;
    if so it stays gated, and says why (an ungated pod nobody places would keep its queue's
    room reserved for ever)."""
    message = _scheduler_message(session, task.key, task.pod.scheduler_name)
    if message is None:
        return False
    session.task_messages[task.key] = message
    return True


def _scheduler_message(session: frameworks.Session, key: str, scheduler: str) -> str | None:
    """Why pod ``key``, naming ``scheduler``, stays gated; None when its scheduler is fine."""
    names = session.scheduler_names
    if names is None or scheduler in names:
        return None
    if scheduler in session.adopted_scheduler_names:
        return (
            f"pod {key} has schedulerName {scheduler}, which the webhook hands to "
            f"{', '.join(sorted(names))} when a pod is created (--adopt-scheduler-names), but "
            "this pod was created without it (before adoption was turned on, or with the "
            "webhook skipping it): ungated, nothing would place it; create it again"
        )
    return (
        f"pod {key} has schedulerName {scheduler}, and queuetree admits pods for "
        f"{', '.join(sorted(names))} only (--scheduler-name): ungated, it would never be placed "
        "and would hold its queue's room for ever; create it again without spec.schedulerName "
        "(or with one of those)"
    )


def _not_opted_in(task: frameworks.Task) -> str:
    return _not_opted_in_message(task.key)


def _not_opted_in_message(key: str) -> str:
    return (
        f"pod {key} has the scheduling gate {objects.QUEUE_ALLOCATION_GATE} but "
        f'not the opt-in annotation {objects.QUEUE_ALLOCATION_GATE}: "true"; the gate '
        "will not be removed automatically"
    )


def _settle_gang(
    session: frameworks.Session, job: frameworks.Job, *, reserved: list[frameworks.Task]
) -> None:
    """Ungate a job's admitted tasks if, with its running and in-flight tasks, at least
    ``minMember`` fit; otherwise roll every admission of the job back."""
    if not _short_of_min_member(session, job, reserved=reserved):
        session.ungated.extend(t.key for t in reserved)


def _short_of_min_member(
    session: frameworks.Session, job: frameworks.Job, *, reserved: list[frameworks.Task]
) -> bool:
    """Whether fewer than ``minMember`` of a job's tasks fit, counting its running and
    in-flight ones with ``reserved``; if so every admission in ``reserved`` is rolled back and
    the job says why."""
    in_flight = job.ready + job.waiting + session.in_flight.get(job.key, 0)
    if in_flight + len(reserved) >= job.min_member:
        return False
    session.job_messages[job.key] = (
        f"pod group {job.key}: only {in_flight + len(reserved)} of minMember "
        f"{job.min_member} pods fit in queue {job.queue!r}; its gated pods stay gated "
        "together"
    )
    for task in reversed(reserved):
        session.unreserve(task)
    return True


def _allocate_job(
    session: frameworks.Session,
    job: frameworks.Job,
    *,
    tasks: list[frameworks.Task],
    gate_on: bool,
    admission_only: bool,
) -> bool:
    """One pass over a job's worksheet; True when the job was committed (it may go again)."""
    queue = job.queue
    stmt = Statement(session)
    reserved: list[frameworks.Task] = []
    while tasks:
        task = tasks.pop()
        if task.pod.scheduling_gates and _placed_by_another_scheduler(session, task):
            continue
        if not session.allocatable(queue, task):
            continue
        if task.pod.scheduling_gates:
            if gate_on and task.pod.opted_in:
                session.reserve(task)
                reserved.append(task)
            elif task.pod.only_queue_gate and not task.pod.opted_in:
                session.task_messages[task.key] = _not_opted_in(task)
            continue
        if admission_only:
            continue
        node = _best_node(session, task)
        if node is None:
            continue
        if vectors.less_equal_zero(task.resreq, node.idle):
            stmt.allocate(task, node.name)
        else:
            stmt.pipeline(task, node.name)
        if session.job_ready(job):
            break
    if reserved:
        _settle_gang(session, job, reserved=reserved)
    if not stmt.operations:
        return bool(reserved)
    if session.job_ready(job):
        stmt.commit()
        return True
    if session.job_pipelined(job):
        # Volcano leaves a pipelined job's operations in the session without committing them.
        return False
    stmt.discard()
    return False


def _fit_error(
    session: frameworks.Session, task: frameworks.Task, node: frameworks.NodeState
) -> str | None:
    if not vectors.less_equal_zero(task.resreq, node.future_idle()):
        return "Insufficient resources"
    return session.predicate(task, node)


def _best_node(session: frameworks.Session, task: frameworks.Task) -> frameworks.NodeState | None:
    idle: list[frameworks.NodeState] = []
    future: list[frameworks.NodeState] = []
    reasons: dict[str, int] = {}
    for node in session.node_list:
        error = _fit_error(session, task, node)
        if error is not None:
            reasons[error] = reasons.get(error, 0) + 1
            continue
        if vectors.less_equal_zero(task.resreq, node.idle):
            idle.append(node)
        else:
            future.append(node)
    for candidates in (idle, future):
        if candidates:
            # Highest score wins; ties go to the first node by name.
            return max(candidates, key=lambda n: (session.node_score(task, n), _neg_name(n)))
    total = len(session.node_list)
    detail = ", ".join(f"{count} {reason}" for reason, count in sorted(reasons.items()))
    session.fit_errors[task.key] = f"0/{total} nodes are available" + (
        f": {detail}" if detail else ""
    )
    return None


def _neg_name(node: frameworks.NodeState) -> tuple[int, ...]:
    return tuple(-ord(c) for c in node.name)


# -- backfill --------------------------------------------------------------------------------


def backfill(session: frameworks.Session) -> None:
    """Place best-effort tasks (empty requests) of admitted jobs on the first feasible node."""
    for job in sorted(session.jobs.values(), key=session.job_key):
        if job.is_pending or job.queue not in session.queues:
            continue
        for task in sorted(job.tasks, key=session.task_key):
            if task.status != objects.TaskStatus.PENDING or task.sch_gated:
                continue
            if not vectors.is_empty(task.resreq, session.dims):
                continue
            for node in session.node_list:
                if session.predicate(task, node) is None:
                    stmt = Statement(session)
                    stmt.allocate(task, node.name)
                    stmt.commit()
                    break


# -- reclaim and preempt ---------------------------------------------------------------------


def _preemptor_tasks(session: frameworks.Session, job: frameworks.Job) -> list[frameworks.Task]:
    tasks = [
        t
        for t in job.tasks
        if t.status == objects.TaskStatus.PENDING
        and not t.sch_gated
        and (not session.admission_only or t.pod.unschedulable)
    ]
    tasks.sort(key=session.task_key)
    return tasks


def _evict_for(
    session: frameworks.Session,
    task: frameworks.Task,
    *,
    stmt: Statement,
    nodes: list[frameworks.NodeState],
    candidates_on: Callable[[frameworks.NodeState], list[frameworks.Task]],
    choose: Callable[[frameworks.Task, list[frameworks.Task]], frameworks.Victims],
    fits: Callable[[frameworks.NodeState, vectors.Vec], bool],
    describe: Describe,
) -> bool:
    """Try ``nodes`` in order. On a node with candidates whose chosen victims (possibly none)
    would leave room (``ValidateVictims``), evict them in victim order until ``fits`` holds,
    then pipeline the task there and keep those evictions; otherwise undo them and go on.
    Each eviction is recorded with ``describe`` (for ``task``, by the rule of the plugins that
    chose the victims). True when the task was pipelined."""
    for node in nodes:
        if session.predicate(task, node, for_preemption=True) is not None:
            continue
        candidates = candidates_on(node)
        if not candidates:
            continue
        victims = choose(task, candidates)
        voters = session.victim_voters
        future = node.future_idle()
        room = list(future)
        for victim in victims:
            vectors.iadd(room, victim.resreq)
        if not vectors.less_equal_zero(task.resreq, room):
            continue
        node_stmt = Statement(session)
        available = future
        for victim in sorted(victims, key=session.victim_key(task)):
            if fits(node, available):
                break
            node_stmt.evict(victim, describe(task, victim, voters))
            vectors.iadd(available, victim.resreq)
        if not fits(node, available):
            node_stmt.discard()
            continue
        node_stmt.pipeline(task, node.name)
        stmt.merge(node_stmt)
        return True
    return False


def _reclaim_fits(task: frameworks.Task) -> Callable[[frameworks.NodeState, vectors.Vec], bool]:
    """Reclaim stops evicting once the task's request fits what the node will have free."""

    def fits(_: frameworks.NodeState, available: vectors.Vec) -> bool:
        return vectors.less_equal_zero(task.resreq, available)

    return fits


def _preempt_fits(
    session: frameworks.Session, task: frameworks.Task
) -> Callable[[frameworks.NodeState, vectors.Vec], bool]:
    """Preempt stops once the queue admits the task (evictions in the same queue free its
    quota), the node will have room, and the predicates pass (``preemptorFitsOnNode``)."""

    def fits(node: frameworks.NodeState, _: vectors.Vec) -> bool:
        return (
            session.allocatable(task.job.queue, task)
            and vectors.less_equal_zero(task.resreq, node.future_idle())
            and session.predicate(task, node) is None
        )

    return fits


def _nodes_by_score(
    session: frameworks.Session, task: frameworks.Task
) -> list[frameworks.NodeState]:
    """Preempt tries the best-scored nodes first (ties by name)."""
    return sorted(session.node_list, key=lambda n: (-session.node_score(task, n), n.name))


def reclaim(session: frameworks.Session) -> None:
    """Take back resources other queues borrowed, for starving jobs of queues under their
    deserved share (spec §3.8, §3.9, §3.11); in admission mode, then for gated jobs that an
    ancestor's capability keeps out (quota reclaim, :func:`_reclaim_by_quota`)."""
    preemptors: dict[str, list[tuple[frameworks.OrderKey, int, frameworks.Job]]] = {}
    counter = itertools.count()
    # In admission mode only pods kube-scheduler gave up on may reclaim: look at their jobs only.
    candidates = (
        session.unschedulable_jobs.values() if session.admission_only else session.jobs.values()
    )
    for job in candidates:
        if job.is_pending or job.queue not in session.queues:
            continue
        # A job without a task that may reclaim would only be popped and put back: look at its
        # tasks first (cheap), then ask the plugins.
        if not _preemptor_tasks(session, job):
            continue
        if session.job_valid(job) is not None or not session.job_starving(job):
            continue
        preemptors.setdefault(job.queue, []).append((session.job_key(job), next(counter), job))
    for entries in preemptors.values():
        heapq.heapify(entries)
    heap = [_QueueItem(session, name) for name in preemptors]
    heapq.heapify(heap)
    describe = functools.partial(_describe_reclaim, _capacity_plugin(session))
    while heap:
        item = heapq.heappop(heap)
        jobs = preemptors[item.name]
        if not jobs:
            continue
        _, _, job = heapq.heappop(jobs)
        stmt = Statement(session)
        tasks = _preemptor_tasks(session, job)
        while session.job_starving(job) and tasks:
            task = tasks.pop(0)
            if task.pod.preemption_policy == "Never":
                session.task_messages[task.key] = (
                    "the pod's preemptionPolicy is Never: it does not reclaim"
                )
                continue
            if not session.preemptive(item.name, [task]):
                session.task_messages[task.key] = (
                    f"queue {item.name!r} may not reclaim: the pod would take it (and the "
                    "ancestors reclaim consults) past its deserved share on every requested "
                    "resource, or past its capability"
                )
                continue
            if not _evict_for(
                session,
                task,
                stmt=stmt,
                nodes=session.node_list,
                candidates_on=functools.partial(_reclaimees, session, job),
                choose=session.reclaimable,
                fits=_reclaim_fits(task),
                describe=describe,
            ):
                session.task_messages[task.key] = (
                    "no node has running pods that reclaim may take (their queues are within "
                    "their deserved share or guarantee, or not reclaimable)"
                )
        if session.job_pipelined(job):
            stmt.commit()
        else:
            stmt.discard()
        if jobs:
            heapq.heappush(heap, item)
    plugin = _capacity_plugin(session)
    if session.admission_only and plugin is not None:
        _reclaim_by_quota(session, plugin, describe=describe)


def _reclaim_by_quota(
    session: frameworks.Session, plugin: capacity.CapacityPlugin, *, describe: Describe
) -> None:
    """Admission mode: gated jobs blocked by an ancestor's capability reclaim what other queues
    borrowed under it (``quota_reclaim``, a deliberate divergence). Victims must be single
    pods: a session that folded pods (``compaction``, ``folding``) only finds out whether it
    has to, and asks to be run again without folding (``Session.redo_exact``)."""
    if session.exact_pods and not any(job.run is not None for job in session.jobs.values()):
        quota_reclaim.reclaim_by_quota(session, plugin, describe=describe)
    elif quota_reclaim.needs_exact_pods(session, plugin):
        session.redo_exact = True


def _reclaimees(
    session: frameworks.Session, job: frameworks.Job, node: frameworks.NodeState
) -> list[frameworks.Task]:
    out = []
    for task in node.tasks.values():
        if task.status != objects.TaskStatus.RUNNING or not task.pod.preemptable:
            continue
        other = task.job
        if other.queue == job.queue:
            continue
        queue = session.queues.get(other.queue)
        if queue is None or not queue.is_reclaimable:
            continue
        out.append(task)
    return sorted(out, key=lambda t: t.key)


def preempt(session: frameworks.Session) -> None:
    """Within a queue: starving jobs evict lower-priority jobs' tasks (then, within a job,
    lower-priority tasks) through the tiers' preemptable votes."""
    by_queue: dict[str, list[frameworks.Job]] = {}
    for job in sorted(session.jobs.values(), key=lambda j: j.key):
        if job.is_pending or job.queue not in session.queues:
            continue
        if session.job_valid(job) is not None:
            continue
        if session.job_starving(job):
            by_queue.setdefault(job.queue, []).append(job)
    for queue in session.sorted_queues(set(by_queue)):
        # Phase 1: starving jobs evict other jobs' tasks in the same queue.
        for job in sorted(by_queue[queue], key=session.job_key):
            stmt = Statement(session)
            tasks = _preemptor_tasks(session, job)
            while session.job_starving(job) and tasks:
                task = tasks.pop(0)
                if task.pod.preemption_policy == "Never":
                    continue
                _preempt_for(session, job, task, stmt=stmt, same_job=False)
            if session.job_pipelined(job):
                stmt.commit()
            else:
                stmt.discard()
        # Phase 2: tasks of one job preempt that job's lower-priority tasks, one at a time;
        # the first that cannot be placed ends the job's turn.
        for job in sorted(by_queue[queue], key=session.job_key):
            for task in _preemptor_tasks(session, job):
                if task.pod.preemption_policy == "Never":
                    continue
                stmt = Statement(session)
                if not _preempt_for(session, job, task, stmt=stmt, same_job=True):
                    stmt.discard()
                    break
                stmt.commit()


def _preempt_for(
    session: frameworks.Session,
    job: frameworks.Job,
    task: frameworks.Task,
    *,
    stmt: Statement,
    same_job: bool,
) -> bool:
    """:func:`_evict_for` with preempt's choices: the nodes by score, and on each the running
    preemptable pods of ``job``'s queue that belong to other jobs (``same_job`` False) or to
    ``job`` itself, as the tiers' preemptable vote chooses them. True when ``task`` was
    pipelined."""
    return _evict_for(
        session,
        task,
        stmt=stmt,
        nodes=_nodes_by_score(session, task),
        candidates_on=functools.partial(_preemptees, job, same_job=same_job),
        choose=session.preemptable,
        fits=_preempt_fits(session, task),
        describe=_describe_preempt,
    )


def _preemptees(
    job: frameworks.Job, node: frameworks.NodeState, *, same_job: bool
) -> list[frameworks.Task]:
    out = []
    for task in node.tasks.values():
        if task.status != objects.TaskStatus.RUNNING or not task.pod.preemptable:
            continue
        if (task.job is job) != same_job:
            continue
        if task.job.queue != job.queue:
            continue
        out.append(task)
    return sorted(out, key=lambda t: t.key)


# -- eviction records -------------------------------------------------------------------------
#
# The capacity plugin decides which pods reclaim may take (spec §3.9) and words its verdict
# (``capacity_reclaim.reclaim_reason``) when the victim is evicted.


def _capacity_plugin(session: frameworks.Session) -> capacity.CapacityPlugin | None:
    return next((p for p in session.plugins if isinstance(p, capacity.CapacityPlugin)), None)


_VOTES = {
    "gang": "its pod group runs more pods than its minMember",
    "conformance": "not a kube-system or system-critical pod",
}
"""What the victim-choosing vote of a plugin without its own rule means, for the reason."""


def _by(voters: tuple[str, ...]) -> str:
    """``chosen by the gang, conformance plugins (its pod group ...; not a ... pod)``: the
    plugins of the first tier that agreed on victims (a later tier, capacity's for example, is
    then not asked: Volcano's tier order)."""
    names = ", ".join(voters) or "no"
    text = f"chosen by the {names} plugin" + ("s" if len(voters) > 1 else "")
    meanings = [_VOTES[name] for name in voters if name in _VOTES]
    return text + (f" ({'; '.join(meanings)})" if meanings else "")


def _describe_reclaim(
    plugin: capacity.CapacityPlugin | None,
    evictor: frameworks.Task,
    victim: frameworks.Task,
    voters: tuple[str, ...],
) -> decisions.Eviction:
    """The reclaim record: the capacity plugin's rule when it chose the victim."""
    queue = victim.job.queue
    rule = decisions.EvictionRule.RECLAIM
    reason = f"a pod of queue {queue!r}, {_by(voters)}"
    if plugin is not None and capacity.NAME in voters:
        found = plugin.reclaim_reason(victim, evictor)
        if found is not None:
            rule, reason = found
    return _record(evictor, victim, action="reclaim", rule=rule, reason=reason)


def _describe_preempt(
    evictor: frameworks.Task, victim: frameworks.Task, voters: tuple[str, ...]
) -> decisions.Eviction:
    """The preempt record: the priority plugin's rule when it chose the victim."""
    queue = evictor.job.queue
    if "priority" not in voters:
        rule = decisions.EvictionRule.PREEMPT
        reason = f"a pod of queue {queue!r}, {_by(voters)}"
    elif victim.job is evictor.job:
        rule = decisions.EvictionRule.PREEMPT_LOWER_PRIORITY_TASK
        reason = (
            f"the pod's priority {victim.priority} is below {evictor.priority} of pod "
            f"{evictor.key} in the same pod group {evictor.job.key}"
        )
    else:
        rule = decisions.EvictionRule.PREEMPT_LOWER_PRIORITY
        reason = (
            f"pod group {victim.job.key} (priority {victim.job.priority}) has a lower priority "
            f"than pod group {evictor.job.key} (priority {evictor.job.priority}) in queue "
            f"{queue!r}"
        )
    return _record(evictor, victim, action="preempt", rule=rule, reason=reason)


def _record(
    evictor: frameworks.Task,
    victim: frameworks.Task,
    *,
    action: str,
    rule: decisions.EvictionRule,
    reason: str,
) -> decisions.Eviction:
    """The eviction of ``victim`` (on its node, from its queue) for ``evictor`` by ``action``,
    with the ``rule`` and ``reason`` that chose it."""
    return decisions.Eviction(
        victim=victim.key,
        reclaimer=evictor.key,
        action=action,
        rule=rule,
        reason=reason,
        node=victim.node,
        victim_queue=victim.job.queue,
        reclaimer_queue=evictor.job.queue,
    )


ACTIONS: dict[str, Callable[[frameworks.Session], None]] = {
    "enqueue": enqueue,
    "allocate": allocate,
    "backfill": backfill,
    "reclaim": reclaim,
    "preempt": preempt,
}
"""The actions queuetree implements, by the name a configuration gives them, in the order
messages list them."""
