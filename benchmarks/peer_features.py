"""The rows of docs/comparison.md marked *ran*: the same small scenarios through queuetree and
through Kueue, on one real control plane, one JSON line per row and system.

    .venv/bin/python benchmarks/peer_features.py [--workdir DIR]

Needs the real control plane and Kueue built (``make controlplane controlplane-peers``); never
part of ``make test``. Each system gets a namespace of its own, and each admits only the pods
that ask for it (queuetree: the opt-in annotation; Kueue: its queue-name label), so both run on
the same nodes at once without touching each other's pods. Each line says what was expected,
what was seen, and ``"agrees"``; the script exits 1 if any row of queuetree disagrees (a Kueue
row that disagrees is a finding about Kueue, reported, not a failure).

Rows:

- ``quota``: a queue with room for 2 CPU, three 1-CPU pods: 2 run, 1 waits gated, and what the
  waiting pod itself shows a tenant (its ``PodScheduled`` condition and its Events);
- ``borrow``: two queues of 2 CPU deserved (nominal) each under one parent, the first may borrow
  up to 4: five pods in the first, 4 run;
- ``reclaim``: then two pods in the second queue: two of the borrower's are evicted and the
  lender's run; seconds from their creation to both running;
- ``gang``: a group of 4 one-CPU pods in a queue with room for 3 runs none; once the room is
  raised to 4, all 4 run.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import pathlib
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import yaml

from queuetree.sandbox import kubectl, stack

TIMEOUT = 180.0
"""Seconds any expected state may take (a loaded 2-core machine)."""
NODE = "peer-node:cpu=64,memory=256Gi,pods=500"
QT_NS = "qt-compare"
KUEUE_NS = "kueue-compare"
GATE = "scheduling.volcano.sh/queue-allocation-gate"
KUEUE_API = "kueue.x-k8s.io/v1beta2"
VOLCANO_API = "scheduling.volcano.sh/v1beta1"


def pod(
    name: str,
    namespace: str,
    *,
    labels: Mapping[str, str] = {},
    annotations: Mapping[str, str] = {},
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(labels),
            "annotations": dict(annotations),
        },
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "1", "memory": "64Mi"}},
                }
            ],
            "terminationGracePeriodSeconds": 0,
        },
    }


def qt_pod(name: str, queue: str, *, group: str = "") -> dict[str, Any]:
    annotations = {GATE: "true", "scheduling.volcano.sh/queue-name": queue}
    if group:
        annotations["scheduling.k8s.io/group-name"] = group
    return pod(name, QT_NS, annotations=annotations)


def kueue_pod(name: str, local_queue: str, *, group: str = "", total: int = 0) -> dict[str, Any]:
    labels = {"kueue.x-k8s.io/queue-name": local_queue}
    annotations = {}
    if group:
        labels["kueue.x-k8s.io/pod-group-name"] = group
        annotations["kueue.x-k8s.io/pod-group-total-count"] = str(total)
    return pod(name, KUEUE_NS, labels=labels, annotations=annotations)


def qt_queue(name: str, *, parent: str = "", deserved: str = "", capability: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"capability": {"cpu": capability}, "reclaimable": True}
    if deserved:
        spec["deserved"] = {"cpu": deserved}
    if parent:
        spec["parent"] = parent
    return {"apiVersion": VOLCANO_API, "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def cluster_queue(
    name: str, *, nominal: str, cohort: str = "", borrowing: str = "", reclaim: str = "Never"
) -> list[dict[str, Any]]:
    """A ClusterQueue of ``nominal`` CPU (and ample memory) and its LocalQueue of the same name
    in :data:`KUEUE_NS`."""
    cpu: dict[str, Any] = {"name": "cpu", "nominalQuota": nominal}
    if borrowing:
        cpu["borrowingLimit"] = borrowing
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "preemption": {"reclaimWithinCohort": reclaim},
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory"],
                "flavors": [
                    {
                        "name": "default",
                        "resources": [cpu, {"name": "memory", "nominalQuota": "64Gi"}],
                    }
                ],
            }
        ],
    }
    if cohort:
        spec["cohortName"] = cohort
    return [
        {"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec},
        {
            "apiVersion": KUEUE_API,
            "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": KUEUE_NS},
            "spec": {"clusterQueue": name},
        },
    ]


class Checker:
    def __init__(self, kube: kubectl.Kubectl) -> None:
        self.kube = kube

    def apply(self, documents: list[dict[str, Any]]) -> None:
        text = yaml.safe_dump_all(documents)
        # Kueue's webhooks may refuse for a moment after it starts: retried until the deadline.
        kubectl.poll(
            lambda: self.kube.run("apply", "-f", "-", input=text).ok,
            timeout=TIMEOUT,
            what=f"apply {[d['metadata']['name'] for d in documents]}",
            interval=1.0,
        )

    def pods(self, namespace: str, prefix: str) -> list[dict[str, Any]]:
        found = self.kube.check("get", "pods", "-n", namespace, "-o", "json").json()["items"]
        return [p for p in found if p["metadata"]["name"].startswith(prefix)]

    def counts(self, namespace: str, prefix: str) -> tuple[int, int]:
        """(Running, gated) pods whose names start with ``prefix``."""
        found = self.pods(namespace, prefix)
        running = sum(1 for p in found if p.get("status", {}).get("phase") == "Running")
        gated = sum(1 for p in found if p["spec"].get("schedulingGates"))
        return running, gated

    def until(self, probe: Callable[[], Any], what: str) -> float:
        started = time.monotonic()
        kubectl.poll(probe, timeout=TIMEOUT, what=what, interval=0.5)
        return round(time.monotonic() - started, 1)

    def settled(self, namespace: str, prefix: str, expected: tuple[int, int]) -> tuple[int, int]:
        """Wait until the counts are ``expected``, and stay so for a few more polls (a system
        that admits too many shows it); return what was last seen."""
        with contextlib.suppress(TimeoutError):
            self.until(lambda: self.counts(namespace, prefix) == expected, f"{prefix} {expected}")
        seen = self.counts(namespace, prefix)
        for _ in range(6):
            seen = self.counts(namespace, prefix)
            if seen != expected:
                break
            time.sleep(0.5)  # a steady state is observed over time, not awaited
        return seen

    def seconds_to_ready(self, namespace: str, prefix: str) -> int | None:
        """Seconds from the first pod's creation to the last one's readiness, from the pods'
        own timestamps (so one system's wait never counts in the other's figure); None while
        any is not ready."""
        created, ready = [], []
        for found in self.pods(namespace, prefix):
            conditions = found.get("status", {}).get("conditions") or []
            times = [
                c["lastTransitionTime"]
                for c in conditions
                if c.get("type") == "Ready" and c.get("status") == "True"
            ]
            if not times:
                return None
            created.append(found["metadata"]["creationTimestamp"])
            ready.append(times[0])
        if not created:
            return None
        return _seconds(max(ready)) - _seconds(min(created))

    def told(self, namespace: str, name: str) -> dict[str, Any]:
        """What a tenant sees on a waiting pod: its PodScheduled condition and Event messages."""
        found = self.kube.check("get", "pod", "-n", namespace, name, "-o", "json").json()
        scheduled = [
            f"{c.get('reason', '')}: {c.get('message', '')}"
            for c in found.get("status", {}).get("conditions") or []
            if c.get("type") == "PodScheduled"
        ]
        events = self.kube.check(
            "get",
            "events",
            "-n",
            namespace,
            "--field-selector",
            f"involvedObject.name={name}",
            "-o",
            "json",
        ).json()["items"]
        shown: dict[str, Any] = {
            "condition": scheduled,
            "events": sorted({e.get("message", "") for e in events}),
        }
        if namespace == KUEUE_NS:
            # Kueue keeps the reason on the pod's Workload, not on the pod.
            workloads = self.kube.check("get", "workloads", "-n", namespace, "-o", "json").json()
            shown["workload_conditions"] = sorted(
                f"{c.get('type')}={c.get('status')}: {c.get('message', '')}"
                for w in workloads["items"]
                if any(o.get("name") == name for o in w["metadata"].get("ownerReferences") or [])
                for c in w.get("status", {}).get("conditions") or []
            )
        return shown


def _seconds(stamp: str) -> int:
    return int(datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp())


def line(row: str, system: str, expected: Any, observed: Any, **more: Any) -> dict[str, Any]:
    record = {"row": row, "system": system, "expected": expected, "observed": observed}
    record["agrees"] = expected == observed
    record.update(more)
    print(json.dumps(record), flush=True)
    return record


def rows(check: Checker) -> Iterator[dict[str, Any]]:
    kube = check.kube
    for namespace in (QT_NS, KUEUE_NS):
        kube.run("create", "namespace", namespace)
    check.apply(
        [{"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": "default"}}]
    )

    # quota
    check.apply([qt_queue("cmp-quota", capability="2")])
    check.apply(cluster_queue("cmp-quota", nominal="2"))
    check.apply([qt_pod(f"quota-{i}", "cmp-quota") for i in range(3)])
    check.apply([kueue_pod(f"quota-{i}", "cmp-quota") for i in range(3)])
    for system, namespace in (("queuetree", QT_NS), ("kueue", KUEUE_NS)):
        seen = check.settled(namespace, "quota-", (2, 1))
        waiting = [
            p["metadata"]["name"]
            for p in check.pods(namespace, "quota-")
            if p["spec"].get("schedulingGates")
        ]
        told = check.told(namespace, waiting[0]) if waiting else {}
        yield line("quota", system, [2, 1], list(seen), waiting_pod_shows=told)

    # borrow, then reclaim
    check.apply(
        [
            qt_queue("cmp-parent", deserved="4", capability="4"),
            qt_queue("cmp-borrower", parent="cmp-parent", deserved="2", capability="4"),
            qt_queue("cmp-lender", parent="cmp-parent", deserved="2", capability="4"),
        ]
    )
    check.apply(
        [
            {"apiVersion": KUEUE_API, "kind": "Cohort", "metadata": {"name": "cmp-parent"}},
            *cluster_queue("cmp-borrower", nominal="2", borrowing="2", cohort="cmp-parent"),
            *cluster_queue("cmp-lender", nominal="2", cohort="cmp-parent", reclaim="Any"),
        ]
    )
    check.apply([qt_pod(f"borrow-{i}", "cmp-borrower") for i in range(5)])
    check.apply([kueue_pod(f"borrow-{i}", "cmp-borrower") for i in range(5)])
    for system, namespace in (("queuetree", QT_NS), ("kueue", KUEUE_NS)):
        yield line("borrow", system, [4, 1], list(check.settled(namespace, "borrow-", (4, 1))))
    check.apply([qt_pod(f"lend-{i}", "cmp-lender") for i in range(2)])
    check.apply([kueue_pod(f"lend-{i}", "cmp-lender") for i in range(2)])
    for system, namespace in (("queuetree", QT_NS), ("kueue", KUEUE_NS)):
        with contextlib.suppress(TimeoutError):
            check.until(lambda ns=namespace: check.counts(ns, "lend-")[0] == 2, f"{system} lender")
        lender = check.counts(namespace, "lend-")[0]
        borrower = check.counts(namespace, "borrow-")[0]
        yield line(
            "reclaim",
            system,
            [2, 2],
            [lender, borrower],
            seconds_to_lender_running=check.seconds_to_ready(namespace, "lend-"),
            borrower_pods_left=len(check.pods(namespace, "borrow-")),
        )

    # gang
    check.apply([qt_queue("cmp-gang", capability="3")])
    check.apply(cluster_queue("cmp-gang", nominal="3"))
    check.apply(
        [
            {
                "apiVersion": VOLCANO_API,
                "kind": "PodGroup",
                "metadata": {"name": "gang", "namespace": QT_NS},
                "spec": {"minMember": 4, "queue": "cmp-gang"},
            }
        ]
        + [qt_pod(f"gang-{i}", "cmp-gang", group="gang") for i in range(4)]
    )
    check.apply([kueue_pod(f"gang-{i}", "cmp-gang", group="gang", total=4) for i in range(4)])
    for system, namespace in (("queuetree", QT_NS), ("kueue", KUEUE_NS)):
        yield line("gang-short", system, [0, 4], list(check.settled(namespace, "gang-", (0, 4))))
    kube.check(
        "patch", "queue", "cmp-gang", "--type=merge", "-p", '{"spec":{"capability":{"cpu":"4"}}}'
    )
    kube.check(
        "patch",
        "clusterqueue",
        "cmp-gang",
        "--type=json",
        "-p",
        '[{"op":"replace","path":"/spec/resourceGroups/0/flavors/0/resources/0/nominalQuota","value":"4"}]',
    )
    for system, namespace in (("queuetree", QT_NS), ("kueue", KUEUE_NS)):
        yield line("gang-raised", system, [4, 0], list(check.settled(namespace, "gang-", (4, 0))))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=pathlib.Path, default=None)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="peer-features-") as scratch:
        options = stack.Options(
            workdir=args.workdir or pathlib.Path(scratch),
            backend="real",
            peers=("kueue",),
            node_flags=(NODE,),
        )
        with stack.running(options) as running:
            records = list(rows(Checker(running.kubectl)))
    return 0 if all(r["agrees"] for r in records if r["system"] == "queuetree") else 1


if __name__ == "__main__":
    sys.exit(main())
