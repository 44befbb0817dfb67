"""Gate-removal workers: the only code that removes queuetree's scheduling gate from pods.

The admission cycle offers admitted pods to :class:`GateRemover` without waiting
(:meth:`GateRemover.offer`); ``workers`` async tasks drain a bounded queue of ``workers * 200``
entries (Volcano's ``SchGateManager`` sizes), with de-duplication so a pod is never queued
twice. The removal is one JSON patch built by :func:`build_gate_removal_patch`:

1. ``test`` the pod's ``uid`` (a pod deleted and recreated under the same name is not ours);
2. ``test`` that ``spec.schedulingGates`` is exactly ``[our gate]``;
3. ``remove`` ``/spec/schedulingGates``;
4. ``add`` the admission record (``objects.ADMITTED_QUEUE_ANNOTATION``: the queue the pod was
   admitted to), so the pod stays charged there whatever its annotations say later: the record
   and the gate removal are one write, so no admitted pod is ever without its record;
5. ``remove`` the explanation annotation (``explaining.REASON_ANNOTATION``) when the pod
   carries one: a pod that waited for room is admitted with one write, not two.

The server applies it atomically, so it can neither remove another controller's gate nor race a
concurrent change: if anything moved, the ``test`` fails with 422 and nothing is written. 404
(pod gone), 409 and 422 are normal outcomes; any failure drops the assumption in the state, and
the next cycle decides the pod again from the cluster as it is (no retry loop here). Any other
failure (403 from a missing RBAC rule, a 5xx, no answer) is unlikely to go away by the next
cycle, so the pod is held off for a backoff (:data:`BACKOFF_INITIAL`, doubling up to
:data:`BACKOFF_MAX`) before it is offered again, and the failure does not wake the cycle:
otherwise each refusal would start a cycle that offers the pod again at once, a stream of
requests the API server refuses as fast as it can answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Any

from queuetree.api import patches
from queuetree.core import objects
from queuetree.operator import explaining, kube, state

logger = logging.getLogger(__name__)

QUEUE_SLOTS_PER_WORKER = 200
"""Queue capacity per worker, as Volcano's ``SchGateManager`` (``workerNum * 200``)."""

BACKLOG_PER_WORKER = 4
"""Queued removals per worker above which admitting more cannot make anything faster."""

NORMAL_STATUSES = frozenset({404, 409, 422})
"""Outcomes that are not errors: the pod is gone, or changed since the decision."""

BACKOFF_INITIAL = 1.0
"""Seconds a pod is held off after a removal failed for any other reason (then doubled)."""

BACKOFF_MAX = 30.0
"""Longest hold-off: once the cause is fixed (a permission granted again), pods are admitted
again within this many seconds."""


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


def build_gate_removal_patch(pod: objects.Pod, *, queue: str) -> list[dict[str, Any]] | None:
    """The JSON patch that removes our gate from ``pod``, admitted to ``queue``, or None when
    it must not be removed.

    None unless our gate is the only gate left (Volcano never removes its gate while another
    controller's gate is present: that controller is not done with the pod).
    """
    if not pod.only_queue_gate:
        return None
    return patches.gate_removal(
        pod,
        gate=objects.QUEUE_ALLOCATION_GATE,
        record={objects.ADMITTED_QUEUE_ANNOTATION: queue},
        forget=(explaining.REASON_ANNOTATION,),
    )


_REASON_PATH = patches.annotation_path(explaining.REASON_ANNOTATION)


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
        self._api = api
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
        self._backoff: dict[str, tuple[float, float]] = {}
        """Pod key -> (monotonic time before which it is not offered, the last hold-off)."""

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
        """The last removal of ``key`` failed (not a normal outcome) less than its backoff ago:
        the cycle does not offer it, nor assume it admitted, until then."""
        entry = self._backoff.get(key)
        return entry is not None and self._clock() < entry[0]

    def _hold_off(self, key: str) -> float:
        now = self._clock()
        previous = self._backoff.get(key)
        delay = min(previous[1] * 2, BACKOFF_MAX) if previous else BACKOFF_INITIAL
        # Pods deleted while held off are never offered again: forget expired entries.
        self._backoff = {k: v for k, v in self._backoff.items() if v[0] + BACKOFF_MAX > now}
        self._backoff[key] = (now + delay, delay)
        return delay

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
        pod = self._cluster.get_pod(key)
        patch = None if pod is None else build_gate_removal_patch(pod, queue=queue)
        if pod is None or patch is None:
            self._cluster.forget_ungate(key)
            return
        status: int | None = None
        try:
            await self._api.patch_pod(pod.namespace, pod.name, patch)
            if patch[-1]["path"] == _REASON_PATH:
                # The explanation went with the gate: nothing is left to clear.
                self._cluster.swap_explanation(key, "")
            self._backoff.pop(key, None)
        except kube.ApiError as error:
            status = error.status
            if status in NORMAL_STATUSES:
                self._backoff.pop(key, None)
                self._cluster.forget_ungate(key)
            else:
                delay = self._hold_off(key)
                logger.warning(
                    "Failed to remove gate from %s: %s (retrying in %gs)", key, error, delay
                )
                self._cluster.forget_ungate(key, wake=False)
        except Exception:
            # A worker must survive anything; the pod is decided again after its backoff.
            delay = self._hold_off(key)
            logger.exception("Failed to remove gate from %s (retrying in %gs)", key, delay)
            self._cluster.forget_ungate(key, wake=False)
            status = -1
        self._on_outcome(Outcome(key=key, status=status, latency=self._clock() - decided_at))
