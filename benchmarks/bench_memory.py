"""Peak resident memory of the webhook and the operator after a burst, on the kubesim sandbox:
the quick figure of each memory step in docs/benchmarks.md (Memory), which `make bench-peers`
confirms on the real control plane.

`queuetree sandbox`'s processes on kubesim (one node with room for everything), 10 queues, PODS
opted-in pods created with kubectl BATCH at a time; once every pod is ungated, each process's
VmHWM and VmRSS from /proc. Prints one JSON object:
    {"benchmark": "memory_kubesim", "pods": 1000, "queues": 10, "at_start": {...},
     "peak_rss_mib": {"webhook": ..., "operator": ..., "sum": ...}, "rss_mib": {...}}
Run: .venv/bin/python benchmarks/bench_memory.py [--pods N] [--batch B]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import tempfile
import time
from typing import Any

from queuetree.sandbox import stack

PROCESSES = ("webhook", "operator")
QUEUES = 10
NAMESPACE = "bench"
DEADLINE = 600.0
"""Seconds for every pod to be ungated, on a loaded machine."""


def _status_mib(pid: int) -> dict[str, float]:
    """VmHWM and VmRSS of ``pid``, MiB."""
    found = {}
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmHWM", "VmRSS"):
            found[key] = round(int(value.split()[0]) / 1024, 1)
    return found


def _kubectl(env: dict[str, str], *args: str, items: list[dict[str, Any]] | None = None) -> str:
    payload = (
        None if items is None else json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    )
    done = subprocess.run(
        ["kubectl", *args], input=payload, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"kubectl {' '.join(args)}: {done.stderr.strip()[-500:]}")
    return done.stdout


def _queue(index: int, pods: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": f"q{index}"},
        "spec": {"weight": 1, "capability": {"cpu": str(max(1, pods // 20))}},
    }


def _pod(index: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"p{index}",
            "namespace": NAMESPACE,
            "annotations": {
                "scheduling.volcano.sh/queue-allocation-gate": "true",
                "scheduling.volcano.sh/queue-name": f"q{index % QUEUES}",
            },
        },
        "spec": {
            "containers": [
                {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}
            ]
        },
    }


def _gated(env: dict[str, str]) -> int:
    listing = json.loads(_kubectl(env, "get", "pods", "-n", NAMESPACE, "-o", "json"))
    return sum(1 for pod in listing["items"] if pod["spec"].get("schedulingGates"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        sandbox = stack.start(
            stack.Options(
                workdir=pathlib.Path(workdir),
                node_flags=("big:cpu=1000,memory=4000Gi,pods=20000",),
            )
        )
        try:
            pids = {p.name: p.popen.pid for p in sandbox.processes if p.name in PROCESSES}
            at_start = {name: _status_mib(pid)["VmHWM"] for name, pid in pids.items()}
            env = sandbox.env
            _kubectl(env, "apply", "-f", "-", items=[_queue(i, args.pods) for i in range(QUEUES)])
            _kubectl(env, "create", "namespace", NAMESPACE)
            started = time.monotonic()
            for first in range(0, args.pods, args.batch):
                last = min(args.pods, first + args.batch)
                _kubectl(env, "create", "-f", "-", items=[_pod(i) for i in range(first, last)])
            created = time.monotonic() - started
            deadline = time.monotonic() + DEADLINE
            while (gated := _gated(env)) and time.monotonic() < deadline:
                time.sleep(1)
            figures = {name: _status_mib(pid) for name, pid in pids.items()}
        finally:
            sandbox.stop()
    peaks = {name: figures[name]["VmHWM"] for name in PROCESSES}
    print(
        json.dumps(
            {
                "benchmark": "memory_kubesim",
                "pods": args.pods,
                "queues": QUEUES,
                "created_seconds": round(created, 1),
                "still_gated": gated,
                "at_start_mib": at_start,
                "peak_rss_mib": {**peaks, "sum": round(sum(peaks.values()), 1)},
                "rss_mib": {name: figures[name]["VmRSS"] for name in PROCESSES},
            }
        )
    )


if __name__ == "__main__":
    main()
