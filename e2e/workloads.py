"""Workloads for the e2e tests: a Job, a Deployment or a StatefulSet whose pods opt in, and its
pods: the real controller's on the real backend; on kubesim, which stores these objects but
runs none of their controllers, pods written as the controller would write them."""

from __future__ import annotations

import copy
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
        kube.must(kube.apply(manifest))
        kube.workloads.append(f"{manifest['kind'].lower()}/{self.name}")
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
                    self.kube.kubectl(
                        "scale",
                        f"{kind.lower()}/{self.name}",
                        "-n",
                        self.kube.namespace,
                        f"--replicas={count}",
                    )
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

    def started(self) -> int:
        """Pods that run or ran: kwok completes a Job's running pod at once on the real
        backend (docs/e2e.md), so a Job's pods may be Succeeded before a test sees them run."""
        phases = ("Running", "Succeeded", "Failed")
        return sum(1 for p in self.pods() if (p.get("status") or {}).get("phase") in phases)

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
        return self.kube.get(support.PODGROUP, str(names.pop())) or {}
