"""What every e2e test needs: kubectl on the cluster under test, manifests, polling, cleanup.

Tests act as a user would: ``kubectl apply/get/describe/delete/patch`` with
``--request-timeout=10s``, then poll for the state they expect, with a deadline. Every test
works in its own namespace and names its queues with a unique suffix, and :class:`Kube`
deletes what the test created (pods, pod groups, then queues, leaves first) afterwards, so
tests are independent of each other and of their order.

The suite's own kubectl is the cluster's administrator. :meth:`Kube.as_tenant` is the
namespace's tenant instead, with credentials obtained as a real user gets them, the same way
on every backend: a ServiceAccount ``tenant``, a Role for the verbs a tenant has on pods (their
in-place resize included) and PodGroups and its RoleBinding, a token from ``kubectl create
token``, and a kubeconfig for the same API server holding that token.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import yaml
from prometheus_client import parser as prometheus_parser

from controlplane import karpenter
from queuetree.core import quantities
from queuetree.sandbox import kubectl, stack

T = TypeVar("T")

GATE = "scheduling.volcano.sh/queue-allocation-gate"
QUEUE_NAME = "scheduling.volcano.sh/queue-name"
GROUP_NAME = "scheduling.k8s.io/group-name"
REASON_ANNOTATION = "scheduling.queuetree.io/admission-reason"
PODGROUP = "podgroups.scheduling.volcano.sh"
NATIVE_PODGROUP = "podgroups.scheduling.k8s.io"
"""The Workload API's PodGroup (kube-scheduler's gangs, docs/gangs.md)."""
"""Volcano's PodGroup as kubectl is told to read it: where the Workload API is served (the
real backend), the bare ``podgroups`` is kube-scheduler's ``podgroups.scheduling.k8s.io``
(docs/gangs.md, "Two kinds named podgroups")."""
SLOT = "queuetree.io/e2e-slot"
"""An extended resource the reclaim tests advertise on one node, so that they can fill that
node whatever the size of the cluster's real nodes (kubesim's or kind's)."""
IMAGE = "registry.k8s.io/pause:3.10"
CONTAINER = "main"
"""The name of the one container of :func:`pod`."""
DEFAULT_DEADLINE = 60.0
REPO = pathlib.Path(__file__).resolve().parents[1]

RUN_SECONDS = "kubesim.io/run-seconds"
"""How long a pod runs before it succeeds, for the simulated kubelets of the e2e backends
(kubesim's reads this annotation; the real backend's kwok stage is set up to read the same):
the pause image never exits by itself."""

INQUEUE_TIMEOUT = 30.0
"""The operator's ``--inqueue-timeout`` in the e2e stack (and the e2e overlay, for kind):
short, so that a test sees a PodGroup without pods go back to Pending within a minute; long
enough that every other test's pods come well within it on a loaded two-core machine."""

VALIDATING_WEBHOOKS = "validatingwebhookconfiguration/queuetree-validating-webhook"
UNVALIDATED = "e2e.queuetree.io/unvalidated"
"""A label :func:`unvalidated_queues` takes out of the queue webhook's rules."""

TENANT = "tenant"
"""The ServiceAccount a test namespace's tenant acts as (:meth:`Kube.as_tenant`)."""
TENANT_VERBS = ("get", "list", "watch", "create", "update", "patch", "delete")
"""What a tenant may do with the pods and PodGroups of its namespace, and nothing more."""
RESIZE_VERBS = ("get", "update", "patch")
"""What a tenant may do with ``pods/resize`` (in-place resize): not in Kubernetes' built-in
``edit`` role, but granted wherever tenants (or the Vertical Pod Autoscaler's in-place mode)
resize their pods, so the suite's tenant has it."""


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
    inqueue_timeout: float = INQUEUE_TIMEOUT
    """The operator's ``--inqueue-timeout`` (seconds; 0: none): how long a PodGroup without
    pods holds its queue's room."""


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
        "name": CONTAINER,
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


def finish(kube: Kube, *selector: str) -> None:
    """The running pods of ``selector`` (made without :data:`RUN_SECONDS`) succeed now: they
    are annotated with ``RUN_SECONDS: 0``, which both kubelets read again on the update
    (kwok's stage of controlplane/stages.yaml matches a pod's stages again on every update;
    kubesim arms a pod's completion when the annotation first appears). A test that needs
    pods running through several phases ends their work when its checks are done, instead
    of giving them a run time long enough to outlast those phases on a loaded machine,
    which then kept them, and what they hold, for minutes after the last check needed them."""
    annotated = kube.must(
        kube.kubectl(
            "annotate", "pods", "-n", kube.namespace, *selector, f"{RUN_SECONDS}=0", "-o", "name"
        )
    )
    assert annotated.stdout.strip(), f"no pod of {kube.namespace} matches {selector}"


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
    probe: Callable[[], T | None],
    *,
    what: str,
    deadline: float = DEFAULT_DEADLINE,
    diagnose: Callable[[], str] | None = None,
) -> T:
    """Poll ``probe`` until it returns something true; fail naming ``what``, followed by what
    ``diagnose`` says about the cluster at that moment (if given).

    Empty strings, lists and zero count as not yet: a probe that reads an annotation or lists
    events returns them while the state is still on its way, and taking them as an answer made
    tests pass or fail by timing."""
    try:
        return kubectl.poll(lambda: probe() or None, timeout=deadline, what=what, interval=0.2)
    except TimeoutError as exc:
        message = str(exc)
        if diagnose is not None:
            message += "\n" + _diagnosis(diagnose)
        raise AssertionError(message) from None


def _diagnosis(diagnose: Callable[[], str]) -> str:
    """What ``diagnose`` says, or why it could not say it (a failure message must not fail)."""
    try:
        return diagnose()
    except Exception as exc:  # the cluster may be what broke
        return f"(no diagnosis: {type(exc).__name__}: {exc})"


def tenant_access(namespace: str) -> list[dict[str, Any]]:
    """The ServiceAccount, Role and RoleBinding of :data:`TENANT` in ``namespace``."""
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": TENANT, "namespace": namespace},
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": TENANT, "namespace": namespace},
            "rules": [
                {"apiGroups": [""], "resources": ["pods"], "verbs": list(TENANT_VERBS)},
                {"apiGroups": [""], "resources": ["pods/resize"], "verbs": list(RESIZE_VERBS)},
                {
                    "apiGroups": ["scheduling.volcano.sh"],
                    "resources": ["podgroups"],
                    "verbs": list(TENANT_VERBS),
                },
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": TENANT, "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": TENANT},
            "subjects": [{"kind": "ServiceAccount", "name": TENANT, "namespace": namespace}],
        },
    ]


def token_kubeconfig(admin: kubectl.Kubectl, token: str, path: pathlib.Path) -> pathlib.Path:
    """A kubeconfig for the API server ``admin`` talks to (its current context's cluster:
    address and CA), authenticating with ``token`` instead of the administrator's
    credentials."""
    found = admin.check("config", "view", "--minify", "--raw", "-o", "json").json()
    server = dict(found["clusters"][0]["cluster"])
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "cluster", "cluster": server}],
        "users": [{"name": "token", "user": {"token": token}}],
        "contexts": [{"name": "token", "context": {"cluster": "cluster", "user": "token"}}],
        "current-context": "token",
    }
    path.write_text(json.dumps(config))
    path.chmod(0o600)
    return path


class Kube:
    """One test's view of the cluster: its own namespace, and cleanup of what it made."""

    def __init__(self, cluster: Cluster, namespace: str, *, owner: bool = True) -> None:
        self.cluster = cluster
        self.client = cluster.client
        self.namespace = namespace
        self._queues: list[str] = []
        self.workloads: list[str] = []
        """``kind/name`` of the workloads (Jobs, Deployments, ...) the test made: deleted
        first at cleanup, or their controllers make their pods again, which the queues count."""
        self._owner = owner
        """False for the tenant's view: the administrator's view cleans up."""
        self._tenant: Kube | None = None
        self._workdir: tempfile.TemporaryDirectory[str] | None = None

    def as_tenant(self) -> Kube:
        """This namespace as its tenant sees it: kubectl with the token of the ServiceAccount
        :data:`TENANT`, which may do :data:`TENANT_VERBS` on the namespace's pods and
        PodGroups and :data:`RESIZE_VERBS` on ``pods/resize`` (created by the administrator on
        the first call). Works on every backend:
        the token comes from ``kubectl create token``, the server from the administrator's
        kubeconfig."""
        if self._tenant is not None:
            return self._tenant
        self.must(self.apply(*tenant_access(self.namespace)))
        token = self.must(self.kubectl("create", "token", TENANT, "-n", self.namespace))
        self._workdir = tempfile.TemporaryDirectory(prefix="e2e-tenant-")
        directory = pathlib.Path(self._workdir.name)
        kubeconfig = token_kubeconfig(self.client, token.stdout.strip(), directory / "kubeconfig")
        (directory / "cache").mkdir()
        client = kubectl.Kubectl(str(kubeconfig), str(directory / "cache"))
        self._tenant = Kube(
            dataclasses.replace(self.cluster, client=client), self.namespace, owner=False
        )
        return self._tenant

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

    def create(self, *manifests: Mapping[str, Any], timeout: float = 60.0) -> kubectl.Result:
        """``kubectl create -o json`` (prints the object as the API server returned it)."""
        for manifest in manifests:
            if manifest.get("kind") == "Queue":
                self._queues.append(manifest["metadata"]["name"])
        return self.client.run(
            "create",
            "-o",
            "json",
            "-f",
            "-",
            input=kubectl.manifest_text(list(manifests)),
            timeout=timeout,
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

    def resize(self, name: str, resources: Mapping[str, Any]) -> kubectl.Result:
        """``kubectl patch pod NAME --subresource=resize``: new ``resources`` (requests,
        limits) for the container of a :func:`pod`."""
        body = {"spec": {"containers": [{"name": CONTAINER, "resources": dict(resources)}]}}
        return self.client.run(
            "patch",
            "pod",
            name,
            "-n",
            self.namespace,
            "--subresource=resize",
            "-p",
            json.dumps(body),
        )

    def report_container_resources(self, name: str) -> None:
        """Write the resources of the running pod's containers into its status, as a kubelet of
        1.33 or later does: kube-apiserver refuses to resize a running pod whose containers
        report none ("Pod running on node without support for resize"), and kwok's nodes and
        kubesim's kubelet report none."""
        found = self.pod(name) or {}
        patch = [
            {
                "op": "add",
                "path": f"/status/containerStatuses/{index}/resources",
                "value": container.get("resources") or {},
            }
            for index, container in enumerate((found.get("spec") or {}).get("containers") or [])
        ]
        self.must(
            self.client.run(
                "patch",
                "pod",
                name,
                "-n",
                self.namespace,
                "--subresource=status",
                "--type=json",
                "-p",
                json.dumps(patch),
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

    def fail_pod(self, name: str) -> None:
        """Make the running pod ``name`` fail, as a kubelet reports a container that exited
        with code 1: the pause image never exits, and neither simulated kubelet fails pods."""
        found = self.pod(name) or {}
        containers = (found.get("spec") or {}).get("containers") or []
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        status = {
            "phase": "Failed",
            "containerStatuses": [
                {
                    "name": container["name"],
                    "image": container.get("image", ""),
                    "imageID": "",
                    "ready": False,
                    "restartCount": 0,
                    "started": False,
                    "state": {"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": now}},
                }
                for container in containers
            ],
        }
        self.must(
            self.client.run(
                "patch",
                "pod",
                name,
                "-n",
                self.namespace,
                "--subresource=status",
                "--type=merge",
                "-p",
                json.dumps({"status": status}),
            )
        )

    def group_status(self, name: str) -> dict[str, Any]:
        """The ``status`` of PodGroup ``name`` ({} while nobody wrote one)."""
        return dict((self.get(PODGROUP, name) or {}).get("status") or {})

    def group_condition(self, name: str, kind: str = "Unschedulable") -> dict[str, Any]:
        """The condition of type ``kind`` of PodGroup ``name`` ({} when absent): queuetree's
        admission condition by default."""
        for entry in self.group_status(name).get("conditions") or []:
            if entry.get("type") == kind:
                return dict(entry)
        return {}

    def events_of(self, kind: str, name: str) -> list[dict[str, Any]]:
        """The Events of the test's namespace about object ``kind``/``name``, oldest first."""
        found = [
            event
            for event in self.client.items("events", "-n", self.namespace)
            if (event.get("involvedObject") or {}).get("kind") == kind
            and (event.get("involvedObject") or {}).get("name") == name
        ]
        return sorted(found, key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime")))

    def explanation(self, name: str) -> str:
        """Why the operator says pod ``name`` waits (its reason annotation; "" for none)."""
        found = self.pod(name) or {}
        annotations = (found.get("metadata") or {}).get("annotations") or {}
        return str(annotations.get(REASON_ANNOTATION, ""))

    def plugin(self, *args: str) -> kubectl.Result:
        """``kubectl queuetree ARGS``, as a user runs the plugin: kubectl finds
        ``kubectl-queuetree`` on PATH (the package's console script, next to this Python)."""
        env = {**self.client.env}
        env["PATH"] = f"{pathlib.Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        command = [self.client.executable, "queuetree", *args]
        done = subprocess.run(
            command, env=env, capture_output=True, text=True, timeout=120, check=False
        )
        return kubectl.Result(tuple(command[1:]), done.returncode, done.stdout, done.stderr)

    def describe_queue(self, name: str) -> str:
        return self.must(self.kubectl("describe", "queue", name)).stdout

    def readiness(self, name: str) -> tuple[str, str]:
        """``(status, reason)`` of the queue's Ready condition; ``("", "")`` without one."""
        found = self.queue(name) or {}
        for condition in (found.get("status") or {}).get("conditions") or []:
            if condition.get("type") == "Ready":
                return str(condition.get("status")), str(condition.get("reason"))
        return "", ""

    def grant_viewer(self) -> None:
        """Bind the shipped read-only ClusterRole queuetree-viewer to the tenant."""
        binding = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"{self.namespace}-viewer"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "queuetree-viewer",
            },
            "subjects": [{"kind": "ServiceAccount", "name": TENANT, "namespace": self.namespace}],
        }
        self.must(self.apply(binding))

    def judged(self, name: str, queue: str) -> bool:
        """The operator has decided about pod ``name``: it runs, or it is told ``queue`` has
        no room (a fast, decisive probe: over-admission shows as a pod that runs)."""
        return self.running(name) or queue in self.explanation(name)

    def queue_state(self, name: str) -> str:
        found = self.queue(name)
        return str(((found or {}).get("status") or {}).get("state", ""))

    # ------------------------------------------------------------------ cleanup

    def _queue_parents(self) -> dict[str, str | None]:
        """Every queue of the cluster, with the parent it names."""
        return {
            q["metadata"]["name"]: (q.get("spec") or {}).get("parent")
            for q in self.client.items("queues")
        }

    def cleanup(self) -> None:
        """Workloads, pods and pod groups first (queues with pods refuse to go in some
        configurations), then this test's queues, children before parents, then the namespace."""
        if self._workdir is not None:
            self._workdir.cleanup()
        if not self._owner:
            return
        if self.workloads:
            self.client.run(
                "delete", *self.workloads, "-n", self.namespace, "--wait=true", "--timeout=60s"
            )
        # Pods go with a grace period of 1 s (kubectl's shortest without --force): a running
        # pod would otherwise stay Terminating on its node for its own period (30 s unless it
        # says otherwise), as the kubelet kwok (or kubesim) plays keeps it, and the next test
        # waited for it. A later delete may only shorten a pod's period, so this also ends
        # the periods of pods the workloads' deletion left to the garbage collector.
        self.client.run(
            "delete",
            "pods",
            "--all",
            "-n",
            self.namespace,
            "--grace-period=1",
            "--wait=true",
            "--timeout=60s",
        )
        self.client.run(
            "delete", PODGROUP, "--all", "-n", self.namespace, "--wait=true", "--timeout=60s"
        )
        # One listing a round, not a GET per queue: a test may have made a thousand queues,
        # and a kubectl process per queue took a minute. A queue may refuse to go until the
        # operator has seen its pods go: rounds go on until the deadline.
        left: list[str] = []

        def deleted() -> bool:
            parents = self._queue_parents()
            left[:] = [q for q in self._queues if q in parents]
            if not left:
                return True
            above = {parents[q] for q in left}
            leaves = [q for q in left if q not in above] or left
            self.client.run("delete", "queues", *leaves, "--wait=true", "--timeout=60s")
            return False

        try:
            eventually(
                deleted,
                what="this test's queues are deleted",
                deadline=120,
                diagnose=lambda: f"queues left behind: {left}",
            )
        finally:
            self.client.run("delete", "namespace", self.namespace, "--wait=false")
            self.client.run(
                "delete", "clusterrolebinding", f"{self.namespace}-viewer", "--ignore-not-found"
            )


@contextlib.contextmanager
def unvalidated_queues(kube: Kube, value: str) -> Iterator[None]:
    """While inside: queues labelled ``UNVALIDATED=value`` skip ``validatequeue.volcano.sh``.

    Afterwards those queues are deleted (still unvalidated: a chain is deleted in one call,
    parents and children together) and the webhook configuration is as it was.
    """
    found = kube.must(kube.kubectl("get", VALIDATING_WEBHOOKS, "-o", "json")).json()
    index = next(
        i for i, w in enumerate(found["webhooks"]) if w["name"] == "validatequeue.volcano.sh"
    )
    selector = {"matchExpressions": [{"key": UNVALIDATED, "operator": "NotIn", "values": [value]}]}

    def patch(operation: dict[str, Any]) -> None:
        path = f"/webhooks/{index}/objectSelector"
        body = json.dumps([{**operation, "path": path}])
        kube.must(kube.kubectl("patch", VALIDATING_WEBHOOKS, "--type=json", "-p", body))

    patch({"op": "add", "value": selector})
    try:
        yield
    finally:
        # kubectl's own --wait watches each object in turn (200 ms apiece: over a minute for
        # a chain of a thousand); one listing a poll says as much.
        labelled = f"{UNVALIDATED}={value}"
        kube.must(kube.kubectl("delete", "queues", "-l", labelled, "--wait=false"))
        eventually(
            lambda: not kube.client.items("queues", "-l", labelled),
            what=f"the queues labelled {labelled} are gone",
            deadline=600,  # a chain of a thousand, each let go by the operator, on a loaded machine
        )
        patch({"op": "remove"})


def chain(prefix: str, depth: int, *, label: str) -> list[dict[str, Any]]:
    """Queues ``prefix-1`` under root, ``prefix-2`` under it, ... ``depth`` levels deep,
    labelled for :func:`unvalidated_queues`."""
    queues = []
    for level in range(1, depth + 1):
        manifest = queue(
            f"{prefix}-{level}", parent=f"{prefix}-{level - 1}" if level > 1 else "root"
        )
        manifest["metadata"]["labels"] = {UNVALIDATED: label}
        queues.append(manifest)
    return queues


# ---------------------------------------------------------------------- manifests as files


def documents(text: str) -> list[dict[str, Any]]:
    """The objects of a YAML stream, ``kind: List`` documents expanded into their items."""
    found: list[dict[str, Any]] = []
    for document in yaml.safe_load_all(text):
        if not document:
            continue
        if document.get("kind") == "List":
            found += [item for item in document.get("items") or [] if item]
        else:
            found.append(document)
    return found


def rendered(client: kubectl.Kubectl, directory: pathlib.Path) -> list[dict[str, Any]]:
    """``kubectl kustomize DIRECTORY``: the objects a ``kubectl apply -k`` would send."""
    result = client.run("kustomize", str(directory))
    assert result.ok, result.describe()
    return documents(result.stdout)


def describe_object(manifest: Mapping[str, Any]) -> str:
    """``Kind namespace/name`` (or ``Kind name``), for messages."""
    metadata = manifest.get("metadata") or {}
    namespace = metadata.get("namespace")
    name = metadata.get("name", "?")
    return (
        f"{manifest.get('kind')} {namespace}/{name}"
        if namespace
        else f"{manifest.get('kind')} {name}"
    )


# ---------------------------------------------------------------------- the sandbox's processes


def sandbox(cluster: Cluster) -> stack.Stack:
    """The sandbox stack the suite started (tests that read its logs, metrics or audit log
    run only on the backends that start one)."""
    assert cluster.sandbox is not None, "this test needs the sandbox stack (not --e2e-existing)"
    return cluster.sandbox


def leading_operator(cluster: Cluster) -> stack.OperatorReplica:
    """The operator replica that holds the Lease now (the suite's first one, unless a test
    such as e2e/test_leader_election.py killed it and a standby took over)."""
    replicas = sandbox(cluster).operators
    return eventually(
        lambda: next((r for r in replicas if r.process.alive() and r.leads()), None),
        what="an operator replica leads",
    )


def restart_operator(cluster: Cluster) -> None:
    """Stop the operator replica that leads and wait until a new one leads (once the Lease,
    15 s, has run out): what the operator knew only in memory is gone, as after a crash or a
    rollout. The new replica stays in the stack for the tests after."""
    stack_ = sandbox(cluster)
    leader = leading_operator(cluster)
    successor = stack_.start_operator(unique("restarted"), lead=False)
    leader.process.stop()
    stack_.forget(leader.process)
    eventually(successor.leads, what="the new operator replica takes the Lease over", deadline=90)


def metrics_url(cluster: Cluster, process: str) -> str:
    """Where ``process`` (``webhook``, or ``operator``: the leading replica) serves metrics."""
    if process == "webhook":
        return sandbox(cluster).webhook_metrics
    if process == "operator":
        return leading_operator(cluster).metrics
    raise AssertionError(f"no metrics of a process named {process!r}")


def metric_samples(
    cluster: Cluster, process: str, name: str
) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples of metric ``name`` that ``process`` (``operator``, ``webhook``) serves now:
    sorted label pairs -> value."""
    with urllib.request.urlopen(metrics_url(cluster, process), timeout=5) as response:
        text = response.read().decode()
    return {
        tuple(sorted(sample.labels.items())): float(sample.value)
        for family in prometheus_parser.text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    }


def metric(cluster: Cluster, process: str, name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` whose labels include ``labels`` (0 when none)."""
    wanted = set(labels.items())
    return sum(
        value for key, value in metric_samples(cluster, process, name).items() if wanted <= set(key)
    )


def log_lines(cluster: Cluster, process: str, *, since: int = 0) -> list[str]:
    """The lines ``process`` (``webhook``, or ``operator``: the leading replica) has logged,
    from line ``since`` on (pass an earlier ``len(log_lines(...))`` to see only what came
    after)."""
    if process == "operator":
        log = leading_operator(cluster).process.log
    else:
        log = next((p.log for p in sandbox(cluster).processes if p.name == process), None)
        assert log is not None, f"no sandbox process named {process!r}"
    return log.read_text(errors="replace").splitlines()[since:]


# ---------------------------------------------------------------------- conditions and figures


def condition(found: Mapping[str, Any] | None, kind: str) -> dict[str, Any] | None:
    """The pod condition of type ``kind`` (``PodScheduled``...), None when absent."""
    for entry in ((found or {}).get("status") or {}).get("conditions") or []:
        if entry.get("type") == kind:
            return dict(entry)
    return None


def queue_figures(kube: Kube, name: str) -> dict[str, dict[str, str]]:
    """``status.allocated`` and ``status.reserved`` of a queue, as the operator wrote them."""
    status = ((kube.queue(name) or {}).get("status")) or {}
    return {key: dict(status.get(key) or {}) for key in ("allocated", "reserved")}


def queue_cells(kube: Kube, name: str) -> dict[str, str]:
    """The cells of ``kubectl get queue NAME`` by header, cut at the headers' positions (so
    that an empty cell is seen as one)."""
    header, row = kube.must(kube.kubectl("get", "queue", name)).stdout.splitlines()[:2]
    starts = [
        index
        for index, char in enumerate(header)
        if char != " " and (index == 0 or header[index - 1] == " ")
    ]
    bounds = [*starts[1:], max(len(row), len(header)) + 1]
    return {
        header[start:end].strip(): row[start:end].strip()
        for start, end in zip(starts, bounds, strict=True)
    }


def all_zero(figures: Mapping[str, Mapping[str, str]]) -> bool:
    """Every quantity of ``queue_figures`` is zero (``0``, ``0m``, ``0Gi``...)."""
    return all(
        quantities.to_milli(quantities.parse(quantity)) == 0
        for figure in figures.values()
        for quantity in figure.values()
    )


def pods_in(kube: Kube, *selector: str, namespace: str | None = None) -> list[dict[str, Any]]:
    """``kubectl get pods -l SELECTOR -o json`` items (the test's namespace by default)."""
    return kube.client.items("pods", "-n", namespace or kube.namespace, *selector)


def iter_gated(pods: Sequence[Mapping[str, Any]]) -> Iterator[str]:
    """Names of the pods that still carry the queue gate."""
    for found in pods:
        gates = (found.get("spec") or {}).get("schedulingGates") or []
        if any(g.get("name") == GATE for g in gates):
            yield str(found["metadata"]["name"])


# ---------------------------------------------------------------------- RBAC


@dataclasses.dataclass(frozen=True, slots=True)
class Rule:
    """One PolicyRule as bound to one ServiceAccount (``namespace`` empty: cluster-wide)."""

    role: str
    namespace: str
    groups: tuple[str, ...]
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    names: tuple[str, ...]

    def allows(self, call: Mapping[str, str]) -> bool:
        """Whether RBAC would allow ``call`` (an audit record of :meth:`stack.Stack.audit`)
        by this rule: group, resource/subresource, verb, resourceNames, a Role's namespace."""
        resource = call["resource"] + (f"/{call['subresource']}" if call["subresource"] else "")
        return (
            (not self.namespace or call["namespace"] == self.namespace)
            and ("*" in self.groups or call["group"] in self.groups)
            and ("*" in self.resources or resource in self.resources)
            and ("*" in self.verbs or call["verb"] in self.verbs)
            and (not self.names or call["name"] in self.names)
        )

    def grants(self) -> Iterator[Rule]:
        """This rule split into one rule per group, resource and verb."""
        for group in self.groups:
            for resource in self.resources:
                for verb in self.verbs:
                    yield dataclasses.replace(
                        self, groups=(group,), resources=(resource,), verbs=(verb,)
                    )

    def __str__(self) -> str:
        names = f" ({', '.join(self.names)})" if self.names else ""
        scope = f" in {self.namespace}" if self.namespace else ""
        return (
            f"{self.role}: {' '.join(self.verbs)} "
            f"{','.join(g or 'core' for g in self.groups)}/{','.join(self.resources)}"
            f"{names}{scope}"
        )


def bound_rules(objects: Sequence[Mapping[str, Any]], account: str) -> list[Rule]:
    """Every rule of ``objects`` (rendered manifests) bound to the ServiceAccount
    ``queuetree-system/<account>`` by a ClusterRoleBinding or a RoleBinding."""
    roles = {
        (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in objects
    }
    found = []
    for binding in objects:
        if binding["kind"] not in ("ClusterRoleBinding", "RoleBinding"):
            continue
        if not any(
            s.get("kind") == "ServiceAccount"
            and s.get("name") == account
            and s.get("namespace") == stack.NAMESPACE
            for s in binding.get("subjects") or []
        ):
            continue
        namespace = binding["metadata"].get("namespace", "")
        ref = binding["roleRef"]
        role = roles[(ref["kind"], namespace if ref["kind"] == "Role" else "", ref["name"])]
        for rule in role.get("rules") or []:
            found.append(
                Rule(
                    role=f"{ref['kind']}/{ref['name']}",
                    namespace=namespace,
                    groups=tuple(rule.get("apiGroups") or ()),
                    resources=tuple(rule.get("resources") or ()),
                    verbs=tuple(rule.get("verbs") or ()),
                    names=tuple(rule.get("resourceNames") or ()),
                )
            )
    return found


def can_i(cluster: Cluster, user: str, verb: str, resource: str, namespace: str) -> bool:
    """``kubectl auth can-i VERB RESOURCE --as=USER -n NAMESPACE``: what the authorizer
    answers now (RBAC changes reach it through a watch, a moment after the write)."""
    result = cluster.client.run("auth", "can-i", verb, resource, f"--as={user}", "-n", namespace)
    return result.stdout.strip() == "yes"


@contextlib.contextmanager
def without_permission(
    cluster: Cluster, *, role: str, resource: str, verb: str, user: str, namespace: str
) -> Iterator[None]:
    """The ClusterRole ``role`` without ``verb`` on ``resource`` (``pods``, ``pods/eviction``)
    while the block runs, then as it was. Waits until the authorizer answers accordingly,
    both ways, so what the block sees is the missing permission and nothing later is."""
    client = cluster.client
    original = client.get_json("clusterrole", role)
    for field in ("resourceVersion", "uid", "creationTimestamp", "managedFields", "generation"):
        original["metadata"].pop(field, None)
    edited = json.loads(json.dumps(original))
    rules = []
    for rule in edited["rules"]:
        if resource in rule.get("resources", []):
            rule["verbs"] = [v for v in rule["verbs"] if v != verb]
        if rule["verbs"]:
            rules.append(rule)
    edited["rules"] = rules
    group_resource, _, subresource = resource.partition("/")
    extra = (f"--subresource={subresource}",) if subresource else ()

    def allowed() -> bool:
        result = client.run(
            "auth", "can-i", verb, group_resource, *extra, f"--as={user}", "-n", namespace
        )
        return result.stdout.strip() == "yes"

    replaced = client.run("replace", "-f", "-", input=json.dumps(edited))
    assert replaced.ok, replaced.describe()
    try:
        eventually(lambda: not allowed(), what=f"{user} may no longer {verb} {resource}")
        yield
    finally:
        restored = client.run("replace", "-f", "-", input=json.dumps(original))
        assert restored.ok, restored.describe()
        eventually(allowed, what=f"{user} may {verb} {resource} again")


def reclaim_units(count: int) -> dict[str, str]:
    """``count`` of the session's :data:`SLOT` resource, with CPU and memory in proportion
    (the figures of spec §3.12.1)."""
    return {SLOT: str(count), "cpu": f"{count * 100}m", "memory": f"{count * 100}Mi"}


def reclaim_queues(suffix: str) -> tuple[list[dict[str, Any]], str, str]:
    """Spec §3.12.1 cases 5-7 (the tree of e2e/test_reclaim.py): ``(queues, victim's leaf,
    reclaimer's leaf)``. A victim of two slots in ``queue-b`` borrows (it deserves one); a
    reclaimer of two slots in ``queue-a`` deserves them, and evicts it at levels 0 and 1."""
    one, two, three, four = (reclaim_units(n) for n in (1, 2, 3, 4))
    s = suffix
    return (
        [
            queue(f"grand-a-{s}", deserved=two, capability=four),
            queue(f"parent-a-{s}", parent=f"grand-a-{s}", deserved=two, capability=two),
            queue(f"queue-a-{s}", parent=f"parent-a-{s}", deserved=two, capability=two),
            queue(f"grand-b-{s}", deserved=three, capability=four),
            queue(f"parent-b-{s}", parent=f"grand-b-{s}", deserved=one, capability=two),
            queue(f"queue-b-{s}", parent=f"parent-b-{s}", deserved=one, capability=two),
        ],
        f"queue-b-{s}",
        f"queue-a-{s}",
    )


# ---------------------------------------------------------------------- watching pods


class PodWatch:
    """A watch of the namespace's pods in the background (``selector``: a label selector):
    every version of the matching pods the API server sends, in order, so a test can check a
    property at every step of a run instead of at the moments it happened to poll (kwok
    completes a Job's pods as soon as they run).

    The watch starts from the resourceVersion of a list made before this returns, so nothing
    written afterwards is missed however late the background ``kubectl`` gets going (with
    ``kubectl get -w`` the list happens in the background, and under load a pod could be
    created and ungated before it, its gated version never seen)."""

    def __init__(self, kube: Kube, selector: str = "") -> None:
        path = f"/api/v1/namespaces/{kube.namespace}/pods"
        query = {"labelSelector": selector} if selector else {}
        listed = kube.client.check(
            "get", "--raw", f"{path}?{urllib.parse.urlencode({**query, 'limit': '1'})}"
        ).json()
        watch = {
            **query,
            "watch": "true",
            "resourceVersion": listed["metadata"]["resourceVersion"],
            "timeoutSeconds": "1800",
        }
        command = [
            kube.client.executable,
            "get",
            "--raw",
            f"{path}?{urllib.parse.urlencode(watch)}",
        ]
        self.events: list[dict[str, Any]] = []
        self._process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=kube.client.env,
        )
        self._reader = threading.Thread(target=self._read, name="pod watch", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._process.stdout is not None
        decoder = json.JSONDecoder()
        buffer = ""
        for line in self._process.stdout:
            buffer += line
            while buffer.strip():
                try:
                    event, end = decoder.raw_decode(buffer.lstrip())
                except ValueError:
                    break  # an object not complete yet
                self.events.append(event)
                buffer = buffer.lstrip()[end:]

    def stop(self) -> list[dict[str, Any]]:
        """End the watch; every event received."""
        self._process.terminate()
        self._process.wait(10)
        self._reader.join(10)
        if self._process.stdout is not None:
            self._process.stdout.close()
        return self.events


# ---------------------------------------------------------------------- the autoscaler


def autoscaler(cluster: Cluster) -> karpenter.Karpenter:
    """The Karpenter of the sandbox's control plane (the real backend started with
    ``autoscaler=``)."""
    control_plane = sandbox(cluster).control_plane
    assert control_plane is not None, "this test needs the real backend"
    assert control_plane.autoscaler is not None, "this test needs the autoscaler (Karpenter)"
    return control_plane.autoscaler


def karpenter_metric(cluster: Cluster, name: str, **labels: str) -> float:
    """The sum of Karpenter's samples of ``name`` whose labels include ``labels``."""
    wanted = set(labels.items())
    return sum(
        float(sample.value)
        for family in prometheus_parser.text_string_to_metric_families(
            autoscaler(cluster).metrics()
        )
        for sample in family.samples
        if sample.name == name and wanted <= set(sample.labels.items())
    )


PROVISIONING_SIMULATIONS = "karpenter_scheduler_scheduling_duration_seconds_count"
"""How many scheduling simulations Karpenter's provisioner ran (one per batch of pods it
could provision for)."""
NODECLAIMS_CREATED = "karpenter_nodeclaims_created_total"


@dataclasses.dataclass(frozen=True, slots=True)
class NodeSample:
    """What the cluster held at one moment: nodes and Karpenter's NodeClaims."""

    at: float
    """Seconds since the sampler started."""
    nodes: int
    nodeclaims: int


class NodeSampler:
    """Samples the node and NodeClaim counts in the background, about once a second, so a
    test sees every scale-up and scale-down in between its own polls."""

    def __init__(self, cluster: Cluster, *, interval: float = 1.0) -> None:
        self.cluster = cluster
        self.samples: list[NodeSample] = []
        self._interval = interval
        self._stop = threading.Event()
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="node sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(kubectl.KubectlError, ValueError, subprocess.SubprocessError):
                self.samples.append(self.sample())
            self._stop.wait(self._interval)

    def sample(self) -> NodeSample:
        client = self.cluster.client
        return NodeSample(
            at=round(time.monotonic() - self._started, 1),
            nodes=len(client.items("nodes")),
            nodeclaims=len(client.items("nodeclaims")),
        )

    def since(self, at: float) -> list[NodeSample]:
        return [s for s in self.samples if s.at >= at]

    def now(self) -> float:
        return round(time.monotonic() - self._started, 1)

    def stop(self) -> list[NodeSample]:
        self._stop.set()
        self._thread.join(30)
        return self.samples


def nodeclaims(cluster: Cluster) -> list[dict[str, Any]]:
    return cluster.client.items("nodeclaims")


def instance_types(cluster: Cluster) -> dict[str, int]:
    """How many of Karpenter's nodes have each instance type."""
    found: dict[str, int] = {}
    for node in cluster.client.items("nodes", "-l", karpenter.NODE_POOL_LABEL):
        kind = node["metadata"]["labels"].get(karpenter.INSTANCE_TYPE_LABEL, "?")
        found[kind] = found.get(kind, 0) + 1
    return found


KARPENTER_LOG_LINES = 60
"""How much of Karpenter's log a failed test's report quotes (:func:`karpenter_log_tail`)."""


def karpenter_state(cluster: Cluster, namespace: str | None = None) -> str:
    """What a failed autoscaling test needs in its message, at the moment it failed: what
    :func:`karpenter.unready` names, the NodePool's and every NodeClaim's conditions, the
    nodes with their taints, the pods of ``namespace`` (node, gates, PodScheduled) and its
    latest events, and the errors in Karpenter's log (and where the whole log is)."""
    control_plane = sandbox(cluster).control_plane
    assert control_plane is not None
    running = autoscaler(cluster)
    client = cluster.client
    lines = ["--- Karpenter"]
    missing = karpenter.unready(running, control_plane.kubectl)
    lines.append(f"unready: {'; '.join(missing)}" if missing else "ready to provision")
    for pool in client.items("nodepools"):
        lines.append(
            f"nodepool/{pool['metadata']['name']}: {karpenter.conditions_text(pool)}; "
            f"resources {(pool.get('status') or {}).get('resources', {})}"
        )
    claims = client.items("nodeclaims")
    lines.append(f"nodeclaims: {len(claims)}")
    for claim in claims:
        metadata, status = claim["metadata"], claim.get("status") or {}
        lines.append(
            f"  {metadata['name']} (created {metadata.get('creationTimestamp')}, "
            f"deleting {bool(metadata.get('deletionTimestamp'))}, "
            f"node {status.get('nodeName', '-')}): {karpenter.conditions_text(claim)}"
        )
    nodes = client.items("nodes")
    lines.append(f"nodes: {len(nodes)}")
    for node in nodes:
        ready = condition(node, "Ready") or {}
        taints = [
            f"{t.get('key')}:{t.get('effect')}"
            for t in (node.get("spec") or {}).get("taints") or []
        ]
        lines.append(
            f"  {node['metadata']['name']}: Ready={ready.get('status', '?')}, taints {taints}"
        )
    if namespace is not None:
        pods = client.items("pods", "-n", namespace)
        lines.append(f"pods of {namespace}: {len(pods)}")
        for item in pods:
            scheduled = condition(item, "PodScheduled") or {}
            gates = [g.get("name") for g in (item.get("spec") or {}).get("schedulingGates") or []]
            lines.append(
                f"  {item['metadata']['name']}: node {item['spec'].get('nodeName', '-')}, "
                f"phase {(item.get('status') or {}).get('phase')}, gates {gates}, "
                f"PodScheduled={scheduled.get('status', '-')} {scheduled.get('reason', '')}: "
                f"{scheduled.get('message', '')}"
            )
        events = sorted(
            client.items("events", "-n", namespace),
            key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""),
        )
        lines.append(f"latest events of {namespace} (of {len(events)}):")
        for event in events[-30:]:
            source = (event.get("source") or {}).get("component") or event.get(
                "reportingComponent", ""
            )
            lines.append(
                f"  {event.get('lastTimestamp') or event.get('eventTime')} {source} "
                f"{event.get('reason')} {(event.get('involvedObject') or {}).get('name')}: "
                f"{event.get('message', '')}"
            )
    errors = [line for line in running.log_lines() if '"level":"ERROR"' in line]
    lines.append(f"Karpenter's errors in {running.process.log}: {len(errors)}, the last 10:")
    lines += [f"  {line}" for line in errors[-10:]]
    return "\n".join(lines)


def karpenter_log_tail(cluster: Cluster, lines: int = KARPENTER_LOG_LINES) -> str:
    """The last ``lines`` lines of Karpenter's log, headed by where the whole log is (the
    stack's workdir, ``controlplane/logs/karpenter.log``, which pytest keeps)."""
    running = autoscaler(cluster)
    tail = running.log_lines()[-lines:]
    return "\n".join([f"--- the last {len(tail)} lines of {running.process.log}:", *tail])


def has_autoscaler(cluster: Cluster) -> bool:
    """Whether the cluster is a sandbox on the real backend that runs Karpenter."""
    control_plane = cluster.sandbox.control_plane if cluster.sandbox is not None else None
    return control_plane is not None and control_plane.autoscaler is not None


def karpenter_events(kube: Kube, *, prefix: str = "") -> list[dict[str, Any]]:
    """The events Karpenter wrote about this namespace's objects whose names start with
    ``prefix`` (Nominated, FailedScheduling...)."""
    return [
        e
        for e in kube.client.items("events", "-n", kube.namespace)
        if (
            (e.get("source") or {}).get("component") == "karpenter"
            or e.get("reportingComponent") == "karpenter"
        )
        and str((e.get("involvedObject") or {}).get("name", "")).startswith(prefix)
    ]


def native_served(kube: Kube) -> bool:
    """Whether the API server serves the Workload API's PodGroups (the real backend, unless
    started under ``QUEUETREE_WORKLOAD_API=0``; never kubesim)."""
    found = kube.kubectl("api-resources", "--api-group=scheduling.k8s.io", "-o", "name")
    return found.ok and NATIVE_PODGROUP in found.stdout.split()
