"""A PyTorchJob of the Kubeflow training operator goes through its queue whole (issue 33 item 3).

The manifests are those of docs/integrations/pytorchjob.md.

The training operator v1.8.1 runs with ``--gang-scheduler-name=volcano``
(:mod:`controlplane.companions`), as a Volcano user runs it, and nothing about the job is
written for queuetree: the operator creates PodGroup ``<job>`` (minMember 4, minResources the
four pods' requests, queue from ``runPolicy.schedulingPolicy.queue``) and waits for it to be
``Inqueue`` before it creates any pod; its pods name ``schedulerName: volcano``, which
queuetree's webhook adopts. In a queue with room for 3 of the 4 pods nothing runs and the
PodGroup says why; once the capability is raised the four run together, the test has kwok
complete them (``support.finish``), the job Succeeds, and deleting it leaves the queue empty.
The PyTorchJob is told too: the PodGroup's Event goes to its owner (issue 33 item 5).

Real backend only: kubesim serves no custom resources' controllers, and the training operator
is a Go program that needs a real API server (docs/integrations/pytorchjob.md).
"""

from __future__ import annotations

from typing import Any

import pytest

from e2e import support

pytestmark = pytest.mark.backends(
    "real",
    reason="the Kubeflow training operator is a Go controller that runs against the real "
    "control plane only (kubesim cannot serve it)",
)

MANIFEST = support.REPO / "docs" / "integrations" / "pytorchjob.yaml"
"""The Queue and the PyTorchJob of docs/integrations/pytorchjob.md, applied as they are but for
the queue's name (unique to the test)."""
JOB = "mnist"
WORKERS = 3
JOB_LABEL = "training.kubeflow.org/job-name"
PODS = [f"{JOB}-master-0", *(f"{JOB}-worker-{i}" for i in range(WORKERS))]


def documented(namespace: str, queue: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The documented Queue (renamed ``queue``) and PyTorchJob (in ``namespace``, in that
    queue; its pods run until the test ends their work with :func:`support.finish`)."""
    queue_manifest, job = support.documents(MANIFEST.read_text())
    queue_manifest["metadata"]["name"] = queue
    job["metadata"]["namespace"] = namespace
    job["spec"]["runPolicy"]["schedulingPolicy"]["queue"] = queue
    for spec in job["spec"]["pytorchReplicaSpecs"].values():
        spec["template"]["spec"]["terminationGracePeriodSeconds"] = 0
    return queue_manifest, job


def with_capability(queue: dict[str, Any], cpu: str) -> dict[str, Any]:
    return {**queue, "spec": {**queue["spec"], "capability": {"cpu": cpu}}}


def job_condition(kube: support.Kube, kind: str) -> bool:
    found = kube.get("pytorchjob", JOB) or {}
    conditions = (found.get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


@pytest.fixture(scope="module")
def training_operator(cluster: support.Cluster) -> None:
    support.sandbox(cluster).start_companion("training-operator")


@pytest.mark.usefixtures("training_operator")
def test_a_pytorch_job_runs_whole_once_its_queue_has_room_and_succeeds(
    kube: support.Kube,
) -> None:
    q = support.unique("training")
    queue, job = documented(kube.namespace, q)
    assert (queue["spec"]["capability"], len(PODS)) == ({"cpu": "4"}, 4)
    kube.must(kube.apply(with_capability(queue, "3")))
    watch = support.PodWatch(kube, JOB_LABEL)
    try:
        kube.must(kube.apply(job))
        condition = support.eventually(
            lambda: (
                kube.group_condition(JOB).get("reason") == "NotEnoughResources"
                and kube.group_condition(JOB)
            ),
            what="the job's PodGroup is told its queue has no room",
            diagnose=lambda: str(kube.get("podgroup", JOB)),
        )
        group = kube.get("podgroup", JOB) or {}
        waiting = (
            (group.get("status") or {}).get("phase"),
            group["spec"].get("minMember"),
            group["spec"].get("queue"),
            condition.get("message"),
            support.pods_in(kube),
        )
        told = support.eventually(
            lambda: owner_events(kube, "PyTorchJob", JOB, "Unschedulable"),
            what="the PyTorchJob is told why it waits (kubectl describe pytorchjob)",
        )
        kube.must(kube.apply(queue))
        support.eventually(
            lambda: all(kube.running(name) for name in PODS),
            what="all four pods run together once the capability is raised",
            diagnose=lambda: str([p["metadata"]["name"] for p in support.pods_in(kube)]),
        )
        support.finish(kube, "-l", f"{JOB_LABEL}={JOB}")
        support.eventually(
            lambda: job_condition(kube, "Succeeded"),
            what="the PyTorchJob succeeds once kwok completes its pods",
            diagnose=lambda: str((kube.get("pytorchjob", JOB) or {}).get("status")),
        )
    finally:
        events = watch.stop()
    gated = {e["object"]["metadata"]["name"] for e in events if support.GATE in _gates(e)}
    scheduler = {
        e["object"]["metadata"]["name"]: e["object"]["spec"].get("schedulerName") for e in events
    }
    kube.must(kube.kubectl("delete", "pytorchjob", JOB, "-n", kube.namespace, "--wait=true"))
    support.eventually(
        lambda: not support.pods_in(kube) and kube.get("podgroup", JOB) is None,
        what="deleting the job removes its pods and its PodGroup",
    )
    support.eventually(
        lambda: support.all_zero(support.queue_figures(kube, q)),
        what=f"queue {q} holds nothing once the job is deleted",
    )
    expected = (
        f"queue '{q}' cannot take the pod group's minResources on cpu: requested 4, used 0 of "
        "capability 3 (allocated plus inqueue groups)"
    )
    assert (waiting, told[-1], sorted(gated), sorted(set(scheduler.values()))) == (
        ("Pending", 4, q, expected, []),
        f"PodGroup {JOB}: {expected}",
        sorted(PODS),
        ["default-scheduler"],
    )


def owner_events(kube: support.Kube, kind: str, name: str, reason: str) -> list[str]:
    """The messages of the Events of ``kind``/``name`` with ``reason`` (``kubectl describe``)."""
    return [
        str(event.get("message"))
        for event in kube.events_of(kind, name)
        if event.get("reason") == reason
    ]


def _gates(event: dict[str, Any]) -> list[str]:
    return [g["name"] for g in (event["object"].get("spec") or {}).get("schedulingGates") or []]
