"""CustomResourceDefinitions: what a CRD serves, and its schema applied to custom resources.

- `validate` checks the few CRD rules clients rely on (name is `<plural>.<group>`, one storage
  version, a known scope).
- `prepare` sets the status a real apiserver reaches within a moment: NamesAccepted and Established
  True, `acceptedNames`, `storedVersions`.
- `resource_defs` turns a CRD into the `registry.ResourceDef`s of its served versions.
- `prune` walks a custom resource against its openAPIV3Schema: drops unknown fields (reporting
  them for fieldValidation), applies `default`s, drops nulls the schema does not allow.
- `validate_object` runs `jsonschema` on the result. No CEL (documented deviation).
"""

from __future__ import annotations

import datetime
import functools
import json
from typing import Any

import jsonschema

from kubesim import errors, registry

GROUP = "apiextensions.k8s.io"


def validate(crd: dict) -> list[errors.FieldCause]:
    causes: list[errors.FieldCause] = []
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group = spec.get("group") or ""
    plural = names.get("plural") or ""
    if not group:
        causes.append(errors.field_required("spec.group", ""))
    if not plural:
        causes.append(errors.field_required("spec.names.plural", ""))
    if not names.get("kind"):
        causes.append(errors.field_required("spec.names.kind", ""))
    name = (crd.get("metadata") or {}).get("name", "")
    if group and plural and name != f"{plural}.{group}":
        causes.append(
            errors.field_invalid("metadata.name", name, 'must be spec.names.plural+"."+spec.group')
        )
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        causes.append(
            errors.FieldCause(
                "spec.scope",
                "FieldValueNotSupported",
                f'{json.dumps(spec.get("scope"))}: supported values: "Cluster", "Namespaced"',
            )
        )
    versions = spec.get("versions") or []
    if not versions:
        causes.append(
            errors.field_invalid(
                "spec.versions", versions, "must have exactly one version marked as storage version"
            )
        )
    elif sum(1 for v in versions if v.get("storage")) != 1:
        causes.append(
            errors.field_invalid(
                "spec.versions",
                [v.get("name") for v in versions],
                "must have exactly one version marked as storage version",
            )
        )
    return causes


def prepare(crd: dict, *, now: str) -> None:
    """The status a CRD reaches at once in kubesim: names accepted, established."""
    spec = crd.get("spec") or {}
    names = dict(spec.get("names") or {})
    names.setdefault("singular", str(names.get("kind", "")).lower())
    names.setdefault("listKind", f"{names.get('kind', '')}List")
    spec["names"] = names
    storage = [v["name"] for v in spec.get("versions") or [] if v.get("storage")]
    crd["status"] = {
        "acceptedNames": names,
        "storedVersions": storage,
        "conditions": [
            {
                "type": "NamesAccepted",
                "status": "True",
                "lastTransitionTime": now,
                "reason": "NoConflicts",
                "message": "no conflicts found",
            },
            {
                "type": "Established",
                "status": "True",
                "lastTransitionTime": now,
                "reason": "InitialNamesAccepted",
                "message": "the initial names have been accepted",
            },
        ],
    }


def resource_defs(crd: dict) -> list[registry.ResourceDef]:
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    result = []
    for version in spec.get("versions") or []:
        if not version.get("served", True):
            continue
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        columns = version.get("additionalPrinterColumns")
        subresources = version.get("subresources") or {}
        result.append(
            registry.ResourceDef(
                group=spec["group"],
                version=version["name"],
                plural=names["plural"],
                singular=names.get("singular") or names["kind"].lower(),
                kind=names["kind"],
                namespaced=spec.get("scope") == "Namespaced",
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                # The scale subresource is not served (documented deviation).
                subresources=frozenset(k for k in ("status",) if k in subresources),
                builtin=False,
                tracks_generation=True,
                printer_columns=None
                if columns is None
                else tuple(
                    registry.PrinterColumn(
                        name=c.get("name", ""),
                        type=c.get("type", "string"),
                        json_path=c.get("jsonPath", ""),
                        description=c.get("description", ""),
                        priority=int(c.get("priority", 0)),
                        format=c.get("format", ""),
                    )
                    for c in columns
                ),
                schema=schema,
                preserve_unknown_fields=bool(
                    schema and schema.get("x-kubernetes-preserve-unknown-fields")
                ),
            )
        )
    return result


def prune(obj: dict, schema: Any) -> list[str]:
    """Prune and default `obj` in place against `schema`; return the dropped field paths.

    `apiVersion`, `kind` and `metadata` at the root are never pruned. `status` is pruned with the
    rest (a CRD whose schema has no `status` drops it, as kube-apiserver does).
    """
    if not isinstance(schema, dict):
        return []
    unknown: list[str] = []
    properties = schema.get("properties") or {}
    for key in list(obj):
        if key in ("apiVersion", "kind", "metadata"):
            continue
        if key in properties:
            obj[key] = _prune_value(obj[key], properties[key], path=key, unknown=unknown)
            if obj[key] is _DROP:
                del obj[key]
        elif not schema.get("x-kubernetes-preserve-unknown-fields"):
            unknown.append(key)
            del obj[key]
    _apply_defaults(obj, properties)
    return unknown


_DROP = object()


def _prune_value(value: Any, schema: Any, *, path: str, unknown: list[str]) -> Any:
    if not isinstance(schema, dict):
        return value
    if value is None:
        return value if schema.get("nullable") else _DROP
    if isinstance(value, dict):
        if schema.get("x-kubernetes-embedded-resource"):
            kept = {k: value[k] for k in ("apiVersion", "kind", "metadata") if k in value}
        else:
            kept = {}
        properties = schema.get("properties")
        additional = schema.get("additionalProperties")
        keep_unknown = (
            bool(schema.get("x-kubernetes-preserve-unknown-fields"))
            or additional is True
            or (properties is None and schema.get("type") != "object")
        )
        for key, item in value.items():
            if key in kept:
                continue
            child_path = f"{path}.{key}"
            if isinstance(properties, dict) and key in properties:
                pruned = _prune_value(item, properties[key], path=child_path, unknown=unknown)
            elif isinstance(additional, dict):
                pruned = _prune_value(item, additional, path=child_path, unknown=unknown)
            elif keep_unknown:
                pruned = item
            else:
                unknown.append(child_path)
                continue
            if pruned is not _DROP:
                kept[key] = pruned
        _apply_defaults(kept, properties or {})
        return kept
    if isinstance(value, list):
        items = schema.get("items")
        result = []
        for i, item in enumerate(value):
            pruned = (
                _prune_value(item, items, path=f"{path}[{i}]", unknown=unknown)
                if isinstance(items, dict)
                else item
            )
            if pruned is not _DROP:
                result.append(pruned)
        return result
    return value


def _apply_defaults(obj: dict, properties: dict) -> None:
    for key, prop in properties.items():
        if isinstance(prop, dict) and "default" in prop and key not in obj:
            obj[key] = json.loads(json.dumps(prop["default"]))


@functools.lru_cache(maxsize=256)
def _validator(schema_json: str) -> jsonschema.protocols.Validator:
    schema = json.loads(schema_json)
    return jsonschema.Draft7Validator(_to_json_schema(schema))


def _to_json_schema(schema: Any) -> Any:
    """OpenAPI v3 structural schema to JSON Schema: drop what jsonschema would misread."""
    if isinstance(schema, dict):
        result: dict[str, Any] = {}
        for key, value in schema.items():
            if key in ("nullable", "format", "x-kubernetes-validations"):
                continue
            if key == "properties" and isinstance(value, dict):
                result[key] = {k: _to_json_schema(v) for k, v in value.items()}
            else:
                result[key] = _to_json_schema(value)
        if schema.get("nullable") and "type" in result:
            result["type"] = [result["type"], "null"]
        if schema.get("x-kubernetes-int-or-string"):
            result.pop("type", None)
            result["anyOf"] = [{"type": "integer"}, {"type": "string"}]
        return result
    if isinstance(schema, list):
        return [_to_json_schema(v) for v in schema]
    return schema


def validate_object(obj: dict, schema: Any) -> list[errors.FieldCause]:
    """jsonschema checks of a pruned custom resource; metadata is not checked by the schema."""
    if not isinstance(schema, dict):
        return []
    checked = {k: v for k, v in obj.items() if k != "metadata"}
    root = dict(schema)
    if isinstance(root.get("properties"), dict):
        root["properties"] = {k: v for k, v in root["properties"].items() if k != "metadata"}
    validator = _validator(json.dumps(root, sort_keys=True))
    causes = []
    for error in sorted(validator.iter_errors(checked), key=lambda e: list(e.absolute_path)):
        path = _field_path(list(error.absolute_path))
        causes.append(_cause(error, path))
    return causes


def _field_path(parts: list[Any]) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "<root>"


def _cause(error: jsonschema.ValidationError, path: str) -> errors.FieldCause:
    keyword = error.validator
    value = error.instance
    if keyword == "required":
        missing = str(error.message).split("'")[1] if "'" in str(error.message) else ""
        field = f"{path}.{missing}" if path != "<root>" else missing
        return errors.field_required(field, "")
    if keyword == "type":
        expected = error.validator_value
        return errors.FieldCause(
            path,
            "FieldValueTypeInvalid",
            f"{json.dumps(value)}: {path} in body must be of type {expected}: "
            f"{json.dumps(_go_type(value))}",
        )
    if keyword == "enum":
        allowed = ", ".join(json.dumps(v) for v in error.validator_value)  # type: ignore[union-attr]
        return errors.FieldCause(
            path, "FieldValueNotSupported", f"{json.dumps(value)}: supported values: {allowed}"
        )
    return errors.field_invalid(path, value, f"{path} in body {_describe(error)}")


def _go_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _describe(error: jsonschema.ValidationError) -> str:
    keyword, limit = error.validator, error.validator_value
    text = {
        "minimum": f"should be greater than or equal to {limit}",
        "maximum": f"should be less than or equal to {limit}",
        "minLength": f"should be at least {limit} chars long",
        "maxLength": f"may not be longer than {limit}",
        "minItems": f"should have at least {limit} items",
        "maxItems": f"must have at most {limit} items",
        "pattern": f"should match '{limit}'",
    }.get(str(keyword))
    return text or str(error.message)


def now_rfc3339() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
