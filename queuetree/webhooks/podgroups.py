"""PodGroup admission: ``/podgroups/mutate`` gives a group that names ``default`` its
namespace's queue, as Volcano's PodGroup mutating webhook does; ``/podgroups/validate`` checks
the queue a group names and keeps an admitted group in its queue.

Both are pure functions over the request, the cluster view and the settings, like the pod and
queue endpoints.

- mutate (CREATE): ``spec.queue`` ``default`` (what the CRD writes into a group that names
  none) or empty, in a namespace annotated ``scheduling.volcano.sh/queue-name``, becomes that
  namespace's queue;
- validate (CREATE and UPDATE): a group the operator could not read is refused
  (``queue_manifests.pod_group_problems``: a ``minResources`` quantity that does not parse or
  is negative), since the operator would ignore it and its pods would wait for ever; on
  UPDATE only problems the old group did not have, so a group written before the rule can
  still be edited. CREATE, and UPDATE when ``spec.queue`` changes: the queue must exist, be
  Open and be a leaf (not root), as for pods (Volcano checks exists and Open at creation
  only); and an admitted group keeps its queue, since its pods (or its ``minResources``) are
  charged there:
  one whose status shows pods that run or ran (phase Running, Unknown or Completed, or a
  ``running``, ``succeeded`` or ``failed`` count), or that enqueue admitted with
  ``minResources`` (phase Inqueue: the queue holds them in its ``inqueue``). A group Inqueue
  without ``minResources`` holds nothing yet (enqueue admits such groups at once, whatever
  the room), so it may still move; a pod of it that was just ungated carries its admission
  record and stays charged to the queue it was admitted to.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from queuetree.api import admission, bodies, patches, queue_manifests
from queuetree.core import objects, problems
from queuetree.webhooks import pods, verdicts, views
from queuetree.webhooks import settings as settings_

RAN_PHASES = frozenset(
    {
        objects.PodGroupPhase.RUNNING,
        objects.PodGroupPhase.UNKNOWN,
        objects.PodGroupPhase.COMPLETED,
    }
)
"""Phases of a group whose pods run or ran."""
_COUNTS = ("running", "succeeded", "failed")


def mutate(
    request: admission.Request,
    *,
    view: views.ClusterView,
    settings: settings_.ReviewSettings,
) -> verdicts.Verdict:
    """``/podgroups/mutate`` (CREATE): the namespace's queue for a group that names ``default``."""
    del settings  # the namespace decides, not a flag
    if request.operation != "CREATE":
        return verdicts.Verdict(verdicts.wrong_operation(request, expected="`CREATE`"))
    if request.object is None:
        return verdicts.Verdict(verdicts.missing_object(request, what="pod group"))
    namespace = verdicts.namespace_of(request)
    named = bodies.spec_of(request.object).get("queue")
    namespace_queue = view.namespace_annotations(namespace).get(objects.QUEUE_NAME_ANNOTATION)
    lagging = (namespace,) if namespace not in view.namespaces else ()
    if not namespace_queue or named not in (None, "", objects.DEFAULT_QUEUE):
        return verdicts.Verdict(admission.allow(request.uid), missing_namespaces=lagging)
    patch = patches.set_spec_field(request.object, "queue", namespace_queue)
    return verdicts.Verdict(admission.allow(request.uid, patch=patch))


def validate(
    request: admission.Request,
    *,
    view: views.ClusterView,
    settings: settings_.ReviewSettings,
) -> verdicts.Verdict:
    """``/podgroups/validate`` (CREATE, UPDATE): see the module docstring."""
    if request.operation not in ("CREATE", "UPDATE"):
        return verdicts.Verdict(verdicts.wrong_operation(request, expected="`CREATE` or `UPDATE`"))
    if request.object is None:
        return verdicts.Verdict(verdicts.missing_object(request, what="pod group"))
    namespace = verdicts.namespace_of(request)
    metadata = bodies.metadata_of(request.object)
    name = metadata.get("name") or request.name or metadata.get("generateName") or ""
    subject = f"pod group {namespace}/{name}"
    queue = _queue_of(request.object, settings=settings)
    old = request.old_object
    trouble = _unreadable(request.object, old, subject=subject, name=name)
    missing: tuple[str, ...] = ()
    before = None if old is None else _queue_of(old, settings=settings)
    if old is not None and before != queue and _admitted(old):
        phase = bodies.status_of(old).get("phase")
        trouble.append(
            problems.Problem(
                "spec.queue",
                problems.ErrorType.FORBIDDEN,
                f"{subject} was admitted to queue {before} (phase {phase}) and its pods are "
                "charged there until they finish, so it cannot move to queue "
                f"{problems.shorten(queue)}; delete the group and its pods and create "
                "them again to run in another queue",
                value=queue,
            )
        )
    elif before != queue:
        reasons, missing = pods.queue_reasons(queue, view=view, noun="pod groups")
        if reasons:
            trouble.append(
                problems.Problem(
                    "spec.queue",
                    problems.ErrorType.NOT_FOUND if missing else problems.ErrorType.INVALID,
                    f"{subject} names queue {problems.shorten(queue)}: {'; '.join(reasons)}",
                    value=queue,
                )
            )
    if not trouble:
        return verdicts.Verdict(admission.allow(request.uid))
    return verdicts.Verdict(
        admission.deny(request.uid, problems.aggregate([p.render() for p in trouble])),
        missing=missing,
    )


def _unreadable(
    group: Mapping[str, Any], old: Mapping[str, Any] | None, *, subject: str, name: str
) -> list[problems.Problem]:
    """What the operator could not read in ``group`` (``queue_manifests.pod_group_problems``):
    it would ignore the group, and its pods would wait for it for ever (told that it does not
    exist). On UPDATE only problems ``old`` did not have already: a group written before this
    rule can still be edited, its problem fixed included."""
    found = queue_manifests.pod_group_problems(group, name=name)
    known = () if old is None else queue_manifests.pod_group_problems(old, name=name)
    return [
        dataclasses.replace(
            problem,
            message=f"{problem.heading + ': ' if problem.heading else ''}{problem.message}: the "
            f"queuetree operator cannot read {subject} with this value, so it would ignore the "
            "group and its pods would never be admitted; correct the value",
        )
        for problem in found
        if problem not in known
    ]


def _admitted(group: Mapping[str, Any]) -> bool:
    """Whether the queue holds something for ``group`` (see the module docstring)."""
    status = bodies.status_of(group)
    phase = status.get("phase")
    if phase in RAN_PHASES or any(
        isinstance(status.get(count), int) and status[count] > 0 for count in _COUNTS
    ):
        return True
    return phase == objects.PodGroupPhase.INQUEUE and bool(
        bodies.spec_of(group).get("minResources")
    )


def _queue_of(group: Mapping[str, Any], *, settings: settings_.ReviewSettings) -> str:
    """The queue a PodGroup names; none (or not a string) is the default queue, as the
    operator reads it (``queue_manifests.parse_pod_group``)."""
    return queue_manifests.named_queue(group) or settings.default_queue
