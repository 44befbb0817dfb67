"""One review, from request bytes to response bytes: the code both the server and
``queuetree review`` run, so that they answer byte for byte the same.

:func:`review` decodes the body, checks it is an AdmissionReview for the endpoint's resource,
calls the endpoint's pure function and encodes the answer. Every input gets an answer: a body
that is not an AdmissionReview gets HTTP 400 with a ``metav1.Status`` naming the problem; a
review of the wrong resource or operation gets a denial with code 400; a failure inside a review
function (a bug) gets a denial with code 500 and the reason, never an HTTP 500 or a dropped
connection.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Protocol

from queuetree.api import admission
from queuetree.webhooks import podgroups, pods, queues, verdicts, views
from queuetree.webhooks import settings as settings_


class ReviewFn(Protocol):
    """An endpoint's decision: the checked request, the cluster, the settings -> a verdict."""

    def __call__(
        self,
        request: admission.Request,
        *,
        view: views.ClusterView,
        settings: settings_.ReviewSettings,
    ) -> verdicts.Verdict: ...


MAX_BODY_BYTES = 3 * 1024 * 1024
"""Largest request body read (3 MiB: kube-apiserver's own limit on an object is 3 MiB, so a
review of a legal object always fits); larger bodies get HTTP 413."""


MAX_DEPTH = 100
"""Deepest JSON nesting accepted. Real objects stay far below (a pod is about 10 levels);
deeper bodies would only reach recursion limits in code that prints or copies them."""


def nesting_depth(value: object, *, limit: int) -> int:
    """How deeply ``value`` nests lists and objects, counting no further than ``limit + 1``
    (iterative: a deep body cannot exhaust the stack here)."""
    deepest = 0
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        current, depth = stack.pop()
        if isinstance(current, dict):
            children: Iterable[object] = current.values()
        elif isinstance(current, list):
            children = current
        else:
            continue
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        stack.extend((child, depth + 1) for child in children)
    return deepest


@dataclasses.dataclass(frozen=True, slots=True)
class Endpoint:
    """A webhook path, the resource it reviews and the function that decides."""

    path: str
    name: str
    """The webhook's name in the configurations (Volcano's names, where Volcano has the path)."""
    resource: admission.Resource
    operations: frozenset[str]
    fn: ReviewFn
    mutating: bool


QUEUES = admission.Resource("scheduling.volcano.sh", "v1beta1", "queues")
POD_GROUPS = admission.Resource("scheduling.volcano.sh", "v1beta1", "podgroups")
PODS = admission.Resource("", "v1", "pods")

ENDPOINTS: Mapping[str, Endpoint] = MappingProxyType(
    {
        e.path: e
        for e in (
            Endpoint(
                "/queues/validate",
                "validatequeue.volcano.sh",
                QUEUES,
                frozenset({"CREATE", "UPDATE", "DELETE"}),
                queues.validate,
                mutating=False,
            ),
            Endpoint(
                "/queues/mutate",
                "mutatequeue.volcano.sh",
                QUEUES,
                frozenset({"CREATE"}),
                queues.mutate,
                mutating=True,
            ),
            Endpoint(
                "/pods/mutate",
                "mutatepod.volcano.sh",
                PODS,
                frozenset({"CREATE"}),
                pods.mutate,
                mutating=True,
            ),
            Endpoint(
                "/pods/validate",
                "validatepod.queuetree.io",
                PODS,
                frozenset({"CREATE", "UPDATE"}),
                pods.validate,
                mutating=False,
            ),
            Endpoint(
                "/podgroups/mutate",
                "mutatepodgroup.volcano.sh",
                POD_GROUPS,
                frozenset({"CREATE"}),
                podgroups.mutate,
                mutating=True,
            ),
            Endpoint(
                "/podgroups/validate",
                "validatepodgroup.volcano.sh",
                POD_GROUPS,
                frozenset({"CREATE", "UPDATE"}),
                podgroups.validate,
                mutating=False,
            ),
        )
    }
)


class Outcome(enum.StrEnum):
    """How a review ended (the ``outcome`` label of the metrics)."""

    ALLOWED = "allowed"
    PATCHED = "patched"
    DENIED = "denied"
    REJECTED = "rejected"
    """Not an AdmissionReview, wrong resource or operation: the caller's mistake."""
    ERROR = "error"
    """A review function failed (a bug): denied with code 500."""


@dataclasses.dataclass(frozen=True, slots=True)
class Answer:
    """What to send: the HTTP status, the body bytes, and facts for metrics and retries."""

    status: int
    body: bytes
    outcome: Outcome
    missing: tuple[str, ...] = ()
    """Queues a lookup missed."""
    missing_namespaces: tuple[str, ...] = ()
    """Namespaces a lookup missed (every pod's namespace exists: a miss is cache lag)."""


def review(
    path: str,
    body: bytes,
    *,
    view: views.ClusterView,
    settings: settings_.ReviewSettings,
) -> Answer:
    """Answer one AdmissionReview posted to ``path`` (see the module docstring)."""
    endpoint = ENDPOINTS.get(path)
    if endpoint is None:
        known = ", ".join(ENDPOINTS)
        return bad_request(404, f"no webhook at {path!r} (served: {known})", reason="NotFound")
    if len(body) > MAX_BODY_BYTES:
        return bad_request(
            413,
            f"the request body has {len(body)} bytes, more than the limit of {MAX_BODY_BYTES}",
            reason="RequestEntityTooLarge",
        )
    try:
        decoded = json.loads(body)
    except (ValueError, RecursionError) as exc:
        # ValueError covers malformed JSON, invalid UTF-8 and over-long integers;
        # RecursionError a body nested deeper than the decoder's stack.
        return bad_request(400, f"the request body is not valid JSON: {exc}")
    depth = nesting_depth(decoded, limit=MAX_DEPTH)
    if depth > MAX_DEPTH:
        return bad_request(400, f"the request body is nested deeper than {MAX_DEPTH} levels")
    try:
        request = admission.read_request(decoded)
    except admission.ReviewError as exc:
        return bad_request(400, f"not a usable AdmissionReview: {exc}")
    if request.resource != endpoint.resource or request.sub_resource:
        resource = f"{request.resource}" + (
            f"/{request.sub_resource}" if request.sub_resource else ""
        )
        return _rejected(
            request.uid,
            f"{endpoint.path} reviews {endpoint.resource}, but the request is for {resource}: "
            "check the rules of the webhook configuration",
        )
    try:
        verdict = endpoint.fn(request, view=view, settings=settings)
    except Exception as exc:  # a bug must still get an answer, never a dropped connection
        return Answer(
            200,
            admission.encode(
                admission.deny(
                    request.uid,
                    f"internal error in {endpoint.path} reviewing {request.operation} "
                    f"{request.name or '(unnamed)'}: {type(exc).__name__}: {exc}",
                    code=500,
                    reason="InternalError",
                )
            ),
            Outcome.ERROR,
        )
    response = verdict.review["response"]
    if not response["allowed"]:
        status = response.get("status")
        outcome = Outcome.REJECTED if status and status["code"] == 400 else Outcome.DENIED
    else:
        outcome = Outcome.PATCHED if "patch" in response else Outcome.ALLOWED
    return Answer(
        200,
        admission.encode(verdict.review),
        outcome,
        verdict.missing,
        verdict.missing_namespaces,
    )


def _rejected(uid: str, message: str) -> Answer:
    review_ = admission.deny(uid, message, code=400, reason="BadRequest")
    return Answer(200, admission.encode(review_), Outcome.REJECTED)


def bad_request(status: int, message: str, *, reason: str = "BadRequest") -> Answer:
    """An HTTP error answer with a ``metav1.Status`` body (not an AdmissionReview: there is no
    request uid to answer to)."""
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": status,
    }
    return Answer(
        status, json.dumps(body, separators=(",", ":")).encode() + b"\n", Outcome.REJECTED
    )
