"""kubernetes-asyncio's generated client loads one class at a time (queuetree.importing).

Each case runs in a fresh interpreter: what a process has imported is the fact under test, and
this one's modules depend on which tests ran first.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import pathlib
import subprocess
import sys
import textwrap

import pytest

from queuetree import importing

GENERATED = "kubernetes_asyncio.client."
UNUSED_GROUPS = (
    "kubernetes_asyncio.client.api.apps_v1_api",
    "kubernetes_asyncio.client.models.v1_deployment",
    "kubernetes_asyncio.client.models.v1_stateful_set",
)
"""Modules of API groups queuetree never talks to: loaded only with the whole package."""
GENERATED_MODULES_AT_MOST = 100
"""Of about 1,260 when the whole package loads; a process of queuetree's loads about 40."""
PRODUCT = pathlib.Path(importing.__file__).parent
GENERATED_API_ALLOWED = frozenset({"CoordinationV1Api"})
"""Generated API classes the product may load: the leader election's lease lock (the library's
own code) reads and writes its Lease through this one (0.1 MiB)."""


def _run(code: str) -> object:
    """What ``code`` prints as JSON, run by a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


WHAT_THE_PROCESSES_DO = """
    import asyncio, json, sys, types
    import {entry}
    import kopf
    from kubernetes_asyncio import client, config
    from kubernetes_asyncio.leaderelection import electionconfig, leaderelection
    from kubernetes_asyncio.leaderelection.resourcelock import leaselock
    for name in ("Configuration", "ApiClient", "ApiException", "CoordinationV1Api"):
        getattr(client, name)
    # What the lease lock reads: an answer deserialised by the name of its model.
    async def read_lease():
        async with client.ApiClient() as api:
            answer = types.SimpleNamespace(data='{{"spec": {{"holderIdentity": "a"}}}}')
            return api.deserialize(answer, "V1Lease")
    lease = asyncio.run(read_lease())
    assert lease.spec.holder_identity == "a", lease
    print(json.dumps(sorted(
        name for name in sys.modules if name.startswith(("kubernetes_asyncio", "urllib3."))
    )))
"""


@pytest.mark.parametrize(
    "entry",
    [
        pytest.param("queuetree.cli", id="the-command"),
        pytest.param("queuetree.operator.running", id="the-operator"),
        pytest.param("queuetree.webhooks.server", id="the-webhook"),
    ],
)
def test_a_process_loads_only_the_generated_classes_it_uses(entry: str) -> None:
    loaded = _run(WHAT_THE_PROCESSES_DO.format(entry=entry))
    assert isinstance(loaded, list)
    assert not set(UNUSED_GROUPS) & set(loaded)
    assert len([name for name in loaded if name.startswith(GENERATED)]) <= (
        GENERATED_MODULES_AT_MOST
    )
    # urllib3 (2.0 MiB) is registered, never run: only basic authentication would read it.
    assert [name for name in loaded if name.startswith("urllib3.")] == []


def test_the_deferred_packages_offer_every_name_of_the_generated_ones() -> None:
    listing = """
        import importlib, json, sys
        {before}
        print(json.dumps({{n: sorted(importlib.import_module(n).__all__) for n in {names!r}}}))
    """
    names = list(importing.DEFERRED)
    generated = _run(listing.format(before="", names=names))
    deferred = _run(listing.format(before="import queuetree", names=names))
    assert deferred == generated


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        pytest.param(
            "client.CoreV1Api.__module__",
            "kubernetes_asyncio.client.api.core_v1_api",
            id="a-class-from-the-module-the-init-names",
        ),
        pytest.param(
            "client.models.V1Lease is client.V1Lease and client.api.CoreV1Api is client.CoreV1Api",
            True,
            id="one-class-by-every-path",
        ),
        pytest.param("kubernetes_asyncio.client is client", True, id="the-parent-names-its-child"),
        pytest.param(
            "client.__version__",
            importlib.metadata.version("kubernetes-asyncio"),
            id="the-init-constants",
        ),
        pytest.param("hasattr(client, 'NoSuchModel')", False, id="an-unknown-name-is-missing"),
        pytest.param(
            "type(kubernetes_asyncio.watch.Watch).__name__", "type", id="a-subpackage-by-name"
        ),
        pytest.param(
            "client.Configuration(username='a', password='b').get_basic_auth_token()",
            "Basic YTpi",
            id="urllib3-runs-when-first-read",
        ),
        pytest.param(
            "__import__('urllib3').__version__ == __import__('importlib.metadata').metadata"
            ".version('urllib3')",
            True,
            id="urllib3-is-the-library-s-own",
        ),
        pytest.param("hasattr(__import__('urllib3'), 'NoSuchName')", False, id="urllib3-missing"),
    ],
)
def test_a_deferred_package_answers_as_the_generated_one(expression: str, expected: object) -> None:
    found = _run(
        f"""
        import json
        import queuetree
        import kubernetes_asyncio
        from kubernetes_asyncio import client
        print(json.dumps({expression}))
        """
    )
    assert found == expected


def test_a_process_that_imported_the_client_first_keeps_it_whole() -> None:
    loaded = _run(
        """
        import json, sys
        import kubernetes_asyncio
        import queuetree
        print(json.dumps([name for name in sys.modules if name.startswith("kubernetes_asyncio")]))
        """
    )
    assert isinstance(loaded, list)
    assert set(UNUSED_GROUPS) <= set(loaded)


CREDENTIAL = {
    "apiVersion": "client.authentication.k8s.io/v1",
    "kind": "ExecCredential",
    "status": {"token": "from-the-plugin"},
}


def _exec_kubeconfig() -> dict[str, object]:
    """A kubeconfig whose user's token comes from an exec plugin (this interpreter)."""
    plugin = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": sys.executable,
        "args": ["-c", f"print({json.dumps(CREDENTIAL)!r})"],
        "interactiveMode": "Never",
    }
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "c",
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
        "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:6443"}}],
        "users": [{"name": "u", "user": {"exec": plugin}}],
    }


def test_an_exec_plugin_kubeconfig_loads_through_the_deferred_packages(
    tmp_path: pathlib.Path,
) -> None:
    """The credentials the processes read (queuetree.operator.running, webhooks.server) come
    from the library's kubeconfig loader, which now runs on the deferred packages."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps(_exec_kubeconfig()))  # JSON is YAML
    found = _run(
        f"""
        import asyncio, json
        import queuetree
        from kubernetes_asyncio import client, config

        async def main():
            configuration = client.Configuration()
            await config.load_kube_config(
                config_file={str(kubeconfig)!r}, client_configuration=configuration
            )
            return (await configuration.auth_settings())["BearerToken"]["value"]

        print(json.dumps(asyncio.run(main())))
        """
    )
    assert found == "Bearer from-the-plugin"


def _generated_apis_named(source: str) -> list[str]:
    """The generated API classes (``client.CoreV1Api``, ``from ...client.api... import``) that
    ``source`` names."""
    named = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Attribute)
            and node.attr.endswith("Api")
            and isinstance(node.value, ast.Name)
            and node.value.id == "client"  # from kubernetes_asyncio import client
        ):
            named.append(node.attr)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
            "kubernetes_asyncio.client"
        ):
            named += [alias.name for alias in node.names if alias.name.endswith("Api")]
    return named


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param("client.CoreV1Api(api)", ["CoreV1Api"], id="an-attribute"),
        pytest.param(
            "from kubernetes_asyncio.client import CustomObjectsApi",
            ["CustomObjectsApi"],
            id="an-import",
        ),
        pytest.param("client.ApiClient(); client.ApiException", [], id="the-client-itself"),
        pytest.param("kube.KubeApi(api)", [], id="a-class-of-queuetree-s-own"),
    ],
)
def test_the_guard_sees_a_generated_api(source: str, expected: list[str]) -> None:
    assert _generated_apis_named(source) == expected


@pytest.mark.parametrize(
    "package", [pytest.param(p, id=p) for p in ("api", "operator", "webhooks", "cli", "core")]
)
def test_the_product_makes_its_requests_by_path(package: str) -> None:
    """``CoreV1Api`` costs 2.9 MiB in each process, ``AdmissionregistrationV1Api`` 0.9,
    ``CustomObjectsApi`` 0.5: the processes make their requests with
    ``queuetree.api.calls`` and a path of ``queuetree.api.paths`` (docs/benchmarks.md, Memory)."""
    found = {
        str(path.relative_to(PRODUCT)): named
        for path in sorted((PRODUCT / package).rglob("*.py"))
        if (named := set(_generated_apis_named(path.read_text())) - GENERATED_API_ALLOWED)
    }
    assert found == {}
