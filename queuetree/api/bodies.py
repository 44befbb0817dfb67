"""The bodies the operator sends to the API server, and the identity it reads off watch events.

Only ``queuetree.api`` knows wire keys (STYLE rule 7): the operator plans what to write in its
own terms (a queue's new status figures, a mark, a warning) and builds the request body here:
status subresource patches, merge patches of metadata and spec, Events, Evictions and the
queues it creates at start-up. Each builder returns a fresh dict the caller may hand to a
client as it is.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

import orjson

from queuetree.core import objects

VOLCANO_GROUP: Final = "scheduling.volcano.sh"
VOLCANO_VERSION: Final = "v1beta1"
VOLCANO_API_VERSION: Final = f"{VOLCANO_GROUP}/{VOLCANO_VERSION}"

EVENT_MESSAGE_LIMIT: Final = 1024
"""Characters of an Event's message kept (the API server refuses much longer ones, and a
person reads the start)."""

RawBody = Mapping[str, Any]
"""An object as the API server sends it (camelCase keys)."""


def decode(data: bytes | str) -> Any:
    """The JSON text ``data`` as Python values, exactly as :func:`json.loads` reads it.

    orjson reads a pod's watch event in about half the time; what it declines (integers beyond
    64 bits, ``NaN``, and text that is not JSON) is read by :func:`json.loads`, which gives the
    same values or raises the same ``ValueError`` as before.
    """
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def fingerprint(value: Any) -> int | None:
    """Decoded JSON values as one int, equal for equal values that list their keys in the same
    order (as two serialisations of the same object by the API server do); None for anything
    else (the caller treats it as changed).

    What a long-lived cache keeps to tell whether a part of an object changed: one object the
    cyclic garbage collector never looks at, instead of the dicts and lists of that part, which
    it would walk in every full collection. The values are written as one flat JSON text
    (orjson; other mappings as the dicts they hold) and the int is Python's hash of it: a
    64-bit SipHash keyed at random when the process starts (unless ``PYTHONHASHSEED`` sets
    the key), so two different values give the same int with a chance of one in 2**64, and
    nobody outside the process can choose values that do. A
    pod's two parts were kept as their text, about 4 KB each: 8 MiB per thousand pods in the
    operator, for a comparison that needs none of it (docs/benchmarks.md).

    None for what orjson does not write as JSON data of the same type: integers beyond 64 bits,
    keys that are not strings, datetimes, subclasses of the JSON types. NaN and the infinities
    (which JSON, and so the API server, cannot send) are written as ``null``.
    """
    try:
        text = orjson.dumps(value, default=_plain, option=_EXACT)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return None
    return hash(text)


_EXACT: Final = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_SUBCLASS


def encode(value: Any) -> bytes:
    """A request body as JSON text: dicts, lists, tuples, strings, numbers, booleans and None,
    and other mappings as the dicts they hold. Raises ``TypeError`` for anything else (a
    datetime too: the bodies built here carry their timestamps as RFC 3339 strings)."""
    return orjson.dumps(value, default=_mapping, option=orjson.OPT_PASSTHROUGH_DATETIME)


def _mapping(value: object) -> dict[Any, Any]:
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"not JSON: {type(value).__name__}")


def _plain(value: object) -> dict[Any, Any]:
    if type(value) is MappingProxyType:
        return dict(value)
    raise TypeError(type(value).__name__)


# -- reading the identity of a watched object ---------------------------------------------------


def name_of(body: RawBody) -> str:
    """``metadata.name`` ("" when absent)."""
    metadata = body.get("metadata")
    return str(metadata.get("name") or "") if isinstance(metadata, Mapping) else ""


def uid_of(body: RawBody) -> str:
    """``metadata.uid`` ("" when absent)."""
    metadata = body.get("metadata")
    return str(metadata.get("uid") or "") if isinstance(metadata, Mapping) else ""


def key_of(body: RawBody) -> str:
    """``namespace/name`` of a namespaced object (``/name`` for a cluster-scoped one)."""
    metadata = body.get("metadata")
    if not isinstance(metadata, Mapping):
        return "/"
    return f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"


def resource_version_of(body: RawBody, default: str = "") -> str:
    """``metadata.resourceVersion`` (``default`` when absent)."""
    metadata = body.get("metadata")
    if not isinstance(metadata, Mapping):
        return default
    return str(metadata.get("resourceVersion") or default)


def finalizers_of(body: RawBody) -> tuple[str, ...]:
    """``metadata.finalizers``, the strings among them (() when absent)."""
    metadata = body.get("metadata")
    found = metadata.get("finalizers") if isinstance(metadata, Mapping) else None
    if not isinstance(found, list):
        return ()
    return tuple(item for item in found if isinstance(item, str))


def status_copy_of(body: RawBody) -> dict[str, Any]:
    """A copy of ``status`` ({} when absent)."""
    status = body.get("status")
    return dict(status) if isinstance(status, Mapping) else {}


# -- the sections of an object, read tolerantly -------------------------------------------------
#
# Reviews and tools read shapes nobody has validated yet: each section is the object's own
# mapping when it is one, else an empty mapping (never a copy, never an error), so the caller
# reads a field with ``.get`` and decides what a missing one means.

_EMPTY: Final[Mapping[str, Any]] = MappingProxyType({})


def _section(body: object, name: str) -> Mapping[str, Any]:
    if not isinstance(body, Mapping):
        return _EMPTY
    value = body.get(name)
    return value if isinstance(value, Mapping) else _EMPTY


def metadata_of(body: object) -> Mapping[str, Any]:
    """``metadata`` of a raw object (empty when absent or not an object)."""
    return _section(body, "metadata")


def spec_of(body: object) -> Mapping[str, Any]:
    """``spec`` of a raw object (empty when absent or not an object)."""
    return _section(body, "spec")


def status_of(body: object) -> Mapping[str, Any]:
    """``status`` of a raw object (empty when absent or not an object); not a copy."""
    return _section(body, "status")


def annotations_of(body: object) -> Mapping[str, Any]:
    """``metadata.annotations`` of a raw object, values as written (empty when absent)."""
    return _section(metadata_of(body), "annotations")


def labels_of(body: object) -> Mapping[str, Any]:
    """``metadata.labels`` of a raw object, values as written (empty when absent)."""
    return _section(metadata_of(body), "labels")


# -- writes -------------------------------------------------------------------------------------


def status_patch(status: Mapping[str, Any]) -> dict[str, Any]:
    """A merge patch of the ``status`` subresource with ``status``."""
    return {"status": dict(status)}


def annotations_patch(annotations: Mapping[str, str | None]) -> dict[str, Any]:
    """A merge patch of ``metadata.annotations`` (None removes a key)."""
    return {"metadata": {"annotations": dict(annotations)}}


def queue_patch(
    *, annotations: Mapping[str, str] | None = None, parent: str | None = None
) -> dict[str, Any]:
    """A merge patch of a Queue: ``annotations`` into its metadata, ``parent`` into its spec
    (each only when given); {} when neither is."""
    patch: dict[str, Any] = {}
    if annotations:
        patch.update(annotations_patch(annotations))
    if parent is not None:
        patch["spec"] = {"parent": parent}
    return patch


def queue_manifest(name: str, *, reclaimable: bool) -> dict[str, Any]:
    """A Queue the operator creates at start-up: weight 1, ``reclaimable`` as given, under
    ``root`` (root itself has no parent)."""
    spec: dict[str, Any] = {"weight": 1, "reclaimable": reclaimable}
    if name != objects.ROOT_QUEUE:
        spec["parent"] = objects.ROOT_QUEUE
    return {
        "apiVersion": VOLCANO_API_VERSION,
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": spec,
    }


def eviction(namespace: str, name: str) -> dict[str, Any]:
    """A ``policy/v1`` Eviction of pod ``namespace/name``."""
    return {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace},
    }


def timestamp(seconds: float) -> str:
    """``seconds`` since the epoch in the RFC 3339 form of Kubernetes timestamps (whole seconds,
    UTC: ``2026-01-31T12:00:00Z``)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def event(
    *,
    kind: str,
    api_version: str,
    namespace: str,
    name: str,
    event_type: str,
    reason: str,
    message: str,
    stamp: str,
    event_namespace: str,
    component: str,
    uid: str = "",
    event_name: str = "",
) -> dict[str, Any]:
    """A ``v1`` Event about one object, as ``kubectl describe`` shows it.

    ``kubectl describe`` lists events with a field selector on the involved object's name,
    namespace *and* uid, so an event without the uid is invisible there. ``event_namespace``
    is where the event of a cluster-scoped object (``namespace`` "") goes; ``stamp`` is the
    RFC 3339 time of both timestamps; the message is cut to :data:`EVENT_MESSAGE_LIMIT`.
    ``event_name`` names the Event itself (the API server then refuses a second one of that
    name with 409 while the first lives: an Event sent once, whoever sends it); without it,
    the server generates a name from the object's.
    """
    involved: dict[str, Any] = {"kind": kind, "apiVersion": api_version, "name": name}
    if namespace:
        involved["namespace"] = namespace
    if uid:
        involved["uid"] = uid
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            **({"name": event_name} if event_name else {"generateName": f"{name}."}),
            "namespace": namespace or event_namespace,
        },
        "involvedObject": involved,
        "type": event_type,
        "reason": reason,
        "message": message[:EVENT_MESSAGE_LIMIT],
        "source": {"component": component},
        "reportingComponent": component,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


def tls_secret(
    name: str,
    namespace: str,
    *,
    data: Mapping[str, str],
    labels: Mapping[str, str],
    resource_version: str = "",
) -> dict[str, Any]:
    """A ``kubernetes.io/tls`` Secret with ``data`` (base64 values); ``resource_version`` given
    for a replace (the API server refuses a replace of a newer Secret)."""
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "labels": dict(labels)}
    if resource_version:
        metadata["resourceVersion"] = resource_version
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata,
        "type": "kubernetes.io/tls",
        "data": dict(data),
    }


def config_map(
    name: str, namespace: str, *, data: Mapping[str, str], labels: Mapping[str, str]
) -> dict[str, Any]:
    """A ConfigMap with ``data``."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "data": dict(data),
    }


def with_metadata(body: RawBody, metadata: Mapping[str, Any]) -> dict[str, Any]:
    """A shallow copy of ``body`` with ``metadata`` instead of its own."""
    return {**body, "metadata": dict(metadata)}


def with_status_of(body: RawBody, other: RawBody) -> dict[str, Any]:
    """A shallow copy of ``body`` with the ``status`` of ``other`` (when ``other`` has one)."""
    copy = dict(body)
    if "status" in other:
        copy["status"] = other["status"]
    return copy


def pod_of_template(template: RawBody, metadata: Mapping[str, Any]) -> dict[str, Any]:
    """A ``v1`` Pod from a pod template (a Job's ``spec.template``), with ``metadata``."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": dict(metadata),
        "spec": dict(spec_of(template)),
    }
