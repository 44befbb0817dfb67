"""The simulated scheduler and kubelet against a real kubesim server (in-process, over HTTP)."""

from __future__ import annotations

import collections
import contextlib
import json
import pathlib
import time
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

from kubesim import harness, simulation
from tests import timing

pytestmark = pytest.mark.kubesim_only(
    reason="kubesim's own simulated scheduler and kubelet; the real backend has kube-scheduler "
    "and kwok instead (the e2e suite compares the two)"
)

T = TypeVar("T")

DEADLINE = timing.DEADLINE


def wait_for(probe: Callable[[], T | None], what: str, deadline: float = DEADLINE) -> T:
    """Poll `probe` until it returns something other than None (or fail after `deadline`)."""
    end = time.monotonic() + deadline
    while True:
        value = probe()
        if value is not None:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {deadline}s waiting for {what}")
        time.sleep(0.02)


class Api:
    """A few raw requests to kubesim, as any client sends them."""

    def __init__(self, cluster: harness.Cluster) -> None:
        self.cluster = cluster

    def request(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json"
    ) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.cluster.url + path,
            data=data,
            method=method,
            headers={
                "Authorization": f"Bearer {self.cluster.sim.token}",
                "Content-Type": content_type,
            },
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def create_pod(self, name: str, **options: Any) -> dict[str, Any]:
        created: dict[str, Any] = self.request(
            "POST", "/api/v1/namespaces/default/pods", make_pod(name, **options)
        )
        return created

    def delete_pod(self, name: str) -> None:
        self.request("DELETE", f"/api/v1/namespaces/default/pods/{name}")

    def pod(self, name: str) -> dict[str, Any] | None:
        return self.cluster.sim.get_object("", "pods", "default", name)


def make_pod(
    name: str,
    *,
    cpu: str | None = None,
    gates: list[str] | None = None,
    annotations: dict[str, str] | None = None,
    created_order: int = 0,
    **spec: Any,
) -> dict[str, Any]:
    resources = {"requests": {"cpu": cpu}} if cpu else {}
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {
            "containers": [{"name": "main", "image": "busybox", "resources": resources}],
            **spec,
        },
    }
    if gates:
        pod["spec"]["schedulingGates"] = [{"name": g} for g in gates]
    return pod


@contextlib.contextmanager
def simulated(tmp_path: pathlib.Path, *nodes: str, **options: Any) -> Iterator[Api]:
    sim_options = simulation.SimulationOptions(
        nodes=[simulation.parse_node_flag(n) for n in nodes], **options
    )
    with harness.running(tmp_path, simulate=sim_options) as cluster:
        api = Api(cluster)
        wait_for(
            lambda: len(cluster.sim.list_objects("", "nodes")) == len(nodes) or None,
            "the nodes to be created",
        )
        yield api


def phase_of(api: Api, name: str, phase: str) -> Callable[[], dict[str, Any] | None]:
    def probe() -> dict[str, Any] | None:
        pod = api.pod(name)
        return pod if pod is not None and (pod.get("status") or {}).get("phase") == phase else None

    return probe


def condition(pod: dict[str, Any], kind: str) -> dict[str, Any]:
    found = [c for c in (pod.get("status") or {}).get("conditions") or [] if c["type"] == kind]
    return found[0] if found else {}


def scheduled_condition(
    api: Api, name: str, reason: str, message: str = ""
) -> Callable[[], dict[str, Any] | None]:
    def probe() -> dict[str, Any] | None:
        pod = api.pod(name)
        if pod is None:
            return None
        found = condition(pod, "PodScheduled")
        if found.get("reason") == reason and (not message or found.get("message") == message):
            return pod
        return None

    return probe


def test_nodes_of_the_options_are_created_through_the_api(tmp_path: pathlib.Path) -> None:
    with simulated(tmp_path, "n1:cpu=4,memory=8Gi,label.pool=a", "n2:cpu=2") as api:
        nodes = api.cluster.sim.list_objects("", "nodes")
        assert [
            (n["metadata"]["name"], n["metadata"]["labels"].get("pool"), n["status"]["allocatable"])
            for n in nodes
        ] == [
            ("n1", "a", {"cpu": "4", "memory": "8Gi", "pods": "110"}),
            ("n2", None, {"cpu": "2", "pods": "110"}),
        ]


def test_a_pending_pod_is_bound_to_the_freest_node_and_runs(tmp_path: pathlib.Path) -> None:
    with simulated(tmp_path, "small:cpu=2,memory=4Gi", "big:cpu=8,memory=4Gi") as api:
        api.create_pod("p1", cpu="1")

        pod = wait_for(phase_of(api, "p1", "Running"), "p1 to run")

        statuses = pod["status"]["containerStatuses"]
        assert pod["spec"]["nodeName"] == "big"
        assert {c["type"]: c["status"] for c in pod["status"]["conditions"]} == {
            "PodReadyToStartContainers": "True",
            "Initialized": "True",
            "Ready": "True",
            "ContainersReady": "True",
            "PodScheduled": "True",
        }
        assert [(s["name"], s["ready"], list(s["state"])) for s in statuses] == [
            ("main", True, ["running"])
        ]
        assert pod["status"]["startTime"]


def test_a_pod_with_run_seconds_succeeds_after_that_long(tmp_path: pathlib.Path) -> None:
    with simulated(tmp_path, "n1:cpu=2") as api:
        # Timed from before the creation: a lower bound that a loaded machine only lengthens
        # (timed from when Running was seen, a late look left less than the run to measure).
        created = time.monotonic()
        api.create_pod("job", annotations={simulation.RUN_SECONDS_ANNOTATION: "0.2"})
        wait_for(phase_of(api, "job", "Running"), "job to run")

        pod = wait_for(phase_of(api, "job", "Succeeded"), "job to succeed")

        assert time.monotonic() - created >= 0.2
        terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
        assert (terminated["exitCode"], terminated["reason"]) == (0, "Completed")
        assert (condition(pod, "Ready")["status"], condition(pod, "Ready")["reason"]) == (
            "False",
            "PodCompleted",
        )


def test_a_gated_pod_waits_until_its_gates_are_removed(tmp_path: pathlib.Path) -> None:
    with simulated(tmp_path, "n1:cpu=2") as api:
        api.create_pod("gated", gates=["queuetree.io/admission"])
        api.create_pod("witness")
        wait_for(phase_of(api, "witness", "Running"), "the witness pod to run")
        pod = api.pod("gated")
        assert pod is not None
        assert ("nodeName" not in pod["spec"], condition(pod, "PodScheduled")["reason"]) == (
            True,
            "SchedulingGated",
        )

        api.request(
            "PATCH",
            "/api/v1/namespaces/default/pods/gated",
            [{"op": "remove", "path": "/spec/schedulingGates/0"}],
            "application/json-patch+json",
        )

        assert (
            wait_for(phase_of(api, "gated", "Running"), "the ungated pod to run")["spec"][
                "nodeName"
            ]
            == "n1"
        )


def test_a_pod_that_fits_nowhere_is_unschedulable_until_room_frees_up(
    tmp_path: pathlib.Path,
) -> None:
    with simulated(tmp_path, "n1:cpu=2", "n2:cpu=1,taint.gpu:NoSchedule") as api:
        api.create_pod("hog", cpu="2", terminationGracePeriodSeconds=3)
        wait_for(phase_of(api, "hog", "Running"), "the hog to run")
        api.create_pod("waiter", cpu="1")

        message = (
            "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {gpu: }."
        )
        pod = wait_for(
            scheduled_condition(api, "waiter", "Unschedulable", message),
            "waiter to be unschedulable",
        )
        assert (pod["status"]["phase"], condition(pod, "PodScheduled")["status"]) == (
            "Pending",
            "False",
        )

        api.delete_pod("hog")
        # Terminating for its grace period, the hog still holds its cpu on n1: the waiter
        # (read first) stays unbound as long as the hog (read second) is there.
        terminating = api.pod("hog")
        assert terminating is not None
        assert terminating["metadata"]["deletionGracePeriodSeconds"] == 3
        end = time.monotonic() + DEADLINE
        while True:
            waiter, hog = api.pod("waiter"), api.pod("hog")
            if hog is None:
                break
            assert waiter is not None
            assert waiter["spec"].get("nodeName") is None, "bound while the hog still runs"
            assert time.monotonic() < end, "the hog outlived its grace period"
            time.sleep(0.05)

        assert (
            wait_for(phase_of(api, "waiter", "Running"), "waiter to run")["spec"]["nodeName"]
            == "n1"
        )


def test_the_unschedulable_condition_is_written_only_when_it_changes(
    tmp_path: pathlib.Path,
) -> None:
    with simulated(tmp_path, "n1:cpu=1") as api:
        api.create_pod("big", cpu="2")
        wait_for(scheduled_condition(api, "big", "Unschedulable"), "big to be unschedulable")
        # More pods come and go; none frees room for big, and its message stays the same.
        for name in ("a", "b"):
            api.create_pod(name, annotations={simulation.RUN_SECONDS_ANNOTATION: "0"})
        for name in ("a", "b"):
            wait_for(phase_of(api, name, "Succeeded"), f"{name} to succeed")
        api.create_pod("huge", cpu="3")
        wait_for(scheduled_condition(api, "huge", "Unschedulable"), "huge to be unschedulable")

        writes = collections.Counter(
            r.name
            for r in api.cluster.sim.audit()
            if (r.verb, r.resource, r.subresource) == ("patch", "pods", "status")
        )
        assert (writes["big"], writes["huge"]) == (1, 1)


def test_the_pods_count_of_a_node_limits_it(tmp_path: pathlib.Path) -> None:
    with simulated(tmp_path, "n1:pods=2") as api:
        for name in ("p1", "p2", "p3"):
            api.create_pod(name)

        wait_for(
            scheduled_condition(
                api, "p3", "Unschedulable", "0/1 nodes are available: 1 Too many pods."
            ),
            "the third pod to be unschedulable",
        )
        assert [api.pod(n)["spec"].get("nodeName") for n in ("p1", "p2")] == ["n1", "n1"]  # type: ignore[index]


def test_pods_of_another_scheduler_are_left_alone(tmp_path: pathlib.Path) -> None:
    with simulated(tmp_path, "n1:cpu=1") as api:
        api.create_pod("foreign", schedulerName="volcano")
        api.create_pod("ours")
        wait_for(phase_of(api, "ours", "Running"), "ours to run")

        foreign = api.pod("foreign")
        assert foreign is not None
        assert ("nodeName" in foreign["spec"], foreign["status"]["phase"]) == (False, "Pending")


def test_without_the_scheduler_pods_stay_pending_but_bound_ones_run(tmp_path: pathlib.Path) -> None:
    with simulated(tmp_path, "n1:cpu=1", scheduler=False) as api:
        api.create_pod("free")
        api.create_pod("pinned", nodeName="n1")

        wait_for(phase_of(api, "pinned", "Running"), "the pinned pod to run")
        free = api.pod("free")
        assert free is not None
        assert ("nodeName" in free["spec"], free["status"]["phase"]) == (False, "Pending")


def test_the_simulation_relists_after_dropped_watches_and_compaction(
    tmp_path: pathlib.Path,
) -> None:
    with simulated(tmp_path, "n1:cpu=4") as api:
        api.create_pod("before")
        wait_for(phase_of(api, "before", "Running"), "the first pod to run")
        api.create_pod("blocked", cpu="8")
        wait_for(
            scheduled_condition(api, "blocked", "Unschedulable"), "the big pod to be unschedulable"
        )

        api.cluster.sim.compact()
        api.cluster.sim.drop_watches()  # reconnecting from the last RV now answers 410: re-list
        api.create_pod("after")
        api.delete_pod("before")
        api.request(
            "PATCH",
            "/api/v1/nodes/n1/status",
            {"status": {"allocatable": {"cpu": "16", "pods": "110"}}},
            "application/merge-patch+json",
        )

        assert wait_for(phase_of(api, "after", "Running"), "a pod created after the drop to run")
        assert wait_for(phase_of(api, "blocked", "Running"), "the big pod to fit the grown node")
