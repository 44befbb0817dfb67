"""Kopf handlers: watch events into the cluster state, nothing else.

Queues, pod groups, nodes and PriorityClasses (and pods, when ``informing.PodInformer`` is not
used). Each handler parses the object with the ``queuetree.api`` reader of its kind and
updates ``queuetree.operator.state`` (which wakes the cycle). No handler writes to the API, and only
index and event handlers are registered, so kopf never adds a finalizer or a
``last-handled-configuration`` annotation to anything (no finalizers on pods).

Readiness: every kind has an index handler, and kopf runs no event handler before every index
has seen its kind's initial listing. So the first event handler call proves that the state holds
the whole cluster: it marks the state synced, and only then does the cycle decide anything
(after a restart, the reserved set comes from the complete listing, never from half of it).
"""

from __future__ import annotations

import logging
from typing import Any

import kopf

from queuetree.api import bodies, pod_manifests, queue_manifests, readers
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

    @kopf.index(*QUEUES, registry=registry)
    async def index_queue(body: Any, **_: Any) -> None:
        try:
            queue = queue_manifests.parse_queue(body)
        except readers.ManifestError as error:
            logger.warning("Queue ignored: %s", error)
            cluster.delete_queue(bodies.name_of(body))
            return
        cluster.upsert_queue(state.QueueRecord(queue=queue, status=bodies.status_copy_of(body)))

    @kopf.index(*POD_GROUPS, registry=registry)
    async def index_pod_group(body: Any, **_: Any) -> None:
        try:
            cluster.upsert_pod_group(
                queue_manifests.parse_pod_group(body, default_queue=cluster.default_queue)
            )
        except readers.ManifestError as error:
            logger.warning("PodGroup ignored: %s", error)
            cluster.delete_pod_group(bodies.key_of(body))

    if pods:

        @kopf.index("pods", registry=registry)
        async def index_pod(body: Any, **_: Any) -> None:
            try:
                pod = pod_manifests.parse_pod(body)
            except readers.ManifestError as error:
                logger.warning("Pod ignored: %s", error)
                cluster.delete_pod(bodies.key_of(body))
                return
            cluster.upsert_pod(pod)

        @kopf.on.event("pods", registry=registry)
        async def pod_event(type: str | None, body: Any, **_: Any) -> None:
            if type == "DELETED":
                cluster.delete_pod(bodies.key_of(body))
            cluster.mark_synced()

    @kopf.index("nodes", registry=registry)
    async def index_node(body: Any, **_: Any) -> None:
        try:
            cluster.upsert_node(pod_manifests.parse_node(body))
        except readers.ManifestError as error:
            logger.warning("Node ignored: %s", error)
            cluster.delete_node(bodies.name_of(body))

    @kopf.index(*PRIORITY_CLASSES, registry=registry)
    async def index_priority_class(body: Any, **_: Any) -> None:
        try:
            cluster.upsert_priority_class(pod_manifests.parse_priority_class(body))
        except readers.ManifestError as error:
            logger.warning("PriorityClass ignored: %s", error)
            cluster.delete_priority_class(bodies.name_of(body))

    @kopf.on.event(*QUEUES, registry=registry)
    async def queue_event(type: str | None, body: Any, **_: Any) -> None:
        if type == "DELETED":
            cluster.delete_queue(bodies.name_of(body))
        cluster.mark_synced()

    @kopf.on.event(*POD_GROUPS, registry=registry)
    async def pod_group_event(type: str | None, body: Any, **_: Any) -> None:
        if type == "DELETED":
            cluster.delete_pod_group(bodies.key_of(body))
        cluster.mark_synced()

    @kopf.on.event("nodes", registry=registry)
    async def node_event(type: str | None, body: Any, **_: Any) -> None:
        if type == "DELETED":
            cluster.delete_node(bodies.name_of(body))
        cluster.mark_synced()

    @kopf.on.event(*PRIORITY_CLASSES, registry=registry)
    async def priority_class_event(type: str | None, body: Any, **_: Any) -> None:
        if type == "DELETED":
            cluster.delete_priority_class(bodies.name_of(body))
        cluster.mark_synced()

    return registry
