"""The sandbox stack's pieces that differ by backend: webhooks registered by URL on the real
control plane, and its audit events read as kubesim's records."""

from __future__ import annotations

from typing import Any

import yaml

from queuetree.sandbox import stack


def _webhook(name: str, path: str | None) -> dict[str, Any]:
    config: dict[str, Any] = {"caBundle": "Q0E="}
    if path is not None:
        config = {"service": {"name": "queuetree-webhook", "namespace": "ns", "path": path}}
    return {"name": name, "clientConfig": config}


def test_every_webhook_that_names_the_service_is_pointed_at_the_local_port() -> None:
    documents = [
        {
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "m"},
            "webhooks": [_webhook("a", "/queues/mutate"), _webhook("b", "/pods/mutate")],
        },
        {
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "v"},
            "webhooks": [_webhook("already-a-url", None), _webhook("c", "/pods/validate")],
        },
        {"kind": "ClusterRole", "metadata": {"name": "r"}},
    ]
    patches = stack.url_patches(documents, port=9443)
    assert [(p["target"], yaml.safe_load(p["patch"])) for p in patches] == [
        (
            {"kind": "MutatingWebhookConfiguration", "name": "m"},
            [
                {
                    "op": "replace",
                    "path": "/webhooks/0/clientConfig",
                    "value": {"url": "https://127.0.0.1:9443/queues/mutate"},
                },
                {
                    "op": "replace",
                    "path": "/webhooks/1/clientConfig",
                    "value": {"url": "https://127.0.0.1:9443/pods/mutate"},
                },
            ],
        ),
        (
            {"kind": "ValidatingWebhookConfiguration", "name": "v"},
            [
                {
                    "op": "replace",
                    "path": "/webhooks/1/clientConfig",
                    "value": {"url": "https://127.0.0.1:9443/pods/validate"},
                }
            ],
        ),
    ]


def test_a_real_audit_event_reads_as_kubesim_s_record() -> None:
    event = {
        "kind": "Event",
        "apiVersion": "audit.k8s.io/v1",
        "stage": "ResponseComplete",
        "verb": "create",
        "user": {"username": "system:serviceaccount:queuetree-system:queuetree-operator"},
        "objectRef": {
            "resource": "pods",
            "namespace": "ml",
            "name": "train-0",
            "apiVersion": "v1",
            "subresource": "eviction",
        },
    }
    cluster_scoped = {
        "verb": "list",
        "user": {"username": "admin"},
        "objectRef": {"resource": "queues", "apiGroup": "scheduling.volcano.sh"},
    }
    assert [stack._audit_record(e) for e in (event, cluster_scoped, {})] == [
        {
            "user": "system:serviceaccount:queuetree-system:queuetree-operator",
            "verb": "create",
            "group": "",
            "resource": "pods",
            "subresource": "eviction",
            "namespace": "ml",
            "name": "train-0",
        },
        {
            "user": "admin",
            "verb": "list",
            "group": "scheduling.volcano.sh",
            "resource": "queues",
            "subresource": "",
            "namespace": "",
            "name": "",
        },
        dict.fromkeys(
            ("user", "verb", "group", "resource", "subresource", "namespace", "name"), ""
        ),
    ]
