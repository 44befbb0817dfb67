"""Bad input never crashes a review: every body gets a clear 400-class answer or a denial."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from queuetree.webhooks import reviewing, settings, views
from tests import properties
from tests.webhooks.builders import PODS, cluster, pod, queue, review

RULES = settings.ReviewSettings()


def run(path: str, body: bytes, view: views.ClusterView | None = None) -> reviewing.Answer:
    return reviewing.review(path, body, view=view or views.ClusterView(), settings=RULES)


def status_of(answer: reviewing.Answer) -> dict[str, Any]:
    """HTTP status and the message: of the Status body, or of the review's denial."""
    decoded = json.loads(answer.body)
    if answer.status != 200:
        return {"http": answer.status, "reason": decoded["reason"], "message": decoded["message"]}
    status = decoded["response"].get("status", {})
    return {"http": 200, "code": status.get("code"), "message": status.get("message")}


def with_request(**changes: Any) -> bytes:
    body = review("CREATE", queue("a"))
    body["request"].update(changes)
    return json.dumps(body).encode()


@pytest.mark.parametrize(
    ("path", "body", "expected"),
    [
        pytest.param(
            "/queues/validate",
            b"{not json",
            {
                "http": 400,
                "reason": "BadRequest",
                "message": "the request body is not valid JSON: Expecting property name enclosed "
                "in double quotes: line 1 column 2 (char 1)",
            },
            id="malformed-json",
        ),
        pytest.param(
            "/queues/validate",
            b"\xff\xfe",
            {
                "http": 400,
                "reason": "BadRequest",
                "message": "the request body is not valid JSON: Expecting value: line 1 column 1 "
                "(char 0)",
            },
            id="not-utf8",
        ),
        pytest.param(
            "/queues/validate",
            b"[" * 100_000 + b"]" * 100_000,
            {
                "http": 400,
                "reason": "BadRequest",
                "message": "the request body is not valid JSON: maximum recursion depth exceeded "
                "while decoding a JSON array from a unicode string",
            },
            id="deeply-nested",
        ),
        pytest.param(
            "/queues/validate",
            json.dumps(
                {**review("CREATE", queue("a")), "apiVersion": "admission.k8s.io/v1beta1"}
            ).encode(),
            {
                "http": 400,
                "reason": "BadRequest",
                "message": "not a usable AdmissionReview: expected apiVersion "
                "'admission.k8s.io/v1' and kind 'AdmissionReview', got apiVersion "
                "'admission.k8s.io/v1beta1' and kind 'AdmissionReview'",
            },
            id="wrong-api-version",
        ),
        pytest.param(
            "/queues/validate",
            json.dumps({**review("CREATE", queue("a")), "kind": "Pod"}).encode(),
            {
                "http": 400,
                "reason": "BadRequest",
                "message": "not a usable AdmissionReview: expected apiVersion "
                "'admission.k8s.io/v1' and kind 'AdmissionReview', got apiVersion "
                "'admission.k8s.io/v1' and kind 'Pod'",
            },
            id="wrong-kind",
        ),
        pytest.param(
            "/queues/validate",
            json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}).encode(),
            {
                "http": 400,
                "reason": "BadRequest",
                "message": "not a usable AdmissionReview: request: must be an object, got null",
            },
            id="missing-request",
        ),
        pytest.param(
            "/queues/validate",
            with_request(uid=None),
            {
                "http": 400,
                "reason": "BadRequest",
                "message": "not a usable AdmissionReview: request.uid: must be a non-empty "
                "string, got null",
            },
            id="missing-uid",
        ),
        pytest.param(
            "/queues/validate",
            with_request(operation="PATCH"),
            {
                "http": 400,
                "reason": "BadRequest",
                "message": "not a usable AdmissionReview: request.operation: must be one of "
                'CREATE, UPDATE, DELETE, CONNECT, got "PATCH"',
            },
            id="unknown-operation-name",
        ),
        pytest.param(
            "/queues/validate",
            with_request(object=[1, 2]),
            {
                "http": 400,
                "reason": "BadRequest",
                "message": "not a usable AdmissionReview: request.object: must be an object or "
                "null, got an array",
            },
            id="object-of-the-wrong-type",
        ),
        pytest.param(
            "/queues/validate",
            json.dumps(review("CREATE", pod(), resource=PODS)).encode(),
            {
                "http": 200,
                "code": 400,
                "message": "/queues/validate reviews scheduling.volcano.sh/v1beta1 queues, but the "
                "request is for v1 pods: check the rules of the webhook configuration",
            },
            id="wrong-resource-for-the-endpoint",
        ),
        pytest.param(
            "/queues/validate",
            with_request(subResource="scale"),
            {
                "http": 200,
                "code": 400,
                "message": "/queues/validate reviews scheduling.volcano.sh/v1beta1 queues, but the "
                "request is for scheduling.volcano.sh/v1beta1 queues/scale: check the rules of "
                "the webhook configuration",
            },
            id="subresource-it-does-not-review",
        ),
        pytest.param(
            "/pods/mutate",
            json.dumps(review("CREATE", pod(), resource=PODS, sub_resource="resize")).encode(),
            {
                "http": 200,
                "code": 400,
                "message": "/pods/mutate reviews v1 pods, but the request is for v1 pods/resize: "
                "check the rules of the webhook configuration",
            },
            id="a-resize-is-for-the-validating-endpoint-only",
        ),
        pytest.param(
            "/queues/validate",
            with_request(object=None),
            {
                "http": 200,
                "code": 400,
                "message": "request.object: a CREATE review must carry the object",
            },
            id="null-object-on-create",
        ),
        pytest.param(
            "/queues/validate",
            json.dumps(review("DELETE", None, name="a")).encode(),
            {"http": 200, "code": None, "message": None},
            id="null-object-on-delete-is-normal",
        ),
        pytest.param(
            "/queues/validate",
            with_request(somethingNew={"x": 1}),
            {"http": 200, "code": None, "message": None},
            id="unknown-fields-are-ignored",
        ),
        pytest.param(
            "/nope",
            b"{}",
            {
                "http": 404,
                "reason": "NotFound",
                "message": "no webhook at '/nope' (served: /queues/validate, /queues/mutate, "
                "/pods/mutate, /pods/validate, /podgroups/mutate, /podgroups/validate, "
                "/namespaces/validate)",
            },
            id="unknown-path",
        ),
        pytest.param(
            "/pods/mutate",
            b" " * (reviewing.BodyLimits().max_bytes + 1),
            {
                "http": 413,
                "reason": "RequestEntityTooLarge",
                "message": f"the request body has more than {reviewing.BodyLimits().max_bytes} "
                f"bytes ({reviewing.BodyLimits().max_bytes + 1} read or announced), the limit "
                "(--max-request-body-bytes)",
            },
            id="too-large",
        ),
        pytest.param(
            "/pods/mutate",
            b"[" + b"[]," * 100_000 + b"[]]",
            {
                "http": 413,
                "reason": "RequestEntityTooLarge",
                "message": "the request body has more than 100000 JSON elements ('[', '{' and "
                "',' characters), the limit (--max-json-elements)",
            },
            id="too-many-json-elements",
        ),
    ],
)
def test_bad_input_gets_a_clear_answer(path: str, body: bytes, expected: dict[str, Any]) -> None:
    assert status_of(run(path, body)) == expected


def test_a_bug_in_a_review_function_is_a_denial_with_code_500(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(*_: object, **__: object) -> None:
        raise ZeroDivisionError("boom")

    endpoint = reviewing.ENDPOINTS["/queues/mutate"]
    failing = reviewing.Endpoint(
        endpoint.path,
        endpoint.name,
        endpoint.resource,
        endpoint.operations,
        broken,  # type: ignore[arg-type]
    )
    monkeypatch.setattr(reviewing, "ENDPOINTS", {**reviewing.ENDPOINTS, endpoint.path: failing})
    answer = run("/queues/mutate", json.dumps(review("CREATE", queue("a"))).encode())
    assert (answer.outcome, status_of(answer)) == (
        reviewing.Outcome.ERROR,
        {
            "http": 200,
            "code": 500,
            "message": "internal error in /queues/mutate reviewing CREATE a: "
            "ZeroDivisionError: boom",
        },
    )


# -- fuzzing -----------------------------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
QUANTITY = st.one_of(
    st.sampled_from(["1", "-1", "1.5", "2Gi", "500m", "1e3", "0", "x", "", "1e99", "0.0001Ki"]),
    st.integers(-5, 5),
    JSON,
)
RESOURCE_LIST = st.dictionaries(
    st.sampled_from(["cpu", "memory", "pods", "nvidia.com/gpu", "gpu", "hugepages-2Mi", "count/x"]),
    QUANTITY,
    max_size=4,
)
NAMES = st.sampled_from(["root", "default", "team", "a", "b", "", "ghost"])
QUEUE_OBJECT = st.fixed_dictionaries(
    {
        "apiVersion": st.just("scheduling.volcano.sh/v1beta1"),
        "kind": st.just("Queue"),
        "metadata": st.fixed_dictionaries(
            {"name": NAMES},
            optional={
                "annotations": st.dictionaries(
                    st.sampled_from(["volcano.sh/hierarchy", "volcano.sh/hierarchy-weights", "x"]),
                    st.sampled_from(["root/a", "1/2", "a/b/c", "0/x", "", "root"]) | JSON,
                    max_size=2,
                )
            },
        ),
        "spec": st.fixed_dictionaries(
            {},
            optional={
                "parent": NAMES | JSON,
                "capability": RESOURCE_LIST | JSON,
                "deserved": RESOURCE_LIST,
                "guarantee": st.fixed_dictionaries({"resource": RESOURCE_LIST}) | JSON,
                "weight": st.integers(-1, 3) | JSON,
                "reclaimable": st.booleans() | JSON,
            },
        )
        | JSON,
        "status": st.fixed_dictionaries(
            {},
            optional={
                "state": st.sampled_from(["Open", "Closed", "Closing", "Weird"]) | JSON,
                "allocated": RESOURCE_LIST,
            },
        ),
    }
)
EXISTING = cluster(
    queue("root", capability={"cpu": "100", "memory": "100Gi"}),
    queue("team", "root", deserved={"cpu": "10"}, guarantee={"cpu": "5"}),
    queue("a", "team", deserved={"cpu": "5"}, allocated={"pods": "2"}),
    queue("default", "root"),
)


@hypothesis_settings(max_examples=properties.examples(300))
@given(
    path=st.sampled_from(sorted(reviewing.ENDPOINTS)),
    operation=st.sampled_from(["CREATE", "UPDATE", "DELETE", "CONNECT"]),
    obj=QUEUE_OBJECT | JSON,
    old=QUEUE_OBJECT | st.none(),
    resource=st.sampled_from(
        [
            {"group": "scheduling.volcano.sh", "version": "v1beta1", "resource": "queues"},
            PODS,
        ]
    ),
)
def test_fuzzed_reviews_always_get_an_answer_and_never_an_internal_error(
    path: str, operation: str, obj: Any, old: Any, resource: dict[str, str]
) -> None:
    body = review(operation, obj if isinstance(obj, dict) else None, old=old, resource=resource)
    if not isinstance(obj, dict):
        body["request"]["object"] = obj
    answer = run(path, json.dumps(body).encode(), EXISTING)
    assert answer.outcome is not reviewing.Outcome.ERROR, answer.body
    assert answer.status in (200, 400)


@hypothesis_settings(max_examples=properties.examples(200))
@given(body=st.binary(max_size=200) | JSON.map(lambda v: json.dumps(v).encode()))
def test_fuzzed_bodies_never_get_an_internal_error(body: bytes) -> None:
    answer = run("/pods/mutate", body)
    assert answer.outcome is not reviewing.Outcome.ERROR
    assert answer.status in (200, 400)


def nested(depth: int) -> Any:
    value: Any = {}
    for _ in range(depth - 1):
        value = {"x": value}
    return value


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param(
            {**review("CREATE", queue("a")), "extra": nested(99)},
            {"http": 200, "code": None, "message": None},
            id="nesting-at-the-limit",
        ),
        pytest.param(
            {**review("CREATE", queue("a")), "extra": nested(150)},
            {
                "http": 400,
                "reason": "BadRequest",
                "message": "the request body is nested deeper than 100 levels, the limit "
                "(--max-json-depth)",
            },
            id="nesting-beyond-the-limit",
        ),
        pytest.param(
            review("CREATE", queue("a", capability={"cpu": "1" * 1_000_000})),
            {
                "http": 200,
                "code": 403,
                "message": 'requestBody.spec.capability["cpu"]: Invalid value: "'
                + "1" * 61
                + '...": too many digits (more than 64)',
            },
            id="a-megabyte-quantity-is-shortened",
        ),
        pytest.param(
            review("CREATE", queue("a", capability={"cpu": [[[["deep"]]]]})),
            {
                "http": 200,
                "code": 403,
                "message": 'requestBody.spec.capability["cpu"]: Invalid value: "[[[[...]]]]": '
                "unknown suffix '[[[[...]]]]' (expected one of n u m k M G T P E, Ki Mi Gi Ti Pi "
                "Ei, or an exponent such as e3)",
            },
            id="a-nested-quantity-is-shown-shortly",
        ),
    ],
)
def test_oversized_inputs_get_bounded_answers(body: dict[str, Any], expected: Any) -> None:
    assert status_of(run("/queues/validate", json.dumps(body).encode())) == expected


def test_thousands_of_problems_list_the_first_twenty_and_count_the_rest() -> None:
    capability = {f"example.com/r{i:04}": "-1" for i in range(3000)}
    message = status_of(
        run(
            "/queues/validate",
            json.dumps(review("CREATE", queue("a", capability=capability))).encode(),
        )
    )["message"]
    entries = message.split(", requestBody.")
    assert (len(entries), entries[-1].endswith("and 2980 more]"), len(message) < 4000) == (
        20,
        True,
        True,
    )


POD_OBJECT = st.fixed_dictionaries(
    {
        "apiVersion": st.just("v1"),
        "kind": st.just("Pod"),
        "metadata": st.fixed_dictionaries(
            {"name": st.sampled_from(["p1", "", "x" * 300]) | JSON},
            optional={
                "namespace": st.sampled_from(["default", "ml", "", "ghost"]) | JSON,
                "annotations": st.dictionaries(
                    st.sampled_from(
                        [
                            "scheduling.volcano.sh/queue-allocation-gate",
                            "scheduling.volcano.sh/queue-name",
                            "scheduling.k8s.io/group-name",
                            "other",
                        ]
                    ),
                    st.sampled_from(["true", "false", "a", "team", "root", "pg", ""]) | JSON,
                    max_size=4,
                )
                | JSON,
            },
        ),
        "spec": st.fixed_dictionaries(
            {},
            optional={
                "schedulingGates": st.lists(
                    st.fixed_dictionaries(
                        {
                            "name": st.sampled_from(
                                ["scheduling.volcano.sh/queue-allocation-gate", "example.com/g"]
                            )
                            | JSON
                        }
                    )
                    | JSON,
                    max_size=3,
                )
                | JSON,
                "nodeName": st.sampled_from(["", "n1"]) | JSON,
            },
        )
        | JSON,
    }
)
POD_CLUSTER = cluster(
    queue("team", "root"),
    queue("a", "team"),
    queue("closed", "root", state="Closed"),
    namespaces={
        "ml": {
            "scheduling.volcano.sh/queue-allocation-gate": "true",
            "scheduling.volcano.sh/queue-name": "a",
        },
        "default": {},
    },
    pod_groups={"default/pg": "team", "ml/pg": "a"},
)


@hypothesis_settings(max_examples=properties.examples(300))
@given(
    path=st.sampled_from(["/pods/mutate", "/pods/validate"]),
    operation=st.sampled_from(["CREATE", "CREATE", "CREATE", "UPDATE"]),
    obj=POD_OBJECT,
    namespace=st.sampled_from(["default", "ml", ""]),
)
def test_fuzzed_pods_always_get_an_answer_and_never_an_internal_error(
    path: str, operation: str, obj: dict[str, Any], namespace: str
) -> None:
    body = review(operation, obj, resource=PODS, namespace=namespace, name="p1")
    answer = run(path, json.dumps(body).encode(), POD_CLUSTER)
    assert answer.outcome is not reviewing.Outcome.ERROR, answer.body
    assert answer.status == 200
