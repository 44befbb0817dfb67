"""Listening: the webhook's sockets, with every transport limit a hostile client could abuse.

aiohttp parses HTTP and runs the handlers; this module owns what happens before and around
that, because aiohttp's own sites have no header timeout, no connection cap and no TLS
handshake timeout, and a connection that never finishes its headers is kept for an hour:

- :class:`Listener` accepts connections itself (``loop.sock_accept``), at most
  ``max_connection_rate`` a second, and stops accepting while ``max_connections`` are open,
  TLS handshakes included (each TLS connection holds a read buffer, so the cap is a memory
  bound: :func:`bound_tls_buffers`); further clients wait in the kernel's
  backlog, as with Go's ``netutil.LimitListener``. Open connections are not closed to make room:
  a flood of new ones must not push out kube-apiserver's keep-alive connections.
- :class:`Guard` wraps aiohttp's protocol for one connection and enforces the timers of
  :class:`Limits`: the TLS handshake and then the first request's headers each within
  ``header_timeout``; a later request's headers within ``header_timeout`` of its first byte;
  a request answered within ``request_timeout`` of its first byte (the handler answers 408
  itself when the body is late; the guard's timer, a little later, is the backstop that aborts
  a connection whose answer cannot be written). Idle keep-alive connections are aiohttp's
  ``keepalive_timeout``.
- :class:`StatusErrors` makes aiohttp's own answers to unparsable requests ``metav1.Status``
  JSON instead of plain text.

Neighbours: ``server`` builds the app and starts listeners; ``reviewing`` bounds the body's
size and JSON cost, which ``queuetree review`` shares.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import enum
import logging
import socket
import ssl
from asyncio import sslproto
from collections.abc import AsyncIterator, Callable
from typing import Any, Final

from aiohttp import web

from queuetree.api import admission
from queuetree.webhooks import reviewing

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True, slots=True)
class Limits:
    """The transport limits of ``queuetree webhook`` (flags in ``queuetree.cli.webhook``).

    The header, idle and request timeouts are below kube-apiserver's webhook timeout
    (``timeoutSeconds``: 5 s for the pod webhooks, 10 s for queues): the API server never waits
    longer for an answer, so a request still unfinished by then is not kube-apiserver's, and
    holding it only spends memory. The keep-alive timeout is longer than the API server's own.
    """

    header_timeout: float = 3.0
    """``--http-header-timeout``, seconds: the TLS handshake, then the request headers (from
    the first byte of a request on a kept-alive connection). kube-apiserver sends its headers
    at once; a client that trickles them (slowloris) is cut off."""
    idle_timeout: float = 2.0
    """``--http-idle-timeout``, seconds: the longest silence while a request body arrives."""
    request_timeout: float = 4.0
    """``--http-request-timeout``, seconds: from the first byte of a request to its answer,
    the wait for a queue that reached the cache late (``--cache-wait``) included."""
    keepalive_timeout: float = 120.0
    """``--http-keepalive-timeout``, seconds: how long an idle keep-alive connection is kept.
    Longer than kube-apiserver's client keeps one (90 s, Go's idle connection timeout), so that
    the API server closes idle connections first: a server that closes first races the client,
    which may have just sent a review on that connection, and a review lost so fails a pod's
    creation (failurePolicy Fail; Go does not retry a POST)."""
    max_connection_rate: float = 100.0
    """``--max-connection-rate``: new connections accepted per second, in bursts of a tenth of
    that; more wait in the listen backlog. A TLS handshake is the dearest thing a client can
    make the server do before sending a byte of HTTP; kube-apiserver keeps its connections
    alive and opens a few at a time, while a client that reconnects for every request could
    otherwise keep the event loop busy with handshakes alone."""
    max_connections: int = 256
    """``--max-connections``: connections open at once, handshakes included; more wait in the
    listen backlog. A TLS connection costs about 60 KiB (its read buffer, bounded by
    :func:`bound_tls_buffers`, OpenSSL's and the parser's), so the default bounds them to
    about 15 MiB; kube-apiserver needs one per request in flight."""
    body: reviewing.BodyLimits = dataclasses.field(default_factory=reviewing.BodyLimits)
    """What a body may be: size and JSON cost (shared with ``queuetree review``)."""


DEFAULTS: Final = Limits()

TLS_READ_BUFFER: Final = 32 * 1024
"""Bytes asyncio's TLS transport reads at a time, and keeps as each connection's read buffer:
two TLS records of the largest size (16 KiB of plaintext each)."""


def bound_tls_buffers() -> None:
    """Give each TLS connection of this process a :data:`TLS_READ_BUFFER` read buffer.

    asyncio's TLS transport (``asyncio.sslproto.SSLProtocol``, Python 3.11 and later) gives
    every connection a read buffer of its class's ``max_size``, 256 KiB, filled with zeros
    when the connection is made, so all of it is resident: kube-apiserver opens a connection
    per admission call in flight, and at 64 of them the webhook held 18 MiB more, against
    3.7 MiB with this bound (docs/benchmarks.md). The buffer only has to hold what one read
    takes from the socket; a larger body takes more reads. ``queuetree webhook`` calls it
    once, before its event loop starts.
    """
    sslproto.SSLProtocol.max_size = TLS_READ_BUFFER


BACKSTOP_GRACE = 1.0
"""Seconds past the request deadline before the guard aborts the connection: the handler
answers 408 at the deadline; the abort only catches an answer that cannot be written."""

MAX_HEADERS = 32
"""Most request headers (aiohttp allows 128 of 8 KiB each): kube-apiserver sends about ten,
and a cap keeps a slow sender's buffered headers small."""

LISTEN_BACKLOG = 128


class _State(enum.Enum):
    HEADERS = "headers"
    HANDLING = "handling"
    IDLE = "idle"


def guard_of(request: web.BaseRequest) -> Guard | None:
    """The guard of a request's connection (None when a :class:`Listener` did not accept it,
    as in tests that run the app on aiohttp's test server)."""
    protocol = request.protocol
    return protocol.guard if isinstance(protocol, StatusErrors) else None


class Guard(asyncio.Protocol):
    """One connection's timers, wrapped around aiohttp's protocol (see the module docstring)."""

    def __init__(
        self, inner: asyncio.Protocol, *, limits: Limits, on_lost: Callable[[], None]
    ) -> None:
        self._inner = inner
        self._limits = limits
        self._on_lost = on_lost
        self._loop = asyncio.get_running_loop()
        self._timer: asyncio.TimerHandle | None = None
        self._state = _State.HEADERS
        self._transport: asyncio.Transport | None = None
        self.made = False
        self.started = self._loop.time()
        """Loop time the current request began (its first byte, or the connection)."""

    @property
    def deadline(self) -> float:
        """Loop time by which the current request must be answered."""
        return self.started + self._limits.request_timeout

    # -- asyncio.Protocol, forwarded to aiohttp ------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.made = True
        self._transport = transport
        self.started = self._loop.time()
        self._arm(self._limits.header_timeout)
        self._inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self._state is _State.IDLE:
            self._state = _State.HEADERS
            self.started = self._loop.time()
            self._arm(self._limits.header_timeout)
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel()
        self._on_lost()
        self._inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()

    # -- what the app tells the guard ----------------------------------------------------------

    def request_started(self) -> None:
        """The headers are complete and a handler runs: from now on the request deadline."""
        self._state = _State.HANDLING
        delay = self.deadline + BACKSTOP_GRACE - self._loop.time()
        self._arm(max(delay, 0.0))

    def request_finished(self) -> None:
        """The handler returned: the connection is idle (aiohttp's keep-alive timer runs).
        A pipelined request already buffered starts now: its deadline counts from here."""
        self._state = _State.IDLE
        self.started = self._loop.time()
        self._cancel()

    # -- timers --------------------------------------------------------------------------------

    def _arm(self, delay: float) -> None:
        self._cancel()
        self._timer = self._loop.call_later(delay, self._expire)

    def _cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expire(self) -> None:
        self._timer = None
        if self._transport is not None:
            logger.debug("closing a connection: %s took too long", self._state.value)
            # abort, not close: close would wait to flush what the client does not read.
            self._transport.abort()


class StatusErrors(web.RequestHandler):
    """aiohttp's protocol, whose own error answers (a request it cannot parse, headers too
    large) are ``metav1.Status`` JSON like every other error of the webhook. It also carries
    its connection's :class:`Guard`, for the handlers."""

    guard: Guard | None = None

    def handle_error(
        self,
        request: Any,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        # aiohttp's version logs and checks that nothing was sent yet; its plain-text answer
        # is replaced.
        plain = super().handle_error(request, status, exc, message)
        reason = "BadRequest" if 400 <= plain.status < 500 else "InternalError"
        detail = message or (plain.reason or "error")
        response = web.Response(
            status=plain.status,
            body=admission.status(
                plain.status, f"the request is not usable HTTP: {detail}", reason=reason
            ),
            content_type="application/json",
        )
        response.force_close()
        return response


class Listener:
    """Accepts connections on one socket for one aiohttp runner, within :class:`Limits`."""

    def __init__(
        self,
        runner: web.BaseRunner,
        sock: socket.socket,
        *,
        context: ssl.SSLContext | None,
        limits: Limits,
    ) -> None:
        assert runner.server is not None, "call runner.setup() first"
        self._manager = runner.server
        self._sock = sock
        self._context = context
        self._limits = limits
        self._open = 0
        self._room = asyncio.Event()
        self._room.set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._unstarted: set[socket.socket] = set()
        """Accepted connections whose task has not run yet: a task cancelled before its first
        step never runs its body, so :meth:`stop` closes these itself."""
        self._accepting: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        port: int = self._sock.getsockname()[1]
        return port

    @property
    def open_connections(self) -> int:
        """Connections accepted and not yet closed (TLS handshakes included)."""
        return self._open

    def start(self) -> None:
        self._accepting = asyncio.create_task(self._accept())

    async def stop(self) -> None:
        """Stop accepting and close the socket; open connections are the runner's to close."""
        if self._accepting is not None:
            self._accepting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._accepting
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for connection in self._unstarted:
            connection.close()
        self._unstarted.clear()
        self._sock.close()

    async def _accept(self) -> None:
        loop = asyncio.get_running_loop()
        rate = self._limits.max_connection_rate
        # A token bucket holding a tenth of a second's worth: a burst of handshakes is work the
        # event loop does back to back, and a full second's worth (100 at the default) would
        # hold every review waiting behind it for as long.
        burst = max(1.0, rate / 10)
        tokens, last = burst, loop.time()
        while True:
            await self._room.wait()
            now = loop.time()
            tokens, last = min(burst, tokens + (now - last) * rate), now
            if tokens < 1:
                await asyncio.sleep((1 - tokens) / rate)
                continue
            tokens -= 1
            try:
                connection, _ = await loop.sock_accept(self._sock)
            except OSError as exc:  # EMFILE and the like: keep serving what is open
                logger.warning("accepting a connection failed: %s", exc)
                await asyncio.sleep(0.1)
                continue
            self._taken()
            self._unstarted.add(connection)
            task = asyncio.create_task(self._start(connection))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _start(self, connection: socket.socket) -> None:
        self._unstarted.discard(connection)
        loop = asyncio.get_running_loop()
        protocol = StatusErrors(self._manager, loop=loop, **handler_options(self._limits))
        guard = Guard(protocol, limits=self._limits, on_lost=self._released)
        protocol.guard = guard
        try:
            await loop.connect_accepted_socket(
                lambda: guard,
                connection,
                ssl=self._context,
                ssl_handshake_timeout=self._limits.header_timeout if self._context else None,
            )
        except (OSError, TimeoutError) as exc:  # ssl.SSLError is an OSError
            logger.debug("a connection failed before HTTP: %s", exc)
            connection.close()
            if not guard.made:
                self._released()
        except asyncio.CancelledError:
            connection.close()
            if not guard.made:
                self._released()
            raise

    def _taken(self) -> None:
        self._open += 1
        if self._open >= self._limits.max_connections:
            self._room.clear()

    def _released(self) -> None:
        self._open -= 1
        if self._open < self._limits.max_connections:
            self._room.set()


def handler_options(limits: Limits) -> dict[str, Any]:
    """aiohttp ``RequestHandler`` options for these limits."""
    return {
        "keepalive_timeout": limits.keepalive_timeout,
        "max_headers": MAX_HEADERS,
        # Bodies are read as sent; any Content-Encoding is refused before reading (415), so
        # nothing is ever inflated (a 64 KiB gzip body can inflate to 64 MiB).
        "auto_decompress": False,
        # After an early answer (413, 415, 408) the connection is closed at once instead of
        # reading and dropping the rest of the body: kube-apiserver never sends such bodies,
        # and a hostile client must not make the server decrypt megabytes it refused. (A
        # client still sending may see a reset instead of the answer.)
        "lingering_time": 0.0,
        "access_log": None,
    }


def bind(host: str, port: int) -> socket.socket:
    """A listening socket; raises OSError (``EADDRINUSE``...) for the caller to report."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.create_server((host, port), family=family, backlog=LISTEN_BACKLOG)
    sock.setblocking(False)
    return sock


@contextlib.asynccontextmanager
async def listening(
    app: web.Application,
    *,
    sock: socket.socket,
    context: ssl.SSLContext | None,
    limits: Limits,
    shutdown_timeout: float = 5.0,
) -> AsyncIterator[int]:
    """Serve ``app`` on the listening ``sock`` (see :func:`bind`) within ``limits`` until the
    block ends, then close it; yields the bound port (useful with port 0)."""
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=shutdown_timeout)
    try:
        await runner.setup()
        listener = Listener(runner, sock, context=context, limits=limits)
        listener.start()
        try:
            yield listener.port
        finally:
            await listener.stop()
    finally:
        sock.close()
        await runner.cleanup()
