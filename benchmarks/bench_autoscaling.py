"""Nodes an autoscaler buys for quota-blocked pods, gated against ungated, and how long a quota
increase takes to become running pods with the autoscaler in the loop.

The real backend with Karpenter and its kwok provider as the autoscaler
(:mod:`controlplane.karpenter`; ``make controlplane`` builds it), no nodes at start, queuetree's
webhook and operator (the sandbox stack). Three phases, each from zero nodes:

1. ``gated``: ``--pods`` opted-in pods in a queue whose capability admits none, watched for
   three of Karpenter's provisioning intervals: the nodes added (per 100 pods);
2. ``raised``: the queue's capability lifted to fit them all: the nodes added, the first-fit
   estimate, the seconds from the patch to the first new node and to the last pod Running;
3. ``ungated``: the same number of pods, not opted in: the nodes added (per 100 pods) and the
   seconds from the creation to the last pod Running.

Prints one JSON object per phase. Nothing asserts: a benchmark measures.

    .venv/bin/python benchmarks/bench_autoscaling.py --backend real [--pods 100]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

from controlplane import karpenter
from queuetree.sandbox import kubectl, stack

ROOT = pathlib.Path(__file__).resolve().parents[1]
GATE_ANNOTATION = "scheduling.volcano.sh/queue-allocation-gate"
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
POD_CPU = 500
DEADLINE = 600.0


def pod(name: str, *, queue: str | None) -> dict[str, Any]:
    annotations = {GATE_ANNOTATION: "true", QUEUE_ANNOTATION: queue} if queue else {}
    resources = {"cpu": f"{POD_CPU}m", "memory": "64Mi"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": resources, "limits": resources},
                }
            ],
            "terminationGracePeriodSeconds": 0,
        },
    }


def queue(name: str, pods: int) -> dict[str, Any]:
    room = {"cpu": f"{max(pods * POD_CPU, 100)}m", "memory": f"{max(pods, 1) * 64}Mi"}
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"parent": "root", "deserved": room, "capability": room},
    }


def until(probe: Callable[[], bool], *, what: str, deadline: float = DEADLINE) -> float:
    """Poll ``probe`` until true; the monotonic time it first was."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if probe():
            return time.monotonic()
        time.sleep(0.5)
    raise TimeoutError(f"bench_autoscaling: {what}: not within {deadline:g} s")


def nodes(client: kubectl.Kubectl) -> int:
    return len(client.items("nodes"))


def running(client: kubectl.Kubectl, count: int) -> bool:
    found = client.items("pods", "-n", "default")
    return sum(1 for p in found if (p.get("status") or {}).get("phase") == "Running") >= count


def measure(
    client: kubectl.Kubectl, options: karpenter.Options, count: int
) -> Iterator[dict[str, Any]]:
    """The figures of each phase, as soon as it is done."""
    base = {"benchmark": "autoscaling", "backend": "real", "pods": count, "pod_cpu_m": POD_CPU}
    instance = options.instance_types[0]
    estimate = karpenter.bin_packing_estimate({f"p{i}": POD_CPU for i in range(count)}, instance)
    client.check("apply", "-f", "-", input=kubectl.manifest_text([queue("bench", 0)]))
    client.check(
        "apply",
        "-f",
        "-",
        input=kubectl.manifest_text([pod(f"gated-{i}", queue="bench") for i in range(count)]),
    )
    window = 3 * options.provisioning_interval
    end = time.monotonic() + window
    peak = 0
    while time.monotonic() < end:
        peak = max(peak, nodes(client))
        time.sleep(1.0)
    yield (
        {
            **base,
            "phase": "gated",
            "window_seconds": window,
            "nodes_added": peak,
            "nodes_added_per_100_pods": round(peak * 100 / count, 2),
        }
    )
    raised = time.monotonic()
    client.check("apply", "-f", "-", input=kubectl.manifest_text([queue("bench", count)]))
    first_node = until(lambda: nodes(client) > 0, what="a node for the admitted pods")
    all_running = until(lambda: running(client, count), what="every admitted pod runs")
    added = nodes(client)
    yield (
        {
            **base,
            "phase": "raised",
            "nodes_added": added,
            "nodes_added_per_100_pods": round(added * 100 / count, 2),
            "estimate_nodes": estimate,
            "instance_type": instance,
            "seconds_to_first_node": round(first_node - raised, 1),
            "seconds_to_all_running": round(all_running - raised, 1),
        }
    )
    client.check("delete", "pods", "--all", "-n", "default", "--wait=true", "--timeout=120s")
    until(lambda: nodes(client) == 0, what="Karpenter removes every node")
    created = time.monotonic()
    client.check(
        "apply",
        "-f",
        "-",
        input=kubectl.manifest_text([pod(f"plain-{i}", queue=None) for i in range(count)]),
    )
    all_running = until(lambda: running(client, count), what="every ungated pod runs")
    added = nodes(client)
    yield (
        {
            **base,
            "phase": "ungated",
            "nodes_added": added,
            "nodes_added_per_100_pods": round(added * 100 / count, 2),
            "estimate_nodes": estimate,
            "seconds_to_all_running": round(all_running - created, 1),
        }
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=("real",), required=True)
    parser.add_argument("--pods", type=int, default=100)
    args = parser.parse_args()
    options = karpenter.Options()
    with (
        tempfile.TemporaryDirectory(prefix="bench-autoscaling-") as directory,
        stack.running(
            stack.Options(
                workdir=pathlib.Path(directory),
                nodes_files=(),
                backend="real",
                autoscaler=options,
            )
        ) as running_stack,
    ):
        for line in measure(running_stack.kubectl, options, args.pods):
            print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
