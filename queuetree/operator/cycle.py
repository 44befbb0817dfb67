"""The admission cycle: snapshot, decide with the pure core, act.

One :class:`AdmissionCycle` runs while this replica leads. It wakes on any relevant change
(kopf handlers call :meth:`AdmissionCycle.wake`), waits ``debounce`` seconds so a burst of
watch events becomes one cycle (and longer under a stream of changes: see
``settings.OperatorSettings.pace`` and ``min_interval``; while the gate workers have a backlog,
up to ``backlog_wait``), and otherwise runs every ``period`` seconds as a fallback.

Each cycle (:meth:`AdmissionCycle.run_once`):

1. takes one immutable view of the cluster state, with assumed gate removals applied, so the
   reserved set is rebuilt from the cluster every cycle before anything is ungated (a restart
   starts from what the watches show and can never over-admit);
2. runs the core session in admission mode (enqueue and the capacity check for gated pods; no
   binding: kube-scheduler binds);
3. for every admitted pod: assume it ungated in the state, then offer it to the gate workers
   (once their queue is full, the rest wait for the next cycle, unassumed);
4. plans the queue controller's writes (states, marks, parents, status) and the explanations
   of pods that stay gated, and hands them to one background writer, so slow status writes
   never delay the next admission; while that writer is busy, later cycles skip these writes
   and recompute them afresh (they are level-triggered: a diff against what the watches show).
   Writes that only refresh a queue's figures go out at most every ``figures_interval``
   (``busy_figures_factor`` times less often while the gate workers have a backlog);
   ``status_writers`` of these writes are in flight at once; the Event of an explanation
   follows its annotation in a lane of its own (``event_writers`` in flight); pods that name a
   queue without opting in are told once, by an Event, that they run outside queue admission
   (``explaining.plan_outside_notices``);
5. publishes its view and result to the metrics (the series are computed when scraped).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from queuetree.api import bodies
from queuetree.core import conditions, decisions, governing, objects
from queuetree.operator import (
    explaining,
    gating,
    kube,
    metrics,
    queue_status,
    reclaiming,
    settings,
    state,
)

logger = logging.getLogger(__name__)

SessionFn = Callable[[objects.Snapshot], decisions.SessionResult]
"""The pure core bound to its configuration: one snapshot in, decisions out."""

EVENT_NAMESPACE = "default"
"""Where events about cluster-scoped queues go (as kube-controller-manager does)."""
EVENT_COMPONENT = "queuetree-operator"
"""The ``source.component`` and ``reportingComponent`` of the operator's events."""


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
        period: float = settings.DEFAULTS.cycle_period,
        backlog_wait: float = settings.DEFAULTS.backlog_wait,
        debounce: float = settings.DEFAULTS.debounce,
        explanation_budget: int = settings.DEFAULTS.explanation_budget,
        status_writers: int = settings.DEFAULTS.status_writers,
        event_writers: int = settings.DEFAULTS.event_writers,
        figures_interval: float = settings.DEFAULTS.figures_interval,
        busy_figures_factor: float = settings.DEFAULTS.busy_figures_factor,
        eviction_retry: float = settings.DEFAULTS.eviction_retry,
        pace: float = settings.DEFAULTS.pace,
        min_interval: float = settings.DEFAULTS.min_interval,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._cluster = cluster
        self._api = api
        self._remover = remover
        self._session = session
        self._reclaim = reclaim
        self._metrics = metrics_
        self._period = period
        self._backlog_wait = backlog_wait
        self._debounce = debounce
        self._explanation_budget = explanation_budget
        self._budget = explanation_budget
        """The explanations the running cycle may plan (see :func:`explanation_budget`)."""
        self._writers = max(1, status_writers)
        self._event_writers = max(1, event_writers)
        self._pod_events: dict[str, explaining.Explanation] = {}
        """Pod key -> the explanation whose Event is still to be sent, oldest first."""
        self._event_lane: asyncio.Task[None] | None = None
        self._figures_interval = figures_interval
        self._busy_figures_factor = busy_figures_factor
        self._eviction_retry = eviction_retry
        self._refused: dict[str, float] = {}
        """Victim key -> monotonic time until which reclaim may not choose it (a 429)."""
        self._pace = pace
        self._min_interval = min_interval
        self._figures_written: dict[str, float] = {}
        self._queue_plans: queue_status.PlanMemo = {}
        self._clock = clock
        self._wall_clock = wall_clock
        self._wakeup = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None
        self._evicting: set[str] = set()
        self._last_duration = 0.0
        self._last_started = -float("inf")
        self._last: tuple[tuple[int, frozenset[str]], decisions.SessionResult] | None = None
        self._told: dict[str, conditions.Readiness] = {}
        """Queue -> the readiness last announced (event and log): a write planned again while
        the watch lags behind the last one is not announced twice."""
        self._noticed: set[str] = set()
        """``explaining.notice_token`` of each pod outside queue admission told so (or being
        told); forgotten once the pod is no longer in the view's ``outside``."""

    async def wait_writes(self) -> None:
        """Wait until the background writes planned so far are done, Events included (tests,
        shutdown)."""
        if self._writer is not None:
            await asyncio.shield(self._writer)
        if self._event_lane is not None:
            await asyncio.shield(self._event_lane)

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
            for task in (self._writer, self._event_lane):
                if task is not None:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task

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
        # 1. One immutable view: caches plus assumed gate removals (the reserved set).
        view = self._cluster.view()
        if not view.synced:
            return CycleReport(ran=False)
        # 2. Decide. The core is pure and the snapshot immutable, so the session runs in a
        #    thread: watch events and gate removals keep flowing while it computes. The same
        #    state gives the same decisions, so a periodic cycle with nothing new reuses them.
        #    Victims whose eviction was just refused are not preemptable for a while, so
        #    reclaim turns to other victims; that set is part of what the decisions depend on.
        protected = self._protected()
        if self._last is not None and self._last[0] == (view.version, protected):
            result = self._last[1]
        else:
            snapshot = reclaiming.protect(view.for_session, protected)
            result = await asyncio.to_thread(self._session, snapshot)
            self._last = ((view.version, protected), result)
        # 3. Admit: assume, then offer; a refused offer forgets the assumption at once. Pods
        #    whose last removal failed wait out their backoff first.
        decided_at = self._clock()
        offered: list[str] = []
        deferred = 0
        for index, key in enumerate(result.ungate):
            if self._remover.full:
                # The rest wait for the next cycle, which runs once the workers have caught up
                # (flow control above): assuming and forgetting each would cost more than the
                # admissions themselves when a release admits thousands at once.
                deferred = len(result.ungate) - index
                logger.debug("%d admitted pods wait for the gate workers", deferred)
                self.wake()
                break
            if self._remover.holding_off(key):
                continue
            if not self._cluster.assume_ungated(key, decided_at=decided_at):
                continue
            queue = result.admitted_to.get(key, "")
            if self._remover.offer(key, queue=queue, decided_at=decided_at):
                offered.append(key)
            else:
                self._cluster.forget_ungate(key)
        # 4. Level-triggered writes, in the background, one batch at a time.
        writes: list[queue_status.QueueWrite] = []
        explanations: list[explaining.Explanation] = []
        notices: list[explaining.Explanation] = []
        evictions: list[reclaiming.Eviction] = []
        if self._writer is None or self._writer.done():
            writes = self._throttle(
                queue_status.plan_queue_writes(
                    view, result, now=self._timestamp(), memo=self._queue_plans
                )
            )
            groups = queue_status.plan_pod_group_status(view.pod_groups, result)
            explanations = explaining.plan_explanations(
                view, result, self._cluster.explanations(), budget=self._budget
            )
            notices = self._plan_notices(view, budget=self._budget - len(explanations))
            evictions = self._plan_evictions(view, result)
            self._writer = asyncio.create_task(
                self._write(writes, groups, explanations, evictions, notices),
                name="queuetree cycle writer",
            )
        # 5. Metrics.
        if self._metrics is not None:
            self._metrics.publish_queues(
                functools.partial(queue_reading, view, result, wall_clock=self._wall_clock)
            )
            self._metrics.cycle_duration.observe(self._clock() - started)
        return CycleReport(
            ran=True,
            offered=tuple(offered),
            deferred=deferred,
            queue_writes=len(writes),
            explanations=len(explanations),
            evictions=tuple(e.victim for e in evictions),
        )

    def _throttle(self, writes: list[queue_status.QueueWrite]) -> list[queue_status.QueueWrite]:
        """Drop writes that only refresh figures of a queue written less than
        ``figures_interval`` ago: during a burst every cycle changes ``reserved`` and
        ``allocated``, and a status write per queue per cycle would cost more than the
        admissions themselves (kueue #8095). While the gate workers have a backlog, the
        interval is ``busy_figures_factor`` times longer: the API server's time goes to
        admissions first, and the figures catch up once the backlog is gone. States, marks,
        warnings, and a queue's first or last pod (the count the webhook's deletion check reads)
        are never delayed."""
        now = self._clock()
        interval = self._figures_interval
        if self._remover.backlogged:
            interval *= self._busy_figures_factor
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

    def _protected(self) -> frozenset[str]:
        """The victims whose refusal has not expired yet (the rest are forgotten)."""
        now = self._clock()
        self._refused = {key: until for key, until in self._refused.items() if until > now}
        return frozenset(self._refused)

    def _plan_notices(self, view: state.StateView, *, budget: int) -> list[explaining.Explanation]:
        """The pods outside queue admission to tell this cycle (marked told at once: a failed
        send is forgotten again by :meth:`_apply_notice`), and one log line for them."""
        present = {explaining.notice_token(key, pod.uid) for key, pod in view.outside.items()}
        self._noticed &= present
        notices = explaining.plan_outside_notices(view, self._noticed, budget=budget)
        if notices:
            self._noticed.update(explaining.notice_token(n.key, n.uid) for n in notices)
            logger.info(
                "%d pod(s) name a queue without opting in and run outside queue admission "
                "(told by an Event); the first: %s",
                len(notices),
                notices[0].reason,
            )
        return notices

    def _plan_evictions(
        self, view: state.StateView, result: decisions.SessionResult
    ) -> list[reclaiming.Eviction]:
        if not self._reclaim:
            return []
        plan = reclaiming.plan_reclaim(view.snapshot, result)
        return [e for e in plan if e.victim not in self._evicting]

    async def _write(
        self,
        writes: list[queue_status.QueueWrite],
        groups: Mapping[str, Mapping[str, Any]],
        explanations: list[explaining.Explanation],
        evictions: list[reclaiming.Eviction],
        notices: list[explaining.Explanation],
    ) -> None:
        # Each write is about one object and independent of the others: several in flight.
        slots = asyncio.Semaphore(self._writers)

        async def bounded(write: Awaitable[None]) -> None:
            async with slots:
                await write

        async with asyncio.TaskGroup() as group:
            for write in writes:
                group.create_task(bounded(self._apply_queue_write(write)))
            for key, status in groups.items():
                group.create_task(bounded(self._apply_pod_group_status(key, status)))
            for explanation in explanations:
                group.create_task(bounded(self._apply_explanation(explanation)))
            for notice in notices:
                group.create_task(bounded(self._apply_notice(notice)))
        for eviction in evictions:
            await self._apply_eviction(eviction)

    async def _apply_pod_group_status(self, key: str, status: Mapping[str, Any]) -> None:
        namespace, _, name = key.partition("/")
        try:
            await self._api.patch_pod_group_status(namespace, name, bodies.status_patch(status))
        except kube.ApiError as error:
            # 404: the group is gone; otherwise the next cycle plans the write again.
            if error.status != 404:
                logger.warning("PodGroup %s: status not written: %s", key, error)

    async def _apply_queue_write(self, write: queue_status.QueueWrite) -> None:
        try:
            if write.meta:
                await self._api.patch_queue(write.name, write.meta)
            if write.status:
                await self._api.patch_queue_status(write.name, bodies.status_patch(write.status))
            if write.warning:
                await self._queue_event(write, "Warning", "QueueStateRefused", write.warning)
            if write.transition is not None and self._told.get(write.name) != write.transition:
                await self._announce(write, write.transition)
        except kube.ApiError as error:
            # 404: the queue is gone; anything else: the next cycle plans the write again.
            if error.status != 404:
                logger.warning("Queue %s: status write failed: %s", write.name, error)

    async def _announce(self, write: queue_status.QueueWrite, ready: conditions.Readiness) -> None:
        """Tell of a queue's new readiness once: a log line and an event on the queue
        (Warning when it stopped admitting, Normal otherwise), reason the condition's."""
        self._told[write.name] = ready
        if ready.ready:
            logger.info("Queue %s is ready (%s): %s", write.name, ready.reason, ready.message)
        else:
            logger.warning(
                "Queue %s is not ready (%s): %s", write.name, ready.reason, ready.message
            )
        await self._queue_event(
            write, "Normal" if ready.ready else "Warning", str(ready.reason), ready.message
        )

    async def _queue_event(
        self, write: queue_status.QueueWrite, event_type: str, reason: str, message: str
    ) -> None:
        await self._api.create_event(
            EVENT_NAMESPACE,
            self.event_body(
                kind="Queue",
                api_version="scheduling.volcano.sh/v1beta1",
                namespace="",
                name=write.name,
                uid=write.uid,
                event_type=event_type,
                reason=reason,
                message=message,
            ),
        )

    async def _apply_explanation(self, explanation: explaining.Explanation) -> None:
        namespace, _, name = explanation.key.partition("/")
        previous = self._cluster.swap_explanation(explanation.key, explanation.reason)
        if previous == explanation.reason:
            return
        # A later reason replaces an Event not sent yet; a removal cancels it.
        self._pod_events.pop(explanation.key, None)
        try:
            await self._api.annotate_pod(
                namespace, name, {explaining.REASON_ANNOTATION: explanation.reason or None}
            )
        except kube.ApiError as error:
            # Restore the previous record so the next cycle explains again.
            self._cluster.swap_explanation(explanation.key, previous or "")
            if error.status != 404:
                logger.warning("Pod %s: explanation not written: %s", explanation.key, error)
            return
        if explanation.reason:
            self._pod_events[explanation.key] = explanation
            if self._event_lane is None or self._event_lane.done():
                self._event_lane = asyncio.create_task(
                    self._send_pod_events(), name="queuetree explanation events"
                )

    async def _send_pod_events(self) -> None:
        """Send the Events of written explanations, oldest first, ``event_writers`` at once,
        until none is left; one whose pod's explanation is no longer its own is dropped."""
        slots = asyncio.Semaphore(self._event_writers)
        # The outer loop: an Event queued while the last sends were on their way finds this
        # lane not done yet, so this lane sends it.
        while self._pod_events:
            async with asyncio.TaskGroup() as group:
                while self._pod_events:
                    await slots.acquire()
                    if not self._pod_events:
                        slots.release()
                        break
                    key = next(iter(self._pod_events))
                    explanation = self._pod_events.pop(key)
                    if self._cluster.explanation_of(key) != explanation.reason:
                        slots.release()
                        continue
                    group.create_task(self._send_pod_event(explanation, slots))

    async def _send_pod_event(
        self, explanation: explaining.Explanation, slots: asyncio.Semaphore
    ) -> None:
        try:
            await self._pod_event(
                explanation.key,
                uid=explanation.uid,
                event_type="Normal",
                reason=explaining.EVENT_REASON,
                message=explanation.reason,
            )
        except kube.ApiError as error:
            # Events are best effort, as in client-go; the annotation is the record.
            if error.status != 404:
                logger.warning("Pod %s: explanation event not sent: %s", explanation.key, error)
        finally:
            slots.release()

    async def _apply_notice(self, notice: explaining.Explanation) -> None:
        """Tell a pod outside queue admission so, by an Event whose name is the pod's own
        (``explaining.notice_event_name``): a 409 means it was told already."""
        try:
            await self._pod_event(
                notice.key,
                uid=notice.uid,
                event_type="Warning",
                reason=explaining.OUTSIDE_EVENT_REASON,
                message=notice.reason,
                event_name=explaining.notice_event_name(notice),
            )
        except kube.ApiError as error:
            if error.status == 409:
                return  # told already (by this operator before a restart, or another leader)
            if error.status != 404:
                # The next cycles try again (a 404: the namespace is gone, and the pod with it).
                self._noticed.discard(explaining.notice_token(notice.key, notice.uid))
                logger.warning("Pod %s: notice event not sent: %s", notice.key, error)

    async def _apply_eviction(self, eviction: reclaiming.Eviction) -> None:
        namespace, _, name = eviction.victim.partition("/")
        self._evicting.add(eviction.victim)
        try:
            await self._api.evict_pod(namespace, name)
        except kube.ApiError as error:
            if error.status == 429:
                await self._eviction_refused(eviction, error)
            elif error.status != 404:  # 404: the victim is gone already
                logger.warning("Eviction of %s failed: %s", eviction.victim, error)
            return
        finally:
            self._evicting.discard(eviction.victim)
        if self._metrics is not None:
            self._metrics.evictions.labels(reason=eviction.rule).inc()
        for key, uid, text in (
            (eviction.victim, eviction.victim_uid, eviction.victim_message),
            (eviction.reclaimer, eviction.reclaimer_uid, eviction.reclaimer_message),
        ):
            if not key:
                continue
            with contextlib.suppress(kube.ApiError):
                await self._pod_event(
                    key, uid=uid, event_type="Normal", reason="Reclaim", message=text
                )

    async def _eviction_refused(self, eviction: reclaiming.Eviction, error: kube.ApiError) -> None:
        """A 429: a PodDisruptionBudget forbids the eviction now. Reclaim leaves the victim
        alone for as long as the server asked (``retryAfterSeconds``; else ``eviction_retry``
        seconds), choosing other victims if there are any, and the reclaimer is told why it
        waits; the next cycle decides again."""
        retry = error.retry_after or self._eviction_retry
        self._refused[eviction.victim] = self._clock() + retry
        self.wake()
        refusal = error.message or error.reason or "429 Too Many Requests"
        logger.info(
            "Eviction of %s for %s refused: %s", eviction.victim, eviction.reclaimer, refusal
        )
        if self._metrics is not None:
            self._metrics.eviction_refusals.inc()
        if not eviction.reclaimer:
            return
        with contextlib.suppress(kube.ApiError):
            await self._pod_event(
                eviction.reclaimer,
                uid=eviction.reclaimer_uid,
                event_type="Warning",
                reason="ReclaimBlocked",
                message=reclaiming.refusal_message(eviction, refusal=refusal, retry_seconds=retry),
            )

    def _timestamp(self) -> str:
        """Now, in the RFC 3339 form of Kubernetes timestamps (whole seconds, UTC)."""
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self._wall_clock()))

    async def _pod_event(
        self,
        key: str,
        *,
        uid: str,
        event_type: str,
        reason: str,
        message: str,
        event_name: str = "",
    ) -> None:
        """Create an Event about pod ``key`` (``namespace/name``); ``event_name``: see
        ``bodies.event``."""
        namespace, _, name = key.partition("/")
        await self._api.create_event(
            namespace,
            self.event_body(
                kind="Pod",
                api_version="v1",
                namespace=namespace,
                name=name,
                uid=uid,
                event_type=event_type,
                reason=reason,
                message=message,
                event_name=event_name,
            ),
        )

    def event_body(
        self,
        *,
        kind: str,
        api_version: str,
        namespace: str,
        name: str,
        event_type: str,
        reason: str,
        message: str,
        uid: str = "",
        event_name: str = "",
    ) -> dict[str, Any]:
        """A ``v1`` Event about one object, stamped now (``bodies.event``)."""
        return bodies.event(
            kind=kind,
            api_version=api_version,
            namespace=namespace,
            name=name,
            event_type=event_type,
            reason=reason,
            message=message,
            stamp=self._timestamp(),
            event_namespace=EVENT_NAMESPACE,
            component=EVENT_COMPONENT,
            uid=uid,
            event_name=event_name,
        )


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
