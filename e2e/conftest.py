"""The e2e suite's cluster: the sandbox stack on kubesim or on the real control plane, or an
existing cluster.

``pytest e2e --e2e`` (``make e2e``) starts the sandbox stack for the session, exactly as
``queuetree sandbox`` does (``queuetree.sandbox.stack``), on the backend ``--backend`` names:
``kubesim`` (simulated nodes, scheduler and kubelet; the default) or ``real`` (etcd,
kube-apiserver, kube-controller-manager, kube-scheduler and kwok from ``make controlplane``;
``make e2e-real``); then the sandbox overlay applied with kubectl, the webhook over TLS, the
operator. With ``--e2e-existing-cluster`` (or ``QUEUETREE_E2E_EXISTING=1``) it uses the cluster
of ``KUBECONFIG`` as it is, which must already run queuetree (``make e2e-kind``).

A test that cannot run on one backend says so with ``@pytest.mark.backends("real")`` (the
backends it needs) and ``reason=``; it is skipped elsewhere with that reason.

Without ``--e2e`` the tests are skipped, as kopf's own suite does with its e2e tests: a plain
``pytest .`` from the repository root must not start clusters.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
from collections.abc import Generator, Iterator
from typing import Any

import pytest
import yaml

from e2e import support
from queuetree.sandbox import kubectl, stack

HERE = pathlib.Path(__file__).resolve().parent
SCHEDULER_CONFIG = HERE / "scheduler.conf"
NODES = HERE / "nodes.yaml"


_started: list[pathlib.Path] = []
"""Where the session's sandbox stack kept its kubeconfig and logs (told at the end)."""


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for workdir in _started:
        terminalreporter.write_line(
            f"e2e: the sandbox stack ran in {workdir} (kubeconfig, logs/, audit; on the real "
            "backend controlplane/ holds the control plane's logs)"
        )
        if os.environ.get("KUBECONFIG"):
            # Said loudly: a kind run that forgot the flag would otherwise pass on kubesim.
            terminalreporter.write_line(
                f"e2e: KUBECONFIG={os.environ['KUBECONFIG']} was NOT used; pass "
                "--e2e-existing-cluster (or QUEUETREE_E2E_EXISTING=1) to test that cluster",
                yellow=True,
            )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failed test on a cluster that runs Karpenter gets a report section with Karpenter's
    state (NodePool, NodeClaims, nodes, the test's pods and events) and the tail of its log,
    so a failure that is not a timed-out wait is diagnosable too."""
    report = yield
    if report.failed:
        kubes = [v for v in getattr(item, "funcargs", {}).values() if isinstance(v, support.Kube)]
        if kubes and support.has_autoscaler(kubes[0].cluster):
            kube = kubes[0]
            try:
                text = support.karpenter_state(kube.cluster, kube.namespace)
                text += "\n" + support.karpenter_log_tail(kube.cluster)
            except Exception as exc:  # the report of a failure must not fail
                text = f"(no Karpenter report: {type(exc).__name__}: {exc})"
            report.sections.append((f"Karpenter after the failed {report.when}", text))
    return report


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("queuetree e2e")
    group.addoption(
        "--e2e", action="store_true", default=False, help="run the end-to-end suite (make e2e)"
    )
    group.addoption(
        "--backend",
        choices=stack.BACKENDS,
        default=os.environ.get("QUEUETREE_E2E_BACKEND", "kubesim"),
        help="the cluster the suite starts: kubesim (default) or real (make controlplane); "
        "also QUEUETREE_E2E_BACKEND",
    )
    group.addoption(
        "--e2e-existing-cluster",
        action="store_true",
        default=os.environ.get("QUEUETREE_E2E_EXISTING", "") in ("1", "true"),
        help="use the cluster of KUBECONFIG, which already runs queuetree, instead of starting "
        "the sandbox stack (also QUEUETREE_E2E_EXISTING=1)",
    )


def _backend(config: pytest.Config) -> str:
    if config.getoption("--e2e-existing-cluster"):
        return "existing"
    return str(config.getoption("--backend"))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "backends(*names, reason): the e2e backends a test can run on (kubesim, real, "
        "existing), and why not on the others",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    backend = _backend(config)
    for item in items:
        if pathlib.Path(str(item.fspath)).resolve().is_relative_to(HERE):
            item.add_marker(pytest.mark.e2e)
            if not config.getoption("--e2e"):
                item.add_marker(pytest.mark.skip(reason="end-to-end: run with --e2e (make e2e)"))
            marker = item.get_closest_marker("backends")
            if marker is not None and backend not in marker.args:
                reason = marker.kwargs.get("reason")
                if not reason:
                    raise pytest.UsageError(f"{item.nodeid}: @backends(...) needs a reason=")
                item.add_marker(pytest.mark.skip(reason=f"not on {backend}: {reason}"))


def _configured_level(text: str) -> int:
    """``ancestorReclaimLevel`` of the capacity plugin in a scheduler configuration (0 if unset)."""
    document = yaml.safe_load(text) or {}
    for tier in document.get("tiers") or []:
        for plugin in tier.get("plugins") or []:
            if plugin.get("name") == "capacity":
                return int((plugin.get("arguments") or {}).get("ancestorReclaimLevel", 0))
    return 0


def _existing_level(client: kubectl.Kubectl) -> int:
    """The level of the scheduler configuration deployed with queuetree (the ConfigMap the
    operator mounts); 0, Volcano's default, if none is found."""
    for item in client.items("configmaps", "-n", stack.NAMESPACE):
        if re.match(r"queuetree-scheduler-config", item["metadata"]["name"]):
            text = (item.get("data") or {}).get("scheduler.conf")
            if text:
                return _configured_level(text)
    return 0


def _existing_inqueue_timeout(client: kubectl.Kubectl) -> float:
    """The ``--inqueue-timeout`` of the deployed operator (its Deployment's arguments); the
    operator's default when it sets none."""
    from queuetree.operator import settings

    for item in client.items("deployments", "-n", stack.NAMESPACE):
        for container in item["spec"]["template"]["spec"].get("containers") or []:
            for arg in container.get("args") or []:
                if str(arg).startswith("--inqueue-timeout="):
                    return float(str(arg).partition("=")[2])
    return settings.DEFAULTS.inqueue_timeout


@pytest.fixture(scope="session")
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[support.Cluster]:
    cache = tmp_path_factory.mktemp("kubecache")
    if request.config.getoption("--e2e-existing-cluster"):
        kubeconfig = os.environ.get("KUBECONFIG")
        if not kubeconfig:
            raise pytest.UsageError("--e2e-existing-cluster needs KUBECONFIG")
        client = kubectl.Kubectl(kubeconfig, str(cache))
        found = client.run("get", "validatingwebhookconfiguration/queuetree-validating-webhook")
        if not found.ok:
            raise pytest.UsageError(
                f"the cluster of KUBECONFIG={kubeconfig} does not run queuetree: {found.stderr}"
            )
        yield support.Cluster(
            client,
            "existing",
            _existing_level(client),
            inqueue_timeout=_existing_inqueue_timeout(client),
        )
        return
    backend = _backend(request.config)
    options = stack.Options(
        workdir=tmp_path_factory.mktemp("sandbox"),
        nodes_files=(NODES,),
        scheduler_config=SCHEDULER_CONFIG,
        schedule_period=0.5,
        backend=backend,
        operator_flags=(f"--inqueue-timeout={support.INQUEUE_TIMEOUT:g}",),
    )
    _started.append(options.workdir)
    with stack.running(options) as running:
        yield support.Cluster(
            running.kubectl,
            backend,
            _configured_level(SCHEDULER_CONFIG.read_text()),
            sandbox=running,
        )


@pytest.fixture
def kube(cluster: support.Cluster) -> Iterator[support.Kube]:
    """A fresh namespace for the test; everything the test made is deleted afterwards."""
    namespace = support.unique("e2e")
    created = cluster.client.run("create", "namespace", namespace)
    assert created.ok, created.describe()
    kube = support.Kube(cluster, namespace)
    try:
        yield kube
    finally:
        kube.cleanup()


@pytest.fixture(scope="session")
def slot_node(cluster: support.Cluster) -> Iterator[str]:
    """A node that advertises two of :data:`support.SLOT` (an extended resource, patched into
    its status as Kubernetes documents for extended resources), so reclaim tests can fill it."""
    nodes = cluster.client.items("nodes")
    usable = [
        n
        for n in nodes
        if not any(
            t.get("effect") == "NoExecute" for t in (n.get("spec") or {}).get("taints") or []
        )
    ]
    name = str((usable or nodes)[0]["metadata"]["name"])
    patch = {"status": {"capacity": {support.SLOT: "2"}, "allocatable": {support.SLOT: "2"}}}
    patched = cluster.client.run(
        "patch", "node", name, "--subresource=status", "--type=merge", "-p", json.dumps(patch)
    )
    assert patched.ok, patched.describe()
    yield name
    # Leave the cluster as found: a merge patch with null removes the resource again.
    patch = {"status": {"capacity": {support.SLOT: None}, "allocatable": {support.SLOT: None}}}
    cluster.client.run(
        "patch", "node", name, "--subresource=status", "--type=merge", "-p", json.dumps(patch)
    )
