"""The admission webhook server: aiohttp over TLS, health, readiness and metrics.

The server only moves bytes: each review handler reads the body, calls
``reviewing.review`` (the same function ``queuetree review`` runs) and writes its answer. The
cluster comes from a :class:`ViewSource`: the watch-backed ``caching.ClusterCache`` in
production, a fixed view in tests and benchmarks.

Routes: ``POST /queues/validate``, ``/queues/mutate``, ``/pods/mutate``, ``/pods/validate``,
``/podgroups/mutate``, ``/podgroups/validate``;
``GET /healthz`` (the process answers), ``/readyz`` (the caches have synced and a certificate
is loaded), ``/metrics`` (Prometheus). Bodies above 3 MiB get 413 without being read.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import logging
import signal
import ssl
import time
from collections.abc import AsyncIterator, Iterable
from typing import Any, Protocol

from aiohttp import web

from queuetree.webhooks import caching, certificates, metrics, reviewing, views
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


BODY_READ_TIMEOUT = 10.0
"""Seconds to receive a request body (kube-apiserver's own webhook timeout is at most 30 s and
10 by default; a client that trickles a body must not hold a handler forever)."""

SOURCE = web.AppKey("source", ViewSource)
SETTINGS = web.AppKey("settings", settings_.ReviewSettings)
METRICS = web.AppKey("metrics", metrics.Metrics)
CACHE_WAIT = web.AppKey("cache_wait", float)
CERTIFICATE_LOADED = web.AppKey("certificate_loaded", asyncio.Event)
STOPPING = web.AppKey("stopping", asyncio.Event)


def build_app(
    *,
    source: ViewSource,
    settings: settings_.ReviewSettings,
    metrics_: metrics.Metrics | None = None,
    cache_wait: float = 1.0,
    certificate_loaded: asyncio.Event | None = None,
    stopping: asyncio.Event | None = None,
) -> web.Application:
    """The aiohttp application (no TLS here: that is the site's business)."""
    # aiohttp answers 413 as soon as a body passes the limit, without reading the rest.
    app = web.Application(client_max_size=reviewing.MAX_BODY_BYTES)
    app[SOURCE] = source
    app[SETTINGS] = settings
    app[METRICS] = metrics_ or metrics.Metrics()
    app[CACHE_WAIT] = cache_wait
    loaded = certificate_loaded or asyncio.Event()
    if certificate_loaded is None:
        loaded.set()
    app[CERTIFICATE_LOADED] = loaded
    app[STOPPING] = stopping or asyncio.Event()
    for path in reviewing.ENDPOINTS:
        app.router.add_post(path, handle_review)
    add_health_routes(app)
    return app


def add_health_routes(app: web.Application) -> None:
    app.router.add_get("/healthz", handle_healthz)
    app.router.add_get("/readyz", handle_readyz)
    app.router.add_get("/metrics", handle_metrics)


async def handle_review(request: web.Request) -> web.Response:
    """Parse -> pure review -> render; a review that missed a queue is retried once the cache
    has it (or after ``cache_wait``)."""
    started = time.perf_counter()
    app = request.app
    try:
        async with asyncio.timeout(BODY_READ_TIMEOUT):
            body = await request.read()
    except TimeoutError:
        answer = reviewing.bad_request(
            408,
            f"the request body did not arrive within {BODY_READ_TIMEOUT:g}s",
            reason="Timeout",
        )
        return web.Response(status=answer.status, body=answer.body, content_type="application/json")
    answer = reviewing.review(request.path, body, view=app[SOURCE].view(), settings=app[SETTINGS])
    if (answer.missing or answer.missing_namespaces) and await app[SOURCE].wait_for(
        queues=answer.missing, namespaces=answer.missing_namespaces, patience=app[CACHE_WAIT]
    ):
        answer = reviewing.review(
            request.path, body, view=app[SOURCE].view(), settings=app[SETTINGS]
        )
    app[METRICS].observe(request.path, answer.outcome, time.perf_counter() - started)
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
    """Loads the serving pair into one TLS context and keeps it current."""

    def __init__(self, config: ServerConfig, api_client: Any | None) -> None:
        self.context = certificates.server_context(config.tls_min_version)
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
            )

    async def refresh(self) -> bool:
        if self._files is not None:
            changed = self._files.refresh(self.context)
        else:
            assert self._secret is not None
            changed = await self._secret.refresh(self.context)
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
    """Run the webhook until ``stop`` is set (or SIGTERM/SIGINT when not given)."""
    from kubernetes_asyncio import client
    from kubernetes_asyncio import config as kube_config

    stop = stop or _stop_on_signals()
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
        )
        async with _background(
            [i.run() for i in cache.connect(api_client, nodes=config.watch_nodes)]
            + [keeper.keep_current(metrics_)]
            + ([_freeze_when_synced(cache)] if config.freeze_heap else [])
        ):
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            sites = [
                web.TCPSite(runner, config.bind_address, config.port, ssl_context=keeper.context)
            ]
            if config.metrics_port:
                health = web.Application()
                health[SOURCE], health[METRICS] = cache, metrics_
                health[CERTIFICATE_LOADED] = keeper.loaded
                health[STOPPING] = stopping
                add_health_routes(health)
                health_runner = web.AppRunner(health, access_log=None)
                await health_runner.setup()
                sites.append(web.TCPSite(health_runner, config.bind_address, config.metrics_port))
            for site in sites:
                await site.start()
            logger.info("serving on https://%s:%d", config.bind_address, config.port)
            try:
                await stop.wait()
                stopping.set()
                logger.info("stopping: not ready, serving %.1fs more", config.shutdown_delay)
                await asyncio.sleep(config.shutdown_delay)
            finally:
                await runner.cleanup()
                if config.metrics_port:
                    await health_runner.cleanup()


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
    """``queuetree webhook``: 0 after a clean stop, 2 when certificates cannot be loaded."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        asyncio.run(serve(config))
    except certificates.CertificateError as exc:
        logger.error("%s", exc)
        return 2
    except ssl.SSLError as exc:
        logger.error("TLS: %s", exc)
        return 2
    return 0
