"""The webhook under every hostile load of issue 13 at once, beside normal traffic (``make bench``).

Three processes on the same machine: the webhook server (TLS, 1,000 queues, the transport
limits of ``queuetree webhook`` at their defaults), a normal client that sends ``--rate``
``/pods/mutate`` reviews per second over 64 keep-alive connections (open loop: latency counts
from when a review was due), and a hostile client that, for the whole run:

- keeps 32 POSTs of a 64 KiB gzip body that inflates to 64 MiB (``Content-Encoding: gzip``)
  in flight;
- keeps 3,000 TLS connections open that never finish their headers (a closed one is opened
  again);
- keeps 16 clients sending 3 MB bodies of ``[[],[],...]``;
- sends reviews that crashed the server before: ``request.operation`` as a list and an
  object, and a lone surrogate in an echoed string.

It prints one JSON object: the normal reviews' p50/p99 and failures, the server's RSS (largest
sample every 100 ms, and the kernel's high-water mark), and what the hostile client saw (HTTP
statuses, connections the server closed). Targets (issue 13): p99 < 100 ms and RSS < 256 MiB.
Nothing asserts them: benchmarks measure, tests assert behaviour.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import gzip
import json
import logging
import multiprocessing
import os
import pathlib
import ssl
import sys
import tempfile
import time
from typing import Any

import aiohttp

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import bench_webhook

from queuetree.webhooks import certificates

HOST = f"{bench_webhook.SERVICE}.{bench_webhook.NAMESPACE}.svc"
CONNECTIONS = 64
"""Keep-alive connections of the normal client (as in bench_webhook)."""
PER_REQUEST_TIMEOUT = 5.0
"""What kube-apiserver waits for a pod webhook in the shipped configuration."""


def serve(port_queue: Any, cert_dir: str, queues: int, nice: int = 0) -> None:
    """The server process of bench_webhook (the webhook app as ``queuetree webhook`` serves
    it: TLS, the transport limits at their defaults, a fixed view), at ``nice``."""
    os.nice(nice)
    bench_webhook.serve(port_queue, cert_dir, queues)


def client_context(ca_pem: bytes) -> ssl.SSLContext:
    context = ssl.create_default_context(cadata=ca_pem.decode())
    context.hostname_checks_common_name = False
    return context


# -- normal traffic ------------------------------------------------------------------------------


async def normal(
    port: int, ca_pem: bytes, *, rate: float, seconds: float, warm: Any
) -> dict[str, Any]:
    context = client_context(ca_pem)
    url = f"https://127.0.0.1:{port}/pods/mutate"
    bodies = [bench_webhook.request_body("/pods/mutate", i) for i in range(1000)]
    loop = asyncio.get_running_loop()
    latencies: list[float] = []
    failures: collections.Counter[str] = collections.Counter()
    waits: list[float] = []
    total = int(rate * seconds)
    next_index = 0
    origin = 0.0

    async def send(session: aiohttp.ClientSession, index: int) -> None:
        async with session.post(
            url,
            data=bodies[index % len(bodies)],
            headers={"Content-Type": "application/json"},
            ssl=context,
            server_hostname=HOST,
            timeout=aiohttp.ClientTimeout(total=PER_REQUEST_TIMEOUT),
        ) as response:
            await response.read()
            if response.status != 200:
                raise RuntimeError(f"HTTP {response.status}")

    async def worker(session: aiohttp.ClientSession, until: int, paced: bool) -> None:
        nonlocal next_index
        while next_index < until:
            index = next_index
            next_index += 1
            started = loop.time()
            if paced:
                started = origin + index / rate
                delay = started - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                else:  # due already: every connection was busy (or this process was starved)
                    waits.append(-delay)
            try:
                await send(session, index)
            except Exception as exc:
                failures[type(exc).__name__ if str(exc) == "" else str(exc)[:60]] += 1
                continue
            if paced:
                latencies.append(loop.time() - started)

    connections = 0

    async def opened(*_: Any) -> None:
        nonlocal connections
        connections += 1

    trace = aiohttp.TraceConfig()
    trace.on_connection_create_end.append(opened)
    connector = aiohttp.TCPConnector(limit=CONNECTIONS)
    async with aiohttp.ClientSession(connector=connector, trace_configs=[trace]) as session:
        await asyncio.gather(*(worker(session, 2 * CONNECTIONS, False) for _ in range(CONNECTIONS)))
        warm.set()  # the attack starts now: kube-apiserver's connections exist before it
        connections_warm = connections
        next_index = 0
        gc.collect()
        gc.freeze()
        origin = loop.time()
        await asyncio.gather(*(worker(session, total, True) for _ in range(CONNECTIONS)))
    latencies.sort()

    def percentile(fraction: float) -> float | None:
        if not latencies:
            return None
        return round(latencies[min(len(latencies) - 1, int(len(latencies) * fraction))] * 1e3, 2)

    return {
        "normal_reviews": total,
        "normal_answered": len(latencies),
        "normal_failures": dict(failures),
        "p50_ms": percentile(0.5),
        "p99_ms": percentile(0.99),
        "normal_connections_reopened": connections - connections_warm,
        # Reviews that were due while all connections were busy: the client's own queueing,
        # counted in the latencies above (as kube-apiserver would open more connections).
        "normal_due_while_busy": len(waits),
    }


def run_normal(
    results: Any, port: int, ca_pem: bytes, rate: float, seconds: float, warm: Any, nice: int
) -> None:
    os.nice(nice)
    results.put(asyncio.run(normal(port, ca_pem, rate=rate, seconds=seconds, warm=warm)))


# -- hostile traffic -----------------------------------------------------------------------------

GZIP_BOMB = gzip.compress(b"\0" * (64 * 1024 * 1024), compresslevel=9)
EMPTY_LISTS = b"[" + b"[]," * (1_000_000 - 1) + b"[]]"


def odd_bodies() -> list[bytes]:
    base = json.loads(bench_webhook.request_body("/pods/mutate", 0))
    bodies = []
    for operation in (["CREATE"], {"op": "CREATE"}):
        base["request"]["operation"] = operation
        bodies.append(json.dumps(base).encode())
    base["request"]["operation"] = "CREATE"
    text = json.dumps(base).replace('"name": "p0"', '"name": "p0\\ud83d"')
    bodies.append(text.encode())
    return bodies


LOADS = ("gzip", "slow-headers", "empty-lists", "odd")


async def hostile(
    port: int, ca_pem: bytes, *, seconds: float, loads: frozenset[str]
) -> dict[str, Any]:
    context = client_context(ca_pem)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    statuses: collections.Counter[str] = collections.Counter()
    closed_by_server = 0
    opened = 0

    async def post_raw(headers: bytes, body: bytes, label: str) -> None:
        """One request on its own connection; the status (or the failure) is counted."""
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", port, ssl=context, server_hostname=HOST),
                PER_REQUEST_TIMEOUT,
            )
        except (OSError, TimeoutError, ssl.SSLError):
            statuses[f"{label}: connect failed"] += 1
            await asyncio.sleep(0.05)
            return
        try:
            writer.write(headers + f"Content-Length: {len(body)}\r\n\r\n".encode())
            for start in range(0, len(body), 65536):
                if writer.is_closing() or reader.at_eof():
                    break  # answered early (and closed): the rest is not wanted
                writer.write(body[start : start + 65536])
                await writer.drain()
            line = await asyncio.wait_for(reader.readline(), 30)
            statuses[f"{label}: {line.split(b' ')[1].decode() if line else 'closed'}"] += 1
        except (OSError, TimeoutError, ssl.SSLError, IndexError):
            statuses[f"{label}: dropped"] += 1
        finally:
            writer.close()

    async def loop_posts(headers: bytes, body: bytes, label: str) -> None:
        while loop.time() < deadline:
            await post_raw(headers, body, label)

    async def slow_headers() -> None:
        nonlocal closed_by_server, opened
        while loop.time() < deadline:
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection("127.0.0.1", port, ssl=context, server_hostname=HOST),
                    PER_REQUEST_TIMEOUT,
                )
            except (OSError, TimeoutError, ssl.SSLError):
                await asyncio.sleep(0.2)
                continue
            opened += 1
            try:
                writer.write(b"POST /pods/mutate HTTP/1.1\r\nHost: x\r\nX-Slow: ")
                remaining = deadline - loop.time()
                if remaining > 0:
                    await asyncio.wait_for(reader.read(1), remaining)
                    closed_by_server += 1
            except (OSError, TimeoutError, ssl.SSLError):
                pass
            finally:
                writer.close()

    json_headers = b"POST /pods/mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    gzip_headers = json_headers + b"Content-Encoding: gzip\r\n"
    odd = odd_bodies()

    async def odd_inputs() -> None:
        while loop.time() < deadline:
            for body in odd:
                await post_raw(json_headers, body, "odd input")
            await asyncio.sleep(0.1)

    async def ramp_slow_headers(count: int) -> None:
        tasks = []
        for _ in range(count // 100):
            tasks += [asyncio.create_task(slow_headers()) for _ in range(100)]
            await asyncio.sleep(0.05)
        await asyncio.gather(*tasks)

    tasks = []
    if "slow-headers" in loads:
        tasks.append(ramp_slow_headers(3000))
    if "gzip" in loads:
        tasks += [loop_posts(gzip_headers, GZIP_BOMB, "gzip bomb") for _ in range(32)]
    if "empty-lists" in loads:
        tasks += [loop_posts(json_headers, EMPTY_LISTS, "3 MB of [[],...]") for _ in range(16)]
    if "odd" in loads:
        tasks.append(odd_inputs())
    await asyncio.gather(*tasks)
    return {
        "hostile_statuses": dict(sorted(statuses.items())),
        "slow_header_connections_opened": opened,
        "slow_header_connections_closed_by_server": closed_by_server,
    }


def run_hostile(
    results: Any,
    port: int,
    ca_pem: bytes,
    seconds: float,
    loads: frozenset[str],
    nice: int,
    warm: Any,
) -> None:
    os.nice(nice)
    warm.wait(60)
    # Writes to connections the server closed are expected here by the thousand.
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)
    results.put(asyncio.run(hostile(port, ca_pem, seconds=seconds, loads=loads)))


def rss_kib(pid: int, field: str = "VmRSS") -> int:
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--queues", type=int, default=1000)
    parser.add_argument(
        "--loads",
        default=",".join(LOADS),
        help=f"comma-separated hostile loads to run (default all: {','.join(LOADS)})",
    )
    parser.add_argument(
        "--hostile-nice",
        type=int,
        default=10,
        help="niceness of the hostile client process (default 10): on a machine of two CPUs "
        "the attacker's own TLS encryption would otherwise starve the normal client, while "
        "real attackers run elsewhere; the server and the normal client run at 0",
    )
    parser.add_argument(
        "--server-nice",
        type=int,
        default=0,
        help="niceness of the server (default 0; negative needs root)",
    )
    parser.add_argument(
        "--normal-nice",
        type=int,
        default=0,
        help="niceness of the normal client (default 0; negative needs root): on a machine "
        "shared with other work, a starved client measures its own waiting, not the server's",
    )
    args = parser.parse_args(argv)
    loads = frozenset(args.loads.split(",")) - {""}
    with tempfile.TemporaryDirectory(prefix="bench-hostile-") as tmp:
        bundle = certificates.generate_bundle(
            service=bench_webhook.SERVICE, namespace=bench_webhook.NAMESPACE
        )
        (pathlib.Path(tmp) / "tls.crt").write_bytes(bundle.serving.cert_pem)
        (pathlib.Path(tmp) / "tls.key").write_bytes(bundle.serving.key_pem)
        queue: Any = multiprocessing.Queue()
        webhook = multiprocessing.Process(
            target=serve, args=(queue, tmp, args.queues, args.server_nice), daemon=True
        )
        webhook.start()
        try:
            port = queue.get(timeout=60)
            baseline = rss_kib(webhook.pid or 0)
            results: Any = multiprocessing.Queue()
            ca = bundle.ca.cert_pem
            warm = multiprocessing.Event()
            clients = [
                multiprocessing.Process(
                    target=run_hostile,
                    args=(results, port, ca, args.seconds, loads, args.hostile_nice, warm),
                ),
                multiprocessing.Process(
                    target=run_normal,
                    args=(results, port, ca, args.rate, args.seconds, warm, args.normal_nice),
                ),
            ]
            for process in clients:
                process.start()
            peak = 0
            while any(p.is_alive() for p in clients) and results.qsize() < len(clients):
                peak = max(peak, rss_kib(webhook.pid or 0))
                time.sleep(0.1)
            figures: dict[str, Any] = {}
            for _ in clients:
                figures.update(results.get(timeout=120))
            for process in clients:
                process.join(30)
            line = {
                "benchmark": "webhook_hostile",
                "seconds": args.seconds,
                "rate": args.rate,
                "queues": args.queues,
                "loads": sorted(loads),
                "hostile_nice": args.hostile_nice,
                "normal_nice": args.normal_nice,
                "server_nice": args.server_nice,
                "load_average": round(os.getloadavg()[0], 2),
                "cpus": os.cpu_count(),
                **figures,
                "rss_before_mib": round(baseline / 1024, 1),
                "rss_peak_sampled_mib": round(peak / 1024, 1),
                "rss_high_water_mib": round(rss_kib(webhook.pid or 0, "VmHWM") / 1024, 1),
                "target": "p99 < 100 ms, RSS < 256 MiB",
            }
            print(json.dumps(line), flush=True)
        finally:
            webhook.terminate()
            webhook.join(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
