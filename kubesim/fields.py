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


def _unknown(value: Any, known: frozenset[str], *, path: str) -> list[str]:
    """The unknown keys of `value` as paths; they are removed from it, as decoding drops them."""
    if not isinstance(value, dict):
        return []
    found = [key for key in value if key not in known]
    for key in found:
        del value[key]
    return [f"{path}.{key}" if path else key for key in found]


def _pod_spec(spec: Any, path: str) -> list[str]:
    found = _unknown(spec, POD_SPEC, path=path)
    if not isinstance(spec, dict):
        return found
    for field in ("containers", "initContainers"):
        for i, container in enumerate(spec.get(field) or []):
            found.extend(_unknown(container, CONTAINER, path=f"{path}.{field}[{i}]"))
    for i, gate in enumerate(spec.get("schedulingGates") or []):
        found.extend(_unknown(gate, SCHEDULING_GATE, path=f"{path}.schedulingGates[{i}]"))
    return found


def drop_unknown_fields(gr: tuple[str, str], obj: dict) -> list[str]:
    """Remove the fields of `obj` that its built-in kind does not have; return their paths."""
    known = TOP_LEVEL.get(gr)
    if known is None:
        return []
    found = _unknown(obj, known, path="")
    found.extend(_unknown(obj.get("metadata"), OBJECT_META, path="metadata"))
    if gr == ("", "pods"):
        found.extend(_pod_spec(obj.get("spec"), "spec"))
    elif gr == ("apps", "deployments"):
        spec = obj.get("spec")
        found.extend(_unknown(spec, DEPLOYMENT_SPEC, path="spec"))
        template = spec.get("template") if isinstance(spec, dict) else None
        found.extend(_unknown(template, POD_TEMPLATE, path="spec.template"))
        if isinstance(template, dict):
            found.extend(
                _unknown(template.get("metadata"), OBJECT_META, path="spec.template.metadata")
            )
            found.extend(_pod_spec(template.get("spec"), "spec.template.spec"))
    return found
