"""The session framework: mutable per-session state, plugin tiers and statements.

Volcano's scheduler opens a *session* over a snapshot, lets every configured plugin register
callbacks, runs the configured *actions*, and closes the session. This module holds the parts
that are independent of any one policy:

* the per-session records :class:`Task`, :class:`Job` and :class:`NodeState` (built from the
  immutable snapshot, mutated only through a :class:`Statement` or the event methods);
* :class:`Plugin`, the base of every policy, whose hooks the session dispatches across the tiers
  exactly as spec §3.11 (Volcano's ``session_plugins.go``) does;
* :class:`Statement`, the transaction of tentative operations (evict, pipeline, allocate) that is
  committed or discarded in reverse order; gate admissions are reserved through
  :meth:`Session.reserve` and rolled back per gang by the admission step.

Neighbours: ``plugins`` and ``capacity`` implement the hooks, ``actions`` drives them,
``sessions.run_session`` builds a :class:`Session` and turns it into decisions.

Orders: job and task orders are *key functions* (a plugin's comparator in Volcano always compares
one property of each side, so a key per enabled plugin, in tier order, followed by the default
creation-time-then-uid tie-break, compares exactly as Volcano's first-non-zero dispatch). Queue
order stays a comparator because the hierarchical capacity order compares two queues' ancestors
pairwise, and equal shares there need not make an order a key can express; where the queues at
hand do allow one, a plugin gives it (``Plugin.queue_order_key``) and sorts use it
(``Session.sorted_queues``).
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import functools
from collections.abc import Callable, Collection, Mapping
from typing import Any, ClassVar

from queuetree.core import configs, decisions, devices, objects, vectors

READY_STATUSES = frozenset(
    {
        objects.TaskStatus.BOUND,
        objects.TaskStatus.BINDING,
        objects.TaskStatus.RUNNING,
        objects.TaskStatus.ALLOCATED,
        objects.TaskStatus.SUCCEEDED,
    }
)
"""Volcano's ``ReadyTaskNum`` statuses."""

VALID_STATUSES = READY_STATUSES | {objects.TaskStatus.PENDING, objects.TaskStatus.PIPELINED}
"""Volcano's ``ValidTaskNum`` statuses."""

PERMIT = 1
ABSTAIN = 0
REJECT = -1

OrderKey = tuple[Any, ...]


@dataclasses.dataclass(slots=True, eq=False)
class Task:
    """One pod of the session. ``resreq`` is the pod's request (``objects.Pod.resreq``) as a
    dense vector (``vectors``): what it is charged in its queue and on its node, and what a
    node must have free to take it."""

    pod: objects.Pod
    key: str
    job: Job
    resreq: vectors.Vec
    req_dims: tuple[int, ...]
    """Dimensions the request needs (value > 0, never ``pods``)."""
    nonzero: tuple[int, ...]
    """Dimensions where ``resreq`` is not 0 (for cheap accumulation)."""
    status: objects.TaskStatus
    node: str
    priority: int
    default_order: tuple[datetime.datetime, str]
    """Creation time, then uid (the pod key when the uid is empty)."""

    @property
    def sch_gated(self) -> bool:
        return bool(self.pod.scheduling_gates)


@dataclasses.dataclass(slots=True, eq=False)
class Job:
    """A pod group with its tasks; counters follow every status change."""

    group: objects.PodGroup
    key: str
    queue: str
    priority: int
    min_member: int
    min_resources: vectors.Vec | None
    phase: objects.PodGroupPhase
    default_order: tuple[datetime.datetime, str]
    tasks: list[Task] = dataclasses.field(default_factory=list)
    ready: int = 0
    """Tasks in :data:`READY_STATUSES`."""
    waiting: int = 0
    """Pipelined tasks."""
    valid: int = 0
    best_effort: int = 0
    """Pending tasks with an empty request (Volcano's ``PendingBestEffortTaskNum``)."""
    ungated: int = 0
    """Gated tasks admitted (ungated) in this session."""
    order_key: tuple[Any, ...] | None = None
    """The session's job-order key, cached until a task of the job changes status (the only
    input of a job-order plugin that can change within a session: gang readiness)."""
    run: Run | None = None
    """Admission mode: the run of interchangeable gated lone pods this job and its one task
    stand for (``folding``), the job's own group and pod first; None for every other job."""

    @property
    def is_pending(self) -> bool:
        return self.phase == objects.PodGroupPhase.PENDING

    @property
    def is_ready(self) -> bool:
        """Volcano's ``IsReady``: pending best-effort tasks count (backfill places them)."""
        return self.ready + self.best_effort >= self.min_member

    @property
    def is_pipelined(self) -> bool:
        return self.ready + self.waiting + self.best_effort >= self.min_member

    @property
    def is_starving(self) -> bool:
        return self.ready + self.waiting < self.min_member

    def add_task(self, task: Task) -> None:
        self.tasks.append(task)
        status = task.status
        if status is objects.TaskStatus.PENDING and task.req_dims:
            self.valid += 1  # the common case, without the set lookups
        else:
            self._count(task, status, 1)

    def _count(self, task: Task, status: objects.TaskStatus, delta: int) -> None:
        if status in READY_STATUSES:
            self.ready += delta
        elif status == objects.TaskStatus.PIPELINED:
            self.waiting += delta
        elif status == objects.TaskStatus.PENDING and not task.req_dims:
            self.best_effort += delta
        if status in VALID_STATUSES:
            self.valid += delta

    def set_status(self, task: Task, status: objects.TaskStatus) -> None:
        self._count(task, task.status, -1)
        task.status = status
        self._count(task, status, 1)
        self.order_key = None


@dataclasses.dataclass(slots=True, eq=False)
class Run:
    """Interchangeable gated lone pods of one queue, consecutive in admission order
    (``folding``), decided in one step.

    The session holds one job and one task for the run, those of its first pod; ``pods`` and
    ``groups`` list every member, first in order first. Members ``[0, inqueue)`` are Inqueue
    (the others keep their group's phase, Pending), members ``[0, ungated)`` were admitted:
    both are prefixes, since a member that does not fit leaves every figure as it was for
    the identical members after it.
    """

    pods: list[str]
    groups: list[str]
    inqueue: int = 0
    ungated: int = 0

    def __len__(self) -> int:
        return len(self.pods)


@dataclasses.dataclass(slots=True, eq=False)
class NodeState:
    """A node's bookkeeping (Volcano's NodeInfo): idle, releasing and pipelined amounts."""

    node: objects.Node
    allocatable: vectors.Vec
    idle: vectors.Vec
    releasing: vectors.Vec
    pipelined: vectors.Vec
    tasks: dict[str, Task] = dataclasses.field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.node.name

    def future_idle(self) -> vectors.Vec:
        """``Idle + Releasing - Pipelined``: what is free once evictions complete."""
        return [
            i + r - p for i, r, p in zip(self.idle, self.releasing, self.pipelined, strict=True)
        ]

    def add(self, task: Task) -> None:
        self.tasks[task.key] = task
        self._count(task, vectors.iadd, vectors.isub)

    def remove(self, task: Task) -> None:
        del self.tasks[task.key]
        self._count(task, vectors.isub, vectors.iadd)

    def _count(
        self,
        task: Task,
        held: Callable[[vectors.Vec, vectors.Vec], None],
        free: Callable[[vectors.Vec, vectors.Vec], None],
    ) -> None:
        """Count ``task``'s request on this node by its status, ``held`` into the figure that
        tracks it and ``free`` out of ``idle`` (:meth:`add`; :meth:`remove` swaps the two): a
        releasing task is in ``releasing`` and uses ``idle`` until it is gone; a pipelined one
        is only in ``pipelined`` (it waits for the room releasing tasks leave); any other uses
        ``idle``."""
        if task.status == objects.TaskStatus.RELEASING:
            held(self.releasing, task.resreq)
            free(self.idle, task.resreq)
        elif task.status == objects.TaskStatus.PIPELINED:
            held(self.pipelined, task.resreq)
        else:
            free(self.idle, task.resreq)


Victims = list[Task]


class Hook(enum.StrEnum):
    """The hooks a plugin may implement; each value is the name of a :class:`Plugin` method.

    A plugin implements a hook by overriding that method: :attr:`Plugin.hooks` is derived from
    the overrides, so a hook cannot be declared without being written, nor written and dropped
    by a misspelt declaration.
    """

    JOB_ORDER_KEY = "job_order_key"
    TASK_ORDER_KEY = "task_order_key"
    QUEUE_ORDER = "queue_order"
    VICTIM_QUEUE_ORDER = "victim_queue_order"
    RECLAIMABLE = "reclaimable"
    PREEMPTABLE = "preemptable"
    JOB_READY = "job_ready"
    JOB_PIPELINED = "job_pipelined"
    JOB_STARVING = "job_starving"
    JOB_VALID = "job_valid"
    JOB_ENQUEUEABLE = "job_enqueueable"
    JOB_ENQUEUED = "job_enqueued"
    PREDICATE = "predicate"
    NODE_ORDER = "node_order"
    PREEMPTIVE = "preemptive"
    ALLOCATABLE = "allocatable"


class Plugin:
    """Base of every policy. A plugin implements a hook by overriding its method.

    Hooks and the tier flag that enables each (spec §3.11; a flag the configuration leaves out
    is on, ``configs.PluginOption.enabled``):

    ========================  =====================  ==========================================
    hook                      flag                   dispatch
    ========================  =====================  ==========================================
    job_order_key             enableJobOrder         keys in tier order, then creation, uid
    task_order_key            enableTaskOrder        keys in tier order, then creation, uid
    queue_order               enableQueueOrder       first non-zero, then creation, name
    victim_queue_order        (none)                 first non-zero, else reverse queue order
    reclaimable/preemptable   enableReclaimable/...  per tier: intersection; empty -> none
    job_ready                 enableJobReady         all must pass
    job_pipelined             enableJobPipelined     any reject fails; a tier with a permit wins
    job_starving              enableJobStarving      first tier with a plugin decides (all)
    job_valid                 (none)                 first failure
    job_enqueueable           enableJobEnqueued      as job_pipelined
    job_enqueued              enableJobEnqueued      every plugin is told
    predicate                 enablePredicate        first failure
    node_order                enableNodeOrder        sum of scores
    preemptive                enablePreemptive       all must pass
    allocatable               enabledAllocatable     all must pass
    ========================  =====================  ==========================================
    """

    name = ""
    hooks: ClassVar[frozenset[Hook]] = frozenset()
    """The hooks this class overrides (set for each subclass when it is defined)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.hooks = frozenset(
            hook for hook in Hook if getattr(cls, hook.value) is not getattr(Plugin, hook.value)
        )

    def __init__(self, option: configs.PluginOption) -> None:
        self.option = option

    def on_session_open(self, session: Session) -> None:
        """Read the session and build plugin state."""

    # Event handlers (every plugin hears every event, like Volcano's EventHandler).
    def on_allocate(self, task: Task) -> None:
        """A task took resources: allocated, pipelined or un-evicted."""

    def on_deallocate(self, task: Task) -> None:
        """A task gave resources back: evicted, un-pipelined or un-allocated."""

    def on_reserve(self, task: Task) -> None:
        """A gated task was admitted (its gate will be removed)."""

    def on_unreserve(self, task: Task) -> None:
        """A gated task's admission was rolled back (gang of the group did not fit)."""

    # Hooks (only an override is called: see :attr:`hooks`).
    def job_order_key(self, job: Job) -> Any:
        raise NotImplementedError

    def task_order_key(self, task: Task) -> Any:
        raise NotImplementedError

    def queue_order(self, left: str, right: str) -> int:
        raise NotImplementedError

    def queue_order_key(self, names: Collection[str]) -> Callable[[str], Any] | None:
        """A sort key for ``names`` that orders them as :meth:`queue_order` does: for every
        two of them, comparing their keys gives the sign of ``queue_order``. None when no key
        can (the comparator is then the only way, see :meth:`Session.sorted_queues`); the
        default, for a plugin that does not say."""
        return None

    def victim_queue_order(self, left: str, right: str, preemptor: str) -> int:
        raise NotImplementedError

    def reclaimable(self, reclaimer: Task, reclaimees: list[Task]) -> tuple[Victims, int]:
        raise NotImplementedError

    def preemptable(self, preemptor: Task, preemptees: list[Task]) -> tuple[Victims, int]:
        raise NotImplementedError

    def job_ready(self, job: Job) -> bool:
        raise NotImplementedError

    def job_pipelined(self, job: Job) -> int:
        raise NotImplementedError

    def job_starving(self, job: Job) -> bool:
        raise NotImplementedError

    def job_valid(self, job: Job) -> str | None:
        raise NotImplementedError

    def job_enqueueable(self, job: Job) -> int:
        raise NotImplementedError

    def job_enqueued(self, job: Job) -> None:
        raise NotImplementedError

    def predicate(self, task: Task, node: NodeState, *, for_preemption: bool) -> str | None:
        raise NotImplementedError

    def node_order(self, task: Task, node: NodeState) -> float:
        raise NotImplementedError

    def preemptive(self, queue: str, tasks: list[Task]) -> bool:
        raise NotImplementedError

    def allocatable(self, queue: str, task: Task) -> bool:
        raise NotImplementedError


HOOK_FLAGS: Mapping[Hook, str | None] = {
    Hook.JOB_ORDER_KEY: "enableJobOrder",
    Hook.TASK_ORDER_KEY: "enableTaskOrder",
    Hook.QUEUE_ORDER: "enableQueueOrder",
    Hook.VICTIM_QUEUE_ORDER: None,
    Hook.RECLAIMABLE: "enableReclaimable",
    Hook.PREEMPTABLE: "enablePreemptable",
    Hook.JOB_READY: "enableJobReady",
    Hook.JOB_PIPELINED: "enableJobPipelined",
    Hook.JOB_STARVING: "enableJobStarving",
    Hook.JOB_VALID: None,
    Hook.JOB_ENQUEUEABLE: "enableJobEnqueued",
    Hook.JOB_ENQUEUED: "enableJobEnqueued",
    Hook.PREDICATE: "enablePredicate",
    Hook.NODE_ORDER: "enableNodeOrder",
    Hook.PREEMPTIVE: "enablePreemptive",
    Hook.ALLOCATABLE: "enabledAllocatable",
}
"""The tier flag that enables each hook (None: always on).

Every hook has an entry (a test holds the table to :class:`Hook`)."""


@dataclasses.dataclass(slots=True)
class Operation:
    kind: str
    """``evict``, ``pipeline`` or ``allocate``."""
    task: Task
    node: str = ""
    old_status: objects.TaskStatus = objects.TaskStatus.PENDING
    eviction: decisions.Eviction | None = None
    """For ``evict``: whom the victim makes room for and why (recorded on commit)."""


class Session:
    """One scheduling session: the state, the tiers and the dispatchers of spec §3.11."""

    def __init__(
        self,
        *,
        config: configs.SchedulerConfiguration,
        dims: vectors.Dims,
        queues: Mapping[str, objects.Queue],
        jobs: dict[str, Job],
        tasks: dict[str, Task],
        nodes: dict[str, NodeState],
        feature_gates: Mapping[str, bool],
        admission_only: bool,
    ) -> None:
        self.config = config
        self.dims = dims
        self.queues = queues
        """Queue name -> queue, as the snapshot has them."""
        self.node_list = [nodes[name] for name in sorted(nodes)]
        """``nodes`` in name order (the order every walk over the nodes takes)."""
        self.jobs = jobs
        """Pod group key (``namespace/name``) -> job; a pod without a group has one of its own."""
        self.tasks = tasks
        """Pod key -> task (a run's one task stands for its members: :class:`Run`)."""
        self.nodes = nodes
        """Node name -> the node's figures, which the session's operations move."""
        self.feature_gates = feature_gates
        self.admission_only = admission_only
        self.total_resource = dims.zero()
        for node in self.node_list:
            vectors.iadd(self.total_resource, node.allocatable)
        for i in devices.claimed_dimensions(config.device_classes, dims):
            # DRA devices are on no node's allocatable (drivers publish them in ResourceSlices,
            # which queuetree does not count): the cluster sets no limit on them, queues do.
            self.total_resource[i] = vectors.MAXI
        self.tiers: list[list[Plugin]] = []
        self.plugins: list[Plugin] = []
        self.errors: list[str] = []
        self.events: list[decisions.Event] = []
        self.warnings: list[str] = []
        self.version = 0
        """Bumped on every allocate/deallocate event: queue order may have changed."""
        # Decisions, filled by Statement.commit and the admission step.
        self.bound: dict[str, str] = {}
        self.pipelined: dict[str, str] = {}
        self.evicted: list[str] = []
        self.evictions: list[decisions.Eviction] = []
        """One record per entry of ``evicted``, in the same order."""
        self.victim_voters: tuple[str, ...] = ()
        """Names of the plugins whose answers chose the victims of the last
        :meth:`reclaimable` or :meth:`preemptable` call (the deciding tier), for the rule."""
        self.ungated: list[str] = []
        # Explanations gathered on the way (``explaining`` turns them into reasons).
        self.job_messages: dict[str, str] = {}
        self.fit_errors: dict[str, str] = {}
        """Task key -> why no node fits (last attempt)."""
        self.task_messages: dict[str, str] = {}
        self.in_flight: dict[str, int] = {}
        """Job key -> pending, ungated, opted-in tasks (admitted earlier, not yet placed)."""
        self.unschedulable_jobs: dict[str, Job] = {}
        """Jobs with a pending, ungated pod that kube-scheduler marked Unschedulable."""
        self.scheduler_names: frozenset[str] | None = None
        """Admission mode: the ``spec.schedulerName`` values whose pods may be ungated (the
        schedulers that will place them); None admits pods whatever scheduler they name."""
        self.adopted_scheduler_names: frozenset[str] = frozenset()
        """The names the webhook adopts at creation (only to word why such a pod waits)."""
        self.released: list[str] = []
        """Keys of the PodGroups whose Inqueue bound ran out without a pod
        (``inqueue_bounds.expired``): Pending from session open, not enqueued again here."""
        self.yielding: set[str] = set()
        """Keys of the PodGroups released less than a bound ago, still without pods
        (``inqueue_bounds.yielding``): enqueue takes them after every other pending group."""
        self.exact_pods = True
        """Every pod is a task of its own (no pod of ``compaction`` stands for several):
        victims of quota reclaim may be chosen (``actions.reclaim``)."""
        self.redo_exact = False
        """Quota reclaim would have to choose victims among pods this session folded: the
        caller runs it again without folding (``sessions.run_session``)."""
        self._fns: dict[Hook, list[list[Callable[..., Any]]]] = {}

    # -- set-up -----------------------------------------------------------------------------

    def register(self, tiers: list[list[Plugin]]) -> None:
        """Open every plugin (tier order), then index the enabled hooks per tier."""
        self.tiers = tiers
        self.plugins = [plugin for tier in tiers for plugin in tier]
        for plugin in self.plugins:
            plugin.on_session_open(self)
        self._names: dict[Hook, list[list[str]]] = {}
        for hook, flag in HOOK_FLAGS.items():
            per_tier: list[list[Callable[..., Any]]] = []
            names: list[list[str]] = []
            for tier in tiers:
                enabled = [
                    plugin
                    for plugin in tier
                    if hook in plugin.hooks and (flag is None or plugin.option.enabled(flag))
                ]
                per_tier.append([getattr(plugin, hook.value) for plugin in enabled])
                names.append([plugin.name for plugin in enabled])
            self._fns[hook] = per_tier
            self._names[hook] = names
        self._flat = {
            hook: [fn for tier in per_tier for fn in tier] for hook, per_tier in self._fns.items()
        }
        job_keys = [fn for tier in self._fns[Hook.JOB_ORDER_KEY] for fn in tier]
        task_keys = [fn for tier in self._fns[Hook.TASK_ORDER_KEY] for fn in tier]
        self._job_keys = job_keys
        self._task_keys = task_keys
        self._make_job_key: Callable[[Job], OrderKey] = _key_maker(job_keys)
        self._make_task_key: Callable[[Task], OrderKey] = _key_maker(task_keys)
        self._allocatable = [fn for tier in self._fns[Hook.ALLOCATABLE] for fn in tier]
        self._predicates = [fn for tier in self._fns[Hook.PREDICATE] for fn in tier]
        self._node_orders = [fn for tier in self._fns[Hook.NODE_ORDER] for fn in tier]
        # Event handlers: only the plugins that override them (most do not).
        self._on_allocate = _overriding(self.plugins, "on_allocate")
        self._on_deallocate = _overriding(self.plugins, "on_deallocate")
        self._on_reserve = _overriding(self.plugins, "on_reserve")
        self._on_unreserve = _overriding(self.plugins, "on_unreserve")

    def flat(self, hook: Hook) -> list[Callable[..., Any]]:
        """The enabled implementations of ``hook`` in tier order (computed at registration)."""
        return self._flat[hook]

    # -- orders -----------------------------------------------------------------------------

    def job_key(self, job: Job) -> OrderKey:
        """Ascending key: the first job in order has the smallest key."""
        key = job.order_key
        if key is None:
            key = job.order_key = self._make_job_key(job)
        return key

    def job_plugin_key(self, job: Job) -> OrderKey:
        """The plugins' part of the job key only (Volcano's ``JobOrderCompareFn``)."""
        return tuple(fn(job) for fn in self._job_keys)

    def task_key(self, task: Task) -> OrderKey:
        return self._make_task_key(task)

    def queue_order(self, left: str, right: str) -> int:
        """Negative when ``left`` goes first (Volcano's ``QueueOrderFn`` as a comparator)."""
        for fn in self.flat(Hook.QUEUE_ORDER):
            verdict: int = fn(left, right)
            if verdict:
                return verdict
        return _compare(self._queue_default(left), self._queue_default(right))

    def sorted_queues(self, names: Collection[str]) -> list[str]:
        """``names`` in queue order (:meth:`queue_order`), first first.

        On a key when every plugin that orders queues gives one for ``names``
        (:meth:`Plugin.queue_order_key`): the keys in tier order, then the default tie-break,
        compare exactly as the comparator dispatches, and a key is computed once per queue
        rather than a comparator call per comparison. Otherwise with the comparator, over
        ``names`` in the default order first: the comparator need not be transitive (in
        hierarchy mode two leaves compare by their own shares, a third against either by the
        ancestors' shares, and ties fall to the default), and the order a sort gives for a
        cycle depends on the order it is given, which for a set is the hash seed's. Names are
        unique and the default ends with the name, so there are no ties and the order is the
        same in every process."""
        keys: list[Callable[[str], Any]] = []
        for fn in self.flat(Hook.QUEUE_ORDER):
            plugin = getattr(fn, "__self__", None)
            key = plugin.queue_order_key(names) if isinstance(plugin, Plugin) else None
            if key is None:
                return sorted(
                    sorted(names, key=self._queue_default),
                    key=functools.cmp_to_key(self.queue_order),
                )
            keys.append(key)
        default = self._queue_default
        return sorted(names, key=lambda name: (*[key(name) for key in keys], default(name)))

    def _queue_default(self, name: str) -> tuple[datetime.datetime, str]:
        queue = self.queues.get(name)
        return (queue.created if queue else objects.EPOCH, name)

    def victim_queue_order(self, left: str, right: str, preemptor: str) -> int:
        """Negative when ``left``'s tasks are evicted first."""
        for fn in self.flat(Hook.VICTIM_QUEUE_ORDER):
            verdict: int = fn(left, right, preemptor)
            if verdict:
                return verdict
        # Volcano returns ``!QueueOrderFn(l, r)``: reverse queue order.
        return -self.queue_order(left, right)

    def victim_order(self, left: Task, right: Task, preemptor: Task) -> int:
        """``BuildVictimsPriorityQueue``: negative when ``left`` is evicted first."""
        if left.job is right.job:
            return -_compare(self.task_key(left), self.task_key(right))
        if left.job.queue != right.job.queue:
            return self.victim_queue_order(left.job.queue, right.job.queue, preemptor.job.queue)
        verdict = _compare(self.job_plugin_key(left.job), self.job_plugin_key(right.job))
        if verdict:
            # The job that goes later in job order loses its tasks first.
            return -verdict
        return -_compare(self.task_key(left), self.task_key(right))

    def victim_key(self, preemptor: Task) -> Callable[[Task], Any]:
        """A sort key putting the task to evict first first (for ``sorted``)."""

        def order(left: Task, right: Task) -> int:
            return self.victim_order(left, right, preemptor)

        return functools.cmp_to_key(order)

    # -- votes ------------------------------------------------------------------------------

    def _evictable(self, hook: Hook, task: Task, candidates: list[Task]) -> Victims:
        """The tier-wise intersection of the plugins' victims; records in
        :attr:`victim_voters` the plugins whose answers made the returned victims."""
        victims: Victims | None = None
        self.victim_voters = ()
        for tier, names in zip(self._fns[hook], self._names[hook], strict=True):
            voters: list[str] = []
            for fn, name in zip(tier, names, strict=True):
                found, abstain = fn(task, candidates)
                if abstain == ABSTAIN:
                    continue
                if not found:
                    victims = None
                    break
                if victims is None:
                    victims = list(found)
                    voters = [name]
                else:
                    keep = {id(t) for t in found}
                    # As in Volcano, an empty intersection is "no answer yet" (Go's nil slice):
                    # the next plugin of the tier starts afresh, and a tier ending with none
                    # hands over to the next tier.
                    victims = [t for t in victims if id(t) in keep] or None
                    voters = [*voters, name] if victims is not None else []
            if victims is not None:
                self.victim_voters = tuple(voters)
                return victims
        return victims or []

    def reclaimable(self, reclaimer: Task, reclaimees: list[Task]) -> Victims:
        return self._evictable(Hook.RECLAIMABLE, reclaimer, reclaimees)

    def preemptable(self, preemptor: Task, preemptees: list[Task]) -> Victims:
        return self._evictable(Hook.PREEMPTABLE, preemptor, preemptees)

    def job_ready(self, job: Job) -> bool:
        return all(fn(job) for fn in self.flat(Hook.JOB_READY))

    def _tier_vote(self, hook: Hook, job: Job) -> bool:
        for tier in self._fns[hook]:
            found = False
            for fn in tier:
                vote = fn(job)
                if vote < 0:
                    return False
                if vote > 0:
                    found = True
            if found:
                return True
        return True

    def job_pipelined(self, job: Job) -> bool:
        return self._tier_vote(Hook.JOB_PIPELINED, job)

    def job_enqueueable(self, job: Job) -> bool:
        return self._tier_vote(Hook.JOB_ENQUEUEABLE, job)

    def job_enqueued(self, job: Job) -> None:
        for fn in self.flat(Hook.JOB_ENQUEUED):
            fn(job)

    def job_starving(self, job: Job) -> bool:
        for tier in self._fns[Hook.JOB_STARVING]:
            if tier:
                return all(fn(job) for fn in tier)
        return False

    def job_valid(self, job: Job) -> str | None:
        for fn in self.flat(Hook.JOB_VALID):
            message: str | None = fn(job)
            if message is not None:
                return message
        return None

    def predicate(self, task: Task, node: NodeState, *, for_preemption: bool = False) -> str | None:
        for fn in self._predicates:
            message: str | None = fn(task, node, for_preemption=for_preemption)
            if message is not None:
                return message
        return None

    def node_score(self, task: Task, node: NodeState) -> float:
        return float(sum(fn(task, node) for fn in self._node_orders))

    def preemptive(self, queue: str, tasks: list[Task]) -> bool:
        return all(fn(queue, tasks) for fn in self.flat(Hook.PREEMPTIVE))

    def allocatable_check(self) -> Callable[[str, Task], bool]:
        """The allocatable dispatcher, or the one plugin function itself when only one plugin
        votes (saves a call per pod on the admission path)."""
        if len(self._allocatable) == 1:
            only: Callable[[str, Task], bool] = self._allocatable[0]
            return only
        return self.allocatable

    def allocatable(self, queue: str, task: Task) -> bool:
        fns = self._allocatable
        if len(fns) == 1:
            return bool(fns[0](queue, task))
        return all(fn(queue, task) for fn in fns)

    # -- events -----------------------------------------------------------------------------

    def fire_allocate(self, task: Task) -> None:
        self.version += 1
        for fn in self._on_allocate:
            fn(task)

    def fire_deallocate(self, task: Task) -> None:
        self.version += 1
        for fn in self._on_deallocate:
            fn(task)

    def reserve(self, task: Task) -> None:
        """Admit a gated task: its gate will be removed; capacity holds its request."""
        task.job.ungated += 1
        for fn in self._on_reserve:
            fn(task)

    def unreserve(self, task: Task) -> None:
        """Roll an admission back (its gang did not fit)."""
        task.job.ungated -= 1
        for fn in self._on_unreserve:
            fn(task)


def _key_maker(fns: list[Callable[[Any], Any]]) -> Callable[[Any], OrderKey]:
    """``(fn1(x), ..., fnN(x), x.default_order)``, unrolled for the usual one or two plugins
    (this runs once per job of a session)."""
    if not fns:
        return lambda x: (x.default_order,)
    if len(fns) == 1:
        (first,) = fns
        return lambda x: (first(x), x.default_order)
    if len(fns) == 2:
        first, second = fns
        return lambda x: (first(x), second(x), x.default_order)
    return lambda x: (*[fn(x) for fn in fns], x.default_order)


def _overriding(plugins: list[Plugin], name: str) -> list[Callable[[Task], None]]:
    base = getattr(Plugin, name)
    return [getattr(p, name) for p in plugins if getattr(type(p), name) is not base]


def _compare(left: Any, right: Any) -> int:
    if left < right:
        return -1
    if right < left:
        return 1
    return 0


class Statement:
    """Tentative operations of one job (Volcano's Statement): commit records decisions,
    discard undoes every operation in reverse order."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.operations: list[Operation] = []

    def evict(self, task: Task, eviction: decisions.Eviction) -> None:
        """Evict ``task`` (Releasing until committed); ``eviction`` says for whom and why."""
        session = self.session
        node = session.nodes[task.node]
        old = task.status
        node.remove(task)
        task.job.set_status(task, objects.TaskStatus.RELEASING)
        node.add(task)
        session.fire_deallocate(task)
        self.operations.append(Operation("evict", task, task.node, old, eviction))

    def pipeline(self, task: Task, node_name: str) -> None:
        self._place(task, node_name, objects.TaskStatus.PIPELINED, "pipeline")

    def allocate(self, task: Task, node_name: str) -> None:
        self._place(task, node_name, objects.TaskStatus.ALLOCATED, "allocate")

    def _place(self, task: Task, node_name: str, status: objects.TaskStatus, kind: str) -> None:
        old = task.status
        task.job.set_status(task, status)
        task.node = node_name
        self.session.nodes[node_name].add(task)
        self.session.fire_allocate(task)
        self.operations.append(Operation(kind, task, node_name, old))

    def merge(self, other: Statement) -> None:
        self.operations.extend(other.operations)
        other.operations = []

    def discard(self) -> None:
        session = self.session
        for op in reversed(self.operations):
            task = op.task
            if op.kind == "evict":
                node = session.nodes[op.node]
                node.remove(task)
                task.job.set_status(task, op.old_status)
                node.add(task)
                session.fire_allocate(task)
            else:
                session.nodes[op.node].remove(task)
                task.job.set_status(task, op.old_status)
                task.node = ""
                session.fire_deallocate(task)
        self.operations = []

    def commit(self) -> None:
        session = self.session
        for op in self.operations:
            key = op.task.key
            if op.kind == "evict":
                session.evicted.append(key)
                if op.eviction is not None:
                    session.evictions.append(op.eviction)
            elif op.kind == "pipeline":
                session.pipelined[key] = op.node
            else:
                session.bound[key] = op.node
        self.operations = []
