"""Self-managed certificates against kubesim: replicas racing to create the Secret agree on one
pair, and the caBundle of both webhook configurations is the Secret's CA."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import pathlib
from typing import Any

import pytest
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
            contexts = [certificates.ServingContext(certificates.server_context) for _ in replicas]
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


async def _source_and_cluster_calls(
    cluster: harness.Cluster, *, manage: bool, service: str = "queuetree-webhook"
) -> tuple[bool, dict[str, str]]:
    """Refresh one source against ``cluster``; whether it loaded a pair, and the Secret's data
    afterwards (base64 values)."""
    from kubernetes_asyncio import client, config

    configuration_ = client.Configuration()
    await config.load_kube_config(
        config_file=str(cluster.kubeconfig), client_configuration=configuration_
    )
    async with client.ApiClient(configuration_) as api_client:
        source = certificates.SecretSource(
            api_client,
            namespace=NAMESPACE,
            secret_name="certs",
            service_name=service,
            manage=manage,
            mutating_config="m",
            validating_config="v",
        )
        loaded = await source.refresh(certificates.ServingContext(certificates.server_context))
    shown = await asyncio.to_thread(
        cluster.kubectl, "get", "secret", "certs", "-n", NAMESPACE, "-o", "json"
    )
    data: dict[str, str] = json.loads(shown.stdout)["data"]
    return loaded, data


def secret_of(bundle: certificates.Bundle) -> dict[str, Any]:
    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "certs", "namespace": NAMESPACE},
        "type": "kubernetes.io/tls",
        "data": {
            "tls.crt": b64(bundle.serving.cert_pem),
            "tls.key": b64(bundle.serving.key_pem),
            "ca.crt": b64(bundle.ca.cert_pem),
            "ca.key": b64(bundle.ca.key_pem),
        },
    }


async def test_a_secret_for_another_service_name_is_renewed_in_place(
    tmp_path: pathlib.Path,
) -> None:
    stale = certificates.generate_bundle(service="old-name", namespace=NAMESPACE)
    with harness.running(tmp_path) as cluster:
        manifests = [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
            secret_of(stale),
        ]
        applied = await asyncio.to_thread(
            cluster.kubectl, "create", "-f", "-", input=yaml.safe_dump_all(manifests)
        )
        assert applied.returncode == 0, applied.stderr
        loaded, data = await _source_and_cluster_calls(cluster, manage=True)
    before = secret_of(stale)["data"]
    # A new serving certificate from the same CA: the caBundle stays valid throughout.
    assert (loaded, data["tls.crt"] != before["tls.crt"], data["ca.crt"] == before["ca.crt"]) == (
        True,
        True,
        True,
    )


async def test_cert_manager_mode_reads_the_secret_and_writes_nothing(
    tmp_path: pathlib.Path,
) -> None:
    written = certificates.generate_bundle(service="queuetree-webhook", namespace=NAMESPACE)
    with harness.running(tmp_path) as cluster:
        manifests = [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
            secret_of(written),
        ]
        applied = await asyncio.to_thread(
            cluster.kubectl, "create", "-f", "-", input=yaml.safe_dump_all(manifests)
        )
        assert applied.returncode == 0, applied.stderr
        cluster.sim.clear_audit()
        loaded, data = await _source_and_cluster_calls(cluster, manage=False)
        verbs = {(r.verb, r.resource) for r in cluster.sim.audit()}
    assert (loaded, data["tls.crt"], verbs) == (
        True,
        secret_of(written)["data"]["tls.crt"],
        {("get", "secrets")},
    )


async def test_cert_manager_mode_without_the_secret_names_it(tmp_path: pathlib.Path) -> None:
    with (
        harness.running(tmp_path) as cluster,
        pytest.raises(certificates.CertificateError, match="certs does not exist yet"),
    ):
        await _source_and_cluster_calls(cluster, manage=False)


async def test_cert_manager_mode_waits_for_the_secret_to_be_issued(
    tmp_path: pathlib.Path,
) -> None:
    import socket
    import ssl
    import time

    import aiohttp

    from queuetree.webhooks import server

    issued = certificates.generate_bundle(service="queuetree-webhook", namespace=NAMESPACE)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    crds = pathlib.Path(__file__).parents[2] / "crds"
    with harness.running(tmp_path) as cluster:
        for name in ("scheduling.volcano.sh_queues.yaml", "scheduling.volcano.sh_podgroups.yaml"):
            done = await asyncio.to_thread(cluster.kubectl, "apply", "-f", str(crds / name))
            assert done.returncode == 0, done.stderr
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        created = await asyncio.to_thread(
            cluster.kubectl, "create", "-f", "-", input=yaml.safe_dump(namespace)
        )
        assert created.returncode == 0, created.stderr
        stop = asyncio.Event()
        serving = asyncio.create_task(
            server.serve(
                server.ServerConfig(
                    port=port,
                    bind_address="127.0.0.1",
                    cert_mode="cert-manager",
                    namespace=NAMESPACE,
                    secret_name="certs",
                    kubeconfig=str(cluster.kubeconfig),
                    shutdown_delay=0,
                    freeze_heap=False,
                ),
                stop=stop,
            )
        )
        # cert-manager issues the Secret after the webhook started.
        created = await asyncio.to_thread(
            cluster.kubectl, "create", "-f", "-", input=yaml.safe_dump(secret_of(issued))
        )
        assert created.returncode == 0, created.stderr
        trusted = ssl.create_default_context(cadata=issued.ca.cert_pem.decode())
        trusted.hostname_checks_common_name = False
        deadline, status = time.monotonic() + 30, 0
        while status != 200 and time.monotonic() < deadline and not serving.done():
            try:
                async with (
                    aiohttp.ClientSession() as session,
                    session.get(
                        f"https://127.0.0.1:{port}/readyz",
                        ssl=trusted,
                        server_hostname=f"queuetree-webhook.{NAMESPACE}.svc",
                    ) as response,
                ):
                    status = response.status
            except aiohttp.ClientError:
                status = 0
            if status != 200:
                await asyncio.sleep(0.1)
        stop.set()
        await serving
    assert status == 200


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        # (a new pair served, CAs per caBundle, the old CA still in them, a warning logged)
        pytest.param("ca-bundle-garbage", (False, {1}, True, True), id="ca-bundle-garbage"),
        pytest.param("ca-bundle-another-ca", (False, {1}, True, False), id="ca-bundle-another-ca"),
        # The new CA is staged beside the old one; the old pair is still served.
        pytest.param("secret-deleted", (False, {2}, True, False), id="secret-deleted"),
    ],
)
async def test_an_edit_while_running_is_repaired_without_distrusting_the_served_pair(
    tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture, edit: str, expected: tuple[Any, ...]
) -> None:
    from kubernetes_asyncio import client, config

    with harness.running(tmp_path) as cluster:
        manifests = [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
            configuration("MutatingWebhookConfiguration", "m"),
            configuration("ValidatingWebhookConfiguration", "v"),
        ]
        applied = await asyncio.to_thread(
            cluster.kubectl, "apply", "-f", "-", input=yaml.safe_dump_all(manifests)
        )
        assert applied.returncode == 0, applied.stderr
        configuration_ = client.Configuration()
        await config.load_kube_config(
            config_file=str(cluster.kubeconfig), client_configuration=configuration_
        )
        async with client.ApiClient(configuration_) as api_client:
            source = certificates.SecretSource(
                api_client,
                namespace=NAMESPACE,
                secret_name="certs",
                service_name="queuetree-webhook",
                manage=True,
                mutating_config="m",
                validating_config="v",
            )
            serving = certificates.ServingContext(certificates.server_context)
            assert await source.refresh(serving)
            shown = await asyncio.to_thread(
                cluster.kubectl, "get", "secret", "certs", "-n", NAMESPACE, "-o", "json"
            )
            old_ca = base64.b64decode(json.loads(shown.stdout)["data"]["ca.crt"])
            if edit == "secret-deleted":
                args: tuple[str, ...] = ("delete", "secret", "certs", "-n", NAMESPACE)
            else:
                pem = (
                    b"garbage"
                    if edit == "ca-bundle-garbage"
                    else certificates.generate_ca(common_name="another").cert_pem
                )
                value = base64.b64encode(pem).decode()
                patch = [
                    {"op": "replace", "path": "/webhooks/0/clientConfig/caBundle", "value": value}
                ]
                args = ("patch", "mutatingwebhookconfiguration", "m", "--type=json")
                args += ("-p", json.dumps(patch))
            done = await asyncio.to_thread(cluster.kubectl, *args)
            assert done.returncode == 0, done.stderr
            with caplog.at_level(logging.WARNING, logger=certificates.__name__):
                loaded = await source.refresh(serving)
        cas = []
        for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
            shown = await asyncio.to_thread(cluster.kubectl, "get", kind, "-o", "json")
            for item in json.loads(shown.stdout)["items"]:
                cas += [
                    certificates.split_pem(base64.b64decode(w["clientConfig"]["caBundle"]))
                    for w in item["webhooks"]
                ]
    warned = any("not a PEM certificate bundle" in r.getMessage() for r in caplog.records)
    assert (loaded, {len(c) for c in cas}, all(old_ca in c for c in cas), warned) == expected
