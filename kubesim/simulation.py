"""The opt-in simulated cluster: Nodes, a scheduler and a kubelet, as plain clients of kubesim.

kubesim alone stores pods that never run. With simulation on, three things happen, all through
the HTTP API like any controller (so admission, watches and tests see exactly what a real
cluster would show):

- the Nodes of `SimulationOptions.nodes` are created at start (from `--node` flags, parsed by
  `parse_node_flag`, or a multi-document YAML file, read by `load_nodes_file`);
- the scheduler binds ungated pending pods to nodes with room (`POST .../pods/<n>/binding`), or
  sets `PodScheduled=False` with reason `Unschedulable` and kube-scheduler's message;
- the kubelet moves bound pods to `Running`, and pods annotated `kubesim.io/run-seconds: "N"`
  to `Succeeded` N seconds (event-loop clock) after they started.

Scheduling follows kube-scheduler's default filters, in its order, stopping at the first that
fails for a node: NodeUnschedulable (`node(s) were unschedulable`), TaintToleration
(`node(s) had untolerated taint {k: v}`, NoSchedule and NoExecute only), NodeAffinity
(`nodeSelector` and required node affinity: `node(s) didn't match Pod's node affinity/selector`),
NodeResourcesFit (`Too many pods`, `Insufficient <resource>`). A pod that fits nowhere gets the
FitError message: `0/3 nodes are available: 1 Insufficient cpu, 2 node(s) were unschedulable.`
(reason counts sorted as strings, as kube-scheduler sorts them). A pod that fits goes to the node
with the most free room (LeastAllocated over cpu and memory, with kube-scheduler's non-zero
defaults of 100m and 200Mi for containers without requests), ties broken by node name, and
pods are taken in creation-timestamp order, then by name. Pods are placed on an assumed
binding before the POST returns (and forgotten if it fails), so one pass places thousands of
pods without re-listing anything.

Deviations: no preemption (so no `preemption:` suffix in messages), no host ports, volumes,
inter-pod affinity or topology spread; scoring is exact rather than kube-scheduler's integer
percentages with a random tie-break; containers never restart or fail.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import datetime
import decimal
import itertools
import json
import logging
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

import aiohttp
import yaml

from kubesim import certs

logger = logging.getLogger(__name__)

RUN_SECONDS_ANNOTATION = "kubesim.io/run-seconds"
"""Pods carrying it (a decimal number of seconds, e.g. `"0.2"`) succeed that long after start."""

DEFAULT_SCHEDULER = "default-scheduler"
DEFAULT_MAX_PODS = 110
"""The kubelet's default `--max-pods`, used when a node flag does not say `pods=`."""

NONZERO_CPU_MILLI = 100
NONZERO_MEMORY = 200 * 1024 * 1024
"""kube-scheduler's scoring defaults for a container without requests (100m CPU, 200Mi)."""

BIND_RETRY_SECONDS = 1.0
"""How long a pod whose binding failed waits before the scheduler tries it again."""

NO_NODES_MESSAGE = "no nodes available to schedule pods"
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
REASON_UNSCHEDULABLE_NODE = "node(s) were unschedulable"
REASON_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
REASON_TOO_MANY_PODS = "Too many pods"

# --- Quantities ------------------------------------------------------------------------------

_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:(?P<binary>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<exponent>[eE][+-]?[0-9]+)|(?P<decimal>[numkMGTPE]))?$"
)
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_CONTEXT = decimal.Context(prec=60)


def parse_quantity(text: str | int | float) -> decimal.Decimal:
    """A Kubernetes quantity as an exact Decimal: `500m` -> 0.5, `1Gi` -> 1073741824.

    Binary suffixes Ki..Ei are powers of 1024; n u m k M G T P E powers of 1000; `1e3` and
    `1E3` are exponents (a lone `E` is exa). Raises ValueError naming the text otherwise.
    """
    if isinstance(text, bool):
        raise ValueError(f"quantity {text!r}: not a number")
    match = _QUANTITY.match(str(text).strip())
    if not match:
        raise ValueError(f"quantity {text!r}: not a Kubernetes quantity")
    number = decimal.Decimal(match["number"])
    if match["binary"]:
        return _CONTEXT.multiply(number, decimal.Decimal(1024) ** _BINARY[match["binary"]])
    if match["exponent"]:
        return _CONTEXT.scaleb(number, int(match["exponent"][1:]))
    if match["decimal"]:
        return _CONTEXT.scaleb(number, _DECIMAL[match["decimal"]])
    return number


def quantity_units(resource: str, text: str | int | float) -> int:
    """A quantity in the scheduler's integer units: CPU in millicores, anything else in units.

    Rounded up, as `Quantity.MilliValue()`/`Value()` do (so `0.5m` CPU asks for 1m).
    """
    value = parse_quantity(text)
    if resource == "cpu":
        value = _CONTEXT.multiply(value, decimal.Decimal(1000))
    return math.ceil(value)


# --- Pods and nodes, parsed once per event ---------------------------------------------------

Resources = dict[str, int]


def _add(into: Resources, other: Mapping[str, int]) -> None:
    for name, amount in other.items():
        into[name] = into.get(name, 0) + amount


def _max(into: Resources, other: Mapping[str, int]) -> None:
    for name, amount in other.items():
        into[name] = max(into.get(name, 0), amount)


def _container_requests(container: Mapping[str, Any]) -> Resources:
    """A container's requests; a limit without a request counts as the request (API defaulting)."""
    resources = container.get("resources") or {}
    merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    return {name: quantity_units(name, value) for name, value in merged.items()}


def is_pod_level_resource(name: str) -> bool:
    """`IsSupportedPodLevelResource`: what `spec.resources` may state for the whole pod."""
    return name in ("cpu", "memory") or name.startswith("hugepages-")


def pod_requests(spec: Mapping[str, Any]) -> Resources:
    """The effective requests of a pod spec, as Kubernetes computes them (`PodRequests`).

    The sum over containers, plus restartable init containers (sidecars, `restartPolicy:
    Always`) which run alongside them; then the maximum with each ordinary init container
    (plus the sidecars started before it); then each pod-level request (`spec.resources.
    requests`, PodLevelResources) in place of that on its resource; then `overhead`. Zero
    amounts are dropped.
    """
    total: Resources = {}
    for container in spec.get("containers") or []:
        _add(total, _container_requests(container))
    sidecars: Resources = {}
    init_peak: Resources = {}
    for container in spec.get("initContainers") or []:
        own = _container_requests(container)
        if container.get("restartPolicy") == "Always":
            _add(total, own)
            _add(sidecars, own)
            during = dict(sidecars)
        else:
            during = dict(own)
            _add(during, sidecars)
        _max(init_peak, during)
    _max(total, init_peak)
    pod_level = (spec.get("resources") or {}).get("requests") or {}
    for name, value in pod_level.items():
        if is_pod_level_resource(name):
            total[name] = quantity_units(name, value)
    _add(total, {n: quantity_units(n, v) for n, v in (spec.get("overhead") or {}).items()})
    return {name: amount for name, amount in total.items() if amount}


def _nonzero_requests(spec: Mapping[str, Any]) -> tuple[int, int]:
    """(CPU milli, memory) for scoring: containers without a request count 100m and 200Mi."""
    cpu = memory = 0
    for container in spec.get("containers") or []:
        requests = _container_requests(container)
        cpu += requests.get("cpu") or NONZERO_CPU_MILLI
        memory += requests.get("memory") or NONZERO_MEMORY
    return cpu, memory


@dataclasses.dataclass(frozen=True, slots=True)
class PodInfo:
    """What the scheduler and the kubelet need of one pod, parsed once per watch event."""

    namespace: str
    name: str
    uid: str
    created: str  # RFC 3339; sorts chronologically
    node_name: str
    phase: str
    deleting: bool
    gated: bool
    scheduler_name: str
    requests: Mapping[str, int]
    nonzero: tuple[int, int]  # (cpu milli, memory) for scoring
    node_selector: Mapping[str, str]
    required_terms: tuple[Mapping[str, Any], ...] | None  # None: no required node affinity
    tolerations: tuple[Mapping[str, Any], ...]
    run_seconds: float | None
    start_time: str
    obj: Mapping[str, Any]
    signature: str = ""
    """Equal for pods the filters cannot tell apart (requests, selectors, affinity, tolerations)."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @property
    def wants_scheduling(self) -> bool:
        """Ours to place: default scheduler, unbound, ungated, pending and not being deleted."""
        return (
            self.scheduler_name in ("", DEFAULT_SCHEDULER)
            and not self.node_name
            and not self.gated
            and self.phase in ("", "Pending")
            and not self.deleting
        )

    def condition(self, kind: str) -> Mapping[str, Any] | None:
        for condition in (self.obj.get("status") or {}).get("conditions") or []:
            if condition.get("type") == kind:
                return condition
        return None


def _run_seconds(annotations: Mapping[str, str], key: str) -> float | None:
    text = annotations.get(RUN_SECONDS_ANNOTATION)
    if text is None:
        return None
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not math.isfinite(seconds) or seconds < 0:
        logger.warning(
            "pod %s: annotation %s=%r is not a number of seconds; ignored",
            key,
            RUN_SECONDS_ANNOTATION,
            text,
        )
        return None
    return seconds


def pod_info(pod: Mapping[str, Any]) -> PodInfo:
    """Parse a Pod manifest. Raises ValueError naming the pod and the field on a bad quantity."""
    metadata = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    key = f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"
    try:
        requests = pod_requests(spec)
        nonzero = _nonzero_requests(spec)
    except ValueError as exc:
        raise ValueError(f"pod {key}: spec containers' resources: {exc}") from exc
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    signature = json.dumps(
        [
            sorted(requests.items()),
            sorted((spec.get("nodeSelector") or {}).items()),
            required,
            spec.get("tolerations") or [],
        ],
        sort_keys=True,
    )
    return PodInfo(
        namespace=metadata.get("namespace", ""),
        name=metadata.get("name", ""),
        uid=metadata.get("uid", "") or key,
        created=metadata.get("creationTimestamp", "") or "",
        node_name=spec.get("nodeName", "") or "",
        phase=status.get("phase", "") or "",
        deleting=bool(metadata.get("deletionTimestamp")),
        gated=bool(spec.get("schedulingGates")),
        scheduler_name=spec.get("schedulerName", "") or "",
        requests=requests,
        nonzero=nonzero,
        node_selector=dict(spec.get("nodeSelector") or {}),
        required_terms=None if required is None else tuple(required.get("nodeSelectorTerms") or []),
        tolerations=tuple(spec.get("tolerations") or []),
        run_seconds=_run_seconds(metadata.get("annotations") or {}, key),
        start_time=status.get("startTime", "") or "",
        obj=pod,
        signature=signature,
    )


@dataclasses.dataclass(frozen=True, slots=True)
class NodeInfo:
    """What the scheduler needs of one Node: labels, taints, cordon and allocatable units."""

    name: str
    labels: Mapping[str, str]
    taints: tuple[Mapping[str, Any], ...]
    unschedulable: bool
    allocatable: Mapping[str, int]  # cpu in millicores; `pods` a count


def node_info(node: Mapping[str, Any]) -> NodeInfo:
    """Parse a Node; `status.allocatable` falls back to `status.capacity`."""
    metadata = node.get("metadata") or {}
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    name = metadata.get("name", "")
    amounts = status.get("allocatable") or status.get("capacity") or {}
    try:
        allocatable = {
            resource: quantity_units(resource, value) for resource, value in amounts.items()
        }
    except ValueError as exc:
        raise ValueError(f"node {name}: status.allocatable: {exc}") from exc
    return NodeInfo(
        name=name,
        labels=dict(metadata.get("labels") or {}),
        taints=tuple(spec.get("taints") or []),
        unschedulable=bool(spec.get("unschedulable")),
        allocatable=allocatable,
    )


# --- Filters (pure) --------------------------------------------------------------------------


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """`Toleration.ToleratesTaint`: an empty effect or key matches any; `Exists` ignores values."""
    if toleration.get("effect") and toleration.get("effect") != taint.get("effect"):
        return False
    if toleration.get("key") and toleration.get("key") != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return False


def untolerated_taint(
    tolerations: Iterable[Mapping[str, Any]], taints: Iterable[Mapping[str, Any]]
) -> Mapping[str, Any] | None:
    """The first NoSchedule/NoExecute taint that no toleration tolerates.

    PreferNoSchedule taints never block a pod.
    """
    tolerations = list(tolerations)
    for taint in taints:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


def _integer(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def match_node_selector_requirement(
    requirement: Mapping[str, Any], values_by_key: Mapping[str, str]
) -> bool:
    """One NodeSelectorRequirement against labels (or fields: `metadata.name`).

    `In`/`NotIn`/`Exists`/`DoesNotExist` as for label selectors (`NotIn` holds for a missing
    key); `Gt`/`Lt` compare one integer value with an integer label, and fail when the label is
    missing or not an integer. An unknown operator never matches.
    """
    key = requirement.get("key", "")
    operator = requirement.get("operator", "")
    values = list(requirement.get("values") or [])
    present = key in values_by_key
    label = values_by_key.get(key, "")
    if operator == "In":
        return present and label in values
    if operator == "NotIn":
        return not present or label not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt") and present and len(values) == 1:
        have, want = _integer(label), _integer(values[0])
        if have is None or want is None:
            return False
        return have > want if operator == "Gt" else have < want
    return False


def match_node_selector_term(term: Mapping[str, Any], node: NodeInfo) -> bool:
    """All requirements of a term hold; a term with none matches no node (as upstream)."""
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False
    return all(match_node_selector_requirement(r, node.labels) for r in expressions) and all(
        match_node_selector_requirement(r, {"metadata.name": node.name}) for r in fields
    )


def matches_node_affinity(pod: PodInfo, node: NodeInfo) -> bool:
    """`nodeSelector` (every label equal) and required node affinity (any term)."""
    if any(node.labels.get(k) != v for k, v in pod.node_selector.items()):
        return False
    if pod.required_terms is None:
        return True
    return any(match_node_selector_term(term, node) for term in pod.required_terms)


@dataclasses.dataclass(slots=True)
class Usage:
    """What the pods on one node use: requests, the pod count, and scoring's non-zero sums."""

    requests: Resources = dataclasses.field(default_factory=dict)
    pods: int = 0
    nonzero_cpu: int = 0
    nonzero_memory: int = 0

    def add(self, pod: PodInfo, sign: int = 1) -> None:
        for name, amount in pod.requests.items():
            self.requests[name] = self.requests.get(name, 0) + sign * amount
        self.pods += sign
        self.nonzero_cpu += sign * pod.nonzero[0]
        self.nonzero_memory += sign * pod.nonzero[1]


_FIRST_RESOURCES = ("cpu", "memory", "ephemeral-storage")


def filter_reasons(pod: PodInfo, node: NodeInfo, usage: Usage) -> list[str]:
    """Why `pod` cannot go to `node` (empty: it fits), from the first failing filter.

    Filters run in kube-scheduler's order: NodeUnschedulable, TaintToleration, NodeAffinity,
    NodeResourcesFit. NodeResourcesFit reports every shortage: `Too many pods` first, then
    cpu, memory, ephemeral-storage, then other resources by name. A resource the node does not
    list has 0 allocatable.
    """
    if node.unschedulable and not any(
        tolerates(t, {"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}) for t in pod.tolerations
    ):
        return [REASON_UNSCHEDULABLE_NODE]
    taint = untolerated_taint(pod.tolerations, node.taints)
    if taint is not None:
        return [
            f"node(s) had untolerated taint {{{taint.get('key', '')}: {taint.get('value', '')}}}"
        ]
    if not matches_node_affinity(pod, node):
        return [REASON_AFFINITY]
    reasons = []
    if usage.pods + 1 > node.allocatable.get("pods", 0):
        reasons.append(REASON_TOO_MANY_PODS)
    ordered = [r for r in _FIRST_RESOURCES if r in pod.requests]
    ordered += sorted(r for r in pod.requests if r not in _FIRST_RESOURCES and r != "pods")
    for resource in ordered:
        free = node.allocatable.get(resource, 0) - usage.requests.get(resource, 0)
        if pod.requests[resource] > free:
            reasons.append(f"Insufficient {resource}")
    return reasons


def least_allocated_score(pod: PodInfo, node: NodeInfo, usage: Usage) -> float:
    """Free room after placing `pod`, the mean over cpu and memory of free/allocatable (0..1).

    A resource the node lacks, or that the pod would overcommit, scores 0. The same inputs
    always give the same float, so equal room ties exactly (and the name decides).
    """
    total = 0.0
    for allocatable, used in (
        (node.allocatable.get("cpu", 0), usage.nonzero_cpu + pod.nonzero[0]),
        (node.allocatable.get("memory", 0), usage.nonzero_memory + pod.nonzero[1]),
    ):
        if allocatable > 0 and used <= allocatable:
            total += (allocatable - used) / allocatable
    return total / 2


def fit_error_message(reasons_by_node: Mapping[str, list[str]]) -> str:
    """kube-scheduler's FitError text: `0/N nodes are available: <count> <reason>, ....`

    Each node adds one to the count of each of its reasons; the `<count> <reason>` strings are
    sorted as strings (so `10 ...` sorts before `2 ...`, as upstream). No nodes at all gives
    `no nodes available to schedule pods`.
    """
    if not reasons_by_node:
        return NO_NODES_MESSAGE
    histogram: dict[str, int] = {}
    for reasons in reasons_by_node.values():
        for reason in reasons:
            histogram[reason] = histogram.get(reason, 0) + 1
    parts = sorted(f"{count} {reason}" for reason, count in histogram.items())
    message = f"0/{len(reasons_by_node)} nodes are available:"
    if parts:
        message += f" {', '.join(parts)}."
    return message


def choose_node(
    pod: PodInfo, nodes: Mapping[str, NodeInfo], usage: Mapping[str, Usage]
) -> tuple[str | None, str]:
    """(the node to bind to, "") or (None, the FitError message).

    The feasible node with the highest `least_allocated_score` wins; ties go to the smallest
    name.
    """
    best: tuple[float, str] | None = None
    reasons_by_node: dict[str, list[str]] = {}
    for name, node in sorted(nodes.items()):
        node_usage = usage.get(name) or Usage()
        reasons = filter_reasons(pod, node, node_usage)
        if reasons:
            reasons_by_node[name] = reasons
            continue
        score = least_allocated_score(pod, node, node_usage)
        if best is None or score > best[0]:
            best = (score, name)
    if best is not None:
        return best[1], ""
    return None, fit_error_message(reasons_by_node)


@dataclasses.dataclass(frozen=True, slots=True)
class Placement:
    """The scheduler's verdict on one pod: a node, or None and the FitError message."""

    pod: PodInfo
    node: str | None
    message: str


def plan_placements(
    candidates: Iterable[PodInfo], nodes: Mapping[str, NodeInfo], usage: Mapping[str, Usage]
) -> list[Placement]:
    """Place pods one by one in (creationTimestamp, name, namespace) order.

    Each placement counts for the pods after it, as kube-scheduler's assumed pods do, so one
    pass never overcommits a node. `usage` is not changed: touched nodes are copied.
    """
    ordered_nodes = dict(sorted(nodes.items()))
    planned: dict[str, Usage] = dict(usage)
    copied: set[str] = set()
    # Room only shrinks during a pass, so a pod the filters cannot tell from one that just
    # failed fails the same way, with the same message, until the next placement.
    failed: dict[str, str] = {}
    placements = []
    for pod in sorted(candidates, key=lambda p: (p.created, p.name, p.namespace)):
        if pod.signature in failed:
            placements.append(Placement(pod=pod, node=None, message=failed[pod.signature]))
            continue
        node, message = choose_node(pod, ordered_nodes, planned)
        if node is None:
            failed[pod.signature] = message
        else:
            failed.clear()
            if node not in copied:
                previous = planned.get(node) or Usage()
                planned[node] = dataclasses.replace(previous, requests=dict(previous.requests))
                copied.add(node)
            planned[node].add(pod)
        placements.append(Placement(pod=pod, node=node, message=message))
    return placements


def needs_unschedulable_update(pod: PodInfo, message: str) -> bool:
    """Whether `PodScheduled` must be (re)written: only when status, reason or message change."""
    current = pod.condition("PodScheduled") or {}
    wanted = ("False", "Unschedulable", message)
    return (current.get("status"), current.get("reason"), current.get("message")) != wanted


# --- Node manifests --------------------------------------------------------------------------


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def complete_node(node: Mapping[str, Any]) -> dict:
    """A Node manifest as a registered kubelet shows it, keeping everything already given.

    Adds `apiVersion`/`kind`, the `kubernetes.io/hostname`, `kubernetes.io/os` and
    `kubernetes.io/arch` labels, `status.allocatable` (from `capacity`, and vice versa),
    `pods: 110` when neither says, a `Ready` condition, addresses and `nodeInfo`.
    """
    return _completed(copy.deepcopy(dict(node)))


def _completed(node: dict) -> dict:
    node.setdefault("apiVersion", "v1")
    node.setdefault("kind", "Node")
    metadata = node.setdefault("metadata", {})
    name = metadata.get("name")
    if not name:
        raise ValueError("Node manifest: metadata.name is required")
    labels = metadata.setdefault("labels", {})
    labels.setdefault("kubernetes.io/hostname", name)
    labels.setdefault("kubernetes.io/os", "linux")
    labels.setdefault("kubernetes.io/arch", "amd64")
    node.setdefault("spec", {})
    status = node.setdefault("status", {})
    capacity = status.setdefault("capacity", dict(status.get("allocatable") or {}))
    capacity.setdefault("pods", str(DEFAULT_MAX_PODS))
    allocatable = status.setdefault("allocatable", dict(capacity))
    allocatable.setdefault("pods", capacity["pods"])
    for section, amounts in (("capacity", capacity), ("allocatable", allocatable)):
        for resource, value in amounts.items():
            try:
                parse_quantity(value)
            except ValueError as exc:
                raise ValueError(f"node {name}: status.{section}[{resource!r}]: {exc}") from exc
    if not status.get("conditions"):
        status["conditions"] = [
            {
                "type": "Ready",
                "status": "True",
                "reason": "KubeletReady",
                "message": "kubelet is posting ready status",
                "lastHeartbeatTime": _now(),
                "lastTransitionTime": _now(),
            }
        ]
    status.setdefault(
        "addresses",
        [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": name}],
    )
    status.setdefault(
        "nodeInfo",
        {
            "kubeletVersion": "v1.32.0",
            "containerRuntimeVersion": "kubesim://1",
            "operatingSystem": "linux",
            "architecture": "amd64",
        },
    )
    return node


_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def parse_node_flag(text: str) -> dict:
    """A Node manifest from `--node` syntax: `NAME[:ITEM,ITEM,...]`.

    Items:
    - `RESOURCE=QUANTITY`: capacity and allocatable (`cpu=8`, `memory=32Gi`, `pods=110`,
      `nvidia.com/gpu=4`); `pods` defaults to 110;
    - `label.KEY=VALUE`: a label (`label.topology.kubernetes.io/zone=z1`);
    - `taint.KEY[=VALUE]:EFFECT`: a taint, EFFECT one of NoSchedule, PreferNoSchedule, NoExecute
      (`taint.nvidia.com/gpu=present:NoSchedule`);
    - `unschedulable` (or `unschedulable=true`): a cordoned node.

    Example: `gpu-1:cpu=32,memory=256Gi,nvidia.com/gpu=8,label.pool=gpu,taint.gpu:NoSchedule`.
    Raises ValueError naming the flag, the item and the problem.
    """
    name, _, rest = text.partition(":")
    name = name.strip()
    if not name:
        raise ValueError(f"--node {text!r}: the node name is missing (NAME[:ITEM,...])")
    labels: dict[str, str] = {}
    taints: list[dict] = []
    capacity: dict[str, str] = {}
    unschedulable = False
    for raw in filter(None, (item.strip() for item in rest.split(","))):
        where = f"--node {text!r}: item {raw!r}"
        if raw.startswith("label."):
            key, sep, value = raw[len("label.") :].partition("=")
            if not key or not sep:
                raise ValueError(f"{where}: a label is label.KEY=VALUE")
            labels[key] = value
        elif raw.startswith("taint."):
            taint_text, sep, effect = raw[len("taint.") :].rpartition(":")
            if not sep or effect not in _TAINT_EFFECTS:
                raise ValueError(
                    f"{where}: a taint is taint.KEY[=VALUE]:EFFECT, "
                    f"EFFECT one of {', '.join(_TAINT_EFFECTS)}"
                )
            key, _, value = taint_text.partition("=")
            if not key:
                raise ValueError(f"{where}: the taint key is missing")
            taint = {"key": key, "effect": effect}
            if value:
                taint["value"] = value
            taints.append(taint)
        elif raw.split("=", 1)[0] == "unschedulable":
            flag = raw.partition("=")[2] or "true"
            if flag not in ("true", "false"):
                raise ValueError(f"{where}: unschedulable is true or false")
            unschedulable = flag == "true"
        else:
            resource, sep, value = raw.partition("=")
            if not resource or not sep:
                raise ValueError(f"{where}: a resource is RESOURCE=QUANTITY")
            try:
                parse_quantity(value)
            except ValueError as exc:
                raise ValueError(f"{where}: {exc}") from exc
            capacity[resource] = value
    node_spec: dict[str, Any] = {}
    if taints:
        node_spec["taints"] = taints
    if unschedulable:
        node_spec["unschedulable"] = True
    return complete_node(
        {
            "metadata": {"name": name, "labels": labels},
            "spec": node_spec,
            "status": {"capacity": capacity},
        }
    )


def load_nodes_file(path: str) -> list[dict]:
    """The Node manifests of a multi-document YAML file (a `v1 List` of Nodes is unrolled).

    Empty documents are skipped; every other document must be a Node. Each is completed by
    `complete_node`. Raises ValueError naming the file and the document's position.
    """
    with open(path, encoding="utf-8") as stream:
        try:
            documents = list(yaml.safe_load_all(stream))
        except yaml.YAMLError as exc:
            raise ValueError(f"{path}: not YAML: {exc}") from exc
    nodes = []
    for index, document in enumerate(documents):
        if document is None:
            continue
        items = (
            document.get("items")
            if isinstance(document, dict) and document.get("kind") == "List"
            else [document]
        )
        for item in items or []:
            if not isinstance(item, dict) or item.get("kind", "Node") != "Node":
                kind = item.get("kind") if isinstance(item, dict) else type(item).__name__
                raise ValueError(f"{path}: document {index + 1}: expected a Node, got {kind}")
            try:
                nodes.append(complete_node(item))
            except ValueError as exc:
                raise ValueError(f"{path}: document {index + 1}: {exc}") from exc
    return nodes


# --- The running simulation ------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class SimulationOptions:
    """What `run_simulation` does."""

    nodes: list[dict]
    """Node manifests to create at start (through the API); existing ones are left as they are."""
    scheduler: bool = True
    """Bind ungated pending pods of the default scheduler to nodes."""
    kubelet: bool = True
    """Move bound pods to Running, and to Succeeded after `kubesim.io/run-seconds`."""
    write_concurrency: int = 32
    """How many bindings and status patches are in flight at once."""


class _Restart(Exception):
    """The watch must re-list: the server said 410 Gone or sent an ERROR event."""


class _Simulator:
    """Caches of pods and nodes kept by list+watch; the scheduler and kubelet passes over them."""

    def __init__(self, session: aiohttp.ClientSession, options: SimulationOptions) -> None:
        self.session = session
        self.options = options
        self.pods: dict[str, PodInfo] = {}  # by uid
        self.nodes: dict[str, NodeInfo] = {}  # by name
        self.usage: dict[str, Usage] = {}  # by node name
        self.placed: dict[str, tuple[str, PodInfo]] = {}  # uid -> (node, counted pod)
        self.assumed: dict[str, str] = {}  # uid -> node, bindings in flight
        self.to_schedule: set[str] = set()
        self.unschedulable: set[str] = set()
        self.to_start: set[str] = set()
        self.started: set[str] = set()
        self.timers: dict[str, asyncio.TimerHandle] = {}
        self.start_clock: dict[str, float] = {}  # uid -> loop time we started it at
        self.retry_all = False
        self.wake = asyncio.Event()
        self.writes = asyncio.Semaphore(options.write_concurrency)
        self.tasks: set[asyncio.Task[None]] = set()
        self.ips = itertools.count(1)

    # --- bookkeeping ---

    def _count(self, uid: str, node: str | None, pod: PodInfo | None) -> None:
        """Make `uid` count on `node` (None: on no node), freeing what it counted before."""
        previous = self.placed.pop(uid, None)
        if previous is not None:
            self.usage[previous[0]].add(previous[1], -1)
            self.retry_all = True  # room was freed (or moved): unschedulable pods may fit now
        if node is not None and pod is not None:
            self.usage.setdefault(node, Usage()).add(pod)
            self.placed[uid] = (node, pod)

    def _recount(self, pod: PodInfo) -> None:
        node = pod.node_name or self.assumed.get(pod.uid)
        if node and not pod.terminal:
            current = self.placed.get(pod.uid)
            if current is not None and current[0] == node and current[1].requests == pod.requests:
                return
            self._count(pod.uid, node, pod)
        else:
            self._count(pod.uid, None, None)

    def upsert_pod(self, raw: dict) -> None:
        try:
            pod = pod_info(raw)
        except ValueError as exc:
            logger.warning("%s; ignored by the simulation", exc)
            return
        old = self.pods.get(pod.uid)
        self.pods[pod.uid] = pod
        if pod.node_name:
            self.assumed.pop(pod.uid, None)
        self._recount(pod)
        if pod.wants_scheduling and (old is None or old.obj.get("spec") != pod.obj.get("spec")):
            self.to_schedule.add(pod.uid)
        if (
            pod.node_name
            and not pod.deleting
            and pod.phase in ("", "Pending")
            and pod.uid not in self.started
        ):
            self.to_start.add(pod.uid)
        if pod.phase == "Running" and pod.run_seconds is not None and pod.uid not in self.timers:
            self._arm_completion(pod)
        if pod.terminal or pod.deleting:
            self._disarm(pod.uid)
        self.wake.set()

    def delete_pod(self, raw: dict) -> None:
        uid = (raw.get("metadata") or {}).get("uid", "")
        pod = self.pods.pop(uid, None)
        if pod is None:
            return
        self._count(uid, None, None)
        self.assumed.pop(uid, None)
        for pending in (self.to_schedule, self.unschedulable, self.to_start, self.started):
            pending.discard(uid)
        self._disarm(uid)
        self.wake.set()

    def upsert_node(self, raw: dict) -> None:
        try:
            node = node_info(raw)
        except ValueError as exc:
            logger.warning("%s; ignored by the simulation", exc)
            return
        previous = self.nodes.get(node.name)
        added = previous is None
        self.nodes[node.name] = node
        if previous != node:  # a status heartbeat alone changes nothing the filters read
            self.retry_all = True
        if added:
            self.to_start.update(
                p.uid
                for p in self.pods.values()
                if p.node_name == node.name and p.phase in ("", "Pending")
            )
        self.wake.set()

    def delete_node(self, raw: dict) -> None:
        self.nodes.pop((raw.get("metadata") or {}).get("name", ""), None)
        self.retry_all = True
        self.wake.set()

    def replace(self, kind: str, items: list[dict]) -> None:
        """After a (re-)list: forget what vanished, update everything listed."""
        if kind == "pods":
            listed = {(p.get("metadata") or {}).get("uid", "") for p in items}
            for uid, pod in list(self.pods.items()):
                if uid not in listed:
                    self.delete_pod(dict(pod.obj))
            for item in items:
                self.upsert_pod(item)
        else:
            listed = {(n.get("metadata") or {}).get("name", "") for n in items}
            for name in list(self.nodes):
                if name not in listed:
                    self.delete_node({"metadata": {"name": name}})
            for item in items:
                self.upsert_node(item)

    # --- writes ---

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.ensure_future(coroutine)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _write(
        self, method: str, path: str, body: dict, content_type: str
    ) -> tuple[int, str]:
        async with (
            self.writes,
            self.session.request(
                method, path, data=json.dumps(body), headers={"Content-Type": content_type}
            ) as response,
        ):
            return response.status, await response.text()

    # --- scheduler ---

    def schedule(self) -> None:
        """One pass over the candidates (see `plan_placements`), then the writes it implies."""
        if self.retry_all:
            self.to_schedule |= self.unschedulable
            self.unschedulable.clear()
            self.retry_all = False
        candidates = [self.pods[uid] for uid in self.to_schedule if uid in self.pods]
        self.to_schedule.clear()
        candidates = [p for p in candidates if p.wants_scheduling and p.uid not in self.assumed]
        for decision in plan_placements(candidates, self.nodes, self.usage):
            pod = decision.pod
            if decision.node is not None:
                self.assumed[pod.uid] = decision.node
                self._count(pod.uid, decision.node, pod)
                self._spawn(self._bind(pod, decision.node))
            else:
                self.unschedulable.add(pod.uid)
                if needs_unschedulable_update(pod, decision.message):
                    self._spawn(self._mark_unschedulable(pod, decision.message))

    async def _bind(self, pod: PodInfo, node: str) -> None:
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/binding"
        try:
            status, text = await self._write("POST", path, binding, "application/json")
        except aiohttp.ClientError as exc:
            status, text = 0, str(exc)
        if 200 <= status < 300:
            return
        # Forget the assumption, and try this pod again a little later: its next event
        # (bound by someone else, gated, deleted) usually explains the failure by then.
        logger.warning("binding %s to %s failed (%s): %s", pod.key, node, status, text[:300])
        if self.assumed.pop(pod.uid, None) is not None:
            current = self.pods.get(pod.uid)
            if current is not None:
                self._recount(current)
            asyncio.get_running_loop().call_later(BIND_RETRY_SECONDS, self._requeue, pod.uid)
        self.wake.set()

    def _requeue(self, uid: str) -> None:
        if uid in self.pods:
            self.to_schedule.add(uid)
            self.wake.set()

    async def _mark_unschedulable(self, pod: PodInfo, message: str) -> None:
        conditions = [
            c
            for c in (pod.obj.get("status") or {}).get("conditions") or []
            if c.get("type") != "PodScheduled"
        ]
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": message,
                "lastProbeTime": None,
                "lastTransitionTime": _now(),
            }
        )
        await self._patch_status(pod, {"status": {"conditions": conditions}})

    async def _patch_status(self, pod: PodInfo, body: dict) -> bool:
        path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/status"
        try:
            status, text = await self._write("PATCH", path, body, "application/merge-patch+json")
        except aiohttp.ClientError as exc:
            status, text = 0, str(exc)
        if 200 <= status < 300:
            return True
        if status != 404:  # a pod deleted meanwhile is no news
            logger.warning("status of %s not written (%s): %s", pod.key, status, text[:300])
        return False

    # --- kubelet ---

    def run_kubelet(self) -> None:
        for uid in sorted(self.to_start):
            pod = self.pods.get(uid)
            if pod is None or not pod.node_name or pod.node_name not in self.nodes:
                continue
            if pod.deleting or pod.phase not in ("", "Pending") or uid in self.started:
                continue
            self.started.add(uid)
            self._spawn(self._start(pod))
        # Keep only pods still waiting for their node to appear.
        self.to_start = {
            uid
            for uid in self.to_start
            if uid in self.pods
            and uid not in self.started
            and self.pods[uid].node_name not in self.nodes
            and self.pods[uid].phase in ("", "Pending")
        }

    async def _start(self, pod: PodInfo) -> None:
        now = _now()
        spec = pod.obj.get("spec") or {}
        ip = next(self.ips)
        pod_ip = f"10.244.{ip // 250 % 250}.{ip % 250 + 1}"
        conditions = [
            {"type": kind, "status": "True", "lastProbeTime": None, "lastTransitionTime": now}
            for kind in (
                "PodReadyToStartContainers",
                "Initialized",
                "Ready",
                "ContainersReady",
                "PodScheduled",
            )
        ]
        body = {
            "status": {
                "phase": "Running",
                "conditions": conditions,
                "hostIP": "127.0.0.1",
                "hostIPs": [{"ip": "127.0.0.1"}],
                "podIP": pod_ip,
                "podIPs": [{"ip": pod_ip}],
                "startTime": now,
                "containerStatuses": [
                    _container_status(c, pod, ready=True, state={"running": {"startedAt": now}})
                    for c in spec.get("containers") or []
                ],
            }
        }
        init = spec.get("initContainers") or []
        if init:
            body["status"]["initContainerStatuses"] = [
                _container_status(
                    c,
                    pod,
                    ready=c.get("restartPolicy") == "Always",
                    state=(
                        {"running": {"startedAt": now}}
                        if c.get("restartPolicy") == "Always"
                        else {"terminated": _terminated(now)}
                    ),
                )
                for c in init
            ]
        self.start_clock[pod.uid] = asyncio.get_running_loop().time()
        if not await self._patch_status(pod, body):
            self.started.discard(pod.uid)
            self.start_clock.pop(pod.uid, None)
            return
        if pod.run_seconds is not None and pod.uid not in self.timers:
            self._arm_completion(pod)

    def _arm_completion(self, pod: PodInfo) -> None:
        """Succeed `pod` run_seconds after it started: from the loop clock if this simulation
        started it, else from its `status.startTime` (whole seconds) when another one did."""
        if pod.run_seconds is None:
            return
        loop = asyncio.get_running_loop()
        delay = pod.run_seconds
        started = self.start_clock.get(pod.uid)
        if started is not None:
            delay -= loop.time() - started
        elif pod.start_time:
            with contextlib.suppress(ValueError):
                began = datetime.datetime.fromisoformat(pod.start_time.replace("Z", "+00:00"))
                delay -= (datetime.datetime.now(datetime.UTC) - began).total_seconds()
        self.timers[pod.uid] = loop.call_later(max(delay, 0.0), self._complete_later, pod.uid)

    def _disarm(self, uid: str) -> None:
        self.start_clock.pop(uid, None)
        timer = self.timers.pop(uid, None)
        if timer is not None:
            timer.cancel()

    def _complete_later(self, uid: str) -> None:
        pod = self.pods.get(uid)
        if pod is None or pod.deleting or pod.terminal:
            return
        self._spawn(self._complete(pod))

    async def _complete(self, pod: PodInfo) -> None:
        now = _now()
        spec = pod.obj.get("spec") or {}
        status = pod.obj.get("status") or {}
        started = {c.get("name"): c for c in status.get("containerStatuses") or []}
        conditions = []
        for condition in status.get("conditions") or []:
            if condition.get("type") in ("Ready", "ContainersReady"):
                condition = {
                    **condition,
                    "status": "False",
                    "reason": "PodCompleted",
                    "lastTransitionTime": now,
                }
            conditions.append(condition)
        body = {
            "status": {
                "phase": "Succeeded",
                "conditions": conditions,
                "containerStatuses": [
                    _container_status(
                        c,
                        pod,
                        ready=False,
                        state={
                            "terminated": _terminated(
                                now,
                                started=((started.get(c.get("name")) or {}).get("state") or {})
                                .get("running", {})
                                .get("startedAt", pod.start_time),
                            )
                        },
                    )
                    for c in spec.get("containers") or []
                ],
            }
        }
        await self._patch_status(pod, body)


def _terminated(now: str, started: str = "") -> dict:
    return {"exitCode": 0, "reason": "Completed", "startedAt": started or now, "finishedAt": now}


def _container_status(
    container: Mapping[str, Any], pod: PodInfo, *, ready: bool, state: dict
) -> dict:
    name = container.get("name", "")
    return {
        "name": name,
        "image": container.get("image", ""),
        "imageID": "",
        "containerID": f"kubesim://{pod.uid}/{name}",
        "ready": ready,
        "started": "running" in state,
        "restartCount": 0,
        "state": state,
    }


async def _create_nodes(session: aiohttp.ClientSession, nodes: list[dict]) -> None:
    """POST each node; one that exists already (409) is left as it is."""
    for node in nodes:
        name = node["metadata"]["name"]
        async with session.post("/api/v1/nodes", json=node) as response:
            if response.status == 409:
                logger.info("node %s exists already; left as it is", name)
                continue
            if response.status >= 300:
                text = (await response.text())[:300]
                raise RuntimeError(
                    f"node {name}: creation failed with HTTP {response.status}: {text}"
                )
            created = await response.json()
        if (created.get("status") or {}).get("allocatable") != node["status"]["allocatable"]:
            # A server that resets status on create (as for pods) gets it through /status.
            async with session.patch(
                f"/api/v1/nodes/{name}/status",
                data=json.dumps({"status": node["status"]}),
                headers={"Content-Type": "application/merge-patch+json"},
            ) as response:
                if response.status >= 300:
                    logger.warning(
                        "node %s: status not kept by the server (HTTP %s)", name, response.status
                    )


async def _watch(simulator: _Simulator, kind: str, path: str, stop: asyncio.Event) -> None:
    """List, then watch from the list's resourceVersion; re-list on 410 or any error event."""
    delay = 0.1
    while not stop.is_set():
        try:
            async with simulator.session.get(path) as response:
                if response.status != 200:
                    raise _Restart(f"list {path}: HTTP {response.status}")
                listing = await response.json()
            simulator.replace(kind, listing.get("items") or [])
            version = (listing.get("metadata") or {}).get("resourceVersion", "")
            while not stop.is_set():
                version = await _follow(simulator, kind, path, version)
            return
        except (_Restart, aiohttp.ClientError, ValueError) as exc:
            logger.info("watch of %s restarts: %s", path, exc)
            await asyncio.sleep(delay)  # back off from a server that is failing; not a test wait
            delay = min(delay * 2, 2.0)


async def _follow(simulator: _Simulator, kind: str, path: str, version: str) -> str:
    """Follow one watch stream until the server closes it; return the last resourceVersion."""
    params = {
        "watch": "true",
        "allowWatchBookmarks": "true",
        "resourceVersion": version,
        "timeoutSeconds": "600",
    }
    timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
    async with simulator.session.get(path, params=params, timeout=timeout) as response:
        if response.status == 410:
            raise _Restart("410 Gone")
        if response.status != 200:
            raise _Restart(f"watch {path}: HTTP {response.status}")
        buffer = b""
        async for chunk in response.content.iter_any():
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                if not line.strip():
                    continue
                event = json.loads(line)
                kind_of_event, obj = event.get("type"), event.get("object") or {}
                if kind_of_event == "ERROR":
                    raise _Restart(f"{obj.get('code')} {obj.get('message')}")
                version = (obj.get("metadata") or {}).get("resourceVersion", version)
                if kind_of_event == "BOOKMARK":
                    continue
                if kind == "pods":
                    (simulator.delete_pod if kind_of_event == "DELETED" else simulator.upsert_pod)(
                        obj
                    )
                else:
                    (
                        simulator.delete_node
                        if kind_of_event == "DELETED"
                        else simulator.upsert_node
                    )(obj)
    return version


async def run_simulation(
    base_url: str,
    token: str,
    options: SimulationOptions,
    stop: asyncio.Event,
    *,
    ca_bundle: str | None = None,
) -> None:
    """Create the nodes, then schedule and run pods until `stop` is set.

    `base_url` is the API server (`http://127.0.0.1:PORT`, or `https://` with `ca_bundle` the CA
    to trust), `token` a bearer token. Raises RuntimeError if a node cannot be created; after
    that, API failures are logged and retried.
    """
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json",
        "User-Agent": "kubesim-simulation",
    }
    connector = (
        aiohttp.TCPConnector(ssl=certs.client_ssl_context(ca_bundle))
        if ca_bundle is not None
        else None
    )
    async with aiohttp.ClientSession(
        base_url=base_url, headers=headers, connector=connector
    ) as session:
        await _create_nodes(session, [complete_node(n) for n in options.nodes])
        simulator = _Simulator(session, options)
        watchers = [
            asyncio.create_task(_watch(simulator, "nodes", "/api/v1/nodes", stop)),
            asyncio.create_task(_watch(simulator, "pods", "/api/v1/pods", stop)),
        ]
        stopping = asyncio.create_task(stop.wait())
        try:
            while not stop.is_set():
                waking = asyncio.create_task(simulator.wake.wait())
                await asyncio.wait(
                    [waking, stopping, *watchers], return_when=asyncio.FIRST_COMPLETED
                )
                waking.cancel()
                for watcher in watchers:
                    if (
                        watcher.done()
                        and not watcher.cancelled()
                        and watcher.exception() is not None
                    ):
                        raise watcher.exception()  # type: ignore[misc]
                simulator.wake.clear()
                if options.scheduler:
                    simulator.schedule()
                if options.kubelet:
                    simulator.run_kubelet()
        finally:
            stopping.cancel()
            for timer in simulator.timers.values():
                timer.cancel()
            pending = [*watchers, *simulator.tasks]
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, stopping, return_exceptions=True)
