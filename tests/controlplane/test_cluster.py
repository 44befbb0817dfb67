"""The control plane harness: kwok's nodes from manifests, readiness, failures that name the
process, and no process left behind, whether the harness stops or its parent crashes."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import textwrap
from collections.abc import Mapping
from typing import Any, NamedTuple

import pytest
import yaml

from controlplane import building, cluster

LIST = {
    "apiVersion": "v1",
    "kind": "List",
    "items": [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "gpu-1", "labels": {"pool": "gpu"}},
            "spec": {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]},
            "status": {"allocatable": {"cpu": "64", "nvidia.com/gpu": "8"}},
        },
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "not-a-node"}},
    ],
}
SINGLE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "cpu-1", "annotations": {"owner": "me"}},
    "status": {"capacity": {"cpu": "8"}, "allocatable": {"cpu": "7500m"}},
}


def _written(tmp_path: pathlib.Path, *documents: Mapping[str, Any]) -> pathlib.Path:
    path = tmp_path / "nodes.yaml"
    path.write_text(yaml.safe_dump_all(list(documents)))
    return path


def test_node_manifests_become_kwok_nodes_with_capacity_labels_and_taints(
    tmp_path: pathlib.Path,
) -> None:
    flagged = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "flag-1"}, "status": {}}
    nodes = cluster.fake_nodes([_written(tmp_path, LIST, SINGLE)], [flagged])
    summary = {
        n["metadata"]["name"]: (
            n["metadata"]["annotations"],
            n["metadata"]["labels"].get("pool"),
            n["metadata"]["labels"]["kubernetes.io/hostname"],
            n["status"],
            n["spec"].get("taints"),
        )
        for n in nodes
    }
    fake = {cluster.FAKE_NODE_ANNOTATION: "fake"}
    assert summary == {
        "flag-1": (fake, None, "flag-1", {"allocatable": {}, "capacity": {}}, None),
        "gpu-1": (
            fake,
            "gpu",
            "gpu-1",
            {
                "allocatable": {"cpu": "64", "nvidia.com/gpu": "8"},
                "capacity": {"cpu": "64", "nvidia.com/gpu": "8"},
            },
            [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
        ),
        "cpu-1": (
            {"owner": "me", **fake},
            None,
            "cpu-1",
            {"allocatable": {"cpu": "7500m"}, "capacity": {"cpu": "8"}},
            None,
        ),
    }


READY = {"type": "Ready", "status": "True"}


class UsableCase(NamedTuple):
    status: Any
    taints: Any
    usable: Any


USABLE = {
    "Ready and untainted": UsableCase(status={"conditions": [READY]}, taints=[], usable=True),
    "not Ready yet": UsableCase(
        status={"conditions": [{"type": "Ready", "status": "False"}]}, taints=[], usable=False
    ),
    "Ready but still tainted not-ready": UsableCase(
        status={"conditions": [READY]},
        taints=[{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}],
        usable=False,
    ),
    "Ready with a taint of its own": UsableCase(
        status={"conditions": [READY]},
        taints=[{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
        usable=True,
    ),
}


@pytest.mark.parametrize(("status", "taints", "usable"), list(USABLE.values()), ids=list(USABLE))
def test_a_node_is_usable_once_ready_and_free_of_the_lifecycle_taints(
    status: dict[str, Any], taints: list[dict[str, str]], usable: bool
) -> None:
    assert cluster.node_usable({"status": status, "spec": {"taints": taints}}) is usable


def test_kube_scheduler_runs_with_its_client_limit_raised_as_scheduler_perf_runs_it(
    tmp_path: pathlib.Path,
) -> None:
    configuration = cluster.scheduler_configuration(tmp_path / "kube-scheduler.kubeconfig")
    assert (
        configuration["kind"],
        configuration["clientConnection"],
        configuration["leaderElection"],
    ) == (
        "KubeSchedulerConfiguration",
        {"kubeconfig": str(tmp_path / "kube-scheduler.kubeconfig"), "qps": 5000, "burst": 5000},
        {"leaderElect": False},
    )


def test_kube_scheduler_keeps_dynamic_resources_everywhere_but_its_pod_group_post_filter(
    tmp_path: pathlib.Path,
) -> None:
    # v1.37.2's DynamicResources.PodGroupPostFilter fails ("not found") for a gang none of
    # whose pods reached its PreFilter (no node yet): the gang would be a SchedulerError, not
    # Unschedulable, and no autoscaler would add a node for it.
    configuration = cluster.scheduler_configuration(tmp_path / "kube-scheduler.kubeconfig")
    assert configuration["profiles"] == [
        {
            "schedulerName": "default-scheduler",
            "plugins": {"podGroupPostFilter": {"disabled": [{"name": "DynamicResources"}]}},
        }
    ]


WORKLOAD_API_SWITCH = {
    "unset: the Workload API on": (None, cluster.WORKLOAD_GATES),
    "1: on": ("1", cluster.WORKLOAD_GATES),
    "0: off, as Kubernetes v1.37 ships": ("0", ()),
}


@pytest.mark.parametrize(
    ("value", "gates"), list(WORKLOAD_API_SWITCH.values()), ids=list(WORKLOAD_API_SWITCH)
)
def test_the_control_plane_serves_the_workload_api_unless_switched_off(
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
    value: str | None,
    gates: tuple[str, ...],
) -> None:
    if value is None:
        monkeypatch.delenv(cluster.WORKLOAD_API_ENV, raising=False)
    else:
        monkeypatch.setenv(cluster.WORKLOAD_API_ENV, value)
    assert cluster.Options(workdir=tmp_path).feature_gates == gates


KWOK_OPTIONS = {
    # Raised: at kwok's 4, Running latency measured kwok's queue of pod plays.
    "pods played at once, raised": ("podPlayStageParallelism", 32),
    # kwok applies no defaults to a KwokConfiguration it reads: each must be written, or 0.
    "nodes played at once, kwok's default": ("nodePlayStageParallelism", 4),
    "node leases renewed at once, kwok's default": ("nodeLeaseParallelism", 4),
    "pods-on-node syncs at once, kwok's default": ("podsOnNodeSyncParallelism", 1),
    "pods-on-node sync lists in pages, kwok's default": ("enablePodsOnNodeSyncListPager", True),
}


@pytest.mark.parametrize(("option", "value"), list(KWOK_OPTIONS.values()), ids=list(KWOK_OPTIONS))
def test_kwok_plays_pods_with_more_workers_and_its_own_defaults_elsewhere(
    option: str, value: object
) -> None:
    configuration = cluster.kwok_configuration()
    assert (
        configuration["apiVersion"],
        configuration["kind"],
        configuration["options"][option],
    ) == (
        "config.kwok.x-k8s.io/v1alpha1",
        "KwokConfiguration",
        value,
    )


NODES = pathlib.Path(__file__).resolve().parents[2] / "e2e" / "nodes.yaml"


def test_the_control_plane_starts_serves_and_stops_without_leftovers(
    binaries: Mapping[str, building.Built], tmp_path: pathlib.Path
) -> None:
    with cluster.running(cluster.Options(workdir=tmp_path, nodes_files=(NODES,))) as running:
        nodes = running.kubectl("get", "nodes", "-o", "json")
        version = running.kubectl("version", "-o", "json")
        pids = [p.popen.pid for p in running.processes]
    names = sorted(n["metadata"]["name"] for n in json.loads(nodes.stdout)["items"])
    server = json.loads(version.stdout)["serverVersion"]["gitVersion"]
    logs = sorted(p.name for p in (tmp_path / "logs").iterdir())
    assert (names, server, [_alive(pid) for pid in pids], logs) == (
        ["e2e-node-1", "e2e-node-2"],
        binaries["kubernetes"].version,
        [False] * 5,
        [
            f"{n}.log"
            for n in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
        ],
    )


def test_a_process_that_fails_to_start_is_named_with_the_tail_of_its_log(
    binaries: Mapping[str, building.Built], tmp_path: pathlib.Path
) -> None:
    options = cluster.Options(workdir=tmp_path, apiserver_flags=("--no-such-flag=1",))
    with pytest.raises(cluster.StartupError) as failed:
        cluster.start(options)
    message = str(failed.value)
    assert (
        "while waiting until kube-apiserver answers /readyz" in message,
        "kube-apiserver exited with 1" in message,
        "unknown flag: --no-such-flag" in message,
        (tmp_path / "logs" / "etcd.log").exists(),
    ) == (True, True, True, True), message


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for every purpose but the process table.
    status = pathlib.Path(f"/proc/{pid}/status")
    return status.exists() and "State:\tZ" not in status.read_text()


def test_a_crashed_parent_takes_the_whole_control_plane_with_it(
    binaries: Mapping[str, building.Built], tmp_path: pathlib.Path
) -> None:
    """The harness's children get SIGKILL when the thread that started them dies (a test run
    killed with SIGKILL never runs its cleanup)."""
    script = textwrap.dedent(
        f"""
        import json, pathlib, sys
        from controlplane import cluster
        running = cluster.start(cluster.Options(workdir=pathlib.Path({str(tmp_path)!r})))
        print(json.dumps([p.popen.pid for p in running.processes]), flush=True)
        sys.stdin.read()
        """
    )
    with subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as parent:
        assert parent.stdout is not None
        pids = json.loads(parent.stdout.readline())
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
    gone = cluster._poll(lambda: not any(_alive(pid) for pid in pids), timeout=30)
    left = [pathlib.Path(f"/proc/{pid}/cmdline").read_bytes()[:80] for pid in pids if _alive(pid)]
    for pid in pids:  # whatever the outcome, leave nothing running
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
    assert (len(pids), gone) == (5, True), left
