"""The HTTP face of kubesim: URL routing, discovery, OpenAPI, content types, faults and audit.

Handlers are thin: parse the URL and the query into an `apiserver.Request`, call `ApiServer`,
render its `Reply` (or the `Status` of an `ApiError`). Non-resource endpoints (`/version`,
discovery, `/openapi/v3`) are built from the `registry` on each call.

`KubeSim` runs all of it on its own event loop in its own thread (`kopf.operator()` cancels
foreign tasks on its loop), with thread-safe test hooks; `serve()` runs it on the caller's loop for
the CLI.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import ipaddress
import json
import logging
import re
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar
from urllib.parse import parse_qsl

import yaml
from aiohttp import web

from kubesim import (
    admission,
    apiserver,
    certs,
    errors,
    patching,
    protobuf,
    registry,
    simulation,
    store,
)

logger = logging.getLogger(__name__)

T = TypeVar("T")

VERSION_INFO = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2024-12-11T00:00:00Z",
    "goVersion": "go1.23.3",
    "compiler": "gc",
    "platform": "linux/amd64",
}

DEFAULT_USER = {
    "username": "kubernetes-admin",
    "groups": ["system:masters", "system:authenticated"],
}
PROTOBUF = "application/vnd.kubernetes.protobuf"
CBOR = "application/cbor"
OPENAPI_V2_PROTOBUF = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"


@dataclasses.dataclass(frozen=True, slots=True)
class Fault:
    """A fault injection rule: requests matching `method` and `path` (a regex searched in the path
    and query string) get `status` (with `headers`, and a Status body) after `delay` seconds, for
    the next `count` matches (None: every match). `status=None` only delays; `disconnect=True`
    closes the connection without an answer.
    """

    method: str = "*"
    path: str = ".*"
    count: int | None = 1
    status: int | None = 500
    headers: tuple[tuple[str, str], ...] = ()
    delay: float = 0.0
    disconnect: bool = False
    message: str = "injected fault"


@dataclasses.dataclass(frozen=True, slots=True)
class AuditRecord:
    """One resource request, as an RBAC check sees it."""

    user: str
    verb: str
    group: str
    resource: str
    subresource: str
    namespace: str
    name: str


class Faults:
    """The active fault rules and how many times each may still fire (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: list[tuple[Fault, re.Pattern[str], list[int | None]]] = []

    def add(self, fault: Fault) -> Fault:
        with self._lock:
            self._rules.append((fault, re.compile(fault.path), [fault.count]))
        return fault

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    def match(self, method: str, path_qs: str) -> Fault | None:
        if not self._rules:
            return None
        with self._lock:
            for fault, pattern, remaining in self._rules:
                if fault.method not in ("*", method) or not pattern.search(path_qs):
                    continue
                if remaining[0] is not None:
                    if remaining[0] <= 0:
                        continue
                    remaining[0] -= 1
                return fault
        return None


class AuditLog:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: list[AuditRecord] = []

    def add(self, record: AuditRecord) -> None:
        with self._lock:
            self._records.append(record)

    def records(self, since: int = 0) -> list[AuditRecord]:
        with self._lock:
            return self._records[since:]

    def clear(self) -> None:
        with self._lock:
            self._records.clear()


@dataclasses.dataclass(frozen=True, slots=True)
class ResourcePath:
    group: str
    version: str
    namespace: str
    plural: str
    name: str
    subresource: str


def parse_resource_path(path: str) -> ResourcePath | None:
    """`/api/v1/...` or `/apis/<g>/<v>/...` as a resource path; None for anything else."""
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 3 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 4 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    namespace = ""
    if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in ("status", "finalize"):
        namespace, rest = rest[1], rest[2:]
    if not rest or len(rest) > 3:
        return None
    plural = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    return ResourcePath(group, version, namespace, plural, name, subresource)


POST_SUBRESOURCES = frozenset({"eviction", "binding", "token"})
"""Subresources created by POST (and taking no other method): pods/eviction, pods/binding and
serviceaccounts/token (TokenRequest)."""

VERBS_BY_METHOD = {
    "GET": "get",
    "POST": "create",
    "PUT": "update",
    "PATCH": "patch",
    "DELETE": "delete",
}


class HttpFrontend:
    """aiohttp handlers over one `ApiServer`."""

    def __init__(
        self,
        api: apiserver.ApiServer,
        *,
        users: dict[str, dict] | None = None,
        faults: Faults,
        audit: AuditLog,
    ) -> None:
        self.api = api
        self.users = users or {}
        self.faults = faults
        self.audit = audit
        self.address = "127.0.0.1:0"

    def make_app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.StreamResponse:
        fault = self.faults.match(request.method, request.path_qs)
        if fault is not None:
            if fault.delay:
                await asyncio.sleep(fault.delay)
            if fault.disconnect:
                if request.transport is not None:
                    request.transport.close()
                return web.Response(status=500)
            if fault.status is not None:
                error = errors.ApiError(
                    fault.status, _reason_for(fault.status), message=fault.message
                )
                return _json_response(
                    error.status(), status=fault.status, headers=dict(fault.headers)
                )
        try:
            return await self._dispatch(request)
        except errors.ApiError as exc:
            return _json_response(exc.status(), status=exc.code, headers=exc.headers)
        except (ConnectionResetError, asyncio.CancelledError):
            raise
        except Exception as exc:
            logger.exception("kubesim: internal error on %s %s", request.method, request.path_qs)
            error = errors.internal(f"{type(exc).__name__}: {exc}")
            return _json_response(error.status(), status=500)

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        resource_path = parse_resource_path(path)
        if resource_path is None:
            return self._non_resource(request)
        rdef = self.api.registry.resolve(
            resource_path.group, resource_path.version, plural=resource_path.plural
        )
        if rdef is None or (resource_path.namespace and not rdef.namespaced):
            raise errors.ApiError(
                404, "NotFound", message="the server could not find the requested resource"
            )
        if resource_path.subresource and resource_path.subresource not in rdef.subresources:
            raise errors.ApiError(
                404, "NotFound", message="the server could not find the requested resource"
            )
        query = dict(parse_qsl(request.query_string, keep_blank_values=True))
        verb = VERBS_BY_METHOD.get(request.method)
        if verb is None:
            raise errors.method_not_allowed(f"{request.method} is not supported")
        watching = False
        if not resource_path.name:
            if request.method == "GET":
                watching = apiserver.parse_bool(query.get("watch"))
                verb = "watch" if watching else "list"
            elif request.method == "DELETE":
                verb = "deletecollection"
            elif request.method != "POST":
                raise errors.method_not_allowed(
                    f"{request.method} is not supported on a collection"
                )
        elif (request.method == "POST") != (resource_path.subresource in POST_SUBRESOURCES):
            raise errors.method_not_allowed(
                f"{request.method} is not supported on {resource_path.subresource or 'an object'}"
            )
        elif request.method == "DELETE" and resource_path.subresource:
            raise errors.method_not_allowed(
                f"DELETE is not supported on {resource_path.subresource}"
            )
        elif request.method == "GET" and apiserver.parse_bool(query.get("watch")):
            # A watch on one object: the collection filtered by name.
            watching = True
            verb = "watch"
            query["fieldSelector"] = ",".join(
                f
                for f in (query.get("fieldSelector", ""), f"metadata.name={resource_path.name}")
                if f
            )
        user = self._user(request)
        req = apiserver.Request(
            verb=verb,
            rdef=rdef,
            namespace=resource_path.namespace,
            name=resource_path.name if not watching else "",
            subresource=resource_path.subresource,
            user=user,
            query=query,
        )
        self.audit.add(
            AuditRecord(
                user=user["username"],
                verb=verb,
                group=rdef.group,
                resource=rdef.plural,
                subresource=resource_path.subresource,
                namespace=resource_path.namespace,
                name=resource_path.name,
            )
        )
        as_table = _wants_table(request.headers.get("Accept", ""))
        if verb == "watch":
            return await self._watch(request, req, as_table=as_table)
        if verb == "get":
            return self._reply(self.api.get_table(req) if as_table else self.api.get(req))
        if verb == "list":
            return self._reply(
                self.api.list_table(req) if as_table else self.api.list_collection(req)
            )
        if verb == "delete":
            return self._reply(await self.api.delete(req, await self._body(request, optional=True)))
        if verb == "deletecollection":
            return self._reply(
                await self.api.delete_collection(req, await self._body(request, optional=True))
            )
        if verb == "create":
            body = await self._body(request, strict=req.field_validation == "Strict")
            if req.subresource == "eviction":
                return self._reply(await self.api.evict(req, body))
            if req.subresource == "binding":
                return self._reply(await self.api.bind(req, body))
            if req.subresource == "token":
                return self._reply(await self.api.request_token(req, body))
            return self._reply(await self.api.create(req, body))
        if verb == "update":
            body = await self._body(request, strict=req.field_validation == "Strict")
            return self._reply(await self.api.update(req, body))
        content_type = request.content_type
        if content_type not in patching.PATCH_TYPES:
            raise errors.ApiError(
                415,
                "UnsupportedMediaType",
                message="the body of the request was in an unknown format - accepted media types "
                f"include: {', '.join(patching.PATCH_TYPES)}",
            )
        body = await self._body(
            request,
            strict=req.field_validation == "Strict",
            yaml_ok=content_type == patching.APPLY_PATCH,
        )
        return self._reply(await self.api.patch(req, content_type, body=body))

    async def _watch(
        self, request: web.Request, req: apiserver.Request, *, as_table: bool
    ) -> web.StreamResponse:
        stream = self.api.watch(req, as_table=as_table)
        # Parameter errors surface before the response starts, as a normal Status answer.
        first = await stream.__anext__()
        response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        try:
            if first:
                await response.write(first)
            async for chunk in stream:
                if request.transport is None or request.transport.is_closing():
                    break
                if chunk:
                    await response.write(chunk)
            await response.write_eof()
        except (ConnectionResetError, ConnectionError):
            pass
        finally:
            await stream.aclose()
        return response

    async def _body(
        self,
        request: web.Request,
        *,
        strict: bool = False,
        optional: bool = False,
        yaml_ok: bool = False,
    ) -> Any:
        content_type = request.content_type
        if content_type == CBOR or content_type.endswith("+cbor"):
            raise errors.ApiError(
                415,
                "UnsupportedMediaType",
                message="the body of the request was in an unknown format - accepted media types "
                f"include: application/json, application/yaml (not {content_type})",
            )
        if content_type == PROTOBUF:
            return protobuf.decode(await request.read())
        raw = await request.read()
        if not raw:
            if optional:
                return None
            raise errors.bad_request("the request body is empty")
        try:
            if yaml_ok or content_type == "application/yaml":
                return yaml.safe_load(raw)
            if strict:
                return json.loads(raw, object_pairs_hook=_no_duplicates)
            return json.loads(raw)
        except _DuplicateField as exc:
            raise errors.bad_request(
                f'strict decoding error: json: duplicate field "{exc}"'
            ) from exc
        except (ValueError, yaml.YAMLError) as exc:
            raise errors.bad_request(
                f"the body of the request could not be decoded: {exc}"
            ) from exc

    def _user(self, request: web.Request) -> dict:
        """The configured user of the bearer token, else the ServiceAccount of a token kubesim
        issued (TokenRequest), else the administrator (kubesim authenticates, never refuses)."""
        auth = request.headers.get("Authorization", "")
        if auth.startswith("Bearer "):
            token = auth[7:].strip()
            configured = self.users.get(token)
            if configured is not None:
                return configured
            return self.api.authenticate(token) or DEFAULT_USER
        return DEFAULT_USER

    @staticmethod
    def _reply(reply: apiserver.Reply) -> web.Response:
        headers: Any = dict(reply.headers)
        if reply.warnings:
            from multidict import CIMultiDict

            multi: CIMultiDict[str] = CIMultiDict(headers)
            for text in reply.warnings:
                multi.add("Warning", admission.warning_header(text))
            headers = multi
        return web.Response(
            body=reply.body, status=reply.code, headers=headers, content_type="application/json"
        )

    # ------------------------------------------------------------------ non-resource endpoints

    def _non_resource(self, request: web.Request) -> web.Response:
        path = request.path.rstrip("/") or "/"
        if request.method != "GET":
            raise errors.method_not_allowed(f"{request.method} is not allowed on {path}")
        if path == "/version":
            return _json_response(VERSION_INFO)
        if path in ("/healthz", "/readyz", "/livez"):
            return web.Response(text="ok")
        if path == "/api":
            return _json_response(
                {
                    "kind": "APIVersions",
                    "versions": ["v1"],
                    "serverAddressByClientCIDRs": [
                        {"clientCIDR": "0.0.0.0/0", "serverAddress": self.address}
                    ],
                }
            )
        if path == "/apis":
            return _json_response(
                {"kind": "APIGroupList", "apiVersion": "v1", "groups": self._groups()}
            )
        parts = [p for p in path.split("/") if p]
        if len(parts) == 2 and parts[0] == "api":
            return self._resource_list("", parts[1])
        if len(parts) == 2 and parts[0] == "apis":
            for group in self._groups():
                if group["name"] == parts[1]:
                    return _json_response({"kind": "APIGroup", "apiVersion": "v1", **group})
        if len(parts) == 3 and parts[0] == "apis":
            return self._resource_list(parts[1], parts[2])
        if path == "/openapi/v3":
            return _json_response(
                {
                    "paths": {
                        gv: {"serverRelativeURL": f"/openapi/v3/{gv}?hash={h}"}
                        for gv, (_, h) in self._openapi_docs().items()
                    }
                }
            )
        if path == "/openapi/v2":
            # An empty OpenAPI v2 document (protobuf, the only encoding client-go reads there):
            # kubectl validates `kind: List` files on the client with it, and finds no schema.
            return web.Response(body=b"", content_type=OPENAPI_V2_PROTOBUF)
        if path.startswith("/openapi/v3/"):
            docs = self._openapi_docs()
            doc = docs.get(path[len("/openapi/v3/") :])
            if doc is not None:
                return web.Response(body=doc[0], content_type="application/json")
        raise errors.ApiError(
            404, "NotFound", message="the server could not find the requested resource"
        )

    def _groups(self) -> list[dict]:
        groups = []
        for group, versions in self.api.registry.group_versions().items():
            if not group:
                continue
            entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
            groups.append({"name": group, "versions": entries, "preferredVersion": entries[0]})
        return groups

    def _resource_list(self, group: str, version: str) -> web.Response:
        defs = self.api.registry.resources_of(group, version)
        if not defs:
            raise errors.ApiError(
                404, "NotFound", message="the server could not find the requested resource"
            )
        resources: list[dict] = []
        for rdef in sorted(defs, key=lambda d: d.plural):
            entry: dict[str, Any] = {
                "name": rdef.plural,
                "singularName": rdef.singular,
                "namespaced": rdef.namespaced,
                "kind": rdef.kind,
                "verbs": list(registry.ALL_VERBS),
            }
            if rdef.short_names:
                entry["shortNames"] = list(rdef.short_names)
            if rdef.categories:
                entry["categories"] = list(rdef.categories)
            resources.append(entry)
            for sub in sorted(rdef.subresources):
                sub_entry: dict[str, Any] = {
                    "name": f"{rdef.plural}/{sub}",
                    "singularName": "",
                    "namespaced": rdef.namespaced,
                    "kind": rdef.kind,
                    "verbs": ["get", "patch", "update"],
                }
                if sub == "eviction":
                    sub_entry.update(
                        kind="Eviction", group="policy", version="v1", verbs=["create"]
                    )
                elif sub == "binding":
                    sub_entry.update(kind="Binding", verbs=["create"])
                elif sub == "scale":
                    sub_entry.update(kind="Scale", group="autoscaling", version="v1")
                resources.append(sub_entry)
        gv = f"{group}/{version}" if group else version
        return _json_response(
            {
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": gv,
                "resources": resources,
            }
        )

    def _openapi_docs(self) -> dict[str, tuple[bytes, str]]:
        """`api/v1` and `apis/<g>/<v>` -> (document, hash): just enough for kubectl to see that
        every kind supports `fieldValidation` (it then validates on the server).

        `v1 List` gets an entry too: kubectl validates a `kind: List` file as such, and without
        one it would fall back to `/openapi/v2`, which kubesim does not serve.
        """
        docs: dict[str, dict] = {}
        entries = [
            (d.group, d.version, d.kind, d.plural, d.namespaced)
            for d in self.api.registry.iter_defs()
        ]
        entries.append(("", "v1", "List", "kubesim-lists", False))
        for group, version, kind, plural, namespaced in entries:
            prefix = f"/apis/{group}/{version}" if group else f"/api/{version}"
            doc = docs.setdefault(
                prefix.lstrip("/"),
                {
                    "openapi": "3.0.0",
                    "info": {"title": "Kubernetes", "version": "v1.32.0"},
                    "paths": {},
                    "components": {"schemas": {}},
                },
            )
            gvk = {"group": group, "version": version, "kind": kind}
            params = [
                {"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
                for name in ("fieldValidation", "dryRun", "fieldManager")
            ]
            operation = {"x-kubernetes-group-version-kind": gvk, "parameters": params}
            read = {"x-kubernetes-group-version-kind": gvk}
            scope = (
                f"{prefix}/namespaces/{{namespace}}/{plural}"
                if namespaced
                else f"{prefix}/{plural}"
            )
            doc["paths"][scope] = {"post": operation, "get": read}
            doc["paths"][f"{scope}/{{name}}"] = {"patch": operation, "put": operation, "get": read}
        result = {}
        for key, doc in docs.items():
            raw = store.encode(doc)
            result[key] = (raw, hashlib.sha256(raw).hexdigest()[:32].upper())
        return result


class _DuplicateField(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict:
    result: dict = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateField(key)
        result[key] = value
    return result


def _wants_table(accept: str) -> bool:
    return "as=Table" in accept


def _reason_for(code: int) -> str:
    return {
        400: "BadRequest",
        401: "Unauthorized",
        403: "Forbidden",
        404: "NotFound",
        405: "MethodNotAllowed",
        409: "Conflict",
        410: "Expired",
        415: "UnsupportedMediaType",
        422: "Invalid",
        429: "TooManyRequests",
        500: "InternalError",
        503: "ServiceUnavailable",
        504: "Timeout",
    }.get(code, "Unknown")


def _ip_literals(host: str) -> tuple[str, ...]:
    """``host`` when it is an IP address (an IP SAN of the serving certificate), else nothing."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return ()
    return (host,)


def _json_response(
    body: Any, *, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    return web.Response(
        body=store.encode(body), status=status, headers=headers, content_type="application/json"
    )


class KubeSim:
    """A kubesim server: `start()` runs it in a thread with its own event loop; `stop()` ends it.

    The hooks (`add_fault`, `compact`, `drop_watches`, `audit`) may be called from any thread.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        bookmark_interval: float = 10.0,
        users: dict[str, dict] | None = None,
        service_resolver: Callable[[str, str, int], tuple[str, int]] | None = None,
        simulate: simulation.SimulationOptions | None = None,
        max_events: int = 50_000,
        garbage_collection: bool = True,
        cascade_delay: float = 0.5,
        token: str = "admin",
        tls: bool = False,
    ) -> None:
        self.host = host
        self.port = port
        self.token = token
        self.bookmark_interval = bookmark_interval
        self.users = dict(users or {})
        self.service_resolver = service_resolver
        self.simulate = simulate
        self.max_events = max_events
        self.garbage_collection = garbage_collection
        self.cascade_delay = cascade_delay
        self.faults = Faults()
        self.audit_log = AuditLog()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stopping: asyncio.Event | None = None
        self._error: BaseException | None = None
        self.api: apiserver.ApiServer | None = None
        self.ca: certs.CertificateAuthority | None = None
        """With ``tls``: the CA that signed the serving certificate (clients trust its
        ``ca_bundle``); None over plain HTTP."""
        self._serving: certs.KeyPair | None = None
        if tls:
            # As kube-apiserver's own: SANs for the in-cluster names and the address served.
            self.ca = certs.generate_ca("kubesim-apiserver-ca")
            self._serving = certs.issue_serving_certificate(
                self.ca,
                service="kubernetes",
                namespace="default",
                extra_dns_names=("localhost",),
                ip_addresses=tuple(dict.fromkeys(("127.0.0.1", *_ip_literals(host)))),
            )

    @property
    def url(self) -> str:
        scheme = "https" if self._serving is not None else "http"
        return f"{scheme}://{self.host}:{self.port}"

    @property
    def ca_bundle(self) -> str | None:
        """The CA as kubeconfigs carry it (``certificate-authority-data``); None without TLS."""
        return self.ca.ca_bundle if self.ca is not None else None

    # ------------------------------------------------------------------ lifecycle

    def start(self, timeout: float = 10.0) -> KubeSim:
        self._thread = threading.Thread(target=self._run_thread, name="kubesim", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise RuntimeError("kubesim did not start in time")
        if self._error is not None:
            raise RuntimeError("kubesim failed to start") from self._error
        return self

    def stop(self, timeout: float = 10.0) -> None:
        if self._loop is not None and self._stopping is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def stop_soon(self) -> None:
        """Ask `serve()` to end (from a signal handler on the server's own loop)."""
        if self._stopping is not None:
            self._stopping.set()

    def __enter__(self) -> KubeSim:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run_thread(self) -> None:
        try:
            asyncio.run(self.serve())
        except BaseException as exc:  # reported to start() if it happens before ready
            self._error = exc
            self._ready.set()

    async def serve(self, *, on_ready: Callable[[KubeSim], None] | None = None) -> None:
        """Serve until `stop()` (or cancellation) on the running loop."""
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        store_ = store.Store(max_events=self.max_events)
        registry_ = registry.Registry()

        def list_objects(group: str, version: str, plural: str) -> list[dict]:
            return [s.obj for s in store_.iter_all((group, plural))]

        chain = admission.Admission(
            list_objects=list_objects, resolve_service=self.service_resolver
        )
        api = apiserver.ApiServer(
            registry_=registry_,
            store_=store_,
            admission_chain=chain,
            garbage_collection=self.garbage_collection,
            cascade_delay=self.cascade_delay,
            bookmark_interval=self.bookmark_interval,
        )
        api.create_initial_namespaces()
        self.api = api
        frontend = HttpFrontend(api, users=self.users, faults=self.faults, audit=self.audit_log)
        runner = web.AppRunner(
            frontend.make_app(), access_log=None, handle_signals=False, shutdown_timeout=1.0
        )
        await runner.setup()
        ssl_context = certs.server_ssl_context(self._serving) if self._serving is not None else None
        site = web.TCPSite(runner, self.host, self.port, ssl_context=ssl_context)
        await site.start()
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        if sockets:
            self.port = sockets[0].getsockname()[1]
        frontend.address = f"{self.host}:{self.port}"
        simulation_task = self._start_simulation()
        self._ready.set()
        if on_ready is not None:
            on_ready(self)
        try:
            await self._stopping.wait()
        finally:
            api.closing = True
            store_.wake_all()
            if simulation_task is not None:
                simulation_task.cancel()
                await asyncio.gather(simulation_task, return_exceptions=True)
            await runner.cleanup()
            await chain.close()

    def _start_simulation(self) -> asyncio.Task[None] | None:
        if self.simulate is None:
            return None
        assert self._stopping is not None
        return asyncio.get_running_loop().create_task(
            simulation.run_simulation(
                self.url, self.token, self.simulate, self._stopping, ca_bundle=self.ca_bundle
            )
        )

    # ------------------------------------------------------------------ hooks

    def call(self, fn: Callable[[], T], timeout: float = 10.0) -> T:
        """Run `fn` on the server's loop (where the state lives) and return its result."""
        assert self._loop is not None

        async def run() -> T:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 10.0) -> T:
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def add_fault(self, fault: Fault) -> Fault:
        return self.faults.add(fault)

    def clear_faults(self) -> None:
        self.faults.clear()

    def compact(self) -> int:
        """Force compaction: watches resuming from any earlier resourceVersion get 410 Expired."""
        assert self.api is not None
        return self.call(self.api.store.compact)

    def drop_watches(self) -> None:
        """Close every open watch stream."""
        assert self.api is not None
        self.call(self.api.store.drop_watches)

    def audit(self, since: int = 0) -> list[AuditRecord]:
        """The audit records from the `since`-th on (0: all), in request order."""
        return self.audit_log.records(since)

    def clear_audit(self) -> None:
        self.audit_log.clear()

    def get_object(self, group: str, plural: str, namespace: str, name: str) -> dict | None:
        """A copy of one stored object (None if absent), read on the server's loop."""
        api = self.api
        assert api is not None

        def read() -> dict | None:
            stored = api.store.get((group, plural), (namespace, name))
            return None if stored is None else json.loads(stored.raw)

        return self.call(read)

    def list_objects(self, group: str, plural: str, namespace: str | None = None) -> list[dict]:
        api = self.api
        assert api is not None
        return self.call(
            lambda: [json.loads(s.raw) for s in api.store.list((group, plural), namespace)]
        )
