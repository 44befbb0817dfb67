"""Every write the operator makes to the API server, and what it does when one fails.

The operator reads only from its watches; it writes only here, through ``kube.KubeApi`` (the
client), with bodies and patches built by ``queuetree.api``. Three writers, one per rhythm:

- :class:`GateWrites`, for the gate workers (``gating.GateRemover``): one JSON patch per
  admitted pod (:func:`build_gate_removal_patch`) that removes our gate and records the queue;
- :func:`ensure_queues`, once when this replica starts to lead: ``root`` and the default queue;
- :class:`Writer`, for the admission cycle: each cycle's batch (``planning.Writes``) of queue
  patches and status, PodGroup status, pod explanations (annotation, then Event), notices to
  pods outside queue admission, and reclaim's evictions, with the Events each raises.

What a failure means, write by write (none is retried in a loop: every plan is
level-triggered, so the next cycle plans again whatever did not land):

- gate removal: 404 (the pod is gone), 409 and 422 (it changed since the decision) are normal
  outcomes (:data:`NORMAL_STATUSES`): the assumption is dropped and the next cycle decides the
  pod again. Any other failure (403 from a missing RBAC rule, a 5xx, no answer) is unlikely to
  go away by the next cycle, so the pod is held off for a backoff (:data:`BACKOFF_INITIAL`,
  doubling up to :data:`BACKOFF_MAX`) and the failure does not wake the cycle: otherwise each
  refusal would start a cycle that offers the pod again at once;
- queue creation at start: 409 means the queue exists; other failures are retried 60 times at
  1 s, as Volcano's scheduler cache does;
- queue and PodGroup writes: 404 (gone) is quiet; anything else is logged and planned again;
  the Event of a PodGroup's changed admission condition follows its status write, best
  effort, once per change;
- an explanation's annotation: the record of the pod's explanation is restored, so the next
  cycle writes it again; its Event is best effort, as in client-go (the annotation is the
  record);
- a notice: 409 means the pod was told already (by this operator before a restart, or by
  another leader: the Event's name is the pod's own); other failures forget it was told;
- an eviction: 429 (a PodDisruptionBudget forbids it now) keeps the victim from reclaim for
  the ``retryAfterSeconds`` the server named (else ``eviction_retry``), tells the reclaimer
  why it waits, and wakes the cycle to choose other victims; 404: the victim is gone.

Lease renewals are the one write not here: kubernetes-asyncio's leader election makes them
(``leading``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from queuetree.api import bodies, native_groups, patches, paths, resource_claims, workloads
from queuetree.core import conditions, objects
from queuetree.operator import (
    explaining,
    kube,
    metrics,
    planning,
    queue_status,
    reclaiming,
    state,
    workload_groups,
)

logger = logging.getLogger(__name__)

EVENT_NAMESPACE = "default"
"""Where events about cluster-scoped queues go (as kube-controller-manager does)."""
EVENT_COMPONENT = "queuetree-operator"
"""The ``source.component`` and ``reportingComponent`` of the operator's events."""
GROUP_CREATION_FAILED = "PodGroupCreateFailed"
"""The reason of the Warning Event on a workload whose PodGroup could not be created."""


# -- gate removals ------------------------------------------------------------------------------

NORMAL_STATUSES = frozenset({404, 409, 422})
"""Outcomes of a gate removal that are not errors: the pod is gone, or changed since the
decision."""

BACKOFF_INITIAL = 1.0
"""Seconds a pod is held off after a removal failed for any other reason (then doubled)."""

BACKOFF_MAX = 30.0
"""Longest hold-off: once the cause is fixed (a permission granted again), pods are admitted
again within this many seconds."""


def build_gate_removal_patch(pod: objects.Pod, *, queue: str) -> list[dict[str, Any]] | None:
    """The JSON patch that removes our gate from ``pod``, admitted to ``queue``, or None when
    it must not be removed.

    None unless our gate is the only gate left (Volcano never removes its gate while another
    controller's gate is present: that controller is not done with the pod). Otherwise:

    1. ``test`` the pod's ``uid`` (a pod deleted and recreated under the same name is not ours);
    2. ``test`` that ``spec.schedulingGates`` is exactly ``[our gate]``;
    3. ``remove`` ``/spec/schedulingGates``;
    4. ``add`` the admission record (``objects.ADMITTED_QUEUE_ANNOTATION``: the queue the pod
       was admitted to), so the pod stays charged there whatever its annotations say later:
       the record and the gate removal are one write, so no admitted pod is ever without it;
       a pod whose own ResourceClaims were charged also gets that charge recorded
       (``objects.ADMITTED_DEVICES_ANNOTATION``), the floor of its charge after a restart;
    5. ``remove`` the explanation annotation (``explaining.REASON_ANNOTATION``) when the pod
       carries one: a pod that waited for room is admitted with one write, not two.

    The server applies it atomically, so it can neither remove another controller's gate nor
    race a concurrent change: if anything moved, a ``test`` fails with 422 and nothing is
    written.
    """
    if not pod.only_queue_gate:
        return None
    return patches.gate_removal(
        pod,
        gate=objects.QUEUE_ALLOCATION_GATE,
        record=admission_record(pod, queue=queue),
        forget=(explaining.REASON_ANNOTATION,),
    )


def admission_record(pod: objects.Pod, *, queue: str) -> dict[str, str]:
    """The annotations that record ``pod``'s admission to ``queue`` (see
    :func:`build_gate_removal_patch`)."""
    record = {objects.ADMITTED_QUEUE_ANNOTATION: queue}
    if pod.own_devices is not None:
        record[objects.ADMITTED_DEVICES_ANNOTATION] = resource_claims.devices_record(
            pod.own_devices
        )
    return record


_REASON_PATH = patches.annotation_path(explaining.REASON_ANNOTATION)


class GateWrites:
    """The gate removals of the gate workers, and the hold-off of pods whose removal failed."""

    def __init__(
        self,
        *,
        cluster: state.ClusterState,
        api: kube.KubeApi,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._cluster = cluster
        self._api = api
        self._clock = clock
        self._backoff: dict[str, tuple[float, float]] = {}
        """Pod key -> (monotonic time before which it is not offered, the last hold-off)."""

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

    async def remove(self, key: str, *, queue: str) -> tuple[bool, int | None]:
        """Remove our gate from pod ``key``, admitted to ``queue``: ``(sent, status)``.

        ``sent`` is False when no request was made (the pod is gone, or our gate is not its
        last: the assumption is dropped). ``status`` is None when the gate was removed; else
        the HTTP status of the refusal, 0 when the request got no answer, -1 when the removal
        failed otherwise. Every failure drops the assumption in the state (see the module
        docstring for which ones hold the pod off)."""
        pod = self._cluster.get_pod(key)
        patch = None if pod is None else build_gate_removal_patch(pod, queue=queue)
        if pod is None or patch is None:
            self._cluster.forget_ungate(key)
            return False, None
        try:
            await self._api.patch_pod(pod.namespace, pod.name, patch)
        except kube.ApiError as error:
            if error.status in NORMAL_STATUSES:
                self._backoff.pop(key, None)
                self._cluster.forget_ungate(key)
            else:
                delay = self._hold_off(key)
                logger.warning(
                    "Failed to remove gate from %s: %s (retrying in %gs)", key, error, delay
                )
                self._cluster.forget_ungate(key, wake=False)
            return True, error.status
        except Exception:
            # A worker must survive anything; the pod is decided again after its backoff.
            delay = self._hold_off(key)
            logger.exception("Failed to remove gate from %s (retrying in %gs)", key, delay)
            self._cluster.forget_ungate(key, wake=False)
            return True, -1
        if patch[-1]["path"] == _REASON_PATH:
            # The explanation went with the gate: nothing is left to clear.
            self._cluster.swap_explanation(key, "")
        self._backoff.pop(key, None)
        return True, None


# -- queues at start-up -------------------------------------------------------------------------


async def ensure_queues(api: kube.KubeApi, *, default_queue: str) -> None:
    """Create ``root`` (not reclaimable) and the default queue (reclaimable) when absent.

    409 means the queue exists: nothing to do. Other failures are retried, as Volcano's
    scheduler cache retries 60 times at 1 s.
    """
    for name, reclaimable in ((objects.ROOT_QUEUE, False), (default_queue, True)):
        for _attempt in range(60):
            try:
                await api.create_queue(bodies.queue_manifest(name, reclaimable=reclaimable))
            except kube.ApiError as error:
                if error.status == 409:
                    break
                logger.warning("Creating queue %s failed (%s); retrying", name, error)
                await asyncio.sleep(1)
                continue
            break


# -- the cycle's writes -------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Limits:
    """How much a :class:`Writer` does at once, and how long reclaim leaves a victim alone
    after its eviction was refused (``settings.OperatorSettings`` says why each default is
    what it is)."""

    status_writers: int
    """Writes of a batch in flight at once (below 1 means 1)."""
    event_writers: int
    """Events of explanations in flight at once (below 1 means 1)."""
    eviction_retry: float
    """Seconds, when a refused eviction's answer names no time to wait."""


class Writer:
    """The admission cycle's writes: one batch (``planning.Writes``) at a time, in the
    background, so slow writes never delay the next admission.

    Each write of a batch is about one object and independent of the others: up to
    ``status_writers`` are in flight at once; the evictions follow, one after the other. The
    Event of an explanation follows its annotation in a lane of its own (``event_writers`` in
    flight), oldest first, so Events never hold up the annotations (the record) of the next
    batch.
    """

    def __init__(
        self,
        *,
        cluster: state.ClusterState,
        api: kube.KubeApi,
        metrics_: metrics.Metrics | None,
        limits: Limits,
        wake: Callable[[], None],
        clock: Callable[[], float],
        wall_clock: Callable[[], float],
        native_pod_groups: bool = False,
    ) -> None:
        self._cluster = cluster
        self._api = api
        self._metrics = metrics_
        self._status_writers = max(1, limits.status_writers)
        self._event_writers = max(1, limits.event_writers)
        self._eviction_retry = limits.eviction_retry
        self._wake = wake
        self._clock = clock
        self._wall_clock = wall_clock
        self._batch: asyncio.Task[None] | None = None
        self._event_lane: asyncio.Task[None] | None = None
        self._pod_events: dict[str, explaining.Explanation] = {}
        """Pod key -> the explanation whose Event is still to be sent, oldest first."""
        self._noticed: set[str] = set()
        """``explaining.notice_token`` of each pod outside queue admission told so (or being
        told); forgotten once the pod is no longer in the view's ``outside``."""
        self._evicting: set[str] = set()
        self._refused: dict[str, float] = {}
        """Victim key -> monotonic time until which reclaim may not choose it (a 429)."""
        self._told: dict[str, conditions.Readiness] = {}
        """Queue -> the readiness last announced (event and log): a write planned again while
        the watch lags behind the last one is not announced twice."""
        self._told_groups: dict[str, tuple[str, str]] = {}
        """PodGroup key -> the reason and message of its last Event (the same reason)."""
        self._creating: set[str] = set()
        """Generated PodGroups created, being created, or found not to be the operator's to
        create, until the view shows them (or no pod waits for them any more)."""
        self._creation_failures: dict[str, str] = {}
        self._resizing: dict[str, int] = {}
        """Generated group key -> the ``minMember`` being written into it, until the view
        shows it (or the write fails)."""
        """Generated group key -> the failure its workload was last told of (status, reason)."""
        self._unplaced_told: set[str] = set()
        """The uids of the gangs told unplaced (``workload_groups.plan_unplaced_gangs``),
        while they stay so."""
        self._native: dict[str, tuple[str, int]] | None = {} if native_pod_groups else None
        """With ``--native-pod-groups``: Volcano PodGroup key -> its uid and the minimum of
        its native PodGroup, for each native one that exists or is being written (forgotten
        when a write fails, or the Volcano group leaves the view)."""

    @property
    def idle(self) -> bool:
        """No batch is being written: the next one may be planned."""
        return self._batch is None or self._batch.done()

    def written(self) -> planning.Written:
        """What the next plan must respect of the batches written so far."""
        return planning.Written(
            noticed=frozenset(self._noticed),
            evicting=frozenset(self._evicting),
            refused=frozenset(key for key, until in self._refused.items() if until > self._clock()),
            creating=frozenset(self._creating),
            resizing=dict(self._resizing),
            native=None if self._native is None else dict(self._native),
            unplaced_told=frozenset(self._unplaced_told),
        )

    def protected(self) -> frozenset[str]:
        """The victims whose eviction was refused and whose retry time has not come (the rest
        are forgotten): reclaim must choose others meanwhile."""
        now = self._clock()
        self._refused = {key: until for key, until in self._refused.items() if until > now}
        return frozenset(self._refused)

    def stamp(self) -> str:
        """Now, as the timestamps of the operator's writes show it (RFC 3339)."""
        return bodies.timestamp(self._wall_clock())

    def now(self) -> datetime.datetime:
        """Now, by the same clock as :meth:`stamp`."""
        return datetime.datetime.fromtimestamp(self._wall_clock(), tz=datetime.UTC)

    def submit(self, writes: planning.Writes, *, view: state.StateView) -> None:
        """Write ``writes`` in the background (only when :attr:`idle`); ``view`` is the one
        the batch was planned over (the pods outside queue admission it still shows)."""
        assert self.idle, "a batch is still being written"
        present = {explaining.notice_token(key, pod.uid) for key, pod in view.outside.items()}
        self._noticed &= present
        for key in [key for key in self._told_groups if key not in view.pod_groups]:
            del self._told_groups[key]
        self._creating -= view.pod_groups.keys()
        for key, count in list(self._resizing.items()):
            shown = view.pod_groups.get(key)
            if shown is None or shown.min_member == count:
                del self._resizing[key]
        self._resizing.update((resize.group, resize.min_member) for resize in writes.group_resizes)
        self._creating.update(creation.group for creation in writes.group_creations)
        self._unplaced_told &= writes.unplaced
        self._unplaced_told.update(event.uid for event in writes.unplaced_events)
        if self._native is not None:
            for key in [key for key in self._native if key not in view.pod_groups]:
                del self._native[key]
            for native in writes.native_groups:
                self._native[native.group] = (native.uid, native.min_member)
        if writes.notices:
            self._noticed.update(explaining.notice_token(n.key, n.uid) for n in writes.notices)
            logger.info(
                "%d pod(s) name a queue without opting in and run outside queue admission "
                "(told by an Event); the first: %s",
                len(writes.notices),
                writes.notices[0].reason,
            )
        self._batch = asyncio.create_task(self._write(writes), name="queuetree cycle writer")

    async def wait(self) -> None:
        """Wait until the batches submitted so far are written, Events included."""
        if self._batch is not None:
            await asyncio.shield(self._batch)
        if self._event_lane is not None:
            await asyncio.shield(self._event_lane)

    async def close(self) -> None:
        """Cancel what is still being written (leadership lost, shutdown)."""
        for task in (self._batch, self._event_lane):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _write(self, writes: planning.Writes) -> None:
        slots = asyncio.Semaphore(self._status_writers)

        async def bounded(write: Awaitable[None]) -> None:
            async with slots:
                await write

        async with asyncio.TaskGroup() as group:
            for write in writes.queues:
                group.create_task(bounded(self._queue_write(write)))
            events = {event.key: event for event in writes.group_events}
            for key, status in writes.pod_groups.items():
                group.create_task(bounded(self._pod_group_status(key, status, events.get(key))))
            for explanation in writes.explanations:
                group.create_task(bounded(self._explanation(explanation)))
            for notice in writes.notices:
                group.create_task(bounded(self._notice(notice)))
            for creation in writes.group_creations:
                group.create_task(bounded(self._create_group(creation)))
            for resize in writes.group_resizes:
                group.create_task(bounded(self._resize_group(resize)))
            for native in writes.native_groups:
                group.create_task(bounded(self._native_group(native)))
            for event in writes.unplaced_events:
                group.create_task(bounded(self._tell_group(event)))
        for eviction in writes.evictions:
            await self._eviction(eviction)

    # -- the PodGroups of workloads

    async def _create_group(self, creation: workload_groups.GroupCreation) -> None:
        """Create the PodGroup of a workload from its pod and its owner (``api.workloads``).

        Nothing is created when the pod is gone, its controller is not the owner the group's
        name is for (a pod that names a ``podgroup-`` group by hand: that group is its
        author's to create), or the owner is gone or is another object of the same name. A
        409 means the group exists. Any other failure is logged, and the creation planned
        again by a later cycle."""
        namespace, pod_name = creation.namespace, creation.pod.partition("/")[2]
        owner: workloads.Owner | None = None
        try:
            pod = await self._api.read(f"pods/{creation.pod}", paths.pod(namespace, pod_name))
            owner = workloads.controller_of(pod)
            if owner is None or workloads.group_name(owner) != creation.name:
                return
            present, owner_body = await self._read_owner(owner, namespace)
            if not present:
                return
            body = workloads.pod_group(pod=pod, owner=owner, owner_body=owner_body)
            await self._api.create_pod_group(namespace, body)
        except kube.ApiError as error:
            if error.status in (404, 409):
                return
            logger.warning("PodGroup %s of a workload not created: %s", creation.group, error)
            self._creating.discard(creation.group)
            if owner is not None:
                await self._tell_creation_failed(creation, owner, error)
            return
        self._creation_failures.pop(creation.group, None)
        logger.info("PodGroup %s created for %s %s", creation.group, owner.kind, owner.name)

    async def _tell_creation_failed(
        self, creation: workload_groups.GroupCreation, owner: workloads.Owner, error: kube.ApiError
    ) -> None:
        """A Warning Event on the workload whose PodGroup could not be created, once per
        distinct failure: its pods wait for the group, and ``kubectl describe`` of the
        workload is where its author looks."""
        said = f"{error.status} {error.reason}"
        if self._creation_failures.get(creation.group) == said:
            return
        self._creation_failures[creation.group] = said
        message = (
            f"queuetree could not create PodGroup {creation.name} for this {owner.kind}: "
            f"{error}; its pods wait, gated, for the group, which is tried again every cycle "
            "(check the operator's permissions and log)"
        )
        with contextlib.suppress(kube.ApiError):
            await self._api.create_event(
                creation.namespace,
                self._event(
                    kind=owner.kind,
                    api_version=owner.api_version,
                    namespace=creation.namespace,
                    name=owner.name,
                    uid=owner.uid,
                    event_type="Warning",
                    reason=GROUP_CREATION_FAILED,
                    message=message,
                ),
            )

    async def _resize_group(self, resize: workload_groups.GroupResize) -> None:
        """Give a generated PodGroup the ``minMember`` its workload declares now (and the
        ``minResources`` that go with it). A failure is logged, and the resize planned again
        by a later cycle."""
        target = f"podgroups/{resize.group}"
        patch = workloads.resize_patch(
            count=resize.min_member, problem=resize.problem, min_resources=resize.min_resources
        )
        try:
            await self._api.patch(target, paths.pod_group(resize.namespace, resize.name), patch)
        except kube.ApiError as error:
            if self._resizing.get(resize.group) == resize.min_member:
                del self._resizing[resize.group]
            if error.status != 404:
                logger.warning("PodGroup %s not resized: %s", resize.group, error)
            return
        logger.info(
            "PodGroup %s: minMember %d, as its workload declares", resize.group, resize.min_member
        )

    async def _native_group(self, native: workload_groups.NativeGroup) -> None:
        """Create the native PodGroup of a Volcano one (``api.native_groups``). A 409 means one
        exists: it is read, and kept when it is this group's (whatever minimum it says: its
        policy is immutable, and it cannot go while pods name it) or when no PodGroup owns it
        (a person made it); one of an earlier group of the same name is deleted, and created
        again by a later cycle once it has gone."""
        namespace, name = native.namespace, native.name
        target = f"{native_groups.RESOURCE}/{native.group}"
        path = native_groups.path(namespace, name)
        body = native_groups.pod_group(
            namespace=namespace, name=name, min_member=native.min_member, owner_uid=native.uid
        )
        done = False
        try:
            try:
                if native.exists:
                    await self._api.patch(
                        target, path, native_groups.min_count_patch(native.min_member)
                    )
                else:
                    await self._api.create(target, native_groups.collection(namespace), body)
                done = True
            except kube.ApiError as error:
                if error.status != 409 or native.exists:
                    raise
                found = await self._api.read(target, path)
                owner = native_groups.owner_uid(found)
                if not owner:
                    # Someone's own: the pods that name it are theirs to place; left alone.
                    logger.info("%s exists and no PodGroup owns it: left as it is", target)
                    done = True
                elif owner == native.uid:
                    have = native_groups.min_count(found)
                    if have is not None and have != native.min_member:
                        # minCount is mutable (v1.37); a basic policy cannot become a gang.
                        await self._api.patch(
                            target, path, native_groups.min_count_patch(native.min_member)
                        )
                    done = True
                else:  # an earlier group's of the same name
                    await self._api.delete(target, path)
        except kube.ApiError as error:
            logger.warning("%s not written: %s", target, error)
        if not done:
            if self._native is not None and self._native.get(native.group) == (
                native.uid,
                native.min_member,
            ):
                del self._native[native.group]
            return
        logger.info("%s says minCount %d", target, native.min_member)

    async def _read_owner(
        self, owner: workloads.Owner, namespace: str
    ) -> tuple[bool, Mapping[str, Any] | None]:
        """Whether the owner is there, and as the API server has it: None for a kind the
        operator does not read, or could not read (it is then sized by its pods alone). Not
        there: gone, or another object of the same name than the one the pod names."""
        path = owner.path(namespace)
        if path is None:
            return True, None
        target = f"{owner.workload_kind.plural}/{namespace}/{owner.name}"
        try:
            found = await self._api.read(target, path)
        except kube.ApiError as error:
            if error.status == 404:
                return False, None
            logger.warning(
                "%s %s/%s not read, sized by its pods: %s", owner.kind, namespace, owner.name, error
            )
            return True, None
        return bodies.metadata_of(found).get("uid") == owner.uid, found

    # -- queues and pod groups

    async def _queue_write(self, write: queue_status.QueueWrite) -> None:
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
            self._event(
                kind="Queue",
                api_version=bodies.VOLCANO_API_VERSION,
                namespace="",
                name=write.name,
                uid=write.uid,
                event_type=event_type,
                reason=reason,
                message=message,
            ),
        )

    async def _pod_group_status(
        self, key: str, status: Mapping[str, Any], event: queue_status.GroupEvent | None
    ) -> None:
        """Patch a PodGroup's status; then, when its admission condition changed (``event``),
        tell it once: an Event on the group (best effort), and a log line for a release."""
        namespace, _, name = key.partition("/")
        try:
            await self._api.patch_pod_group_status(namespace, name, bodies.status_patch(status))
        except kube.ApiError as error:
            if error.status != 404:
                logger.warning("PodGroup %s: status not written: %s", key, error)
            return
        if event is None:
            return
        told = (event.reason, event.message)
        if self._told_groups.get(key) == told:
            return  # planned again while the watch lagged behind the last write
        self._told_groups[key] = told
        await self._tell_group(event)

    async def _tell_group(self, event: queue_status.GroupEvent) -> None:
        """An Event on a PodGroup and on its workload (best effort); a Warning is logged."""
        namespace, _, name = event.key.partition("/")
        if event.type == "Warning":
            logger.info("PodGroup %s: %s", event.key, event.message)
        told_about = [
            objects.OwnerReference(bodies.VOLCANO_API_VERSION, "PodGroup", name, event.uid)
        ]
        if event.owner is not None:
            # The workload's own describe says why its pods wait, or that they may run.
            told_about.append(event.owner)
        for about in told_about:
            prefix = f"PodGroup {name}: " if about is event.owner else ""
            with contextlib.suppress(kube.ApiError):
                await self._api.create_event(
                    namespace,
                    self._event(
                        kind=about.kind,
                        api_version=about.api_version,
                        namespace=namespace,
                        name=about.name,
                        uid=about.uid,
                        event_type=event.type,
                        reason=event.reason,
                        message=prefix + event.message,
                    ),
                )

    # -- pods: explanations and notices

    async def _explanation(self, explanation: explaining.Explanation) -> None:
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
            await self._pod_event(explanation, "Normal", explaining.EVENT_REASON)
        except kube.ApiError as error:
            if error.status != 404:
                logger.warning("Pod %s: explanation event not sent: %s", explanation.key, error)
        finally:
            slots.release()

    async def _notice(self, notice: explaining.Explanation) -> None:
        try:
            await self._pod_event(
                notice,
                "Warning",
                explaining.OUTSIDE_EVENT_REASON,
                event_name=explaining.notice_event_name(notice),
            )
        except kube.ApiError as error:
            if error.status == 409:
                return
            if error.status != 404:
                # The next cycles try again (a 404: the namespace is gone, and the pod with it).
                self._noticed.discard(explaining.notice_token(notice.key, notice.uid))
                logger.warning("Pod %s: notice event not sent: %s", notice.key, error)

    # -- reclaim

    async def _eviction(self, eviction: reclaiming.Eviction) -> None:
        namespace, _, name = eviction.victim.partition("/")
        self._evicting.add(eviction.victim)
        try:
            await self._api.evict_pod(namespace, name)
        except kube.ApiError as error:
            if error.status == 429:
                await self._eviction_refused(eviction, error)
            elif error.status != 404:
                logger.warning("Eviction of %s failed: %s", eviction.victim, error)
            return
        finally:
            self._evicting.discard(eviction.victim)
        if self._metrics is not None:
            self._metrics.evictions.labels(reason=eviction.rule).inc()
        for told in (
            explaining.Explanation(
                eviction.victim, eviction.victim_message, uid=eviction.victim_uid
            ),
            explaining.Explanation(
                eviction.reclaimer, eviction.reclaimer_message, uid=eviction.reclaimer_uid
            ),
        ):
            if told.key:
                with contextlib.suppress(kube.ApiError):
                    await self._pod_event(told, eviction.event_type, eviction.event_reason)

    async def _eviction_refused(self, eviction: reclaiming.Eviction, error: kube.ApiError) -> None:
        retry = error.retry_after or self._eviction_retry
        self._refused[eviction.victim] = self._clock() + retry
        self._wake()
        refusal = error.message or error.reason or "429 Too Many Requests"
        logger.info(
            "Eviction of %s for %s refused: %s", eviction.victim, eviction.reclaimer, refusal
        )
        if self._metrics is not None:
            self._metrics.eviction_refusals.inc()
        if not eviction.reclaimer:
            return
        waiting = explaining.Explanation(
            eviction.reclaimer,
            reclaiming.refusal_message(eviction, refusal=refusal, retry_seconds=retry),
            uid=eviction.reclaimer_uid,
        )
        with contextlib.suppress(kube.ApiError):
            await self._pod_event(waiting, "Warning", "ReclaimBlocked")

    # -- events

    async def _pod_event(
        self,
        told: explaining.Explanation,
        event_type: str,
        reason: str,
        *,
        event_name: str = "",
    ) -> None:
        """An Event about pod ``told.key`` saying ``told.reason``; ``event_name``: see
        ``bodies.event``."""
        namespace, _, name = told.key.partition("/")
        await self._api.create_event(
            namespace,
            self._event(
                kind="Pod",
                api_version="v1",
                namespace=namespace,
                name=name,
                uid=told.uid,
                event_type=event_type,
                reason=reason,
                message=told.reason,
                event_name=event_name,
            ),
        )

    def _event(self, **about: str) -> dict[str, Any]:
        """A ``v1`` Event (``bodies.event``) from this operator, stamped now."""
        return bodies.event(
            **about, stamp=self.stamp(), event_namespace=EVENT_NAMESPACE, component=EVENT_COMPONENT
        )
