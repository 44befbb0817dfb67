"""Reading a live cluster for ``kubectl queuetree``: kubectl itself, with the user's kubeconfig.

The plugin lists with the ``kubectl`` on PATH (``QUEUETREE_KUBECTL`` names another), so it
reads with exactly the user's kubeconfig, context, credentials (exec plugins included) and RBAC:
what the user may not list, the plugin cannot show, and it says which permission is missing.
One ``kubectl get queues,podgroups,pods,nodes,namespaces -A -o json`` gives the whole picture.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from typing import Any

from queuetree.api import bodies, listings, schedconf

KUBECTL = os.environ.get("QUEUETREE_KUBECTL", "kubectl")
LISTED = "queues.scheduling.volcano.sh,podgroups.scheduling.volcano.sh,pods,nodes,namespaces"
"""What one listing reads (full names: another API group's ``queues`` cannot be taken)."""
CONFIG_NAMESPACE = "queuetree-system"
CONFIG_LABEL = "app.kubernetes.io/part-of=queuetree"
CONFIG_KEY = "scheduler.conf"
VIEWER_ROLE = "queuetree-viewer"
"""The read-only ClusterRole shipped for the plugin (manifests/base/cluster/rbac-viewer.yaml)."""


class ReadError(Exception):
    """kubectl failed; the message says what was asked, what kubectl said and what to do."""


@dataclasses.dataclass(frozen=True, slots=True)
class Cluster:
    """kubectl with the global flags the user gave the plugin."""

    kubeconfig: str | None = None
    context: str | None = None
    request_timeout: str = "30s"
    executable: str = KUBECTL

    def run(self, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        command = [self.executable, f"--request-timeout={self.request_timeout}"]
        if self.kubeconfig:
            command.append(f"--kubeconfig={self.kubeconfig}")
        if self.context:
            command.append(f"--context={self.context}")
        try:
            return subprocess.run(
                [*command, *args], input=input, capture_output=True, text=True, check=False
            )
        except FileNotFoundError:
            raise ReadError(
                f"{self.executable} is not on PATH: kubectl queuetree runs kubectl to read the "
                "cluster (set QUEUETREE_KUBECTL to use another binary)"
            ) from None

    def get_json(self, *args: str) -> Any:
        done = self.run("get", *args, "-o", "json")
        if done.returncode != 0:
            raise ReadError(_explain_failure(f"kubectl get {' '.join(args)}", done.stderr))
        return json.loads(done.stdout)

    def listing(self) -> listings.Listing:
        """Queues, pod groups, pods, nodes and namespaces of the whole cluster."""
        return listings.read_listing(listings.items_of(self.get_json(LISTED, "--all-namespaces")))

    def namespace(self) -> str:
        """The namespace of the current context, as kubectl would use it ("default")."""
        done = self.run("config", "view", "--minify", "-o", "jsonpath={..namespace}")
        return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else "default"

    def scheduler_config(self) -> tuple[schedconf.ParsedConfiguration, str]:
        """The operator's scheduler configuration (its ConfigMap in queuetree-system) and
        where it came from; the built-in one, saying why, when it cannot be read."""
        done = self.run(
            "get", "configmaps", "-n", CONFIG_NAMESPACE, "-l", CONFIG_LABEL, "-o", "json"
        )
        if done.returncode == 0:
            for item in listings.items_of(json.loads(done.stdout)):
                data = item.get("data")
                if isinstance(data, Mapping) and isinstance(data.get(CONFIG_KEY), str):
                    name = str(bodies.metadata_of(item).get("name", ""))
                    try:
                        parsed = schedconf.parse_configuration(data[CONFIG_KEY], source=name)
                    except schedconf.ConfigurationError as error:
                        return schedconf.parse_default(), (
                            f"the built-in configuration (ConfigMap {CONFIG_NAMESPACE}/{name} "
                            f"is not understood: {error})"
                        )
                    return parsed, f"ConfigMap {CONFIG_NAMESPACE}/{name}"
            why = f"no ConfigMap labelled {CONFIG_LABEL} in {CONFIG_NAMESPACE} holds {CONFIG_KEY}"
        else:
            why = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "kubectl failed"
        return schedconf.parse_default(), f"the built-in configuration ({why}; pass --config)"

    def patch_status(self, kind: str, name: str, patch: Mapping[str, Any]) -> str:
        done = self.run(
            "patch", kind, name, "--subresource=status", "--type=merge", "-p", json.dumps(patch)
        )
        if done.returncode != 0:
            raise ReadError(_explain_failure(f"kubectl patch {kind} {name}", done.stderr))
        return done.stdout.strip()


def _explain_failure(what: str, stderr: str) -> str:
    text = stderr.strip() or "(no output)"
    if "forbidden" in text.lower():
        text += (
            f"\nkubectl queuetree reads {LISTED} in every namespace: ask your administrator "
            f"to bind the ClusterRole {VIEWER_ROLE} to you (kubectl create clusterrolebinding "
            f"NAME --clusterrole={VIEWER_ROLE} --user=YOU)"
        )
    return f"{what} failed: {text}"


def add_flags(parser: Any, names: Sequence[str] = ("--kubeconfig", "--context")) -> None:
    """The kubectl global flags the plugin passes on (kubectl gives plugins none of its own)."""
    for name in names:
        parser.add_argument(name, default=None, metavar=name.strip("-").upper())
    parser.add_argument(
        "--request-timeout",
        default="30s",
        metavar="DURATION",
        help="per kubectl request (default 30s)",
    )
