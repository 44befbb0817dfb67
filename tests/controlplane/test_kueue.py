"""Kueue as a peer: how its module's manifests are installed for a local process (webhooks
and conversion by URL with the control plane's CA, names as its kustomization gives them,
queuetree's namespace left out of its pod webhooks). No process is started here."""

from __future__ import annotations

import json
import pathlib

import pytest
import yaml

from controlplane import building, cluster, kueue

CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: workloads.kueue.x-k8s.io}
spec: {group: kueue.x-k8s.io}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: topologies.kueue.x-k8s.io}
spec: {group: kueue.x-k8s.io}
"""
CONVERSION = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: workloads.kueue.x-k8s.io}
spec:
  conversion:
    strategy: Webhook
    webhook:
      clientConfig:
        service: {namespace: system, name: webhook-service, path: /convert}
      conversionReviewVersions: [v1]
"""
WEBHOOKS = """\
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: mutating-webhook-configuration}
webhooks:
- name: mpod.kb.io
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /mutate--v1-pod}
- name: mclusterqueue.kb.io
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /mutate-cq}
"""
ROLES = """\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: manager-role}
rules: [{apiGroups: [""], resources: [pods], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: manager-secrets-role, namespace: system}
rules: [{apiGroups: [""], resources: [secrets], verbs: [get]}]
"""


@pytest.fixture
def built(tmp_path: pathlib.Path) -> building.Built:
    for name, text in {
        "crds/crds.yaml": CRD,
        "conversion/webhook_in_workloads.yaml": CONVERSION,
        "webhook/manifests.yaml": WEBHOOKS,
        "rbac/role.yaml": ROLES,
    }.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return building.Built(building.KUEUE, "v0.17.0", tmp_path, {})


def test_conversion_webhooks_are_called_by_url_where_the_kustomization_sets_them(
    built: building.Built,
) -> None:
    found = {
        crd["metadata"]["name"]: crd["spec"].get("conversion")
        for crd in kueue.crds(built, port=9443, ca_bundle="Q0E=")
    }
    assert found == {
        "workloads.kueue.x-k8s.io": {
            "strategy": "Webhook",
            "webhook": {
                "clientConfig": {"url": "https://127.0.0.1:9443/convert", "caBundle": "Q0E="},
                "conversionReviewVersions": ["v1"],
            },
        },
        "topologies.kueue.x-k8s.io": None,
    }


def test_admission_webhooks_by_url_and_its_pod_webhook_never_sees_queuetree(
    built: building.Built,
) -> None:
    (configuration,) = kueue.webhook_configurations(built, port=9443, ca_bundle="Q0E=")
    webhooks = {w["name"]: w for w in configuration["webhooks"]}
    excluded = webhooks["mpod.kb.io"]["namespaceSelector"]["matchExpressions"][0]["values"]
    assert (
        configuration["metadata"]["name"],
        webhooks["mpod.kb.io"]["clientConfig"],
        excluded,
        "namespaceSelector" in webhooks["mclusterqueue.kb.io"],
    ) == (
        "kueue-mutating-webhook-configuration",
        {"url": "https://127.0.0.1:9443/mutate--v1-pod", "caBundle": "Q0E="},
        ["kube-system", "kueue-system", "queuetree-system"],
        False,
    )


def test_its_roles_are_prefixed_as_its_kustomization_names_them_and_bound_to_it(
    built: building.Built,
) -> None:
    found = [
        (m["kind"], m["metadata"].get("namespace", ""), m["metadata"]["name"])
        for m in kueue.rbac_manifests(built)
    ]
    assert found == [
        ("Namespace", "", "kueue-system"),
        ("ServiceAccount", "kueue-system", "kueue-controller-manager"),
        ("ClusterRole", "", "kueue-manager-role"),
        ("ClusterRoleBinding", "", "kueue-manager-role"),
        ("Role", "kueue-system", "kueue-manager-secrets-role"),
        ("RoleBinding", "kueue-system", "kueue-manager-secrets-role"),
    ]


def test_its_configuration_serves_on_loopback_with_the_pod_integration(
    tmp_path: pathlib.Path,
) -> None:
    config = kueue.configuration(kueue.Ports(1, 2, 3), tmp_path)
    assert (
        config["health"],
        config["metrics"],
        config["webhook"],
        config["leaderElection"],
        config["internalCertManagement"],
        config["integrations"],
    ) == (
        {"healthProbeBindAddress": "127.0.0.1:1"},
        {"bindAddress": "127.0.0.1:2"},
        {"port": 3, "host": "127.0.0.1", "certDir": str(tmp_path)},
        {"leaderElect": False},
        {"enable": False},
        {"frameworks": ["batch/job", "pod"]},
    )


def kueue_objects(cpu: str) -> list[dict[str, object]]:
    """A ResourceFlavor, a ClusterQueue with ``cpu`` of nominal quota for every namespace, and
    a LocalQueue ``lq`` in ``default`` pointing at it."""
    return [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": "default"},
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": "cq"},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [
                            {"name": "default", "resources": [{"name": "cpu", "nominalQuota": cpu}]}
                        ],
                    }
                ],
            },
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "lq", "namespace": "default"},
            "spec": {"clusterQueue": "cq"},
        },
    ]


def labelled_pod(name: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {kueue.QUEUE_LABEL: "lq"}},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "1"}},
                }
            ],
            "terminationGracePeriodSeconds": 0,
        },
    }


def test_its_configuration_runs_it_as_tuned_for_throughput_and_as_shipped(
    tmp_path: pathlib.Path,
) -> None:
    config = kueue.configuration(kueue.Ports(1, 2, 3), tmp_path)
    assert (config["clientConnection"], config["controller"]) == (
        {"qps": 1000, "burst": 1000},
        {
            "groupKindConcurrency": {
                "Job.batch": 5,
                "Pod": 5,
                "Workload.kueue.x-k8s.io": 5,
                "LocalQueue.kueue.x-k8s.io": 1,
                "Cohort.kueue.x-k8s.io": 1,
                "ClusterQueue.kueue.x-k8s.io": 1,
                "ResourceFlavor.kueue.x-k8s.io": 1,
            }
        },
    )


def test_kueue_runs_beside_the_control_plane_and_admits_labelled_pods_by_its_quota(
    binaries: object, tmp_path: pathlib.Path
) -> None:
    # Kueue is a peer: make test never builds it (make controlplane-peers does), so without it
    # this test is skipped, whatever QUEUETREE_REQUIRE_REAL says.
    if building.find(building.KUEUE) is None:
        pytest.skip("Kueue is not built: run make controlplane-peers")
    options = cluster.Options(workdir=tmp_path, node_flags=("peer-node:cpu=8,memory=16Gi",))
    with cluster.running(options) as running:
        started = cluster.start_peer(running, "kueue")
        text = yaml.safe_dump_all([*kueue_objects("1"), labelled_pod("a"), labelled_pod("b")])
        # The LocalQueue may be refused for a moment while Kueue's webhooks warm up.
        applied = cluster._poll(
            lambda: running.kubectl("apply", "-f", "-", input=text).returncode == 0,
            timeout=60,
            interval=1.0,
        )
        assert applied, started.process.tail()

        def phases() -> dict[str, tuple[str, list[str]]] | None:
            found = json.loads(running.kubectl("get", "pods", "-n", "default", "-o", "json").stdout)
            by_name = {
                p["metadata"]["name"]: (
                    p["status"].get("phase", ""),
                    [g["name"] for g in p["spec"].get("schedulingGates") or []],
                )
                for p in found["items"]
            }
            running_ones = [n for n, (phase, _) in by_name.items() if phase == "Running"]
            return by_name if len(running_ones) == 1 else None

        seen = cluster._poll(phases, timeout=120, interval=1.0)
        assert seen is not None, started.process.tail()
        # v0.17.0 also gates every pod with kueue.x-k8s.io/topology (its TAS gate).
        assert sorted(
            (phase, "kueue.x-k8s.io/admission" in gates) for phase, gates in seen.values()
        ) == [
            ("Pending", True),
            ("Running", False),
        ]
