"""The workload controllers' installation: their module's ClusterRole, what is added to it and
why, and what is applied before each starts (no process is started here)."""

from __future__ import annotations

import pathlib
from typing import Any, NamedTuple

import pytest

from controlplane import building, companions

ROLE = """\
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: demo-operator
rules:
- apiGroups: [""]
  resources: [pods]
  verbs: [create]
"""


def built(tmp_path: pathlib.Path, component: building.Component, role: str) -> building.Built:
    (tmp_path / "rbac").mkdir()
    (tmp_path / "rbac" / "role.yaml").write_text(role)
    return building.Built(component, "v0.0.0", tmp_path, {})


class InstallCase(NamedTuple):
    companion: Any
    expected: Any


INSTALL = {
    "the training operator: its role as shipped, and the Secret its rotator fills": InstallCase(
        companion=companions.TRAINING_OPERATOR,
        expected=[
            ("Namespace", "", "kubeflow"),
            ("ServiceAccount", "kubeflow", "training-operator"),
            ("ClusterRole", "", "demo-operator"),
            ("ClusterRoleBinding", "", "demo-operator"),
            ("Secret", "kubeflow", "training-operator-webhook-cert"),
        ],
    ),
    "KubeRay: its role, no Secret": InstallCase(
        companion=companions.KUBERAY,
        expected=[
            ("Namespace", "", "ray-system"),
            ("ServiceAccount", "ray-system", "kuberay-operator"),
            ("ClusterRole", "", "demo-operator"),
            ("ClusterRoleBinding", "", "demo-operator"),
        ],
    ),
}


@pytest.mark.parametrize(("companion", "expected"), list(INSTALL.values()), ids=list(INSTALL))
def test_what_is_applied_before_a_companion_starts(
    companion: companions.Companion, expected: list[tuple[str, str, str]], tmp_path: pathlib.Path
) -> None:
    manifests = companions.install_manifests(built(tmp_path, companion.component, ROLE), companion)
    found = [
        (m["kind"], m["metadata"].get("namespace", ""), m["metadata"]["name"]) for m in manifests
    ]
    binding = next(m for m in manifests if m["kind"] == "ClusterRoleBinding")
    assert (found, binding["subjects"]) == (
        expected,
        [
            {
                "kind": "ServiceAccount",
                "name": companion.service_account,
                "namespace": companion.namespace,
            }
        ],
    )


class RoleCase(NamedTuple):
    companion: Any
    expected: Any


ROLES = {
    "the training operator's role already covers Volcano's PodGroups": RoleCase(
        companion=companions.TRAINING_OPERATOR,
        expected=[{"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]}],
    ),
    "KubeRay gets the PodGroup rule its Helm chart adds for batchScheduler volcano": RoleCase(
        companion=companions.KUBERAY,
        expected=[
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]},
            {
                "apiGroups": ["scheduling.volcano.sh"],
                "resources": ["podgroups"],
                "verbs": ["create", "delete", "get", "list", "update", "watch"],
            },
        ],
    ),
}


@pytest.mark.parametrize(("companion", "expected"), list(ROLES.values()), ids=list(ROLES))
def test_the_cluster_role_is_the_modules_with_what_its_chart_adds(
    companion: companions.Companion, expected: list[dict[str, Any]], tmp_path: pathlib.Path
) -> None:
    role = companions.cluster_role(built(tmp_path, companion.component, ROLE), companion)
    assert role["rules"] == expected


def test_a_role_file_without_one_cluster_role_is_refused_naming_the_file(
    tmp_path: pathlib.Path,
) -> None:
    with pytest.raises(companions.CompanionError) as raised:
        companions.cluster_role(built(tmp_path, building.KUBERAY, ROLE + ROLE), companions.KUBERAY)
    assert str(raised.value) == (
        f"kuberay-operator: expected one ClusterRole in {tmp_path}/rbac/role.yaml, found 2"
    )


class FlagCase(NamedTuple):
    companion: Any
    expected: Any


FLAGS = {
    "the training operator: Volcano's gang scheduling, local ports": FlagCase(
        companion=companions.TRAINING_OPERATOR,
        expected=(
            "--gang-scheduler-name=volcano",
            "--metrics-bind-address=127.0.0.1:1",
            "--health-probe-bind-address=127.0.0.1:2",
            "--webhook-server-port=3",
        ),
    ),
    "KubeRay: Volcano as its batch scheduler, no leader election": FlagCase(
        companion=companions.KUBERAY,
        expected=(
            "--batch-scheduler=volcano",
            "--metrics-addr=127.0.0.1:1",
            "--health-probe-bind-address=127.0.0.1:2",
            "--enable-leader-election=false",
        ),
    ),
}


@pytest.mark.parametrize(("companion", "expected"), list(FLAGS.values()), ids=list(FLAGS))
def test_each_companion_starts_with_its_volcano_gang_option(
    companion: companions.Companion, expected: tuple[str, ...]
) -> None:
    args = companion.args(companions.Ports(1, 2, 3))
    assert (args, companion.gang_flag in args) == (expected, True)
