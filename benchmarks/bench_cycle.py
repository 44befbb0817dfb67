"""The operator's admission cycle at cluster scale, without an API server: what one cycle costs
in the operator's process when the cluster holds N pods of which G wait behind the gate.

Fills ``queuetree.operator.state.ClusterState`` as the watches would (111 queues: 10 parents of
10 leaves under root; N lone pods, the last G gated, the others admitted and waiting for
kube-scheduler), then times, as the median of ``--repeats``:

- ``view``: the cycle's immutable view (with the settled pods kept folded by the state);
- ``session``: the core admission session over what the cycle hands it;
- ``session_whole``: the same session over every pod (``compact=False``), for comparison;
- ``plans``: the queue writes and explanations the cycle plans from the result;
- ``scrape``: one Prometheus scrape of the per-queue series (the gated counts and ages are
  computed then, from the last cycle's view, not by each cycle).

Prints one JSON object per size. Run:
``.venv/bin/python benchmarks/bench_cycle.py [--sizes 10000,100000] [--gated 500]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from types import MappingProxyType
from typing import Any

import prometheus_client

from queuetree.api import schedconf
from queuetree.core import objects, resources, sessions
from queuetree.operator import cycle, explaining, metrics, queue_status, state

GATE = objects.QUEUE_ALLOCATION_GATE


def fill(pods: int, gated: int) -> state.ClusterState:
    cluster = state.ClusterState()
    cluster.upsert_queue(state.QueueRecord(queue=objects.Queue(name="root")))
    leaves = []
    for parent in range(10):
        cluster.upsert_queue(state.QueueRecord(queue=objects.Queue(name=f"dept-{parent}")))
        for leaf in range(10):
            name = f"team-{parent}-{leaf}"
            leaves.append(name)
            cluster.upsert_queue(
                state.QueueRecord(queue=objects.Queue(name=name, parent=f"dept-{parent}"))
            )
    cluster.upsert_node(
        objects.Node(
            name="node-0",
            allocatable=resources.Resource(milli_cpu=10**9, memory=2**60, scalars={"pods": 10**6}),
        )
    )
    request = resources.Resource(milli_cpu=10, memory=16 * 2**20)
    for index in range(pods):
        annotations = MappingProxyType(
            {GATE: "true", objects.QUEUE_NAME_ANNOTATION: leaves[index % len(leaves)]}
        )
        cluster.upsert_pod(
            objects.Pod(
                namespace="bench",
                name=f"p{index}",
                group=f"bench/p{index}",
                resreq=request,
                scheduling_gates=(GATE,) if index >= pods - gated else (),
                annotations=annotations,
                uid=f"uid-{index}",
            )
        )
    cluster.mark_synced()
    return cluster


def median_seconds(work: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def measure(pods: int, gated: int, repeats: int) -> dict[str, Any]:
    cluster = fill(pods, gated)
    config = schedconf.parse_default().configuration
    gates = {objects.FEATURE_SCHEDULING_GATES_QUEUE_ADMISSION: True}
    view = cluster.view()

    def session(snapshot: objects.Snapshot, *, compact: bool = True) -> Any:
        return sessions.run_session(
            snapshot, config=config, feature_gates=gates, admission_only=True, compact=compact
        )

    result = session(view.for_session)

    def plans() -> None:
        queue_status.plan_queue_writes(view, result)
        queue_status.plan_pod_group_status(view.pod_groups, result)
        explaining.plan_explanations(view, result, cluster.explanations(), budget=200)

    exported = metrics.create()
    exported.publish_queues(lambda: cycle.queue_reading(view, result, wall_clock=lambda: 0.0))

    figures = {
        "view": median_seconds(cluster.view, repeats),
        "session": median_seconds(lambda: session(view.for_session), repeats),
        "session_whole": median_seconds(
            lambda: session(view.snapshot, compact=False), max(1, repeats // 2)
        ),
        "plans": median_seconds(plans, repeats),
        "scrape": median_seconds(
            lambda: prometheus_client.generate_latest(exported.registry), repeats
        ),
    }
    return {
        "benchmark": "operator_cycle",
        "pods": pods,
        "gated": gated,
        "admitted": len(result.ungate),
        **{f"{name}_seconds": round(value, 4) for name, value in figures.items()},
        "cycle_seconds": round(figures["view"] + figures["session"] + figures["plans"], 4),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--gated", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    for size in (int(text) for text in args.sizes.split(",")):
        print(json.dumps(measure(size, args.gated, args.repeats)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
