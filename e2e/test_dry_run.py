"""Every manifest the repository ships passes ``kubectl apply --dry-run=server``.

A server-side dry run sends each object through everything a real apply would meet: the API
server's schema and validation, defaulting, and the admission chain, queuetree's own webhooks
included. Nothing is stored. Three sets of manifests, each applied the way its docs say:

- ``crds/``: ``kubectl apply --server-side -k crds`` (docs/operations.md), and client-side;
- each overlay of ``manifests/overlays``, as ``kubectl kustomize`` renders it:
  ``kubectl apply --server-side`` (docs/operations.md), and client-side;
- every manifest file of ``examples/`` (scenario files of ``examples/sandbox`` are not
  manifests, except ``burst.yaml``): ``kubectl apply -f`` (examples/README.md), and server-side.

Any warning fails the test (a deprecated API, an unknown field, a queue webhook warning), except
kubectl's note that client-side apply adds its last-applied annotation to an object created
another way.

What the dry runs cannot do, and what the tests do instead:

- objects of kinds the cluster does not serve fail to map (the cert-manager overlay's
  ``Certificate`` and ``Issuer`` without cert-manager): left out, and only while the cluster
  serves no ``cert-manager.io``;
- a dry run creates nothing, so an object that needs another one of the same file (a queue's
  parent, a pod's namespace or PriorityClass) is refused. The examples test creates those
  first, as a user following examples/README.md does (the namespaces, the PriorityClasses,
  the queue tree), and then dry-runs every file;
- the sandbox registers the webhooks by URL (``clientConfig.url``), so a client-side apply of
  the overlays' Service references over them would ask for both and be refused: the client-side
  runs leave the two webhook configurations out on the sandbox's backends (the server-side runs
  replace the field, as the field's only manager).
"""

from __future__ import annotations

import pathlib
import re
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from e2e import support
from queuetree.sandbox import kubectl

CRDS = support.REPO / "crds"
OVERLAYS = sorted(p for p in (support.REPO / "manifests" / "overlays").iterdir() if p.is_dir())
EXAMPLES = support.REPO / "examples"
MODES = {
    "server-side apply": ("apply", "--server-side", "--dry-run=server"),
    "client-side apply": ("apply", "--dry-run=server"),
}
WEBHOOK_CONFIGURATIONS = {"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}
LAST_APPLIED_NOTE = re.compile(
    r"^Warning: resource \S+ is missing the kubectl.kubernetes.io/last-applied-configuration "
    r"annotation"
)
UNSERVED_GROUPS = ("cert-manager.io", "monitoring.coreos.com")
"""Groups of objects the overlays ship for controllers that may not be installed: cert-manager
(the ``cert-manager`` overlay's Issuer and Certificate) and the Prometheus Operator (the
``monitoring`` overlay's ServiceMonitor)."""


def example_files() -> list[pathlib.Path]:
    """The YAML files of ``examples/`` whose documents are all Kubernetes objects."""
    files = []
    for path in sorted(EXAMPLES.rglob("*.yaml")):
        objects = support.documents(path.read_text())
        if objects and all("apiVersion" in o and "kind" in o for o in objects):
            files.append(path)
    return files


def group_of(api_version: str) -> str:
    """``apps/v1`` -> ``apps``; the core group (``v1``) is ``""``."""
    return api_version.rpartition("/")[0]


def served_groups(client: kubectl.Kubectl) -> set[str]:
    result = client.run("api-versions")
    assert result.ok, result.describe()
    return {group_of(line) for line in result.stdout.split()}


def unexpected_warnings(result: kubectl.Result) -> list[str]:
    return [
        line
        for line in result.stderr.splitlines()
        if line.startswith("Warning:") and not LAST_APPLIED_NOTE.match(line)
    ]


def dry_run(
    client: kubectl.Kubectl, mode: str, objects: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    """What a dry run of ``objects`` answered, in one comparable record."""
    result = client.run(*MODES[mode], "-f", "-", input=kubectl.manifest_text(objects))
    dry_runs = [line for line in result.stdout.splitlines() if line.endswith("(server dry run)")]
    return {
        "exit code": result.returncode,
        "objects dry-run": len(dry_runs),
        "errors": [line for line in result.stderr.splitlines() if "rror" in line],
        "warnings": unexpected_warnings(result),
    }


def passed(objects: Sequence[dict[str, Any]]) -> dict[str, Any]:
    return {"exit code": 0, "objects dry-run": len(objects), "errors": [], "warnings": []}


@pytest.mark.parametrize("mode", list(MODES))
def test_the_crds_pass_a_server_dry_run(cluster: support.Cluster, mode: str) -> None:
    objects = support.rendered(cluster.client, CRDS)
    assert [o["kind"] for o in objects] == ["CustomResourceDefinition"] * 2
    assert dry_run(cluster.client, mode, objects) == passed(objects)


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("overlay", OVERLAYS, ids=[p.name for p in OVERLAYS])
def test_each_overlay_passes_a_server_dry_run(
    cluster: support.Cluster, overlay: pathlib.Path, mode: str
) -> None:
    objects = support.rendered(cluster.client, overlay)
    served = served_groups(cluster.client)
    unserved = [o for o in objects if group_of(o["apiVersion"]) not in served]
    checked = [o for o in objects if o not in unserved]
    if mode == "client-side apply" and cluster.backend != "existing":
        checked = [o for o in checked if o["kind"] not in WEBHOOK_CONFIGURATIONS]
    # Only controllers' kinds may be missing, and only while their group is not served.
    assert {group_of(o["apiVersion"]) for o in unserved} <= set(UNSERVED_GROUPS)
    assert dry_run(cluster.client, mode, checked) == passed(checked)


@pytest.fixture(scope="module")
def example_prerequisites(cluster: support.Cluster) -> Iterator[None]:
    """What the examples need to exist before their objects can be created: the namespaces
    they name (examples/README.md: ``kubectl create namespace vision``...), their
    PriorityClasses (pods naming a missing one are refused) and the queues of
    ``examples/queues/hierarchy.yaml`` and ``examples/volcano/queue.yaml`` (``root`` and
    ``default`` exist already).

    Created with ``kubectl create``, so that both kinds of apply still have something to
    send for every object (an apply that finds nothing to change sends no request)."""
    client = cluster.client
    objects = [o for path in example_files() for o in support.documents(path.read_text())]
    namespaces = sorted(
        {o["metadata"]["namespace"] for o in objects if o["metadata"].get("namespace")}
    )
    priority_classes = [o for o in objects if o["kind"] == "PriorityClass"]
    tree = [
        o
        for name in ("queues/hierarchy.yaml", "volcano/queue.yaml")
        for o in support.documents((EXAMPLES / name).read_text())
        if o["metadata"]["name"] not in ("root", "default")
    ]
    try:
        for namespace in namespaces:
            created = client.run("create", "namespace", namespace)
            assert created.ok, created.describe()
        made = client.run("create", "-f", "-", input=kubectl.manifest_text(priority_classes + tree))
        assert made.ok, made.describe()

        yield
    finally:
        client.run("delete", "namespace", *namespaces, "--wait=false")
        for priority_class in priority_classes:
            name = priority_class["metadata"]["name"]
            client.run("delete", "priorityclass", name, "--ignore-not-found")
        # The file lists parents before children; the webhook refuses to delete a queue that
        # still has children, so the queues go in the reverse order.
        for queue in reversed(tree):
            client.run("delete", "queue", queue["metadata"]["name"], "--ignore-not-found")


@pytest.mark.backends(
    "kubesim",
    "real",
    reason="creates the examples' namespaces and queues under their fixed names "
    "(vision, research, ...), which a cluster in use may have",
)
@pytest.mark.parametrize("mode", list(reversed(MODES)))
@pytest.mark.parametrize(
    "path", example_files(), ids=[str(p.relative_to(EXAMPLES)) for p in example_files()]
)
def test_every_example_passes_a_server_dry_run(
    cluster: support.Cluster, example_prerequisites: None, path: pathlib.Path, mode: str
) -> None:
    objects = support.documents(path.read_text())
    assert dry_run(cluster.client, mode, objects) == passed(objects)
