"""The request semantics of kube-apiserver, without HTTP: create, read, update, patch, delete,
evict, bind, list and watch, over the `store` and the `registry`.

The write path follows kube-apiserver's order (kubesim-spec §2.10):

    decode + defaults -> mutating admission -> strategy (status reset, gate condition, pruning,
    generation) -> validation (422) -> validating admission -> persist

Updates and patches run that path against the current object; if the object changed while
admission webhooks were being called, the update is recomputed from the new object, as
`GuaranteedUpdate` does, unless the client sent a resourceVersion precondition (then 409).

`server` turns HTTP requests into `Request`s and renders the `Reply`s; everything here is
synchronous except the calls to admission and the watch stream.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import datetime
import functools
import json
import logging
import secrets
import string
import uuid
from collections.abc import AsyncGenerator, Callable
from typing import Any

from kubesim import (
    admission,
    crds,
    errors,
    fields,
    patching,
    pods,
    registry,
    selectors,
    store,
    tables,
    tokens,
)

logger = logging.getLogger(__name__)

PODS: registry.GroupResource = ("", "pods")
NAMESPACES: registry.GroupResource = ("", "namespaces")
CRDS: registry.GroupResource = ("apiextensions.k8s.io", "customresourcedefinitions")
PDBS: registry.GroupResource = ("policy", "poddisruptionbudgets")
PRIORITY_CLASSES: registry.GroupResource = ("scheduling.k8s.io", "priorityclasses")
SERVICE_ACCOUNTS: registry.GroupResource = ("", "serviceaccounts")
WEBHOOK_CONFIGURATIONS = frozenset(
    {
        ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"),
        ("admissionregistration.k8s.io", "validatingwebhookconfigurations"),
    }
)
INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
UPDATE_RETRIES = 16


def now_rfc3339() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclasses.dataclass(frozen=True, slots=True)
class Request:
    """One resource request, decoded from the URL and the query string."""

    verb: str  # get list watch create update patch delete deletecollection
    rdef: registry.ResourceDef
    namespace: str  # "" for cluster-scoped resources and cluster-wide collections
    name: str
    subresource: str
    user: dict
    query: dict[str, str]

    @property
    def dry_run(self) -> bool:
        value = self.query.get("dryRun", "")
        if value and value != "All":
            raise errors.bad_request(f"unsupported dry run value {value!r}")
        return value == "All"

    @property
    def field_validation(self) -> str:
        value = self.query.get("fieldValidation", "") or "Warn"
        if value not in ("Ignore", "Warn", "Strict"):
            raise errors.bad_request(
                f"fieldValidation must be one of Ignore, Warn or Strict, not {value!r}"
            )
        return value


@dataclasses.dataclass(slots=True)
class Reply:
    code: int
    body: bytes
    warnings: list[str] = dataclasses.field(default_factory=list)
    headers: dict[str, str] = dataclasses.field(default_factory=dict)


def status_success(
    *, code: int | None, name: str = "", group: str = "", kind: str = "", uid: str = ""
) -> dict:
    """A Success Status; kube-apiserver leaves out ``code`` (None) in a delete's answer."""
    details: dict[str, Any] = {"name": name, "kind": kind}
    if group:
        details["group"] = group
    if uid:
        details["uid"] = uid
    status: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    }
    if code is not None:
        status["code"] = code
    return status


def parse_bool(value: str | None) -> bool:
    """A boolean query parameter as kube-apiserver converts it into its options (apimachinery's
    ``Convert_Slice_string_To_bool``): absent, ``0`` and ``false`` in any case are false, and
    every other value, the empty one and ``no`` included, is true (never a 400)."""
    if value is None:
        return False
    return not (value == "0" or value.lower() == "false")


class ApiServer:
    """kube-apiserver's semantics over one `Store` and one `Registry`."""

    def __init__(
        self,
        *,
        registry_: registry.Registry,
        store_: store.Store,
        admission_chain: admission.Admission | None = None,
        bookmark_interval: float = 10.0,
        default_watch_timeout: float = 1800.0,
        garbage_collection: bool = True,
        cascade_delay: float = 0.5,
    ) -> None:
        self.registry = registry_
        self.store = store_
        self.admission_chain = admission_chain
        self.bookmark_interval = bookmark_interval
        self.default_watch_timeout = default_watch_timeout
        self.garbage_collection = garbage_collection
        self.cascade_delay = cascade_delay  # seconds before a namespace or CRD deletion cascades
        self.closing = False
        self.tokens = tokens.Issuer()

    # ------------------------------------------------------------------ bootstrap

    def create_initial_namespaces(self) -> None:
        for name in INITIAL_NAMESPACES:
            obj = {
                "kind": "Namespace",
                "apiVersion": "v1",
                "metadata": {
                    "name": name,
                    "labels": {"kubernetes.io/metadata.name": name},
                },
                "spec": {"finalizers": ["kubernetes"]},
                "status": {"phase": "Active"},
            }
            self._set_create_metadata(self.registry.resolve("", "v1", plural="namespaces"), obj)  # type: ignore[arg-type]
            self.store.create(NAMESPACES, ("", name), obj=obj)

    # ------------------------------------------------------------------ reads

    def get(self, req: Request) -> Reply:
        stored = self._require(req.rdef, req.namespace, name=req.name)
        return Reply(200, self._raw_as(req.rdef, stored))

    def list_objects(self, req: Request) -> tuple[list[dict], str, str]:
        """The selected objects sorted by namespace and name, the list RV and a continue token."""
        label_sel = selectors.parse_labels(req.query.get("labelSelector", ""))
        field_sel = selectors.parse_fields(
            req.query.get("fieldSelector", ""), gr=req.rdef.gr, kind=req.rdef.kind
        )
        namespace = req.namespace if req.rdef.namespaced and req.namespace else None
        items = [
            s.obj
            for s in self.store.list(req.rdef.gr, namespace)
            if selectors.labels_match(label_sel, s.obj) and selectors.fields_match(field_sel, s.obj)
        ]
        rv = str(self.store.rv)
        start = 0
        token = req.query.get("continue", "")
        if token:
            try:
                state = json.loads(base64.urlsafe_b64decode(token.encode()))
                after = (state["ns"], state["name"])
                rv = state["rv"]
            except (ValueError, KeyError, TypeError) as exc:
                raise errors.bad_request(f"invalid continue token {token!r}") from exc
            start = next(
                (
                    i
                    for i, o in enumerate(items)
                    if (o["metadata"].get("namespace", ""), o["metadata"]["name"]) > after
                ),
                len(items),
            )
        limit_text = req.query.get("limit", "")
        limit = int(limit_text) if limit_text.isdigit() else 0
        next_token = ""
        if limit and len(items) - start > limit:
            last = items[start + limit - 1]["metadata"]
            next_token = base64.urlsafe_b64encode(
                json.dumps(
                    {"rv": rv, "ns": last.get("namespace", ""), "name": last["name"]}
                ).encode()
            ).decode()
            items = items[start : start + limit]
        else:
            items = items[start:]
        items = [self._as_version(req.rdef, o) for o in items]
        return items, rv, next_token

    def list_collection(self, req: Request) -> Reply:
        items, rv, token = self.list_objects(req)
        if req.rdef.builtin:
            # Built-in list items carry no kind/apiVersion, as kube-apiserver renders them.
            items = [{k: v for k, v in o.items() if k not in ("kind", "apiVersion")} for o in items]
        body = {
            "kind": req.rdef.list_kind,
            "apiVersion": req.rdef.api_version,
            "metadata": {"resourceVersion": rv, "continue": token}
            if token
            else {"resourceVersion": rv},
            "items": items,
        }
        return Reply(200, store.encode(body))

    def get_table(self, req: Request) -> Reply:
        """One object as a Table (kubectl get NAME)."""
        stored = self._require(req.rdef, req.namespace, name=req.name)
        return self._table(req, [self._as_version(req.rdef, stored.obj)], rv=str(stored.rv))

    def list_table(self, req: Request) -> Reply:
        """A list as a Table (kubectl get), with the same selection and paging as a list."""
        items, rv, token = self.list_objects(req)
        return self._table(req, items, rv=rv, token=token)

    def _table(self, req: Request, objects: list[dict], *, rv: str, token: str = "") -> Reply:
        table = tables.render(
            req.rdef,
            objects,
            resource_version=rv,
            continue_token=token,
            include_object=req.query.get("includeObject", "PartialObjectMetadata"),
        )
        return Reply(200, store.encode(table))

    # ------------------------------------------------------------------ watch

    async def watch(self, req: Request, *, as_table: bool = False) -> AsyncGenerator[bytes]:
        """The lines of a watch stream; ends at timeoutSeconds, a drop, or a 410 ERROR line."""
        rdef = req.rdef
        label_sel = selectors.parse_labels(req.query.get("labelSelector", ""))
        field_sel = selectors.parse_fields(
            req.query.get("fieldSelector", ""), gr=rdef.gr, kind=rdef.kind
        )
        namespace = req.namespace if rdef.namespaced else ""
        bookmarks = parse_bool(req.query.get("allowWatchBookmarks"))
        initial = parse_bool(req.query.get("sendInitialEvents"))
        timeout_text = req.query.get("timeoutSeconds", "")
        timeout = float(timeout_text) if timeout_text.isdigit() else self.default_watch_timeout
        rv_text = req.query.get("resourceVersion", "")
        if rv_text not in ("", "0") and not rv_text.isdigit():
            raise errors.bad_request(f"invalid resource version: {rv_text!r}")
        log = self.store.log(rdef.gr)
        epoch = self.store.watch_epoch
        loop = asyncio.get_running_loop()
        has_selectors = bool(label_sel or field_sel)

        def matches(obj: dict | None) -> bool:
            if obj is None:
                return False
            if namespace and obj["metadata"].get("namespace", "") != namespace:
                return False
            return selectors.labels_match(label_sel, obj) and selectors.fields_match(field_sel, obj)

        def render(event_type: str, obj: dict, *, raw: bytes | None) -> bytes:
            if as_table:
                table = tables.render(
                    rdef,
                    [self._as_version(rdef, obj)],
                    resource_version=obj["metadata"].get("resourceVersion", ""),
                    include_object=req.query.get("includeObject", "PartialObjectMetadata"),
                )
                raw = store.encode(table)
            elif raw is None or obj.get("apiVersion") != rdef.api_version:
                raw = store.encode(self._as_version(rdef, obj))
            return b'{"type":"' + event_type.encode() + b'","object":' + raw + b"}\n"

        def bookmark(annotations: dict | None = None) -> bytes:
            metadata: dict[str, Any] = {"resourceVersion": str(self.store.rv)}
            if annotations:
                metadata["annotations"] = annotations
            return (
                store.encode(
                    {
                        "type": "BOOKMARK",
                        "object": {
                            "kind": rdef.kind,
                            "apiVersion": rdef.api_version,
                            "metadata": metadata,
                        },
                    }
                )
                + b"\n"
            )

        lines: list[bytes] = []
        if rv_text in ("", "0") or initial:
            for stored in self.store.list(rdef.gr, namespace or None):
                if matches(stored.obj):
                    lines.append(render(store.ADDED, stored.obj, raw=stored.raw))
            position = log.end()
            last_rv = self.store.rv
            if initial and bookmarks:
                lines.append(bookmark({"k8s.io/initial-events-end": "true"}))
        else:
            since = int(rv_text)
            if since < log.compacted_rv:
                yield self._expired_line(since, log.compacted_rv)
                return
            position = log.position_after(since)
            last_rv = since
        # Always yield once at once: the HTTP layer starts the response on the first chunk.
        yield b"".join(lines)
        deadline = loop.time() + timeout
        next_bookmark = loop.time() + self.bookmark_interval
        while not self.closing and self.store.watch_epoch == epoch:
            if position < log.offset:
                # The log was compacted past this (slow) watcher: it must re-list.
                yield self._expired_line(last_rv, log.compacted_rv)
                return
            lines = []
            for event in log.events_from(position):
                last_rv = event.rv
                if not has_selectors:
                    if not namespace or event.obj["metadata"].get("namespace", "") == namespace:
                        lines.append(render(event.type, event.obj, raw=event.raw))
                    continue
                now_in = matches(event.obj)
                if event.type == store.MODIFIED:
                    was_in = matches(event.old)
                    if now_in and not was_in:
                        lines.append(render(store.ADDED, event.obj, raw=event.raw))
                    elif was_in and not now_in:
                        # As the watch cache does: the last state that matched, at the RV
                        # of the change that made it leave.
                        assert event.old is not None
                        left = {
                            **event.old,
                            "metadata": {**event.old["metadata"], "resourceVersion": str(event.rv)},
                        }
                        lines.append(render(store.DELETED, left, raw=None))
                    elif now_in:
                        lines.append(render(event.type, event.obj, raw=event.raw))
                elif now_in:
                    lines.append(render(event.type, event.obj, raw=event.raw))
            position = log.end()
            now = loop.time()
            if bookmarks and now >= next_bookmark:
                # Same tick as the drain above: the bookmark RV covers only delivered events.
                lines.append(bookmark())
                next_bookmark = now + self.bookmark_interval
            if lines:
                yield b"".join(lines)
            now = loop.time()
            if now >= deadline:
                return
            wake_at = min(deadline, next_bookmark) if bookmarks else deadline
            # Wake at least every 5 s so that a vanished client is noticed by the next write.
            await asyncio.wait({log.wait()}, timeout=max(0.0, min(wake_at - now, 5.0)))
            yield b""  # lets the caller check the connection

    @staticmethod
    def _expired_line(since: int, floor: int) -> bytes:
        status = errors.expired(f"too old resource version: {since} ({floor})").status()
        return store.encode({"type": "ERROR", "object": status}) + b"\n"

    # ------------------------------------------------------------------ create

    def _admit_priority(self, pod: dict) -> None:
        """The Priority admission plugin on a pod's creation: ``spec.priority`` (and
        ``preemptionPolicy``) from its ``priorityClassName``, else from the global default
        class (the lowest-valued, if several), else 0; an unknown class is a 403. Clients read
        a pod's priority from ``spec.priority`` alone, as a real API server resolves it."""
        spec = pod.setdefault("spec", {})
        if not isinstance(spec, dict) or "priority" in spec:
            return
        classes = {s.obj["metadata"]["name"]: s.obj for s in self.store.list(PRIORITY_CLASSES)}
        name = spec.get("priorityClassName") or ""
        if name:
            chosen = classes.get(name)
            if chosen is None:
                raise errors.forbidden(
                    f'pods "{_display_name(pod)}" is forbidden: no PriorityClass with name '
                    f"{name} was found",
                    name=_display_name(pod),
                    kind="pods",
                )
        else:
            defaults = [c for c in classes.values() if c.get("globalDefault")]
            chosen = min(defaults, key=lambda c: int(c.get("value", 0))) if defaults else None
            if chosen is not None:
                spec["priorityClassName"] = chosen["metadata"]["name"]
        if chosen is not None:
            spec["priority"] = int(chosen.get("value", 0))
            spec.setdefault(
                "preemptionPolicy", chosen.get("preemptionPolicy") or "PreemptLowerPriority"
            )

    async def create(self, req: Request, body: Any, *, created_by_apply: bool = False) -> Reply:
        rdef = req.rdef
        obj = self._decode(rdef, body, namespace=req.namespace)
        name = obj["metadata"].get("name", "")
        if req.name and name and req.name != name and not created_by_apply:
            raise errors.bad_request(
                f"the name of the object ({name}) does not match the name on the URL ({req.name})"
            )
        self._check_namespace_for_create(rdef, obj)
        if rdef.gr == PODS:
            self._admit_priority(obj)
        apply_defaults(rdef, obj)
        warnings: list[str] = []
        obj = await self._mutate(
            "CREATE",
            req,
            obj=obj,
            old=None,
            warnings=warnings,
            options=self._options("CreateOptions", req),
        )
        self._prepare_create(rdef, obj, req=req, warnings=warnings)
        causes = self._validate_create(rdef, obj)
        if causes:
            raise errors.invalid(
                rdef.kind, rdef.group, name=obj["metadata"].get("name", ""), causes=causes
            )
        await self._validate_admission(
            "CREATE",
            req,
            obj=obj,
            old=None,
            warnings=warnings,
            options=self._options("CreateOptions", req),
        )
        key = (obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
        # Re-checked after the awaits above: the namespace or a same-named object may have changed.
        self._check_namespace_for_create(rdef, obj)
        if self.store.get(rdef.gr, key) is not None:
            raise errors.already_exists(rdef.plural, rdef.group, name=key[1])
        if req.dry_run:
            return Reply(201, store.encode(obj), warnings)
        stored = self.store.create(rdef.gr, key, obj=obj)
        self._after_write(rdef, None, new=stored.obj)
        return Reply(201, stored.raw, warnings)

    def _decode(self, rdef: registry.ResourceDef, body: Any, *, namespace: str) -> dict:
        if not isinstance(body, dict):
            raise errors.bad_request(f"the body of the request is not a {rdef.kind} object")
        api_version = body.get("apiVersion")
        kind = body.get("kind")
        if (
            api_version
            and api_version != rdef.api_version
            and self.registry.resolve(*_split_api_version(api_version), plural=rdef.plural) is None
        ):
            raise errors.bad_request(
                f"the API version in the data ({api_version}) does not match the expected "
                f"API version ({rdef.api_version})"
            )
        if kind and kind != rdef.kind:
            if rdef.builtin:
                # The decoder reads the body's kind, then fails to convert it to the internal
                # type of the URL's (its package is the group's first label, or core).
                version = _split_api_version(api_version or rdef.api_version)[1]
                package = rdef.group.split(".")[0] if rdef.group else "core"
                raise errors.bad_request(
                    f'{kind} in version "{version}" cannot be handled as a {rdef.kind}: '
                    f"converting ({version}.{kind}) to ({package}.{rdef.kind}): unknown conversion"
                )
            raise errors.bad_request(
                f"the kind in the data ({kind}) does not match the expected kind ({rdef.kind})"
            )
        body["apiVersion"] = rdef.api_version
        body["kind"] = rdef.kind
        metadata = body.get("metadata")
        if metadata is None:
            metadata = body["metadata"] = {}
        if not isinstance(metadata, dict):
            raise errors.bad_request("metadata must be an object")
        if rdef.namespaced:
            body_ns = metadata.get("namespace")
            if body_ns and namespace and body_ns != namespace:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent on "
                    "the request"
                )
            metadata["namespace"] = namespace or body_ns or ""
            if not metadata["namespace"]:
                raise errors.bad_request("the namespace of the object is required")
        else:
            metadata.pop("namespace", None)
        return body

    def _check_namespace_for_create(self, rdef: registry.ResourceDef, obj: dict) -> None:
        if not rdef.namespaced:
            return
        namespace = obj["metadata"]["namespace"]
        stored = self.store.get(NAMESPACES, ("", namespace))
        if stored is None:
            raise errors.not_found("namespaces", "", name=namespace)
        if stored.obj["metadata"].get("deletionTimestamp"):
            raise errors.forbidden(
                f'{rdef.plural} "{_display_name(obj)}" '
                f"is forbidden: unable to create new content in namespace {namespace} because it "
                "is being terminated",
                name=obj["metadata"].get("name", ""),
                group=rdef.group,
                kind=rdef.plural,
            )

    def _set_create_metadata(self, rdef: registry.ResourceDef, obj: dict) -> None:
        metadata = obj["metadata"]
        if not metadata.get("name") and metadata.get("generateName"):
            alphabet = string.ascii_lowercase + string.digits
            while True:
                suffix = "".join(secrets.choice(alphabet) for _ in range(5))
                candidate = metadata["generateName"] + suffix
                if self.store.get(rdef.gr, (metadata.get("namespace", ""), candidate)) is None:
                    break
            metadata["name"] = candidate
        metadata["uid"] = str(uuid.uuid4())
        metadata["creationTimestamp"] = now_rfc3339()
        for field in (
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "resourceVersion",
            "managedFields",
            "selfLink",
        ):
            metadata.pop(field, None)
        if rdef.tracks_generation:
            metadata["generation"] = 1
        else:
            metadata.pop("generation", None)

    def _prepare_create(
        self, rdef: registry.ResourceDef, obj: dict, *, req: Request, warnings: list[str]
    ) -> None:
        self._set_create_metadata(rdef, obj)
        if rdef.gr == PODS:
            pods.prepare_for_create(obj)
        elif rdef.gr == CRDS:
            crds.prepare(obj, now=now_rfc3339())
        elif rdef.gr == NAMESPACES:
            metadata = obj["metadata"]
            obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
            obj["status"] = {"phase": "Active"}
            metadata.setdefault("labels", {})["kubernetes.io/metadata.name"] = metadata["name"]
        elif rdef.has_status and not rdef.builtin:
            # A custom resource with a status subresource is created without a status; built-in
            # kinds keep theirs (nodes are registered with their capacity and conditions).
            obj.pop("status", None)
        self._prune(rdef, obj, req=req, warnings=warnings)

    def _prune(
        self, rdef: registry.ResourceDef, obj: dict, *, req: Request, warnings: list[str]
    ) -> None:
        if rdef.schema is not None:
            unknown = crds.prune(obj, rdef.schema)
        elif rdef.builtin:
            unknown = fields.drop_unknown_fields(rdef.gr, obj)
        else:
            return
        if not unknown:
            return
        mode = req.field_validation
        if mode == "Strict":
            listed = ", ".join(f'unknown field "{f}"' for f in unknown)
            raise errors.bad_request(
                f'{rdef.kind} in version "{rdef.version}" cannot be handled as a {rdef.kind}: '
                f"strict decoding error: {listed}"
            )
        if mode == "Warn":
            warnings.extend(f'unknown field "{f}"' for f in unknown)

    def _validate_create(self, rdef: registry.ResourceDef, obj: dict) -> list[errors.FieldCause]:
        causes = _validate_metadata(obj)
        if rdef.gr == PODS:
            causes.extend(pods.validate_create(obj))
        elif rdef.gr == CRDS:
            causes.extend(crds.validate(obj))
        if rdef.gr in WEBHOOK_CONFIGURATIONS:
            causes.extend(
                admission.validate_configuration(obj, mutating=rdef.kind.startswith("Mutating"))
            )
        if rdef.schema is not None:
            causes.extend(crds.validate_object(obj, rdef.schema))
        return causes

    # ------------------------------------------------------------------ update and patch

    async def update(self, req: Request, body: Any) -> Reply:
        rdef = req.rdef
        obj = self._decode(rdef, body, namespace=req.namespace)
        name = obj["metadata"].get("name", "")
        if name != req.name:
            raise errors.bad_request(
                f"the name of the object ({name}) does not match the name on the URL ({req.name})"
            )
        precondition = obj["metadata"].get("resourceVersion") or ""
        if not precondition and not rdef.builtin:
            # Custom resources do not allow unconditional updates (AllowUnconditionalUpdate);
            # this error names the resource, not the kind, and the value as an integer.
            raise errors.invalid(
                rdef.plural,
                rdef.group,
                name=req.name,
                causes=[
                    errors.FieldCause(
                        "metadata.resourceVersion",
                        "FieldValueInvalid",
                        "0: must be specified for an update",
                    )
                ],
            )

        def compute(current: dict) -> dict:
            return json.loads(json.dumps(obj))

        return await self._guaranteed_update(req, compute, precondition=precondition)

    async def patch(self, req: Request, content_type: str, *, body: Any) -> Reply:
        rdef = req.rdef
        if content_type == patching.STRATEGIC_MERGE_PATCH and not rdef.builtin:
            raise errors.ApiError(
                415,
                "UnsupportedMediaType",
                message="the body of the request was in an unknown format - accepted media types "
                "include: application/json-patch+json, application/merge-patch+json, "
                "application/apply-patch+yaml",
            )
        if content_type == patching.APPLY_PATCH:
            if not req.query.get("fieldManager"):
                raise errors.invalid(
                    "PatchOptions",
                    "meta.k8s.io",
                    name="",
                    causes=[errors.field_required("fieldManager", "is required for apply patch")],
                )
            if not isinstance(body, dict):
                raise errors.bad_request("apply patch must be a YAML or JSON object")
            if (
                self.store.get(rdef.gr, (req.namespace if rdef.namespaced else "", req.name))
                is None
            ):
                if req.subresource:
                    raise errors.not_found(rdef.plural, rdef.group, name=req.name)
                body.setdefault("metadata", {}).setdefault("name", req.name)
                create_req = dataclasses.replace(req, verb="create")
                return await self.create(create_req, body, created_by_apply=True)
        precondition = ""
        if content_type in (
            patching.MERGE_PATCH,
            patching.STRATEGIC_MERGE_PATCH,
            patching.APPLY_PATCH,
        ):
            if not isinstance(body, dict):
                raise errors.bad_request("a merge patch must be a JSON object")
            precondition = str((body.get("metadata") or {}).get("resourceVersion") or "")

        def compute(current: dict) -> dict:
            patch_body = json.loads(json.dumps(body))
            if content_type == patching.JSON_PATCH:
                result = patching.apply_json_patch(current, patch_body)
            elif content_type == patching.MERGE_PATCH:
                result = patching.apply_merge_patch(current, patch_body)
            elif content_type == patching.STRATEGIC_MERGE_PATCH:
                result = patching.apply_strategic_merge_patch(current, patch_body)
            else:
                result = patching.apply_apply_patch(current, patch_body)
            if not isinstance(result, dict):
                raise errors.bad_request("the patched object is not an object")
            return result

        return await self._guaranteed_update(req, compute, precondition=precondition)

    async def _guaranteed_update(
        self, req: Request, compute: Callable[[dict], dict], *, precondition: str
    ) -> Reply:
        rdef = req.rdef
        key = (req.namespace if rdef.namespaced else "", req.name)
        for _ in range(UPDATE_RETRIES):
            current = self.store.get(rdef.gr, key)
            if current is None:
                raise errors.not_found(rdef.plural, rdef.group, name=req.name)
            if precondition and precondition != str(current.rv):
                raise errors.stale(rdef.plural, rdef.group, name=req.name)
            new = compute(json.loads(current.raw))
            if not isinstance(new.get("metadata"), dict):
                new["metadata"] = {}
            new["apiVersion"] = current.obj.get("apiVersion", rdef.api_version)
            new["kind"] = rdef.kind
            # The body's RV was the precondition; whatever a patch left there is not.
            new["metadata"]["resourceVersion"] = str(current.rv)
            warnings: list[str] = []
            options = self._options("UpdateOptions", req)
            new = await self._mutate(
                "UPDATE", req, obj=new, old=current.obj, warnings=warnings, options=options
            )
            self._prepare_update(rdef, new, old=current.obj, req=req, warnings=warnings)
            causes = self._validate_update(rdef, new, old=current.obj, req=req)
            if causes:
                raise errors.invalid(rdef.kind, rdef.group, name=req.name, causes=causes)
            await self._validate_admission(
                "UPDATE", req, obj=new, old=current.obj, warnings=warnings, options=options
            )
            if self.store.get(rdef.gr, key) is not current:
                if precondition:
                    raise errors.stale(rdef.plural, rdef.group, name=req.name)
                continue  # changed during admission: recompute from the new current object
            return self._persist_update(
                rdef, key, new=new, current=current, req=req, warnings=warnings
            )
        raise errors.conflict(
            rdef.plural, rdef.group, name=req.name, detail="too many concurrent updates"
        )

    def _prepare_update(
        self, rdef: registry.ResourceDef, new: dict, *, old: dict, req: Request, warnings: list[str]
    ) -> None:
        metadata, old_meta = new["metadata"], old["metadata"]
        for field in (
            "name",
            "namespace",
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ):
            if field in old_meta:
                metadata[field] = old_meta[field]
            else:
                metadata.pop(field, None)
        metadata.pop("managedFields", None)
        if req.subresource == "resize":
            # Only the resources change through pods/resize (dropNonResizeUpdates).
            prepared = pods.prepare_resize(new, old)
            new.clear()
            new.update(prepared)
            metadata = new["metadata"]
        elif req.subresource == "status":
            # Only the status changes through /status; metadata and spec stay as they were.
            status = new.get("status")
            new.clear()
            new.update(json.loads(json.dumps(old)))
            if status is None:
                new.pop("status", None)
            else:
                new["status"] = status
        elif rdef.has_status and rdef.gr not in (NAMESPACES,):
            # The main endpoint keeps the old status.
            if "status" in old:
                new["status"] = json.loads(json.dumps(old["status"]))
            else:
                new.pop("status", None)
        self._prune(rdef, new, req=req, warnings=warnings)
        if rdef.tracks_generation and req.subresource != "status":
            ignored = ("metadata", "status") if rdef.has_status else ("metadata",)
            if any(new.get(k) != old.get(k) for k in set(new) | set(old) if k not in ignored):
                metadata["generation"] = int(old_meta.get("generation", 1)) + 1
        if rdef.gr == CRDS and req.subresource != "status":
            crds.prepare(new, now=_condition_time(old))
        if rdef.gr == NAMESPACES:
            metadata.setdefault("labels", {})["kubernetes.io/metadata.name"] = metadata["name"]
        elif rdef.gr in WEBHOOK_CONFIGURATIONS:
            apply_defaults(rdef, new)  # decoding defaults every write, not only creations
        elif rdef.gr == PODS and not req.subresource:
            pods.add_default_tolerations(new)

    def _validate_update(
        self, rdef: registry.ResourceDef, new: dict, *, old: dict, req: Request
    ) -> list[errors.FieldCause]:
        causes = _validate_metadata(new)
        old_finalizers = old["metadata"].get("finalizers") or []
        new_finalizers = new["metadata"].get("finalizers") or []
        if old["metadata"].get("deletionTimestamp"):
            added = [f for f in new_finalizers if f not in old_finalizers]
            if added:
                listed = ", ".join(json.dumps(f) for f in added)
                causes.append(
                    errors.field_forbidden(
                        "metadata.finalizers",
                        "no new finalizers can be added if the object is being deleted, found "
                        f"new finalizers []string{{{listed}}}",
                    )
                )
        if rdef.gr == PODS and req.subresource == "resize":
            causes.extend(pods.validate_resize(new, old))
        elif rdef.gr == PODS and req.subresource != "status":
            causes.extend(pods.validate_update(new, old))
        elif rdef.gr == CRDS:
            causes.extend(crds.validate(new))
        elif rdef.gr in WEBHOOK_CONFIGURATIONS:
            causes.extend(
                admission.validate_configuration(new, mutating=rdef.kind.startswith("Mutating"))
            )
        if rdef.schema is not None:
            causes.extend(crds.validate_object(new, rdef.schema))
        return causes

    def _persist_update(
        self,
        rdef: registry.ResourceDef,
        key: store.Key,
        *,
        new: dict,
        current: store.Stored,
        req: Request,
        warnings: list[str],
    ) -> Reply:
        deleting = bool(new["metadata"].get("deletionTimestamp"))
        if new == current.obj:
            # A no-op write keeps the RV and emits no event.
            return Reply(200, self._raw_as(rdef, current), warnings)
        if req.dry_run:
            return Reply(200, store.encode(new), warnings)
        if (
            deleting
            and not new["metadata"].get("finalizers")
            # A pod in its grace period stays until its kubelet confirms (with grace 0).
            and not (rdef.gr == PODS and new["metadata"].get("deletionGracePeriodSeconds"))
        ):
            stored = self.store.update(rdef.gr, key, obj=new)
            self._remove(rdef, key, obj=json.loads(stored.raw))
            return Reply(200, stored.raw, warnings)
        stored = self.store.update(rdef.gr, key, obj=new)
        self._after_write(rdef, current.obj, new=stored.obj)
        return Reply(200, self._raw_as(rdef, stored), warnings)

    # ------------------------------------------------------------------ delete

    async def delete(self, req: Request, options: Any) -> Reply:
        rdef = req.rdef
        key = (req.namespace if rdef.namespaced else "", req.name)
        current = self._require(rdef, req.namespace, name=req.name)
        options = options if isinstance(options, dict) else {}
        preconditions = options.get("preconditions") or {}
        meta = current.obj["metadata"]
        if preconditions.get("uid") and preconditions["uid"] != meta.get("uid"):
            raise errors.conflict(
                rdef.plural,
                rdef.group,
                name=req.name,
                detail=f"Precondition failed: UID in precondition: {preconditions['uid']}, "
                f"UID in object meta: {meta.get('uid')}",
            )
        if preconditions.get("resourceVersion") and preconditions["resourceVersion"] != meta.get(
            "resourceVersion"
        ):
            raise errors.conflict(
                rdef.plural,
                rdef.group,
                name=req.name,
                detail="Precondition failed: ResourceVersion in precondition: "
                f"{preconditions['resourceVersion']}, "
                f"ResourceVersion in object meta: {meta.get('resourceVersion')}",
            )
        dry_run = req.dry_run or "All" in (options.get("dryRun") or [])
        warnings: list[str] = []
        delete_options = {"apiVersion": "meta.k8s.io/v1", "kind": "DeleteOptions", **options}
        await self._mutate(
            "DELETE",
            req,
            obj=None,
            old=current.obj,
            warnings=warnings,
            options=delete_options,
            dry_run=dry_run,
        )
        await self._validate_admission(
            "DELETE",
            req,
            obj=None,
            old=current.obj,
            warnings=warnings,
            options=delete_options,
            dry_run=dry_run,
        )
        current = self._require(rdef, req.namespace, name=req.name)
        orphan = (
            options.get("propagationPolicy") == "Orphan" or options.get("orphanDependents") is True
        )
        if orphan and not dry_run:
            self._orphan_dependents(current.obj["metadata"].get("uid", ""))
        grace = options.get("gracePeriodSeconds", req.query.get("gracePeriodSeconds"))
        return self._delete_now(
            rdef,
            key,
            current=current,
            dry_run=dry_run,
            warnings=warnings,
            grace=int(grace) if grace not in (None, "") else None,
        )

    def _orphan_dependents(self, owner_uid: str) -> None:
        """propagationPolicy=Orphan: dependents lose their reference to the owner and stay."""
        for gr, key in self.store.dependents(owner_uid):
            current = self.store.get(gr, key)
            if current is None:
                continue
            obj = json.loads(current.raw)
            refs = obj["metadata"].get("ownerReferences") or []
            remaining = [r for r in refs if r.get("uid") != owner_uid]
            if remaining:
                obj["metadata"]["ownerReferences"] = remaining
            else:
                obj["metadata"].pop("ownerReferences", None)
            self.store.update(gr, key, obj=obj)

    def _delete_now(
        self,
        rdef: registry.ResourceDef,
        key: store.Key,
        *,
        current: store.Stored,
        dry_run: bool,
        warnings: list[str] | None = None,
        grace: int | None = None,
    ) -> Reply:
        """Delete as kube-apiserver does: a pod on a node gracefully (see
        :meth:`_delete_gracefully`), an object with finalizers (or a namespace, a CRD) by
        marking it, anything else at once."""
        warnings = warnings or []
        obj = json.loads(current.raw)
        meta = obj["metadata"]
        period = pods.grace_period(obj, grace) if rdef.gr == PODS else 0
        if period > 0 or (rdef.gr == PODS and meta.get("deletionGracePeriodSeconds")):
            return self._delete_gracefully(
                rdef, key, current=current, period=period, dry_run=dry_run, warnings=warnings
            )
        blocking = bool(meta.get("finalizers")) or rdef.gr in (NAMESPACES, CRDS)
        if blocking:
            if meta.get("deletionTimestamp"):
                return Reply(200, self._raw_as(rdef, current), warnings)
            meta["deletionTimestamp"] = now_rfc3339()
            meta["deletionGracePeriodSeconds"] = 0
            if rdef.gr == NAMESPACES:
                obj.setdefault("status", {})["phase"] = "Terminating"
            if dry_run:
                return Reply(200, store.encode(obj), warnings)
            stored = self.store.update(rdef.gr, key, obj=obj)
            self._after_write(rdef, current.obj, new=stored.obj)
            reply = Reply(200, self._raw_as(rdef, stored), warnings)
            self._cascade(rdef, stored.obj)
            return reply
        if dry_run:
            return Reply(200, current.raw, warnings)
        final = self._remove(rdef, key, obj=obj)
        if rdef.gr == PODS:
            # The answer is the pod as marked for its immediate deletion (grace 0).
            answered = json.loads(final.raw)
            answered["metadata"].setdefault("deletionTimestamp", now_rfc3339())
            answered["metadata"]["deletionGracePeriodSeconds"] = 0
            return Reply(200, store.encode(answered), warnings)
        status = status_success(
            code=None, name=key[1], group=rdef.group, kind=rdef.plural, uid=meta.get("uid", "")
        )
        return Reply(200, store.encode(status), warnings)

    def _delete_gracefully(
        self,
        rdef: registry.ResourceDef,
        key: store.Key,
        *,
        current: store.Stored,
        period: int,
        dry_run: bool,
        warnings: list[str],
    ) -> Reply:
        """A pod on a node stays, Terminating, until its kubelet says its containers stopped:
        ``deletionTimestamp`` is now plus the grace period, ``deletionGracePeriodSeconds`` the
        period. A later delete may only shorten it (0 ends it now). kubesim plays every node's
        kubelet here: it confirms when the period ends (:meth:`_end_grace`), as the real
        backend's kwok stage does; what the pod requests stays on its node until then."""
        obj = json.loads(current.raw)
        meta = obj["metadata"]
        remaining = meta.get("deletionGracePeriodSeconds")
        if remaining is not None and period >= int(remaining):
            return Reply(200, self._raw_as(rdef, current), warnings)
        if period <= 0:
            meta["deletionGracePeriodSeconds"] = 0
            meta.setdefault("deletionTimestamp", now_rfc3339())
            if dry_run:
                return Reply(200, store.encode(obj), warnings)
            if meta.get("finalizers"):
                stored = self.store.update(rdef.gr, key, obj=obj)
                self._after_write(rdef, current.obj, new=stored.obj)
                return Reply(200, self._raw_as(rdef, stored), warnings)
            return Reply(200, self._remove(rdef, key, obj=obj).raw, warnings)
        ends = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=period)
        meta["deletionTimestamp"] = ends.strftime("%Y-%m-%dT%H:%M:%SZ")
        meta["deletionGracePeriodSeconds"] = period
        if dry_run:
            return Reply(200, store.encode(obj), warnings)
        stored = self.store.update(rdef.gr, key, obj=obj)
        self._after_write(rdef, current.obj, new=stored.obj)
        asyncio.get_running_loop().call_later(
            period, self._end_grace, rdef, key, meta.get("uid", ""), period
        )
        return Reply(200, self._raw_as(rdef, stored), warnings)

    def _end_grace(self, rdef: registry.ResourceDef, key: store.Key, uid: str, period: int) -> None:
        """The kubelet's final delete (grace 0) of a pod whose grace period of ``period`` ended,
        unless it is gone, another pod of that name, or its grace was shortened since."""
        current = self.store.get(rdef.gr, key)
        if current is None or self.closing:
            return
        meta = current.obj["metadata"]
        if meta.get("uid") != uid or meta.get("deletionGracePeriodSeconds") != period:
            return
        self._delete_gracefully(rdef, key, current=current, period=0, dry_run=False, warnings=[])

    async def delete_collection(self, req: Request, options: Any) -> Reply:
        items, _, _ = self.list_objects(
            dataclasses.replace(
                req, query={k: v for k, v in req.query.items() if k not in ("limit", "continue")}
            )
        )
        dry_run = req.dry_run
        for obj in items:
            key = (obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
            current = self.store.get(req.rdef.gr, key)
            if current is not None:
                self._delete_now(req.rdef, key, current=current, dry_run=dry_run)
        body = {
            "kind": req.rdef.list_kind,
            "apiVersion": req.rdef.api_version,
            "metadata": {"resourceVersion": str(self.store.rv)},
            "items": items,
        }
        return Reply(200, store.encode(body))

    def _remove(self, rdef: registry.ResourceDef, key: store.Key, *, obj: dict) -> store.Stored:
        """Remove an object for good, then finish what was waiting for it to go."""
        final = self.store.delete(rdef.gr, key, obj=obj)
        if rdef.gr == CRDS:
            self.registry.unregister_crd(key[1])
        elif rdef.gr == PODS:
            self._refresh_budgets(key[0])
        self._finalize_containers(rdef, obj)
        if self.garbage_collection:
            self._collect_dependents(obj["metadata"].get("uid", ""))
        return final

    def _collect_dependents(self, owner_uid: str) -> None:
        """Background garbage collection: a dependent whose owners are all gone is deleted
        (finalizers permitting); one that still has a live owner loses the dangling reference."""
        for gr, key in self.store.dependents(owner_uid):
            current = self.store.get(gr, key)
            target = self.registry.any_version(*gr)
            if current is None or target is None:
                continue
            refs = current.obj["metadata"].get("ownerReferences") or []
            live = [r for r in refs if self.store.exists(r.get("uid", ""))]
            if live:
                obj = json.loads(current.raw)
                obj["metadata"]["ownerReferences"] = live
                self.store.update(gr, key, obj=obj)
            else:
                self._delete_now(target, key, current=current, dry_run=False)

    def _cascade(self, rdef: registry.ResourceDef, obj: dict) -> None:
        """Deleting a namespace or a CRD deletes what it contains, finalizers permitting, after
        `cascade_delay` seconds: kube-apiserver's controllers take a moment too, and clients
        such as `kubectl delete -f` rely on it to delete a namespace's objects after the
        namespace itself without NotFound errors."""
        if rdef.gr not in (NAMESPACES, CRDS):
            return
        uid = obj["metadata"].get("uid", "")
        name = obj["metadata"]["name"]
        if self.cascade_delay > 0:
            loop = asyncio.get_running_loop()
            loop.call_later(
                self.cascade_delay, functools.partial(self._cascade_now, rdef, name, uid=uid)
            )
        else:
            self._cascade_now(rdef, name, uid=uid)

    def _cascade_now(self, rdef: registry.ResourceDef, name: str, *, uid: str) -> None:
        stored = self.store.get(rdef.gr, ("", name))
        if stored is None or stored.obj["metadata"].get("uid") != uid:
            return  # already gone (or gone and created anew)
        obj = stored.obj
        if rdef.gr == NAMESPACES:
            for target in self._storage_defs():
                if not target.namespaced:
                    continue
                for item in self.store.list(target.gr, name):
                    key = (name, item.obj["metadata"]["name"])
                    self._delete_now(target, key, current=item, dry_run=False)
        else:
            spec = obj.get("spec") or {}
            plural = (spec.get("names") or {}).get("plural", "")
            crd_target = self.registry.any_version(spec.get("group", ""), plural)
            if crd_target is not None:
                for item in self.store.list(crd_target.gr):
                    key = (item.obj["metadata"].get("namespace", ""), item.obj["metadata"]["name"])
                    self._delete_now(crd_target, key, current=item, dry_run=False)
        self._finalize_containers(rdef, obj, itself=True)

    def _finalize_containers(
        self, rdef: registry.ResourceDef, obj: dict, *, itself: bool = False
    ) -> None:
        """Remove a terminating namespace or CRD once nothing it contains remains."""
        candidates: list[tuple[registry.GroupResource, str]] = []
        if itself and rdef.gr in (NAMESPACES, CRDS):
            candidates.append((rdef.gr, obj["metadata"]["name"]))
        elif rdef.namespaced and obj["metadata"].get("namespace"):
            candidates.append((NAMESPACES, obj["metadata"]["namespace"]))
        if not rdef.builtin:
            candidates.append((CRDS, f"{rdef.plural}.{rdef.group}"))
        for gr, name in candidates:
            stored = self.store.get(gr, ("", name))
            if stored is None or not stored.obj["metadata"].get("deletionTimestamp"):
                continue
            if stored.obj["metadata"].get("finalizers"):
                continue
            if gr == NAMESPACES:
                remaining = sum(
                    self.store.count(d.gr, name) for d in self._storage_defs() if d.namespaced
                )
            else:
                spec = stored.obj.get("spec") or {}
                remaining = self.store.count(
                    (spec.get("group", ""), (spec.get("names") or {}).get("plural", ""))
                )
            if remaining == 0:
                target = self.registry.any_version(*gr)
                assert target is not None
                self._remove(target, ("", name), obj=json.loads(stored.raw))

    def _storage_defs(self) -> list[registry.ResourceDef]:
        seen: dict[registry.GroupResource, registry.ResourceDef] = {}
        for rdef in self.registry.iter_defs():
            seen.setdefault(rdef.gr, rdef)
        return list(seen.values())

    def _after_write(self, rdef: registry.ResourceDef, old: dict | None, *, new: dict) -> None:
        if rdef.gr == CRDS:
            self.registry.register_crd(new["metadata"]["name"], crds.resource_defs(new))
        elif rdef.gr in (PODS, PDBS):
            self._refresh_budgets(new["metadata"]["namespace"])

    def _budget_status(self, budget: dict, selector: selectors.LabelSelector) -> dict:
        """A PDB's status as the disruption controller computes it for plain pods: expected pods
        are the matching pods that are not terminating or finished; healthy ones are Running
        and Ready."""
        namespace = budget["metadata"]["namespace"]
        matching = [
            s.obj
            for s in self.store.list(PODS, namespace)
            if selectors.labels_match(selector, s.obj)
            and not s.obj["metadata"].get("deletionTimestamp")
            and (s.obj.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        ]
        healthy = sum(
            1
            for p in matching
            if (p.get("status") or {}).get("phase") == "Running" and pods.is_ready(p)
        )
        spec = budget.get("spec") or {}
        if isinstance(spec.get("minAvailable"), int):
            expected = len(matching)
        else:
            # maxUnavailable and percentages scale with the pods' controllers: pods without a
            # controller kubesim stores (it stores Deployments only) count for nothing.
            expected = self._controllers_scale(namespace, matching)
        desired = _desired_healthy(spec, expected)
        allowed = healthy - desired
        return {
            "observedGeneration": budget["metadata"].get("generation", 1),
            "disruptionsAllowed": allowed if expected > 0 and allowed > 0 else 0,
            "currentHealthy": healthy,
            "desiredHealthy": desired,
            "expectedPods": expected,
        }

    def _controllers_scale(self, namespace: str, matching: list[dict]) -> int:
        """The replicas of the distinct controllers of ``matching`` (the disruption
        controller's expected count for a maxUnavailable or a percentage)."""
        controllers: dict[tuple[str, str], int] = {}
        for pod in matching:
            for ref in pod["metadata"].get("ownerReferences") or []:
                if not ref.get("controller"):
                    continue
                group = _split_api_version(ref.get("apiVersion", ""))[0]
                rdef = next(
                    (
                        d
                        for d in self._storage_defs()
                        if d.group == group and d.kind == ref.get("kind")
                    ),
                    None,
                )
                owner = (
                    self.store.get(rdef.gr, (namespace, ref.get("name", "")))
                    if rdef is not None
                    else None
                )
                if owner is not None and owner.obj["metadata"].get("uid") == ref.get("uid"):
                    replicas = (owner.obj.get("spec") or {}).get("replicas", 1)
                    controllers[(ref.get("kind", ""), ref.get("name", ""))] = int(replicas)
        return sum(controllers.values())

    def _refresh_budgets(self, namespace: str) -> None:
        """Keep the status of the namespace's PDBs current (the disruption controller's job).

        Free when the namespace has no PDB; otherwise linear in its pods per write.
        """
        if not self.store.count(PDBS, namespace):
            return
        for stored in self.store.list(PDBS, namespace):
            selector = selectors.from_label_selector((stored.obj.get("spec") or {}).get("selector"))
            if selector is None:
                continue
            status = self._budget_status(stored.obj, selector)
            current = stored.obj.get("status") or {}
            if {k: current.get(k) for k in status} != status:
                obj = json.loads(stored.raw)
                obj["status"] = {**current, **status}
                self.store.update(PDBS, (namespace, stored.obj["metadata"]["name"]), obj=obj)

    # ------------------------------------------------------------------ pods/eviction, pods/binding

    async def evict(self, req: Request, body: Any) -> Reply:
        pod_def = req.rdef
        current = self._require(pod_def, req.namespace, name=req.name)
        if not isinstance(body, dict):
            raise errors.bad_request("the body of an eviction must be a policy/v1 Eviction")
        eviction = dict(body)
        eviction.setdefault("apiVersion", "policy/v1")
        eviction.setdefault("kind", "Eviction")
        eviction.setdefault("metadata", {}).setdefault("name", req.name)
        eviction["metadata"].setdefault("namespace", req.namespace)
        warnings = await self._admit_subresource_create(
            req, eviction, {"group": "policy", "version": "v1", "kind": "Eviction"}
        )
        current = self._require(pod_def, req.namespace, name=req.name)
        self._check_disruption_budgets(current.obj)
        key = (req.namespace, req.name)
        dry_run = req.dry_run or "All" in (
            (eviction.get("deleteOptions") or {}).get("dryRun") or []
        )
        grace = (eviction.get("deleteOptions") or {}).get("gracePeriodSeconds")
        self._delete_now(
            pod_def,
            key,
            current=current,
            dry_run=dry_run,
            grace=None if grace is None else int(grace),
        )
        body_out = status_success(code=201)
        body_out.pop("details")
        return Reply(201, store.encode(body_out), warnings)

    def _check_disruption_budgets(self, pod: dict) -> None:
        """429 if evicting `pod` would take a matching PDB below its desired healthy count.

        Pods that are Pending, Succeeded, Failed or already terminating are evicted without a
        budget check, as the eviction REST handler does. Healthy means Running and Ready.
        """
        phase = (pod.get("status") or {}).get("phase", "Pending")
        if phase in ("Pending", "Succeeded", "Failed") or pod["metadata"].get("deletionTimestamp"):
            return
        namespace = pod["metadata"]["namespace"]
        budgets = []
        for stored in self.store.list(PDBS, namespace):
            selector = selectors.from_label_selector((stored.obj.get("spec") or {}).get("selector"))
            if selector is not None and selectors.labels_match(selector, pod):
                budgets.append((stored.obj, selector))
        if not budgets:
            return
        if len(budgets) > 1:
            raise errors.internal(
                "This pod has more than one PodDisruptionBudget, which the eviction subresource "
                "does not support."
            )
        budget, selector = budgets[0]
        status = self._budget_status(budget, selector)
        healthy, desired = status["currentHealthy"], status["desiredHealthy"]
        pod_healthy = phase == "Running" and pods.is_ready(pod)
        if (pod_healthy and status["disruptionsAllowed"] >= 1) or (
            not pod_healthy and healthy >= desired
        ):
            return
        name = budget["metadata"]["name"]
        # The eviction handler's two words for a refusal; neither sets Retry-After (only a
        # budget whose status the controller has not yet observed does, which kubesim's
        # always current status never is).
        detail = (
            f"The disruption budget {name} needs {desired} healthy pods and has {healthy} currently"
            if healthy <= desired
            else f"The disruption budget {name} does not allow evicting pods currently"
        )
        raise errors.ApiError(
            429,
            "TooManyRequests",
            message="Cannot evict pod as it would violate the pod's disruption budget.",
            causes=(errors.FieldCause("", "DisruptionBudget", detail),),
        )

    async def bind(self, req: Request, body: Any) -> Reply:
        if not isinstance(body, dict) or not isinstance(body.get("target"), dict):
            raise errors.bad_request("the body of a binding must be a v1 Binding with a target")
        node = body["target"].get("name", "")
        if not node:
            raise errors.invalid(
                "Binding", "", name=req.name, causes=[errors.field_required("target.name", "")]
            )
        warnings = await self._admit_subresource_create(
            req, body, {"group": "", "version": "v1", "kind": "Binding"}
        )
        current = self._require(req.rdef, req.namespace, name=req.name)
        pod = json.loads(current.raw)
        spec = pod.setdefault("spec", {})
        if pod["metadata"].get("deletionTimestamp"):
            raise errors.internal(f"pod {req.name} is being deleted, cannot be assigned to a host")
        if spec.get("nodeName"):
            raise errors.conflict(
                "pods/binding",
                "",
                name=req.name,
                detail=f'pod {req.name} is already assigned to node "{spec["nodeName"]}"',
            )
        if spec.get("schedulingGates"):
            raise errors.conflict(
                "pods/binding",
                "",
                name=req.name,
                detail=f"pod {req.name} has non-empty .spec.schedulingGates",
            )
        spec["nodeName"] = node
        status = pod.setdefault("status", {})
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": now_rfc3339(),
            }
        )
        status["conditions"] = conditions
        if not req.dry_run:
            self.store.update(req.rdef.gr, (req.namespace, req.name), obj=pod)
        body_out = status_success(code=201)
        body_out.pop("details")
        return Reply(201, store.encode(body_out), warnings)

    # ------------------------------------------------------------------ serviceaccounts/token

    async def request_token(self, req: Request, body: Any) -> Reply:
        """TokenRequest: a token for the ServiceAccount (`tokens`); admission sees a CREATE of
        `authentication.k8s.io/v1` TokenRequest on the `token` subresource."""
        account = self._require(req.rdef, req.namespace, name=req.name)
        request = dict(body) if isinstance(body, dict) else body
        warnings: list[str] = []
        if isinstance(request, dict):
            request.setdefault("apiVersion", "authentication.k8s.io/v1")
            request.setdefault("kind", "TokenRequest")
            request.setdefault("metadata", {}).setdefault("name", req.name)
            warnings = await self._admit_subresource_create(
                req,
                request,
                {"group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest"},
            )
        _, answer = self.tokens.issue(
            namespace=req.namespace,
            name=req.name,
            uid=account.obj["metadata"]["uid"],
            request=request,
        )
        return Reply(201, store.encode(answer), warnings)

    def authenticate(self, token: str) -> dict | None:
        """The user of a token kubesim issued (401 if it expired or its account is gone);
        None for any other token."""

        def uid_of(namespace: str, name: str) -> str | None:
            stored = self.store.get(SERVICE_ACCOUNTS, (namespace, name))
            return None if stored is None else stored.obj["metadata"].get("uid")

        return self.tokens.authenticate(token, service_account_uid=uid_of)

    # ------------------------------------------------------------------ admission

    async def _admit_subresource_create(self, req: Request, obj: dict, kind: dict) -> list[str]:
        """Mutating then validating admission of a CREATE on a subresource (eviction, binding,
        token), as kube-apiserver runs it; the warnings of the webhooks."""
        warnings: list[str] = []
        options = self._options("CreateOptions", req)
        await self._mutate(
            "CREATE", req, obj=obj, old=None, warnings=warnings, options=options, kind=kind
        )
        await self._validate_admission(
            "CREATE", req, obj=obj, old=None, warnings=warnings, options=options, kind=kind
        )
        return warnings

    def _options(self, kind: str, req: Request) -> dict:
        options: dict[str, Any] = {"apiVersion": "meta.k8s.io/v1", "kind": kind}
        if req.dry_run:
            options["dryRun"] = ["All"]
        if req.query.get("fieldManager"):
            options["fieldManager"] = req.query["fieldManager"]
        if req.query.get("fieldValidation"):
            options["fieldValidation"] = req.query["fieldValidation"]
        return options

    def _attributes(
        self,
        operation: str,
        req: Request,
        *,
        obj: dict | None,
        old: dict | None,
        options: dict,
        dry_run: bool | None,
        kind: dict | None,
    ) -> Any:
        rdef = req.rdef
        name = req.name or ((obj or old or {}).get("metadata") or {}).get("name", "")
        return admission.AdmissionAttributes(
            operation=operation,
            group=rdef.group,
            version=rdef.version,
            resource=rdef.plural,
            subresource=req.subresource,
            kind=kind or {"group": rdef.group, "version": rdef.version, "kind": rdef.kind},
            name=name,
            namespace=req.namespace if rdef.namespaced else "",
            user=req.user,
            obj=obj,
            old_obj=old,
            dry_run=req.dry_run if dry_run is None else dry_run,
            options=options,
        )

    def _admission_applies(self, req: Request) -> bool:
        return self.admission_chain is not None and req.rdef.gr not in WEBHOOK_CONFIGURATIONS

    async def _mutate(
        self,
        operation: str,
        req: Request,
        *,
        obj: dict | None,
        old: dict | None,
        warnings: list[str],
        options: dict,
        dry_run: bool | None = None,
        kind: dict | None = None,
    ) -> Any:
        if not self._admission_applies(req):
            return obj
        attrs = self._attributes(
            operation, req, obj=obj, old=old, options=options, dry_run=dry_run, kind=kind
        )
        try:
            result, more = await self.admission_chain.mutate(attrs)  # type: ignore[union-attr]
        except admission.AdmissionDenied as exc:
            raise _denied(exc) from exc
        warnings.extend(more)
        return obj if result is None else result

    async def _validate_admission(
        self,
        operation: str,
        req: Request,
        *,
        obj: dict | None,
        old: dict | None,
        warnings: list[str],
        options: dict,
        dry_run: bool | None = None,
        kind: dict | None = None,
    ) -> None:
        if not self._admission_applies(req):
            return
        attrs = self._attributes(
            operation, req, obj=obj, old=old, options=options, dry_run=dry_run, kind=kind
        )
        try:
            more = await self.admission_chain.validate(attrs)  # type: ignore[union-attr]
        except admission.AdmissionDenied as exc:
            raise _denied(exc) from exc
        warnings.extend(more)

    # ------------------------------------------------------------------ helpers

    def _require(self, rdef: registry.ResourceDef, namespace: str, *, name: str) -> store.Stored:
        stored = self.store.get(rdef.gr, (namespace if rdef.namespaced else "", name))
        if stored is None:
            raise errors.not_found(rdef.plural, rdef.group, name=name)
        return stored

    def _as_version(self, rdef: registry.ResourceDef, obj: dict) -> dict:
        if obj.get("apiVersion") == rdef.api_version:
            return obj
        return {**obj, "apiVersion": rdef.api_version}

    def _raw_as(self, rdef: registry.ResourceDef, stored: store.Stored) -> bytes:
        if stored.obj.get("apiVersion") == rdef.api_version:
            return stored.raw
        return store.encode(self._as_version(rdef, stored.obj))


def _denied(exc: admission.AdmissionDenied) -> errors.ApiError:
    """The Status of a denial, returned as the webhook chain worded it."""
    status = dict(exc.status or {})
    code = int(status.get("code") or 400)
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", **status}
    body["code"] = code
    return errors.ApiError(
        code, str(status.get("reason") or ""), message=str(status.get("message") or ""), body=body
    )


def apply_defaults(rdef: registry.ResourceDef, obj: dict) -> None:
    """The defaults of the built-in types that matter to clients (decode time, before admission)."""
    if rdef.gr == PODS:
        pods.apply_defaults(obj)
    elif rdef.gr == ("", "secrets"):
        obj["type"] = obj.get("type") or "Opaque"
    elif rdef.gr == ("scheduling.k8s.io", "priorityclasses"):
        obj.setdefault("preemptionPolicy", "PreemptLowerPriority")
    elif rdef.gr in WEBHOOK_CONFIGURATIONS:
        admission.default_configuration(obj, mutating=rdef.kind.startswith("Mutating"))


def _display_name(obj: dict) -> str:
    metadata = obj["metadata"]
    return str(metadata.get("name") or metadata.get("generateName", ""))


def _split_api_version(api_version: str) -> tuple[str, str]:
    if "/" in api_version:
        group, version = api_version.split("/", 1)
        return group, version
    return "", api_version


def _condition_time(crd: dict) -> str:
    for condition in (crd.get("status") or {}).get("conditions") or []:
        if condition.get("lastTransitionTime"):
            return str(condition["lastTransitionTime"])
    return now_rfc3339()


_NAME_CHARS = frozenset(string.ascii_lowercase + string.digits + "-.")


def _validate_metadata(obj: dict) -> list[errors.FieldCause]:
    metadata = obj.get("metadata") or {}
    name = metadata.get("name", "")
    if not name:
        if metadata.get("generateName"):
            return []
        return [errors.field_required("metadata.name", "name or generateName is required")]
    causes = []
    if (
        not isinstance(name, str)
        or len(name) > 253
        or not set(name) <= _NAME_CHARS
        or not name[0].isalnum()
        or not name[-1].isalnum()
    ):
        causes.append(
            errors.field_invalid(
                "metadata.name",
                name,
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                "characters, '-' or '.', and must start and end with an alphanumeric character",
            )
        )
    for field in ("labels", "annotations"):
        value = metadata.get(field)
        if value is not None and (
            not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values())
        ):
            causes.append(
                errors.field_invalid(f"metadata.{field}", value, "must be a map of strings")
            )
    return causes


def _desired_healthy(spec: dict, expected: int) -> int:
    """desiredHealthy of the disruption controller: from minAvailable, or expected - maxUnavailable.

    Percentages round up, as the controller's `GetScaledValueFromIntOrPercent(..., true)`.
    """

    def scaled(value: Any) -> int:
        if isinstance(value, str) and value.endswith("%"):
            return -(-int(value[:-1]) * expected // 100)
        return int(value)

    if "minAvailable" in spec:
        return scaled(spec["minAvailable"])
    if "maxUnavailable" in spec:
        return max(0, expected - scaled(spec["maxUnavailable"]))
    return expected
