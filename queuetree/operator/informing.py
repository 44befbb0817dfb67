"""The pod informer: one cluster-wide LIST, then a WATCH, straight into the cluster state.

Pods are the one kind with thousands of objects and two or more events each (created, ungated,
bound, running). Kopf gives every object its own worker and runs its handler machinery
(causes, diffs, progress storage) per event, about 1.5 ms each; this informer parses the JSON
lines of the watch stream and calls :meth:`state.ClusterState.upsert_pod` directly, several
times faster. Queues, pod groups and nodes stay on kopf (``handlers``), which also owns the
process.

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
import json
import logging
from typing import Any

import aiohttp

from queuetree.api import manifests
from queuetree.core import objects
from queuetree.operator import state

logger = logging.getLogger(__name__)

WATCH_TIMEOUT_SECONDS = 300
"""How long the server keeps one watch open (a new one starts at once afterwards)."""


class Expired(Exception):
    """The watch's resourceVersion is too old (410 Gone): list again."""


def parse(body: dict[str, Any]) -> objects.Pod | None:
    try:
        return manifests.parse_pod(body)
    except manifests.ManifestError as error:
        logger.warning("Pod ignored: %s", error)
        return None


def _key(body: dict[str, Any]) -> str:
    meta = body.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


class PodInformer:
    """Keeps ``cluster``'s pods current; :meth:`run` until cancelled."""

    def __init__(self, *, cluster: state.ClusterState, api_client: Any, backoff: float = 1.0):
        from kubernetes_asyncio import client

        self._cluster = cluster
        # Any: the generated stubs do not know ``_preload_content`` returns the raw response.
        self._core: Any = client.CoreV1Api(api_client)
        self._backoff = backoff

    async def run(self) -> None:
        while True:
            try:
                version = await self._list()
                while True:
                    version = await self._watch(version)
            except Expired:
                logger.info("Pod watch expired; listing again")
            except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as error:
                logger.warning("Pod watch failed (%s); listing again", error)
                await asyncio.sleep(self._backoff)
            except Exception as error:
                # Kubernetes-asyncio's ApiException and anything else: never stop informing.
                logger.warning("Pod list failed (%s); retrying", error)
                await asyncio.sleep(self._backoff)

    async def _list(self) -> str:
        response = await self._core.list_pod_for_all_namespaces(_preload_content=False)
        try:
            body = await response.read()
            status = response.status
        finally:
            response.release()
        if status == 410:
            raise Expired()
        if status >= 400:
            raise ValueError(f"list pods: HTTP {status}")
        listing = json.loads(body)
        pods = [pod for pod in (parse(item) for item in listing.get("items") or []) if pod]
        self._cluster.replace_pods(pods)
        return str(listing.get("metadata", {}).get("resourceVersion", ""))

    async def _watch(self, version: str) -> str:
        response = await self._core.list_pod_for_all_namespaces(
            watch=True,
            resource_version=version,
            allow_watch_bookmarks=True,
            timeout_seconds=WATCH_TIMEOUT_SECONDS,
            _preload_content=False,
            _request_timeout=WATCH_TIMEOUT_SECONDS + 30,
        )
        try:
            if response.status == 410:
                raise Expired()
            if response.status >= 400:
                raise ValueError(f"watch pods: HTTP {response.status}")
            async for line in response.content:
                if not line.strip():
                    continue
                event = json.loads(line)
                version = self._apply(event, version)
        finally:
            response.release()
        return version

    def _apply(self, event: dict[str, Any], version: str) -> str:
        kind = event.get("type")
        body = event.get("object") or {}
        if kind == "ERROR":
            if body.get("code") == 410:
                raise Expired()
            raise ValueError(f"watch pods: {body.get('message', body)}")
        new_version = str((body.get("metadata") or {}).get("resourceVersion") or version)
        if kind == "DELETED":
            self._cluster.delete_pod(_key(body))
        elif kind in ("ADDED", "MODIFIED"):
            pod = parse(body)
            if pod is None:
                self._cluster.delete_pod(_key(body))
            else:
                self._cluster.upsert_pod(pod)
        return new_version
