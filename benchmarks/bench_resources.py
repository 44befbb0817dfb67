"""Micro-benchmark of resource-vector arithmetic and comparisons (one JSON object per line).

The scheduling engine adds and compares vectors millions of times per cycle; these figures
tell whether ``queuetree.core.resources`` keeps up. Nothing here asserts a time.

Run: ``.venv/bin/python benchmarks/bench_resources.py`` (or ``make bench``).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable

from queuetree.core import quantities, resources

GIB = 2**30


def measure(name: str, operation: Callable[[], object], *, repeat: int = 200_000) -> None:
    """Run ``operation`` ``repeat`` times (best of three rounds) and print ops/s as JSON."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for _ in range(repeat):
            operation()
        best = min(best, time.perf_counter() - started)
    print(
        json.dumps(
            {
                "benchmark": f"resources.{name}",
                "ops_per_s": round(repeat / best),
                "ns_per_op": round(best / repeat * 1e9, 1),
                "repeat": repeat,
                "python": sys.version.split()[0],
            }
        ),
        flush=True,
    )


def main() -> None:
    request = resources.Resource(milli_cpu=500, memory=GIB, scalars={})
    gpu_request = resources.Resource(
        milli_cpu=4000, memory=16 * GIB, scalars={"nvidia.com/gpu": 1000}
    )
    used = resources.Resource(milli_cpu=30_000, memory=60 * GIB, scalars={"nvidia.com/gpu": 3000})
    capability = resources.Resource(
        milli_cpu=64_000, memory=256 * GIB, scalars={"nvidia.com/gpu": 8000, "pods": 110}
    )
    zero, infinity = resources.ZERO, resources.INFINITY

    measure("add.cpu_memory", lambda: request + request)
    measure("add.with_scalars", lambda: used + gpu_request)
    measure("sub.with_scalars", lambda: used - gpu_request)
    measure("less_equal.zero", lambda: gpu_request.less_equal(capability, zero))
    measure("less_equal.infinity", lambda: gpu_request.less_equal(capability, infinity))
    measure("less_partly.zero", lambda: used.less_partly(capability, zero))
    measure("less_equal_with_names.zero", lambda: used.less_equal_with_names(capability, zero))
    total = used + gpu_request
    measure(
        "less_equal_with_dimension_and_names",
        lambda: total.less_equal_with_dimension_and_names(capability, gpu_request),
    )
    measure(
        "greater_partly_with_dimension",
        lambda: used.greater_partly_with_dimension(capability, gpu_request),
    )
    measure(
        "greater_partly_with_relevant_dimensions",
        lambda: used.greater_partly_with_relevant_dimensions(capability, gpu_request),
    )
    measure(
        "less_equal_partly_with_dimension_zero_filtered",
        lambda: used.less_equal_partly_with_dimension_zero_filtered(capability, gpu_request),
    )
    measure("hash", lambda: hash(resources.Resource._trusted(1, 2, None)))
    measure(
        "from_resource_list",
        lambda: resources.Resource.from_resource_list(
            {"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": "1"}
        ),
        repeat=20_000,
    )
    measure("quantities.parse", lambda: quantities.parse("1536Mi"), repeat=50_000)


if __name__ == "__main__":
    main()
