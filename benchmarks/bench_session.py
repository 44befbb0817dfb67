"""Benchmark: one admission session over a generated cluster (issue item 10).

1,000 leaf queues (10 x 10 x 10 under root), 5,000 nodes, and N pending pods behind the
queue-allocation gate for N in 25,000, 50,000, 100,000, 200,000. Each leaf's capability admits
about half of its pods, so both the admitted and the refused paths run. Prints one JSON object per
size: the median session time over the repeats, the median of a floor loop measured in the same
run (one pass adding each pod's requests into its queue's totals), and their ratio.

Run: ``.venv/bin/python benchmarks/bench_session.py [--sizes 25000,50000] [--repeats 3]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from types import MappingProxyType

from queuetree.core import configs, features, objects, resources, sessions

FANOUT = 10
NODES = 5_000


def build(pods: int) -> objects.Snapshot:
    queues: dict[str, objects.Queue] = {"root": objects.Queue(name="root")}
    leaves: list[str] = []
    per_leaf = max(pods // FANOUT**3, 1)
    leaf_cap = resources.Resource(milli_cpu=1000 * (per_leaf // 2), memory=0)
    for a in range(FANOUT):
        qa = f"q{a}"
        queues[qa] = objects.Queue(name=qa, deserved=resources.Resource(milli_cpu=100_000 * FANOUT))
        for b in range(FANOUT):
            qb = f"{qa}-{b}"
            queues[qb] = objects.Queue(name=qb, parent=qa)
            for c in range(FANOUT):
                qc = f"{qb}-{c}"
                queues[qc] = objects.Queue(name=qc, parent=qb, capability=leaf_cap)
                leaves.append(qc)
    nodes = {
        f"node-{i:05d}": objects.Node(
            name=f"node-{i:05d}",
            allocatable=resources.Resource(
                milli_cpu=64_000, memory=256 * 2**30, scalars={"pods": 110}
            ),
        )
        for i in range(NODES)
    }
    request = resources.Resource(milli_cpu=1000, memory=2**30, scalars={})
    annotations = MappingProxyType({objects.QUEUE_ALLOCATION_GATE: "true"})
    groups: dict[str, objects.PodGroup] = {}
    pod_map: dict[str, objects.Pod] = {}
    for i in range(pods):
        leaf = leaves[i % len(leaves)]
        name = f"p{i:06d}"
        key = f"bench/{name}"
        groups[key] = objects.PodGroup(namespace="bench", name=name, queue=leaf, uid=key)
        pod_map[key] = objects.Pod(
            namespace="bench",
            name=name,
            group=key,
            resreq=request,
            init_resreq=request,
            scheduling_gates=(objects.QUEUE_ALLOCATION_GATE,),
            annotations=annotations,
            uid=key,
        )
    return objects.Snapshot(
        queues=MappingProxyType(queues),
        pod_groups=MappingProxyType(groups),
        pods=MappingProxyType(pod_map),
        nodes=MappingProxyType(nodes),
    )


CONFIG = configs.SchedulerConfiguration(
    actions=("enqueue", "allocate", "reclaim"),
    tiers=(
        configs.Tier(
            plugins=(configs.PluginOption(name="priority"), configs.PluginOption(name="gang"))
        ),
        configs.Tier(
            plugins=(
                configs.PluginOption(name="predicates"),
                configs.PluginOption(
                    name="capacity", flags=MappingProxyType({"enableHierarchy": True})
                ),
                configs.PluginOption(name="nodeorder"),
            )
        ),
    ),
)


def floor(snapshot: objects.Snapshot) -> float:
    """The floor: one pass adding each pod's requests into its queue's totals."""
    start = time.perf_counter()
    totals: dict[str, list[int]] = {}
    groups = snapshot.pod_groups
    for pod in snapshot.pods.values():
        queue = groups[pod.group].queue
        total = totals.get(queue)
        if total is None:
            total = totals[queue] = [0, 0]
        total[0] += pod.resreq.milli_cpu  # type: ignore[assignment]
        total[1] += pod.resreq.memory  # type: ignore[assignment]
    return time.perf_counter() - start


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="25000,50000,100000,200000")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    gates = features.resolve({})
    for size in (int(s) for s in args.sizes.split(",")):
        snapshot = build(size)
        times = []
        cpu_times = []
        floors = []
        result = None
        for _ in range(args.repeats):
            floors.append(floor(snapshot))
            start = time.perf_counter()
            cpu_start = time.process_time()
            result = sessions.run_session(
                snapshot, config=CONFIG, feature_gates=gates, admission_only=True
            )
            cpu_times.append(time.process_time() - cpu_start)
            times.append(time.perf_counter() - start)
        assert result is not None
        median = statistics.median(times)
        floor_median = statistics.median(floors)
        print(
            json.dumps(
                {
                    "benchmark": "admission_session",
                    "queues": len(snapshot.queues),
                    "nodes": len(snapshot.nodes),
                    "pods": size,
                    "ungated": len(result.ungate),
                    "median_s": round(median, 4),
                    # CPU time of this process: less sensitive to other jobs on a shared machine.
                    "median_cpu_s": round(statistics.median(cpu_times), 4),
                    "floor_median_s": round(floor_median, 5),
                    "ratio_to_floor": round(median / floor_median, 1),
                    "us_per_pod": round(median / size * 1e6, 2),
                }
            ),
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
