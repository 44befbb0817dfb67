"""The PodGroup of a workload, as Volcano's PodGroup controller makes it (``api.workloads``)."""

from __future__ import annotations

from typing import Any, NamedTuple

import pytest

from queuetree.api import workloads
from queuetree.api.workloads import registry

MIN = workloads.MIN_MEMBER_ANNOTATION
QUEUE = "scheduling.volcano.sh/queue-name"
JOB = workloads.Owner("batch/v1", "Job", "train", "uid-1")


def pod(
    *,
    annotations: dict[str, str] | None = None,
    owners: list[dict[str, Any]] | None = None,
    priority_class: str = "",
    cpu: str = "500m",
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    metadata: dict[str, Any] = {"name": "train-0", "namespace": "ml"}
    if annotations:
        metadata["annotations"] = annotations
    if owners is not None:
        metadata["ownerReferences"] = owners
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def job(*, annotations: dict[str, str] | None = None, template: dict[str, str] | None = None):
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "uid": "uid-1", "annotations": annotations or {}},
        "spec": {"template": {"metadata": {"annotations": template or {}}, "spec": {}}},
    }


REFERENCE = {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "uid-1"}


def group(spec: dict[str, Any], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": "podgroup-uid-1",
        "namespace": "ml",
        "ownerReferences": [REFERENCE],
    }
    if annotations:
        metadata["annotations"] = annotations
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": metadata,
        "spec": spec,
    }


class GroupCase(NamedTuple):
    pod: Any
    owner: Any
    expected: Any


GROUPS = {
    "no annotation anywhere: minMember 1, the pod's requests, no queue (the namespace's)": (
        GroupCase(
            pod=pod(),
            owner=job(),
            expected=group({"minMember": 1, "minResources": {"cpu": "500m", "memory": "1Gi"}}),
        )
    ),
    "the owner's group-min-member sizes the group, and its requests times minMember": GroupCase(
        pod=pod(priority_class="high"),
        owner=job(annotations={MIN: "4"}),
        expected=group(
            {
                "minMember": 4,
                "priorityClassName": "high",
                "minResources": {"cpu": "2", "memory": "4Gi"},
            }
        ),
    ),
    "the owner's annotation beats its template's (which the pod carries)": GroupCase(
        pod=pod(annotations={MIN: "2"}),
        owner=job(annotations={MIN: "3"}, template={MIN: "2"}),
        expected=group({"minMember": 3, "minResources": {"cpu": "1500m", "memory": "3Gi"}}),
    ),
    "the pod's queue beats the owner's": GroupCase(
        pod=pod(annotations={QUEUE: "team-a"}),
        owner=job(annotations={QUEUE: "team-b"}),
        expected=group(
            {"minMember": 1, "queue": "team-a", "minResources": {"cpu": "500m", "memory": "1Gi"}}
        ),
    ),
    "the owner's queue when the pod names none": GroupCase(
        pod=pod(),
        owner=job(template={QUEUE: "team-b"}),
        expected=group(
            {"minMember": 1, "queue": "team-b", "minResources": {"cpu": "500m", "memory": "1Gi"}}
        ),
    ),
    "an owner not read: the pod's own annotations": GroupCase(
        pod=pod(annotations={MIN: "2"}),
        owner=None,
        expected=group({"minMember": 2, "minResources": {"cpu": "1", "memory": "2Gi"}}),
    ),
    "a minimum that is no whole number is 1, and said so on the group": GroupCase(
        pod=pod(),
        owner=job(annotations={MIN: "two"}),
        expected=group(
            {"minMember": 1, "minResources": {"cpu": "500m", "memory": "1Gi"}},
            {
                workloads.PROBLEM_ANNOTATION: f"{MIN}: 'two' is not a whole number of at least "
                "1: minMember is 1 (write the number of pods that must start together)"
            },
        ),
    ),
}


@pytest.mark.parametrize(("pod_", "owner", "expected"), GROUPS.values(), ids=GROUPS.keys())
def test_a_workloads_group_is_made_from_its_pod_and_its_owner(
    pod_: dict[str, Any], owner: dict[str, Any] | None, expected: dict[str, Any]
) -> None:
    assert workloads.pod_group(pod=pod_, owner=JOB, owner_body=owner) == expected


CONTROLLER = {**REFERENCE, "controller": True}
OWNERS = {
    "no owner": ([], None),
    "an owner that is not the controller": ([REFERENCE], None),
    "the controller": ([REFERENCE, {**CONTROLLER, "name": "other", "controller": False}], None),
    "the controller among others": (
        [{**REFERENCE, "kind": "ConfigMap", "apiVersion": "v1"}, CONTROLLER],
        JOB,
    ),
    "a controller without a uid": ([{**CONTROLLER, "uid": ""}], None),
}


@pytest.mark.parametrize(("owners", "expected"), OWNERS.values(), ids=OWNERS.keys())
def test_a_pods_workload_is_its_controller(
    owners: list[dict[str, Any]], expected: workloads.Owner | None
) -> None:
    assert workloads.controller_of(pod(owners=owners)) == expected


KINDS = {
    "a Job": (JOB, "jobs", "/apis/batch/v1/namespaces/ml/jobs/train"),
    "a ReplicaSet": (
        workloads.Owner("apps/v1", "ReplicaSet", "web-1", "u"),
        "replicasets",
        "/apis/apps/v1/namespaces/ml/replicasets/web-1",
    ),
    "a StatefulSet": (
        workloads.Owner("apps/v1", "StatefulSet", "db", "u"),
        "statefulsets",
        "/apis/apps/v1/namespaces/ml/statefulsets/db",
    ),
    "any other kind is not read": (
        workloads.Owner("example.com/v1", "Thing", "t", "u"),
        None,
        None,
    ),
}


@pytest.mark.parametrize(("owner", "plural", "path"), KINDS.values(), ids=KINDS.keys())
def test_each_registered_kind_is_read_from_its_resource(
    owner: workloads.Owner, plural: str | None, path: str | None
) -> None:
    assert (owner.workload_kind.plural, owner.path("ml")) == (plural, path)


def test_the_registry_names_each_kind_once() -> None:
    names = [(kind.api_version, kind.kind) for kind in registry.KINDS]
    assert sorted(names) == sorted(set(names))


def test_a_generated_name_is_volcanos() -> None:
    assert (
        workloads.group_name(JOB),
        workloads.is_generated("podgroup-uid-1"),
        workloads.is_generated("podgroup-"),
        workloads.is_generated("my-group"),
    ) == ("podgroup-uid-1", True, False, False)
