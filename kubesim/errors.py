"""API errors as kube-apiserver renders them: a `metav1.Status` body and an HTTP code.

Every failure of a request ends as one `ApiError`; the server renders it once (`status`). The
constructors below reproduce kube-apiserver's messages word for word, because clients (kopf,
kubectl, kubernetes-asyncio) and the tests match on `reason`, `code` and sometimes `message`.

    ApiError
      raised by handlers, strategies, the store and the patch engine;
      `code` is the HTTP status, `reason` the StatusReason, `details` the StatusDetails.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any


@dataclasses.dataclass(frozen=True, slots=True)
class FieldCause:
    """One `details.causes[]` entry: a field path, a cause type and a detail."""

    field: str
    reason: str  # FieldValueInvalid, FieldValueForbidden, FieldValueRequired, ...
    detail: str

    @property
    def message(self) -> str:
        """`field.Error.ErrorBody()`: the cause type, then the detail if there is one."""
        kind = _CAUSE_TYPES.get(self.reason)
        if kind is None:
            return self.detail
        return f"{kind}: {self.detail}" if self.detail else kind


class ApiError(Exception):
    """A request failure with a full `metav1.Status` body."""

    def __init__(
        self,
        code: int,
        reason: str,
        *,
        message: str,
        name: str = "",
        group: str = "",
        kind: str = "",
        causes: tuple[FieldCause, ...] = (),
        headers: dict[str, str] | None = None,
        body: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.body = body  # a complete Status to return as is (admission denials)
        self.code = code
        self.reason = reason
        self.message = message
        self.name = name
        self.group = group
        self.kind = kind
        self.causes = causes
        self.headers = headers or {}

    def status(self) -> dict[str, Any]:
        """The `metav1.Status` body, with `details` only when there is something to say."""
        if self.body is not None:
            return self.body
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        details: dict[str, Any] = {}
        if self.name:
            details["name"] = self.name
        if self.group:
            details["group"] = self.group
        if self.kind:
            details["kind"] = self.kind
        if self.causes:
            # metav1.StatusCause's fields are omitempty: a cause without a field has none.
            details["causes"] = [
                {
                    "reason": c.reason,
                    "message": c.message,
                    **({"field": c.field} if c.field else {}),
                }
                for c in self.causes
            ]
        if details:
            body["details"] = details
        return body


def qualified(plural: str, group: str) -> str:
    """`pods` in the core group, `widgets.example.com` elsewhere (a GroupResource as printed)."""
    return f"{plural}.{group}" if group else plural


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message=message)


def not_found(plural: str, group: str, *, name: str) -> ApiError:
    return ApiError(
        404,
        "NotFound",
        message=f'{qualified(plural, group)} "{name}" not found',
        name=name,
        group=group,
        kind=plural,
    )


def already_exists(plural: str, group: str, *, name: str) -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        message=f'{qualified(plural, group)} "{name}" already exists',
        name=name,
        group=group,
        kind=plural,
    )


def conflict(plural: str, group: str, *, name: str, detail: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        message=f'Operation cannot be fulfilled on {qualified(plural, group)} "{name}": {detail}',
        name=name,
        group=group,
        kind=plural,
    )


MODIFIED_DETAIL = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def stale(plural: str, group: str, *, name: str) -> ApiError:
    """The optimistic-concurrency conflict: a resourceVersion precondition did not hold."""
    return conflict(plural, group, name=name, detail=MODIFIED_DETAIL)


def invalid(kind: str, group: str, *, name: str, causes: list[FieldCause]) -> ApiError:
    """422 Invalid: `<Kind> "<n>" is invalid: <field>: <Type>: <detail>` for every cause.

    The kind is qualified by its group (`Widget.example.com`), as kube-apiserver prints GroupKinds.
    """
    qualified_kind = f"{kind}.{group}" if group else kind
    rendered = [f"{c.field}: {c.message}" if c.field else c.message for c in causes]
    text = rendered[0] if len(rendered) == 1 else "[" + ", ".join(rendered) + "]"
    return ApiError(
        422,
        "Invalid",
        message=f'{qualified_kind} "{name}" is invalid: {text}',
        name=name,
        group=group,
        kind=kind,
        causes=tuple(causes),
    )


def forbidden(message: str, *, name: str = "", group: str = "", kind: str = "") -> ApiError:
    return ApiError(403, "Forbidden", message=message, name=name, group=group, kind=kind)


def unsupported_media_type(content_type: str) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        message=f"the body of the request was in an unknown format: {content_type}",
    )


def method_not_allowed(message: str) -> ApiError:
    return ApiError(405, "MethodNotAllowed", message=message)


def expired(message: str) -> ApiError:
    return ApiError(410, "Expired", message=message)


def internal(message: str) -> ApiError:
    return ApiError(500, "InternalError", message=f"Internal error occurred: {message}")


_CAUSE_TYPES = {
    "FieldValueInvalid": "Invalid value",
    "FieldValueForbidden": "Forbidden",
    "FieldValueRequired": "Required value",
    "FieldValueDuplicate": "Duplicate value",
    "FieldValueNotSupported": "Unsupported value",
    "FieldValueTypeInvalid": "Invalid value",
    "FieldValueNotFound": "Not found",
    "FieldValueTooLong": "Too long",
}


def field_invalid(field: str, value: Any, detail: str) -> FieldCause:
    """`<field>: Invalid value: <value>: <detail>` as field.Invalid renders it."""
    return FieldCause(field, "FieldValueInvalid", f"{json.dumps(value)}: {detail}")


def field_forbidden(field: str, detail: str) -> FieldCause:
    return FieldCause(field, "FieldValueForbidden", detail)


def field_required(field: str, detail: str = "") -> FieldCause:
    return FieldCause(field, "FieldValueRequired", detail)


def field_duplicate(field: str, value: Any) -> FieldCause:
    return FieldCause(field, "FieldValueDuplicate", json.dumps(value))
