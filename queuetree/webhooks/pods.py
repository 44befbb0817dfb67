"""Pod admission: ``/pods/mutate`` injects the queue-allocation gate, ``/pods/validate`` checks
the queue a pod names. Pure functions over the request, the cluster view and the settings.

Which pods are queuetree's ("opted in"): a pod annotated
``scheduling.volcano.sh/queue-allocation-gate: "true"`` (Volcano's opt-in), or, beyond the
reference, any pod without that annotation in a namespace annotated with it (value ``"true"``).
A pod's own annotation wins: ``"false"`` opts a pod out of an opted-in namespace.

Which queue a pod names, first match wins (:func:`resolve_queue`):

1. the ``spec.queue`` of its PodGroup, when the pod has ``scheduling.k8s.io/group-name`` and
   that PodGroup exists (a pod may be created before its group: then the next rules apply, and
   the operator re-reads the group when it admits the pod); a PodGroup that names no queue
   is in the default queue;
2. the pod's ``scheduling.volcano.sh/queue-name`` annotation;
3. the namespace's ``scheduling.volcano.sh/queue-name`` annotation (Volcano reads it too);
4. the default queue: ``--default-queue`` (``ReviewSettings.default_queue``, ``default`` unless
   set), which must be the operator's ``--default-queue`` too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from queuetree.api import admission
from queuetree.core import objects, validation
from queuetree.webhooks import settings as settings_
from queuetree.webhooks import verdicts, views

GATE = objects.QUEUE_ALLOCATION_GATE
"""The gate's name, which is also the opt-in annotation's key."""


@dataclasses.dataclass(frozen=True, slots=True)
class _OptIn:
    """How a pod under review asks (or not) to be held for queue admission."""

    metadata: Mapping[str, Any]
    annotations: Mapping[str, str]
    namespace: str
    own: str | None
    """The pod's own opt-in annotation value, None when absent."""
    from_namespace: bool
    """The pod has no annotation of its own and its namespace opted in."""


def _read_opt_in(
    request: admission.Request, pod: Mapping[str, Any], view: views.ClusterView
) -> _OptIn:
    """The pod's own opt-in first; the namespace's only when the pod says nothing."""
    metadata = _mapping(pod.get("metadata"))
    annotations = _string_map(metadata.get("annotations"))
    namespace = _namespace(request)
    own = annotations.get(GATE)
    from_namespace = own is None and view.namespace_annotations(namespace).get(GATE) == "true"
    return _OptIn(metadata, annotations, namespace, own, from_namespace)


def mutate(
    request: admission.Request,
    *,
    view: views.ClusterView,
    settings: settings_.ReviewSettings,
) -> verdicts.Verdict:
    """``/pods/mutate`` (CREATE): add the gate to an opted-in pod, exactly as spec §5.2.

    No patch when the feature gate is off, the pod is not opted in, or it already carries the
    gate (idempotent). Otherwise ``add /spec/schedulingGates`` with the whole list when the pod
    has none, else ``add /spec/schedulingGates/-`` (append: the API server only accepts gates
    at creation and keeps their order). A pod opted in through its namespace also gets the
    opt-in annotation, so the operator, which reads pods only, removes the gate when the queue
    has room; and any opted-in pod that names no queue and no group gets its namespace's
    queue-name annotation, so the queue /pods/validate checked is the queue that admits it.
    A pod created with ``spec.nodeName`` is bound already and cannot be gated (the API server
    refuses both together): it is left alone, with a warning when it asked to be gated.
    """
    if request.operation != "CREATE":
        return verdicts.Verdict(_wrong_operation(request))
    if request.object is None:
        return verdicts.Verdict(_missing_object(request))
    pod = request.object
    opt_in = _read_opt_in(request, pod, view)
    metadata, annotations, namespace, own = (
        opt_in.metadata,
        opt_in.annotations,
        opt_in.namespace,
        opt_in.own,
    )
    from_namespace = opt_in.from_namespace
    if own != "true" and not from_namespace:
        # Every pod's namespace exists; one the cache lacks was created a moment ago.
        lagging = (namespace,) if own is None and namespace not in view.namespaces else ()
        return verdicts.Verdict(admission.allow(request.uid), missing_namespaces=lagging)
    if not settings.gates_pods:
        warnings = (
            [
                f"metadata.annotations[{GATE}]: the feature gate "
                "SchedulingGatesQueueAdmission is off: the pod is not held for queue admission"
            ]
            if own == "true"
            else []
        )
        return verdicts.Verdict(admission.allow(request.uid, warnings=warnings))
    spec = _mapping(pod.get("spec"))
    node_name = spec.get("nodeName")
    if node_name:
        return verdicts.Verdict(
            admission.allow(
                request.uid,
                warnings=[
                    f"spec.nodeName: the pod is bound to node {node_name} at creation, so it "
                    "cannot be held by the queue-allocation gate and bypasses queue admission"
                ],
            )
        )
    gates = spec.get("schedulingGates")
    if isinstance(gates, list) and any(_mapping(g).get("name") == GATE for g in gates):
        return verdicts.Verdict(admission.allow(request.uid))
    patch: list[admission.RawPatchOperation] = []
    if gates is None:
        patch.append({"op": "add", "path": "/spec/schedulingGates", "value": [{"name": GATE}]})
    else:
        patch.append({"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": GATE}})
    added = {GATE: "true"} if from_namespace else {}
    # The operator reads pods only: a pod that names neither a group nor a queue gets its
    # namespace's queue written on it, so the queue /pods/validate checked is the one that admits.
    namespace_queue = view.namespace_annotations(namespace).get(objects.QUEUE_NAME_ANNOTATION)
    if (
        namespace_queue
        and objects.QUEUE_NAME_ANNOTATION not in annotations
        and objects.GROUP_NAME_ANNOTATION not in annotations
    ):
        added[objects.QUEUE_NAME_ANNOTATION] = namespace_queue
    if added:
        patch += _add_annotations(metadata, added)
    return verdicts.Verdict(admission.allow(request.uid, patch=patch))


@dataclasses.dataclass(frozen=True, slots=True)
class QueueChoice:
    """The queue a pod names and where the name came from (for messages)."""

    name: str
    source: str
    """``PodGroup ns/pg``, ``annotation scheduling.volcano.sh/queue-name``, ... ."""
    path: str
    """The field a person would change: the annotation, or the PodGroup's ``spec.queue``."""


def resolve_queue(
    *,
    annotations: Mapping[str, str],
    namespace: str,
    view: views.ClusterView,
    default_queue: str,
) -> QueueChoice:
    """The queue of a pod, by the precedence in the module docstring; ``default_queue`` is the
    queue of a pod that names none and of a PodGroup without ``spec.queue``."""
    group = annotations.get(objects.GROUP_NAME_ANNOTATION)
    if group and f"{namespace}/{group}" in view.pod_groups:
        named = view.pod_groups[f"{namespace}/{group}"]
        return QueueChoice(
            named or default_queue,
            f"PodGroup {namespace}/{group}"
            + ("" if named else f", which names no queue: the default queue {default_queue}"),
            f"metadata.annotations[{objects.GROUP_NAME_ANNOTATION}]",
        )
    key = objects.QUEUE_NAME_ANNOTATION
    if annotations.get(key):
        return QueueChoice(annotations[key], f"annotation {key}", f"metadata.annotations[{key}]")
    from_namespace = view.namespace_annotations(namespace).get(key)
    if from_namespace:
        return QueueChoice(
            from_namespace,
            f"annotation {key} of namespace {namespace}",
            f"metadata.annotations[{key}]",
        )
    return QueueChoice(
        default_queue,
        f"the default queue {default_queue}: no PodGroup, no queue-name annotation",
        f"metadata.annotations[{key}]",
    )


def validate(
    request: admission.Request,
    *,
    view: views.ClusterView,
    settings: settings_.ReviewSettings,
) -> verdicts.Verdict:
    """``/pods/validate`` (CREATE), beyond the reference: an opted-in pod must name an existing,
    Open, leaf queue that is not root.

    Pods that are not opted in are allowed untouched: queuetree does not admit them, and a
    cluster without queues must keep creating its other pods. The denial says which queue,
    where its name came from, and every reason it cannot take the pod. A pod that names no
    queue is checked against ``settings.default_queue``, the queue the operator admits it to.
    """
    if request.operation != "CREATE":
        return verdicts.Verdict(_wrong_operation(request))
    if request.object is None:
        return verdicts.Verdict(_missing_object(request))
    opt_in = _read_opt_in(request, request.object, view)
    metadata, annotations, namespace, own = (
        opt_in.metadata,
        opt_in.annotations,
        opt_in.namespace,
        opt_in.own,
    )
    opted_in = own == "true" or opt_in.from_namespace
    lagging = (namespace,) if namespace not in view.namespaces else ()
    if not opted_in:
        return verdicts.Verdict(
            admission.allow(request.uid), missing_namespaces=lagging if own is None else ()
        )
    choice = resolve_queue(
        annotations=annotations,
        namespace=namespace,
        view=view,
        default_queue=settings.default_queue,
    )
    name = metadata.get("name") or request.name or metadata.get("generateName") or ""
    subject = (
        f"pod {namespace}/{name} names queue {validation.shorten(choice.name)} "
        f"(from {validation.shorten(choice.source, 120)})"
    )
    queue = view.tree.queues.get(choice.name)
    reasons: list[str] = []
    missing: tuple[str, ...] = ()
    if choice.name == objects.ROOT_QUEUE:
        reasons.append("pods cannot be submitted to the root queue; name a leaf queue")
    elif queue is None:
        reasons.append("the queue does not exist; create it or name an existing leaf queue")
        missing = (choice.name,)
    else:
        children = view.tree.children_of(choice.name)
        if children:
            reasons.append(
                f"pods can only be submitted to leaf queues, and queue {choice.name} has "
                f"{len(children)} child queues: {validation.list_names(children)}"
            )
        if queue.state is not objects.QueueState.OPEN:
            reasons.append(
                f"pods can only be submitted to Open queues, and queue {choice.name} is "
                f"{queue.state}"
            )
    if not reasons:
        return verdicts.Verdict(admission.allow(request.uid), missing_namespaces=lagging)
    problem = validation.FieldError(
        choice.path,
        validation.ErrorType.NOT_FOUND if missing else validation.ErrorType.INVALID,
        f"{subject}: {'; '.join(reasons)}",
        value=choice.name,
    )
    return verdicts.Verdict(
        admission.deny(request.uid, problem.render()),
        missing=missing,
        missing_namespaces=lagging,
    )


def _add_annotations(
    metadata: Mapping[str, Any], added: Mapping[str, str]
) -> list[admission.RawPatchOperation]:
    if not isinstance(metadata.get("annotations"), Mapping):
        return [{"op": "add", "path": "/metadata/annotations", "value": dict(added)}]
    return [
        {"op": "add", "path": "/metadata/annotations/" + verdicts.pointer(key), "value": value}
        for key, value in added.items()
    ]


def _namespace(request: admission.Request) -> str:
    """The pod's namespace: its own, else the request's (Volcano does the same)."""
    written = _mapping(_mapping(request.object).get("metadata")).get("namespace")
    return written if isinstance(written, str) and written else request.namespace


def _wrong_operation(request: admission.Request) -> admission.RawReview:
    return admission.deny(
        request.uid,
        f"invalid operation `{request.operation}`, expect operation to be `CREATE`",
        code=400,
        reason="BadRequest",
    )


def _missing_object(request: admission.Request) -> admission.RawReview:
    return admission.deny(
        request.uid,
        "request.object: a CREATE review must carry the pod",
        code=400,
        reason="BadRequest",
    )


def _string_map(value: object) -> Mapping[str, str]:
    if not isinstance(value, Mapping):
        return MappingProxyType({})
    return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str)}


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else MappingProxyType({})
