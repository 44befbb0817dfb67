"""Self-managed certificates against kubesim: replicas racing to create the Secret agree on one
pair, and the caBundle of both webhook configurations is the Secret's CA."""

from __future__ import annotations

import asyncio
import base64
import json
import pathlib
from typing import Any

import yaml

from kubesim import harness
from queuetree.webhooks import certificates

NAMESPACE = "queuetree-system"


def configuration(kind: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": f"{n}.queuetree.io",
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "clientConfig": {
                    "service": {"namespace": NAMESPACE, "name": "queuetree-webhook", "path": "/x"}
                },
                "rules": [],
            }
            for n in ("one", "two")
        ],
    }


async def test_racing_replicas_agree_on_one_certificate_and_ca_bundle(
    tmp_path: pathlib.Path,
) -> None:
    from kubernetes_asyncio import client, config

    with harness.running(tmp_path) as cluster:
        manifests = [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
            configuration("MutatingWebhookConfiguration", "m"),
            configuration("ValidatingWebhookConfiguration", "v"),
        ]
        applied = await asyncio.to_thread(
            cluster.kubectl,
            "apply",
            "-f",
            "-",
            input=yaml.safe_dump_all(manifests),
        )
        assert applied.returncode == 0, applied.stderr
        configuration_ = client.Configuration()
        await config.load_kube_config(
            config_file=str(cluster.kubeconfig), client_configuration=configuration_
        )
        async with client.ApiClient(configuration_) as api_client:
            replicas = [
                certificates.SecretSource(
                    api_client,
                    namespace=NAMESPACE,
                    secret_name="certs",
                    service_name="queuetree-webhook",
                    manage=True,
                    mutating_config="m",
                    validating_config="v",
                )
                for _ in range(3)
            ]
            contexts = [certificates.server_context() for _ in replicas]
            loaded = await asyncio.gather(
                *(r.refresh(c) for r, c in zip(replicas, contexts, strict=True))
            )
            again = await replicas[0].refresh(contexts[0])
        secret = json.loads(
            (
                await asyncio.to_thread(
                    cluster.kubectl, "get", "secret", "certs", "-n", NAMESPACE, "-o", "json"
                )
            ).stdout
        )
        bundles = set()
        for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
            shown = await asyncio.to_thread(cluster.kubectl, "get", kind, "-o", "json")
            for item in json.loads(shown.stdout)["items"]:
                bundles |= {w["clientConfig"]["caBundle"] for w in item["webhooks"]}
        writes = [
            r.verb
            for r in cluster.sim.audit()
            if r.resource == "secrets" and r.verb in ("create", "update")
        ]
    assert (loaded, again, bundles) == ([True] * 3, False, {secret["data"]["ca.crt"]})
    assert base64.b64decode(secret["data"]["tls.crt"]).startswith(b"-----BEGIN CERTIFICATE")
    assert writes.count("create") >= 1
