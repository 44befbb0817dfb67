"""A real control plane on free loopback ports: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and kwok, started from the cached binaries (:mod:`controlplane.building`).

:func:`start` brings it up in the order a cluster does, and returns only once it is usable:

1. the PKI (:mod:`controlplane.pki`) and one kubeconfig per client;
2. etcd, ready when ``/health`` says so;
3. kube-apiserver: secure port, Node and RBAC authorization, client-certificate
   authentication, service-account token signing, the default admission plugins, and an audit
   log of every request's user and verb (``audit.jsonl``); ready on ``/readyz``;
4. kube-controller-manager (:data:`CONTROLLERS`, each under its own service account) and
   kube-scheduler, ready on ``/healthz``;
5. kwok, which plays the kubelet of every node annotated ``kwok.x-k8s.io/node: fake``
   (kwok's own stages, and the harness's ``stages.yaml``);
6. the nodes of ``Options.nodes_files``, ready once kwok reports them Ready and the
   node-lifecycle controller has lifted the ``not-ready`` taint;
7. the ``default`` ServiceAccount of the ``default`` namespace (pods are refused before it);
8. with ``Options.karpenter``, Karpenter and its kwok cloud provider as the cluster's
   autoscaler (:mod:`controlplane.karpenter`): nodes it buys are kwok's nodes too.

Workload controllers that work with Volcano (the Kubeflow training operator, KubeRay:
:mod:`controlplane.companions`) start later, when a test asks (:func:`start_companion`).

Each wait names the step; a failure stops what started and quotes the tail of every log.
:meth:`Cluster.stop` ends the processes newest first (SIGTERM, then SIGKILL); their logs stay
in ``workdir/logs``. Processes do not outlive a crashed parent (:mod:`controlplane.processes`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import pathlib
import shutil
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import yaml

from controlplane import building, companions, karpenter, kueue, pki, processes
from kubesim import simulation

T = TypeVar("T")

HERE = pathlib.Path(__file__).resolve().parent
STAGES = HERE / "stages.yaml"
FAKE_NODE_ANNOTATION = "kwok.x-k8s.io/node"
SERVICE_CIDR = "10.96.0.0/16"
POD_CIDR = "10.244.0.0/16"
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"

CONTROLLERS = (
    "namespace-controller",
    "garbage-collector-controller",
    "disruption-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller",
    "node-lifecycle-controller",
    "taint-eviction-controller",
    "job-controller",
    "replicaset-controller",
    "deployment-controller",
    "statefulset-controller",
    "pod-garbage-collector-controller",
    "resourcequota-controller",
    "podgroup-protection-controller",
    "resourceclaim-controller",
)
"""What the product and its tests rely on: namespace deletion, ownerReference GC, PDB status
for the Eviction API, the ``default`` ServiceAccount and its tokens, nodes leaving NotReady,
Jobs, ReplicaSets and StatefulSets (workloads get PodGroups); ResourceQuota, because tenants'
namespaces have quotas too; ResourceClaims made from pods' ResourceClaimTemplates (DRA);
with :data:`WORKLOAD_GATES`, the finalizer that kube-apiserver puts on every
``scheduling.k8s.io`` PodGroup, which nothing else would lift."""

AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [{"level": "Metadata"}],
}
"""Every request's user, verb, resource and response code, once (at ResponseComplete or Panic)."""

WORKLOAD_GATES = ("GenericWorkload=true",)
"""Feature gates of kube-apiserver, kube-scheduler and kube-controller-manager alike: the
Workload API (KEP-4671), whose ``scheduling.k8s.io`` PodGroup lets kube-scheduler place an
admitted gang all or nothing (docs/gangs.md). A gate must agree across the three, or the
scheduler waits for groups the API does not serve."""
WORKLOAD_API_ENV = "QUEUETREE_WORKLOAD_API"
"""``0`` in the environment starts the control plane without :data:`WORKLOAD_GATES` (as
Kubernetes v1.37 ships: gangs placed pod by pod), unless :attr:`Options.feature_gates` says
otherwise (``QUEUETREE_WORKLOAD_API=0 make e2e-real``)."""
WORKLOAD_API = "scheduling.k8s.io/v1beta1=true"
"""kube-apiserver's ``--runtime-config``: the beta API the gate guards is not served by default."""
SCHEDULER_CLIENT = {"qps": 5000, "burst": 5000}
"""kube-scheduler's client rate limit, raised as Kubernetes' scheduler_perf raises it (5000/5000
in its util.go; kwokctl's ``--disable-qps-limits`` gives 5000/10000): at the default 50/100 the
scheduler binds about 18 pods a second here, a client-side limit and not the machine's. The API
server's priority and fairness still protects it. kwok's own client has no rate limit (it
installs an always-allow limiter)."""

SCHEDULER_PLUGINS_OFF = {"podGroupPostFilter": ("DynamicResources",)}
"""Extension points of kube-scheduler's default profile where a default plugin is turned off
(the plugin keeps every other point). v1.37.2's ``DynamicResources.PodGroupPostFilter`` reads
the pod-group state that only its own PreFilter writes; when no member of a gang reached that
PreFilter (no node at all, so ``schedulePod`` stops at ``ErrNoNodesAvailable``, or an earlier
PreFilter plugin rejected every member), the read fails with ``not found`` and the whole gang
is answered ``SchedulerError`` instead of ``Unschedulable``: a cluster autoscaler then buys
no node for it, and DefaultPreemption's PodGroupPostFilter, which runs after it, never runs.
Turned off, an unplaceable gang is ``Unschedulable``; DRA still allocates claims (PreFilter,
Filter, Reserve, PreBind) and single pods keep its PostFilter. What is lost: freeing a
gang's stale claim allocations when the gang cannot be placed (docs/gangs.md)."""

KWOK_POD_PLAY_PARALLELISM = 32
"""Pods whose stages kwok plays at once (``podPlayStageParallelism`` of its
``KwokConfiguration``; kwok v0.8.0's default is 4). At 4, kwok marked pods Running up to 16 s
after kube-scheduler had bound them when 35 pods a second were admitted, so a benchmark's
Running latency measured kwok's queue, not the system under test; each play is one status
write, and kwok's client has no rate limit, so the API server is the only bound left."""

ADMIN = "admin"
CLIENTS: dict[str, tuple[str, ...]] = {
    ADMIN: ("kubernetes-admin", "system:masters"),
    "kube-controller-manager": ("system:kube-controller-manager",),
    "kube-scheduler": ("system:kube-scheduler",),
    # kwok plays every node's kubelet with one identity; the Node authorizer would confine a
    # system:node:<name> user to its own node, so it gets what kwokctl gives it.
    "kwok": ("kwok-controller", "system:masters"),
}
"""Client certificates (file name -> common name, organizations) the PKI issues."""


Process = processes.Process
Processes = list[Process]


class StartupError(RuntimeError):
    """The control plane did not come up; the message names the step and quotes the logs."""


@dataclasses.dataclass(frozen=True, slots=True)
class Options:
    """What to start."""

    workdir: pathlib.Path
    """PKI, kubeconfigs, etcd's data, the audit log and logs/ go here."""
    nodes_files: tuple[pathlib.Path, ...] = ()
    """YAML files of Node manifests (``status.allocatable`` set); created as kwok's nodes."""
    node_flags: tuple[str, ...] = ()
    """More nodes in kubesim's ``--node`` syntax (``NAME:cpu=8,memory=32Gi,...``)."""
    startup_timeout: float = 120.0
    """Seconds each start-up step may take before the start fails."""
    controllers: tuple[str, ...] = CONTROLLERS
    apiserver_flags: tuple[str, ...] = ()
    """More kube-apiserver flags, appended last."""
    feature_gates: tuple[str, ...] = dataclasses.field(
        default_factory=lambda: () if os.environ.get(WORKLOAD_API_ENV) == "0" else WORKLOAD_GATES
    )
    """``--feature-gates`` of kube-apiserver, kube-scheduler and kube-controller-manager alike.
    By default :data:`WORKLOAD_GATES`: the Workload API, whose ``--runtime-config`` goes with
    it, so gangs are placed whole by kube-scheduler (docs/gangs.md); :data:`WORKLOAD_API_ENV`
    turns it off for a run (runtime flags only: the binaries are the same either way)."""
    karpenter: karpenter.Options | None = None
    """Start Karpenter with its kwok provider as the autoscaler (None: no autoscaler)."""


@dataclasses.dataclass(slots=True)
class Cluster:
    """A running control plane: where it is, how to reach it, and its processes."""

    options: Options
    binaries: Mapping[str, building.Built]
    files: pki.Files
    url: str = ""
    kubeconfig: pathlib.Path = pathlib.Path()
    """The administrator's kubeconfig (client certificate, ``system:masters``)."""
    audit_file: pathlib.Path = pathlib.Path()
    processes: Processes = dataclasses.field(default_factory=list)
    autoscaler: karpenter.Karpenter | None = None
    """Karpenter, when ``options.karpenter`` asked for it."""
    companions: dict[str, companions.Running] = dataclasses.field(default_factory=dict)
    """The workload controllers started on request (:func:`start_companion`), by name."""
    kueue: kueue.Kueue | None = None
    """Kueue, once :func:`start_peer` started it."""

    @property
    def kubectl_path(self) -> pathlib.Path:
        """kubectl of the control plane's own release (no version skew)."""
        return self.binaries["kubernetes"].binary("kubectl")

    @property
    def version(self) -> str:
        return self.binaries["kubernetes"].version

    def process(self, name: str) -> Process:
        for process in self.processes:
            if process.name == name:
                return process
        raise KeyError(name)

    def check_alive(self) -> None:
        """Raise :class:`StartupError` naming every process that has exited."""
        dead = [p for p in self.processes if not p.alive()]
        if dead:
            raise StartupError(
                "; ".join(f"{p.name} exited with {p.popen.returncode}:\n{p.tail()}" for p in dead)
            )

    def write_kubeconfig(
        self,
        path: pathlib.Path,
        *,
        user: str,
        credentials: Mapping[str, str],
        namespace: str = "default",
    ) -> pathlib.Path:
        """A kubeconfig for ``user`` with ``credentials`` (``{"token": ...}`` or
        ``{"client-certificate": ..., "client-key": ...}``) on this API server."""
        return write_kubeconfig(
            path,
            url=self.url,
            ca_file=self.files.ca_cert,
            user=user,
            credentials=credentials,
            namespace=namespace,
        )

    def kubectl(
        self, *args: str, input: str | None = None, timeout: float = 60.0
    ) -> subprocess.CompletedProcess[str]:
        """The admin's kubectl (the control plane's own release)."""
        return subprocess.run(
            [
                str(self.kubectl_path),
                f"--kubeconfig={self.kubeconfig}",
                "--request-timeout=10s",
                *args,
            ],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def audit(self) -> list[dict[str, Any]]:
        """The API server's audit events so far (``audit.k8s.io/v1`` Event objects)."""
        try:
            text = self.audit_file.read_text()
        except FileNotFoundError:
            return []
        events = []
        for line in text.splitlines():
            with contextlib.suppress(json.JSONDecodeError):  # the last line may be half written
                events.append(json.loads(line))
        return events

    def stop(self) -> dict[str, int]:
        """Stop every process, newest first; their exit codes by name."""
        codes = {}
        for process in reversed(self.processes):
            codes[process.name] = process.stop()
        for running in self.companions.values():
            if running.dashboard is not None:
                running.dashboard.close()
        return codes


def write_kubeconfig(
    path: pathlib.Path,
    *,
    url: str,
    ca_file: pathlib.Path,
    user: str,
    credentials: Mapping[str, str],
    namespace: str = "default",
) -> pathlib.Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "queuetree-controlplane",
                "cluster": {"server": url, "certificate-authority": str(ca_file)},
            }
        ],
        "users": [{"name": user, "user": dict(credentials)}],
        "contexts": [
            {
                "name": "queuetree-controlplane",
                "context": {
                    "cluster": "queuetree-controlplane",
                    "user": user,
                    "namespace": namespace,
                },
            }
        ],
        "current-context": "queuetree-controlplane",
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path


def _poll(
    probe: Callable[[], T | bool | None], *, timeout: float, interval: float = 0.2
) -> T | None:
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value is not None and value is not False:
            return value  # type: ignore[return-value]
        if time.monotonic() >= deadline:
            return None
        time.sleep(interval)


def _get(url: str, context: ssl.SSLContext | None = None) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=3, context=context) as response:
            return int(response.status), response.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")
    except (urllib.error.URLError, OSError) as exc:
        return 0, str(exc)


def _healthy(port: int) -> bool:
    """``/healthz`` of a component's secure port answers 200 (its serving certificate is
    self-signed, so it is not verified)."""
    insecure = ssl.create_default_context()
    insecure.check_hostname = False
    insecure.verify_mode = ssl.CERT_NONE
    return _get(f"https://127.0.0.1:{port}/healthz", insecure)[0] == 200


class _Starter:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.options = cluster.options
        self.logs = self.options.workdir / "logs"

    def wait(self, probe: Callable[[], Any], what: str, *, timeout: float | None = None) -> Any:
        def checked() -> Any:
            self.cluster.check_alive()
            return probe()

        try:
            found = _poll(checked, timeout=timeout or self.options.startup_timeout)
        except StartupError as exc:
            raise StartupError(
                f"control plane start-up: while waiting until {what}: {exc}"
            ) from None
        if found is None:
            tails = "\n".join(
                f"--- {p.name} ({p.log}):\n{p.tail()}" for p in self.cluster.processes
            )
            raise StartupError(
                f"control plane start-up: {what}: not reached within "
                f"{timeout or self.options.startup_timeout:g}s\n{tails}"
            )
        return found

    def spawn(
        self, name: str, binary: pathlib.Path, *args: str, env: Mapping[str, str] | None = None
    ) -> processes.Process:
        # SIGKILL if the harness dies: the control plane's data is thrown away anyway, and
        # kube-apiserver's graceful shutdown hangs when etcd goes at the same moment.
        process = processes.spawn(
            name,
            [str(binary), *args],
            workdir=self.options.workdir,
            env=os.environ if env is None else env,
            death_signal=signal.SIGKILL,
        )
        self.cluster.processes.append(process)
        return process

    def kubeconfig(self, name: str) -> pathlib.Path:
        files = self.cluster.files
        return self.cluster.write_kubeconfig(
            self.options.workdir / f"{name}.kubeconfig",
            user=name,
            credentials={
                "client-certificate": str(files.client_cert(name)),
                "client-key": str(files.client_key(name)),
            },
        )

    def admin_context(self) -> ssl.SSLContext:
        files = self.cluster.files
        context = ssl.create_default_context(cafile=str(files.ca_cert))
        context.load_cert_chain(str(files.client_cert(ADMIN)), str(files.client_key(ADMIN)))
        return context

    def gate_flags(self, *, runtime_config: bool = False) -> tuple[str, ...]:
        gates = self.options.feature_gates
        if not gates:
            return ()
        flags: tuple[str, ...] = (f"--feature-gates={','.join(gates)}",)
        if runtime_config and "GenericWorkload=true" in gates:
            flags += (f"--runtime-config={WORKLOAD_API}",)
        return flags

    # ------------------------------------------------------------------ the steps

    def etcd(self) -> str:
        client, peer = processes.free_port(), processes.free_port()
        url = f"http://127.0.0.1:{client}"
        peer_url = f"http://127.0.0.1:{peer}"
        self.spawn(
            "etcd",
            self.cluster.binaries["etcd"].binary("etcd"),
            "--name=node0",
            f"--data-dir={self.options.workdir / 'etcd'}",
            f"--listen-client-urls={url}",
            f"--advertise-client-urls={url}",
            f"--listen-peer-urls={peer_url}",
            f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=node0={peer_url}",
            # Test data: losing it on a crash costs nothing, and fsync dominates on slow disks.
            "--unsafe-no-fsync=true",
            "--log-level=warn",
        )
        self.wait(lambda: '"health":"true"' in _get(f"{url}/health")[1], "etcd answers /health")
        return url

    def apiserver(self, etcd_url: str) -> None:
        files = self.cluster.files
        port = processes.free_port()
        policy = self.options.workdir / "audit-policy.yaml"
        policy.write_text(yaml.safe_dump(AUDIT_POLICY))
        self.cluster.audit_file = self.options.workdir / "audit.jsonl"
        self.spawn(
            "kube-apiserver",
            self.cluster.binaries["kubernetes"].binary("kube-apiserver"),
            f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            # The endpoint reconciler refuses a loopback address for the kubernetes Service;
            # nothing here reaches the API through that Service.
            "--endpoint-reconciler-type=none",
            f"--secure-port={port}",
            f"--tls-cert-file={files.apiserver_cert}",
            f"--tls-private-key-file={files.apiserver_key}",
            f"--client-ca-file={files.ca_cert}",
            f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
            f"--service-account-key-file={files.sa_pub}",
            f"--service-account-signing-key-file={files.sa_key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--authorization-mode=Node,RBAC",
            "--allow-privileged=true",
            f"--audit-policy-file={policy}",
            f"--audit-log-path={self.cluster.audit_file}",
            "--audit-log-format=json",
            "--audit-log-mode=blocking",
            "--profiling=false",
            *self.gate_flags(runtime_config=True),
            *self.options.apiserver_flags,
        )
        self.cluster.url = f"https://127.0.0.1:{port}"
        self.cluster.kubeconfig = self.kubeconfig(ADMIN)
        context = self.admin_context()
        self.wait(
            lambda: _get(f"{self.cluster.url}/readyz", context)[0] == 200,
            "kube-apiserver answers /readyz",
        )

    def controllers(self) -> None:
        files = self.cluster.files
        for name, binary, extra in (
            (
                "kube-controller-manager",
                self.cluster.binaries["kubernetes"].binary("kube-controller-manager"),
                (
                    f"--controllers={','.join(self.options.controllers)}",
                    f"--service-account-private-key-file={files.sa_key}",
                    f"--root-ca-file={files.ca_cert}",
                    "--use-service-account-credentials=true",
                    f"--cluster-signing-cert-file={files.ca_cert}",
                    f"--cluster-signing-key-file={files.ca_key}",
                ),
            ),
            (
                "kube-scheduler",
                self.cluster.binaries["kubernetes"].binary("kube-scheduler"),
                (f"--config={self.scheduler_configuration()}",),
            ),
        ):
            kubeconfig = self.kubeconfig(name)
            port = processes.free_port()
            self.spawn(
                name,
                binary,
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                f"--cert-dir={self.options.workdir / name}",
                *self.gate_flags(),
                *extra,
            )
            self.wait(functools.partial(_healthy, port), f"{name} answers /healthz")

    def scheduler_configuration(self) -> pathlib.Path:
        """kube-scheduler's configuration file (:func:`scheduler_configuration`)."""
        path = self.options.workdir / "kube-scheduler.yaml"
        configuration = scheduler_configuration(self.options.workdir / "kube-scheduler.kubeconfig")
        path.write_text(yaml.safe_dump(configuration, sort_keys=False))
        return path

    def kwok(self) -> None:
        built = self.cluster.binaries["kwok"]
        stage_files = sorted((built.directory / "stages").glob("*.yaml"))
        config = self.options.workdir / "kwok.yaml"
        documents = [kwok_configuration()]
        documents += [yaml.safe_load(f.read_text()) for f in stage_files]
        documents += list(yaml.safe_load_all(STAGES.read_text()))
        config.write_text(yaml.safe_dump_all(documents, sort_keys=False))
        self.spawn(
            "kwok",
            built.binary("kwok"),
            f"--kubeconfig={self.kubeconfig('kwok')}",
            f"--config={config}",
            "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={FAKE_NODE_ANNOTATION}=fake",
            "--node-lease-duration-seconds=40",
            f"--cidr={POD_CIDR}",
            "--node-ip=10.0.0.1",
        )

    def nodes(self) -> list[str]:
        try:
            flagged = [simulation.parse_node_flag(flag) for flag in self.options.node_flags]
        except ValueError as exc:
            raise StartupError(f"control plane start-up: {exc}") from None
        manifests = fake_nodes(self.options.nodes_files, flagged)
        if not manifests:
            return []
        created = self.cluster.kubectl(
            "create", "-f", "-", input=yaml.safe_dump_all(manifests, sort_keys=False)
        )
        if created.returncode != 0:
            raise StartupError(
                f"control plane start-up: creating the nodes failed: {created.stderr}"
            )
        names = [m["metadata"]["name"] for m in manifests]

        def usable() -> bool:
            listed = self.cluster.kubectl("get", "nodes", "-o", "json")
            if listed.returncode != 0:
                return False
            by_name = {n["metadata"]["name"]: n for n in json.loads(listed.stdout)["items"]}
            return all(name in by_name and node_usable(by_name[name]) for name in names)

        self.wait(usable, f"the nodes {', '.join(names)} are Ready and untainted")
        return names

    def default_service_account(self) -> None:
        self.wait(
            lambda: (
                self.cluster.kubectl("get", "serviceaccount", "default", "-n", "default").returncode
                == 0
            ),
            "the default ServiceAccount exists",
        )

    def karpenter(self, options: karpenter.Options) -> None:
        cluster = self.cluster
        try:
            cluster.autoscaler = karpenter.start(
                options,
                built=cluster.binaries[building.KARPENTER.name],
                workdir=self.options.workdir,
                kubectl=cluster.kubectl,
                write_kubeconfig=lambda path, token: cluster.write_kubeconfig(
                    path,
                    user=f"system:serviceaccount:{karpenter.NAMESPACE}:karpenter",
                    credentials={"token": token},
                ),
                wait=self.wait,
                spawn=self.spawn,
            )
        except karpenter.KarpenterError as exc:
            raise StartupError(f"control plane start-up: {exc}") from None


def kwok_configuration() -> dict[str, Any]:
    """kwok's ``KwokConfiguration``, the first document of its ``--config`` file beside the
    Stages: the pods it plays at once raised to :data:`KWOK_POD_PLAY_PARALLELISM`.

    kwok v0.8.0 applies its defaults only when the file has no ``KwokConfiguration`` (a document
    it reads is taken as written: a parallelism left out would be 0, no worker), so every
    option its flags (``_Starter.kwok``) do not set carries kwok's own default here
    (``zz_generated.defaults.go`` of its ``config/v1alpha1``); its flags still override the
    file."""
    return {
        "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
        "kind": "KwokConfiguration",
        "options": {
            "podPlayStageParallelism": KWOK_POD_PLAY_PARALLELISM,
            "nodePlayStageParallelism": 4,
            "nodeLeaseParallelism": 4,
            "podsOnNodeSyncParallelism": 1,
            "enablePodsOnNodeSyncListPager": True,
            "enablePodsOnNodeSyncStreamWatch": False,
            "enableDebuggingHandlers": True,
            "enableContentionProfiling": False,
            "enableProfilingHandler": True,
        },
    }


def scheduler_configuration(kubeconfig: pathlib.Path) -> dict[str, Any]:
    """kube-scheduler's ``KubeSchedulerConfiguration``: its client at :data:`SCHEDULER_CLIENT`;
    with ``--config`` it reads its kubeconfig and leader election from the file, not from the
    flags; its one profile is the default one less :data:`SCHEDULER_PLUGINS_OFF`."""
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig), **SCHEDULER_CLIENT},
        "leaderElection": {"leaderElect": False},
        "profiles": [
            {
                "schedulerName": "default-scheduler",
                "plugins": {
                    point: {"disabled": [{"name": name} for name in names]}
                    for point, names in SCHEDULER_PLUGINS_OFF.items()
                },
            }
        ],
    }


def start_companion(cluster: Cluster, name: str) -> companions.Running:
    """Install and start the companion ``name`` (:data:`companions.BY_NAME`: the training
    operator or KubeRay) on the running ``cluster``, once; its process stops with the
    cluster's. Call it from the thread that lives as long as the cluster."""
    if name in cluster.companions:
        return cluster.companions[name]
    companion = companions.BY_NAME[name]
    starter = _Starter(cluster)
    try:
        running = companions.start(
            companion,
            built=cluster.binaries[companion.component.name],
            workdir=cluster.options.workdir,
            kubectl=cluster.kubectl,
            write_kubeconfig=lambda path, token: cluster.write_kubeconfig(
                path,
                user=f"system:serviceaccount:{companion.namespace}:{companion.service_account}",
                credentials={"token": token},
            ),
            wait=starter.wait,
            spawn=starter.spawn,
        )
    except companions.CompanionError as exc:
        raise StartupError(f"control plane: {exc}") from None
    cluster.companions[name] = running
    return running


PEERS = ("kueue",)
"""What :func:`start_peer` starts: the systems queuetree is compared with (issue 32)."""


def start_peer(cluster: Cluster, name: str) -> kueue.Kueue:
    """Start the peer ``name`` (Kueue: :mod:`controlplane.kueue`) on the running ``cluster``,
    once, building it first if the cache has none (``make controlplane-peers``); it stops with
    the cluster's processes."""
    if name not in PEERS:
        raise StartupError(f"control plane: unknown peer {name!r} (one of {', '.join(PEERS)})")
    if cluster.kueue is not None:
        return cluster.kueue
    try:
        built = building.build(building.KUEUE, log=lambda line: None)
    except building.BuildError as exc:
        raise StartupError(f"control plane: the peer {name}: {exc}") from None
    starter = _Starter(cluster)
    try:
        cluster.kueue = kueue.start(
            built=built,
            workdir=cluster.options.workdir,
            ca_file=cluster.files.ca_cert,
            issue_serving_pair=lambda directory: pki.serving_pair(
                cluster.files, directory, common_name="kueue-webhook"
            ),
            kubectl=cluster.kubectl,
            write_kubeconfig=lambda path, token: cluster.write_kubeconfig(
                path,
                user=f"system:serviceaccount:{kueue.NAMESPACE}:{kueue.SERVICE_ACCOUNT}",
                credentials={"token": token},
            ),
            wait=starter.wait,
            spawn=starter.spawn,
        )
    except kueue.KueueError as exc:
        raise StartupError(f"control plane: {exc}") from None
    return cluster.kueue


def fake_nodes(
    files: Sequence[pathlib.Path], manifests: Sequence[Mapping[str, Any]] = ()
) -> list[dict[str, Any]]:
    """The Node manifests of ``files`` (``kind: List`` or single documents) and ``manifests``
    as kwok's nodes: annotated for kwok, capacity equal to allocatable where only one is
    given, and without the fields a kubelet would own."""
    documents: list[Any] = list(manifests)
    for file in files:
        documents += list(yaml.safe_load_all(file.read_text()))
    nodes: list[dict[str, Any]] = []
    for document in documents:
        if not document:
            continue
        items = document.get("items", []) if document.get("kind") == "List" else [document]
        for item in items:
            if item.get("kind") != "Node":
                continue
            metadata = dict(item.get("metadata") or {})
            name = metadata["name"]
            annotations = {**(metadata.get("annotations") or {}), FAKE_NODE_ANNOTATION: "fake"}
            labels = {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "type": "kwok",
                **(metadata.get("labels") or {}),
            }
            status = dict(item.get("status") or {})
            allocatable = status.get("allocatable") or status.get("capacity") or {}
            capacity = status.get("capacity") or allocatable
            nodes.append(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": name, "labels": labels, "annotations": annotations},
                    "spec": dict(item.get("spec") or {}),
                    "status": {"allocatable": dict(allocatable), "capacity": dict(capacity)},
                }
            )
    return nodes


def node_usable(node: Mapping[str, Any]) -> bool:
    """Ready, and no longer carrying the taints a not-ready node gets."""
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    taints = (node.get("spec") or {}).get("taints") or []
    return ready and not any(t.get("key", "").startswith("node.kubernetes.io/") for t in taints)


def start(options: Options, *, log: Callable[[str], None] | None = None) -> Cluster:
    """Start the control plane and return it ready; on any failure stop what started and
    raise :class:`StartupError` naming the step, with the tail of every log."""
    options.workdir.mkdir(parents=True, exist_ok=True)
    try:
        binaries = building.build_all(log=log or (lambda line: None))
    except building.BuildError as exc:
        raise StartupError(f"control plane start-up: the binaries: {exc}") from None
    files = pki.write(options.workdir / "pki", clients=CLIENTS)
    cluster = Cluster(options=options, binaries=binaries, files=files)
    starter = _Starter(cluster)
    try:
        etcd_url = starter.etcd()
        starter.apiserver(etcd_url)
        starter.controllers()
        starter.kwok()
        starter.nodes()
        starter.default_service_account()
        if options.karpenter is not None:
            starter.karpenter(options.karpenter)
    except BaseException:
        cluster.stop()
        raise
    return cluster


@contextlib.contextmanager
def running(options: Options, *, log: Callable[[str], None] | None = None) -> Iterator[Cluster]:
    """:func:`start`, then :meth:`Cluster.stop` whatever happens."""
    cluster = start(options, log=log)
    try:
        yield cluster
    finally:
        cluster.stop()


def kubectl_binary() -> pathlib.Path | None:
    """The cached kubectl of the control plane's release, or None if not built."""
    found = building.find(building.KUBERNETES)
    return found.binary("kubectl") if found else None


def which_go() -> str | None:
    return shutil.which("go")
