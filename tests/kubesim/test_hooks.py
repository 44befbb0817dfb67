"""Test hooks and edges of the transport: fault injection, the audit log, protobuf bodies from
kubectl's generators, and the `python -m kubesim` command."""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import subprocess
import sys
import time
from collections.abc import Iterator

import aiohttp
import pytest

from kubesim import harness, server
from tests.kubesim import conftest
from tests.kubesim.conftest import CONFIGMAPS, Api, call

FAULTS = "fault injection is kubesim's test hook"
AUDIT = "kubesim's audit records (sim.audit); the real one is an audit.k8s.io log"


@pytest.mark.kubesim_only(reason=FAULTS)
async def test_a_fault_answers_its_status_for_count_matches_then_stops(
    kubesim: harness.Cluster,
) -> None:
    kubesim.sim.add_fault(
        server.Fault(
            method="GET", path=r"/configmaps$", count=2, status=429, headers=(("Retry-After", "3"),)
        )
    )
    answers = [await call(kubesim, "GET", CONFIGMAPS) for _ in range(3)]
    other = await call(kubesim, "GET", "/api/v1/namespaces/default/secrets")
    assert [(a.status, a.headers.get("Retry-After")) for a in answers] == [
        (429, "3"),
        (429, "3"),
        (200, None),
    ]
    assert answers[0].body["reason"] == "TooManyRequests"
    assert other.status == 200


@pytest.mark.kubesim_only(reason=FAULTS)
async def test_a_fault_without_a_status_only_delays(kubesim: harness.Cluster) -> None:
    kubesim.sim.add_fault(server.Fault(path="configmaps", count=1, status=None, delay=0.3))
    started = time.monotonic()
    answer = await call(kubesim, "GET", CONFIGMAPS)
    assert (answer.status, time.monotonic() - started >= 0.3) == (200, True)


@pytest.mark.kubesim_only(reason=FAULTS)
async def test_a_disconnecting_fault_breaks_the_connection(kubesim: harness.Cluster) -> None:
    # Every match: aiohttp's client retries an idempotent request once on a dropped connection.
    kubesim.sim.add_fault(server.Fault(path="configmaps", count=None, disconnect=True))
    with pytest.raises(aiohttp.ClientError):
        await call(kubesim, "GET", CONFIGMAPS)
    kubesim.sim.clear_faults()
    assert (await call(kubesim, "GET", CONFIGMAPS)).status == 200


@pytest.mark.kubesim_only(reason=AUDIT)
async def test_the_audit_log_records_each_resource_request(kubesim: harness.Cluster) -> None:
    kubesim.sim.clear_audit()
    await call(kubesim, "POST", CONFIGMAPS, conftest.configmap("c1"))
    await call(kubesim, "GET", "/api/v1/configmaps")
    await call(
        kubesim,
        "PATCH",
        f"{CONFIGMAPS}/c1",
        {"data": {}},
        content_type="application/merge-patch+json",
    )
    await call(kubesim, "POST", conftest.PODS, conftest.pod("p1"))
    await call(
        kubesim,
        "POST",
        f"{conftest.PODS}/p1/eviction",
        {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p1"}},
    )
    await call(kubesim, "DELETE", f"{CONFIGMAPS}/c1")
    user = "kubernetes-admin"
    assert kubesim.sim.audit() == [
        server.AuditRecord(user, "create", "", "configmaps", "", "default", ""),
        server.AuditRecord(user, "list", "", "configmaps", "", "", ""),
        server.AuditRecord(user, "patch", "", "configmaps", "", "default", "c1"),
        server.AuditRecord(user, "create", "", "pods", "", "default", ""),
        server.AuditRecord(user, "create", "", "pods", "eviction", "default", "p1"),
        server.AuditRecord(user, "delete", "", "configmaps", "", "default", "c1"),
    ]


@pytest.mark.kubesim_only(
    reason="kubesim's token-to-user table (KubeSim(users=...)) and audit records"
)
async def test_tokens_map_to_users_in_the_audit_log(tmp_path: pathlib.Path) -> None:
    users = {
        "op-token": {
            "username": "system:serviceaccount:qt:operator",
            "groups": ["system:serviceaccounts"],
        }
    }
    with harness.running(tmp_path, users=users) as cluster:
        await call(
            cluster, "GET", "/api/v1/configmaps", headers={"Authorization": "Bearer op-token"}
        )
        await call(cluster, "GET", "/api/v1/configmaps", headers={"Authorization": "Bearer other"})
        assert [(r.user, r.verb) for r in cluster.sim.audit()] == [
            ("system:serviceaccount:qt:operator", "list"),
            ("kubernetes-admin", "list"),
        ]


@pytest.mark.parametrize(
    ("args", "path", "expected"),
    [
        (
            ("create", "namespace", "team-a"),
            "/api/v1/namespaces/team-a",
            {"spec": {"finalizers": ["kubernetes"]}},
        ),
        (
            ("create", "configmap", "c1", "--from-literal=a=1", "--from-literal=b=2"),
            f"{CONFIGMAPS}/c1",
            {"data": {"a": "1", "b": "2"}},
        ),
        (
            ("create", "secret", "generic", "s1", "--from-literal=a=1"),
            "/api/v1/namespaces/{namespace}/secrets/s1",
            {"data": {"a": "MQ=="}, "type": "Opaque"},
        ),
        (
            ("create", "serviceaccount", "sa1"),
            "/api/v1/namespaces/{namespace}/serviceaccounts/sa1",
            {},
        ),
        (
            ("create", "priorityclass", "high", "--value=1000"),
            "/apis/scheduling.k8s.io/v1/priorityclasses/high",
            {"value": 1000, "preemptionPolicy": "PreemptLowerPriority"},
        ),
    ],
    ids=["namespace", "configmap", "secret", "serviceaccount", "priorityclass"],
)
async def test_kubectl_generators_send_protobuf_that_kubesim_decodes(
    api: Api,
    args: tuple[str, ...],
    path: str,
    expected: dict,
) -> None:
    result = api.kubectl(*args)
    assert result.returncode == 0, result.stderr
    stored = await api.get(path)
    assert stored is not None
    assert {k: v for k, v in stored.items() if k in expected} == expected


@pytest.mark.kubesim_only(reason="kube-apiserver decodes every kind from protobuf")
def test_protobuf_for_other_kinds_is_a_415_that_kubectl_reports(kubesim: harness.Cluster) -> None:
    result = kubesim.kubectl("create", "deployment", "d1", "--image=nginx")
    assert result.returncode == 1
    assert (
        "kubesim cannot decode Deployment (apps/v1) from application/vnd.kubernetes.protobuf"
        in result.stderr
    )


@contextlib.contextmanager
def command(
    tmp_path: pathlib.Path, *args: str
) -> Iterator[tuple[subprocess.Popen[str], dict[str, str]]]:
    """`python -m kubesim ARGS` with a port file and a kubeconfig; terminated at the end."""
    port_file, kubeconfig = tmp_path / "port", tmp_path / "kubeconfig"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kubesim",
            "--port-file",
            str(port_file),
            "--kubeconfig-out",
            str(kubeconfig),
            *args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 20
        while not port_file.exists():
            assert process.poll() is None, process.stderr
            assert time.monotonic() < deadline, "no port file"
            time.sleep(0.05)
        env = {**os.environ, "KUBECONFIG": str(kubeconfig), "KUBECACHEDIR": str(tmp_path / "cache")}
        yield process, env
    finally:
        process.terminate()
        process.communicate(timeout=20)


def kubectl_json(env: dict[str, str], *args: str) -> dict:
    result = subprocess.run(
        ["kubectl", harness.KUBECTL_TIMEOUT, *args, "-o", "json"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)  # type: ignore[no-any-return]


@pytest.mark.kubesim_only(reason="it tests the `python -m kubesim` command")
def test_the_command_serves_until_terminated_with_a_port_file_and_kubeconfig(
    tmp_path: pathlib.Path,
) -> None:
    with command(tmp_path) as (process, env):
        namespaces = kubectl_json(env, "get", "ns")
        assert [n["metadata"]["name"] for n in namespaces["items"]] == [
            "default",
            "kube-node-lease",
            "kube-public",
            "kube-system",
        ]
    assert process.returncode == 0


@pytest.mark.parametrize(
    "flag",
    ["n1=cpu=8,memory=32Gi,nvidia.com/gpu=4", "n1:cpu=8,memory=32Gi,nvidia.com/gpu=4"],
    ids=["equals", "colon"],
)
@pytest.mark.kubesim_only(reason="it tests the `python -m kubesim` command")
def test_the_command_simulates_nodes_given_by_flags(tmp_path: pathlib.Path, flag: str) -> None:
    with command(tmp_path, "--simulate", "--node", flag) as (_, env):
        deadline = time.monotonic() + 20
        while not (nodes := kubectl_json(env, "get", "nodes")["items"]):
            assert time.monotonic() < deadline, "no node"
            time.sleep(0.05)
        capacity = nodes[0]["status"]["capacity"]
        assert (nodes[0]["metadata"]["name"], capacity["cpu"], capacity["nvidia.com/gpu"]) == (
            "n1",
            "8",
            "4",
        )


@pytest.mark.kubesim_only(reason=AUDIT)
async def test_the_audit_log_can_be_read_incrementally(kubesim: harness.Cluster) -> None:
    kubesim.sim.clear_audit()
    await call(kubesim, "GET", CONFIGMAPS)
    seen = len(kubesim.sim.audit())
    await call(kubesim, "GET", f"{CONFIGMAPS}/missing")
    assert [(r.verb, r.name) for r in kubesim.sim.audit(since=seen)] == [("get", "missing")]
