"""Decoding the Kubernetes protobuf bodies that kubectl's generators send.

`kubectl create namespace|configmap|secret|serviceaccount|priorityclass|token` encode the new
object (for `token`, an `authentication.k8s.io/v1` TokenRequest) as
`application/vnd.kubernetes.protobuf` (built-in kinds only) and do not fall back to JSON on a 415,
so kubesim decodes exactly those kinds. Everything else in protobuf stays a 415 that names the
kind (documented deviation): kubesim answers only JSON, and only JSON bodies are taken elsewhere.

Wire format: the 4 magic bytes `k8s\\0`, then a `runtime.Unknown` {typeMeta=1 {apiVersion=1,
kind=2}, raw=2, contentEncoding=3, contentType=4}; `raw` is the object's own message.
"""

from __future__ import annotations

import base64
import datetime
from collections.abc import Callable
from typing import Any

from kubesim import errors

MAGIC = b"k8s\x00"

Fields = dict[int, list[int | bytes]]


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def parse_message(data: bytes) -> Fields:
    """Field number -> values (ints for varints, bytes for length-delimited; fixed ints as ints)."""
    fields: Fields = {}
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 2:
            length, pos = _varint(data, pos)
            value = data[pos : pos + length]
            if len(value) != length:
                raise ValueError("truncated field")
            pos += length
        elif wire == 1:
            value = int.from_bytes(data[pos : pos + 8], "little")
            pos += 8
        elif wire == 5:
            value = int.from_bytes(data[pos : pos + 4], "little")
            pos += 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        fields.setdefault(number, []).append(value)
    return fields


def _string(fields: Fields, number: int) -> str | None:
    values = fields.get(number)
    if not values:
        return None
    value = values[-1]
    return value.decode() if isinstance(value, bytes) else str(value)


def _bytes(value: int | bytes) -> bytes:
    if not isinstance(value, bytes):
        raise ValueError("expected a length-delimited field")
    return value


def _map(fields: Fields, number: int, *, binary: bool = False) -> dict[str, str] | None:
    values = fields.get(number)
    if not values:
        return None
    result: dict[str, str] = {}
    for entry in values:
        parsed = parse_message(_bytes(entry))
        key = _string(parsed, 1) or ""
        raw = parsed.get(2, [b""])[-1]
        raw_bytes = _bytes(raw)
        result[key] = base64.b64encode(raw_bytes).decode() if binary else raw_bytes.decode()
    return result


def _strings(fields: Fields, number: int) -> list[str] | None:
    values = fields.get(number)
    return [_bytes(v).decode() for v in values] if values else None


def _time(fields: Fields, number: int) -> str | None:
    values = fields.get(number)
    if not values:
        return None
    seconds = parse_message(_bytes(values[-1])).get(1, [0])[-1]
    assert isinstance(seconds, int)
    moment = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _object_meta(data: bytes) -> dict[str, Any]:
    fields = parse_message(data)
    meta: dict[str, Any] = {}
    for number, name in (
        (1, "name"),
        (2, "generateName"),
        (3, "namespace"),
        (5, "uid"),
        (6, "resourceVersion"),
    ):
        value = _string(fields, number)
        if value:
            meta[name] = value
    for number, name in ((11, "labels"), (12, "annotations")):
        mapping = _map(fields, number)
        if mapping is not None:
            meta[name] = mapping
    finalizers = _strings(fields, 14)
    if finalizers:
        meta["finalizers"] = finalizers
    created = _time(fields, 8)
    if created and not created.startswith("1970-"):
        meta["creationTimestamp"] = created
    return meta


def _bool(fields: Fields, number: int) -> bool | None:
    values = fields.get(number)
    return bool(values[-1]) if values else None


def _namespace(fields: Fields) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if fields.get(2):
        finalizers = _strings(parse_message(_bytes(fields[2][-1])), 1)
        body["spec"] = {"finalizers": finalizers} if finalizers else {}
    return body


def _configmap(fields: Fields) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if (data := _map(fields, 2)) is not None:
        body["data"] = data
    if (binary := _map(fields, 3, binary=True)) is not None:
        body["binaryData"] = binary
    if (immutable := _bool(fields, 4)) is not None:
        body["immutable"] = immutable
    return body


def _secret(fields: Fields) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if (data := _map(fields, 2, binary=True)) is not None:
        body["data"] = data
    if (kind := _string(fields, 3)) is not None:
        body["type"] = kind
    if (string_data := _map(fields, 4)) is not None:
        body["stringData"] = string_data
    if (immutable := _bool(fields, 5)) is not None:
        body["immutable"] = immutable
    return body


def _service_account(fields: Fields) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if (automount := _bool(fields, 4)) is not None:
        body["automountServiceAccountToken"] = automount
    return body


def _priority_class(fields: Fields) -> dict[str, Any]:
    body: dict[str, Any] = {}
    values = fields.get(2)
    if values and isinstance(values[-1], int):
        value = values[-1]
        body["value"] = value - (1 << 64) if value >= 1 << 63 else value  # int32 as a varint
    if (default := _bool(fields, 3)) is not None:
        body["globalDefault"] = default
    if (description := _string(fields, 4)) is not None:
        body["description"] = description
    if (policy := _string(fields, 5)) is not None:
        body["preemptionPolicy"] = policy
    return body


def _int64(fields: Fields, number: int) -> int | None:
    values = fields.get(number)
    if not values or not isinstance(values[-1], int):
        return None
    value = values[-1]
    return value - (1 << 64) if value >= 1 << 63 else value


def _token_request(fields: Fields) -> dict[str, Any]:
    """`kubectl create token`: spec {audiences=1, boundObjectRef=3 {kind=1, apiVersion=2,
    name=3, uid=4}, expirationSeconds=4}."""
    body: dict[str, Any] = {}
    if not fields.get(2):
        return body
    spec_fields = parse_message(_bytes(fields[2][-1]))
    spec: dict[str, Any] = {}
    if (audiences := _strings(spec_fields, 1)) is not None:
        spec["audiences"] = audiences
    if (seconds := _int64(spec_fields, 4)) is not None:
        spec["expirationSeconds"] = seconds
    if spec_fields.get(3):
        bound = parse_message(_bytes(spec_fields[3][-1]))
        reference = {
            key: value
            for number, key in ((1, "kind"), (2, "apiVersion"), (3, "name"), (4, "uid"))
            if (value := _string(bound, number))
        }
        spec["boundObjectRef"] = reference
    body["spec"] = spec
    return body


DECODERS: dict[tuple[str, str], Callable[[Fields], dict[str, Any]]] = {
    ("v1", "Namespace"): _namespace,
    ("v1", "ConfigMap"): _configmap,
    ("v1", "Secret"): _secret,
    ("v1", "ServiceAccount"): _service_account,
    ("scheduling.k8s.io/v1", "PriorityClass"): _priority_class,
    ("authentication.k8s.io/v1", "TokenRequest"): _token_request,
}


def decode(body: bytes) -> dict[str, Any]:
    """A protobuf request body as the JSON object it stands for; 415 for kinds kubesim lacks."""
    if not body.startswith(MAGIC):
        raise errors.bad_request("the protobuf body does not start with the k8s magic bytes")
    try:
        unknown = parse_message(body[len(MAGIC) :])
        type_meta = parse_message(_bytes(unknown.get(1, [b""])[-1]))
        api_version = _string(type_meta, 1) or ""
        kind = _string(type_meta, 2) or ""
        decoder = DECODERS.get((api_version, kind))
        if decoder is None:
            raise errors.ApiError(
                415,
                "UnsupportedMediaType",
                message=f"kubesim cannot decode {kind or 'this kind'} ({api_version}) from "
                "application/vnd.kubernetes.protobuf: send JSON (for kubectl: apply -f a manifest)",
            )
        fields = parse_message(_bytes(unknown.get(2, [b""])[-1]))
        obj: dict[str, Any] = {"apiVersion": api_version, "kind": kind}
        obj["metadata"] = _object_meta(_bytes(fields[1][-1])) if fields.get(1) else {}
        obj.update(decoder(fields))
        return obj
    except (ValueError, UnicodeDecodeError, IndexError) as exc:
        raise errors.bad_request(f"the protobuf body could not be decoded: {exc}") from exc
