"""Pod admission: ``/pods/mutate`` injects the queue-allocation gate, ``/pods/validate`` checks
the queue a pod names at creation and keeps admission bound afterwards. Pure functions over the
request, the cluster view and the settings.

Which pods are queuetree's ("opted in"): a pod annotated
``scheduling.volcano.sh/queue-allocation-gate: "true"`` (Volcano's opt-in), or, beyond the
reference, any pod in a namespace *labelled* with it (value ``"true"``). A namespace's opt-in
is the administrator's and binds every pod it creates: a pod annotated ``"false"`` there is
opted in all the same (its annotation is set to ``"true"``, with a warning), or a tenant could
leave its queue's limits with one annotation. A namespace opts in by label only, because the
label is what sends its pods here: the webhook configurations select single pods by a CEL
``matchCondition`` on the pod's own annotation or gate (a condition cannot see the namespace),
and whole namespaces by a ``namespaceSelector`` on the label (``views.namespace_annotations``).
A pod whose own value is neither ``"true"`` nor ``"false"``, outside an opted-in namespace, is
not opted in, and is warned.

Adopted pods (``--adopt-scheduler-names``, default ``volcano``): a pod created naming one of
these schedulers asked for Volcano's scheduler, which takes every pod it places through its
queue, and every Volcano integration (the Kubeflow training operator, KubeRay, Spark, ...)
writes that name in code its users cannot change. No Volcano scheduler runs beside queuetree,
so ``/pods/mutate`` hands such a pod to the scheduler that places admitted pods (the first
``--scheduler-name``), records the name it had in the annotation
``scheduling.queuetree.io/adopted-scheduler-name``, and opts it in (as a namespace's opt-in, a
``"false"`` of its own is overruled with a warning).
A pod that names any other scheduler is not adopted, and stays gated (below): a tenant cannot
skip its queue by naming a second scheduler. The configurations' matchConditions send pods
with ``spec.schedulerName: volcano`` here; an administrator who adopts other names lists them
there too.

What ``/pods/validate`` refuses (beyond the reference, which has no pod validation):

- CREATE: any pod carrying the admission record (``scheduling.queuetree.io/admitted-queue``,
  and ``admitted-devices``, which only an admitted pod's own claims read, so the
  configurations send it only with the first or an opt-in), opted in or not: the operator
  charges a pod to the queue its record names, and writes the record only when it removes
  the pod's gate, so a pod created with one was never admitted
  (the configurations send pods that carry it here, on CREATE and UPDATE); an opted-in pod
  whose queue cannot take pods (missing, root, not a leaf, not Open), and an opted-in pod
  created bound to a node (``spec.nodeName``: a bound pod cannot carry a scheduling gate, so
  it would never pass its queue); a pod for a scheduler queuetree does not admit for
  (``--scheduler-name``) is allowed with a warning, and stays gated;
- UPDATE: removing the queue-allocation gate, by anyone but the operator
  (``--operator-username``); writing the admission record
  (``scheduling.queuetree.io/admitted-queue`` and ``admitted-devices``), by anyone but the
  operator; opting in after
  creation (writing the opt-in annotation ``"true"`` onto a pod that has neither the gate nor
  the record): opt-in is read at creation, when the gate is added, and an ungated pod that
  opted in later would be counted in its queue (``objects.Pod.governed``) without ever having
  waited for it; and, once a pod is admitted (it carries the record, or it opted in and its
  gate is gone) and until it finishes, changing the annotations that choose its queue
  (``scheduling.volcano.sh/queue-name`` and the group name), and, for a pod admitted before
  the record existed, removing its opt-in (the one thing that keeps it governed): the pod
  stays charged to the queue it was admitted to;
- UPDATE of ``pods/resize`` (in-place resize: since Kubernetes 1.32 the only write that
  changes a pod's requests; before, a cluster with InPlacePodVerticalScaling on resized through
  the pod itself, so pod UPDATEs are checked the same way): raising the requests of a pod
  queuetree governs (it carries the record, the opt-in annotation or the gate), in any
  dimension, until it finishes. An admitted pod was admitted at its old size, and nothing
  checks its queue's room again; a gated one is checked by the operator at the size it read
  before it removes the gate, without a precondition on the size, so a pod grown in between
  would run at a size its queue never checked. Lowering requests is allowed.

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
from typing import Any, Final

from queuetree.api import (
    admission,
    bodies,
    native_groups,
    patches,
    pod_manifests,
    readers,
    workloads,
)
from queuetree.core import objects, problems, resources
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
    by_namespace: bool
    """The pod's namespace opts in every pod (whatever the pod's own annotation says)."""
    adopted: str | None = None
    """The pod's ``spec.schedulerName`` when the webhook adopts it (``--adopt-scheduler-names``):
    the pod asked for Volcano's scheduler, which admits every pod through its queue, so it is
    opted in whatever its own annotation says."""

    @property
    def opted_in(self) -> bool:
        return self.own == "true" or self.by_namespace or self.adopted is not None

    @property
    def overruled(self) -> bool:
        """The pod says something other than ``"true"`` where its namespace or its adopted
        scheduler opts it in."""
        return (
            (self.by_namespace or self.adopted is not None)
            and self.own is not None
            and self.own != "true"
        )


def _read_opt_in(
    request: admission.Request,
    pod: Mapping[str, Any],
    view: views.ClusterView,
    settings: settings_.ReviewSettings,
) -> _OptIn:
    """The pod's own opt-in, its namespace's and its adopted scheduler's (which a pod cannot
    undo)."""
    metadata = bodies.metadata_of(pod)
    annotations = _string_map(metadata.get("annotations"))
    namespace = verdicts.namespace_of(request)
    own = annotations.get(GATE)
    by_namespace = view.namespace_annotations(namespace).get(GATE) == "true"
    scheduler = bodies.spec_of(pod).get("schedulerName")
    adopted = scheduler if isinstance(scheduler, str) and settings.adopts(scheduler) else None
    return _OptIn(metadata, annotations, namespace, own, by_namespace, adopted)


def _overruled_warning(opt_in: _OptIn) -> str:
    own = problems.shorten(opt_in.own or "")
    if opt_in.by_namespace:
        return (
            f'metadata.annotations{problems.key(GATE)}: "{own}" cannot opt the pod out of '
            f"namespace {opt_in.namespace}, which opts in every pod it creates: the pod is held "
            "for queue admission (an administrator can take the namespace out)"
        )
    return (
        f'metadata.annotations{problems.key(GATE)}: "{own}" cannot opt the pod out of queue '
        f"admission: it names spec.schedulerName {problems.shorten(opt_in.adopted or '')}, "
        "whose pods all go through their queue, and is held for queue admission (create it "
        "without spec.schedulerName to run it outside queue admission)"
    )


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
    opt-in annotation ``"true"`` (replacing a ``"false"`` of its own, with a warning), so the
    operator, which reads pods only, removes the gate when the queue has room; so does an
    adopted pod (its ``spec.schedulerName`` is one of ``--adopt-scheduler-names``), whose
    scheduler name is also replaced by the placing scheduler's (the first
    ``--scheduler-name``) and kept in ``objects.ADOPTED_SCHEDULER_ANNOTATION``. An opted-in
    pod that a controller owns and that names no PodGroup gets the group-name annotation of
    its workload's group (``workloads.group_name``: the operator creates the group, which
    takes the namespace's queue); any other opted-in pod that names no queue and no group gets
    its namespace's queue-name annotation, so the queue /pods/validate checked is the queue
    that admits it. A pod created with
    ``spec.nodeName`` is bound already and cannot be gated (the API server refuses both
    together): it gets no patch here, and /pods/validate refuses it.
    """
    if request.operation != "CREATE":
        return verdicts.Verdict(verdicts.wrong_operation(request, expected="`CREATE`"))
    if request.object is None:
        return verdicts.Verdict(verdicts.missing_object(request, what="pod"))
    pod = request.object
    opt_in = _read_opt_in(request, pod, view, settings)
    annotations, namespace, own = (
        opt_in.annotations,
        opt_in.namespace,
        opt_in.own,
    )
    if not opt_in.opted_in:
        # Every pod's namespace exists; one the cache lacks was created a moment ago.
        lagging = (namespace,) if namespace not in view.namespaces else ()
        return verdicts.Verdict(
            admission.allow(request.uid, warnings=_misspelt_opt_in(own)),
            missing_namespaces=lagging,
        )
    if not settings.gates_pods:
        warnings = (
            [
                f"metadata.annotations{problems.key(GATE)}: the feature gate "
                "SchedulingGatesQueueAdmission is off: the pod is not held for queue admission"
            ]
            if own == "true" or opt_in.adopted is not None
            else []
        )
        return verdicts.Verdict(admission.allow(request.uid, warnings=warnings))
    spec = bodies.spec_of(pod)
    if spec.get("nodeName"):
        # The API server refuses gates together with nodeName; /pods/validate says why.
        return verdicts.Verdict(admission.allow(request.uid))
    warnings = [_overruled_warning(opt_in)] if opt_in.overruled else []
    gates = spec.get("schedulingGates")
    patch: list[admission.RawPatchOperation] = []
    if not (
        isinstance(gates, list) and any(verdicts.mapping(g).get("name") == GATE for g in gates)
    ):
        patch += patches.add_scheduling_gate(pod, GATE)
    if opt_in.adopted is not None:
        # Handed to the scheduler that places admitted pods; "add" replaces the member.
        patch += patches.set_spec_field(pod, "schedulerName", settings.placing_scheduler)
    # "add" sets a member that exists too (RFC 6902): "false" becomes "true".
    added = {GATE: "true"} if own != "true" else {}
    if opt_in.adopted is not None:
        added[objects.ADOPTED_SCHEDULER_ANNOTATION] = opt_in.adopted
    # A pod of a workload (a controller owns it) that names no group joins its workload's,
    # which the operator creates (``workloads``); the group takes the namespace's queue then.
    owner = None if annotations.get(objects.GROUP_NAME_ANNOTATION) else workloads.controller_of(pod)
    if owner is not None:
        added[objects.GROUP_NAME_ANNOTATION] = workloads.group_name(owner)
    # The operator reads pods only: a pod that names neither a group nor a queue gets its
    # namespace's queue written on it, so the queue /pods/validate checked is the one that admits.
    namespace_queue = view.namespace_annotations(namespace).get(objects.QUEUE_NAME_ANNOTATION)
    if (
        namespace_queue
        and owner is None
        and objects.QUEUE_NAME_ANNOTATION not in annotations
        and objects.GROUP_NAME_ANNOTATION not in annotations
    ):
        added[objects.QUEUE_NAME_ANNOTATION] = namespace_queue
    if added:
        patch += patches.add_annotations(pod, added)
    # Placed whole: the pod names the scheduler's PodGroup of its group, which the operator
    # creates (``native_groups``), while its gang has yet to start; a pod that names one
    # already keeps its own.
    group = added.get(objects.GROUP_NAME_ANNOTATION) or annotations.get(
        objects.GROUP_NAME_ANNOTATION
    )
    if (
        settings.native_pod_groups
        and group
        and native_groups.group_of_pod(pod) is None
        and joins_native_group(view, namespace=namespace, group=group, annotations=annotations)
    ):
        patch += native_groups.pod_patch(pod, group)
    return verdicts.Verdict(admission.allow(request.uid, patch=patch, warnings=warnings))


def joins_native_group(
    view: views.ClusterView, *, namespace: str, group: str, annotations: Mapping[str, str]
) -> bool:
    """Whether a new pod of PodGroup ``namespace/group`` names the group's native PodGroup
    (``spec.schedulingGroup``, which cannot change after creation), so that kube-scheduler
    places the gang all or nothing.

    Only pods of a gang whose start is ahead join: kube-scheduler (v1.37) queues the pending
    pods of a native group as one entity and keeps the whole entity back while any of them
    is gated (``PriorityQueue.runPreEnqueuePlugins``). A pod beyond a running gang's minimum
    that joined would wait for its gated siblings, however much room its queue has; created
    without the field, it is placed alone once admitted, as Volcano admits pods beyond
    ``minMember`` one by one. So a pod joins when its group:

    - is a workload's generated group (``podgroup-<owner uid>``) whose pods say
      ``group-min-member`` above 1 (the pod's own annotation, from its template: every pod
      of the workload decides alike, even before the group exists; a minimum written only on
      the owner places the workload pod by pod), and has not started;
    - is any other group, with a ``minMember`` above 1, that has not started; or a group not
      seen yet (its pods wait for it, then are admitted together with the gang).

    Members of one native group are admitted together (``core.actions``), so pods that
    joined before the start never hold room while their siblings wait (docs/gangs.md)."""
    start = view.gang_starts.get(f"{namespace}/{group}")
    if start is not None and start.started:
        return False
    if workloads.is_generated(group):
        return workloads.min_member(annotations)[0] > 1
    return start is None or start.min_member > 1


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
            f"metadata.annotations{problems.key(objects.GROUP_NAME_ANNOTATION)}",
        )
    key = objects.QUEUE_NAME_ANNOTATION
    if annotations.get(key):
        return QueueChoice(
            annotations[key], f"annotation {key}", f"metadata.annotations{problems.key(key)}"
        )
    from_namespace = view.namespace_annotations(namespace).get(key)
    if from_namespace:
        return QueueChoice(
            from_namespace,
            f"annotation {key} of namespace {namespace}",
            f"metadata.annotations{problems.key(key)}",
        )
    return QueueChoice(
        default_queue,
        f"the default queue {default_queue}: no PodGroup, no queue-name annotation",
        f"metadata.annotations{problems.key(key)}",
    )


def validate(
    request: admission.Request,
    *,
    view: views.ClusterView,
    settings: settings_.ReviewSettings,
) -> verdicts.Verdict:
    """``/pods/validate`` (CREATE and UPDATE), beyond the reference (see the module docstring).

    Pods that are not opted in are allowed untouched, unless they are created carrying the
    admission record: queuetree does not admit them, and a cluster without queues must keep
    creating its other pods. A denial lists every problem, and each says which queue, where its
    name came from, and what to do.
    """
    if request.object is None:
        return verdicts.Verdict(verdicts.missing_object(request, what="pod"))
    if request.operation == "UPDATE":
        return _validate_update(request, view=view, settings=settings)
    if request.operation != "CREATE":
        return verdicts.Verdict(verdicts.wrong_operation(request, expected="`CREATE` or `UPDATE`"))
    return _validate_create(request, view=view, settings=settings)


def _validate_create(
    request: admission.Request,
    *,
    view: views.ClusterView,
    settings: settings_.ReviewSettings,
) -> verdicts.Verdict:
    """No pod may carry the admission record yet; an opted-in pod must name an existing,
    Open, leaf queue that is not root (a pod that names none: ``settings.default_queue``, the
    queue the operator admits it to), and must not be bound to a node already."""
    assert request.object is not None
    opt_in = _read_opt_in(request, request.object, view, settings)
    metadata, annotations, namespace = opt_in.metadata, opt_in.annotations, opt_in.namespace
    lagging = (namespace,) if namespace not in view.namespaces else ()
    name = metadata.get("name") or request.name or metadata.get("generateName") or ""
    trouble = _record_at_creation(annotations, subject=f"pod {namespace}/{name}")
    if not opt_in.opted_in:
        if not trouble:
            return verdicts.Verdict(admission.allow(request.uid), missing_namespaces=lagging)
        return verdicts.Verdict(
            admission.deny(request.uid, problems.aggregate([p.render() for p in trouble])),
            missing_namespaces=lagging,
        )
    choice = resolve_queue(
        annotations=annotations,
        namespace=namespace,
        view=view,
        default_queue=settings.default_queue,
    )
    spec = bodies.spec_of(request.object)
    node = spec.get("nodeName")
    if node:
        how = "by its annotation" if opt_in.own == "true" else f"by namespace {namespace}"
        trouble.append(
            problems.Problem(
                "spec.nodeName",
                problems.ErrorType.FORBIDDEN,
                f"pod {namespace}/{name} is opted in to queue admission ({how}) and cannot be "
                f"created bound to node {problems.shorten(str(node))}: queuetree admits a pod "
                "by removing its scheduling gate, and a bound pod cannot carry one, so it would "
                "run outside its queue's limits; remove spec.nodeName (to choose the node, set "
                "a nodeSelector on kubernetes.io/hostname)",
            )
        )
    reasons, missing = queue_reasons(choice.name, view=view, noun="pods")
    if reasons:
        trouble.append(
            problems.Problem(
                choice.path,
                problems.ErrorType.NOT_FOUND if missing else problems.ErrorType.INVALID,
                f"pod {namespace}/{name} names queue {problems.shorten(choice.name)} "
                f"(from {problems.shorten(choice.source, 120)}): {'; '.join(reasons)}",
                value=choice.name,
            )
        )
    warnings = [_overruled_warning(opt_in)] if opt_in.overruled else []
    scheduler = spec.get("schedulerName") or objects.DEFAULT_SCHEDULER
    # An adopted pod's name is rewritten by /pods/mutate, which runs first.
    if (
        opt_in.adopted is None
        and isinstance(scheduler, str)
        and scheduler not in settings.scheduler_names
    ):
        adopted = sorted(settings.adopted_scheduler_names - settings.scheduler_names)
        warnings.append(
            f"spec.schedulerName: {problems.shorten(scheduler)}: queuetree admits pods for "
            f"{', '.join(sorted(settings.scheduler_names))} only (--scheduler-name), so this "
            "pod stays gated (holding no room in its queue) and is told why; create it without "
            "spec.schedulerName, or with one of those"
            + (
                f" (or with {', '.join(adopted)}, which the webhook hands to "
                f"{settings.placing_scheduler}: --adopt-scheduler-names; see "
                "docs/compatibility.md)"
                if adopted
                else ""
            )
        )
    if not trouble:
        return verdicts.Verdict(
            admission.allow(request.uid, warnings=warnings), missing_namespaces=lagging
        )
    return verdicts.Verdict(
        admission.deny(
            request.uid, problems.aggregate([p.render() for p in trouble]), warnings=warnings
        ),
        missing=missing,
        missing_namespaces=lagging,
    )


_RECORD_MEANS: Final = {
    objects.ADMITTED_QUEUE_ANNOTATION: "charges the pod to the queue it names",
    objects.ADMITTED_DEVICES_ANNOTATION: "charges the pod's own ResourceClaims at least the "
    "devices it lists",
}
"""What the operator does with each of ``objects.ADMISSION_RECORDS``, for the refusals."""


def _record_at_creation(annotations: Mapping[str, str], *, subject: str) -> list[problems.Problem]:
    """No pod is created admitted: the operator creates no pods, and writes the admission record
    (``objects.ADMISSION_RECORDS``) only in the write that removes a pod's gate. A pod created
    with the record would be charged to the queue it names, whatever queue it asks for and
    whether or not that queue has room (or charged the devices it names at least)."""
    return [
        problems.Problem(
            f"metadata.annotations{problems.key(record)}",
            problems.ErrorType.FORBIDDEN,
            f"{subject} cannot be created with the admission record {record}: only the queuetree "
            "operator writes it, when it admits a pod (in the write that removes the pod's "
            f"scheduling gate), and {_RECORD_MEANS[record]}; remove the annotation "
            "(a manifest copied from an admitted pod carries it) and name the pod's queue with "
            f"{objects.QUEUE_NAME_ANNOTATION}",
            value=annotations[record],
        )
        for record in objects.ADMISSION_RECORDS
        if record in annotations
    ]


def queue_reasons(
    name: str, *, view: views.ClusterView, noun: str
) -> tuple[list[str], tuple[str, ...]]:
    """Why queue ``name`` cannot take new ``noun`` (``pods``, ``pod groups``), and the name
    itself when the queue is missing (the server waits briefly for its cache then)."""
    queue = view.tree.queues.get(name)
    if name == objects.ROOT_QUEUE:
        return [f"{noun} cannot be submitted to the root queue; name a leaf queue"], ()
    if queue is None:
        return ["the queue does not exist; create it or name an existing leaf queue"], (name,)
    reasons = []
    children = view.tree.children_of(name)
    if children:
        reasons.append(
            f"{noun} can only be submitted to leaf queues, and queue {name} has "
            f"{len(children)} child queues: {problems.list_names(children)}"
        )
    if queue.state is not objects.QueueState.OPEN:
        reasons.append(
            f"{noun} can only be submitted to Open queues, and queue {name} is {queue.state}"
        )
    return reasons, ()


_BINDING_ANNOTATIONS = (objects.QUEUE_NAME_ANNOTATION, objects.GROUP_NAME_ANNOTATION)
"""What chooses a pod's queue: frozen once the pod is admitted."""
_FINISHED = frozenset({"Succeeded", "Failed"})


def _validate_update(
    request: admission.Request,
    *,
    view: views.ClusterView,
    settings: settings_.ReviewSettings,
) -> verdicts.Verdict:
    """The gate goes only by the operator's hand, the admission record is the operator's, an
    admitted pod keeps its queue, and a governed pod's requests do not grow, by a resize or by
    an update of the pod (see the module docstring). The operator itself is never refused (it
    is also left out by the configuration's matchConditions, where they work)."""
    assert request.object is not None
    old = request.old_object
    if old is None or request.username == settings.operator_username:
        return verdicts.Verdict(admission.allow(request.uid))
    new = request.object
    if request.sub_resource == admission.RESIZE_SUBRESOURCE:
        # A resize changes resources only (the API server keeps nothing else of it).
        growth = _growth(request, old, view=view, settings=settings)
        if not growth:
            return verdicts.Verdict(admission.allow(request.uid))
        return verdicts.Verdict(admission.deny(request.uid, growth[0].render()))
    old_meta, new_meta = (
        bodies.metadata_of(old),
        bodies.metadata_of(new),
    )
    before, after = (
        _string_map(old_meta.get("annotations")),
        _string_map(new_meta.get("annotations")),
    )
    namespace = verdicts.namespace_of(request)
    name = new_meta.get("name") or request.name
    subject = f"pod {namespace}/{name}"
    operator = f"the queuetree operator ({settings.operator_username})"
    gated_before, gated_after = _has_gate(old), _has_gate(new)
    queue = resolve_queue(
        annotations=before, namespace=namespace, view=view, default_queue=settings.default_queue
    ).name
    # Admitted: the record says where; a pod admitted before the record existed (opted in,
    # gate gone) is charged where its annotations point now.
    charged = before.get(objects.ADMITTED_QUEUE_ANNOTATION) or (
        queue if before.get(GATE) == "true" and not gated_before else ""
    )
    trouble: list[problems.Problem] = []
    if gated_before and not gated_after:
        who = request.username or "an unknown user"
        trouble.append(
            problems.Problem(
                "spec.schedulingGates",
                problems.ErrorType.FORBIDDEN,
                f"only {operator} may remove the scheduling gate {GATE} from {subject}, and it "
                f"does so once queue {queue} has room for the pod; {who} cannot (kubectl "
                "describe pod tells why it waits)",
            )
        )
    record = objects.ADMITTED_QUEUE_ANNOTATION
    if (
        after.get(GATE) == "true"
        and before.get(GATE) != "true"
        and not gated_before
        and record not in before
    ):
        trouble.append(
            problems.Problem(
                f"metadata.annotations{problems.key(GATE)}",
                problems.ErrorType.FORBIDDEN,
                f"{subject} was created without opting in to queue admission, so it runs "
                "outside it and no queue counts it; a pod opts in when it is created (that is "
                "when it gets the scheduling gate it waits behind): delete it and create it "
                f'again with the annotation {GATE}: "true" (or in a namespace labelled '
                f"{GATE}=true)",
                value=after.get(GATE),
            )
        )
    trouble.extend(
        problems.Problem(
            f"metadata.annotations{problems.key(written)}",
            problems.ErrorType.FORBIDDEN,
            f"{what} is written by {operator} only, when it removes the pod's gate, and never "
            "changes after",
            value=after.get(written),
        )
        for written, what in (
            (record, f"the queue {subject} was admitted to"),
            (
                objects.ADMITTED_DEVICES_ANNOTATION,
                f"what the ResourceClaims of {subject} were charged when it was admitted",
            ),
        )
        if before.get(written) != after.get(written)
    )
    if bodies.spec_of(old) != bodies.spec_of(new):
        # Before 1.32, a cluster with InPlacePodVerticalScaling on resized through the pod
        # itself; later ones refuse a change of requests here before any webhook.
        trouble += _growth(request, old, view=view, settings=settings)
    finished = bodies.status_of(old).get("phase") in _FINISHED
    if charged and not finished and record not in before and after.get(GATE) != "true":
        # Admitted before the record existed: the opt-in is what keeps it in its queue.
        trouble.append(
            problems.Problem(
                f"metadata.annotations{problems.key(GATE)}",
                problems.ErrorType.FORBIDDEN,
                f"{subject} was admitted to queue {charged} (before the admission record "
                "existed) and its opt-in is what keeps it charged there until it finishes or "
                "is deleted, so it cannot be removed",
                value=after.get(GATE),
            )
        )
    if charged and not finished:
        for key in _BINDING_ANNOTATIONS:
            if before.get(key) != after.get(key):
                trouble.append(
                    problems.Problem(
                        f"metadata.annotations{problems.key(key)}",
                        problems.ErrorType.FORBIDDEN,
                        f"{subject} was admitted to queue {charged} and stays charged to it "
                        "until it finishes or is deleted, so its queue cannot change; delete "
                        "the pod and create it again to run it in another queue",
                        value=after.get(key),
                    )
                )
    if not trouble:
        return verdicts.Verdict(admission.allow(request.uid))
    return verdicts.Verdict(
        admission.deny(request.uid, problems.aggregate([p.render() for p in trouble]))
    )


def _growth(
    request: admission.Request,
    old: Mapping[str, Any],
    *,
    view: views.ClusterView,
    settings: settings_.ReviewSettings,
) -> list[problems.Problem]:
    """A write may not raise the request of a pod queuetree governs (see the module docstring)
    in any dimension: what its queue is charged, as ``pod_manifests.pod_requests`` reads it
    (containers, sidecars, init containers, overhead, pod-level resources). The old pod's
    annotations and gates say whether the pod is governed and where it is charged (a resize
    changes nothing else; an update that changes them too is refused for that on its own)."""
    assert request.object is not None
    annotations = _string_map(bodies.metadata_of(old).get("annotations"))
    gated = _has_gate(old)
    record = annotations.get(objects.ADMITTED_QUEUE_ANNOTATION)
    governed = record is not None or annotations.get(GATE) == "true" or gated
    if not governed or bodies.status_of(old).get("phase") in _FINISHED:
        return []
    namespace = verdicts.namespace_of(request)
    subject = f"pod {namespace}/{bodies.metadata_of(old).get('name') or request.name}"
    try:
        before = pod_manifests.pod_requests(old)
        after = pod_manifests.pod_requests(request.object)
    except readers.ManifestError as error:
        reasons = "; ".join(problem.render() for problem in error.problems)
        return [
            problems.Problem(
                pod_manifests.REQUESTS_PATH,
                problems.ErrorType.FORBIDDEN,
                f"the requests of {subject} cannot be read, so queuetree cannot tell whether "
                f"the write raises them: {reasons}",
            )
        ]
    raised = _raised_requests(before, after)
    if not raised:
        return []
    queue = (
        record
        or resolve_queue(
            annotations=annotations,
            namespace=namespace,
            view=view,
            default_queue=settings.default_queue,
        ).name
    )
    if gated:
        why = (
            f"{subject} waits for room in queue {queue}, and a resize cannot raise its requests "
            f"while it waits ({raised}): the queuetree operator checks the room at the size it "
            "read and then removes the gate, so a pod grown in between would run at a size its "
            "queue never checked"
        )
    else:
        why = (
            f"{subject} was admitted to queue {queue} at the size it had then, and a resize "
            f"cannot raise its requests ({raised}): nothing checks the queue's room again on a "
            "resize, so the queue and its ancestors would run more than their capability"
        )
    return [
        problems.Problem(
            pod_manifests.REQUESTS_PATH,
            problems.ErrorType.FORBIDDEN,
            f"{why}; delete the pod and create it again with the new requests, so that it waits "
            "for room in its queue (lowering requests is allowed)",
        )
    ]


def _raised_requests(before: resources.Resource, after: resources.Resource) -> str:
    """The dimensions ``after`` raises, as ``cpu from 1 to 20``, joined; "" when none."""
    grown = resources.exceeded_part(after, before)
    old_list, new_list = resources.to_resource_list(before), resources.to_resource_list(after)
    return ", ".join(
        f"{name} from {old_list.get(name, '0')} to {new_list.get(name, '?')}"
        for name in grown.resource_names()
    )


def _has_gate(pod: Mapping[str, Any]) -> bool:
    gates = bodies.spec_of(pod).get("schedulingGates")
    return isinstance(gates, list) and any(verdicts.mapping(g).get("name") == GATE for g in gates)


def _misspelt_opt_in(own: str | None) -> list[str]:
    """A warning for an opt-in annotation that is neither ``"true"`` nor ``"false"``: the pod
    reached the webhook because it carries the key, and a person who wrote ``"True"`` or
    ``"yes"`` meant to be queued, but only ``"true"`` opts in (Volcano reads it the same way)."""
    if own is None or own == "false":
        return []
    return [
        f'metadata.annotations{problems.key(GATE)}: "{problems.shorten(own)}" is neither "true" '
        'nor "false": the pod is not held for queue admission (write "true" to opt in)'
    ]


def _string_map(value: object) -> Mapping[str, str]:
    if not isinstance(value, Mapping):
        return MappingProxyType({})
    return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str)}
