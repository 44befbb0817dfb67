"""kubesim's own tests: the `kubesim` fixture (a fresh server per test) and small helpers."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import pathlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import multidict
import yaml

from kubesim import harness

kubesim = harness.kubesim

DATA = pathlib.Path(__file__).parent / "data"


@dataclasses.dataclass(frozen=True, slots=True)
class Answer:
    """One HTTP answer of kubesim: status, decoded JSON body (None if not JSON) and headers."""

    status: int
    body: Any
    headers: multidict.CIMultiDictProxy[str]


async def call(
    cluster: harness.Cluster,
    method: str,
    path: str,
    body: Any = None,
    *,
    content_type: str = "application/json",
    headers: dict[str, str] | None = None,
    params: dict[str, str] | None = None,
    raw: bytes | None = None,
) -> Answer:
    """One request to kubesim with the admin token; the body is sent as JSON."""
    all_headers = {"Authorization": "Bearer admin", "Content-Type": content_type, **(headers or {})}
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    async with (
        aiohttp.ClientSession() as session,
        session.request(
            method, cluster.url + path, data=data, headers=all_headers, params=params
        ) as response,
    ):
        text = await response.read()
        try:
            decoded = json.loads(text) if text else None
        except ValueError:
            decoded = None
        return Answer(response.status, decoded, response.headers)


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


async def install_widgets(cluster: harness.Cluster) -> None:
    """The Widget CRD of data/widgets-crd.yaml, created through the API."""
    crd = yaml.safe_load((DATA / "widgets-crd.yaml").read_text())
    answer = await call(cluster, "POST", CRDS, crd)
    assert answer.status == 201, answer.body


CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
PODS = "/api/v1/namespaces/default/pods"
WIDGETS = "/apis/example.com/v1/namespaces/default/widgets"


async def wait_for(
    predicate: Callable[[], Awaitable[bool]] | Callable[[], bool], *, deadline: float = 15.0
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
