"""Benchmark: one admission session over a generated cluster (issues 10 and 16).

1,111 queues (10 x 10 x 10 leaves under root), 5,000 nodes, and N pending pods behind the
queue-allocation gate, for N in 100,000, 300,000 and 1,000,000 by default. Each leaf's
capability admits about half of its pods, so both the admitted and the refused paths run.

``--shapes S`` gives each leaf S request shapes, handed out in blocks of ``--block`` pods in
creation order (as jobs submit pods in bursts); ``--shapes 1`` makes every pod of a leaf
interchangeable. The session folds runs of interchangeable gated lone pods
(``core.folding``); the line states the fold ratio (pods per run). ``--plain`` runs the
per-pod path instead (the reference the equivalence test compares against).
``--pods-capability`` also gives each leaf a ``pods`` capability of a third of its pods, which
then refuses before its cpu capability (half) does: the cost of counting pods.

Prints one JSON object per size: the median session time over the repeats, the median of a
floor loop measured in the same run (one pass adding each pod's requests into its queue's
totals, then each queue's totals into its ancestors'), their ratio, time per pod, and the
memory the session allocates at its peak per pod (tracemalloc, in a separate run) next to the
snapshot's own size per pod (RSS growth while it is built). The last line compares time per pod
across the sizes (linearity: 1.0 means perfectly linear).

Run: ``.venv/bin/python benchmarks/bench_session.py [--sizes 100000,300000] [--repeats 3]``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import statistics
import sys
import time
import tracemalloc
from types import MappingProxyType

from queuetree.core import configs, features, objects, resources, sessions

FANOUT = 10
NODES = 5_000


def build(
    pods: int, *, shapes: int = 1, block: int = 10, pods_capability: bool = False
) -> objects.Snapshot:
    queues: dict[str, objects.Queue] = {"root": objects.Queue(name="root")}
    leaves: list[str] = []
    per_leaf = max(pods // FANOUT**3, 1)
    leaf_cap = resources.Resource(
        milli_cpu=1000 * (per_leaf // 2),
        memory=0,
        scalars={"pods": per_leaf // 3} if pods_capability else None,
    )
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
    # Shape s: (s + 1) / 2 CPUs and s + 1 GiB; the first is 1 CPU and 1 GiB.
    requests = [
        resources.Resource(milli_cpu=1000 if s == 0 else 500 * (s + 1), memory=(s + 1) * 2**30)
        for s in range(shapes)
    ]
    annotations = MappingProxyType({objects.QUEUE_ALLOCATION_GATE: "true"})
    groups: dict[str, objects.PodGroup] = {}
    pod_map: dict[str, objects.Pod] = {}
    for i in range(pods):
        leaf = leaves[i % len(leaves)]
        request = requests[(i // len(leaves) // block) % shapes]
        name = f"p{i:07d}"
        key = f"bench/{name}"
        groups[key] = objects.PodGroup(namespace="bench", name=name, queue=leaf, uid=key)
        pod_map[key] = objects.Pod(
            namespace="bench",
            name=name,
            group=key,
            resreq=request,
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


def floor(snapshot: objects.Snapshot) -> tuple[float, float]:
    """The floor: one pass adding each pod's requests into its queue's totals, then each
    queue's totals into every ancestor's (what any admission must at least do). Returns its
    wall and CPU time."""
    start = time.perf_counter()
    cpu_start = time.process_time()
    totals: dict[str, list[int]] = {}
    groups = snapshot.pod_groups
    for pod in snapshot.pods.values():
        queue = groups[pod.group].queue
        total = totals.get(queue)
        if total is None:
            total = totals[queue] = [0, 0]
        total[0] += pod.resreq.milli_cpu  # type: ignore[assignment]
        total[1] += pod.resreq.memory  # type: ignore[assignment]
    queues = snapshot.queues
    above: dict[str, list[int]] = {}
    for name, (cpu, memory) in totals.items():
        parent = queues[name].parent_name
        while parent:
            sums = above.setdefault(parent, [0, 0])
            sums[0] += cpu
            sums[1] += memory
            parent = queues[parent].parent_name
    return time.perf_counter() - start, time.process_time() - cpu_start


def _rss() -> int:
    """Resident set size now, in bytes (Linux), else the peak so far."""
    try:
        with open(f"/proc/{os.getpid()}/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _session_peak(snapshot: objects.Snapshot, *, fold: bool) -> int:
    """Bytes the session allocates at its peak (tracemalloc; its result included)."""
    gates = features.resolve({})
    tracemalloc.start()
    result = sessions.run_session(
        snapshot, config=CONFIG, feature_gates=gates, admission_only=True, fold=fold
    )
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del result
    return peak


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100000,300000,1000000")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--shapes", type=int, default=1)
    parser.add_argument("--block", type=int, default=10)
    parser.add_argument("--plain", action="store_true", help="the per-pod path (no folding)")
    parser.add_argument("--no-memory", action="store_true", help="skip the tracemalloc run")
    parser.add_argument(
        "--pods-capability", action="store_true", help="a pods capability on every leaf"
    )
    args = parser.parse_args(argv)
    gates = features.resolve({})
    fold = not args.plain
    per_pod: dict[int, float] = {}
    for size in (int(s) for s in args.sizes.split(",")):
        gc.collect()
        rss_before = _rss()
        snapshot = build(
            size, shapes=args.shapes, block=args.block, pods_capability=args.pods_capability
        )
        snapshot_bytes = _rss() - rss_before
        times = []
        cpu_times = []
        floors = []
        floor_cpus = []
        result = None
        for _ in range(args.repeats):
            floor_wall, floor_cpu = floor(snapshot)
            floors.append(floor_wall)
            floor_cpus.append(floor_cpu)
            result = None
            start = time.perf_counter()
            cpu_start = time.process_time()
            result = sessions.run_session(
                snapshot, config=CONFIG, feature_gates=gates, admission_only=True, fold=fold
            )
            cpu_times.append(time.process_time() - cpu_start)
            times.append(time.perf_counter() - start)
        assert result is not None
        runs = sessions.count_runs(snapshot, config=CONFIG) if fold else size
        median = statistics.median(times)
        floor_median = statistics.median(floors)
        per_pod[size] = median / size
        line = {
            "benchmark": "admission_session",
            "path": "folded" if fold else "per-pod",
            "queues": len(snapshot.queues),
            "nodes": len(snapshot.nodes),
            "pods": size,
            "shapes_per_queue": args.shapes,
            "pods_capability": args.pods_capability,
            "runs": runs,
            "fold_ratio": round(size / max(runs, 1), 1),
            "ungated": len(result.ungate),
            "held_explained": len(result.reasons),
            "median_s": round(median, 4),
            # CPU time of this process: less sensitive to other jobs on a shared machine.
            "median_cpu_s": round(statistics.median(cpu_times), 4),
            "floor_median_s": round(floor_median, 5),
            "ratio_to_floor": round(median / floor_median, 1),
            # The same ratio in CPU time (a shared machine stretches wall time unevenly).
            "floor_median_cpu_s": round(statistics.median(floor_cpus), 5),
            "ratio_to_floor_cpu": round(
                statistics.median(cpu_times) / max(statistics.median(floor_cpus), 1e-9), 1
            ),
            "us_per_pod": round(median / size * 1e6, 2),
            "snapshot_bytes_per_pod": round(snapshot_bytes / size),
            "load_average_1m": round(os.getloadavg()[0], 2),
        }
        del result
        if not args.no_memory:
            line["session_peak_bytes_per_pod"] = round(_session_peak(snapshot, fold=fold) / size)
        print(json.dumps(line), flush=True)
        del snapshot
    if len(per_pod) > 1:
        smallest = min(per_pod)
        print(
            json.dumps(
                {
                    "benchmark": "admission_session_linearity",
                    "path": "folded" if fold else "per-pod",
                    "us_per_pod": {str(n): round(t * 1e6, 2) for n, t in per_pod.items()},
                    "ratio_to_smallest": {
                        str(n): round(t / per_pod[smallest], 2) for n, t in per_pod.items()
                    },
                    "load_average_1m": round(os.getloadavg()[0], 2),
                }
            ),
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
