"""End to end: kubectl -> kubesim -> real TLS webhooks -> kubectl's output.

A mutating webhook injects a scheduling gate (as queuetree's pod webhook does) and a validating
webhook refuses pods of a closed queue with 403; kubectl prints the `Warning:` lines and the
denial exactly as it does against kube-apiserver.
"""

from __future__ import annotations

import asyncio
import json
import pathlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kubesim import harness
from tests.kubesim import test_admission_webhooks as webhooks

webhook_server = webhooks.webhook_server

GATE = "queuetree.io/admission"


def inject_gate(review: dict[str, Any]) -> dict[str, Any]:
    pod = review["request"]["object"]
    if GATE in [g["name"] for g in pod["spec"].get("schedulingGates") or []]:
        return webhooks.allow(review)
    operation = (
        {"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": GATE}}
        if pod["spec"].get("schedulingGates")
        else {"op": "add", "path": "/spec/schedulingGates", "value": [{"name": GATE}]}
    )
    return webhooks.allow(
        review,
        warnings=[f"gate {GATE} added: queue admission decides"],
        **webhooks.json_patch(operation),
    )


def refuse_closed_queues(review: dict[str, Any]) -> dict[str, Any]:
    queue = review["request"]["object"]["metadata"].get("labels", {}).get("queue")
    if queue == "closed":
        return webhooks.deny(
            review, {"code": 403, "reason": "Forbidden", "message": f'queue "{queue}" is closed'}
        )
    return webhooks.allow(review, warnings=[f'queue "{queue}" has room'])


def configuration(
    kind: str, name: str, path: str, server: webhooks.WebhookServer
) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name},
        "webhooks": [
            {
                **webhooks.hook(f"{name}.queuetree.io", path, server),
                "objectSelector": {"matchExpressions": [{"key": "queue", "operator": "Exists"}]},
            }
        ],
    }


@pytest.fixture
async def cluster(
    tmp_path: pathlib.Path, webhook_server: webhooks.WebhookServer
) -> AsyncIterator[harness.Cluster]:
    def resolve(namespace: str, name: str, port: int) -> tuple[str, int]:
        if (namespace, name, port) != (webhooks.SERVICE_NS, webhooks.SERVICE, 443):
            raise LookupError(f"no endpoints for service {namespace}/{name}:{port}")
        return "127.0.0.1", webhook_server.port

    webhook_server.answer("/mutate-pods", inject_gate)
    webhook_server.answer("/validate-pods", refuse_closed_queues)
    with harness.running(tmp_path, service_resolver=resolve) as running:
        for kind, name, path in (
            ("MutatingWebhookConfiguration", "gates", "/mutate-pods"),
            ("ValidatingWebhookConfiguration", "queues", "/validate-pods"),
        ):
            manifest = json.dumps(configuration(kind, name, path, webhook_server))
            applied = await asyncio.to_thread(running.kubectl, "apply", "-f", "-", input=manifest)
            assert applied.returncode == 0, applied.stderr
        yield running


def pod_manifest(name: str, queue: str) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": {"queue": queue}},
            "spec": {"containers": [{"name": "main", "image": "busybox"}]},
        }
    )


async def test_kubectl_creates_a_pod_that_a_tls_webhook_gated_and_prints_the_warnings(
    cluster: harness.Cluster, webhook_server: webhooks.WebhookServer
) -> None:
    created = await asyncio.to_thread(
        cluster.kubectl, "create", "-f", "-", input=pod_manifest("p1", "q1")
    )

    assert (created.returncode, created.stdout, created.stderr) == (
        0,
        "pod/p1 created\n",
        f'Warning: gate {GATE} added: queue admission decides\nWarning: queue "q1" has room\n',
    )
    shown = await asyncio.to_thread(cluster.kubectl, "get", "pod", "p1", "-o", "json")
    pod = json.loads(shown.stdout)
    scheduled = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert pod["spec"]["schedulingGates"] == [{"name": GATE}]
    assert [(c["status"], c["reason"]) for c in scheduled] == [("False", "SchedulingGated")]
    listed = await asyncio.to_thread(cluster.kubectl, "get", "pods", "--no-headers")
    assert listed.stdout.split()[:3] == ["p1", "0/1", "SchedulingGated"]
    # The validating webhook saw the pod as mutated, gate included.
    [review] = webhook_server.calls["/validate-pods"]
    assert review["request"]["object"]["spec"]["schedulingGates"] == [{"name": GATE}]


async def test_kubectl_prints_a_webhook_denial_as_kube_apiserver_words_it(
    cluster: harness.Cluster,
) -> None:
    created = await asyncio.to_thread(
        cluster.kubectl, "create", "-f", "-", input=pod_manifest("p2", "closed")
    )

    assert created.returncode == 1
    assert created.stderr.splitlines()[-1] == (
        'Error from server (Forbidden): error when creating "STDIN": admission webhook '
        '"queues.queuetree.io" denied the request: queue "closed" is closed'
    )
    missing = await asyncio.to_thread(cluster.kubectl, "get", "pod", "p2")
    assert 'pods "p2" not found' in missing.stderr


async def test_kubectl_reports_an_unreachable_webhook_as_an_internal_error(
    cluster: harness.Cluster, webhook_server: webhooks.WebhookServer
) -> None:
    broken = configuration(
        "ValidatingWebhookConfiguration", "broken", "/validate-pods", webhook_server
    )
    broken["webhooks"][0]["clientConfig"]["service"]["name"] = "nowhere"
    applied = await asyncio.to_thread(cluster.kubectl, "apply", "-f", "-", input=json.dumps(broken))
    assert applied.returncode == 0, applied.stderr

    created = await asyncio.to_thread(
        cluster.kubectl, "create", "-f", "-", input=pod_manifest("p3", "q1")
    )

    assert created.returncode == 1
    assert created.stderr.splitlines()[-1] == (
        'Error from server (InternalError): error when creating "STDIN": Internal error occurred: '
        'failed calling webhook "broken.queuetree.io": failed to call webhook: Post '
        f'"https://nowhere.{webhooks.SERVICE_NS}.svc:443/validate-pods?timeout=10s": '
        f'service "{webhooks.SERVICE_NS}/nowhere": '
        f"no endpoints for service {webhooks.SERVICE_NS}/nowhere:443"
    )
