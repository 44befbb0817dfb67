"""Operator admission throughput on kubesim: 5,000 gated pods across 100 leaf queues.

Runs kubesim and ``queuetree operator`` as separate processes (as in a cluster: no shared
interpreter, no shared GIL), then, from this driver, with a watch recording when each pod is
first seen without gates:

1. creates 10 parent queues with 10 leaves each, with room for every pod;
2. burst: creates 5,000 gated pods (the gate set at creation, as the webhook would), 32 requests
   in flight: the throughput while kubesim also serves the creations, whose latencies include
   the backlog;
3. paced: 5,000 more at ``--paced-rate`` (below the raw PATCH rate): the latency of a steady
   load;
4. release: 5,000 gated pods under a parent whose capability admits none; once the operator has
   explained why each is held, one patch lifts the capability: the operator's own ungating
   throughput (a capacity increase or a failover with a backlog), against the raw PATCH rate;
5. kubesim's raw pod PATCH rate in the same run, with as many requests in flight as the
   operator has gate workers: a merge patch of a label (the cheapest pod write) and a JSON
   patch of the gate removal's shape (two tests and one change, what the operator sends).

Prints one JSON object per phase (``--phases`` chooses): pods ungated per second (from the first
creation, or the release, to the last gate removal), the p50/p99 latency from creation (or the
release) to gate removal, the creation rate, both raw rates and, for the burst and the release,
the ratios to them. kubesim's simulated scheduler and kubelet are off, so nothing but the
operator writes pods while it is measured. Target (issue): ratio >= 0.7 and p99 < 1 s. Nothing
asserts: a benchmark measures. ``--keep-logs DIR`` keeps both logs and the operator's metrics.

    .venv/bin/python benchmarks/bench_operator.py [--pods 5000] [--workers 16] [--phases ...]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import pathlib
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from typing import Any

import aiohttp
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
GATE = "scheduling.volcano.sh/queue-allocation-gate"
QUEUES = "/apis/scheduling.volcano.sh/v1beta1/queues"
PODS = "/api/v1/namespaces/default/pods"
EXPLANATION = "scheduling.queuetree.io/admission-reason"
PROFILE = (
    ["-m", "cProfile", "-o", os.environ["BENCH_PROFILE"]] if os.environ.get("BENCH_PROFILE") else []
)


def start(args: list[str], *, env: dict[str, str], log: pathlib.Path) -> subprocess.Popen[bytes]:
    stream = log.open("wb")
    return subprocess.Popen(args, env=env, stdout=stream, stderr=subprocess.STDOUT)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_file(path: pathlib.Path, *, deadline: float = 30.0) -> str:
    limit = time.monotonic() + deadline
    while not path.exists() or not path.read_text().strip():
        if time.monotonic() > limit:
            raise SystemExit(f"{path} was not written in time")
        time.sleep(0.05)
    return path.read_text().strip()


class Api:
    def __init__(self, session: aiohttp.ClientSession, url: str) -> None:
        self.session = session
        self.url = url
        self.headers = {"Authorization": "Bearer admin"}

    async def call(
        self, method: str, path: str, body: Any = None, *, content_type: str = "application/json"
    ) -> tuple[int, Any]:
        headers = {**self.headers, "Content-Type": content_type}
        async with self.session.request(
            method,
            self.url + path,
            data=json.dumps(body) if body is not None else None,
            headers=headers,
        ) as response:
            return response.status, await response.json(content_type=None)


async def until(probe: Any, *, deadline: float, what: str) -> None:
    limit = time.monotonic() + deadline
    while not await probe():
        if time.monotonic() > limit:
            raise SystemExit(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def measure(
    url: str,
    *,
    pods: int,
    workers: int,
    leaves: int,
    paced_rate: float,
    phases: frozenset[str] = frozenset({"burst", "paced", "release"}),
) -> list[dict[str, Any]]:
    async with aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=64), timeout=aiohttp.ClientTimeout(total=60)
    ) as session:
        api = Api(session, url)
        for path in sorted((ROOT / "crds").glob("scheduling.volcano.sh_*.yaml")):
            await api.call(
                "POST",
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                yaml.safe_load(path.read_text()),
            )

        async def root_exists() -> bool:
            status, _ = await api.call("GET", f"{QUEUES}/root")
            return status == 200

        await until(root_exists, deadline=60, what="the operator to create the root queue")
        names = []
        for parent in range(10):
            await api.call("POST", QUEUES, queue(f"dept-{parent}", "root"))
            for leaf in range(leaves // 10):
                name = f"team-{parent}-{leaf}"
                names.append(name)
                await api.call("POST", QUEUES, queue(name, f"dept-{parent}"))
        ungated: dict[str, float] = {}
        _, listing = await api.call("GET", PODS)
        watch = asyncio.create_task(
            watch_gates(session, url, listing["metadata"]["resourceVersion"], ungated)
        )
        results = []
        all_created: list[str] = []
        # A burst (pods as fast as 32 concurrent POSTs go: the throughput), then a paced stream
        # below the raw PATCH rate (the latency a steady load sees, without a backlog).
        for mode, rate in (("burst", None), ("paced", paced_rate)):
            if mode not in phases:
                continue
            created = await create_pods(api, f"{mode}-", pods, names, rate=rate)
            all_created.extend(created)

            async def all_ungated(created: dict[str, float] = created) -> bool:
                return all(name in ungated for name in created)

            await until(all_ungated, deadline=600, what=f"every gate of the {mode} removed")
            first = min(created.values())
            finished = max(ungated[name] for name in created)
            latencies = sorted(ungated[name] - created[name] for name in created)
            results.append(
                {
                    "benchmark": f"operator_ungate_{mode}",
                    "pods": pods,
                    "leaf_queues": len(names),
                    "gate_workers": workers,
                    "ungated_per_second": round(pods / (finished - first), 1),
                    "latency_p50_seconds": round(statistics.median(latencies), 4),
                    "latency_p99_seconds": round(latencies[int(0.99 * (len(latencies) - 1))], 4),
                    "created_per_second": round(pods / (max(created.values()) - first + 1e-9), 1),
                }
            )
        if "release" in phases:
            created = await create_held_pods(api, pods, leaves=leaves)
            all_created.extend(created)
            released = time.monotonic()
            status, answer = await api.call(
                "PATCH",
                f"{QUEUES}/{RELEASE_PARENT}",
                {"spec": {"capability": None}},
                content_type="application/merge-patch+json",
            )
            if status != 200:
                raise SystemExit(f"lifting the capability of {RELEASE_PARENT}: {status} {answer}")

            async def all_released(created: dict[str, float] = created) -> bool:
                return all(name in ungated for name in created)

            await until(all_released, deadline=600, what="every held pod released")
            finished = max(ungated[name] for name in created)
            latencies = sorted(ungated[name] - released for name in created)
            results.append(
                {
                    "benchmark": "operator_ungate_release",
                    "pods": pods,
                    "leaf_queues": leaves,
                    "gate_workers": workers,
                    "ungated_per_second": round(pods / (finished - released), 1),
                    "latency_p50_seconds": round(statistics.median(latencies), 4),
                    "latency_p99_seconds": round(latencies[int(0.99 * (len(latencies) - 1))], 4),
                }
            )
        watch.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watch
        sample = sorted(all_created)[:pods]
        raw_rate = await raw_patch_rate(api, sample, workers=workers, kind="merge")
        raw_json_rate = await raw_patch_rate(api, sample, workers=workers, kind="json")
        for result in results:
            result["raw_patch_per_second"] = round(raw_rate, 1)
            result["raw_json_patch_per_second"] = round(raw_json_rate, 1)
        # The burst and the release measure throughput; the paced stream is bounded by its
        # arrival rate.
        for result in results:
            if result["benchmark"] != "operator_ungate_paced":
                result["ratio_to_raw_patch"] = round(result["ungated_per_second"] / raw_rate, 3)
                result["ratio_to_raw_json_patch"] = round(
                    result["ungated_per_second"] / raw_json_rate, 3
                )
        return results


RELEASE_PARENT = "held"


async def create_held_pods(api: Api, count: int, *, leaves: int) -> dict[str, float]:
    """Create ``count`` gated pods in ``leaves`` queues under a parent whose capability admits
    none of them, and wait until the operator has explained why each is held (so the release
    measures admission, not the first look at the pods)."""
    await api.call(
        "POST",
        QUEUES,
        {**queue(RELEASE_PARENT, "root"), "spec": {"parent": "root", "capability": {"cpu": "1m"}}},
    )
    names = []
    for index in range(leaves):
        name = f"held-{index}"
        names.append(name)
        await api.call("POST", QUEUES, queue(name, RELEASE_PARENT))
    created = await create_pods(api, "release-", count, names, rate=None)

    async def explained() -> bool:
        _, listing = await api.call("GET", PODS + "?labelSelector=bench%3Dheld")
        return sum(
            1
            for item in listing.get("items", [])
            if EXPLANATION in (item["metadata"].get("annotations") or {})
        ) == len(created)

    await until(explained, deadline=600, what="every held pod explained")
    return created


async def create_pods(
    api: Api, prefix: str, count: int, queues: list[str], *, rate: float | None
) -> dict[str, float]:
    """Create ``count`` gated pods round-robin over ``queues``; name -> when its POST returned.

    ``rate`` None: 32 requests in flight, as fast as the server takes them; otherwise one pod
    every ``1/rate`` seconds (started on schedule, whatever the previous answer's latency).
    """
    created: dict[str, float] = {}
    semaphore = asyncio.Semaphore(32)

    async def create(index: int) -> None:
        name = f"{prefix}{index}"
        manifest = pod(name, queues[index % len(queues)])
        if prefix == "release-":
            manifest["metadata"]["labels"] = {"bench": "held"}
        async with semaphore:
            status, answer = await api.call("POST", PODS, manifest)
        if status != 201:
            raise SystemExit(f"creating {name}: {status} {answer}")
        created[name] = time.monotonic()

    if rate is None:
        await asyncio.gather(*(create(index) for index in range(count)))
        return created
    tasks = []
    started = time.monotonic()
    for index in range(count):
        delay = started + index / rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(create(index)))
    await asyncio.gather(*tasks)
    return created


async def watch_gates(
    session: aiohttp.ClientSession, url: str, version: str, ungated: dict[str, float]
) -> None:
    """Record when each pod is first seen without gates (restarting the watch if it ends)."""
    while True:
        async with session.get(
            f"{url}{PODS}",
            params={"watch": "true", "resourceVersion": version, "allowWatchBookmarks": "true"},
            headers={"Authorization": "Bearer admin"},
            timeout=aiohttp.ClientTimeout(total=None),
        ) as response:
            async for line in response.content:
                event = json.loads(line)
                obj = event["object"]
                version = obj.get("metadata", {}).get("resourceVersion", version)
                if event["type"] not in ("ADDED", "MODIFIED"):
                    continue
                name = obj["metadata"]["name"]
                if name not in ungated and not obj.get("spec", {}).get("schedulingGates"):
                    ungated[name] = time.monotonic()


async def raw_patch_rate(api: Api, names: list[str], *, workers: int, kind: str) -> float:
    """Pod patches per second on existing pods, ``workers`` in flight.

    ``merge``: a merge patch of one label (the cheapest pod write). ``json``: a JSON patch of
    the gate removal's shape (two ``test`` operations, then one change: here a label, since the
    gates are gone), which is what the server must do for each pod the operator admits.
    """
    queue: asyncio.Queue[str] = asyncio.Queue()
    for name in names:
        queue.put_nowait(name)

    async def work() -> None:
        while not queue.empty():
            name = queue.get_nowait()
            if kind == "merge":
                body: Any = {"metadata": {"labels": {"bench": "raw"}}}
                content_type = "application/merge-patch+json"
            else:
                body = [
                    {"op": "test", "path": "/metadata/name", "value": name},
                    {"op": "test", "path": "/metadata/namespace", "value": "default"},
                    {"op": "add", "path": "/metadata/labels/bench-json", "value": "raw"},
                ]
                content_type = "application/json-patch+json"
            status, answer = await api.call(
                "PATCH", f"{PODS}/{name}", body, content_type=content_type
            )
            if status != 200:
                raise SystemExit(f"raw {kind} patch of {name}: {status} {answer}")

    started = time.monotonic()
    await asyncio.gather(*(work() for _ in range(workers)))
    return len(names) / (time.monotonic() - started)


def queue(name: str, parent: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"parent": parent},
    }


def pod(name: str, queue_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "annotations": {GATE: "true", "scheduling.volcano.sh/queue-name": queue_name},
        },
        "spec": {
            "schedulingGates": [{"name": GATE}],
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                }
            ],
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--leaves", type=int, default=100)
    parser.add_argument(
        "--paced-rate", type=float, default=150.0, help="pods per second of the paced stream"
    )
    parser.add_argument(
        "--phases",
        default="burst,paced,release",
        help="which phases to run, comma-separated (burst, paced, release)",
    )
    parser.add_argument(
        "--keep-logs", metavar="DIR", help="write kubesim's and the operator's logs into DIR"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-operator-") as raw:
        tmp = pathlib.Path(raw)
        logs = pathlib.Path(args.keep_logs) if args.keep_logs else tmp
        logs.mkdir(parents=True, exist_ok=True)
        metrics_port = free_port() if args.keep_logs else 0
        env = {**os.environ, "KUBECACHEDIR": str(tmp / "cache")}
        nodes = [f"--node=node-{i}=cpu=64,memory=256Gi,pods=1000" for i in range(10)]
        kubesim = start(
            [
                sys.executable,
                "-m",
                "kubesim",
                "--port-file",
                str(tmp / "port"),
                "--kubeconfig-out",
                str(tmp / "kubeconfig"),
                "--simulate",
                "--scheduler=false",
                "--kubelet=false",
                *nodes,
            ],
            env=env,
            log=logs / "kubesim.log",
        )
        operator = None
        try:
            port = wait_file(tmp / "port")
            wait_file(tmp / "kubeconfig")
            operator = start(
                [
                    sys.executable,
                    *PROFILE,
                    "-m",
                    "queuetree",
                    "operator",
                    "--leader-elect=false",
                    f"--metrics-port={metrics_port}",
                    "--kube-api-qps=0",
                    f"--gate-removal-worker-num={args.workers}",
                ],
                env={**env, "KUBECONFIG": str(tmp / "kubeconfig")},
                log=logs / "operator.log",
            )
            result = asyncio.run(
                measure(
                    f"http://127.0.0.1:{port}",
                    pods=args.pods,
                    workers=args.workers,
                    leaves=args.leaves,
                    paced_rate=args.paced_rate,
                    phases=frozenset(args.phases.split(",")),
                )
            )
            if metrics_port:
                scrape = f"http://127.0.0.1:{metrics_port}/metrics"
                with urllib.request.urlopen(scrape, timeout=10) as answer:
                    (logs / "metrics.txt").write_bytes(answer.read())
        finally:
            for process in (operator, kubesim):
                if process is not None:
                    process.terminate()
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        process.wait(10)
                    if process.poll() is None:
                        process.kill()
    for line in result:
        print(json.dumps(line))
    return 0


if __name__ == "__main__":
    sys.exit(main())
