"""kubesim admission against real HTTPS webhooks on 127.0.0.1, with certificates from kubesim.certs.

Each test starts one aiohttp HTTPS server whose paths answer as the test says, registers webhook
configurations in an in-memory store, and drives `Admission.mutate`/`validate` directly, as the
API server will.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import copy
import dataclasses
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, NamedTuple

import pytest
from aiohttp import web

from kubesim import admission, certs
from queuetree.webhooks import listening

pytestmark = pytest.mark.kubesim_only(
    reason="drives kubesim.admission in-process, with service references that the test "
    "resolves to 127.0.0.1; test_admission_kubectl.py calls webhooks through both API servers"
)

SERVICE, SERVICE_NS = "hooks", "webhooks"

ResponderFn = Callable[[dict[str, Any], web.Request], Awaitable[dict[str, Any]]]


def allow(review: dict[str, Any], **response: Any) -> dict[str, Any]:
    """An AdmissionReview answer echoing the request's version and uid."""
    return {
        "apiVersion": review["apiVersion"],
        "kind": "AdmissionReview",
        "response": {"uid": review["request"]["uid"], "allowed": True, **response},
    }


def deny(
    review: dict[str, Any], status: dict[str, Any] | None = None, **response: Any
) -> dict[str, Any]:
    answer = allow(review, **response)
    answer["response"]["allowed"] = False
    if status is not None:
        answer["response"]["status"] = status
    return answer


def json_patch(*operations: dict[str, Any]) -> dict[str, Any]:
    return {
        "patchType": "JSONPatch",
        "patch": base64.b64encode(json.dumps(list(operations)).encode()).decode(),
    }


@dataclasses.dataclass
class WebhookServer:
    """An HTTPS webhook endpoint: `responders[path]` answers, `calls[path]` records requests."""

    port: int
    ca: certs.CertificateAuthority
    responders: dict[str, ResponderFn] = dataclasses.field(default_factory=dict[str, Any])
    calls: dict[str, list[dict[str, Any]]] = dataclasses.field(
        default_factory=lambda: collections.defaultdict(list)
    )
    queries: dict[str, list[dict[str, Any]]] = dataclasses.field(
        default_factory=lambda: collections.defaultdict(list)
    )

    def answer(self, path: str, responder: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        """Answer `path` with a plain function of the review."""

        async def respond(review: dict[str, Any], _: web.Request) -> dict[str, Any]:
            return responder(review)

        self.responders[path] = respond

    async def handle(self, request: web.Request) -> web.StreamResponse:
        review = await request.json()
        self.calls[request.path].append(review)
        self.queries[request.path].append(dict(request.query))
        return web.json_response(await self.responders[request.path](review, request))


UNTIMED = listening.Limits(
    header_timeout=3600.0, idle_timeout=3600.0, request_timeout=3600.0, keepalive_timeout=3600.0
)


@pytest.fixture
async def webhook_server() -> AsyncIterator[WebhookServer]:
    ca = certs.generate_ca()
    pair = certs.issue_serving_certificate(ca, service=SERVICE, namespace=SERVICE_NS)
    server = WebhookServer(port=0, ca=ca)
    app = web.Application()
    app.router.add_post("/{tail:.*}", server.handle)
    # queuetree's own listener, not aiohttp's site: stopping an aiohttp site leaves a
    # connection still in its TLS handshake open (asyncio's server does not close accepted
    # transports before Python 3.13, and aiohttp only tracks them from the handshake's end),
    # and one kube-apiserver opened just as a test ended was collected, unclosed, in a later
    # test, which the warnings filter made an error. Its timers are off: these handlers do not
    # report to them, and some tests hang on purpose.
    async with listening.listening(
        app,
        sock=listening.bind("127.0.0.1", 0),
        context=certs.server_ssl_context(pair),
        limits=UNTIMED,
    ) as port:
        server.port = port
        yield server


@dataclasses.dataclass
class Cluster:
    """The objects `list_objects` serves: configurations and namespaces."""

    objects: dict[tuple[str, str, str], list[dict[str, Any]]] = dataclasses.field(
        default_factory=lambda: collections.defaultdict(list)
    )

    def list_objects(self, group: str, version: str, plural: str) -> list[dict[str, Any]]:
        return copy.deepcopy(self.objects[(group, version, plural)])

    def add_namespace(self, name: str, labels: dict[str, str] | None = None) -> None:
        self.objects[("", "v1", "namespaces")].append(
            {
                "metadata": {
                    "name": name,
                    "labels": {"kubernetes.io/metadata.name": name, **(labels or {})},
                }
            }
        )

    def add_configuration(self, plural: str, name: str, *webhooks: dict[str, Any]) -> None:
        self.objects[(admission.ADMISSIONREGISTRATION, "v1", plural)].append(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "metadata": {"name": name},
                "webhooks": list(webhooks),
            }
        )

    def mutating(self, name: str, *webhooks: dict[str, Any]) -> None:
        self.add_configuration(admission.MUTATING_PLURAL, name, *webhooks)

    def validating(self, name: str, *webhooks: dict[str, Any]) -> None:
        self.add_configuration(admission.VALIDATING_PLURAL, name, *webhooks)


@pytest.fixture
def cluster() -> Cluster:
    cluster = Cluster()
    cluster.add_namespace("default")
    cluster.add_namespace("team-a", {"queuetree.io/enabled": "true"})
    return cluster


@pytest.fixture
async def chain(
    cluster: Cluster, webhook_server: WebhookServer
) -> AsyncIterator[admission.Admission]:
    services = {(SERVICE_NS, SERVICE, 443): ("127.0.0.1", webhook_server.port)}

    def resolve(namespace: str, name: str, port: int) -> tuple[str, int]:
        return services[(namespace, name, port)]

    instance = admission.Admission(list_objects=cluster.list_objects, resolve_service=resolve)
    try:
        yield instance
    finally:
        await instance.close()


def hook(name: str, path: str, server: WebhookServer, **overrides: Any) -> dict[str, Any]:
    """A webhook on pods CREATE reaching `path` of the test server through its Service."""
    spec: dict[str, Any] = {
        "name": name,
        "clientConfig": {
            "service": {"namespace": SERVICE_NS, "name": SERVICE, "path": path},
            "caBundle": server.ca.ca_bundle,
        },
        "rules": [
            {
                "operations": ["CREATE"],
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "resources": ["pods"],
            }
        ],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
    }
    spec.update(overrides)
    return spec


def pod(
    name: str = "p1", namespace: str = "default", labels: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }


def create_pod(
    obj: dict[str, Any] | None = None, **overrides: Any
) -> admission.AdmissionAttributes:
    obj = obj if obj is not None else pod()
    attrs = admission.AdmissionAttributes(
        operation="CREATE",
        group="",
        version="v1",
        resource="pods",
        subresource="",
        kind={"group": "", "version": "v1", "kind": "Pod"},
        name=obj["metadata"]["name"],
        namespace=obj["metadata"].get("namespace", ""),
        user={"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]},
        obj=obj,
        old_obj=None,
        dry_run=False,
        options=None,
    )
    return dataclasses.replace(attrs, **overrides)


def delete_pod(**overrides: Any) -> admission.AdmissionAttributes:
    return dataclasses.replace(
        create_pod(), operation="DELETE", obj=None, old_obj=pod(), **overrides
    )


GATE = {"name": "queuetree.io/admission"}


async def test_a_mutating_webhook_receives_the_admission_review_kube_apiserver_sends(
    cluster: Cluster, webhook_server: WebhookServer, chain: admission.Admission
) -> None:
    webhook_server.answer("/mutate", allow)
    cluster.mutating("m", hook("m.example.com", "/mutate", webhook_server))

    await chain.mutate(create_pod(options={"fieldManager": "kubectl-create"}))

    [review] = webhook_server.calls["/mutate"]
    request = review["request"]
    assert review["apiVersion"] == "admission.k8s.io/v1"
    assert review["kind"] == "AdmissionReview"
    assert request == {
        "uid": request["uid"],
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
        "requestResource": {"group": "", "version": "v1", "resource": "pods"},
        "name": "p1",
        "namespace": "default",
        "operation": "CREATE",
        "userInfo": {
            "username": "kubernetes-admin",
            "groups": ["system:masters", "system:authenticated"],
        },
        "object": pod(),
        "oldObject": None,
        "dryRun": False,
        "options": {
            "apiVersion": "meta.k8s.io/v1",
            "kind": "CreateOptions",
            "fieldManager": "kubectl-create",
        },
    }
    assert len(request["uid"]) == 36
    assert webhook_server.queries["/mutate"] == [{"timeout": "10s"}]


async def test_a_json_patch_response_is_applied_and_its_warnings_are_returned(
    cluster: Cluster, webhook_server: WebhookServer, chain: admission.Admission
) -> None:
    webhook_server.answer(
        "/mutate",
        lambda review: allow(
            review,
            warnings=["gate injected", "gate injected", "queue q1 is closing"],
            **json_patch({"op": "add", "path": "/spec/schedulingGates", "value": [GATE]}),
        ),
    )
    cluster.mutating("m", hook("gates.example.com", "/mutate", webhook_server))

    obj, warnings = await chain.mutate(create_pod())

    expected = pod()
    expected["spec"]["schedulingGates"] = [GATE]
    assert obj == expected
    assert warnings == ["gate injected", "queue q1 is closing"]


async def test_mutating_webhooks_run_in_configuration_name_order_each_seeing_earlier_patches(
    cluster: Cluster, webhook_server: WebhookServer, chain: admission.Admission
) -> None:
    def add_label(value: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
        def respond(review: dict[str, Any]) -> dict[str, Any]:
            labels = review["request"]["object"]["metadata"]["labels"]
            return allow(
                review,
                **json_patch(
                    {
                        "op": "add",
                        "path": "/metadata/labels/order",
                        "value": labels.get("order", "") + value,
                    }
                ),
            )

        return respond

    for path in ("a1", "a2", "b1"):
        webhook_server.answer(f"/{path}", add_label(path))
    cluster.mutating("zz-b", hook("b1.example.com", "/b1", webhook_server))
    cluster.mutating(
        "aa-a",
        hook("a1.example.com", "/a1", webhook_server),
        hook("a2.example.com", "/a2", webhook_server),
    )

    obj, _ = await chain.mutate(create_pod())

    assert obj is not None
    assert obj["metadata"]["labels"] == {"order": "a1a2b1"}


def counting_label(name: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A webhook that adds label `<name>=done` once, and changes nothing when it is there."""

    def respond(review: dict[str, Any]) -> dict[str, Any]:
        labels = review["request"]["object"]["metadata"].get("labels") or {}
        if labels.get(name) == "done":
            return allow(review)
        return allow(
            review, **json_patch({"op": "add", "path": f"/metadata/labels/{name}", "value": "done"})
        )

    return respond


def no_change(review: dict[str, Any]) -> dict[str, Any]:
    return allow(review)


def always_changing(name: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A webhook that bumps label `<name>` on every call: it would loop if rounds never ended."""

    def respond(review: dict[str, Any]) -> dict[str, Any]:
        labels = review["request"]["object"]["metadata"].get("labels") or {}
        bumped = str(int(labels.get(name, "0")) + 1)
        return allow(
            review, **json_patch({"op": "add", "path": f"/metadata/labels/{name}", "value": bumped})
        )

    return respond


class ReinvocationCase(NamedTuple):
    hooks: Any
    expected_calls: Any


REINVOCATION_CASES = {
    "an IfNeeded webhook runs again after a later one changed the object": ReinvocationCase(
        hooks=[("first", "IfNeeded", counting_label), ("second", "Never", counting_label)],
        expected_calls={"first": 2, "second": 1},
    ),
    "a Never webhook runs once even after a later change": ReinvocationCase(
        hooks=[("first", "Never", counting_label), ("second", "Never", counting_label)],
        expected_calls={"first": 1, "second": 1},
    ),
    "nothing runs again when no webhook changed the object": ReinvocationCase(
        hooks=[
            ("first", "IfNeeded", lambda _: no_change),
            ("second", "IfNeeded", lambda _: no_change),
        ],
        expected_calls={"first": 1, "second": 1},
    ),
    "a webhook's own change does not reinvoke it": ReinvocationCase(
        hooks=[("first", "IfNeeded", counting_label), ("second", "Never", lambda _: no_change)],
        expected_calls={"first": 1, "second": 1},
    ),
    "a webhook that ran after the last change is not reinvoked": ReinvocationCase(
        hooks=[("first", "Never", counting_label), ("second", "IfNeeded", lambda _: no_change)],
        expected_calls={"first": 1, "second": 1},
    ),
    "every IfNeeded webhook before a change is reinvoked, once": ReinvocationCase(
        hooks=[
            ("first", "IfNeeded", lambda _: no_change),
            ("second", "IfNeeded", lambda _: no_change),
            ("third", "Never", counting_label),
        ],
        expected_calls={"first": 2, "second": 2, "third": 1},
    ),
    "there is no third round even if round two keeps changing the object": ReinvocationCase(
        hooks=[("first", "IfNeeded", always_changing), ("second", "IfNeeded", always_changing)],
        expected_calls={"first": 2, "second": 2},
    ),
}


@pytest.mark.parametrize(
    ("hooks", "expected_calls"), REINVOCATION_CASES.values(), ids=REINVOCATION_CASES.keys()
)
async def test_reinvocation_follows_the_if_needed_policy(
    cluster: Cluster,
    webhook_server: WebhookServer,
    chain: admission.Admission,
    hooks: list[tuple[str, str, Callable[[str], Callable[[dict[str, Any]], dict[str, Any]]]]],
    expected_calls: dict[str, int],
) -> None:
    specs = []
    for name, policy, make in hooks:
        webhook_server.answer(f"/{name}", make(name))
        specs.append(
            hook(f"{name}.example.com", f"/{name}", webhook_server, reinvocationPolicy=policy)
        )
    cluster.mutating("chain", *specs)

    await chain.mutate(create_pod())

    assert {name: len(webhook_server.calls[f"/{name}"]) for name, _, _ in hooks} == expected_calls


class SelectionCase(NamedTuple):
    overrides: Any
    obj: Any
    expected_calls: Any


SELECTION_CASES = {
    "a namespaceSelector matching the namespace's labels calls the webhook": SelectionCase(
        overrides={"namespaceSelector": {"matchLabels": {"queuetree.io/enabled": "true"}}},
        obj=pod(namespace="team-a"),
        expected_calls=1,
    ),
    "a namespaceSelector not matching skips the webhook": SelectionCase(
        overrides={"namespaceSelector": {"matchLabels": {"queuetree.io/enabled": "true"}}},
        obj=pod(namespace="default"),
        expected_calls=0,
    ),
    "a namespaceSelector can use the automatic metadata.name label": SelectionCase(
        overrides={
            "namespaceSelector": {
                "matchExpressions": [
                    {
                        "key": "kubernetes.io/metadata.name",
                        "operator": "NotIn",
                        "values": ["default"],
                    }
                ]
            }
        },
        obj=pod(namespace="default"),
        expected_calls=0,
    ),
    "an objectSelector matching the pod's labels calls the webhook": SelectionCase(
        overrides={
            "objectSelector": {"matchExpressions": [{"key": "queue", "operator": "Exists"}]}
        },
        obj=pod(labels={"queue": "q1"}),
        expected_calls=1,
    ),
    "an objectSelector not matching skips the webhook": SelectionCase(
        overrides={
            "objectSelector": {"matchExpressions": [{"key": "queue", "operator": "Exists"}]}
        },
        obj=pod(labels={"app": "x"}),
        expected_calls=0,
    ),
    "rules that do not match skip the webhook whatever the selectors": SelectionCase(
        overrides={
            "rules": [
                {
                    "operations": ["DELETE"],
                    "apiGroups": [""],
                    "apiVersions": ["v1"],
                    "resources": ["pods"],
                }
            ]
        },
        obj=pod(),
        expected_calls=0,
    ),
}


@pytest.mark.parametrize(
    ("overrides", "obj", "expected_calls"), SELECTION_CASES.values(), ids=SELECTION_CASES.keys()
)
async def test_selectors_decide_which_webhooks_are_called(
    cluster: Cluster,
    webhook_server: WebhookServer,
    chain: admission.Admission,
    overrides: dict[str, Any],
    obj: dict[str, Any],
    expected_calls: int,
) -> None:
    webhook_server.answer("/validate", allow)
    cluster.validating("v", hook("v.example.com", "/validate", webhook_server, **overrides))

    await chain.validate(create_pod(obj))

    assert len(webhook_server.calls["/validate"]) == expected_calls


async def test_a_namespace_selector_never_excludes_a_cluster_scoped_object(
    cluster: Cluster, webhook_server: WebhookServer, chain: admission.Admission
) -> None:
    webhook_server.answer("/nodes", allow)
    rule = {
        "operations": ["CREATE"],
        "apiGroups": [""],
        "apiVersions": ["v1"],
        "resources": ["nodes"],
    }
    cluster.validating(
        "v",
        hook(
            "nodes.example.com",
            "/nodes",
            webhook_server,
            rules=[rule],
            namespaceSelector={"matchLabels": {"queuetree.io/enabled": "true"}},
        ),
    )
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}
    attrs = create_pod(
        node, resource="nodes", kind={"group": "", "version": "v1", "kind": "Node"}, namespace=""
    )

    await chain.validate(attrs)

    assert [r["request"]["object"] for r in webhook_server.calls["/nodes"]] == [node]


async def test_an_object_selector_matches_the_old_object_on_update(
    cluster: Cluster, webhook_server: WebhookServer, chain: admission.Admission
) -> None:
    webhook_server.answer("/validate", allow)
    rule = {
        "operations": ["UPDATE"],
        "apiGroups": [""],
        "apiVersions": ["v1"],
        "resources": ["pods"],
    }
    cluster.validating(
        "v",
        hook(
            "v.example.com",
            "/validate",
            webhook_server,
            rules=[rule],
            objectSelector={"matchLabels": {"queue": "q1"}},
        ),
    )
    update = create_pod(pod(labels={}), operation="UPDATE", old_obj=pod(labels={"queue": "q1"}))

    await chain.validate(update)

    [review] = webhook_server.calls["/validate"]
    assert (review["request"]["operation"], review["request"]["options"]) == (
        "UPDATE",
        {"apiVersion": "meta.k8s.io/v1", "kind": "UpdateOptions"},
    )


async def test_a_namespace_create_is_matched_by_its_own_new_labels(
    cluster: Cluster, webhook_server: WebhookServer, chain: admission.Admission
) -> None:
    webhook_server.answer("/ns", allow)
    rule = {
        "operations": ["CREATE"],
        "apiGroups": [""],
        "apiVersions": ["v1"],
        "resources": ["namespaces"],
    }
    cluster.validating(
        "v",
        hook(
            "ns.example.com",
            "/ns",
            webhook_server,
            rules=[rule],
            namespaceSelector={"matchLabels": {"team": "x"}},
        ),
    )
    namespace = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "new", "labels": {"team": "x"}},
    }
    attrs = create_pod(
        namespace,
        resource="namespaces",
        kind={"group": "", "version": "v1", "kind": "Namespace"},
        name="new",
        namespace="",
    )

    await chain.validate(attrs)

    assert [r["request"]["object"] for r in webhook_server.calls["/ns"]] == [namespace]


async def test_a_missing_namespace_is_not_found_as_namespace_lifecycle_answers(
    cluster: Cluster, webhook_server: WebhookServer, chain: admission.Admission
) -> None:
    cluster.validating(
        "v",
        hook("v.example.com", "/v", webhook_server, namespaceSelector={"matchLabels": {"a": "b"}}),
    )

    with pytest.raises(admission.AdmissionDenied) as caught:
        await chain.validate(create_pod(pod(namespace="ghost")))

    assert caught.value.status == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'namespaces "ghost" not found',
        "reason": "NotFound",
        "code": 404,
        "details": {"name": "ghost", "kind": "namespaces"},
    }


async def test_webhook_configurations_are_never_sent_to_webhooks(
    cluster: Cluster, webhook_server: WebhookServer, chain: admission.Admission
) -> None:
    webhook_server.answer("/all", lambda review: deny(review))
    everything = {
        "operations": ["*"],
        "apiGroups": ["*"],
        "apiVersions": ["*"],
        "resources": ["*/*"],
    }
    cluster.validating("v", hook("all.example.com", "/all", webhook_server, rules=[everything]))
    configuration = cluster.list_objects(
        admission.ADMISSIONREGISTRATION, "v1", admission.VALIDATING_PLURAL
    )[0]
    attrs = create_pod(
        configuration,
        group=admission.ADMISSIONREGISTRATION,
        resource=admission.VALIDATING_PLURAL,
        kind={
            "group": admission.ADMISSIONREGISTRATION,
            "version": "v1",
            "kind": "ValidatingWebhookConfiguration",
        },
        name="v",
        namespace="",
        operation="DELETE",
    )

    assert await chain.validate(attrs) == []
    assert await chain.mutate(attrs) == (configuration, [])
    assert webhook_server.calls["/all"] == []


def denial(message: str, code: int = 400, reason: str = "", **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "code": code,
        **extra,
    }
    if reason:
        body["reason"] = reason
    return body


class DenialCase(NamedTuple):
    status: Any
    expected: Any


DENIAL_CASES = {
    "a message is prefixed with the webhook name": DenialCase(
        status={"message": "queue q9 does not exist"},
        expected=denial(
            'admission webhook "v.example.com" denied the request: queue q9 does not exist'
        ),
    ),
    "a reason stands in for a missing message": DenialCase(
        status={"reason": "QueueClosed"},
        expected=denial(
            'admission webhook "v.example.com" denied the request: QueueClosed',
            reason="QueueClosed",
        ),
    ),
    "no status at all is denied without explanation": DenialCase(
        status=None,
        expected=denial('admission webhook "v.example.com" denied the request without explanation'),
    ),
    "a 403 Forbidden is kept for kubectl's Error from server (Forbidden)": DenialCase(
        status={"code": 403, "reason": "Forbidden", "message": "queue q1 is closed"},
        expected=denial(
            'admission webhook "v.example.com" denied the request: queue q1 is closed',
            code=403,
            reason="Forbidden",
        ),
    ),
    "a code below 400 is raised to 400 and Success becomes Failure": DenialCase(
        status={"code": 200, "status": "Success", "message": "no"},
        expected=denial('admission webhook "v.example.com" denied the request: no'),
    ),
    "details from the webhook are kept": DenialCase(
        status={
            "code": 422,
            "reason": "Invalid",
            "message": "bad",
            "details": {"causes": [{"field": "spec.queue"}]},
        },
        expected=denial(
            'admission webhook "v.example.com" denied the request: bad',
            code=422,
            reason="Invalid",
            details={"causes": [{"field": "spec.queue"}]},
        ),
    ),
}


@pytest.mark.parametrize(("status", "expected"), DENIAL_CASES.values(), ids=DENIAL_CASES.keys())
async def test_a_denial_answers_with_kube_apiservers_message_and_code(
    cluster: Cluster,
    webhook_server: WebhookServer,
    chain: admission.Admission,
    status: dict[str, Any] | None,
    expected: dict[str, Any],
) -> None:
    webhook_server.answer("/validate", lambda review: deny(review, status))
    cluster.validating("v", hook("v.example.com", "/validate", webhook_server))

    with pytest.raises(admission.AdmissionDenied) as caught:
        await chain.validate(create_pod())

    assert caught.value.status == expected


async def test_a_mutating_denial_stops_the_chain(
    cluster: Cluster, webhook_server: WebhookServer, chain: admission.Admission
) -> None:
    webhook_server.answer("/first", lambda review: deny(review, {"message": "no"}))
    webhook_server.answer("/second", allow)
    cluster.mutating(
        "m",
        hook("first.example.com", "/first", webhook_server),
        hook("second.example.com", "/second", webhook_server),
    )

    with pytest.raises(admission.AdmissionDenied) as caught:
        await chain.mutate(create_pod())

    assert (
        caught.value.status["message"]
        == 'admission webhook "first.example.com" denied the request: no'
    )
    assert webhook_server.calls["/second"] == []


async def test_validating_webhooks_are_called_in_parallel_and_the_first_configured_denial_wins(
    cluster: Cluster, webhook_server: WebhookServer, chain: admission.Admission
) -> None:
    arrived = {"/a": asyncio.Event(), "/b": asyncio.Event()}

    def barrier(path: str, message: str) -> ResponderFn:
        async def respond(review: dict[str, Any], _: web.Request) -> dict[str, Any]:
            arrived[path].set()
            # Each webhook answers only once both were called: a serial chain would deadlock.
            await asyncio.wait_for(asyncio.gather(*(e.wait() for e in arrived.values())), 5)
            return deny(review, {"message": message}, warnings=[f"seen by {path}"])

        return respond

    webhook_server.responders["/a"] = barrier("/a", "a says no")
    webhook_server.responders["/b"] = barrier("/b", "b says no")
    cluster.validating("v2", hook("b.example.com", "/b", webhook_server))
    cluster.validating("v1", hook("a.example.com", "/a", webhook_server))

    with pytest.raises(admission.AdmissionDenied) as caught:
        await chain.validate(create_pod())

    assert (
        caught.value.status["message"]
        == 'admission webhook "a.example.com" denied the request: a says no'
    )


async def test_validating_warnings_are_returned_in_configuration_order(
    cluster: Cluster, webhook_server: WebhookServer, chain: admission.Admission
) -> None:
    webhook_server.answer("/a", lambda review: allow(review, warnings=["from a"]))
    webhook_server.answer("/b", lambda review: allow(review, warnings=["from b"]))
    cluster.validating(
        "v",
        hook("a.example.com", "/a", webhook_server),
        hook("b.example.com", "/b", webhook_server),
    )

    assert await chain.validate(create_pod()) == ["from a", "from b"]


def closed_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


FAILURE_URL = f"https://{SERVICE}.{SERVICE_NS}.svc:443/validate?timeout=10s"


def invalid_response(
    review: dict[str, Any], change: Callable[[dict[str, Any]], None]
) -> dict[str, Any]:
    answer = allow(review)
    change(answer)
    return answer


class InvalidResponseCase(NamedTuple):
    responder: Any
    reason: Any


INVALID_RESPONSE_CASES = {
    "a response with another uid": InvalidResponseCase(
        responder=lambda review: invalid_response(
            review, lambda a: a["response"].update(uid="other")
        ),
        reason='received invalid webhook response: expected response.uid="{uid}", got "other"',
    ),
    "a response of another apiVersion": InvalidResponseCase(
        responder=lambda review: invalid_response(
            review, lambda a: a.update(apiVersion="admission.k8s.io/v1beta1")
        ),
        reason=(
            "received invalid webhook response: expected webhook "
            "response of admission.k8s.io/v1, "
            "Kind=AdmissionReview, got admission.k8s.io/v1beta1, Kind=AdmissionReview"
        ),
    ),
    "a response without a response block": InvalidResponseCase(
        responder=lambda review: {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"},
        reason="received invalid webhook response: webhook response was absent",
    ),
    "a patch from a validating webhook": InvalidResponseCase(
        responder=lambda review: allow(
            review, **json_patch({"op": "add", "path": "/metadata/labels/x", "value": "y"})
        ),
        reason=(
            "received invalid webhook response: validating webhook may not return response.patch"
        ),
    ),
    "a patchType from a validating webhook": InvalidResponseCase(
        responder=lambda review: allow(review, patchType="JSONPatch"),
        reason=(
            "received invalid webhook response: validating "
            "webhook may not return response.patchType"
        ),
    ),
}


@pytest.mark.parametrize(
    ("responder", "reason"), INVALID_RESPONSE_CASES.values(), ids=INVALID_RESPONSE_CASES.keys()
)
async def test_an_invalid_response_fails_the_call_with_kube_apiservers_reason(
    cluster: Cluster,
    webhook_server: WebhookServer,
    chain: admission.Admission,
    responder: Callable[[dict[str, Any]], dict[str, Any]],
    reason: str,
) -> None:
    webhook_server.answer("/validate", responder)
    cluster.validating("v", hook("v.example.com", "/validate", webhook_server))

    with pytest.raises(admission.AdmissionDenied) as caught:
        await chain.validate(create_pod())

    uid = webhook_server.calls["/validate"][0]["request"]["uid"]
    message = f'failed calling webhook "v.example.com": {reason.format(uid=uid)}'
    assert caught.value.status == admission.internal_error_status(message)
    assert caught.value.status["message"] == f"Internal error occurred: {message}"


class MutatingInvalidCase(NamedTuple):
    responder: Any
    reason: Any


MUTATING_INVALID_CASES = {
    "a patch without patchType": MutatingInvalidCase(
        responder=lambda review: allow(review, patch=base64.b64encode(b"[]").decode()),
        reason="received invalid webhook response: "
        "webhook returned response.patch but not response.patchType",
    ),
    "a patchType without patch": MutatingInvalidCase(
        responder=lambda review: allow(review, patchType="JSONPatch"),
        reason="received invalid webhook response: "
        "webhook returned response.patchType but not response.patch",
    ),
    "a patch type other than JSONPatch": MutatingInvalidCase(
        responder=lambda review: allow(
            review,
            patchType="MergePatch",
            patch=base64.b64encode(
                b'[{"op":"add","path":"/metadata/labels/x","value":"y"}]'
            ).decode(),
        ),
        reason='unsupported patch type "MergePatch"',
    ),
}


@pytest.mark.parametrize(
    ("responder", "reason"), MUTATING_INVALID_CASES.values(), ids=MUTATING_INVALID_CASES.keys()
)
async def test_a_mutating_response_must_pair_patch_and_patch_type(
    cluster: Cluster,
    webhook_server: WebhookServer,
    chain: admission.Admission,
    responder: Callable[[dict[str, Any]], dict[str, Any]],
    reason: str,
) -> None:
    webhook_server.answer("/mutate", responder)
    cluster.mutating("m", hook("m.example.com", "/mutate", webhook_server))

    with pytest.raises(admission.AdmissionDenied) as caught:
        await chain.mutate(create_pod())

    assert caught.value.status == admission.internal_error_status(
        f'failed calling webhook "m.example.com": {reason}'
    )


async def test_an_unreachable_webhook_under_fail_answers_500_naming_the_url(
    cluster: Cluster, webhook_server: WebhookServer
) -> None:
    port = closed_port()
    chain = admission.Admission(
        list_objects=cluster.list_objects, resolve_service=lambda ns, name, p: ("127.0.0.1", port)
    )
    cluster.validating("v", hook("v.example.com", "/validate", webhook_server))
    try:
        with pytest.raises(admission.AdmissionDenied) as caught:
            await chain.validate(create_pod())
    finally:
        await chain.close()

    message = (
        f'failed calling webhook "v.example.com": failed to call webhook: Post "{FAILURE_URL}": '
        f"dial tcp 127.0.0.1:{port}: connect: connection refused"
    )
    assert caught.value.status == admission.internal_error_status(message)


async def test_an_unreachable_webhook_under_ignore_is_skipped(
    cluster: Cluster, webhook_server: WebhookServer
) -> None:
    port = closed_port()
    chain = admission.Admission(
        list_objects=cluster.list_objects, resolve_service=lambda ns, name, p: ("127.0.0.1", port)
    )
    cluster.validating(
        "v", hook("v.example.com", "/validate", webhook_server, failurePolicy="Ignore")
    )
    cluster.mutating("m", hook("m.example.com", "/mutate", webhook_server, failurePolicy="Ignore"))
    try:
        assert await chain.validate(create_pod()) == []
        assert await chain.mutate(create_pod()) == (pod(), [])
    finally:
        await chain.close()


async def test_a_service_without_a_resolver_cannot_be_reached(
    cluster: Cluster, webhook_server: WebhookServer
) -> None:
    chain = admission.Admission(list_objects=cluster.list_objects)
    cluster.validating("v", hook("v.example.com", "/validate", webhook_server))

    with pytest.raises(admission.AdmissionDenied) as caught:
        await chain.validate(create_pod())

    assert caught.value.status["message"] == (
        'Internal error occurred: failed calling webhook "v.example.com": failed to call webhook: '
        f'Post "{FAILURE_URL}": dial tcp: lookup {SERVICE}.{SERVICE_NS}.svc: no such host'
    )


class TimeoutCase(NamedTuple):
    policy: Any
    message: Any


TIMEOUT_CASES = {
    "Fail rejects with context deadline exceeded": TimeoutCase(
        policy="Fail",
        message='Internal error occurred: failed calling webhook "slow.example.com": '
        "failed to call webhook: "
        f'Post "https://{SERVICE}.{SERVICE_NS}.svc:443/slow?timeout=1s": context deadline exceeded',
    ),
    "Ignore lets the request through": TimeoutCase(policy="Ignore", message=None),
}


@pytest.mark.parametrize(("policy", "message"), TIMEOUT_CASES.values(), ids=TIMEOUT_CASES.keys())
async def test_a_webhook_slower_than_its_timeout_fails_the_call(
    cluster: Cluster,
    webhook_server: WebhookServer,
    chain: admission.Admission,
    policy: str,
    message: str | None,
) -> None:
    release = asyncio.Event()

    async def hang(review: dict[str, Any], _: web.Request) -> dict[str, Any]:
        await release.wait()
        return allow(review)

    webhook_server.responders["/slow"] = hang
    cluster.validating(
        "v",
        hook("slow.example.com", "/slow", webhook_server, timeoutSeconds=1, failurePolicy=policy),
    )
    try:
        if message is None:
            assert await chain.validate(create_pod()) == []
        else:
            with pytest.raises(admission.AdmissionDenied) as caught:
                await chain.validate(create_pod())
            assert caught.value.status["message"] == message
    finally:
        release.set()
    assert webhook_server.queries["/slow"] == [{"timeout": "1s"}]


class TlsCase(NamedTuple):
    client_config: Any
    fragment: Any


TLS_CASES = {
    "a caBundle of another CA": TlsCase(
        client_config=lambda server: {"caBundle": certs.generate_ca().ca_bundle},
        fragment="certificate verify failed",
    ),
    "a Service name that is not in the certificate": TlsCase(
        client_config=lambda server: {
            "service": {"namespace": SERVICE_NS, "name": "impostor", "path": "/validate"}
        },
        fragment="Hostname mismatch",
    ),
}


@pytest.mark.parametrize(("client_config", "fragment"), TLS_CASES.values(), ids=TLS_CASES.keys())
async def test_the_serving_certificate_is_verified_against_the_ca_bundle_and_service_name(
    cluster: Cluster,
    webhook_server: WebhookServer,
    client_config: Callable[[WebhookServer], dict[str, Any]],
    fragment: str,
) -> None:
    webhook_server.answer("/validate", allow)
    spec = hook("v.example.com", "/validate", webhook_server)
    spec["clientConfig"] = {**spec["clientConfig"], **client_config(webhook_server)}
    cluster.validating("v", spec)
    chain = admission.Admission(
        list_objects=cluster.list_objects,
        resolve_service=lambda ns, name, port: ("127.0.0.1", webhook_server.port),
    )
    try:
        with pytest.raises(admission.AdmissionDenied) as caught:
            await chain.validate(create_pod())
    finally:
        await chain.close()

    assert caught.value.status["code"] == 500
    assert "failed to call webhook: Post" in caught.value.status["message"]
    assert "tls: failed to verify certificate: x509: " in caught.value.status["message"]
    assert fragment in caught.value.status["message"]
    assert webhook_server.calls["/validate"] == []


async def test_a_url_client_config_is_called_directly_and_verified_by_ip(
    cluster: Cluster, webhook_server: WebhookServer, chain: admission.Admission
) -> None:
    webhook_server.answer("/by-url", lambda review: allow(review, warnings=["reached by url"]))
    cluster.validating(
        "v",
        hook(
            "url.example.com",
            "/ignored",
            webhook_server,
            clientConfig={
                "url": f"https://127.0.0.1:{webhook_server.port}/by-url",
                "caBundle": webhook_server.ca.ca_bundle,
            },
        ),
    )

    assert await chain.validate(create_pod()) == ["reached by url"]


async def test_a_v1beta1_only_webhook_gets_a_v1beta1_review(
    cluster: Cluster, webhook_server: WebhookServer, chain: admission.Admission
) -> None:
    webhook_server.answer("/old", allow)
    cluster.validating(
        "v",
        hook("old.example.com", "/old", webhook_server, admissionReviewVersions=["v1beta1", "v1"]),
    )

    await chain.validate(create_pod())

    assert [r["apiVersion"] for r in webhook_server.calls["/old"]] == ["admission.k8s.io/v1beta1"]


class DryRunCase(NamedTuple):
    side_effects: Any
    status: Any
    dry_runs: Any


DRY_RUN_CASES = {
    "sideEffects None is called with dryRun true": DryRunCase(
        side_effects="None", status=None, dry_runs=[True]
    ),
    "sideEffects NoneOnDryRun is called with dryRun true": DryRunCase(
        side_effects="NoneOnDryRun", status=None, dry_runs=[True]
    ),
    "sideEffects Some refuses the dry run with 400": DryRunCase(
        side_effects="Some",
        status={
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": 'admission webhook "d.example.com" does not support dry run',
            "reason": "BadRequest",
            "code": 400,
        },
        dry_runs=[],
    ),
    "sideEffects Unknown refuses the dry run with 400": DryRunCase(
        side_effects="Unknown",
        status={
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": 'admission webhook "d.example.com" does not support dry run',
            "reason": "BadRequest",
            "code": 400,
        },
        dry_runs=[],
    ),
    "a missing sideEffects fails the call": DryRunCase(
        side_effects=None,
        status=admission.internal_error_status(
            'failed calling webhook "d.example.com": Webhook SideEffects is nil'
        ),
        dry_runs=[],
    ),
}


@pytest.mark.parametrize(
    ("side_effects", "status", "dry_runs"), DRY_RUN_CASES.values(), ids=DRY_RUN_CASES.keys()
)
async def test_a_dry_run_reaches_only_webhooks_without_side_effects(
    cluster: Cluster,
    webhook_server: WebhookServer,
    chain: admission.Admission,
    side_effects: str | None,
    status: dict[str, Any] | None,
    dry_runs: list[bool],
) -> None:
    webhook_server.answer("/dry", allow)
    spec = hook("d.example.com", "/dry", webhook_server, sideEffects=side_effects)
    if side_effects is None:
        del spec["sideEffects"]
    cluster.validating("v", spec)

    if status is None:
        assert await chain.validate(create_pod(dry_run=True)) == []
    else:
        with pytest.raises(admission.AdmissionDenied) as caught:
            await chain.validate(create_pod(dry_run=True))
        assert caught.value.status == status
    assert [r["request"]["dryRun"] for r in webhook_server.calls["/dry"]] == dry_runs


class PatchFailureCase(NamedTuple):
    operations: Any
    request_kind: Any
    message: Any


PATCH_FAILURE_CASES = {
    "a failed test operation": PatchFailureCase(
        operations=[{"op": "test", "path": "/metadata/name", "value": "other"}],
        request_kind="create_pod",
        message="JSON patch from webhook 'm.example.com': ",
    ),
    "a patch on DELETE, which has no object": PatchFailureCase(
        operations=[{"op": "add", "path": "/metadata/labels/x", "value": "y"}],
        request_kind="delete_pod",
        message=(
            'admission webhook "m.example.com" attempted to modify '
            "the object, which is not supported "
            "for this operation"
        ),
    ),
}


@pytest.mark.parametrize(
    ("operations", "request_kind", "message"),
    PATCH_FAILURE_CASES.values(),
    ids=PATCH_FAILURE_CASES.keys(),
)
async def test_a_patch_that_cannot_apply_is_an_internal_error_whatever_the_failure_policy(
    cluster: Cluster,
    webhook_server: WebhookServer,
    chain: admission.Admission,
    operations: list[dict[str, Any]],
    request_kind: str,
    message: str,
) -> None:
    webhook_server.answer("/mutate", lambda review: allow(review, **json_patch(*operations)))
    rule = {"operations": ["*"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}
    cluster.mutating(
        "m", hook("m.example.com", "/mutate", webhook_server, failurePolicy="Ignore", rules=[rule])
    )
    attrs = create_pod()
    if request_kind == "delete_pod":
        attrs = delete_pod()

    with pytest.raises(admission.AdmissionDenied) as caught:
        await chain.mutate(attrs)

    assert caught.value.status["code"] == 500
    assert caught.value.status["reason"] == "InternalError"
    assert caught.value.status["message"].startswith(f"Internal error occurred: {message}")


async def test_a_delete_review_carries_delete_options_and_no_object(
    cluster: Cluster, webhook_server: WebhookServer, chain: admission.Admission
) -> None:
    webhook_server.answer("/v", allow)
    rule = {
        "operations": ["DELETE"],
        "apiGroups": [""],
        "apiVersions": ["v1"],
        "resources": ["pods"],
    }
    cluster.validating("v", hook("v.example.com", "/v", webhook_server, rules=[rule]))

    await chain.validate(delete_pod(options={"propagationPolicy": "Background"}))

    [review] = webhook_server.calls["/v"]
    assert {k: review["request"][k] for k in ("operation", "object", "oldObject", "options")} == {
        "operation": "DELETE",
        "object": None,
        "oldObject": pod(),
        "options": {
            "apiVersion": "meta.k8s.io/v1",
            "kind": "DeleteOptions",
            "propagationPolicy": "Background",
        },
    }


async def test_an_eviction_is_a_create_on_the_eviction_subresource(
    cluster: Cluster, webhook_server: WebhookServer, chain: admission.Admission
) -> None:
    webhook_server.answer("/evict", allow)
    rule = {
        "operations": ["CREATE"],
        "apiGroups": [""],
        "apiVersions": ["v1"],
        "resources": ["pods/eviction"],
    }
    cluster.validating("v", hook("evict.example.com", "/evict", webhook_server, rules=[rule]))
    eviction = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "p1", "namespace": "default"},
    }

    await chain.validate(
        create_pod(
            eviction,
            subresource="eviction",
            kind={"group": "policy", "version": "v1", "kind": "Eviction"},
        )
    )

    [review] = webhook_server.calls["/evict"]
    request = review["request"]
    assert (request["kind"], request["resource"], request["subResource"], request["object"]) == (
        {"group": "policy", "version": "v1", "kind": "Eviction"},
        {"group": "", "version": "v1", "resource": "pods"},
        "eviction",
        eviction,
    )
