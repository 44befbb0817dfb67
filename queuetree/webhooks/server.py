"""The admission webhook server: aiohttp over TLS, health, readiness and metrics.

The server only moves bytes: each review handler reads the body, calls
``reviewing.review`` (the same function ``queuetree review`` runs) and writes its answer. The
cluster comes from a :class:`ViewSource`: the watch-backed ``caching.ClusterCache`` in
production, a fixed view in tests and benchmarks.

Routes: ``POST /queues/validate``, ``/queues/mutate``, ``/pods/mutate``, ``/pods/validate``,
``/podgroups/mutate``, ``/podgroups/validate``, ``/namespaces/validate``;
``GET /healthz`` (the process answers), ``/readyz`` (the caches have synced and a certificate
is loaded), ``/metrics`` (Prometheus). Liveness has its own port, answered by a thread
(:class:`LivenessServer`), so a busy event loop never gets the pod restarted.

Transport limits (``listening.Limits``): the handler refuses any ``Content-Encoding`` (415),
an announced or streamed body above the size limit (413), a body with more JSON elements than
the cost bound (413, counted while it arrives), and a body that stalls or comes too late (408).
Every error is a ``metav1.Status`` JSON body (an unknown path, a wrong method, what aiohttp
itself refuses) or an AdmissionReview denial; never plain text, never an HTTP 500.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import gc
import http.server
import logging
import signal
import socket
import ssl
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any, Protocol

import aiohttp
from aiohttp import hdrs, web

from queuetree.api import calls, native_groups
from queuetree.webhooks import caching, certificates, listening, metrics, reviewing, views
from queuetree.webhooks import settings as settings_

logger = logging.getLogger(__name__)


class ViewSource(Protocol):
    """Where reviews get the cluster from."""

    def view(self) -> views.ClusterView: ...

    def ready(self) -> bool: ...

    async def wait_for(
        self, *, queues: Iterable[str], namespaces: Iterable[str], patience: float
    ) -> bool:
        """Wait up to ``patience`` seconds until all these are known; whether they are."""
        ...

    async def confirm_absent(self, *, queues: Iterable[str]) -> bool:
        """Whether none of these queues exists, as the API server says now (nothing to wait
        for); False when unsure."""
        ...


@dataclasses.dataclass(slots=True)
class StaticSource:
    """A fixed view, always ready (tests, benchmarks, ``queuetree review``)."""

    fixed: views.ClusterView = dataclasses.field(default_factory=views.ClusterView)

    def view(self) -> views.ClusterView:
        return self.fixed

    def ready(self) -> bool:
        return True

    async def wait_for(
        self, *, queues: Iterable[str], namespaces: Iterable[str], patience: float
    ) -> bool:
        return set(queues) <= self.fixed.tree.queues.keys() and set(namespaces) <= (
            self.fixed.namespaces.keys()
        )

    async def confirm_absent(self, *, queues: Iterable[str]) -> bool:
        return not set(queues) & self.fixed.tree.queues.keys()


@dataclasses.dataclass(frozen=True, slots=True)
class ServerConfig:
    """Everything ``queuetree webhook`` was asked to do (its flags, see docs/webhook.md)."""

    settings: settings_.ReviewSettings = dataclasses.field(default_factory=settings_.ReviewSettings)
    """The review rules (``--max-queue-depth``, ``--enable-*``, ``--feature-gates``)."""
    port: int = 9443
    """HTTPS port; the Service maps 443 to it."""
    bind_address: str = "0.0.0.0"
    metrics_port: int = 0
    """A plain-HTTP port for /metrics, /healthz and /readyz; 0: only on the HTTPS port."""
    health_port: int = 0
    """A plain-HTTP port for the liveness probe (``/healthz``), answered by a thread; 0: none."""
    limits: listening.Limits = listening.DEFAULTS
    """The transport limits (``--http-*-timeout``, ``--max-connections``, body limits)."""
    tls_min_version: str = "VersionTLS12"
    """``VersionTLS12`` or ``VersionTLS13`` (Kubernetes' spelling of ``--tls-min-version``)."""
    cert_mode: str = "files"
    """``files``, ``self-managed`` or ``cert-manager`` (see ``certificates``)."""
    tls_cert_file: str | None = None
    tls_private_key_file: str | None = None
    cert_check_interval: float = 10.0
    """Seconds between checks for rotated files or a renewed Secret: short enough that a
    rotation is served well before the old certificate expires, rare enough to cost nothing."""
    secret_name: str = "queuetree-webhook-certs"
    service_name: str = "queuetree-webhook"
    """The Service kube-apiserver calls; the serving certificate's SANs are its DNS names."""
    cert_extra_sans: tuple[str, ...] = ()
    """Self-managed: more SANs (IP addresses or DNS names) for a webhook that kube-apiserver
    reaches by ``clientConfig.url`` rather than through the Service (a webhook run outside
    the cluster, as the sandbox on a real control plane does)."""
    namespace: str = "queuetree-system"
    """Namespace of the Secret and the Service."""
    mutating_webhook_config_name: str = "queuetree-mutating-webhook"
    validating_webhook_config_name: str = "queuetree-validating-webhook"
    kubeconfig: str | None = None
    """None: in-cluster configuration, else ``$KUBECONFIG`` or ``~/.kube/config``."""
    native_pod_groups: str = "false"
    """``--native-pod-groups``: ``true``, ``false``, or ``auto`` (asked of the API server at
    start-up); ``settings.native_pod_groups`` takes the answer."""
    watch_nodes: bool = False
    """Cache the names of the resources nodes offer, for the root-capability warning. Off by
    default: it needs nodes list/watch, which the shipped ClusterRole does not grant."""
    freeze_heap: bool = True
    """Freeze the heap once the caches are synced (:func:`freeze_heap`); off only when the
    server runs inside another program, such as a test process, whose heap is not its own."""
    shutdown_delay: float = 5.0
    """Seconds between SIGTERM and closing the listener, with /readyz failing meanwhile:
    kube-apiserver keeps calling a terminating pod until the endpoints controller drops it, and
    with failurePolicy Fail every such call would fail a create (``--shutdown-delay-duration``
    of kube-apiserver plays the same part)."""
    cache_wait: float = 1.0
    """Seconds a review waits for a queue or namespace missing from the cache (cache lag)."""


SOURCE = web.AppKey("source", ViewSource)
SETTINGS = web.AppKey("settings", settings_.ReviewSettings)
METRICS = web.AppKey("metrics", metrics.Metrics)
CACHE_WAIT = web.AppKey("cache_wait", float)
CERTIFICATE_LOADED = web.AppKey("certificate_loaded", asyncio.Event)
STOPPING = web.AppKey("stopping", asyncio.Event)
LIMITS = web.AppKey("limits", listening.Limits)


def build_app(
    *,
    source: ViewSource,
    settings: settings_.ReviewSettings,
    metrics_: metrics.Metrics | None = None,
    cache_wait: float = 1.0,
    certificate_loaded: asyncio.Event | None = None,
    stopping: asyncio.Event | None = None,
    limits: listening.Limits = listening.DEFAULTS,
    serve_metrics: bool = True,
) -> web.Application:
    """The aiohttp application (no TLS here: that is the listener's business). With
    ``serve_metrics`` False, /metrics is left to the metrics port: the admission port then
    serves reviews and probes only."""
    app = web.Application(middlewares=[answer_errors_as_status])
    app[SOURCE] = source
    app[SETTINGS] = settings
    app[METRICS] = metrics_ or metrics.Metrics()
    app[CACHE_WAIT] = cache_wait
    app[LIMITS] = limits
    loaded = certificate_loaded or asyncio.Event()
    if certificate_loaded is None:
        loaded.set()
    app[CERTIFICATE_LOADED] = loaded
    app[STOPPING] = stopping or asyncio.Event()
    for path in reviewing.ENDPOINTS:
        app.router.add_post(path, handle_review, expect_handler=handle_expect)
    add_health_routes(app, metrics_=serve_metrics)
    return app


def add_health_routes(app: web.Application, *, metrics_: bool = True) -> None:
    app.router.add_get("/healthz", handle_healthz)
    app.router.add_get("/readyz", handle_readyz)
    if metrics_:
        app.router.add_get("/metrics", handle_metrics)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def answer_errors_as_status(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Tell the connection's guard when a request is handled, and answer aiohttp's own errors
    (an unknown path, a wrong method) with a ``metav1.Status`` body instead of plain text."""
    guard = listening.guard_of(request)
    if guard is not None:
        guard.request_started()
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        answer = reviewing.bad_request(
            exc.status,
            f"{request.method} {request.path}: {exc.reason}",
            reason=exc.reason.replace(" ", ""),
        )
        return _response(answer)
    finally:
        if guard is not None:
            guard.request_finished()


async def handle_review(request: web.Request) -> web.StreamResponse:
    """Read (within the limits) -> pure review -> render; a review that missed a queue is
    retried once the cache has it (or after ``cache_wait``)."""
    started = time.perf_counter()
    app = request.app
    limits = app[LIMITS]
    read = await read_body(request, limits)
    if isinstance(read, reviewing.Answer):
        app[METRICS].observe(request.path, read.outcome, time.perf_counter() - started)
        if read.status in (413, 415):
            return await answer_then_drain(request, read)
        return _response(read)
    body, deadline = read
    view, rules = app[SOURCE].view, app[SETTINGS]
    answer = reviewing.review(request.path, body, view=view(), settings=rules, limits=limits.body)
    patience = min(app[CACHE_WAIT], deadline - asyncio.get_running_loop().time())
    if (answer.missing or answer.missing_namespaces) and patience > 0:
        outcome = await wait_for_missing(app[SOURCE], answer, patience=patience)
        app[METRICS].cache_misses.labels(outcome).inc()
        if outcome == "found":
            answer = reviewing.review(
                request.path, body, view=view(), settings=rules, limits=limits.body
            )
    app[METRICS].observe(request.path, answer.outcome, time.perf_counter() - started)
    return _response(answer)


async def wait_for_missing(source: ViewSource, answer: reviewing.Answer, *, patience: float) -> str:
    """What became of the queues and namespaces a review missed in the cache: ``absent`` (the
    API server says no missing queue exists: the answer stands at once), ``found`` (they
    reached the cache within ``patience``: review again) or ``timeout``."""
    if not answer.missing_namespaces and await source.confirm_absent(queues=answer.missing):
        return "absent"
    found = await source.wait_for(
        queues=answer.missing, namespaces=answer.missing_namespaces, patience=patience
    )
    return "found" if found else "timeout"


async def read_body(
    request: web.Request, limits: listening.Limits
) -> tuple[bytes, float] | reviewing.Answer:
    """The body and the request's deadline (loop time), or the error answer: 415 for any
    ``Content-Encoding`` (nothing is inflated), 413 for a body over the size limit (an
    announced length is refused unread) or over the JSON cost bound (counted as it arrives, so
    a hostile body is dropped after its first few hundred KiB), 408 for a body that stalls for
    ``idle_timeout`` or is not complete by the request deadline."""
    loop = asyncio.get_running_loop()
    guard = listening.guard_of(request)
    deadline = guard.deadline if guard is not None else loop.time() + limits.request_timeout
    refused = refuse_unread(request, limits)
    if refused is not None:
        return refused
    body_limits = limits.body
    chunks: list[bytes] = []
    size = elements = 0
    while True:
        due = min(deadline, loop.time() + limits.idle_timeout)
        try:
            async with asyncio.timeout_at(due):
                chunk = await request.content.readany()
        except TimeoutError:
            late = loop.time() >= deadline
            return reviewing.bad_request(
                408,
                f"the request was not complete within {limits.request_timeout:g}s "
                "(--http-request-timeout)"
                if late
                else f"the request body stalled for {limits.idle_timeout:g}s (--http-idle-timeout)",
                reason="Timeout",
            )
        if not chunk:
            return b"".join(chunks), deadline
        size += len(chunk)
        if size > body_limits.max_bytes:
            return reviewing.too_large(size, body_limits)
        elements += reviewing.count_elements(chunk)
        if elements > body_limits.max_elements:
            return reviewing.too_costly(body_limits)
        chunks.append(chunk)


def refuse_unread(request: web.Request, limits: listening.Limits) -> reviewing.Answer | None:
    """The refusal a request gets from its headers alone: 415 for any ``Content-Encoding``, 413
    for an announced length over the size limit; None when its body is worth reading."""
    encoding = request.headers.get(hdrs.CONTENT_ENCODING)
    if encoding is not None:
        return reviewing.bad_request(
            415,
            f"Content-Encoding {encoding[:32]!r}: request bodies must not be encoded "
            "(kube-apiserver sends none, and an encoded body would have to be inflated)",
            reason="UnsupportedMediaType",
        )
    announced = request.content_length
    if announced is not None and announced > limits.body.max_bytes:
        return reviewing.too_large(announced, limits.body)
    return None


async def handle_expect(request: web.Request) -> web.StreamResponse | None:
    """``Expect: 100-continue``: a request refused by its headers (:func:`refuse_unread`) gets
    its final answer instead of ``100 Continue``, so the client never sends the body (RFC 9110
    §10.1.1); any other goes on as aiohttp would (``100 Continue``, or 417 for another
    expectation)."""
    refused = refuse_unread(request, request.app[LIMITS])
    if refused is None:
        if request.version != aiohttp.HttpVersion11:
            return None
        expect = request.headers.get(hdrs.EXPECT, "")
        if expect.lower() != "100-continue":
            raise web.HTTPExpectationFailed(text=f"Unknown Expect: {expect[:32]}")
        await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        request.writer.output_size = 0
        return None
    request.app[METRICS].observe(request.path, refused.outcome, 0.0)
    return web.Response(
        status=refused.status,
        body=refused.body,
        content_type="application/json",
        headers={hdrs.CONNECTION: "close"},
    )


DRAIN_BYTES = 1024 * 1024
"""Most bytes of a refused body read (and dropped) after the answer (:func:`answer_then_drain`)."""
DRAIN_SECONDS = 1.0
"""Longest time spent reading them."""


async def answer_then_drain(request: web.Request, answer: reviewing.Answer) -> web.StreamResponse:
    """Send an early refusal (413, 415: the body left unread) at once, with ``Connection:
    close``, then read and drop what the client still sends, up to :data:`DRAIN_BYTES` or
    :data:`DRAIN_SECONDS`, before the connection closes.

    Closing a socket with unread bytes makes the kernel send a reset, and a client still
    sending its body then loses the answer unread: it saw its connection reset, not the 413
    that names the limit (issue 35). The server does not linger in general
    (``listening.handler_options``: a refused body must not cost it megabytes of reading and
    decryption); this bounded drain gives the client's kernel the answer first, at a bounded
    cost per refused request."""
    response = web.Response(
        status=answer.status,
        body=answer.body,
        content_type="application/json",
        headers={hdrs.CONNECTION: "close"},
    )
    await response.prepare(request)
    await response.write_eof()
    drained = 0
    with contextlib.suppress(TimeoutError, ConnectionError, OSError):
        async with asyncio.timeout(DRAIN_SECONDS):
            while drained < DRAIN_BYTES:
                chunk = await request.content.readany()
                if not chunk:
                    break
                drained += len(chunk)
    return response


def _response(answer: reviewing.Answer) -> web.Response:
    return web.Response(status=answer.status, body=answer.body, content_type="application/json")


async def handle_healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok\n")


async def handle_readyz(request: web.Request) -> web.Response:
    app = request.app
    problems = []
    if not app[SOURCE].ready():
        problems.append("caches not synced")
    if not app[CERTIFICATE_LOADED].is_set():
        problems.append("no serving certificate loaded")
    if app[STOPPING].is_set():
        problems.append("shutting down")
    app[METRICS].cache_ready.set(0 if problems and "caches not synced" in problems else 1)
    if problems:
        return web.Response(status=503, text="not ready: " + ", ".join(problems) + "\n")
    return web.Response(text="ok\n")


async def handle_metrics(request: web.Request) -> web.Response:
    app = request.app
    app[METRICS].cache_ready.set(1 if app[SOURCE].ready() else 0)
    return web.Response(body=app[METRICS].render(), headers={"Content-Type": metrics.CONTENT_TYPE})


# -- running -----------------------------------------------------------------------------------


class CertificateKeeper:
    """Serves the pair through one :class:`certificates.ServingContext` and keeps it current."""

    def __init__(self, config: ServerConfig, api_client: Any | None) -> None:
        self.serving = certificates.ServingContext(
            lambda: certificates.server_context(config.tls_min_version)
        )
        self.context = self.serving.context
        self.loaded = asyncio.Event()
        self._config = config
        self._files: certificates.FileSource | None = None
        self._secret: certificates.SecretSource | None = None
        if config.cert_mode == "files":
            if not config.tls_cert_file or not config.tls_private_key_file:
                raise certificates.CertificateError(
                    "--cert-mode=files needs --tls-cert-file and --tls-private-key-file"
                )
            self._files = certificates.FileSource(config.tls_cert_file, config.tls_private_key_file)
        else:
            self._secret = certificates.SecretSource(
                api_client,
                namespace=config.namespace,
                secret_name=config.secret_name,
                service_name=config.service_name,
                extra_sans=config.cert_extra_sans,
                manage=config.cert_mode == "self-managed",
                mutating_config=config.mutating_webhook_config_name,
                validating_config=config.validating_webhook_config_name,
                check_interval=config.cert_check_interval,
            )

    async def refresh(self) -> bool:
        if self._files is not None:
            changed = self._files.refresh(self.serving)
        else:
            assert self._secret is not None
            changed = await self._secret.refresh(self.serving)
        self.loaded.set()
        return changed

    async def first_load(self, stop: asyncio.Event) -> None:
        """Load the first pair. Files fail at once (a wrong path is a configuration error);
        a Secret is retried with backoff until it loads or ``stop`` is set, because the API
        server may be briefly unreachable or, in cert-manager mode, the Secret not issued yet."""
        backoff = 1.0
        while not stop.is_set():
            try:
                await self.refresh()
                return
            except Exception as exc:
                if self._files is not None:
                    raise
                logger.warning("certificate not loaded yet: %s; retrying in %.0fs", exc, backoff)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), backoff)
                backoff = min(backoff * 2, 30.0)

    async def keep_current(self, metrics_: metrics.Metrics) -> None:
        while True:
            await asyncio.sleep(self._config.cert_check_interval)
            try:
                if await self.refresh():
                    metrics_.certificate_loads.inc()
                    logger.info("serving certificate reloaded")
            except Exception as exc:  # keep serving the previous pair
                logger.warning("certificate refresh failed: %s", exc)


async def serve(config: ServerConfig, *, stop: asyncio.Event | None = None) -> None:
    """Run the webhook until ``stop`` is set (or SIGTERM/SIGINT when not given); raises
    OSError when a port cannot be bound."""

    stop = stop or _stop_on_signals()
    # Every port first: one in use is a configuration error to report before anything else.
    with contextlib.ExitStack() as bound:
        webhook_socket = bound.enter_context(listening.bind(config.bind_address, config.port))
        metrics_socket = (
            bound.enter_context(listening.bind(config.bind_address, config.metrics_port))
            if config.metrics_port
            else None
        )
        liveness = LivenessServer(config.bind_address, config.health_port)
        bound.callback(liveness.close)
        await _serve(config, stop, webhook_socket, metrics_socket, liveness)


async def _serve(
    config: ServerConfig,
    stop: asyncio.Event,
    webhook_socket: socket.socket,
    metrics_socket: socket.socket | None,
    liveness: LivenessServer,
) -> None:
    from kubernetes_asyncio import client
    from kubernetes_asyncio import config as kube_config

    # A private client configuration: the process-wide default stays untouched (tests run
    # several clients in one process).
    configuration = client.Configuration()
    if config.kubeconfig:
        await kube_config.load_kube_config(
            config_file=config.kubeconfig, client_configuration=configuration
        )
    else:
        try:
            kube_config.load_incluster_config(  # type: ignore[no-untyped-call]
                client_configuration=configuration
            )
        except kube_config.ConfigException:
            await kube_config.load_kube_config(client_configuration=configuration)
    async with client.ApiClient(configuration) as api_client:
        cache = caching.ClusterCache()
        keeper = CertificateKeeper(config, api_client)
        await keeper.first_load(stop)
        if stop.is_set():
            return
        native, said = native_groups.resolve(
            config.native_pod_groups,
            await _serves_native_groups(api_client) if config.native_pod_groups == "auto" else None,
        )
        logger.info("%s", said)
        config = dataclasses.replace(
            config, settings=dataclasses.replace(config.settings, native_pod_groups=native)
        )
        metrics_ = metrics.Metrics()
        metrics_.certificate_loads.inc()
        stopping = asyncio.Event()
        app = build_app(
            source=cache,
            settings=config.settings,
            metrics_=metrics_,
            cache_wait=config.cache_wait,
            certificate_loaded=keeper.loaded,
            stopping=stopping,
            limits=config.limits,
            # Metrics where docs/webhook.md says: on --metrics-port when there is one, and then
            # not on the port kube-apiserver (and anyone who reaches it) talks to.
            serve_metrics=not config.metrics_port,
        )
        async with (
            _background(
                [i.run() for i in cache.connect(api_client, nodes=config.watch_nodes)]
                + [keeper.keep_current(metrics_), liveness.beat()]
                + ([_freeze_when_synced(cache)] if config.freeze_heap else [])
            ),
            listening.listening(
                app, sock=webhook_socket, context=keeper.context, limits=config.limits
            ),
            _health_app(config, metrics_socket, cache, metrics_, keeper.loaded, stopping),
            liveness,
        ):
            logger.info("serving on https://%s:%d", config.bind_address, config.port)
            await stop.wait()
            stopping.set()
            logger.info("stopping: not ready, serving %.1fs more", config.shutdown_delay)
            await asyncio.sleep(config.shutdown_delay)


async def _serves_native_groups(api_client: Any) -> bool | None:
    """Whether the API server lists ``scheduling.k8s.io/v1beta1`` podgroups (None: it could
    not be asked)."""
    try:
        response = await calls.call(api_client, "GET", native_groups.DISCOVERY_PATH)
        async with response:
            status = response.status
            found = await response.json(content_type=None) if status == 200 else None
    except Exception as error:  # no answer: say so, do not guess
        logger.warning("discovery of %s failed: %s", native_groups.API_VERSION, error)
        return None
    if status == 404:
        return False
    if not isinstance(found, dict):
        # Any other refusal, as the generated client's ApiException was: not known.
        return None
    return native_groups.serves_pod_groups(found)


@contextlib.asynccontextmanager
async def _health_app(
    config: ServerConfig,
    sock: socket.socket | None,
    cache: caching.ClusterCache,
    metrics_: metrics.Metrics,
    loaded: asyncio.Event,
    stopping: asyncio.Event,
) -> AsyncIterator[None]:
    """/metrics, /healthz and /readyz on ``--metrics-port`` (plain HTTP), when one is given."""
    if sock is None:
        yield
        return
    health = web.Application(middlewares=[answer_errors_as_status])
    health[SOURCE], health[METRICS] = cache, metrics_
    health[CERTIFICATE_LOADED], health[STOPPING] = loaded, stopping
    add_health_routes(health)
    async with listening.listening(health, sock=sock, context=None, limits=config.limits):
        yield


LOOP_STALL_LIMIT = 60.0
"""Seconds without a heartbeat from the event loop after which liveness fails: a loop that
has not run a callback for a minute is stuck, not busy (the body limits keep each review's
work to milliseconds, and a busy loop still ticks between requests)."""


class LivenessServer:
    """``GET /healthz`` on ``--health-port``, answered by a thread of its own.

    The kubelet restarts a container whose liveness probe fails. A probe answered by the event
    loop fails whenever the loop is busy (a burst of reviews, a hostile client), turning load
    into restarts: this one answers from a thread, from the time of the loop's last heartbeat.
    """

    def __init__(self, host: str, port: int) -> None:
        """Bind ``host:port`` now (raises OSError when it cannot be); port 0 serves nothing."""
        self._server: http.server.ThreadingHTTPServer | None = None
        self._running = False
        self.last_beat = time.monotonic()
        if port:
            self._server = http.server.ThreadingHTTPServer((host, port), _liveness_handler(self))
            self._server.daemon_threads = True

    @property
    def port(self) -> int:
        assert self._server is not None
        port: int = self._server.server_address[1]
        return port

    async def beat(self) -> None:
        while True:
            self.last_beat = time.monotonic()
            await asyncio.sleep(1.0)

    def answer(self) -> tuple[int, bytes]:
        stalled = time.monotonic() - self.last_beat
        if stalled > LOOP_STALL_LIMIT:
            return 503, f"event loop stalled for {stalled:.0f}s\n".encode()
        return 200, b"ok\n"

    async def __aenter__(self) -> LivenessServer:
        if self._server is not None:
            thread = threading.Thread(
                target=self._server.serve_forever, name="liveness", daemon=True
            )
            thread.start()
            self._running = True
        return self

    async def __aexit__(self, *_: object) -> None:
        if self._running:
            assert self._server is not None
            await asyncio.to_thread(self._server.shutdown)
            self._running = False
        self.close()

    def close(self) -> None:
        if self._server is not None:
            self._server.server_close()


def _liveness_handler(owner: LivenessServer) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        timeout = 5.0  # a client that sends nothing cannot hold its thread

        def do_GET(self) -> None:
            status, body = owner.answer() if self.path == "/healthz" else (404, b"")
            self.send_response(status)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # a probe every few seconds would flood the log

    return Handler


def freeze_heap() -> None:
    """Collect once, then move every surviving object out of the garbage collector's sight.

    A full collection walks every tracked object: with the caches of a 1,000-queue tree that is
    about 20 ms, paid by whichever review happens to trigger it, which alone breaks a 20 ms p99.
    What exists once the caches are synced (modules, the first view) lives as long as the
    process, so it is frozen; objects made later are collected as usual, and frozen ones are
    still freed by reference counting when dropped.
    """
    gc.collect()
    gc.freeze()


async def _freeze_when_synced(cache: caching.ClusterCache) -> None:
    await asyncio.gather(*(informer.synced.wait() for informer in cache.informers))
    cache.view()  # build the first view before freezing it
    freeze_heap()


@contextlib.asynccontextmanager
async def _background(coroutines: list[Any]) -> AsyncIterator[None]:
    tasks = [asyncio.create_task(c) for c in coroutines]
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _stop_on_signals() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop


def main(config: ServerConfig) -> int:
    """``queuetree webhook``: 0 after a clean stop, 2 when certificates cannot be loaded or a
    port cannot be bound."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    listening.bound_tls_buffers()
    try:
        asyncio.run(serve(config))
    except certificates.CertificateError as exc:
        logger.error("%s", exc)
        return 2
    except ssl.SSLError as exc:
        logger.error("TLS: %s", exc)
        return 2
    except OSError as exc:
        if exc.errno not in (errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES):
            raise
        logger.error("%s", bind_problem(config, exc))
        return 2
    return 0


def bind_problem(config: ServerConfig, exc: OSError) -> str:
    """What to tell about an address that cannot be bound: the address, the flags that chose
    it, and the reason."""
    ports = f"--port={config.port}"
    if config.metrics_port:
        ports += f", --metrics-port={config.metrics_port}"
    if config.health_port:
        ports += f", --health-port={config.health_port}"
    return (
        f"cannot listen on {config.bind_address} ({ports}, --bind-address): "
        f"{exc.strerror or exc}; choose a free port or stop what uses it"
    )
