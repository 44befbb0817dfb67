"""Pods (kubesim-spec §2.8, §3): defaults, QoS, the SchedulingGated condition, the gate rules,
spec immutability, binding, eviction with PodDisruptionBudgets, and the pod Table."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kubesim import harness
from tests.kubesim import conftest
from tests.kubesim.conftest import PODS, call

GATED = {
    "type": "PodScheduled",
    "status": "False",
    "reason": "SchedulingGated",
    "message": "Scheduling is blocked due to non-empty scheduling gates",
}
MERGE = "application/merge-patch+json"
SMP = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"


def resources(requests: dict | None = None, limits: dict | None = None) -> dict:
    value: dict[str, Any] = {}
    if requests:
        value["requests"] = requests
    if limits:
        value["limits"] = limits
    return value


async def test_a_created_pod_gets_the_defaults_of_the_v1_type(kubesim: harness.Cluster) -> None:
    answer = await call(kubesim, "POST", PODS, conftest.pod("p1"))
    spec = answer.body["spec"]
    assert {
        k: spec[k]
        for k in (
            "restartPolicy",
            "dnsPolicy",
            "schedulerName",
            "terminationGracePeriodSeconds",
            "serviceAccountName",
        )
    } == {
        "restartPolicy": "Always",
        "dnsPolicy": "ClusterFirst",
        "schedulerName": "default-scheduler",
        "terminationGracePeriodSeconds": 30,
        "serviceAccountName": "default",
    }
    assert spec["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    assert [(t["key"], t["tolerationSeconds"]) for t in spec["tolerations"]] == [
        ("node.kubernetes.io/not-ready", 300),
        ("node.kubernetes.io/unreachable", 300),
    ]
    assert answer.body["status"] == {"phase": "Pending", "qosClass": "BestEffort"}


@pytest.mark.parametrize(
    ("container_resources", "expected"),
    [
        ({}, "BestEffort"),
        (resources({"cpu": "100m"}), "Burstable"),
        (resources(limits={"cpu": "1", "memory": "1Gi"}), "Guaranteed"),
        (resources({"cpu": "1000m", "memory": "1Gi"}, {"cpu": "1", "memory": "1Gi"}), "Guaranteed"),
        (resources({"cpu": "500m", "memory": "1Gi"}, {"cpu": "1", "memory": "1Gi"}), "Burstable"),
    ],
    ids=[
        "no resources",
        "requests only",
        "limits only",
        "equal requests and limits",
        "lower requests",
    ],
)
async def test_the_qos_class_follows_requests_and_limits(
    kubesim: harness.Cluster, container_resources: dict, expected: str
) -> None:
    body = conftest.pod("p1")
    body["spec"]["containers"][0]["resources"] = container_resources
    answer = await call(kubesim, "POST", PODS, body)
    assert answer.body["status"]["qosClass"] == expected


PRIORITY_CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"


def priority_class(name: str, value: int, **extra: Any) -> dict:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        **extra,
    }


async def test_the_priority_admission_plugin_resolves_classes_and_refuses_unknown_ones(
    kubesim: harness.Cluster,
) -> None:
    """As kube-apiserver's Priority plugin: the class's value becomes ``spec.priority``, a class
    that does not exist refuses the pod, a pod without one gets the global default class."""
    before_default = await call(kubesim, "POST", PODS, conftest.pod("plain"))
    await call(kubesim, "POST", PRIORITY_CLASSES, priority_class("urgent", 1000))
    await call(
        kubesim,
        "POST",
        PRIORITY_CLASSES,
        priority_class("usual", 10, globalDefault=True, preemptionPolicy="Never"),
    )
    named = await call(kubesim, "POST", PODS, conftest.pod("named", priorityClassName="urgent"))
    defaulted = await call(kubesim, "POST", PODS, conftest.pod("defaulted"))
    missing = await call(kubesim, "POST", PODS, conftest.pod("missing", priorityClassName="nope"))
    assert {
        "before a default exists": before_default.body["spec"]["priority"],
        "named": named.body["spec"]["priority"],
        "defaulted": (
            defaulted.body["spec"]["priorityClassName"],
            defaulted.body["spec"]["priority"],
            defaulted.body["spec"]["preemptionPolicy"],
        ),
        "missing": (missing.status, missing.body["message"]),
    } == {
        "before a default exists": 0,
        "named": 1000,
        "defaulted": ("usual", 10, "Never"),
        "missing": (403, 'pods "missing" is forbidden: no PriorityClass with name nope was found'),
    }


async def test_a_gated_pod_gets_the_scheduling_gated_condition(kubesim: harness.Cluster) -> None:
    answer = await call(kubesim, "POST", PODS, conftest.pod("p1", gates=("example.com/a",)))
    assert answer.body["status"] == {
        "phase": "Pending",
        "qosClass": "BestEffort",
        "conditions": [GATED],
    }


@pytest.mark.parametrize(
    ("gates", "extra", "expected_field", "expected_message"),
    [
        (
            ("example.com/a", "example.com/a"),
            {},
            "spec.schedulingGates[1].name",
            'Duplicate value: "example.com/a"',
        ),
        (("not a name!",), {}, "spec.schedulingGates[0].name", 'Invalid value: "not a name!"'),
        (
            ("example.com/a",),
            {"nodeName": "n1"},
            "spec.nodeName",
            "Forbidden: cannot be set until all schedulingGates have been cleared",
        ),
    ],
    ids=["duplicate gate", "invalid gate name", "gate with nodeName"],
)
async def test_invalid_gates_are_refused_at_creation(
    kubesim: harness.Cluster,
    gates: tuple[str, ...],
    extra: dict,
    expected_field: str,
    expected_message: str,
) -> None:
    answer = await call(kubesim, "POST", PODS, conftest.pod("p1", gates=gates, **extra))
    cause = answer.body["details"]["causes"][0]
    assert (answer.status, cause["field"], cause["message"].startswith(expected_message)) == (
        422,
        expected_field,
        True,
    )


@pytest.mark.parametrize(
    ("content_type", "patch", "expected_status", "expected_gates"),
    [
        (
            JSON_PATCH,
            [
                {"op": "test", "path": "/spec/schedulingGates/0/name", "value": "example.com/a"},
                {"op": "remove", "path": "/spec/schedulingGates/0"},
            ],
            200,
            ["example.com/b"],
        ),
        (
            JSON_PATCH,
            [
                {"op": "test", "path": "/spec/schedulingGates/0/name", "value": "example.com/b"},
                {"op": "remove", "path": "/spec/schedulingGates/0"},
            ],
            422,
            ["example.com/a", "example.com/b"],
        ),
        (
            SMP,
            {"spec": {"schedulingGates": [{"name": "example.com/b"}]}},
            200,
            ["example.com/a", "example.com/b"],
        ),
        (
            SMP,
            {"spec": {"schedulingGates": [{"$patch": "delete", "name": "example.com/a"}]}},
            200,
            ["example.com/b"],
        ),
        (
            SMP,
            {"spec": {"schedulingGates": [{"name": "example.com/new"}]}},
            422,
            ["example.com/a", "example.com/b"],
        ),
        (MERGE, {"spec": {"schedulingGates": None}}, 200, []),
        (
            MERGE,
            {"spec": {"schedulingGates": [{"name": "example.com/b"}, {"name": "example.com/a"}]}},
            200,
            ["example.com/b", "example.com/a"],
        ),
        (
            MERGE,
            {"spec": {"schedulingGates": [{"name": "example.com/c"}]}},
            422,
            ["example.com/a", "example.com/b"],
        ),
    ],
    ids=[
        "json patch removes the tested gate",
        "json patch test fails",
        "strategic merge keeps omitted gates",
        "strategic merge deletes a gate",
        "strategic merge adds a gate",
        "merge patch clears the gates",
        "merge patch reorders",
        "merge patch adds a gate",
    ],
)
async def test_gates_can_only_be_removed(
    kubesim: harness.Cluster,
    content_type: str,
    patch: Any,
    expected_status: int,
    expected_gates: list[str],
) -> None:
    await call(kubesim, "POST", PODS, conftest.pod("p1", gates=("example.com/a", "example.com/b")))
    answer = await call(kubesim, "PATCH", f"{PODS}/p1", patch, content_type=content_type)
    stored = kubesim.sim.get_object("", "pods", "default", "p1")
    assert stored is not None
    assert (answer.status, [g["name"] for g in stored["spec"].get("schedulingGates", [])]) == (
        expected_status,
        expected_gates,
    )


async def test_an_added_gate_is_named_in_the_error(kubesim: harness.Cluster) -> None:
    await call(kubesim, "POST", PODS, conftest.pod("p1", gates=("example.com/a",)))
    answer = await call(
        kubesim,
        "PATCH",
        f"{PODS}/p1",
        {"spec": {"schedulingGates": [{"name": "example.com/new"}]}},
        content_type=SMP,
    )
    assert answer.body["message"] == (
        'Pod "p1" is invalid: spec.schedulingGates[1].name: Forbidden: only deletion is allowed, '
        "but found new scheduling gate 'example.com/new'"
    )


@pytest.mark.parametrize(
    ("gated", "patch", "expected_status"),
    [
        (
            False,
            {"spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]}},
            200,
        ),
        (False, {"spec": {"activeDeadlineSeconds": 100}}, 200),
        (
            False,
            [
                {
                    "op": "add",
                    "path": "/spec/tolerations/-",
                    "value": {"key": "x", "operator": "Exists"},
                }
            ],
            200,
        ),
        (False, {"spec": {"tolerations": [{"key": "x", "operator": "Exists"}]}}, 422),
        (False, {"spec": {"restartPolicy": "Never"}}, 422),
        (False, {"spec": {"nodeSelector": {"zone": "a"}}}, 422),
        (True, {"spec": {"nodeSelector": {"zone": "a"}}}, 200),
        (
            True,
            {
                "spec": {
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {"matchExpressions": [{"key": "k", "operator": "Exists"}]}
                                ]
                            }
                        }
                    }
                }
            },
            200,
        ),
        (True, {"spec": {"nodeName": "n1"}}, 422),
        (
            False,
            {"spec": {"containers": [{"name": "main", "resources": {"requests": {"cpu": "1"}}}]}},
            422,
        ),
    ],
    ids=[
        "image",
        "active deadline",
        "added toleration",
        "replaced tolerations",
        "restart policy",
        "node selector while ungated",
        "node selector while gated",
        "node affinity while gated",
        "node name while gated",
        "resources",
    ],
)
async def test_pod_spec_updates_are_limited(
    kubesim: harness.Cluster, gated: bool, patch: Any, expected_status: int
) -> None:
    gates = ("example.com/a",) if gated else ()
    await call(kubesim, "POST", PODS, conftest.pod("p1", gates=gates))
    content_type = JSON_PATCH if isinstance(patch, list) else SMP
    answer = await call(kubesim, "PATCH", f"{PODS}/p1", patch, content_type=content_type)
    assert answer.status == expected_status, answer.body


async def test_binding_is_refused_while_gated_and_sets_the_node_after(
    kubesim: harness.Cluster,
) -> None:
    await call(kubesim, "POST", PODS, conftest.pod("p1", gates=("example.com/a",)))
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p1"},
        "target": {"kind": "Node", "name": "n1"},
    }
    refused = await call(kubesim, "POST", f"{PODS}/p1/binding", binding)
    await call(
        kubesim,
        "PATCH",
        f"{PODS}/p1",
        [{"op": "remove", "path": "/spec/schedulingGates"}],
        content_type=JSON_PATCH,
    )
    bound = await call(kubesim, "POST", f"{PODS}/p1/binding", binding)
    again = await call(kubesim, "POST", f"{PODS}/p1/binding", binding)
    stored = kubesim.sim.get_object("", "pods", "default", "p1")
    assert stored is not None
    assert (refused.status, refused.body["message"]) == (
        500,
        "Internal error occurred: pod p1 has non-empty .spec.schedulingGates",
    )
    assert (bound.status, bound.body["status"], again.status) == (201, "Success", 409)
    assert stored["spec"]["nodeName"] == "n1"
    assert [(c["type"], c["status"]) for c in stored["status"]["conditions"]] == [
        ("PodScheduled", "True")
    ]


def running_pod(name: str, labels: dict[str, str], ready: bool = True) -> dict:
    body = conftest.pod(name)
    body["metadata"]["labels"] = labels
    return body


async def make_running(cluster: harness.Cluster, name: str, *, ready: bool = True) -> None:
    status = {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
    }
    answer = await call(
        cluster, "PATCH", f"{PODS}/{name}/status", {"status": status}, content_type=MERGE
    )
    assert answer.status == 200, answer.body


EVICTION = {
    "apiVersion": "policy/v1",
    "kind": "Eviction",
    "metadata": {"name": "p1", "namespace": "default"},
}


@pytest.mark.parametrize(
    ("budget", "running", "pending_p1", "expected_status"),
    [
        (None, 2, False, 201),
        ({"minAvailable": 1}, 2, False, 201),
        ({"minAvailable": 2}, 2, False, 429),
        ({"maxUnavailable": 0}, 2, False, 429),
        ({"maxUnavailable": "50%"}, 2, False, 201),
        ({"minAvailable": "100%"}, 2, False, 429),
        ({"minAvailable": 2}, 2, True, 201),
    ],
    ids=[
        "no budget",
        "min available 1 of 2",
        "min available 2 of 2",
        "max unavailable 0",
        "max unavailable 50%",
        "min available 100%",
        "pending pods ignore budgets",
    ],
)
async def test_eviction_respects_disruption_budgets(
    kubesim: harness.Cluster,
    budget: dict | None,
    running: int,
    pending_p1: bool,
    expected_status: int,
) -> None:
    for i in range(1, running + 1):
        await call(kubesim, "POST", PODS, running_pod(f"p{i}", {"app": "a"}))
        if not (pending_p1 and i == 1):
            await make_running(kubesim, f"p{i}")
    if budget is not None:
        pdb = {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "budget"},
            "spec": {"selector": {"matchLabels": {"app": "a"}}, **budget},
        }
        assert (
            await call(
                kubesim, "POST", "/apis/policy/v1/namespaces/default/poddisruptionbudgets", pdb
            )
        ).status == 201
    answer = await call(kubesim, "POST", f"{PODS}/p1/eviction", EVICTION)
    gone = kubesim.sim.get_object("", "pods", "default", "p1") is None
    assert (answer.status, gone) == (expected_status, expected_status == 201)
    if expected_status == 429:
        assert (answer.body["reason"], answer.headers["Retry-After"]) == ("TooManyRequests", "10")
    else:
        assert answer.body == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "code": 201,
        }


async def test_the_pod_table_shows_scheduling_gated_then_the_phase(
    kubesim: harness.Cluster,
) -> None:
    await call(kubesim, "POST", PODS, conftest.pod("p1", gates=("example.com/a",)))
    await call(kubesim, "POST", PODS, conftest.pod("p2"))
    answer = await call(
        kubesim, "GET", PODS, headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}
    )
    assert [c["name"] for c in answer.body["columnDefinitions"]] == [
        "Name",
        "Ready",
        "Status",
        "Restarts",
        "Age",
        "IP",
        "Node",
    ]
    assert [r["cells"][:4] for r in answer.body["rows"]] == [
        ["p1", "0/1", "SchedulingGated", 0],
        ["p2", "0/1", "Pending", 0],
    ]
    assert answer.body["rows"][0]["object"]["kind"] == "PartialObjectMetadata"


async def test_kubectl_get_pods_shows_the_gated_status(kubesim: harness.Cluster) -> None:
    await call(kubesim, "POST", PODS, conftest.pod("p1", gates=("example.com/a",)))
    result = kubesim.kubectl("get", "pods")
    assert [line.split()[:5] for line in result.stdout.splitlines()] == [
        ["NAME", "READY", "STATUS", "RESTARTS", "AGE"],
        ["p1", "0/1", "SchedulingGated", "0", result.stdout.splitlines()[1].split()[4]],
    ]


async def test_a_disruption_budget_status_follows_its_pods(kubesim: harness.Cluster) -> None:
    pdbs = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "budget"},
        "spec": {"selector": {"matchLabels": {"app": "a"}}, "minAvailable": 1},
    }
    await call(kubesim, "POST", pdbs, pdb)
    statuses = []
    for i in (1, 2):
        await call(kubesim, "POST", PODS, running_pod(f"p{i}", {"app": "a"}))
        await make_running(kubesim, f"p{i}")
        statuses.append((await call(kubesim, "GET", f"{pdbs}/budget")).body["status"])
    await call(kubesim, "DELETE", f"{PODS}/p2")
    statuses.append((await call(kubesim, "GET", f"{pdbs}/budget")).body["status"])
    assert [
        (s["currentHealthy"], s["desiredHealthy"], s["disruptionsAllowed"], s["expectedPods"])
        for s in statuses
    ] == [
        (1, 1, 0, 1),
        (2, 1, 1, 2),
        (1, 1, 0, 1),
    ]


@pytest.mark.parametrize(
    ("validation", "expected_status", "expected_warnings"),
    [
        ("Strict", 400, []),
        (
            "Warn",
            201,
            [
                '299 - "unknown field \\"spec.shedulingGates\\""',
                '299 - "unknown field \\"spec.containers[0].imagee\\""',
            ],
        ),
        ("Ignore", 201, []),
    ],
    ids=["strict", "warn", "ignore"],
)
async def test_unknown_fields_of_a_pod_follow_field_validation(
    kubesim: harness.Cluster, validation: str, expected_status: int, expected_warnings: list[str]
) -> None:
    body = conftest.pod("p1")
    body["spec"]["containers"][0]["imagee"] = "typo"
    body["spec"]["shedulingGates"] = [{"name": "example.com/a"}]
    answer = await call(kubesim, "POST", PODS, body, params={"fieldValidation": validation})
    assert (answer.status, answer.headers.getall("Warning", [])) == (
        expected_status,
        expected_warnings,
    )
    if expected_status == 201:
        assert (
            "imagee" in answer.body["spec"]["containers"][0],
            "shedulingGates" in answer.body["spec"],
        ) == (False, False)
    else:
        assert answer.body["message"] == (
            'Pod in version "v1" cannot be handled as a Pod: strict decoding error: '
            'unknown field "spec.shedulingGates", unknown field "spec.containers[0].imagee"'
        )


def test_kubectl_create_refuses_a_typo_in_a_pod(kubesim: harness.Cluster) -> None:
    body = conftest.pod("p1")
    body["spec"]["containers"][0]["imagePullPolicyy"] = "Never"
    manifest = json.dumps(body)
    result = kubesim.kubectl("create", "-f", "-", input=manifest)
    assert (
        result.returncode,
        'unknown field "spec.containers[0].imagePullPolicyy"' in result.stderr,
    ) == (1, True)
