"""The manifests agree with the code they run: flags parse, ports and probes match, config loads.

The Deployments' argument lists are the one place the components' flags are written for a
cluster; these tests parse them with the real ``queuetree`` argument parser, so a renamed flag
fails here rather than in a crash-looping pod.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

import pytest

from e2e import support as e2e_support
from queuetree import cli
from queuetree.api import schedconf
from tests.deploy import test_manifests

NAMESPACE = test_manifests.NAMESPACE


def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` expansion of container args (unknown names stay as written)."""
    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m[1], m[0]), text)


def container_of(overlay: str, deployment: str) -> dict[str, Any]:
    objects = test_manifests.overlay(overlay)
    pod = test_manifests.one(objects, "Deployment", deployment)["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    return dict(container)


def parsed_args(overlay: str, deployment: str) -> argparse.Namespace:
    container = container_of(overlay, deployment)
    env = {}
    for variable in container.get("env", []):
        if "value" in variable:
            env[variable["name"]] = variable["value"]
        elif variable.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == (
            "metadata.namespace"
        ):
            env[variable["name"]] = NAMESPACE
    assert container["command"] == ["queuetree"]
    argv = [expand(arg, env) for arg in container["args"]]
    return cli.build_parser().parse_args(argv)


def probe_targets(container: dict[str, Any]) -> dict[str, tuple[str, int, str]]:
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    targets = {}
    for kind in ("livenessProbe", "readinessProbe"):
        get = container[kind]["httpGet"]
        targets[kind] = (get.get("scheme", "HTTP"), ports[get["port"]], get["path"])
    return targets


@pytest.mark.parametrize("overlay", test_manifests.DEPLOYING_OVERLAYS)
def test_the_operator_arguments_parse_and_match_its_ports_and_probes(overlay: str) -> None:
    args = parsed_args(overlay, "queuetree-operator")
    container = container_of(overlay, "queuetree-operator")
    actual = {
        "command": args.command,
        "config": args.config,
        "leader_elect": args.leader_elect,
        "lease": (args.lock_object_namespace, args.lock_object_name),
        "metrics port": (
            args.metrics_port,
            {p["name"]: p["containerPort"] for p in container["ports"]}["metrics"],
        ),
        "probes": probe_targets(container),
    }
    assert actual == {
        "command": "operator",
        "config": "/etc/queuetree/scheduler.conf",
        "leader_elect": True,
        "lease": (NAMESPACE, "queuetree-operator"),
        "metrics port": (8080, 8080),
        # kopf's liveness endpoint serves exactly the path of --health-port's URL: /healthz.
        "probes": {
            "livenessProbe": ("HTTP", args.health_port, "/healthz"),
            "readinessProbe": ("HTTP", args.health_port, "/healthz"),
        },
    }


@pytest.mark.parametrize(
    ("overlay", "cert_mode"),
    [("default", "self-managed"), ("e2e", "self-managed"), ("cert-manager", "cert-manager")],
)
def test_the_webhook_arguments_parse_and_match_its_ports_probes_and_names(
    overlay: str, cert_mode: str
) -> None:
    args = parsed_args(overlay, "queuetree-webhook")
    container = container_of(overlay, "queuetree-webhook")
    objects = test_manifests.overlay(overlay)
    actual = {
        "command": args.command,
        "cert_mode": args.cert_mode,
        "namespace": args.namespace,
        "secret": args.secret_name,
        "service exists": args.service_name in test_manifests.by_kind(objects, "Service"),
        "configurations exist": (
            args.mutating_webhook_config_name
            in test_manifests.by_kind(objects, "MutatingWebhookConfiguration"),
            args.validating_webhook_config_name
            in test_manifests.by_kind(objects, "ValidatingWebhookConfiguration"),
        ),
        "probes": probe_targets(container),
        "metrics port": (
            args.metrics_port,
            {p["name"]: p["containerPort"] for p in container["ports"]}["metrics"],
        ),
    }
    assert actual == {
        "command": "webhook",
        "cert_mode": cert_mode,
        "namespace": NAMESPACE,
        "secret": "queuetree-webhook-certs",
        "service exists": True,
        "configurations exist": (True, True),
        # Liveness from the thread on --health-port, readiness over the TLS port itself.
        "probes": {
            "livenessProbe": ("HTTP", args.health_port, "/healthz"),
            "readinessProbe": ("HTTPS", args.port, "/readyz"),
        },
        "metrics port": (8080, 8080),
    }


def test_the_shipped_scheduler_configuration_parses_without_warnings() -> None:
    objects = test_manifests.overlay("default")
    configmap = next(
        o
        for o in objects
        if o["kind"] == "ConfigMap"
        and o["metadata"]["name"].startswith("queuetree-scheduler-config")
    )
    parsed = schedconf.parse_configuration(
        configmap["data"]["scheduler.conf"], source="scheduler.conf"
    )
    assert parsed.warnings == ()


@pytest.mark.parametrize("overlay", test_manifests.DEPLOYING_OVERLAYS)
def test_the_webhooks_request_timeouts_end_before_kube_apiserver_gives_up(overlay: str) -> None:
    """kube-apiserver waits timeoutSeconds for a webhook: a request the webhook still holds
    after that is not the API server's, so every request timeout the Deployment runs with (its
    flags, or their defaults) ends before the shortest timeoutSeconds."""
    args = parsed_args(overlay, "queuetree-webhook")
    objects = test_manifests.overlay(overlay)
    shortest = min(
        webhook.get("timeoutSeconds", 10)
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
        for configuration in test_manifests.by_kind(objects, kind).values()
        for webhook in configuration["webhooks"]
    )
    timeouts = {
        "header": args.header_timeout,
        "idle": args.idle_timeout,
        "request": args.request_timeout,
        "cache wait within the request": args.cache_wait < args.request_timeout,
    }
    assert (
        shortest,
        {k: v < shortest if isinstance(v, float) else v for k, v in timeouts.items()},
    ) == (
        5,
        {"header": True, "idle": True, "request": True, "cache wait within the request": True},
    )


@pytest.mark.parametrize(
    ("overlay", "expected"),
    [("default", 300.0), ("e2e", e2e_support.INQUEUE_TIMEOUT)],
    ids=["a cluster gets the documented default", "kind's e2e run gets the e2e stack's bound"],
)
def test_the_operator_bounds_inqueue_groups_as_each_overlay_means(
    overlay: str, expected: float
) -> None:
    assert parsed_args(overlay, "queuetree-operator").inqueue_timeout == expected
