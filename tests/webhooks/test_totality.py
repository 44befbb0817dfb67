"""Every review input gets a well-formed answer: a property test over the whole request shape.

Hypothesis builds AdmissionReviews field by field: each field of the envelope, of the request
and of the Queue, Pod and PodGroup objects is either a plausible value or any JSON value at all
(lists, objects, numbers, strings with lone surrogates). Whatever it builds, ``review`` (the
code of the server and of ``queuetree review``) must answer with valid UTF-8 JSON: an
AdmissionReview for the request's uid, allowed or denied with a message naming the field, or,
when the envelope itself is unusable, a ``metav1.Status``. Never an exception, never code 500.

``make test`` runs a few hundred examples, the same ones on every run; ``make fuzz`` runs many
more, drawn at random (tests/properties.py).
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from queuetree.webhooks import reviewing, settings
from tests import properties
from tests.webhooks.builders import PODS, QUEUES, cluster, queue

SURROGATES = st.sampled_from(["\ud83d", "\udc00", "a\ud800b"])
TEXT = st.text(st.characters(exclude_categories=()), max_size=12) | SURROGATES
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
)


def field(plausible: st.SearchStrategy[Any], *, odds: int = 3) -> st.SearchStrategy[Any]:
    """A plausible value ``odds`` times in ``odds + 1``, else any JSON value at all."""
    # (one_of would merge repeated branches, so the odds are drawn explicitly)
    return st.sampled_from(range(odds + 1)).flatmap(lambda d: JSON if d == odds else plausible)


def envelope(plausible: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A field of the envelope: rarely wrong, so that most reviews reach the review functions
    (the envelope's checks come first, and each wrong field would stop the review there)."""
    return field(plausible, odds=15)


def some(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """An object whose every field may be absent, plausible or anything."""
    return st.fixed_dictionaries({}, optional={k: field(v) for k, v in fields.items()})


NAMES = st.sampled_from(["root", "default", "team", "a", "b", "", "ghost", "x" * 300]) | TEXT
QUANTITY = st.sampled_from(["1", "-1", "1.5", "2Gi", "500m", "1e3", "0", "x", "", "1e99"]) | JSON
RESOURCES = st.dictionaries(
    st.sampled_from(["cpu", "memory", "pods", "nvidia.com/gpu", "gpu", "hugepages-2Mi"]) | TEXT,
    field(QUANTITY),
    max_size=4,
)
HIERARCHY = st.sampled_from(["root/a", "a/b/c", "root", "", "root/team/a"]) | TEXT
WEIGHTS = st.sampled_from(["1/2", "1/2/3", "0/x", "", "1", "-1/1"]) | TEXT
QUEUE_OBJECT = some(
    apiVersion=st.just("scheduling.volcano.sh/v1beta1"),
    kind=st.just("Queue"),
    metadata=some(
        name=NAMES,
        annotations=some(
            **{
                "volcano.sh/hierarchy": HIERARCHY,
                "volcano.sh/hierarchy-weights": WEIGHTS,
            }
        ),
    ),
    spec=some(
        parent=NAMES,
        capability=RESOURCES,
        deserved=RESOURCES,
        guarantee=some(resource=RESOURCES),
        weight=st.integers(-1, 3),
        reclaimable=st.booleans(),
    ),
    status=some(
        state=st.sampled_from(["Open", "Closed", "Closing", "Unknown"]), allocated=RESOURCES
    ),
)
GATE = "scheduling.volcano.sh/queue-allocation-gate"
POD_OBJECT = some(
    apiVersion=st.just("v1"),
    kind=st.just("Pod"),
    metadata=some(
        name=NAMES,
        generateName=NAMES,
        namespace=st.sampled_from(["default", "ml", "", "ghost"]),
        annotations=some(
            **{
                GATE: st.sampled_from(["true", "false", ""]),
                "scheduling.volcano.sh/queue-name": NAMES,
                "scheduling.k8s.io/group-name": st.sampled_from(["pg", "missing"]),
            }
        ),
    ),
    spec=some(
        schedulingGates=st.lists(field(some(name=st.sampled_from([GATE, "example.com/g"])))),
        nodeName=st.sampled_from(["", "n1"]),
        containers=st.lists(some(name=NAMES, resources=some(requests=RESOURCES)), max_size=2),
    ),
)
POD_GROUP_OBJECT = some(
    apiVersion=st.just("scheduling.volcano.sh/v1beta1"),
    kind=st.just("PodGroup"),
    metadata=some(name=NAMES, namespace=st.sampled_from(["default", "ml"])),
    spec=some(queue=NAMES, minMember=st.integers(-1, 3), minResources=RESOURCES),
)
OBJECT = st.one_of(QUEUE_OBJECT, POD_OBJECT, POD_GROUP_OBJECT, st.none())
GROUP_VERSION = st.sampled_from(
    [
        QUEUES,
        PODS,
        {"group": "scheduling.volcano.sh", "version": "v1beta1", "resource": "podgroups"},
    ]
)
REQUEST = st.fixed_dictionaries(
    {
        "uid": envelope(st.sampled_from(["uid-1", "uid-\ud83d"]) | st.text(min_size=1)),
        "operation": envelope(st.sampled_from(["CREATE", "UPDATE", "DELETE", "CONNECT"])),
        "resource": envelope(GROUP_VERSION),
    },
    optional={
        "kind": field(some(group=TEXT, version=TEXT, kind=TEXT)),
        "subResource": envelope(st.sampled_from(["", "status", "resize"])),
        "requestKind": JSON,
        "requestResource": field(GROUP_VERSION),
        "requestSubResource": JSON,
        "name": envelope(NAMES),
        "namespace": envelope(st.sampled_from(["default", "ml", ""])),
        "userInfo": field(some(username=TEXT, groups=st.lists(TEXT, max_size=3))),
        "object": envelope(OBJECT),
        "oldObject": envelope(OBJECT),
        "dryRun": field(st.booleans()),
        "options": JSON,
    },
)
REVIEW = st.fixed_dictionaries(
    {
        "apiVersion": envelope(st.just("admission.k8s.io/v1")),
        "kind": envelope(st.just("AdmissionReview")),
        "request": envelope(REQUEST),
    }
)

CLUSTER = dataclasses.replace(
    cluster(
        queue("root", capability={"cpu": "100", "memory": "100Gi"}),
        queue(
            "team",
            "root",
            deserved={"cpu": "10"},
            guarantee={"cpu": "5"},
            annotations={
                "volcano.sh/hierarchy": "root/team",
                "volcano.sh/hierarchy-weights": "1/1",
            },
        ),
        queue("a", "team", deserved={"cpu": "5"}, allocated={"pods": "2"}),
        queue("closed", "root", state="Closed"),
        queue("default", "root"),
        namespaces={"ml": {GATE: "true", "scheduling.volcano.sh/queue-name": "a"}, "default": {}},
        pod_groups={"default/pg": "team", "ml/pg": "a"},
    ),
    node_resources=frozenset({"nvidia.com/gpu"}),
)
RULES = settings.ReviewSettings()
FIELD_NAMED = re.compile(
    r"\b(requestBody|request|metadata|spec|status)[.:\[]|apiVersion|operation|reviews \S+ \S+, but"
)


@hypothesis_settings(max_examples=properties.examples(400))
@given(path=st.sampled_from(sorted(reviewing.ENDPOINTS)), body=REVIEW)
def test_any_review_gets_a_well_formed_answer_naming_the_field(
    path: str, body: dict[str, Any]
) -> None:
    answer = reviewing.review(path, json.dumps(body).encode(), view=CLUSTER, settings=RULES)
    decoded = json.loads(answer.body.decode("utf-8"))
    assert answer.outcome is not reviewing.Outcome.ERROR, decoded
    if answer.status != 200:
        assert (answer.status, decoded["kind"], bool(FIELD_NAMED.search(decoded["message"]))) == (
            400,
            "Status",
            True,
        ), decoded
        return
    response = decoded["response"]
    assert (decoded["kind"], response["uid"]) == ("AdmissionReview", body["request"]["uid"])
    if not response["allowed"]:
        status = response["status"]
        assert status["code"] in (400, 403), decoded
        assert FIELD_NAMED.search(status["message"]), decoded


def test_the_property_test_reaches_the_review_functions() -> None:
    """A sample of the generated reviews gets past the envelope checks: the property above is
    about the review functions, not only about the reader of the envelope."""
    answered = 0

    @hypothesis_settings(max_examples=200, database=None)
    @given(body=REVIEW)
    def sample(body: dict[str, Any]) -> None:
        nonlocal answered
        answer = reviewing.review(
            "/queues/validate", json.dumps(body).encode(), view=CLUSTER, settings=RULES
        )
        answered += answer.status == 200

    sample()
    assert answered > 80


def test_a_lone_surrogate_in_an_echoed_name_is_escaped() -> None:
    body = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u\ud83d",
            "operation": "CREATE",
            "resource": QUEUES,
            "name": "q\ud83d",
            "object": queue("q\ud83d", "ghost"),
        },
    }
    answer = reviewing.review(
        "/queues/validate", json.dumps(body).encode(), view=CLUSTER, settings=RULES
    )
    response = json.loads(answer.body)["response"]
    assert (
        response["uid"],
        b'"uid":"u\\ud83d"' in answer.body,
        response["allowed"],
        "q\ud83d" in response["status"]["message"],
    ) == ("u\ud83d", True, False, True)


def test_an_operation_that_is_a_list_or_an_object_is_a_bad_request() -> None:
    answers = []
    for operation in (["CREATE"], {"op": "CREATE"}):
        body = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {"uid": "u", "operation": operation, "resource": QUEUES},
        }
        answer = reviewing.review(
            "/queues/validate", json.dumps(body).encode(), view=CLUSTER, settings=RULES
        )
        answers.append((answer.status, json.loads(answer.body)["message"]))
    assert answers == [
        (
            400,
            "not a usable AdmissionReview: request.operation: must be one of CREATE, UPDATE, "
            "DELETE, CONNECT, got an array",
        ),
        (
            400,
            "not a usable AdmissionReview: request.operation: must be one of CREATE, UPDATE, "
            "DELETE, CONNECT, got an object",
        ),
    ]
