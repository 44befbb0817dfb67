"""Pure parts of the kubesim simulation: quantities, requests, filters, scoring, node syntax."""

from __future__ import annotations

import decimal
import pathlib
import textwrap
from typing import Any

import pytest

from kubesim import simulation

D = decimal.Decimal


QUANTITY_CASES = {
    "a plain integer": ("8", D(8)),
    "a decimal fraction": ("0.5", D("0.5")),
    "a leading dot": (".5", D("0.5")),
    "millis": ("500m", D("0.5")),
    "micros": ("250u", D("0.000250")),
    "nanos": ("1n", D("1e-9")),
    "kilo is 1000": ("2k", D(2000)),
    "mega": ("1M", D(1_000_000)),
    "giga": ("3G", D(3_000_000_000)),
    "tera": ("1T", D(10**12)),
    "peta": ("1P", D(10**15)),
    "a lone E is exa": ("2E", D(2 * 10**18)),
    "Ki is 1024": ("1Ki", D(1024)),
    "Mi": ("1.5Mi", D(1572864)),
    "Gi": ("32Gi", D(32 * 1024**3)),
    "Ti": ("1Ti", D(1024**4)),
    "Pi": ("1Pi", D(1024**5)),
    "Ei": ("1Ei", D(1024**6)),
    "a positive exponent": ("1e3", D(1000)),
    "an upper-case exponent": ("1E3", D(1000)),
    "a negative exponent": ("5e-1", D("0.5")),
    "an explicit sign": ("+2", D(2)),
    "an integer value": (4, D(4)),
    "surrounding spaces": (" 1Gi ", D(1024**3)),
}


@pytest.mark.parametrize(("text", "expected"), QUANTITY_CASES.values(), ids=QUANTITY_CASES.keys())
def test_a_quantity_parses_to_its_exact_value(text: str | int, expected: decimal.Decimal) -> None:
    assert simulation.parse_quantity(text) == expected


@pytest.mark.parametrize(
    "text", ["", "abc", "1Q", "1.2.3", "Gi", "1 Gi", "1iB", "--1"], ids=lambda t: repr(t)
)
def test_a_malformed_quantity_is_an_error_naming_it(text: str) -> None:
    with pytest.raises(ValueError, match="not a Kubernetes quantity") as caught:
        simulation.parse_quantity(text)
    assert repr(text) in str(caught.value)


UNITS_CASES = {
    "cpu cores become millicores": ("cpu", "2", 2000),
    "cpu millis stay millis": ("cpu", "250m", 250),
    "a fraction of a millicore rounds up": ("cpu", "0.0001", 1),
    "memory is in bytes": ("memory", "1Gi", 1024**3),
    "a fraction of a byte rounds up": ("memory", "1.5", 2),
    "an extended resource is a count": ("nvidia.com/gpu", "4", 4),
}


@pytest.mark.parametrize(
    ("resource", "text", "units"), UNITS_CASES.values(), ids=UNITS_CASES.keys()
)
def test_quantities_become_the_schedulers_integer_units(
    resource: str, text: str, units: int
) -> None:
    assert simulation.quantity_units(resource, text) == units


def container(name: str = "c", **requests: str) -> dict[str, Any]:
    return {
        "name": name,
        "image": "busybox",
        "resources": {
            "requests": {k.replace("__", "/").replace("_", "."): v for k, v in requests.items()}
        },
    }


REQUEST_CASES = {
    "containers add up": (
        {"containers": [container(cpu="1", memory="1Gi"), container("d", cpu="500m")]},
        {"cpu": 1500, "memory": 1024**3},
    ),
    "a limit without a request counts as the request": (
        {
            "containers": [
                {"name": "c", "resources": {"limits": {"cpu": "2"}, "requests": {"memory": "1"}}}
            ]
        },
        {"cpu": 2000, "memory": 1},
    ),
    "the largest init container wins over a smaller sum": (
        {
            "containers": [container(cpu="1")],
            "initContainers": [container("i1", cpu="3"), container("i2", cpu="2")],
        },
        {"cpu": 3000},
    ),
    "the sum wins over a smaller init container": (
        {
            "containers": [container(cpu="2"), container("d", cpu="2")],
            "initContainers": [container("i", cpu="3")],
        },
        {"cpu": 4000},
    ),
    "a sidecar adds to the containers and to later init containers": (
        {
            "containers": [container(cpu="1")],
            "initContainers": [
                {**container("sidecar", cpu="1"), "restartPolicy": "Always"},
                container("late", cpu="3"),
            ],
        },
        {"cpu": 4000},
    ),
    "overhead is added": (
        {"containers": [container(cpu="1")], "overhead": {"cpu": "250m"}},
        {"cpu": 1250},
    ),
    "extended resources are counted": (
        {"containers": [container(nvidia_com__gpu="2")]},
        {"nvidia.com/gpu": 2},
    ),
    "a pod without requests requests nothing": ({"containers": [{"name": "c"}]}, {}),
}


@pytest.mark.parametrize(("spec", "expected"), REQUEST_CASES.values(), ids=REQUEST_CASES.keys())
def test_pod_requests_are_computed_as_kubernetes_does(
    spec: dict[str, Any], expected: dict[str, int]
) -> None:
    assert simulation.pod_requests(spec) == expected


def make_pod(
    name: str = "p1",
    *,
    cpu: str | None = None,
    memory: str | None = None,
    gpu: str | None = None,
    created: str = "2026-01-01T00:00:00Z",
    **spec: Any,
) -> simulation.PodInfo:
    requests = {"cpu": cpu, "memory": memory, "nvidia.com/gpu": gpu}
    resources = {"requests": {k: v for k, v in requests.items() if v is not None}}
    return simulation.pod_info(
        {
            "metadata": {
                "name": name,
                "namespace": "default",
                "uid": f"uid-{name}",
                "creationTimestamp": created,
            },
            "spec": {"containers": [{"name": "c", "image": "x", "resources": resources}], **spec},
            "status": {"phase": "Pending"},
        }
    )


def make_node(spec_text: str) -> simulation.NodeInfo:
    return simulation.node_info(simulation.parse_node_flag(spec_text))


TOLERATION_CASES = {
    "equal key and value tolerate": (
        {"key": "k", "value": "v", "effect": "NoSchedule"},
        {"key": "k", "value": "v", "effect": "NoSchedule"},
        True,
    ),
    "the default operator is Equal": (
        {"key": "k", "value": "other"},
        {"key": "k", "value": "v", "effect": "NoSchedule"},
        False,
    ),
    "Exists ignores the value": (
        {"key": "k", "operator": "Exists"},
        {"key": "k", "value": "v", "effect": "NoExecute"},
        True,
    ),
    "an empty key with Exists tolerates everything": (
        {"operator": "Exists"},
        {"key": "any", "value": "v", "effect": "NoSchedule"},
        True,
    ),
    "another effect does not tolerate": (
        {"key": "k", "operator": "Exists", "effect": "NoExecute"},
        {"key": "k", "effect": "NoSchedule"},
        False,
    ),
    "another key does not tolerate": (
        {"key": "j", "operator": "Exists"},
        {"key": "k", "effect": "NoSchedule"},
        False,
    ),
    "an empty value equals a missing one": (
        {"key": "k", "operator": "Equal", "value": ""},
        {"key": "k", "effect": "NoSchedule"},
        True,
    ),
}


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"), TOLERATION_CASES.values(), ids=TOLERATION_CASES.keys()
)
def test_a_toleration_tolerates_a_taint_as_kubernetes_defines_it(
    toleration: dict[str, Any], taint: dict[str, Any], expected: bool
) -> None:
    assert simulation.tolerates(toleration, taint) is expected


def test_prefer_no_schedule_taints_never_block() -> None:
    taints = [{"key": "soft", "effect": "PreferNoSchedule"}, {"key": "hard", "effect": "NoExecute"}]
    assert simulation.untolerated_taint([], taints) == {"key": "hard", "effect": "NoExecute"}


REQUIREMENT_CASES = {
    "In with the value": ({"key": "zone", "operator": "In", "values": ["a", "b"]}, True),
    "In without the value": ({"key": "zone", "operator": "In", "values": ["c"]}, False),
    "NotIn with the value": ({"key": "zone", "operator": "NotIn", "values": ["a"]}, False),
    "NotIn on a missing key": ({"key": "rack", "operator": "NotIn", "values": ["a"]}, True),
    "Exists": ({"key": "zone", "operator": "Exists"}, True),
    "DoesNotExist": ({"key": "zone", "operator": "DoesNotExist"}, False),
    "Gt with a larger label": ({"key": "gen", "operator": "Gt", "values": ["3"]}, True),
    "Gt with an equal label": ({"key": "gen", "operator": "Gt", "values": ["4"]}, False),
    "Lt with a larger label": ({"key": "gen", "operator": "Lt", "values": ["3"]}, False),
    "Lt with a smaller label": ({"key": "gen", "operator": "Lt", "values": ["5"]}, True),
    "Gt on a label that is no integer": ({"key": "zone", "operator": "Gt", "values": ["1"]}, False),
    "Gt on a missing label": ({"key": "rack", "operator": "Gt", "values": ["1"]}, False),
    "an unknown operator": ({"key": "zone", "operator": "Near", "values": ["a"]}, False),
}


@pytest.mark.parametrize(
    ("requirement", "expected"), REQUIREMENT_CASES.values(), ids=REQUIREMENT_CASES.keys()
)
def test_a_node_selector_requirement_matches_node_labels(
    requirement: dict[str, Any], expected: bool
) -> None:
    labels = {"zone": "a", "gen": "4"}
    assert simulation.match_node_selector_requirement(requirement, labels) is expected


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}
        }
    }


FILTER_CASES = {
    "a pod that fits has no reasons": (make_pod(cpu="1"), "n1:cpu=2,memory=1Gi", [], []),
    "too little cpu": (make_pod(cpu="3"), "n1:cpu=2", [], ["Insufficient cpu"]),
    "every short resource is reported, in kube-scheduler's order": (
        make_pod(cpu="3", memory="2Gi", gpu="1"),
        "n1:cpu=2,memory=1Gi,pods=1",
        [make_pod("other")],
        ["Too many pods", "Insufficient cpu", "Insufficient memory", "Insufficient nvidia.com/gpu"],
    ),
    "room already taken by other pods counts": (
        make_pod(cpu="1"),
        "n1:cpu=2",
        [make_pod("a", cpu="1500m")],
        ["Insufficient cpu"],
    ),
    "a resource the node lacks is insufficient": (
        make_pod(gpu="1"),
        "n1:cpu=2",
        [],
        ["Insufficient nvidia.com/gpu"],
    ),
    "a full pod count": (make_pod(), "n1:cpu=2,pods=1", [make_pod("a")], ["Too many pods"]),
    "a cordoned node": (make_pod(), "n1:cpu=2,unschedulable", [], ["node(s) were unschedulable"]),
    "a cordoned node for a pod tolerating it": (
        make_pod(
            tolerations=[
                {
                    "key": "node.kubernetes.io/unschedulable",
                    "operator": "Exists",
                    "effect": "NoSchedule",
                }
            ]
        ),
        "n1:cpu=2,unschedulable",
        [],
        [],
    ),
    "an untolerated taint names key and value": (
        make_pod(),
        "n1:cpu=2,taint.gpu=present:NoSchedule",
        [],
        ["node(s) had untolerated taint {gpu: present}"],
    ),
    "a tolerated taint": (
        make_pod(tolerations=[{"key": "gpu", "operator": "Exists"}]),
        "n1:cpu=2,taint.gpu=present:NoSchedule",
        [],
        [],
    ),
    "a taint stops before resources are checked": (
        make_pod(cpu="9"),
        "n1:cpu=2,taint.gpu:NoExecute",
        [],
        ["node(s) had untolerated taint {gpu: }"],
    ),
    "a nodeSelector label that differs": (
        make_pod(nodeSelector={"pool": "gpu"}),
        "n1:cpu=2,label.pool=cpu",
        [],
        ["node(s) didn't match Pod's node affinity/selector"],
    ),
    "a nodeSelector that matches": (
        make_pod(nodeSelector={"pool": "gpu"}),
        "n1:label.pool=gpu",
        [],
        [],
    ),
    "required affinity with one matching term of two": (
        make_pod(
            affinity=required(
                {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["x"]}]},
                {"matchExpressions": [{"key": "pool", "operator": "Exists"}]},
            )
        ),
        "n1:label.pool=gpu",
        [],
        [],
    ),
    "required affinity with no matching term": (
        make_pod(
            affinity=required({"matchExpressions": [{"key": "pool", "operator": "DoesNotExist"}]})
        ),
        "n1:label.pool=gpu",
        [],
        ["node(s) didn't match Pod's node affinity/selector"],
    ),
    "required affinity by metadata.name field": (
        make_pod(
            affinity=required(
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
            )
        ),
        "n1:cpu=1",
        [],
        [],
    ),
    "an empty term matches no node": (
        make_pod(affinity=required({})),
        "n1:cpu=1",
        [],
        ["node(s) didn't match Pod's node affinity/selector"],
    ),
}


@pytest.mark.parametrize(
    ("pod", "node_text", "on_node", "reasons"), FILTER_CASES.values(), ids=FILTER_CASES.keys()
)
def test_filters_give_kube_schedulers_reasons(
    pod: simulation.PodInfo, node_text: str, on_node: list[simulation.PodInfo], reasons: list[str]
) -> None:
    usage = simulation.Usage()
    for other in on_node:
        usage.add(other)
    assert simulation.filter_reasons(pod, make_node(node_text), usage) == reasons


MESSAGE_CASES = {
    "one reason on every node": (
        {"a": ["Insufficient cpu"], "b": ["Insufficient cpu"], "c": ["Insufficient cpu"]},
        "0/3 nodes are available: 3 Insufficient cpu.",
    ),
    "reasons are counted per node and sorted as strings": (
        {
            "a": ["Insufficient cpu", "Insufficient memory"],
            "b": ["node(s) were unschedulable"],
            "c": ["Insufficient cpu"],
        },
        "0/3 nodes are available: 1 Insufficient memory, 1 node(s) were unschedulable, "
        "2 Insufficient cpu.",
    ),
    "ten sorts before two, as upstream": (
        {
            **{f"n{i:02}": ["Insufficient cpu"] for i in range(10)},
            "x": ["Too many pods"],
            "y": ["Too many pods"],
        },
        "0/12 nodes are available: 10 Insufficient cpu, 2 Too many pods.",
    ),
    "no nodes at all": ({}, "no nodes available to schedule pods"),
}


@pytest.mark.parametrize(("reasons", "message"), MESSAGE_CASES.values(), ids=MESSAGE_CASES.keys())
def test_the_unschedulable_message_is_kube_schedulers_fit_error(
    reasons: dict[str, list[str]], message: str
) -> None:
    assert simulation.fit_error_message(reasons) == message


CHOICE_CASES = {
    "the node with the most free room wins": (
        make_pod(cpu="1"),
        ["a:cpu=4,memory=8Gi", "b:cpu=8,memory=8Gi"],
        {},
        ("b", ""),
    ),
    "identical room goes to the first name": (
        make_pod(cpu="1"),
        ["b:cpu=4,memory=8Gi", "a:cpu=4,memory=8Gi"],
        {},
        ("a", ""),
    ),
    "pods already placed make a node less free": (
        make_pod(cpu="1"),
        ["a:cpu=4,memory=8Gi", "b:cpu=4,memory=8Gi"],
        {"a": [make_pod("x", cpu="2")]},
        ("b", ""),
    ),
    "pods without requests still spread, by the non-zero defaults": (
        make_pod(),
        ["a:cpu=4,memory=8Gi", "b:cpu=4,memory=8Gi"],
        {"a": [make_pod("x")]},
        ("b", ""),
    ),
    "an infeasible node is never chosen": (
        make_pod(cpu="6"),
        ["a:cpu=4,memory=8Gi", "b:cpu=8,memory=8Gi,taint.t:NoSchedule", "c:cpu=6,memory=1Gi"],
        {},
        ("c", ""),
    ),
    "no feasible node gives the message": (
        make_pod(cpu="16"),
        ["a:cpu=4", "b:cpu=8", "c:cpu=8,unschedulable"],
        {},
        (None, "0/3 nodes are available: 1 node(s) were unschedulable, 2 Insufficient cpu."),
    ),
}


@pytest.mark.parametrize(
    ("pod", "node_texts", "placed", "expected"), CHOICE_CASES.values(), ids=CHOICE_CASES.keys()
)
def test_the_scheduler_chooses_the_least_allocated_feasible_node(
    pod: simulation.PodInfo,
    node_texts: list[str],
    placed: dict[str, list[simulation.PodInfo]],
    expected: tuple[str | None, str],
) -> None:
    nodes = {n.name: n for n in map(make_node, node_texts)}
    usage = {name: simulation.Usage() for name in nodes}
    for name, pods in placed.items():
        for other in pods:
            usage[name].add(other)
    assert simulation.choose_node(pod, nodes, usage) == expected


def test_a_scheduling_candidate_is_default_scheduled_unbound_ungated_and_pending() -> None:
    cases = {
        "plain": make_pod(),
        "gated": make_pod(schedulingGates=[{"name": "g"}]),
        "bound": make_pod(nodeName="n1"),
        "other scheduler": make_pod(schedulerName="volcano"),
        "empty scheduler name": make_pod(schedulerName=""),
    }
    assert {name: pod.wants_scheduling for name, pod in cases.items()} == {
        "plain": True,
        "gated": False,
        "bound": False,
        "other scheduler": False,
        "empty scheduler name": True,
    }


def test_a_node_flag_becomes_a_full_node_manifest() -> None:
    node = simulation.parse_node_flag(
        "gpu-1:cpu=32,memory=256Gi,nvidia.com/gpu=8,label.pool=gpu,"
        "label.topology.kubernetes.io/zone=z1,taint.nvidia.com/gpu=present:NoSchedule,taint.spot:NoExecute"
    )
    conditions = node["status"].pop("conditions")
    assert [(c["type"], c["status"]) for c in conditions] == [("Ready", "True")]
    assert node == {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "gpu-1",
            "labels": {
                "pool": "gpu",
                "topology.kubernetes.io/zone": "z1",
                "kubernetes.io/hostname": "gpu-1",
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
            },
        },
        "spec": {
            "taints": [
                {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
                {"key": "spot", "effect": "NoExecute"},
            ]
        },
        "status": {
            "capacity": {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": "8", "pods": "110"},
            "allocatable": {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": "8", "pods": "110"},
            "addresses": [
                {"type": "InternalIP", "address": "127.0.0.1"},
                {"type": "Hostname", "address": "gpu-1"},
            ],
            "nodeInfo": {
                "kubeletVersion": "v1.32.0",
                "containerRuntimeVersion": "kubesim://1",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }


NODE_FLAG_CASES = {
    "a bare name gets the default pod count": ("n1", {"pods": "110"}, {}),
    "pods can be set": ("n1:pods=4,cpu=1", {"pods": "4", "cpu": "1"}, {}),
    "unschedulable cordons": ("n1:unschedulable", {"pods": "110"}, {"unschedulable": True}),
    "unschedulable=false does not": ("n1:unschedulable=false", {"pods": "110"}, {}),
}


@pytest.mark.parametrize(
    ("text", "capacity", "spec"), NODE_FLAG_CASES.values(), ids=NODE_FLAG_CASES.keys()
)
def test_node_flag_items_set_capacity_and_spec(
    text: str, capacity: dict[str, str], spec: dict[str, Any]
) -> None:
    node = simulation.parse_node_flag(text)
    assert (node["status"]["allocatable"], node["spec"]) == (capacity, spec)


BAD_NODE_FLAG_CASES = {
    "no name": (":cpu=1", "--node ':cpu=1': the node name is missing (NAME[:ITEM,...])"),
    "a bad quantity": (
        "n1:cpu=lots",
        "--node 'n1:cpu=lots': item 'cpu=lots': quantity 'lots': not a Kubernetes quantity",
    ),
    "a resource without a value": (
        "n1:cpu",
        "--node 'n1:cpu': item 'cpu': a resource is RESOURCE=QUANTITY",
    ),
    "a label without a value": (
        "n1:label.x",
        "--node 'n1:label.x': item 'label.x': a label is label.KEY=VALUE",
    ),
    "a taint with an unknown effect": (
        "n1:taint.x=y:Never",
        "--node 'n1:taint.x=y:Never': item 'taint.x=y:Never': a taint is taint.KEY[=VALUE]:EFFECT, "
        "EFFECT one of NoSchedule, PreferNoSchedule, NoExecute",
    ),
}


@pytest.mark.parametrize(
    ("text", "message"), BAD_NODE_FLAG_CASES.values(), ids=BAD_NODE_FLAG_CASES.keys()
)
def test_a_bad_node_flag_is_an_error_naming_the_item(text: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        simulation.parse_node_flag(text)
    assert str(caught.value) == message


def test_a_nodes_file_holds_node_documents_and_lists(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "nodes.yaml"
    path.write_text(
        textwrap.dedent(
            """\
            apiVersion: v1
            kind: Node
            metadata: {name: a, labels: {pool: cpu}}
            status: {capacity: {cpu: "4", memory: 8Gi}}
            ---
            ---
            apiVersion: v1
            kind: List
            items:
            - apiVersion: v1
              kind: Node
              metadata: {name: b}
              spec: {unschedulable: true}
              status: {allocatable: {cpu: "2", pods: "10"}}
            """
        )
    )
    nodes = simulation.load_nodes_file(str(path))
    assert [
        (
            n["metadata"]["name"],
            n["metadata"]["labels"].get("pool"),
            n["status"]["allocatable"],
            n["spec"],
        )
        for n in nodes
    ] == [
        ("a", "cpu", {"cpu": "4", "memory": "8Gi", "pods": "110"}, {}),
        ("b", None, {"cpu": "2", "pods": "10"}, {"unschedulable": True}),
    ]


BAD_FILE_CASES = {
    "a document of another kind": (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n",
        "document 1: expected a Node, got Pod",
    ),
    "a node without a name": (
        "kind: Node\nmetadata: {}\n",
        "document 1: Node manifest: metadata.name is required",
    ),
    "a bad quantity": (
        "kind: Node\nmetadata: {name: a}\nstatus: {capacity: {cpu: x}}\n",
        "document 1: node a: status.capacity['cpu']: quantity 'x': not a Kubernetes quantity",
    ),
}


@pytest.mark.parametrize(("text", "message"), BAD_FILE_CASES.values(), ids=BAD_FILE_CASES.keys())
def test_a_bad_nodes_file_is_an_error_naming_the_document(
    tmp_path: pathlib.Path, text: str, message: str
) -> None:
    path = tmp_path / "nodes.yaml"
    path.write_text(text)
    with pytest.raises(ValueError) as caught:
        simulation.load_nodes_file(str(path))
    assert str(caught.value) == f"{path}: {message}"


def test_a_pass_places_pods_in_creation_order_each_counting_for_the_next() -> None:
    nodes = {n.name: n for n in map(make_node, ["a:cpu=2,memory=8Gi", "b:cpu=1,memory=8Gi"])}
    usage = {name: simulation.Usage() for name in nodes}
    candidates = [
        make_pod("late", cpu="1", created="2026-01-01T00:00:09Z"),
        make_pod("second", cpu="1", created="2026-01-01T00:00:01Z"),
        make_pod("first", cpu="1", created="2026-01-01T00:00:01Z"),
        make_pod("early", cpu="1", created="2026-01-01T00:00:00Z"),
    ]

    placements = simulation.plan_placements(candidates, nodes, usage)

    assert [(p.pod.name, p.node, p.message) for p in placements] == [
        ("early", "a", ""),
        ("first", "b", ""),
        ("second", "a", ""),
        ("late", None, "0/2 nodes are available: 2 Insufficient cpu."),
    ]
    assert {name: u.requests for name, u in usage.items()} == {"a": {}, "b": {}}


def with_condition(**condition: str) -> simulation.PodInfo:
    pod = make_pod()
    raw = {
        **pod.obj,
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", **condition}]},
    }
    return simulation.pod_info(raw)


UPDATE_CASES = {
    "no condition yet": (make_pod(), True),
    "the gate condition is replaced": (
        with_condition(status="False", reason="SchedulingGated", message="blocked"),
        True,
    ),
    "the same message is not rewritten": (
        with_condition(
            status="False",
            reason="Unschedulable",
            message="0/1 nodes are available: 1 Too many pods.",
        ),
        False,
    ),
    "another message is rewritten": (
        with_condition(
            status="False",
            reason="Unschedulable",
            message="0/2 nodes are available: 2 Too many pods.",
        ),
        True,
    ),
}


@pytest.mark.parametrize(("pod", "expected"), UPDATE_CASES.values(), ids=UPDATE_CASES.keys())
def test_the_unschedulable_condition_is_written_only_when_it_changes(
    pod: simulation.PodInfo, expected: bool
) -> None:
    message = "0/1 nodes are available: 1 Too many pods."
    assert simulation.needs_unschedulable_update(pod, message) is expected


def test_a_pass_gives_the_same_verdicts_as_placing_pods_one_by_one() -> None:
    nodes = {
        n.name: n
        for n in map(make_node, ["a:cpu=3,memory=4Gi,pods=3", "b:cpu=2,memory=2Gi,pods=2"])
    }
    shapes: list[dict[str, Any]] = [
        {"cpu": "4"},
        {"cpu": "1"},
        {"cpu": "4"},
        {"memory": "3Gi"},
        {"cpu": "1", "nodeSelector": {"kubernetes.io/hostname": "b"}},
        {"cpu": "4"},
        {},
        {},
        {"cpu": "4"},
        {"memory": "3Gi"},
    ]
    candidates = [
        make_pod(f"p{i}", created=f"2026-01-01T00:00:{i:02}Z", **shape)
        for i, shape in enumerate(shapes)
    ]
    usage = {name: simulation.Usage() for name in nodes}
    expected = []
    for pod in candidates:
        node, message = simulation.choose_node(pod, nodes, usage)
        if node is not None:
            usage[node].add(pod)
        expected.append((pod.name, node, message))

    fresh = {name: simulation.Usage() for name in nodes}
    planned = simulation.plan_placements(candidates, nodes, fresh)

    assert [(p.pod.name, p.node, p.message) for p in planned] == expected
    # p0 and p8 have the same shape; placements between them changed why p8 fails.
    assert (expected[0][2], expected[8][2]) == (
        "0/2 nodes are available: 2 Insufficient cpu.",
        "0/2 nodes are available: 2 Insufficient cpu, 2 Too many pods.",
    )
