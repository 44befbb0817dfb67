"""Karpenter with its kwok cloud provider: the autoscaler of the real control plane.

Karpenter (``sigs.k8s.io/karpenter``, its ``kwok`` main package, built by
:data:`controlplane.building.KARPENTER`) watches for pods that kube-scheduler marked
``PodScheduled=False``/``Unschedulable``, simulates where they would go, and buys nodes for them
by creating NodeClaims; its kwok provider turns each NodeClaim into a Node annotated
``kwok.x-k8s.io/node: fake`` (the annotation our kwok already manages, so no second selector is
needed) and labelled with the instance type it chose. It consolidates nodes that are empty or
underused once ``consolidateAfter`` has passed. Cluster Autoscaler, which the issue first named,
cannot be built here: the Go module proxy serves no version of
``k8s.io/autoscaler/cluster-autoscaler``.

:func:`start` runs it the way its Helm chart installs it, minus the Deployment:

1. its CRDs (NodePools, NodeClaims, NodeOverlays, KWOKNodeClasses), Established;
2. the namespace :data:`NAMESPACE`, the ServiceAccount :data:`SERVICE_ACCOUNT`, and the chart's
   own ClusterRoles and Roles (their rules read from the chart templates in the module, so they
   are Karpenter's, not ours) bound to it; Karpenter authenticates with a token of that
   ServiceAccount, so RBAC authorizes it as on a cluster;
3. the process: leader election off (one replica), metrics and health probes on free ports,
   the batch window of :class:`Options`; ready once ``/readyz`` answers;
4. a KWOKNodeClass and a NodePool (:func:`node_pool`): one instance type, on-demand, CPU
   limits, and consolidation after 30 s (:attr:`Options.consolidate_after` says why), so
   tests see scale-down within about a minute;
5. ready to provision once :func:`unready` names nothing: ``/readyz`` answers (it only says
   the manager's caches synced and its CRDs are served, not that a controller runs), the
   KWOKNodeClass and the NodePool are Ready, and Karpenter's own cluster state is synced
   (:data:`SYNCED_METRIC`: its provisioner schedules nothing before, and drops the batch that
   found it unsynced).

Karpenter binds its metrics and health ports on every interface (``:PORT``; it has no flag for
the address), on ports chosen free on loopback.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

import yaml

from controlplane import building, processes

NAMESPACE = "karpenter"
SERVICE_ACCOUNT = "karpenter"
NODE_POOL = "default"
NODE_CLASS = "default"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
NODE_POOL_LABEL = "karpenter.sh/nodepool"
SYNCED_METRIC = "karpenter_cluster_state_synced"
"""Karpenter's gauge: 1 once its cluster state holds every Node and NodeClaim the API server
has. Its disruption loop sets it about once a second until then, and every 10 s after."""
CRDS = (
    "crd/nodepools.karpenter.sh",
    "crd/nodeclaims.karpenter.sh",
    "crd/nodeoverlays.karpenter.sh",
    "crd/kwoknodeclasses.karpenter.kwok.sh",
)
TOKEN_DURATION = "720h"

KUBE_RESERVED_CPU_MILLI = 100
"""What Karpenter's kwok provider subtracts from every instance type's CPU for the kubelet
(its ``KubeReserved`` overhead): a node of 4 CPUs has 3900m allocatable."""


@dataclasses.dataclass(frozen=True, slots=True)
class Options:
    """How Karpenter runs and what its NodePool may buy."""

    instance_types: tuple[str, ...] = ("c-4x-amd64-linux",)
    """The NodePool's ``node.kubernetes.io/instance-type`` restriction: one size of kwok's
    generated instance types (4 CPUs, 8 GiB, 64 pods), so that a bin-packing estimate is
    exact and a test can compare Karpenter's choice with it."""
    capacity_type: str = "on-demand"
    cpu_limit: str = "200"
    """The NodePool's ``limits.cpu``: at most 50 nodes of 4 CPUs."""
    consolidate_after: str = "30s"
    """``disruption.consolidateAfter``: how long a node must be empty or underused, with no pod
    bound to it or leaving it, before Karpenter may consolidate it.

    Not shorter: while a scale-up is still being bound (kube-scheduler retries its pods with a
    backoff of up to 10 s, longer on a loaded machine), a node that has its pods looks
    movable onto a new node that has none yet, and consolidation deletes it and evicts its
    pods, which, as plain pods with no controller, are gone (seen once with 5 s: 7 of 50 pods
    vanished in ``test_the_same_pods_without_the_gate_buy_nodes``). 30 s is three of those
    backoffs; a scale-down then takes about a minute (this, Karpenter's 10 s disruption poll
    and its 15 s validation)."""
    consolidation_policy: str = "WhenEmpty"
    """Only empty nodes are consolidated: ``WhenEmptyOrUnderutilized`` repacked a scale-up
    (kube-scheduler spreads 50 pods over 8 nodes; Karpenter deleted one holding 6 and evicted
    them, and plain pods without a controller are gone), so a test's pods vanished. The tests'
    scale-down claim is about nodes left empty."""
    batch_idle_duration: str = "1s"
    """``BATCH_IDLE_DURATION``: a batch of pending pods closes after this long without new
    ones (Karpenter's default)."""
    batch_max_duration: str = "5s"
    """``BATCH_MAX_DURATION``: a batch closes after this long at most (default 10 s)."""
    log_level: str = "debug"

    @property
    def provisioning_interval(self) -> float:
        """Seconds between two looks Karpenter takes at a pod it can provision for: its pod
        trigger requeues every such pod every 10 s, and a batch lasts at most
        ``batch_max_duration``. An observation window of N intervals lasts N times this."""
        return max(10.0, _seconds(self.batch_max_duration))


def _seconds(duration: str) -> float:
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    for unit in ("ms", "s", "m", "h"):
        if duration.endswith(unit):
            return float(duration[: -len(unit)]) * units[unit]
    return float(duration)


@dataclasses.dataclass(slots=True)
class Karpenter:
    """A running Karpenter: its process, options and endpoints."""

    options: Options
    process: processes.Process
    metrics_port: int
    health_port: int

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    @property
    def readyz_url(self) -> str:
        return f"http://127.0.0.1:{self.health_port}/readyz"

    def metrics(self) -> str:
        """Its Prometheus exposition text now ("" when it does not answer)."""
        return _http_text(self.metrics_url)

    def log_lines(self, *, since: int = 0) -> list[str]:
        """What it logged (JSON lines), from line ``since`` on."""
        return self.process.log.read_text(errors="replace").splitlines()[since:]


def crd_directory(built: building.Built) -> pathlib.Path:
    return built.directory / "crds"


def chart_directory(built: building.Built) -> pathlib.Path:
    return built.directory / "chart"


def chart_rules(built: building.Built) -> list[dict[str, Any]]:
    """The Roles and ClusterRoles of Karpenter's chart
    (:data:`building.KARPENTER_CHART_RBAC`), with the Helm template lines left out: they only
    name, label and annotate; the rules are literal."""
    roles: list[dict[str, Any]] = []
    for path in sorted(chart_directory(built).glob("*.yaml")):
        text = path.read_text()
        for document in text.split("\n---"):
            literal = "\n".join(line for line in document.splitlines() if "{{" not in line)
            parsed = yaml.safe_load(literal) or {}
            if parsed.get("kind") in ("Role", "ClusterRole") and parsed.get("rules"):
                roles.append(parsed)
    return roles


def rbac_manifests(built: building.Built) -> list[dict[str, Any]]:
    """The namespace, the ServiceAccount, the chart's roles named ``karpenter-<n>`` and one
    binding of each to the ServiceAccount."""
    subject = {"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}
    manifests: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": SERVICE_ACCOUNT, "namespace": NAMESPACE},
        },
    ]
    for index, role in enumerate(chart_rules(built)):
        name = f"karpenter-{index}"
        kind = role["kind"]
        metadata: dict[str, Any] = {"name": name}
        if kind == "Role":
            metadata["namespace"] = (role.get("metadata") or {}).get("namespace") or NAMESPACE
        manifests.append(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": kind,
                "metadata": metadata,
                "rules": role["rules"],
            }
        )
        manifests.append(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": f"{kind}Binding",
                "metadata": dict(metadata),
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name},
                "subjects": [subject],
            }
        )
    return manifests


def node_pool(options: Options) -> list[dict[str, Any]]:
    """The KWOKNodeClass and the NodePool Karpenter provisions from."""
    return [
        {
            "apiVersion": "karpenter.kwok.sh/v1alpha1",
            "kind": "KWOKNodeClass",
            "metadata": {"name": NODE_CLASS},
            "spec": {},
        },
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": NODE_POOL},
            "spec": {
                "template": {
                    "spec": {
                        "nodeClassRef": {
                            "group": "karpenter.kwok.sh",
                            "kind": "KWOKNodeClass",
                            "name": NODE_CLASS,
                        },
                        "requirements": [
                            {
                                "key": INSTANCE_TYPE_LABEL,
                                "operator": "In",
                                "values": list(options.instance_types),
                            },
                            {
                                "key": "karpenter.sh/capacity-type",
                                "operator": "In",
                                "values": [options.capacity_type],
                            },
                        ],
                        "expireAfter": "Never",
                    }
                },
                "limits": {"cpu": options.cpu_limit},
                "disruption": {
                    "consolidationPolicy": options.consolidation_policy,
                    "consolidateAfter": options.consolidate_after,
                    "budgets": [{"nodes": "100%"}],
                },
            },
        },
    ]


KubectlFn = Callable[..., "subprocess.CompletedProcess[str]"]
"""``Cluster.kubectl``: the admin's kubectl, ``(*args, input=...)``."""
WaitFn = Callable[[Callable[[], Any], str], Any]
"""Polls a probe until it answers, failing the start-up naming the step."""
SpawnFn = Callable[..., processes.Process]


class KarpenterError(RuntimeError):
    """Karpenter could not be set up; the message names the step."""


def start(
    options: Options,
    *,
    built: building.Built,
    workdir: pathlib.Path,
    kubectl: KubectlFn,
    write_kubeconfig: Callable[[pathlib.Path, str], pathlib.Path],
    wait: WaitFn,
    spawn: SpawnFn,
) -> Karpenter:
    """Install and start Karpenter on a running control plane (see the module docstring);
    ``write_kubeconfig(path, token)`` writes a kubeconfig for the API server with ``token``."""

    def must(*args: str, input: str | None = None) -> str:
        done = kubectl(*args, input=input)
        if done.returncode != 0:
            raise KarpenterError(f"karpenter: kubectl {' '.join(args)}: {done.stderr.strip()}")
        return str(done.stdout)

    must("apply", "--server-side", "-f", str(crd_directory(built)))
    wait(
        lambda: (
            kubectl("wait", "--for=condition=Established", *CRDS, "--timeout=5s").returncode == 0
        ),
        "Karpenter's CRDs are Established",
    )
    must("apply", "--server-side", "-f", "-", input=_stream(rbac_manifests(built)))
    token = must(
        "create", "token", SERVICE_ACCOUNT, "-n", NAMESPACE, f"--duration={TOKEN_DURATION}"
    ).strip()
    kubeconfig = write_kubeconfig(workdir / "karpenter.kubeconfig", token)
    metrics_port, health_port = processes.free_port(), processes.free_port()
    env = {
        **os.environ,
        "KUBECONFIG": str(kubeconfig),
        "SYSTEM_NAMESPACE": NAMESPACE,
        "DISABLE_LEADER_ELECTION": "true",
        "METRICS_PORT": str(metrics_port),
        "HEALTH_PROBE_PORT": str(health_port),
        "BATCH_IDLE_DURATION": options.batch_idle_duration,
        "BATCH_MAX_DURATION": options.batch_max_duration,
        "LOG_LEVEL": options.log_level,
        "CPU_REQUESTS": "1000",
    }
    process = spawn("karpenter", built.binary("karpenter-kwok"), env=env)
    running = Karpenter(
        options=options, process=process, metrics_port=metrics_port, health_port=health_port
    )
    wait(lambda: processes.http_status(running.readyz_url) == 200, "Karpenter answers /readyz")
    must("apply", "--server-side", "-f", "-", input=_stream(node_pool(options)))
    missing: list[str] = []

    def ready() -> bool:
        missing[:] = unready(running, kubectl)
        return not missing

    try:
        wait(ready, "Karpenter is ready to provision")
    except RuntimeError as exc:
        raise KarpenterError(
            f"karpenter: not ready to provision: {'; '.join(missing)}\n{exc}"
        ) from None
    return running


def unready(running: Karpenter, kubectl: KubectlFn) -> list[str]:
    """What Karpenter still lacks before it provisions, one item per missing condition (empty
    when it is ready): its process running, ``/readyz`` answering 200, the KWOKNodeClass and
    the NodePool Ready (an item quotes the conditions that are not True), and its cluster
    state synced (:data:`SYNCED_METRIC` at 1)."""
    if not running.process.alive():
        return [f"the process exited with {running.process.popen.returncode}"]
    missing = []
    status = processes.http_status(running.readyz_url)
    if status != 200:
        missing.append(f"/readyz answers {status or 'nothing'}")
    for kind, name in (("kwoknodeclass", NODE_CLASS), ("nodepool", NODE_POOL)):
        done = kubectl("get", kind, name, "-o", "json")
        if done.returncode != 0:
            missing.append(f"{kind}/{name}: {done.stderr.strip()}")
            continue
        reason = not_ready(json.loads(done.stdout))
        if reason is not None:
            missing.append(f"{kind}/{name} {reason}")
    synced = gauge(running.metrics(), SYNCED_METRIC)
    if synced != 1.0:
        missing.append(f"{SYNCED_METRIC} is {'absent' if synced is None else f'{synced:g}'}")
    return missing


def _stream(manifests: list[dict[str, Any]]) -> str:
    return yaml.safe_dump_all(manifests, sort_keys=False)


def conditions_text(obj: Mapping[str, Any]) -> str:
    """An object's status conditions on one line: ``Type=Status (Reason: message)``, with the
    reason and message only where the condition is not True."""
    parts = []
    for condition in (obj.get("status") or {}).get("conditions") or []:
        text = f"{condition.get('type')}={condition.get('status')}"
        if condition.get("status") != "True":
            detail = ": ".join(
                str(condition[key]) for key in ("reason", "message") if condition.get(key)
            )
            text += f" ({detail})" if detail else ""
        parts.append(text)
    return ", ".join(parts) or "no conditions"


def not_ready(obj: Mapping[str, Any]) -> str | None:
    """None when the object's ``Ready`` condition is True; otherwise what it says instead."""
    conditions = (obj.get("status") or {}).get("conditions") or []
    if any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
        return None
    return f"not Ready: {conditions_text(obj)}"


def gauge(exposition: str, name: str) -> float | None:
    """The value of an unlabelled sample ``name`` in a Prometheus exposition text (None when
    absent)."""
    for line in exposition.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[0] == name:
            try:
                return float(fields[1])
            except ValueError:
                return None
    return None


def _http_text(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return str(response.read().decode())
    except (urllib.error.URLError, OSError):
        return ""


def node_capacity_milli(instance_type: str) -> int:
    """The allocatable CPU (millicores) of one of kwok's generated instance types, from its
    name (``c-4x-amd64-linux``: 4 CPUs) less :data:`KUBE_RESERVED_CPU_MILLI`."""
    size = instance_type.split("-")[1]
    return int(size.rstrip("x")) * 1000 - KUBE_RESERVED_CPU_MILLI


def bin_packing_estimate(pod_cpu_milli: Mapping[str, int], instance_type: str) -> int:
    """Nodes of ``instance_type`` that first-fit-decreasing needs for pods of these CPU
    requests (pod name -> millicores): the figure Karpenter's choice is compared with."""
    capacity = node_capacity_milli(instance_type)
    free: list[int] = []
    for request in sorted(pod_cpu_milli.values(), reverse=True):
        for index, room in enumerate(free):
            if room >= request:
                free[index] -= request
                break
        else:
            free.append(capacity - request)
    return len(free)
