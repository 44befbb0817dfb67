"""Kubernetes manifests into the immutable snapshot objects of ``queuetree.core.objects``.

This module is the only place that knows the wire shapes of the kinds a session reads:
``Queue`` and ``PodGroup`` (``scheduling.volcano.sh/v1beta1``), ``Pod``, ``Node`` and
``Namespace`` (``v1``) and ``PriorityClass`` (``scheduling.k8s.io/v1``). The operator calls the
``parse_*`` functions on the objects of its caches; ``queuetree session`` calls
:func:`load_documents` and :func:`build_snapshot` on files.

Errors. Every parse collects all problems of its input (each names the document, the field path
and the value) and raises one :class:`ManifestError`; :func:`build_snapshot` collects the problems
of every document before raising. Problems that Volcano itself tolerates (an unparsable
``volcano.sh/task-priority`` annotation, which it ignores) are reported through ``on_warning``
instead, and the object is still built.

Identity and order. A missing ``metadata.uid`` is ``<namespace>-<name>`` for namespaced objects
(Volcano's test fixtures do the same) and the name for cluster-scoped ones; a missing
``metadata.namespace`` is ``default`` (as kubectl assumes); a missing creation timestamp is
:data:`objects.EPOCH`. The snapshot's mappings are sorted by key, so nothing depends on the order
of the input documents; the same object given twice is an error, not "last one wins".
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final

import yaml

from queuetree.core import errors, objects, problems, quantities, resources

INVALID_QUANTITY: Final = "invalid quantity"
"""The heading of a problem about a quantity that does not parse (``Problem.heading``)."""

RawManifest = Mapping[str, Any]
"""A manifest as decoded from YAML or JSON (camelCase keys)."""
WarningFn = Callable[[str], None]
"""Receives a warning for a person: something tolerated, named with document and field."""

VOLCANO_API_VERSION: Final = "scheduling.volcano.sh/v1beta1"
CORE_API_VERSION: Final = "v1"
PRIORITY_CLASS_API_VERSION: Final = "scheduling.k8s.io/v1"

NAMESPACE_KIND: Final = "Namespace"
"""Only its ``scheduling.volcano.sh/queue-name`` annotation is read: the queue of its lone pods
that name none (as in Volcano)."""

API_VERSIONS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "Queue": VOLCANO_API_VERSION,
        "PodGroup": VOLCANO_API_VERSION,
        "Pod": CORE_API_VERSION,
        "Node": CORE_API_VERSION,
        "PriorityClass": PRIORITY_CLASS_API_VERSION,
        NAMESPACE_KIND: CORE_API_VERSION,
    }
)
"""The kinds a session reads, with the apiVersion each must carry. Any other kind is an error,
because silently dropping, say, a Deployment would make the session look at a different cluster
than the user meant (workload controllers are not expanded: give the pods)."""

DEFAULT_NAMESPACE: Final = "default"
DEFAULT_SCHEDULER: Final = objects.DEFAULT_SCHEDULER
DEFAULT_TASK_PRIORITY: Final = 1
"""Volcano's task priority when the pod sets none (spec §2.3)."""

_QUEUE_STATES: Final = {state.value: state for state in objects.QueueState}
_POD_GROUP_PHASES: Final = {phase.value: phase for phase in objects.PodGroupPhase}
_TRUE: Final = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE: Final = frozenset({"0", "f", "F", "FALSE", "false", "False"})


class ManifestError(problems.InputError):
    """Manifests that cannot be turned into snapshot objects; ``problems`` lists every reason."""


# -- reading wire values, collecting problems -------------------------------------------------


@dataclasses.dataclass(slots=True)
class _Sink:
    """The problems and the identity of the document being read."""

    origin: str
    document: str
    found: list[problems.Problem] = dataclasses.field(default_factory=list)

    def add(
        self, path: str, message: str, *, value: object = problems.NO_VALUE, heading: str = ""
    ) -> None:
        problem = problems.Problem(
            message=message,
            heading=heading,
            document=self.document,
            origin=self.origin,
            path=path,
            value=value,
        )
        if problem not in self.found:  # a bad parent object is reported once, not per child
            self.found.append(problem)

    def raise_if_any(self) -> None:
        if self.found:
            raise ManifestError(self.found)


class _Reader:
    """A value inside a document and its field path; typed accessors report wrong types."""

    __slots__ = ("_parts", "_sink", "value")

    def __init__(self, value: object, *, sink: _Sink, parts: tuple[str | int, ...] = ()) -> None:
        self.value = value
        self._sink = sink
        self._parts = parts

    @property
    def path(self) -> str:
        return problems.field_path(*self._parts)

    def fail(self, message: str, *, value: object = problems.NO_VALUE, heading: str = "") -> None:
        self._sink.add(self.path, message, value=value, heading=heading)

    def at(self, *parts: str | int) -> _Reader:
        """The value at ``parts`` below this one: None when absent, or when a parent has the
        wrong type (reported once, at the parent's path)."""
        value = self.value
        for index, part in enumerate(parts):
            if value is None:
                break
            if type(value) is dict and type(part) is str:  # the common case, kept fast
                value = value.get(part)
            elif isinstance(part, int):
                if isinstance(value, list):
                    value = value[part] if 0 <= part < len(value) else None
                else:
                    where = problems.field_path(*self._parts, *parts[:index])
                    self._sink.add(where, "must be a list", value=value)
                    value = None
            elif isinstance(value, Mapping):
                value = value.get(part)
            else:
                where = problems.field_path(*self._parts, *parts[:index])
                self._sink.add(where, "must be an object", value=value)
                value = None
        return _Reader(value, sink=self._sink, parts=self._parts + parts)

    def entry(self, name: str) -> _Reader:
        """The value of map key ``name`` (path ``["name"]``)."""
        mapping = self.mapping()
        return _Reader(mapping.get(name), sink=self._sink, parts=(*self._parts, problems.key(name)))

    def subset(self, names: Iterable[str]) -> _Reader:
        """This map restricted to ``names``, at the same path."""
        mapping = self.mapping()
        return _Reader({n: mapping[n] for n in names}, sink=self._sink, parts=self._parts)

    def string(self, default: str = "") -> str:
        if self.value is None:
            return default
        if not isinstance(self.value, str):
            self.fail("must be a string", value=self.value)
            return default
        return self.value

    def integer(self, default: int) -> int:
        if self.value is None:
            return default
        if isinstance(self.value, bool) or not isinstance(self.value, int):
            self.fail("must be an integer", value=self.value)
            return default
        return self.value

    def boolean(self) -> bool | None:
        if self.value is None:
            return None
        if not isinstance(self.value, bool):
            self.fail("must be true or false", value=self.value)
            return None
        return self.value

    def mapping(self) -> Mapping[Any, Any]:
        if self.value is None:
            return {}
        if not isinstance(self.value, Mapping):
            self.fail("must be an object", value=self.value)
            return {}
        return self.value

    def items(self) -> list[_Reader]:
        if self.value is None:
            return []
        if not isinstance(self.value, list):
            self.fail("must be a list", value=self.value)
            return []
        return [
            _Reader(item, sink=self._sink, parts=(*self._parts, index))
            for index, item in enumerate(self.value)
        ]

    def strings(self) -> tuple[str, ...]:
        return tuple(item.string() for item in self.items())

    def string_map(self) -> Mapping[str, str]:
        """A map of strings (labels, annotations, nodeSelector): Kubernetes rejects other values."""
        result: dict[str, str] = {}
        for name in self.mapping():
            if not isinstance(name, str):
                self.fail("keys must be strings", value=name)
                continue
            value = self.entry(name).string()
            result[name] = value
        return MappingProxyType(dict(sorted(result.items()))) if result else objects.NO_LABELS

    def resource_list(self) -> resources.Resource | None:
        """A quantity map as a vector (Volcano's name rules); None when absent.

        Every malformed or negative quantity is reported with its own path, not only the first.
        """
        if self.value is None:
            return None
        mapping = self.mapping()
        resource = None
        if all(type(name) is str for name in mapping):
            try:
                # Only maps of strings go through the cache: 1, 1.0 and True are equal keys but
                # not equal quantities (True is refused; 2**60 and 2.0**60 differ).
                if all(type(raw) is str for raw in mapping.values()):
                    resource = _resource_from_items(tuple(mapping.items()))
                else:
                    resource = resources.Resource.from_resource_list(mapping)
            except errors.QuantityError:
                resource = None
        if resource is not None and not _has_negative(resource):
            return resource
        # Slow path, for input with problems only: find every bad entry and name it.
        for name in mapping:
            if not isinstance(name, str):
                self.fail("resource names must be strings", value=name)
                continue
            entry = self.entry(name)
            try:
                alone = resources.Resource.from_resource_list({name: mapping[name]})
            except errors.QuantityError as error:
                entry.fail(error.reason, value=entry.value, heading=INVALID_QUANTITY)
                continue
            if _has_negative(alone):  # the API server refuses negative requests and quotas alike
                entry.fail("must not be negative", value=entry.value)
        return None

    def quota(self) -> tuple[Mapping[str, quantities.Quantity], resources.Resource | None]:
        """A queue's quota map: its entries exactly (every one that parses, by name) and its
        vector (Volcano's name rules), None when absent, empty, or when an entry does not parse.

        An entry that does not parse is a problem at its own path: the parser's reason, with
        the value as written. Negative entries are read as they are: whether they may be is
        the caller's rule (:func:`parse_queue` refuses them, the webhook's validation says
        why in Volcano's words).
        """
        mapping = self.mapping()
        if not mapping:
            return objects.NO_QUANTITIES, None
        exact: dict[str, quantities.Quantity] = {}
        sound = True
        for name, raw in mapping.items():
            if not isinstance(name, str):
                self.fail("resource names must be strings", value=name)
                sound = False
                continue
            entry = _Reader(
                raw, sink=self._sink, parts=(*self._parts, problems.key(problems.shorten(name)))
            )
            try:
                quantity = quantities.parse(quantities.text_of(raw))
            except errors.QuantityError as error:
                # The reason and the value as the webhook words them (bounded: a nested or
                # huge value must not become a huge message).
                entry.fail(
                    problems.shorten(error.reason, 160), value=error.text, heading=INVALID_QUANTITY
                )
                sound = False
                continue
            exact[name] = quantity
        written = MappingProxyType(exact)
        if not sound:
            return written, None
        if all(type(raw) is str for raw in mapping.values()):
            return written, _resource_from_items(tuple(mapping.items()))
        return written, resources.Resource.from_resource_list(mapping)

    def timestamp(self) -> datetime.datetime | None:
        """An RFC 3339 time (YAML may have decoded it already); None when absent."""
        value = self.value
        if value is None:
            return None
        if isinstance(value, datetime.datetime):
            parsed = value
        elif isinstance(value, str):
            try:
                parsed = datetime.datetime.fromisoformat(value)
            except ValueError:
                self.fail("must be an RFC 3339 time such as 2024-05-01T12:00:00Z", value=value)
                return None
        else:
            self.fail("must be an RFC 3339 time such as 2024-05-01T12:00:00Z", value=value)
            return None
        if parsed.tzinfo is None:  # YAML timestamps without a zone are UTC, as in Kubernetes
            parsed = parsed.replace(tzinfo=datetime.UTC)
        return parsed


@functools.lru_cache(maxsize=4096)
def _resource_from_items(items: tuple[tuple[str, str], ...]) -> resources.Resource:
    """``Resource.from_resource_list`` of a map's items, cached: a cluster's pods and queues
    repeat a few request shapes many times, and vectors are immutable, so sharing them is safe.
    Strings only (see :meth:`_Reader.resource_list`)."""
    return resources.Resource.from_resource_list(dict(items))


def _has_negative(resource: resources.Resource) -> bool:
    return (
        resource.milli_cpu < 0
        or resource.memory < 0
        or any(amount < 0 for amount in (resource.scalars or {}).values())
    )


def _parse_bool(text: str) -> bool | None:
    """Go's ``strconv.ParseBool``; None when ``text`` is not one of its spellings."""
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    return None


# -- metadata ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class _Metadata:
    namespace: str
    name: str
    uid: str
    created: datetime.datetime
    deleting: bool
    labels: Mapping[str, str]
    annotations: Mapping[str, str]


def _start(
    manifest: object, *, kind: str, origin: str, namespaced: bool
) -> tuple[_Reader, _Sink, _Metadata]:
    """Check kind and apiVersion, read metadata, and name the document in later problems."""
    sink = _Sink(origin=origin, document=kind)
    root = _Reader(manifest, sink=sink)
    if not isinstance(manifest, Mapping):
        root.fail(f"a {kind} manifest must be an object", value=manifest)
        sink.raise_if_any()
    metadata = root.at("metadata")
    metadata.mapping()
    name = metadata.at("name").string()
    namespace = (metadata.at("namespace").string() or DEFAULT_NAMESPACE) if namespaced else ""
    if name:
        sink.document = f"{kind} {namespace}/{name}" if namespaced else f"{kind} {name}"
    written_kind = root.at("kind").string()
    if written_kind and written_kind != kind:
        root.at("kind").fail(f"expected {kind}", value=written_kind)
    api_version = root.at("apiVersion").string()
    if api_version and api_version != API_VERSIONS[kind]:
        root.at("apiVersion").fail(
            f"{kind} must have apiVersion {API_VERSIONS[kind]}", value=api_version
        )
    if not name:
        metadata.at("name").fail("is required")
    uid = metadata.at("uid").string() or (f"{namespace}-{name}" if namespaced else name)
    return (
        root,
        sink,
        _Metadata(
            namespace=namespace,
            name=name,
            uid=uid,
            created=metadata.at("creationTimestamp").timestamp() or objects.EPOCH,
            deleting=metadata.at("deletionTimestamp").timestamp() is not None,
            labels=metadata.at("labels").string_map(),
            annotations=metadata.at("annotations").string_map(),
        ),
    )


# -- Queue --------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class QueueReading:
    """A Queue as read, whatever its problems: the queue (fields that could not be read keep
    their defaults) and every problem found on the way, in reading order."""

    queue: objects.Queue
    problems: tuple[problems.Problem, ...] = ()


def read_queue(manifest: object, *, origin: str = "", name: str = "") -> QueueReading:
    """A ``scheduling.volcano.sh/v1beta1`` Queue and its reading problems; never raises.

    The one reader of the Queue shape: :func:`parse_queue` (sessions, the operator) refuses a
    queue with problems, the webhook validates the queue it gives (``core.validation``) and
    adds these problems to its own. ``name`` stands in for a missing ``metadata.name`` (an
    admission request names the object). ``capability`` is None when ``spec.capability`` is
    absent or an empty map; a map whose names are all dropped by Volcano's name rules
    (``rdma: 1000``) is a set, empty capability, as in Volcano. ``spec.weight`` defaults to 1
    (the CRD default), ``spec.parent`` is kept as written, ``status.state`` "" or absent (or a
    state queuetree does not know) reads as Open, ``status.allocated`` and ``status.reserved``
    are read for the webhook. The quota maps and the state are also kept as written
    (``objects.QueueAsWritten``): every entry that parsed, exactly. A quantity that does not
    parse or is negative is a problem (and its map's vector None, or empty); the webhook's
    further rules (whole numbers, guarantee <= deserved <= capability, the tree) are
    ``core.validation``'s. The uid is the name, as in Volcano.
    """
    if isinstance(manifest, Mapping) and name:
        metadata = manifest.get("metadata")
        if not (isinstance(metadata, Mapping) and metadata.get("name")):
            written = metadata if isinstance(metadata, Mapping) else {}
            manifest = {**manifest, "metadata": {**written, "name": name}}
    try:
        root, sink, meta = _start(manifest, kind="Queue", origin=origin, namespaced=False)
    except ManifestError as error:  # not even an object
        return QueueReading(queue=objects.Queue(name=name), problems=error.problems)
    spec = root.at("spec")
    spec.mapping()
    parent = spec.at("parent").string()
    weight = spec.at("weight").integer(1)
    priority = spec.at("priority").integer(0)
    written_capability, capability = spec.at("capability").quota()
    written_deserved, deserved = spec.at("deserved").quota()
    written_guarantee, guarantee = spec.at("guarantee", "resource").quota()
    reclaimable = spec.at("reclaimable").boolean()
    state_text = root.at("status", "state").string()
    queue = objects.Queue(
        name=meta.name,
        parent=parent,
        weight=weight,
        priority=priority,
        capability=capability,
        deserved=deserved or resources.EMPTY,
        guarantee=guarantee or resources.EMPTY,
        reclaimable=reclaimable,
        state=_QUEUE_STATES.get(state_text) or objects.QueueState.OPEN,
        allocated=root.at("status", "allocated").resource_list() or resources.EMPTY,
        reserved=root.at("status", "reserved").resource_list() or resources.EMPTY,
        annotations=meta.annotations,
        created=meta.created,
        uid=root.at("metadata", "uid").string() or meta.name,
        as_written=objects.QueueAsWritten(
            capability=written_capability,
            deserved=written_deserved,
            guarantee=written_guarantee,
            state=state_text,
        ),
    )
    return QueueReading(queue=queue, problems=tuple(sink.found))


def parse_queue(manifest: RawManifest, *, origin: str = "") -> objects.Queue:
    """A Queue a session can use (:func:`read_queue`), or :class:`ManifestError` listing every
    problem: the reading problems and :func:`unusable_queue_problems`.

    Validation of the values (whole numbers, guarantee <= deserved <= capability, weight
    range, the tree) is not done here: that is the webhook's and the session's work.
    """
    reading = read_queue(manifest, origin=origin)
    found = [*reading.problems, *unusable_queue_problems(reading.queue, origin=origin)]
    if found:
        raise ManifestError(found)
    return reading.queue


def unusable_queue_problems(queue: objects.Queue, *, origin: str = "") -> list[problems.Problem]:
    """What a session cannot use in a queue that reads well: a negative quantity of a
    resource the scheduler reads (the API server refuses negative requests and quotas alike; a
    name the scheduler drops is not looked at), and a ``status.state`` queuetree does not know.
    """
    found: list[problems.Problem] = []
    document = f"Queue {queue.name}" if queue.name else "Queue"
    written = queue.as_written
    for path, quota in (
        ("spec.capability", written.capability),
        ("spec.deserved", written.deserved),
        ("spec.guarantee.resource", written.guarantee),
    ):
        for name, quantity in quota.items():
            text = quantities.format_quantity(quantity)
            if quantity.value < 0 and _has_negative(
                resources.Resource.from_resource_list({name: text})
            ):
                found.append(
                    problems.Problem(
                        path=f"{path}{problems.key(name)}",
                        message="must not be negative",
                        value=text,
                        document=document,
                        origin=origin,
                    )
                )
    if written.state and written.state not in _QUEUE_STATES:
        found.append(
            problems.Problem(
                path="status.state",
                message=f"must be one of {', '.join(_QUEUE_STATES)}",
                value=written.state,
                document=document,
                origin=origin,
            )
        )
    return found


# -- PodGroup -----------------------------------------------------------------------------------


def parse_pod_group(
    manifest: RawManifest, *, origin: str = "", default_queue: str = objects.DEFAULT_QUEUE
) -> objects.PodGroup:
    """A ``scheduling.volcano.sh/v1beta1`` PodGroup.

    ``spec.queue`` absent or "" is ``default_queue`` (the CRD default and Volcano's mutating
    webhook); ``spec.minMember`` absent is 0 (Go's zero value: Volcano sets no default);
    ``minResources`` absent is None (enqueue then skips the capacity check, spec §3.7) while
    ``{}`` is an empty vector; ``status.phase`` "" or absent is Pending; ``status.running``,
    ``succeeded`` and ``failed`` absent are 0. Raises :class:`ManifestError`.
    """
    root, sink, meta = _start(manifest, kind="PodGroup", origin=origin, namespaced=True)
    spec = root.at("spec")
    spec.mapping()
    min_task_member: dict[str, int] = {}
    task_members = spec.at("minTaskMember")
    for task in task_members.mapping():
        min_task_member[str(task)] = task_members.entry(str(task)).integer(0)
    min_member = spec.at("minMember")
    if min_member.integer(0) < 0:
        min_member.fail("must not be negative", value=min_member.value)
    phase_reader = root.at("status", "phase")
    phase_text = phase_reader.string()
    phase = _POD_GROUP_PHASES.get(phase_text or objects.PodGroupPhase.PENDING.value)
    if phase is None:
        phase_reader.fail(f"must be one of {', '.join(_POD_GROUP_PHASES)}", value=phase_text)
    group = objects.PodGroup(
        namespace=meta.namespace,
        name=meta.name,
        queue=spec.at("queue").string() or default_queue,
        min_member=min_member.integer(0),
        min_task_member=MappingProxyType(dict(sorted(min_task_member.items()))),
        min_resources=spec.at("minResources").resource_list(),
        priority_class_name=spec.at("priorityClassName").string(),
        phase=phase or objects.PodGroupPhase.PENDING,
        counts=objects.GroupCounts(
            running=root.at("status", "running").integer(0),
            succeeded=root.at("status", "succeeded").integer(0),
            failed=root.at("status", "failed").integer(0),
        ),
        status_written=bool(phase_text),
        created=meta.created,
        uid=meta.uid,
    )
    sink.raise_if_any()
    return group


# -- Pod ----------------------------------------------------------------------------------------


def task_status(phase: str, *, deleting: bool, node_name: str) -> objects.TaskStatus:
    """Volcano's ``getTaskStatus``: the scheduler's view of a pod.

    Running → Releasing when it is being deleted, else Running; Pending → Releasing when being
    deleted, Bound when it has a node, else Pending; Succeeded; Failed; anything else Unknown.
    """
    if phase == "Running":
        return objects.TaskStatus.RELEASING if deleting else objects.TaskStatus.RUNNING
    if phase == "Pending":
        if deleting:
            return objects.TaskStatus.RELEASING
        return objects.TaskStatus.BOUND if node_name else objects.TaskStatus.PENDING
    if phase == "Succeeded":
        return objects.TaskStatus.SUCCEEDED
    if phase == "Failed":
        return objects.TaskStatus.FAILED
    return objects.TaskStatus.UNKNOWN


def _container_request(container: _Reader) -> resources.Resource:
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


def _pod_requests(spec: _Reader) -> tuple[resources.Resource, resources.Resource]:
    """``(resreq, init_resreq)`` as Kubernetes computes a pod's effective request.

    ``resreq``: the containers' requests plus every sidecar (an init container with
    ``restartPolicy: Always``, which keeps running) plus ``spec.overhead``. ``init_resreq``: the
    larger, per dimension, of ``resreq`` and each regular init container's request plus the
    sidecars started before it plus the overhead. Both always have a scalar mapping (possibly
    empty), as Volcano's ``GetPodResourceRequest``.
    """
    containers = resources.sum_all(_container_request(c) for c in spec.at("containers").items())
    sidecars = resources.EMPTY
    init_peak = resources.EMPTY
    for container in spec.at("initContainers").items():
        request = _container_request(container)
        if container.at("restartPolicy").string() == "Always":
            sidecars = sidecars + request
        else:
            init_peak = init_peak.set_max_resource(request + sidecars)
    overhead = spec.at("overhead").resource_list() or resources.EMPTY
    resreq = containers + sidecars + overhead
    init_resreq = resreq.set_max_resource(init_peak + overhead)
    return _with_scalars(resreq), _with_scalars(init_resreq)


def _with_scalars(resource: resources.Resource) -> resources.Resource:
    if resource.scalars is not None:
        return resource
    return resources.Resource(milli_cpu=resource.milli_cpu, memory=resource.memory, scalars={})


def _node_selector_requirements(
    items: Sequence[_Reader],
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
    root: _Reader,
    meta: _Metadata,
    *,
    priority_classes: Mapping[str, objects.PriorityClass] | None,
    on_warning: WarningFn | None,
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
        value = _task_priority(annotation)
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
        return priority.integer(DEFAULT_TASK_PRIORITY)
    class_reader = spec.at("priorityClassName")
    class_name = class_reader.string()
    if class_name and priority_classes is None:
        if on_warning is not None:
            on_warning(
                f"{document}: spec.priorityClassName: {class_name!r} cannot be resolved here and "
                f"spec.priority is not set; using priority {DEFAULT_TASK_PRIORITY}"
            )
        return DEFAULT_TASK_PRIORITY
    if class_name and priority_classes is not None:
        priority_class = priority_classes.get(class_name)
        if priority_class is None:  # the API server's Priority admission rejects such a pod
            class_reader.fail("no PriorityClass with this name was given", value=class_name)
            return DEFAULT_TASK_PRIORITY
        return priority_class.value
    return _default_priority(priority_classes)


def _task_priority(annotation: str) -> int | None:
    """The ``volcano.sh/task-priority`` annotation's value; None when not a 32-bit integer."""
    try:
        value = int(annotation, 10)
    except ValueError:
        return None
    return value if -(2**31) <= value < 2**31 else None


def _default_priority(priority_classes: Mapping[str, objects.PriorityClass] | None) -> int:
    """The lowest-valued global default PriorityClass's value, else 1."""
    if not priority_classes:
        return DEFAULT_TASK_PRIORITY
    defaults = [pc for pc in (priority_classes or {}).values() if pc.global_default]
    if defaults:
        return min(defaults, key=lambda pc: (pc.value, pc.name)).value
    return DEFAULT_TASK_PRIORITY


def _preemptable(annotations: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    """``volcano.sh/preemptable`` from the annotation, else the label; absent → True;
    a value that is not a Go boolean → False (Volcano's ``GetPodPreemptable``)."""
    for source in (annotations, labels):
        text = source.get(objects.PREEMPTABLE_KEY)
        if text is not None:
            return _parse_bool(text) is True
    return True


def parse_pod(
    manifest: RawManifest,
    *,
    origin: str = "",
    priority_classes: Mapping[str, objects.PriorityClass] | None = None,
    on_warning: WarningFn | None = None,
) -> objects.Pod:
    """A ``v1`` Pod as a scheduling task.

    The group is ``<namespace>/<scheduling.k8s.io/group-name>`` when the annotation is set, else
    the pod's own key (its single-pod group, see ``objects.pod_group_for_lone_pod``). Status by
    :func:`task_status` (``status.phase`` absent is Pending, as for a manifest never applied);
    requests by :func:`_pod_requests`; priority by :func:`_pod_priority` with
    ``priority_classes``: given (as from files), a ``priorityClassName`` that is not among them is
    an error, as the API server's admission would reject the pod; None (as from a cluster, where
    ``spec.priority`` is always resolved), an unresolvable name is a warning and priority 1.
    ``unschedulable`` from the condition
    PodScheduled=False with reason Unschedulable. Raises :class:`ManifestError`.

    Pods that are plainly well formed (the common case, read from the watch of every pod) take a
    fast path, :func:`_parse_pod_fast`, and everything else the checked one; both give the same
    pod. Results may share immutable parts (request vectors, tolerations) with other pods.
    """
    try:
        return _parse_pod_fast(manifest, priority_classes=priority_classes)
    except _Unusual:
        pass  # outside the handler, so that a ManifestError does not chain to _Unusual
    return _parse_pod_checked(
        manifest, origin=origin, priority_classes=priority_classes, on_warning=on_warning
    )


def _parse_pod_checked(
    manifest: RawManifest,
    *,
    origin: str = "",
    priority_classes: Mapping[str, objects.PriorityClass] | None = None,
    on_warning: WarningFn | None = None,
) -> objects.Pod:
    """:func:`parse_pod` reading every field through :class:`_Reader`, which names each problem.

    The reference: the fast path must give the same pod for every input it accepts, and it
    leaves every other input (anything that would be an error or a warning) to this one.
    """
    root, sink, meta = _start(manifest, kind="Pod", origin=origin, namespaced=True)
    spec = root.at("spec")
    spec.mapping()
    node_name = spec.at("nodeName").string()
    phase = root.at("status", "phase").string() or "Pending"
    resreq, init_resreq = _pod_requests(spec)
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
    pod = objects.Pod(
        namespace=meta.namespace,
        name=meta.name,
        group=f"{meta.namespace}/{group_name}" if group_name else f"{meta.namespace}/{meta.name}",
        status=task_status(phase, deleting=meta.deleting, node_name=node_name),
        resreq=resreq,
        init_resreq=init_resreq,
        priority=_pod_priority(
            root,
            meta,
            priority_classes=priority_classes,
            on_warning=on_warning,
            document=sink.document if not origin else f"{origin}: {sink.document}",
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
        preemptable=_preemptable(meta.annotations, meta.labels),
        preemption_policy=spec.at("preemptionPolicy").string() or "PreemptLowerPriority",
        unschedulable=unschedulable,
        scheduler_name=spec.at("schedulerName").string() or DEFAULT_SCHEDULER,
        created=meta.created,
        uid=meta.uid,
    )
    sink.raise_if_any()
    return pod


# -- Pod, the fast path --------------------------------------------------------------------------
#
# The operator parses every pod watch event, and nearly all of them are well formed. This path
# reads the plain dicts, lists and strings of such a pod directly, without readers or field
# paths, and gives up (raises _Unusual) at the first thing that is not plainly well formed: a
# wrong type (even a subclass), a missing name, an invalid or negative quantity, anything that
# would be reported as an error or a warning. parse_pod then reads the manifest again through
# _parse_pod_checked, so every message comes from one place. Where the checked path stops
# reading early (the first matching condition, a valid task-priority annotation), so does this
# one: it must accept exactly what the checked path accepts without problems, or less
# (tests/api/test_manifests_pods_fast.py holds it to that). What a burst of pods repeats (request
# and limit maps, tolerations, node selector terms) is memoised in bounded LRU caches of
# immutable values, keyed so that no two keys that are equal but of different types (1, 1.0,
# True) can share a result.


class _Unusual(Exception):
    """The fast path declines the input; the checked path reads it."""


def _fast_string(value: Any, default: str = "") -> str:
    if value is None:
        return default
    if type(value) is not str:
        raise _Unusual
    return value


def _fast_dict(value: Any) -> dict[Any, Any]:
    """A dict; absent reads as empty."""
    if value is None:
        return _NO_FIELDS
    if type(value) is not dict:
        raise _Unusual
    return value


def _fast_list(value: Any) -> list[Any]:
    """A list of dicts; absent reads as empty."""
    if value is None:
        return _NO_ITEMS
    if type(value) is not list:
        raise _Unusual
    for item in value:
        if type(item) is not dict:  # None items too: the checked path reads them, rarely seen
            raise _Unusual
    return value


_NO_FIELDS: Final[dict[Any, Any]] = {}
_NO_ITEMS: Final[list[Any]] = []
_WITH_SCALARS: Final = resources.Resource(milli_cpu=0, memory=0, scalars={})
"""Added to a vector, gives it an (empty, shared) scalar mapping, as :func:`_with_scalars`."""


def _fast_string_map(value: Any) -> Mapping[str, str]:
    if value is None:
        return objects.NO_LABELS
    if type(value) is not dict:
        raise _Unusual
    if not value:
        return objects.NO_LABELS
    for name, text in value.items():
        if type(name) is not str or type(text) is not str:
            raise _Unusual
    return MappingProxyType(dict(sorted(value.items())))


def _fast_time(value: Any) -> datetime.datetime | None:
    if value is None:
        return None
    if type(value) is str:
        try:
            parsed = datetime.datetime.fromisoformat(value)
        except ValueError:
            raise _Unusual from None
    elif isinstance(value, datetime.datetime):
        parsed = value
    else:
        raise _Unusual
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
    return None if _has_negative(resource) else resource


def _fast_pod_requests(spec: dict[Any, Any]) -> tuple[resources.Resource, resources.Resource]:
    """:func:`_pod_requests`, memoised on the quantity maps of the pod's containers."""
    key = (
        _containers_key(spec.get("containers"), init=False),
        _containers_key(spec.get("initContainers"), init=True),
        _items_key(spec.get("overhead")),
    )
    try:
        requests = _pod_requests_of(key)
    except TypeError:  # an unhashable quantity or restartPolicy (a list)
        raise _Unusual from None
    if requests is None:
        raise _Unusual
    return requests


_ContainersKey = tuple[tuple[Any, ...], ...] | None


def _items_key(value: Any) -> tuple[tuple[Any, Any], ...] | None:
    if value is None:
        return None
    if type(value) is not dict:
        raise _Unusual
    return tuple(value.items())


def _containers_key(value: Any, *, init: bool) -> _ContainersKey:
    """Per container, its requests and limits (and for init containers its restartPolicy), as
    hashable items: absent and None read alike, as in :func:`_container_request`."""
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
            raise _Unusual
        if init:
            key.append((requests, limits, container.get("restartPolicy")))
        else:
            key.append((requests, limits))
    return tuple(key)


@functools.lru_cache(maxsize=4096)
def _pod_requests_of(
    key: tuple[_ContainersKey, _ContainersKey, tuple[tuple[Any, Any], ...] | None],
) -> tuple[resources.Resource, resources.Resource] | None:
    """``(resreq, init_resreq)`` of a key of :func:`_fast_pod_requests`; None when the checked
    path must read the pod. Keys that are equal but not alike (``1`` and ``True``) are both
    declined by :func:`_well_formed_resource`, and a non-string restartPolicy by
    :func:`_fast_string`, so they cannot share an entry with a different result."""
    containers_key, init_key, overhead_key = key
    try:
        containers = _WITH_SCALARS
        for requests, limits in containers_key or ():
            containers = containers + _request_of_items(requests, limits)
        if init_key is None and overhead_key is None:
            # No init containers and no overhead: the init request is the containers' request
            # (requests are never negative, so the per-dimension maximum with zero changes
            # nothing).
            return containers, containers
        sidecars = resources.EMPTY
        init_peak = resources.EMPTY
        for requests, limits, restart_policy in init_key or ():
            request = _request_of_items(requests, limits)
            if _fast_string(restart_policy) == "Always":
                sidecars = sidecars + request
            else:
                init_peak = init_peak.set_max_resource(request + sidecars)
        overhead = _resource_of_items(overhead_key) or resources.EMPTY
    except _Unusual:
        return None
    resreq = containers + sidecars + overhead
    return resreq, resreq.set_max_resource(init_peak + overhead)


def _resource_of_items(items: tuple[tuple[Any, Any], ...] | None) -> resources.Resource | None:
    if items is None:
        return None
    resource = _well_formed_resource(items)
    if resource is None:
        raise _Unusual
    return resource


def _request_of_items(
    requests: tuple[tuple[Any, Any], ...] | None, limits: tuple[tuple[Any, Any], ...] | None
) -> resources.Resource:
    """:func:`_container_request` of a container's requests and limits items."""
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
        raise _Unusual
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
    """:func:`_pod_priority` for the cases without a problem or a warning."""
    annotation = annotations.get(objects.TASK_PRIORITY_ANNOTATION)
    if annotation is not None:
        value = _task_priority(annotation)
        if value is None:
            raise _Unusual  # a warning
        return value
    priority = spec.get("priority")
    if priority is not None:
        if type(priority) is not int:
            raise _Unusual
        return priority
    class_name = _fast_string(spec.get("priorityClassName"))
    if class_name:
        if priority_classes is None:
            raise _Unusual  # a warning
        priority_class = priority_classes.get(class_name)
        if priority_class is None:
            raise _Unusual
        return priority_class.value
    return _default_priority(priority_classes)


def _parse_pod_fast(
    manifest: RawManifest, *, priority_classes: Mapping[str, objects.PriorityClass] | None
) -> objects.Pod:
    """:func:`parse_pod` of a well-formed pod; raises :class:`_Unusual` for anything else."""
    if type(manifest) is not dict and not isinstance(manifest, Mapping):
        raise _Unusual
    kind = manifest.get("kind")
    if kind is not None and (type(kind) is not str or kind not in ("Pod", "")):
        raise _Unusual
    api_version = manifest.get("apiVersion")
    if api_version is not None and (
        type(api_version) is not str or api_version not in (CORE_API_VERSION, "")
    ):
        raise _Unusual
    metadata = manifest.get("metadata")
    if type(metadata) is not dict:
        raise _Unusual
    name = metadata.get("name")
    if type(name) is not str or not name:
        raise _Unusual
    namespace = _fast_string(metadata.get("namespace")) or DEFAULT_NAMESPACE
    uid = _fast_string(metadata.get("uid")) or f"{namespace}-{name}"
    created = _fast_time(metadata.get("creationTimestamp")) or objects.EPOCH
    deleting = _fast_time(metadata.get("deletionTimestamp")) is not None
    labels = _fast_string_map(metadata.get("labels"))
    annotations = _fast_string_map(metadata.get("annotations"))

    spec = manifest.get("spec")
    if type(spec) is not dict:
        raise _Unusual
    status = _fast_dict(manifest.get("status"))
    node_name = _fast_string(spec.get("nodeName"))
    phase = _fast_string(status.get("phase")) or "Pending"
    resreq, init_resreq = _fast_pod_requests(spec)
    group_name = annotations.get(objects.GROUP_NAME_ANNOTATION, "")
    return objects.Pod(
        namespace=namespace,
        name=name,
        group=f"{namespace}/{group_name}" if group_name else f"{namespace}/{name}",
        status=task_status(phase, deleting=deleting, node_name=node_name),
        resreq=resreq,
        init_resreq=init_resreq,
        priority=_fast_priority(spec, annotations, priority_classes),
        node_name=node_name,
        scheduling_gates=tuple(
            _fast_string(gate.get("name")) for gate in _fast_list(spec.get("schedulingGates"))
        ),
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
        preemptable=_preemptable(annotations, labels),
        preemption_policy=_fast_string(spec.get("preemptionPolicy")) or "PreemptLowerPriority",
        unschedulable=_fast_unschedulable(status),
        scheduler_name=_fast_string(spec.get("schedulerName")) or DEFAULT_SCHEDULER,
        created=created,
        uid=uid,
    )


# -- Node and PriorityClass ---------------------------------------------------------------------


def parse_node(manifest: RawManifest, *, origin: str = "") -> objects.Node:
    """A ``v1`` Node: ``status.allocatable`` (``status.capacity`` when allocatable is absent or
    empty), labels, taints and ``spec.unschedulable``. Raises :class:`ManifestError`."""
    root, sink, meta = _start(manifest, kind="Node", origin=origin, namespaced=False)
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


def parse_priority_class(manifest: RawManifest, *, origin: str = "") -> objects.PriorityClass:
    """A ``scheduling.k8s.io/v1`` PriorityClass: ``value`` (required) and ``globalDefault``."""
    root, sink, meta = _start(manifest, kind="PriorityClass", origin=origin, namespaced=False)
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


def parse_namespace_queue(manifest: RawManifest, *, origin: str = "") -> tuple[str, str]:
    """``(namespace, queue)`` of a ``v1`` Namespace: its ``scheduling.volcano.sh/queue-name``
    annotation ("" when absent), the queue of its lone pods that name none."""
    _, sink, meta = _start(manifest, kind=NAMESPACE_KIND, origin=origin, namespaced=False)
    sink.raise_if_any()
    return meta.name, meta.annotations.get(objects.QUEUE_NAME_ANNOTATION, "")


# -- files of documents, and the snapshot they describe -------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Document:
    """One manifest from an input file, and where it came from (``cluster.yaml#3``)."""

    manifest: RawManifest
    origin: str


def _too_deep_queues(
    queues: Mapping[str, objects.Queue], origins: Mapping[tuple[str, str], str]
) -> list[problems.Problem]:
    """Queues more than :data:`objects.MAX_QUEUE_DEPTH` below root: one problem per chain, at
    its first queue past the bound. A cycle or a missing parent is the session's to report: the
    queues on or below it get no level here."""
    levels: dict[str, int | None] = {objects.ROOT_QUEUE: 0}
    for name in sorted(queues):
        path: list[str] = []
        current = name
        while current not in levels and current in queues and current not in path:
            path.append(current)
            current = queues[current].parent or objects.ROOT_QUEUE
        level = levels.get(current)  # None: a missing parent or a cycle
        for member in reversed(path):
            level = None if level is None else level + 1
            levels[member] = level
    return [
        problems.Problem(
            message=f"the queue is level {objects.MAX_QUEUE_DEPTH + 1} below root, deeper "
            f"than the {objects.MAX_QUEUE_DEPTH} levels queuetree accepts (and the webhook "
            "allows --max-queue-depth, 5 by default): attach it higher up",
            document=f"Queue {name}",
            origin=origins.get(("Queue", name), ""),
            path="spec.parent",
            value=queues[name].parent,
        )
        for name in sorted(queues)
        if levels.get(name) == objects.MAX_QUEUE_DEPTH + 1
    ]


def deep_spot(text: str) -> str:
    """`` at line L, column C``: where YAML ``text`` first nests deeper than
    :data:`problems.MAX_NESTING` (from the parser's events, which need no recursion); "" when
    it does not."""
    depth = 0
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                mark = event.start_mark
                if depth > problems.MAX_NESTING and mark is not None:
                    return f" at line {mark.line + 1}, column {mark.column + 1}"
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.YAMLError:
        pass
    return ""


def _identity(manifest: object) -> str:
    """``Kind name`` of a manifest for messages, as far as it says ("" when it does not)."""
    if not isinstance(manifest, Mapping):
        return ""
    kind, metadata = manifest.get("kind"), manifest.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    parts = [p for p in (kind, name) if isinstance(p, str) and p]
    return " ".join(parts)


@dataclasses.dataclass(frozen=True, slots=True)
class ParsedSnapshot:
    snapshot: objects.Snapshot
    warnings: tuple[str, ...] = ()
    """Things tolerated on the way (ignored kinds, ignored annotations), for a person."""


def load_documents(text: str, *, source: str) -> list[Document]:
    """The documents of a multi-document YAML (or JSON) text; ``source`` names it in origins.

    Empty documents are skipped; a ``List`` (``kubectl get -o yaml``) is expanded into its
    ``items`` (origin ``file#2.items[0]``). Raises :class:`ManifestError` for YAML syntax errors
    and for documents that are not objects.
    """
    try:
        decoded = list(yaml.safe_load_all(text))
    except RecursionError:
        # PyYAML composes nodes recursively: thousands of levels exhaust the stack before any
        # check of ours could run. Its parser is not recursive, so the events locate the spot.
        raise ManifestError(
            [
                problems.Problem(
                    message=f"nested deeper than {problems.MAX_NESTING} levels{deep_spot(text)}",
                    origin=source,
                )
            ]
        ) from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        reason = getattr(error, "problem", None) or str(error)
        raise ManifestError(
            [problems.Problem(message=f"invalid YAML{where}: {reason}", origin=source)]
        ) from None
    found: list[problems.Problem] = []
    documents: list[Document] = []
    for index, manifest in enumerate(decoded):
        origin = f"{source}#{index}"
        if manifest is None:
            continue
        deep = problems.too_deep(manifest)
        if deep is not None:
            found.append(
                problems.Problem(
                    message=f"nested deeper than {problems.MAX_NESTING} levels",
                    document=_identity(manifest),
                    origin=origin,
                    path=deep,
                )
            )
            continue
        if not isinstance(manifest, Mapping):
            found.append(
                problems.Problem(
                    message="a document must be an object with apiVersion and kind",
                    origin=origin,
                    value=manifest,
                )
            )
            continue
        if manifest.get("kind") == "List":
            items = manifest.get("items")
            if not isinstance(items, list):
                found.append(
                    problems.Problem(
                        message="must be a list", origin=origin, path="items", value=items
                    )
                )
                continue
            for position, item in enumerate(items):
                item_origin = f"{origin}.items[{position}]"
                if isinstance(item, Mapping):
                    documents.append(Document(manifest=item, origin=item_origin))
                else:
                    found.append(
                        problems.Problem(
                            message="a list item must be an object", origin=item_origin, value=item
                        )
                    )
            continue
        documents.append(Document(manifest=manifest, origin=origin))
    if found:
        raise ManifestError(found)
    return documents


def _identify(document: Document) -> tuple[str, list[problems.Problem]]:
    """The document's kind if it is one a snapshot is made of, "" otherwise (with problems)."""
    kind = document.manifest.get("kind")
    api_version = document.manifest.get("apiVersion")
    if not isinstance(kind, str) or not kind:
        return "", [
            problems.Problem(message="is required", origin=document.origin, path="kind", value=kind)
        ]
    if kind not in API_VERSIONS:
        known = ", ".join(API_VERSIONS)
        return "", [
            problems.Problem(
                message=f"unsupported kind (a session reads {known}; workloads are not expanded)",
                origin=document.origin,
                path="kind",
                value=kind,
            )
        ]
    if api_version != API_VERSIONS[kind]:
        return "", [
            problems.Problem(
                message=f"{kind} must have apiVersion {API_VERSIONS[kind]}",
                origin=document.origin,
                path="apiVersion",
                value=api_version,
            )
        ]
    return kind, []


def build_snapshot(
    documents: Iterable[Document], *, default_queue: str = objects.DEFAULT_QUEUE
) -> ParsedSnapshot:
    """The snapshot the documents describe, checked for references.

    PriorityClasses and Namespaces are read first (pods resolve their priority and queue against
    them, whatever the order of the files); PodGroups and lone pods that name no queue go to
    ``default_queue``. Besides each document's own problems, these are errors: the same object
    twice. Dangling references are the state of a live cluster, not a misunderstanding, so they
    are warnings and the session decides with them as the operator would (a dump of ``kubectl
    get queues,podgroups,pods,nodes -A -o yaml`` is read as it is): a PodGroup (or a lone pod's
    single-pod group) naming a queue that is not given (its pods wait, told why; include the
    default queue if pods rely on it: Volcano creates it at start-up, a snapshot does not); a
    pod whose ``scheduling.k8s.io/group-name`` names a PodGroup that is not given (its pods wait
    for the group). The queue tree itself (parents, cycles, the root) is not checked here: the
    session reports it.
    Raises :class:`ManifestError` with every problem of every document.
    """
    found: list[problems.Problem] = []
    warnings: list[str] = []
    by_kind: dict[str, list[Document]] = {kind: [] for kind in API_VERSIONS}
    for document in documents:
        kind, trouble = _identify(document)
        found.extend(trouble)
        if kind:
            by_kind[kind].append(document)

    origins: dict[tuple[str, str], str] = {}  # (kind, key) -> origin of the object kept

    def collect(parse: Callable[..., Any], kind: str, **options: Any) -> dict[str, Any]:
        parsed: dict[str, Any] = {}
        for document in by_kind[kind]:
            try:
                item = parse(document.manifest, origin=document.origin, **options)
            except ManifestError as error:
                found.extend(error.problems)
                continue
            item_key = (
                item[0] if isinstance(item, tuple) else getattr(item, "key", None) or item.name
            )
            if item_key in parsed:
                found.append(
                    problems.Problem(
                        message=f"defined twice (first in {origins[kind, item_key]})",
                        document=f"{kind} {item_key}",
                        origin=document.origin,
                    )
                )
                continue
            parsed[item_key] = item
            origins[kind, item_key] = document.origin
        return parsed

    priority_classes: dict[str, objects.PriorityClass] = collect(
        parse_priority_class, "PriorityClass"
    )
    namespace_queues: dict[str, str] = dict(collect(parse_namespace_queue, NAMESPACE_KIND).values())
    queues: dict[str, objects.Queue] = collect(parse_queue, "Queue")
    nodes: dict[str, objects.Node] = collect(parse_node, "Node")
    pod_groups: dict[str, objects.PodGroup] = collect(
        parse_pod_group, "PodGroup", default_queue=default_queue
    )
    pods: dict[str, objects.Pod] = collect(
        parse_pod, "Pod", priority_classes=priority_classes, on_warning=warnings.append
    )

    for pod in pods.values():
        if objects.GROUP_NAME_ANNOTATION in pod.annotations:
            if pod.group not in pod_groups:
                warnings.append(
                    str(
                        problems.Problem(
                            message=f"PodGroup {pod.group} is not given",
                            document=f"Pod {pod.key}",
                            origin=origins["Pod", pod.key],
                            path=f"metadata.annotations{problems.key(objects.GROUP_NAME_ANNOTATION)}",
                            value=pod.annotations[objects.GROUP_NAME_ANNOTATION],
                        )
                    )
                    + "; its pods wait for it"
                )
            continue
        lone = objects.pod_group_for_lone_pod(
            pod,
            namespace_queue=namespace_queues.get(pod.namespace, ""),
            default_queue=default_queue,
        )
        if lone.key in pod_groups:
            found.append(
                problems.Problem(
                    message=f"its single-pod group would clash with PodGroup {lone.key}; "
                    f"set {objects.GROUP_NAME_ANNOTATION} to join that group",
                    document=f"Pod {pod.key}",
                    origin=origins["Pod", pod.key],
                )
            )
            continue
        if lone.queue not in queues:
            warnings.append(
                str(_missing_lone_queue(pod, lone.queue, origin=origins["Pod", pod.key]))
                + "; the pod waits until it exists"
            )
        pod_groups[lone.key] = lone
    found.extend(_too_deep_queues(queues, origins))
    for group in pod_groups.values():
        if not group.synthetic and group.queue not in queues:
            warnings.append(
                str(
                    problems.Problem(
                        message=f'queue "{group.queue}" is not given',
                        document=f"PodGroup {group.key}",
                        origin=origins["PodGroup", group.key],
                        path="spec.queue",
                        value=group.queue,
                    )
                )
                + "; its pods wait until it exists"
            )
    if found:
        raise ManifestError(found)
    return ParsedSnapshot(
        snapshot=objects.Snapshot(
            queues=_sorted(queues),
            pod_groups=_sorted(pod_groups),
            pods=_sorted(pods),
            nodes=_sorted(nodes),
            priority_classes=_sorted(priority_classes),
        ),
        warnings=tuple(warnings),
    )


def _missing_lone_queue(pod: objects.Pod, queue: str, *, origin: str) -> problems.Problem:
    """The problem of a lone pod whose queue is not given, pointing at what chose that queue."""
    annotation = f"metadata.annotations{problems.key(objects.QUEUE_NAME_ANNOTATION)}"
    if objects.QUEUE_NAME_ANNOTATION in pod.annotations:
        return problems.Problem(
            message=f'queue "{queue}" is not given',
            document=f"Pod {pod.key}",
            origin=origin,
            path=annotation,
            value=pod.annotations[objects.QUEUE_NAME_ANNOTATION],
        )
    return problems.Problem(
        message=f'queue "{queue}" is not given (a pod without a PodGroup goes to the queue its '
        f"{annotation} names, else to the one its Namespace's names, else to the default queue; "
        "declare the queue, or name another)",
        document=f"Pod {pod.key}",
        origin=origin,
    )


def _sorted(items: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(sorted(items.items())))
