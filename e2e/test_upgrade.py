"""Upgrade, rollback and uninstall on the real control plane, with Helm and with kustomize.

Version N is an older revision of this repository (``QUEUETREE_UPGRADE_FROM``, else the newest
tag before HEAD, else HEAD's first parent: main's parent on main), unpacked with ``git
archive``: its manifests, its CRDs and its code. Its chart is what ``hack/gen_chart.py``
writes from its manifests (older revisions have no chart of their own; the generator is the
chart's only definition). The new version is this working tree and ``charts/queuetree``.

There is no container runtime here, so the Deployments run on kwok's nodes as pods that never
start, and the operator and the webhook run as local processes of the version installed (the
older one from its own source tree, through PYTHONPATH, with this checkout's dependencies).
The API server reaches the webhook by URL (the chart's ``webhook.externalURL``; kustomize: a
patch). An upgrade is what a rolling update does in a cluster: the new webhook starts and is
ready before the configurations point at it, then the old one stops (its shutdown delay
answers what is still on the way); a standby operator of the new version starts, then the old
leader stops and the standby takes the Lease. Both versions share the webhook's Secret (one CA,
so the caBundle the API server holds stays valid across versions).

Throughout, on one control plane:

- a sampler lists the test's pods: the full queue never has more admitted than its capability,
  and no pod's admission record changes (no pod admitted twice);
- a prober creates an opted-in pod every second (and a queue at each step): every create
  succeeds, so no webhook call failed (every webhook is failurePolicy Fail for them), and
  the API server's own count of failed webhook calls stays zero;
- queues and PodGroups keep their uid and spec across every step;
- ``helm uninstall`` keeps the CRDs, the queues and the PodGroups, and pods still behind the
  gate stay gated (no operator runs); installing again admits them.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import re
import subprocess
import sys
import tarfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml

from controlplane import building, cluster, processes
from e2e import support
from queuetree.sandbox import kubectl, stack

pytestmark = pytest.mark.backends(
    "real",
    reason="helm needs a real API server (discovery, server-side apply, its release Secrets), "
    "and the test runs a control plane of its own: installing and uninstalling queuetree on "
    "the suite's cluster would take it from the other tests",
)

REPO = support.REPO
CHART = REPO / "charts" / "queuetree"
NODES = pathlib.Path(__file__).resolve().parent / "nodes.yaml"
RELEASE = "queuetree"
FULL = "upgrade-full"
"""A queue kept at its capability: two of four pods admitted, two waiting."""
OPEN = "upgrade-open"
"""A queue with room: the prober's pods, admitted by whichever operator leads."""
CPU_EACH = "500m"
CAPABILITY_MILLI = 1000
WAITING = 4
NAMESPACE = "upgrade"
ADMITTED = "scheduling.queuetree.io/admitted-queue"
NO_PODS = ("--set", "operator.replicas=0", "--set", "webhook.replicas=0")
FAILED_CALLS = re.compile(
    r'^apiserver_admission_webhook_rejection_count\{[^}]*error_type="(calling_webhook_error|'
    r'apiserver_internal_error)"[^}]*\} (\S+)$',
    re.MULTILINE,
)


def base_revision() -> str:
    explicit = os.environ.get("QUEUETREE_UPGRADE_FROM")
    if explicit:
        return explicit
    tag = subprocess.run(
        ["git", "describe", "--tags", "--abbrev=0", "HEAD^"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    return tag.stdout.strip() if tag.returncode == 0 else "HEAD^"


@dataclasses.dataclass
class Version:
    """One version of queuetree: its source tree (code, manifests) and its chart."""

    name: str
    source: pathlib.Path
    chart: pathlib.Path


def older_version(workdir: pathlib.Path) -> Version:
    revision = base_revision()
    source = workdir / "old"
    source.mkdir()
    archive = subprocess.run(
        [
            "git",
            "archive",
            "--format=tar",
            revision,
            "queuetree",
            "manifests",
            "crds",
            "pyproject.toml",
        ],
        cwd=REPO,
        capture_output=True,
        check=False,
    )
    if archive.returncode != 0:
        pytest.fail(f"git archive {revision}: {archive.stderr.decode()}")
    tar = workdir / "old.tar"
    tar.write_bytes(archive.stdout)
    with tarfile.open(tar) as unpacked:
        unpacked.extractall(source, filter="data")
    chart = workdir / "chart-old"
    generated = subprocess.run(
        [
            sys.executable,
            str(REPO / "hack" / "gen_chart.py"),
            "--manifests",
            str(source / "manifests"),
            "--out",
            str(chart),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert generated.returncode == 0, generated.stderr
    return Version(f"{revision}", source, chart)


class Helm:
    def __init__(self, binary: pathlib.Path, kubeconfig: pathlib.Path, home: pathlib.Path) -> None:
        self.binary = binary
        self.env = {
            **os.environ,
            "KUBECONFIG": str(kubeconfig),
            "HELM_CACHE_HOME": str(home / "cache"),
            "HELM_CONFIG_HOME": str(home / "config"),
            "HELM_DATA_HOME": str(home / "data"),
        }

    def __call__(self, *args: str) -> str:
        done = subprocess.run(
            [str(self.binary), *args, "--namespace", "default"],
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        assert done.returncode == 0, f"helm {' '.join(args)}:\n{done.stdout}{done.stderr}"
        return done.stdout


@dataclasses.dataclass
class Processes:
    """The local webhook and operator of the version installed, on one control plane."""

    control_plane: cluster.Cluster
    client: kubectl.Kubectl
    workdir: pathlib.Path
    webhook: processes.Process | None = None
    webhook_port: int = 0
    operator: processes.Process | None = None
    operator_metrics: int = 0
    started: int = 0

    def kubeconfigs(self) -> None:
        """Tokens of the two ServiceAccounts the installation created (their RBAC applies)."""
        for account in ("queuetree-operator", "queuetree-webhook"):
            token = self.client.check(
                "create", "token", account, "-n", stack.NAMESPACE, "--duration=1h"
            )
            self.control_plane.write_kubeconfig(
                self.workdir / f"{account}.kubeconfig",
                user=f"system:serviceaccount:{stack.NAMESPACE}:{account}",
                credentials={"token": token.stdout.strip()},
            )

    def _spawn(
        self, name: str, version: Version | None, *args: str, env: dict[str, str] | None = None
    ) -> processes.Process:
        env = {**os.environ, "POD_NAMESPACE": stack.NAMESPACE, **(env or {})}
        if version is not None:
            # The older version's own code first; -P: not the checkout in the current directory.
            env["PYTHONPATH"] = str(version.source)
        self.started += 1
        return processes.spawn(
            f"{name}-{self.started}",
            [sys.executable, "-P", "-m", "queuetree", *args],
            workdir=self.workdir,
            env=env,
        )

    def start_webhook(
        self, version: Version | None, port: int = 0
    ) -> tuple[processes.Process, int]:
        port, metrics = port or processes.free_port(), processes.free_port()
        process = self._spawn(
            "webhook",
            version,
            "webhook",
            f"--port={port}",
            "--bind-address=127.0.0.1",
            "--cert-mode=self-managed",
            f"--secret-name={stack.SECRET}",
            f"--service-name={stack.SERVICE}",
            f"--namespace={stack.NAMESPACE}",
            f"--metrics-port={metrics}",
            "--cert-check-interval=2",
            # What a Service's endpoints give a terminating pod: calls on their way are answered.
            "--shutdown-delay=2",
            "--cert-extra-sans=127.0.0.1",
            f"--kubeconfig={self.workdir / 'queuetree-webhook.kubeconfig'}",
        )
        support.eventually(
            lambda: process.alive() and _http_ok(f"http://127.0.0.1:{metrics}/readyz"),
            what=f"webhook {process.name} is ready",
            diagnose=process.tail,
        )
        return process, port

    def start_operator(
        self, version: Version | None, *, lead: bool
    ) -> tuple[processes.Process, int]:
        metrics, health = processes.free_port(), processes.free_port()
        source = version.source if version else REPO
        process = self._spawn(
            "operator",
            version,
            "operator",
            f"--config={source / 'manifests/base/workloads/scheduler.conf'}",
            "--leader-elect=true",
            f"--leader-election-namespace={stack.NAMESPACE}",
            f"--identity=queuetree-operator-{self.started + 1}",
            f"--metrics-port={metrics}",
            f"--health-port={health}",
            "--schedule-period=0.5",
            env={"KUBECONFIG": str(self.workdir / "queuetree-operator.kubeconfig")},
        )
        wanted = "queuetree_leader 1.0" if lead else "queuetree_leader"
        support.eventually(
            lambda: process.alive() and wanted in _http_text(f"http://127.0.0.1:{metrics}/metrics"),
            what=f"operator {process.name} {'leads' if lead else 'serves'}",
            deadline=90,
            diagnose=process.tail,
        )
        return process, metrics

    def install(self, version: Version | None, port: int) -> None:
        """The first processes of an installation: the webhook on ``port`` (the caBundles
        filled), then the operator leading."""
        self.kubeconfigs()
        self.webhook, self.webhook_port = self.start_webhook(version, port)
        support.eventually(self.ca_bundles_set, what="the webhook writes both caBundles")
        self.operator, self.operator_metrics = self.start_operator(version, lead=True)

    def ca_bundles_set(self) -> bool:
        for configuration in stack.WEBHOOK_CONFIGURATIONS:
            found = self.client.run(
                "get", configuration, "-o", "jsonpath={.webhooks[*].clientConfig.caBundle}"
            )
            if not found.ok or len(set(found.stdout.split())) != 1:
                return False
        return True

    def roll(
        self, version: Version | None, point_at: Callable[[int], object], port: int = 0
    ) -> None:
        """A rolling update to ``version``: a new webhook (on ``port``, else a free one),
        ``point_at(port)`` moves the API server to it, the old one stops; then a standby
        operator, the old leader stops, the standby leads."""
        old_webhook = self.webhook
        self.webhook, self.webhook_port = self.start_webhook(version, port)
        point_at(self.webhook_port)
        if old_webhook is not None:
            old_webhook.stop()
        old_operator = self.operator
        self.operator, self.operator_metrics = self.start_operator(version, lead=False)
        if old_operator is not None:
            old_operator.stop()
        operator = self.operator
        support.eventually(
            lambda: (
                "queuetree_leader 1.0"
                in _http_text(f"http://127.0.0.1:{self.operator_metrics}/metrics")
            ),
            what=f"operator {operator.name} takes the Lease over",
            deadline=90,
            diagnose=operator.tail,
        )

    def stop(self) -> None:
        for process in (self.operator, self.webhook):
            if process is not None and process.alive():
                process.stop()
        self.operator = self.webhook = None


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _http_text(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return str(response.read().decode())
    except (urllib.error.URLError, OSError):
        return ""


def _milli(quantity: str) -> int:
    return int(quantity[:-1]) if quantity.endswith("m") else int(float(quantity) * 1000)


class Sampler(threading.Thread):
    """Lists the test's pods until stopped: the most CPU admitted at once to ``FULL``, and
    every pod whose admission record changed (admitted twice)."""

    def __init__(self, client: kubectl.Kubectl) -> None:
        super().__init__(name="upgrade sampler", daemon=True)
        self.client = client
        self.stopped = threading.Event()
        self.worst = 0
        self.samples = 0
        self.records: dict[str, str] = {}
        """Pod uid -> the admission record first seen."""
        self.readmitted: list[str] = []

    def run(self) -> None:
        while not self.stopped.is_set():
            listed = self.client.run("get", "pods", "-n", NAMESPACE, "-o", "json")
            if listed.ok:
                self.sample(json.loads(listed.stdout)["items"])
            self.stopped.wait(0.2)

    def sample(self, pods: list[dict[str, Any]]) -> None:
        admitted = 0
        for pod in pods:
            metadata, spec = pod["metadata"], pod["spec"]
            record = (metadata.get("annotations") or {}).get(ADMITTED, "")
            uid = metadata["uid"]
            if record and self.records.setdefault(uid, record) != record:
                self.readmitted.append(f"{metadata['name']}: {self.records[uid]} -> {record}")
            gated = any(g["name"] == support.GATE for g in spec.get("schedulingGates") or [])
            finished = (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
            if record == FULL and not gated and not finished:
                admitted += sum(
                    _milli(c["resources"]["requests"]["cpu"]) for c in spec["containers"]
                )
        self.worst = max(self.worst, admitted)
        self.samples += 1


class Prober(threading.Thread):
    """Creates an opted-in pod in ``OPEN`` every second until stopped; every failed create is
    kept (with failurePolicy Fail, a webhook that cannot answer fails the create)."""

    def __init__(self, client: kubectl.Kubectl, prefix: str) -> None:
        super().__init__(name="upgrade prober", daemon=True)
        self.client = client
        self.prefix = prefix
        self.stopped = threading.Event()
        self.created = 0
        self.failures: list[str] = []

    def run(self) -> None:
        while not self.stopped.is_set():
            name = f"{self.prefix}-{self.created + len(self.failures)}"
            manifest = support.pod(
                name, namespace=NAMESPACE, queue=OPEN, requests={"cpu": "10m", "memory": "16Mi"}
            )
            done = self.client.run("create", "-f", "-", input=json.dumps(manifest))
            if done.ok:
                self.created += 1
            else:
                self.failures.append(f"{name}: {done.stderr.strip()}")
            self.stopped.wait(1.0)


@dataclasses.dataclass(frozen=True)
class Kept:
    """What must survive every step: the uid and spec of the queues and the PodGroup."""

    objects: dict[str, tuple[str, str]]

    @classmethod
    def read(cls, client: kubectl.Kubectl) -> Kept:
        found = {}
        for resource, args in (("queues", ()), (support.PODGROUP, ("-n", NAMESPACE))):
            for item in client.items(resource, *args):
                if item["metadata"]["name"].startswith(("upgrade", "step-")):
                    key = f"{resource}/{item['metadata']['name']}"
                    found[key] = (item["metadata"]["uid"], json.dumps(item["spec"], sort_keys=True))
        return cls(found)


def failed_webhook_calls(client: kubectl.Kubectl) -> float:
    """The API server's own count of webhook calls that failed (not denials)."""
    metrics = client.check("get", "--raw", "/metrics").stdout
    return sum(float(value) for _, value in FAILED_CALLS.findall(metrics))


def pod_state(client: kubectl.Kubectl) -> dict[str, str]:
    """The FULL queue's pods: admitted (with their record) or gated."""
    states = {}
    for pod in client.items("pods", "-n", NAMESPACE):
        name = pod["metadata"]["name"]
        if not name.startswith("full-"):
            continue
        gated = any(g["name"] == support.GATE for g in pod["spec"].get("schedulingGates") or [])
        states[name] = "gated" if gated else "admitted"
    return states


@pytest.fixture
def control_plane(tmp_path: pathlib.Path) -> Iterator[cluster.Cluster]:
    with cluster.running(
        cluster.Options(workdir=tmp_path / "controlplane", nodes_files=(NODES,))
    ) as running:
        yield running


def helm_binary() -> pathlib.Path:
    found = building.find(building.HELM)
    if found is None:
        pytest.fail(
            "helm is not built: run make controlplane (it builds helm with the control plane)"
        )
    return found.binary("helm")


def test_helm_and_kustomize_upgrade_rollback_and_uninstall_keep_queues_and_admissions(
    control_plane: cluster.Cluster, tmp_path: pathlib.Path
) -> None:
    started = time.monotonic()
    timings: dict[str, float] = {}
    client = kubectl.Kubectl(str(control_plane.kubeconfig), str(tmp_path / "kubecache"))
    old = older_version(tmp_path)
    helm = Helm(helm_binary(), control_plane.kubeconfig, tmp_path / "helm")
    local = Processes(control_plane, client, tmp_path)
    url = lambda port: f"webhook.externalURL=https://127.0.0.1:{port}"  # noqa: E731

    def step(name: str) -> None:
        timings[name] = round(time.monotonic() - started, 1)

    # 1. Version N with helm, its processes, a full queue, a queue with room and a PodGroup.
    port = processes.free_port()
    # No container runtime: the Deployments run no pods (the processes are local), and
    # helm uninstall then does not wait 30 s for kwok to end their grace period.
    helm("install", RELEASE, str(old.chart), "--set", url(port), *NO_PODS)
    local.install(old, port)
    step("installed N")
    client.check("create", "namespace", NAMESPACE)
    must(
        client.apply(
            [
                support.queue(FULL, capability={"cpu": f"{CAPABILITY_MILLI}m"}),
                support.queue(OPEN, capability={"cpu": "100"}),
                support.pod_group("upgrade-group", namespace=NAMESPACE, queue=OPEN, min_member=0),
            ]
        )
    )
    must(
        client.apply(
            [
                support.pod(
                    f"full-{n}",
                    namespace=NAMESPACE,
                    queue=FULL,
                    requests={"cpu": CPU_EACH, "memory": "16Mi"},
                )
                for n in range(WAITING)
            ]
        )
    )
    support.eventually(
        lambda: sorted(pod_state(client).values()) == ["admitted", "admitted", "gated", "gated"],
        what="two pods admitted to the full queue, two waiting",
        diagnose=lambda: str(pod_state(client)),
    )
    before = pod_state(client)
    kept = Kept.read(client)
    sampler, prober = Sampler(client), Prober(client, "probe-helm")
    sampler.start()
    prober.start()
    steps = 0

    def check(after: str) -> None:
        nonlocal steps
        steps += 1
        # A queue created at each step: the queue webhooks answer too.
        must(client.apply([support.queue(f"step-{steps}", parent="root")]))
        assert (
            Kept.read(client).objects.items() >= kept.objects.items(),
            pod_state(client),
            sampler.readmitted,
            prober.failures,
            sampler.worst <= CAPABILITY_MILLI,
        ) == (True, before, [], [], True), after
        step(after)

    try:
        # 2. helm upgrade to this working tree, its processes rolled.
        local.roll(None, lambda p: helm("upgrade", RELEASE, str(CHART), "--set", url(p), *NO_PODS))
        check("helm upgrade to the working tree")
        # 3. helm rollback to N (revision 1), its processes rolled back.
        # Revision 1's values name the first webhook's port: the rolled-back one listens there.
        local.roll(old, lambda _: helm("rollback", RELEASE, "1"), port)
        check("helm rollback to N")
        # 4. helm uninstall: the CRDs, queues and PodGroups stay; waiting pods stay gated.
        prober.stopped.set()
        prober.join(10)
        helm("uninstall", RELEASE)
        local.stop()
        support.eventually(
            lambda: not client.run("get", "namespace", stack.NAMESPACE).ok,
            what="helm uninstall removes queuetree-system",
            deadline=120,
        )
        assert (
            Kept.read(client).objects.items() >= kept.objects.items(),
            pod_state(client),
            client.run("get", *stack.WEBHOOK_CONFIGURATIONS).ok,
        ) == (True, before, False)
        step("helm uninstall")
        # 5. kustomize: N, then kubectl apply -k of the working tree over it.
        install_kustomize(
            client, tmp_path / "kustomize-old", old.source / "manifests/overlays/default", port
        )
        local.install(old, port)
        prober = Prober(client, "probe-kustomize")
        prober.start()
        check("kubectl apply -k of N after the uninstall")
        local.roll(
            None,
            lambda p: install_kustomize(
                client, tmp_path / "kustomize-new", REPO / "manifests/overlays/default", p
            ),
        )
        check("kubectl apply -k of the working tree")
        # 6. The new operator admits: a full queue's pod goes, a waiting one takes its room.
        client.check("delete", "pod", "-n", NAMESPACE, "full-0", "--wait=false")
        support.eventually(
            lambda: sorted(pod_state(client).values()) == ["admitted", "admitted", "gated"],
            what="a waiting pod is admitted to the room a deleted one left",
            diagnose=lambda: str(pod_state(client)),
        )
    finally:
        prober.stopped.set()
        sampler.stopped.set()
        prober.join(10)
        sampler.join(10)
        local.stop()
    failed = failed_webhook_calls(client)
    print(
        f"upgrade test: N={old.name}; steps at seconds {timings}; {sampler.samples} samples, "
        f"{prober.created} probe pods created, {failed:g} failed webhook calls"
    )
    assert (failed, sampler.worst <= CAPABILITY_MILLI, sampler.readmitted) == (0, True, [])


def must(result: kubectl.Result) -> kubectl.Result:
    assert result.ok, result.describe()
    return result


def install_kustomize(
    client: kubectl.Kubectl, directory: pathlib.Path, overlay: pathlib.Path, port: int
) -> None:
    """``kubectl apply --server-side -k`` of ``overlay`` with the webhooks at the local port."""
    rendered = client.check("kustomize", str(overlay))
    documents = [d for d in yaml.safe_load_all(rendered.stdout) if d]
    directory.mkdir(parents=True, exist_ok=True)
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [os.path.relpath(overlay.resolve(), directory.resolve())],
        "patches": stack.url_patches(documents, port=port),
    }
    (directory / "kustomization.yaml").write_text(yaml.safe_dump(kustomization, sort_keys=False))
    client.check("apply", "--server-side", "--force-conflicts", "-k", str(directory))
    support.eventually(
        lambda: client.run("wait", "--for=condition=Established", *stack.CRDS, "--timeout=5s").ok,
        what="the CRDs are Established",
    )
