"""The sandbox stack: a cluster backend, the webhook over TLS and the operator, as local processes.

One implementation for ``queuetree sandbox`` and the e2e suite, on either backend:

- ``kubesim`` (the default): the in-repo API emulator with simulated nodes, scheduler and
  kubelet (``queuetree sandbox --serve-kubesim SPEC``), over HTTPS with a CA of its own that
  every kubeconfig carries, which maps the webhook's Service reference
  (``queuetree-webhook.queuetree-system.svc:443``) to the local webhook's port and knows one
  bearer token per component, so its audit log tells their calls apart (kubectl sends a token
  only over HTTPS, so the TLS is what lets a ServiceAccount's token, from ``kubectl create
  token``, make kubectl that ServiceAccount);
- ``real``: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok, built from
  their Go modules (``make controlplane``; :mod:`controlplane.cluster`). The webhook
  configurations are installed with ``clientConfig.url`` pointing at the local webhook, and
  the operator and the webhook authenticate with tokens of their own ServiceAccounts, so the
  shipped RBAC is what authorizes them.

:func:`start` brings the stack up in the order a cluster installation follows, and returns
only once it is usable:

1. the backend;
2. ``kubectl apply --server-side -k manifests/overlays/sandbox`` (CRDs, namespace, RBAC,
   webhook configurations; on ``real`` through a generated kustomization that points the
   webhooks at ``https://127.0.0.1:PORT``), then the CRDs Established;
3. ``queuetree webhook`` in self-managed certificate mode with its own kubeconfig: ready
   once it answers ``/readyz`` and both webhook configurations carry its CA bundle;
4. ``queuetree operator`` with the Deployment's scheduler configuration, leader election
   on, its own kubeconfig: ready once it leads and the ``root`` queue exists.

:meth:`Stack.stop` ends them in the reverse order (SIGTERM, then SIGKILL after a grace
period). Children never outlive the sandbox (:mod:`controlplane.processes`): start the stack
from a thread that lives as long as the stack (the main one).
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
import os
import pathlib
import shutil
import ssl
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from typing import Any

import yaml

from controlplane import cluster, companions, karpenter, processes
from queuetree.api import bodies
from queuetree.sandbox import kubectl

REPO = pathlib.Path(__file__).resolve().parents[2]
"""The checkout: the sandbox applies its manifests from there (``pip install -e .``)."""
OVERLAY = REPO / "manifests" / "overlays" / "sandbox"
SCHEDULER_CONFIG = REPO / "manifests" / "base" / "workloads" / "scheduler.conf"
DEFAULT_NODES = REPO / "examples" / "nodes.yaml"

NAMESPACE = "queuetree-system"
SERVICE = "queuetree-webhook"
SECRET = "queuetree-webhook-certs"
WEBHOOK_CONFIGURATIONS = (
    "mutatingwebhookconfiguration/queuetree-mutating-webhook",
    "validatingwebhookconfiguration/queuetree-validating-webhook",
)
CRDS = ("crd/queues.scheduling.volcano.sh", "crd/podgroups.scheduling.volcano.sh")
KUBESIM = "kubesim"
"""The kubesim backend's name, and its process's."""
BACKENDS = (KUBESIM, "real")
"""``kubesim``: the in-repo emulator (starts in a second); ``real``: the control plane built
from the Kubernetes Go modules (``make controlplane``)."""
TOKEN_DURATION = "720h"
"""How long the real backend's ServiceAccount tokens for the operator and the webhook last:
the life of the control plane's certificates (:data:`controlplane.pki.VALIDITY`)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Identity:
    """A client of the sandbox API server: the bearer token it sends, the user it becomes."""

    name: str
    token: str
    username: str
    groups: tuple[str, ...]


def service_account(name: str) -> Identity:
    """The identity of the ServiceAccount ``queuetree-system/<name>``, as a cluster sees it."""
    return Identity(
        name=name,
        token=f"sandbox-{name}-token",
        username=f"system:serviceaccount:{NAMESPACE}:{name}",
        groups=(
            "system:serviceaccounts",
            f"system:serviceaccounts:{NAMESPACE}",
            "system:authenticated",
        ),
    )


ADMIN = Identity(
    name="admin",
    token="sandbox-admin-token",
    username="kubernetes-admin",
    groups=("system:masters", "system:authenticated"),
)
OPERATOR = service_account("queuetree-operator")
WEBHOOK = service_account("queuetree-webhook")


@dataclasses.dataclass(frozen=True, slots=True)
class Options:
    """What to start. Paths are absolute or relative to the current directory."""

    workdir: pathlib.Path
    """Kubeconfigs, logs, the port files and the audit log go here."""
    nodes_files: tuple[pathlib.Path, ...] = (DEFAULT_NODES,)
    """YAML files of Node manifests the simulation creates at start."""
    node_flags: tuple[str, ...] = ()
    """More nodes in kubesim's flag syntax (``NAME:cpu=8,memory=32Gi,...``)."""
    scheduler_config: pathlib.Path = SCHEDULER_CONFIG
    overlay: pathlib.Path = OVERLAY
    schedule_period: float = 0.5
    """The operator's fallback cycle period; events wake it sooner."""
    startup_timeout: float = 90.0
    """Seconds each start-up step may take before the start fails (and stops what started)."""
    webhook_flags: tuple[str, ...] = ()
    operator_flags: tuple[str, ...] = ()
    backend: str = KUBESIM
    """One of :data:`BACKENDS`."""
    peers: tuple[str, ...] = ()
    """On ``real``: start these peers beside queuetree (``kueue``: :mod:`controlplane.kueue`),
    each admitting only the pods that ask for it."""
    autoscaler: karpenter.Options | None = None
    """On ``real``: run Karpenter with its kwok provider as the cluster's autoscaler, with
    these options (:mod:`controlplane.karpenter`); kubesim has no autoscaler."""


class StartupError(RuntimeError):
    """The stack did not come up; the message names the step and quotes the logs."""


@dataclasses.dataclass(slots=True)
class Stack:
    """A running sandbox: where it is, how to reach it, and its processes."""

    options: Options
    url: str = ""
    kubeconfig: pathlib.Path = pathlib.Path()
    """The administrator's kubeconfig (what a user exports as KUBECONFIG)."""
    cache_dir: pathlib.Path = pathlib.Path()
    audit_file: pathlib.Path = pathlib.Path()
    """kubesim's audit log, one JSON object per request (user, verb, group, resource, ...)."""
    ca_bundle: str = ""
    """The API server's CA (base64 of PEM), as kubeconfigs carry it."""
    webhook_port: int = 0
    webhook_metrics_port: int = 0
    operator_metrics_port: int = 0
    """The first operator replica's /metrics (the one that leads at start)."""
    processes: cluster.Processes = dataclasses.field(default_factory=list)
    control_plane: cluster.Cluster | None = None
    """The real backend's control plane (None on kubesim)."""
    webhook_metrics: str = ""
    """The URL of the webhook's Prometheus ``/metrics``."""
    operators: list[OperatorReplica] = dataclasses.field(default_factory=list)
    """Every operator replica started, in order (killed ones included: see
    :meth:`OperatorReplica.leads` and ``process.alive()``)."""

    @property
    def backend(self) -> str:
        return self.options.backend

    @property
    def kubectl(self) -> kubectl.Kubectl:
        return kubectl.Kubectl(str(self.kubeconfig), str(self.cache_dir))

    @property
    def env(self) -> dict[str, str]:
        """The environment for clients of the sandbox (KUBECONFIG and KUBECACHEDIR set)."""
        return self.kubectl.env

    def start_webhook(self, name: str, *, port: int = 0) -> WebhookReplica:
        """Start a webhook replica named ``name`` (its log) on ``port`` (0: a free one), and
        wait until it answers ``/readyz``. Every replica shares the certificate Secret; the
        API server calls only the suite's first one (registered by URL), so more replicas are
        for tests of what replicas agree on (the certificate rollover)."""
        port = port or processes.free_port()
        metrics_port = processes.free_port()
        process = _spawn_webhook(self, name, port=port, metrics_port=metrics_port)
        self.processes.append(process)
        replica = WebhookReplica(process=process, port=port, metrics_port=metrics_port)
        _wait(
            self,
            lambda: _http_ok(f"http://127.0.0.1:{metrics_port}/readyz"),
            f"webhook replica {name} answers /readyz",
        )
        return replica

    def start_operator(self, name: str, *, lead: bool) -> OperatorReplica:
        """Start one more replica of the operator, named ``name`` (its log, its Lease holder
        identity), and wait until it leads (``lead``) or until it serves its metrics as a
        standby. Every replica campaigns for the same Lease."""
        options = self.options
        metrics_port, health_port = processes.free_port(), processes.free_port()
        env = {
            **os.environ,
            "KUBECONFIG": str(options.workdir / "queuetree-operator.kubeconfig"),
            "KUBECACHEDIR": str(self.cache_dir),
            "POD_NAMESPACE": NAMESPACE,
            "POD_NAME": f"queuetree-{name}",
        }
        process = processes.spawn(
            name,
            _queuetree(
                "operator",
                f"--config={options.scheduler_config}",
                "--leader-elect=true",
                f"--leader-election-namespace={NAMESPACE}",
                f"--identity=queuetree-{name}",
                f"--metrics-port={metrics_port}",
                f"--health-port={health_port}",
                f"--schedule-period={options.schedule_period}",
                *options.operator_flags,
            ),
            workdir=options.workdir,
            env=env,
        )
        self.processes.append(process)
        replica = OperatorReplica(
            process=process, identity=f"queuetree-{name}", metrics_port=metrics_port
        )
        self.operators.append(replica)
        wanted = "queuetree_leader 1.0" if lead else "queuetree_leader"
        _wait(
            self,
            lambda: wanted in _http_text(f"http://127.0.0.1:{metrics_port}/metrics"),
            f"operator replica {name} leads" if lead else f"operator replica {name} serves",
        )
        return replica

    def start_companion(self, name: str) -> companions.Running:
        """Start the workload controller ``name`` (``training-operator`` or
        ``kuberay-operator``: :mod:`controlplane.companions`) with its Volcano gang option,
        once, on the real backend; it stops with the stack. kubesim runs no controller."""
        if self.control_plane is None:
            raise StartupError(
                f"sandbox: {name} runs on the real backend only (kubesim serves no custom "
                "controllers); start the sandbox with --backend real"
            )
        try:
            return cluster.start_companion(self.control_plane, name)
        except cluster.StartupError as exc:
            raise StartupError(f"sandbox: {exc}") from None

    def forget(self, process: cluster.Process) -> None:
        """Stop following ``process`` (a test killed it on purpose), so :meth:`check_alive`
        does not report it."""
        self.processes.remove(process)

    def check_alive(self) -> None:
        """Raise :class:`StartupError` naming every process that has exited (during start-up
        or later: the live view calls it before each redraw)."""
        dead = [p for p in self.processes if not p.alive()]
        if dead:
            raise StartupError(
                "; ".join(f"{p.name} exited with {p.popen.returncode}:\n{p.tail()}" for p in dead)
            )

    def audit(self) -> list[dict[str, str]]:
        """The API server's audit records so far, as kubesim writes them: user, verb, group,
        resource, subresource, namespace, name (kubesim flushes every second; the real API
        server writes each request as it completes)."""
        if self.control_plane is not None:
            return [_audit_record(event) for event in self.control_plane.audit()]
        try:
            text = self.audit_file.read_text()
        except FileNotFoundError:
            return []
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def stop(self) -> dict[str, int]:
        """Stop every process; their exit codes by name. queuetree's own (the operator replicas
        and the webhook) stop together, then the API server they talk to (kubesim, or the
        control plane), so that none of them sees it go first."""
        clients = [process for process in self.processes if process.name != KUBESIM]
        codes = processes.stop_all(clients)
        codes.update(processes.stop_all([p for p in self.processes if p.name == KUBESIM]))
        if self.control_plane is not None:
            codes.update(self.control_plane.stop())
        return codes


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class _Replica:
    process: processes.Process
    metrics_port: int

    @property
    def metrics(self) -> str:
        """The URL of its Prometheus ``/metrics``."""
        return f"http://127.0.0.1:{self.metrics_port}/metrics"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class WebhookReplica(_Replica):
    """One webhook process of the stack, as :meth:`Stack.start_webhook` started it."""

    port: int
    """Its TLS admission port on 127.0.0.1."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class OperatorReplica(_Replica):
    """One operator process of the stack, as :meth:`Stack.start_operator` started it."""

    identity: str
    """Its Lease holder identity."""

    def leads(self) -> bool:
        return "queuetree_leader 1.0" in _http_text(self.metrics)


def _audit_record(event: dict[str, Any]) -> dict[str, str]:
    """An ``audit.k8s.io/v1`` Event in kubesim's audit record shape."""
    ref = event.get("objectRef") or {}
    return {
        "user": str((event.get("user") or {}).get("username", "")),
        "verb": str(event.get("verb", "")),
        "group": str(ref.get("apiGroup", "")),
        "resource": str(ref.get("resource", "")),
        "subresource": str(ref.get("subresource", "")),
        "namespace": str(ref.get("namespace", "")),
        "name": str(ref.get("name", "")),
    }


def write_kubeconfig(
    path: pathlib.Path, *, url: str, identity: Identity, ca_bundle: str = ""
) -> pathlib.Path:
    """A kubeconfig for ``identity`` on the sandbox API server (namespace ``default``);
    ``ca_bundle`` is the server's CA when it serves HTTPS."""
    cluster = {"server": url}
    if ca_bundle:
        cluster["certificate-authority-data"] = ca_bundle
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "queuetree-sandbox", "cluster": cluster}],
        "users": [{"name": identity.name, "user": {"token": identity.token}}],
        "contexts": [
            {
                "name": "queuetree-sandbox",
                "context": {
                    "cluster": "queuetree-sandbox",
                    "user": identity.name,
                    "namespace": "default",
                },
            }
        ],
        "current-context": "queuetree-sandbox",
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path


def kubesim_spec(options: Options, *, stack: Stack) -> dict[str, Any]:
    """The JSON document ``queuetree sandbox --serve-kubesim`` reads (see ``cli/sandbox.py``)."""
    return {
        "portFile": str(options.workdir / "kubesim.port"),
        "caFile": str(options.workdir / "kubesim-ca.b64"),
        "auditFile": str(stack.audit_file),
        "users": {
            identity.token: {"username": identity.username, "groups": list(identity.groups)}
            for identity in (ADMIN, OPERATOR, WEBHOOK)
        },
        "adminToken": ADMIN.token,
        "services": [
            {
                "namespace": NAMESPACE,
                "name": SERVICE,
                "port": 443,
                "host": "127.0.0.1",
                "targetPort": stack.webhook_port,
            }
        ],
        "nodesFiles": [str(path.resolve()) for path in options.nodes_files],
        "nodeFlags": list(options.node_flags),
    }


def _queuetree(*args: str) -> list[str]:
    return [sys.executable, "-m", "queuetree", *args]


def _http_ok(url: str, *, ca_bundle: str = "") -> bool:
    context = None
    if ca_bundle:
        context = ssl.create_default_context(cadata=base64.b64decode(ca_bundle).decode())
    try:
        with urllib.request.urlopen(url, timeout=2, context=context) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _http_text(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return str(response.read().decode())
    except (urllib.error.URLError, OSError):
        return ""


def start(options: Options) -> Stack:
    """Start the whole stack and return it ready; on any failure stop what started and raise
    :class:`StartupError` with the step and the last lines of each log."""
    if shutil.which(kubectl.KUBECTL) is None:
        raise StartupError(
            f"sandbox start-up: {kubectl.KUBECTL} is not on PATH (the sandbox installs queuetree "
            "with kubectl apply -k, as on a cluster; set QUEUETREE_KUBECTL to use another one)"
        )
    options.workdir.mkdir(parents=True, exist_ok=True)
    stack = Stack(
        options=options,
        kubeconfig=options.workdir / "kubeconfig",
        cache_dir=options.workdir / "kubecache",
        audit_file=options.workdir / "audit.jsonl",
        webhook_port=processes.free_port(),
    )
    if options.backend not in BACKENDS:
        raise StartupError(
            f"sandbox start-up: unknown backend {options.backend!r} (one of {', '.join(BACKENDS)})"
        )
    if options.autoscaler is not None and options.backend != "real":
        raise StartupError("sandbox start-up: the autoscaler (Karpenter) runs on the real backend")
    if options.peers and options.backend != "real":
        raise StartupError(
            f"sandbox start-up: --peer {options.peers[0]} runs on the real backend only "
            "(use --backend real)"
        )
    try:
        if options.backend == "real":
            _start_control_plane(stack)
            _install_real(stack)
        else:
            _start_kubesim(stack)
            _install(stack)
        _start_webhook(stack)
        _start_operator(stack)
        for peer in options.peers:
            assert stack.control_plane is not None
            cluster.start_peer(stack.control_plane, peer)
    except cluster.StartupError as exc:
        stack.stop()
        raise StartupError(f"sandbox start-up: {exc}") from None
    except BaseException:
        stack.stop()
        raise
    return stack


@contextlib.contextmanager
def running(options: Options) -> Iterator[Stack]:
    """:func:`start`, then :meth:`Stack.stop` whatever happens."""
    stack = start(options)
    try:
        yield stack
    finally:
        stack.stop()


@contextlib.contextmanager
def temporary(**overrides: Any) -> Iterator[Stack]:
    """A stack in a fresh temporary directory, removed afterwards."""
    with (
        tempfile.TemporaryDirectory(prefix="queuetree-sandbox-") as directory,
        running(Options(workdir=pathlib.Path(directory), **overrides)) as stack,
    ):
        yield stack


def _wait(stack: Stack, probe: Any, what: str) -> Any:
    def checked() -> Any:
        stack.check_alive()
        return probe()

    try:
        return kubectl.poll(checked, timeout=stack.options.startup_timeout, what=what)
    except TimeoutError as exc:
        logs = "\n".join(f"--- {p.name} ({p.log}):\n{p.tail()}" for p in stack.processes)
        raise StartupError(f"sandbox start-up: {exc}\n{logs}") from exc


def _start_kubesim(stack: Stack) -> None:
    options = stack.options
    spec = options.workdir / "kubesim.json"
    port_file = options.workdir / "kubesim.port"
    port_file.unlink(missing_ok=True)
    (options.workdir / "kubesim-ca.b64").unlink(missing_ok=True)
    spec.write_text(json.dumps(kubesim_spec(options, stack=stack), indent=2))
    stack.cache_dir.mkdir(exist_ok=True)
    stack.processes.append(
        processes.spawn(
            KUBESIM,
            _queuetree("sandbox", f"--serve-kubesim={spec}"),
            workdir=options.workdir,
            env=dict(os.environ),
        )
    )
    port = _wait(
        stack,
        lambda: port_file.read_text().strip() if port_file.exists() else None,
        "kubesim writes its port file",
    )
    # kubesim writes its CA before its port file.
    stack.ca_bundle = (options.workdir / "kubesim-ca.b64").read_text().strip()
    stack.url = f"https://127.0.0.1:{port}"
    write_kubeconfig(stack.kubeconfig, url=stack.url, identity=ADMIN, ca_bundle=stack.ca_bundle)
    for identity in (OPERATOR, WEBHOOK):
        write_kubeconfig(
            options.workdir / f"{identity.name}.kubeconfig",
            url=stack.url,
            identity=identity,
            ca_bundle=stack.ca_bundle,
        )
    _wait(
        stack,
        lambda: _http_ok(f"{stack.url}/readyz", ca_bundle=stack.ca_bundle),
        "kubesim answers /readyz",
    )


def _install(stack: Stack, kustomization: pathlib.Path | None = None) -> None:
    """``kubectl apply --server-side -k`` the overlay (or a kustomization built on it), then
    wait for the CRDs."""
    client = stack.kubectl
    target = kustomization or stack.options.overlay
    applied = client.run("apply", "--server-side", "-k", str(target))
    if not applied.ok:
        raise StartupError(f"sandbox start-up: applying the overlay failed:\n{applied.describe()}")
    _wait(
        stack,
        lambda: client.run("wait", "--for=condition=Established", *CRDS, "--timeout=5s").ok,
        "the CRDs are Established",
    )


def _start_control_plane(stack: Stack) -> None:
    options = stack.options
    try:
        stack.control_plane = cluster.start(
            cluster.Options(
                workdir=options.workdir / "controlplane",
                nodes_files=tuple(path.resolve() for path in options.nodes_files),
                node_flags=options.node_flags,
                startup_timeout=options.startup_timeout,
                karpenter=options.autoscaler,
            ),
            log=lambda line: print(line, file=sys.stderr, flush=True),
        )
    except cluster.StartupError as exc:
        raise StartupError(f"sandbox start-up: the real control plane: {exc}") from None
    stack.url = stack.control_plane.url
    stack.kubeconfig = stack.control_plane.kubeconfig
    stack.cache_dir.mkdir(exist_ok=True)


def url_patches(documents: Sequence[dict[str, Any]], *, port: int) -> list[dict[str, Any]]:
    """Kustomize patches that point every webhook of ``documents`` (the rendered overlay) that
    names a Service at ``https://127.0.0.1:PORT`` plus its path, as a webhook run outside the
    cluster is registered."""
    patches: list[dict[str, Any]] = []
    for document in documents:
        kind = document.get("kind", "")
        if kind not in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            continue
        operations = []
        for index, webhook in enumerate(document.get("webhooks") or []):
            service = (webhook.get("clientConfig") or {}).get("service")
            if service is None:
                continue
            operations.append(
                {
                    "op": "replace",
                    "path": f"/webhooks/{index}/clientConfig",
                    "value": {"url": f"https://127.0.0.1:{port}{service.get('path', '/')}"},
                }
            )
        if operations:
            patches.append(
                {
                    "target": {"kind": kind, "name": bodies.name_of(document)},
                    "patch": yaml.safe_dump(operations, sort_keys=False),
                }
            )
    return patches


def _install_real(stack: Stack) -> None:
    """The overlay through a kustomization that registers the local webhook by URL; then a
    token of each component's ServiceAccount in its kubeconfig."""
    assert stack.control_plane is not None
    options = stack.options
    rendered = stack.kubectl.run("kustomize", str(options.overlay))
    if not rendered.ok:
        raise StartupError(
            f"sandbox start-up: rendering the overlay failed:\n{rendered.describe()}"
        )
    documents = [d for d in yaml.safe_load_all(rendered.stdout) if d]
    directory = options.workdir / "install"
    directory.mkdir(parents=True, exist_ok=True)
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        # kustomize takes no absolute paths; a relative one may leave the directory.
        "resources": [os.path.relpath(options.overlay.resolve(), directory.resolve())],
        "patches": url_patches(documents, port=stack.webhook_port),
    }
    (directory / "kustomization.yaml").write_text(yaml.safe_dump(kustomization, sort_keys=False))
    _install(stack, directory)
    for identity in (OPERATOR, WEBHOOK):
        account = identity.username.rsplit(":", 1)[1]
        token = stack.kubectl.run(
            "create", "token", account, "-n", NAMESPACE, f"--duration={TOKEN_DURATION}"
        )
        if not token.ok:
            raise StartupError(
                f"sandbox start-up: a token for ServiceAccount {NAMESPACE}/{account}:\n"
                + token.describe()
            )
        stack.control_plane.write_kubeconfig(
            options.workdir / f"{identity.name}.kubeconfig",
            user=identity.username,
            credentials={"token": token.stdout.strip()},
        )


def _start_webhook(stack: Stack) -> None:
    replica = stack.start_webhook("webhook", port=stack.webhook_port)
    stack.webhook_metrics_port = replica.metrics_port
    stack.webhook_metrics = replica.metrics
    client = stack.kubectl

    def ca_bundles() -> bool:
        for configuration in WEBHOOK_CONFIGURATIONS:
            result = client.run(
                "get", configuration, "-o", "jsonpath={.webhooks[*].clientConfig.caBundle}"
            )
            bundles = result.stdout.split()
            if not result.ok or not bundles or len(set(bundles)) != 1:
                return False
        return True

    _wait(stack, ca_bundles, "the webhook writes its CA into both webhook configurations")


def _spawn_webhook(stack: Stack, name: str, *, port: int, metrics_port: int) -> processes.Process:
    options = stack.options
    return processes.spawn(
        name,
        _queuetree(
            "webhook",
            f"--port={port}",
            "--bind-address=127.0.0.1",
            "--cert-mode=self-managed",
            f"--secret-name={SECRET}",
            f"--service-name={SERVICE}",
            f"--namespace={NAMESPACE}",
            f"--metrics-port={metrics_port}",
            "--cert-check-interval=2",
            # The API server calls it by address, not through a Service's endpoints, so
            # after SIGTERM there is no caller to wait for (the default waits 5 s).
            "--shutdown-delay=0",
            *(("--cert-extra-sans=127.0.0.1",) if options.backend == "real" else ()),
            f"--kubeconfig={options.workdir / 'queuetree-webhook.kubeconfig'}",
            *options.webhook_flags,
        ),
        workdir=options.workdir,
        env={**os.environ, "POD_NAMESPACE": NAMESPACE},
    )


def _start_operator(stack: Stack) -> None:
    # The scheduler configuration as a cluster holds it (the Deployment's ConfigMap), so that
    # `kubectl queuetree` decides with the operator's configuration here too.
    configmap = bodies.config_map(
        "queuetree-scheduler-config",
        NAMESPACE,
        data={"scheduler.conf": stack.options.scheduler_config.read_text()},
        labels={"app.kubernetes.io/part-of": "queuetree"},
    )
    applied = stack.kubectl.apply([configmap])
    if not applied.ok:
        raise StartupError(f"sandbox start-up: {applied.describe()}")
    replica = stack.start_operator("operator", lead=True)
    stack.operator_metrics_port = replica.metrics_port
    _wait(
        stack,
        lambda: stack.kubectl.run("get", "queue", "root", "default", "-o", "name").ok,
        "the operator creates the root and default queues",
    )
