"""The pod informer: one cluster-wide LIST, then a WATCH, straight into the cluster state.

Pods are the one kind with thousands of objects and two or more events each (created, ungated,
bound, running). Kopf gives every object its own worker and runs its handler machinery
(causes, diffs, progress storage) per event, about 1.5 ms each; this informer parses the JSON
lines of the watch stream and calls :meth:`state.ClusterState.upsert_pod` directly, several
times faster. Queues, pod groups and nodes stay on kopf (``handlers``), which also owns the
process.

An event that differs from the previous one of the same pod only in its scheduling gates (the
event after each gate removal) is not parsed again: :class:`PodEvents` reuses the last parse
with the new gates.

Semantics, as client-go's reflector:

- LIST (``resourceVersion`` of the list), then :meth:`state.ClusterState.replace_pods`, which
  also drops pods deleted while nobody was watching; only then is the kind "listed";
- WATCH from that version with bookmarks; every event moves the version forward;
- the server ends the stream (``timeoutSeconds``) or drops it: WATCH again from the last version;
- 410 Gone (an ``ERROR`` event or status): LIST again;
- any other failure: wait ``backoff`` seconds, then LIST again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Any

import aiohttp

from queuetree.api import (
    bodies,
    calls,
    paths,
    pod_fast_path,
    pod_manifests,
    readers,
    watching,
)
from queuetree.core import objects
from queuetree.operator import state

logger = logging.getLogger(__name__)

WATCH_TIMEOUT_SECONDS = 300
"""How long the server keeps one watch open (a new one starts at once afterwards)."""


def parse(body: dict[str, Any]) -> objects.Pod | None:
    try:
        return pod_manifests.parse_pod(body)
    except readers.ManifestError as error:
        logger.warning("Pod ignored: %s", error)
        return None


def unreadable_note(body: dict[str, Any]) -> tuple[str, str] | None:
    """(uid, problems) of a pod that could not be parsed and carries our gate (it waits for
    queuetree, which must say why it never admits it), else None. The problems are read once
    more (this is rare)."""
    gates = bodies.spec_of(body).get("schedulingGates")
    if not isinstance(gates, list) or not any(
        isinstance(g, dict) and g.get("name") == objects.QUEUE_ALLOCATION_GATE for g in gates
    ):
        return None
    try:
        pod_manifests.parse_pod(body)
    except readers.ManifestError as error:
        uid = str(bodies.metadata_of(body).get("uid") or "")
        return uid, str(error)
    return None  # pragma: no cover - only called after a failed parse


@dataclasses.dataclass(frozen=True, slots=True)
class _Known:
    identity: int | None
    progress: int | None
    pod: objects.Pod


class PodEvents:
    """Applies pod watch events and listings to the state, parsing only what changed: an event
    that changes only what the cluster writes after creation (:func:`pod_fast_path.progress`)
    re-reads just that (``pod_manifests.reparse_progress``)."""

    def __init__(self, cluster: state.ClusterState) -> None:
        self._cluster = cluster
        self._known: dict[str, _Known] = {}

    def _pod(self, body: dict[str, Any]) -> objects.Pod | None:
        key = bodies.key_of(body)
        identity = pod_fast_path.identity(body)
        progress = pod_fast_path.progress(body)
        known = self._known.get(key)
        parsed: objects.Pod | None
        if known is not None and identity is not None and known.identity == identity:
            if progress is not None and known.progress == progress:
                return known.pod
            try:
                parsed = pod_manifests.reparse_progress(known.pod, body)
            except readers.ManifestError as error:
                logger.warning("Pod ignored: %s", error)
                parsed = None
        else:
            parsed = parse(body)
        if parsed is None:
            self._known.pop(key, None)
        else:
            self._known[key] = _Known(identity, progress, parsed)
        return parsed

    def replace(self, items: list[dict[str, Any]]) -> None:
        """A fresh listing: exactly these pods exist."""
        keys = {bodies.key_of(item) for item in items}
        for key in [key for key in self._known if key not in keys]:
            del self._known[key]
        pods: list[objects.Pod] = []
        notes: dict[str, tuple[str, str]] = {}
        for item in items:
            pod = self._pod(item)
            if pod is not None:
                pods.append(pod)
            elif (note := unreadable_note(item)) is not None:
                notes[bodies.key_of(item)] = note
        self._cluster.replace_pods(pods)
        self._cluster.replace_unreadable(notes)

    def apply(self, event: dict[str, Any], version: str) -> str:
        """Apply one watch event; return the resourceVersion to resume from.

        Raises ``watching.Expired`` on a 410 and ``watching.WatchError`` (a ValueError) on any
        other ERROR event.
        """
        kind, body = watching.read_event(event)
        new_version = bodies.resource_version_of(body, version)
        key = bodies.key_of(body)
        if kind == "DELETED":
            self._known.pop(key, None)
            self._cluster.delete_pod(key)
        elif kind in ("ADDED", "MODIFIED"):
            pod = self._pod(body)
            if pod is None:
                self._cluster.delete_pod(key)
                note = unreadable_note(body)
                if note is not None:
                    self._cluster.note_unreadable(key, uid=note[0], problem=note[1])
            else:
                self._cluster.upsert_pod(pod)
        return new_version


class PodInformer:
    """Keeps ``cluster``'s pods current; :meth:`run` until cancelled."""

    def __init__(self, *, cluster: state.ClusterState, api_client: Any, backoff: float = 1.0):
        self._events = PodEvents(cluster)
        self._list_pods = calls.lister(api_client, paths.all_pods())
        self._backoff = backoff

    async def run(self) -> None:
        while True:
            try:
                version = await self._list()
                while True:
                    version = await self._watch(version)
            except watching.Expired:
                logger.info("Pod watch expired; listing again")
            except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as error:
                logger.warning("Pod watch failed (%s); listing again", error)
                await asyncio.sleep(self._backoff)
            except Exception as error:
                # Kubernetes-asyncio's ApiException and anything else: never stop informing.
                logger.warning("Pod list failed (%s); retrying", error)
                await asyncio.sleep(self._backoff)

    async def _list(self) -> str:
        response = await self._list_pods()
        try:
            body = await response.read()
            status = response.status
        finally:
            response.release()
        if status == 410:
            raise watching.Expired()
        if status >= 400:
            raise ValueError(f"list pods: HTTP {status}")
        listing = bodies.decode(body)
        self._events.replace(listing.get("items") or [])
        return bodies.resource_version_of(listing)

    async def _watch(self, version: str) -> str:
        response = await self._list_pods(
            **watching.watch_options(version, timeout=WATCH_TIMEOUT_SECONDS)
        )
        try:
            if response.status == 410:
                raise watching.Expired()
            if response.status >= 400:
                raise ValueError(f"watch pods: HTTP {response.status}")
            async for line in response.content:
                if not line.strip():
                    continue
                event = bodies.decode(line)
                version = self._events.apply(event, version)
        finally:
            response.release()
        return version
