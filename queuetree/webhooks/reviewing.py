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
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Final, Protocol

from queuetree.api import admission, bodies
from queuetree.core import problems
from queuetree.webhooks import namespaces, podgroups, pods, queues, verdicts, views
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


@dataclasses.dataclass(frozen=True, slots=True)
class BodyLimits:
    """What a request body may be, checked before any review work (flags in
    ``queuetree.cli.webhook``, shared by ``queuetree webhook`` and ``queuetree review``)."""

    max_bytes: int = 3 * 1024 * 1024 + 256 * 1024
    """``--max-request-body-bytes``: kube-apiserver refuses objects above 3 MiB, so a review
    is at most that object plus its envelope (request fields, user info: 256 KiB is far more
    than they take). Larger bodies get HTTP 413, unread."""
    max_depth: int = problems.MAX_NESTING
    """``--max-json-depth``: deepest nesting of arrays and objects, the same bound as for every
    other input (HTTP 400)."""
    max_elements: int = 100_000
    """``--max-json-elements``: most ``[``, ``{`` and ``,`` characters in a body, counted
    over its bytes before decoding (inside strings too: a conservative count that needs no
    parser). It bounds the decoder's work: a 3 MB body of empty lists takes about 0.3 s and
    60 MiB to decode. A 3 MiB pod with managed fields stays below 20,000 (HTTP 413)."""


DEFAULT_BODY_LIMITS: Final = BodyLimits()


def count_elements(chunk: bytes) -> int:
    """The JSON cost of ``chunk`` as :attr:`BodyLimits.max_elements` counts it; additive over
    the chunks of a body, so the server counts while the body arrives."""
    return chunk.count(b"[") + chunk.count(b"{") + chunk.count(b",")


def too_large(size: int, limits: BodyLimits) -> Answer:
    return bad_request(
        413,
        f"the request body has more than {limits.max_bytes} bytes ({size} read or announced), "
        "the limit (--max-request-body-bytes)",
        reason="RequestEntityTooLarge",
    )


def too_costly(limits: BodyLimits) -> Answer:
    return bad_request(
        413,
        f"the request body has more than {limits.max_elements} JSON elements ('[', '{{' and "
        "',' characters), the limit (--max-json-elements)",
        reason="RequestEntityTooLarge",
    )


def nesting_depth(value: object, *, limit: int) -> int:
    """How deeply ``value`` nests lists and objects, counting no further than ``limit + 1``
    (iterative: a deep body cannot exhaust the stack here; scalars are never pushed, so a
    flat list of a hundred thousand numbers costs one pass)."""
    if not isinstance(value, dict | list):
        return 0
    deepest = 1
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        current, depth = stack.pop()
        children = current.values() if isinstance(current, dict) else current
        assert isinstance(children, Iterable)
        for child in children:
            if isinstance(child, dict | list):
                if depth + 1 > deepest:
                    deepest = depth + 1
                    if deepest > limit:
                        return deepest
                stack.append((child, depth + 1))
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
    sub_resources: frozenset[str] = frozenset({""})
    """The subresources of ``resource`` it reviews ("" the resource itself; ``fn`` reads
    ``request.sub_resource``)."""


QUEUES = admission.Resource(bodies.VOLCANO_GROUP, bodies.VOLCANO_VERSION, "queues")
POD_GROUPS = admission.Resource(bodies.VOLCANO_GROUP, bodies.VOLCANO_VERSION, "podgroups")
PODS = admission.Resource("", "v1", "pods")
NAMESPACES = admission.Resource("", "v1", "namespaces")

CREATE = frozenset({"CREATE"})
CREATE_UPDATE = frozenset({"CREATE", "UPDATE"})

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
                sub_resources=frozenset({"", admission.STATUS_SUBRESOURCE}),
            ),
            Endpoint("/queues/mutate", "mutatequeue.volcano.sh", QUEUES, CREATE, queues.mutate),
            Endpoint("/pods/mutate", "mutatepod.volcano.sh", PODS, CREATE, pods.mutate),
            Endpoint(
                "/pods/validate",
                "validatepod.queuetree.io",
                PODS,
                CREATE_UPDATE,
                pods.validate,
                sub_resources=frozenset({"", admission.RESIZE_SUBRESOURCE}),
            ),
            Endpoint(
                "/podgroups/mutate",
                "mutatepodgroup.volcano.sh",
                POD_GROUPS,
                CREATE,
                podgroups.mutate,
            ),
            Endpoint(
                "/podgroups/validate",
                "validatepodgroup.volcano.sh",
                POD_GROUPS,
                CREATE_UPDATE,
                podgroups.validate,
            ),
            Endpoint(
                "/namespaces/validate",
                "validatenamespace.queuetree.io",
                NAMESPACES,
                CREATE_UPDATE,
                namespaces.validate,
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
    limits: BodyLimits = DEFAULT_BODY_LIMITS,
) -> Answer:
    """Answer one AdmissionReview posted to ``path`` (see the module docstring), after
    checking the body against ``limits`` (size, JSON elements before decoding, depth after)."""
    endpoint = ENDPOINTS.get(path)
    if endpoint is None:
        known = ", ".join(ENDPOINTS)
        return bad_request(404, f"no webhook at {path!r} (served: {known})", reason="NotFound")
    if len(body) > limits.max_bytes:
        return too_large(len(body), limits)
    if count_elements(body) > limits.max_elements:
        return too_costly(limits)
    try:
        # orjson, falling back to json for what it declines: the same values and errors as
        # json.loads, in about a third of the time of a pod review's decoding.
        decoded = bodies.decode(body)
    except (ValueError, RecursionError) as exc:
        # ValueError covers malformed JSON, invalid UTF-8 and over-long integers;
        # RecursionError a body nested deeper than the decoder's stack.
        return bad_request(400, f"the request body is not valid JSON: {exc}")
    if nesting_depth(decoded, limit=limits.max_depth) > limits.max_depth:
        return bad_request(
            400,
            f"the request body is nested deeper than {limits.max_depth} levels, the limit "
            "(--max-json-depth)",
        )
    try:
        request = admission.read_request(decoded)
    except admission.ReviewError as exc:
        return bad_request(400, f"not a usable AdmissionReview: {exc}")
    if request.resource != endpoint.resource or request.sub_resource not in endpoint.sub_resources:
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
        rejected = admission.refusal_code(response) == 400
        outcome = Outcome.REJECTED if rejected else Outcome.DENIED
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
    return Answer(status, admission.status(status, message, reason=reason), Outcome.REJECTED)
