"""Pod, Node, PriorityClass and Namespace manifests (``v1``, ``scheduling.k8s.io/v1``).

:func:`parse_pod` reads a pod as a scheduling task: well-formed pods through
:mod:`pod_fast_path`, everything else through :func:`parse_pod_checked`, which names each
problem; both give the same pod. The rules they share are :mod:`pod_rules`'.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final, TypedDict, Unpack

from queuetree.api import pod_fast_path, pod_rules, readers, resource_claims
from queuetree.core import objects, problems, resources


def _container_request(container: readers.Reader) -> resources.Resource:
    """A container's effective request: ``requests``, with ``limits`` standing in for each name
    that has no request (the API server's defaulting)."""
    spec = container.at("resources")
    requests = spec.at("requests")
    limits = spec.at("limits")
    requested = requests.resource_list() or resources.EMPTY
    limited_names = [name for name in limits.mapping() if name not in requests.mapping()]
    if not limited_names:
        return requested
    only_limits = limits.subset(limited_names)
    return requested + (only_limits.resource_list() or resources.EMPTY)


def _pod_request(
    spec: readers.Reader, *, on_warning: readers.WarningFn | None, document: str
) -> resources.Resource:
    """The pod's request (:func:`pod_rules.pod_request`) from ``spec``: its containers, init
    containers, overhead and pod-level resources (:func:`_pod_level`)."""
    # Read in document order, so that problems are reported in that order.
    containers = spec.at("containers").items()
    init_containers = spec.at("initContainers").items()
    requests = [_container_request(c) for c in containers]
    init_requests = [
        (_container_request(c), c.at("restartPolicy").string() == "Always") for c in init_containers
    ]
    overhead = spec.at("overhead").resource_list()
    pod_level = _pod_level(
        spec.at("resources"),
        containers=[*containers, *init_containers],
        on_warning=on_warning,
        document=document,
    )
    return pod_rules.pod_request(requests, init_requests, overhead=overhead, pod_level=pod_level)


def _pod_level(
    level: readers.Reader,
    *,
    containers: list[readers.Reader],
    on_warning: readers.WarningFn | None,
    document: str,
) -> pod_rules.PodLevel | None:
    """``spec.resources`` (:class:`pod_rules.PodLevel`); None when absent or unreadable (each
    problem is reported at its path). A resource that is not a pod-level one is ignored with a
    warning, as kube-scheduler ignores it (the API server refuses such a pod)."""
    if level.value is None:
        return None
    found: list[tuple[resources.Resource, frozenset[str]]] = []
    for field in ("requests", "limits"):
        quantities = level.at(field)
        read = quantities.resource_list()  # reports each bad quantity at its path
        names = [name for name in quantities.mapping() if isinstance(name, str)]
        for name in names:
            if not pod_rules.is_pod_level_resource(name) and on_warning is not None:
                on_warning(
                    f"{document}: spec.resources.{field}{problems.key(name)}: not a pod-level "
                    "resource (only cpu, memory and hugepages-* are): ignored, as kube-scheduler "
                    "ignores it (the API server refuses such a pod); request it in the "
                    "containers' resources"
                )
        supported = frozenset(filter(pod_rules.is_pod_level_resource, names))
        found.append((read or resources.EMPTY, supported))
    (requests, requested), (limits, limited) = found
    stated = frozenset(
        name
        for container in containers
        for field in ("requests", "limits")
        for name in container.at("resources", field).mapping()
        if isinstance(name, str)
    )
    return pod_rules.PodLevel(
        requests=requests, requested=requested, limits=limits, limited=limited, stated=stated
    )


REQUESTS_PATH: Final = "spec"
"""The path of a problem about a pod's requests as a whole: they are read from its containers,
init containers and overhead, all under ``spec``."""


def pod_requests(manifest: readers.RawManifest) -> resources.Resource:
    """The request of a pod manifest, exactly as :func:`parse_pod` reads it
    (:func:`_pod_request`): for a caller that needs a pod's request and nothing else (the
    webhook compares it before and after an in-place resize). Raises
    :class:`readers.ManifestError` when the pod cannot be read (a quantity that does not parse
    or is negative)."""
    root, sink, _ = readers.start(manifest, kind="Pod", origin="", namespaced=True)
    request = _pod_request(root.at("spec"), on_warning=None, document="")
    sink.raise_if_any()
    return request


def _node_selector_requirements(
    items: Sequence[readers.Reader],
) -> tuple[objects.NodeSelectorRequirement, ...]:
    return tuple(
        objects.NodeSelectorRequirement(
            key=item.at("key").string(),
            operator=item.at("operator").string(),
            values=item.at("values").strings(),
        )
        for item in items
    )


def _pod_priority(
    root: readers.Reader,
    meta: readers.Metadata,
    *,
    priority_classes: Mapping[str, objects.PriorityClass] | None,
    on_warning: readers.WarningFn | None,
    document: str,
) -> int:
    """``volcano.sh/task-priority`` > ``spec.priority`` > ``spec.priorityClassName`` > the global
    default PriorityClass (the lowest-valued one if several, as Kubernetes' admission picks) > 1.

    ``priority_classes`` None means the classes are not known (a pod read from a cluster, whose
    API server has already resolved ``spec.priority``): a class name alone then gives the default
    with a warning instead of an error.
    """
    annotation = meta.annotations.get(objects.TASK_PRIORITY_ANNOTATION)
    if annotation is not None:
        value = pod_rules.task_priority(annotation)
        if value is not None:
            return value
        if on_warning is not None:  # Volcano ignores an unparsable value
            on_warning(
                f"{document}: metadata.annotations"
                f"{problems.key(objects.TASK_PRIORITY_ANNOTATION)}: not a 32-bit integer, "
                f"ignored (got {problems.describe_value(annotation)})"
            )
    spec = root.at("spec")
    priority = spec.at("priority")
    if priority.value is not None:
        return priority.integer(pod_rules.DEFAULT_TASK_PRIORITY)
    class_reader = spec.at("priorityClassName")
    class_name = class_reader.string()
    if class_name and priority_classes is None:
        if on_warning is not None:
            on_warning(
                f"{document}: spec.priorityClassName: {class_name!r} cannot be resolved here and "
                f"spec.priority is not set; using priority {pod_rules.DEFAULT_TASK_PRIORITY}"
            )
        return pod_rules.DEFAULT_TASK_PRIORITY
    if class_name and priority_classes is not None:
        priority_class = priority_classes.get(class_name)
        if priority_class is None:  # the API server's Priority admission rejects such a pod
            class_reader.fail("no PriorityClass with this name was given", value=class_name)
            return pod_rules.DEFAULT_TASK_PRIORITY
        return priority_class.value
    return pod_rules.default_priority(priority_classes)


class PodOptions(TypedDict, total=False):
    """How a pod manifest is read: the keyword arguments of :func:`parse_pod_checked` (and of
    :func:`parse_pod`)."""

    origin: str
    priority_classes: Mapping[str, objects.PriorityClass] | None
    on_warning: readers.WarningFn | None


def parse_pod(manifest: readers.RawManifest, **options: Unpack[PodOptions]) -> objects.Pod:
    """A ``v1`` Pod as a scheduling task.

    The group is ``<namespace>/<scheduling.k8s.io/group-name>`` when the annotation is set, else
    the pod's own key (its single-pod group, see ``objects.pod_group_for_lone_pod``). Status by
    :func:`pod_rules.task_status` (``status.phase`` absent is Pending, as for a manifest never
    applied); requests by :func:`_pod_request`; priority by :func:`_pod_priority` with
    ``priority_classes``: given (as from files), a ``priorityClassName`` that is not among them is
    an error, as the API server's admission would reject the pod; None (as from a cluster, where
    ``spec.priority`` is always resolved), an unresolvable name is a warning and priority 1.
    ``unschedulable`` from the condition
    PodScheduled=False with reason Unschedulable. Raises :class:`readers.ManifestError`.

    Pods that are plainly well formed (the common case, read from the watch of every pod) take a
    fast path, :func:`pod_fast_path.parse_pod_fast`, and everything else the checked one; both give
    the same pod. Results may share immutable parts (request vectors, tolerations) with other pods.
    """
    priority_classes = options.get("priority_classes")
    try:
        return pod_fast_path.parse_pod_fast(manifest, priority_classes=priority_classes)
    except pod_fast_path.Unusual:
        pass  # outside the handler, so that a ManifestError does not chain to Unusual
    return parse_pod_checked(manifest, **options)


def reparse_progress(pod: objects.Pod, manifest: readers.RawManifest) -> objects.Pod:
    """:func:`parse_pod` of ``manifest`` (from a cluster: no PriorityClasses given), where ``pod``
    is the parse of a manifest of the same pod that differs from ``manifest`` at most in what
    the cluster writes after creation: ``status`` and the
    :data:`pod_fast_path.PROGRESS_SPEC_FIELDS` of ``spec``. Only those are read again when they
    are plainly well formed; otherwise the whole manifest is parsed. Raises
    :class:`readers.ManifestError`."""
    try:
        return pod_fast_path.reparse_progress_fast(pod, manifest)
    except pod_fast_path.Unusual:
        pass
    return parse_pod(manifest)


def parse_pod_checked(
    manifest: readers.RawManifest,
    *,
    origin: str = "",
    priority_classes: Mapping[str, objects.PriorityClass] | None = None,
    on_warning: readers.WarningFn | None = None,
) -> objects.Pod:
    """:func:`parse_pod` reading every field through :class:`readers.Reader`, which names each
    problem.

    The reference: the fast path must give the same pod for every input it accepts, and it
    leaves every other input (anything that would be an error or a warning) to this one.
    """
    root, sink, meta = readers.start(manifest, kind="Pod", origin=origin, namespaced=True)
    spec = root.at("spec")
    spec.mapping()
    node_name = spec.at("nodeName").string()
    phase = root.at("status", "phase").string() or "Pending"
    document = sink.document if not origin else f"{origin}: {sink.document}"
    resreq = _pod_request(spec, on_warning=on_warning, document=document)
    group_name = meta.annotations.get(objects.GROUP_NAME_ANNOTATION, "")
    unschedulable = any(
        condition.at("type").string() == "PodScheduled"
        and condition.at("status").string() == "False"
        and condition.at("reason").string() == "Unschedulable"
        for condition in root.at("status", "conditions").items()
    )
    affinity = spec.at("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution")
    terms = tuple(
        objects.NodeSelectorTerm(
            match_expressions=_node_selector_requirements(term.at("matchExpressions").items()),
            match_fields=_node_selector_requirements(term.at("matchFields").items()),
        )
        for term in affinity.at("nodeSelectorTerms").items()
    )
    tolerations = tuple(
        objects.Toleration(
            key=item.at("key").string(),
            operator=item.at("operator").string() or "Equal",
            value=item.at("value").string(),
            effect=item.at("effect").string(),
        )
        for item in spec.at("tolerations").items()
    )
    claims = resource_claims.pod_claims(spec, root.at("status"))
    pod = objects.Pod(
        namespace=meta.namespace,
        name=meta.name,
        group=f"{meta.namespace}/{group_name}" if group_name else f"{meta.namespace}/{meta.name}",
        status=pod_rules.task_status(phase, deleting=meta.deleting, node_name=node_name),
        resreq=resreq,
        priority=_pod_priority(
            root,
            meta,
            priority_classes=priority_classes,
            on_warning=on_warning,
            document=document,
        ),
        node_name=node_name,
        scheduling_gates=tuple(
            gate.at("name").string() for gate in spec.at("schedulingGates").items()
        ),
        annotations=meta.annotations,
        labels=meta.labels,
        node_selector=spec.at("nodeSelector").string_map(),
        required_node_affinity=terms,
        tolerations=tolerations,
        preemptable=pod_rules.preemptable(meta.annotations, meta.labels),
        preemption_policy=spec.at("preemptionPolicy").string() or "PreemptLowerPriority",
        unschedulable=unschedulable,
        scheduler_name=spec.at("schedulerName").string() or pod_rules.DEFAULT_SCHEDULER,
        created=meta.created,
        uid=meta.uid,
        claims=claims,
        admitted_devices=resource_claims.read_devices_record(meta.annotations) if claims else None,
        native_group=spec.at("schedulingGroup").at("podGroupName").string(),
    )
    sink.raise_if_any()
    return pod


# -- Node and PriorityClass ---------------------------------------------------------------------


def parse_node(manifest: readers.RawManifest, *, origin: str = "") -> objects.Node:
    """A ``v1`` Node: ``status.allocatable`` (``status.capacity`` when allocatable is absent or
    empty), labels, taints and ``spec.unschedulable``. Raises :class:`readers.ManifestError`."""
    root, sink, meta = readers.start(manifest, kind="Node", origin=origin, namespaced=False)
    status = root.at("status")
    allocatable = status.at("allocatable")
    chosen = allocatable if allocatable.mapping() else status.at("capacity")
    taints = []
    for item in root.at("spec", "taints").items():
        taint_key = item.at("key")
        if not taint_key.string():
            taint_key.fail("is required")
        effect = item.at("effect")
        if effect.string() not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            effect.fail("must be NoSchedule, PreferNoSchedule or NoExecute", value=effect.value)
        taints.append(
            objects.Taint(
                key=taint_key.string(), value=item.at("value").string(), effect=effect.string()
            )
        )
    node = objects.Node(
        name=meta.name,
        allocatable=chosen.resource_list() or resources.EMPTY,
        labels=meta.labels,
        taints=tuple(taints),
        unschedulable=root.at("spec", "unschedulable").boolean() or False,
    )
    sink.raise_if_any()
    return node


def parse_priority_class(
    manifest: readers.RawManifest, *, origin: str = ""
) -> objects.PriorityClass:
    """A ``scheduling.k8s.io/v1`` PriorityClass: ``value`` (required) and ``globalDefault``."""
    root, sink, meta = readers.start(
        manifest, kind="PriorityClass", origin=origin, namespaced=False
    )
    value = root.at("value")
    if value.value is None:
        value.fail("is required")
    priority_class = objects.PriorityClass(
        name=meta.name,
        value=value.integer(0),
        global_default=root.at("globalDefault").boolean() or False,
    )
    sink.raise_if_any()
    return priority_class


def parse_namespace_queue(manifest: readers.RawManifest, *, origin: str = "") -> tuple[str, str]:
    """``(namespace, queue)`` of a ``v1`` Namespace: its ``scheduling.volcano.sh/queue-name``
    annotation ("" when absent), the queue of its lone pods that name none."""
    _, sink, meta = readers.start(
        manifest, kind=readers.NAMESPACE_KIND, origin=origin, namespaced=False
    )
    sink.raise_if_any()
    return meta.name, meta.annotations.get(objects.QUEUE_NAME_ANNOTATION, "")
