"""Workloads go through their queues whole, with no hand-written PodGroup (issue 33 item 2).

An opted-in pod that a controller owns and that names no PodGroup joins the group of its
workload, ``podgroup-<owner uid>`` (Volcano's name), which the operator creates: queue from the
pod, the owner or the namespace; ``minMember`` from ``scheduling.volcano.sh/group-min-member``;
``minResources`` the pod's requests times ``minMember``; an ownerReference to the owner.

On the real backend the Job, Deployment and StatefulSet controllers make the pods. kubesim
stores these objects but runs none of their controllers, so there the test writes the pods
the controller would (with their ownerReferences to the stored owner), and what is tested is
queuetree's part: the webhook, the group, the admission.
"""

from __future__ import annotations

import json
from typing import Any

from e2e import support, workloads


def raise_capability(kube: support.Kube, queue: str, cpu: str) -> None:
    patch = json.dumps({"spec": {"capability": {"cpu": cpu}}})
    kube.must(kube.kubectl("patch", "queue", queue, "--type=merge", "-p", patch))


def group_summary(group: dict[str, Any]) -> tuple[Any, ...]:
    spec = group.get("spec") or {}
    owners = (group.get("metadata") or {}).get("ownerReferences") or [{}]
    return (
        group["metadata"]["name"].startswith("podgroup-"),
        owners[0].get("kind"),
        spec.get("minMember"),
        (spec.get("minResources") or {}).get("cpu"),
        spec.get("queue"),
    )


def test_a_job_of_four_that_needs_all_four_runs_none_until_all_four_fit(
    kube: support.Kube,
) -> None:
    queue = support.unique("job-gang")
    kube.must(kube.apply(support.queue(queue, capability={"cpu": "300m", "memory": "1Gi"})))
    workload = workloads.Workload(
        kube, workloads.job("train", namespace=kube.namespace, queue=queue, pods=4, min_member=4)
    )
    support.eventually(
        lambda: len(workload.pods()) == 4 and workload.group(), what="four pods and their group"
    )
    support.eventually(
        lambda: all(
            "requested 400m" in kube.explanation(p["metadata"]["name"]) for p in workload.pods()
        ),
        what="every pod is told the whole Job does not fit",
        diagnose=lambda: str([kube.explanation(p["metadata"]["name"]) for p in workload.pods()]),
    )
    held = (workload.started(), workload.gated(), group_summary(workload.group()))
    waiting = support.eventually(
        lambda: job_events(kube, "train", "Unschedulable"), what="the Job is told why it waits"
    )
    explained = kube.must(
        kube.plugin("explain", "job/train", "-n", kube.namespace, "--width=400")
    ).stdout
    pending = kube.must(kube.plugin("pending", queue, "--width=400")).stdout
    raise_capability(kube, queue, "400m")
    support.eventually(lambda: workload.started() == 4, what="all four run together")
    admitted = support.eventually(
        lambda: job_events(kube, "train", "Inqueue"), what="the Job is told it was admitted"
    )
    group = workload.group()["metadata"]["name"]
    kube.must(kube.kubectl("delete", "job", "train", "-n", kube.namespace, "--wait=false"))
    support.eventually(
        lambda: kube.get(support.PODGROUP, group) is None,
        what="the group is garbage-collected with its Job",
    )
    assert (
        held,
        "requested 400m, used 0 of capability 300m" in waiting[0],
        len(admitted),
        "requested 400m" in explained,
        pending.count("Job/train"),
    ) == ((0, 4, (True, "Job", 4, "400m", queue)), True, 1, True, 4), (waiting, explained, pending)


def job_events(kube: support.Kube, name: str, reason: str) -> list[str]:
    """The messages of the Events of Job ``name`` with ``reason`` (``kubectl describe job``)."""
    return [
        str(event.get("message"))
        for event in kube.events_of("Job", name)
        if event.get("reason") == reason
    ]


def test_a_deployment_grows_and_shrinks_pod_by_pod_beyond_its_minimum(
    kube: support.Kube,
) -> None:
    queue = support.unique("deploy")
    kube.must(kube.apply(support.queue(queue, capability={"cpu": "300m", "memory": "1Gi"})))
    manifest = workloads.replicated(
        "Deployment", "web", namespace=kube.namespace, queue=queue, replicas=2, min_member=2
    )
    workload = workloads.Workload(kube, manifest)
    support.eventually(lambda: workload.running() == 2, what="the minimum of two runs together")
    workload.scale(3)
    support.eventually(lambda: workload.running() == 3, what="a third pod runs alone")
    workload.scale(4)
    support.eventually(
        lambda: len(workload.pods()) == 4 and workload.gated() == 1,
        what="a fourth pod waits: the queue has room for three",
    )
    at_four = (workload.running(), workload.gated(), group_summary(workload.group()))
    workload.scale(2)
    support.eventually(
        lambda: len(workload.pods()) == 2 and workload.running() == 2,
        what="scaled down to two running pods",
    )
    assert at_four == (3, 1, (True, "ReplicaSet", 2, "200m", queue))


def test_a_stateful_set_waits_for_its_group_min_member(kube: support.Kube) -> None:
    queue = support.unique("sts")
    kube.must(kube.apply(support.queue(queue, capability={"cpu": "100m", "memory": "1Gi"})))
    manifest = workloads.replicated(
        "StatefulSet", "db", namespace=kube.namespace, queue=queue, replicas=2, min_member=2
    )
    manifest["spec"]["podManagementPolicy"] = "Parallel"
    workload = workloads.Workload(kube, manifest)
    support.eventually(
        lambda: len(workload.pods()) == 2 and workload.group(), what="two pods and their group"
    )
    support.eventually(
        lambda: all(
            "requested 200m" in kube.explanation(p["metadata"]["name"]) for p in workload.pods()
        ),
        what="both pods are told the set does not fit",
    )
    held = (workload.running(), group_summary(workload.group()))
    raise_capability(kube, queue, "200m")
    support.eventually(lambda: workload.running() == 2, what="both run together")
    assert held == (0, (True, "StatefulSet", 2, "200m", queue))


def test_a_tenant_editing_its_workloads_group_never_runs_the_queue_past_capability(
    kube: support.Kube,
) -> None:
    """The tenant's attempts on hand-written groups (``test_inqueue_groups.py``,
    ``test_invariant.py``), made on a generated one: moving the admitted group to a roomier
    queue is refused; shrinking its minMember and minResources is accepted, and its minMember
    is put back to what the workload declares (its one place, issue 33 item 2); either way
    its pods beyond the minimum go in one by one, within the queue's capability."""
    queue, elsewhere = support.unique("edit"), support.unique("edit-other")
    kube.must(
        kube.apply(
            support.queue(queue, capability={"cpu": "300m", "memory": "1Gi"}),
            support.queue(elsewhere),
        )
    )
    workload = workloads.Workload(
        kube,
        workloads.replicated(
            "Deployment", "web", namespace=kube.namespace, queue=queue, replicas=2, min_member=2
        ),
    )
    support.eventually(lambda: workload.running() == 2, what="the workload's minimum runs")
    name = workload.group()["metadata"]["name"]
    tenant = kube.as_tenant()

    def patch(spec: dict[str, Any]) -> bool:
        result = tenant.kubectl(
            "patch",
            support.PODGROUP,
            name,
            "-n",
            kube.namespace,
            "--type=merge",
            "-p",
            json.dumps({"spec": spec}),
        )
        return result.ok

    edits = (
        patch({"queue": elsewhere}),
        patch({"minMember": 1, "minResources": {"cpu": "0"}}),
        patch({"minResources": {"cpu": "50"}}),
    )
    workload.scale(5)
    # Admitted is not yet running: kube-scheduler places the third pod a moment after its gate
    # goes (later still where it waits for the gang's native PodGroup).
    support.eventually(
        lambda: len(workload.pods()) == 5 and workload.gated() == 2 and workload.running() == 3,
        what="five pods, three running and two held by the queue's capability",
        diagnose=lambda: (
            f"running {workload.running()}, gated {workload.gated()}: "
            + str(
                [
                    (p["metadata"]["name"], (p.get("status") or {}).get("conditions"))
                    for p in workload.pods()
                    if not (p.get("spec") or {}).get("nodeName")
                ]
            )
        ),
    )
    restored = support.eventually(
        lambda: group_summary(workload.group())[2] == 2,
        what="the group's minMember is put back to what the workload declares",
    )
    assert (edits, workload.running(), workload.gated(), restored) == (
        (False, True, True),
        3,
        2,
        True,
    )


def native_min_count(kube: support.Kube, name: str) -> int | None:
    """``gang.minCount`` of the native PodGroup ``name``; None where the API is not served
    (kubesim, or a control plane without the Workload API) or it does not exist."""
    result = kube.kubectl("get", support.NATIVE_PODGROUP, name, "-n", kube.namespace, "-o", "json")
    if not result.ok:
        return None
    policy = (json.loads(result.stdout).get("spec") or {}).get("schedulingPolicy") or {}
    count = (policy.get("gang") or {}).get("minCount")
    return count if isinstance(count, int) else None


def test_a_workloads_group_min_member_edited_with_kubectl_is_followed_within_capability(
    kube: support.Kube,
) -> None:
    """Issue 33 item 2: the workload's ``group-min-member`` (here on the StatefulSet itself,
    as ``kubectl annotate`` writes it) is followed by its generated PodGroup: ``minMember``,
    and ``minResources`` recomputed; and by the native PodGroup's ``minCount`` where the
    Workload API is served. Lowered from 4 to 3 in a queue with room for 3, three pods run;
    raised back to 4, the three keep running and the fourth still waits: the queue never runs
    past its capability."""
    queue = support.unique("resize")
    kube.must(kube.apply(support.queue(queue, capability={"cpu": "300m", "memory": "1Gi"})))
    manifest = workloads.replicated(
        "StatefulSet", "db", namespace=kube.namespace, queue=queue, replicas=4, min_member=4
    )
    del manifest["spec"]["template"]["metadata"]["annotations"][workloads.MIN_MEMBER]
    manifest["metadata"]["annotations"] = {workloads.MIN_MEMBER: "4"}
    manifest["spec"]["podManagementPolicy"] = "Parallel"
    workload = workloads.Workload(kube, manifest)
    support.eventually(
        lambda: len(workload.pods()) == 4 and workload.group(), what="four pods and their group"
    )
    name = workload.group()["metadata"]["name"]
    native = support.native_served(kube)
    if native:
        support.eventually(
            lambda: native_min_count(kube, name) == 4, what="the native PodGroup, minCount 4"
        )
    at_four = (workload.running(), group_summary(workload.group()))

    def annotate(value: str) -> None:
        kube.must(
            kube.kubectl(
                "annotate",
                "statefulset",
                "db",
                "-n",
                kube.namespace,
                f"{workloads.MIN_MEMBER}={value}",
                "--overwrite",
            )
        )

    annotate("3")
    support.eventually(
        lambda: group_summary(workload.group())[2:4] == (3, "300m"),
        what="the group follows: minMember 3, minResources 300m",
    )
    support.eventually(
        lambda: workload.running() == 3 and workload.gated() == 1,
        what="three pods run, the fourth waits for room",
        diagnose=lambda: f"running {workload.running()}, gated {workload.gated()}",
    )
    if native:
        support.eventually(
            lambda: native_min_count(kube, name) == 3, what="the native minCount follows to 3"
        )
    annotate("4")
    support.eventually(
        lambda: group_summary(workload.group())[2:4] == (4, "400m"),
        what="the group follows: minMember 4, minResources 400m",
    )
    if native:
        support.eventually(
            lambda: native_min_count(kube, name) == 4, what="the native minCount follows to 4"
        )
    at_four_again = (workload.running(), workload.gated())
    assert (at_four, at_four_again) == ((0, (True, "StatefulSet", 4, "400m", queue)), (3, 1))
