"""A KubeRay RayCluster goes through its queue whole, or not at all (issue 33 item 3).

The manifests are those of docs/integrations/ray.md.

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

from e2e import support, test_pytorchjob

pytestmark = pytest.mark.backends(
    "real",
    reason="KubeRay is a Go controller that runs against the real control plane only "
    "(kubesim cannot serve it)",
)

MANIFEST = support.REPO / "docs" / "integrations" / "raycluster.yaml"
"""The Queue and the RayCluster of docs/integrations/ray.md, applied as they are but for the
queue's name (unique to the test)."""
CLUSTER = "demo"
GROUP = f"ray-{CLUSTER}-pg"
"""The PodGroup KubeRay's volcano plugin names after the RayCluster."""
WORKERS = 2
SELECTOR = f"ray.io/cluster={CLUSTER}"


def documented(namespace: str, queue: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The documented Queue (renamed ``queue``) and RayCluster (in ``namespace``, labelled for
    that queue; pods deleted without a grace period, so the test's cleanup is quick)."""
    queue_manifest, ray = support.documents(MANIFEST.read_text())
    queue_manifest["metadata"]["name"] = queue
    ray["metadata"]["namespace"] = namespace
    ray["metadata"]["labels"]["volcano.sh/queue-name"] = queue
    for group in (ray["spec"]["headGroupSpec"], *ray["spec"]["workerGroupSpecs"]):
        group["template"]["spec"]["terminationGracePeriodSeconds"] = 0
    return queue_manifest, ray


def with_capability(queue: dict[str, Any], cpu: str) -> dict[str, Any]:
    return {**queue, "spec": {**queue["spec"], "capability": {"cpu": cpu}}}


@pytest.fixture(scope="module")
def kuberay(cluster: support.Cluster) -> None:
    support.sandbox(cluster).start_companion("kuberay-operator")


def ray_pods(kube: support.Kube) -> list[dict[str, Any]]:
    return support.pods_in(kube, "-l", SELECTOR)


@pytest.mark.usefixtures("kuberay")
def test_a_ray_cluster_is_admitted_whole_or_not_at_all(kube: support.Kube) -> None:
    q = support.unique("ray")
    queue, ray = documented(kube.namespace, q)
    assert queue["spec"]["capability"] == {"cpu": str(1 + WORKERS)}
    kube.must(kube.apply(with_capability(queue, str(WORKERS))))
    kube.must(kube.apply(ray))
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
        diagnose=lambda: str(kube.get(support.PODGROUP, GROUP)),
    )
    told = support.eventually(
        lambda: test_pytorchjob.owner_events(kube, "RayCluster", CLUSTER, "Unschedulable"),
        what="the RayCluster is told why it waits (kubectl describe raycluster)",
    )
    held = (
        sorted(support.iter_gated(ray_pods(kube)))
        == sorted(p["metadata"]["name"] for p in waiting),
        (kube.get(support.PODGROUP, GROUP) or {})["spec"].get("minMember"),
        condition.get("message"),
        sorted({p["spec"].get("schedulerName") for p in waiting}),
    )
    kube.must(kube.apply(queue))
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
        lambda: not ray_pods(kube) and kube.get(support.PODGROUP, GROUP) is None,
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
    assert (held, told[-1]) == (
        (True, 1 + WORKERS, expected, ["default-scheduler"]),
        f"PodGroup {GROUP}: {expected}",
    )


JOB_MANIFEST = support.REPO / "docs" / "integrations" / "rayjob.yaml"
JOB = "sample"
JOB_GROUP = f"ray-{JOB}-pg"
"""A RayJob's cluster pods join the PodGroup KubeRay names after the RayJob."""


SUBMITTER = {
    "metadata": {"annotations": {"kubesim.io/run-seconds": "2"}},
    "spec": {
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "ray-job-submitter",
                "image": "rayproject/ray:2.46.0",
                "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}},
            }
        ],
    },
}
"""The submitter pod as the test writes it: ``kubesim.io/run-seconds`` makes kwok finish it
(``controlplane/stages.yaml``), as ``ray job submit`` returns once the job has ended."""


@pytest.mark.usefixtures("kuberay")
def test_a_ray_jobs_cluster_is_admitted_whole_or_not_at_all(kube: support.Kube) -> None:
    """KubeRay counts the submitter's requests (500m) in the group's minResources but not in
    its minMember (3): with room for 2 CPUs nothing runs; with the documented 4 the head and
    both workers run together, the submitter finishes, and the RayJob reaches Complete
    (SUCCEEDED): the Ray side is the harness's stand-in dashboard
    (``controlplane/raydashboard.py``), every Kubernetes object is real. With
    ``shutdownAfterJobFinishes`` KubeRay then deletes the cluster and its pods; deleting the
    RayJob removes its PodGroup, and the queue holds nothing."""
    q = support.unique("ray-jobs")
    queue, job = support.documents(JOB_MANIFEST.read_text())
    queue["metadata"]["name"] = q
    job["metadata"]["namespace"] = kube.namespace
    job["metadata"]["labels"]["volcano.sh/queue-name"] = q
    cluster_spec = job["spec"]["rayClusterSpec"]
    for group in (cluster_spec["headGroupSpec"], *cluster_spec["workerGroupSpecs"]):
        group["template"]["spec"]["terminationGracePeriodSeconds"] = 0
    job["spec"]["submitterPodTemplate"] = SUBMITTER
    kube.must(kube.apply(with_capability(queue, str(WORKERS))))
    kube.must(kube.apply(job))
    selector = "ray.io/node-type in (head,worker)"
    condition = support.eventually(
        lambda: (
            kube.group_condition(JOB_GROUP).get("reason") == "NotEnoughResources"
            and kube.group_condition(JOB_GROUP)
        ),
        what="the RayJob's PodGroup is told its queue has no room",
        diagnose=lambda: str(kube.get(support.PODGROUP, JOB_GROUP)),
    )
    running_while_full = [
        p["metadata"]["name"]
        for p in support.pods_in(kube, "-l", selector)
        if kube.running(p["metadata"]["name"])
    ]
    kube.must(kube.apply(queue))
    support.eventually(
        lambda: (
            len(pods := support.pods_in(kube, "-l", selector)) == 1 + WORKERS
            and all(kube.running(p["metadata"]["name"]) for p in pods)
        ),
        what="the RayJob's head and both workers run together once the capability is raised",
        diagnose=lambda: str([p["metadata"]["name"] for p in support.pods_in(kube)]),
    )
    finished = support.eventually(
        lambda: (
            (status := (kube.get("rayjob", JOB) or {}).get("status") or {}).get(
                "jobDeploymentStatus"
            )
            in ("Complete", "Failed")
            and status
        ),
        what="the RayJob finishes",
        deadline=120,
        diagnose=lambda: str((kube.get("rayjob", JOB) or {}).get("status")),
    )
    support.eventually(
        lambda: not support.pods_in(kube, "-l", selector),
        what="KubeRay deletes the finished job's cluster and its pods",
        deadline=120,
        diagnose=lambda: str(
            [p["metadata"]["name"] for p in support.pods_in(kube)]
            + [kube.kubectl("get", "rayclusters", "-n", kube.namespace).stdout]
        ),
    )
    kube.must(kube.kubectl("delete", "rayjob", JOB, "-n", kube.namespace, "--wait=true"))
    support.eventually(
        lambda: kube.get(support.PODGROUP, JOB_GROUP) is None,
        what="deleting the RayJob removes its PodGroup",
    )
    support.eventually(
        lambda: support.all_zero(support.queue_figures(kube, q)),
        what=f"queue {q} holds nothing once the RayJob is deleted",
    )
    assert (
        running_while_full,
        f"queue '{q}' cannot take the pod group's minResources on cpu" in condition["message"],
        finished.get("jobDeploymentStatus"),
        finished.get("jobStatus"),
    ) == ([], True, "Complete", "SUCCEEDED")
