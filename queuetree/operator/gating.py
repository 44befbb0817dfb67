"""Gate-removal workers: the only code that removes queuetree's scheduling gate from pods.

The admission cycle offers admitted pods to :class:`GateRemover` without waiting
(:meth:`GateRemover.offer`); ``workers`` async tasks drain a bounded queue of ``workers * 200``
entries (Volcano's ``SchGateManager`` sizes), with de-duplication so a pod is never queued
twice. Each removal is one write, ``writing.GateWrites.remove``: the JSON patch that cannot
remove another controller's gate nor race a change (``writing.build_gate_removal_patch``), and
what each failure means (the assumption in the state is dropped, and after an abnormal one the
pod is held off for a backoff: :meth:`GateRemover.holding_off`). No retry loop here: the next
cycle decides the pod again from the cluster as it is.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable

from queuetree.operator import kube, state, writing

logger = logging.getLogger(__name__)

QUEUE_SLOTS_PER_WORKER = 200
"""Queue capacity per worker, as Volcano's ``SchGateManager`` (``workerNum * 200``)."""

BACKLOG_PER_WORKER = 4
"""Queued removals per worker above which admitting more cannot make anything faster."""


@dataclasses.dataclass(frozen=True, slots=True)
class Outcome:
    """What one removal did: ``status`` None when the gate was removed; else the HTTP status
    of the refused request, 0 when the request got no answer (a timeout, a refused or dropped
    connection), -1 when the removal failed otherwise."""

    key: str
    status: int | None
    latency: float
    """Seconds from the admission decision to the answer."""

    @property
    def label(self) -> str:
        """``removed``, ``no-answer``, ``error`` or the HTTP status (the metric's ``outcome``)."""
        if self.status is None:
            return "removed"
        return {0: "no-answer", -1: "error"}.get(self.status, str(self.status))


OutcomeFn = Callable[[Outcome], None]


class GateRemover:
    """A bounded, de-duplicated queue of admitted pods and the workers that ungate them."""

    def __init__(
        self,
        *,
        cluster: state.ClusterState,
        api: kube.KubeApi,
        workers: int = 5,
        on_outcome: OutcomeFn | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._cluster = cluster
        self._workers = max(1, workers)
        self._queue: asyncio.Queue[tuple[str, str, float]] = asyncio.Queue(
            maxsize=self._workers * QUEUE_SLOTS_PER_WORKER
        )
        self._queued: set[str] = set()
        self._low_water = self._workers * BACKLOG_PER_WORKER
        self._drained = asyncio.Event()
        self._drained.set()
        self._on_outcome: OutcomeFn = on_outcome or (lambda outcome: None)
        self._clock = clock
        self._tasks: list[asyncio.Task[None]] = []
        self._gates = writing.GateWrites(cluster=cluster, api=api, clock=clock)

    @property
    def pending(self) -> int:
        """Pods queued or being patched."""
        return len(self._queued)

    @property
    def full(self) -> bool:
        """No room is left in the queue: an offer now would be refused."""
        return self._queue.full()

    @property
    def backlogged(self) -> bool:
        """More than ``workers * BACKLOG_PER_WORKER`` removals are pending."""
        return not self._drained.is_set()

    async def wait_drained(self) -> None:
        """Wait until at most ``workers * BACKLOG_PER_WORKER`` removals are pending.

        The admission cycle waits here before deciding again: while the workers have a
        backlog, a new decision would only queue behind it, and each cycle costs CPU the
        workers, the watches and (on a small node) the API server need. The pods that arrive
        meanwhile are decided together by the next cycle.
        """
        await self._drained.wait()

    def _update_drained(self) -> None:
        if len(self._queued) <= self._low_water:
            self._drained.set()
        else:
            self._drained.clear()

    def holding_off(self, key: str) -> bool:
        """``key`` is held off after a failed removal (``writing.GateWrites.holding_off``)."""
        return self._gates.holding_off(key)

    def offer(self, key: str, *, queue: str, decided_at: float) -> bool:
        """Queue ``key``, admitted to ``queue``, for removal without waiting; False when
        already queued or full.

        A full queue is not an error: the caller drops its assumption and the pod is admitted
        again by a later cycle, once the workers have caught up.
        """
        if key in self._queued:
            return False
        try:
            self._queue.put_nowait((key, queue, decided_at))
        except asyncio.QueueFull:
            logger.warning("Gate operation queue full, skipping gate removal for %s", key)
            return False
        self._queued.add(key)
        self._update_drained()
        return True

    def start(self) -> None:
        for index in range(self._workers):
            self._tasks.append(
                asyncio.create_task(self._work(), name=f"queuetree gate worker {index}")
            )

    async def stop(self) -> None:
        """Cancel the workers at once and drop what is queued (the assumptions go with it)."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        while not self._queue.empty():
            key, _, _ = self._queue.get_nowait()
            self._cluster.forget_ungate(key)
        self._queued.clear()
        self._update_drained()

    async def _work(self) -> None:
        while True:
            key, queue, decided_at = await self._queue.get()
            try:
                await self._remove(key, queue, decided_at)
            finally:
                self._queued.discard(key)
                self._update_drained()

    async def _remove(self, key: str, queue: str, decided_at: float) -> None:
        sent, status = await self._gates.remove(key, queue=queue)
        if sent:
            self._on_outcome(Outcome(key=key, status=status, latency=self._clock() - decided_at))
