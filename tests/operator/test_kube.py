"""The API boundary: refused requests become ApiError with status and reason; the rate limit."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import pathlib
from collections.abc import Iterator
from typing import Any, NamedTuple

import pytest
from kubernetes_asyncio import config

from kubesim import harness
from queuetree.operator import explaining, kube, writing
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
        stale = writing.build_gate_removal_patch(
            fakes.pod("p", namespace="default", uid="old"), queue="default"
        )
        assert stale is not None
        outcomes = []
        for namespace, name in (("default", "missing"), ("default", "p")):
            try:
                await writes.patch_pod(namespace, name, stale)
            except kube.ApiError as error:
                outcomes.append((error.status, error.reason))
        fresh = writing.build_gate_removal_patch(
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


class ProxyCase(NamedTuple):
    environ: Any
    url: Any
    expected: Any


PROXY_CASES = {
    "no proxy variables": ProxyCase(environ={}, url="https://10.0.0.1:6443", expected=None),
    "HTTPS_PROXY for an https server": ProxyCase(
        environ={"HTTPS_PROXY": "http://proxy:3128"},
        url="https://10.0.0.1:6443",
        expected="http://proxy:3128",
    ),
    "HTTP_PROXY does not apply to https": ProxyCase(
        environ={"HTTP_PROXY": "http://proxy:3128"},
        url="https://10.0.0.1:6443",
        expected=None,
    ),
    "NO_PROXY names the host": ProxyCase(
        environ={"HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": "localhost,10.0.0.1"},
        url="https://10.0.0.1:6443",
        expected=None,
    ),
    "NO_PROXY names the domain": ProxyCase(
        environ={"HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": ".svc.cluster.local"},
        url="https://kubernetes.default.svc.cluster.local",
        expected=None,
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
    patch = writing.build_gate_removal_patch(held, queue="default")
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


class StatusBodiesCase(NamedTuple):
    body: Any
    expected: Any


STATUS_BODIES = {
    "a Status with retryAfterSeconds (kube-apiserver's disruption-budget 429)": StatusBodiesCase(
        body=b'{"kind":"Status","reason":"TooManyRequests","message":"Cannot evict pod",'
        b'"details":{"retryAfterSeconds":10}}',
        expected=("TooManyRequests", "Cannot evict pod", 10.0),
    ),
    "retryAfterSeconds 0 (a budget not observed yet) names no time": StatusBodiesCase(
        body=b'{"reason":"TooManyRequests","message":"m","details":{"retryAfterSeconds":0}}',
        expected=("TooManyRequests", "m", None),
    ),
    "a Status without details": StatusBodiesCase(
        body=b'{"reason":"Invalid","message":"m"}', expected=("Invalid", "m", None)
    ),
    "a number that is not one": StatusBodiesCase(
        body=b'{"reason":"r","message":"m","details":{"retryAfterSeconds":true}}',
        expected=("r", "m", None),
    ),
    "text that is not JSON is quoted": StatusBodiesCase(
        body=b"upstream connect error",
        expected=("", "upstream connect error", None),
    ),
    "JSON that is not an object": StatusBodiesCase(body=b"[1]", expected=("", "", None)),
}


@pytest.mark.parametrize(
    ("body", "expected"), list(STATUS_BODIES.values()), ids=list(STATUS_BODIES)
)
def test_refusals_read_reason_message_and_retry_time_from_the_status(
    body: bytes, expected: tuple[str, str, float | None]
) -> None:
    assert kube._status_reason(body) == expected


class RetryHeadersCase(NamedTuple):
    header: Any
    expected: Any


RETRY_HEADERS = {
    "seconds": RetryHeadersCase(header="10", expected=10.0),
    "an HTTP date is not read": RetryHeadersCase(
        header="Wed, 21 Oct 2015 07:28:00 GMT", expected=None
    ),
    "zero": RetryHeadersCase(header="0", expected=None),
    "missing": RetryHeadersCase(header=None, expected=None),
}


@pytest.mark.parametrize(
    ("header", "expected"), list(RETRY_HEADERS.values()), ids=list(RETRY_HEADERS)
)
def test_a_retry_after_header_is_read_as_seconds(
    header: str | None, expected: float | None
) -> None:
    assert kube._seconds(header) == expected


class Sent(NamedTuple):
    method: str
    path: str
    content_type: str
    body: Any


class WriteCase(NamedTuple):
    call: Any
    expected: Any
    accept: str = "application/json"


WRITES = {
    "a gate removal is a JSON patch of the pod": WriteCase(
        call=lambda api: api.patch_pod("team-a", "p-1", [{"op": "remove", "path": "/x"}]),
        expected=Sent(
            "PATCH",
            "/api/v1/namespaces/team-a/pods/p-1",
            "application/json-patch+json",
            [{"op": "remove", "path": "/x"}],
        ),
        accept=kube.METADATA_ONLY,
    ),
    "an annotation is a merge patch; None removes one": WriteCase(
        call=lambda api: api.annotate_pod("team-a", "p-1", {"a": "b", "c": None}),
        expected=Sent(
            "PATCH",
            "/api/v1/namespaces/team-a/pods/p-1",
            "application/merge-patch+json",
            {"metadata": {"annotations": {"a": "b", "c": None}}},
        ),
        accept=kube.METADATA_ONLY,
    ),
    "an eviction is created under the pod": WriteCase(
        call=lambda api: api.evict_pod("team-a", "p-1"),
        expected=Sent(
            "POST",
            "/api/v1/namespaces/team-a/pods/p-1/eviction",
            "application/json",
            {
                "apiVersion": "policy/v1",
                "kind": "Eviction",
                "metadata": {"name": "p-1", "namespace": "team-a"},
            },
        ),
    ),
    "a queue is created cluster-wide": WriteCase(
        call=lambda api: api.create_queue({"metadata": {"name": "default"}}),
        expected=Sent(
            "POST",
            "/apis/scheduling.volcano.sh/v1beta1/queues",
            "application/json",
            {"metadata": {"name": "default"}},
        ),
    ),
    "a queue's spec is a merge patch of the queue": WriteCase(
        call=lambda api: api.patch_queue("org", {"spec": {"parent": "root"}}),
        expected=Sent(
            "PATCH",
            "/apis/scheduling.volcano.sh/v1beta1/queues/org",
            "application/merge-patch+json",
            {"spec": {"parent": "root"}},
        ),
    ),
    "a queue's status goes to its status subresource": WriteCase(
        call=lambda api: api.patch_queue_status("org", {"status": {"state": "Open"}}),
        expected=Sent(
            "PATCH",
            "/apis/scheduling.volcano.sh/v1beta1/queues/org/status",
            "application/merge-patch+json",
            {"status": {"state": "Open"}},
        ),
    ),
    "a pod group's status goes to its status subresource": WriteCase(
        call=lambda api: api.patch_pod_group_status("ns", "pg", {"status": {"phase": "Inqueue"}}),
        expected=Sent(
            "PATCH",
            "/apis/scheduling.volcano.sh/v1beta1/namespaces/ns/podgroups/pg/status",
            "application/merge-patch+json",
            {"status": {"phase": "Inqueue"}},
        ),
    ),
    "an event is created in its namespace": WriteCase(
        call=lambda api: api.create_event("ns", {"reason": "Held"}),
        expected=Sent(
            "POST", "/api/v1/namespaces/ns/events", "application/json", {"reason": "Held"}
        ),
    ),
    "a name that is not a DNS name cannot change the path's shape": WriteCase(
        call=lambda api: api.annotate_pod("a/b", "../c?d", {}),
        expected=Sent(
            "PATCH",
            "/api/v1/namespaces/a%2Fb/pods/..%2Fc%3Fd",
            "application/merge-patch+json",
            {"metadata": {"annotations": {}}},
        ),
        accept=kube.METADATA_ONLY,
    ),
}


class Recorder:
    """An API server that records each request and answers it with ``answer``."""

    def __init__(self) -> None:
        self.requests: list[tuple[Sent, dict[str, str]]] = []
        self.answer: tuple[int, Any, dict[str, str]] = (200, {"kind": "Pod"}, {})
        self.stall = False
        self.url = ""

    async def handle(self, request: Any) -> Any:
        from aiohttp import web

        body = await request.read()
        self.requests.append(
            (
                Sent(
                    request.method,
                    request.raw_path,
                    request.headers.get("Content-Type", ""),
                    json.loads(body),
                ),
                dict(request.headers),
            )
        )
        if self.stall:
            await asyncio.Event().wait()
        status, answer, headers = self.answer
        return web.json_response(answer, status=status, headers=headers)


@pytest.fixture
async def recorder(aiohttp_server: Any) -> Any:
    from aiohttp import web

    recorder = Recorder()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", recorder.handle)
    server = await aiohttp_server(app)
    recorder.url = str(server.make_url("")).rstrip("/")
    return recorder


def _client(url: str, token: str = "t0") -> Any:
    from kubernetes_asyncio import client

    configuration = client.Configuration(host=url)
    configuration.api_key = {"BearerToken": token}
    configuration.api_key_prefix = {"BearerToken": "Bearer"}
    return client.ApiClient(configuration)


@pytest.mark.parametrize(("call", "expected", "accept"), WRITES.values(), ids=WRITES)
async def test_each_write_sends_its_method_path_content_type_and_body(
    recorder: Recorder, call: Any, expected: Sent, accept: str
) -> None:
    async with _client(recorder.url) as api_client:
        kube.tune_client(api_client)
        await call(kube.AsyncKube(api_client, limiter=kube.RateLimiter(qps=0, burst=1)))
    [(sent, headers)] = recorder.requests
    assert sent == expected
    assert (headers["Authorization"], headers["Accept"], headers["User-Agent"]) == (
        "Bearer t0",
        accept,
        api_client.user_agent,
    )


async def test_the_credentials_are_read_for_each_request_so_a_rotated_token_is_sent(
    recorder: Recorder,
) -> None:
    """In a cluster the service-account token file is re-read by the client's refresh hook
    (kubernetes-asyncio's in-cluster loader sets one): every write runs it."""
    tokens = iter(["first", "second"])

    def refresh(configuration: Any) -> None:
        configuration.api_key["BearerToken"] = next(tokens)

    async with _client(recorder.url) as api_client:
        api_client.configuration.refresh_api_key_hook = refresh
        api = kube.AsyncKube(api_client, limiter=kube.RateLimiter(qps=0, burst=1))
        await api.annotate_pod("ns", "p", {"a": "1"})
        await api.annotate_pod("ns", "p", {"a": "2"})
    assert [headers["Authorization"] for _, headers in recorder.requests] == [
        "Bearer first",
        "Bearer second",
    ]


class FailureCase(NamedTuple):
    answer: Any
    stall: Any
    expected: Any


FAILURES = {
    "a refusal carries the Status's reason, message and retry time": FailureCase(
        answer=(
            429,
            {"reason": "TooManyRequests", "message": "budget", "details": {"retryAfterSeconds": 3}},
            {},
        ),
        stall=False,
        expected=(429, "TooManyRequests", "budget", 3.0),
    ),
    "else the Retry-After header's seconds": FailureCase(
        answer=(503, {"reason": "ServiceUnavailable"}, {"Retry-After": "7"}),
        stall=False,
        expected=(503, "ServiceUnavailable", "", 7.0),
    ),
    "no answer within the timeout is status 0": FailureCase(
        answer=(200, {}, {}), stall=True, expected=(0, "TimeoutError", "", None)
    ),
}


@pytest.mark.parametrize(("answer", "stall", "expected"), FAILURES.values(), ids=FAILURES)
async def test_a_failed_write_is_an_api_error_and_is_counted(
    recorder: Recorder, answer: Any, stall: bool, expected: Any
) -> None:
    recorder.answer, recorder.stall = answer, stall
    errors: list[tuple[str, int]] = []
    async with _client(recorder.url) as api_client:
        api = kube.AsyncKube(
            api_client,
            limiter=kube.RateLimiter(qps=0, burst=1),
            on_error=lambda verb, status: errors.append((verb, status)),
            # Short only where the test waits for it: an answer must never miss it on a
            # loaded machine.
            timeout=0.5 if stall else 30,
        )
        with pytest.raises(kube.ApiError) as raised:
            await api.evict_pod("ns", "p")
    error = raised.value
    assert (error.status, error.reason, error.message, error.retry_after) == expected
    assert errors == [("create", expected[0])]
