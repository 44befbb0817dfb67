"""Files of manifests, and the snapshot they describe (``queuetree session``).

:func:`load_documents` splits multi-document YAML into :class:`Document` values (each with its
origin, ``cluster.yaml#3``); :func:`build_snapshot` reads every document with the reader of
its kind (:mod:`queue_manifests`, :mod:`pod_manifests`) and collects the problems of all of
them before raising one ``readers.ManifestError``. The snapshot's mappings are sorted by key,
so nothing depends on the order of the input documents; the same object given twice is an
error, not "last one wins".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any

import yaml

from queuetree.api import pod_manifests, queue_manifests, readers
from queuetree.core import objects, problems

# -- files of documents, and the snapshot they describe -------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Document:
    """One manifest from an input file, and where it came from (``cluster.yaml#3``)."""

    manifest: readers.RawManifest
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
    ``items`` (origin ``file#2.items[0]``). Raises :class:`readers.ManifestError` for YAML syntax
    errors and for documents that are not objects.
    """
    try:
        decoded = list(yaml.safe_load_all(text))
    except RecursionError:
        # PyYAML composes nodes recursively: thousands of levels exhaust the stack before any
        # check of ours could run. Its parser is not recursive, so the events locate the spot.
        raise readers.ManifestError(
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
        raise readers.ManifestError(
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
        raise readers.ManifestError(found)
    return documents


def _identify(document: Document) -> tuple[str, list[problems.Problem]]:
    """The document's kind if it is one a snapshot is made of, "" otherwise (with problems)."""
    kind = document.manifest.get("kind")
    api_version = document.manifest.get("apiVersion")
    if not isinstance(kind, str) or not kind:
        path, value, message = "kind", kind, "is required"
    elif kind not in readers.API_VERSIONS:
        known = ", ".join(readers.API_VERSIONS)
        path, value = "kind", kind
        message = f"unsupported kind (a session reads {known}; workloads are not expanded)"
    elif api_version != readers.API_VERSIONS[kind]:
        path, value = "apiVersion", api_version
        message = f"{kind} must have apiVersion {readers.API_VERSIONS[kind]}"
    else:
        return kind, []
    return "", [problems.Problem(message=message, origin=document.origin, path=path, value=value)]


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
    Raises :class:`readers.ManifestError` with every problem of every document.
    """
    found: list[problems.Problem] = []
    warnings: list[str] = []
    by_kind: dict[str, list[Document]] = {kind: [] for kind in readers.API_VERSIONS}
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
            except readers.ManifestError as error:
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
        pod_manifests.parse_priority_class, "PriorityClass"
    )
    namespace_queues: dict[str, str] = dict(
        collect(pod_manifests.parse_namespace_queue, readers.NAMESPACE_KIND).values()
    )
    queues: dict[str, objects.Queue] = collect(queue_manifests.parse_queue, "Queue")
    nodes: dict[str, objects.Node] = collect(pod_manifests.parse_node, "Node")
    pod_groups: dict[str, objects.PodGroup] = collect(
        queue_manifests.parse_pod_group, "PodGroup", default_queue=default_queue
    )
    pods: dict[str, objects.Pod] = collect(
        pod_manifests.parse_pod,
        "Pod",
        priority_classes=priority_classes,
        on_warning=warnings.append,
    )

    for pod in pods.values():
        if objects.GROUP_NAME_ANNOTATION in pod.annotations:
            if pod.group not in pod_groups:
                missing = _not_given(
                    f"PodGroup {pod.group}",
                    document=f"Pod {pod.key}",
                    origin=origins["Pod", pod.key],
                    path=f"metadata.annotations{problems.key(objects.GROUP_NAME_ANNOTATION)}",
                    value=pod.annotations[objects.GROUP_NAME_ANNOTATION],
                )
                warnings.append(f"{missing}; its pods wait for it")
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
            missing = _not_given(
                f'queue "{group.queue}"',
                document=f"PodGroup {group.key}",
                origin=origins["PodGroup", group.key],
                path="spec.queue",
                value=group.queue,
            )
            warnings.append(f"{missing}; its pods wait until it exists")
    if found:
        raise readers.ManifestError(found)
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
    what, document = f'queue "{queue}"', f"Pod {pod.key}"
    if objects.QUEUE_NAME_ANNOTATION in pod.annotations:
        named = pod.annotations[objects.QUEUE_NAME_ANNOTATION]
        return _not_given(what, document=document, origin=origin, path=annotation, value=named)
    return _not_given(
        what,
        document=document,
        origin=origin,
        why=f" (a pod without a PodGroup goes to the queue its {annotation} names, else to the "
        "one its Namespace's names, else to the default queue; declare the queue, or name "
        "another)",
    )


def _not_given(
    what: str,
    *,
    document: str,
    origin: str,
    path: str = "",
    value: object = problems.NO_VALUE,
    why: str = "",
) -> problems.Problem:
    """``what`` (named by ``document`` at ``path``, as ``value``) is not among the files."""
    return problems.Problem(
        message=f"{what} is not given{why}",
        document=document,
        origin=origin,
        path=path,
        value=value,
    )


def _sorted(items: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(sorted(items.items())))
