"""Workload controllers that work with Volcano, run beside queuetree on the real control plane.

Each creates a Volcano PodGroup per workload and pods that name ``schedulerName: volcano``,
in code its users cannot change (issue 33); queuetree's webhook adopts those pods. Both are
built from their Go modules by :mod:`controlplane.building` (``make controlplane``) and started
here, once a test asks (:func:`start`), the way their own manifests install them minus the
Deployment: their CRDs (Established), a namespace, a ServiceAccount bound to the ClusterRole
their module ships (so RBAC authorizes them as on a cluster), then the process with a token
of that ServiceAccount, ready once its ``/readyz`` answers 200.

- The Kubeflow training operator v1.8.1 (:data:`TRAINING_OPERATOR`) with
  ``--gang-scheduler-name=volcano``: a PyTorchJob's PodGroup takes its queue from
  ``runPolicy.schedulingPolicy.queue``, and no pod is created before the group is ``Inqueue``.
  Its certificate rotator (open-policy-agent/cert-controller) fills the Secret it names with a
  CA and a serving certificate, and waits until the certificate is in the directory a pod
  mounts the Secret at (``/tmp/k8s-webhook-server/serving-certs``, fixed in its
  ``pkg/cert``): :func:`start` writes it there, as the kubelet would. Its validating webhooks
  (which only check job specs) are not registered: their certificate names only the Service
  (``training-operator.<namespace>.svc``), which the API server cannot reach a local process
  by. Nothing calls them, so two runs on one machine sharing that directory do not interfere.
- KubeRay v1.5.0 (:data:`KUBERAY`) with ``--batch-scheduler=volcano``: a RayCluster labelled
  ``ray.io/scheduler-name: volcano`` gets PodGroup ``ray-<name>-pg`` (queue from its
  ``volcano.sh/queue-name`` label, minMember head plus workers) and its pods at once. It
  decides that a RayJob is done by asking the Ray dashboard, which no kwok pod serves: its
  plain-HTTP requests go to the harness's stand-in (:mod:`controlplane.raydashboard`,
  through ``HTTP_PROXY``), which says every job succeeded.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import subprocess
from collections.abc import Callable, Mapping
from typing import Any

import yaml

from controlplane import building, processes, raydashboard

KubectlFn = Callable[..., "subprocess.CompletedProcess[str]"]
"""``Cluster.kubectl``: the admin's kubectl, ``(*args, input=...)``."""
WaitFn = Callable[[Callable[[], Any], str], Any]
"""Polls a probe until it answers, failing the start-up naming the step."""
SpawnFn = Callable[..., processes.Process]
TOKEN_DURATION = "720h"


class CompanionError(RuntimeError):
    """A companion could not be set up; the message names it and the step."""


@dataclasses.dataclass(frozen=True, slots=True)
class Ports:
    metrics: int
    health: int
    webhook: int


@dataclasses.dataclass(frozen=True, slots=True)
class Companion:
    """How one controller is installed and started."""

    name: str
    """Its process's (and log's) name."""
    component: building.Component
    binary: str
    namespace: str
    service_account: str
    crds: tuple[str, ...]
    """``crd/<name>`` of the CRDs it watches, waited for until Established."""
    args: Callable[[Ports], tuple[str, ...]]
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    extra_rules: tuple[Mapping[str, Any], ...] = ()
    """ClusterRole rules beyond the module's role.yaml, each with the reason it is needed."""
    secret: str = ""
    """A Secret it expects to exist in its namespace (created empty), and whose ``tls.crt``
    and ``tls.key`` it expects in :attr:`cert_dir`."""
    cert_dir: pathlib.Path | None = None
    gang_flag: str = ""
    """The one flag that turns on its Volcano gang scheduling (said in failures and docs)."""
    ray_dashboard: bool = False
    """Send its plain-HTTP requests to the harness's stand-in Ray dashboard
    (:mod:`controlplane.raydashboard`), so its RayJobs finish on kwok."""


TRAINING_OPERATOR_CERT_DIR = pathlib.Path("/tmp/k8s-webhook-server/serving-certs")
"""Where training-operator v1.8.1's certificate rotator waits for its certificate (a
constant in its ``pkg/cert``), which controller-runtime's webhook server also reads."""

TRAINING_OPERATOR = Companion(
    name="training-operator",
    component=building.TRAINING_OPERATOR,
    binary="training-operator",
    namespace="kubeflow",
    service_account="training-operator",
    crds=(
        "crd/pytorchjobs.kubeflow.org",
        "crd/tfjobs.kubeflow.org",
        "crd/mpijobs.kubeflow.org",
        "crd/mxjobs.kubeflow.org",
        "crd/xgboostjobs.kubeflow.org",
        "crd/paddlejobs.kubeflow.org",
    ),
    args=lambda ports: (
        "--gang-scheduler-name=volcano",
        f"--metrics-bind-address=127.0.0.1:{ports.metrics}",
        f"--health-probe-bind-address=127.0.0.1:{ports.health}",
        f"--webhook-server-port={ports.webhook}",
    ),
    # TMPDIR as a pod has it: controller-runtime's webhook server reads its certificate from
    # the temporary directory, and the rotator waits for it under /tmp.
    env={"MY_POD_NAMESPACE": "kubeflow", "TMPDIR": "/tmp"},
    secret="training-operator-webhook-cert",
    cert_dir=TRAINING_OPERATOR_CERT_DIR,
    gang_flag="--gang-scheduler-name=volcano",
)
KUBERAY = Companion(
    name="kuberay-operator",
    component=building.KUBERAY,
    binary="kuberay-operator",
    namespace="ray-system",
    service_account="kuberay-operator",
    crds=(
        "crd/rayclusters.ray.io",
        "crd/rayjobs.ray.io",
        "crd/rayservices.ray.io",
    ),
    args=lambda ports: (
        "--batch-scheduler=volcano",
        f"--metrics-addr=127.0.0.1:{ports.metrics}",
        f"--health-probe-bind-address=127.0.0.1:{ports.health}",
        "--enable-leader-election=false",
    ),
    # The module's role.yaml has no Volcano rules: KubeRay's Helm chart adds this one when
    # batchScheduler is volcano (its volcano plugin creates and updates the PodGroup).
    extra_rules=(
        {
            "apiGroups": ["scheduling.volcano.sh"],
            "resources": ["podgroups"],
            "verbs": ["create", "delete", "get", "list", "update", "watch"],
        },
    ),
    gang_flag="--batch-scheduler=volcano",
    ray_dashboard=True,
)
BY_NAME = {companion.name: companion for companion in (TRAINING_OPERATOR, KUBERAY)}


@dataclasses.dataclass(slots=True)
class Running:
    """A started companion: its process and endpoints."""

    companion: Companion
    process: processes.Process
    ports: Ports
    dashboard: raydashboard.Dashboard | None = None

    @property
    def readyz_url(self) -> str:
        return f"http://127.0.0.1:{self.ports.health}/readyz"

    def log_tail(self, lines: int = 40) -> str:
        return self.process.tail(lines)


def cluster_role(built: building.Built, companion: Companion) -> dict[str, Any]:
    """The module's ClusterRole (``rbac/role.yaml``) with :attr:`Companion.extra_rules`."""
    documents = [
        d for d in yaml.safe_load_all((built.directory / "rbac" / "role.yaml").read_text()) if d
    ]
    roles = [d for d in documents if d.get("kind") == "ClusterRole"]
    if len(roles) != 1:
        raise CompanionError(
            f"{companion.name}: expected one ClusterRole in {built.directory}/rbac/role.yaml, "
            f"found {len(roles)}"
        )
    role = roles[0]
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": role["metadata"]["name"]},
        "rules": [*role.get("rules", []), *map(dict, companion.extra_rules)],
    }


def install_manifests(built: building.Built, companion: Companion) -> list[dict[str, Any]]:
    """Its namespace, ServiceAccount, ClusterRole and ClusterRoleBinding, and the empty
    Secret it expects."""
    role = cluster_role(built, companion)
    subject = {
        "kind": "ServiceAccount",
        "name": companion.service_account,
        "namespace": companion.namespace,
    }
    manifests: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": companion.namespace}},
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": companion.service_account, "namespace": companion.namespace},
        },
        role,
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": role["metadata"]["name"]},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role["metadata"]["name"],
            },
            "subjects": [subject],
        },
    ]
    if companion.secret:
        manifests.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": companion.secret, "namespace": companion.namespace},
                "type": "Opaque",
            }
        )
    return manifests


def start(
    companion: Companion,
    *,
    built: building.Built,
    workdir: pathlib.Path,
    kubectl: KubectlFn,
    write_kubeconfig: Callable[[pathlib.Path, str], pathlib.Path],
    wait: WaitFn,
    spawn: SpawnFn,
) -> Running:
    """Install and start ``companion`` on a running control plane (see the module docstring);
    ``write_kubeconfig(path, token)`` writes a kubeconfig for the API server with ``token``."""

    def must(*args: str, input: str | None = None) -> str:
        done = kubectl(*args, input=input)
        if done.returncode != 0:
            raise CompanionError(
                f"{companion.name}: kubectl {' '.join(args)}: {done.stderr.strip()}"
            )
        return str(done.stdout)

    # Server-side: RayCluster's CRD is larger than the last-applied annotation may be.
    must("apply", "--server-side", "-f", str(built.directory / "crds"))
    wait(
        lambda: (
            kubectl(
                "wait", "--for=condition=Established", *companion.crds, "--timeout=5s"
            ).returncode
            == 0
        ),
        f"the CRDs of {companion.name} are Established",
    )
    manifests = install_manifests(built, companion)
    must("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(manifests))
    token = must(
        "create",
        "token",
        companion.service_account,
        "-n",
        companion.namespace,
        f"--duration={TOKEN_DURATION}",
    ).strip()
    kubeconfig = write_kubeconfig(workdir / f"{companion.name}.kubeconfig", token)
    ports = Ports(processes.free_port(), processes.free_port(), processes.free_port())
    # controller-runtime reads KUBECONFIG (both have no flag of their own for it).
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), **companion.env}
    dashboard = raydashboard.Dashboard() if companion.ray_dashboard else None
    if dashboard is not None:
        env.update(dashboard.proxy_env())
    process = spawn(
        companion.name,
        built.binary(companion.binary),
        *companion.args(ports),
        env=env,
    )
    running = Running(companion=companion, process=process, ports=ports, dashboard=dashboard)
    if companion.secret and companion.cert_dir is not None:
        _mount_secret(companion, kubectl, wait)
    wait(
        lambda: processes.http_status(running.readyz_url) == 200,
        f"{companion.name} answers /readyz",
    )
    return running


def _mount_secret(companion: Companion, kubectl: KubectlFn, wait: WaitFn) -> None:
    """Once its certificate rotator has filled the Secret, write ``tls.crt`` and ``tls.key``
    where a pod would have the Secret mounted (:attr:`Companion.cert_dir`)."""
    import base64
    import json

    found: dict[str, bytes] = {}

    def filled() -> bool:
        done = kubectl("get", "secret", companion.secret, "-n", companion.namespace, "-o", "json")
        if done.returncode != 0:
            return False
        data = json.loads(done.stdout).get("data") or {}
        if "tls.crt" not in data or "tls.key" not in data:
            return False
        found.update({key: base64.b64decode(data[key]) for key in ("tls.crt", "tls.key")})
        return True

    wait(filled, f"{companion.name} writes its certificate into Secret {companion.secret}")
    assert companion.cert_dir is not None
    companion.cert_dir.mkdir(parents=True, exist_ok=True)
    for key, value in found.items():
        path = companion.cert_dir / key
        temporary = path.with_name(f".{key}.{os.getpid()}")
        temporary.write_bytes(value)
        temporary.chmod(0o600)
        temporary.replace(path)  # whole, for its file watcher
