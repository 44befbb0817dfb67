"""queuetree beside Kueue: the same scenarios through each, on the same real control plane and
kwok nodes (issue 32 item 3; ``make bench-peers``).

Each run starts a fresh control plane (:mod:`controlplane.cluster`: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, kwok) with the scenario's nodes, then one of the two
systems, never both:

- **queuetree**: the sandbox stack (:mod:`queuetree.sandbox.stack`): its webhook and operator as
  local processes with their ServiceAccounts' tokens; the operator with ``--kube-api-qps=1000
  --kube-api-burst=1000 --gate-removal-worker-num=16`` (:data:`QUEUETREE_OPERATOR_FLAGS`), the
  webhook checking its certificates at its default interval (:data:`QUEUETREE_WEBHOOK_FLAGS`);
- **kueue**: Kueue v0.17.0 (:mod:`controlplane.kueue`, ``make controlplane-peers``), its pod
  integration on, its client at QPS/burst 1000/1000 (Kueue v0.20's defaults, #15206; v0.17.0's
  own are lower), as its maintainers tune it for throughput.

The driver (this process, one asyncio loop) creates the queues, then the pods as a user would:
through each system's webhook, which adds its gate (``scheduling.volcano.sh/queue-name`` and the
opt-in annotation for queuetree; the label ``kueue.x-k8s.io/queue-name`` for Kueue), at most
:data:`CREATE_IN_FLIGHT` creations in flight. A watch records when each pod is first seen
without any scheduling gate (admitted), Running (kwok's stage), and deleted (preempted).

Scenarios (sizes at ``--scale 1``; the tree is 10 departments of 10 leaves under one root, a
Cohort tree with ClusterQueues as leaves and one LocalQueue each for Kueue):

- *burst*: 5,000 pods of 100m CPU across the 100 leaves, each leaf with room for half of its
  pods; once half are admitted, every leaf's limit is doubled (100 patches in flight at once):
  the time from the raise to every pod admitted;
- *trickle*: 50 pods a second for 60 s, room for all: the latency of a steady load;
- *gangs*: 500 groups of 4 pods (queuetree: a PodGroup with ``minMember: 4`` each; Kueue: pod
  groups by ``kueue.x-k8s.io/pod-group-name`` and ``pod-group-total-count``), room for all;
- *reclaim*: a borrower fills the cluster (500 pods: its own share and the lender's unused
  share), then the lender's 250 pods arrive: the time until the lender's pods all run.

The queue figures map as docs/benchmarks.md explains (queuetree ``capability`` = Kueue
``nominalQuota + borrowingLimit``; ``deserved`` = ``nominalQuota``; ``guarantee`` =
``nominalQuota - lendingLimit``).

Figures per run: pods admitted per second (first creation to last admission), latency from
creation to admitted and to Running (p50, p99), the controllers' CPU ms per admitted pod (user
plus system from /proc: queuetree's webhook and operator together, Kueue's one process, which
serves its webhooks too), their peak RSS (VmHWM, summed), API requests per admitted pod (the
API server's audit log, counted by the controllers' users: kube-apiserver's
``apiserver_request_total`` has no user or user-agent label), the raise's and the reclaim's
times. Runs alternate between the systems (the order flips each round); each scenario's
summary line gives the median and range of every figure per system and the ratio of the
medians queuetree/Kueue (below 1 is better for queuetree on every figure except
``admitted_per_second``).

    .venv/bin/python benchmarks/bench_peers.py [--scale 1] [--runs 3]
        [--scenarios burst,trickle,gangs,reclaim] [--systems queuetree,kueue]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import gc
import json
import math
import os
import pathlib
import ssl as ssl_
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import orjson
import uvloop
import yaml

from controlplane import cluster, kueue
from queuetree.sandbox import stack as sandbox

NAMESPACE = "bench"
CREATE_IN_FLIGHT = 32
POD_CPU_MILLI = 100
OPT_IN = "scheduling.volcano.sh/queue-allocation-gate"
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
KUEUE_GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
KUEUE_GROUP_COUNT = "kueue.x-k8s.io/pod-group-total-count"
FLAVOR = "bench-flavor"
ROOT_COHORT = "bench"
QUEUETREE_OPERATOR_FLAGS = (
    "--kube-api-qps=1000",
    "--kube-api-burst=1000",
    "--gate-removal-worker-num=16",
)
"""queuetree's operator tuned for throughput like Kueue (client 1000/1000; bench_operator's
gate workers)."""
QUEUETREE_WEBHOOK_FLAGS = ("--cert-check-interval=10",)
"""The webhook checks its certificate Secret and caBundles at its default interval, not the
sandbox's 2 s (there for the e2e suite's rotations): each check is three GETs, which the API
request figure counts."""
CONTROLLER_USERS = {
    "queuetree": (sandbox.OPERATOR.username, sandbox.WEBHOOK.username),
    "kueue": (f"system:serviceaccount:{kueue.NAMESPACE}:{kueue.SERVICE_ACCOUNT}",),
}
TRICKLE_RATE = 50.0
TRICKLE_SECONDS = 60.0
GROUP_SIZE = 4
DEADLINE = 900.0
"""Seconds any wait of a run may take before the run fails."""
BIG_NODE = {"cpu": "64", "memory": "256Gi", "pods": "5000"}
BIG_NODES = 10


# ------------------------------------------------------------------ sizes


@dataclasses.dataclass(frozen=True)
class Sizes:
    """The scenarios' sizes at a scale (1: the issue's)."""

    depts: int
    leaves_per_dept: int
    burst_pods_per_leaf: int
    trickle_seconds: float
    groups: int
    reclaim_lender_pods: int

    @classmethod
    def at(cls, scale: float) -> Sizes:
        side = max(2, round(10 * math.sqrt(scale)))
        leaves = side * side
        per_leaf = max(2, 2 * round(5000 * scale / leaves / 2))
        return cls(
            depts=side,
            leaves_per_dept=side,
            burst_pods_per_leaf=per_leaf,
            trickle_seconds=max(5.0, TRICKLE_SECONDS * scale),
            groups=max(4, round(500 * scale)),
            reclaim_lender_pods=max(4, round(250 * scale)),
        )

    @property
    def leaves(self) -> list[tuple[str, str]]:
        """(leaf, department) pairs."""
        return [
            (f"team-{d}-{i}", f"dept-{d}")
            for d in range(self.depts)
            for i in range(self.leaves_per_dept)
        ]


def milli(count: int) -> str:
    return f"{count * POD_CPU_MILLI}m"


# ------------------------------------------------------------------ queue manifests


def queuetree_queue(name: str, parent: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"parent": parent, **spec},
    }


def kueue_tree(sizes: Sizes, leaf_spec: Callable[[str], dict[str, Any]]) -> list[dict[str, Any]]:
    """A ResourceFlavor, the Cohort tree (root, departments), one ClusterQueue per leaf with
    ``leaf_spec(leaf)`` as its flavor's cpu resource, and a LocalQueue per leaf."""
    manifests: list[dict[str, Any]] = [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": FLAVOR},
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Cohort",
            "metadata": {"name": ROOT_COHORT},
        },
    ]
    for d in range(sizes.depts):
        manifests.append(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "Cohort",
                "metadata": {"name": f"dept-{d}"},
                "spec": {"parentName": ROOT_COHORT},
            }
        )
    for leaf, dept in sizes.leaves:
        manifests += kueue_leaf(leaf, dept, leaf_spec(leaf))
    return manifests


def kueue_leaf(
    leaf: str, cohort: str, cpu: dict[str, Any], preemption: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    spec: dict[str, Any] = {
        "cohortName": cohort,
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu"],
                "flavors": [{"name": FLAVOR, "resources": [{"name": "cpu", **cpu}]}],
            }
        ],
    }
    if preemption:
        spec["preemption"] = preemption
    return [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": leaf},
            "spec": spec,
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": leaf, "namespace": NAMESPACE},
            "spec": {"clusterQueue": leaf},
        },
    ]


def queuetree_tree(
    sizes: Sizes, leaf_spec: Callable[[str], dict[str, Any]]
) -> list[dict[str, Any]]:
    manifests = [queuetree_queue(f"dept-{d}", "root") for d in range(sizes.depts)]
    manifests += [queuetree_queue(leaf, dept, **leaf_spec(leaf)) for leaf, dept in sizes.leaves]
    return manifests


# ------------------------------------------------------------------ pods


def pod(system: str, name: str, queue: str, *, group: str | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": NAMESPACE}
    if system == "queuetree":
        annotations = {OPT_IN: "true"}
        if group is None:
            annotations[QUEUE_ANNOTATION] = queue
        else:
            annotations[GROUP_ANNOTATION] = group
        metadata["annotations"] = annotations
    else:
        metadata["labels"] = {kueue.QUEUE_LABEL: queue}
        if group is not None:
            metadata["labels"][KUEUE_GROUP_LABEL] = group
            metadata["annotations"] = {KUEUE_GROUP_COUNT: str(GROUP_SIZE)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {
            # Preempted pods go at once (kwok's pod-delete-after-grace waits the grace out).
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {"requests": {"cpu": milli(1)}},
                }
            ],
        },
    }


def pod_group(name: str, queue: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"minMember": GROUP_SIZE, "queue": queue},
    }


# ------------------------------------------------------------------ the driver's API client


@dataclasses.dataclass
class Seen:
    """When the watch first saw each pod (by name) without gates, Running, and deleted."""

    admitted: dict[str, float] = dataclasses.field(default_factory=dict)
    running: dict[str, float] = dataclasses.field(default_factory=dict)
    deleted: dict[str, float] = dataclasses.field(default_factory=dict)


class Api:
    """The admin's client certificate over HTTPS, :data:`CREATE_IN_FLIGHT` creations at once."""

    def __init__(self, session: aiohttp.ClientSession, url: str, context: ssl_.SSLContext):
        self.session = session
        self.url = url
        self.ssl = context
        self.creating = asyncio.Semaphore(CREATE_IN_FLIGHT)
        self.post_seconds: dict[str, float] = {}
        """How long each successful creation's POST took (the webhooks' share is in it)."""

    async def call(
        self, method: str, path: str, body: Any = None, *, content_type: str = "application/json"
    ) -> tuple[int, Any]:
        async with self.session.request(
            method,
            self.url + path,
            data=orjson.dumps(body) if body is not None else None,
            headers={"Content-Type": content_type},
            ssl=self.ssl,
        ) as response:
            data = await response.read()
        try:
            return response.status, orjson.loads(data)
        except orjson.JSONDecodeError:
            return response.status, data.decode("utf-8", "replace")

    async def create(self, path: str, body: dict[str, Any]) -> float:
        """POST ``body`` (retrying the moments a webhook or a CRD is not ready); when it
        returned."""
        deadline = time.monotonic() + 60
        while True:
            async with self.creating:
                posted = time.monotonic()
                status, answer = await self.call("POST", path, body)
            if status in (200, 201):
                now = time.monotonic()
                self.post_seconds[body["metadata"]["name"]] = now - posted
                return now
            if time.monotonic() > deadline:
                raise SystemExit(f"creating {body['metadata']['name']}: {status} {answer}")
            await asyncio.sleep(0.5)

    async def watch(self, seen: Seen) -> None:
        path = f"/api/v1/namespaces/{NAMESPACE}/pods"
        _, listing = await self.call("GET", path)
        version = listing["metadata"]["resourceVersion"]
        while True:
            async with self.session.get(
                self.url + path,
                params={"watch": "true", "resourceVersion": version},
                ssl=self.ssl,
                timeout=aiohttp.ClientTimeout(total=None),
            ) as response:
                async for line in response.content:
                    event = orjson.loads(line)
                    obj = event["object"]
                    metadata = obj.get("metadata", {})
                    version = metadata.get("resourceVersion", version)
                    name = metadata.get("name")
                    if name is None:
                        continue
                    now = time.monotonic()
                    if event["type"] == "DELETED" or metadata.get("deletionTimestamp"):
                        seen.deleted.setdefault(name, now)
                        continue
                    if name not in seen.admitted and not obj["spec"].get("schedulingGates"):
                        seen.admitted[name] = now
                    if name not in seen.running and obj.get("status", {}).get("phase") == "Running":
                        seen.running[name] = now


def path_of(manifest: dict[str, Any]) -> str:
    api_version, kind = manifest["apiVersion"], manifest["kind"]
    plural = {"Pod": "pods", "PodGroup": "podgroups"}[kind]
    prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    return f"{prefix}/namespaces/{manifest['metadata']['namespace']}/{plural}"


async def until(probe: Callable[[], bool], *, what: str, deadline: float = DEADLINE) -> float:
    limit = time.monotonic() + deadline
    while not probe():
        if time.monotonic() > limit:
            raise SystemExit(f"timed out after {deadline:g}s waiting for {what}")
        await asyncio.sleep(0.05)
    return time.monotonic()


# ------------------------------------------------------------------ the systems


@dataclasses.dataclass
class System:
    """One system under test on its fresh control plane."""

    name: str
    control_plane: cluster.Cluster
    pids: dict[str, int]
    """The controllers' processes by name (queuetree: webhook, operator; kueue: kueue)."""
    stop: Callable[[], object]

    def kubectl_apply(self, manifests: list[dict[str, Any]]) -> None:
        """Apply as the admin, retrying while a webhook warms up; then wait until every queue
        is ready to admit (queuetree: Open; Kueue: ClusterQueues and LocalQueues Active), so
        that no pod meets a queue its system has not taken in yet."""
        self._retry(("apply", "--server-side", "-f", "-"), yaml.safe_dump_all(manifests))
        if self.name == "queuetree":
            self._retry(
                ("wait", "--for=jsonpath={.status.state}=Open", "queues", "--all", "--timeout=8s")
            )
        else:
            self._retry(
                ("wait", "--for=condition=Active", "clusterqueues", "--all", "--timeout=8s")
            )
            self._retry(
                ("wait", "--for=condition=Active", "localqueues", "--all", "-A", "--timeout=8s")
            )

    def _retry(self, args: tuple[str, ...], input: str | None = None) -> None:
        limit = time.monotonic() + 120
        while True:
            done = self.control_plane.kubectl(*args, input=input)
            if done.returncode == 0:
                return
            if time.monotonic() > limit:
                raise SystemExit(f"kubectl {' '.join(args)} failed: {done.stderr}")
            time.sleep(1)


def nodes_file(directory: pathlib.Path, nodes: list[tuple[str, dict[str, str]]]) -> pathlib.Path:
    path = directory / "nodes.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "List",
                "items": [
                    {
                        "apiVersion": "v1",
                        "kind": "Node",
                        "metadata": {"name": name},
                        "status": {"allocatable": allocatable},
                    }
                    for name, allocatable in nodes
                ],
            }
        )
    )
    return path


def start_system(
    name: str, workdir: pathlib.Path, nodes: list[tuple[str, dict[str, str]]]
) -> System:
    nodes_path = nodes_file(workdir, nodes)
    log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    if name == "queuetree":
        running = sandbox.start(
            sandbox.Options(
                workdir=workdir / "stack",
                nodes_files=(nodes_path,),
                backend="real",
                operator_flags=QUEUETREE_OPERATOR_FLAGS,
                webhook_flags=QUEUETREE_WEBHOOK_FLAGS,
            )
        )
        assert running.control_plane is not None
        pids = {p.name: p.popen.pid for p in running.processes if p.name in ("webhook", "operator")}
        return System(name, running.control_plane, pids, running.stop)
    plane = cluster.start(
        cluster.Options(workdir=workdir / "controlplane", nodes_files=(nodes_path,)), log=log
    )
    try:
        peer = cluster.start_peer(plane, "kueue")
    except BaseException:
        plane.stop()
        raise
    return System(name, plane, {"kueue": peer.process.popen.pid}, plane.stop)


def cpu_seconds(pid: int) -> float:
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mib(pid: int) -> float:
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise SystemExit(f"/proc/{pid}/status has no VmHWM")


class Accounting:
    """The controllers' CPU and the API requests they made, from a starting point."""

    def __init__(self, system: System) -> None:
        self.system = system
        self.cpu = {name: cpu_seconds(pid) for name, pid in system.pids.items()}
        self.audit_offset = self._audit_size()

    def _audit_size(self) -> int:
        try:
            return self.system.control_plane.audit_file.stat().st_size
        except FileNotFoundError:
            return 0

    def figures(self, admitted: int) -> dict[str, Any]:
        cpu = {name: cpu_seconds(pid) - self.cpu[name] for name, pid in self.system.pids.items()}
        users = CONTROLLER_USERS[self.system.name]
        requests = 0
        with self.system.control_plane.audit_file.open("rb") as audit:
            audit.seek(self.audit_offset)
            for line in audit:
                with contextlib.suppress(orjson.JSONDecodeError):
                    if orjson.loads(line).get("user", {}).get("username") in users:
                        requests += 1
        return {
            "cpu_ms_per_admitted": round(1000 * sum(cpu.values()) / admitted, 3),
            "peak_rss_mib": round(sum(peak_rss_mib(pid) for pid in self.system.pids.values()), 1),
            # Per process, to tell the webhook's share from the controller's.
            "by_process": {
                name: {
                    "cpu_ms_per_admitted": round(1000 * cpu[name] / admitted, 3),
                    "peak_rss_mib": round(peak_rss_mib(pid), 1),
                }
                for name, pid in self.system.pids.items()
            },
            "api_requests_per_admitted": round(requests / admitted, 3),
        }


def latencies(
    names: list[str], start: dict[str, float] | float, seen: dict[str, float]
) -> dict[str, float]:
    values = sorted(seen[n] - (start[n] if isinstance(start, dict) else start) for n in names)
    return {"p50": round(percentile(values, 0.5), 3), "p99": round(percentile(values, 0.99), 3)}


def percentile(values: list[float], fraction: float) -> float:
    return values[int(fraction * (len(values) - 1))]


# ------------------------------------------------------------------ scenarios


async def create_pods(
    api: Api,
    system: str,
    names: list[str],
    queue_of: Callable[[int], str],
    *,
    rate: float | None = None,
    group_of: Callable[[int], str] | None = None,
) -> dict[str, float]:
    """Create the pods ``names`` (as fast as :data:`CREATE_IN_FLIGHT` allows, or one every
    ``1/rate`` seconds); name -> when its POST returned."""
    created: dict[str, float] = {}

    async def one(index: int) -> None:
        manifest = pod(
            system,
            names[index],
            queue_of(index),
            group=group_of(index) if group_of is not None else None,
        )
        created[names[index]] = await api.create(path_of(manifest), manifest)

    if rate is None:
        await asyncio.gather(*(one(i) for i in range(len(names))))
        return created
    tasks = []
    started = time.monotonic()
    for index in range(len(names)):
        delay = started + index / rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(index)))
    await asyncio.gather(*tasks)
    return created


def admission_figures(
    names: list[str], created: dict[str, float], seen: Seen, api: Api
) -> dict[str, Any]:
    first = min(created[n] for n in names)
    last = max(seen.admitted[n] for n in names)
    return {
        "admitted_per_second": round(len(names) / (last - first), 1),
        "created_per_second": round(
            len(names) / (max(created[n] for n in names) - first + 1e-9), 1
        ),
        "create_call_latency": latencies(names, 0.0, api.post_seconds),
        "admitted_latency": latencies(names, created, seen.admitted),
        "running_latency": latencies(names, created, seen.running),
    }


Scenario = Callable[[System, Api, Seen, Sizes], Awaitable[dict[str, Any]]]


async def burst(system: System, api: Api, seen: Seen, sizes: Sizes) -> dict[str, Any]:
    room = milli(sizes.burst_pods_per_leaf // 2)
    doubled = milli(sizes.burst_pods_per_leaf)
    leaves = [leaf for leaf, _ in sizes.leaves]
    if system.name == "queuetree":
        system.kubectl_apply(queuetree_tree(sizes, lambda leaf: {"capability": {"cpu": room}}))
    else:
        system.kubectl_apply(
            kueue_tree(sizes, lambda leaf: {"nominalQuota": room, "borrowingLimit": "0"})
        )
    count = sizes.burst_pods_per_leaf * len(leaves)
    names = [f"burst-{i}" for i in range(count)]
    accounting = Accounting(system)
    created = await create_pods(api, system.name, names, lambda i: leaves[i % len(leaves)])
    half = count // 2
    await until(lambda: len(seen.admitted) >= half, what=f"{half} pods admitted")
    # Nothing more may be admitted before the raise: wait a moment to see none is.
    await asyncio.sleep(2)
    early = [n for n in names if n in seen.admitted]
    if len(early) > half:
        raise SystemExit(f"{system.name}: {len(early)} pods admitted with room for {half}")
    raised = time.monotonic()

    async def raise_leaf(leaf: str) -> None:
        if system.name == "queuetree":
            path = f"/apis/scheduling.volcano.sh/v1beta1/queues/{leaf}"
            body: Any = {"spec": {"capability": {"cpu": doubled}}}
        else:
            path = f"/apis/kueue.x-k8s.io/v1beta2/clusterqueues/{leaf}"
            body = {
                "spec": {
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu"],
                            "flavors": [
                                {
                                    "name": FLAVOR,
                                    "resources": [
                                        {
                                            "name": "cpu",
                                            "nominalQuota": doubled,
                                            "borrowingLimit": "0",
                                        }
                                    ],
                                }
                            ],
                        }
                    ]
                }
            }
        status, answer = await api.call(
            "PATCH", path, body, content_type="application/merge-patch+json"
        )
        if status != 200:
            raise SystemExit(f"raising {leaf}: {status} {answer}")

    await asyncio.gather(*(raise_leaf(leaf) for leaf in leaves))
    all_admitted = await until(
        lambda: all(n in seen.admitted for n in names), what="every pod admitted after the raise"
    )
    await until(lambda: all(n in seen.running for n in names), what="every pod Running")
    late = [n for n in names if n not in early]
    return {
        "pods": count,
        "leaf_queues": len(leaves),
        "before_raise": admission_figures(early, created, seen, api),
        "raise_to_all_admitted_seconds": round(all_admitted - raised, 3),
        "after_raise_admitted_latency": latencies(late, raised, seen.admitted),
        **accounting.figures(count),
    }


async def trickle(system: System, api: Api, seen: Seen, sizes: Sizes) -> dict[str, Any]:
    count = round(TRICKLE_RATE * sizes.trickle_seconds)
    room = milli(count)
    leaves = [leaf for leaf, _ in sizes.leaves]
    if system.name == "queuetree":
        system.kubectl_apply(queuetree_tree(sizes, lambda leaf: {"capability": {"cpu": room}}))
    else:
        system.kubectl_apply(
            kueue_tree(sizes, lambda leaf: {"nominalQuota": room, "borrowingLimit": "0"})
        )
    names = [f"trickle-{i}" for i in range(count)]
    accounting = Accounting(system)
    created = await create_pods(
        api, system.name, names, lambda i: leaves[i % len(leaves)], rate=TRICKLE_RATE
    )
    await until(lambda: all(n in seen.running for n in names), what="every pod Running")
    return {
        "pods": count,
        "rate": TRICKLE_RATE,
        **admission_figures(names, created, seen, api),
        **accounting.figures(count),
    }


async def gangs(system: System, api: Api, seen: Seen, sizes: Sizes) -> dict[str, Any]:
    count = sizes.groups * GROUP_SIZE
    room = milli(count)
    leaves = [leaf for leaf, _ in sizes.leaves]
    if system.name == "queuetree":
        system.kubectl_apply(queuetree_tree(sizes, lambda leaf: {"capability": {"cpu": room}}))
    else:
        system.kubectl_apply(
            kueue_tree(sizes, lambda leaf: {"nominalQuota": room, "borrowingLimit": "0"})
        )
    names = [f"gang-{i // GROUP_SIZE}-{i % GROUP_SIZE}" for i in range(count)]

    def group_of(index: int) -> str:
        return f"group-{index // GROUP_SIZE}"

    def queue_of(index: int) -> str:
        return leaves[(index // GROUP_SIZE) % len(leaves)]

    accounting = Accounting(system)
    if system.name == "queuetree":
        # The groups first, as a workload controller makes them (Volcano's own do too).
        groups = [pod_group(f"group-{g}", leaves[g % len(leaves)]) for g in range(sizes.groups)]
        await asyncio.gather(*(api.create(path_of(g), g) for g in groups))
    created = await create_pods(api, system.name, names, queue_of, group_of=group_of)
    await until(lambda: all(n in seen.running for n in names), what="every pod Running")
    return {
        "pods": count,
        "groups": sizes.groups,
        **admission_figures(names, created, seen, api),
        **accounting.figures(count),
    }


async def reclaim(system: System, api: Api, seen: Seen, sizes: Sizes) -> dict[str, Any]:
    share = sizes.reclaim_lender_pods
    if system.name == "queuetree":
        system.kubectl_apply(
            [
                queuetree_queue(
                    "lender",
                    "root",
                    deserved={"cpu": milli(share)},
                    capability={"cpu": milli(share)},
                ),
                queuetree_queue(
                    "borrower",
                    "root",
                    deserved={"cpu": milli(share)},
                    capability={"cpu": milli(2 * share)},
                    reclaimable=True,
                ),
            ]
        )
    else:
        system.kubectl_apply(
            [
                {
                    "apiVersion": "kueue.x-k8s.io/v1beta2",
                    "kind": "ResourceFlavor",
                    "metadata": {"name": FLAVOR},
                },
                {
                    "apiVersion": "kueue.x-k8s.io/v1beta2",
                    "kind": "Cohort",
                    "metadata": {"name": ROOT_COHORT},
                },
                *kueue_leaf(
                    "lender",
                    ROOT_COHORT,
                    {"nominalQuota": milli(share)},
                    preemption={"reclaimWithinCohort": "Any"},
                ),
                *kueue_leaf(
                    "borrower",
                    ROOT_COHORT,
                    {"nominalQuota": milli(share), "borrowingLimit": milli(share)},
                ),
            ]
        )
    borrowers = [f"borrower-{i}" for i in range(2 * share)]
    await create_pods(api, system.name, borrowers, lambda i: "borrower")
    await until(lambda: all(n in seen.running for n in borrowers), what="the borrower running")
    lenders = [f"lender-{i}" for i in range(share)]
    accounting = Accounting(system)
    created = await create_pods(api, system.name, lenders, lambda i: "lender")
    done = await until(lambda: all(n in seen.running for n in lenders), what="the lender running")
    first = min(created.values())
    return {
        "pods": len(borrowers) + len(lenders),
        "lender_pods": share,
        "reclaim_seconds": round(done - first, 3),
        "lender_admitted_latency": latencies(lenders, created, seen.admitted),
        "lender_running_latency": latencies(lenders, created, seen.running),
        "borrowers_evicted": sum(1 for n in borrowers if n in seen.deleted),
        **accounting.figures(share),
    }


SCENARIOS: dict[str, Scenario] = {
    "burst": burst,
    "trickle": trickle,
    "gangs": gangs,
    "reclaim": reclaim,
}


def nodes_for(scenario: str, sizes: Sizes) -> list[tuple[str, dict[str, str]]]:
    if scenario == "reclaim":
        # Exactly the two shares: the lender's pods find no room until the borrower's go.
        cpu = milli(2 * sizes.reclaim_lender_pods)
        return [("node-0", {"cpu": cpu, "memory": "256Gi", "pods": "5000"})]
    return [(f"node-{i}", dict(BIG_NODE)) for i in range(BIG_NODES)]


async def drive(system: System, scenario: str, sizes: Sizes) -> dict[str, Any]:
    files = system.control_plane.files
    context = ssl_.create_default_context(cafile=str(files.ca_cert))
    context.load_cert_chain(str(files.client_cert("admin")), str(files.client_key("admin")))
    async with aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=CREATE_IN_FLIGHT + 128),
        timeout=aiohttp.ClientTimeout(total=120),
    ) as session:
        api = Api(session, system.control_plane.url, context)
        seen = Seen()
        watch = asyncio.create_task(api.watch(seen))
        try:
            return await SCENARIOS[scenario](system, api, seen, sizes)
        finally:
            watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watch


def run_once(
    scenario: str, system_name: str, sizes: Sizes, keep: pathlib.Path | None
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"bench-peers-{system_name}-") as raw:
        workdir = keep / f"{scenario}-{system_name}-{time.time_ns()}" if keep else pathlib.Path(raw)
        workdir.mkdir(parents=True, exist_ok=True)
        system = start_system(system_name, workdir, nodes_for(scenario, sizes))
        try:
            system.control_plane.kubectl("create", "namespace", NAMESPACE)
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                return runner.run(drive(system, scenario, sizes))
        finally:
            system.stop()


# ------------------------------------------------------------------ summaries


def flatten(figures: dict[str, Any], prefix: str = "") -> dict[str, float]:
    flat: dict[str, float] = {}
    for key, value in figures.items():
        if isinstance(value, dict):
            flat.update(flatten(value, f"{prefix}{key}."))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            flat[f"{prefix}{key}"] = float(value)
    return flat


def summary(scenario: str, runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Median and range of every figure per system, and the ratio of the medians."""
    per_system: dict[str, dict[str, Any]] = {}
    medians: dict[str, dict[str, float]] = {}
    for system, results in runs.items():
        flats = [flatten(r) for r in results]
        keys = sorted(set().union(*flats)) if flats else []
        medians[system] = {k: statistics.median(f[k] for f in flats if k in f) for k in keys}
        per_system[system] = {
            k: {
                "median": round(medians[system][k], 3),
                "range": [
                    round(min(f[k] for f in flats if k in f), 3),
                    round(max(f[k] for f in flats if k in f), 3),
                ],
            }
            for k in keys
        }
    line: dict[str, Any] = {
        "benchmark": "peers",
        "scenario": scenario,
        "runs": {s: len(r) for s, r in runs.items()},
        **per_system,
    }
    if "queuetree" in medians and "kueue" in medians:
        line["ratio_queuetree_to_kueue"] = {
            k: round(medians["queuetree"][k] / v, 3)
            for k, v in medians["kueue"].items()
            if k in medians["queuetree"] and v
        }
    return line


def main() -> int:
    global CREATE_IN_FLIGHT
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="sizes times this (default 1)")
    parser.add_argument("--runs", type=int, default=3, help="runs of each system per scenario")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--systems", default="queuetree,kueue")
    parser.add_argument("--create-in-flight", type=int, default=CREATE_IN_FLIGHT)
    parser.add_argument(
        "--keep-logs",
        metavar="DIR",
        type=pathlib.Path,
        help="keep each run's work directory (logs, audit) under DIR",
    )
    args = parser.parse_args()
    CREATE_IN_FLIGHT = args.create_in_flight
    scenarios = args.scenarios.split(",")
    systems = args.systems.split(",")
    for name in scenarios:
        if name not in SCENARIOS:
            parser.error(f"--scenarios: unknown {name!r} (one of {', '.join(SCENARIOS)})")
    for name in systems:
        if name not in CONTROLLER_USERS:
            parser.error(f"--systems: unknown {name!r} (queuetree, kueue)")
    sizes = Sizes.at(args.scale)
    # The driver shares two cores with everything it measures: no cyclic collector.
    gc.disable()
    for scenario in scenarios:
        runs: dict[str, list[dict[str, Any]]] = {s: [] for s in systems}
        for round_ in range(args.runs):
            order = systems if round_ % 2 == 0 else list(reversed(systems))
            for system in order:
                result = run_once(scenario, system, sizes, args.keep_logs)
                runs[system].append(result)
                line = {
                    "benchmark": "peers_run",
                    "scenario": scenario,
                    "system": system,
                    "run": round_ + 1,
                    "scale": args.scale,
                    "create_in_flight": CREATE_IN_FLIGHT,
                    **result,
                }
                print(json.dumps(line), flush=True)
        print(
            json.dumps({**summary(scenario, runs), "scale": args.scale, "cores": os.cpu_count()}),
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
