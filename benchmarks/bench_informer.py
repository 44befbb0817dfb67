"""Micro-benchmark of the operator's pod informer: watch events into the cluster state, in the
operator's process shape (one JSON object per line).

The real API server sends four events for each gated pod of a burst (bench_operator.py, real
backend): its creation (with kube-scheduler's ``SchedulingGated`` condition), the gate removal
(which also writes the admission record), the binding, and the kubelet's ``Running``. This
script builds that stream for ``--pods`` pods, each event serialised as the API server sends it
(``stored_pod`` of bench_parse.py, with its server metadata and defaults), in windows of 500
pods, and times, in one process:

- the floor: decoding every line (``bodies.decode``) and dropping it;
- the informer: decoding every line and applying it (``informing.PodEvents.apply``) to a
  fresh ``state.ClusterState``, the operator's path for each event.

kopf and kubernetes-asyncio are imported first, so the heap the cyclic garbage collector walks
is the operator's. Each line gives the microseconds of CPU per event, the ratio to the floor,
the share of that time spent in the garbage collector (``gc.callbacks``) and how many objects
it tracks per pod once every event is applied. Nothing here asserts a time.

Run: ``.venv/bin/python benchmarks/bench_informer.py [--pods 10000] [--rounds 3]``.
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import time
from collections.abc import Iterator
from typing import Any

import kopf  # noqa: F401  (the operator's heap)
import kubernetes_asyncio.client  # noqa: F401
import orjson
from bench_parse import stored_pod

from queuetree.api import bodies
from queuetree.core import objects
from queuetree.operator import informing, state

WINDOW = 500
"""Pods created before the first of them is ungated (a burst's backlog)."""


def _condition(kind: str, status: str = "True", reason: str | None = None) -> dict[str, Any]:
    condition: dict[str, Any] = {
        "type": kind,
        "status": status,
        "lastProbeTime": None,
        "lastTransitionTime": "2026-12-03T12:00:01Z",
    }
    if reason is not None:
        condition["reason"] = reason
    return condition


def pod_events(index: int) -> list[dict[str, Any]]:
    """The four states of one gated pod, as the API server sends them."""
    created = stored_pod()
    metadata = created["metadata"]
    metadata["name"] = f"burst-{index}"
    metadata["uid"] = f"00000000-0000-4000-8000-{index:012d}"
    metadata["annotations"][objects.QUEUE_NAME_ANNOTATION] = f"team-{index % 100}"
    ungated = copy.deepcopy(created)
    del ungated["spec"]["schedulingGates"]
    ungated["metadata"]["annotations"][objects.ADMITTED_QUEUE_ANNOTATION] = f"team-{index % 100}"
    bound = copy.deepcopy(ungated)
    bound["spec"]["nodeName"] = f"node-{index % 10}"
    bound["status"]["conditions"] = [_condition("PodScheduled")]
    running = copy.deepcopy(bound)
    running["status"].update(
        phase="Running",
        hostIP="10.0.0.1",
        podIP=f"10.1.{index // 250 % 250}.{index % 250}",
        startTime="2026-12-03T12:00:02Z",
        conditions=[
            _condition("Initialized"),
            _condition("Ready"),
            _condition("ContainersReady"),
            _condition("PodScheduled"),
        ],
        containerStatuses=[
            {
                "name": "main",
                "ready": True,
                "restartCount": 0,
                "image": "registry.example.com/team/trainer:1.4.2",
                "imageID": "",
                "started": True,
                "state": {"running": {"startedAt": "2026-12-03T12:00:02Z"}},
            }
        ],
    )
    return [created, ungated, bound, running]


def stream(pods: int) -> Iterator[bytes]:
    """Every pod's events as watch lines: a window's creations, then its gate removals, its
    bindings and its Running."""
    version = 1000
    for start in range(0, pods, WINDOW):
        window = [pod_events(index) for index in range(start, min(pods, start + WINDOW))]
        for step in range(4):
            for events in window:
                body = events[step]
                version += 1
                body["metadata"]["resourceVersion"] = str(version)
                kind = "ADDED" if step == 0 else "MODIFIED"
                yield orjson.dumps({"type": kind, "object": body})


class CollectorTime:
    """Seconds the cyclic garbage collector ran while installed."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._started


def floor(lines: list[bytes]) -> float:
    started = time.process_time()
    for line in lines:
        bodies.decode(line)
    return time.process_time() - started


def informer(lines: list[bytes]) -> tuple[float, float, int]:
    """CPU seconds, collector seconds, objects tracked by the collector afterwards."""
    cluster = state.ClusterState(sources=frozenset({"pods"}))
    events = informing.PodEvents(cluster)
    events.replace([])
    collector = CollectorTime()
    gc.callbacks.append(collector)
    try:
        started = time.process_time()
        version = "0"
        for line in lines:
            version = events.apply(bodies.decode(line), version)
        cpu = time.process_time() - started
    finally:
        gc.callbacks.remove(collector)
    return cpu, collector.seconds, len(gc.get_objects())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    lines = list(stream(args.pods))
    gc.collect()
    baseline = len(gc.get_objects())
    for round_ in range(args.rounds):
        floor_cpu = floor(lines)
        gc.collect()
        cpu, collector, tracked = informer(lines)
        gc.collect()
        print(
            json.dumps(
                {
                    "benchmark": "informer_events",
                    "round": round_,
                    "pods": args.pods,
                    "events": len(lines),
                    "event_bytes": sum(map(len, lines)) // len(lines),
                    "us_per_event": round(1e6 * cpu / len(lines), 2),
                    "floor_decode_us_per_event": round(1e6 * floor_cpu / len(lines), 2),
                    "ratio_to_floor": round(cpu / floor_cpu, 2),
                    "gc_share": round(collector / cpu, 3),
                    "gc_tracked_per_pod": round((tracked - baseline) / args.pods, 1),
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
