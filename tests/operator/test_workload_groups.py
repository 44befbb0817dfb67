"""The operator creates the PodGroup a workload's gated pods wait for (``workload_groups``)."""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import pytest

from queuetree.api import queue_manifests
from queuetree.core import objects
from queuetree.operator import planning, queue_status, state, workload_groups, writing
from tests.operator import fakes
from tests.operator.test_cycle import make

GROUP = "podgroup-uid-1"
CONTROLLER = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "name": "train",
    "uid": "uid-1",
    "controller": True,
}


def waiting(name: str, group: str = GROUP) -> objects.Pod:
    pod = fakes.pod(name)
    return dataclasses.replace(
        pod,
        group=f"ns/{group}",
        annotations={**pod.annotations, objects.GROUP_NAME_ANNOTATION: group},
    )


def pod_body(name: str, *references: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "annotations": {"scheduling.volcano.sh/group-min-member": "2"},
            "ownerReferences": list(references),
        },
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
    }


JOB = {"metadata": {"name": "train", "uid": "uid-1", "annotations": {}}, "spec": {}}
CREATED = {
    "apiVersion": "scheduling.volcano.sh/v1beta1",
    "kind": "PodGroup",
    "metadata": {
        "name": GROUP,
        "namespace": "ns",
        "ownerReferences": [
            {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "uid-1"}
        ],
    },
    "spec": {"minMember": 2, "minResources": {"cpu": "2", "memory": "0"}},
}


class CreationCase(NamedTuple):
    objects: Any
    expected: Any


CASES = {
    "the group of the pods' Job, made from the first pod and the Job": CreationCase(
        objects={"pods/ns/a": pod_body("a", CONTROLLER), "jobs/ns/train": JOB},
        expected=(["pods/ns/a", "jobs/ns/train"], [CREATED]),
    ),
    "a pod whose controller is not the group's owner: the group is its author's": CreationCase(
        objects={"pods/ns/a": pod_body("a", {**CONTROLLER, "uid": "uid-2"})},
        expected=(["pods/ns/a"], []),
    ),
    "the Job is gone: nothing is created": CreationCase(
        objects={"pods/ns/a": pod_body("a", CONTROLLER)},
        expected=(["pods/ns/a", "jobs/ns/train"], []),
    ),
    "another Job of the same name: nothing is created": CreationCase(
        objects={
            "pods/ns/a": pod_body("a", CONTROLLER),
            "jobs/ns/train": {**JOB, "metadata": {"name": "train", "uid": "uid-9"}},
        },
        expected=(["pods/ns/a", "jobs/ns/train"], []),
    ),
}


@pytest.mark.parametrize(("objects_", "expected"), CASES.values(), ids=CASES.keys())
async def test_a_workloads_group_is_created_once_for_its_waiting_pods(
    objects_: dict[str, Any], expected: tuple[list[str], list[dict[str, Any]]]
) -> None:
    cluster, api, _, _, admission = make()
    api.objects.update(objects_)
    for name in ("b", "a"):
        cluster.upsert_pod(waiting(name))
    cluster.upsert_pod(waiting("hand", group="my-group"))
    cluster.mark_synced()
    for _ in range(2):  # the second cycle creates nothing again
        await admission.run_once()
        await admission.wait_writes()
    created = [call.body for call in api.calls if call.target.startswith("podgroups/")]
    assert (api.targets("get"), created) == expected


async def test_a_group_that_failed_to_be_created_is_created_by_a_later_cycle() -> None:
    cluster, api, _, _, admission = make()
    api.objects.update({"pods/ns/a": pod_body("a", CONTROLLER), "jobs/ns/train": JOB})
    api.fail[f"podgroups/ns/{GROUP}"] = [500]
    cluster.upsert_pod(waiting("a"))
    cluster.mark_synced()
    for round_ in range(2):
        cluster.upsert_pod(dataclasses.replace(waiting("a"), labels={"round": str(round_)}))
        await admission.run_once()
        await admission.wait_writes()
    assert api.targets("create").count(f"podgroups/ns/{GROUP}") == 2


def test_nothing_is_planned_for_groups_that_exist() -> None:
    cluster = state.ClusterState()
    cluster.upsert_pod(waiting("a"))
    cluster.upsert_pod_group(objects.PodGroup(namespace="ns", name=GROUP))
    cluster.mark_synced()
    assert workload_groups.plan_group_creations(cluster.view(), creating=frozenset()) == []


OWNER = objects.OwnerReference("batch/v1", "Job", "train", "uid-1")


async def test_a_groups_change_of_admission_is_told_to_its_workload_too() -> None:
    """``kubectl describe job`` shows why its pods wait: the Event of the group's changed
    admission condition goes to the group and to its owner, naming the group."""
    cluster = state.ClusterState()
    api = fakes.FakeKube()
    writer = writing.Writer(
        cluster=cluster,
        api=api,
        metrics_=None,
        limits=writing.Limits(status_writers=1, event_writers=1, eviction_retry=1.0),
        wake=lambda: None,
        clock=lambda: 0.0,
        wall_clock=lambda: 0.0,
    )
    message = "queue 'q' cannot take the pod group's minResources on cpu: requested 4, ..."
    event = queue_status.GroupEvent(
        f"ns/{GROUP}", "g-uid", "Normal", "Unschedulable", message, owner=OWNER
    )
    writer.submit(
        planning.Writes(pod_groups={f"ns/{GROUP}": {"phase": "Pending"}}, group_events=(event,)),
        view=cluster.view(),
    )
    await writer.wait()
    told = [
        (
            call.body["involvedObject"]["kind"],
            call.body["involvedObject"].get("uid"),
            call.body["message"],
        )
        for call in api.calls
        if call.target == "events/ns"
    ]
    assert told == [
        ("PodGroup", "g-uid", message),
        ("Job", "uid-1", f"PodGroup {GROUP}: {message}"),
    ]


OWNERS = {
    "none": (None, None),
    "the controller among others": (
        [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "u0"},
            {**CONTROLLER, "controller": True},
        ],
        OWNER,
    ),
    "the first complete one without a controller": (
        [{"kind": "Job", "name": "broken"}, {**CONTROLLER, "controller": False}],
        OWNER,
    ),
}


@pytest.mark.parametrize(("references", "expected"), OWNERS.values(), ids=OWNERS.keys())
def test_a_pod_groups_owner_is_read_from_its_owner_references(
    references: list[dict[str, Any]] | None, expected: objects.OwnerReference | None
) -> None:
    metadata: dict[str, Any] = {"name": GROUP, "namespace": "ns"}
    if references is not None:
        metadata["ownerReferences"] = references
    manifest = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": metadata,
    }
    assert queue_manifests.parse_pod_group(manifest).owner == expected
