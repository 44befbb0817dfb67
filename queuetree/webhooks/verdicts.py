"""What a review function returns, and small helpers every endpoint shares."""

from __future__ import annotations

import dataclasses

from queuetree.api import admission


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


def pointer(key: str) -> str:
    """A map key as one JSON-pointer segment (RFC 6901: ``~`` -> ``~0``, ``/`` -> ``~1``)."""
    return key.replace("~", "~0").replace("/", "~1")
