"""Transport limits: what a hostile or broken client gets from the real listener.

Each test runs the webhook app behind ``listening.listening`` (the code ``queuetree webhook``
serves with) on loopback and speaks raw HTTP to it, so what is checked is what a client sees:
connections closed, answers withheld, status codes and ``metav1.Status`` bodies.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import socket
import ssl
import threading
import time
import urllib.request
from asyncio import sslproto
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from controlplane.processes import free_port
from queuetree import cli
from queuetree.webhooks import certificates, listening, reviewing, server, settings
from tests.webhooks.builders import GATE, PODS, pod, review

POD_REVIEW = json.dumps(
    review("CREATE", pod(annotations={GATE: "true"}), resource=PODS, namespace="default")
).encode()


@contextlib.asynccontextmanager
async def serving(
    limits: listening.Limits, context: ssl.SSLContext | None = None
) -> AsyncIterator[int]:
    app = server.build_app(
        source=server.StaticSource(), settings=settings.ReviewSettings(), limits=limits
    )
    async with listening.listening(
        app, sock=listening.bind("127.0.0.1", 0), context=context, limits=limits
    ) as port:
        yield port


def request_bytes(
    path: str = "/pods/mutate", body: bytes = POD_REVIEW, *, headers: str = ""
) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{headers}"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


async def exchange(port: int, data: bytes, *, wait: float = 5.0) -> tuple[int, dict[str, Any]]:
    """Send ``data`` on a new connection; the status and decoded JSON body of the answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), wait)
        length = next(
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        body = await asyncio.wait_for(reader.readexactly(length), wait)
    finally:
        writer.close()
    return int(head.split()[1]), json.loads(body)


async def closed_within(reader: asyncio.StreamReader, seconds: float) -> bool:
    try:
        return await asyncio.wait_for(reader.read(1), seconds) == b""
    except TimeoutError:
        return False
    except ConnectionError:
        return True


@pytest.mark.parametrize(
    ("sent", "expected"),
    [
        pytest.param(b"", True, id="nothing-sent"),
        pytest.param(b"POST /pods/mutate HTTP/1.1\r\nHost: x\r\nX-Slow: ", True, id="half-headers"),
    ],
)
async def test_a_connection_that_never_finishes_its_headers_is_closed(
    sent: bytes, expected: bool
) -> None:
    async with serving(listening.Limits(header_timeout=0.3)) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(sent)
        closed = await closed_within(reader, 3.0)
        writer.close()
    assert closed is expected


async def test_a_tls_handshake_that_never_starts_is_closed() -> None:
    bundle = certificates.generate_bundle(service="s", namespace="n")
    serving_context = certificates.ServingContext(certificates.server_context)
    serving_context.load(bundle.serving)
    limits = listening.Limits(header_timeout=0.3)
    async with serving(limits, serving_context.context) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)  # no ClientHello
        closed = await closed_within(reader, 3.0)
        writer.close()
    assert closed is True


async def test_a_large_review_over_tls_is_read_through_the_bounded_buffer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``queuetree webhook`` reads TLS in :data:`listening.TLS_READ_BUFFER` chunks, not
    asyncio's 256 KiB: a review several times that size still arrives whole."""
    # Restored after the test: the bound is for the webhook's process, not the test run's.
    monkeypatch.setattr(sslproto.SSLProtocol, "max_size", sslproto.SSLProtocol.max_size)
    listening.bound_tls_buffers()
    bundle = certificates.generate_bundle(service="s", namespace="n")
    serving_context = certificates.ServingContext(certificates.server_context)
    serving_context.load(bundle.serving)
    client = ssl.create_default_context(cadata=bundle.ca.cert_pem.decode())
    client.check_hostname = False
    large = pod(annotations={GATE: "true", "example.com/notes": "x" * 200_000})
    body = json.dumps(review("CREATE", large, resource=PODS, namespace="default")).encode()
    async with serving(listening.Limits(), serving_context.context) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client)
        writer.write(request_bytes(body=body))
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        answer = json.loads(await asyncio.wait_for(reader.readexactly(length), 10))
        writer.close()
    assert sslproto.SSLProtocol.max_size == listening.TLS_READ_BUFFER < len(body)
    assert (int(head.split()[1]), answer["response"]["allowed"]) == (200, True)


async def test_a_kept_alive_connection_serves_several_requests() -> None:
    async with serving(listening.Limits(header_timeout=1.0)) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        statuses = []
        for _ in range(2):
            writer.write(request_bytes())
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
            length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            await reader.readexactly(length)
            statuses.append(int(head.split()[1]))
            await asyncio.sleep(1.2)  # longer than the header timeout, shorter than keep-alive
        writer.close()
    assert statuses == [200, 200]


async def test_pipelined_requests_each_get_their_own_deadline() -> None:
    limits = listening.Limits(request_timeout=2.0, header_timeout=5)
    async with serving(limits) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        # The first request takes 1.2 s of its 2; the second follows it at once and takes
        # 1.2 s: late for a deadline counted from the first request's start, in time for its
        # own. Each has 0.8 s to spare, more than a loaded machine adds to a sleep.
        writer.write(request_bytes()[:-1])
        await asyncio.sleep(1.2)
        writer.write(request_bytes()[-1:] + request_bytes()[:-1])
        await asyncio.sleep(1.2)
        writer.write(request_bytes()[-1:])
        statuses = []
        for _ in range(2):
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
            length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            await reader.readexactly(length)
            statuses.append(int(head.split()[1]))
        writer.close()
    assert statuses == [200, 200]


async def test_connections_beyond_the_cap_wait_until_one_closes() -> None:
    limits = listening.Limits(max_connections=2, header_timeout=30)
    async with serving(limits) as port:
        idle = [await asyncio.open_connection("127.0.0.1", port) for _ in range(2)]
        waiting = asyncio.create_task(exchange(port, request_bytes(), wait=10))
        done, _ = await asyncio.wait([waiting], timeout=0.5)
        answered_at_the_cap = bool(done)
        idle[0][1].close()
        status, _ = await waiting
        idle[1][1].close()
    assert (answered_at_the_cap, status) == (False, 200)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param(
            request_bytes(
                body=gzip.compress(b"\0" * (8 * 1024 * 1024)), headers="Content-Encoding: gzip\r\n"
            ),
            (
                415,
                "UnsupportedMediaType",
                "Content-Encoding 'gzip': request bodies must not be encoded (kube-apiserver "
                "sends none, and an encoded body would have to be inflated)",
            ),
            id="gzip-body",
        ),
        pytest.param(
            request_bytes(body=b"{}", headers="Content-Encoding: identity\r\n"),
            (
                415,
                "UnsupportedMediaType",
                "Content-Encoding 'identity': request bodies must not be encoded (kube-apiserver "
                "sends none, and an encoded body would have to be inflated)",
            ),
            id="even-identity",
        ),
        pytest.param(
            b"POST /pods/mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\n\r\n{",
            (
                413,
                "RequestEntityTooLarge",
                f"the request body has more than {reviewing.BodyLimits().max_bytes} bytes "
                "(99999999 read or announced), the limit (--max-request-body-bytes)",
            ),
            id="announced-too-large",
        ),
        pytest.param(
            # 50,002 '[' and 50,000 ',': the bound is passed only by the last bytes, so the
            # whole body is read and the answer cannot be lost to a reset.
            request_bytes(body=b"[" + b"[]," * 50_000 + b"[]]"),
            (
                413,
                "RequestEntityTooLarge",
                "the request body has more than 100000 JSON elements ('[', '{' and ',' "
                "characters), the limit (--max-json-elements)",
            ),
            id="too-many-json-elements",
        ),
        pytest.param(
            request_bytes("/nope"),
            (404, "NotFound", "POST /nope: Not Found"),
            id="unknown-path",
        ),
        pytest.param(
            b"GET /pods/mutate HTTP/1.1\r\nHost: x\r\n\r\n",
            (405, "MethodNotAllowed", "GET /pods/mutate: Method Not Allowed"),
            id="wrong-method",
        ),
        pytest.param(
            b"POST /pods/mutate HTTP/1.1\r\nHost: x\r\n" + b"X-A: b\r\n" * 100 + b"\r\n",
            (400, "BadRequest", "the request is not usable HTTP: Too many headers received"),
            id="too-many-headers",
        ),
        pytest.param(
            b"\x16\x03\x01 not http at all\r\n\r\n",
            (
                400,
                "BadRequest",
                "the request is not usable HTTP: Received HTTPS traffic on an HTTP port",
            ),
            id="tls-bytes-on-a-plain-port",
        ),
    ],
)
async def test_refused_requests_get_a_status_body(
    data: bytes, expected: tuple[int, str, str]
) -> None:
    async with serving(listening.Limits()) as port:
        status, body = await exchange(port, data)
    assert (status, body["kind"], body["reason"], body["message"]) == (
        expected[0],
        "Status",
        expected[1],
        expected[2],
    )


async def test_a_hostile_body_is_refused_after_its_first_few_hundred_kib(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """3 MB of ``[[],[],...]`` costs 0.3 s and 60 MiB to decode: the server counts while the
    body arrives and stops reading once the count passes the limit (then closes: the client,
    still sending, may see a reset instead of the 413)."""
    seen: list[int] = []
    counted = reviewing.count_elements

    def counting(chunk: bytes) -> int:
        seen.append(len(chunk))
        return counted(chunk)

    monkeypatch.setattr(reviewing, "count_elements", counting)
    body = b"[" + b"[]," * 1_000_000 + b"[]]"
    async with serving(listening.Limits()) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        answer = asyncio.create_task(reader.readline())
        writer.write(request_bytes(body=body)[: -len(body)])
        with contextlib.suppress(ConnectionError):
            for start in range(0, len(body), 65536):
                if answer.done():
                    break
                writer.write(body[start : start + 65536])
                await writer.drain()
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            await asyncio.wait_for(answer, 5)
        writer.close()
    assert (0 < sum(seen) < 1024 * 1024, len(body)) == (True, 3_000_004)


def blocking_exchange(port: int, data: bytes, *, then: bytes = b"") -> bytes:
    """What a plain blocking client reads: send ``data``, read an answer, send ``then`` (the
    body, when the answer was ``100 Continue``), read to the end (a reset ends it too)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(data)
        first = conn.recv(65536)
        if first.startswith(b"HTTP/1.1 100") and then:
            with contextlib.suppress(ConnectionError):
                conn.sendall(then)
        received = [first]
        with contextlib.suppress(ConnectionError):
            while chunk := conn.recv(65536):
                received.append(chunk)
        return b"".join(received)


OVERSIZED = reviewing.BodyLimits().max_bytes + 4 * 1024 * 1024


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        pytest.param(
            f"Content-Length: {OVERSIZED}\r\nExpect: 100-continue\r\n",
            (413, "RequestEntityTooLarge"),
            id="oversized-answered-instead-of-100-continue",
        ),
        pytest.param(
            "Content-Length: 2\r\nExpect: 100-continue\r\n",
            (100, ""),
            id="a-usable-body-is-asked-for",
        ),
    ],
)
async def test_a_client_that_asks_before_sending_is_refused_before_sending(
    headers: str, expected: tuple[int, str]
) -> None:
    """Issue 35: an oversized request got its connection reset, not a 413. A client that asks
    first (``Expect: 100-continue``, as curl does for large bodies) gets the 413 as the answer
    and never sends the body; a usable one is asked for it."""
    head = f"POST /pods/mutate HTTP/1.1\r\nHost: x\r\n{headers}\r\n".encode()
    async with serving(listening.Limits()) as port:
        data = await asyncio.to_thread(blocking_exchange, port, head)
    status_line, _, rest = data.partition(b"\r\n")
    reason = ""
    if int(status_line.split()[1]) == 413:
        payload = json.loads(rest.partition(b"\r\n\r\n")[2])
        reason = payload["reason"]
        assert f"more than {reviewing.BodyLimits().max_bytes} bytes" in payload["message"]
    assert (int(status_line.split()[1]), reason) == expected


async def test_a_client_that_sends_an_oversized_body_at_once_reads_the_413() -> None:
    """Without ``Expect``, the answer goes out as soon as the headers are read and the server
    drops what follows for a while (``server.answer_then_drain``) before it closes, so a
    client writing its body and reading at the same time, as kube-apiserver's does, reads the
    413 rather than a reset."""
    body = b" " * OVERSIZED

    async def read_answer(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        return head, await reader.readexactly(length)

    async with serving(listening.Limits()) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        answer = asyncio.create_task(read_answer(reader))
        writer.write(request_bytes(body=body)[: -len(body)])
        with contextlib.suppress(ConnectionError):
            for start in range(0, len(body), 65536):
                if answer.done():
                    break
                writer.write(body[start : start + 65536])
                await writer.drain()
        head, payload = await asyncio.wait_for(answer, 10)
        writer.close()
    found = json.loads(payload)
    assert (int(head.split()[1]), found["reason"], b"connection: close" in head.lower()) == (
        413,
        "RequestEntityTooLarge",
        True,
    )


async def test_a_trickling_body_gets_408_at_the_request_deadline() -> None:
    """A body that keeps arriving, a byte every 0.1 s, is cut at the request deadline. The idle
    timeout is far longer than any gap a loaded machine makes between two bytes (it was 0.3 s,
    and a 0.1 s sleep that took 0.3 s got the idle answer instead), so only the deadline can
    end the request; the deadline's answer comes whenever the loop gets to it.

    The client stops sending 0.2 s before the earliest moment the server's deadline can fall
    due (it counts from the server reading the first byte, after the client wrote it). Server
    and client share this event loop, so every byte sent is read before the 408 is written:
    the server closes without lingering (``handler_options``), and a byte sent after the
    answer would make the kernel reset the connection and drop the answer unread."""
    limits = listening.Limits(request_timeout=0.6, idle_timeout=60.0)
    loop = asyncio.get_running_loop()
    async with serving(limits) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        sent_first = loop.time()
        writer.write(request_bytes()[: -len(POD_REVIEW)])
        for byte in POD_REVIEW[:30]:
            if loop.time() - sent_first >= limits.request_timeout - 0.2:
                break
            writer.write(bytes([byte]))
            await asyncio.sleep(0.1)
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        payload = await asyncio.wait_for(reader.read(4096), 5)
        writer.close()
    assert (int(head.split()[1]), json.loads(payload)["message"]) == (
        408,
        "the request was not complete within 0.6s (--http-request-timeout)",
    )


async def test_liveness_answers_while_the_event_loop_is_busy() -> None:
    port = free_port()
    answers: list[int] = []

    # The probe gives up before the loop is free again, so an answer can only have come from
    # the liveness server's own thread while the loop was busy; 2.5 s is far more than that
    # thread needs on a loaded machine.
    def probe() -> None:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2.5) as reply:
            answers.append(reply.status)

    async with server.LivenessServer("127.0.0.1", port):
        kubelet = threading.Thread(target=probe)
        kubelet.start()
        time.sleep(3.0)  # noqa: ASYNC251 (the point: the loop is busy while the kubelet probes)
        await asyncio.to_thread(kubelet.join, 5)
    assert answers == [200]


async def test_liveness_fails_once_the_loop_has_been_stuck_for_long() -> None:
    liveness = server.LivenessServer("127.0.0.1", 0)
    liveness.last_beat -= server.LOOP_STALL_LIMIT + 1
    status, text = liveness.answer()
    assert (status, text.startswith(b"event loop stalled for")) == (503, True)


def test_a_port_in_use_exits_2_naming_the_port(
    tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    bundle = certificates.generate_bundle(service="s", namespace="n")
    (tmp_path / "tls.crt").write_bytes(bundle.serving.cert_pem)
    (tmp_path / "tls.key").write_bytes(bundle.serving.key_pem)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code = cli.main(
            [
                "webhook",
                "--bind-address=127.0.0.1",
                f"--port={port}",
                f"--tls-cert-file={tmp_path / 'tls.crt'}",
                f"--tls-private-key-file={tmp_path / 'tls.key'}",
            ]
        )
    assert (code, f"cannot listen on 127.0.0.1 (--port={port}" in caplog.text) == (2, True)


async def test_a_connection_accepted_just_before_the_listener_stops_is_closed() -> None:
    """The connection's task is cancelled before it ever runs (it was accepted in the same
    step of the event loop as the stop): the listener closes the socket itself, instead of
    leaving it to the garbage collector (an unclosed-socket ResourceWarning)."""
    limits = listening.Limits()
    app = server.build_app(
        source=server.StaticSource(), settings=settings.ReviewSettings(), limits=limits
    )
    runner = web.AppRunner(app)
    await runner.setup()
    sock = listening.bind("127.0.0.1", 0)
    listener = listening.Listener(runner, sock, context=None, limits=limits)
    client = socket.create_connection(("127.0.0.1", listener.port))
    try:
        loop = asyncio.get_running_loop()
        accepted, _ = await loop.sock_accept(sock)
        # What _accept does once a connection arrives, then a stop before the task has run.
        listener._unstarted.add(accepted)
        task = asyncio.create_task(listener._start(accepted))
        listener._tasks.add(task)
        await listener.stop()
        assert (task.cancelled(), accepted.fileno()) == (True, -1)
    finally:
        client.close()
        await runner.cleanup()
