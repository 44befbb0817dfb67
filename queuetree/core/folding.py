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
request, task priority, opt-in, and ``spec.schedulerName``. Node selectors,
affinity, tolerations, labels and preemption settings are not part of it: the admission path
never reads them (only placement and eviction do, and neither runs for gated pods).

A pod is a fold *candidate* when it is Pending with exactly the queue-allocation gate, not
marked unschedulable, stands for one pod (``count`` 1), carries no admission record, is the
only pod of its pod group, and that group exists, is in a leaf queue of the snapshot, is not
a gang (minMember at most 1) and is Pending or Inqueue (a real PodGroup Inqueue with
``minResources`` excepted: ``capacity_usage.recheck_held`` may send it back to Pending).
Everything else goes the per-pod way.

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

import collections
import dataclasses
import datetime
import itertools
import operator
from collections.abc import Callable, Hashable, Iterator, Mapping

from queuetree.core import configs, frameworks, objects, plugins, resources

_PENDING_STATUS = objects.TaskStatus.PENDING
_PENDING = objects.PodGroupPhase.PENDING
_INQUEUE = objects.PodGroupPhase.INQUEUE
_ONLY_OURS = (objects.QUEUE_ALLOCATION_GATE,)

Signature = tuple[Hashable, ...]
"""What two interchangeable candidates of one queue share (see the module docstring)."""

Candidate = tuple[datetime.datetime, str, str, str, int]
"""A fold candidate: ``(created, uid or key, group key, pod key, signature)``.

A plain tuple, one per gated pod, so it costs one allocation. The first three fields are
``created``, ``uid`` (its key when empty) and the key of the pod group: the job order's own
tie-breaks, so that a queue's candidates sort on the tuples themselves (group keys are unique,
so a sort never compares past them). ``signature`` is the same number for interchangeable
candidates (:data:`Signature`, interned): never negative."""

_GROUP = operator.itemgetter(2)
_KEY = operator.itemgetter(3)
_SIGNATURE = operator.itemgetter(4)
_SPLIT = -1
"""The signature of the entries that stand for the other jobs of a queue (``iter_runs``): no
candidate's, so a run never spans one."""

_VOTING_HOOKS = frozenset(
    {
        frameworks.Hook.ALLOCATABLE,
        frameworks.Hook.JOB_ENQUEUEABLE,
        frameworks.Hook.JOB_ENQUEUED,
    }
)


@dataclasses.dataclass(slots=True)
class Candidates:
    """The fold candidates of a snapshot."""

    groups: dict[str, str]
    """Their pod groups' keys -> their pod keys. A pod that is not a candidate but names one
    of these groups (a second pod of a lone pod's group) is for the caller to find: then
    nothing may fold."""
    by_queue: dict[str, list[Candidate]]
    """Queue -> its candidates, in snapshot order (only queues that have any)."""
    others: list[tuple[str, objects.Pod]]
    """``(key, pod)`` of every pod of the snapshot that is not a candidate, in snapshot order:
    what the session builds pod by pod."""

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


_Shape = tuple[
    int,
    bool,
    str,
    bool,
    resources.Resource | None,
    resources.Resource,
    int,
    bool,
    str,
]
"""What :data:`Signature` is made of, as read off a candidate and its group: minMember,
Inqueue or not, priority class, synthetic or not, minResources, request, task priority,
opt-in, scheduler name (the queue aside: runs are formed per queue)."""


@dataclasses.dataclass(slots=True)
class _Numbers:
    """The numbers of the signatures seen so far: equal signatures get one number."""

    by_identity: dict[Hashable, int] = dataclasses.field(default_factory=dict)
    """The shape with its resources by object identity -> its number (pods share request
    objects, so most shapes cost one lookup here)."""
    by_value: dict[Signature, int] = dataclasses.field(default_factory=dict)
    values: dict[int, Hashable] = dataclasses.field(default_factory=dict)
    """id of a resource -> :func:`_resource_key` of it."""

    def signature(self, shape: _Shape) -> int:
        identity = (*shape[:4], id(shape[4]), id(shape[5]), *shape[6:])
        number = self.by_identity.get(identity)
        if number is None:
            values = self.values
            value = (
                *shape[:4],
                _resource_key(shape[4], values),
                _resource_key(shape[5], values),
                *shape[6:],
            )
            number = self.by_identity[identity] = self.by_value.setdefault(
                value, len(self.by_value)
            )
        return number


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
    # Every leaf, so that one lookup finds a candidate's list and tells that its queue is a
    # leaf; the leaves without candidates are dropped at the end.
    by_queue: dict[str, list[Candidate]] = {leaf: [] for leaf in leaves}
    others: list[tuple[str, objects.Pod]] = []
    numbers = _Numbers()
    last_shape: _Shape | tuple[()] = ()
    last_signature = _SPLIT
    # Locals: this loop runs once per pod.
    only_ours = _ONLY_OURS
    pending = _PENDING_STATUS
    pending_phase = _PENDING
    inqueue = _INQUEUE
    admitted = objects.ADMITTED_QUEUE_ANNOTATION
    gate = objects.QUEUE_ALLOCATION_GATE
    task_priority_key = objects.TASK_PRIORITY_ANNOTATION
    for item in snapshot.pods.items():
        key, pod = item
        if (
            pod.scheduling_gates != only_ours
            or pod.status is not pending
            or pod.unschedulable
            or pod.count != 1
        ):
            others.append(item)
            continue
        group_key = pod.group
        try:
            group = pod_groups[group_key]
        except KeyError:
            others.append(item)
            continue
        entries = by_queue.get(group.queue)  # None: not a leaf
        phase = group.phase
        annotations = pod.annotations
        if (
            entries is None
            or group.min_member > 1
            or group.missing
            or (phase is not pending_phase and phase is not inqueue)
            or admitted in annotations
            # What a real Inqueue group holds is checked again, group by group, when its
            # queue is over (``capacity_usage.recheck_held``): it goes the per-pod way.
            or (phase is inqueue and not group.synthetic and group.min_resources is not None)
        ):
            others.append(item)
            continue
        shape = (
            group.min_member,
            # Not the enum itself: hashing an enum member is a Python-level call.
            phase is inqueue,
            group.priority_class_name,
            group.synthetic,
            group.min_resources,
            pod.resreq,
            pod.priority if task_priority_key not in annotations else task_priority(pod),
            annotations.get(gate) == "true",
            pod.scheduler_name,
        )
        # Candidates next to each other in the snapshot usually have one shape (a job's pods
        # are listed together, and share request objects): a tuple comparison, by identity
        # first, then finds the signature; equal values mean equal signatures.
        if shape != last_shape:
            last_shape = shape
            last_signature = numbers.signature(shape)
        groups[group_key] = key
        entries.append((group.created, group.uid or group_key, group_key, key, last_signature))
    by_queue = {queue: entries for queue, entries in by_queue.items() if entries}
    if len(groups) != sum(map(len, by_queue.values())):
        # A group that two candidates name is no lone pod's: neither is a candidate. Rare.
        named = collections.Counter(map(_GROUP, itertools.chain.from_iterable(by_queue.values())))
        shared = {group_key for group_key, count in named.items() if count > 1}
        for queue, entries in by_queue.items():
            by_queue[queue] = [c for c in entries if c[2] not in shared]
        by_queue = {queue: entries for queue, entries in by_queue.items() if entries}
        for group_key in shared:
            del groups[group_key]
        others = [item for item in snapshot.pods.items() if groups.get(item[1].group) != item[0]]
    return Candidates(groups=groups, by_queue=by_queue, others=others)


def iter_runs(
    candidates: Candidates,
    *,
    others: Mapping[str, list[tuple[datetime.datetime, str, str]]],
) -> Iterator[list[Candidate]]:
    """The runs of ``candidates``, each first in order first, every candidate in exactly one
    (many of length one), queues by name. ``others`` maps a queue to the ``(created, uid or
    key, key)`` of the other jobs of that queue that enqueue or allocate may act on: they
    split runs. Consumes ``candidates.by_queue``: its lists are sorted in place, and emptied
    once their runs are yielded.

    A queue's runs are yielded right after its candidates are sorted, so that whoever reads
    their keys next (:func:`members`) finds them still in the processor's caches; so does
    the release of its candidates, then."""
    for queue in sorted(candidates.by_queue):
        entries = candidates.by_queue[queue]
        split = others.get(queue)
        if split:
            entries.extend((created, uid, key, "", _SPLIT) for created, uid, key in split)
        # Group keys and job keys are unique, so the sort never compares past the third field.
        entries.sort()
        for signature, members in itertools.groupby(entries, _SIGNATURE):
            if signature != _SPLIT:
                yield list(members)
        entries.clear()


def members(run: list[Candidate]) -> tuple[list[str], list[str]]:
    """The pod keys and the pod group keys of the members of ``run``, in order."""
    return list(map(_KEY, run)), list(map(_GROUP, run))
