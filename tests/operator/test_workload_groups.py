"""The operator creates the PodGroup a workload's gated pods wait for (``workload_groups``)."""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import pytest

from queuetree.api import queue_manifests, workloads
from queuetree.core import objects
from queuetree.operator import planning, queue_status, state, workload_groups, writing
from tests import builders as b
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
    api.fail[f"podgroups/ns/{GROUP}"] = [500, 500]
    cluster.upsert_pod(waiting("a"))
    cluster.mark_synced()
    for round_ in range(2):
        cluster.upsert_pod(dataclasses.replace(waiting("a"), labels={"round": str(round_)}))
        await admission.run_once()
        await admission.wait_writes()
    told = [
        (call.body["involvedObject"]["kind"], call.body["reason"])
        for call in api.calls
        if call.target == "events/ns"
    ]
    assert (api.targets("create").count(f"podgroups/ns/{GROUP}"), told) == (
        2,
        [("Job", "PodGroupCreateFailed")],
    )


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


# -- native PodGroups (--native-pod-groups) and gangs the nodes do not fit

NATIVE = "podgroups.scheduling.k8s.io/ns/g"


def volcano_group(min_member: int = 4, uid: str = "g-uid") -> objects.PodGroup:
    return objects.PodGroup(namespace="ns", name="g", min_member=min_member, uid=uid, queue="q")


class NativeCase(NamedTuple):
    steps: Any
    fail: Any
    expected: Any


NATIVE_CASES = {
    "created once for a group": NativeCase(
        steps=[volcano_group(), volcano_group()],
        fail={},
        expected=[("create", 4)],
    ),
    "a new minMember is patched into its minCount (mutable; its policy is not)": NativeCase(
        steps=[volcano_group(), volcano_group(min_member=2)],
        fail={},
        expected=[("create", 4), ("patch", 2)],
    ),
    "an earlier group's of the same name is deleted, then created anew": NativeCase(
        steps=[volcano_group(uid="g-new"), volcano_group(uid="g-new")],
        fail={NATIVE: [409]},
        expected=[("create", 4), ("get", None), ("delete", None), ("create", 4)],
    ),
    "a group of one is a gang of one (so that its minCount can follow minMember)": NativeCase(
        steps=[volcano_group(min_member=1)],
        fail={},
        expected=[("create", 1)],
    ),
    "a failed creation is tried again by a later cycle": NativeCase(
        steps=[volcano_group(), volcano_group()],
        fail={NATIVE: [500]},
        expected=[("create", 4), ("create", 4)],
    ),
    "one that exists (409) is read and kept when it is the group's": NativeCase(
        steps=[volcano_group(), volcano_group()],
        fail={NATIVE: [409]},
        expected=[("create", 4), ("get", None)],
    ),
    "one that exists (409) with another minCount is given the group's": NativeCase(
        steps=[volcano_group(min_member=3)],
        fail={NATIVE: [409]},
        expected=[("create", 3), ("get", None), ("patch", 3)],
    ),
}


@pytest.mark.parametrize(("steps", "fail", "expected"), NATIVE_CASES.values(), ids=NATIVE_CASES)
async def test_the_native_group_of_each_group_says_its_minimum(
    steps: list[objects.PodGroup], fail: dict[str, list[int]], expected: list[Any]
) -> None:
    cluster, api, _, _, admission = make(native_pod_groups="true")
    api.fail.update(fail)
    api.objects[NATIVE] = {
        "metadata": {
            "ownerReferences": [{"apiVersion": "scheduling.volcano.sh/v1beta1", "uid": "g-uid"}]
        },
        "spec": {"schedulingPolicy": {"gang": {"minCount": 4}}},
    }
    cluster.mark_synced()
    for step in steps:
        cluster.upsert_pod_group(step)
        await admission.run_once()
        await admission.wait_writes()
    calls = [
        (
            call.verb,
            call.body["spec"]["schedulingPolicy"].get("gang", {}).get("minCount", 1)
            if call.verb in ("create", "patch")
            else None,
        )
        for call in api.calls
        if call.target == NATIVE
    ]
    assert calls == expected


async def test_no_native_group_is_written_when_off() -> None:
    cluster, api, _, _, admission = make()
    cluster.upsert_pod_group(volcano_group())
    cluster.mark_synced()
    await admission.run_once()
    await admission.wait_writes()
    assert [call for call in api.calls if "scheduling.k8s.io" in call.target] == []


def member(
    name: str, *, node: str = "", unschedulable: bool = False, gated: bool = False
) -> objects.Pod:
    pod = fakes.pod(name, gates=(fakes.GATE,) if gated else ())
    return dataclasses.replace(pod, group="ns/g", node_name=node, unschedulable=unschedulable)


class UnplacedCase(NamedTuple):
    pods: Any
    native: Any
    expected: Any


UNPLACED = {
    "native: none placed, one unschedulable": UnplacedCase(
        pods=[member("a", unschedulable=True), member("b"), member("c"), member("d")],
        native=True,
        expected="so none starts",
    ),
    "without native: three placed, one unschedulable": UnplacedCase(
        pods=[
            member("a", node="n"),
            member("b", node="n"),
            member("c", node="n"),
            member("d", unschedulable=True),
        ],
        native=False,
        expected="the nodes fit only 3 of its 4 pods",
    ),
    "all four placed": UnplacedCase(
        pods=[member(name, node="n") for name in "abcd"],
        native=True,
        expected=None,
    ),
    "still gated (its queue decides, not the nodes)": UnplacedCase(
        pods=[member(name, gated=True, unschedulable=True) for name in "abcd"],
        native=True,
        expected=None,
    ),
}


@pytest.mark.parametrize(("pods", "native", "expected"), UNPLACED.values(), ids=UNPLACED)
def test_an_admitted_gang_the_nodes_do_not_fit_is_told_once(
    pods: list[objects.Pod], native: bool, expected: str | None
) -> None:
    cluster = state.ClusterState()
    cluster.upsert_pod_group(dataclasses.replace(volcano_group(), owner=OWNER))
    for pod in pods:
        cluster.upsert_pod(pod)
    cluster.mark_synced()
    view = cluster.view()
    events, now = workload_groups.plan_unplaced_gangs(view, told=frozenset(), native=native)
    again, _ = workload_groups.plan_unplaced_gangs(view, told=now, native=native)
    if expected is None:
        assert (events, now) == ([], frozenset())
        return
    assert (
        [(e.type, e.reason, e.owner) for e in events],
        expected in events[0].message,
        "stay reserved in queue q" in events[0].message,
        now,
        again,
    ) == ([("Warning", "GangUnplaced", OWNER)], True, True, frozenset({"g-uid"}), [])


def generated(min_member: int, *, owner_uid: str = "uid-1") -> objects.PodGroup:
    return objects.PodGroup(
        namespace="ns",
        name=f"podgroup-{owner_uid}",
        min_member=min_member,
        uid="g-uid",
        queue="q",
        owner=objects.OwnerReference("batch/v1", "Job", "train", owner_uid),
    )


RESIZED = f"podgroups/ns/{GROUP}"


class ResizeCase(NamedTuple):
    group: objects.PodGroup
    declared: dict[str, str | None]
    """Workload uid -> what it declares (absent: not seen by the watches yet)."""
    with_pod: bool
    expected: list[Any]


RESIZE_CASES = {
    "a workload that declares another minimum: minMember and minResources follow": ResizeCase(
        generated(4),
        {"uid-1": "3"},
        True,
        [
            {
                "metadata": {"annotations": {workloads.PROBLEM_ANNOTATION: None}},
                "spec": {"minMember": 3, "minResources": {"cpu": "3", "memory": "0"}},
            }
        ],
    ),
    "without a pod in view, minResources is left as it is": ResizeCase(
        generated(4),
        {"uid-1": "2"},
        False,
        [
            {
                "metadata": {"annotations": {workloads.PROBLEM_ANNOTATION: None}},
                "spec": {"minMember": 2},
            }
        ],
    ),
    "a value that is not a number is 1, and said in the group": ResizeCase(
        generated(4),
        {"uid-1": "many"},
        False,
        [
            {
                "metadata": {
                    "annotations": {
                        workloads.PROBLEM_ANNOTATION: (
                            "scheduling.volcano.sh/group-min-member: 'many' is not a whole "
                            "number of at least 1: minMember is 1 (write the number of pods "
                            "that must start together)"
                        )
                    }
                },
                "spec": {"minMember": 1},
            }
        ],
    ),
    "the same minimum: nothing is written": ResizeCase(generated(4), {"uid-1": "4"}, True, []),
    "a workload that declares none: the group stays as it is": ResizeCase(
        generated(4), {"uid-1": None}, True, []
    ),
    "a workload the watches have not shown yet: nothing is written": ResizeCase(
        generated(4), {}, True, []
    ),
    "a group that is not the workload's generated one is its author's": ResizeCase(
        dataclasses.replace(generated(4), name="mine"), {"uid-1": "2"}, True, []
    ),
}


@pytest.mark.parametrize(
    ("group", "declared", "with_pod", "expected"), RESIZE_CASES.values(), ids=RESIZE_CASES
)
async def test_a_generated_group_follows_its_workloads_group_min_member(
    group: objects.PodGroup, declared: dict[str, str | None], with_pod: bool, expected: list[Any]
) -> None:
    cluster, api, _, _, admission = make()
    cluster.upsert_pod_group(group)
    if with_pod:
        pod = dataclasses.replace(waiting("a", group.name), resreq=b.res(cpu="1"))
        cluster.upsert_pod(pod)
    for uid, text in declared.items():
        cluster.upsert_declared_minimum(uid, text)
    cluster.mark_synced()
    for _ in range(2):  # planned once: the second cycle sees the resize in flight
        await admission.run_once()
        await admission.wait_writes()
    patches = [
        call.body for call in api.calls if call.verb == "patch" and "podgroups/" in call.target
    ]
    assert patches == expected
