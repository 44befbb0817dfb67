"""The operator's writes to the Kubernetes API: a small protocol, its client, its errors.

Every write the operator makes goes through :class:`KubeApi` (reads come from kopf's watches,
never from here): pod gate removals (JSON patch), pod annotations, evictions, queue creation,
queue status and spec patches, the finalizer of busy queues, and events. :class:`AsyncKube`
implements it on the configuration, credentials and connection pool of a kubernetes-asyncio
client, with a client-side rate limit (QPS and burst, like client-go's token bucket), without
reading responses into models, which the operator never reads. Tests use a fake that records
the calls.

Errors: :class:`ApiError` carries the HTTP status and reason of a refused request; status 0
means the request never got an answer (connection refused, timeout). Callers decide which
statuses are normal outcomes (a gate removal answered 404 or 422 is, see ``gating``).
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Protocol, TypedDict

import aiohttp
import yarl

from queuetree.api import bodies, paths

JsonPatch = Sequence[Mapping[str, Any]]
ErrorFn = Callable[[str, int], None]
"""Called with (verb, HTTP status) for every refused request; status 0 for no answer."""


class ApiError(Exception):
    """A request the API server refused (``status`` >= 400) or never answered (``status`` 0)."""

    def __init__(
        self,
        *,
        verb: str,
        target: str,
        status: int,
        reason: str,
        message: str = "",
        retry_after: float | None = None,
    ) -> None:
        self.verb = verb
        """What was asked: ``patch``, ``annotate``, ``evict``, ``create`` (a client method's
        verb, also the label of the error metric)."""
        self.target = target
        """What it was about: ``pods/NAMESPACE/NAME``, ``queues/NAME/status``, ..."""
        self.status = status
        """The HTTP status of the refusal; 0 when the request got no answer."""
        self.reason = reason
        """The ``Status`` reason (``NotFound``, ``TooManyRequests``); without an answer, the
        name of the client's error."""
        self.message = message
        self.retry_after = retry_after
        """Seconds the server asked the client to wait (``Status.details.retryAfterSeconds``,
        else the ``Retry-After`` header); None when it named none, or zero."""
        super().__init__(f"{verb} {target}: {status} {reason}: {message}".rstrip(": "))


class KubeApi(Protocol):
    """The operator's writes. Every method raises :class:`ApiError` when refused."""

    async def patch_pod(self, namespace: str, name: str, patch: JsonPatch) -> None:
        """A JSON patch (RFC 6902) of a pod."""

    async def annotate_pod(
        self, namespace: str, name: str, annotations: Mapping[str, str | None]
    ) -> None:
        """A merge patch of a pod's annotations (None removes one)."""

    async def evict_pod(self, namespace: str, name: str) -> None:
        """An Eviction (``policy/v1``): honours PodDisruptionBudgets, answers 429 when blocked."""

    async def create_queue(self, body: Mapping[str, Any]) -> None: ...

    async def patch_queue(self, name: str, patch: Mapping[str, Any]) -> None:
        """A merge patch of a queue's metadata or spec."""

    async def patch_queue_json(self, name: str, patch: JsonPatch) -> None:
        """A JSON patch (RFC 6902) of a queue: its finalizer (``protecting``)."""

    async def patch_queue_status(self, name: str, patch: Mapping[str, Any]) -> None:
        """A merge patch of a queue's ``status`` subresource."""

    async def patch_pod_group_status(
        self, namespace: str, name: str, patch: Mapping[str, Any]
    ) -> None:
        """A merge patch of a PodGroup's ``status`` subresource."""

    async def create_event(self, namespace: str, body: Mapping[str, Any]) -> None: ...

    async def read(self, target: str, path: str) -> Mapping[str, Any]:
        """GET one object at ``path`` (a pod, a workload that owns pods); ``target`` names it
        in errors (404: it is gone)."""

    async def create_pod_group(self, namespace: str, body: Mapping[str, Any]) -> None:
        """A PodGroup the operator generates for a workload (409: it exists)."""

    async def create(self, target: str, path: str, body: Mapping[str, Any]) -> None:
        """POST ``body`` to the collection ``path`` (a native PodGroup; 409: it exists)."""

    async def delete(self, target: str, path: str) -> None:
        """DELETE the object at ``path`` (404: it is gone)."""

    async def patch(self, target: str, path: str, patch: Mapping[str, Any]) -> None:
        """A merge patch of the object at ``path`` (a PodGroup's spec: ``workload_groups``)."""


class RateLimiter:
    """A token bucket: ``qps`` tokens a second, at most ``burst`` saved (client-go's flowcontrol).

    ``qps`` <= 0 disables the limit. Waiters are served in arrival order.
    """

    def __init__(self, *, qps: float, burst: int, clock: Callable[[], float] = time.monotonic):
        self._qps = qps
        self._burst = max(1, burst)
        self._clock = clock
        self._tokens = float(self._burst)
        self._stamp = clock()
        self._lock = asyncio.Lock()

    async def acquire(self) -> None:
        if self._qps <= 0:
            return
        async with self._lock:
            now = self._clock()
            self._tokens = min(self._burst, self._tokens + (now - self._stamp) * self._qps)
            self._stamp = now
            self._tokens -= 1
            if self._tokens < 0:
                # The lock is held while sleeping, so later callers queue behind this one.
                await asyncio.sleep(-self._tokens / self._qps)


REQUEST_TIMEOUT_SECONDS: Final = 70.0
"""How long one write may take before its connection is taken for dead: the API server gives up
on a request after 60 s (its ``--request-timeout``); without a limit a stalled connection would
hold its gate worker for good."""

_JSON: Final = "application/json"
METADATA_ONLY: Final = (
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1, application/json"
)
"""What the operator's pod PATCHes accept: the pod's metadata alone, else (a server that cannot
transform the answer) the whole pod. The operator reads no answer but a refusal's ``Status``,
which comes as itself either way; a gate removal's answer was the whole pod (for a small pod
4.8 KB, against 2.2 KB of metadata), which the API server encoded and the operator decrypted
and read, once per admitted pod."""
_JSON_PATCH: Final = "application/json-patch+json"
_MERGE_PATCH: Final = "application/merge-patch+json"


_METHODS: Final = {"patch": "PATCH", "create": "POST", "get": "GET", "delete": "DELETE"}
"""The HTTP method of each verb of the operator's writes."""


class AsyncKube:
    """:class:`KubeApi` over a kubernetes-asyncio ``ApiClient``: its configuration, credentials
    and connection pool, without its generated API methods.

    Requests go straight to the client's aiohttp session. Per request the generated layer
    (serialising the body through its model sanitiser and :mod:`json`, building parameters,
    headers and the URL anew) cost about a tenth of the operator's CPU in a burst of gate
    removals against a real API server (docs/operator.md, Benchmark). What the client does for
    every request is kept: its default headers (``User-Agent``), the credentials of
    ``configuration.auth_settings()`` read for each request (which runs the in-cluster token
    refresh hook, so a rotated service-account token is picked up), its proxy and TLS server
    name; the CA and client certificates are in the pool's SSL context. Responses are read and
    dropped (the operator never reads them), except a refusal's ``Status``.
    """

    def __init__(
        self,
        api_client: Any,
        *,
        limiter: RateLimiter,
        on_error: ErrorFn | None = None,
        timeout: float = REQUEST_TIMEOUT_SECONDS,
    ) -> None:
        self._client = api_client
        self._base = str(api_client.configuration.host).rstrip("/")
        self._limiter = limiter
        self._on_error: ErrorFn = on_error or (lambda verb, status: None)
        self._timeout = aiohttp.ClientTimeout(total=timeout)

    async def _send(
        self,
        verb: str,
        target: str,
        path: str,
        body: Any,
        content_type: str,
        *,
        accept: str = _JSON,
    ) -> bytes:
        """``verb`` (``patch`` or ``create``: PATCH or POST) ``body`` to ``path``; ``target``
        names the object in errors. Raises :class:`ApiError` when refused or unanswered."""
        method = _METHODS[verb]
        await self._limiter.acquire()
        client = self._client
        # The session is looked up per request: tune_client replaces it after construction.
        rest = client.rest_client
        headers = {**client.default_headers, "Accept": accept, "Content-Type": content_type}
        for setting in (await client.configuration.auth_settings()).values():
            if setting.get("in") == "header" and setting.get("value"):
                headers[setting["key"]] = setting["value"]
        try:
            async with rest.pool_manager.request(
                method,
                yarl.URL(self._base + path, encoded=True),
                data=None if body is None else bodies.encode(body),
                headers=headers,
                proxy=rest.proxy,
                proxy_headers=rest.proxy_headers,
                server_hostname=rest.server_hostname,
                timeout=self._timeout,
            ) as response:
                status = response.status
                answer: bytes = await response.read()
                retry_header = response.headers.get("Retry-After")
        except (aiohttp.ClientError, TimeoutError) as error:
            self._on_error(verb, 0)
            raise ApiError(verb=verb, target=target, status=0, reason=type(error).__name__) from (
                error
            )
        if status >= 400:
            self._on_error(verb, status)
            raise ApiError(
                verb=verb, target=target, status=status, **_refusal(answer, retry_header)
            )
        return answer

    async def patch_pod(self, namespace: str, name: str, patch: JsonPatch) -> None:
        await self._send("patch", *_pod(namespace, name), patch, _JSON_PATCH, accept=METADATA_ONLY)

    async def annotate_pod(
        self, namespace: str, name: str, annotations: Mapping[str, str | None]
    ) -> None:
        patch = bodies.annotations_patch(annotations)
        await self._send("patch", *_pod(namespace, name), patch, _MERGE_PATCH, accept=METADATA_ONLY)

    async def evict_pod(self, namespace: str, name: str) -> None:
        where = (f"pods/{namespace}/{name}/eviction", paths.pod_eviction(namespace, name))
        await self._send("create", *where, bodies.eviction(namespace, name), _JSON)

    async def create_queue(self, body: Mapping[str, Any]) -> None:
        await self._send("create", f"queues/{bodies.name_of(body)}", paths.queues(), body, _JSON)

    async def patch_queue(self, name: str, patch: Mapping[str, Any]) -> None:
        await self._send("patch", f"queues/{name}", paths.queue(name), patch, _MERGE_PATCH)

    async def patch_queue_json(self, name: str, patch: JsonPatch) -> None:
        await self._send("patch", f"queues/{name}", paths.queue(name), patch, _JSON_PATCH)

    async def patch_queue_status(self, name: str, patch: Mapping[str, Any]) -> None:
        where = (f"queues/{name}/status", paths.queue_status(name))
        await self._send("patch", *where, patch, _MERGE_PATCH)

    async def patch_pod_group_status(
        self, namespace: str, name: str, patch: Mapping[str, Any]
    ) -> None:
        where = (f"podgroups/{namespace}/{name}/status", paths.pod_group_status(namespace, name))
        await self._send("patch", *where, patch, _MERGE_PATCH)

    async def create_event(self, namespace: str, body: Mapping[str, Any]) -> None:
        await self._send("create", f"events/{namespace}", paths.events(namespace), body, _JSON)

    async def read(self, target: str, path: str) -> Mapping[str, Any]:
        answer = await self._send("get", target, path, None, _JSON)
        found = bodies.decode(answer)
        return found if isinstance(found, Mapping) else {}

    async def create_pod_group(self, namespace: str, body: Mapping[str, Any]) -> None:
        where = (f"podgroups/{namespace}/{bodies.name_of(body)}", paths.pod_groups(namespace))
        await self._send("create", *where, body, _JSON)

    async def create(self, target: str, path: str, body: Mapping[str, Any]) -> None:
        await self._send("create", target, path, body, _JSON, accept=METADATA_ONLY)

    async def delete(self, target: str, path: str) -> None:
        await self._send("delete", target, path, None, _JSON, accept=METADATA_ONLY)

    async def patch(self, target: str, path: str, patch: Mapping[str, Any]) -> None:
        await self._send("patch", target, path, patch, _MERGE_PATCH, accept=METADATA_ONLY)


def _pod(namespace: str, name: str) -> tuple[str, str]:
    """A pod's target (in errors and logs) and its path."""
    return f"pods/{namespace}/{name}", paths.pod(namespace, name)


def proxy_for(url: str) -> str | None:
    """The proxy the environment names for ``url`` (``HTTPS_PROXY``/``HTTP_PROXY`` unless
    ``NO_PROXY`` excludes the host), or None: the standard library's reading, as aiohttp's."""
    parts = urllib.parse.urlsplit(url)
    proxy = urllib.request.getproxies().get(parts.scheme)
    if not proxy or not parts.hostname or urllib.request.proxy_bypass(parts.hostname):
        return None
    return proxy


def tune_client(api_client: Any) -> None:
    """Stop ``api_client`` from reading the proxy environment on every request.

    kubernetes-asyncio opens its HTTP session with ``trust_env=True``, and aiohttp then looks
    the proxy up in a worker thread for each request, reading ``~/.netrc`` and the whole
    environment every time: about a fifth of the operator's CPU during a burst of gate
    removals. The environment is read once here instead (a proxy it names for the API server
    is set on the client), and the session is replaced by one that keeps the same connection
    pool but does not trust the environment. Call it before the client sends anything.
    """
    rest = api_client.rest_client
    old = rest.pool_manager
    if not old.trust_env:
        return
    if not rest.proxy:
        rest.proxy = proxy_for(api_client.configuration.host)
    connector = old.connector
    # detach(): the old session lets go of the pool without closing it; the new one owns it.
    old.detach()
    # The read buffer kubernetes-asyncio chose: a watch event can be as large as etcd's 1.5 MiB
    # request limit.
    rest.pool_manager = aiohttp.ClientSession(
        connector=connector, trust_env=False, read_bufsize=2**21
    )


class _Refusal(TypedDict):
    reason: str
    message: str
    retry_after: float | None


def _refusal(body: bytes, retry_header: str | None) -> _Refusal:
    """:func:`_status_reason` of a refusal's body, the wait from the ``Retry-After`` header
    when the body names none."""
    reason, message, retry_after = _status_reason(body)
    if retry_after is None:
        retry_after = _seconds(retry_header)
    return _Refusal(reason=reason, message=message, retry_after=retry_after)


def _status_reason(body: bytes) -> tuple[str, str, float | None]:
    """The ``reason``, ``message`` and ``details.retryAfterSeconds`` (None unless positive) of
    a ``Status`` body, or the raw text when it is not one."""
    try:
        status = json.loads(body)
    except ValueError:
        return "", body.decode("utf-8", "replace")[:200], None
    if not isinstance(status, dict):
        return "", "", None
    details = status.get("details")
    retry = _seconds(details.get("retryAfterSeconds")) if isinstance(details, dict) else None
    return str(status.get("reason", "")), str(status.get("message", "")), retry


def _seconds(value: object) -> float | None:
    """A positive number of seconds from a Status field or a Retry-After header, else None."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None  # an HTTP date: the servers queuetree talks to send seconds
    return seconds if 0 < seconds < 3600 else None
