"""A KubeRay RayCluster goes through its queue whole, or not at all (issue 33 item 3).

KubeRay v1.5.0 runs with ``--batch-scheduler=volcano`` (:mod:`controlplane.companions`), as a
Volcano user runs it, and the RayCluster is Volcano's own example: labelled
``ray.io/scheduler-name: volcano`` and ``volcano.sh/queue-name``. KubeRay creates PodGroup
``ray-<name>-pg`` (minMember head plus workers, minResources their requests, queue from the
label) and, unlike the training operator, creates every pod at once, each naming
``schedulerName: volcano``, which queuetree's webhook adopts. In a queue with room for 2 of its
3 pods none runs, each says why, and the group says why; once the capability is raised the
three run together and the cluster is ready; deleting it leaves the queue empty.

Real backend only: KubeRay is a Go controller that needs a real API server (kubesim serves no
custom resources' controllers).
"""

from __future__ import annotations

from typing import Any

import pytest

from e2e import support

pytestmark = pytest.mark.backends(
    "real",
    reason="KubeRay is a Go controller that runs against the real control plane only "
    "(kubesim cannot serve it)",
)

CLUSTER = "demo"
GROUP = f"ray-{CLUSTER}-pg"
"""The PodGroup KubeRay's volcano plugin names after the RayCluster."""
WORKERS = 2
POD = {"cpu": "1", "memory": "64Mi"}
SELECTOR = f"ray.io/cluster={CLUSTER}"


def container(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "image": "rayproject/ray:2.46.0",
        "resources": {"requests": POD, "limits": POD},
    }


def ray_cluster(name: str, *, namespace: str, queue: str) -> dict[str, Any]:
    template = {"terminationGracePeriodSeconds": 0}
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"ray.io/scheduler-name": "volcano", "volcano.sh/queue-name": queue},
        },
        "spec": {
            "rayVersion": "2.46.0",
            "headGroupSpec": {
                "rayStartParams": {},
                "template": {"spec": {**template, "containers": [container("ray-head")]}},
            },
            "workerGroupSpecs": [
                {
                    "groupName": "workers",
                    "replicas": WORKERS,
                    "minReplicas": WORKERS,
                    "maxReplicas": WORKERS,
                    "rayStartParams": {},
                    "template": {"spec": {**template, "containers": [container("ray-worker")]}},
                }
            ],
        },
    }


@pytest.fixture(scope="module")
def kuberay(cluster: support.Cluster) -> None:
    support.sandbox(cluster).start_companion("kuberay-operator")


def ray_pods(kube: support.Kube) -> list[dict[str, Any]]:
    return support.pods_in(kube, "-l", SELECTOR)


@pytest.mark.usefixtures("kuberay")
def test_a_ray_cluster_is_admitted_whole_or_not_at_all(kube: support.Kube) -> None:
    q = support.unique("ray")
    kube.must(kube.apply(support.queue(q, capability={"cpu": "2"})))
    kube.must(kube.apply(ray_cluster(CLUSTER, namespace=kube.namespace, queue=q)))
    waiting = support.eventually(
        lambda: (
            len(pods := ray_pods(kube)) == 1 + WORKERS
            and all(
                (p["metadata"].get("annotations") or {}).get(support.REASON_ANNOTATION)
                for p in pods
            )
            and pods
        ),
        what="KubeRay creates the head and both workers, and each is told why it waits",
        diagnose=lambda: str([p["metadata"] for p in ray_pods(kube)]),
    )
    condition = support.eventually(
        lambda: (
            kube.group_condition(GROUP).get("reason") == "NotEnoughResources"
            and kube.group_condition(GROUP)
        ),
        what="the RayCluster's PodGroup is told its queue has no room",
        diagnose=lambda: str(kube.get("podgroup", GROUP)),
    )
    held = (
        sorted(support.iter_gated(ray_pods(kube)))
        == sorted(p["metadata"]["name"] for p in waiting),
        (kube.get("podgroup", GROUP) or {})["spec"].get("minMember"),
        condition.get("message"),
        sorted({p["spec"].get("schedulerName") for p in waiting}),
    )
    kube.must(kube.apply(support.queue(q, capability={"cpu": "3"})))
    support.eventually(
        lambda: all(kube.running(p["metadata"]["name"]) for p in waiting),
        what="the head and both workers run together once the capability is raised",
    )
    support.eventually(
        lambda: (
            ((kube.get("raycluster", CLUSTER) or {}).get("status") or {}).get("state") == "ready"
        ),
        what="the RayCluster is ready",
        diagnose=lambda: str((kube.get("raycluster", CLUSTER) or {}).get("status")),
    )
    kube.must(kube.kubectl("delete", "raycluster", CLUSTER, "-n", kube.namespace, "--wait=true"))
    support.eventually(
        lambda: not ray_pods(kube) and kube.get("podgroup", GROUP) is None,
        what="deleting the RayCluster removes its pods and its PodGroup",
    )
    support.eventually(
        lambda: support.all_zero(support.queue_figures(kube, q)),
        what=f"queue {q} holds nothing once the RayCluster is deleted",
    )
    expected = (
        f"queue '{q}' cannot take the pod group's minResources on cpu: requested 3, used 0 of "
        "capability 2 (allocated plus inqueue groups)"
    )
    assert held == (True, 1 + WORKERS, expected, ["default-scheduler"])
