"""Throughput of kubesim for the requests the end-to-end benchmarks make most: pod CREATE and
pod PATCH (removing a scheduling gate with a JSON patch, as the operator does, and a merge patch
of a label), with a simple concurrent aiohttp client against `python -m kubesim` in a subprocess.

Prints one JSON object per line:
    {"benchmark": "kubesim_pod_patch_json", "pods": 5000, "concurrency": 32, "seconds": ...,
     "requests_per_second": ..., "errors": 0}
Run: .venv/bin/python benchmarks/bench_kubesim.py [--pods N] [--concurrency C]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable

import aiohttp

NAMESPACE = "default"
WATCHERS = 2  # cluster-wide pod watches during the last phase (the operator and the simulation)


def start_server(directory: pathlib.Path) -> tuple[subprocess.Popen[bytes], str]:
    port_file = directory / "port"
    process = subprocess.Popen(
        [sys.executable, "-m", "kubesim", "--port-file", str(port_file)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while not port_file.exists():
        if time.monotonic() > deadline or process.poll() is not None:
            process.kill()
            raise RuntimeError("kubesim did not start")
        time.sleep(0.05)
    return process, f"http://127.0.0.1:{port_file.read_text().strip()}"


def pod(name: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "bench"}},
        "spec": {
            "schedulingGates": [{"name": "example.com/queue"}],
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.9",
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                }
            ],
        },
    }


SERVER_PID = 0  # the kubesim process, whose CPU time each phase reports


def server_cpu_seconds() -> float:
    """User + system CPU time of the server so far (Linux /proc), 0 where unavailable.

    Requests per server CPU second stay meaningful on a loaded machine, where wall-clock
    throughput mostly measures the neighbours."""
    try:
        fields = pathlib.Path(f"/proc/{SERVER_PID}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def run_phase(
    name: str,
    count: int,
    concurrency: int,
    request: Callable[[int], Awaitable[int]],
) -> dict:
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(count):
        queue.put_nowait(i)
    failures = 0

    async def worker() -> None:
        nonlocal failures
        while True:
            try:
                i = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            status = await request(i)
            if status >= 300:
                failures += 1

    started, cpu_before = time.perf_counter(), server_cpu_seconds()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    seconds = time.perf_counter() - started
    cpu = server_cpu_seconds() - cpu_before
    return {
        "benchmark": name,
        "pods": count,
        "concurrency": concurrency,
        "seconds": round(seconds, 3),
        "requests_per_second": round(count / seconds, 1),
        "server_cpu_seconds": round(cpu, 3),
        "requests_per_server_cpu_second": round(count / cpu, 1) if cpu else None,
        "load_average_1m": round(os.getloadavg()[0], 2),
        "errors": failures,
    }


async def bench(url: str, pods: int, concurrency: int) -> list[dict]:
    headers = {"Authorization": "Bearer admin", "Accept": "application/json"}
    connector = aiohttp.TCPConnector(limit=concurrency)
    base = f"{url}/api/v1/namespaces/{NAMESPACE}/pods"
    async with aiohttp.ClientSession(headers=headers, connector=connector) as session:

        async def create(i: int) -> int:
            async with session.post(base, json=pod(f"p{i}")) as response:
                await response.read()
                return response.status

        async def ungate(i: int) -> int:
            ops = [
                {
                    "op": "test",
                    "path": "/spec/schedulingGates/0/name",
                    "value": "example.com/queue",
                },
                {"op": "remove", "path": "/spec/schedulingGates/0"},
            ]
            async with session.patch(
                f"{base}/p{i}",
                data=json.dumps(ops),
                headers={"Content-Type": "application/json-patch+json"},
            ) as response:
                await response.read()
                return response.status

        async def label(i: int) -> int:
            body = {"metadata": {"labels": {"bench/patched": "yes"}}}
            async with session.patch(
                f"{base}/p{i}",
                data=json.dumps(body),
                headers={"Content-Type": "application/merge-patch+json"},
            ) as response:
                await response.read()
                return response.status

        async def get_list(i: int) -> int:
            async with session.get(base, params={"limit": "500"}) as response:
                await response.read()
                return response.status

        async def watch_pods(received: list[int]) -> None:
            # A cluster-wide pod watch that reads every event, as an operator's would.
            async with session.get(
                f"{url}/api/v1/pods", params={"watch": "true", "resourceVersion": "0"}, timeout=None
            ) as response:
                async for _ in response.content:
                    received[0] += 1

        results = [
            await run_phase("kubesim_pod_create", pods, concurrency, create),
            await run_phase("kubesim_pod_patch_json", pods, concurrency, ungate),
            await run_phase("kubesim_pod_patch_merge", pods, concurrency, label),
            await run_phase("kubesim_pod_list_500", 20, 4, get_list),
        ]
        received = [0]
        watchers = [asyncio.create_task(watch_pods(received)) for _ in range(WATCHERS)]
        try:

            async def relabel(i: int) -> int:
                body = {"metadata": {"labels": {"bench/patched": "again"}}}
                async with session.patch(
                    f"{base}/p{i}",
                    data=json.dumps(body),
                    headers={"Content-Type": "application/merge-patch+json"},
                ) as response:
                    await response.read()
                    return response.status

            phase = await run_phase("kubesim_pod_patch_merge_watched", pods, concurrency, relabel)
            phase["watchers"] = WATCHERS
            results.append(phase)
        finally:
            for watcher in watchers:
                watcher.cancel()
            await asyncio.gather(*watchers, return_exceptions=True)
        return results


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pods", type=int, default=int(os.environ.get("BENCH_PODS", "5000")))
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-kubesim-") as directory:
        process, url = start_server(pathlib.Path(directory))
        global SERVER_PID
        SERVER_PID = process.pid
        try:
            for result in asyncio.run(bench(url, args.pods, args.concurrency)):
                print(json.dumps(result), flush=True)
        finally:
            process.terminate()
            process.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
