"""The two API servers kubesim's API-behaviour tests run against, behind one small client.

- ``kubesim``: a fresh server per test (:func:`kubesim.harness.running`), namespace ``default``,
  plain HTTP with a bearer token.
- ``real``: one control plane per test session (:mod:`controlplane.cluster`: etcd,
  kube-apiserver, kube-controller-manager, kube-scheduler and kwok, no nodes), HTTPS with the
  admin's client certificate. Each test gets a fresh namespace, and whatever cluster-scoped
  object it made (namespaces, nodes, CRDs, webhook configurations, priority classes) is
  deleted after it, so tests stay independent while the expensive start happens once.

The real control plane has no nodes on purpose: kubesim's test server has no scheduler and no
kubelet, so pods stay Pending and their status is whatever the test writes, on both backends.

When the control plane cannot start, a real-backend test fails if ``QUEUETREE_REQUIRE_REAL=1``
(CI sets it: the real backend is never skipped there); otherwise it is skipped only when there
is no Go to build it with, with the reason told loudly at the end of the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import pathlib
import ssl
import subprocess
import time
import uuid
from collections.abc import Iterator
from typing import Any

import aiohttp
import multidict

from controlplane import building
from controlplane import cluster as controlplane
from kubesim import harness

KUBESIM, REAL = "kubesim", "real"
BACKENDS = (KUBESIM, REAL)
REQUIRE_REAL = "QUEUETREE_REQUIRE_REAL"

CLUSTER_SCOPED = (
    "/api/v1/namespaces",
    "/api/v1/nodes",
    "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
    "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
    "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
    "/apis/scheduling.k8s.io/v1/priorityclasses",
)
"""Collections whose new objects a real-backend test leaves behind for the next one unless
they are deleted: a webhook configuration would intercept every later test's requests, a CRD
would make the next test's create of the same CRD a 409."""

CLEANUP_DEADLINE = 300.0
"""Seconds a deleted CRD may take to go (the API server first deletes its objects). A CRD
took over 60 s on a loaded 2-core machine, and the next test's create of the same CRD then
failed with 409: the wait is long for a loaded machine, and says what was left when it fails."""


@dataclasses.dataclass(frozen=True, slots=True)
class Answer:
    """One HTTP answer: status, decoded JSON body (None if not JSON) and headers."""

    status: int
    body: Any
    headers: multidict.CIMultiDictProxy[str]


@dataclasses.dataclass(frozen=True, slots=True)
class Api:
    """One API server as a test sees it, whichever backend serves it."""

    backend: str
    url: str
    kubeconfig: pathlib.Path
    cache_dir: pathlib.Path
    namespace: str
    """The test's namespace: ``default`` on kubesim (a fresh server per test), a fresh one on
    the shared real control plane."""
    headers: dict[str, str]
    ssl_context: ssl.SSLContext | None
    sim: harness.Cluster | None = None
    """kubesim's own handle, for the few tests that read its internals; None on ``real``."""

    @property
    def real(self) -> bool:
        return self.backend == REAL

    @property
    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            "KUBECACHEDIR": str(self.cache_dir),
        }

    def path(self, path: str) -> str:
        """``path`` with ``{namespace}`` replaced by the test's namespace."""
        return path.replace("{namespace}", self.namespace)

    def kubectl(
        self, *args: str, input: str | None = None, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        """The machine's kubectl (the one the product's users and the sandbox run) against this
        server, in the test's namespace, with a request timeout; output is text."""
        return subprocess.run(
            [harness.KUBECTL, harness.KUBECTL_TIMEOUT, *args],
            input=input,
            capture_output=True,
            text=True,
            env=self.env,
            check=False,
            timeout=timeout,
        )

    def session(self, **options: Any) -> aiohttp.ClientSession:
        """An aiohttp session that authenticates as the administrator."""
        connector = aiohttp.TCPConnector(ssl=self.ssl_context) if self.ssl_context else None
        return aiohttp.ClientSession(headers=self.headers, connector=connector, **options)

    async def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
        params: dict[str, str] | None = None,
        raw: bytes | None = None,
    ) -> Answer:
        """One request as the administrator; ``body`` is sent as JSON, ``{namespace}`` in
        ``path`` and in ``params`` is the test's namespace."""
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        async with (
            self.session() as session,
            session.request(
                method,
                self.url + self.path(path),
                data=data,
                headers={"Content-Type": content_type, **(headers or {})},
                params={k: self.path(v) for k, v in (params or {}).items()},
            ) as response,
        ):
            text = await response.read()
            try:
                decoded = json.loads(text) if text else None
            except ValueError:
                decoded = None
            return Answer(response.status, decoded, response.headers)

    async def get(self, path: str) -> Any:
        """The object or list at ``path``, or None if it is not found."""
        answer = await self.call("GET", path)
        if answer.status == 404:
            return None
        assert answer.status == 200, (path, answer.body)
        return answer.body


def of_kubesim(cluster: harness.Cluster) -> Api:
    return Api(
        backend=KUBESIM,
        url=cluster.url,
        kubeconfig=cluster.kubeconfig,
        cache_dir=cluster.cache_dir,
        namespace="default",
        headers={"Authorization": f"Bearer {cluster.sim.token}"},
        ssl_context=None,
        sim=cluster,
    )


# ---------------------------------------------------------------------- the real control plane


class Unavailable(Exception):
    """The real control plane cannot run here; ``skip`` when that is only a missing Go."""

    def __init__(self, message: str, *, skip: bool) -> None:
        super().__init__(message)
        self.skip = skip


@dataclasses.dataclass(slots=True)
class RealControlPlane:
    """The session's control plane, started on first use; a failed start is remembered, so
    every later real-backend test reports it at once instead of trying again."""

    workdir: pathlib.Path
    cluster: controlplane.Cluster | None = None
    failure: Unavailable | None = None
    started_seconds: float = 0.0
    _context: ssl.SSLContext | None = None

    def get(self) -> controlplane.Cluster:
        if self.failure is not None:
            raise self.failure
        if self.cluster is None:
            try:
                self.cluster = self._start()
            except Unavailable as exc:
                self.failure = exc
                raise
        return self.cluster

    def _start(self) -> controlplane.Cluster:
        try:
            if building.find_all() is None:
                # A cold build takes many minutes: never inside a test run.
                raise Unavailable(
                    "the control plane is not built: run `make controlplane` first", skip=False
                )
        except building.GoMissing as exc:
            raise Unavailable(f"no Go on this machine ({exc})", skip=True) from None
        started = time.monotonic()
        try:
            cluster = controlplane.start(controlplane.Options(workdir=self.workdir))
        except controlplane.StartupError as exc:
            raise Unavailable(str(exc), skip=False) from None
        self.started_seconds = time.monotonic() - started
        return cluster

    def context(self) -> ssl.SSLContext:
        if self._context is None:
            cluster = self.get()
            files = cluster.files
            context = ssl.create_default_context(cafile=str(files.ca_cert))
            context.load_cert_chain(
                str(files.client_cert(controlplane.ADMIN)),
                str(files.client_key(controlplane.ADMIN)),
            )
            self._context = context
        return self._context

    def stop(self) -> None:
        if self.cluster is not None:
            self.cluster.stop()
            self.cluster = None


def unavailable_outcome(failure: Unavailable) -> tuple[str, str]:
    """("skip" | "fail", message) for a real-backend test when the control plane is missing."""
    if os.environ.get(REQUIRE_REAL) == "1":
        return "fail", f"{REQUIRE_REAL}=1, but the real control plane cannot start: {failure}"
    if failure.skip:
        return "skip", f"real control plane SKIPPED: {failure}"
    return "fail", f"the real control plane did not start: {failure}"


async def _names(api: Api, collection: str) -> set[str]:
    listed = await api.get(collection)
    return {item["metadata"]["name"] for item in (listed or {}).get("items", [])}


@contextlib.asynccontextmanager
async def _namespace_of_its_own(api: Api) -> Any:
    """Create ``api.namespace`` and wait for its ``default`` ServiceAccount (pods are refused
    before it exists) and its ``kube-root-ca.crt`` ConfigMap (kube-controller-manager publishes
    it into every namespace a moment later: a watch of the namespace's ConfigMaps from a
    listed resourceVersion saw it arrive); afterwards delete it and every cluster-scoped object
    the test left."""
    before = {c: await _names(api, c) for c in CLUSTER_SCOPED}
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": api.namespace}}
    created = await api.call("POST", "/api/v1/namespaces", namespace)
    assert created.status == 201, created.body
    deadline = time.monotonic() + 30
    for path, what in (
        ("serviceaccounts/default", "default ServiceAccount"),
        ("configmaps/kube-root-ca.crt", "kube-root-ca.crt ConfigMap"),
    ):
        while await api.get(f"/api/v1/namespaces/{api.namespace}/{path}") is None:
            assert time.monotonic() < deadline, f"the namespace's {what} never came"
            await asyncio.sleep(0.05)
    try:
        yield
    finally:
        left: list[str] = []
        for collection in CLUSTER_SCOPED:
            for name in sorted(await _names(api, collection) - before[collection]):
                await api.call("DELETE", f"{collection}/{name}")
                left.append(f"{collection}/{name}")
        # The next test may create the same CRD or webhook configuration again: wait until
        # they are gone (namespaces may take their time; nothing reuses their names).
        deadline = time.monotonic() + CLEANUP_DEADLINE
        for path in left:
            if path.startswith("/api/v1/namespaces/"):
                continue
            while (found := await api.get(path)) is not None:
                if time.monotonic() > deadline:
                    status = json.dumps(found.get("status", {}).get("conditions", []))
                    raise AssertionError(
                        f"{path} was not deleted within {CLEANUP_DEADLINE}s "
                        f"(finalizers {found['metadata'].get('finalizers')}, conditions {status})"
                    )
                # A CRD's objects may hold finalizers the test left: release them.
                await _release_finalizers(api, found)
                await asyncio.sleep(0.1)


async def _release_finalizers(api: Api, crd: dict[str, Any]) -> None:
    if crd.get("kind") != "CustomResourceDefinition":
        return
    group, plural = crd["spec"]["group"], crd["spec"]["names"]["plural"]
    version = next(v["name"] for v in crd["spec"]["versions"] if v.get("storage"))
    listed = await api.get(f"/apis/{group}/{version}/{plural}")
    for item in (listed or {}).get("items", []):
        meta = item["metadata"]
        if meta.get("finalizers"):
            where = f"/namespaces/{meta['namespace']}" if meta.get("namespace") else ""
            await api.call(
                "PATCH",
                f"/apis/{group}/{version}{where}/{plural}/{meta['name']}",
                {"metadata": {"finalizers": None}},
                content_type="application/merge-patch+json",
            )


@contextlib.asynccontextmanager
async def real_api(plane: RealControlPlane, directory: pathlib.Path) -> Any:
    """An :class:`Api` on the session's control plane, in a fresh namespace of its own."""
    cluster = plane.get()
    namespace = f"t-{uuid.uuid4().hex[:10]}"
    kubeconfig = cluster.write_kubeconfig(
        directory / "kubeconfig",
        user=controlplane.ADMIN,
        credentials={
            "client-certificate": str(cluster.files.client_cert(controlplane.ADMIN)),
            "client-key": str(cluster.files.client_key(controlplane.ADMIN)),
        },
        namespace=namespace,
    )
    cache_dir = directory / "kubecache"
    cache_dir.mkdir(exist_ok=True)
    api = Api(
        backend=REAL,
        url=cluster.url,
        kubeconfig=kubeconfig,
        cache_dir=cache_dir,
        namespace=namespace,
        headers={},
        ssl_context=plane.context(),
    )
    async with _namespace_of_its_own(api):
        yield api


@contextlib.contextmanager
def kubesim_api(directory: pathlib.Path, **options: Any) -> Iterator[Api]:
    with harness.running(directory, **options) as cluster:
        yield of_kubesim(cluster)
