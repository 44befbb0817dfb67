"""Queue admission: ``/queues/validate`` and ``/queues/mutate`` as pure functions.

Each takes the checked request, the cluster view and the settings, and returns the
AdmissionReview response; the rules themselves are pure, in ``queuetree.core``
(``field_rules``, ``tree_rules``, ``deletion_rules``, and ``queue_warnings`` for what is
allowed but probably wrong), applied here in Volcano's order. Field paths are prefixed
``requestBody.`` as in Volcano's messages.
"""

from __future__ import annotations

from queuetree.api import admission, bodies, patches, queue_manifests
from queuetree.core import (
    deletion_rules,
    field_rules,
    objects,
    problems,
    queue_warnings,
    tree_rules,
)
from queuetree.webhooks import settings as settings_
from queuetree.webhooks import verdicts, views

PATH_PREFIX = "requestBody."


def validate(
    request: admission.Request,
    *,
    view: views.ClusterView,
    settings: settings_.ReviewSettings,
) -> verdicts.Verdict:
    """``/queues/validate`` (CREATE, UPDATE, DELETE): every rule, all problems in one denial.

    CREATE and UPDATE: the fields; on CREATE or a parent change, the parent; root protection;
    on CREATE or a quota/parent change, the quota against ancestors, siblings and subtree.
    UPDATE of the ``status`` subresource: only ``status.state`` may change, except by the
    operator (:func:`_status_problems`).
    DELETE reads only the name and the stored object (``oldObject``; ``object`` is null).
    The configured default queue (``settings.default_queue``) cannot be deleted, like ``root``
    and ``default`` (``default`` always: the PodGroup CRD writes it into groups that name no
    queue, whatever the flag says).
    Soft problems come back as warnings, with an allowed or a denied answer alike.
    """
    tree = view.tree
    if request.operation == "DELETE":
        return verdicts.Verdict(
            _answer(
                request.uid, _deletion_problems(request, view=view, settings=settings), warnings=[]
            )
        )
    if request.operation not in ("CREATE", "UPDATE"):
        return verdicts.Verdict(
            verdicts.wrong_operation(request, expected="`CREATE`, `UPDATE` or `DELETE`")
        )
    if request.object is None:
        return verdicts.Verdict(verdicts.missing_object(request, what="object"))
    if request.sub_resource == admission.STATUS_SUBRESOURCE:
        return verdicts.Verdict(
            _answer(request.uid, _status_problems(request, settings=settings), warnings=[])
        )
    # One reading of each object: the rules run on the queues it gives, beside its problems.
    reading = queue_manifests.read_queue(request.object, name=request.name)
    old_reading = (
        None
        if request.old_object is None
        else queue_manifests.read_queue(request.old_object, name=request.name)
    )
    previous = None
    if request.operation == "UPDATE" and old_reading is not None:
        previous = old_reading.queue
    trouble = [
        *reading.problems,
        *field_rules.validate_fields(reading.queue, tree=tree, previous=previous),
    ]
    if not trouble:
        # What the queue's fields allow but no session could use (an unknown state kept by
        # an UPDATE).
        trouble += queue_manifests.unusable_queue_problems(reading.queue)
    queue = reading.queue if not trouble else None
    missing: tuple[str, ...] = ()
    if queue is not None:
        old = None if old_reading is None else views.queue_from_reading(old_reading)
        if old is None or queue.parent != old.parent:
            found = tree_rules.validate_parent(queue, tree=tree, max_depth=settings.max_queue_depth)
            missing = tuple(
                str(e.value) for e in found if e.type is problems.ErrorType.NOT_FOUND and e.value
            )
            trouble += found
        if settings.enable_root_queue_protection and previous is not None:
            trouble += field_rules.validate_root_update(queue, previous)
        if old is None or tree_rules.quota_changed(queue, old):
            trouble += tree_rules.validate_quota_in_tree(queue, tree=tree)
    warnings = queue_warnings.soft_problems(
        reading.queue, tree=tree, node_resources=view.node_resources, sound=queue is not None
    )
    existing = None if previous is None else tree.queues.get(reading.queue.name)
    if queue is not None and existing is not None:
        # The figures are the operator's, in the stored queue; an update of the spec
        # carries the status along but a client could send any.
        warnings += queue_warnings.usage_warnings(queue, old=existing, tree=tree)
    return verdicts.Verdict(_answer(request.uid, trouble, warnings=warnings), missing=missing)


def mutate(
    request: admission.Request,
    *,
    view: views.ClusterView,
    settings: settings_.ReviewSettings,
) -> verdicts.Verdict:
    """``/queues/mutate`` (CREATE): the defaults of spec §4.2, plus ``spec.parent``.

    In order: the legacy ``volcano.sh/hierarchy`` annotations get a ``root/`` prefix (and the
    weights ``1/``) when both are set and the hierarchy does not start with ``root``;
    ``spec.reclaimable`` absent -> true; ``spec.weight`` absent or 0 -> 1; beyond the reference,
    ``spec.parent`` absent or "" -> ``root`` for every queue but root (the queue controller
    would patch it a moment later; doing it at admission means nobody ever sees it empty).
    """
    del view, settings  # the defaults depend on the object alone
    if request.operation != "CREATE":
        return verdicts.Verdict(verdicts.wrong_operation(request, expected="`CREATE`"))
    if request.object is None:
        return verdicts.Verdict(verdicts.missing_object(request, what="object"))
    queue = request.object
    patch: list[admission.RawPatchOperation] = []
    annotations = bodies.annotations_of(queue)
    hierarchy = annotations.get(objects.HIERARCHY_ANNOTATION)
    weights = annotations.get(objects.HIERARCHY_WEIGHTS_ANNOTATION)
    if (
        isinstance(hierarchy, str)
        and isinstance(weights, str)
        and hierarchy
        and weights
        and not hierarchy.startswith(objects.ROOT_QUEUE)
    ):
        patch += patches.add_annotations(
            queue,
            {
                objects.HIERARCHY_ANNOTATION: f"root/{hierarchy}",
                objects.HIERARCHY_WEIGHTS_ANNOTATION: f"1/{weights}",
            },
        )
    patch += patches.add_spec(queue)
    spec = bodies.spec_of(queue)
    if spec.get("reclaimable") is None:
        patch.append(patches.add_spec_field("reclaimable", True))
    if spec.get("weight") in (None, 0):
        patch.append(patches.add_spec_field("weight", 1))
    name = bodies.metadata_of(queue).get("name") or request.name
    if name != objects.ROOT_QUEUE and not spec.get("parent"):
        patch.append(patches.add_spec_field("parent", objects.ROOT_QUEUE))
    return verdicts.Verdict(admission.allow(request.uid, patch=patch))


PERSON_STATUS_FIELDS = frozenset({"state"})
"""What a person may write into a queue's status: the state that closes or opens it
(``kubectl queuetree close``). Everything else there is the operator's."""


def _status_problems(
    request: admission.Request, *, settings: settings_.ReviewSettings
) -> list[problems.Problem]:
    """A status UPDATE by anyone but the operator changes only :data:`PERSON_STATUS_FIELDS`.

    The figures are the operator's count of the queue's pods, and the deletion check reads
    them (``status.allocated["pods"]``, ``status.reserved["pods"]``): a person who zeroes them
    could delete a queue whose pods still run, and its ancestors would stop counting them.
    The operator recomputes every figure each cycle, so there is nothing to fix by hand.
    """
    if request.username == settings.operator_username or request.old_object is None:
        return []
    assert request.object is not None
    before, after = bodies.status_of(request.old_object), bodies.status_of(request.object)
    changed = sorted(
        name
        for name in before.keys() | after.keys()
        if name not in PERSON_STATUS_FIELDS and before.get(name) != after.get(name)
    )
    if not changed:
        return []
    name = bodies.metadata_of(request.object).get("name") or request.name
    operator = f"the queuetree operator ({settings.operator_username})"
    return [
        problems.Problem(
            f"status.{field}",
            problems.ErrorType.FORBIDDEN,
            f"status.{field} of queue {name} is written by {operator} only (it counts the "
            "queue's pods, and deleting a queue is refused while they run); a person writes "
            f"only status.state, to close or open the queue (kubectl queuetree close {name})",
        )
        for field in changed
    ]


def _deletion_problems(
    request: admission.Request,
    *,
    view: views.ClusterView,
    settings: settings_.ReviewSettings,
) -> list[problems.Problem]:
    """The core's deletion rules, plus the configured default queue's protection (the core
    protects the name ``default`` only)."""
    name = request.name
    if name == settings.default_queue and name not in (objects.DEFAULT_QUEUE, objects.ROOT_QUEUE):
        # Pods that name no queue are admitted through it: deleting it would strand them.
        return [
            problems.Problem(
                "metadata.name",
                problems.ErrorType.FORBIDDEN,
                f"`{name}` queue can not be deleted: it is the default queue "
                f"(--default-queue={name})",
            )
        ]
    old = (
        None
        if request.old_object is None
        else views.queue_from_manifest(request.old_object, name=name)
    )
    return deletion_rules.validate_deletion(
        name,
        queue=old or view.tree.queues.get(name),
        tree=view.tree,
        check_allocated_pods=settings.enable_queue_allocated_pods_check,
    )


def _answer(
    uid: str, trouble: list[problems.Problem], *, warnings: list[str]
) -> admission.RawReview:
    if not trouble:
        return admission.allow(uid, warnings=warnings)
    message = problems.aggregate([p.render(PATH_PREFIX) for p in trouble])
    return admission.deny(uid, message, warnings=warnings)
