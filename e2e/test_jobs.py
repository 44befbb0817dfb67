"""A ``batch/v1`` Job whose pod template opts in runs through the queue gate to completion.

The job controller creates the pods (through the webhooks, which gate them), the operator
admits as many as the queue has room for, kube-scheduler places them, kwok runs them and, as
their ``kubesim.io/run-seconds`` annotation asks, completes them; the job controller counts
each completed index and creates nothing more once every index has succeeded. The queue's
capability is half the Job's parallelism, so the gate visibly holds pods back; a watch of the
pods shows every pod gated at creation and, at no step of the run, more pods admitted and not
finished than the capability allows.

kubesim stores ``batch/v1`` Jobs but runs no job controller: real backend only.
"""

from __future__ import annotations

from typing import Any

import pytest

from e2e import support

POD = {"cpu": "100m", "memory": "64Mi"}
ROOM = 2
"""Pods of the Job the queue can run at once."""
COMPLETIONS = 4


def indexed_job(name: str, *, namespace: str, queue: str) -> dict[str, Any]:
    pod = support.pod("unused", namespace=namespace, queue=queue, requests=POD)
    template = {"metadata": {"annotations": pod["metadata"]["annotations"]}, "spec": pod["spec"]}
    template["metadata"]["annotations"]["kubesim.io/run-seconds"] = "2"
    template["spec"]["restartPolicy"] = "Never"
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "completionMode": "Indexed",
            "completions": COMPLETIONS,
            "parallelism": COMPLETIONS,
            "backoffLimit": 0,
            "template": template,
        },
    }


def job_condition(job: dict[str, Any] | None, kind: str) -> bool:
    conditions = ((job or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def replay(events: list[dict[str, Any]]) -> tuple[int, set[str]]:
    """From a watch of the Job's pods: the most pods admitted and not finished at once (what
    the queue's capability bounds), and the pods that were ever seen gated."""
    admitted: set[str] = set()
    gated: set[str] = set()
    most = 0
    for event in events:
        pod = event["object"]
        name = pod["metadata"]["name"]
        gates = [g["name"] for g in (pod.get("spec") or {}).get("schedulingGates") or []]
        finished = (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
        if support.GATE in gates:
            gated.add(name)
        if event["type"] == "DELETED" or finished or support.GATE in gates:
            admitted.discard(name)
        else:
            admitted.add(name)
        most = max(most, len(admitted))
    return most, gated


@pytest.mark.backends(
    "real", "existing", reason="kubesim stores batch/v1 Jobs but runs no job controller"
)
def test_an_indexed_job_that_opts_in_is_admitted_through_the_gate_and_completes(
    kube: support.Kube,
) -> None:
    queue = support.unique("job")
    capability = {"cpu": f"{ROOM * 100}m", "memory": f"{ROOM * 64}Mi"}
    kube.must(kube.apply(support.queue(queue, capability=capability)))
    watch = support.PodWatch(kube, "job-name=indexed")
    try:
        kube.must(kube.apply(indexed_job("indexed", namespace=kube.namespace, queue=queue)))
        job = support.eventually(
            lambda: (
                (found := kube.get("job", "indexed"))
                and (job_condition(found, "Complete") or job_condition(found, "Failed"))
                and found
            ),
            what="the Job completes or fails",
            deadline=120,
        )
    finally:
        events = watch.stop()
    status = job.get("status") or {}
    most_admitted, gated = replay(events)
    support.eventually(
        lambda: support.all_zero(support.queue_figures(kube, queue)),
        what=f"queue {queue} has nothing allocated or reserved once the Job is done",
    )
    assert (
        job_condition(job, "Complete"),
        status.get("succeeded"),
        status.get("completedIndexes"),
        most_admitted,
        len(gated),
    ) == (True, COMPLETIONS, f"0-{COMPLETIONS - 1}", ROOM, COMPLETIONS), (status, len(events))
