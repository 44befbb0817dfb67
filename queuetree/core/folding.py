"""Folding: runs of interchangeable gated lone pods admitted in one step (issue 16).

An admission session decides about each gated pod in a fixed order: queues one after
another, and within a queue the jobs by job order (plugin keys, then creation time and uid),
each job admitted or not before the next is looked at. A lone gated pod is a job of one task.
When a queue holds many lone gated pods that differ in nothing the admission path reads, and
no other job of the queue comes between them in that order, the per-pod path takes them one
after the other with nothing else changing in between: each one that fits reserves its
request, and the first that does not fit leaves the figures as they were, so every later one
is refused by the same queue on the same resource at the same figures. The outcome of such a
*run* of ``n`` pods is therefore "the first ``k`` are admitted, the rest are held for one
reason", and ``k`` follows from the figures by arithmetic (``capacity.CapacityPlugin.admit_run``,
``enqueue_run``). The session keeps one job and one task for the whole run (those of its first
pod, with a ``frameworks.Run`` listing the members) and expands the run again only when it
writes the result.

What makes two gated pods interchangeable (:data:`Signature`): the same queue, the same pod
group shape (minMember 0 or 1, phase, priority class, minResources, synthetic or not), the same
requests and init requests, task priority, opt-in, and ``spec.schedulerName``. Node selectors,
affinity, tolerations, labels and preemption settings are not part of it: the admission path
never reads them (only placement and eviction do, and neither runs for gated pods).

A pod is a fold *candidate* when it is Pending with exactly the queue-allocation gate, not
marked unschedulable, stands for one pod (``count`` 1), carries no admission record, is the
only pod of its pod group, and that group exists, is in a leaf queue of the snapshot, is not
a gang (minMember at most 1) and is Pending or Inqueue. Everything else goes the per-pod way.

Runs are formed per queue in creation order: the candidates and every other job of the queue
that enqueue or allocate may act on (a Pending group, or a group with a Pending pod), sorted by
``(created, uid or key, key)``, split wherever the signature changes or another job comes
between. Runs formed this way are consecutive in the session's job order too: two pods of one
signature have equal plugin keys (every job-order key reads only signature fields), so any job
between them in job order has the same plugin keys and lies between them in creation order as
well. The session's orders tie-break on the job key after creation time and uid, so a run's
order does not depend on the snapshot's order.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import operator
from collections.abc import Callable, Hashable, Mapping
from typing import Any, NamedTuple

from queuetree.core import configs, frameworks, objects, plugins, resources

_PENDING_STATUS = objects.TaskStatus.PENDING
_PENDING = objects.PodGroupPhase.PENDING
_INQUEUE = objects.PodGroupPhase.INQUEUE
_ONLY_OURS = (objects.QUEUE_ALLOCATION_GATE,)

Signature = tuple[Hashable, ...]
"""What two interchangeable candidates share (see the module docstring)."""

_VOTING_HOOKS = frozenset(
    {
        frameworks.Hook.ALLOCATABLE,
        frameworks.Hook.JOB_ENQUEUEABLE,
        frameworks.Hook.JOB_ENQUEUED,
    }
)


class Candidate(NamedTuple):
    """A fold candidate (a tuple: one is made per gated pod, so it must be cheap)."""

    order: tuple[datetime.datetime, str, str]
    """``(created, uid or key, key)`` of the pod group: the job order's own tie-breaks (first,
    so that a queue's entries sort on it; the jobs that split runs are 1-tuples of it)."""
    key: str
    pod: objects.Pod
    group: objects.PodGroup
    signature: int
    """The same number for interchangeable candidates (:data:`Signature`, interned)."""


_new_candidate: Callable[[tuple[Any, ...]], Candidate] = functools.partial(tuple.__new__, Candidate)
"""``Candidate`` from a tuple of its fields without the Python-level constructor (one is made
per gated pod)."""


@dataclasses.dataclass(slots=True)
class Candidates:
    """The fold candidates of a snapshot."""

    groups: dict[str, str]
    """Their pod groups' keys -> their pod keys. A pod that is not a candidate but names one
    of these groups (a second pod of a lone pod's group) is for the caller to find: then
    nothing may fold."""
    by_queue: dict[str, list[Candidate]]
    """Queue -> its candidates, in snapshot order."""

    def __len__(self) -> int:
        return len(self.groups)


def supported(config: configs.SchedulerConfiguration) -> bool:
    """Whether the configured plugins allow folding: the capacity plugin is the only one
    that votes on admission (``allocatable``, ``job_enqueueable``, ``job_enqueued``), and it
    is configured at most once. True for every configuration of the plugins queuetree has;
    the check keeps a future voting plugin from being skipped silently."""
    voters = 0
    for tier in config.tiers:
        for option in tier.plugins:
            factory = plugins.PLUGIN_TYPES.get(option.name)
            hooks: frozenset[str] = getattr(factory, "hooks", frozenset())
            if not hooks & _VOTING_HOOKS:
                continue
            if option.name != "capacity":
                return False
            voters += 1
    return voters <= 1


def _resource_key(resource: resources.Resource | None, cache: dict[int, Hashable]) -> Hashable:
    """A hashable value of ``resource`` (pods share request objects: each is read once)."""
    if resource is None:
        return None
    hit = cache.get(id(resource))
    if hit is None:
        scalars = resource.scalars
        hit = (
            resource.milli_cpu,
            resource.memory,
            tuple(sorted(scalars.items())) if scalars else (),
        )
        cache[id(resource)] = hit
    return hit


def find_candidates(
    snapshot: objects.Snapshot,
    *,
    leaves: frozenset[str],
    task_priority: Callable[[objects.Pod], int],
) -> Candidates:
    """The fold candidates of ``snapshot`` (module docstring), but for the check that no
    other pod names a candidate's group (see :attr:`Candidates.groups`).

    ``leaves`` are the snapshot's leaf queues; ``task_priority`` is the session's reading of a
    pod's task priority (its annotation, else its priority)."""
    pod_groups = snapshot.pod_groups
    groups: dict[str, str] = {}
    by_queue: dict[str, list[Candidate]] = {}
    values: dict[int, Hashable] = {}
    by_identity: dict[Hashable, int] = {}
    """The signature with requests by object identity -> its number (pods share request
    objects, so most pods cost one lookup here)."""
    by_value: dict[Signature, int] = {}
    shared: set[str] = set()
    """Groups that two candidates name: not lone."""
    pending = _PENDING_STATUS
    admitted = objects.ADMITTED_QUEUE_ANNOTATION
    gate = objects.QUEUE_ALLOCATION_GATE
    task_priority_key = objects.TASK_PRIORITY_ANNOTATION
    new = _new_candidate
    for key, pod in snapshot.pods.items():
        if (
            pod.scheduling_gates != _ONLY_OURS
            or pod.status is not pending
            or pod.unschedulable
            or pod.count != 1
        ):
            continue
        group_key = pod.group
        group = pod_groups.get(group_key)
        if group is None or group.min_member > 1 or group.missing:
            continue
        queue = group.queue
        phase = group.phase
        annotations = pod.annotations
        if (
            queue not in leaves
            or (phase is not _PENDING and phase is not _INQUEUE)
            or admitted in annotations
        ):
            continue
        identity = (
            queue,
            group.min_member,
            # Not the enum itself: hashing an enum member is a Python-level call.
            phase is _INQUEUE,
            group.priority_class_name,
            group.synthetic,
            id(group.min_resources),
            id(pod.resreq),
            id(pod.init_resreq),
            pod.priority if task_priority_key not in annotations else task_priority(pod),
            annotations.get(gate) == "true",
            pod.scheduler_name,
        )
        signature = by_identity.get(identity)
        if signature is None:
            value = (
                *identity[:5],
                _resource_key(group.min_resources, values),
                _resource_key(pod.resreq, values),
                _resource_key(pod.init_resreq, values),
                *identity[8:],
            )
            signature = by_identity[identity] = by_value.setdefault(value, len(by_value))
        if group_key in groups:
            shared.add(group_key)
        groups[group_key] = key
        entries = by_queue.get(queue)
        if entries is None:
            entries = by_queue[queue] = []
        entries.append(
            new(((group.created, group.uid or group_key, group_key), key, pod, group, signature))
        )
    if shared:
        for queue, entries in by_queue.items():
            by_queue[queue] = [c for c in entries if c.group.key not in shared]
        for group_key in shared:
            del groups[group_key]
    return Candidates(groups=groups, by_queue=by_queue)


def form_runs(
    candidates: Candidates,
    *,
    others: Mapping[str, list[tuple[datetime.datetime, str, str]]],
) -> list[list[Candidate]]:
    """The runs of ``candidates``, each first in order first, every candidate in exactly one
    (many of length one), queues by name. ``others`` maps a queue to the ``(created, uid or
    key, key)`` of the other jobs of that queue that enqueue or allocate may act on: they
    split runs. Consumes ``candidates.by_queue`` (its lists are sorted in place)."""
    runs: list[list[Candidate]] = []
    for queue in sorted(candidates.by_queue):
        entries: list[tuple[Any, ...]] = candidates.by_queue[queue]  # type: ignore[assignment]
        split = others.get(queue)
        if split:
            entries.extend((order,) for order in split)
        # Group keys are unique, so the sort never compares past the first element.
        entries.sort(key=_ORDER)
        run: list[Candidate] = []
        signature = -1
        for entry in entries:
            if len(entry) == 1:
                if run:
                    runs.append(run)
                    run = []
                signature = -1
                continue
            if entry[4] != signature and run:
                runs.append(run)
                run = []
            run.append(entry)  # type: ignore[arg-type]
            signature = entry[4]
        if run:
            runs.append(run)
    return runs


_ORDER = operator.itemgetter(0)
"""The sort key of a queue's entries: ``(created, uid or key, key)``."""
