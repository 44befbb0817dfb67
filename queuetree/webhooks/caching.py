"""Watch-backed caches of queues, namespaces and pod groups, for the review functions.

A review must never LIST the cluster: at hundreds of pod creations per second that would be
hundreds of LISTs per second against the API server. Each :class:`Informer` LISTs its resource
once, then WATCHes from the list's ``resourceVersion`` (with bookmarks, so a quiet resource
still advances it); when the API server answers ``410 Gone`` (the version was compacted away)
it LISTs again and replaces its contents. Connection errors are retried with a capped backoff,
keeping the last known contents.

:class:`ClusterCache` combines its informers (queues, namespaces, pod groups, nodes) into one
:class:`views.ClusterView`, rebuilt at most once per change (lazily, when a review asks), and
is ready once every informer has listed once (``/readyz``).
:meth:`ClusterCache.wait_for` lets a review that missed a queue or a namespace wait briefly
for the watch to deliver it; :meth:`ClusterCache.confirm_absent` first asks the API server
(one GET per missing queue) whether there is anything to wait for: a queue under a parent that
does not exist is refused in one round trip, not after the whole wait (issue 35: a chain of a
thousand queues, nine hundred of them refused, took a second a refusal).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar

from queuetree.api import bodies, calls, paths, watching
from queuetree.core import objects
from queuetree.webhooks import views

logger = logging.getLogger(__name__)

ListFn = Callable[..., Awaitable[Any]]
"""A kubernetes-asyncio ``list_*`` method (with its positional arguments bound)."""
LookupFn = Callable[[str], Awaitable[bool | None]]
"""One live read of a queue by name: True it exists, False the API server says it does not
(404), None no usable answer (refused, an error, no answer)."""
ResetFn = Callable[[list[Mapping[str, Any]]], None]
EventFn = Callable[[str, Mapping[str, Any]], None]
KeptT = TypeVar("KeptT")


class Forbidden(Exception):
    """The API server refused the LIST (HTTP 403): the service account lacks the permission."""


class Informer:
    """List then watch one resource, calling ``on_reset`` with every LIST and ``on_event``
    with every ADDED, MODIFIED or DELETED object, in order."""

    def __init__(
        self,
        *,
        name: str,
        list_fn: ListFn,
        on_reset: ResetFn,
        on_event: EventFn,
        watch_timeout: int = 300,
        max_backoff: float = 30.0,
        optional: bool = False,
    ) -> None:
        self.name = name
        self._list_fn = list_fn
        self._on_reset = on_reset
        self._on_event = on_event
        self.synced = asyncio.Event()
        """Set after the first successful LIST."""
        self.resource_version = ""
        self._watch_timeout = watch_timeout
        self._max_backoff = max_backoff
        self.optional = optional
        """When the LIST is forbidden, count as synced with nothing (and keep retrying slowly)
        instead of holding readiness back: for caches that only improve warnings."""

    async def run(self) -> None:
        """Run until cancelled."""
        backoff = 0.5
        while True:
            try:
                await self._list()
                backoff = 0.5
                while True:
                    await self._watch()
            except asyncio.CancelledError:
                raise
            except watching.Expired:
                logger.info("%s: watch expired at %s, listing again", self.name, self.rv_text)
            except Forbidden as exc:
                if not self.optional:
                    logger.warning("%s: %s; retrying in %.1fs", self.name, exc, backoff)
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, self._max_backoff)
                    continue
                if not self.synced.is_set():
                    logger.warning("%s: %s; going on without it", self.name, exc)
                    self._on_reset([])
                    self.synced.set()
                await asyncio.sleep(self._max_backoff)
            except Exception as exc:  # the cache keeps serving what it has; retry
                logger.warning(
                    "%s: %s: %s; retrying in %.1fs", self.name, type(exc).__name__, exc, backoff
                )
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self._max_backoff)

    @property
    def rv_text(self) -> str:
        return self.resource_version or "(none)"

    async def _list(self) -> None:
        response = await self._list_fn(_preload_content=False, _request_timeout=60)
        async with response:
            body = await response.read()
            if response.status == 403:
                raise Forbidden(f"list forbidden: {body[:200]!r}")
            if response.status != 200:
                raise RuntimeError(f"list: HTTP {response.status}: {body[:200]!r}")
            data = bodies.decode(body)
        items = data.get("items") or []
        self.resource_version = bodies.metadata_of(data).get("resourceVersion", "")
        self._on_reset([item for item in items if isinstance(item, dict)])
        self.synced.set()

    async def _watch(self) -> None:
        response = await self._list_fn(
            **watching.watch_options(self.resource_version, timeout=self._watch_timeout)
        )
        async with response:
            if response.status == 410:
                raise watching.Expired()
            if response.status != 200:
                raise RuntimeError(
                    f"watch: HTTP {response.status}: {(await response.read())[:200]!r}"
                )
            async for line in response.content:
                if line.strip():
                    # Every queue status write comes back here: orjson reads it in half the
                    # time, on the loop that answers reviews.
                    self._handle(bodies.decode(line))

    def _handle(self, event: Mapping[str, Any]) -> None:
        kind, obj = watching.read_event(event)
        version = bodies.metadata_of(obj).get("resourceVersion")
        if version:
            self.resource_version = version
        if kind in ("ADDED", "MODIFIED", "DELETED"):
            self._on_event(kind, obj)


LOOKUP_TIMEOUT = 2.0
"""Seconds a live read of one queue may take (a review's whole budget is the webhook's
``timeoutSeconds``, 10 s)."""


class ClusterCache:
    """Queues, namespace annotations and pod-group queues, kept current by watches."""

    def __init__(self) -> None:
        self._queues: dict[str, objects.Queue] = {}
        self._namespaces: dict[str, Mapping[str, str]] = {}
        self._pod_groups: dict[str, str] = {}
        self._gang_starts: dict[str, views.GangStart] = {}
        self._nodes: dict[str, frozenset[str]] = {}
        self._view: views.ClusterView | None = None
        self._changed = asyncio.Event()
        """Set (and replaced by a fresh event) at every change: what waiting reviews wait on."""
        self.informers: list[Informer] = []
        self.lookup_queue: LookupFn | None = None
        """The live read of :meth:`confirm_absent` (None: none, every miss waits)."""

    # -- reading -------------------------------------------------------------------------------

    def view(self) -> views.ClusterView:
        """The current view (rebuilt only after a change)."""
        if self._view is None:
            self._view = views.ClusterView.of(
                queues=self._queues.values(),
                namespaces=self._namespaces,
                pod_groups=self._pod_groups,
                node_resources=frozenset().union(*self._nodes.values()),
                gang_starts=self._gang_starts,
            )
        return self._view

    def ready(self) -> bool:
        return bool(self.informers) and all(i.synced.is_set() for i in self.informers)

    async def wait_for(
        self, *, queues: Iterable[str], namespaces: Iterable[str] = (), patience: float
    ) -> bool:
        """Wait up to ``patience`` seconds until every queue and namespace named is cached."""
        wanted_queues, wanted_namespaces = set(queues), set(namespaces)

        def present() -> bool:
            return wanted_queues <= self._queues.keys() and (
                wanted_namespaces <= self._namespaces.keys()
            )

        loop = asyncio.get_running_loop()
        deadline = loop.time() + patience
        while not present():
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)
        return True

    async def confirm_absent(self, *, queues: Iterable[str]) -> bool:
        """Whether the API server says that none of ``queues`` exists: one GET each (a GET of
        one object is a quorum read, so a queue created before the review began is seen). A
        queue that does exist (the cache lags), or a read without an answer, gives False: the
        caller waits for the watch as before."""
        lookup = self.lookup_queue
        missing = sorted(set(queues) - self._queues.keys())
        if lookup is None or not missing:
            return False
        found = await asyncio.gather(*(lookup(name) for name in missing))
        return all(exists is False for exists in found)

    # -- writing (from informers) --------------------------------------------------------------

    def reset_queues(self, items: list[Mapping[str, Any]]) -> None:
        self._queues = {}
        for item in items:
            self._put_queue(item)
        self._touch()

    def queue_event(self, kind: str, obj: Mapping[str, Any]) -> None:
        if kind == "DELETED":
            name = bodies.metadata_of(obj).get("name")
            self._queues.pop(str(name), None)
        else:
            self._put_queue(obj)
        self._touch()

    def _put_queue(self, obj: Mapping[str, Any]) -> None:
        queue = views.queue_from_manifest(obj)
        if queue is not None:
            self._queues[queue.name] = queue

    def reset_namespaces(self, items: list[Mapping[str, Any]]) -> None:
        self._namespaces = {}
        self._replay(items, self.namespace_event)

    def namespace_event(self, kind: str, obj: Mapping[str, Any]) -> None:
        self._apply(self._namespaces, kind, views.namespace_annotations(obj))

    def reset_pod_groups(self, items: list[Mapping[str, Any]]) -> None:
        self._pod_groups = {}
        self._gang_starts = {}
        self._replay(items, self.pod_group_event)

    def pod_group_event(self, kind: str, obj: Mapping[str, Any]) -> None:
        queue, start = views.pod_group_queue(obj), views.gang_start(obj)
        if (
            kind != "DELETED"
            and queue is not None
            and start is not None
            and self._pod_groups.get(queue[0]) == queue[1]
            and self._gang_starts.get(start[0]) == start[1]
        ):
            return  # status churns (counts, conditions); the view keeps queue and start only
        self._apply(self._pod_groups, kind, queue)
        self._apply(self._gang_starts, kind, start)

    def reset_nodes(self, items: list[Mapping[str, Any]]) -> None:
        self._nodes = {}
        self._replay(items, self.node_event)

    def node_event(self, kind: str, obj: Mapping[str, Any]) -> None:
        found = views.node_resource_names(obj)
        if found is not None and kind != "DELETED" and self._nodes.get(found[0]) == found[1]:
            return  # node status churns (heartbeats); the view only needs the names
        self._apply(self._nodes, kind, found)

    def _replay(self, items: list[Mapping[str, Any]], event: EventFn) -> None:
        """A LIST's ``items`` as ADDED events, into a table emptied by the caller."""
        for item in items:
            event("ADDED", item)
        self._touch()

    def _apply(self, table: dict[str, KeptT], kind: str, found: tuple[str, KeptT] | None) -> None:
        """An event's object, read as ``found`` (its key and what the view keeps of it; None:
        nothing to keep), into ``table``."""
        if found is None:
            return
        if kind == "DELETED":
            table.pop(found[0], None)
        else:
            table[found[0]] = found[1]
        self._touch()

    def _touch(self) -> None:
        self._view = None
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    # -- wiring --------------------------------------------------------------------------------

    def connect(self, api_client: Any, *, nodes: bool = True) -> list[Informer]:
        """Create the informers on a kubernetes-asyncio ``ApiClient``: queues, namespaces and
        pod groups, and nodes unless ``nodes`` is False."""

        async def lookup_queue(name: str) -> bool | None:
            try:
                response = await calls.call(
                    api_client, "GET", paths.queue(name), timeout=LOOKUP_TIMEOUT
                )
                async with response:
                    status = response.status
            except Exception as exc:  # the caller waits for the watch instead
                logger.info("queue %s: live read failed: %s: %s", name, type(exc).__name__, exc)
                return None
            if status == 404:
                return False
            if status != 200:
                logger.info("queue %s: live read answered HTTP %d", name, status)
                return None
            return True

        self.lookup_queue = lookup_queue
        self.informers = [
            Informer(
                name="queues",
                list_fn=calls.lister(api_client, paths.queues()),
                on_reset=self.reset_queues,
                on_event=self.queue_event,
            ),
            Informer(
                name="namespaces",
                list_fn=calls.lister(api_client, paths.namespaces()),
                on_reset=self.reset_namespaces,
                on_event=self.namespace_event,
            ),
            Informer(
                name="podgroups",
                list_fn=calls.lister(api_client, paths.all_pod_groups()),
                on_reset=self.reset_pod_groups,
                on_event=self.pod_group_event,
            ),
        ]
        if nodes:
            self.informers.append(
                Informer(
                    name="nodes",
                    list_fn=calls.lister(api_client, paths.nodes()),
                    on_reset=self.reset_nodes,
                    on_event=self.node_event,
                    # Nodes only feed a warning: without permission to list them, serve anyway.
                    optional=True,
                )
            )
        return self.informers
