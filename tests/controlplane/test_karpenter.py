"""Karpenter as the control plane's autoscaler: what the harness installs and how it estimates.

The pure parts run everywhere (the chart's rules with the Helm lines left out, the NodePool,
the first-fit estimate); the last test starts the control plane with Karpenter from the
cached build and checks that it comes up under its own ServiceAccount and that a pod no node
fits makes it buy a kwok node.
"""

from __future__ import annotations

import json
import pathlib
from collections.abc import Mapping

import pytest

from controlplane import building, cluster, karpenter

CHART_ROLE = """\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ include "karpenter.fullname" . }}-core
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ include "karpenter.fullname" . }}-core
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ include "karpenter.fullname" . }}-core
  labels:
    {{- include "karpenter.labels" . | nindent 4 }}
rules:
  - apiGroups: ["karpenter.sh"]
    resources: ["nodeclaims"]
    verbs: ["create", "delete"]
  {{- with .Values.additionalClusterRoleRules -}}
  {{ toYaml . | nindent 2 }}
  {{- end -}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ include "karpenter.fullname" . }}-lease
  namespace: kube-node-lease
rules:
  - apiGroups: ["coordination.k8s.io"]
    resources: ["leases"]
    verbs: ["delete"]
"""


def _built(tmp_path: pathlib.Path, text: str = CHART_ROLE) -> building.Built:
    (tmp_path / "chart").mkdir()
    (tmp_path / "chart" / "clusterrole.yaml").write_text(text)
    return building.Built(building.KARPENTER, "v1.14.1", tmp_path, {})


def test_the_charts_roles_keep_their_literal_rules_and_drop_the_helm_lines(
    tmp_path: pathlib.Path,
) -> None:
    roles = karpenter.chart_rules(_built(tmp_path))
    assert [(r["kind"], r["rules"]) for r in roles] == [
        (
            "ClusterRole",
            [
                {
                    "apiGroups": ["karpenter.sh"],
                    "resources": ["nodeclaims"],
                    "verbs": ["create", "delete"],
                }
            ],
        ),
        (
            "Role",
            [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["delete"]}],
        ),
    ]


def test_each_role_is_bound_to_karpenters_service_account_in_its_namespace(
    tmp_path: pathlib.Path,
) -> None:
    manifests = karpenter.rbac_manifests(_built(tmp_path))
    summary = [
        (m["kind"], m["metadata"].get("namespace", ""), m["metadata"]["name"]) for m in manifests
    ]
    assert summary == [
        ("Namespace", "", "karpenter"),
        ("ServiceAccount", "karpenter", "karpenter"),
        ("ClusterRole", "", "karpenter-0"),
        ("ClusterRoleBinding", "", "karpenter-0"),
        ("Role", "kube-node-lease", "karpenter-1"),
        ("RoleBinding", "kube-node-lease", "karpenter-1"),
    ]
    bindings = [m for m in manifests if m["kind"].endswith("Binding")]
    assert all(
        b["subjects"] == [{"kind": "ServiceAccount", "name": "karpenter", "namespace": "karpenter"}]
        for b in bindings
    )


def test_the_node_pool_restricts_instance_types_limits_cpu_and_consolidates_soon() -> None:
    options = karpenter.Options(instance_types=("c-2x-amd64-linux",), cpu_limit="8")
    node_class, pool = karpenter.node_pool(options)
    spec = pool["spec"]
    assert (
        node_class["kind"],
        spec["template"]["spec"]["requirements"][0],
        spec["limits"],
        spec["disruption"]["consolidateAfter"],
        spec["template"]["spec"]["nodeClassRef"]["kind"],
    ) == (
        "KWOKNodeClass",
        {
            "key": "node.kubernetes.io/instance-type",
            "operator": "In",
            "values": ["c-2x-amd64-linux"],
        },
        {"cpu": "8"},
        "30s",
        "KWOKNodeClass",
    )


ESTIMATES = {
    "nothing-needs-no-node": ({}, "c-4x-amd64-linux", 0),
    "seven-halves-fill-one-4-cpu-node": ({f"p{i}": 500 for i in range(7)}, "c-4x-amd64-linux", 1),
    "the-eighth-needs-a-second": ({f"p{i}": 500 for i in range(8)}, "c-4x-amd64-linux", 2),
    "fifty-four-halves": ({f"p{i}": 500 for i in range(54)}, "c-4x-amd64-linux", 8),
    "three-whole-cpus-a-node": ({f"p{i}": 1000 for i in range(6)}, "c-4x-amd64-linux", 2),
    "big-first": ({"a": 3000, "b": 900, "c": 900, "d": 3000}, "c-4x-amd64-linux", 2),
}


@pytest.mark.parametrize(
    ("pods", "instance", "nodes"), list(ESTIMATES.values()), ids=list(ESTIMATES)
)
def test_the_first_fit_estimate_packs_pods_onto_nodes_of_the_instance_type(
    pods: Mapping[str, int], instance: str, nodes: int
) -> None:
    assert karpenter.bin_packing_estimate(pods, instance) == nodes


def test_the_provisioning_interval_is_the_pod_trigger_or_the_batch_if_longer() -> None:
    assert (
        karpenter.Options().provisioning_interval,
        karpenter.Options(batch_max_duration="30s").provisioning_interval,
    ) == (10.0, 30.0)


READINESS = {
    "ready": (
        [{"type": "NodeClassReady", "status": "True"}, {"type": "Ready", "status": "True"}],
        None,
    ),
    "no-status-yet": ([], "not Ready: no conditions"),
    "a-dependent-false": (
        [
            {
                "type": "NodeClassReady",
                "status": "False",
                "reason": "NodeClassReadinessUnknown",
                "message": "Node Class Readiness Unknown",
            },
            {"type": "Ready", "status": "False", "reason": "UnhealthyDependents"},
        ],
        "not Ready: NodeClassReady=False (NodeClassReadinessUnknown: Node Class Readiness "
        "Unknown), Ready=False (UnhealthyDependents)",
    ),
}


@pytest.mark.parametrize(("conditions", "said"), list(READINESS.values()), ids=list(READINESS))
def test_an_object_not_ready_says_which_conditions_are_not_true_and_why(
    conditions: list[dict[str, str]], said: str | None
) -> None:
    assert karpenter.not_ready({"status": {"conditions": conditions}}) == said


GAUGES = {
    "synced": (
        "# TYPE karpenter_cluster_state_synced gauge\nkarpenter_cluster_state_synced 1\n",
        1.0,
    ),
    "unsynced": ("karpenter_cluster_state_synced 0\n", 0.0),
    "not-yet-set": ("karpenter_cluster_state_node_count 0\n", None),
    "no-answer": ("", None),
}


@pytest.mark.parametrize(("text", "value"), list(GAUGES.values()), ids=list(GAUGES))
def test_the_synced_gauge_is_read_from_the_metrics_text_or_absent(
    text: str, value: float | None
) -> None:
    assert karpenter.gauge(text, karpenter.SYNCED_METRIC) == value


def test_karpenter_comes_up_and_buys_a_kwok_node_for_an_unschedulable_pod(
    binaries: Mapping[str, building.Built], tmp_path: pathlib.Path
) -> None:
    options = cluster.Options(workdir=tmp_path, karpenter=karpenter.Options())
    with cluster.running(options) as running:
        assert running.autoscaler is not None
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "needs-a-node", "namespace": "default"},
            "spec": {
                "containers": [
                    {
                        "name": "main",
                        "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": {"cpu": "1"}},
                    }
                ]
            },
        }
        assert running.kubectl("create", "-f", "-", input=json.dumps(pod)).returncode == 0

        def bound_node() -> dict[str, object] | None:
            found = json.loads(running.kubectl("get", "pod", "needs-a-node", "-o", "json").stdout)
            name = found["spec"].get("nodeName")
            if not name or found["status"].get("phase") != "Running":
                return None
            node: dict[str, object] = json.loads(
                running.kubectl("get", "node", name, "-o", "json").stdout
            )
            return node

        node = cluster._poll(bound_node, timeout=180, interval=1.0)
        assert node is not None, running.autoscaler.process.tail()
        metadata = node["metadata"]
        assert isinstance(metadata, dict)
        assert (
            metadata["annotations"].get(cluster.FAKE_NODE_ANNOTATION),
            metadata["labels"].get(karpenter.INSTANCE_TYPE_LABEL),
            metadata["labels"].get(karpenter.NODE_POOL_LABEL),
        ) == ("fake", "c-4x-amd64-linux", karpenter.NODE_POOL)
        users = {
            (e.get("user") or {}).get("username")
            for e in running.audit()
            if (e.get("objectRef") or {}).get("resource") == "nodeclaims"
            and e.get("verb") == "create"
        }
        assert users == {f"system:serviceaccount:{karpenter.NAMESPACE}:karpenter"}
