"""The sandbox stack: kubesim, the webhook over TLS and the operator, as local processes.

One implementation for ``queuetree sandbox`` and the e2e suite. :func:`start` brings the stack
up in the order a cluster installation follows, and returns only once it is usable:

1. kubesim (``queuetree sandbox --serve-kubesim SPEC``: the API server with its simulated
   nodes, scheduler and kubelet), over HTTPS with a CA of its own that every kubeconfig
   carries, which maps the webhook's Service reference
   (``queuetree-webhook.queuetree-system.svc:443``) to the local webhook's port and knows
   one bearer token per component, so its audit log tells their calls apart (kubectl sends
   a token only over HTTPS, so the TLS is what lets a ServiceAccount's token, from
   ``kubectl create token``, make kubectl that ServiceAccount);
2. ``kubectl apply --server-side -k manifests/overlays/sandbox`` (CRDs, namespace, RBAC,
   webhook configurations), then the CRDs Established;
3. ``queuetree webhook`` in self-managed certificate mode with its own kubeconfig: ready
   once it answers ``/readyz`` and both webhook configurations carry its CA bundle;
4. ``queuetree operator`` with the Deployment's scheduler configuration, leader election
   on, its own kubeconfig: ready once it leads and the ``root`` queue exists.

:meth:`Stack.stop` ends them in the reverse order (SIGTERM, then SIGKILL after a grace
period). Every process runs in its own session, so a Ctrl-C in the terminal reaches only the
sandbox command, which then stops the children itself; on Linux each child also gets
SIGTERM if the thread that started it ends (prctl PR_SET_PDEATHSIG), so none outlives a
crashed parent: start the stack from a thread that lives as long as the stack (the main one).
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
import os
import pathlib
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from typing import Any

import yaml

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


@dataclasses.dataclass(slots=True)
class Process:
    """One child process with its log file."""

    name: str
    popen: subprocess.Popen[bytes]
    log: pathlib.Path

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self, grace: float = 15.0) -> int:
        """SIGTERM, wait up to ``grace`` seconds, then SIGKILL; the exit code."""
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    self.popen.kill()
                self.popen.wait(5)
        return int(self.popen.returncode)

    def tail(self, lines: int = 30) -> str:
        """The last lines of the log, for failure messages."""
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


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
    processes: list[Process] = dataclasses.field(default_factory=list)

    @property
    def kubectl(self) -> kubectl.Kubectl:
        return kubectl.Kubectl(str(self.kubeconfig), str(self.cache_dir))

    @property
    def env(self) -> dict[str, str]:
        """The environment for clients of the sandbox (KUBECONFIG and KUBECACHEDIR set)."""
        return self.kubectl.env

    def check_alive(self) -> None:
        """Raise :class:`StartupError` naming every process that has exited (during start-up
        or later: the live view calls it before each redraw)."""
        dead = [p for p in self.processes if not p.alive()]
        if dead:
            raise StartupError(
                "; ".join(f"{p.name} exited with {p.popen.returncode}:\n{p.tail()}" for p in dead)
            )

    def audit(self) -> list[dict[str, str]]:
        """kubesim's audit records so far (flushed every second, and when kubesim stops)."""
        try:
            text = self.audit_file.read_text()
        except FileNotFoundError:
            return []
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def stop(self) -> dict[str, int]:
        """Stop every process, newest first; their exit codes by name."""
        codes = {}
        for process in reversed(self.processes):
            codes[process.name] = process.stop()
        return codes


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


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


def _preexec() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Ask Linux to SIGTERM this child when its parent dies (no orphans after a crash)."""
    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM)


def spawn(
    name: str, command: Sequence[str], *, workdir: pathlib.Path, env: dict[str, str]
) -> Process:
    """Start ``command`` in its own session, output to ``workdir/logs/<name>.log``."""
    logs = workdir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"{name}.log"
    with log.open("ab") as out:
        popen = subprocess.Popen(
            list(command),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            preexec_fn=_preexec,  # only prctl: safe between fork and exec
        )
    return Process(name=name, popen=popen, log=log)


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
        webhook_port=free_port(),
    )
    try:
        _start_kubesim(stack)
        _install(stack)
        _start_webhook(stack)
        _start_operator(stack)
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
        spawn(
            "kubesim",
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


def _install(stack: Stack) -> None:
    client = stack.kubectl
    applied = client.run("apply", "--server-side", "-k", str(stack.options.overlay))
    if not applied.ok:
        raise StartupError(f"sandbox start-up: applying the overlay failed:\n{applied.describe()}")
    _wait(
        stack,
        lambda: client.run("wait", "--for=condition=Established", *CRDS, "--timeout=5s").ok,
        "the CRDs are Established",
    )


def _start_webhook(stack: Stack) -> None:
    options = stack.options
    metrics_port = free_port()
    stack.processes.append(
        spawn(
            "webhook",
            _queuetree(
                "webhook",
                f"--port={stack.webhook_port}",
                "--bind-address=127.0.0.1",
                "--cert-mode=self-managed",
                f"--secret-name={SECRET}",
                f"--service-name={SERVICE}",
                f"--namespace={NAMESPACE}",
                f"--metrics-port={metrics_port}",
                "--cert-check-interval=2",
                f"--kubeconfig={options.workdir / 'queuetree-webhook.kubeconfig'}",
                *options.webhook_flags,
            ),
            workdir=options.workdir,
            env={**os.environ, "POD_NAMESPACE": NAMESPACE},
        )
    )
    _wait(
        stack,
        lambda: _http_ok(f"http://127.0.0.1:{metrics_port}/readyz"),
        "the webhook answers /readyz",
    )
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


def _start_operator(stack: Stack) -> None:
    options = stack.options
    metrics_port, health_port = free_port(), free_port()
    env = {
        **os.environ,
        "KUBECONFIG": str(options.workdir / "queuetree-operator.kubeconfig"),
        "KUBECACHEDIR": str(stack.cache_dir),
        "POD_NAMESPACE": NAMESPACE,
        "POD_NAME": "queuetree-operator-sandbox",
    }
    stack.processes.append(
        spawn(
            "operator",
            _queuetree(
                "operator",
                f"--config={options.scheduler_config}",
                "--leader-elect=true",
                f"--leader-election-namespace={NAMESPACE}",
                f"--metrics-port={metrics_port}",
                f"--health-port={health_port}",
                f"--schedule-period={options.schedule_period}",
                *options.operator_flags,
            ),
            workdir=options.workdir,
            env=env,
        )
    )
    _wait(
        stack,
        lambda: "queuetree_leader 1.0" in _http_text(f"http://127.0.0.1:{metrics_port}/metrics"),
        "the operator leads",
    )
    _wait(
        stack,
        lambda: stack.kubectl.run("get", "queue", "root", "default", "-o", "name").ok,
        "the operator creates the root and default queues",
    )
