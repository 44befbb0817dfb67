"""Label and field selectors: the query-string syntax and the structured `LabelSelector`.

Label selector grammar (as `labels.Parse`): comma-separated requirements, each one of
`k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k` (exists), `!k` (does not exist).
`k!=v` and `notin` also match objects without the label, as upstream does.

Field selectors support `=`, `==` and `!=` on the fields each resource indexes; any other field is
a 400, as kube-apiserver answers ("field label not supported").
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from typing import Any

from kubesim import errors


@dataclasses.dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!"
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        if self.op in ("=", "in"):
            return present and labels[self.key] in self.values
        # "!=" and "notin" match when the label is absent, as upstream does.
        return not present or labels[self.key] not in self.values


LabelSelector = tuple[Requirement, ...]  # all must hold; empty matches everything

_TOKEN_RE = re.compile(
    r"\s*(?:(?P<not>!)\s*(?P<nkey>[^\s,!=()]+)"
    r"|(?P<key>[^\s,!=()]+)\s*(?:(?P<op>==|=|!=)\s*(?P<value>[^\s,()]*)"
    r"|\s+(?P<setop>in|notin)\s*\((?P<set>[^)]*)\))?)\s*(?:,|$)"
)


def parse_labels(text: str) -> LabelSelector:
    """Parse a `labelSelector` query value; a malformed one is a 400."""
    text = text.strip()
    if not text:
        return ()
    result: list[Requirement] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN_RE.match(text, pos)
        if not match or match.end() == pos:
            raise errors.bad_request(
                f"unable to parse requirement: invalid label selector: {text!r}"
            )
        pos = match.end()
        if match.group("not"):
            result.append(Requirement(match.group("nkey"), "!"))
        elif match.group("op"):
            op = "!=" if match.group("op") == "!=" else "="
            result.append(Requirement(match.group("key"), op, frozenset([match.group("value")])))
        elif match.group("setop"):
            values = frozenset(v.strip() for v in match.group("set").split(",") if v.strip())
            result.append(Requirement(match.group("key"), match.group("setop"), values))
        else:
            result.append(Requirement(match.group("key"), "exists"))
    return tuple(result)


def labels_match(selector: LabelSelector, obj: Mapping[str, Any]) -> bool:
    if not selector:
        return True
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return all(r.matches(labels) for r in selector)


def from_label_selector(structured: Mapping[str, Any] | None) -> LabelSelector | None:
    """A `metav1.LabelSelector` (matchLabels, matchExpressions) as requirements.

    None (no selector) matches nothing, as PDBs and most consumers treat it; `{}` matches all.
    """
    if structured is None:
        return None
    result = [
        Requirement(k, "=", frozenset([v]))
        for k, v in (structured.get("matchLabels") or {}).items()
    ]
    ops = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
    for expr in structured.get("matchExpressions") or []:
        op = ops.get(expr.get("operator", ""))
        if op is None:
            raise errors.bad_request(f"invalid label selector operator {expr.get('operator')!r}")
        result.append(Requirement(expr["key"], op, frozenset(expr.get("values") or [])))
    return tuple(result)


FieldGetter = Callable[[Mapping[str, Any]], str]


def _path(*keys: str) -> FieldGetter:
    def get(obj: Mapping[str, Any]) -> str:
        value: Any = obj
        for key in keys:
            if not isinstance(value, Mapping):
                return ""
            value = value.get(key)
        if value is None:
            return ""
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)

    return get


_COMMON_FIELDS: dict[str, FieldGetter] = {
    "metadata.name": _path("metadata", "name"),
    "metadata.namespace": _path("metadata", "namespace"),
}

# Fields each resource indexes beyond metadata.name and metadata.namespace (kube 1.32).
RESOURCE_FIELDS: dict[tuple[str, str], dict[str, FieldGetter]] = {
    ("", "pods"): {
        "spec.nodeName": _path("spec", "nodeName"),
        "spec.schedulerName": _path("spec", "schedulerName"),
        "spec.serviceAccountName": _path("spec", "serviceAccountName"),
        "spec.restartPolicy": _path("spec", "restartPolicy"),
        "status.phase": _path("status", "phase"),
        "status.podIP": _path("status", "podIP"),
        "status.nominatedNodeName": _path("status", "nominatedNodeName"),
    },
    ("", "events"): {
        "involvedObject.kind": _path("involvedObject", "kind"),
        "involvedObject.namespace": _path("involvedObject", "namespace"),
        "involvedObject.name": _path("involvedObject", "name"),
        "involvedObject.uid": _path("involvedObject", "uid"),
        "involvedObject.apiVersion": _path("involvedObject", "apiVersion"),
        "involvedObject.resourceVersion": _path("involvedObject", "resourceVersion"),
        "involvedObject.fieldPath": _path("involvedObject", "fieldPath"),
        "reason": _path("reason"),
        "reportingComponent": _path("reportingComponent"),
        "source": _path("source", "component"),
        "type": _path("type"),
    },
    ("", "secrets"): {"type": _path("type")},
    ("", "nodes"): {"spec.unschedulable": _path("spec", "unschedulable")},
    ("", "namespaces"): {"status.phase": _path("status", "phase")},
}


@dataclasses.dataclass(frozen=True, slots=True)
class FieldRequirement:
    field: str
    equal: bool
    value: str
    getter: FieldGetter


FieldSelector = tuple[FieldRequirement, ...]


def parse_fields(text: str, *, gr: tuple[str, str], kind: str) -> FieldSelector:
    """Parse a `fieldSelector` for one resource; unsupported fields are a 400."""
    text = text.strip()
    if not text:
        return ()
    supported = {**_COMMON_FIELDS, **RESOURCE_FIELDS.get(gr, {})}
    result = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if "!=" in part:
            field, value = part.split("!=", 1)
            equal = False
        elif "==" in part:
            field, value = part.split("==", 1)
            equal = True
        elif "=" in part:
            field, value = part.split("=", 1)
            equal = True
        else:
            raise errors.bad_request(f"invalid field selector: {part!r}: no operator")
        field = field.strip()
        getter = supported.get(field)
        if getter is None:
            raise errors.bad_request(
                f'"{field}" is not a known field selector for {kind}: '
                f"field label not supported: {field}"
            )
        result.append(FieldRequirement(field, equal, value.strip(), getter))
    return tuple(result)


def fields_match(selector: FieldSelector, obj: Mapping[str, Any]) -> bool:
    return all((r.getter(obj) == r.value) == r.equal for r in selector)
