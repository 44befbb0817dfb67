"""How ``queuetree.api`` reads a manifest: typed accessors that name every problem.

Manifests (Kubernetes objects as decoded from YAML or JSON, camelCase keys) become the
immutable snapshot objects of ``queuetree.core.objects`` in the modules of each shape:
:mod:`queue_manifests` (Queue, PodGroup), :mod:`pod_manifests` (Pod, Node, PriorityClass,
Namespace) with its fast path :mod:`pod_fast_path` and the rules both share in
:mod:`pod_rules`, and :mod:`manifest_files` (files of documents, and the snapshot they describe).
This module is what they share: the kinds and apiVersions, :class:`Reader` (a value and its
field path), :class:`Sink` (the problems of one document), :func:`start` (kind, apiVersion and
metadata) and :class:`ManifestError`.

Errors. Every parse collects all problems of its input (each names the document, the field path
and the value) and raises one :class:`ManifestError`. Problems that Volcano itself tolerates (an
unparsable ``volcano.sh/task-priority`` annotation, which it ignores) are reported through a
:data:`WarningFn` instead, and the object is still built.

Identity. A missing ``metadata.uid`` is ``<namespace>-<name>`` for namespaced objects (Volcano's
test fixtures do the same) and the name for cluster-scoped ones; a missing
``metadata.namespace`` is ``default`` (as kubectl assumes); a missing creation timestamp is
:data:`objects.EPOCH`.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any, Final, TypeVar

from queuetree.api import bodies
from queuetree.core import errors, objects, problems, quantities, resources

INVALID_QUANTITY: Final = "invalid quantity"
"""The heading of a problem about a quantity that does not parse (``Problem.heading``)."""

RawManifest = Mapping[str, Any]
"""A manifest as decoded from YAML or JSON (camelCase keys)."""
WarningFn = Callable[[str], None]
"""Receives a warning for a person: something tolerated, named with document and field."""
ScalarT = TypeVar("ScalarT", str, int, bool)
DefaultT = TypeVar("DefaultT")

CORE_API_VERSION: Final = "v1"
PRIORITY_CLASS_API_VERSION: Final = "scheduling.k8s.io/v1"

NAMESPACE_KIND: Final = "Namespace"
"""Only its ``scheduling.volcano.sh/queue-name`` annotation is read: the queue of its lone pods
that name none (as in Volcano)."""

API_VERSIONS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "Queue": bodies.VOLCANO_API_VERSION,
        "PodGroup": bodies.VOLCANO_API_VERSION,
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


class Reader:
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

    def at(self, *parts: str | int) -> Reader:
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
        return Reader(value, sink=self._sink, parts=self._parts + parts)

    def entry(self, name: str) -> Reader:
        """The value of map key ``name`` (path ``["name"]``)."""
        mapping = self.mapping()
        return Reader(mapping.get(name), sink=self._sink, parts=(*self._parts, problems.key(name)))

    def subset(self, names: Iterable[str]) -> Reader:
        """This map restricted to ``names``, at the same path."""
        mapping = self.mapping()
        return Reader({n: mapping[n] for n in names}, sink=self._sink, parts=self._parts)

    def string(self, default: str = "") -> str:
        return self._scalar(str, "must be a string", default)

    def integer(self, default: int) -> int:
        if isinstance(self.value, bool):  # an int to Python, not to JSON
            self.fail("must be an integer", value=self.value)
            return default
        return self._scalar(int, "must be an integer", default)

    def boolean(self) -> bool | None:
        return self._scalar(bool, "must be true or false", None)

    def _scalar(self, kind: type[ScalarT], problem: str, default: DefaultT) -> ScalarT | DefaultT:
        """The value when it is a ``kind``; ``default`` when it is absent, or (with the
        ``problem``) of another type."""
        if self.value is None:
            return default
        if not isinstance(self.value, kind):
            self.fail(problem, value=self.value)
            return default
        return self.value

    def mapping(self) -> Mapping[Any, Any]:
        if self.value is None:
            return {}
        if not isinstance(self.value, Mapping):
            self.fail("must be an object", value=self.value)
            return {}
        return self.value

    def items(self) -> list[Reader]:
        if self.value is None:
            return []
        if not isinstance(self.value, list):
            self.fail("must be a list", value=self.value)
            return []
        return [
            Reader(item, sink=self._sink, parts=(*self._parts, index))
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
        if resource is not None and not has_negative(resource):
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
            if has_negative(alone):  # the API server refuses negative requests and quotas alike
                entry.fail("must not be negative", value=entry.value)
        return None

    def quota(self) -> tuple[Mapping[str, quantities.Quantity], resources.Resource | None]:
        """A queue's quota map: its entries exactly (every one that parses, by name) and its
        vector (Volcano's name rules), None when absent, empty, or when an entry does not parse.

        An entry that does not parse is a problem at its own path: the parser's reason, with
        the value as written. Negative entries are read as they are: whether they may be is
        the caller's rule (:func:`queue_manifests.parse_queue` refuses them, the webhook's
        validation says why in Volcano's words).
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
            entry = Reader(
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
        parsed = rfc3339(value)
        if parsed is None:
            self.fail("must be an RFC 3339 time such as 2024-05-01T12:00:00Z", value=value)
        return parsed


@functools.lru_cache(maxsize=4096)
def _resource_from_items(items: tuple[tuple[str, str], ...]) -> resources.Resource:
    """``Resource.from_resource_list`` of a map's items, cached: a cluster's pods and queues
    repeat a few request shapes many times, and vectors are immutable, so sharing them is safe.
    Strings only (see :meth:`Reader.resource_list`)."""
    return resources.Resource.from_resource_list(dict(items))


def has_negative(resource: resources.Resource) -> bool:
    return (
        resource.milli_cpu < 0
        or resource.memory < 0
        or any(amount < 0 for amount in (resource.scalars or {}).values())
    )


def parse_bool(text: str) -> bool | None:
    """Go's ``strconv.ParseBool``; None when ``text`` is not one of its spellings."""
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    return None


# -- metadata ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Metadata:
    namespace: str
    name: str
    uid: str
    created: datetime.datetime
    deleting: bool
    labels: Mapping[str, str]
    annotations: Mapping[str, str]


def start(
    manifest: object, *, kind: str, origin: str, namespaced: bool, api_version: str = ""
) -> tuple[Reader, _Sink, Metadata]:
    """Check kind and apiVersion (``api_version``, by default the one of :data:`API_VERSIONS`),
    read metadata, and name the document in later problems."""
    sink = _Sink(origin=origin, document=kind)
    root = Reader(manifest, sink=sink)
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
    wanted = api_version or API_VERSIONS[kind]
    written_version = root.at("apiVersion").string()
    if written_version and written_version != wanted:
        root.at("apiVersion").fail(f"{kind} must have apiVersion {wanted}", value=written_version)
    if not name:
        metadata.at("name").fail("is required")
    uid = metadata.at("uid").string() or (f"{namespace}-{name}" if namespaced else name)
    return (
        root,
        sink,
        Metadata(
            namespace=namespace,
            name=name,
            uid=uid,
            created=metadata.at("creationTimestamp").timestamp() or objects.EPOCH,
            deleting=metadata.at("deletionTimestamp").timestamp() is not None,
            labels=metadata.at("labels").string_map(),
            annotations=metadata.at("annotations").string_map(),
        ),
    )


def rfc3339(value: object) -> datetime.datetime | None:
    """An RFC 3339 time (YAML may have decoded it already), timezone-aware: a time without a
    zone is UTC, as in Kubernetes. None when ``value`` is no such time."""
    if isinstance(value, datetime.datetime):
        parsed = value
    elif isinstance(value, str):
        try:
            parsed = datetime.datetime.fromisoformat(value)
        except ValueError:
            return None
    else:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=datetime.UTC)
