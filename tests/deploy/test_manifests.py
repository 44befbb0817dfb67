"""The kustomize manifests: every overlay builds, and what it builds is safe to run.

Each overlay is rendered once per session with the real ``kubectl kustomize`` (the tool users
run) and the checks read the rendered objects, so a patch that an overlay gets wrong shows up
here, not on a cluster.
"""

from __future__ import annotations

import functools
import json
import pathlib
import re
import shutil
import subprocess
import tomllib
from collections.abc import Iterable
from typing import Any

import pytest
import yaml

import queuetree
from queuetree.core import objects as core
from queuetree.operator import metrics as operator_metrics
from queuetree.webhooks import metrics as webhook_metrics
from queuetree.webhooks import settings as webhook_settings

ROOT = pathlib.Path(__file__).resolve().parents[2]
NAMESPACE = "queuetree-system"
OVERLAYS = ["default", "cert-manager", "e2e", "sandbox"]
DEPLOYING_OVERLAYS = ["default", "cert-manager", "e2e"]
GATE = "scheduling.volcano.sh/queue-allocation-gate"

Obj = dict[str, Any]


@functools.cache
def render(directory: str) -> tuple[Obj, ...]:
    """The objects ``kubectl kustomize <directory>`` prints (a relative path under the repo)."""
    kubectl = shutil.which("kubectl")
    assert kubectl is not None, "kubectl is required on PATH to render the kustomize manifests"
    done = subprocess.run(
        [kubectl, "kustomize", str(ROOT / directory)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, f"kubectl kustomize {directory} failed:\n{done.stderr}"
    return tuple(doc for doc in yaml.safe_load_all(done.stdout) if doc)


def overlay(name: str) -> tuple[Obj, ...]:
    return render(f"manifests/overlays/{name}")


def by_kind(objects: Iterable[Obj], kind: str) -> dict[str, Obj]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def one(objects: Iterable[Obj], kind: str, name: str) -> Obj:
    found = by_kind(objects, kind)
    assert name in found, f"{kind} {name} is missing (have {sorted(found)})"
    return found[name]


@pytest.mark.parametrize(
    "directory",
    ["crds", "manifests/base", *(f"manifests/overlays/{name}" for name in OVERLAYS)],
)
def test_kubectl_kustomize_builds_the_directory(directory: str) -> None:
    assert render(directory) != ()


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            "default",
            {
                "ClusterRole": 4,
                "ClusterRoleBinding": 3,
                "ConfigMap": 1,
                "CustomResourceDefinition": 2,
                "Deployment": 2,
                "MutatingWebhookConfiguration": 1,
                "Namespace": 1,
                "NetworkPolicy": 1,
                "PodDisruptionBudget": 2,
                "PriorityClass": 1,
                "Role": 3,
                "RoleBinding": 2,
                "Service": 1,
                "ServiceAccount": 2,
                "ValidatingWebhookConfiguration": 1,
            },
        ),
        (
            "cert-manager",
            {
                "Certificate": 1,
                "ClusterRole": 3,
                "ClusterRoleBinding": 2,
                "ConfigMap": 1,
                "CustomResourceDefinition": 2,
                "Deployment": 2,
                "Issuer": 1,
                "MutatingWebhookConfiguration": 1,
                "Namespace": 1,
                "NetworkPolicy": 1,
                "PodDisruptionBudget": 2,
                "PriorityClass": 1,
                "Role": 3,
                "RoleBinding": 2,
                "Service": 1,
                "ServiceAccount": 2,
                "ValidatingWebhookConfiguration": 1,
            },
        ),
        (
            "sandbox",
            {
                "ClusterRole": 4,
                "ClusterRoleBinding": 3,
                "CustomResourceDefinition": 2,
                "MutatingWebhookConfiguration": 1,
                "Namespace": 1,
                "Role": 3,
                "RoleBinding": 2,
                "ServiceAccount": 2,
                "ValidatingWebhookConfiguration": 1,
            },
        ),
    ],
    ids=["default", "cert-manager", "sandbox-has-no-workloads"],
)
def test_the_overlay_contains_exactly_these_kinds(name: str, expected: dict[str, int]) -> None:
    counts: dict[str, int] = {}
    for o in overlay(name):
        counts[o["kind"]] = counts.get(o["kind"], 0) + 1
    assert counts == expected


@pytest.mark.parametrize("name", OVERLAYS)
def test_every_namespaced_object_lives_in_queuetree_system(name: str) -> None:
    cluster_scoped = {
        "Namespace",
        "CustomResourceDefinition",
        "ClusterRole",
        "ClusterRoleBinding",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
        "PriorityClass",
    }
    misplaced = [
        f"{o['kind']}/{o['metadata']['name']}: {o['metadata'].get('namespace')}"
        for o in overlay(name)
        if o["kind"] not in cluster_scoped and o["metadata"].get("namespace") != NAMESPACE
    ]
    assert misplaced == []


def iter_pod_templates(name: str) -> Iterable[tuple[str, Obj]]:
    for deployment_name, deployment in by_kind(overlay(name), "Deployment").items():
        yield deployment_name, deployment["spec"]["template"]


def container_safety(pod: Obj) -> list[dict[str, Any]]:
    """What matters for running safely, per container, in a shape easy to compare whole."""
    pod_context = pod["spec"].get("securityContext", {})
    rows = []
    for container in pod["spec"]["containers"]:
        context = {**pod_context, **container.get("securityContext", {})}
        requests = container.get("resources", {}).get("requests", {})
        rows.append(
            {
                "container": container["name"],
                "runAsNonRoot": context.get("runAsNonRoot"),
                "runAsUser is not root": context.get("runAsUser", 0) != 0,
                "readOnlyRootFilesystem": context.get("readOnlyRootFilesystem"),
                "allowPrivilegeEscalation": context.get("allowPrivilegeEscalation"),
                "drops ALL capabilities": context.get("capabilities", {}).get("drop") == ["ALL"],
                "seccomp": context.get("seccompProfile", {}).get("type"),
                "requests": sorted(requests),
                "liveness probe": "livenessProbe" in container,
                "readiness probe": "readinessProbe" in container,
                "image is pinned, not latest": not container["image"].endswith(":latest")
                and ":" in container["image"],
                "imagePullPolicy": container.get("imagePullPolicy"),
            }
        )
    return rows


@pytest.mark.parametrize("name", DEPLOYING_OVERLAYS)
def test_every_deployment_runs_non_root_read_only_with_requests_and_probes(name: str) -> None:
    expected_row = {
        "runAsNonRoot": True,
        "runAsUser is not root": True,
        "readOnlyRootFilesystem": True,
        "allowPrivilegeEscalation": False,
        "drops ALL capabilities": True,
        "seccomp": "RuntimeDefault",
        "requests": ["cpu", "memory"],
        "liveness probe": True,
        "readiness probe": True,
        "image is pinned, not latest": True,
        "imagePullPolicy": "IfNotPresent",
    }
    actual = {deployment: container_safety(pod) for deployment, pod in iter_pod_templates(name)}
    expected = {
        "queuetree-operator": [{"container": "operator", **expected_row}],
        "queuetree-webhook": [{"container": "webhook", **expected_row}],
    }
    assert actual == expected


@pytest.mark.parametrize("name", DEPLOYING_OVERLAYS)
def test_both_components_run_two_replicas_behind_a_pdb_at_a_priority_of_their_own(
    name: str,
) -> None:
    objects = overlay(name)
    priority_classes = by_kind(objects, "PriorityClass")
    actual = {}
    for component in ("operator", "webhook"):
        deployment = one(objects, "Deployment", f"queuetree-{component}")
        pdb = one(objects, "PodDisruptionBudget", f"queuetree-{component}")
        pod = deployment["spec"]["template"]
        priority = priority_classes.get(pod["spec"].get("priorityClassName", ""), {})
        actual[component] = {
            "replicas": deployment["spec"]["replicas"],
            "pdb minAvailable": pdb["spec"]["minAvailable"],
            "pdb selects its pods": pdb["spec"]["selector"]["matchLabels"].items()
            <= pod["metadata"]["labels"].items(),
            "priority": (priority.get("value"), priority.get("globalDefault")),
        }
    (operator_container,) = one(objects, "Deployment", "queuetree-operator")["spec"]["template"][
        "spec"
    ]["containers"]
    actual["operator leader election"] = [
        a for a in operator_container["args"] if a.startswith("--leader-elect")
    ]
    row = {"replicas": 2, "pdb minAvailable": 1, "pdb selects its pods": True}
    assert actual == {
        # Above workloads, below the system-* classes and the largest user value (10^9).
        "operator": {**row, "priority": (100_000_000, False)},
        "webhook": {**row, "priority": (100_000_000, False)},
        "operator leader election": [
            "--leader-elect=true",
            "--leader-election-namespace=$(POD_NAMESPACE)",
        ],
    }


def port_numbers(pod: Obj) -> dict[str, int]:
    (container,) = pod["spec"]["containers"]
    return {p["name"]: p["containerPort"] for p in container["ports"]}


@pytest.mark.parametrize("name", DEPLOYING_OVERLAYS)
def test_the_network_policy_admits_only_the_webhooks_ports_and_lets_it_reach_the_api_server(
    name: str,
) -> None:
    objects = overlay(name)
    policy = one(objects, "NetworkPolicy", "queuetree-webhook")["spec"]
    pod = one(objects, "Deployment", "queuetree-webhook")["spec"]["template"]
    ports = port_numbers(pod)
    actual = {
        "selects the webhook pods": policy["podSelector"]["matchLabels"].items()
        <= pod["metadata"]["labels"].items(),
        "types": policy["policyTypes"],
        "ingress": [
            (
                [ports[p["port"]] for p in rule["ports"]],
                [f["namespaceSelector"]["matchLabels"] for f in rule.get("from", [])],
            )
            for rule in policy["ingress"]
        ],
        "egress": [[p["port"] for p in rule["ports"]] for rule in policy["egress"]],
    }
    assert actual == {
        "selects the webhook pods": True,
        "types": ["Ingress", "Egress"],
        "ingress": [
            ([9443], []),  # kube-apiserver, from wherever the control plane is
            ([8081], []),  # the kubelet's liveness probe
            ([8080], [{"queuetree.io/scrape-metrics": "true"}]),
        ],
        "egress": [[443, 6443]],
    }


@pytest.mark.parametrize("name", DEPLOYING_OVERLAYS)
def test_the_webhook_service_reaches_the_webhook_containers_tls_port(name: str) -> None:
    objects = overlay(name)
    service = one(objects, "Service", "queuetree-webhook")
    pod = one(objects, "Deployment", "queuetree-webhook")["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    (port,) = service["spec"]["ports"]
    target = {p["name"]: p["containerPort"] for p in container["ports"]}[port["targetPort"]]
    actual = {
        "port": port["port"],
        "targetPort": target,
        "selector matches": service["spec"]["selector"].items()
        <= pod["metadata"]["labels"].items(),
        "--port flag": f"--port={target}" in container["args"],
    }
    assert actual == {
        "port": 443,
        "targetPort": 9443,
        "selector matches": True,
        "--port flag": True,
    }


@pytest.mark.parametrize("name", DEPLOYING_OVERLAYS)
def test_the_operator_reads_the_scheduler_configuration_from_the_generated_configmap(
    name: str,
) -> None:
    objects = overlay(name)
    pod = one(objects, "Deployment", "queuetree-operator")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    configmap_name = volumes[mounts["/etc/queuetree"]]["configMap"]["name"]
    configmap = one(objects, "ConfigMap", configmap_name)
    configuration = yaml.safe_load(configmap["data"]["scheduler.conf"])
    plugins = {p["name"]: p for tier in configuration["tiers"] for p in tier["plugins"]}
    assert (
        "--config=/etc/queuetree/scheduler.conf" in container["args"],
        plugins["capacity"],
    ) == (
        True,
        {"name": "capacity", "enableHierarchy": True, "arguments": {"ancestorReclaimLevel": 0}},
    )


def webhook_summary(webhook: Obj) -> dict[str, Any]:
    client = webhook["clientConfig"]
    return {
        "path": client["service"]["path"],
        "service": (
            client["service"]["namespace"],
            client["service"]["name"],
            client["service"]["port"],
        ),
        "rules": [
            (tuple(r["apiGroups"]), tuple(r["resources"]), tuple(r["operations"]), r["scope"])
            for r in webhook["rules"]
        ],
        "failurePolicy": webhook["failurePolicy"],
        "timeoutSeconds": webhook["timeoutSeconds"],
        "sideEffects": webhook["sideEffects"],
        "admissionReviewVersions": webhook["admissionReviewVersions"],
    }


SERVICE = (NAMESPACE, "queuetree-webhook", 443)
COMMON = {"service": SERVICE, "sideEffects": "None", "admissionReviewVersions": ["v1"]}
QUEUES = ("scheduling.volcano.sh",), ("queues",)
POD_GROUPS = ("scheduling.volcano.sh",), ("podgroups",)
PODS = ("",), ("pods",)
RESIZE = (*(("",), ("pods/resize",)), ("UPDATE",), "Namespaced")
EXPECTED_WEBHOOKS = {
    ("MutatingWebhookConfiguration", "queuetree-mutating-webhook"): {
        "mutatequeue.volcano.sh": {
            "path": "/queues/mutate",
            "rules": [(*QUEUES, ("CREATE",), "Cluster")],
            "failurePolicy": "Fail",
            "timeoutSeconds": 10,
            **COMMON,
        },
        "mutatepod.volcano.sh": {
            "path": "/pods/mutate",
            "rules": [(*PODS, ("CREATE",), "Namespaced")],
            "failurePolicy": "Fail",
            "timeoutSeconds": 5,
            **COMMON,
        },
        "mutatepod-namespace.queuetree.io": {
            "path": "/pods/mutate",
            "rules": [(*PODS, ("CREATE",), "Namespaced")],
            "failurePolicy": "Fail",
            "timeoutSeconds": 5,
            **COMMON,
        },
        "mutatepodgroup.volcano.sh": {
            "path": "/podgroups/mutate",
            "rules": [(*POD_GROUPS, ("CREATE",), "Namespaced")],
            "failurePolicy": "Fail",
            "timeoutSeconds": 10,
            **COMMON,
        },
    },
    ("ValidatingWebhookConfiguration", "queuetree-validating-webhook"): {
        "validatequeue.volcano.sh": {
            "path": "/queues/validate",
            "rules": [(*QUEUES, ("CREATE", "UPDATE", "DELETE"), "Cluster")],
            "failurePolicy": "Fail",
            "timeoutSeconds": 10,
            **COMMON,
        },
        "validatequeuestatus.queuetree.io": {
            "path": "/queues/validate",
            "rules": [(("scheduling.volcano.sh",), ("queues/status",), ("UPDATE",), "Cluster")],
            "failurePolicy": "Fail",
            "timeoutSeconds": 10,
            **COMMON,
        },
        "validatepod.volcano.sh": {
            "path": "/pods/validate",
            "rules": [(*PODS, ("CREATE", "UPDATE"), "Namespaced"), RESIZE],
            "failurePolicy": "Fail",
            "timeoutSeconds": 5,
            **COMMON,
        },
        "validatepod-namespace.queuetree.io": {
            "path": "/pods/validate",
            "rules": [(*PODS, ("CREATE", "UPDATE"), "Namespaced"), RESIZE],
            "failurePolicy": "Fail",
            "timeoutSeconds": 5,
            **COMMON,
        },
        "validatepodgroup.volcano.sh": {
            "path": "/podgroups/validate",
            "rules": [(*POD_GROUPS, ("CREATE", "UPDATE"), "Namespaced")],
            "failurePolicy": "Fail",
            "timeoutSeconds": 10,
            **COMMON,
        },
        # Warnings only: an outage must never block creating or labelling a namespace.
        "validatenamespace.queuetree.io": {
            "path": "/namespaces/validate",
            "rules": [(("",), ("namespaces",), ("CREATE", "UPDATE"), "Cluster")],
            "failurePolicy": "Ignore",
            "timeoutSeconds": 5,
            **COMMON,
        },
    },
}


@pytest.mark.parametrize("name", OVERLAYS)
def test_the_ten_webhooks_have_their_paths_rules_and_failure_policies(name: str) -> None:
    objects = overlay(name)
    actual = {
        (kind, config_name): {
            w["name"]: webhook_summary(w) for w in one(objects, kind, config_name)["webhooks"]
        }
        for kind, config_name in EXPECTED_WEBHOOKS
    }
    assert actual == EXPECTED_WEBHOOKS


def excluded_namespaces(webhook: Obj) -> dict[str, list[str]]:
    """Label key -> values a namespace must not have for the webhook to be called."""
    selector = webhook.get("namespaceSelector", {})
    return {
        e["key"]: sorted(e["values"])
        for e in selector.get("matchExpressions", [])
        if e["operator"] == "NotIn"
    }


@pytest.mark.parametrize("name", OVERLAYS)
def test_pod_webhooks_exclude_kube_system_our_namespace_and_opted_out_namespaces(name: str) -> None:
    objects = overlay(name)
    actual = {}
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        for config in by_kind(objects, kind).values():
            for webhook in config["webhooks"]:
                if any(r["scope"] != "Cluster" for r in webhook["rules"]):
                    actual[webhook["name"]] = excluded_namespaces(webhook)
    expected = {
        "kubernetes.io/metadata.name": ["kube-system", NAMESPACE],
        "queuetree.io/admission": ["disabled"],
    }
    # The per-pod entries leave opted-in namespaces to the namespace-wide entries, so no pod
    # is reviewed twice.
    per_pod = {**expected, GATE: ["true"]}
    assert actual == {
        "mutatepod.volcano.sh": per_pod,
        "validatepod.volcano.sh": per_pod,
        "mutatepod-namespace.queuetree.io": expected,
        "validatepod-namespace.queuetree.io": expected,
        "mutatepodgroup.volcano.sh": expected,
        "validatepodgroup.volcano.sh": expected,
    }


@pytest.mark.parametrize("name", OVERLAYS)
def test_namespace_wide_pod_webhooks_select_only_namespaces_that_opted_in(name: str) -> None:
    objects = overlay(name)
    selected = {
        webhook["name"]: webhook["namespaceSelector"].get("matchLabels")
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
        for config in by_kind(objects, kind).values()
        for webhook in config["webhooks"]
        if webhook["name"].endswith("-namespace.queuetree.io")
    }
    assert selected == {
        "mutatepod-namespace.queuetree.io": {GATE: "true"},
        "validatepod-namespace.queuetree.io": {GATE: "true"},
    }


@pytest.mark.parametrize("name", OVERLAYS)
def test_pod_webhooks_are_only_called_for_pods_that_opted_in_or_carry_the_gate(name: str) -> None:
    objects = overlay(name)
    conditions = {}
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        for config in by_kind(objects, kind).values():
            for webhook in config["webhooks"]:
                if webhook["name"].endswith("pod.volcano.sh"):
                    condition = webhook["matchConditions"][0]
                    expression = condition["expression"]
                    conditions[webhook["name"]] = (
                        f"k == '{GATE}'" in expression,
                        f"g.name == '{GATE}'" in expression,
                        f"oldObject.spec.schedulingGates.exists(g, g.name == '{GATE}')"
                        in expression,
                        f"k == '{core.ADMITTED_QUEUE_ANNOTATION}'" in expression,
                        "object.spec.schedulerName in ['volcano']" in expression,
                    )
    assert conditions == {
        # The mutating webhook adopts Volcano's pods; the validating one sees them adopted.
        "mutatepod.volcano.sh": (True, True, False, False, True),
        "validatepod.volcano.sh": (True, True, True, True, False),
    }


@pytest.mark.parametrize("name", OVERLAYS)
def test_the_operators_own_pod_updates_never_reach_the_webhook(name: str) -> None:
    """Its gate removals and explanations: an outage of the webhook must not stop admission."""
    operator = webhook_settings.OPERATOR_USERNAME
    found = {
        webhook["name"]: [
            c["name"]
            for c in webhook.get("matchConditions", [])
            if c["expression"].strip() == f"request.userInfo.username != '{operator}'"
        ]
        for config in by_kind(overlay(name), "ValidatingWebhookConfiguration").values()
        for webhook in config["webhooks"]
        if any("UPDATE" in r["operations"] and "pods" in r["resources"] for r in webhook["rules"])
    }
    assert found == {
        "validatepod.volcano.sh": ["not-the-operator"],
        "validatepod-namespace.queuetree.io": ["not-the-operator"],
    }


def normalized_rules(role: Obj) -> set[tuple[str, str, str, str]]:
    """Every (apiGroup, resource, verb, resourceName or '*') the role grants."""
    granted = set()
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    for name in rule.get("resourceNames", ["*"]):
                        granted.add((group, resource, verb, name))
    return granted


def grants(*spec: tuple[str, str, str, str]) -> set[tuple[str, str, str, str]]:
    """Expand ``(group, resource, "verb verb", name)`` rows into ``normalized_rules`` tuples."""
    return {
        (group, resource, verb, name)
        for group, resource, verbs, name in spec
        for verb in verbs.split()
    }


OPERATOR_CLUSTER_ROLE = grants(
    ("scheduling.volcano.sh", "queues", "list watch create patch", "*"),
    ("scheduling.volcano.sh", "queues/status", "patch", "*"),
    ("scheduling.volcano.sh", "podgroups", "list watch create patch", "*"),
    ("scheduling.volcano.sh", "podgroups/status", "patch", "*"),
    ("", "pods", "get list watch patch", "*"),
    ("batch", "jobs", "get list watch", "*"),
    ("apps", "replicasets", "get list watch", "*"),
    ("apps", "statefulsets", "get list watch", "*"),
    ("", "pods/eviction", "create", "*"),
    ("", "nodes", "list watch", "*"),
    ("", "namespaces", "list watch", "*"),
    ("", "events", "create", "*"),
    ("apiextensions.k8s.io", "customresourcedefinitions", "list watch", "*"),
    ("scheduling.k8s.io", "priorityclasses", "list watch", "*"),
    ("scheduling.k8s.io", "podgroups", "create get delete patch", "*"),
    ("resource.k8s.io", "resourceclaims", "list watch", "*"),
    ("resource.k8s.io", "resourceclaimtemplates", "list watch", "*"),
)
OPERATOR_ROLE = grants(
    ("coordination.k8s.io", "leases", "get update", "queuetree-operator"),
    ("coordination.k8s.io", "leases", "create", "*"),
)
WEBHOOK_CLUSTER_ROLE = grants(
    ("scheduling.volcano.sh", "queues", "list watch get", "*"),
    ("scheduling.volcano.sh", "podgroups", "list watch", "*"),
    ("", "namespaces", "list watch", "*"),
)
WEBHOOK_CABUNDLE = grants(
    (
        "admissionregistration.k8s.io",
        "mutatingwebhookconfigurations",
        "get patch",
        "queuetree-mutating-webhook",
    ),
    (
        "admissionregistration.k8s.io",
        "validatingwebhookconfigurations",
        "get patch",
        "queuetree-validating-webhook",
    ),
)
WEBHOOK_SECRETS_SELF_MANAGED = grants(
    ("", "secrets", "get update", "queuetree-webhook-certs"), ("", "secrets", "create", "*")
)
WEBHOOK_SECRETS_READ_ONLY = grants(("", "secrets", "get", "queuetree-webhook-certs"))
VIEWER_CLUSTER_ROLE = grants(
    ("scheduling.volcano.sh", "queues", "get list watch", "*"),
    ("scheduling.volcano.sh", "podgroups", "get list watch", "*"),
    ("", "pods", "get list watch", "*"),
    ("", "nodes", "get list watch", "*"),
    ("", "namespaces", "get list watch", "*"),
)
VIEWER_ROLE = grants(("", "configmaps", "get list", "*"))
VIEWER_RBAC = {
    ("ClusterRole", "queuetree-viewer"): VIEWER_CLUSTER_ROLE,
    ("Role", "queuetree-viewer"): VIEWER_ROLE,
}
SELF_MANAGED_RBAC = {
    **VIEWER_RBAC,
    ("ClusterRole", "queuetree-operator"): OPERATOR_CLUSTER_ROLE,
    ("Role", "queuetree-operator-leader-election"): OPERATOR_ROLE,
    ("ClusterRole", "queuetree-webhook"): WEBHOOK_CLUSTER_ROLE,
    ("ClusterRole", "queuetree-webhook-cabundle"): WEBHOOK_CABUNDLE,
    ("Role", "queuetree-webhook-certs"): WEBHOOK_SECRETS_SELF_MANAGED,
}


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("default", SELF_MANAGED_RBAC),
        ("e2e", SELF_MANAGED_RBAC),
        ("sandbox", SELF_MANAGED_RBAC),
        (
            "cert-manager",
            {
                **VIEWER_RBAC,
                ("ClusterRole", "queuetree-operator"): OPERATOR_CLUSTER_ROLE,
                ("Role", "queuetree-operator-leader-election"): OPERATOR_ROLE,
                ("ClusterRole", "queuetree-webhook"): WEBHOOK_CLUSTER_ROLE,
                ("Role", "queuetree-webhook-certs"): WEBHOOK_SECRETS_READ_ONLY,
            },
        ),
    ],
    ids=OVERLAYS,
)
def test_roles_grant_exactly_the_calls_each_component_makes(
    name: str, expected: dict[tuple[str, str], set[tuple[str, str, str, str]]]
) -> None:
    objects = overlay(name)
    actual = {
        (kind, role_name): normalized_rules(role)
        for kind in ("ClusterRole", "Role")
        for role_name, role in by_kind(objects, kind).items()
    }
    assert actual == expected


@pytest.mark.parametrize("name", OVERLAYS)
def test_every_binding_gives_an_existing_role_to_an_existing_service_account(name: str) -> None:
    objects = overlay(name)
    accounts = set(by_kind(objects, "ServiceAccount"))
    actual = {}
    for kind in ("ClusterRoleBinding", "RoleBinding"):
        for binding_name, binding in by_kind(objects, kind).items():
            role = binding["roleRef"]
            (subject,) = binding["subjects"]
            actual[binding_name] = (
                role["name"] in by_kind(objects, role["kind"]),
                subject["kind"],
                subject["namespace"],
                subject["name"] in accounts,
            )
    assert set(actual.values()) == {(True, "ServiceAccount", NAMESPACE, True)}


@pytest.mark.parametrize("name", DEPLOYING_OVERLAYS)
def test_each_deployment_runs_as_its_own_service_account(name: str) -> None:
    actual = {
        deployment: pod["spec"]["serviceAccountName"]
        for deployment, pod in iter_pod_templates(name)
    }
    assert actual == {
        "queuetree-operator": "queuetree-operator",
        "queuetree-webhook": "queuetree-webhook",
    }


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("default", ("self-managed", None, None)),
        ("e2e", ("self-managed", None, None)),
        (
            "cert-manager",
            (
                "cert-manager",
                f"{NAMESPACE}/queuetree-webhook",
                [
                    f"queuetree-webhook.{NAMESPACE}.svc",
                    f"queuetree-webhook.{NAMESPACE}.svc.cluster.local",
                ],
            ),
        ),
    ],
    ids=["default", "e2e", "cert-manager"],
)
def test_certificates_come_from_the_webhook_itself_or_from_cert_manager(
    name: str, expected: tuple[str, str | None, list[str] | None]
) -> None:
    objects = overlay(name)
    (container,) = one(objects, "Deployment", "queuetree-webhook")["spec"]["template"]["spec"][
        "containers"
    ]
    mode = {e["name"]: e.get("value") for e in container["env"]}["QUEUETREE_CERT_MODE"]
    injections = {
        config["metadata"].get("annotations", {}).get("cert-manager.io/inject-ca-from")
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
        for config in by_kind(objects, kind).values()
    }
    (injection,) = injections
    certificates = by_kind(objects, "Certificate")
    dns_names = None
    if injection is not None:
        certificate = certificates[injection.split("/")[1]]
        assert certificate["spec"]["secretName"] == "queuetree-webhook-certs"
        dns_names = certificate["spec"]["dnsNames"]
    assert (mode, injection, dns_names) == expected


@pytest.mark.parametrize(
    ("name", "tag"),
    [("default", queuetree.__version__), ("cert-manager", queuetree.__version__), ("e2e", "e2e")],
)
def test_both_deployments_run_the_one_image_of_the_overlay(name: str, tag: str) -> None:
    images = {
        container["image"]
        for _, pod in iter_pod_templates(name)
        for container in pod["spec"]["containers"]
    }
    assert images == {f"queuetree:{tag}"}


def test_the_package_the_image_and_the_manifests_agree_on_one_version() -> None:
    """pyproject.toml's version is the one release: ``queuetree --version``, the tag the
    deploying overlays and the base run, and the image ``make image`` builds repeat it."""
    root = pathlib.Path(__file__).resolve().parents[2]
    declared = tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"]
    dockerfile = (root / "Dockerfile").read_text()
    base_images = {
        line.split("image:")[1].strip()
        for path in (root / "manifests" / "base" / "workloads").glob("*.yaml")
        for line in path.read_text().splitlines()
        if line.strip().startswith("image:")
    }
    assert (queuetree.__version__, f"ARG VERSION={declared}" in dockerfile, base_images) == (
        declared,
        True,
        {f"queuetree:{declared}"},
    )


def test_the_monitoring_overlay_scrapes_both_components_on_their_metrics_port() -> None:
    objects = overlay("monitoring")
    services = by_kind(objects, "Service")
    pods = dict(iter_pod_templates("monitoring"))
    scraped = {}
    for name in ("queuetree-operator-metrics", "queuetree-webhook-metrics"):
        selector = services[name]["spec"]["selector"]
        (target,) = [
            pod for pod in pods.values() if selector.items() <= pod["metadata"]["labels"].items()
        ]
        ports = {p["name"] for c in target["spec"]["containers"] for p in c["ports"]}
        scraped[name] = services[name]["spec"]["ports"][0]["targetPort"] in ports
    monitor = by_kind(objects, "ServiceMonitor")["queuetree"]
    assert (scraped, monitor["spec"]["endpoints"][0]["port"]) == (
        {"queuetree-operator-metrics": True, "queuetree-webhook-metrics": True},
        "metrics",
    )


def test_the_dashboard_queries_only_metrics_the_components_export() -> None:
    root = pathlib.Path(__file__).resolve().parents[2]
    dashboard = json.loads(
        (root / "manifests/overlays/monitoring/queuetree-dashboard.json").read_text()
    )
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    used = {
        re.sub(r"_(bucket|count|sum|total)$", "", m)
        for e in exprs
        for m in re.findall(r"queuetree_\w+", e)
    }
    exported = {
        metric.name
        for registry in (operator_metrics.create().registry, webhook_metrics.Metrics().registry)
        for metric in registry.collect()
    }
    titles = " / ".join(p["title"] for p in dashboard["panels"])
    assert (sorted(used - exported), "oldest gated" in titles, "Webhook latency" in titles) == (
        [],
        True,
        True,
    )
