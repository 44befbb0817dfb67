"""Watches as the API server serves them: the options of a watch request and its events.

A watch is a LIST with ``watch=true`` from a ``resourceVersion``: the server streams one JSON
event a line, ``{"type": "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR", "object":
...}``, until it closes the stream after ``timeoutSeconds``. An ERROR event carries a
``Status``; code 410 means the version is too old and the client must list again. The
operator's pod informer and the webhook's caches read their streams with :func:`read_event`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class Expired(Exception):
    """The watch's resourceVersion is too old (410 Gone): list again."""


class WatchError(ValueError):
    """An ERROR event that is not a 410: the watch must start again."""


def watch_options(version: str, *, timeout: int) -> dict[str, Any]:
    """The keyword arguments of a kubernetes-asyncio ``list_*`` call that watches from
    ``version``: with bookmarks, closed by the server after ``timeout`` seconds (and given up by
    the client 30 s later), the response left raw for the caller to read line by line."""
    return {
        "watch": True,
        "resource_version": version,
        "allow_watch_bookmarks": True,
        "timeout_seconds": timeout,
        "_preload_content": False,
        "_request_timeout": timeout + 30,
    }


def read_event(event: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """``(type, object)`` of a watch event (an object that is absent, or not an object, reads
    as ``{}``). Raises :class:`Expired` for an ERROR event with code 410 and
    :class:`WatchError` for any other ERROR event."""
    kind = event.get("type")
    obj = event.get("object")
    if not isinstance(obj, dict):
        obj = {}
    if kind == "ERROR":
        if obj.get("code") == 410:
            raise Expired()
        raise WatchError(f"watch error: {obj.get('message') or obj}")
    return str(kind), obj
