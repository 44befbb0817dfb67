"""Deletion protection of busy queues: the finalizer the operator holds while pods are charged.

Kubernetes keeps a PersistentVolumeClaim that a pod uses with a finalizer
(``kubernetes.io/pvc-protection``) that its controller removes once no pod uses it; queuetree
keeps a queue that pods are charged to the same way, with ``objects.QUEUE_IN_USE_FINALIZER``:

- **before** a pod's gate is removed (phase 3 of the cycle), the queue it is admitted to and
  every ancestor carry the finalizer: :meth:`Protector.guard` writes it where our view does not
  show it yet, and leaves out of this cycle the pods whose queues it could not protect (the
  queue is gone, or being deleted: the API server refuses a new finalizer then). So whatever a
  status shows, and however fast an admin deletes, a queue never goes while a pod it admitted
  may run: a deletion either comes first (nothing is admitted to a deleted queue) or finds the
  finalizer (the queue stays, Terminating, admits no new pods, and keeps counting its pods at
  every ancestor, ``core.conditions.QueueReason.TERMINATING`` saying why);
- **after** the admissions, :meth:`Protector.release` removes it from every queue whose figures
  count no pod any more (``allocated`` and ``reserved``, its subtree included, pods whose gate
  removal is in flight among them), deleted or not: an idle queue carries no finalizer, so it
  can be deleted while the operator is down, and uninstalling queuetree from an idle cluster
  leaves nothing behind.

Both run in the cycle's task, one after the other, and remember what they wrote until the watch
shows it (``_known``): a release and a later admission to the same queue can never cross.
A write whose outcome is unknown (no answer) counts as not carrying the finalizer: the next
admission writes it again first. Every patch tests the finalizer list it read
(``api.patches``), so another controller's finalizer is never dropped.

The way out when the operator cannot run is the one of every finalizer: remove it by hand
(``kubectl patch queue NAME --type=json -p '[{"op":"remove","path":"/metadata/finalizers"}]'``);
docs/concepts.md says when that is safe.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Iterable, Mapping

from queuetree.api import patches
from queuetree.core import decisions, objects
from queuetree.operator import kube, state

logger = logging.getLogger(__name__)

FINALIZER = objects.QUEUE_IN_USE_FINALIZER

RELEASES_PER_CYCLE = 100
"""Most finalizers one cycle removes (the rest follow in the next cycles): after a restart
over thousands of idle queues, the first cycles stay short."""


def chain_of(name: str, records: Mapping[str, state.QueueRecord]) -> list[str]:
    """``name`` and its ancestors that exist, up to root (a cycle or a missing parent ends
    the walk: those queues admit nothing anyway)."""
    chain: list[str] = []
    current = name
    while current and current in records and current not in chain:
        chain.append(current)
        current = records[current].queue.parent_name
    return chain


def idle_queues(
    records: Mapping[str, state.QueueRecord],
    figures: Mapping[str, decisions.QueueFigures],
    *,
    admitted: Iterable[str],
) -> list[str]:
    """The queues whose figures count no pod (allocated or reserved, subtree included), in
    name order, except those on the chain of a queue of ``admitted`` (this cycle's admissions,
    not in the figures yet). A queue without figures is never idle: nothing says so."""
    busy = {name for queue in admitted for name in chain_of(queue, records)}
    return [
        name
        for name in sorted(records)
        if name not in busy
        and (found := figures.get(name)) is not None
        and not found.allocated_pods
        and not found.reserved_pods
    ]


class Protector:
    """Holds :data:`FINALIZER` on the queues pods are charged to (see the module docstring)."""

    def __init__(self, *, api: kube.KubeApi) -> None:
        self._api = api
        self._known: dict[str, bool] = {}
        """Queue name -> whether it carries the finalizer after our last write, until the
        watch shows the same (then the record is the truth again)."""

    def carries(self, record: state.QueueRecord) -> bool:
        """Whether the queue of ``record`` carries the finalizer, our own writes included."""
        name = record.queue.name
        shown = FINALIZER in record.finalizers
        known = self._known.get(name)
        if known is None:
            return shown
        if known == shown:
            del self._known[name]
        return known

    async def guard(
        self, view: state.StateView, result: decisions.SessionResult
    ) -> decisions.SessionResult:
        """``result`` with only the admissions whose queue and ancestors carry the finalizer,
        after writing it where missing (concurrently, one write per queue)."""
        records = view.queue_records
        chains = {queue: chain_of(queue, records) for queue in set(result.admitted_to.values())}
        needed = sorted(
            {name for chain in chains.values() for name in chain}
            - {name for name in records if self.carries(records[name])}
        )
        if not needed:
            return result
        added = await asyncio.gather(*(self._add(records[name]) for name in needed))
        failed = {name for name, ok in zip(needed, added, strict=True) if not ok}
        if not failed:
            return result
        blocked = {queue for queue, chain in chains.items() if failed.intersection(chain)}
        kept = tuple(key for key in result.ungate if result.admitted_to.get(key) not in blocked)
        logger.info(
            "%d admitted pods wait for the next cycle: queues %s could not be protected",
            len(result.ungate) - len(kept),
            ", ".join(sorted(failed)),
        )
        return dataclasses.replace(result, ungate=kept)

    async def release(self, view: state.StateView, result: decisions.SessionResult) -> None:
        """Remove the finalizer from the queues no pod is charged to (:func:`idle_queues`,
        ``result``'s admissions excluded), at most :data:`RELEASES_PER_CYCLE`."""
        records = view.queue_records
        idle = [
            records[name]
            for name in idle_queues(records, result.queues, admitted=result.admitted_to.values())
            if self.carries(records[name])
        ][:RELEASES_PER_CYCLE]
        if idle:
            await asyncio.gather(*(self._remove(record) for record in idle))

    async def _add(self, record: state.QueueRecord) -> bool:
        name = record.queue.name
        if record.queue.deleting:
            return False  # the API server refuses new finalizers on an object being deleted
        patch = patches.add_finalizer(
            record.finalizers, finalizer=FINALIZER, resource_version=record.resource_version
        )
        try:
            await self._api.patch_queue_json(name, patch)
        except kube.ApiError as error:
            # 404: gone; 409/422: changed since we read it (the next cycle reads it again).
            log = logger.info if error.status in (404, 409, 422) else logger.warning
            log("Queue %s: cannot add finalizer %s: %s", name, FINALIZER, error)
            self._known.pop(name, None)
            return False
        self._known[name] = True
        return True

    async def _remove(self, record: state.QueueRecord) -> None:
        name = record.queue.name
        patch = patches.remove_finalizer(record.finalizers, finalizer=FINALIZER)
        # Whatever the answer, count the queue as unprotected from now on: the next admission
        # to it writes the finalizer first (a removal that did land must never be trusted
        # away).
        self._known[name] = False
        try:
            await self._api.patch_queue_json(name, patch)
        except kube.ApiError as error:
            log = logger.info if error.status in (404, 409, 422) else logger.warning
            log("Queue %s: cannot remove finalizer %s: %s", name, FINALIZER, error)
            if error.status in (404, 409, 422):
                # Refused: nothing was written, the watch will show what is there.
                self._known.pop(name, None)
            return
        logger.info("Queue %s: no pod is charged to it; finalizer %s removed", name, FINALIZER)
