"""Webhook throughput and latency over TLS on loopback (``make bench``).

The webhook app runs in its own process (one process, as deployed), serving TLS 1.2+ with a
fixed view of 1,000 existing queues; this process drives it with 64 concurrent keep-alive
clients and prints one JSON object per endpoint and mode:

    {"benchmark": "webhook", "endpoint": "/pods/mutate", "clients": 64, "queues": 1000,
     "mode": ..., "requests": ..., "seconds": ..., "reviews_per_second": ...,
     "p50_ms": ..., "p99_ms": ..., "target": ...}

Two modes per endpoint: the closed loop measures the most reviews/s the server sustains (every
client always has a request in flight, so latency there is only 64 / throughput); the open loop
sends 1,000 pod reviews/s (``--rate``) or 200 queue reviews/s (``--queue-rate``) and measures
the latency a caller sees at that load.

Target (issue): /pods/mutate at least 1,000 reviews/s with p99 under 20 ms. Nothing asserts
it: benchmarks measure, tests assert behaviour. The client runs in the other process on the
same machine and competes for its CPUs. ``--requests N`` changes the count.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import multiprocessing
import pathlib
import ssl
import sys
import tempfile
from typing import Any

import aiohttp

from queuetree.api import queue_manifests
from queuetree.core import objects
from queuetree.webhooks import certificates, listening, server, settings, views

SERVICE, NAMESPACE = "queuetree-webhook", "queuetree-system"
GATE = objects.QUEUE_ALLOCATION_GATE


def tree(count: int) -> views.ClusterView:
    """``count`` queues: 10 departments under root, the rest leaves spread under them."""

    documents = []
    for d in range(10):
        documents.append(
            {
                "metadata": {"name": f"dept-{d}"},
                "spec": {
                    "parent": "root",
                    "deserved": {"cpu": "1000", "memory": "4Ti"},
                    "guarantee": {"resource": {"cpu": "500", "memory": "2Ti"}},
                },
            }
        )
    for i in range(count - 10):
        documents.append(
            {
                "metadata": {"name": f"leaf-{i}"},
                "spec": {
                    "parent": f"dept-{i % 10}",
                    "deserved": {"cpu": "1", "memory": "4Gi"},
                    "guarantee": {"resource": {"cpu": "500m", "memory": "2Gi"}},
                },
            }
        )
    return views.ClusterView.of(queues=[queue_manifests.parse_queue(d) for d in documents])


def request_body(path: str, index: int) -> bytes:
    if path == "/pods/mutate":
        obj: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"p{index}",
                "namespace": "ml",
                "annotations": {GATE: "true", objects.QUEUE_NAME_ANNOTATION: "leaf-1"},
            },
            "spec": {"containers": [{"name": "main", "image": "busybox"}]},
        }
        resource = {"group": "", "version": "v1", "resource": "pods"}
    else:
        obj = {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": f"new-{index}"},
            "spec": {
                "parent": "dept-3",
                "capability": {"cpu": "4", "memory": "16Gi"},
                "deserved": {"cpu": "1", "memory": "4Gi"},
                "guarantee": {"resource": {"cpu": "500m", "memory": "2Gi"}},
            },
        }
        resource = {"group": "scheduling.volcano.sh", "version": "v1beta1", "resource": "queues"}
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": f"uid-{index}",
            "kind": {"group": resource["group"], "version": resource["version"], "kind": "X"},
            "resource": resource,
            "name": obj["metadata"]["name"],
            "namespace": obj["metadata"].get("namespace", ""),
            "operation": "CREATE",
            "userInfo": {"username": "bench"},
            "object": obj,
            "oldObject": None,
            "dryRun": False,
        },
    }
    return json.dumps(review).encode()


def serve(port_queue: Any, cert_dir: str, queues: int) -> None:
    """The server process: the webhook app over TLS with a fixed view, served as ``queuetree
    webhook`` serves it (``listening``, its limits at their defaults)."""

    async def main() -> None:
        bundle_dir = pathlib.Path(cert_dir)
        source = certificates.FileSource(str(bundle_dir / "tls.crt"), str(bundle_dir / "tls.key"))
        serving = certificates.ServingContext(certificates.server_context)
        source.refresh(serving)
        app = server.build_app(
            source=server.StaticSource(tree(queues)), settings=settings.ReviewSettings()
        )
        server.freeze_heap()  # as ``queuetree webhook`` does once its caches are synced
        async with listening.listening(
            app,
            sock=listening.bind("127.0.0.1", 0),
            context=serving.context,
            limits=listening.Limits(),
        ) as port:
            port_queue.put(port)
            await asyncio.Event().wait()

    asyncio.run(main())


async def drive(
    port: int,
    path: str,
    *,
    requests: int,
    clients: int,
    ca_pem: bytes,
    rate: float | None,
) -> dict[str, Any]:
    """Send ``requests`` reviews over ``clients`` keep-alive connections.

    ``rate`` None: closed loop, each client sends its next review as soon as the last one is
    answered (the saturation throughput; latency then is just clients / throughput).
    ``rate`` R: open loop, review k is due at ``k / R`` seconds and its latency counts from
    that moment, so time spent queued behind a slow answer counts too (no coordinated
    omission): the latency a caller sees at that load.
    """
    context = ssl.create_default_context(cadata=ca_pem.decode())
    context.hostname_checks_common_name = False
    url = f"https://127.0.0.1:{port}{path}"
    bodies = [request_body(path, i) for i in range(requests)]
    latencies: list[float] = []
    next_index = 0
    loop = asyncio.get_running_loop()
    origin = 0.0

    async def send(session: aiohttp.ClientSession, body: bytes) -> None:
        async with session.post(
            url,
            data=body,
            headers={"Content-Type": "application/json"},
            ssl=context,
            server_hostname=f"{SERVICE}.{NAMESPACE}.svc",
        ) as response:
            await response.read()
            if response.status != 200:
                raise RuntimeError(f"{path}: HTTP {response.status}")

    async def client(session: aiohttp.ClientSession, until: int, paced: bool) -> None:
        nonlocal next_index
        while next_index < until:
            index = next_index
            next_index += 1
            if paced and rate:
                due = origin + index / rate
                delay = due - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                started = due
            else:
                started = loop.time()
            await send(session, bodies[index % len(bodies)])
            latencies.append(loop.time() - started)

    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(connector=connector) as session:
        # Warm up: open the connections first (TLS handshakes are not what is measured).
        await asyncio.gather(*(client(session, clients * 2, False) for _ in range(clients)))
        latencies.clear()
        next_index = 0
        # The client's own collector must not pause the measurement (the server freezes too).
        gc.collect()
        gc.freeze()
        origin = started = loop.time()
        await asyncio.gather(*(client(session, requests, True) for _ in range(clients)))
        seconds = loop.time() - started
    latencies.sort()
    return {
        "mode": f"open loop at {rate:g}/s" if rate else "closed loop (saturation)",
        "requests": requests,
        "seconds": round(seconds, 3),
        "reviews_per_second": round(requests / seconds, 1),
        "p50_ms": round(latencies[len(latencies) // 2] * 1000, 2),
        "p99_ms": round(latencies[int(len(latencies) * 0.99) - 1] * 1000, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--queues", type=int, default=1000)
    parser.add_argument(
        "--rate", type=float, default=1000.0, help="reviews/s of the open-loop pod run"
    )
    parser.add_argument(
        "--queue-rate",
        type=float,
        default=200.0,
        help="reviews/s of the open-loop queue run (queues change rarely; 200/s is generous)",
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-webhook-") as tmp:
        bundle = certificates.generate_bundle(service=SERVICE, namespace=NAMESPACE)
        (pathlib.Path(tmp) / "tls.crt").write_bytes(bundle.serving.cert_pem)
        (pathlib.Path(tmp) / "tls.key").write_bytes(bundle.serving.key_pem)
        ports: Any = multiprocessing.Queue()
        process = multiprocessing.Process(target=serve, args=(ports, tmp, args.queues), daemon=True)
        process.start()
        try:
            port = ports.get(timeout=60)
            for path, target, rate in (
                ("/pods/mutate", ">= 1000 reviews/s", None),
                ("/pods/mutate", "p99 < 20 ms at 1000 reviews/s", args.rate),
                ("/queues/validate", None, None),
                ("/queues/validate", None, args.queue_rate),
            ):
                figures = asyncio.run(
                    drive(
                        port,
                        path,
                        requests=args.requests,
                        clients=args.clients,
                        ca_pem=bundle.ca.cert_pem,
                        rate=rate,
                    )
                )
                line = {
                    "benchmark": "webhook",
                    "endpoint": path,
                    "clients": args.clients,
                    "queues": args.queues,
                    **figures,
                    "target": target,
                }
                print(json.dumps(line), flush=True)
        finally:
            process.terminate()
            process.join(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
