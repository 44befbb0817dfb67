"""Operator admission throughput: 5,000 gated pods across 100 leaf queues, on kubesim or on the
real control plane (``--backend real``: kube-apiserver, etcd, kube-controller-manager,
kube-scheduler and kwok from ``make controlplane``).

Runs the backend and ``queuetree operator`` as separate processes (as in a cluster: no shared
interpreter, no shared GIL), then, from this driver, with a watch recording when each pod is
first seen without gates, bound to a node, and explained:

1. creates 10 parent queues with 10 leaves each, with room for every pod;
2. burst: creates 5,000 gated pods (the gate set at creation, as the webhook would), 32 requests
   in flight: the throughput while kubesim also serves the creations, whose latencies include
   the backlog;
3. paced: 5,000 more at ``--paced-rate`` (500 a second on the real backend, 150 on kubesim):
   the latency of a steady load;
4. release: 5,000 gated pods under a parent whose capability admits none; once the operator has
   explained why each is held, one patch lifts the capability: the operator's own ungating
   throughput (a capacity increase or a failover with a backlog), against the raw PATCH rate;
5. the API server's raw pod PATCH rate in the same run, with as many requests in flight as the
   operator has gate workers: a merge patch of a label (the cheapest pod write) and a JSON
   patch of the gate removal's shape (two tests and one change, what the operator sends), both
   from aiohttp, and the JSON patch again through the operator's own write path
   (``kube.AsyncKube``), the client it admits with; each over two halves of the pods, in
   opposite orders (:func:`raw_rates`);
6. on the real backend, kube-scheduler's bind rate in the same run: pods created without gates
   in one burst, from the first creation to the last binding.

Prints one JSON object per phase (``--phases`` chooses): pods ungated per second (from the first
creation, or the release, to the last gate removal), the p50/p99 latency from creation (or the
release) to gate removal, the creation rate, the raw rates and, for the burst and the release,
the ratios to them; for the release, how long after its creation each held pod was explained;
the operator's CPU time (user plus system, from /proc) per pod of the phase, and how many
admission cycles it ran in the phase, with their mean wall time (from its ``/metrics``); for
the burst and the paced stream, the driver's own CPU time per pod, which on a small machine is
taken from the API server and the operator (so the driver decodes with orjson and runs without
the cyclic collector, on the operator's event loop).
On kubesim the simulated scheduler and kubelet are off, so nothing but the operator writes pods
while it is measured; on the real backend kube-scheduler binds the admitted pods and kwok runs
them, as in a cluster. Targets (issues 6 and 16): burst ratio >= 0.7 and at least the bind
rate, paced p99 < 1 s at 500 pods a second, every held pod explained within 10 s; each line
says whether its phase meets them (``meets_target``). Nothing asserts: a benchmark measures.
``--keep-logs DIR`` keeps the logs and the operator's metrics (DIR new or empty: on the real
backend the control plane's work directory, etcd's data among it, goes there too).
``--operator-tree DIR`` runs the operator from another source tree (a git worktree of the commit
to compare with: before and after on the same machine, with the same driver); it is run from
that directory, since ``python -m`` puts the working directory ahead of ``PYTHONPATH``.
``--mark-dir DIR`` touches ``DIR/<phase>.start`` and ``DIR/<phase>.end`` around each phase, so
that a profiler can be attached for the phase alone.

    .venv/bin/python benchmarks/bench_operator.py [--backend kubesim|real] [--pods 5000]
        [--workers 16] [--phases burst,paced,release,bind] [--paced-rate 500]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import gc
import json
import os
import pathlib
import ssl as ssl_
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from typing import Any

import aiohttp
import orjson
import uvloop
import yaml
from prometheus_client.parser import text_string_to_metric_families

from controlplane.processes import free_port

ROOT = pathlib.Path(__file__).resolve().parents[1]
GATE = "scheduling.volcano.sh/queue-allocation-gate"
QUEUES = "/apis/scheduling.volcano.sh/v1beta1/queues"
PODS = "/api/v1/namespaces/default/pods"
EXPLANATION = "scheduling.queuetree.io/admission-reason"
PROFILE = (
    ["-m", "cProfile", "-o", os.environ["BENCH_PROFILE"]] if os.environ.get("BENCH_PROFILE") else []
)


def start(
    args: list[str], *, env: dict[str, str], log: pathlib.Path, cwd: pathlib.Path | None = None
) -> subprocess.Popen[bytes]:
    stream = log.open("wb")
    return subprocess.Popen(args, env=env, cwd=cwd, stdout=stream, stderr=subprocess.STDOUT)


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of process ``pid`` so far, from /proc (Linux)."""
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # utime and stime are fields 14 and 15 of proc(5); the split drops the first two.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    """Resident memory of process ``pid`` now, in MiB, from /proc (Linux)."""
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    raise SystemExit(f"/proc/{pid}/status has no VmRSS")


def mark(directory: pathlib.Path | None, name: str) -> None:
    """Touch ``directory/name`` (``--mark-dir``): a phase starts or ends."""
    if directory is not None:
        (directory / name).touch()


CYCLES = "queuetree_cycle_duration_seconds"


async def cycle_totals(session: aiohttp.ClientSession, url: str) -> tuple[float, float]:
    """How many admission cycles the operator has run, and their wall time in seconds, from its
    ``/metrics``."""
    async with session.get(url) as answer:
        text = await answer.text()
    for family in text_string_to_metric_families(text):
        if family.name == CYCLES:
            samples = {sample.name: sample.value for sample in family.samples}
            return samples[f"{CYCLES}_count"], samples[f"{CYCLES}_sum"]
    raise SystemExit(f"{url} has no {CYCLES}")


def wait_file(path: pathlib.Path, *, deadline: float = 30.0) -> str:
    limit = time.monotonic() + deadline
    while not path.exists() or not path.read_text().strip():
        if time.monotonic() > limit:
            raise SystemExit(f"{path} was not written in time")
        time.sleep(0.05)
    return path.read_text().strip()


@dataclasses.dataclass(frozen=True)
class Target:
    """How the driver reaches the API server: kubesim's bearer token over HTTP, or the real
    control plane's admin client certificate over HTTPS."""

    backend: str
    url: str
    kubeconfig: pathlib.Path
    headers: dict[str, str]
    ssl: ssl_.SSLContext | None = None


class Api:
    def __init__(self, session: aiohttp.ClientSession, target: Target) -> None:
        self.session = session
        self.url = target.url
        self.headers = target.headers
        self.ssl = target.ssl

    async def call(
        self, method: str, path: str, body: Any = None, *, content_type: str = "application/json"
    ) -> tuple[int, Any]:
        headers = {**self.headers, "Content-Type": content_type}
        async with self.session.request(
            method,
            self.url + path,
            data=orjson.dumps(body) if body is not None else None,
            headers=headers,
            ssl=self.ssl if self.ssl is not None else True,
        ) as response:
            data = await response.read()
        try:
            return response.status, orjson.loads(data)
        except orjson.JSONDecodeError:  # "404 page not found" before a CRD is served
            return response.status, data.decode("utf-8", "replace")


@dataclasses.dataclass
class Seen:
    """When the watch first saw each pod (by name) without gates, bound, and explained."""

    ungated: dict[str, float] = dataclasses.field(default_factory=dict)
    bound: dict[str, float] = dataclasses.field(default_factory=dict)
    explained: dict[str, float] = dataclasses.field(default_factory=dict)


async def until(probe: Any, *, deadline: float, what: str) -> None:
    limit = time.monotonic() + deadline
    while not await probe():
        if time.monotonic() > limit:
            raise SystemExit(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def cycle_figures(after: tuple[float, float], before: tuple[float, float]) -> dict[str, Any]:
    """The admission cycles of one phase: how many, and their mean wall time."""
    count = after[0] - before[0]
    seconds = after[1] - before[1]
    return {
        "cycles": int(count),
        "cycle_mean_ms": round(1000 * seconds / count, 2) if count else None,
    }


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[int(fraction * (len(ordered) - 1))]


async def measure(
    target: Target,
    *,
    pods: int,
    workers: int,
    leaves: int,
    paced_rate: float,
    operator_pid: int,
    metrics_url: str,
    phases: frozenset[str] = frozenset({"burst", "paced", "release"}),
    marks: pathlib.Path | None = None,
) -> list[dict[str, Any]]:
    async with aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=max(64, CREATE_IN_FLIGHT + 16)),
        timeout=aiohttp.ClientTimeout(total=60),
    ) as session:
        api = Api(session, target)
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
        seen = Seen()
        ungated = seen.ungated
        _, listing = await api.call("GET", PODS)
        watch = asyncio.create_task(watch_pods(api, listing["metadata"]["resourceVersion"], seen))
        results = []
        all_created: list[str] = []
        # A burst (pods as fast as 32 concurrent POSTs go: the throughput), then a paced stream
        # below the raw PATCH rate (the latency a steady load sees, without a backlog).
        for mode, rate in (("burst", None), ("paced", paced_rate)):
            if mode not in phases:
                continue
            cpu_before = cpu_seconds(operator_pid)
            driver_before = time.process_time()
            cycles_before = await cycle_totals(session, metrics_url)
            mark(marks, f"{mode}.start")
            created = await create_pods(api, f"{mode}-", pods, names, rate=rate)
            all_created.extend(created)

            async def all_ungated(created: dict[str, float] = created) -> bool:
                return all(name in ungated for name in created)

            await until(all_ungated, deadline=600, what=f"every gate of the {mode} removed")
            mark(marks, f"{mode}.end")
            cpu = cpu_seconds(operator_pid) - cpu_before
            driver_cpu = time.process_time() - driver_before
            cycles = cycle_figures(await cycle_totals(session, metrics_url), cycles_before)
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
                    "latency_p99_seconds": round(percentile(latencies, 0.99), 4),
                    "created_per_second": round(pods / (max(created.values()) - first + 1e-9), 1),
                    "operator_cpu_ms_per_pod": round(1000 * cpu / pods, 3),
                    "operator_rss_mib": rss_mib(operator_pid),
                    "driver_cpu_ms_per_pod": round(1000 * driver_cpu / pods, 3),
                    **cycles,
                    "backend": target.backend,
                    **({"paced_rate": rate} if rate is not None else {}),
                }
            )
        if "release" in phases:
            created = await create_held_pods(api, seen, pods, leaves=leaves)
            explained = [seen.explained[name] - created[name] for name in created]
            all_created.extend(created)
            released = time.monotonic()
            mark(marks, "release.start")
            cpu_before = cpu_seconds(operator_pid)
            cycles_before = await cycle_totals(session, metrics_url)
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
            mark(marks, "release.end")
            cpu = cpu_seconds(operator_pid) - cpu_before
            cycles = cycle_figures(await cycle_totals(session, metrics_url), cycles_before)
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
                    "latency_p99_seconds": round(percentile(latencies, 0.99), 4),
                    "explained_p50_seconds": round(statistics.median(explained), 4),
                    "explained_p99_seconds": round(percentile(explained, 0.99), 4),
                    "explained_max_seconds": round(max(explained), 4),
                    "held_created_per_second": round(
                        pods / (max(created.values()) - min(created.values()) + 1e-9), 1
                    ),
                    "operator_cpu_ms_per_pod": round(1000 * cpu / pods, 3),
                    "operator_rss_mib": rss_mib(operator_pid),
                    **cycles,
                    "backend": target.backend,
                }
            )
        bind_rate = None
        if "bind" in phases and target.backend == "real":
            bind_rate, created_rate = await scheduler_bind_rate(api, seen, pods)
            results.append(
                {
                    "benchmark": "scheduler_bind",
                    "pods": pods,
                    "bound_per_second": round(bind_rate, 1),
                    "created_per_second": round(created_rate, 1),
                    "create_in_flight": CREATE_IN_FLIGHT,
                    "backend": target.backend,
                }
            )
        watch.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watch
        raw_rate, raw_json_rate, raw_client_rate = await raw_rates(
            api, target, sorted(all_created)[:pods], workers=workers
        )
        for result in results:
            result["raw_patch_per_second"] = round(raw_rate, 1)
            result["raw_json_patch_per_second"] = round(raw_json_rate, 1)
            result["raw_client_json_patch_per_second"] = round(raw_client_rate, 1)
            if bind_rate is not None:
                result["bind_per_second"] = round(bind_rate, 1)
        # The burst and the release measure throughput; the paced stream is bounded by its
        # arrival rate.
        for result in results:
            if result["benchmark"] in ("operator_ungate_burst", "operator_ungate_release"):
                result["ratio_to_raw_patch"] = round(result["ungated_per_second"] / raw_rate, 3)
                result["ratio_to_raw_json_patch"] = round(
                    result["ungated_per_second"] / raw_json_rate, 3
                )
                result["ratio_to_raw_client_json_patch"] = round(
                    result["ungated_per_second"] / raw_client_rate, 3
                )
                if bind_rate is not None:
                    result["ratio_to_bind"] = round(result["ungated_per_second"] / bind_rate, 3)
        for result in results:
            result["meets_target"] = meets_target(result)
        return results


def meets_target(result: dict[str, Any]) -> bool | None:
    """Whether a phase's figures meet issue 16's target (None: the phase has none): burst and
    release at least :data:`TARGET_RATIO` of the raw JSON PATCH rate of the operator's own write
    path and at least the bind rate where measured; the release's held pods all
    explained within :data:`TARGET_EXPLAINED` seconds; the paced stream at
    :data:`PACED_RATE` with a p99 under :data:`TARGET_PACED_P99` seconds."""
    name = result["benchmark"]
    if name in ("operator_ungate_burst", "operator_ungate_release"):
        fast = result["ratio_to_raw_client_json_patch"] >= TARGET_RATIO and (
            result.get("ratio_to_bind", 1.0) >= 1.0
        )
        if name == "operator_ungate_release":
            return fast and result["explained_max_seconds"] <= TARGET_EXPLAINED
        return bool(fast)
    if name == "operator_ungate_paced":
        return bool(
            result["paced_rate"] >= PACED_RATE["real"]
            and result["latency_p99_seconds"] < TARGET_PACED_P99
        )
    return None


async def scheduler_bind_rate(api: Api, seen: Seen, count: int) -> tuple[float, float]:
    """kube-scheduler's bindings per second: ``count`` pods without gates created in one burst,
    from the first creation to the last binding the watch sees; and the creations per second
    of that burst (kube-scheduler binding beside them)."""
    created = await create_pods(api, "bind-", count, [], rate=None, gated=False)

    async def all_bound() -> bool:
        return all(name in seen.bound for name in created)

    await until(all_bound, deadline=600, what="every pod bound by kube-scheduler")
    first = min(created.values())
    bound = count / (max(seen.bound[name] for name in created) - first)
    return bound, count / (max(created.values()) - first + 1e-9)


RELEASE_PARENT = "held"
CREATE_IN_FLIGHT = 32
"""Pod creations in flight in a burst (one connection each; ``--create-in-flight``)."""


async def create_held_pods(api: Api, seen: Seen, count: int, *, leaves: int) -> dict[str, float]:
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
        return all(name in seen.explained for name in created)

    await until(explained, deadline=600, what="every held pod explained")
    return created


async def create_pods(
    api: Api,
    prefix: str,
    count: int,
    queues: list[str],
    *,
    rate: float | None,
    gated: bool = True,
) -> dict[str, float]:
    """Create ``count`` pods, gated round-robin over ``queues`` (or, ``gated`` False, plain pods
    that no queue holds); name -> when its POST returned.

    ``rate`` None: :data:`CREATE_IN_FLIGHT` requests in flight, as fast as the server takes
    them; otherwise one pod every ``1/rate`` seconds (started on schedule, whatever the previous
    answer's latency).
    """
    created: dict[str, float] = {}
    semaphore = asyncio.Semaphore(CREATE_IN_FLIGHT)

    async def create(index: int) -> None:
        name = f"{prefix}{index}"
        manifest = pod(name, queues[index % len(queues)]) if gated else plain_pod(name)
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


async def watch_pods(api: Api, version: str, seen: Seen) -> None:
    """Record when each pod is first seen without gates, bound to a node, and explained
    (restarting the watch if it ends)."""
    while True:
        async with api.session.get(
            f"{api.url}{PODS}",
            params={"watch": "true", "resourceVersion": version, "allowWatchBookmarks": "true"},
            headers=api.headers,
            ssl=api.ssl if api.ssl is not None else True,
            timeout=aiohttp.ClientTimeout(total=None),
        ) as response:
            async for line in response.content:
                event = orjson.loads(line)
                obj = event["object"]
                version = obj.get("metadata", {}).get("resourceVersion", version)
                if event["type"] not in ("ADDED", "MODIFIED"):
                    continue
                name = obj["metadata"]["name"]
                now = time.monotonic()
                spec = obj.get("spec", {})
                if name not in seen.ungated and not spec.get("schedulingGates"):
                    seen.ungated[name] = now
                if name not in seen.bound and spec.get("nodeName"):
                    seen.bound[name] = now
                annotations = obj["metadata"].get("annotations") or {}
                if name not in seen.explained and EXPLANATION in annotations:
                    seen.explained[name] = now


async def raw_rates(
    api: Api, target: Target, sample: list[str], *, workers: int
) -> tuple[float, float, float]:
    """The merge, JSON and client raw PATCH rates (:func:`raw_patch_rate`,
    :func:`raw_client_patch_rate`), each over both halves of ``sample``: the first half in the
    order merge, JSON, client, the second in the reverse order. After the phases kube-scheduler
    and kwok are still placing pods, so the API server gets faster while the rates are taken;
    measured once each, in one order, the last rate read up to half again as high as the first.
    Each rate is the pods of both halves over the time they took."""
    halves = (sample[: len(sample) // 2], sample[len(sample) // 2 :])
    seconds = {"merge": 0.0, "json": 0.0, "client": 0.0}
    for half, order in zip(
        halves, (("merge", "json", "client"), ("client", "json", "merge")), strict=True
    ):
        for kind in order:
            if kind == "client":
                rate = await raw_client_patch_rate(target, half, workers=workers)
            else:
                rate = await raw_patch_rate(api, half, workers=workers, kind=kind)
            seconds[kind] += len(half) / rate
    return (
        len(sample) / seconds["merge"],
        len(sample) / seconds["json"],
        len(sample) / seconds["client"],
    )


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


async def raw_client_patch_rate(target: Target, names: list[str], *, workers: int) -> float:
    """The JSON patch of :func:`raw_patch_rate` through the operator's own write path
    (:class:`kube.AsyncKube` on a kubernetes-asyncio client set up as the operator sets it up:
    :func:`kube.tune_client`, one connection per worker, no rate limit), ``workers`` in flight.
    The first ``workers`` patches, which open the connections (the other rates reuse the
    driver's), are not timed; nor is closing the client."""
    from kubernetes_asyncio import client, config

    from queuetree.operator import kube

    configuration = client.Configuration()
    await config.load_kube_config(
        config_file=str(target.kubeconfig), client_configuration=configuration
    )
    configuration.connection_pool_maxsize = workers
    warm, timed = names[:workers], names[workers:]
    queue: asyncio.Queue[str] = asyncio.Queue()
    for name in timed:
        queue.put_nowait(name)
    async with client.ApiClient(configuration) as api_client:
        kube.tune_client(api_client)
        writes = kube.AsyncKube(api_client, limiter=kube.RateLimiter(qps=0, burst=1))

        async def patch(name: str) -> None:
            body = [
                {"op": "test", "path": "/metadata/name", "value": name},
                {"op": "test", "path": "/metadata/namespace", "value": "default"},
                {"op": "add", "path": "/metadata/labels/bench-client", "value": "raw"},
            ]
            await writes.patch_pod("default", name, body)

        async def work() -> None:
            while not queue.empty():
                await patch(queue.get_nowait())

        await asyncio.gather(*(patch(name) for name in warm))
        started = time.monotonic()
        await asyncio.gather(*(work() for _ in range(workers)))
        return len(timed) / (time.monotonic() - started)


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
            # A label from the start: the raw JSON patches add theirs under it, in any order.
            "labels": {"app": "bench"},
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


def plain_pod(name: str) -> dict[str, Any]:
    """A pod no queue holds (not opted in), for kube-scheduler's bind rate."""
    manifest = pod(name, "default")
    manifest["metadata"]["annotations"] = {}
    del manifest["spec"]["schedulingGates"]
    return manifest


PACED_RATE = {"real": 500.0, "kubesim": 150.0}
"""The paced stream's default rate per backend (issue 16's target is set at 500 pods a second)."""
TARGET_RATIO = 0.7
"""Burst and release: ungated per second over the raw PATCH rate of the same client library."""
TARGET_PACED_P99 = 1.0
TARGET_EXPLAINED = 10.0
"""Seconds from creation within which every held pod of the release is explained."""

NODES = 10
NODE = {"cpu": "64", "memory": "256Gi", "pods": "5000"}
"""Room for every pod of every phase (on the real backend they are bound and keep running)."""


def start_kubesim(tmp: pathlib.Path, logs: pathlib.Path, env: dict[str, str]) -> tuple[Target, Any]:
    nodes = [
        f"--node=node-{i}=cpu={NODE['cpu']},memory={NODE['memory']},pods={NODE['pods']}"
        for i in range(NODES)
    ]
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

    def stop() -> None:
        kubesim.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            kubesim.wait(10)
        if kubesim.poll() is None:
            kubesim.kill()

    try:
        port = wait_file(tmp / "port")
        wait_file(tmp / "kubeconfig")
    except BaseException:
        stop()
        raise
    target = Target(
        backend="kubesim",
        url=f"http://127.0.0.1:{port}",
        kubeconfig=tmp / "kubeconfig",
        headers={"Authorization": "Bearer admin"},
    )
    return target, stop


def start_real(tmp: pathlib.Path, logs: pathlib.Path) -> tuple[Target, Any]:
    from controlplane import cluster

    nodes_file = tmp / "nodes.yaml"
    nodes_file.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "List",
                "items": [
                    {
                        "apiVersion": "v1",
                        "kind": "Node",
                        "metadata": {"name": f"node-{i}"},
                        "status": {"allocatable": dict(NODE)},
                    }
                    for i in range(NODES)
                ],
            }
        )
    )
    running = cluster.start(
        cluster.Options(workdir=logs / "controlplane", nodes_files=(nodes_file,)),
        log=lambda line: print(line, file=sys.stderr),
    )
    files = running.files
    context = ssl_.create_default_context(cafile=str(files.ca_cert))
    context.load_cert_chain(str(files.client_cert("admin")), str(files.client_key("admin")))
    target = Target(
        backend="real", url=running.url, kubeconfig=running.kubeconfig, headers={}, ssl=context
    )
    return target, running.stop


def main() -> int:
    global CREATE_IN_FLIGHT
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--backend",
        choices=("kubesim", "real"),
        default="kubesim",
        help="kubesim (default) or the real control plane of make controlplane",
    )
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--leaves", type=int, default=100)
    parser.add_argument(
        "--paced-rate",
        type=float,
        default=None,
        help="pods per second of the paced stream (default: 500 on the real backend, the "
        "target's rate; 150 on kubesim, which cannot create 500 pods a second)",
    )
    parser.add_argument(
        "--phases",
        default="burst,paced,release,bind",
        help="which phases to run, comma-separated (burst, paced, release; bind: the real "
        "backend's kube-scheduler)",
    )
    parser.add_argument(
        "--keep-logs",
        metavar="DIR",
        help="write the backend's and the operator's logs into DIR (new or empty)",
    )
    parser.add_argument(
        "--operator-tree",
        metavar="DIR",
        type=pathlib.Path,
        help="run the operator from this source tree (a git worktree of another commit)",
    )
    parser.add_argument(
        "--mark-dir",
        metavar="DIR",
        type=pathlib.Path,
        help="touch DIR/<phase>.start and DIR/<phase>.end around each phase",
    )
    parser.add_argument(
        "--create-in-flight",
        type=int,
        default=CREATE_IN_FLIGHT,
        help=f"pod creations in flight in a burst (default {CREATE_IN_FLIGHT})",
    )
    args = parser.parse_args()
    CREATE_IN_FLIGHT = args.create_in_flight
    tree = args.operator_tree.resolve() if args.operator_tree else None
    kept = pathlib.Path(args.keep_logs) if args.keep_logs else None
    if kept is not None and kept.is_dir() and any(kept.iterdir()):
        # The real backend's work directory (etcd's data among it) goes there: an earlier
        # run's would be started again, and creating the nodes would fail.
        parser.error(f"--keep-logs={kept}: the directory is not empty; name a new one")
    if tree is not None and not (tree / "queuetree" / "__main__.py").is_file():
        parser.error(f"--operator-tree={args.operator_tree}: no queuetree/__main__.py there")
    # The driver shares the machine with the API server and the operator: its cyclic garbage
    # collector (about a seventh of its CPU, walking every recorded event) would be taken
    # from them. What it allocates is freed by reference counting.
    gc.disable()
    with tempfile.TemporaryDirectory(prefix="bench-operator-") as raw:
        tmp = pathlib.Path(raw)
        logs = pathlib.Path(args.keep_logs) if args.keep_logs else tmp
        logs.mkdir(parents=True, exist_ok=True)
        metrics_port = free_port()
        env = {**os.environ, "KUBECACHEDIR": str(tmp / "cache")}
        if args.backend == "real":
            target, stop_backend = start_real(tmp, logs)
        else:
            target, stop_backend = start_kubesim(tmp, logs, env)
        operator = None
        try:
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
                env={
                    **env,
                    "KUBECONFIG": str(target.kubeconfig),
                    **({"PYTHONPATH": str(tree)} if tree is not None else {}),
                },
                log=logs / "operator.log",
                cwd=tree,
            )
            # The operator's event loop, so that the raw client rate is the same client's.
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                result = runner.run(
                    measure(
                        target,
                        pods=args.pods,
                        workers=args.workers,
                        leaves=args.leaves,
                        paced_rate=args.paced_rate or PACED_RATE[args.backend],
                        operator_pid=operator.pid,
                        metrics_url=f"http://127.0.0.1:{metrics_port}/metrics",
                        phases=frozenset(args.phases.split(",")),
                        marks=args.mark_dir,
                    )
                )
            if args.keep_logs:
                scrape = f"http://127.0.0.1:{metrics_port}/metrics"
                with urllib.request.urlopen(scrape, timeout=10) as answer:
                    (logs / "metrics.txt").write_bytes(answer.read())
        finally:
            if operator is not None:
                operator.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    operator.wait(10)
                if operator.poll() is None:
                    operator.kill()
            stop_backend()
    for line in result:
        if tree is not None:
            line["operator_tree"] = str(tree)
        print(json.dumps(line))
    return 0


if __name__ == "__main__":
    sys.exit(main())
