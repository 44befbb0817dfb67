"""Pods, the fast path: the pods of a watch read without readers or field paths.

:func:`pod_manifests.parse_pod` tries :func:`parse_pod_fast` first and reads the manifest
through the checked path when it raises :class:`Unusual`.
"""

from __future__ import annotations

import datetime
import functools
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final, NamedTuple

from queuetree.api import bodies, pod_rules, readers
from queuetree.core import errors, objects, resources

# -- Pod, the fast path --------------------------------------------------------------------------
#
# The operator parses every pod watch event, and nearly all of them are well formed. This path
# reads the plain dicts, lists and strings of such a pod directly, without readers or field
# paths, and gives up (raises Unusual) at the first thing that is not plainly well formed: a
# wrong type (even a subclass), a missing name, an invalid or negative quantity, anything that
# would be reported as an error or a warning. pod_manifests.parse_pod then reads the manifest again
# through pod_manifests.parse_pod_checked, so every message comes from one place. Where the checked
# path stops reading early (the first matching condition, a valid task-priority annotation), so
# does this one: it must accept exactly what the checked path accepts without problems, or less
# (tests/api/test_manifests_pods_fast.py holds it to that). What a burst of pods repeats (request
# and limit maps, tolerations, node selector terms) is memoised in bounded LRU caches of
# immutable values, keyed so that no two keys that are equal but of different types (1, 1.0,
# True) can share a result.


class Unusual(Exception):
    """The fast path declines the input; the checked path reads it."""


def _fast_string(value: Any, default: str = "") -> str:
    if value is None:
        return default
    if type(value) is not str:
        raise Unusual
    return value


def _fast_dict(value: Any) -> dict[Any, Any]:
    """A dict; absent reads as empty."""
    if value is None:
        return _NO_FIELDS
    if type(value) is not dict:
        raise Unusual
    return value


def _fast_list(value: Any) -> list[Any]:
    """A list of dicts; absent reads as empty."""
    if value is None:
        return _NO_ITEMS
    if type(value) is not list:
        raise Unusual
    for item in value:
        if type(item) is not dict:  # None items too: the checked path reads them, rarely seen
            raise Unusual
    return value


_NO_FIELDS: Final[dict[Any, Any]] = {}
_NO_ITEMS: Final[list[Any]] = []


def _fast_string_map(value: Any) -> Mapping[str, str]:
    if value is None:
        return objects.NO_LABELS
    if type(value) is not dict:
        raise Unusual
    if not value:
        return objects.NO_LABELS
    for name, text in value.items():
        if type(name) is not str or type(text) is not str:
            raise Unusual
    return MappingProxyType(dict(sorted(value.items())))


def _fast_time(value: Any) -> datetime.datetime | None:
    if value is None:
        return None
    if type(value) is str:
        try:
            parsed = datetime.datetime.fromisoformat(value)
        except ValueError:
            raise Unusual from None
    elif isinstance(value, datetime.datetime):
        parsed = value
    else:
        raise Unusual
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.UTC)
    return parsed


@functools.lru_cache(maxsize=4096)
def _well_formed_resource(items: tuple[tuple[Any, Any], ...]) -> resources.Resource | None:
    """The vector of a quantity map's items; None when the checked path must read the map.

    None for a name or quantity that is not a plain string (so no key that merely equals a
    string map's key, such as ``1`` and ``True``, can share its entry), a malformed quantity or
    a negative one. Cached: a burst of pods repeats a few request shapes, vectors are immutable.
    """
    for name, raw in items:
        if type(name) is not str or type(raw) is not str:
            return None
    try:
        resource = resources.Resource.from_resource_list(dict(items))
    except errors.QuantityError:
        return None
    return None if readers.has_negative(resource) else resource


def _fast_pod_request(spec: dict[Any, Any]) -> resources.Resource:
    """:func:`pod_manifests._pod_request`, memoised on the quantity maps of the pod's
    containers."""
    key = (
        _containers_key(spec.get("containers"), init=False),
        _containers_key(spec.get("initContainers"), init=True),
        _items_key(spec.get("overhead")),
        _pod_level_key(spec.get("resources")),
    )
    try:
        request = _pod_request_of(key)
    except TypeError:  # an unhashable quantity or restartPolicy (a list)
        raise Unusual from None
    if request is None:
        raise Unusual
    return request


_ContainersKey = tuple[tuple[Any, ...], ...] | None
_ItemsKey = tuple[tuple[Any, Any], ...] | None
_PodLevelKey = tuple[_ItemsKey, _ItemsKey] | None


def _pod_level_key(value: Any) -> _PodLevelKey:
    """``spec.resources``' requests and limits, as hashable items; None when absent."""
    if value is None:
        return None
    level = _fast_dict(value)
    return (_items_key(level.get("requests")), _items_key(level.get("limits")))


def _items_key(value: Any) -> _ItemsKey:
    if value is None:
        return None
    if type(value) is not dict:
        raise Unusual
    return tuple(value.items())


def _containers_key(value: Any, *, init: bool) -> _ContainersKey:
    """Per container, its requests and limits (and for init containers its restartPolicy), as
    hashable items: absent and None read alike, as in :func:`pod_manifests._container_request`."""
    if value is None:
        return None
    key: list[tuple[Any, ...]] = []
    for container in _fast_list(value):
        spec = container.get("resources")
        if spec is None:
            requests = limits = None
        elif type(spec) is dict:
            requests = _items_key(spec.get("requests"))
            limits = _items_key(spec.get("limits"))
        else:
            raise Unusual
        if init:
            key.append((requests, limits, container.get("restartPolicy")))
        else:
            key.append((requests, limits))
    return tuple(key)


@functools.lru_cache(maxsize=4096)
def _pod_request_of(
    key: tuple[_ContainersKey, _ContainersKey, _ItemsKey, _PodLevelKey],
) -> resources.Resource | None:
    """The request of a key of :func:`_fast_pod_request`; None when the checked path must read
    the pod. Keys that are equal but not alike (``1`` and ``True``) are both declined by
    :func:`_well_formed_resource`, and a non-string restartPolicy by :func:`_fast_string`, so
    they cannot share an entry with a different result."""
    containers_key, init_key, overhead_key, level_key = key
    try:
        containers = [
            _request_of_items(requests, limits) for requests, limits in containers_key or ()
        ]
        init_containers = [
            (_request_of_items(requests, limits), _fast_string(restart_policy) == "Always")
            for requests, limits, restart_policy in init_key or ()
        ]
        overhead = _resource_of_items(overhead_key)
        pod_level = (
            None
            if level_key is None
            else _pod_level_of(level_key, containers=(*(containers_key or ()), *(init_key or ())))
        )
    except Unusual:
        return None
    return pod_rules.pod_request(
        containers, init_containers, overhead=overhead, pod_level=pod_level
    )


def _pod_level_of(
    key: tuple[_ItemsKey, _ItemsKey], *, containers: tuple[tuple[Any, ...], ...]
) -> pod_rules.PodLevel:
    """:func:`pod_manifests._pod_level` of the items of ``spec.resources`` (``key``) and of
    the containers' and init containers' requests and limits (read well formed already).
    A resource that is not a pod-level one is a warning: declined."""
    read: list[tuple[resources.Resource, frozenset[str]]] = []
    for items in key:
        resource = _resource_of_items(items) or resources.EMPTY  # names are strings now
        names = frozenset(name for name, _ in items or ())
        if not all(map(pod_rules.is_pod_level_resource, names)):
            raise Unusual
        read.append((resource, names))
    (requests, requested), (limits, limited) = read
    stated = frozenset(
        name for container in containers for items in container[:2] for name, _ in items or ()
    )
    return pod_rules.PodLevel(
        requests=requests, requested=requested, limits=limits, limited=limited, stated=stated
    )


def _resource_of_items(items: tuple[tuple[Any, Any], ...] | None) -> resources.Resource | None:
    if items is None:
        return None
    resource = _well_formed_resource(items)
    if resource is None:
        raise Unusual
    return resource


def _request_of_items(
    requests: tuple[tuple[Any, Any], ...] | None, limits: tuple[tuple[Any, Any], ...] | None
) -> resources.Resource:
    """:func:`pod_manifests._container_request` of a container's requests and limits items."""
    requested = _resource_of_items(requests) or resources.EMPTY
    if not limits:
        return requested
    # Limits whose names all have a request are never read, as in the checked path.
    names = {name for name, _ in requests or ()}
    limited = tuple((name, raw) for name, raw in limits if name not in names)
    if not limited:
        return requested
    return requested + (_resource_of_items(limited) or resources.EMPTY)


@functools.lru_cache(maxsize=1024)
def _toleration(key: str, operator: str, value: str, effect: str) -> objects.Toleration:
    """Shared, immutable tolerations: every pod carries the same few (the API server adds the
    not-ready and unreachable ones to each)."""
    return objects.Toleration(key=key, operator=operator, value=value, effect=effect)


@functools.lru_cache(maxsize=1024)
def _requirement(
    key: str, operator: str, values: tuple[str, ...]
) -> objects.NodeSelectorRequirement:
    """Shared, immutable node selector requirements: the pods of a workload repeat theirs."""
    return objects.NodeSelectorRequirement(key=key, operator=operator, values=values)


@functools.lru_cache(maxsize=1024)
def _term(
    match_expressions: tuple[objects.NodeSelectorRequirement, ...],
    match_fields: tuple[objects.NodeSelectorRequirement, ...],
) -> objects.NodeSelectorTerm:
    return objects.NodeSelectorTerm(match_expressions=match_expressions, match_fields=match_fields)


def _fast_requirements(value: Any) -> tuple[objects.NodeSelectorRequirement, ...]:
    return tuple(
        _requirement(
            _fast_string(item.get("key")),
            _fast_string(item.get("operator")),
            tuple(_fast_string(text) for text in _fast_plain_list(item.get("values"))),
        )
        for item in _fast_list(value)
    )


def _fast_plain_list(value: Any) -> list[Any]:
    if value is None:
        return _NO_ITEMS
    if type(value) is not list:
        raise Unusual
    return value


def _fast_required_affinity(spec: dict[Any, Any]) -> tuple[objects.NodeSelectorTerm, ...]:
    affinity = spec.get("affinity")
    if affinity is None:
        return ()
    node_affinity = _fast_dict(affinity).get("nodeAffinity")
    required = _fast_dict(node_affinity).get("requiredDuringSchedulingIgnoredDuringExecution")
    return tuple(
        _term(
            _fast_requirements(term.get("matchExpressions")),
            _fast_requirements(term.get("matchFields")),
        )
        for term in _fast_list(_fast_dict(required).get("nodeSelectorTerms"))
    )


def _fast_unschedulable(status: dict[Any, Any]) -> bool:
    """PodScheduled=False with reason Unschedulable; like the checked path, stops reading at
    the first match, and reads a condition's status only when its type matches, and so on."""
    for condition in _fast_list(status.get("conditions")):
        if (
            _fast_string(condition.get("type")) == "PodScheduled"
            and _fast_string(condition.get("status")) == "False"
            and _fast_string(condition.get("reason")) == "Unschedulable"
        ):
            return True
    return False


def _fast_priority(
    spec: dict[Any, Any],
    annotations: Mapping[str, str],
    priority_classes: Mapping[str, objects.PriorityClass] | None,
) -> int:
    """:func:`pod_manifests._pod_priority` for the cases without a problem or a warning."""
    annotation = annotations.get(objects.TASK_PRIORITY_ANNOTATION)
    if annotation is not None:
        value = pod_rules.task_priority(annotation)
        if value is None:
            raise Unusual  # a warning
        return value
    priority = spec.get("priority")
    if priority is not None:
        if type(priority) is not int:
            raise Unusual
        return priority
    class_name = _fast_string(spec.get("priorityClassName"))
    if class_name:
        if priority_classes is None:
            raise Unusual  # a warning
        priority_class = priority_classes.get(class_name)
        if priority_class is None:
            raise Unusual
        return priority_class.value
    return pod_rules.default_priority(priority_classes)


def parse_pod_fast(
    manifest: readers.RawManifest, *, priority_classes: Mapping[str, objects.PriorityClass] | None
) -> objects.Pod:
    """:func:`pod_manifests.parse_pod` of a well-formed pod; raises :class:`Unusual` for anything
    else."""
    if type(manifest) is not dict and not isinstance(manifest, Mapping):
        raise Unusual
    kind = manifest.get("kind")
    if kind is not None and (type(kind) is not str or kind not in ("Pod", "")):
        raise Unusual
    api_version = manifest.get("apiVersion")
    if api_version is not None and (
        type(api_version) is not str or api_version not in (readers.CORE_API_VERSION, "")
    ):
        raise Unusual
    metadata = manifest.get("metadata")
    if type(metadata) is not dict:
        raise Unusual
    name = metadata.get("name")
    if type(name) is not str or not name:
        raise Unusual
    namespace = _fast_string(metadata.get("namespace")) or readers.DEFAULT_NAMESPACE
    uid = _fast_string(metadata.get("uid")) or f"{namespace}-{name}"
    created = _fast_time(metadata.get("creationTimestamp")) or objects.EPOCH
    deleting = _fast_time(metadata.get("deletionTimestamp")) is not None
    labels = _fast_string_map(metadata.get("labels"))
    annotations = _fast_string_map(metadata.get("annotations"))

    spec = manifest.get("spec")
    if type(spec) is not dict or spec.get("resourceClaims"):
        # Devices through DRA: rare enough that the checked path reads them.
        raise Unusual
    progress = _fast_progress(manifest, spec, deleting=deleting)
    resreq = _fast_pod_request(spec)
    group_name = annotations.get(objects.GROUP_NAME_ANNOTATION, "")
    return objects.Pod(
        namespace=namespace,
        name=name,
        group=f"{namespace}/{group_name}" if group_name else f"{namespace}/{name}",
        status=progress.status,
        resreq=resreq,
        priority=_fast_priority(spec, annotations, priority_classes),
        node_name=progress.node_name,
        scheduling_gates=progress.scheduling_gates,
        annotations=annotations,
        labels=labels,
        node_selector=_fast_string_map(spec.get("nodeSelector")),
        required_node_affinity=_fast_required_affinity(spec),
        tolerations=tuple(
            _toleration(
                _fast_string(item.get("key")),
                _fast_string(item.get("operator")) or "Equal",
                _fast_string(item.get("value")),
                _fast_string(item.get("effect")),
            )
            for item in _fast_list(spec.get("tolerations"))
        ),
        preemptable=pod_rules.preemptable(annotations, labels),
        preemption_policy=_fast_string(spec.get("preemptionPolicy")) or "PreemptLowerPriority",
        unschedulable=progress.unschedulable,
        scheduler_name=_fast_string(spec.get("schedulerName")) or pod_rules.DEFAULT_SCHEDULER,
        created=created,
        uid=uid,
        native_group=_fast_string(_fast_dict(spec.get("schedulingGroup")).get("podGroupName")),
    )


# -- Progress: what the cluster writes into a pod after its creation -----------------------------
#
# After a pod is created, the writes to it come from kube-scheduler (spec.nodeName and the
# PodScheduled condition), the kubelet (status), and gate removals (spec.schedulingGates). The
# operator's informer re-reads only these fields when nothing else changed (reparse_progress_fast),
# since a full parse costs several times more; both paths read them through _fast_progress, so
# they agree by construction (tests/operator/test_informing.py checks the informer against a
# full parse).

PROGRESS_SPEC_FIELDS: Final = frozenset({"nodeName", "schedulingGates"})
"""The ``spec`` fields :func:`reparse_progress_fast` re-reads (with the whole ``status``)."""


class _Progress(NamedTuple):
    node_name: str
    status: objects.TaskStatus
    unschedulable: bool
    scheduling_gates: tuple[str, ...]


def _fast_progress(
    manifest: Mapping[Any, Any], spec: dict[Any, Any], *, deleting: bool
) -> _Progress:
    status = _fast_dict(manifest.get("status"))
    node_name = _fast_string(spec.get("nodeName"))
    phase = _fast_string(status.get("phase")) or "Pending"
    return _Progress(
        node_name=node_name,
        status=pod_rules.task_status(phase, deleting=deleting, node_name=node_name),
        unschedulable=_fast_unschedulable(status),
        scheduling_gates=tuple(
            _fast_string(gate.get("name")) for gate in _fast_list(spec.get("schedulingGates"))
        ),
    )


def reparse_progress_fast(pod: objects.Pod, manifest: readers.RawManifest) -> objects.Pod:
    """What :func:`pod_manifests.parse_pod` gives for ``manifest``, given ``pod``: the parse of a
    manifest of the same pod that differs from ``manifest`` at most in ``status`` and the
    :data:`PROGRESS_SPEC_FIELDS` of ``spec``. Raises :class:`Unusual` where those fields are not
    plainly well formed (the caller then parses ``manifest`` whole)."""
    if type(manifest) is not dict or pod.claims:
        # A pod with DRA claims reads status.resourceClaimStatuses too (the claims generated
        # for it, which it is charged from): the whole parse reads it, as at creation.
        raise Unusual
    metadata = manifest.get("metadata")
    spec = manifest.get("spec")
    if type(metadata) is not dict or type(spec) is not dict:
        raise Unusual
    deleting = _fast_time(metadata.get("deletionTimestamp")) is not None
    progress = _fast_progress(manifest, spec, deleting=deleting)
    if (
        progress.node_name == pod.node_name
        and progress.status == pod.status
        and progress.unschedulable == pod.unschedulable
        and progress.scheduling_gates == pod.scheduling_gates
    ):
        # Most writes after creation change nothing a parse keeps (a condition's timestamps,
        # the pod's IP, container statuses): the same object, so the state sees no change.
        return pod
    return objects.with_progress(
        pod,
        status=progress.status,
        node_name=progress.node_name,
        unschedulable=progress.unschedulable,
        scheduling_gates=progress.scheduling_gates,
    )


def identity(body: Mapping[str, Any]) -> int | None:
    """Everything a parsed pod depends on except what the cluster writes after creation (see
    :func:`progress`), as a :func:`bodies.fingerprint`.

    Parsing a pod costs more than everything else the operator does for it, and nearly every
    event after a pod's creation changes only what kube-scheduler, the kubelet or a gate removal
    writes (and bookkeeping such as ``resourceVersion`` and ``managedFields``). Comparing
    fingerprints is far cheaper than a parse, and the cache keeps one int per part of a pod
    rather than the dicts of its spec, which the garbage collector would walk (see
    docs/operator.md, Benchmark).
    """
    if type(body.get("metadata")) is not dict or type(body.get("spec")) is not dict:
        # Read as empty by metadata_of and spec_of, so a fingerprint would equal an empty
        # section's; the whole parse refuses them.
        return None
    meta = bodies.metadata_of(body)
    spec = bodies.spec_of(body)
    return bodies.fingerprint(
        (
            meta.get("uid"),
            meta.get("labels"),
            meta.get("annotations"),
            meta.get("deletionTimestamp"),
            meta.get("creationTimestamp"),
            {name: value for name, value in spec.items() if name not in PROGRESS_SPEC_FIELDS},
        )
    )


def progress(body: Mapping[str, Any]) -> int | None:
    """What the cluster writes into a pod after its creation: ``status`` and the
    :data:`PROGRESS_SPEC_FIELDS` of ``spec`` (``pod_manifests.reparse_progress``
    re-reads them), as a :func:`bodies.fingerprint`."""
    spec = bodies.spec_of(body)
    return bodies.fingerprint(
        (
            # As written: a status that is not an object must not fingerprint as an absent
            # one (status_of reads both as empty), or its change would go unread.
            body.get("status"),
            *(spec.get(name) for name in _PROGRESS_FIELDS_SORTED),
        )
    )


_PROGRESS_FIELDS_SORTED: Final = tuple(sorted(PROGRESS_SPEC_FIELDS))
