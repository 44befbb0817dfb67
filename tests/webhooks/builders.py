"""Builders for webhook tests: Queue, Pod, Namespace and PodGroup manifests, AdmissionReviews.

Manifests are the wire shapes kube-apiserver sends (camelCase dicts); the builders keep the
tables short and say only what a case is about.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from queuetree.api import admission
from queuetree.core import objects
from queuetree.webhooks import reviewing, settings, views

QUEUES = {"group": "scheduling.volcano.sh", "version": "v1beta1", "resource": "queues"}
PODS = {"group": "", "version": "v1", "resource": "pods"}
GATE = objects.QUEUE_ALLOCATION_GATE


def queue(
    name: str,
    parent: str | None = None,
    *,
    capability: Mapping[str, Any] | None = None,
    deserved: Mapping[str, Any] | None = None,
    guarantee: Mapping[str, Any] | None = None,
    state: str | None = None,
    allocated: Mapping[str, Any] | None = None,
    reserved: Mapping[str, Any] | None = None,
    annotations: Mapping[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A Queue manifest; only the fields given are present."""
    body: dict[str, Any] = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": dict(spec),
    }
    if annotations is not None:
        body["metadata"]["annotations"] = dict(annotations)
    if parent is not None:
        body["spec"]["parent"] = parent
    if capability is not None:
        body["spec"]["capability"] = dict(capability)
    if deserved is not None:
        body["spec"]["deserved"] = dict(deserved)
    if guarantee is not None:
        body["spec"]["guarantee"] = {"resource": dict(guarantee)}
    status: dict[str, Any] = {}
    if state is not None:
        status["state"] = state
    if allocated is not None:
        status["allocated"] = dict(allocated)
    if reserved is not None:
        status["reserved"] = dict(reserved)
    if status:
        body["status"] = status
    return body


def pod(
    name: str = "p1",
    namespace: str = "default",
    *,
    annotations: Mapping[str, str] | None = None,
    gates: list[str] | None = None,
    node_name: str | None = None,
    scheduler: str | None = None,
    phase: str | None = None,
    requests: Mapping[str, str] | None = None,
    init_requests: Mapping[str, str] | None = None,
    sidecar_requests: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A Pod manifest; ``requests`` are its container's (limits equal them), ``init_requests``
    an init container's, ``sidecar_requests`` a sidecar's (an init container that restarts
    always)."""
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"containers": [_container("main", requests)]},
    }
    init = []
    if init_requests is not None:
        init.append(_container("init", init_requests))
    if sidecar_requests is not None:
        init.append({**_container("sidecar", sidecar_requests), "restartPolicy": "Always"})
    if init:
        body["spec"]["initContainers"] = init
    if scheduler is not None:
        body["spec"]["schedulerName"] = scheduler
    if phase is not None:
        body["status"] = {"phase": phase}
    if annotations is not None:
        body["metadata"]["annotations"] = dict(annotations)
    if gates is not None:
        body["spec"]["schedulingGates"] = [{"name": g} for g in gates]
    if node_name is not None:
        body["spec"]["nodeName"] = node_name
    return body


def _container(name: str, requests: Mapping[str, str] | None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": name, "image": "busybox"}
    if requests is not None:
        container["resources"] = {"requests": dict(requests), "limits": dict(requests)}
    return container


def review(
    operation: str,
    obj: Mapping[str, Any] | None,
    *,
    old: Mapping[str, Any] | None = None,
    resource: Mapping[str, str] = QUEUES,
    name: str | None = None,
    namespace: str = "",
    uid: str = "uid-1",
    sub_resource: str = "",
) -> dict[str, Any]:
    """An AdmissionReview request as kube-apiserver sends it (``sub_resource``: ``resize`` for
    an in-place resize)."""
    subject = obj if obj is not None else old
    if name is None:
        name = (subject or {}).get("metadata", {}).get("name", "")
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": resource["group"], "version": resource["version"], "kind": "X"},
            "resource": dict(resource),
            "subResource": sub_resource,
            "name": name,
            "namespace": namespace,
            "operation": operation,
            "userInfo": {"username": "kubernetes-admin", "groups": ["system:masters"]},
            "object": obj,
            "oldObject": old,
            "dryRun": False,
        },
    }


def cluster(
    *manifests: Mapping[str, Any],
    namespaces: Mapping[str, Mapping[str, str]] | None = None,
    pod_groups: Mapping[str, str] | None = None,
) -> views.ClusterView:
    """A view with the given Queue manifests (read as the cache reads them)."""
    queues = [views.queue_from_manifest(m) for m in manifests]
    return views.ClusterView.of(
        queues=[q for q in queues if q is not None],
        namespaces=namespaces,
        pod_groups=pod_groups,
    )


def answer(
    path: str,
    body: Mapping[str, Any],
    view: views.ClusterView | None = None,
    rules: settings.ReviewSettings | None = None,
) -> dict[str, Any]:
    """The decoded response of ``path`` to ``body`` (via the bytes the server would send)."""
    result = reviewing.review(
        path,
        json.dumps(body).encode(),
        view=view or views.ClusterView(),
        settings=rules or settings.ReviewSettings(),
    )
    assert result.status == 200, result.body
    response: dict[str, Any] = json.loads(result.body)["response"]
    return response


def outcome(response: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of a response a table compares: allowed, code, message, warnings, patch."""
    status = response.get("status") or {}
    return {
        "allowed": response["allowed"],
        "code": status.get("code"),
        "message": status.get("message"),
        "warnings": response.get("warnings", []),
        "patch": admission.decode_patch(response),  # type: ignore[arg-type]
    }


def allowed(*, warnings: list[str] | None = None, patch: list[Any] | None = None) -> dict[str, Any]:
    return {
        "allowed": True,
        "code": None,
        "message": None,
        "warnings": warnings or [],
        "patch": patch or [],
    }


def denied(message: str, *, code: int = 403, warnings: list[str] | None = None) -> dict[str, Any]:
    return {
        "allowed": False,
        "code": code,
        "message": message,
        "warnings": warnings or [],
        "patch": [],
    }
