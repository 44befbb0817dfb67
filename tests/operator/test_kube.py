"""The API boundary: refused requests become ApiError with status and reason; the rate limit."""

from __future__ import annotations

import dataclasses
import pathlib
from collections.abc import Iterator

import pytest
from kubernetes_asyncio import config

from kubesim import harness
from queuetree.operator import explaining, gating, kube
from tests.operator import cluster as sim
from tests.operator import fakes


@pytest.fixture
def kube_cluster(tmp_path: pathlib.Path) -> Iterator[tuple[harness.Cluster, sim.Client]]:
    yield from sim.start(tmp_path, "n1:cpu=2,memory=2Gi")


async def test_refusals_carry_status_and_reason_and_are_counted(
    kube_cluster: tuple[harness.Cluster, sim.Client],
) -> None:
    cluster, api = kube_cluster
    created = api.create_pod("p", queue="default", requests={"cpu": "100m"})
    errors: list[tuple[str, int]] = []
    loaded = await config.new_client_from_config(config_file=str(cluster.kubeconfig))
    async with loaded as api_client:
        writes = kube.AsyncKube(
            api_client,
            limiter=kube.RateLimiter(qps=0, burst=1),
            on_error=lambda verb, status: errors.append((verb, status)),
        )
        stale = gating.build_gate_removal_patch(
            fakes.pod("p", namespace="default", uid="old"), queue="default"
        )
        assert stale is not None
        outcomes = []
        for namespace, name in (("default", "missing"), ("default", "p")):
            try:
                await writes.patch_pod(namespace, name, stale)
            except kube.ApiError as error:
                outcomes.append((error.status, error.reason))
        fresh = gating.build_gate_removal_patch(
            fakes.pod("p", namespace="default", uid=created["metadata"]["uid"]), queue="default"
        )
        assert fresh is not None
        await writes.patch_pod("default", "p", fresh)
    assert (outcomes, errors) == (
        [(404, "NotFound"), (422, "Invalid")],
        [("patch", 404), ("patch", 422)],
    )
    assert sim.gates_of(api.pod("p")) == []


async def test_the_rate_limiter_spends_the_burst_then_waits_for_tokens(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [0.0]
    waits: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        waits.append(seconds)
        now[0] += seconds

    monkeypatch.setattr(kube.asyncio, "sleep", fake_sleep)
    limiter = kube.RateLimiter(qps=10, burst=2, clock=lambda: now[0])
    for _ in range(4):
        await limiter.acquire()
    assert waits == pytest.approx([0.1, 0.1])


PROXY_CASES = {
    "no proxy variables": ({}, "https://10.0.0.1:6443", None),
    "HTTPS_PROXY for an https server": (
        {"HTTPS_PROXY": "http://proxy:3128"},
        "https://10.0.0.1:6443",
        "http://proxy:3128",
    ),
    "HTTP_PROXY does not apply to https": (
        {"HTTP_PROXY": "http://proxy:3128"},
        "https://10.0.0.1:6443",
        None,
    ),
    "NO_PROXY names the host": (
        {"HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": "localhost,10.0.0.1"},
        "https://10.0.0.1:6443",
        None,
    ),
    "NO_PROXY names the domain": (
        {"HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": ".svc.cluster.local"},
        "https://kubernetes.default.svc.cluster.local",
        None,
    ),
}


@pytest.mark.parametrize(("environ", "url", "expected"), PROXY_CASES.values(), ids=PROXY_CASES)
def test_the_proxy_for_the_api_server_is_read_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, environ: dict[str, str], url: str, expected: str | None
) -> None:
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "https_proxy", "http_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    assert kube.proxy_for(url) == expected


async def test_the_tuned_client_keeps_its_pool_and_reads_the_environment_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kubernetes_asyncio import client

    monkeypatch.setenv("HTTPS_PROXY", "http://proxy:3128")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    configuration = client.Configuration(host="https://10.0.0.1:6443")
    configuration.connection_pool_maxsize = 21
    async with client.ApiClient(configuration) as api_client:
        before = api_client.rest_client.pool_manager
        connector = before.connector
        kube.tune_client(api_client)
        after = api_client.rest_client.pool_manager
        assert (
            after is not before,
            before.closed,
            after.trust_env,
            after.connector is connector,
            connector.limit,
            api_client.rest_client.proxy,
        ) == (True, True, False, True, 21, "http://proxy:3128")
    assert after.closed


async def test_the_gate_removal_takes_the_explanation_with_it_in_one_write(
    kube_cluster: tuple[harness.Cluster, sim.Client],
) -> None:
    cluster, api = kube_cluster
    reason = explaining.REASON_ANNOTATION
    created = api.create_pod(
        "held",
        queue="default",
        requests={"cpu": "100m"},
        annotations={reason: "queue default: cpu 0.1 > 0", "team": "ml"},
    )
    held = dataclasses.replace(
        fakes.pod("held", namespace="default", uid=created["metadata"]["uid"]),
        annotations={reason: "queue default: cpu 0.1 > 0"},
    )
    patch = gating.build_gate_removal_patch(held, queue="default")
    assert patch is not None
    loaded = await config.new_client_from_config(config_file=str(cluster.kubeconfig))
    async with loaded as api_client:
        await kube.AsyncKube(api_client, limiter=kube.RateLimiter(qps=0, burst=1)).patch_pod(
            "default", "held", patch
        )
    after = api.pod("held")
    assert after is not None
    assert (sim.gates_of(after), reason in after["metadata"]["annotations"]) == ([], False)
    assert after["metadata"]["annotations"]["team"] == "ml"
    assert after["metadata"]["annotations"]["scheduling.queuetree.io/admitted-queue"] == "default"


STATUS_BODIES = {
    "a Status with retryAfterSeconds (kube-apiserver's disruption-budget 429)": (
        b'{"kind":"Status","reason":"TooManyRequests","message":"Cannot evict pod",'
        b'"details":{"retryAfterSeconds":10}}',
        ("TooManyRequests", "Cannot evict pod", 10.0),
    ),
    "retryAfterSeconds 0 (a budget not observed yet) names no time": (
        b'{"reason":"TooManyRequests","message":"m","details":{"retryAfterSeconds":0}}',
        ("TooManyRequests", "m", None),
    ),
    "a Status without details": (b'{"reason":"Invalid","message":"m"}', ("Invalid", "m", None)),
    "a number that is not one": (
        b'{"reason":"r","message":"m","details":{"retryAfterSeconds":true}}',
        ("r", "m", None),
    ),
    "text that is not JSON is quoted": (
        b"upstream connect error",
        ("", "upstream connect error", None),
    ),
    "JSON that is not an object": (b"[1]", ("", "", None)),
}


@pytest.mark.parametrize(
    ("body", "expected"), list(STATUS_BODIES.values()), ids=list(STATUS_BODIES)
)
def test_refusals_read_reason_message_and_retry_time_from_the_status(
    body: bytes, expected: tuple[str, str, float | None]
) -> None:
    assert kube._status_reason(body) == expected


RETRY_HEADERS = {
    "seconds": ("10", 10.0),
    "an HTTP date is not read": ("Wed, 21 Oct 2015 07:28:00 GMT", None),
    "zero": ("0", None),
    "missing": (None, None),
}


@pytest.mark.parametrize(
    ("header", "expected"), list(RETRY_HEADERS.values()), ids=list(RETRY_HEADERS)
)
def test_a_retry_after_header_is_read_as_seconds(
    header: str | None, expected: float | None
) -> None:
    assert kube._seconds(header) == expected
