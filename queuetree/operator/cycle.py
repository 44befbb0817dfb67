"""The admission cycle: snapshot, plan, apply, report.

One :class:`AdmissionCycle` runs while this replica leads. It wakes on any relevant change
(kopf handlers call :meth:`AdmissionCycle.wake`), waits ``debounce`` seconds so a burst of
watch events becomes one cycle (and longer under a stream of changes: see
``settings.OperatorSettings.pace`` and ``min_interval``; while the gate workers have a backlog,
up to ``backlog_wait``), and otherwise runs every ``period`` seconds as a fallback.

Each cycle (:meth:`AdmissionCycle.run_once`) is four phases, in this order:

1. **snapshot**: one immutable view of the cluster state, with assumed gate removals applied,
   so the reserved set is rebuilt from the cluster every cycle before anything is ungated (a
   restart starts from what the watches show and can never over-admit);
2. **plan**: the core session decides in admission mode (enqueue and the capacity check for
   gated pods; no binding: kube-scheduler binds); then pure functions plan the writes that
   follow (``planning.plan_writes``: queue states, marks, parents and status, PodGroup status,
   explanations of pods that stay gated, notices to pods outside queue admission, evictions).
   While the last batch is still being written, the writes are not planned: they are
   level-triggered, so a later cycle plans them afresh;
3. **apply**: the queues admitted to get the finalizer that keeps them while their pods run
   (``protecting``; pods whose queue could not get it wait for the next cycle), every admitted
   pod is assumed ungated in the state, then offered to the gate
   workers (``gating``; once their queue is full, the rest wait for the next cycle,
   unassumed); the batch of writes goes to the writer (``writing.Writer``), in the background,
   so slow status writes never delay the next admission;
4. **report**: the view and the result go to the metrics (the series are computed when
   scraped), and :class:`CycleReport` says what the cycle did.

Every write the operator makes, and what it does when one fails, is in ``writing``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import functools
import logging
import math
import time
from collections.abc import Callable, Mapping, Set

from queuetree.core import decisions, governing, inqueue_bounds, objects
from queuetree.operator import (
    gating,
    kube,
    metrics,
    planning,
    protecting,
    queue_status,
    reclaiming,
    settings,
    state,
    writing,
)

logger = logging.getLogger(__name__)

SessionFn = Callable[
    [objects.Snapshot, inqueue_bounds.InqueueBound | None, objects.Snapshot | None],
    decisions.SessionResult,
]
"""The pure core bound to its configuration: one snapshot, the Inqueue bound as of now (None:
no bound) and, when the snapshot's settled pods are folded (``StateView.session_snapshot``),
the same cluster unfolded (quota reclaim chooses its victims there:
``core.sessions.run_session``'s ``unfolded``; None otherwise) in, decisions out."""


def inqueue_bound(timeout: float, *, now: float) -> inqueue_bounds.InqueueBound | None:
    """The bound of ``timeout`` seconds (0: none) as of ``now`` (epoch seconds)."""
    if timeout <= 0:
        return None
    return inqueue_bounds.InqueueBound(
        timeout=datetime.timedelta(seconds=timeout),
        now=datetime.datetime.fromtimestamp(now, tz=datetime.UTC),
    )


@dataclasses.dataclass(frozen=True, slots=True)
class CycleReport:
    """What one cycle did (for tests and logs)."""

    ran: bool
    offered: tuple[str, ...] = ()
    deferred: int = 0
    """Admitted pods not offered because the gate workers' queue was full (the next cycle
    decides them again)."""
    queue_writes: int = 0
    explanations: int = 0
    evictions: tuple[str, ...] = ()


def cycle_pause(
    *,
    debounce: float,
    pace: float,
    min_interval: float,
    last_duration: float,
    since_last_start: float,
) -> float:
    """Seconds a wake-up waits before its cycle: ``debounce``, at least ``pace`` times the last
    cycle's duration, and at least what is left of ``min_interval`` since the last cycle
    started (see settings.OperatorSettings). ``since_last_start`` is infinite before the
    first cycle."""
    return max(debounce, pace * last_duration, min_interval - since_last_start)


def explanation_budget(*, budget: int, period: float, since_last_start: float) -> int:
    """The explanations one cycle may plan: ``budget`` per ``period`` since the last cycle
    started, and at least ``budget``. A cycle that waited for the gate workers' backlog (up to
    ``backlog_wait``) tells as many held pods why as the cycles it stood for would have.
    ``since_last_start`` is infinite before the first cycle (``budget``: the first cycle has
    no gap to make up)."""
    if period <= 0 or not math.isfinite(since_last_start):
        return budget
    return max(budget, int(budget * since_last_start / period))


class AdmissionCycle:
    """The cycle loop of the leader (see the module docstring)."""

    def __init__(
        self,
        *,
        cluster: state.ClusterState,
        api: kube.KubeApi,
        remover: gating.GateRemover,
        session: SessionFn,
        reclaim: bool = False,
        metrics_: metrics.Metrics | None = None,
        config: settings.OperatorSettings = settings.DEFAULTS,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._cluster = cluster
        self._writer = writing.Writer(
            cluster=cluster,
            api=api,
            metrics_=metrics_,
            limits=writing.Limits(
                status_writers=config.status_writers,
                event_writers=config.event_writers,
                eviction_retry=config.eviction_retry,
            ),
            wake=self.wake,
            clock=clock,
            wall_clock=wall_clock,
            native_pod_groups=config.native_pod_groups == "true",
        )
        self._remover = remover
        self._protector = protecting.Protector(api=api)
        self._session = session
        self._metrics = metrics_
        self._reclaim = reclaim
        """Plan evictions: the configuration has a reclaim action."""
        # Pacing (settings.OperatorSettings says what each is for).
        self._period = config.cycle_period
        self._backlog_wait = config.backlog_wait
        self._debounce = config.debounce
        self._pace = config.pace
        self._min_interval = config.min_interval
        self._explanation_budget = config.explanation_budget
        self._budget = config.explanation_budget
        """The explanations the running cycle may plan (see :func:`explanation_budget`)."""
        self._figures_interval = config.figures_interval
        self._busy_figures_factor = config.busy_figures_factor
        self._figures_written: dict[str, float] = {}
        """Queue name -> monotonic time its status was last planned (:meth:`_throttle`)."""
        self._groups_written: dict[str, float] = {}
        """PodGroup key -> monotonic time its status was last planned (:meth:`_throttle_groups`)."""
        self._queue_plans: queue_status.PlanMemo = {}
        self._inqueue_timeout = config.inqueue_timeout
        """Seconds an Inqueue PodGroup without pods holds its room (0: for ever)."""
        self._clock = clock
        self._wall_clock = wall_clock
        self._wakeup = asyncio.Event()
        self._last_duration = 0.0
        self._last_started = -float("inf")
        self._last: (
            tuple[tuple[int, frozenset[str], frozenset[str]], decisions.SessionResult] | None
        ) = None

    async def wait_writes(self) -> None:
        """Wait until the background writes planned so far are done, Events included (tests,
        shutdown)."""
        await self._writer.wait()

    def wake(self) -> None:
        """Ask for a cycle soon; safe to call any number of times from handlers."""
        self._wakeup.set()

    @property
    def wake_pending(self) -> bool:
        """A cycle has been asked for and has not started yet."""
        return self._wakeup.is_set()

    async def run(self) -> None:
        """Cycle until cancelled; an exception in one cycle is logged and the loop goes on."""
        try:
            while True:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wakeup.wait(), timeout=self._period)
                if self._wakeup.is_set():
                    await self._pause()
                # Flow control: decide again once the gate workers are close to done with
                # the last decisions (at the latest after backlog_wait, see settings).
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._backlog_wait):
                        await self._remover.wait_drained()
                self._wakeup.clear()
                started = self._clock()
                self._budget = explanation_budget(
                    budget=self._explanation_budget,
                    period=self._period,
                    since_last_start=started - self._last_started,
                )
                self._last_started = started
                try:
                    await self.run_once()
                except Exception:
                    logger.exception("Admission cycle failed; the next one starts afresh")
                self._last_duration = self._clock() - started
        finally:
            await self._writer.close()

    async def _pause(self) -> None:
        pause = cycle_pause(
            debounce=self._debounce,
            pace=self._pace,
            min_interval=self._min_interval,
            last_duration=self._last_duration,
            since_last_start=self._clock() - self._last_started,
        )
        if pause > 0:
            await asyncio.sleep(pause)

    async def run_once(self) -> CycleReport:
        started = self._clock()
        # 1. Snapshot: one immutable view, caches plus assumed gate removals (the reserved set).
        view = self._cluster.view()
        if not view.synced:
            return CycleReport(ran=False)
        # 2. Plan: the core decides; the writes that follow are planned unless the last batch
        #    is still being written (they are level-triggered: a later cycle plans them).
        result = await self._decide(view)
        decided_at = self._clock()
        writes = self._plan(view, result) if self._writer.idle else None
        # 3. Apply: the finalizer on the queues admitted to (protecting), admitted pods to the
        #    gate workers, the finalizer off the idle queues, the writes to the writer.
        result = await self._protector.guard(view, result)
        offered, deferred = self._admit(result, decided_at=decided_at)
        await self._protector.release(view, result)
        if writes is not None:
            self._writer.submit(writes, view=view)
        # 4. Report: the metrics, and what this cycle did.
        if self._metrics is not None:
            self._metrics.publish_queues(
                functools.partial(queue_reading, view, result, wall_clock=self._wall_clock)
            )
            self._metrics.cycle_duration.observe(self._clock() - started)
        submitted = writes or planning.Writes()
        return CycleReport(
            ran=True,
            offered=offered,
            deferred=deferred,
            queue_writes=len(submitted.queues),
            explanations=len(submitted.explanations),
            evictions=tuple(e.victim for e in submitted.evictions),
        )

    async def _decide(self, view: state.StateView) -> decisions.SessionResult:
        """The session's decisions over ``view``. The core is pure and the snapshot immutable,
        so the session runs in a thread: watch events and gate removals keep flowing while it
        computes. The same state gives the same decisions, so a periodic cycle with nothing
        new reuses them. Victims whose eviction was just refused are not preemptable for a
        while (``writing.Writer.protected``), so reclaim turns to other victims; that set is
        part of what the decisions depend on. So are the PodGroups whose Inqueue bound (or
        whose window after a release) ran out since (``inqueue_bounds.due``): time alone
        changes those decisions, and the periodic cycle notices within ``period``."""
        protected = self._writer.protected()
        bound = inqueue_bound(self._inqueue_timeout, now=self._wall_clock())
        due = (
            inqueue_bounds.due(view.pod_groups.values(), bound=bound)
            if bound is not None
            else frozenset()
        )
        key = (view.version, protected, due)
        if self._last is not None and self._last[0] == key:
            return self._last[1]
        snapshot = reclaiming.protect(view.for_session, protected)
        unfolded = (
            reclaiming.protect(view.snapshot, protected)
            if self._reclaim and view.session_snapshot is not None
            else None
        )
        result = await asyncio.to_thread(self._session, snapshot, bound, unfolded)
        self._last = (key, result)
        return result

    def _plan(self, view: state.StateView, result: decisions.SessionResult) -> planning.Writes:
        """The writes that follow from ``result`` (``planning.plan_writes``), the queue and
        PodGroup writes that only refresh figures paced by :meth:`_throttle` and
        :meth:`_throttle_groups`."""
        writes = planning.plan_writes(
            view,
            result,
            written=self._writer.written(),
            explained=self._cluster.explanations(),
            stamp=self._writer.stamp(),
            now=self._writer.now(),
            budget=self._budget,
            reclaim=self._reclaim,
            memo=self._queue_plans,
        )
        return dataclasses.replace(
            writes,
            queues=tuple(self._throttle(list(writes.queues))),
            pod_groups=self._throttle_groups(writes.pod_groups, present=view.pod_groups.keys()),
        )

    def _figures_pace(self) -> float:
        """Seconds between writes that only refresh figures: ``figures_interval``, times
        ``busy_figures_factor`` while the gate workers have a backlog."""
        if self._remover.backlogged:
            return self._figures_interval * self._busy_figures_factor
        return self._figures_interval

    def _throttle(self, writes: list[queue_status.QueueWrite]) -> list[queue_status.QueueWrite]:
        """Drop writes that only refresh figures of a queue written less than
        ``figures_interval`` ago: during a burst every cycle changes ``reserved`` and
        ``allocated``, and a status write per queue per cycle would cost more than the
        admissions themselves (kueue #8095). While the gate workers have a backlog, the
        interval is ``busy_figures_factor`` times longer: the API server's time goes to
        admissions first, and the figures catch up once the backlog is gone. States, marks,
        warnings, and a change of a queue's pod count (``queue_status.busy_changed``) are never
        delayed."""
        now = self._clock()
        interval = self._figures_pace()
        kept = []
        for write in writes:
            urgent = bool(
                write.meta or write.warning or write.transition or "state" in write.status
            ) or (queue_status.busy_changed(write))
            if not urgent and now - self._figures_written.get(write.name, -1e18) < interval:
                continue
            if write.status:
                self._figures_written[write.name] = now
            kept.append(write)
        return kept

    def _throttle_groups(
        self, patches: Mapping[str, Mapping[str, object]], *, present: Set[str]
    ) -> dict[str, Mapping[str, object]]:
        """Drop PodGroup status patches that only refresh its pod counts (``running``,
        ``succeeded``, ``failed``: ``queue_status.COUNT_FIELDS``) when the group's status was
        planned less than the figures' interval ago (:meth:`_figures_pace`), as queue figures
        are: a gang's pods turn Running one by one as the kubelets report them, and each step
        was a write of its own (issue 32: 3.3 status writes per group of 4 pods). A change of
        phase or of a condition (why the group waits, or that it was admitted) is never
        delayed; the counts follow with the next phase change or within the interval (every
        cycle plans them again, the periodic one too). ``present``: the groups the view
        shows (the others are forgotten)."""
        now = self._clock()
        interval = self._figures_pace()
        kept: dict[str, Mapping[str, object]] = {}
        for key, patch in patches.items():
            counts_only = patch.keys() <= queue_status.COUNT_FIELDS
            if counts_only and now - self._groups_written.get(key, -math.inf) < interval:
                continue
            self._groups_written[key] = now
            kept[key] = patch
        if len(self._groups_written) > len(present):
            self._groups_written = {
                key: at for key, at in self._groups_written.items() if key in present
            }
        return kept

    def _admit(
        self, result: decisions.SessionResult, *, decided_at: float
    ) -> tuple[tuple[str, ...], int]:
        """Assume each admitted pod ungated, then offer it to the gate workers; a refused offer
        forgets the assumption at once. Pods whose last removal failed wait out their backoff
        first. Returns the pods offered and how many were deferred to the next cycle;
        ``decided_at`` (monotonic) starts the clock of each pod's gate removal latency."""
        offered: list[str] = []
        for index, key in enumerate(result.ungate):
            if self._remover.full:
                # The rest wait for the next cycle, which runs once the workers have caught up
                # (flow control in run): assuming and forgetting each would cost more than the
                # admissions themselves when a release admits thousands at once.
                deferred = len(result.ungate) - index
                logger.debug("%d admitted pods wait for the gate workers", deferred)
                self.wake()
                return tuple(offered), deferred
            if self._remover.holding_off(key):
                continue
            if not self._cluster.assume_ungated(key, decided_at=decided_at):
                continue
            queue = result.admitted_to.get(key, "")
            if self._remover.offer(key, queue=queue, decided_at=decided_at):
                offered.append(key)
            else:
                self._cluster.forget_ungate(key)
        return tuple(offered), 0


def queue_reading(
    view: state.StateView,
    result: decisions.SessionResult,
    *,
    wall_clock: Callable[[], float] = time.time,
) -> metrics.QueueReading:
    """The per-queue series of a cycle's ``view`` and ``result``, ages as of ``wall_clock()``
    (read at scrape time: both are immutable)."""
    gated, oldest = count_gated(view, now=wall_clock())
    return metrics.QueueReading(
        figures=result.queues, gated=gated, oldest=oldest, outside=count_outside(view, result)
    )


def count_outside(view: state.StateView, result: decisions.SessionResult) -> Mapping[str, int]:
    """Queue name -> the unfinished pods that name it without opting in (``view.outside``):
    they run outside queue admission and no figure counts them. Only queues of ``result``: a
    name no queue has would be a series for every typo."""
    counts: dict[str, int] = {}
    for pod in view.outside.values():
        named = governing.named_queue(pod, view.pod_groups)
        if named is not None and named.queue in result.queues:
            counts[named.queue] = counts.get(named.queue, 0) + 1
    return counts


def count_gated(
    view: state.StateView, *, now: float = 0.0
) -> tuple[Mapping[str, int], Mapping[str, float]]:
    """Queue name -> pods that still carry our gate (assumed removals excluded), and queue
    name -> seconds since the oldest of them was created (``now``: the wall clock, epoch
    seconds; the gate is injected at creation, so that is how long it has waited)."""
    counts: dict[str, int] = {}
    created: dict[str, float] = {}
    snapshot = view.snapshot
    for key in view.gated:
        pod = snapshot.pods[key]
        group = snapshot.pod_groups.get(pod.group)
        queue = group.queue if group is not None else objects.DEFAULT_QUEUE
        counts[queue] = counts.get(queue, 0) + 1
        if pod.created != objects.EPOCH:
            stamp = pod.created.timestamp()
            created[queue] = min(created.get(queue, stamp), stamp)
    return counts, {queue: max(0.0, now - stamp) for queue, stamp in created.items()}
