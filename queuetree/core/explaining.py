"""Explanations: why a pending or gated pod was not admitted, in words a person can act on.

Every reason names the queue that blocks the pod (its leaf queue, or which ancestor), the
resource and the figures in canonical Kubernetes quantities, for example::

    queue "org" (ancestor of leaf queue "team-a") has no room for cpu: requested 2, used 14 of
    capability 16

"used" is the queue's allocation plus the requests of admitted pods that are not placed yet
(reserved) and, for a gated pod, of the queue's pods that are being deleted but still hold
their nodes; the split is added when either is not zero. Beside each reason drawn from a
capacity rejection, :func:`remedies` says what would have to change for the pod to be admitted
(how much room to free, or the capability that would fit it).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from types import MappingProxyType

from queuetree.core import (
    capacity,
    conditions,
    frameworks,
    inqueue_bounds,
    objects,
    resources,
    vectors,
)

STRUCTURAL: Mapping[str, tuple[str, str]] = MappingProxyType(
    {
        "state": (
            "{where} is {detail}: only Open queues admit pods",
            "queue {queue!r} must be Open: kubectl queuetree open {queue}",
        ),
        "deleting": (
            "{where} is being deleted: it admits no new pods",
            "the pod group must move to another queue: {queue!r} goes once its pods finish",
        ),
        "not-leaf": (
            "{where} has child queues: only leaf queues admit pods",
            "the pod group must move to a leaf queue below {queue!r}",
        ),
        "broken": (
            "{where} cannot admit pods: {detail}",
            "the queue tree must be fixed at {queue!r}: its Ready condition says how",
        ),
    }
)
"""The blockers that are no question of room (``capacity.Blocker.kind``): the queue cannot
admit at all. Each with its explanation and its remedy (``{where}`` the queue as
:func:`explain_blocker` names it, ``{queue}`` its name, ``{detail}`` the blocker's)."""


def _structural(blocker: capacity.Blocker, *, where: str) -> tuple[str, str]:
    explanation, fix = STRUCTURAL[blocker.kind]
    facts = {"where": where, "queue": blocker.queue, "detail": blocker.detail}
    return explanation.format(**facts), fix.format(**facts)


def explain_blocker(blocker: capacity.Blocker, dims: vectors.Dims, *, lone: bool = False) -> str:
    """The rejection in words. ``lone``: the group refused at enqueue is the synthetic group of
    a lone pod, whose minResources are the pod's requests, so the sentence speaks of the pod."""
    where = f"queue {blocker.queue!r}"
    if blocker.queue != blocker.leaf:
        where += f" (ancestor of leaf queue {blocker.leaf!r})"
    if blocker.kind in STRUCTURAL:
        return _structural(blocker, where=where)[0]
    i = blocker.dim
    name = dims.names[i]
    requested = dims.format_value(i, blocker.requested)
    used = dims.format_value(i, blocker.allocated + blocker.reserved + blocker.releasing)
    limit = dims.format_value(i, blocker.capability)
    if blocker.kind == "enqueue":
        what = "the pod's requests" if lone else "the pod group's minResources"
        return (
            f"{where} cannot take {what} on {name}: requested "
            f"{requested}, used {used} of capability {limit} (allocated plus inqueue groups)"
        )
    text = (
        f"{where} has no room for {name}: requested {requested}, used {used} of capability {limit}"
    )
    parts = []
    if blocker.reserved > 0:
        parts.append(
            f"{dims.format_value(i, blocker.reserved)} reserved by admitted pods not yet placed"
        )
    if blocker.releasing > 0:
        parts.append(f"{dims.format_value(i, blocker.releasing)} held by pods being deleted")
    if parts:
        text += f" ({dims.format_value(i, blocker.allocated)} allocated, {', '.join(parts)})"
    return text


Shared = list[tuple[list[str], str]]
"""Held members of runs that got one reason together: ``(pod keys, reason)``."""

Sentences = dict[int, str]
"""id of a blocker -> :func:`explain_blocker` of it (``lone`` False): thousands of held pods
share one (interned) blocker, and formatting figures is the costly part."""


def explain(
    session: frameworks.Session,
    plugin: capacity.CapacityPlugin | None,
    *,
    shared: Shared | None = None,
    sentences: Sentences | None = None,
) -> dict[str, str]:
    """Pod key -> reason, for every pending pod that this session neither placed nor ungated.

    ``shared``, when given, receives the held members of runs (``frameworks.Run``) that share
    one reason and one blocker, so :func:`remedies` can treat each such set once; so does
    ``sentences`` receive the sentences of the blockers, for :func:`remedies` to reuse."""
    admitted: set[str] | None = None
    reasons: dict[str, str] = {}
    blockers = plugin.blockers if plugin is not None else {}
    cache: Sentences = {} if sentences is None else sentences
    # Snapshot order: deterministic for a given snapshot; callers sort for display.
    for key, task in session.tasks.items():
        run = task.job.run
        if run is not None:
            _explain_run(
                session,
                task,
                run,
                reasons=reasons,
                blockers=blockers,
                cache=cache,
                shared=shared,
            )
            continue
        if task.status != objects.TaskStatus.PENDING:
            continue
        if admitted is None:
            # Only tasks outside runs are looked up here (a run's members can be most of them).
            admitted = set(session.bound) | set(session.pipelined) | set(session.ungated)
        if key in admitted:
            continue
        pod = task.pod
        if session.admission_only and not pod.scheduling_gates and not pod.unschedulable:
            continue  # admitted (or never gated): kube-scheduler's to place, and it has not failed
        reason = _reason(
            session,
            task,
            key=key,
            job_key=task.job.key,
            pending=task.job.phase is objects.PodGroupPhase.PENDING,
            blockers=blockers,
            cache=cache,
        )
        if reason:
            reasons[key] = reason
    return reasons


def _explain_run(
    session: frameworks.Session,
    task: frameworks.Task,
    run: frameworks.Run,
    *,
    reasons: dict[str, str],
    blockers: dict[str, capacity.Blocker],
    cache: Sentences,
    shared: Shared | None,
) -> None:
    """The reason of every held member of a run (``folding``), each as its own lone pod's: the
    members a reason does not name share one text (a quota sentence, for example)."""
    start = run.ungated
    if start < run.inqueue:
        key = run.pods[start]
        if key not in session.task_messages and run.groups[start] not in session.job_messages:
            # The Inqueue members not admitted share their blocker (or none) and have no
            # message of their own: one reason for all of them.
            reason = _reason(
                session,
                task,
                key=key,
                job_key=run.groups[start],
                pending=False,
                blockers=blockers,
                cache=cache,
            )
            if reason:
                keys = run.pods[start : run.inqueue]
                reasons.update(zip(keys, itertools.repeat(reason)))
                if shared is not None:
                    shared.append((keys, reason))
            start = run.inqueue
    for index in range(start, len(run)):
        key = run.pods[index]
        job_key = run.groups[index]
        reason = _reason(
            session,
            task,
            key=key,
            job_key=job_key,
            pending=index >= run.inqueue,
            blockers=blockers,
            cache=cache,
        )
        if reason:
            reasons[key] = reason


def _reason(
    session: frameworks.Session,
    task: frameworks.Task,
    *,
    key: str,
    job_key: str,
    pending: bool,
    blockers: dict[str, capacity.Blocker],
    cache: Sentences,
) -> str:
    """Why pod ``key`` of pod group ``job_key`` (``task`` and its job, or, for a member of a
    run, the run's first task and job) was not admitted; ``pending``: its group is Pending."""
    pod = task.pod
    job = task.job
    if pod.held_by_other_gates:
        others = [g for g in pod.scheduling_gates if g != objects.QUEUE_ALLOCATION_GATE]
        return (
            f"waiting for other scheduling gates ({', '.join(others)}) to be removed; queue "
            "admission starts once only the queue-allocation gate is left"
        )
    if job.group.missing and job_key in session.job_messages:
        # Its queue is a guess (the pod's queue-name annotation): the group decides.
        return session.job_messages[job_key]
    if job.queue not in session.queues:
        where = (
            f"the pod's {objects.QUEUE_NAME_ANNOTATION} annotation"
            if job.group.synthetic
            else "the pod group's spec.queue"
        )
        return f"queue {job.queue!r} does not exist: create it or name an existing leaf in {where}"
    if pod.unschedulable and not pod.scheduling_gates:
        text = (
            "kube-scheduler found no node for the pod (Unschedulable) although its queue "
            "admitted it"
        )
        blocker = blockers.get(key)
        if blocker is not None and blocker.kind in STRUCTURAL:
            # The queue itself refused (closed, cut off): say so rather than why reclaim failed.
            text += "; reclaim cannot help: " + explain_blocker(blocker, session.dims)
        elif key in session.task_messages:
            text += "; reclaim cannot help: " + session.task_messages[key]
        return text
    if key in session.task_messages:
        return session.task_messages[key]
    if pending and job_key in blockers:
        lone = job.group.synthetic
        subject = f"pod {key}" if lone else f"pod group {job_key}"
        return f"{subject} is not admitted: " + explain_blocker(
            blockers[job_key], session.dims, lone=lone
        )
    if job_key in session.job_messages:
        return session.job_messages[job_key]
    if key in blockers:
        blocker = blockers[key]
        sentence = cache.get(id(blocker))
        if sentence is None:
            # Pods refused by the same queue at the same figures share one (interned) record,
            # hence one sentence.
            sentence = cache[id(blocker)] = explain_blocker(blocker, session.dims)
        return sentence
    if pending:
        return f"pod group {job_key} is still Pending (not enqueued in this session)"
    if key in session.fit_errors:
        return f"no node fits the pod: {session.fit_errors[key]}"
    if pod.sch_gated and not pod.opted_in:
        return (
            f'the pod lacks the opt-in annotation {objects.QUEUE_ALLOCATION_GATE}: "true"; '
            "its gate is not removed automatically"
        )
    if pod.sch_gated and not session.feature_gates.get(
        objects.FEATURE_SCHEDULING_GATES_QUEUE_ADMISSION, False
    ):
        return "the feature gate SchedulingGatesQueueAdmission is off: gates are not removed"
    return "not admitted in this session: its job did not get a turn or did not become ready"


def remedy(blocker: capacity.Blocker, dims: vectors.Dims, *, lone: bool = False) -> str:
    """What would have to change for the pod ``blocker`` refused to be admitted (``lone``: as
    :func:`explain_blocker`)."""
    queue = blocker.queue
    if blocker.kind in STRUCTURAL:
        return _structural(blocker, where="")[1]
    i = blocker.dim
    name = dims.names[i]
    used = blocker.allocated + blocker.reserved
    short = blocker.requested - (blocker.capability - used)
    what = "the pod group's minResources" if blocker.kind == "enqueue" and not lone else "the pod"
    return (
        f"{dims.format_value(i, short)} more {name} must be free in queue {queue!r} (pods "
        f"charged to it finishing or deleted), or its capability for {name} must be at least "
        f"{dims.format_value(i, used + blocker.requested)}, for {what} to fit"
    )


def brief(blocker: capacity.Blocker, dims: vectors.Dims) -> str:
    """The blocker in a few words, for a table cell: ``gpu full in 'ml' (8 of 8)``."""
    queue = blocker.queue
    if blocker.kind in STRUCTURAL:
        what = {
            "state": blocker.detail,
            "deleting": "being deleted",
            "not-leaf": "not a leaf",
            "broken": "broken",
        }
        return f"queue {queue!r} is {what[blocker.kind]}"
    i = blocker.dim
    used = dims.format_value(i, blocker.allocated + blocker.reserved)
    return (
        f"no room for {dims.names[i]} {dims.format_value(i, blocker.requested)} in {queue!r} "
        f"({used} of {dims.format_value(i, blocker.capability)} used)"
    )


def remedies(
    session: frameworks.Session,
    plugin: capacity.CapacityPlugin | None,
    reasons: dict[str, str],
    *,
    shared: Sequence[tuple[list[str], str]] = (),
    sentences: Sentences | None = None,
) -> tuple[dict[str, str], dict[str, str]]:
    """Pod key -> :func:`remedy`, and pod key -> :func:`brief`, for every reason of
    ``reasons`` that a capacity rejection of the pod (or of its pending pod group) gave.

    ``shared`` and ``sentences`` (from :func:`explain`): sets of pods with one reason and one
    blocker, each decided once for all its pods, and the sentences already written."""
    found: dict[str, str] = {}
    briefs: dict[str, str] = {}
    if plugin is None:
        return found, briefs
    texts: dict[tuple[int, bool], tuple[str, str, str]] = {}
    """(id of a blocker, lone) -> its sentence, remedy and brief: thousands of held pods share
    one (interned) blocker, and formatting figures is the costly part."""
    blockers = plugin.blockers
    dims = session.dims
    written = {} if sentences is None else sentences

    def matching(blocker: capacity.Blocker, reason: str) -> tuple[str, str, str] | None:
        # The reason was worded for a pod group or for a lone pod (explain_blocker's ``lone``):
        # the variant the reason contains is the one whose remedy applies.
        for lone in (False, True):
            text = texts.get((id(blocker), lone))
            if text is None:
                sentence = None if lone else written.get(id(blocker))
                if sentence is None:
                    sentence = explain_blocker(blocker, dims, lone=lone)
                text = texts[id(blocker), lone] = (
                    sentence,
                    remedy(blocker, dims, lone=lone),
                    brief(blocker, dims),
                )
            if text[0] in reason:
                return text
        return None

    for keys, reason in shared:
        blocker = blockers.get(keys[0])
        if blocker is None:
            continue
        text = matching(blocker, reason)
        if text is not None:
            # Otherwise the pods go through the loop below one by one, as any other.
            found.update(zip(keys, itertools.repeat(text[1])))
            briefs.update(zip(keys, itertools.repeat(text[2])))
    if len(found) == len(reasons):
        return found, briefs  # the shared sets covered every pod (their keys are reasons')
    member_groups: dict[str, str] | None = None
    # The pods a shared set covered (all of ``found`` so far) are skipped at C speed.
    for key in itertools.filterfalse(found.__contains__, reasons):
        reason = reasons[key]
        task = session.tasks.get(key)
        if task is not None and task.job.run is None:
            job_key = task.job.key
        else:
            if member_groups is None:
                member_groups = _member_groups(session)
            job_key = member_groups[key]
        for blocker in (blockers.get(key), blockers.get(job_key)):
            if blocker is None:
                continue
            text = matching(blocker, reason)
            if text is not None:
                found[key] = text[1]
                briefs[key] = text[2]
                break
    return found, briefs


def _member_groups(session: frameworks.Session) -> dict[str, str]:
    """Pod key -> pod group key, for every member of a run (``frameworks.Run``)."""
    found: dict[str, str] = {}
    for job in session.jobs.values():
        if job.run is not None:
            found.update(zip(job.run.pods, job.run.groups, strict=True))
    return found


def group_conditions(
    session: frameworks.Session,
    plugin: capacity.CapacityPlugin | None,
    phases: Mapping[str, objects.PodGroupPhase],
    *,
    bound: inqueue_bounds.InqueueBound | None,
) -> dict[str, conditions.GroupCondition]:
    """PodGroup key -> the admission condition (``conditions.GROUP_CONDITION``) the session
    wants each real PodGroup to show, given its ``phases``, in key order:

    - released for lack of pods in this session: True, ``InqueueTimeout``, with the bound;
    - Inqueue: False, ``Inqueue``, saying what its queue holds for its pods (``renew`` when
      it enters Inqueue while its condition already said so: its bound starts again);
    - Pending because enqueue refused it: True, ``NotEnoughResources`` (the queue or an
      ancestor has no room: which one, the resource and the figures) or
      ``QueueNotAdmitting`` (the queue is closed, not a leaf, cut off, or does not exist);
      a group still yielding after its release keeps the condition of its release;
    - Pending because none of its pods opted in: True, ``OutsideQueueAdmission``.

    Other groups (Running, Completed, Unknown; Pending for another reason, such as a group
    whose pods all run outside queue admission) are not listed: their condition is left as it
    is. Lone pods' single-pod groups have no object and are never listed.
    """
    found: dict[str, conditions.GroupCondition] = {}
    blockers = plugin.blockers if plugin is not None else {}
    released = set(session.released)
    timeout = inqueue_bounds.describe_timeout(bound.timeout) if bound is not None else ""
    for key, job in session.jobs.items():
        if job.group.synthetic or job.group.missing:
            continue
        # A run's members are groups like its first one (``folding``), each decided alone.
        for member in job.run.groups if job.run is not None else (key,):
            wanted = _group_condition(
                session,
                job,
                phase=phases.get(member),
                blocker=blockers.get(member),
                released=member in released,
                yielding=member in session.yielding,
                timeout=timeout,
            )
            if wanted is not None:
                found[member] = wanted
    return dict(sorted(found.items()))


def _group_condition(
    session: frameworks.Session,
    job: frameworks.Job,
    *,
    phase: objects.PodGroupPhase | None,
    blocker: capacity.Blocker | None,
    released: bool,
    yielding: bool,
    timeout: str,
) -> conditions.GroupCondition | None:
    """The condition :func:`group_conditions` wants for one group of ``job`` (the job's own,
    or a member of its run, which shares its queue, minResources and written phase)."""
    if released:
        return conditions.GroupCondition(
            unschedulable=True,
            reason=conditions.GroupReason.INQUEUE_TIMEOUT,
            message=_released(job, timeout),
        )
    if phase is objects.PodGroupPhase.INQUEUE:
        return conditions.GroupCondition(
            unschedulable=False,
            reason=conditions.GroupReason.INQUEUE,
            message=_admitted(job, timeout),
            # Entering Inqueue (again): a condition that already says Inqueue gets the time
            # of this entry, which starts the group's bound anew.
            renew=job.group.phase is not objects.PodGroupPhase.INQUEUE,
        )
    if phase is not objects.PodGroupPhase.PENDING or yielding:
        return None
    if blocker is not None:
        return conditions.GroupCondition(
            unschedulable=True,
            reason=(
                conditions.GroupReason.NOT_ENOUGH_RESOURCES
                if blocker.kind == "enqueue"
                else conditions.GroupReason.QUEUE_NOT_ADMITTING
            ),
            message=explain_blocker(blocker, session.dims),
        )
    if job.queue not in session.queues:
        return conditions.GroupCondition(
            unschedulable=True,
            reason=conditions.GroupReason.QUEUE_NOT_ADMITTING,
            message=f"queue {job.queue!r} does not exist: create it or name an existing leaf "
            "queue in the pod group's spec.queue",
        )
    if job.group.outside and not job.tasks:
        return conditions.GroupCondition(
            unschedulable=True,
            reason=conditions.GroupReason.OUTSIDE_QUEUE_ADMISSION,
            message="none of its pods opted in to queue admission: they run outside it, and "
            f"the group holds nothing in queue {job.queue!r}",
        )
    return None


def _held(job: frameworks.Job) -> str:
    """The group's ``minResources`` as a person reads them: ``cpu 4, memory 8Gi``."""
    minimum = job.group.min_resources
    if minimum is None:
        return ""
    listed = resources.to_resource_list(minimum)
    return ", ".join(f"{name} {value}" for name, value in listed.items() if value != "0")


def _admitted(job: frameworks.Job, timeout: str) -> str:
    """The message of an Inqueue group's condition (``timeout``: the bound, "" for none)."""
    held = _held(job)
    if not held:
        return (
            f"admitted to queue {job.queue!r}; the group declares no minResources, so its "
            "queue holds nothing for its pods"
        )
    text = f"admitted to queue {job.queue!r}, which holds its minResources ({held}) for its pods"
    if timeout and inqueue_bounds.holds_room(job.group):
        text += f"; the room is given back if the group has no pod {timeout} after admission"
    return text


def _released(job: frameworks.Job, timeout: str) -> str:
    """The message of a group released for lack of pods (``timeout``: the bound)."""
    return (
        f"no pod of the group came within {timeout} of its admission to queue {job.queue!r}: "
        f"the room held for it ({_held(job)}) is given back; it is admitted again when room "
        f"allows, for the next {timeout} only with room no other waiting work takes, then in "
        "its turn"
    )
