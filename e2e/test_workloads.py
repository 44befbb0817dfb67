"""Workloads go through their queues whole, with no hand-written PodGroup (issue 33 item 2).

An opted-in pod that a controller owns and that names no PodGroup joins the group of its
workload, ``podgroup-<owner uid>`` (Volcano's name), which the operator creates: queue from the
pod, the owner or the namespace; ``minMember`` from ``scheduling.volcano.sh/group-min-member``;
``minResources`` the pod's requests times ``minMember``; an ownerReference to the owner.

On the real backend the Job, Deployment and StatefulSet controllers make the pods. kubesim
stores these objects but runs none of their controllers, so there the test writes the pods
the controller would (with their ownerReferences to the stored owner), and what is tested is
queuetree's part: the webhook, the group, the admission.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from e2e import support

POD = {"cpu": "100m", "memory": "64Mi"}
MIN_MEMBER = "scheduling.volcano.sh/group-min-member"


def template(queue: str, *, min_member: int | None = None, labels: dict[str, str]) -> dict:
    pod = support.pod("unused", namespace="unused", queue=queue, requests=POD)
    annotations = pod["metadata"]["annotations"]
    if min_member is not None:
        annotations[MIN_MEMBER] = str(min_member)
    return {"metadata": {"annotations": annotations, "labels": labels}, "spec": pod["spec"]}


def job(name: str, *, namespace: str, queue: str, pods: int, min_member: int) -> dict:
    spec = template(queue, min_member=min_member, labels={"workload": name})
    spec["spec"]["restartPolicy"] = "Never"
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "completionMode": "Indexed",
            "completions": pods,
            "parallelism": pods,
            "backoffLimit": 0,
            "template": spec,
        },
    }


def replicated(
    kind: str, name: str, *, namespace: str, queue: str, replicas: int, min_member: int
) -> dict:
    labels = {"workload": name}
    spec: dict[str, Any] = {
        "replicas": replicas,
        "selector": {"matchLabels": labels},
        "template": template(queue, min_member=min_member, labels=labels),
    }
    if kind == "StatefulSet":
        spec["serviceName"] = name
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


class Workload:
    """A workload and its pods: the real controller's on the real backend; on kubesim the
    stored owner (a Deployment is stored as the ReplicaSet it would make) and pods written as
    its controller would write them."""

    def __init__(self, kube: support.Kube, manifest: dict[str, Any]) -> None:
        self.kube = kube
        self.name = manifest["metadata"]["name"]
        self.simulated = kube.cluster.backend == "kubesim"
        if self.simulated and manifest["kind"] == "Deployment":
            manifest = {**manifest, "kind": "ReplicaSet"}
        self.manifest = manifest
        kube.must(kube.as_tenant().apply(manifest) if not self.simulated else kube.apply(manifest))
        self.written: list[str] = []
        if self.simulated:
            self.scale(self._count())

    def _count(self) -> int:
        spec = self.manifest["spec"]
        return int(spec.get("parallelism") or spec.get("replicas") or 0)

    def scale(self, count: int) -> None:
        """Scale to ``count`` pods (kubectl scale; on kubesim, write or delete pods)."""
        kind = self.manifest["kind"]
        if not self.simulated:
            if kind != "Job" and count != self._count():
                self.kube.must(
                    self.kube.kubectl("scale", f"{kind.lower()}/{self.name}", f"--replicas={count}")
                )
                self.manifest["spec"]["replicas"] = count
            return
        owner = self.kube.get(kind.lower(), self.name) or {}
        reference = {
            "apiVersion": self.manifest["apiVersion"],
            "kind": kind,
            "name": self.name,
            "uid": owner["metadata"]["uid"],
            "controller": True,
        }
        while len(self.written) > count:
            self.kube.delete_pod(self.written.pop())
        while len(self.written) < count:
            name = f"{self.name}-{len(self.written)}"
            body = copy.deepcopy(self.manifest["spec"]["template"])
            body["metadata"].update(
                name=name, namespace=self.kube.namespace, ownerReferences=[reference]
            )
            self.kube.must(self.kube.as_tenant().apply({"apiVersion": "v1", "kind": "Pod", **body}))
            self.written.append(name)

    def pods(self) -> list[dict[str, Any]]:
        found = support.pods_in(self.kube, "-l", f"workload={self.name}")
        return [p for p in found if not (p.get("metadata") or {}).get("deletionTimestamp")]

    def running(self) -> int:
        return sum(1 for p in self.pods() if (p.get("status") or {}).get("phase") == "Running")

    def gated(self) -> int:
        return len(list(support.iter_gated(self.pods())))

    def group(self) -> dict[str, Any]:
        """The generated PodGroup of the pods ({} until they name one that exists)."""
        names = {
            ((p.get("metadata") or {}).get("annotations") or {}).get(support.GROUP_NAME)
            for p in self.pods()
        }
        names.discard(None)
        if len(names) != 1:
            return {}
        return self.kube.get("podgroup", str(names.pop())) or {}


def raise_capability(kube: support.Kube, queue: str, cpu: str) -> None:
    patch = json.dumps({"spec": {"capability": {"cpu": cpu}}})
    kube.must(kube.kubectl("patch", "queue", queue, "--type=merge", "-p", patch))


def group_summary(group: dict[str, Any]) -> tuple[Any, ...]:
    spec = group.get("spec") or {}
    owners = (group.get("metadata") or {}).get("ownerReferences") or [{}]
    return (
        group["metadata"]["name"].startswith("podgroup-"),
        owners[0].get("kind"),
        spec.get("minMember"),
        (spec.get("minResources") or {}).get("cpu"),
        spec.get("queue"),
    )


def test_a_job_of_four_that_needs_all_four_runs_none_until_all_four_fit(
    kube: support.Kube,
) -> None:
    queue = support.unique("job-gang")
    kube.must(kube.apply(support.queue(queue, capability={"cpu": "300m", "memory": "1Gi"})))
    workload = Workload(
        kube, job("train", namespace=kube.namespace, queue=queue, pods=4, min_member=4)
    )
    support.eventually(
        lambda: len(workload.pods()) == 4 and workload.group(), what="four pods and their group"
    )
    support.eventually(
        lambda: all(
            "requested 400m" in kube.explanation(p["metadata"]["name"]) for p in workload.pods()
        ),
        what="every pod is told the whole Job does not fit",
        diagnose=lambda: str([kube.explanation(p["metadata"]["name"]) for p in workload.pods()]),
    )
    held = (workload.running(), workload.gated(), group_summary(workload.group()))
    raise_capability(kube, queue, "400m")
    support.eventually(lambda: workload.running() == 4, what="all four run together")
    assert held == (0, 4, (True, "Job", 4, "400m", queue))


def test_a_deployment_grows_and_shrinks_pod_by_pod_beyond_its_minimum(
    kube: support.Kube,
) -> None:
    queue = support.unique("deploy")
    kube.must(kube.apply(support.queue(queue, capability={"cpu": "300m", "memory": "1Gi"})))
    manifest = replicated(
        "Deployment", "web", namespace=kube.namespace, queue=queue, replicas=2, min_member=2
    )
    workload = Workload(kube, manifest)
    support.eventually(lambda: workload.running() == 2, what="the minimum of two runs together")
    workload.scale(3)
    support.eventually(lambda: workload.running() == 3, what="a third pod runs alone")
    workload.scale(4)
    support.eventually(
        lambda: len(workload.pods()) == 4 and workload.gated() == 1,
        what="a fourth pod waits: the queue has room for three",
    )
    at_four = (workload.running(), workload.gated(), group_summary(workload.group()))
    workload.scale(2)
    support.eventually(
        lambda: len(workload.pods()) == 2 and workload.running() == 2,
        what="scaled down to two running pods",
    )
    assert at_four == (3, 1, (True, "ReplicaSet", 2, "200m", queue))


def test_a_stateful_set_waits_for_its_group_min_member(kube: support.Kube) -> None:
    queue = support.unique("sts")
    kube.must(kube.apply(support.queue(queue, capability={"cpu": "100m", "memory": "1Gi"})))
    manifest = replicated(
        "StatefulSet", "db", namespace=kube.namespace, queue=queue, replicas=2, min_member=2
    )
    manifest["spec"]["podManagementPolicy"] = "Parallel"
    workload = Workload(kube, manifest)
    support.eventually(
        lambda: len(workload.pods()) == 2 and workload.group(), what="two pods and their group"
    )
    support.eventually(
        lambda: all(
            "requested 200m" in kube.explanation(p["metadata"]["name"]) for p in workload.pods()
        ),
        what="both pods are told the set does not fit",
    )
    held = (workload.running(), group_summary(workload.group()))
    raise_capability(kube, queue, "200m")
    support.eventually(lambda: workload.running() == 2, what="both run together")
    assert held == (0, (True, "StatefulSet", 2, "200m", queue))
