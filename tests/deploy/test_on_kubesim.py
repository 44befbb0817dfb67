"""The CRDs and the sandbox overlay applied with real kubectl to kubesim (the in-repo API server).

This is as close to a cluster as this machine gets: the CRDs are registered and served,
Volcano's queue manifests go through the served schema, `kubectl get queues` prints the
printer columns, and the webhook configurations route (and fail closed) as configured.
"""

from __future__ import annotations

import json
import pathlib
import shlex
import subprocess
import textwrap
from typing import Any

import pytest

from kubesim import harness
from tests.deploy import test_crds

kubesim = harness.kubesim

ROOT = pathlib.Path(__file__).resolve().parents[2]
CRDS = ("crd/queues.scheduling.volcano.sh", "crd/podgroups.scheduling.volcano.sh")


def apply_kustomization(cluster: harness.Cluster, directory: str) -> None:
    applied = cluster.kubectl("apply", "--server-side", "-k", str(ROOT / directory))
    assert applied.returncode == 0, applied.stderr
    waited = cluster.kubectl("wait", "--for=condition=Established", *CRDS, "--timeout=20s")
    assert waited.returncode == 0, waited.stderr


def apply_text(cluster: harness.Cluster, manifest: str) -> subprocess.CompletedProcess[str]:
    return cluster.kubectl("apply", "-f", "-", input=textwrap.dedent(manifest))


def table(output: str) -> list[list[str]]:
    return [line.split() for line in output.strip().splitlines()]


def test_every_volcano_queue_manifest_applies_through_the_served_schema(
    kubesim: harness.Cluster,
) -> None:
    apply_kustomization(kubesim, "crds")
    results = {
        name: apply_text(kubesim, manifest).returncode
        for name, manifest in test_crds.VALID_QUEUES.items()
    }
    assert results == dict.fromkeys(test_crds.VALID_QUEUES, 0)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ("spec: {weight: 0}", "spec.weight"),
        ("spec: {dequeueStrategy: lifo}", "spec.dequeueStrategy"),
    ],
    ids=["weight 0", "unknown dequeue strategy"],
)
def test_the_served_schema_refuses_a_bad_queue_naming_the_field(
    kubesim: harness.Cluster, fields: str, field: str
) -> None:
    apply_kustomization(kubesim, "crds")
    manifest = "apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: bad}\n"
    result = apply_text(kubesim, manifest + fields)
    assert (result.returncode != 0, field in result.stderr) == (True, True), result.stderr


def test_kubectl_get_queues_shows_parent_state_condition_figures_and_pending(
    kubesim: harness.Cluster,
) -> None:
    apply_kustomization(kubesim, "crds")
    created = apply_text(
        kubesim,
        """
        apiVersion: scheduling.volcano.sh/v1beta1
        kind: Queue
        metadata: {name: vision}
        spec: {parent: research, weight: 2}
        """,
    )
    assert created.returncode == 0, created.stderr
    gpu = "nvidia.com/gpu"
    status = {
        "status": {
            "state": "Open",
            "pending": 2,
            "allocated": {"cpu": "3", "memory": "12Gi", gpu: "1"},
            "deserved": {"cpu": "4", "memory": "16Gi", gpu: "2"},
            "realCapability": {"cpu": "8", "memory": "32Gi", gpu: "4"},
            "reserved": {"cpu": "500m", "memory": "1Gi", gpu: "1"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "Ready"}],
        }
    }
    patched = kubesim.kubectl(
        "patch", "queue", "vision", "--subresource=status", "--type=merge", "-p", json.dumps(status)
    )
    assert patched.returncode == 0, patched.stderr
    narrow = kubesim.kubectl("get", "q")
    wide = kubesim.kubectl("get", "queues", "-o", "wide")
    assert (narrow.returncode, wide.returncode) == (0, 0), narrow.stderr + wide.stderr
    narrow_rows, wide_rows = table(narrow.stdout), table(wide.stdout)
    assert (narrow_rows[0], narrow_rows[1][:-1]) == (
        [
            "NAME",
            "PARENT",
            "STATE",
            "CONDITION",
            "CPU-DESERVED",
            "CPU-ALLOCATED",
            "MEM-DESERVED",
            "MEM-ALLOCATED",
            "GPU-DESERVED",
            "GPU-ALLOCATED",
            "PENDING",
            "AGE",
        ],
        ["vision", "research", "Open", "Ready", "4", "3", "16Gi", "12Gi", "2", "1", "2"],
    )
    assert (wide_rows[0][10:17], wide_rows[1][10:17]) == (
        [
            "CPU-CAPABILITY",
            "CPU-RESERVED",
            "MEM-CAPABILITY",
            "MEM-RESERVED",
            "GPU-CAPABILITY",
            "GPU-RESERVED",
            "PENDING",
        ],
        ["8", "500m", "32Gi", "1Gi", "4", "1", "2"],
    )


def test_kubectl_applies_the_sandbox_overlay(kubesim: harness.Cluster) -> None:
    apply_kustomization(kubesim, "manifests/overlays/sandbox")
    listed = kubesim.kubectl(
        "get",
        "mutatingwebhookconfigurations,validatingwebhookconfigurations",
        "-o",
        "name",
    )
    assert listed.stdout.split() == [
        "mutatingwebhookconfiguration.admissionregistration.k8s.io/queuetree-mutating-webhook",
        "validatingwebhookconfiguration.admissionregistration.k8s.io/queuetree-validating-webhook",
    ]


def test_with_no_webhook_running_queue_changes_fail_closed(kubesim: harness.Cluster) -> None:
    apply_kustomization(kubesim, "manifests/overlays/sandbox")
    result = apply_text(kubesim, test_crds.VALID_QUEUES["a Volcano default queue"])
    refused = 'failed calling webhook "mutatequeue.volcano.sh"' in result.stderr
    assert (result.returncode != 0, refused) == (True, True), result.stderr


POD = """
apiVersion: v1
kind: Pod
metadata:
  name: p
  namespace: {namespace}
  annotations: {{scheduling.volcano.sh/queue-allocation-gate: "true"}}
spec:
  containers: [{{name: main, image: registry.k8s.io/pause:3.9}}]
"""


@pytest.mark.parametrize(
    ("namespace", "labels"),
    [
        ("kube-system", {}),
        ("queuetree-system", {}),
        ("break-glass", {"queuetree.io/admission": "disabled"}),
    ],
    ids=["kube-system", "queuetree's own namespace", "a namespace labelled admission=disabled"],
)
def test_with_no_webhook_running_pods_in_excluded_namespaces_are_still_created(
    kubesim: harness.Cluster, namespace: str, labels: dict[str, str]
) -> None:
    apply_kustomization(kubesim, "manifests/overlays/sandbox")
    if labels:
        namespace_manifest = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": namespace, "labels": labels},
        }
        created = kubesim.kubectl("apply", "-f", "-", input=json.dumps(namespace_manifest))
        assert created.returncode == 0, created.stderr
    result = apply_text(kubesim, POD.format(namespace=namespace))
    assert result.returncode == 0, result.stderr


def test_with_no_webhook_running_an_opted_in_pod_elsewhere_is_refused(
    kubesim: harness.Cluster,
) -> None:
    apply_kustomization(kubesim, "manifests/overlays/sandbox")
    result = apply_text(kubesim, POD.format(namespace="default"))
    refused = 'failed calling webhook "mutatepod.volcano.sh"' in result.stderr
    assert (result.returncode != 0, refused) == (True, True), result.stderr


def documented_command(prefix: str) -> list[str]:
    """The command in docs/operations.md that starts with ``prefix``, split as a shell would."""
    text = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8").replace("\\\n", " ")
    (line,) = [line.strip() for line in text.splitlines() if line.strip().startswith(prefix)]
    return shlex.split(line)


GATE = "scheduling.volcano.sh/queue-allocation-gate"


def pending_pod(name: str, *, opted_in: bool, gates: tuple[str, ...] = ()) -> dict[str, Any]:
    annotations = {GATE: "true"} if opted_in else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations},
        "spec": {
            "schedulingGates": [{"name": gate} for gate in gates],
            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9"}],
        },
    }


def test_the_documented_commands_list_opted_in_pods_and_remove_only_queuetrees_gate(
    kubesim: harness.Cluster,
) -> None:
    pods = [
        pending_pod("released", opted_in=True),
        pending_pod("gated", opted_in=True, gates=(GATE, "example.com/other")),
        pending_pod("plain", opted_in=False),
    ]
    for pod in pods:
        created = kubesim.kubectl("apply", "-f", "-", input=json.dumps(pod))
        assert created.returncode == 0, created.stderr
    listing = documented_command("kubectl get pods -A --field-selector=status.phase=Pending")
    listed = kubesim.kubectl(*listing[1:])
    release = documented_command("kubectl patch pod POD -p")
    released = kubesim.kubectl(*[("gated" if word == "POD" else word) for word in release[1:]])
    gates_left = kubesim.kubectl("get", "pod", "gated", "-o", "jsonpath={.spec.schedulingGates}")
    assert (listed.stdout, released.returncode, json.loads(gates_left.stdout)) == (
        f"default/gated\t{GATE} example.com/other\t\ndefault/released\t\t\n",
        0,
        [{"name": "example.com/other"}],
    ), listed.stderr + released.stderr
