"""End to end on both backends: kubectl -> the API server -> real TLS webhooks -> kubectl's output.

A mutating webhook injects a scheduling gate (as queuetree's pod webhook does) and a validating
webhook refuses pods of a closed queue with 403; kubectl prints the `Warning:` lines and the
denial as kube-apiserver words them. The webhooks are registered by `clientConfig.url`
(https://127.0.0.1:PORT), which both kubesim and a real kube-apiserver on this machine reach;
service references are covered in-process (test_admission_webhooks.py).

The CEL `matchConditions` of queuetree's shipped pod webhooks decide which pods reach the
webhook, on kubesim exactly as on kube-apiserver.
"""

from __future__ import annotations

import asyncio
import copy
import json
import pathlib
import socket
from typing import Any, NamedTuple

import pytest
import yaml

from tests.kubesim import conftest
from tests.kubesim import test_admission_webhooks as webhooks
from tests.kubesim.conftest import PODS, Api, call

webhook_server = webhooks.webhook_server

GATE = "queuetree.io/admission"
SHIPPED = (
    pathlib.Path(__file__).resolve().parents[2]
    / "manifests"
    / "base"
    / "cluster"
    / "webhook-configurations.yaml"
)


def inject_gate(review: dict[str, Any]) -> dict[str, Any]:
    pod = review["request"]["object"]
    if GATE in [g["name"] for g in pod["spec"].get("schedulingGates") or []]:
        return webhooks.allow(review)
    operation = (
        {"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": GATE}}
        if pod["spec"].get("schedulingGates")
        else {"op": "add", "path": "/spec/schedulingGates", "value": [{"name": GATE}]}
    )
    return webhooks.allow(
        review,
        warnings=[f"gate {GATE} added: queue admission decides"],
        **webhooks.json_patch(operation),
    )


def refuse_closed_queues(review: dict[str, Any]) -> dict[str, Any]:
    queue = review["request"]["object"]["metadata"].get("labels", {}).get("queue")
    if queue == "closed":
        return webhooks.deny(
            review, {"code": 403, "reason": "Forbidden", "message": f'queue "{queue}" is closed'}
        )
    return webhooks.allow(review, warnings=[f'queue "{queue}" has room'])


def url(server: webhooks.WebhookServer, path: str, *, port: int | None = None) -> str:
    return f"https://127.0.0.1:{port or server.port}{path}"


def configuration(
    kind: str, name: str, path: str, server: webhooks.WebhookServer, **overrides: Any
) -> dict[str, Any]:
    """A configuration of one webhook on pods CREATE in the test's namespaces, for pods with
    a `queue` label, reaching `path` of the test server by URL."""
    hook = webhooks.hook(f"{name}.queuetree.io", path, server)
    hook["clientConfig"] = {"url": url(server, path), "caBundle": server.ca.ca_bundle}
    hook["objectSelector"] = {"matchExpressions": [{"key": "queue", "operator": "Exists"}]}
    hook.update(overrides)
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name},
        "webhooks": [hook],
    }


def pod_body(name: str, queue: str, **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"queue": queue}, **metadata},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }


def pod_manifest(name: str, queue: str) -> str:
    return json.dumps(pod_body(name, queue))


async def apply(api: Api, *configurations: dict[str, Any]) -> None:
    for manifest in configurations:
        applied = await asyncio.to_thread(
            api.kubectl, "apply", "-f", "-", input=json.dumps(manifest)
        )
        assert applied.returncode == 0, applied.stderr


async def until_called(api: Api, server: webhooks.WebhookServer, *paths: str) -> None:
    """Wait until a dry-run pod reaches every one of `paths`, then forget those calls.

    kubesim uses a configuration from the write on; kube-apiserver once its informer has
    seen it, a moment later (kubesim/README.md)."""

    async def reached() -> bool:
        probe = pod_body("probe", "probe")
        await call(api, "POST", PODS, probe, params={"dryRun": "All"})
        return all(server.calls[p] for p in paths)

    await conftest.wait_for(reached)
    for path in paths:
        server.calls[path].clear()
        server.queries[path].clear()


@pytest.fixture
async def cluster(api: Api, webhook_server: webhooks.WebhookServer) -> Api:
    webhook_server.answer("/mutate-pods", inject_gate)
    webhook_server.answer("/validate-pods", refuse_closed_queues)
    await apply(
        api,
        configuration("MutatingWebhookConfiguration", "gates", "/mutate-pods", webhook_server),
        configuration("ValidatingWebhookConfiguration", "queues", "/validate-pods", webhook_server),
    )
    await until_called(api, webhook_server, "/mutate-pods", "/validate-pods")
    return api


async def test_kubectl_creates_a_pod_that_a_tls_webhook_gated_and_prints_the_warnings(
    cluster: Api, webhook_server: webhooks.WebhookServer
) -> None:
    created = await asyncio.to_thread(
        cluster.kubectl, "create", "-f", "-", input=pod_manifest("p1", "q1")
    )

    assert (created.returncode, created.stdout, created.stderr) == (
        0,
        "pod/p1 created\n",
        f'Warning: gate {GATE} added: queue admission decides\nWarning: queue "q1" has room\n',
    )
    shown = await asyncio.to_thread(cluster.kubectl, "get", "pod", "p1", "-o", "json")
    pod = json.loads(shown.stdout)
    scheduled = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert pod["spec"]["schedulingGates"] == [{"name": GATE}]
    assert [(c["status"], c["reason"]) for c in scheduled] == [("False", "SchedulingGated")]
    listed = await asyncio.to_thread(cluster.kubectl, "get", "pods", "--no-headers")
    assert listed.stdout.split()[:3] == ["p1", "0/1", "SchedulingGated"]
    # The validating webhook saw the pod as mutated, gate included.
    [review] = webhook_server.calls["/validate-pods"]
    request = review["request"]
    assert request["object"]["spec"]["schedulingGates"] == [{"name": GATE}]
    assert webhook_server.queries["/validate-pods"] == [{"timeout": "10s"}]
    # The same request on both backends: kubectl's certificate (real) and any token (kubesim)
    # are the administrator.
    assert sorted(request) == [
        "dryRun",
        "kind",
        "name",
        "namespace",
        "object",
        "oldObject",
        "operation",
        "options",
        "requestKind",
        "requestResource",
        "resource",
        "uid",
        "userInfo",
    ]
    user = request["userInfo"]
    # kube-apiserver adds extra["authentication.kubernetes.io/credential-id"] (kubesim/README.md).
    assert (
        {k: user[k] for k in ("username", "groups")},
        request["options"],
        request["dryRun"],
    ) == (
        {"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]},
        {
            "apiVersion": "meta.k8s.io/v1",
            "kind": "CreateOptions",
            "fieldManager": "kubectl-create",
            "fieldValidation": "Strict",
        },
        False,
    )


async def test_kubectl_prints_a_webhook_denial_as_kube_apiserver_words_it(cluster: Api) -> None:
    created = await asyncio.to_thread(
        cluster.kubectl, "create", "-f", "-", input=pod_manifest("p2", "closed")
    )

    assert created.returncode == 1
    assert created.stderr.splitlines()[-1] == (
        'Error from server (Forbidden): error when creating "STDIN": admission webhook '
        '"queues.queuetree.io" denied the request: queue "closed" is closed'
    )
    missing = await asyncio.to_thread(cluster.kubectl, "get", "pod", "p2")
    assert 'pods "p2" not found' in missing.stderr


def closed_port() -> int:
    """A loopback port that nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_a_webhook_on_pods_resize_sees_kubectls_resize_and_one_on_pods_does_not(
    api: Api, webhook_server: webhooks.WebhookServer
) -> None:
    refusal = {"code": 403, "reason": "Forbidden", "message": "no growing"}
    webhook_server.answer("/resize", lambda review: webhooks.deny(review, refusal))
    webhook_server.answer("/pods", webhooks.allow)
    on_resize, on_pods = (
        configuration("ValidatingWebhookConfiguration", name, f"/{name}", webhook_server)
        for name in ("resize", "pods")
    )
    on_resize["webhooks"][0]["rules"][0].update(operations=["UPDATE"], resources=["pods/resize"])
    on_pods["webhooks"][0]["rules"][0].update(operations=["UPDATE"])
    await apply(api, on_resize, on_pods)
    body = pod_body("p1", "q1")
    body["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "100m"}}
    assert (await call(api, "POST", PODS, body)).status == 201
    patch = {"spec": {"containers": [{"name": "main", "resources": {"requests": {"cpu": "2"}}}]}}

    async def refused() -> bool:
        # kube-apiserver uses a new configuration once its informer has seen it.
        resized = await asyncio.to_thread(
            api.kubectl, "patch", "pod", "p1", "--subresource=resize", "-p", json.dumps(patch)
        )
        return resized.returncode != 0

    await conftest.wait_for(refused)
    resized = await asyncio.to_thread(
        api.kubectl, "patch", "pod", "p1", "--subresource=resize", "-p", json.dumps(patch)
    )
    request = webhook_server.calls["/resize"][-1]["request"]
    assert (
        resized.stderr.strip(),
        request["subResource"],
        request["operation"],
        request["oldObject"]["spec"]["containers"][0]["resources"],
        request["object"]["spec"]["containers"][0]["resources"],
        webhook_server.calls["/pods"],
    ) == (
        'Error from server (Forbidden): admission webhook "resize.queuetree.io" denied the '
        "request: no growing",
        "resize",
        "UPDATE",
        {"requests": {"cpu": "100m"}},
        {"requests": {"cpu": "2"}},
        [],
    )


async def test_kubectl_reports_an_unreachable_webhook_as_an_internal_error(
    cluster: Api, webhook_server: webhooks.WebhookServer
) -> None:
    nowhere = url(webhook_server, "/validate-pods", port=closed_port())
    broken = configuration(
        "ValidatingWebhookConfiguration", "broken", "/validate-pods", webhook_server
    )
    broken["webhooks"][0]["clientConfig"]["url"] = nowhere
    await apply(cluster, broken)

    async def refused() -> bool:
        answer = await call(
            cluster, "POST", PODS, pod_body("probe", "q1"), params={"dryRun": "All"}
        )
        return answer.status == 500

    await conftest.wait_for(refused)
    created = await asyncio.to_thread(
        cluster.kubectl, "create", "-f", "-", input=pod_manifest("p3", "q1")
    )

    assert created.returncode == 1
    last = created.stderr.splitlines()[-1]
    prefix = (
        'Error from server (InternalError): error when creating "STDIN": Internal error occurred: '
        f'failed calling webhook "broken.queuetree.io": failed to call webhook: Post '
        f'"{nowhere}?timeout=10s": '
    )
    # Then the dialer's words: Go's "dial tcp 127.0.0.1:P: connect: connection refused", and
    # aiohttp's own on kubesim (kubesim/README.md).
    assert (last[: len(prefix)], "onnect" in last[len(prefix) :]) == (prefix, True)


def shipped_pod_webhook(name: str) -> tuple[str, dict[str, Any]]:
    """queuetree's pod webhook ``name`` as shipped (its matchConditions and namespaceSelector)
    and the kind of its configuration."""
    for document in yaml.safe_load_all(SHIPPED.read_text()):
        for hook in document["webhooks"]:
            if hook["name"] == name:
                return document["kind"], copy.deepcopy(hook)
    raise AssertionError(f"{SHIPPED} has no webhook {name}")


OPT_IN = "scheduling.volcano.sh/queue-allocation-gate"
RECORD = "scheduling.queuetree.io/admitted-queue"
MUTATE, VALIDATE = "mutatepod.volcano.sh", "validatepod.volcano.sh"
BOTH = (MUTATE, VALIDATE)


class MatchCase(NamedTuple):
    metadata: Any
    gates: Any
    reaches: Any
    """The shipped per-pod webhooks that are called for the pod's creation."""


MATCH_CASES = {
    "a pod with the opt-in annotation reaches the webhooks": MatchCase(
        metadata={"annotations": {OPT_IN: "true"}},
        gates=(),
        reaches=BOTH,
    ),
    "the annotation's value does not matter": MatchCase(
        metadata={"annotations": {OPT_IN: "false"}}, gates=(), reaches=BOTH
    ),
    "a pod carrying the queue gate reaches the webhooks": MatchCase(
        metadata={}, gates=(OPT_IN,), reaches=BOTH
    ),
    "a pod created with the admission record reaches the validating webhook": MatchCase(
        metadata={"annotations": {RECORD: "default"}}, gates=(), reaches=(VALIDATE,)
    ),
    "a pod with other annotations does not": MatchCase(
        metadata={"annotations": {"a": "b"}}, gates=(), reaches=()
    ),
    "a pod with another gate does not": MatchCase(
        metadata={}, gates=("example.com/other",), reaches=()
    ),
    "a pod with neither does not": MatchCase(metadata={}, gates=(), reaches=()),
}


@pytest.mark.parametrize("webhook", BOTH)
@pytest.mark.parametrize(
    ("metadata", "gates", "reaches"), MATCH_CASES.values(), ids=MATCH_CASES.keys()
)
async def test_the_shipped_match_conditions_decide_which_pods_reach_the_pod_webhook(
    api: Api,
    webhook_server: webhooks.WebhookServer,
    webhook: str,
    metadata: dict[str, Any],
    gates: tuple[str, ...],
    reaches: tuple[str, ...],
) -> None:
    webhook_server.answer("/shipped", webhooks.allow)
    webhook_server.answer("/probe", webhooks.allow)
    kind, hook = shipped_pod_webhook(webhook)
    hook["clientConfig"] = {
        "url": url(webhook_server, "/shipped"),
        "caBundle": webhook_server.ca.ca_bundle,
    }
    # A second webhook without conditions tells when the configuration is in effect.
    probe = configuration(kind, "probe", "/probe", webhook_server)
    await apply(
        api,
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": kind,
            "metadata": {"name": "shipped"},
            "webhooks": [hook, *probe["webhooks"]],
        },
    )
    await until_called(api, webhook_server, "/probe")
    webhook_server.calls["/shipped"].clear()
    body = pod_body("p1", "q1", **metadata)
    if gates:
        body["spec"]["schedulingGates"] = [{"name": g} for g in gates]

    created = await call(api, "POST", PODS, body)

    assert created.status == 201, created.body
    assert (
        [r["request"]["name"] for r in webhook_server.calls["/shipped"]],
        len(webhook_server.calls["/probe"]),
    ) == (
        ["p1"] if webhook in reaches else [],
        1,
    )


class FailureCase(NamedTuple):
    policy: Any
    expected_status: Any


FAILURE_CASES = {
    "a condition that cannot be evaluated fails the request under Fail": FailureCase(
        policy="Fail", expected_status=403
    ),
    "and skips the webhook under Ignore": FailureCase(policy="Ignore", expected_status=201),
}


@pytest.mark.parametrize(
    ("policy", "expected_status"), FAILURE_CASES.values(), ids=FAILURE_CASES.keys()
)
async def test_a_match_condition_that_fails_to_evaluate_follows_the_failure_policy(
    api: Api, webhook_server: webhooks.WebhookServer, policy: str, expected_status: int
) -> None:
    webhook_server.answer("/cel", webhooks.allow)
    webhook_server.answer("/probe", webhooks.allow)
    failing = configuration(
        "ValidatingWebhookConfiguration",
        "cel",
        "/cel",
        webhook_server,
        failurePolicy=policy,
        objectSelector={"matchLabels": {"queue": "q1"}},  # not the probes (queue=probe)
        # A missing map key is an evaluation error (no such key), not false.
        matchConditions=[
            {"name": "missing-key", "expression": "object.metadata.labels['absent'] == 'x'"}
        ],
    )
    probe = configuration("ValidatingWebhookConfiguration", "probe", "/probe", webhook_server)
    failing["webhooks"].extend(probe["webhooks"])
    await apply(api, failing)
    await until_called(api, webhook_server, "/probe")

    created = await call(api, "POST", PODS, pod_body("p1", "q1"))

    assert (created.status, webhook_server.calls["/cel"]) == (expected_status, []), created.body
    if expected_status == 403:
        assert (created.body["reason"], created.body["message"]) == (
            "Forbidden",
            "pods \"p1\" is forbidden: expression 'object.metadata.labels['absent'] == 'x'' "
            "resulted in error: no such key: absent",
        )


async def test_a_match_condition_that_does_not_compile_is_refused(
    api: Api, webhook_server: webhooks.WebhookServer
) -> None:
    broken = configuration(
        "ValidatingWebhookConfiguration",
        "cel",
        "/cel",
        webhook_server,
        matchConditions=[{"name": "broken", "expression": "object.metadata.name =="}],
    )
    answer = await call(
        api, "POST", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations", broken
    )
    [cause] = answer.body["details"]["causes"]
    assert (answer.status, cause["field"]) == (422, "webhooks[0].matchConditions[0].expression")
    assert cause["message"].startswith(
        'Invalid value: "object.metadata.name ==": compilation failed: ERROR: <input>:1:'
    ), cause["message"]
