"""Kopf handlers: watch events into the cluster state, nothing else.

Queues, pod groups, nodes, PriorityClasses and namespaces (their break-glass label: whether
the pod webhooks review them), ResourceClaims and ResourceClaimTemplates when device classes
are mapped (``core.devices``), the workloads of the registered kinds (Jobs, ReplicaSets,
StatefulSets: only what they declare in ``group-min-member``, which their generated
PodGroups follow, ``api.workloads``), and pods when ``informing.PodInformer`` is not used. Each
handler parses the object with the ``queuetree.api`` reader of its kind and updates
``queuetree.operator.state`` (which wakes the cycle). No handler writes to the API, and only
index and event handlers are registered, so kopf never adds a finalizer or a
``last-handled-configuration`` annotation to anything (no finalizers on pods).

Readiness: every kind has an index handler, and kopf runs no event handler before every index
has seen its kind's initial listing. So the first event handler call proves that the state holds
the whole cluster: it marks the state synced, and only then does the cycle decide anything
(after a restart, the reserved set comes from the complete listing, never from half of it).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

import kopf

from queuetree.api import (
    bodies,
    pod_manifests,
    queue_manifests,
    readers,
    resource_claims,
    workloads,
)
from queuetree.api.workloads import kinds as workload_kinds
from queuetree.api.workloads import registry as workload_registry
from queuetree.core import devices, objects
from queuetree.operator import state

logger = logging.getLogger(__name__)

QUEUES = (bodies.VOLCANO_GROUP, bodies.VOLCANO_VERSION, "queues")
POD_GROUPS = (bodies.VOLCANO_GROUP, bodies.VOLCANO_VERSION, "podgroups")
PRIORITY_CLASSES = ("scheduling.k8s.io", "v1", "priorityclasses")


def build_registry(cluster: state.ClusterState, *, pods: bool = True) -> kopf.OperatorRegistry:
    """A kopf registry whose handlers keep ``cluster`` current.

    ``pods=False`` leaves pods to ``informing.PodInformer`` (the operator's default).
    """
    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    def login(**kwargs: Any) -> Any:
        # A registry of our own has no default login: in-cluster, then KUBECONFIG, as kopf does.
        return kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs)

    def keep(
        resource: tuple[str, ...],
        name: str,
        *,
        store: Callable[[Any], None],
        forget: Callable[[str], None],
        key: Callable[[Any], str],
    ) -> None:
        """Keep ``cluster`` current with the objects of ``resource``: an index handler stores
        each one (``store`` reads and stores it; one it cannot read is forgotten, with a
        warning naming ``name``), and an event handler forgets deleted ones and marks the state
        synced (see the module docstring)."""

        @kopf.index(*resource, registry=registry, id=f"index_{resource[-1]}")
        async def index(body: Any, **_: Any) -> None:
            try:
                store(body)
            except readers.ManifestError as error:
                logger.warning("%s ignored: %s", name, error)
                forget(key(body))

        @kopf.on.event(*resource, registry=registry, id=f"{resource[-1]}_event")
        async def event(type: str | None, body: Any, **_: Any) -> None:
            if type == "DELETED":
                forget(key(body))
            cluster.mark_synced()

    def store_queue(body: Any) -> None:
        queue = queue_manifests.parse_queue(body)
        cluster.upsert_queue(
            state.QueueRecord(
                queue=queue,
                status=bodies.status_copy_of(body),
                finalizers=bodies.finalizers_of(body),
                resource_version=bodies.resource_version_of(body),
            )
        )

    def store_pod_group(body: Any) -> None:
        default_queue = cluster.default_queue
        cluster.upsert_pod_group(queue_manifests.parse_pod_group(body, default_queue=default_queue))

    def store_pod(body: Any) -> None:
        cluster.upsert_pod(pod_manifests.parse_pod(body))

    def store_node(body: Any) -> None:
        cluster.upsert_node(pod_manifests.parse_node(body))

    def store_priority_class(body: Any) -> None:
        cluster.upsert_priority_class(pod_manifests.parse_priority_class(body))

    def store_namespace(body: Any) -> None:
        # Whether the pod webhooks review it: where they do not, admission records are not
        # believed (state.ClusterState.set_namespace_reviewed).
        disabled = bodies.labels_of(body).get(objects.ADMISSION_SWITCH_LABEL)
        cluster.set_namespace_reviewed(bodies.name_of(body), disabled != objects.ADMISSION_DISABLED)

    def forget_namespace(name: str) -> None:
        cluster.set_namespace_reviewed(name, True)

    # (resource, name in warnings, reader and store, forget, key) of each kind.
    kinds: list[
        tuple[
            tuple[str, ...], str, Callable[[Any], None], Callable[[str], None], Callable[[Any], str]
        ]
    ] = [
        (QUEUES, "Queue", store_queue, cluster.delete_queue, bodies.name_of),
        (POD_GROUPS, "PodGroup", store_pod_group, cluster.delete_pod_group, bodies.key_of),
        (("nodes",), "Node", store_node, cluster.delete_node, bodies.name_of),
        (("namespaces",), "Namespace", store_namespace, forget_namespace, bodies.name_of),
        (
            PRIORITY_CLASSES,
            "PriorityClass",
            store_priority_class,
            cluster.delete_priority_class,
            bodies.name_of,
        ),
    ]
    if pods:
        kinds.append((("pods",), "Pod", store_pod, cluster.delete_pod, bodies.key_of))
    if cluster.device_classes:
        # Devices through DRA are charged only when classes are mapped: only then must the API
        # serve resource.k8s.io/v1 (the operator waits for every watch's first listing).
        for claim_resource, kind, parse in (
            (resource_claims.RESOURCE_CLAIMS, devices.CLAIM, resource_claims.parse_claim),
            (
                resource_claims.RESOURCE_CLAIM_TEMPLATES,
                devices.TEMPLATE,
                resource_claims.parse_template,
            ),
        ):
            kinds.append(
                (
                    claim_resource,
                    kind,
                    functools.partial(_store_claim, cluster, kind, parse),
                    functools.partial(cluster.delete_claim, kind),
                    bodies.key_of,
                )
            )
    for workload in workload_registry.KINDS:
        if workload.plural is None:
            continue
        group, _, version = workload.api_version.rpartition("/")
        kinds.append(
            (
                (group, version, workload.plural) if group else (version, workload.plural),
                workload.kind,
                functools.partial(_store_declared_minimum, cluster, workload),
                cluster.delete_declared_minimum,
                bodies.uid_of,
            )
        )
    for resource, name, store, forget, key in kinds:
        keep(resource, name, store=store, forget=forget, key=key)

    return registry


def _store_claim(
    cluster: state.ClusterState,
    kind: str,
    parse: Callable[[Any], tuple[str, devices.ClaimSpec]],
    body: Any,
) -> None:
    key, spec = parse(body)
    cluster.upsert_claim(kind, key, spec)


def _store_declared_minimum(
    cluster: state.ClusterState, kind: workload_kinds.WorkloadKind, body: Any
) -> None:
    uid = bodies.uid_of(body)
    if uid:
        cluster.upsert_declared_minimum(uid, workloads.declared_min_member(kind, body))
