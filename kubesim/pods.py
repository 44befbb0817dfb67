"""Pod semantics: defaults, status at creation, scheduling gates (KEP-3521), spec immutability
and in-place resize (``pods/resize``, KEP-1287).

Order in the write path (kube-apiserver's): `apply_defaults` when the body is decoded (before
mutating admission), `prepare_for_create` after it (status reset, the SchedulingGated condition
only if gates remain after the webhooks), then `validate_create` / `validate_update`.
"""

from __future__ import annotations

import datetime
import json
import re
from decimal import Decimal
from typing import Any

from kubesim import errors, simulation

GATED_CONDITION = {
    "type": "PodScheduled",
    "status": "False",
    "reason": "SchedulingGated",
    "message": "Scheduling is blocked due to non-empty scheduling gates",
}

DEFAULT_TOLERATIONS = (
    {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
    {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
)

_QUALIFIED_NAME = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)

UPDATE_FORBIDDEN = (
    "pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,"
    "`spec.tolerations` (only additions to existing tolerations),"
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"
)


def apply_defaults(pod: dict) -> None:
    """The defaults of the v1 Pod type and the DefaultTolerationSeconds plugin (in place)."""
    spec = pod.setdefault("spec", {})
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    spec.setdefault("priority", 0)
    account = spec.get("serviceAccountName") or spec.get("serviceAccount") or "default"
    spec["serviceAccountName"] = account
    spec["serviceAccount"] = account
    for field in ("initContainers", "containers"):
        for container in spec.get(field) or []:
            if isinstance(container, dict):
                _default_container(container)
    add_default_tolerations(pod)


def add_default_tolerations(pod: dict) -> None:
    """The DefaultTolerationSeconds admission plugin, on creations and on updates: a pod that
    does not tolerate not-ready or unreachable nodes gets the 300 s tolerations again (so an
    update that replaces the tolerations keeps them, and is an addition)."""
    spec = pod.setdefault("spec", {})
    tolerations = spec.setdefault("tolerations", [])
    if isinstance(tolerations, list):
        for default in DEFAULT_TOLERATIONS:
            if not any(
                isinstance(t, dict)
                and t.get("key") == default["key"]
                and t.get("effect") in (None, "", "NoExecute")
                for t in tolerations
            ):
                tolerations.append(dict(default))


def _default_container(container: dict) -> None:
    image = str(container.get("image", ""))
    tagged = ":" in image.rsplit("/", 1)[-1] or "@" in image
    if "imagePullPolicy" not in container:
        latest = not tagged or image.endswith(":latest")
        container["imagePullPolicy"] = "Always" if latest else "IfNotPresent"
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    resources = container.setdefault("resources", {})
    if isinstance(resources, dict) and isinstance(resources.get("limits"), dict):
        requests = resources.setdefault("requests", {})
        for name, value in resources["limits"].items():
            requests.setdefault(name, value)
    for port in container.get("ports") or []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")


def grace_period(pod: dict, requested: int | None) -> int:
    """The seconds a delete leaves the pod Terminating (the pod strategy's CheckGracefulDelete):
    the requested period, else ``terminationGracePeriodSeconds`` (30 by default); 0 for a pod
    on no node, which no kubelet runs, and for one that has finished."""
    spec = pod.get("spec") or {}
    if not spec.get("nodeName"):
        return 0
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return 0
    period = requested if requested is not None else spec.get("terminationGracePeriodSeconds", 30)
    return max(0, int(period))


def prepare_for_create(pod: dict) -> None:
    """Default the pod-level requests; reset the status to Pending with its QoS class; add the
    gated condition if gates remain."""
    spec = pod.get("spec") or {}
    default_pod_level_requests(spec)
    status: dict[str, Any] = {"phase": "Pending", "qosClass": qos_class(spec)}
    if spec.get("schedulingGates"):
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        status["conditions"] = [
            {**GATED_CONDITION, "lastProbeTime": None, "lastTransitionTime": now}
        ]
    pod["status"] = status


def default_pod_level_requests(spec: dict) -> None:
    """The pod-level requests the API server defaults at creation (1.37:
    `DefaultPodLevelResources`, after mutating admission; `SetDefaults_Pod` before), in place.

    Only when `spec.resources` states requests or limits: a missing pod-level request of cpu
    or memory that some container (or init container) states defaults to the containers'
    aggregate; any other missing one that has a pod-level limit defaults to the limit. Not
    mirrored (kubesim/README.md): the defaulting of pod-level limits, hugepages ones from the
    containers' included; no request kube-scheduler reads depends on them.
    """
    level = spec.get("resources")
    if not isinstance(level, dict):
        return
    requests = level.get("requests") or {}
    limits = level.get("limits") or {}
    if not isinstance(requests, dict) or not isinstance(limits, dict) or not requests | limits:
        return
    first_stated: dict[str, Any] = {}
    """Name -> the first quantity a container states for it (whose format the sum keeps)."""
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        resources = container.get("resources") if isinstance(container, dict) else None
        if isinstance(resources, dict):
            for field in ("requests", "limits"):
                for name, value in (resources.get(field) or {}).items():
                    first_stated.setdefault(name, value)
    stated = set(first_stated)
    try:
        aggregate = simulation.pod_requests({**spec, "resources": None, "overhead": None})
    except ValueError:
        return  # a malformed quantity: validation refuses the pod
    defaulted = dict(requests)
    for name in sorted(stated & {"cpu", "memory"} - set(requests)):
        binary = str(first_stated.get(name, "")).endswith("i")
        defaulted[name] = _canonical(name, aggregate.get(name, 0), binary=binary)
    for name, value in limits.items():
        if name not in defaulted and simulation.is_pod_level_resource(name):
            defaulted[name] = value
    if defaulted != requests:
        level["requests"] = defaulted


_BINARY_SUFFIXES: tuple[tuple[str, int], ...] = tuple(
    (suffix, 1024 ** (6 - index))
    for index, suffix in enumerate(("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"))
)
_DECIMAL_SUFFIXES: tuple[tuple[str, int], ...] = tuple(
    (suffix, 1000 ** (6 - index)) for index, suffix in enumerate("EPTGMk")
)


def _canonical(name: str, amount: int, *, binary: bool) -> str:
    """``amount`` (millicores for cpu, else units) as the API server writes a quantity: the
    largest suffix that divides it, binary when the quantities summed were (``1Gi``), else
    decimal (``1``, ``1500m``, ``2G``)."""
    if name == "cpu":
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    for suffix, unit in _BINARY_SUFFIXES if binary else _DECIMAL_SUFFIXES:
        if amount and amount % unit == 0:
            return f"{amount // unit}{suffix}"
    return str(amount)


def qos_class(spec: dict) -> str:
    """Guaranteed, Burstable or BestEffort, as `qos.GetPodQOS` computes them (cpu and memory)."""
    containers = list(spec.get("containers") or []) + list(spec.get("initContainers") or [])
    requests: dict[str, Decimal] = {}
    limits: dict[str, Decimal] = {}
    guaranteed = True
    for container in containers:
        resources = container.get("resources") or {}
        c_requests = {
            k: parse_quantity(v)
            for k, v in (resources.get("requests") or {}).items()
            if k in ("cpu", "memory")
        }
        c_limits = {
            k: parse_quantity(v)
            for k, v in (resources.get("limits") or {}).items()
            if k in ("cpu", "memory")
        }
        for name, value in c_requests.items():
            if value != 0:
                requests[name] = requests.get(name, Decimal(0)) + value
        for name, value in c_limits.items():
            if value != 0:
                limits[name] = limits.get(name, Decimal(0)) + value
        if set(c_limits) != {"cpu", "memory"} or any(
            c_requests.get(k, c_limits[k]) != c_limits[k] for k in c_limits
        ):
            guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    if guaranteed and requests == limits:
        return "Guaranteed"
    return "Burstable"


def parse_quantity(value: Any) -> Decimal:
    """A Kubernetes quantity as a Decimal (`500m` -> 0.5); an invalid one counts as 0 here, since
    the QoS class must not fail a create that validation would otherwise let through."""
    try:
        return simulation.parse_quantity(value)
    except ValueError:
        return Decimal(0)


def validate_create(pod: dict) -> list[errors.FieldCause]:
    spec = pod.get("spec") or {}
    causes: list[errors.FieldCause] = []
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        causes.append(errors.field_required("spec.containers", ""))
    else:
        seen: set[str] = set()
        for i, container in enumerate(containers):
            if not isinstance(container, dict):
                causes.append(
                    errors.field_invalid(f"spec.containers[{i}]", container, "must be an object")
                )
                continue
            name = container.get("name")
            if not name:
                causes.append(errors.field_required(f"spec.containers[{i}].name", ""))
            elif name in seen:
                causes.append(errors.field_duplicate(f"spec.containers[{i}].name", name))
            else:
                seen.add(name)
            if not container.get("image"):
                causes.append(errors.field_required(f"spec.containers[{i}].image", ""))
    causes.extend(_validate_gates(spec))
    if spec.get("schedulingGates") and spec.get("nodeName"):
        causes.append(
            errors.field_forbidden(
                "spec.nodeName", "cannot be set until all schedulingGates have been cleared"
            )
        )
    return causes


def _validate_gates(spec: dict) -> list[errors.FieldCause]:
    causes = []
    seen: set[str] = set()
    for i, gate in enumerate(spec.get("schedulingGates") or []):
        name = gate.get("name") if isinstance(gate, dict) else None
        field = f"spec.schedulingGates[{i}]"  # the gate, not its name (validatePodSchedulingGates)
        if not isinstance(name, str) or not _QUALIFIED_NAME.match(name):
            causes.append(
                errors.field_invalid(
                    field,
                    name,
                    "name part must consist of alphanumeric characters, '-', '_' or '.', and must "
                    "start and end with an alphanumeric character",
                )
            )
        elif name in seen:
            causes.append(errors.field_duplicate(field, name))
        else:
            seen.add(name)
    return causes


def validate_update(new: dict, old: dict) -> list[errors.FieldCause]:
    """Spec immutability with the exceptions of 1.32 and the gate rules of KEP-3521/3838."""
    new_spec = new.get("spec") or {}
    old_spec = old.get("spec") or {}
    causes = _validate_gates(new_spec)
    old_gates = [
        g.get("name") for g in old_spec.get("schedulingGates") or [] if isinstance(g, dict)
    ]
    new_gates = [
        g.get("name") for g in new_spec.get("schedulingGates") or [] if isinstance(g, dict)
    ]
    for i, name in enumerate(new_gates):
        if name not in old_gates:
            causes.append(
                errors.field_forbidden(
                    f"spec.schedulingGates[{i}].name",
                    f"only deletion is allowed, but found new scheduling gate '{name}'",
                )
            )
    if causes:
        return causes
    if new_spec == old_spec:
        return []
    if _neutralized(new_spec, old_spec, gated=bool(old_gates)) != old_spec:
        if new_gates and new_spec.get("nodeName") and not old_spec.get("nodeName"):
            return [
                errors.field_forbidden(
                    "spec.nodeName", "cannot be set until all schedulingGates have been cleared"
                )
            ]
        return [errors.field_forbidden("spec", UPDATE_FORBIDDEN)]
    return []


RESIZABLE = ("cpu", "memory")
"""The resources an in-place resize may change (``ValidatePodResize``)."""


def prepare_resize(new: dict, old: dict) -> dict:
    """What kube-apiserver keeps of a write to ``pods/resize`` (``dropNonResizeUpdates``): the
    old pod with the new containers' and init containers' ``resources`` and ``resizePolicy``
    and the new pod-level ``spec.resources`` (InPlacePodLevelResourcesVerticalScaling, on in
    1.37); metadata and status stay as they were. Containers added, removed, renamed or
    reordered keep the new spec as it is, for :func:`validate_resize` to refuse."""
    new_spec = new.get("spec") or {}
    old_spec = old.get("spec") or {}
    if any(
        [c.get("name") for c in new_spec.get(field) or [] if isinstance(c, dict)]
        != [c.get("name") for c in old_spec.get(field) or [] if isinstance(c, dict)]
        for field in ("containers", "initContainers")
    ):
        spec = new_spec
    else:
        spec = json.loads(json.dumps(old_spec))
        for field in ("containers", "initContainers"):
            for container, changed in zip(
                spec.get(field) or [], new_spec.get(field) or [], strict=True
            ):
                for key in ("resources", "resizePolicy"):
                    _set_or_pop(container, key, value=changed.get(key))
        _set_or_pop(spec, "resources", value=new_spec.get("resources"))
    prepared = json.loads(json.dumps(old))
    prepared["spec"] = spec
    return prepared


def validate_resize(new: dict, old: dict) -> list[errors.FieldCause]:
    """``ValidatePodResize`` of kube-apiserver 1.37, for what kubesim models: the QoS class
    must not change; a pod whose running container reports no resources runs on a node that
    cannot resize (kwok's nodes and kubesim's kubelet report none, as a kubelet before 1.33
    did); containers and init containers may not be added, removed, renamed or reordered;
    requests and limits may not be removed; only cpu and memory may change."""
    new_spec = new.get("spec") or {}
    old_spec = old.get("spec") or {}
    causes: list[errors.FieldCause] = []
    old_qos = (old.get("status") or {}).get("qosClass") or qos_class(old_spec)
    if qos_class(new_spec) != old_qos:
        causes.append(
            errors.field_invalid(
                "spec", old_qos, "Pod QOS Class may not change as a result of resizing"
            )
        )
    running = [
        c
        for c in (old.get("status") or {}).get("containerStatuses") or []
        if isinstance(c, dict) and "running" in (c.get("state") or {})
    ]
    if running and running[0].get("resources") is None:
        causes.append(
            errors.field_forbidden("spec", "Pod running on node without support for resize")
        )
    ordering: list[errors.FieldCause] = []
    for field, noun in (("containers", "containers"), ("initContainers", "initContainers")):
        new_list = [c for c in new_spec.get(field) or [] if isinstance(c, dict)]
        old_list = [c for c in old_spec.get(field) or [] if isinstance(c, dict)]
        if len(new_list) != len(old_list):
            ordering.append(
                errors.field_forbidden(
                    f"spec.{field}", f"{noun} may not be added or removed on resize"
                )
            )
            continue
        for i, (new_c, old_c) in enumerate(zip(new_list, old_list, strict=True)):
            if new_c.get("name") != old_c.get("name"):
                ordering.append(
                    errors.field_forbidden(
                        f"spec.{field}[{i}].name",
                        f"{noun} may not be renamed or reordered on resize",
                    )
                )
    if ordering:
        return causes + ordering
    for field in ("initContainers", "containers"):
        for i, (new_c, old_c) in enumerate(
            zip(new_spec.get(field) or [], old_spec.get(field) or [], strict=True)
        ):
            new_r, old_r = new_c.get("resources") or {}, old_c.get("resources") or {}
            for part in ("requests", "limits"):
                if set(old_r.get(part) or {}) - set(new_r.get(part) or {}):
                    causes.append(
                        errors.field_forbidden(
                            f"spec.{field}[{i}].resources.{part}",
                            f"resource {part} cannot be removed",
                        )
                    )
    for field, path, message in (
        ("containers", "spec", "only cpu and memory resources are mutable"),
        (
            "initContainers",
            "spec.initContainers[{i}]",
            "only cpu and memory resources for init or sidecar containers are mutable",
        ),
    ):
        for i, (new_c, old_c) in enumerate(
            zip(new_spec.get(field) or [], old_spec.get(field) or [], strict=True)
        ):
            if _other_resources(new_c) != _other_resources(old_c):
                causes.append(errors.field_forbidden(path.format(i=i), message))
    return causes


def _other_resources(container: dict) -> dict:
    """A container's requests and limits of everything but cpu and memory."""
    resources = container.get("resources") or {}
    return {
        part: {k: v for k, v in (resources.get(part) or {}).items() if k not in RESIZABLE}
        for part in ("requests", "limits")
    }


def _neutralized(spec: dict, old: dict, *, gated: bool) -> dict:
    """`spec` with every field an update may change replaced by the old value (when allowed).

    Copies only what it replaces (shallowly): the result is compared, never stored, and this
    runs on every pod update (the gate removals of the operator among them).
    """
    result = dict(spec)
    for field in ("containers", "initContainers"):
        new_list = result.get(field) or []
        old_list = old.get(field) or []
        if new_list and len(new_list) == len(old_list):
            result[field] = [
                {**new_c, "image": old_c["image"]}
                if isinstance(new_c, dict) and isinstance(old_c, dict) and "image" in old_c
                else new_c
                for new_c, old_c in zip(new_list, old_list, strict=True)
            ]
    deadline, old_deadline = result.get("activeDeadlineSeconds"), old.get("activeDeadlineSeconds")
    if deadline is not None and (old_deadline is None or deadline <= old_deadline):
        _set_or_pop(result, "activeDeadlineSeconds", value=old_deadline)
    old_tolerations = old.get("tolerations") or []
    new_tolerations = result.get("tolerations") or []
    if all(t in new_tolerations for t in old_tolerations):
        _set_or_pop(result, "tolerations", value=old.get("tolerations"))
    # Gates may only be removed (checked by the caller), in any order.
    _set_or_pop(result, "schedulingGates", value=old.get("schedulingGates"))
    if gated:
        if _selector_tightened(result.get("nodeSelector"), old.get("nodeSelector")):
            _set_or_pop(result, "nodeSelector", value=old.get("nodeSelector"))
        affinity = result.get("affinity")
        old_aff = (old.get("affinity") or {}).get("nodeAffinity")
        if isinstance(affinity, dict) and _affinity_tightened(
            affinity.get("nodeAffinity"), old_aff
        ):
            affinity = {k: v for k, v in affinity.items() if k != "nodeAffinity"}
            if old_aff is not None:
                affinity["nodeAffinity"] = old_aff
            if affinity or "affinity" in old:
                result["affinity"] = affinity
            else:
                result.pop("affinity")
    return result


def _set_or_pop(spec: dict, field: str, *, value: Any) -> None:
    if value is None:
        spec.pop(field, None)
    else:
        spec[field] = value


def _selector_tightened(new: Any, old: Any) -> bool:
    """nodeSelector entries may be added while gated, never changed or removed."""
    new = new or {}
    old = old or {}
    return isinstance(new, dict) and all(new.get(k) == v for k, v in old.items())


def _affinity_tightened(new: Any, old: Any) -> bool:
    """KEP-3838: node affinity may be set if it was nil; required terms may only gain
    matchExpressions (or be anything if there were none); preferred terms may change freely."""
    if old is None:
        return True
    if not isinstance(new, dict):
        return False
    req_field = "requiredDuringSchedulingIgnoredDuringExecution"
    old_req = (old or {}).get(req_field)
    new_req = new.get(req_field)
    if old_req is None or not (old_req.get("nodeSelectorTerms") or []):
        return True
    if not isinstance(new_req, dict):
        return False
    old_terms = old_req.get("nodeSelectorTerms") or []
    new_terms = new_req.get("nodeSelectorTerms") or []
    if len(old_terms) != len(new_terms):
        return False
    for old_term, new_term in zip(old_terms, new_terms, strict=True):
        for part in ("matchExpressions", "matchFields"):
            old_items = old_term.get(part) or []
            new_items = new_term.get(part) or []
            if new_items[: len(old_items)] != old_items:
                return False
    return True


def table_status(pod: dict) -> str:
    """The STATUS column: Terminating, else SchedulingGated, else the reason or the phase."""
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return "Terminating"
    if (pod.get("spec") or {}).get("schedulingGates"):
        return "SchedulingGated"
    status = pod.get("status") or {}
    for container in status.get("containerStatuses") or []:
        waiting = (container.get("state") or {}).get("waiting") or {}
        if waiting.get("reason"):
            return str(waiting["reason"])
    return str(status.get("reason") or status.get("phase") or "Pending")


def is_ready(pod: dict) -> bool:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False
