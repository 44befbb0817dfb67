"""The aiohttp server: the review routes answer exactly what ``reviewing.review`` and
``queuetree review`` answer, health and readiness, metrics, limits, the cache retry."""

from __future__ import annotations

import asyncio
import io
import json
import pathlib
from collections.abc import Iterable
from typing import Any

import pytest
import yaml
from aiohttp import web
from aiohttp.test_utils import TestClient

from queuetree import cli
from queuetree.webhooks import listening, reviewing, server, settings, views
from tests.webhooks.builders import GATE, PODS, cluster, pod, queue, review

QUEUES = [
    queue("root"),
    queue("team", "root", deserved={"cpu": "8"}, guarantee={"cpu": "8"}),
    queue("a", "team", deserved={"cpu": "6"}, guarantee={"cpu": "6"}),
]
REQUESTS = [
    pytest.param(
        "/queues/validate",
        review("CREATE", queue("b", "team", deserved={"cpu": "4"}, guarantee={"cpu": "4"})),
        id="queue-denied",
    ),
    pytest.param("/queues/validate", review("CREATE", queue("c", "root")), id="queue-allowed"),
    pytest.param("/queues/mutate", review("CREATE", queue("d")), id="queue-defaults"),
    pytest.param(
        "/pods/mutate",
        review("CREATE", pod(annotations={GATE: "true"}), resource=PODS, namespace="default"),
        id="pod-gated",
    ),
    pytest.param(
        "/pods/validate",
        review(
            "CREATE",
            pod(annotations={GATE: "true", "scheduling.volcano.sh/queue-name": "team"}),
            resource=PODS,
            namespace="default",
        ),
        id="pod-denied",
    ),
]


async def client_for(
    aiohttp_client: Any, source: server.ViewSource, **kwargs: Any
) -> TestClient[web.Request, web.Application]:
    app = server.build_app(source=source, settings=settings.ReviewSettings(), **kwargs)
    client: TestClient[web.Request, web.Application] = await aiohttp_client(app)
    return client


@pytest.mark.parametrize(("path", "body"), REQUESTS)
async def test_the_server_and_queuetree_review_answer_byte_for_byte_alike(
    aiohttp_client: Any,
    tmp_path: pathlib.Path,
    capsysbinary: pytest.CaptureFixture[bytes],
    path: str,
    body: dict[str, Any],
) -> None:
    client = await client_for(aiohttp_client, server.StaticSource(cluster(*QUEUES)))
    response = await client.post(path, json=body)
    served = await response.read()
    (tmp_path / "review.json").write_text(json.dumps(body))
    (tmp_path / "queues.yaml").write_text(yaml.safe_dump_all(QUEUES))
    code = cli.main(
        [
            "review",
            "--path",
            path,
            "-f",
            str(tmp_path / "review.json"),
            "--queues",
            str(tmp_path / "queues.yaml"),
        ]
    )
    printed = capsysbinary.readouterr().out
    direct = reviewing.review(
        path,
        json.dumps(body).encode(),
        view=cluster(*QUEUES),
        settings=settings.ReviewSettings(),
    )
    assert (response.status, code, served, printed) == (200, 0, direct.body, direct.body)


async def test_queuetree_review_takes_the_webhook_flags(
    tmp_path: pathlib.Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    body = review("CREATE", pod(annotations={GATE: "true"}), resource=PODS, namespace="default")
    (tmp_path / "review.json").write_text(json.dumps(body))
    argv = ["review", "--path", "/pods/mutate", "-f", str(tmp_path / "review.json")]
    cli.main([*argv, "--feature-gates=SchedulingGatesQueueAdmission=false"])
    response = json.loads(capsysbinary.readouterr().out)["response"]
    assert "patch" not in response


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param(None, "cannot read", id="missing-file"),
        pytest.param("{not json", "not valid JSON", id="not-json"),
        pytest.param('{"kind": "Pod"}', "not a usable AdmissionReview", id="not-a-review"),
    ],
)
def test_queuetree_review_exits_2_when_the_input_cannot_be_read(
    tmp_path: pathlib.Path,
    capsys: pytest.CaptureFixture[str],
    content: str | None,
    message: str,
) -> None:
    path = tmp_path / "review.json"
    if content is not None:
        path.write_text(content)
    code = cli.main(["review", "--path", "/queues/validate", "-f", str(path)])
    captured = capsys.readouterr()
    assert (code, captured.out, message in captured.err) == (2, "", True)


class SlowSource:
    """A cache that learns about queue ``late`` only after a review asked for it."""

    def __init__(self) -> None:
        self.current = cluster(*QUEUES)
        self.waited: list[str] = []

    def view(self) -> views.ClusterView:
        return self.current

    def ready(self) -> bool:
        return False

    async def wait_for(
        self, *, queues: Iterable[str], namespaces: Iterable[str], patience: float
    ) -> bool:
        self.waited += list(queues)
        self.current = cluster(*QUEUES, queue("late", "root"))
        return True

    async def confirm_absent(self, *, queues: Iterable[str]) -> bool:
        self.read += list(queues)
        return not set(queues) & {"late"}

    read: list[str]


async def test_a_queue_missing_from_the_cache_is_waited_for_once(aiohttp_client: Any) -> None:
    source = SlowSource()
    source.read = []
    client = await client_for(aiohttp_client, source)
    response = await client.post("/queues/validate", json=review("CREATE", queue("x", "late")))
    answered = (await response.json())["response"]
    assert (answered["allowed"], source.read, source.waited) == (True, ["late"], ["late"])


async def test_a_queue_under_a_parent_that_does_not_exist_is_refused_without_waiting(
    aiohttp_client: Any,
) -> None:
    """One live read says the parent does not exist: nothing to wait for (issue 35)."""
    source = SlowSource()
    source.read = []
    client = await client_for(aiohttp_client, source)
    response = await client.post("/queues/validate", json=review("CREATE", queue("x", "gone")))
    answered = (await response.json())["response"]
    text = await (await client.get("/metrics")).text()
    assert (answered["allowed"], source.read, source.waited) == (False, ["gone"], [])
    assert 'queuetree_webhook_cache_misses_total{outcome="absent"} 1.0' in text


async def test_readyz_waits_for_the_cache_and_healthz_does_not(aiohttp_client: Any) -> None:
    client = await client_for(aiohttp_client, SlowSource())
    health, ready = await client.get("/healthz"), await client.get("/readyz")
    assert (health.status, ready.status, await ready.text()) == (
        200,
        503,
        "not ready: caches not synced\n",
    )


async def test_readyz_waits_for_a_certificate(aiohttp_client: Any) -> None:
    loaded = asyncio.Event()
    client = await client_for(aiohttp_client, server.StaticSource(), certificate_loaded=loaded)
    before = (await client.get("/readyz")).status
    loaded.set()
    after = (await client.get("/readyz")).status
    assert (before, after) == (503, 200)


async def test_readyz_fails_while_shutting_down(aiohttp_client: Any) -> None:
    stopping = asyncio.Event()
    client = await client_for(aiohttp_client, server.StaticSource(), stopping=stopping)
    before = (await client.get("/readyz")).status
    stopping.set()
    after = await client.get("/readyz")
    assert (before, after.status, await after.text()) == (
        200,
        503,
        "not ready: shutting down\n",
    )


async def test_metrics_count_reviews_by_endpoint_and_outcome(aiohttp_client: Any) -> None:
    client = await client_for(aiohttp_client, server.StaticSource(cluster(*QUEUES)))
    for path, body in [
        ("/queues/validate", review("CREATE", queue("c", "root"))),
        ("/queues/validate", review("CREATE", queue("c", "c"))),
        ("/pods/mutate", review("CREATE", pod(annotations={GATE: "true"}), resource=PODS)),
    ]:
        await client.post(path, json=body)
    await client.post("/pods/mutate", data=b"nope")
    text = await (await client.get("/metrics")).text()
    lines = {
        line for line in text.splitlines() if line.startswith("queuetree_webhook_reviews_total")
    }
    assert lines == {
        'queuetree_webhook_reviews_total{endpoint="/queues/validate",outcome="allowed"} 1.0',
        'queuetree_webhook_reviews_total{endpoint="/queues/validate",outcome="denied"} 1.0',
        'queuetree_webhook_reviews_total{endpoint="/pods/mutate",outcome="patched"} 1.0',
        'queuetree_webhook_reviews_total{endpoint="/pods/mutate",outcome="rejected"} 1.0',
    }
    assert 'queuetree_webhook_review_duration_seconds_count{endpoint="/pods/mutate"} 2.0' in text


async def test_bodies_over_the_limit_get_413_as_a_status(aiohttp_client: Any) -> None:
    client = await client_for(aiohttp_client, server.StaticSource())
    limit = reviewing.BodyLimits().max_bytes
    response = await client.post("/pods/mutate", data=io.BytesIO(b" " * (limit + 1)))
    body = await response.json()
    assert (response.status, body["kind"], body["reason"]) == (
        413,
        "Status",
        "RequestEntityTooLarge",
    )


async def test_malformed_json_over_http_gets_400_with_a_status(aiohttp_client: Any) -> None:
    client = await client_for(aiohttp_client, server.StaticSource())
    response = await client.post("/queues/validate", data=b"{")
    body = await response.json()
    assert (response.status, body["kind"], body["reason"]) == (400, "Status", "BadRequest")


async def test_a_body_that_never_finishes_gets_408_instead_of_a_hang(
    aiohttp_client: Any,
) -> None:
    limits = listening.Limits(idle_timeout=0.2)
    client = await client_for(aiohttp_client, server.StaticSource(), limits=limits)
    reader, writer = await asyncio.open_connection(client.host, client.port)
    writer.write(b"POST /pods/mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
    await writer.drain()
    status_line = await asyncio.wait_for(reader.readline(), 5)
    writer.close()
    assert status_line.split()[1] == b"408"


@pytest.mark.parametrize(
    ("flags", "allowed"),
    [
        pytest.param([], False, id="protected-by-default"),
        pytest.param(["--enable-root-queue-protection=false"], True, id="equals-false"),
        pytest.param(["--enable-root-queue-protection", "false"], True, id="separate-value"),
        pytest.param(["--enable-root-queue-protection"], False, id="bare-flag-is-true"),
    ],
)
def test_queuetree_review_reads_boolean_flags_as_kubernetes_components_do(
    tmp_path: pathlib.Path,
    capsysbinary: pytest.CaptureFixture[bytes],
    flags: list[str],
    allowed: bool,
) -> None:
    body = review(
        "UPDATE",
        queue("root", capability={"cpu": "2"}),
        old=queue("root", capability={"cpu": "1"}),
    )
    (tmp_path / "review.json").write_text(json.dumps(body))
    argv = ["review", "--path", "/queues/validate", "-f", str(tmp_path / "review.json")]
    assert cli.main([*argv, *flags]) == 0
    assert json.loads(capsysbinary.readouterr().out)["response"]["allowed"] is allowed


def test_queuetree_review_reads_the_review_from_stdin(
    monkeypatch: pytest.MonkeyPatch, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    body = json.dumps(review("CREATE", queue("a"))).encode()
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(body)))
    assert cli.main(["review", "--path", "/queues/mutate", "-f", "-"]) == 0
    assert json.loads(capsysbinary.readouterr().out)["response"]["patchType"] == "JSONPatch"
