"""End to end: kubectl -> kubesim -> the real webhook over TLS -> what kubectl prints.

The webhook runs as ``queuetree webhook`` would (``server.serve``) with self-managed
certificates: it creates its Secret, writes the CA into the caBundle of the webhook
configurations, watches queues, namespaces and pod groups, and only then turns ready. kubesim
calls it by Service name over TLS verified with that caBundle. The test then drives kubectl
as a user would: an invalid queue tree gets the full denial, a warning is printed, an opted-in
pod comes back gated.
"""

from __future__ import annotations

import asyncio
import base64
import json
import pathlib
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import pytest
import yaml

from controlplane.processes import free_port
from kubesim import harness
from queuetree.webhooks import server, settings
from tests import timing

pytestmark = pytest.mark.slow

NAMESPACE, SERVICE = "queuetree-system", "queuetree-webhook"
CRDS = pathlib.Path(__file__).parents[2] / "crds"
GATE = "scheduling.volcano.sh/queue-allocation-gate"


def hook(name: str, path: str, *, resource: str, operations: list[str]) -> dict[str, Any]:
    group, scope = ("scheduling.volcano.sh", "Cluster") if resource == "queues" else ("", "*")
    return {
        "name": name,
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "failurePolicy": "Fail",
        "timeoutSeconds": 10,
        "clientConfig": {
            "service": {"namespace": NAMESPACE, "name": SERVICE, "path": path, "port": 443}
        },
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


CONFIGURATIONS = [
    {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "queuetree-mutating-webhook"},
        "webhooks": [
            hook(
                "mutatequeue.volcano.sh", "/queues/mutate", resource="queues", operations=["CREATE"]
            ),
            hook("mutatepod.volcano.sh", "/pods/mutate", resource="pods", operations=["CREATE"]),
        ],
    },
    {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "queuetree-validating-webhook"},
        "webhooks": [
            hook(
                "validatequeue.volcano.sh",
                "/queues/validate",
                resource="queues",
                operations=["CREATE", "UPDATE", "DELETE"],
            ),
            hook(
                "validatepod.volcano.sh", "/pods/validate", resource="pods", operations=["CREATE"]
            ),
        ],
    },
]


async def kubectl(cluster: harness.Cluster, *args: str, manifest: Any = None) -> Any:
    text = None
    if manifest is not None:
        documents = manifest if isinstance(manifest, list) else [manifest]
        text = yaml.safe_dump_all(documents)
    return await asyncio.to_thread(cluster.kubectl, *args, input=text)


async def eventually(
    check: Callable[[], Awaitable[bool]], *, deadline: float = timing.DEADLINE
) -> None:
    """Poll ``check`` until it holds (never a fixed sleep)."""
    limit = time.monotonic() + deadline
    while not await check():
        if time.monotonic() > limit:
            raise AssertionError(f"not reached within {deadline}s: {check.__name__}")
        await asyncio.sleep(0.05)


@pytest.fixture
async def cluster(tmp_path: pathlib.Path) -> AsyncIterator[harness.Cluster]:
    port = free_port()

    def resolve(namespace: str, name: str, service_port: int) -> tuple[str, int]:
        if (namespace, name, service_port) != (NAMESPACE, SERVICE, 443):
            raise LookupError(f"no endpoints for service {namespace}/{name}:{service_port}")
        return "127.0.0.1", port

    with harness.running(tmp_path, service_resolver=resolve) as running:
        for args in (
            ("apply", "-f", str(CRDS / "scheduling.volcano.sh_queues.yaml")),
            ("apply", "-f", str(CRDS / "scheduling.volcano.sh_podgroups.yaml")),
            ("wait", "--for=condition=Established", "crd/queues.scheduling.volcano.sh"),
            ("create", "namespace", NAMESPACE),
        ):
            done = await kubectl(running, *args)
            assert done.returncode == 0, done.stderr
        applied = await kubectl(running, "apply", "-f", "-", manifest=CONFIGURATIONS)
        assert applied.returncode == 0, applied.stderr
        stop = asyncio.Event()
        config = server.ServerConfig(
            settings=settings.ReviewSettings(),
            port=port,
            bind_address="127.0.0.1",
            cert_mode="self-managed",
            namespace=NAMESPACE,
            service_name=SERVICE,
            kubeconfig=str(running.kubeconfig),
            cert_check_interval=0.5,
            shutdown_delay=0,
            freeze_heap=False,
            watch_nodes=True,
        )
        serving = asyncio.create_task(server.serve(config, stop=stop))

        async def webhook_ready() -> bool:
            if serving.done():
                serving.result()  # surfaces the error
            insecure = ssl.create_default_context()
            insecure.check_hostname, insecure.verify_mode = False, ssl.CERT_NONE
            try:
                async with (
                    aiohttp.ClientSession() as session,
                    session.get(f"https://127.0.0.1:{port}/readyz", ssl=insecure) as response,
                ):
                    return response.status == 200
            except aiohttp.ClientError:
                return False

        await eventually(webhook_ready)
        try:
            yield running
        finally:
            stop.set()
            await serving


async def test_the_webhook_manages_its_certificate_and_fills_the_ca_bundles(
    cluster: harness.Cluster,
) -> None:
    secret = json.loads(
        (
            await kubectl(
                cluster, "get", "secret", "-n", NAMESPACE, "queuetree-webhook-certs", "-o", "json"
            )
        ).stdout
    )
    ca = secret["data"]["ca.crt"]
    bundles = []
    for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
        shown = await kubectl(cluster, "get", kind, "-o", "json")
        for item in json.loads(shown.stdout)["items"]:
            bundles += [w["clientConfig"].get("caBundle") for w in item["webhooks"]]
    assert (secret["type"], bundles) == ("kubernetes.io/tls", [ca] * 4)
    assert base64.b64decode(ca).startswith(b"-----BEGIN CERTIFICATE-----")


TREE = [
    {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "team"},
        "spec": {
            "parent": "root",
            "deserved": {"cpu": "8", "memory": "16Gi"},
            "guarantee": {"resource": {"cpu": "8", "memory": "16Gi"}},
        },
    },
    {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "a"},
        "spec": {
            "parent": "team",
            "deserved": {"cpu": "5", "memory": "10Gi"},
            "guarantee": {"resource": {"cpu": "5", "memory": "10Gi"}},
        },
    },
]


async def test_kubectl_shows_every_problem_of_an_invalid_queue_tree(
    cluster: harness.Cluster,
) -> None:
    created = await kubectl(cluster, "apply", "-f", "-", manifest=TREE)
    assert created.returncode == 0, created.stderr
    invalid: dict[str, Any] = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "b"},
        "spec": {
            "parent": "team",
            "capability": {"cpu": "2"},
            "deserved": {"cpu": "4", "memory": "8Gi"},
            "guarantee": {"resource": {"cpu": "4", "memory": "8Gi"}},
        },
    }
    refused = await kubectl(cluster, "create", "-f", "-", manifest=invalid)
    assert (refused.returncode, refused.stderr.splitlines()[-1]) == (
        1,
        'Error from server (Forbidden): error when creating "STDIN": admission webhook '
        '"validatequeue.volcano.sh" denied the request: '
        'requestBody.spec.deserved["cpu"]: Invalid value: "4": deserved[cpu]=4 must be <= '
        "capability[cpu]=2",
    )
    invalid["spec"]["capability"] = {"cpu": "4"}
    refused = await kubectl(cluster, "create", "-f", "-", manifest=invalid)
    assert refused.stderr.splitlines()[-1] == (
        'Error from server (Forbidden): error when creating "STDIN": admission webhook '
        '"validatequeue.volcano.sh" denied the request: '
        "[requestBody.spec.guarantee.resource: Forbidden: parent queue team validation failed: "
        "sum of children's guarantee (cpu 9, memory 18Gi) exceeds parent's guarantee limit "
        "(cpu 8, memory 16Gi) (children: a, b), requestBody.spec.deserved: Forbidden: parent "
        "queue team validation failed: sum of children's deserved (cpu 9, memory 18Gi) exceeds "
        "parent's deserved limit (cpu 8, memory 16Gi) (children: a, b)]"
    )


async def test_kubectl_prints_the_warnings_and_sees_the_defaults(
    cluster: harness.Cluster,
) -> None:
    queue = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "gpus"},
        "spec": {"capability": {"gpu": "4"}},
    }
    created = await kubectl(cluster, "create", "-f", "-", manifest=queue)
    shown = json.loads((await kubectl(cluster, "get", "queue", "gpus", "-o", "json")).stdout)
    assert (created.returncode, created.stdout, created.stderr) == (
        0,
        "queue.scheduling.volcano.sh/gpus created\n",
        'Warning: spec.capability["gpu"]: the scheduler ignores the resource name "gpu": extended '
        "resources need a domain prefix such as nvidia.com/gpu\n",
    )
    assert {k: shown["spec"][k] for k in ("parent", "reclaimable", "weight")} == {
        "parent": "root",
        "reclaimable": True,
        "weight": 1,
    }


async def test_an_opted_in_pod_comes_back_gated_and_a_pod_for_a_missing_queue_is_refused(
    cluster: harness.Cluster,
) -> None:
    created = await kubectl(cluster, "apply", "-f", "-", manifest=TREE)
    assert created.returncode == 0, created.stderr

    def pod(name: str, queue: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "annotations": {GATE: "true", "scheduling.volcano.sh/queue-name": queue},
            },
            "spec": {"containers": [{"name": "main", "image": "busybox"}]},
        }

    created = await kubectl(cluster, "create", "-f", "-", manifest=pod("p1", "a"))
    shown = json.loads((await kubectl(cluster, "get", "pod", "p1", "-o", "json")).stdout)
    refused = await kubectl(cluster, "create", "-f", "-", manifest=pod("p2", "nope"))
    assert (created.returncode, shown["spec"]["schedulingGates"]) == (0, [{"name": GATE}])
    assert refused.stderr.splitlines()[-1] == (
        'Error from server (Forbidden): error when creating "STDIN": admission webhook '
        '"validatepod.volcano.sh" denied the request: '
        'metadata.annotations["scheduling.volcano.sh/queue-name"]: Not found: "nope": pod '
        "default/p2 names queue nope (from annotation scheduling.volcano.sh/queue-name): the "
        "queue does not exist; create it or name an existing leaf queue"
    )


async def test_a_pod_in_a_namespace_created_a_moment_before_follows_its_opt_in(
    cluster: harness.Cluster,
) -> None:
    created = await kubectl(cluster, "apply", "-f", "-", manifest=TREE)
    assert created.returncode == 0, created.stderr
    namespace = {
        "apiVersion": "v1",
        "kind": "Namespace",
        # The opt-in is the namespace's label (what sends its pods to the webhook), the queue
        # its annotation.
        "metadata": {
            "name": "ml",
            "labels": {GATE: "true"},
            "annotations": {"scheduling.volcano.sh/queue-name": "a"},
        },
    }
    plain_pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p1", "namespace": "ml"},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }
    # Namespace and pod in one kubectl call: the pod's review may reach the webhook before the
    # namespace reaches its cache; the webhook waits for the namespace instead of guessing.
    created = await kubectl(cluster, "apply", "-f", "-", manifest=[namespace, plain_pod])
    shown = json.loads(
        (await kubectl(cluster, "get", "pod", "p1", "-n", "ml", "-o", "json")).stdout
    )
    assert created.returncode == 0, created.stderr
    ours = {k: v for k, v in shown["metadata"]["annotations"].items() if "volcano" in k}
    assert (shown["spec"]["schedulingGates"], ours) == (
        [{"name": GATE}],
        {GATE: "true", "scheduling.volcano.sh/queue-name": "a"},
    )
