"""Workloads go through their queues whole: one PodGroup per pod owner, as Volcano makes them.

An opted-in pod that names no PodGroup and has a controller owner (its ``ownerReferences``
entry with ``controller: true``: a Job, a ReplicaSet, a StatefulSet, any other kind) is given,
by ``/pods/mutate`` at creation, the group-name annotation of the group Volcano's PodGroup
controller makes for that owner: ``podgroup-<owner uid>`` (:func:`group_name`). The pod waits,
gated, until the group exists; the operator creates it (:func:`pod_group`) from the first pod
it sees and the owner (read through the owner's :class:`kinds.WorkloadKind`, listed in
``registry``):

- an ownerReference to the owner, so that the group is garbage-collected with it;
- ``spec.queue``: the pod's ``scheduling.volcano.sh/queue-name``, else the owner's (its own
  annotations, then its pod template's), else none, which the PodGroup webhook turns into the
  namespace's queue, else the default queue;
- ``spec.priorityClassName``: the pod's;
- ``spec.minMember``: ``scheduling.volcano.sh/group-min-member`` of the owner, else of the pod
  (its template's), else 1, as Volcano; a value that is not a whole number of at least 1 is
  1, and said so in the group's annotation ``scheduling.queuetree.io/workload-problem``;
- ``spec.minResources``: the pod's requests times ``minMember`` (Volcano's
  ``CalTaskRequests``).

The owner's ``group-min-member`` is followed after creation too: the operator watches the
registered kinds (:func:`declared_min_member`), and when what a workload says differs from its
group's ``minMember``, it patches the group (:func:`resize_patch`): ``minMember``, and
``minResources`` recomputed from a pod's requests. Removing the annotation leaves the group
as it is (write ``"1"``).

The gang rules then do the rest: no pod of the group is admitted before ``minMember`` of them
fit at once, and pods beyond ``minMember`` (a Deployment scaled up, an elastic Job) are
admitted one by one as room allows.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Final

from queuetree.api import bodies, paths, pod_manifests, readers
from queuetree.api.workloads import kinds, registry
from queuetree.core import objects, resources

GROUP_PREFIX: Final = "podgroup-"
"""Volcano's ``PodgroupNamePrefix``: a generated group is ``podgroup-<owner uid>``."""
MIN_MEMBER_ANNOTATION: Final = "scheduling.volcano.sh/group-min-member"
PROBLEM_ANNOTATION: Final = "scheduling.queuetree.io/workload-problem"
"""On a generated PodGroup: what the operator could not read (a ``group-min-member`` that is
not a whole number), so the person who wrote it finds out."""

_BY_TYPE: Final = {(k.api_version, k.kind): k for k in registry.KINDS}


@dataclasses.dataclass(frozen=True, slots=True)
class Owner:
    """A pod's controller, as its ownerReference names it."""

    api_version: str
    kind: str
    name: str
    uid: str

    @property
    def workload_kind(self) -> kinds.WorkloadKind:
        """The registered kind, or the fallback for any other."""
        return _BY_TYPE.get((self.api_version, self.kind)) or kinds.fallback(
            self.api_version, self.kind
        )

    def path(self, namespace: str) -> str | None:
        """Where the operator GETs the owner; None for a kind it does not read."""
        plural = self.workload_kind.plural
        if plural is None:
            return None
        return paths.namespaced(self.api_version, plural, namespace, self.name)

    def reference(self) -> dict[str, Any]:
        """The ownerReference a generated group carries: not ``controller`` (the owner's
        controller does not manage the group) and not ``blockOwnerDeletion`` (which needs
        the right to set the owner's finalizers): garbage collection is all it is for."""
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "uid": self.uid,
        }


def controller_of(pod: Mapping[str, Any]) -> Owner | None:
    """The pod's controller (``ownerReferences`` with ``controller: true``), or None."""
    references = bodies.metadata_of(pod).get("ownerReferences")
    if not isinstance(references, list):
        return None
    for entry in references:
        if not isinstance(entry, Mapping) or entry.get("controller") is not True:
            continue
        fields = [entry.get(k) for k in ("apiVersion", "kind", "name", "uid")]
        if all(isinstance(value, str) and value for value in fields):
            api_version, kind, name, uid = (str(value) for value in fields)
            return Owner(api_version, kind, name, uid)
    return None


def group_name(owner: Owner) -> str:
    """The name of the group of ``owner``'s pods: Volcano's, so tools that look for it find it."""
    return group_name_for_uid(owner.uid)


def group_name_for_uid(uid: str) -> str:
    """The name of the group generated for the workload of uid ``uid``."""
    return GROUP_PREFIX + uid


def is_generated(name: str) -> bool:
    """Whether a PodGroup name is one the operator generates (:func:`group_name`)."""
    return name.startswith(GROUP_PREFIX) and len(name) > len(GROUP_PREFIX)


def min_member(annotations: Mapping[str, str]) -> tuple[int, str]:
    """``group-min-member`` of ``annotations`` (1 when absent), and why a value was not used."""
    text = annotations.get(MIN_MEMBER_ANNOTATION)
    if text is None:
        return 1, ""
    try:
        value = int(text.strip())
    except ValueError:
        value = 0
    if value >= 1:
        return value, ""
    return 1, (
        f"{MIN_MEMBER_ANNOTATION}: {text!r} is not a whole number of at least 1: minMember "
        "is 1 (write the number of pods that must start together)"
    )


def pod_group(
    *, pod: Mapping[str, Any], owner: Owner, owner_body: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The PodGroup manifest for ``owner``, made from its pod ``pod`` (see the module
    docstring); ``owner_body`` is the owner as read (None: not read)."""
    metadata = bodies.metadata_of(pod)
    namespace = str(metadata.get("namespace") or "")
    pod_annotations = {k: v for k, v in bodies.annotations_of(pod).items() if isinstance(v, str)}
    owned = owner.workload_kind.annotations(owner_body)
    count, problem = min_member({**pod_annotations, **owned})
    spec: dict[str, Any] = {"minMember": count}
    queue = pod_annotations.get(objects.QUEUE_NAME_ANNOTATION) or owned.get(
        objects.QUEUE_NAME_ANNOTATION
    )
    if queue:
        spec["queue"] = queue
    priority_class = bodies.spec_of(pod).get("priorityClassName")
    if isinstance(priority_class, str) and priority_class:
        spec["priorityClassName"] = priority_class
    try:
        requests = pod_manifests.pod_requests(pod)
    except readers.ManifestError:
        requests = None  # the pod is refused its admission for it, with the reason
    if requests is not None and not requests.is_empty():
        spec["minResources"] = resources.to_resource_list(requests.multi(count))
    group_metadata: dict[str, Any] = {
        "name": group_name(owner),
        "namespace": namespace,
        "ownerReferences": [owner.reference()],
    }
    if problem:
        group_metadata["annotations"] = {PROBLEM_ANNOTATION: problem}
    return {
        "apiVersion": bodies.VOLCANO_API_VERSION,
        "kind": "PodGroup",
        "metadata": group_metadata,
        "spec": spec,
    }


def declared_min_member(kind: kinds.WorkloadKind, owner: Mapping[str, Any]) -> str | None:
    """``group-min-member`` as workload ``owner`` (of ``kind``) says it (its own annotation,
    else its pod template's), or None when it says none."""
    return kind.annotations(owner).get(MIN_MEMBER_ANNOTATION)


def resize_patch(
    *, count: int, problem: str, min_resources: resources.Resource | None
) -> dict[str, Any]:
    """The merge patch that gives a generated group ``count`` as ``minMember`` (and
    ``min_resources``, when known, as ``minResources``), with ``problem`` said in its
    annotation, or the annotation removed when there is none."""
    spec: dict[str, Any] = {"minMember": count}
    if min_resources is not None:
        spec["minResources"] = resources.to_resource_list(min_resources)
    return {"metadata": {"annotations": {PROBLEM_ANNOTATION: problem or None}}, "spec": spec}


def kind_of(group: str, version: str, plural: str) -> kinds.WorkloadKind | None:
    """The registered kind served as ``plural`` of ``group/version``."""
    api_version = f"{group}/{version}" if group else version
    for kind in registry.KINDS:
        if kind.api_version == api_version and kind.plural == plural:
            return kind
    return None
