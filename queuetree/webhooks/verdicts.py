"""What a review function returns, and small helpers every endpoint shares."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from queuetree.api import admission, bodies


@dataclasses.dataclass(frozen=True, slots=True)
class Verdict:
    """A response, and the names a lookup missed.

    ``missing`` (queues) and ``missing_namespaces`` let the server retry once its cache has
    caught up: a parent, a queue or a namespace created a moment before may not have reached the
    watch yet. The pure functions never wait.
    """

    review: admission.RawReview
    missing: tuple[str, ...] = ()
    missing_namespaces: tuple[str, ...] = ()


def wrong_operation(request: admission.Request, *, expected: str) -> admission.RawReview:
    """The denial (code 400) of an operation the endpoint does not review; ``expected`` as
    Volcano words it: ``"`CREATE`"``, ``"`CREATE` or `UPDATE`"``."""
    return admission.deny(
        request.uid,
        f"invalid operation `{request.operation}`, expect operation to be {expected}",
        code=400,
        reason="BadRequest",
    )


def missing_object(request: admission.Request, *, what: str) -> admission.RawReview:
    """The denial (code 400) of a CREATE or UPDATE review without ``request.object``."""
    return admission.deny(
        request.uid,
        f"request.object: a {request.operation} review must carry the {what}",
        code=400,
        reason="BadRequest",
    )


def namespace_of(request: admission.Request) -> str:
    """The namespace of the object under review: its own, else the request's (Volcano does the
    same)."""
    written = bodies.metadata_of(request.object).get("namespace")
    return written if isinstance(written, str) and written else request.namespace


def mapping(value: object) -> Mapping[str, Any]:
    """``value`` when it is a JSON object, else an empty one (reviews read untrusted shapes)."""
    return value if isinstance(value, Mapping) else MappingProxyType({})
