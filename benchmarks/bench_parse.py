"""Micro-benchmark of ``queuetree.api.manifests.parse_pod`` (one JSON object per line).

The operator parses every pod watch event; under a burst of thousands of pods this parse is a
visible share of its CPU. Three pod shapes are timed: the one ``bench_operator.py`` creates, the
same pod as the API server (kubesim) stores and sends it, and a larger stored pod (two containers
with requests and limits, an init container, node affinity, tolerations, a priority class). Each
line reports the microseconds per parse (best of several rounds). Nothing here asserts a time.

``parse_pod`` reads well-formed pods by a fast path and falls back to the checked path (which
names every problem) for anything unusual; ``--checked`` also times the checked path alone,
which is how every pod was read before the fast path (commit 91064ee and earlier).

Run: ``.venv/bin/python benchmarks/bench_parse.py [--checked] [--repeat N] [--rounds N]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any

from queuetree.api import pod_manifests

GATE = "scheduling.volcano.sh/queue-allocation-gate"


def operator_bench_pod() -> dict[str, Any]:
    """The pod of ``benchmarks/bench_operator.py`` as that script writes it."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "pod-17",
            "annotations": {GATE: "true", "scheduling.volcano.sh/queue-name": "leaf-3"},
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


def _managed_fields() -> list[dict[str, Any]]:
    return [
        {
            "manager": "kubectl-client-side-apply",
            "operation": "Update",
            "apiVersion": "v1",
            "time": "2026-11-30T12:00:00Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {"f:annotations": {".": {}, f"f:{GATE}": {}}},
                "f:spec": {"f:containers": {'k:{"name":"main"}': {".": {}, "f:image": {}}}},
            },
        }
    ]


def _default_tolerations() -> list[dict[str, Any]]:
    return [
        {
            "key": "node.kubernetes.io/not-ready",
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": 300,
        },
        {
            "key": "node.kubernetes.io/unreachable",
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": 300,
        },
    ]


def _stored_container(
    name: str, requests: dict[str, str], limits: dict[str, str]
) -> dict[str, Any]:
    return {
        "name": name,
        "image": "registry.example.com/team/trainer:1.4.2",
        "imagePullPolicy": "IfNotPresent",
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "resources": {"requests": requests, "limits": limits},
        "env": [{"name": "EPOCHS", "value": "10"}],
    }


def stored_pod() -> dict[str, Any]:
    """A gated pod as the API server stores it: server metadata, defaults, status."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "trainer-7f9c4-abcde",
            "namespace": "team-a",
            "uid": "0b8f3c1e-6a55-4c8e-9a43-6b1e5d3c2f10",
            "resourceVersion": "48213",
            "creationTimestamp": "2026-11-30T12:00:00Z",
            "labels": {"app": "trainer", "pod-template-hash": "7f9c4"},
            "annotations": {GATE: "true", "scheduling.volcano.sh/queue-name": "leaf-3"},
            "managedFields": _managed_fields(),
        },
        "spec": {
            "schedulingGates": [{"name": GATE}],
            "containers": [
                _stored_container(
                    "main", {"cpu": "500m", "memory": "1Gi"}, {"cpu": "1", "memory": "1Gi"}
                )
            ],
            "restartPolicy": "Always",
            "dnsPolicy": "ClusterFirst",
            "schedulerName": "default-scheduler",
            "terminationGracePeriodSeconds": 30,
            "securityContext": {},
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
            "priority": 0,
            "serviceAccountName": "default",
            "serviceAccount": "default",
            "tolerations": _default_tolerations(),
        },
        "status": {
            "phase": "Pending",
            "qosClass": "Burstable",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "SchedulingGated",
                    "message": "Scheduling is blocked due to non-empty scheduling gates",
                    "lastProbeTime": None,
                    "lastTransitionTime": "2026-11-30T12:00:00Z",
                }
            ],
        },
    }


def stored_gpu_pod() -> dict[str, Any]:
    """A larger stored pod: two containers, an init container, affinity, a priority class."""
    pod = stored_pod()
    pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] = "trainer"
    pod["metadata"]["labels"]["volcano.sh/preemptable"] = "false"
    spec = pod["spec"]
    spec["containers"] = [
        _stored_container(
            "main",
            {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"},
            {"cpu": "8", "memory": "16Gi", "nvidia.com/gpu": "1"},
        ),
        _stored_container("sidecar", {"cpu": "100m", "memory": "64Mi"}, {"memory": "128Mi"}),
    ]
    spec["initContainers"] = [
        _stored_container("fetch", {"cpu": "1", "memory": "2Gi"}, {"cpu": "1", "memory": "2Gi"})
    ]
    spec["priorityClassName"] = "batch"
    spec["priority"] = 1000
    spec["nodeSelector"] = {"accelerator": "a100"}
    spec["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}
                ]
            }
        }
    }
    spec["tolerations"] = [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        *_default_tolerations(),
    ]
    return pod


SHAPES = {
    "operator_bench_pod": operator_bench_pod,
    "stored_pod": stored_pod,
    "stored_gpu_pod": stored_gpu_pod,
}


def measure(
    name: str, manifest: dict[str, Any], *, checked: bool, repeat: int, rounds: int
) -> None:
    """Parse ``manifest`` ``repeat`` times per round; print the best round's µs per parse."""
    parse: Callable[[dict[str, Any]], object] = (
        pod_manifests.parse_pod_checked if checked else pod_manifests.parse_pod
    )
    parse(manifest)  # fill the quantity caches: a burst repeats a few request shapes
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(repeat):
            parse(manifest)
        best = min(best, time.perf_counter() - started)
    print(
        json.dumps(
            {
                "benchmark": f"{'parse_pod_checked' if checked else 'parse_pod'}.{name}",
                "us_per_parse": round(best / repeat * 1e6, 2),
                "repeat": repeat,
                "rounds": rounds,
                "python": sys.version.split()[0],
            }
        ),
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5000, help="parses per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--checked",
        action="store_true",
        help="also time the checked path alone (the parse before the fast path existed)",
    )
    args = parser.parse_args()
    for name, make in SHAPES.items():
        for checked in (False, True) if args.checked else (False,):
            measure(name, make(), checked=checked, repeat=args.repeat, rounds=args.rounds)


if __name__ == "__main__":
    main()
