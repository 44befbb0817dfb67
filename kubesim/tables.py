"""`meta.k8s.io/v1 Table` rendering for `kubectl get`: columns per kind and CRD printer columns.

kubectl prints a Table verbatim, so the cells are what a user reads: ages are humanized the way
`duration.HumanDuration` does it (`12s`, `3m4s`, `5h`), dates in CRD columns too.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable
from typing import Any

from kubesim import pods, registry

Row = list[Any]
ColumnDef = dict[str, Any]


def human_duration(seconds: float) -> str:
    """`duration.HumanDuration` of kubectl."""
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    secs = int(seconds)
    if secs < 120:
        return f"{secs}s"
    minutes = secs // 60
    if minutes < 10:
        rest = secs % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d{rest}h" if rest else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = hours // 24 - 365 * (hours // (24 * 365))
        return f"{hours // (24 * 365)}y{days}d" if days else f"{hours // (24 * 365)}y"
    return f"{hours // (24 * 365)}y"


def age(timestamp: Any, now: datetime.datetime) -> str:
    if not isinstance(timestamp, str) or not timestamp:
        return "<unknown>"
    try:
        then = datetime.datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return "<unknown>"
    return human_duration((now - then).total_seconds())


# JSONPath subset of CRD printer columns: `.a.b`, `.a[0]`, `.a[*].b`, `.a[?(@.k=="v")].b`, and
# `\.` for a dot inside a key (`.status.allocated.nvidia\.com/gpu`), as Kubernetes' JSONPath.
_STEP = re.compile(
    r"\.((?:[^.\[\\]|\\.)+)|\[(\d+)\]|\[\*\]"
    r"|\[\?\(@\.([^=!]+?)\s*(==|!=)\s*['\"]?([^'\")]*)['\"]?\)\]"
)


def json_path(obj: Any, path: str) -> list[Any]:
    """Every value `path` selects in `obj` (an empty list when nothing matches)."""
    path = path.strip()
    if path.startswith("{") and path.endswith("}"):
        path = path[1:-1]
    if path.startswith("$"):
        path = path[1:]
    values = [obj]
    pos = 0
    while pos < len(path):
        match = _STEP.match(path, pos)
        if not match:
            return []
        pos = match.end()
        field, index, filter_key, filter_op, filter_value = match.groups()
        if field is not None:
            field = field.replace("\\.", ".")
        step: list[Any] = []
        for value in values:
            if field is not None:
                if isinstance(value, dict) and field in value:
                    step.append(value[field])
            elif index is not None:
                if isinstance(value, list) and int(index) < len(value):
                    step.append(value[int(index)])
            elif filter_key is not None:
                if isinstance(value, list):
                    for item in value:
                        if isinstance(item, dict):
                            equal = str(item.get(filter_key)) == filter_value
                            if equal == (filter_op == "=="):
                                step.append(item)
            elif isinstance(value, list):
                step.extend(value)
        values = step
    return values


def _cell(values: list[Any], column_type: str, *, now: datetime.datetime) -> Any:
    if not values:
        return None
    value = values[0] if len(values) == 1 else ",".join(str(v) for v in values)
    if column_type == "date":
        return age(value, now)
    if isinstance(value, (dict, list)):
        import json

        return json.dumps(value)
    return value


def _col(
    name: str,
    column_type: str = "string",
    *,
    description: str = "",
    fmt: str = "",
    priority: int = 0,
) -> ColumnDef:
    return {
        "name": name,
        "type": column_type,
        "format": fmt,
        "description": description,
        "priority": priority,
    }


NAME = _col("Name", fmt="name", description="Name must be unique within a namespace.")
AGE = _col(
    "Age",
    description="CreationTimestamp is the server time when this object was created.",
)

Printer = tuple[list[ColumnDef], Callable[[dict, datetime.datetime], Row]]


def _meta(obj: dict) -> dict:
    return obj.get("metadata") or {}


def _pod_row(obj: dict, now: datetime.datetime) -> Row:
    status = obj.get("status") or {}
    containers = (obj.get("spec") or {}).get("containers") or []
    statuses = status.get("containerStatuses") or []
    ready = sum(1 for c in statuses if c.get("ready"))
    restarts = sum(int(c.get("restartCount") or 0) for c in statuses)
    gates = [g.get("conditionType") for g in (obj.get("spec") or {}).get("readinessGates") or []]
    true = {c.get("type") for c in status.get("conditions") or [] if c.get("status") == "True"}
    return [
        _meta(obj).get("name"),
        f"{ready}/{len(containers)}",
        pods.table_status(obj),
        str(restarts),  # a string cell, as the pod printer makes it (it may add a last restart)
        age(_meta(obj).get("creationTimestamp"), now),
        status.get("podIP") or "<none>",
        (obj.get("spec") or {}).get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        f"{sum(1 for g in gates if g in true)}/{len(gates)}" if gates else "<none>",
    ]


def _node_row(obj: dict, now: datetime.datetime) -> Row:
    status = obj.get("status") or {}
    ready = "Unknown"
    for condition in status.get("conditions") or []:
        if condition.get("type") == "Ready":
            ready = "Ready" if condition.get("status") == "True" else "NotReady"
    if (obj.get("spec") or {}).get("unschedulable"):
        ready += ",SchedulingDisabled"
    labels = _meta(obj).get("labels") or {}
    roles = sorted(
        k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/") and "/" in k
    )
    version = (status.get("nodeInfo") or {}).get("kubeletVersion") or ""
    return [
        _meta(obj).get("name"),
        ready,
        ",".join(roles) or "<none>",
        age(_meta(obj).get("creationTimestamp"), now),
        version,
    ]


def _event_row(obj: dict, now: datetime.datetime) -> Row:
    involved = obj.get("involvedObject") or {}
    last = obj.get("lastTimestamp") or obj.get("eventTime") or _meta(obj).get("creationTimestamp")
    return [
        age(last, now),
        obj.get("type", ""),
        obj.get("reason", ""),
        f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}",
        obj.get("message", ""),
    ]


def _simple(*extra: tuple[ColumnDef, Callable[[dict], Any]]) -> Printer:
    columns = [NAME, *(c for c, _ in extra), AGE]

    def row(obj: dict, now: datetime.datetime) -> Row:
        return [
            _meta(obj).get("name"),
            *(get(obj) for _, get in extra),
            age(_meta(obj).get("creationTimestamp"), now),
        ]

    return columns, row


PRINTERS: dict[registry.GroupResource, Printer] = {
    ("", "pods"): (
        [
            NAME,
            _col(
                "Ready",
                description="The aggregate readiness state of this pod for accepting traffic.",
            ),
            _col("Status", description="The aggregate status of the containers in this pod."),
            _col(
                "Restarts",
                "string",
                description="The number of times the containers in this pod have been restarted.",
            ),
            AGE,
            _col("IP", priority=1, description="IP address allocated to the pod."),
            _col("Node", priority=1, description="Name of the Node this pod is assigned to."),
            _col(
                "Nominated Node",
                priority=1,
                description="The node this pod preempts other pods on (status.nominatedNodeName).",
            ),
            _col(
                "Readiness Gates",
                priority=1,
                description="How many of the pod's readiness gates are True.",
            ),
        ],
        _pod_row,
    ),
    ("", "nodes"): (
        [NAME, _col("Status"), _col("Roles"), AGE, _col("Version")],
        _node_row,
    ),
    ("", "events"): (
        [_col("Last Seen"), _col("Type"), _col("Reason"), _col("Object"), _col("Message")],
        _event_row,
    ),
    ("", "namespaces"): _simple(
        (_col("Status"), lambda o: (o.get("status") or {}).get("phase", "Active"))
    ),
    ("", "configmaps"): _simple(
        (
            _col("Data", "integer"),
            lambda o: len(o.get("data") or {}) + len(o.get("binaryData") or {}),
        )
    ),
    ("", "secrets"): _simple(
        (_col("Type"), lambda o: o.get("type", "Opaque")),
        (_col("Data", "integer"), lambda o: len(o.get("data") or {})),
    ),
    ("", "services"): _simple(
        (_col("Type"), lambda o: (o.get("spec") or {}).get("type", "ClusterIP")),
        (_col("Cluster-IP"), lambda o: (o.get("spec") or {}).get("clusterIP") or "<none>"),
        (_col("External-IP"), lambda o: "<none>"),
        (
            _col("Port(s)"),
            lambda o: (
                ",".join(
                    f"{p.get('port')}/{p.get('protocol', 'TCP')}"
                    for p in (o.get("spec") or {}).get("ports") or []
                )
                or "<none>"
            ),
        ),
    ),
    ("coordination.k8s.io", "leases"): _simple(
        (_col("Holder"), lambda o: (o.get("spec") or {}).get("holderIdentity", ""))
    ),
    ("policy", "poddisruptionbudgets"): _simple(
        (_col("Min Available"), lambda o: str((o.get("spec") or {}).get("minAvailable", "N/A"))),
        (
            _col("Max Unavailable"),
            lambda o: str((o.get("spec") or {}).get("maxUnavailable", "N/A")),
        ),
        (
            _col("Allowed Disruptions", "integer"),
            lambda o: (o.get("status") or {}).get("disruptionsAllowed", 0),
        ),
    ),
}


def _crd_created_row(obj: dict, now: datetime.datetime) -> Row:
    return [_meta(obj).get("name"), _meta(obj).get("creationTimestamp")]


PRINTERS[("apiextensions.k8s.io", "customresourcedefinitions")] = (
    [NAME, _col("Created At", "date")],
    _crd_created_row,
)


def printer_for(rdef: registry.ResourceDef) -> Printer:
    if rdef.printer_columns is not None:
        columns = [NAME] + [
            _col(c.name, c.type, description=c.description, fmt=c.format, priority=c.priority)
            for c in rdef.printer_columns
        ]
        specs = rdef.printer_columns

        def row(obj: dict, now: datetime.datetime) -> Row:
            return [_meta(obj).get("name")] + [
                _cell(json_path(obj, c.json_path), c.type, now=now) for c in specs
            ]

        return columns, row
    return PRINTERS.get(rdef.gr) or _simple()


def partial_metadata(obj: dict) -> dict:
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata") or {},
    }


def render(
    rdef: registry.ResourceDef,
    objects: list[dict],
    *,
    resource_version: str,
    continue_token: str = "",
    include_object: str = "PartialObjectMetadata",
    now: datetime.datetime | None = None,
    with_columns: bool = True,
) -> dict:
    """A Table of `objects`; `include_object` is None, Object or PartialObjectMetadata."""
    now = now or datetime.datetime.now(datetime.UTC)
    columns, row = printer_for(rdef)
    rows = []
    for obj in objects:
        entry: dict[str, Any] = {"cells": row(obj, now)}
        if include_object == "Object":
            entry["object"] = obj
        elif include_object != "None":
            entry["object"] = partial_metadata(obj)
        rows.append(entry)
    table: dict[str, Any] = {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": columns if with_columns else [],
        "rows": rows,
    }
    if continue_token:
        table["metadata"]["continue"] = continue_token
    return table
