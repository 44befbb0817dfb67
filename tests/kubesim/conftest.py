"""kubesim's own tests: the `api` fixture (each API-behaviour test on both backends, kubesim and
the real control plane: tests/kubesim/backends.py), the `kubesim` fixture (a fresh kubesim per
test, for the tests that need its internals) and small helpers.

Every test here that starts kubesim but not the `api` fixture says why it cannot run on the
real API server: `@pytest.mark.kubesim_only(reason=...)` (enforced at collection).
"""

from __future__ import annotations

import asyncio
import inspect
import pathlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest
import yaml

from kubesim import harness
from tests import timing
from tests.kubesim import backends

kubesim = harness.kubesim
Answer = backends.Answer
Api = backends.Api

DATA = pathlib.Path(__file__).parent / "data"
HERE = pathlib.Path(__file__).resolve().parent

_real_outcomes: list[str] = []
"""Why real-backend tests were skipped or failed without running (told at the end)."""


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "kubesim_only(reason): a kubesim test that cannot run against the real API server, "
        "and why (it reads or steers kubesim's internals)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if not pathlib.Path(str(item.fspath)).resolve().is_relative_to(HERE):
            continue
        fixtures = getattr(item, "fixturenames", ())
        marker = item.get_closest_marker("kubesim_only")
        if marker is not None and not marker.kwargs.get("reason"):
            raise pytest.UsageError(f"{item.nodeid}: @kubesim_only needs a reason=")
        if "kubesim" in fixtures and "api" not in fixtures and marker is None:
            raise pytest.UsageError(
                f"{item.nodeid}: uses kubesim alone; run it on both backends with the `api` "
                "fixture, or mark it @pytest.mark.kubesim_only(reason=...)"
            )


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for line in sorted(set(_real_outcomes)):
        terminalreporter.write_line(f"!!! tests/kubesim: {line}", yellow=True, bold=True)
    if _plane is not None and _plane.started_seconds:
        terminalreporter.write_line(
            f"tests/kubesim: the real control plane started in {_plane.started_seconds:.1f}s "
            f"({_plane.workdir}; logs/ and audit.jsonl are kept there)"
        )


_plane: backends.RealControlPlane | None = None


@pytest.fixture(scope="session")
def real_control_plane(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[backends.RealControlPlane]:
    """The session's real control plane, started by the first test that needs it."""
    global _plane
    _plane = backends.RealControlPlane(workdir=tmp_path_factory.mktemp("controlplane"))
    try:
        yield _plane
    finally:
        _plane.stop()


@pytest.fixture(params=backends.BACKENDS)
async def api(
    request: pytest.FixtureRequest,
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[backends.Api]:
    """The test's API server: a fresh kubesim, or a fresh namespace on the session's real
    control plane; KUBECONFIG and KUBECACHEDIR point at it for the test."""
    if request.param == backends.KUBESIM:
        with backends.kubesim_api(tmp_path) as api:
            monkeypatch.setenv("KUBECONFIG", str(api.kubeconfig))
            monkeypatch.setenv("KUBECACHEDIR", str(api.cache_dir))
            yield api
        return
    plane: backends.RealControlPlane = request.getfixturevalue("real_control_plane")
    try:
        plane.get()
    except backends.Unavailable as failure:
        outcome, message = backends.unavailable_outcome(failure)
        _real_outcomes.append(message)
        if outcome == "skip":
            pytest.skip(message)
        pytest.fail(message, pytrace=False)
    async with backends.real_api(plane, tmp_path) as api:
        monkeypatch.setenv("KUBECONFIG", str(api.kubeconfig))
        monkeypatch.setenv("KUBECACHEDIR", str(api.cache_dir))
        yield api


async def call(
    target: backends.Api | harness.Cluster,
    method: str,
    path: str,
    body: Any = None,
    *,
    content_type: str = "application/json",
    headers: dict[str, str] | None = None,
    params: dict[str, str] | None = None,
    raw: bytes | None = None,
) -> backends.Answer:
    """One request as the administrator (see :meth:`backends.Api.call`)."""
    api = target if isinstance(target, backends.Api) else backends.of_kubesim(target)
    return await api.call(
        method, path, body, content_type=content_type, headers=headers, params=params, raw=raw
    )


def configmap(name: str, data: dict[str, str] | None = None, **metadata: Any) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, **metadata},
        "data": data or {"k": "v"},
    }


def pod(name: str, *, gates: tuple[str, ...] = (), **spec: Any) -> dict:
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9"}], **spec},
    }
    if gates:
        body["spec"]["schedulingGates"] = [{"name": g} for g in gates]
    return body


def widget(name: str, **spec: Any) -> dict:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": spec,
    }


def widgets_crd() -> dict:
    return yaml.safe_load((DATA / "widgets-crd.yaml").read_text())  # type: ignore[no-any-return]


async def install_widgets(target: backends.Api | harness.Cluster, crd: dict | None = None) -> None:
    """The Widget CRD of data/widgets-crd.yaml (or ``crd``), created through the API, once it
    is served. kubesim serves a CRD at once; kube-apiserver a moment after Established."""
    crd = crd or widgets_crd()
    answer = await call(target, "POST", CRDS, crd)
    assert answer.status == 201, answer.body
    group, plural = crd["spec"]["group"], crd["spec"]["names"]["plural"]
    version = crd["spec"]["versions"][0]["name"]
    namespaced = crd["spec"].get("scope", "Namespaced") == "Namespaced"
    where = "/namespaces/{namespace}" if namespaced else ""

    async def served() -> bool:
        listed = await call(target, "GET", f"/apis/{group}/{version}{where}/{plural}")
        return listed.status == 200

    await wait_for(served)


ROOT_CA = "kube-root-ca.crt"
"""The ConfigMap a real cluster's root-CA publisher puts in every namespace (kubesim has no
such controller: kubesim/README.md)."""


def own_items(listed: dict) -> list[dict]:
    """The items of a list answer that the test made (without :data:`ROOT_CA`)."""
    return [i for i in listed["items"] if i["metadata"]["name"] != ROOT_CA]


def names(listed: dict) -> list[str]:
    return [i["metadata"]["name"] for i in own_items(listed)]


CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
CONFIGMAPS = "/api/v1/namespaces/{namespace}/configmaps"
PODS = "/api/v1/namespaces/{namespace}/pods"
WIDGETS = "/apis/example.com/v1/namespaces/{namespace}/widgets"


async def wait_for(
    predicate: Callable[[], Awaitable[bool]] | Callable[[], bool],
    *,
    deadline: float = timing.DEADLINE,
) -> None:
    """Poll `predicate` until it holds; fail after `deadline` seconds (never a fixed sleep)."""
    limit = time.monotonic() + deadline
    while True:
        result = predicate()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return
        if time.monotonic() > limit:
            raise AssertionError(f"condition not reached within {deadline}s: {predicate}")
        await asyncio.sleep(0.02)
