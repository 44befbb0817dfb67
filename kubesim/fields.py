"""Known fields of built-in kinds, for `fieldValidation` (Strict: 400, Warn: a warning header).

kube-apiserver decodes built-in kinds into Go structs, so an unknown field anywhere is reported.
kubesim knows the fields where a typo is most likely and most costly in this project's manifests:
`metadata` of every kind, the top level of every built-in kind, and a pod's `spec`, containers
and scheduling gates (also inside a Deployment's pod template). Deeper structures are not
checked (documented deviation).
"""

from __future__ import annotations

from typing import Any

OBJECT_META = frozenset(
    {
        "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
        "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
        "annotations", "ownerReferences", "finalizers", "managedFields",
    }
)  # fmt: skip

_COMMON = ("apiVersion", "kind", "metadata")

TOP_LEVEL: dict[tuple[str, str], frozenset[str]] = {
    ("", "namespaces"): frozenset({*_COMMON, "spec", "status"}),
    ("", "pods"): frozenset({*_COMMON, "spec", "status"}),
    ("", "nodes"): frozenset({*_COMMON, "spec", "status"}),
    ("", "services"): frozenset({*_COMMON, "spec", "status"}),
    ("", "configmaps"): frozenset({*_COMMON, "data", "binaryData", "immutable"}),
    ("", "secrets"): frozenset({*_COMMON, "data", "stringData", "type", "immutable"}),
    ("", "serviceaccounts"): frozenset(
        {*_COMMON, "secrets", "imagePullSecrets", "automountServiceAccountToken"}
    ),
    ("", "endpoints"): frozenset({*_COMMON, "subsets"}),
    ("", "events"): frozenset(
        {
            *_COMMON,
            "involvedObject",
            "reason",
            "message",
            "source",
            "firstTimestamp",
            "lastTimestamp",
            "count",
            "type",
            "eventTime",
            "series",
            "action",
            "related",
            "reportingComponent",
            "reportingInstance",
        }
    ),
    ("coordination.k8s.io", "leases"): frozenset({*_COMMON, "spec"}),
    ("policy", "poddisruptionbudgets"): frozenset({*_COMMON, "spec", "status"}),
    ("scheduling.k8s.io", "priorityclasses"): frozenset(
        {*_COMMON, "value", "globalDefault", "description", "preemptionPolicy"}
    ),
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"): frozenset(
        {*_COMMON, "webhooks"}
    ),
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations"): frozenset(
        {*_COMMON, "webhooks"}
    ),
    ("apiextensions.k8s.io", "customresourcedefinitions"): frozenset({*_COMMON, "spec", "status"}),
    ("apps", "deployments"): frozenset({*_COMMON, "spec", "status"}),
    ("rbac.authorization.k8s.io", "clusterroles"): frozenset(
        {*_COMMON, "rules", "aggregationRule"}
    ),
    ("rbac.authorization.k8s.io", "roles"): frozenset({*_COMMON, "rules"}),
    ("rbac.authorization.k8s.io", "clusterrolebindings"): frozenset(
        {*_COMMON, "subjects", "roleRef"}
    ),
    ("rbac.authorization.k8s.io", "rolebindings"): frozenset({*_COMMON, "subjects", "roleRef"}),
    ("networking.k8s.io", "networkpolicies"): frozenset({*_COMMON, "spec"}),
}

POD_SPEC = frozenset(
    {
        "activeDeadlineSeconds", "affinity", "automountServiceAccountToken", "containers",
        "dnsConfig", "dnsPolicy", "enableServiceLinks", "ephemeralContainers", "hostAliases",
        "hostIPC", "hostNetwork", "hostPID", "hostUsers", "hostname", "imagePullSecrets",
        "initContainers", "nodeName", "nodeSelector", "os", "overhead", "preemptionPolicy",
        "priority", "priorityClassName", "readinessGates", "resourceClaims", "resources",
        "restartPolicy", "runtimeClassName", "schedulerName", "schedulingGates", "securityContext",
        "serviceAccount", "serviceAccountName", "setHostnameAsFQDN", "shareProcessNamespace",
        "subdomain", "terminationGracePeriodSeconds", "tolerations", "topologySpreadConstraints",
        "volumes",
    }
)  # fmt: skip

CONTAINER = frozenset(
    {
        "args", "command", "env", "envFrom", "image", "imagePullPolicy", "lifecycle",
        "livenessProbe", "name", "ports", "readinessProbe", "resizePolicy", "resources",
        "restartPolicy", "securityContext", "startupProbe", "stdin", "stdinOnce",
        "terminationMessagePath", "terminationMessagePolicy", "tty", "volumeDevices",
        "volumeMounts", "workingDir",
    }
)  # fmt: skip

SCHEDULING_GATE = frozenset({"name"})

DEPLOYMENT_SPEC = frozenset(
    {
        "replicas", "selector", "template", "strategy", "minReadySeconds",
        "revisionHistoryLimit", "paused", "progressDeadlineSeconds",
    }
)  # fmt: skip

POD_TEMPLATE = frozenset({"metadata", "spec"})


Schema = tuple[frozenset[str], dict[str, "Schema"]]
"""The known keys of an object, and the schemas of the fields kubesim looks into (for a list,
the schema of its items)."""

_METADATA: Schema = (OBJECT_META, {})
_POD_SPEC: Schema = (
    POD_SPEC,
    {
        "containers": (CONTAINER, {}),
        "initContainers": (CONTAINER, {}),
        "schedulingGates": (SCHEDULING_GATE, {}),
    },
)
_DEPLOYMENT: Schema = (
    DEPLOYMENT_SPEC,
    {"template": (POD_TEMPLATE, {"metadata": _METADATA, "spec": _POD_SPEC})},
)
_NESTED: dict[tuple[str, str], dict[str, Schema]] = {
    ("", "pods"): {"metadata": _METADATA, "spec": _POD_SPEC},
    ("apps", "deployments"): {"metadata": _METADATA, "spec": _DEPLOYMENT},
}


def _walk(value: Any, schema: Schema, *, path: str) -> list[str]:
    """The unknown keys of `value` and of the fields `schema` looks into, as paths in document
    order (the order kube-apiserver's strict decoder meets them in); they are removed from it,
    as decoding drops them."""
    if not isinstance(value, dict):
        return []
    known, nested = schema
    found = []
    for key in list(value):
        where = f"{path}.{key}" if path else key
        if key not in known:
            del value[key]
            found.append(where)
            continue
        inner = nested.get(key)
        child = value[key]
        if inner is None:
            continue
        if isinstance(child, list):
            for i, item in enumerate(child):
                found.extend(_walk(item, inner, path=f"{where}[{i}]"))
        else:
            found.extend(_walk(child, inner, path=where))
    return found


def drop_unknown_fields(gr: tuple[str, str], obj: dict) -> list[str]:
    """Remove the fields of `obj` that its built-in kind does not have; return their paths."""
    known = TOP_LEVEL.get(gr)
    if known is None:
        return []
    return _walk(obj, (known, _NESTED.get(gr, {"metadata": _METADATA})), path="")
