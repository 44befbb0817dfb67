"""Pods (kubesim-spec §2.8, §3): defaults, QoS, the SchedulingGated condition, the gate rules,
spec immutability, binding, eviction with PodDisruptionBudgets, and the pod Table."""

from __future__ import annotations

import json
from typing import Any, NamedTuple

import pytest

from tests.kubesim import conftest
from tests.kubesim.conftest import PODS, Api, call

GATED = {
    "type": "PodScheduled",
    "status": "False",
    "reason": "SchedulingGated",
    "message": "Scheduling is blocked due to non-empty scheduling gates",
}


class _AnyTime(str):
    """Equal to any string: a timestamp the server chose."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, str)

    def __hash__(self) -> int:
        return 0


ANY_TIME = _AnyTime()
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


async def test_a_created_pod_gets_the_defaults_of_the_v1_type(api: Api) -> None:
    answer = await call(api, "POST", PODS, conftest.pod("p1"))
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
    api: Api, container_resources: dict, expected: str
) -> None:
    body = conftest.pod("p1")
    body["spec"]["containers"][0]["resources"] = container_resources
    answer = await call(api, "POST", PODS, body)
    assert answer.body["status"]["qosClass"] == expected


POD_LEVEL_DEFAULTS = {
    "a pod-level limit is the request of what no container states": (
        {},
        {"limits": {"cpu": "20", "memory": "50Gi"}},
        {"limits": {"cpu": "20", "memory": "50Gi"}, "requests": {"cpu": "20", "memory": "50Gi"}},
    ),
    "the containers' aggregate is the request of what they state": (
        resources({"cpu": "1"}, {"memory": "1Gi"}),
        {"limits": {"cpu": "4", "memory": "8Gi"}},
        {
            "limits": {"cpu": "4", "memory": "8Gi"},
            "requests": {"cpu": "1", "memory": "1Gi"},
        },
    ),
    "a stated pod-level request is kept": (
        {},
        {"requests": {"cpu": "2"}, "limits": {"cpu": "4"}},
        {"requests": {"cpu": "2"}, "limits": {"cpu": "4"}},
    ),
    "requests alone are left as they are": (
        resources({"memory": "1Gi"}),
        {"requests": {"cpu": "2"}},
        {"requests": {"cpu": "2", "memory": "1Gi"}},
    ),
}


@pytest.mark.parametrize(
    ("container_resources", "pod_resources", "expected"),
    POD_LEVEL_DEFAULTS.values(),
    ids=POD_LEVEL_DEFAULTS.keys(),
)
async def test_pod_level_requests_are_defaulted_as_the_api_server_does(
    api: Api, container_resources: dict, pod_resources: dict, expected: dict
) -> None:
    body = conftest.pod("p1")
    body["spec"]["containers"][0]["resources"] = container_resources
    body["spec"]["resources"] = pod_resources
    answer = await call(api, "POST", PODS, body)
    assert answer.body["spec"]["resources"] == expected


async def test_a_gated_pod_gets_the_scheduling_gated_condition(api: Api) -> None:
    answer = await call(api, "POST", PODS, conftest.pod("p1", gates=("example.com/a",)))
    [condition] = answer.body["status"]["conditions"]
    assert answer.body["status"] == {
        "phase": "Pending",
        "qosClass": "BestEffort",
        "conditions": [{**GATED, "lastProbeTime": None, "lastTransitionTime": ANY_TIME}],
    }
    assert condition["lastTransitionTime"].endswith("Z")


@pytest.mark.parametrize(
    ("gates", "extra", "expected_field", "expected_message"),
    [
        (
            ("example.com/a", "example.com/a"),
            {},
            "spec.schedulingGates[1]",
            'Duplicate value: "example.com/a"',
        ),
        (("not a name!",), {}, "spec.schedulingGates[0]", 'Invalid value: "not a name!"'),
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
    api: Api,
    gates: tuple[str, ...],
    extra: dict,
    expected_field: str,
    expected_message: str,
) -> None:
    answer = await call(api, "POST", PODS, conftest.pod("p1", gates=gates, **extra))
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
    api: Api,
    content_type: str,
    patch: Any,
    expected_status: int,
    expected_gates: list[str],
) -> None:
    await call(api, "POST", PODS, conftest.pod("p1", gates=("example.com/a", "example.com/b")))
    answer = await call(api, "PATCH", f"{PODS}/p1", patch, content_type=content_type)
    stored = await api.get(f"{PODS}/p1")
    assert stored is not None
    assert (answer.status, [g["name"] for g in stored["spec"].get("schedulingGates", [])]) == (
        expected_status,
        expected_gates,
    )


async def test_an_added_gate_is_named_in_the_error(api: Api) -> None:
    await call(api, "POST", PODS, conftest.pod("p1", gates=("example.com/a",)))
    answer = await call(
        api,
        "PATCH",
        f"{PODS}/p1",
        {"spec": {"schedulingGates": [{"name": "example.com/new"}]}},
        content_type=SMP,
    )
    # A strategic merge puts a new list item before the ones only the server had, so the
    # added gate is the first.
    assert answer.body["message"] == (
        'Pod "p1" is invalid: spec.schedulingGates[0].name: Forbidden: only deletion is allowed, '
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
        # DefaultTolerationSeconds adds the two default tolerations back: an addition.
        (False, {"spec": {"tolerations": [{"key": "x", "operator": "Exists"}]}}, 200),
        (
            False,
            {"spec": {"tolerations": [{"key": "x", "operator": "Exists"}], "priority": 1}},
            422,
        ),
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
        "replaced tolerations and another field",
        "restart policy",
        "node selector while ungated",
        "node selector while gated",
        "node affinity while gated",
        "node name while gated",
        "resources",
    ],
)
async def test_pod_spec_updates_are_limited(
    api: Api, gated: bool, patch: Any, expected_status: int
) -> None:
    gates = ("example.com/a",) if gated else ()
    await call(api, "POST", PODS, conftest.pod("p1", gates=gates))
    content_type = JSON_PATCH if isinstance(patch, list) else SMP
    answer = await call(api, "PATCH", f"{PODS}/p1", patch, content_type=content_type)
    assert answer.status == expected_status, answer.body


GUARANTEED = {"cpu": "100m", "memory": "64Mi"}
RESIZED = {"cpu": "300m", "memory": "64Mi"}


def sized(name: str, container_resources: dict | None = None, **spec: Any) -> dict:
    """A pod with ``container_resources``: by default Guaranteed (requests equal limits), as
    the e2e suite's pods are."""
    body = conftest.pod(name, **spec)
    body["spec"]["containers"][0]["resources"] = container_resources or resources(
        GUARANTEED, GUARANTEED
    )
    return body


class ResizeCase(NamedTuple):
    patch: Any
    status: Any
    refusal: Any
    """The message of the 422, or the container's resources after an accepted resize."""
    container_resources: Any = None
    """The pod's, when not Guaranteed."""


RESIZES = {
    "cpu and memory change": ResizeCase(
        patch={
            "spec": {"containers": [{"name": "main", "resources": resources(RESIZED, RESIZED)}]}
        },
        status=200,
        refusal=resources(RESIZED, RESIZED),
    ),
    "everything else in the patch is dropped": ResizeCase(
        patch={
            "metadata": {"annotations": {"a": "b"}},
            "spec": {
                "activeDeadlineSeconds": 100,
                "containers": [
                    {
                        "name": "main",
                        "image": "registry.k8s.io/pause:3.10",
                        "resources": resources(RESIZED, RESIZED),
                    }
                ],
            },
        },
        status=200,
        refusal=resources(RESIZED, RESIZED),
    ),
    "the QoS class cannot change": ResizeCase(
        patch={
            "spec": {
                "containers": [
                    {"name": "main", "resources": resources({"cpu": "50m", "memory": "64Mi"})}
                ]
            }
        },
        status=422,
        refusal='Pod "p1" is invalid: spec: Invalid value: "Guaranteed": Pod QOS Class may not '
        "change as a result of resizing",
    ),
    "other resources cannot change": ResizeCase(
        patch={
            "spec": {
                "containers": [
                    {
                        "name": "main",
                        "resources": resources(
                            {**GUARANTEED, "ephemeral-storage": "1Gi"},
                            {**GUARANTEED, "ephemeral-storage": "1Gi"},
                        ),
                    }
                ]
            }
        },
        status=422,
        refusal='Pod "p1" is invalid: spec: Forbidden: only cpu and memory resources are mutable',
    ),
    "requests cannot be removed": ResizeCase(
        patch=[{"op": "remove", "path": "/spec/containers/0/resources/requests/memory"}],
        status=422,
        refusal='Pod "p1" is invalid: spec.containers[0].resources.requests: Forbidden: resource '
        "requests cannot be removed",
        # Without limits: decoding defaults a missing request from its limit.
        container_resources=resources(GUARANTEED),
    ),
    "containers cannot be added": ResizeCase(
        patch=[
            {
                "op": "add",
                "path": "/spec/containers/-",
                "value": {
                    "name": "second",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": resources(GUARANTEED, GUARANTEED),
                },
            }
        ],
        status=422,
        refusal='Pod "p1" is invalid: spec.containers: Forbidden: containers may not be added or '
        "removed on resize",
    ),
}


@pytest.mark.parametrize(
    ("patch", "status", "refusal", "container_resources"), RESIZES.values(), ids=RESIZES.keys()
)
async def test_a_resize_changes_only_cpu_and_memory(
    api: Api, patch: Any, status: int, refusal: Any, container_resources: dict | None
) -> None:
    await call(api, "POST", PODS, sized("p1", container_resources, gates=("example.com/a",)))
    content_type = JSON_PATCH if isinstance(patch, list) else SMP
    answer = await call(api, "PATCH", f"{PODS}/p1/resize", patch, content_type=content_type)
    found = (await call(api, "GET", f"{PODS}/p1")).body
    if status == 200:
        assert (
            answer.status,
            found["spec"]["containers"][0]["resources"],
            found["spec"]["containers"][0]["image"],
            found["spec"].get("activeDeadlineSeconds"),
            found["metadata"].get("annotations"),
        ) == (200, refusal, "registry.k8s.io/pause:3.9", None, None), answer.body
    else:
        assert (answer.status, answer.body["message"]) == (status, refusal)


async def test_a_pod_whose_running_containers_report_no_resources_cannot_be_resized(
    api: Api,
) -> None:
    """The API server's guard against kubelets older than 1.33 (kwok's nodes, and kubesim's
    kubelet, report no container resources); a pod with no running container may be resized."""
    await call(api, "POST", PODS, sized("p1"))
    resize = {"spec": {"containers": [{"name": "main", "resources": resources(RESIZED, RESIZED)}]}}
    pending = await call(api, "PATCH", f"{PODS}/p1/resize", resize, content_type=SMP)
    running = {
        "status": {
            "containerStatuses": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.9",
                    "imageID": "",
                    "ready": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
                }
            ]
        }
    }
    await call(api, "PATCH", f"{PODS}/p1/status", running, content_type=MERGE)
    back = {
        "spec": {"containers": [{"name": "main", "resources": resources(GUARANTEED, GUARANTEED)}]}
    }
    refused = await call(api, "PATCH", f"{PODS}/p1/resize", back, content_type=SMP)
    assert (pending.status, refused.status, refused.body["message"]) == (
        200,
        422,
        'Pod "p1" is invalid: spec: Forbidden: Pod running on node without support for resize',
    )


async def test_binding_is_refused_while_gated_and_sets_the_node_after(
    api: Api,
) -> None:
    await call(api, "POST", PODS, conftest.pod("p1", gates=("example.com/a",)))
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p1"},
        "target": {"kind": "Node", "name": "n1"},
    }
    refused = await call(api, "POST", f"{PODS}/p1/binding", binding)
    await call(
        api,
        "PATCH",
        f"{PODS}/p1",
        [{"op": "remove", "path": "/spec/schedulingGates"}],
        content_type=JSON_PATCH,
    )
    bound = await call(api, "POST", f"{PODS}/p1/binding", binding)
    again = await call(api, "POST", f"{PODS}/p1/binding", binding)
    stored = await api.get(f"{PODS}/p1")
    assert stored is not None
    assert (refused.status, refused.body["message"]) == (
        409,
        'Operation cannot be fulfilled on pods/binding "p1": pod p1 has non-empty '
        ".spec.schedulingGates",
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


async def make_running(cluster: Api, name: str, *, ready: bool = True) -> None:
    status = {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
    }
    answer = await call(
        cluster, "PATCH", f"{PODS}/{name}/status", {"status": status}, content_type=MERGE
    )
    assert answer.status == 200, answer.body


def eviction(api: Api, name: str) -> dict:
    return {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": api.namespace},
    }


PDBS = "/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets"
NEEDS_2 = "The disruption budget budget needs 2 healthy pods and has 2 currently"
NO_DISRUPTION = "The disruption budget budget does not allow evicting pods currently"


async def create_budget(api: Api, spec: dict, *, healthy: int) -> None:
    """A PDB over the pods labelled app=a, once its status counts ``healthy`` pods: the
    disruption controller of a real cluster writes it a moment later, kubesim at once."""
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "budget"},
        "spec": {"selector": {"matchLabels": {"app": "a"}}, **spec},
    }
    assert (await call(api, "POST", PDBS, pdb)).status == 201

    async def observed() -> bool:
        current = await api.get(f"{PDBS}/budget")
        status = current.get("status") or {}
        return bool(
            status.get("observedGeneration") == current["metadata"]["generation"]
            and status.get("currentHealthy") == healthy
        )

    await conftest.wait_for(observed)


@pytest.mark.parametrize(
    ("budget", "pending_p1", "expected_status", "expected_cause"),
    [
        (None, False, 201, None),
        ({"minAvailable": 1}, False, 201, None),
        ({"minAvailable": 2}, False, 429, NEEDS_2),
        ({"maxUnavailable": 0}, False, 429, NO_DISRUPTION),
        # Pods without a controller count for an integer minAvailable only: a maxUnavailable
        # or a percentage needs the controllers' scale, so the budget allows nothing.
        ({"maxUnavailable": "50%"}, False, 429, NO_DISRUPTION),
        ({"maxUnavailable": 1}, False, 429, NO_DISRUPTION),
        ({"minAvailable": "100%"}, False, 429, NO_DISRUPTION),
        ({"minAvailable": 2}, True, 201, None),
    ],
    ids=[
        "no budget",
        "min available 1 of 2",
        "min available 2 of 2",
        "max unavailable 0",
        "max unavailable 50% of pods without a controller",
        "max unavailable 1 of pods without a controller",
        "min available 100%",
        "pending pods ignore budgets",
    ],
)
async def test_eviction_respects_disruption_budgets(
    api: Api,
    budget: dict | None,
    pending_p1: bool,
    expected_status: int,
    expected_cause: str | None,
) -> None:
    for i in (1, 2):
        await call(api, "POST", PODS, running_pod(f"p{i}", {"app": "a"}))
        if not (pending_p1 and i == 1):
            await make_running(api, f"p{i}")
    if budget is not None:
        await create_budget(api, budget, healthy=1 if pending_p1 else 2)
    answer = await call(api, "POST", f"{PODS}/p1/eviction", eviction(api, "p1"))
    gone = await api.get(f"{PODS}/p1") is None
    assert (answer.status, gone) == (expected_status, expected_status == 201), answer.body
    if expected_status == 429:
        # A budget that allows no disruption: no Retry-After (only a budget whose status is
        # not yet observed answers with one).
        assert answer.body == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "Cannot evict pod as it would violate the pod's disruption budget.",
            "reason": "TooManyRequests",
            "details": {"causes": [{"reason": "DisruptionBudget", "message": expected_cause}]},
            "code": 429,
        }
        assert "Retry-After" not in answer.headers
    else:
        assert answer.body == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "code": 201,
        }


async def test_the_pod_table_shows_scheduling_gated_then_the_phase(
    api: Api,
) -> None:
    await call(api, "POST", PODS, conftest.pod("p1", gates=("example.com/a",)))
    await call(api, "POST", PODS, conftest.pod("p2"))
    answer = await call(
        api, "GET", PODS, headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}
    )
    assert [c["name"] for c in answer.body["columnDefinitions"]] == [
        "Name",
        "Ready",
        "Status",
        "Restarts",
        "Age",
        "IP",
        "Node",
        "Nominated Node",
        "Readiness Gates",
    ]
    assert [r["cells"][:4] for r in answer.body["rows"]] == [
        ["p1", "0/1", "SchedulingGated", "0"],
        ["p2", "0/1", "Pending", "0"],
    ]
    assert answer.body["rows"][0]["object"]["kind"] == "PartialObjectMetadata"


async def test_kubectl_get_pods_shows_the_gated_status(api: Api) -> None:
    await call(api, "POST", PODS, conftest.pod("p1", gates=("example.com/a",)))
    result = api.kubectl("get", "pods")
    assert [line.split()[:5] for line in result.stdout.splitlines()] == [
        ["NAME", "READY", "STATUS", "RESTARTS", "AGE"],
        ["p1", "0/1", "SchedulingGated", "0", result.stdout.splitlines()[1].split()[4]],
    ]


async def test_a_disruption_budget_status_follows_its_pods(api: Api) -> None:
    pdbs = "/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets"
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "budget"},
        "spec": {"selector": {"matchLabels": {"app": "a"}}, "minAvailable": 1},
    }
    await call(api, "POST", pdbs, pdb)

    async def status_becomes(expected: tuple[int, int, int, int]) -> None:
        # kubesim writes the status with the pod's change; a real disruption controller later.
        async def reached() -> bool:
            s = (await api.get(f"{pdbs}/budget")).get("status") or {}
            fields = ("currentHealthy", "desiredHealthy", "disruptionsAllowed", "expectedPods")
            return tuple(s.get(k) for k in fields) == expected

        await conftest.wait_for(reached)

    for i, expected in ((1, (1, 1, 0, 1)), (2, (2, 1, 1, 2))):
        await call(api, "POST", PODS, running_pod(f"p{i}", {"app": "a"}))
        await make_running(api, f"p{i}")
        await status_becomes(expected)
    await call(api, "DELETE", f"{PODS}/p2")
    await status_becomes((1, 1, 0, 1))


@pytest.mark.parametrize(
    ("validation", "expected_status", "expected_warnings"),
    [
        ("Strict", 400, []),
        (
            "Warn",
            201,
            [
                '299 - "unknown field \\"spec.containers[0].imagee\\""',
                '299 - "unknown field \\"spec.shedulingGates\\""',
            ],
        ),
        ("Ignore", 201, []),
    ],
    ids=["strict", "warn", "ignore"],
)
async def test_unknown_fields_of_a_pod_follow_field_validation(
    api: Api, validation: str, expected_status: int, expected_warnings: list[str]
) -> None:
    body = conftest.pod("p1")
    body["spec"]["containers"][0]["imagee"] = "typo"
    body["spec"]["shedulingGates"] = [{"name": "example.com/a"}]
    answer = await call(api, "POST", PODS, body, params={"fieldValidation": validation})
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
            'unknown field "spec.containers[0].imagee", unknown field "spec.shedulingGates"'
        )


def test_kubectl_create_refuses_a_typo_in_a_pod(api: Api) -> None:
    body = conftest.pod("p1")
    body["spec"]["containers"][0]["imagePullPolicyy"] = "Never"
    manifest = json.dumps(body)
    result = api.kubectl("create", "-f", "-", input=manifest)
    assert (
        result.returncode,
        'unknown field "spec.containers[0].imagePullPolicyy"' in result.stderr,
    ) == (1, True)


def fake_node(name: str) -> dict:
    """A node that the real backend's kwok plays the kubelet of (it confirms a deleted pod's
    end when the grace period is over, as kubesim does); tainted so that kube-scheduler
    places nothing else on it."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"}},
        "spec": {"taints": [{"key": "example.com/test", "effect": "NoSchedule"}]},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"}},
    }


class GraceCase(NamedTuple):
    bound: Any
    spec_grace: Any
    requested: Any
    terminating: Any


GRACE_CASES = {
    "a pod on no node goes at once": GraceCase(
        bound=False, spec_grace=2, requested=None, terminating=False
    ),
    "a pod on a node stays Terminating for its grace period": GraceCase(
        bound=True, spec_grace=2, requested=None, terminating=True
    ),
    "a grace period of 0 in the request ends it at once": GraceCase(
        bound=True, spec_grace=2, requested=0, terminating=False
    ),
    "a grace period of 0 in the spec ends it at once": GraceCase(
        bound=True, spec_grace=0, requested=None, terminating=False
    ),
}


@pytest.mark.parametrize(
    ("bound", "spec_grace", "requested", "terminating"),
    GRACE_CASES.values(),
    ids=GRACE_CASES.keys(),
)
async def test_a_deleted_pod_on_a_node_terminates_for_its_grace_period(
    api: Api, bound: bool, spec_grace: int, requested: int | None, terminating: bool
) -> None:
    node = f"n-{api.namespace}"
    assert (await call(api, "POST", "/api/v1/nodes", fake_node(node))).status == 201
    body = conftest.pod("p1", terminationGracePeriodSeconds=spec_grace)
    if bound:
        body["spec"]["nodeName"] = node
    assert (await call(api, "POST", PODS, body)).status == 201
    options = {} if requested is None else {"gracePeriodSeconds": requested}

    deleted = await call(api, "DELETE", f"{PODS}/p1", options)
    right_after = await api.get(f"{PODS}/p1")

    meta = deleted.body["metadata"]
    assert (deleted.status, deleted.body["kind"]) == (200, "Pod")
    assert (right_after is not None, meta.get("deletionGracePeriodSeconds")) == (
        terminating,
        spec_grace if terminating else 0,
    )
    assert meta["deletionTimestamp"].endswith("Z")
    if terminating:
        assert right_after["metadata"]["deletionTimestamp"] == meta["deletionTimestamp"]
        rows = (
            await call(
                api, "GET", PODS, headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}
            )
        ).body["rows"]
        assert [r["cells"][2] for r in rows] == ["Terminating"]

        async def gone() -> bool:
            return await api.get(f"{PODS}/p1") is None

        await conftest.wait_for(gone)


class PriorityCase(NamedTuple):
    class_name: Any
    expected_status: Any
    expected_priority: Any


PRIORITY_CASES = {
    "a pod's priority class gives its priority": PriorityCase(
        class_name="class", expected_status=201, expected_priority=1000
    ),
    "a pod without one has priority 0": PriorityCase(
        class_name=None, expected_status=201, expected_priority=0
    ),
    "an unknown class is refused": PriorityCase(
        class_name="missing", expected_status=403, expected_priority=None
    ),
}


@pytest.mark.parametrize(
    ("class_name", "expected_status", "expected_priority"),
    PRIORITY_CASES.values(),
    ids=PRIORITY_CASES.keys(),
)
async def test_the_priority_admission_resolves_the_priority_class(
    api: Api, class_name: str | None, expected_status: int, expected_priority: int | None
) -> None:
    # Cluster-scoped: named after the test's namespace, and deleted after it on the real backend.
    name = f"high-{api.namespace}"
    priority_class = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": 1000,
        "preemptionPolicy": "Never",
    }
    assert (
        await call(api, "POST", "/apis/scheduling.k8s.io/v1/priorityclasses", priority_class)
    ).status == 201
    body = conftest.pod("p1")
    if class_name is not None:
        body["spec"]["priorityClassName"] = name if class_name == "class" else class_name

    created = await call(api, "POST", PODS, body)

    assert created.status == expected_status, created.body
    if expected_status == 201:
        spec = created.body["spec"]
        assert (spec["priority"], spec["preemptionPolicy"]) == (
            expected_priority,
            "Never" if class_name else "PreemptLowerPriority",
        )
    else:
        assert (created.body["reason"], created.body["message"]) == (
            "Forbidden",
            'pods "p1" is forbidden: no PriorityClass with name missing was found',
        )
