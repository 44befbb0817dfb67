"""What every e2e test needs: kubectl on the cluster under test, manifests, polling, cleanup.

Tests act as a user would: ``kubectl apply/get/describe/delete/patch`` with
``--request-timeout=10s``, then poll for the state they expect, with a deadline. Every test
works in its own namespace and names its queues with a unique suffix, and :class:`Kube`
deletes what the test created (pods, pod groups, then queues, leaves first) afterwards, so
tests are independent of each other and of their order.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from queuetree.sandbox import kubectl, stack

T = TypeVar("T")

GATE = "scheduling.volcano.sh/queue-allocation-gate"
QUEUE_NAME = "scheduling.volcano.sh/queue-name"
GROUP_NAME = "scheduling.k8s.io/group-name"
REASON_ANNOTATION = "scheduling.queuetree.io/admission-reason"
SLOT = "queuetree.io/e2e-slot"
"""An extended resource the reclaim tests advertise on one node, so that they can fill that
node whatever the size of the cluster's real nodes (kubesim's or kind's)."""
IMAGE = "registry.k8s.io/pause:3.10"
DEFAULT_DEADLINE = 60.0


@dataclasses.dataclass(frozen=True, slots=True)
class Cluster:
    """The cluster under test, for the whole session."""

    client: kubectl.Kubectl
    backend: str
    """``kubesim`` or ``real`` (the suite started the sandbox stack on that backend) or
    ``existing`` (KUBECONFIG as given)."""
    reclaim_level: int
    """The operator's ``ancestorReclaimLevel``: tests derive what reclaim may do from it."""
    sandbox: stack.Stack | None = None
    """The sandbox stack the suite started, None on an existing cluster: its processes,
    logs and audit records."""


def unique(prefix: str) -> str:
    """``prefix`` with a short random suffix: a name no other test (or earlier run) uses."""
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def queue(
    name: str,
    *,
    parent: str = "root",
    deserved: Mapping[str, str] | None = None,
    capability: Mapping[str, str] | None = None,
    guarantee: Mapping[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {"parent": parent, **spec}
    if deserved is not None:
        body["deserved"] = dict(deserved)
    if capability is not None:
        body["capability"] = dict(capability)
    if guarantee is not None:
        body["guarantee"] = {"resource": dict(guarantee)}
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": body,
    }


def pod(
    name: str,
    *,
    namespace: str,
    queue: str | None = None,
    requests: Mapping[str, str] | None = None,
    opted_in: bool = True,
    gates: tuple[str, ...] = (),
    node_selector: Mapping[str, str] | None = None,
    group: str = "",
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """An opted-in pod (the webhook adds the queue gate) asking for ``requests`` (limits equal
    them, as extended resources require)."""
    annotations: dict[str, str] = {}
    if opted_in:
        annotations[GATE] = "true"
    if queue is not None:
        annotations[QUEUE_NAME] = queue
    if group:
        annotations[GROUP_NAME] = group
    resources = dict(requests or {"cpu": "10m", "memory": "16Mi"})
    container: dict[str, Any] = {
        "name": "main",
        "image": IMAGE,
        "resources": {"requests": resources, "limits": resources},
    }
    spec: dict[str, Any] = {
        "containers": [container],
        "terminationGracePeriodSeconds": 0,
        "tolerations": [{"operator": "Exists", "effect": "NoSchedule"}],
    }
    if gates:
        spec["schedulingGates"] = [{"name": gate} for gate in gates]
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": annotations,
            "labels": dict(labels or {}),
        },
        "spec": spec,
    }


def pod_group(
    name: str, *, namespace: str, queue: str, min_member: int = 1, **spec: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"queue": queue, "minMember": min_member, **spec},
    }


def eventually(
    probe: Callable[[], T | None], *, what: str, deadline: float = DEFAULT_DEADLINE
) -> T:
    """Poll ``probe`` until it returns something (not None, not False); fail naming ``what``."""
    try:
        return kubectl.poll(probe, timeout=deadline, what=what, interval=0.2)
    except TimeoutError as exc:
        raise AssertionError(str(exc)) from None


class Kube:
    """One test's view of the cluster: its own namespace, and cleanup of what it made."""

    def __init__(self, cluster: Cluster, namespace: str) -> None:
        self.cluster = cluster
        self.client = cluster.client
        self.namespace = namespace
        self._queues: list[str] = []

    # ------------------------------------------------------------------ acting as a user

    def kubectl(self, *args: str, input: str | None = None) -> kubectl.Result:
        return self.client.run(*args, input=input)

    def apply(self, *manifests: Mapping[str, Any]) -> kubectl.Result:
        """``kubectl apply`` the manifests; queues are remembered for cleanup even if denied."""
        for manifest in manifests:
            if manifest.get("kind") == "Queue":
                name = manifest["metadata"]["name"]
                if name not in self._queues:
                    self._queues.append(name)
        return self.client.apply(list(manifests))

    def create(self, *manifests: Mapping[str, Any]) -> kubectl.Result:
        """``kubectl create -o json`` (prints the object as the API server returned it)."""
        for manifest in manifests:
            if manifest.get("kind") == "Queue":
                self._queues.append(manifest["metadata"]["name"])
        return self.client.run(
            "create", "-o", "json", "-f", "-", input=kubectl.manifest_text(list(manifests))
        )

    def must(self, result: kubectl.Result) -> kubectl.Result:
        assert result.ok, result.describe()
        return result

    def get(self, resource: str, name: str, *, namespaced: bool = True) -> dict[str, Any] | None:
        """The object as ``kubectl get -o json`` prints it; None when it does not exist."""
        args = ["get", resource, name, "-o", "json"]
        if namespaced:
            args += ["-n", self.namespace]
        result = self.client.run(*args)
        if not result.ok:
            if "NotFound" in result.stderr or "not found" in result.stderr:
                return None
            raise AssertionError(result.describe())
        found: dict[str, Any] = result.json()
        return found

    def pod(self, name: str) -> dict[str, Any] | None:
        return self.get("pod", name)

    def queue(self, name: str) -> dict[str, Any] | None:
        return self.get("queue", name, namespaced=False)

    def gates(self, name: str) -> list[str] | None:
        """``kubectl get pod -o jsonpath={.spec.schedulingGates}``, decoded (None: no pod)."""
        result = self.client.run(
            "get", "pod", name, "-n", self.namespace, "-o", "jsonpath={.spec.schedulingGates}"
        )
        if not result.ok:
            return None
        text = result.stdout.strip()
        return [g["name"] for g in json.loads(text)] if text else []

    def describe_pod(self, name: str) -> str:
        return self.must(self.client.run("describe", "pod", name, "-n", self.namespace)).stdout

    def delete_pod(self, name: str) -> None:
        self.must(
            self.client.run(
                "delete", "pod", name, "-n", self.namespace, "--wait=true", "--timeout=60s"
            )
        )

    def set_queue_state(self, name: str, state: str) -> None:
        """Open or close a queue the way queuetree documents: write ``status.state``."""
        self.must(
            self.client.run(
                "patch",
                "queue",
                name,
                "--subresource=status",
                "--type=merge",
                "-p",
                json.dumps({"status": {"state": state}}),
            )
        )

    # ------------------------------------------------------------------ what pods look like

    def running(self, name: str) -> bool:
        found = self.pod(name)
        return bool(
            found is not None
            and (found.get("status") or {}).get("phase") == "Running"
            and not (found.get("spec") or {}).get("schedulingGates")
        )

    def gated(self, name: str) -> bool:
        return GATE in (self.gates(name) or [])

    def queue_state(self, name: str) -> str:
        found = self.queue(name)
        return str(((found or {}).get("status") or {}).get("state", ""))

    # ------------------------------------------------------------------ cleanup

    def cleanup(self) -> None:
        """Pods and pod groups first (queues with pods refuse to go in some configurations),
        then this test's queues, children before parents, then the namespace."""
        for kind in ("pods", "podgroups"):
            self.client.run(
                "delete", kind, "--all", "-n", self.namespace, "--wait=true", "--timeout=60s"
            )
        remaining = [q for q in self._queues if self.queue(q) is not None]
        for _ in range(len(remaining) + 1):
            if not remaining:
                break
            parents = {((self.queue(q) or {}).get("spec") or {}).get("parent") for q in remaining}
            leaves = [q for q in remaining if q not in parents]
            for name in leaves or remaining:
                self.client.run("delete", "queue", name, "--wait=true", "--timeout=60s")
            remaining = [q for q in remaining if self.queue(q) is not None]
        self.client.run("delete", "namespace", self.namespace, "--wait=false")
        assert not remaining, f"queues left behind: {remaining}"
