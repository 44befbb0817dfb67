"""AdmissionReview (``admission.k8s.io/v1``): the wire shapes, the request reader, the answers.

kube-apiserver posts an ``AdmissionReview`` whose ``request`` describes one write; the webhook
answers with the same ``apiVersion``/``kind`` and a ``response`` carrying the request's ``uid``.
This module is the only place that knows those shapes:

- ``Raw*`` TypedDicts describe the JSON as it travels (camelCase keys, everything optional on
  input because a request may be malformed);
- :func:`read_request` turns a decoded body into a :class:`Request` record, or raises
  :class:`ReviewError` naming the field that is wrong (the server answers those with HTTP 400,
  never 500);
- :func:`allow` and :func:`deny` build responses; :func:`encode` renders one response to the
  exact bytes the server sends and ``queuetree review`` prints.

Neighbours: ``queuetree.webhooks`` decides what to answer; this module only reads and writes.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal, NotRequired, TypedDict

API_VERSION = "admission.k8s.io/v1"
KIND = "AdmissionReview"

OPERATIONS = frozenset({"CREATE", "UPDATE", "DELETE", "CONNECT"})


class RawGroupVersionKind(TypedDict):
    group: str
    version: str
    kind: str


class RawGroupVersionResource(TypedDict):
    group: str
    version: str
    resource: str


class RawRequest(TypedDict, total=False):
    """``AdmissionReview.request`` as kube-apiserver sends it."""

    uid: str
    kind: RawGroupVersionKind
    resource: RawGroupVersionResource
    subResource: str
    requestKind: RawGroupVersionKind
    requestResource: RawGroupVersionResource
    requestSubResource: str
    name: str
    namespace: str
    operation: str
    userInfo: dict[str, Any]
    object: dict[str, Any] | None
    oldObject: dict[str, Any] | None
    dryRun: bool
    options: dict[str, Any] | None


class RawStatus(TypedDict):
    """The ``metav1.Status`` subset a denial carries."""

    code: int
    reason: str
    message: str


class RawPatchOperation(TypedDict):
    """One RFC 6902 operation; the webhooks only ever ``add``."""

    op: Literal["add", "replace", "remove", "test"]
    path: str
    value: NotRequired[Any]


class RawResponse(TypedDict):
    uid: str
    allowed: bool
    status: NotRequired[RawStatus]
    patchType: NotRequired[Literal["JSONPatch"]]
    patch: NotRequired[str]
    """Base64 of the JSON-encoded list of patch operations."""
    warnings: NotRequired[list[str]]


class RawReview(TypedDict):
    apiVersion: str
    kind: str
    response: RawResponse


class ReviewError(ValueError):
    """A body that is not a usable AdmissionReview (HTTP 400); the message names the field."""


@dataclasses.dataclass(frozen=True, slots=True)
class Resource:
    """Group, version and resource of the object under review (``request.resource``)."""

    group: str
    version: str
    resource: str

    def __str__(self) -> str:
        group_version = f"{self.group}/{self.version}" if self.group else self.version
        return f"{group_version} {self.resource}"


STATUS_SUBRESOURCE: Final = "status"
"""The subresource of an object's ``status`` (a Queue's figures and state)."""
RESIZE_SUBRESOURCE: Final = "resize"
"""The subresource of a pod's in-place resize (``pods/resize``)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Request:
    """The parts of ``AdmissionReview.request`` the webhooks read, checked for type.

    ``object`` is None on DELETE (and for CONNECT); ``old_object`` is None on CREATE.
    ``namespace`` and ``name`` are "" when absent (cluster-scoped objects, generated names).
    """

    uid: str
    operation: str
    resource: Resource
    sub_resource: str = ""
    name: str = ""
    namespace: str = ""
    object: Mapping[str, Any] | None = None
    old_object: Mapping[str, Any] | None = None
    dry_run: bool = False
    username: str = ""
    """``request.userInfo.username``: who makes the change ("" when absent)."""


def read_request(body: object) -> Request:
    """Check a decoded AdmissionReview and return its request.

    Raises :class:`ReviewError` when the body is not an ``admission.k8s.io/v1``
    ``AdmissionReview``, has no ``request`` object, no non-empty string ``request.uid``, no
    operation, or a field of the wrong JSON type. Unknown fields are ignored, as Kubernetes'
    decoder ignores them. Only ``v1`` is served: ``v1beta1`` has been deprecated since
    Kubernetes 1.16, and webhook configurations list ``admissionReviewVersions: [v1]``.
    """
    if not isinstance(body, dict):
        raise ReviewError(f"the body must be a JSON object, got {_json_type(body)}")
    api_version, kind = body.get("apiVersion"), body.get("kind")
    if api_version != API_VERSION or kind != KIND:
        raise ReviewError(
            f"expected apiVersion {API_VERSION!r} and kind {KIND!r}, "
            f"got apiVersion {api_version!r} and kind {kind!r}"
        )
    raw = _required_object(body, "request", "request")
    uid = raw.get("uid")
    if not isinstance(uid, str) or not uid:
        raise ReviewError(f"request.uid: must be a non-empty string, got {_json_repr(uid)}")
    operation = raw.get("operation")
    # Checked for type first: a list or an object is unhashable, so a bare membership test
    # would raise instead of answering.
    if not isinstance(operation, str) or operation not in OPERATIONS:
        raise ReviewError(
            f"request.operation: must be one of CREATE, UPDATE, DELETE, CONNECT, "
            f"got {_json_repr(operation)}"
        )
    resource = _required_object(raw, "resource", "request.resource")
    return Request(
        uid=uid,
        operation=operation,
        resource=Resource(
            group=_string(resource, "group", "request.resource.group"),
            version=_string(resource, "version", "request.resource.version"),
            resource=_string(resource, "resource", "request.resource.resource"),
        ),
        sub_resource=_string(raw, "subResource", "request.subResource"),
        name=_string(raw, "name", "request.name"),
        namespace=_string(raw, "namespace", "request.namespace"),
        object=_object(raw, "object", "request.object"),
        old_object=_object(raw, "oldObject", "request.oldObject"),
        dry_run=raw.get("dryRun") is True,
        username=_username(raw),
    )


def _username(raw: Mapping[str, Any]) -> str:
    user = raw.get("userInfo")
    if user is None:
        return ""
    if not isinstance(user, dict):
        raise ReviewError(f"request.userInfo: must be an object, got {_json_type(user)}")
    return _string(user, "username", "request.userInfo.username")


def _required_object(raw: Mapping[str, Any], key: str, path: str) -> dict[str, Any]:
    value = raw.get(key)
    if not isinstance(value, dict):
        raise ReviewError(f"{path}: must be an object, got {_json_type(value)}")
    return value


def _string(raw: Mapping[str, Any], key: str, path: str) -> str:
    value = raw.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ReviewError(f"{path}: must be a string, got {_json_type(value)}")
    return value


def _object(raw: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any] | None:
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ReviewError(f"{path}: must be an object or null, got {_json_type(value)}")
    return value


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _json_repr(value: object) -> str:
    if isinstance(value, str | int | float | bool) or value is None:
        text = json.dumps(value)
        return text if len(text) <= 64 else text[:61] + "..."
    return _json_type(value)


def allow(
    uid: str,
    *,
    patch: Sequence[RawPatchOperation] = (),
    warnings: Sequence[str] = (),
) -> RawReview:
    """An allowing response, with a JSON patch only when there are operations.

    An empty patch is left out entirely (Volcano sends the JSON ``null`` as a patch; both are
    accepted by kube-apiserver, and leaving it out is what a reader expects).
    """
    response: RawResponse = {"uid": uid, "allowed": True}
    if patch:
        encoded = json.dumps(list(patch), separators=(",", ":")).encode()
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(encoded).decode("ascii")
    if warnings:
        response["warnings"] = list(warnings)
    return _review(response)


def deny(
    uid: str,
    message: str,
    *,
    code: int = 403,
    reason: str = "Forbidden",
    warnings: Sequence[str] = (),
) -> RawReview:
    """A denial. kube-apiserver returns ``code`` to the client (400 when below 400), and
    kubectl prints ``Error from server (<reason>): admission webhook "<name>" denied the
    request: <message>``."""
    response: RawResponse = {
        "uid": uid,
        "allowed": False,
        "status": {"code": code, "reason": reason, "message": message},
    }
    if warnings:
        response["warnings"] = list(warnings)
    return _review(response)


def _review(response: RawResponse) -> RawReview:
    return {"apiVersion": API_VERSION, "kind": KIND, "response": response}


def encode(review: RawReview) -> bytes:
    """The exact bytes of a response: compact JSON and a final newline.

    The server sends these bytes and ``queuetree review`` prints them, so both agree byte for
    byte. Text stays readable UTF-8, except lone surrogates (``"\\ud83d"`` in a request is valid
    JSON, and messages echo names and values), which UTF-8 cannot encode: they are written as
    JSON escapes, the spelling they arrived in.
    """
    return to_json_bytes(review)


def to_json_bytes(value: object) -> bytes:
    """Compact JSON and a final newline, UTF-8 with lone surrogates escaped (``\\udXXXX``).

    ``backslashreplace`` writes exactly the JSON escape of a lone surrogate, and json.dumps
    leaves such characters only inside strings, so the result is valid JSON.
    """
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8", "backslashreplace") + b"\n"


def status(code: int, message: str, *, reason: str) -> bytes:
    """A ``metav1.Status`` failure body: the answer to an HTTP request that carries no usable
    AdmissionReview (there is no uid to answer to), as kube-apiserver's own errors are shaped."""
    return to_json_bytes(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": code,
        }
    )


def refusal_code(response: RawResponse) -> int | None:
    """The HTTP code of a refused response's status (None when it carries no status)."""
    status = response.get("status")
    return status["code"] if status else None


def refusal_message(response: RawResponse, default: str = "") -> str:
    """The message of a refused response's status (``default`` when it carries none)."""
    status = response.get("status")
    return str(status.get("message", default)) if status else default


def decode_patch(response: RawResponse) -> list[RawPatchOperation]:
    """The patch operations of a response ([] when it has none); for tests and the CLI."""
    encoded = response.get("patch")
    if not encoded:
        return []
    operations: list[RawPatchOperation] = json.loads(base64.b64decode(encoded))
    return operations


def review_of(
    obj: Mapping[str, Any],
    *,
    resource: Resource,
    old: Mapping[str, Any] | None = None,
    username: str = "kubectl-queuetree-whatif",
) -> dict[str, Any]:
    """The AdmissionReview kube-apiserver would send for creating ``obj`` (updating ``old``
    into it, when given): what ``queuetree whatif`` runs the webhook's own endpoints on."""
    meta = obj.get("metadata") or {}
    api_version = str(obj.get("apiVersion", ""))
    group, _, version = api_version.rpartition("/")
    kind: RawGroupVersionKind = {"group": group, "version": version, "kind": str(obj.get("kind"))}
    request: RawRequest = {
        "uid": f"whatif-{meta.get('namespace', '')}-{meta.get('name', '')}",
        "kind": kind,
        "resource": {
            "group": resource.group,
            "version": resource.version,
            "resource": resource.resource,
        },
        "name": str(meta.get("name", "")),
        "namespace": str(meta.get("namespace", "")),
        "operation": "UPDATE" if old is not None else "CREATE",
        "userInfo": {"username": username},
        "object": dict(obj),
        "oldObject": dict(old) if old is not None else None,
        "dryRun": True,
    }
    return {"apiVersion": API_VERSION, "kind": KIND, "request": request}
