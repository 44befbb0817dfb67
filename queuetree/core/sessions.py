"""One scheduling session, from snapshot to decisions: the entry point of the core.

``run_session`` is what ``queuetree session`` and the operator call. Phases of the cycle:

1. dimensions: every resource name in the snapshot gets an index (``vectors.Dims``);
2. state: jobs (pod groups, synthetic ones for lone pods), tasks and nodes, in dense vectors;
3. plugins: the configured tiers are instantiated (unknown names are warnings) and opened;
4. actions: the configured actions in order; in admission mode only enqueue, the admission of
   gated pods and reclaim for pods kube-scheduler left Unschedulable (no binds, no pipelines);
5. decisions: binds, pipelines, evictions, ungates, pod group phases, queue figures, reasons.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import gc
import itertools
import operator
from collections.abc import Iterable, Mapping
from types import MappingProxyType

from queuetree.core import (
    actions,
    capacity,
    compaction,
    configs,
    decisions,
    explaining,
    features,
    folding,
    frameworks,
    governing,
    inqueue_bounds,
    objects,
    ordering,
    plugins,
    resources,
    vectors,
)

KNOWN_ACTIONS: tuple[str, ...] = tuple(actions.ACTIONS)
"""The action names a configuration may list (derived from the actions' table)."""
KNOWN_PLUGINS: tuple[str, ...] = tuple(plugins.PLUGIN_TYPES)
"""The plugin names a configuration may list (derived from the plugins' table)."""


def run_session(
    snapshot: objects.Snapshot,
    *,
    config: configs.SchedulerConfiguration,
    feature_gates: Mapping[str, bool],
    admission_only: bool = False,
    compact: bool = True,
    fold: bool = True,
    scheduler_names: frozenset[str] | None = None,
    adopted_scheduler_names: frozenset[str] = frozenset(),
    bound: inqueue_bounds.InqueueBound | None = None,
    unfolded: objects.Snapshot | None = None,
) -> decisions.SessionResult:
    """Run one session over ``snapshot`` and return its decisions; never raises on bad trees.

    ``unfolded``: the same cluster with no pod folded, when the caller folded ``snapshot``'s
    settled lone pods itself (the operator's state keeps them folded; it passes
    ``compact=False``). Quota reclaim (``quota_reclaim``) chooses its victims among single
    pods: when it has some to choose, the session runs again over ``unfolded``.

    ``bound`` (the operator's ``--inqueue-timeout`` as of now) bounds how long a PodGroup with
    no pod holds its queue's room while Inqueue (``inqueue_bounds``): such a group past its
    bound is Pending again (``SessionResult.released``) and yields to other work for one more
    bound. None: no bound (Volcano's behaviour).

    ``scheduler_names`` (admission mode) are the schedulers that place ungated pods: a gated pod
    that names another ``spec.schedulerName`` is never ungated (nothing would place it, and its
    reservation would hold its queue's room for ever) and is told why. None: any scheduler.
    ``adopted_scheduler_names`` (the webhook's ``--adopt-scheduler-names``) only word that
    reason: such a pod should have been adopted at creation, and was not.

    In admission mode only the pods governed by queue admission count
    (``governing.admission_snapshot``): the others are left out, and what they hold on their
    nodes stays there (``Snapshot.outside``). Volcano mode counts every pod of the snapshot.

    In admission mode the snapshot's settled lone pods are first folded into one pod per queue
    and state (``compaction.compact``), which leaves the result unchanged and makes the session
    cost follow the pods it decides about rather than the cluster; ``compact=False`` walks
    every pod (the reference the tests compare against).

    In admission mode, runs of interchangeable gated lone pods (``folding``) are also decided
    in one step each, with the same result as pod by pod; ``fold=False`` decides pod by pod
    (the reference of tests/core/test_folding.py, and a fallback).

    Structural faults of the queue tree (cycles, missing parents, pods in non-leaf queues) are
    reported in ``errors`` and block only the queues and pod groups involved; ``ready`` is False
    when any such fault exists (the reference scheduler would have admitted nothing at all).

    The cyclic garbage collector is paused while the session runs (and restored after): a
    session allocates a few objects per pod, which triggers full collections that walk every
    object of the snapshot again and again (about a third of the time of a 100,000-pod session).
    Before returning, the session breaks its own reference cycles, so that its state is freed
    by reference counting at once instead of being left for a later collection.
    """
    exact = functools.partial(
        _exact,
        config=config,
        feature_gates=feature_gates,
        admission_only=admission_only,
        scheduler_names=scheduler_names,
        adopted_scheduler_names=adopted_scheduler_names,
        bound=bound,
    )
    enabled = gc.isenabled()
    gc.disable()
    try:
        if admission_only:
            snapshot = governing.admission_snapshot(snapshot)
        if not (admission_only and compact):
            result = _run(
                snapshot,
                config=config,
                feature_gates=feature_gates,
                admission_only=admission_only,
                fold=fold,
                scheduler_names=scheduler_names,
                adopted_scheduler_names=adopted_scheduler_names,
                bound=bound,
                exact_pods=unfolded is None,
            )
            if result is not None:
                return result
            if unfolded is not None and admission_only:
                snapshot = governing.admission_snapshot(unfolded)
            return exact(snapshot)
        compacted = compaction.compact(snapshot)
        result = _run(
            compacted.snapshot,
            config=config,
            feature_gates=feature_gates,
            admission_only=admission_only,
            fold=fold,
            scheduler_names=scheduler_names,
            adopted_scheduler_names=adopted_scheduler_names,
            bound=bound,
            exact_pods=not compacted.folded,
        )
        if result is None:
            # Quota reclaim has victims to choose among pods the session folded: again, with
            # every pod as itself.
            return exact(snapshot)
        return dataclasses.replace(result, pod_groups=compacted.restore_phases(result.pod_groups))
    finally:
        if enabled:
            gc.enable()


def _exact(
    snapshot: objects.Snapshot,
    *,
    config: configs.SchedulerConfiguration,
    feature_gates: Mapping[str, bool],
    admission_only: bool,
    scheduler_names: frozenset[str] | None,
    adopted_scheduler_names: frozenset[str],
    bound: inqueue_bounds.InqueueBound | None,
) -> decisions.SessionResult:
    """:func:`_run` with every pod as itself (nothing compacted, nothing folded)."""
    result = _run(
        snapshot,
        config=config,
        feature_gates=feature_gates,
        admission_only=admission_only,
        fold=False,
        scheduler_names=scheduler_names,
        adopted_scheduler_names=adopted_scheduler_names,
        bound=bound,
        exact_pods=True,
    )
    assert result is not None  # an exact session never asks to be run again
    return result


def _run(
    snapshot: objects.Snapshot,
    *,
    config: configs.SchedulerConfiguration,
    feature_gates: Mapping[str, bool],
    admission_only: bool,
    fold: bool,
    scheduler_names: frozenset[str] | None,
    adopted_scheduler_names: frozenset[str],
    bound: inqueue_bounds.InqueueBound | None,
    exact_pods: bool,
) -> decisions.SessionResult | None:
    """One session over ``snapshot``; None when quota reclaim needs it run again with every pod
    as itself (``exact_pods`` False: ``snapshot`` is compacted, or ``fold`` may fold)."""
    # 0. feature gates: a gate the caller leaves out takes queuetree's default
    feature_gates = features.resolve(feature_gates)
    # 1. dimensions
    dims = vectors.Dims.of(_scalar_names(snapshot))
    # 2. state
    session = _build_session(
        snapshot,
        dims=dims,
        config=config,
        feature_gates=feature_gates,
        admission_only=admission_only,
        fold=fold,
        bound=bound,
    )
    session.scheduler_names = scheduler_names
    session.adopted_scheduler_names = adopted_scheduler_names
    session.exact_pods = exact_pods
    # 3. plugins
    tiers = plugins.build_tiers(config, session.warnings)
    session.register(tiers)
    capacity_plugin = next(
        (p for p in session.plugins if isinstance(p, capacity.CapacityPlugin)), None
    )
    # 4. actions
    for name in config.actions:
        if admission_only:
            if name == "enqueue":
                actions.enqueue(session)
            elif name == "allocate":
                actions.allocate(session, admission_only=True)
            elif name == "reclaim":
                actions.reclaim(session)
            continue
        action = actions.ACTIONS.get(name)
        if action is None:
            session.warnings.append(f"action {name!r} is not supported and is skipped")
            continue
        action(session)
    if admission_only and "allocate" not in config.actions:
        # The operator's whole purpose is gate admission: run it even if the file omits allocate.
        actions.allocate(session, admission_only=True)
    # 5. decisions
    if session.redo_exact:
        _release(session, capacity_plugin)
        return None
    try:
        return _result(session, capacity_plugin, bound=bound)
    finally:
        _release(session, capacity_plugin)


def _release(session: frameworks.Session, plugin: capacity.CapacityPlugin | None) -> None:
    """Break the session's reference cycles (task <-> job, session <-> plugins, a queue and its
    chain) so that everything is freed as soon as the caller drops the result."""
    for job in session.jobs.values():
        job.tasks = []
    if plugin is not None:
        for attr in plugin.attrs.values():
            attr.chain = ()
            attr.figures = ()
            attr.ancestors = ()
            attr.children = []
    vars(session).clear()


_FINISHED = frozenset({objects.TaskStatus.SUCCEEDED, objects.TaskStatus.FAILED})
_WAITING = frozenset({objects.TaskStatus.PENDING, objects.TaskStatus.PIPELINED})
_SCALARS = operator.attrgetter("scalars")
_MIN_RESOURCES = operator.attrgetter("min_resources")
_REQUEST_SCALARS = operator.attrgetter("resreq.scalars")
_NOT_NONE = functools.partial(operator.is_not, None)


def _scalar_names(snapshot: objects.Snapshot) -> set[str]:
    names: set[str] = set()

    def see(resource: resources.Resource | None) -> None:
        if resource is not None and resource.scalars:
            names.update(resource.scalars)

    for node in snapshot.nodes.values():
        see(node.allocatable)
    for queue in snapshot.queues.values():
        see(queue.capability)
        see(queue.deserved)
        see(queue.guarantee)
    for held in snapshot.outside.values():
        see(held.used)
    # Pod groups and pods are many, most name no scalar, and the others share a handful of
    # request objects: their scalar maps are picked out at C speed (empty ones and groups
    # without minResources dropped), and each distinct map is read once.
    minimums = filter(_NOT_NONE, map(_MIN_RESOURCES, snapshot.pod_groups.values()))
    pods = snapshot.pods.values()
    maps: dict[int, Mapping[str, resources.Amount]] = {}
    for found in (map(_SCALARS, minimums), map(_REQUEST_SCALARS, pods)):
        maps.update({id(scalars): scalars for scalars in filter(None, found)})
    for scalars in maps.values():
        names.update(scalars)
    return names


def _build_session(
    snapshot: objects.Snapshot,
    *,
    dims: vectors.Dims,
    config: configs.SchedulerConfiguration,
    feature_gates: Mapping[str, bool],
    admission_only: bool,
    fold: bool = False,
    bound: inqueue_bounds.InqueueBound | None = None,
) -> frameworks.Session:
    priority_classes = snapshot.priority_classes
    default_priority = next(
        (
            pc.value
            for pc in sorted(priority_classes.values(), key=lambda p: p.name)
            if pc.global_default
        ),
        0,
    )
    # Fold candidates (admission mode): decided per run, built after the loops below.
    candidates = (
        folding.find_candidates(
            snapshot,
            leaves=compaction.leaves(snapshot.queues),
            task_priority=_task_priority,
        )
        if fold and admission_only and folding.supported(config)
        else None
    )
    folded_groups = candidates.groups if candidates is not None else {}
    pod_groups = snapshot.pod_groups
    group_items: Iterable[tuple[str, objects.PodGroup]] = pod_groups.items()
    if len(folded_groups) == len(pod_groups):
        group_items = ()  # every group is a candidate's (its keys are some of pod_groups')
    elif folded_groups:
        # The candidates' groups are built with their runs below (skipped at C speed).
        group_items = [
            (key, pod_groups[key])
            for key in itertools.filterfalse(folded_groups.__contains__, pod_groups)
        ]
    jobs: dict[str, frameworks.Job] = {}
    job_type = frameworks.Job
    bounded: list[str] = []
    """Real groups with conditions: those a bound may release or keep yielding."""
    for key, group in group_items:
        if bound is not None and group.conditions and not group.synthetic:
            bounded.append(key)
        # Inlined _new_job, positional: this runs once per pod group.
        priority_class = (
            priority_classes.get(group.priority_class_name) if priority_classes else None
        )
        minimum = group.min_resources
        jobs[key] = job_type(
            group,
            key,
            group.queue,
            priority_class.value if priority_class else default_priority,
            group.min_member,
            dims.vec(minimum) if minimum is not None else None,
            group.phase,
            (group.created, group.uid or key),
        )
    nodes: dict[str, frameworks.NodeState] = {}
    outside = snapshot.outside
    for name, node in snapshot.nodes.items():
        allocatable = dims.vec(node.allocatable)
        idle = list(allocatable)
        releasing = dims.zero()
        held = outside.get(name) if outside else None
        if held is not None:
            # Pods outside queue admission still use the node: less idle room, the same
            # allocatable (cluster totals and shares are the queues' business only).
            vectors.isub(idle, dims.vec(held.used))
            vectors.iadd(releasing, dims.vec(held.releasing))
        nodes[name] = frameworks.NodeState(
            node=node,
            allocatable=allocatable,
            idle=idle,
            releasing=releasing,
            pipelined=dims.zero(),
        )
    tasks: dict[str, frameworks.Task] = {}
    cache: dict[int, tuple[vectors.Vec, tuple[int, ...], tuple[int, ...]]] = {}
    occupying = objects.OCCUPYING_STATUSES
    gate_on = feature_gates.get(objects.FEATURE_SCHEDULING_GATES_QUEUE_ADMISSION, False)
    in_flight: dict[str, int] = {}
    unschedulable: dict[str, frameworks.Job] = {}
    # Locals: the loop below runs once per pod.
    task_type = frameworks.Task
    pending = objects.TaskStatus.PENDING
    # The fold candidates are built with their runs below.
    for key, pod in candidates.others if candidates is not None else snapshot.pods.items():
        job = jobs.get(pod.group)
        charged = pod.admitted_queue if pod.annotations else ""
        if job is None or (charged and job.queue != charged):
            if folded_groups and pod.group in folded_groups:
                # A second pod of a candidate's group: that group is no lone pod's. Rare;
                # build again without folding rather than untangle what was built.
                return _build_session(
                    snapshot,
                    dims=dims,
                    config=config,
                    feature_gates=feature_gates,
                    admission_only=admission_only,
                    fold=False,
                    bound=bound,
                )
            job = _stand_in_job(
                pod,
                key=key,
                charged=charged,
                jobs=jobs,
                dims=dims,
                priority_classes=priority_classes,
                default_priority=default_priority,
            )
        hit = cache.get(id(pod.resreq))
        if hit is None:
            hit = _cached_vec(cache, pod.resreq, dims)
        resreq, req_dims, nonzero = hit
        # Positional: this runs once per pod (field order of frameworks.Task).
        task = task_type(
            pod,
            key,
            job,
            resreq,
            req_dims,
            nonzero,
            pod.status,
            pod.node_name,
            _task_priority(pod) if pod.annotations else pod.priority,
            (pod.created, pod.uid or key),
        )
        job.add_task(task)
        tasks[key] = task
        if pod.node_name:
            state = nodes.get(pod.node_name)
            if state is not None and pod.status in occupying:
                state.add(task)
        if not pod.scheduling_gates and pod.status is pending:
            if gate_on and pod.holds_reservation:
                in_flight[job.key] = in_flight.get(job.key, 0) + 1
            if pod.unschedulable:
                unschedulable[job.key] = job
    if candidates:
        others = _acting_jobs(jobs, set(candidates.by_queue))
        pods = snapshot.pods
        for run in folding.iter_runs(candidates, others=others):
            _, _, group_key, first_key, _ = run[0]
            group = pod_groups[group_key]
            minimum = group.min_resources
            priority_class = (
                priority_classes.get(group.priority_class_name) if priority_classes else None
            )
            job = job_type(
                group,
                group.key,
                group.queue,
                priority_class.value if priority_class else default_priority,
                group.min_member,
                dims.vec(minimum) if minimum is not None else None,
                group.phase,
                (group.created, group.uid or group.key),
            )
            jobs[job.key] = job
            task = _new_task(pods[first_key], key=first_key, job=job, dims=dims, cache=cache)
            job.add_task(task)
            tasks[first_key] = task
            if len(run) > 1:
                keys, groups = folding.members(run)
                job.run = frameworks.Run(pods=keys, groups=groups)
                if group.phase is objects.PodGroupPhase.INQUEUE:
                    job.run.inqueue = len(run)
    session = frameworks.Session(
        config=config,
        dims=dims,
        queues=snapshot.queues,
        jobs=jobs,
        tasks=tasks,
        nodes=nodes,
        feature_gates=feature_gates,
        admission_only=admission_only,
    )
    session.in_flight = in_flight
    session.unschedulable_jobs = unschedulable
    if bound is not None:
        _apply_bound(session, bounded, bound=bound)
    return session


def _apply_bound(
    session: frameworks.Session, keys: list[str], *, bound: inqueue_bounds.InqueueBound
) -> None:
    """Release the groups of ``keys`` whose Inqueue bound ran out with no unfinished pod
    (Pending from now on, before any plugin counts their room), and mark the ones released
    less than a bound ago that still have none as yielding (``inqueue_bounds``)."""
    for key in keys:
        job = session.jobs[key]
        if any(task.status not in _FINISHED for task in job.tasks):
            continue  # its pods came: it is admitted (or not) as any other group
        if inqueue_bounds.expired(job.group, bound=bound):
            job.phase = objects.PodGroupPhase.PENDING
            session.released.append(key)
        elif inqueue_bounds.yielding(job.group, bound=bound):
            session.yielding.add(key)


def _acting_jobs(
    jobs: Mapping[str, frameworks.Job], queues: set[str]
) -> dict[str, list[tuple[datetime.datetime, str, str]]]:
    """Queue -> ``(created, uid or key, key)`` of its jobs that enqueue or allocate may act on
    (Pending, or with a Pending task), for ``queues`` (those with fold candidates): they split
    runs (``folding.iter_runs``)."""
    pending_phase = objects.PodGroupPhase.PENDING
    pending = objects.TaskStatus.PENDING
    found: dict[str, list[tuple[datetime.datetime, str, str]]] = {}
    for job in jobs.values():
        if job.queue not in queues:
            continue
        if job.phase is pending_phase or any(task.status is pending for task in job.tasks):
            found.setdefault(job.queue, []).append((*job.default_order, job.key))
    return found


def _new_task(
    pod: objects.Pod,
    *,
    key: str,
    job: frameworks.Job,
    dims: vectors.Dims,
    cache: dict[int, tuple[vectors.Vec, tuple[int, ...], tuple[int, ...]]],
) -> frameworks.Task:
    """The task of ``pod`` in ``job``, as the loop of :func:`_build_session` makes it."""
    resreq, req_dims, nonzero = _cached_vec(cache, pod.resreq, dims)
    return frameworks.Task(
        pod,
        key,
        job,
        resreq,
        req_dims,
        nonzero,
        pod.status,
        pod.node_name,
        _task_priority(pod),
        (pod.created, pod.uid or key),
    )


def _stand_in_job(
    pod: objects.Pod,
    *,
    key: str,
    charged: str,
    jobs: dict[str, frameworks.Job],
    dims: vectors.Dims,
    priority_classes: Mapping[str, objects.PriorityClass],
    default_priority: int,
) -> frameworks.Job:
    """The job of a pod whose PodGroup is not in the snapshot, or that was admitted to another
    queue than the one its group names now (both found in ``jobs`` or added to it):

    - admitted (``charged``, the admission record): a single-pod job of its own in the queue it
      was admitted to, so it stays charged there whatever its group or annotations say now
      (its key, ``<pod key>/admitted``, can be no PodGroup's: those have one slash);
    - naming a PodGroup that does not exist (yet): the stand-in of that group, shared by every
      pod that names it and marked ``missing``, so none of them is admitted before the group
      exists and its whole minMember fits;
    - naming no group (a caller that did not give its single-pod group): its single-pod group.
    """
    if charged:
        group = objects.single_pod_group(
            pod, queue=charged, name=f"{pod.name}/admitted", admitted=True
        )
    elif pod.names_group:
        found = jobs.get(pod.group)
        if found is not None:
            return found
        namespace, _, name = pod.group.partition("/")
        group = objects.PodGroup(
            namespace=namespace,
            name=name,
            queue=pod.annotations.get(objects.QUEUE_NAME_ANNOTATION, objects.DEFAULT_QUEUE),
            synthetic=True,
            missing=True,
            created=pod.created,
        )
    else:
        group = objects.PodGroup(
            namespace=pod.namespace,
            name=pod.name,
            queue=pod.annotations.get(objects.QUEUE_NAME_ANNOTATION, objects.DEFAULT_QUEUE),
            synthetic=True,
            created=pod.created,
            uid=pod.uid,
        )
    job = _new_job(
        group,
        key=group.key if (charged or pod.names_group) else (pod.group or key),
        dims=dims,
        priority_classes=priority_classes,
        default_priority=default_priority,
    )
    jobs[job.key] = job
    return job


def _cached_vec(
    cache: dict[int, tuple[vectors.Vec, tuple[int, ...], tuple[int, ...]]],
    resource: resources.Resource,
    dims: vectors.Dims,
) -> tuple[vectors.Vec, tuple[int, ...], tuple[int, ...]]:
    # Pods often share one request object; converting it once keeps session open cheap.
    # Vectors of tasks are never mutated, so sharing them is safe.
    hit = cache.get(id(resource))
    if hit is None:
        vec = dims.vec(resource)
        hit = (
            vec,
            vectors.requested_dims(vec, dims),
            tuple(i for i, value in enumerate(vec) if value),
        )
        cache[id(resource)] = hit
    return hit


def _task_priority(pod: objects.Pod) -> int:
    if not pod.annotations:
        return pod.priority
    raw = pod.annotations.get(objects.TASK_PRIORITY_ANNOTATION)
    if raw is not None:
        try:
            return int(raw)
        except ValueError:
            pass
    return pod.priority


def _new_job(
    group: objects.PodGroup,
    *,
    key: str,
    dims: vectors.Dims,
    priority_classes: Mapping[str, objects.PriorityClass],
    default_priority: int,
) -> frameworks.Job:
    priority_class = priority_classes.get(group.priority_class_name)
    return frameworks.Job(
        group=group,
        key=key,
        queue=group.queue,
        priority=priority_class.value if priority_class else default_priority,
        min_member=group.min_member,
        min_resources=dims.vec(group.min_resources) if group.min_resources is not None else None,
        phase=group.phase,
        default_order=(group.created, group.uid or key),
    )


def _result(
    session: frameworks.Session,
    plugin: capacity.CapacityPlugin | None,
    *,
    bound: inqueue_bounds.InqueueBound | None,
) -> decisions.SessionResult:
    dims = session.dims
    queues: dict[str, decisions.QueueFigures] = {}
    made: dict[tuple[float, ...], resources.Resource] = {}

    def resource(vec: vectors.Vec) -> resources.Resource:
        # Many queues share figures (zero, unlimited): build each distinct Resource once.
        key = tuple(vec)
        hit = made.get(key)
        if hit is None:
            hit = made[key] = dims.to_resource(vec)
        return hit

    if plugin is not None:
        for name in sorted(plugin.attrs):
            attr = plugin.attrs[name]
            if name not in session.queues:
                continue  # the implicit root is not a queue of the cluster
            queues[name] = decisions.QueueFigures(
                allocated=resource(attr.allocated),
                deserved=resource(attr.deserved),
                capability=resource(attr.capability),
                real_capability=resource(attr.real_capability),
                guarantee=resource(attr.guarantee),
                reserved=resource(attr.reserved),
                inqueue=resource(attr.inqueue),
                share=attr.share,
                state=attr.queue.state,
                allocated_pods=attr.allocated_pods,
                reserved_pods=attr.reserved_pods,
            )
    phases: dict[str, objects.PodGroupPhase] = {}
    counts: dict[str, objects.GroupCounts] = {}
    inqueue = objects.PodGroupPhase.INQUEUE
    pending = objects.PodGroupPhase.PENDING
    for key in sorted(session.jobs):
        job = session.jobs[key]
        run = job.run
        if run is not None:
            # Every member as its own lone pending pod's group would be (``_status``): no
            # task holds resources, so Inqueue once enqueued, else Pending. Members follow
            # their run's first group rather than their key's sorted place.
            if not job.group.synthetic:
                counts.update(zip(run.groups, itertools.repeat(objects.NO_COUNTS)))
            if run.inqueue in (0, len(run)):
                phases.update(
                    zip(run.groups, itertools.repeat(inqueue if run.inqueue else pending))
                )
                continue
            phases.update(zip(itertools.islice(run.groups, run.inqueue), itertools.repeat(inqueue)))
            phases.update(
                zip(itertools.islice(run.groups, run.inqueue, None), itertools.repeat(pending))
            )
            continue
        phases[key], found = _status(session, job)
        if not job.group.synthetic:
            # Single-pod groups and stand-ins have no object to write counts to.
            counts[key] = found
    runs = [job for job in session.jobs.values() if job.run is not None]
    shared: explaining.Shared = []
    sentences: explaining.Sentences = {}
    reasons = explaining.explain(session, plugin, shared=shared, sentences=sentences)
    remedies, briefs = explaining.remedies(
        session, plugin, reasons, shared=shared, sentences=sentences
    )
    pipeline = {} if session.admission_only else dict(sorted(session.pipelined.items()))
    bind = {} if session.admission_only else dict(sorted(session.bound.items()))
    return decisions.SessionResult(
        ready=not session.errors,
        errors=tuple(session.errors),
        warnings=tuple(session.warnings),
        bind=MappingProxyType(bind),
        pipeline=MappingProxyType(pipeline),
        evict=tuple(session.evicted),
        ungate=tuple(session.ungated),
        admitted_to=MappingProxyType(_admitted_to(session, runs)),
        pod_groups=MappingProxyType(phases),
        group_counts=MappingProxyType(counts),
        queues=MappingProxyType(queues),
        reasons=MappingProxyType(reasons),
        events=tuple(session.events),
        evictions=tuple(session.evictions),
        queue_faults=MappingProxyType(
            {
                name: tuple(found)
                for name, found in sorted((plugin.faults if plugin is not None else {}).items())
                if name in session.queues
            }
        ),
        order=MappingProxyType(ordering.admission_order(session)),
        remedies=MappingProxyType(remedies),
        briefs=MappingProxyType(briefs),
        released=tuple(sorted(session.released)),
        group_conditions=MappingProxyType(
            explaining.group_conditions(session, plugin, phases, bound=bound)
        ),
    )


def _admitted_to(session: frameworks.Session, runs: list[frameworks.Job]) -> dict[str, str]:
    """Ungated pod key -> the queue it was admitted to (a run's members all at once)."""
    admitted: dict[str, str] = {}
    for job in runs:
        assert job.run is not None
        admitted.update(
            zip(itertools.islice(job.run.pods, job.run.ungated), itertools.repeat(job.queue))
        )
    if len(admitted) == len(session.ungated):
        # It holds ungated pods only, so as many keys as ``ungated`` has means all of them.
        return admitted
    tasks = session.tasks
    for key in itertools.filterfalse(admitted.__contains__, session.ungated):
        admitted[key] = tasks[key].job.queue
    return admitted


def count_runs(snapshot: objects.Snapshot, *, config: configs.SchedulerConfiguration) -> int:
    """How many jobs an admission session over ``snapshot`` decides its fold candidates in
    (``folding``) plus its other pods: the runs, each of one or more pods, for reports of the
    fold ratio. Jobs that split runs are not looked at: exact when no other job of a queue
    with candidates is Pending or has a Pending pod, else a lower bound."""
    if not folding.supported(config):
        return 0
    compacted = compaction.compact(governing.admission_snapshot(snapshot)).snapshot
    candidates = folding.find_candidates(
        compacted, leaves=compaction.leaves(compacted.queues), task_priority=_task_priority
    )
    count = len(candidates)
    runs = sum(1 for _ in folding.iter_runs(candidates, others={}))
    return runs + len(compacted.pods) - count


def _status(
    session: frameworks.Session, job: frameworks.Job
) -> tuple[objects.PodGroupPhase, objects.GroupCounts]:
    """Volcano's ``jobStatus``: the phase (``getPodGroupPhase``) and the counts ``running``,
    ``succeeded`` and ``failed`` its scheduler writes at the end of a session.

    Unknown when pods run but the gang cannot be whole (Volcano: running tasks and the gang
    plugin's Unschedulable condition of this session, set whenever fewer than minMember tasks
    hold resources, succeeded or are best effort, unless the missing ones are only being
    deleted from their nodes and nothing waits; in admission mode the pods admitted and not
    yet placed count too, since kube-scheduler is about to place them). Otherwise, once
    minMember tasks are scheduled (they hold resources, Succeeded or Failed, or are being
    deleted from their node): Completed when every one of them finished, Running otherwise.
    So a group whose only pod failed is Completed (``failed`` 1), as Volcano writes it, and
    holds nothing in its queue. Else Pending, unless enqueue admitted the group (Inqueue).

    Deliberate choices: a group with nothing scheduled is never Running or Completed, even
    with minMember 0 (Volcano would call an empty group Completed); tasks allocated in this
    session count as scheduled (Volcano counts them once bound, in its next session); and a
    Completed group none of whose pods is left unfinished (they were deleted after they
    finished, say) stays Completed, where Volcano makes it Pending again, enqueues it, and
    holds its minResources for pods that never come (docs/compatibility.md).
    """
    running = succeeded = failed = 0
    scheduled = job.ready  # held resources or Succeeded
    finished = releasing = 0
    live = waiting = False
    for task in job.tasks:
        status = task.status
        if status is objects.TaskStatus.RUNNING:
            running += task.pod.count
            live = True
        elif status is objects.TaskStatus.SUCCEEDED:
            succeeded += task.pod.count
            finished += 1
        elif status is objects.TaskStatus.FAILED:
            failed += task.pod.count
            scheduled += 1
            finished += 1
        elif status is objects.TaskStatus.RELEASING and task.node:
            # Being deleted from its node: it still holds its slot (Volcano's
            # ``ReleasingScheduledTaskNum``), so the phase does not flip while it terminates.
            releasing += 1
            live = True
        else:
            live = True
            waiting = waiting or status in _WAITING
    counts = objects.GroupCounts(running=running, succeeded=succeeded, failed=failed)
    scheduled += releasing
    whole = job.ready + job.best_effort
    if session.admission_only:
        whole += session.in_flight.get(job.key, 0) + job.ungated
    terminating = releasing and not waiting and scheduled >= job.min_member
    if running and whole < job.min_member and not terminating:
        return objects.PodGroupPhase.UNKNOWN, counts
    if scheduled and scheduled >= job.min_member:
        if finished == scheduled:
            return objects.PodGroupPhase.COMPLETED, counts
        return objects.PodGroupPhase.RUNNING, counts
    if job.phase is objects.PodGroupPhase.COMPLETED and not live:
        return objects.PodGroupPhase.COMPLETED, counts
    if job.phase is objects.PodGroupPhase.INQUEUE:
        return job.phase, counts
    return objects.PodGroupPhase.PENDING, counts


def open_session(
    snapshot: objects.Snapshot,
    *,
    config: configs.SchedulerConfiguration,
    feature_gates: Mapping[str, bool],
    admission_only: bool = False,
) -> frameworks.Session:
    """A session over ``snapshot`` as :func:`run_session` opens it (dimensions, jobs, queues,
    nodes), with no plugin registered and no action run: for tests and tools that register
    their own plugins (``session.register(tiers)``) and look inside. Nothing is compacted."""
    if admission_only:
        snapshot = governing.admission_snapshot(snapshot)
    return _build_session(
        snapshot,
        dims=vectors.Dims.of(_scalar_names(snapshot)),
        config=config,
        feature_gates=feature_gates,
        admission_only=admission_only,
    )
