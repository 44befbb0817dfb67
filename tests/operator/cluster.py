"""A kubesim cluster with the CRDs and simulated nodes, and the operator running in a thread.

Tests talk to kubesim over HTTP like any client (:class:`Client`), run the real operator
(``queuetree.operator.running.run``) in its own thread and event loop (:class:`OperatorThread`),
and poll for the states they expect with a deadline (:func:`eventually`).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import pathlib
import ssl
import threading
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import yaml

from controlplane.processes import free_port
from kubesim import harness, kubeconfigs, simulation
from queuetree.api import schedconf
from queuetree.core import objects
from queuetree.operator import metrics, running, settings, state
from tests import timing

T = TypeVar("T")
ROOT = pathlib.Path(__file__).resolve().parents[2]
GATE = objects.QUEUE_ALLOCATION_GATE
QUEUES = "/apis/scheduling.volcano.sh/v1beta1/queues"


class Client:
    """JSON over HTTP to kubesim, with its bearer token."""

    def __init__(self, cluster: harness.Cluster) -> None:
        self.url = cluster.url
        self.token = cluster.sim.token
        self.sim = cluster.sim

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
    ) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path,
            data=data,
            method=method,
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": content_type},
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")

    def create(self, path: str, body: Any) -> Any:
        status, answer = self.request("POST", path, body)
        assert status in (200, 201), (status, answer)
        return answer

    def pod(self, name: str, namespace: str = "default") -> dict[str, Any] | None:
        return self.sim.get_object("", "pods", namespace, name)

    def pods(self, namespace: str | None = None) -> list[dict[str, Any]]:
        return self.sim.list_objects("", "pods", namespace)

    def queue(self, name: str) -> dict[str, Any] | None:
        return self.sim.get_object("scheduling.volcano.sh", "queues", "", name)

    def delete_pod(self, name: str, namespace: str = "default") -> None:
        status, answer = self.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}")
        assert status in (200, 202, 404), (status, answer)

    def install_crds(self) -> None:
        for path in sorted((ROOT / "crds").glob("scheduling.volcano.sh_*.yaml")):
            self.create(
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                yaml.safe_load(path.read_text()),
            )

    def create_queue(
        self,
        name: str,
        *,
        parent: str = "root",
        capability: dict[str, str] | None = None,
        **spec: Any,
    ) -> None:
        body_spec: dict[str, Any] = {"parent": parent, **spec}
        if capability is not None:
            body_spec["capability"] = capability
        self.create(
            QUEUES,
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": name},
                "spec": body_spec,
            },
        )

    def create_pod(
        self,
        name: str,
        *,
        queue: str,
        requests: dict[str, str],
        namespace: str = "default",
        gates: tuple[str, ...] = (GATE,),
        node_selector: dict[str, str] | None = None,
        group: str = "",
        annotations: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        annotations = {GATE: "true", objects.QUEUE_NAME_ANNOTATION: queue, **(annotations or {})}
        if group:
            annotations[objects.GROUP_NAME_ANNOTATION] = group
        spec: dict[str, Any] = {
            "containers": [
                {"name": "main", "image": "busybox", "resources": {"requests": requests}}
            ],
            # As the e2e suite's pods: a deleted or evicted pod goes at once rather than
            # Terminating for the default 30 s (kubesim keeps it for its grace period).
            "terminationGracePeriodSeconds": 0,
        }
        # The gate a webhook would inject on CREATE; created here directly, as a client may.
        if gates:
            spec["schedulingGates"] = [{"name": gate} for gate in gates]
        if node_selector:
            spec["nodeSelector"] = node_selector
        return self.create(
            f"/api/v1/namespaces/{namespace}/pods",
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
                "spec": spec,
            },
        )


def gates_of(pod: dict[str, Any] | None) -> list[str]:
    if pod is None:
        return []
    return [gate["name"] for gate in pod.get("spec", {}).get("schedulingGates") or []]


def eventually(probe: Callable[[], T], *, deadline: float = timing.DEADLINE, what: str = "") -> T:
    """Poll ``probe`` until it returns something truthy; fail after ``deadline`` seconds."""
    limit = time.monotonic() + deadline
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > limit:
            raise AssertionError(f"not reached before the deadline: {what or probe}")
        time.sleep(0.02)


class OperatorThread:
    """The real operator in a thread with its own event loop; :meth:`stop` ends it."""

    def __init__(self, config: settings.OperatorSettings) -> None:
        self.config = config
        self.metrics = metrics.create()
        self.state: state.ClusterState | None = None
        self._stop = threading.Event()
        self._error: list[BaseException] = []
        self._thread = threading.Thread(
            target=self._main, name=f"operator {config.identity}", daemon=True
        )

    def _main(self) -> None:
        def keep(cluster: state.ClusterState) -> None:
            self.state = cluster

        try:
            asyncio.run(
                running.run(self.config, stop_flag=self._stop, metrics_=self.metrics, on_state=keep)
            )
        except BaseException as error:  # reported by stop()
            self._error.append(error)
        finally:
            # A connection attempt cancelled at shutdown (the lease renewal, a watch) can leave
            # its socket to the garbage collector; collect it here, where it belongs, rather
            # than as a ResourceWarning in whichever later test triggers a collection.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ResourceWarning)
                gc.collect()

    def start(self) -> OperatorThread:
        self._thread.start()
        return self

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive(), "the operator did not stop"
        errors, self._error = list(self._error), []
        assert not errors, errors

    def cycles(self) -> float:
        value = self.metrics.registry.get_sample_value("queuetree_cycle_duration_seconds_count")
        return value or 0.0

    def leading(self) -> bool:
        return self.metrics.registry.get_sample_value("queuetree_leader") == 1.0


def stop_all(*operators: OperatorThread) -> None:
    """Stop every operator still running, then report the first failure of any."""
    failures: list[AssertionError] = []
    for operator in operators:
        if operator.alive or operator._error:
            try:
                operator.stop()
            except AssertionError as failure:
                failures.append(failure)
    if failures:
        raise failures[0]


def operator_settings(**overrides: Any) -> settings.OperatorSettings:
    options: dict[str, Any] = {
        "scheduler_config": schedconf.parse_default().configuration,
        "metrics_port": 0,
        "leader_elect": False,
        "lease_namespace": "default",
        "cycle_period": 0.2,
        "qps": 0.0,
        **overrides,
    }
    return settings.OperatorSettings(**options)


def nodes(*flags: str) -> list[dict[str, Any]]:
    return [simulation.parse_node_flag(flag) for flag in flags]


WEBHOOK_NAMESPACE, WEBHOOK_SERVICE = "queuetree-system", "queuetree-webhook"


def _webhook(name: str, path: str, *, resource: str, operations: list[str]) -> dict[str, Any]:
    group, scope = ("scheduling.volcano.sh", "Cluster") if resource == "queues" else ("", "*")
    service = {"namespace": WEBHOOK_NAMESPACE, "name": WEBHOOK_SERVICE, "path": path, "port": 443}
    return {
        "name": name,
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "failurePolicy": "Fail",
        "timeoutSeconds": 10,
        "clientConfig": {"service": service},
        "rules": [
            {
                "apiGroups": [group],
                "apiVersions": ["v1beta1" if group else "v1"],
                "operations": operations,
                "resources": [resource],
                "scope": scope,
            }
        ],
    }


class WebhookThread:
    """The real webhook (``queuetree.webhooks.server.serve``, self-managed TLS) in a thread,
    registered in kubesim for pod and queue admission, as the deployment does."""

    def __init__(self, cluster: harness.Cluster, port: int) -> None:
        self.cluster = cluster
        self.port = port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._error: list[BaseException] = []
        self._thread = threading.Thread(target=self._main, name="webhook")

    def _main(self) -> None:
        from queuetree.webhooks import server
        from queuetree.webhooks import settings as webhook_settings

        async def serve() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            config = server.ServerConfig(
                settings=webhook_settings.ReviewSettings(),
                port=self.port,
                bind_address="127.0.0.1",
                cert_mode="self-managed",
                namespace=WEBHOOK_NAMESPACE,
                service_name=WEBHOOK_SERVICE,
                kubeconfig=str(self.cluster.kubeconfig),
                cert_check_interval=0.5,
                shutdown_delay=0,
            )
            await server.serve(config, stop=self._stop)

        try:
            asyncio.run(serve())
        except BaseException as error:  # reported by stop()
            self._error.append(error)

    def start(self, client: Client) -> WebhookThread:
        client.create(
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": WEBHOOK_NAMESPACE}},
        )
        client.create(
            "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "MutatingWebhookConfiguration",
                "metadata": {"name": "queuetree-mutating-webhook"},
                "webhooks": [
                    _webhook(
                        "mutatepod.volcano.sh",
                        "/pods/mutate",
                        resource="pods",
                        operations=["CREATE"],
                    ),
                    _webhook(
                        "mutatequeue.volcano.sh",
                        "/queues/mutate",
                        resource="queues",
                        operations=["CREATE"],
                    ),
                ],
            },
        )
        client.create(
            "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": "queuetree-validating-webhook"},
                "webhooks": [
                    _webhook(
                        "validatequeue.volcano.sh",
                        "/queues/validate",
                        resource="queues",
                        operations=["CREATE", "UPDATE", "DELETE"],
                    ),
                ],
            },
        )
        self._thread.start()
        eventually(self.ready, what="the webhook ready")
        return self

    def ready(self) -> bool:
        if self._error:
            raise AssertionError(f"the webhook failed: {self._error}")
        insecure = ssl.create_default_context()
        insecure.check_hostname, insecure.verify_mode = False, ssl.CERT_NONE
        try:
            with urllib.request.urlopen(
                f"https://127.0.0.1:{self.port}/readyz", context=insecure, timeout=2
            ) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)
        assert not self._thread.is_alive(), "the webhook did not stop"
        assert not self._error, self._error


OPERATOR_TOKEN = "queuetree-operator"
OPERATOR_USER = "system:serviceaccount:queuetree-system:queuetree-operator"


def operator_kubeconfig(cluster: harness.Cluster) -> pathlib.Path:
    """A kubeconfig whose token kubesim maps to the operator's service account."""
    return kubeconfigs.write_kubeconfig(
        cluster.kubeconfig.with_name("operator-kubeconfig"), url=cluster.url, token=OPERATOR_TOKEN
    )


def start(
    tmp_path: pathlib.Path, *node_flags: str, webhook: bool = False
) -> Iterator[tuple[harness.Cluster, Client]]:
    """kubesim with the CRDs and ``node_flags`` nodes; with ``webhook``, the real webhook too
    (then pods get their gate from it, not from the test)."""
    port = free_port()

    def resolve(namespace: str, name: str, service_port: int) -> tuple[str, int]:
        if (namespace, name, service_port) != (WEBHOOK_NAMESPACE, WEBHOOK_SERVICE, 443):
            raise LookupError(f"no endpoints for service {namespace}/{name}:{service_port}")
        return "127.0.0.1", port

    hooks: list[WebhookThread] = []
    with contextlib.ExitStack() as stack:
        # Registered first, so run last: kubesim stops before the webhook, and with it every
        # review it still had in flight (a stopping operator's writes), so the webhook stops
        # with no connection half open (one left in a TLS handshake outlives its event loop).
        stack.callback(lambda: [hook.stop() for hook in hooks])
        cluster = stack.enter_context(
            harness.running(
                tmp_path,
                simulate=simulation.SimulationOptions(nodes=nodes(*node_flags)),
                service_resolver=resolve,
                users={
                    OPERATOR_TOKEN: {
                        "username": OPERATOR_USER,
                        "groups": ["system:serviceaccounts", "system:authenticated"],
                    }
                },
            )
        )
        client = Client(cluster)
        client.install_crds()
        if webhook:
            hooks.append(WebhookThread(cluster, port).start(client))
        yield cluster, client


def queue_of(pod: dict[str, Any]) -> str:
    annotations = pod.get("metadata", {}).get("annotations") or {}
    return annotations.get(objects.QUEUE_NAME_ANNOTATION) or objects.DEFAULT_QUEUE


def holds_capacity(pod: dict[str, Any]) -> bool:
    """Bound, or ungated and waiting for a node: what counts as allocated plus reserved."""
    if pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
        return False
    if pod.get("metadata", {}).get("deletionTimestamp"):
        return False
    return not gates_of(pod)


def subtree_usage(client: Client) -> dict[str, dict[str, int]]:
    """Queue name -> summed requests (cpu in milli, others in units) of pods holding capacity
    in the queue's subtree."""
    queues = {
        q["metadata"]["name"]: q for q in client.sim.list_objects("scheduling.volcano.sh", "queues")
    }
    usage: dict[str, dict[str, int]] = {name: {} for name in queues}
    for pod in client.pods():
        if not holds_capacity(pod):
            continue
        requests = simulation.pod_requests(pod.get("spec", {}))
        name: str | None = queue_of(pod)
        seen: set[str] = set()
        while name and name in queues and name not in seen:
            seen.add(name)
            for resource, amount in requests.items():
                usage[name][resource] = usage[name].get(resource, 0) + amount
            name = (
                None
                if name == objects.ROOT_QUEUE
                else queues[name].get("spec", {}).get("parent") or objects.ROOT_QUEUE
            )
    return usage


def capacity_violations(client: Client) -> list[str]:
    """Every queue and resource where allocated plus reserved exceeds the queue's capability."""
    queues = client.sim.list_objects("scheduling.volcano.sh", "queues")
    usage = subtree_usage(client)
    found = []
    for queue in queues:
        name = queue["metadata"]["name"]
        for resource, text in (queue.get("spec", {}).get("capability") or {}).items():
            limit = simulation.quantity_units(resource, text)
            used = usage.get(name, {}).get(resource, 0)
            if used > limit:
                found.append(f"queue {name}: {resource} {used} > capability {limit}")
    return found


class InvariantWatch:
    """Checks :func:`capacity_violations` continuously in a thread until :meth:`stop`."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.violations: list[str] = []
        self.checks = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, name="invariant watch")

    def _main(self) -> None:
        while not self._stop.is_set():
            self.violations.extend(capacity_violations(self.client))
            self.checks += 1
            self._stop.wait(0.01)

    def __enter__(self) -> InvariantWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
