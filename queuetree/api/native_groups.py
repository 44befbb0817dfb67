"""Gangs placed whole by kube-scheduler: the Workload API's ``scheduling.k8s.io`` PodGroup.

queuetree decides *when* a gang may start (its queue has room for ``minMember`` pods at
once); kube-scheduler decides *where*. Without more, the scheduler places the admitted pods
one by one, so a gang that fits its queue but not the nodes starts in part. Kubernetes 1.35+
has gang scheduling of its own (KEP-4671, feature gate ``GenericWorkload``, API
``scheduling.k8s.io/v1beta1``): a pod that names a *native* PodGroup in
``spec.schedulingGroup.podGroupName`` (immutable, set at creation; the group may be created
after the pod) is held by the scheduler until ``minCount`` pods of the group exist and can be
placed together, and none of them binds otherwise.

With ``--native-pod-groups`` (docs/gangs.md), ``/pods/mutate`` names, in every opted-in pod of
a Volcano PodGroup, the native PodGroup of the same name (:func:`pod_patch`), and the operator
creates that group (:func:`pod_group`): ``gang.minCount`` = the Volcano group's
``minMember`` (``basic`` for a group of 1), owned by the Volcano PodGroup so it is
garbage-collected with it.

Both kinds are called ``podgroups``: on a cluster that serves both, ``kubectl get podgroups``
lists Volcano's; name the group to see the other (``podgroups.scheduling.k8s.io``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from queuetree.api import bodies, patches

GROUP: Final = "scheduling.k8s.io"
VERSION: Final = "v1beta1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
RESOURCE: Final = f"podgroups.{GROUP}"
"""How a person names the native kind to kubectl (``kubectl get podgroups.scheduling.k8s.io``)."""
DISCOVERY_PATH: Final = f"/apis/{API_VERSION}"
"""The API server's discovery document of the version: it lists ``podgroups`` when served."""


def serves_pod_groups(discovery: Mapping[str, Any]) -> bool:
    """Whether a discovery document (``APIResourceList`` of :data:`DISCOVERY_PATH`) lists the
    ``podgroups`` resource."""
    found = discovery.get("resources")
    return isinstance(found, list) and any(
        isinstance(entry, Mapping) and entry.get("name") == "podgroups" for entry in found
    )


def collection(namespace: str) -> str:
    return f"{DISCOVERY_PATH}/namespaces/{namespace}/podgroups"


def path(namespace: str, name: str) -> str:
    return f"{collection(namespace)}/{name}"


def pod_group(*, namespace: str, name: str, min_member: int, owner_uid: str) -> dict[str, Any]:
    """The native PodGroup of Volcano PodGroup ``namespace/name`` (uid ``owner_uid``):
    ``gang.minCount`` = ``min_member`` (at least 1), owned by the Volcano group (garbage
    collection only, as a generated group is). Always ``gang``, even for a group of one: a
    policy cannot be changed after creation, but ``minCount`` can (:func:`min_count_patch`),
    so it follows ``minMember``; a gang of 1 is placed as ``basic`` would place it."""
    policy: dict[str, Any] = {"gang": {"minCount": max(1, min_member)}}
    return {
        "apiVersion": API_VERSION,
        "kind": "PodGroup",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "ownerReferences": [
                {
                    "apiVersion": bodies.VOLCANO_API_VERSION,
                    "kind": "PodGroup",
                    "name": name,
                    "uid": owner_uid,
                }
            ],
        },
        "spec": {"schedulingPolicy": policy},
    }


def min_count_patch(min_member: int) -> dict[str, Any]:
    """The merge patch that makes a native gang's ``minCount`` ``min_member`` (at least 1):
    mutable since v1.37 ("to support workload scaling"); the policy itself is not."""
    return {"spec": {"schedulingPolicy": {"gang": {"minCount": max(1, min_member)}}}}


def min_count(manifest: Mapping[str, Any]) -> int | None:
    """A native PodGroup's ``gang.minCount``, or None when it is not a gang (``basic``)."""
    policy = bodies.spec_of(manifest).get("schedulingPolicy")
    gang = policy.get("gang") if isinstance(policy, Mapping) else None
    count = gang.get("minCount") if isinstance(gang, Mapping) else None
    return count if isinstance(count, int) else None


def owner_uid(manifest: Mapping[str, Any]) -> str:
    """The uid of the Volcano PodGroup that owns a native one (``""``: none)."""
    references = bodies.metadata_of(manifest).get("ownerReferences")
    for entry in references if isinstance(references, list) else ():
        if isinstance(entry, Mapping) and entry.get("apiVersion") == bodies.VOLCANO_API_VERSION:
            uid = entry.get("uid")
            return uid if isinstance(uid, str) else ""
    return ""


def group_of_pod(pod: Mapping[str, Any]) -> str | None:
    """The native PodGroup a pod names (``spec.schedulingGroup.podGroupName``), or None."""
    group = bodies.spec_of(pod).get("schedulingGroup")
    name = group.get("podGroupName") if isinstance(group, Mapping) else None
    return name if isinstance(name, str) and name else None


def pod_patch(pod: Mapping[str, Any], group: str) -> list[patches.Operation]:
    """The JSON patch that makes a pod at creation name native PodGroup ``group``."""
    return patches.set_spec_field(pod, "schedulingGroup", {"podGroupName": group})


def resolve(mode: str, served: bool | None) -> tuple[bool, str]:
    """Whether native PodGroups are used under ``--native-pod-groups=mode`` (``auto``,
    ``true``, ``false``) when discovery found the API ``served`` (None: not asked, or the
    question failed), and the line that says so in the log."""
    if mode == "false":
        return (
            False,
            "native PodGroups off (--native-pod-groups=false): gangs are placed pod by pod",
        )
    if mode == "true":
        return True, (
            f"native PodGroups on (--native-pod-groups=true): gangs are placed whole through "
            f"{RESOURCE}"
        )
    if served:
        return True, (
            f"native PodGroups on: the API server serves {API_VERSION} podgroups, so gangs are "
            "placed whole by kube-scheduler (--native-pod-groups=auto)"
        )
    why = "could not be asked" if served is None else "does not serve"
    return False, (
        f"native PodGroups off: the API server {why} {API_VERSION} podgroups (Kubernetes "
        "before 1.35, the GenericWorkload gate off, or an emulator): gangs are admitted whole "
        "but placed pod by pod (--native-pod-groups=auto)"
    )
