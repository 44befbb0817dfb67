"""Requests by path through kubernetes-asyncio's ``ApiClient``, without its generated API classes.

A generated API class is a module of every operation of its group: ``CoreV1Api`` alone is
2.9 MiB of resident memory in each process that loads it, ``AdmissionregistrationV1Api`` 0.9
and ``CustomObjectsApi`` 0.5 (docs/benchmarks.md, Memory), for the dozen requests queuetree's
processes make through them. Each of those operations builds its query and headers and hands
them to ``ApiClient.call_api``; :func:`call` hands the same ones for a path of
:mod:`queuetree.api.paths`, so the request on the wire, its authentication (the client's
configuration and credentials) and its connection pool are the ones the generated class used.

Every call leaves the response raw (``_preload_content=False``): any status is an answer, not an
``ApiException``, and the caller reads the body.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

JSON: Final = "application/json"
JSON_PATCH: Final = "application/json-patch+json"

QUERY_NAMES: Final[Mapping[str, str]] = {
    "watch": "watch",
    "resource_version": "resourceVersion",
    "allow_watch_bookmarks": "allowWatchBookmarks",
    "timeout_seconds": "timeoutSeconds",
    "limit": "limit",
    "_continue": "continue",
    "label_selector": "labelSelector",
    "field_selector": "fieldSelector",
}
"""The list options a generated ``list_*`` call takes as keyword arguments, by their names in the
query (:func:`queuetree.api.watching.watch_options` gives them so)."""

ListFn = Callable[..., Awaitable[Any]]


def call(
    api_client: Any,
    method: str,
    path: str,
    *,
    query: Mapping[str, object] | None = None,
    body: object = None,
    content_type: str = JSON,
    timeout: float | None = None,
) -> Awaitable[Any]:
    """``method`` on ``path`` through ``api_client`` (a kubernetes-asyncio ``ApiClient``): the
    raw aiohttp response, to be used as an async context manager or released by the caller."""
    headers = {"Accept": JSON}
    if body is not None:
        headers["Content-Type"] = content_type
    return api_client.call_api(  # type: ignore[no-any-return]
        path,
        method,
        query_params=list((query or {}).items()),
        header_params=headers,
        body=body,
        auth_settings=["BearerToken"],
        _preload_content=False,
        _request_timeout=timeout,
    )


def lister(api_client: Any, path: str) -> ListFn:
    """A list (or, with ``watch=True``, watch) function of the collection at ``path``, taking the
    keyword arguments of a generated ``list_*`` call: the options of :data:`QUERY_NAMES`,
    ``_request_timeout``, and ``_preload_content``, which must be False (the response is raw)."""

    async def list_fn(
        *, _preload_content: bool = False, _request_timeout: float | None = None, **options: Any
    ) -> Any:
        if _preload_content:
            raise ValueError(f"{path}: only raw responses (_preload_content=False)")
        unknown = sorted(set(options) - set(QUERY_NAMES))
        if unknown:
            raise TypeError(f"{path}: unknown list options {unknown}; known: {sorted(QUERY_NAMES)}")
        query = {QUERY_NAMES[name]: value for name, value in options.items() if value is not None}
        return await call(api_client, "GET", path, query=query, timeout=_request_timeout)

    return list_fn
