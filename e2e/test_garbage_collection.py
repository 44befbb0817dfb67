"""Pods that go away with their owner leave no capacity behind, and hold it while they go.

- Deleting a namespace deletes its pods (the namespace controller; kubesim's cascade): gated
  pods at once, running ones once they have stopped. While a running pod is still on its node
  (here: held by a finalizer of the test, as a long grace period would), its queue's gated
  pods wait, and the operator says why; once it is gone they are admitted.
- Deleting a ReplicaSet deletes its pods (the garbage collector), each through its grace
  period (kwok removes a deleted pod when ``deletionTimestamp``, creation plus grace, is
  reached). At no sample does a waiting pod of the same queue run beside them.

Afterwards the queue's ``status.allocated`` and ``status.reserved`` return to zero.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from e2e import support

POD = {"cpu": "100m", "memory": "64Mi"}
ROOM = 2
FINALIZER = "e2e.queuetree.io/hold"
HELD_BY_DELETED = "held by pods being deleted"


def capability(pods: int) -> dict[str, str]:
    return {"cpu": f"{pods * 100}m", "memory": f"{pods * 64}Mi"}


def explanation(kube: support.Kube, name: str) -> str:
    found = kube.pod(name) or {}
    annotations = (found.get("metadata") or {}).get("annotations") or {}
    return str(annotations.get(support.REASON_ANNOTATION, ""))


def in_namespace(kube: support.Kube, namespace: str) -> list[dict[str, Any]]:
    result = kube.kubectl("get", "pods", "-n", namespace, "-o", "json")
    return result.json()["items"] if result.ok else []


def running_in(kube: support.Kube, namespace: str) -> set[str]:
    """Names of the pods of ``namespace`` that run without gates."""
    return {
        p["metadata"]["name"]
        for p in in_namespace(kube, namespace)
        if (p.get("status") or {}).get("phase") == "Running"
        and not (p.get("spec") or {}).get("schedulingGates")
    }


def test_a_deleted_namespace_frees_its_queue_once_its_pods_are_gone(kube: support.Kube) -> None:
    queue = support.unique("gc-ns")
    kube.must(kube.apply(support.queue(queue, capability=capability(ROOM))))
    doomed = support.unique("e2e-doomed")
    kube.must(kube.kubectl("create", "namespace", doomed))
    try:
        pods = [
            support.pod(f"run-{i}", namespace=doomed, queue=queue, requests=POD)
            for i in range(ROOM)
        ]
        for pod in pods:
            pod["metadata"]["finalizers"] = [FINALIZER]
        kube.must(kube.apply(*pods))
        support.eventually(
            lambda: running_in(kube, doomed) == {p["metadata"]["name"] for p in pods},
            what=f"the pods of {doomed} run",
        )
        kube.must(kube.apply(support.pod("waiting", namespace=doomed, queue=queue, requests=POD)))
        kube.must(
            kube.apply(support.pod("waiter", namespace=kube.namespace, queue=queue, requests=POD))
        )
        support.eventually(lambda: explanation(kube, "waiter"), what="the waiter is explained")
        kube.must(kube.kubectl("delete", "namespace", doomed, "--wait=false"))
        # The running pods stay (their finalizer) with a deletionTimestamp: still on their
        # nodes, so the queue is still full, and the waiter's explanation says by what.
        support.eventually(
            lambda: HELD_BY_DELETED in explanation(kube, "waiter"),
            what="the waiter waits for the pods being deleted",
        )
        held_back = kube.gates("waiter")
        left = sorted(p["metadata"]["name"] for p in in_namespace(kube, doomed))
    finally:
        for pod in in_namespace(kube, doomed):
            kube.kubectl(
                "patch",
                "pod",
                pod["metadata"]["name"],
                "-n",
                doomed,
                "--type=json",
                "-p",
                json.dumps([{"op": "remove", "path": "/metadata/finalizers"}]),
            )
        kube.kubectl("delete", "namespace", doomed, "--wait=false", "--ignore-not-found")
    support.eventually(lambda: kube.running("waiter"), what="the waiter runs once they are gone")
    support.eventually(
        lambda: kube.kubectl("get", "namespace", doomed).ok is False,
        what=f"namespace {doomed} is gone",
    )
    kube.delete_pod("waiter")
    support.eventually(
        lambda: support.all_zero(support.queue_figures(kube, queue)),
        what=f"queue {queue} has nothing allocated or reserved",
    )
    assert (held_back, left) == ([support.GATE], [f"run-{i}" for i in range(ROOM)])


def replica_set(name: str, *, namespace: str, queue: str, replicas: int) -> dict[str, Any]:
    pod = support.pod("unused", namespace=namespace, queue=queue, requests=POD)
    pod["spec"]["terminationGracePeriodSeconds"] = 5
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels, "annotations": pod["metadata"]["annotations"]},
                "spec": pod["spec"],
            },
        },
    }


@pytest.mark.backends(
    "real",
    "existing",
    reason="kubesim stores ReplicaSets but runs no replicaset controller, and deletes pods "
    "without a grace period",
)
def test_a_deleted_replica_set_frees_its_queue_only_once_its_pods_are_gone(
    kube: support.Kube,
) -> None:
    queue = support.unique("gc-rs")
    kube.must(kube.apply(support.queue(queue, capability=capability(ROOM))))
    kube.must(kube.apply(replica_set("rs", namespace=kube.namespace, queue=queue, replicas=3)))

    def replicas() -> list[dict[str, Any]]:
        return support.pods_in(kube, "-l", "app=rs")

    support.eventually(
        lambda: len(found := replicas()) == 3 and len(list(support.iter_gated(found))) == 1,
        what="two replicas admitted, one gated",
    )
    support.eventually(
        lambda: sum(kube.running(p["metadata"]["name"]) for p in replicas()) == ROOM,
        what="two replicas run",
    )
    kube.must(
        kube.apply(support.pod("waiter", namespace=kube.namespace, queue=queue, requests=POD))
    )
    support.eventually(lambda: explanation(kube, "waiter"), what="the waiter is explained")
    kube.must(kube.kubectl("delete", "replicaset", "rs", "-n", kube.namespace, "--wait=false"))
    beside: list[list[str]] = []

    def sample() -> bool:
        # The waiter first: replicas seen after it was ungated really were still there.
        ungated = kube.gates("waiter") == []
        remaining = [p["metadata"]["name"] for p in replicas()]
        if ungated and remaining:
            beside.append(remaining)
        return ungated and not remaining

    support.eventually(sample, what="the replicas are gone and the waiter admitted")
    support.eventually(lambda: kube.running("waiter"), what="the waiter runs")
    kube.delete_pod("waiter")
    support.eventually(
        lambda: support.all_zero(support.queue_figures(kube, queue)),
        what=f"queue {queue} has nothing allocated or reserved",
    )
    assert beside == []
