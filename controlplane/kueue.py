"""Kueue beside queuetree on the real control plane: the peer it is compared with (issue 32).

Kueue v0.17.0 (``sigs.k8s.io/kueue``, ``cmd/kueue``) is built by
:data:`controlplane.building.KUEUE` (``make controlplane-peers``; never by ``make
controlplane`` or ``make test``) and started here when asked (:func:`start`; ``queuetree
sandbox --backend real --peer kueue``), the way its ``config/default`` kustomization installs
it minus the Deployment:

1. its CRDs, with the conversion webhooks its kustomization patches into five of them;
2. namespace :data:`NAMESPACE`, ServiceAccount :data:`SERVICE_ACCOUNT` bound to the module's
   ClusterRoles and Role (``kueue-`` prefixed, as its kustomization names them); Kueue
   authenticates with a token of that ServiceAccount, so RBAC authorizes it as on a cluster;
3. the process with a configuration file (:func:`configuration`): leader election off, health,
   metrics and webhook servers on free loopback ports, the ``batch/job`` and ``pod``
   integrations (plain pods labelled ``kueue.x-k8s.io/queue-name``);
4. its admission webhooks, registered once it answers ``/readyz``.

A local process is reached by address, not through a Service, so Kueue's internal certificate
management (which names only the Service's DNS names) is off: the harness issues the webhook
server's certificate from the control plane's CA with the SAN 127.0.0.1 and registers every
webhook (admission and conversion) by ``clientConfig.url`` with that CA, as the sandbox does for
queuetree's own. Its visibility API (an aggregated API server, ``VisibilityOnDemand``) is off:
serving it needs an APIService the API server can reach, which the comparison of pending
positions (issue 32 item 5) will add.

With internal certificate management off, Kueue v0.17.0 reads its metrics server's
certificate from a fixed path (:data:`METRICS_CERT_DIR`, where its Deployment would mount a
Secret; ``cmd/kueue/main.go``): the harness writes one there too, so starting Kueue needs
write access to it (it runs as root on the project's machines). Only the metrics server reads
it, so two runs on one machine sharing it do not interfere.

Kueue's pod, Deployment and StatefulSet webhooks leave out ``kube-system`` and
``kueue-system`` (its kustomization's patch) and here also ``queuetree-system``, so neither
system ever gates the other's pods; each scenario runs pods through one of them.
"""

from __future__ import annotations

import base64
import dataclasses
import os
import pathlib
import subprocess
from collections.abc import Callable, Mapping
from typing import Any

import yaml

from controlplane import building, processes

NAMESPACE = "kueue-system"
SERVICE_ACCOUNT = "kueue-controller-manager"
PREFIX = "kueue-"
"""What Kueue's ``config/default`` kustomization puts before every object's name."""
TOKEN_DURATION = "720h"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
EXCLUDED_NAMESPACES = ("kube-system", "kueue-system", "queuetree-system")
"""Namespaces whose pods Kueue's pod, Deployment and StatefulSet webhooks never see."""
NAMESPACED_WEBHOOKS = frozenset(
    {"mpod.kb.io", "mdeployment.kb.io", "mstatefulset.kb.io", "vpod.kb.io"}
    | {"vdeployment.kb.io", "vstatefulset.kb.io"}
)
"""The webhooks Kueue's kustomization gives a namespaceSelector."""
FRAMEWORKS = ("batch/job", "pod")
METRICS_CERT_DIR = pathlib.Path("/etc/kueue/metrics/certs")
"""Where Kueue v0.17.0 reads its metrics certificate when internal certificate management is
off (a constant in its ``cmd/kueue/main.go``)."""
CLIENT_CONNECTION = {"qps": 1000, "burst": 1000}
"""Kueue's client rate limit, as its maintainers tune it for throughput: v0.20 made 1000/1000
the default (#15206) after 10k-pod bursts stayed gated for minutes at the old one (#13683,
#11170); v0.17.0, built here, still defaults lower. A peer measured throttled proves
nothing (issue 32)."""
GROUP_KIND_CONCURRENCY = {
    "Job.batch": 5,
    "Pod": 5,
    "Workload.kueue.x-k8s.io": 5,
    "LocalQueue.kueue.x-k8s.io": 1,
    "Cohort.kueue.x-k8s.io": 1,
    "ClusterQueue.kueue.x-k8s.io": 1,
    "ResourceFlavor.kueue.x-k8s.io": 1,
}
"""Reconcilers per kind, as Kueue ships them (``config/components/manager/
controller_manager_config.yaml``, the Deployment's configuration): without it each runs one,
and its pod reconciler creates the Workloads of a 250-pod burst one at a time for half a
minute before it ungates any."""
CRDS = (
    "crd/clusterqueues.kueue.x-k8s.io",
    "crd/localqueues.kueue.x-k8s.io",
    "crd/resourceflavors.kueue.x-k8s.io",
    "crd/workloads.kueue.x-k8s.io",
    "crd/cohorts.kueue.x-k8s.io",
)

KubectlFn = Callable[..., "subprocess.CompletedProcess[str]"]
WaitFn = Callable[[Callable[[], Any], str], Any]
SpawnFn = Callable[..., processes.Process]


class KueueError(RuntimeError):
    """Kueue could not be set up; the message names the step."""


@dataclasses.dataclass(frozen=True, slots=True)
class Ports:
    health: int
    metrics: int
    webhook: int


@dataclasses.dataclass(slots=True)
class Kueue:
    """A running Kueue: its process and ports."""

    process: processes.Process
    ports: Ports

    @property
    def readyz_url(self) -> str:
        return f"http://127.0.0.1:{self.ports.health}/readyz"


def configuration(ports: Ports, cert_dir: pathlib.Path) -> dict[str, Any]:
    """Kueue's ``config.kueue.x-k8s.io/v1beta2`` Configuration for a local process."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": NAMESPACE,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{ports.health}"},
        "metrics": {"bindAddress": f"127.0.0.1:{ports.metrics}"},
        "webhook": {"port": ports.webhook, "host": "127.0.0.1", "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "clientConnection": dict(CLIENT_CONNECTION),
        "controller": {"groupKindConcurrency": dict(GROUP_KIND_CONCURRENCY)},
        "managedJobsNamespaceSelector": {
            "matchExpressions": [
                {
                    "key": "kubernetes.io/metadata.name",
                    "operator": "NotIn",
                    "values": list(EXCLUDED_NAMESPACES),
                }
            ]
        },
        "integrations": {"frameworks": list(FRAMEWORKS)},
    }


def _documents(path: pathlib.Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _client_config(path: str, *, port: int, ca_bundle: str) -> dict[str, Any]:
    return {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca_bundle}


def crds(built: building.Built, *, port: int, ca_bundle: str) -> list[dict[str, Any]]:
    """The module's CRDs, with the conversion webhook of :data:`building.KUEUE_FILES`'s
    patches set by URL where the kustomization sets it."""
    conversions: dict[str, dict[str, Any]] = {}
    for path in sorted((built.directory / "conversion").glob("*.yaml")):
        for patch in _documents(path):
            webhook = patch["spec"]["conversion"]["webhook"]
            service = webhook["clientConfig"]["service"]
            conversions[patch["metadata"]["name"]] = {
                "strategy": "Webhook",
                "webhook": {
                    "clientConfig": _client_config(
                        service.get("path", "/convert"), port=port, ca_bundle=ca_bundle
                    ),
                    "conversionReviewVersions": list(webhook["conversionReviewVersions"]),
                },
            }
    found = []
    for path in sorted((built.directory / "crds").glob("*.yaml")):
        for crd in _documents(path):
            conversion = conversions.get(crd["metadata"]["name"])
            if conversion is not None:
                crd["spec"]["conversion"] = conversion
            found.append(crd)
    return found


def webhook_configurations(
    built: building.Built, *, port: int, ca_bundle: str
) -> list[dict[str, Any]]:
    """The module's admission webhooks, named as its kustomization names them, called by URL,
    the namespaced ones leaving out :data:`EXCLUDED_NAMESPACES`."""
    found = []
    for document in _documents(built.directory / "webhook" / "manifests.yaml"):
        document["metadata"] = {"name": PREFIX + document["metadata"]["name"]}
        for webhook in document.get("webhooks") or []:
            service = webhook["clientConfig"]["service"]
            webhook["clientConfig"] = _client_config(
                service.get("path", "/"), port=port, ca_bundle=ca_bundle
            )
            if webhook["name"] in NAMESPACED_WEBHOOKS:
                webhook["namespaceSelector"] = {
                    "matchExpressions": [
                        {
                            "key": "kubernetes.io/metadata.name",
                            "operator": "NotIn",
                            "values": list(EXCLUDED_NAMESPACES),
                        }
                    ]
                }
        found.append(document)
    return found


def rbac_manifests(built: building.Built) -> list[dict[str, Any]]:
    """The namespace, the ServiceAccount, and the module's roles (``kueue-`` prefixed) each
    bound to it."""
    subject = {"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}
    manifests: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": SERVICE_ACCOUNT, "namespace": NAMESPACE},
        },
    ]
    for path in sorted((built.directory / "rbac").glob("*.yaml")):
        for role in _documents(path):
            kind = role["kind"]
            if kind not in ("Role", "ClusterRole"):
                continue
            metadata: dict[str, Any] = {"name": PREFIX + role["metadata"]["name"]}
            if kind == "Role":
                metadata["namespace"] = NAMESPACE
            manifests.append({**role, "metadata": metadata})
            manifests.append(
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": f"{kind}Binding",
                    "metadata": dict(metadata),
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": kind,
                        "name": metadata["name"],
                    },
                    "subjects": [subject],
                }
            )
    return manifests


def start(
    *,
    built: building.Built,
    workdir: pathlib.Path,
    ca_file: pathlib.Path,
    issue_serving_pair: Callable[[pathlib.Path], object],
    kubectl: KubectlFn,
    write_kubeconfig: Callable[[pathlib.Path, str], pathlib.Path],
    wait: WaitFn,
    spawn: SpawnFn,
) -> Kueue:
    """Install and start Kueue on a running control plane (the module docstring);
    ``issue_serving_pair(directory)`` writes ``tls.crt`` and ``tls.key`` for 127.0.0.1 signed
    by the CA of ``ca_file``."""

    def must(*args: str, input: str | None = None) -> str:
        done = kubectl(*args, input=input)
        if done.returncode != 0:
            raise KueueError(f"kueue: kubectl {' '.join(args)}: {done.stderr.strip()}")
        return str(done.stdout)

    ports = Ports(processes.free_port(), processes.free_port(), processes.free_port())
    ca_bundle = base64.b64encode(ca_file.read_bytes()).decode()
    cert_dir = workdir / "kueue-certs"
    issue_serving_pair(cert_dir)
    try:
        issue_serving_pair(METRICS_CERT_DIR)
    except OSError as exc:
        raise KueueError(
            f"kueue: its metrics certificate goes to {METRICS_CERT_DIR} (fixed in Kueue "
            f"v0.17.0 when internal certificate management is off): {exc}"
        ) from None
    apply = ("apply", "--server-side", "--force-conflicts", "-f", "-")
    must(*apply, input=yaml.safe_dump_all(crds(built, port=ports.webhook, ca_bundle=ca_bundle)))
    wait(
        lambda: (
            kubectl("wait", "--for=condition=Established", *CRDS, "--timeout=5s").returncode == 0
        ),
        "Kueue's CRDs are Established",
    )
    must(*apply, input=yaml.safe_dump_all(rbac_manifests(built)))
    token = must(
        "create", "token", SERVICE_ACCOUNT, "-n", NAMESPACE, f"--duration={TOKEN_DURATION}"
    ).strip()
    kubeconfig = write_kubeconfig(workdir / "kueue.kubeconfig", token)
    config = workdir / "kueue-config.yaml"
    config.write_text(yaml.safe_dump(configuration(ports, cert_dir), sort_keys=False))
    env: Mapping[str, str] = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    process = spawn(
        "kueue",
        built.binary("kueue"),
        f"--config={config}",
        "--feature-gates=VisibilityOnDemand=false",
        env=env,
    )
    running = Kueue(process=process, ports=ports)
    wait(lambda: processes.http_status(running.readyz_url) == 200, "Kueue answers /readyz")
    must(
        *apply,
        input=yaml.safe_dump_all(
            webhook_configurations(built, port=ports.webhook, ca_bundle=ca_bundle)
        ),
    )
    return running
