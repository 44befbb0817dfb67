"""Pure parts of the kubesim simulation: quantities, requests, filters, scoring, node syntax."""

from __future__ import annotations

import decimal
import pathlib
import textwrap
from typing import Any, NamedTuple

import pytest

from kubesim import simulation

D = decimal.Decimal


class QuantityCase(NamedTuple):
    text: Any
    expected: Any


QUANTITY_CASES = {
    "a plain integer": QuantityCase(text="8", expected=D(8)),
    "a decimal fraction": QuantityCase(text="0.5", expected=D("0.5")),
    "a leading dot": QuantityCase(text=".5", expected=D("0.5")),
    "millis": QuantityCase(text="500m", expected=D("0.5")),
    "micros": QuantityCase(text="250u", expected=D("0.000250")),
    "nanos": QuantityCase(text="1n", expected=D("1e-9")),
    "kilo is 1000": QuantityCase(text="2k", expected=D(2000)),
    "mega": QuantityCase(text="1M", expected=D(1_000_000)),
    "giga": QuantityCase(text="3G", expected=D(3_000_000_000)),
    "tera": QuantityCase(text="1T", expected=D(10**12)),
    "peta": QuantityCase(text="1P", expected=D(10**15)),
    "a lone E is exa": QuantityCase(text="2E", expected=D(2 * 10**18)),
    "Ki is 1024": QuantityCase(text="1Ki", expected=D(1024)),
    "Mi": QuantityCase(text="1.5Mi", expected=D(1572864)),
    "Gi": QuantityCase(text="32Gi", expected=D(32 * 1024**3)),
    "Ti": QuantityCase(text="1Ti", expected=D(1024**4)),
    "Pi": QuantityCase(text="1Pi", expected=D(1024**5)),
    "Ei": QuantityCase(text="1Ei", expected=D(1024**6)),
    "a positive exponent": QuantityCase(text="1e3", expected=D(1000)),
    "an upper-case exponent": QuantityCase(text="1E3", expected=D(1000)),
    "a negative exponent": QuantityCase(text="5e-1", expected=D("0.5")),
    "an explicit sign": QuantityCase(text="+2", expected=D(2)),
    "an integer value": QuantityCase(text=4, expected=D(4)),
    "surrounding spaces": QuantityCase(text=" 1Gi ", expected=D(1024**3)),
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


class UnitsCase(NamedTuple):
    resource: Any
    text: Any
    units: Any


UNITS_CASES = {
    "cpu cores become millicores": UnitsCase(resource="cpu", text="2", units=2000),
    "cpu millis stay millis": UnitsCase(resource="cpu", text="250m", units=250),
    "a fraction of a millicore rounds up": UnitsCase(resource="cpu", text="0.0001", units=1),
    "memory is in bytes": UnitsCase(resource="memory", text="1Gi", units=1024**3),
    "a fraction of a byte rounds up": UnitsCase(resource="memory", text="1.5", units=2),
    "an extended resource is a count": UnitsCase(resource="nvidia.com/gpu", text="4", units=4),
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


class RequestCase(NamedTuple):
    spec: Any
    expected: Any


REQUEST_CASES = {
    "containers add up": RequestCase(
        spec={"containers": [container(cpu="1", memory="1Gi"), container("d", cpu="500m")]},
        expected={"cpu": 1500, "memory": 1024**3},
    ),
    "a limit without a request counts as the request": RequestCase(
        spec={
            "containers": [
                {"name": "c", "resources": {"limits": {"cpu": "2"}, "requests": {"memory": "1"}}}
            ]
        },
        expected={"cpu": 2000, "memory": 1},
    ),
    "the largest init container wins over a smaller sum": RequestCase(
        spec={
            "containers": [container(cpu="1")],
            "initContainers": [container("i1", cpu="3"), container("i2", cpu="2")],
        },
        expected={"cpu": 3000},
    ),
    "the sum wins over a smaller init container": RequestCase(
        spec={
            "containers": [container(cpu="2"), container("d", cpu="2")],
            "initContainers": [container("i", cpu="3")],
        },
        expected={"cpu": 4000},
    ),
    "a sidecar adds to the containers and to later init containers": RequestCase(
        spec={
            "containers": [container(cpu="1")],
            "initContainers": [
                {**container("sidecar", cpu="1"), "restartPolicy": "Always"},
                container("late", cpu="3"),
            ],
        },
        expected={"cpu": 4000},
    ),
    "overhead is added": RequestCase(
        spec={"containers": [container(cpu="1")], "overhead": {"cpu": "250m"}},
        expected={"cpu": 1250},
    ),
    "extended resources are counted": RequestCase(
        spec={"containers": [container(nvidia_com__gpu="2")]},
        expected={"nvidia.com/gpu": 2},
    ),
    "pod-level requests replace the containers' on their resources": RequestCase(
        spec={
            "containers": [container(cpu="1", nvidia_com__gpu="1")],
            "initContainers": [container("i", cpu="3")],
            "resources": {"requests": {"cpu": "20", "memory": "50Gi"}},
            "overhead": {"cpu": "250m"},
        },
        expected={"cpu": 20250, "memory": 50 * 1024**3, "nvidia.com/gpu": 1},
    ),
    "a pod without requests requests nothing": RequestCase(
        spec={"containers": [{"name": "c"}]}, expected={}
    ),
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


class TolerationCase(NamedTuple):
    toleration: Any
    taint: Any
    expected: Any


TOLERATION_CASES = {
    "equal key and value tolerate": TolerationCase(
        toleration={"key": "k", "value": "v", "effect": "NoSchedule"},
        taint={"key": "k", "value": "v", "effect": "NoSchedule"},
        expected=True,
    ),
    "the default operator is Equal": TolerationCase(
        toleration={"key": "k", "value": "other"},
        taint={"key": "k", "value": "v", "effect": "NoSchedule"},
        expected=False,
    ),
    "Exists ignores the value": TolerationCase(
        toleration={"key": "k", "operator": "Exists"},
        taint={"key": "k", "value": "v", "effect": "NoExecute"},
        expected=True,
    ),
    "an empty key with Exists tolerates everything": TolerationCase(
        toleration={"operator": "Exists"},
        taint={"key": "any", "value": "v", "effect": "NoSchedule"},
        expected=True,
    ),
    "another effect does not tolerate": TolerationCase(
        toleration={"key": "k", "operator": "Exists", "effect": "NoExecute"},
        taint={"key": "k", "effect": "NoSchedule"},
        expected=False,
    ),
    "another key does not tolerate": TolerationCase(
        toleration={"key": "j", "operator": "Exists"},
        taint={"key": "k", "effect": "NoSchedule"},
        expected=False,
    ),
    "an empty value equals a missing one": TolerationCase(
        toleration={"key": "k", "operator": "Equal", "value": ""},
        taint={"key": "k", "effect": "NoSchedule"},
        expected=True,
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


class RequirementCase(NamedTuple):
    requirement: Any
    expected: Any


REQUIREMENT_CASES = {
    "In with the value": RequirementCase(
        requirement={"key": "zone", "operator": "In", "values": ["a", "b"]}, expected=True
    ),
    "In without the value": RequirementCase(
        requirement={"key": "zone", "operator": "In", "values": ["c"]}, expected=False
    ),
    "NotIn with the value": RequirementCase(
        requirement={"key": "zone", "operator": "NotIn", "values": ["a"]}, expected=False
    ),
    "NotIn on a missing key": RequirementCase(
        requirement={"key": "rack", "operator": "NotIn", "values": ["a"]}, expected=True
    ),
    "Exists": RequirementCase(requirement={"key": "zone", "operator": "Exists"}, expected=True),
    "DoesNotExist": RequirementCase(
        requirement={"key": "zone", "operator": "DoesNotExist"}, expected=False
    ),
    "Gt with a larger label": RequirementCase(
        requirement={"key": "gen", "operator": "Gt", "values": ["3"]}, expected=True
    ),
    "Gt with an equal label": RequirementCase(
        requirement={"key": "gen", "operator": "Gt", "values": ["4"]}, expected=False
    ),
    "Lt with a larger label": RequirementCase(
        requirement={"key": "gen", "operator": "Lt", "values": ["3"]}, expected=False
    ),
    "Lt with a smaller label": RequirementCase(
        requirement={"key": "gen", "operator": "Lt", "values": ["5"]}, expected=True
    ),
    "Gt on a label that is no integer": RequirementCase(
        requirement={"key": "zone", "operator": "Gt", "values": ["1"]}, expected=False
    ),
    "Gt on a missing label": RequirementCase(
        requirement={"key": "rack", "operator": "Gt", "values": ["1"]}, expected=False
    ),
    "an unknown operator": RequirementCase(
        requirement={"key": "zone", "operator": "Near", "values": ["a"]}, expected=False
    ),
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


class FilterCase(NamedTuple):
    pod: Any
    node_text: Any
    on_node: Any
    reasons: Any


FILTER_CASES = {
    "a pod that fits has no reasons": FilterCase(
        pod=make_pod(cpu="1"), node_text="n1:cpu=2,memory=1Gi", on_node=[], reasons=[]
    ),
    "too little cpu": FilterCase(
        pod=make_pod(cpu="3"), node_text="n1:cpu=2", on_node=[], reasons=["Insufficient cpu"]
    ),
    "every short resource is reported, in kube-scheduler's order": FilterCase(
        pod=make_pod(cpu="3", memory="2Gi", gpu="1"),
        node_text="n1:cpu=2,memory=1Gi,pods=1",
        on_node=[make_pod("other")],
        reasons=[
            "Too many pods",
            "Insufficient cpu",
            "Insufficient memory",
            "Insufficient nvidia.com/gpu",
        ],
    ),
    "room already taken by other pods counts": FilterCase(
        pod=make_pod(cpu="1"),
        node_text="n1:cpu=2",
        on_node=[make_pod("a", cpu="1500m")],
        reasons=["Insufficient cpu"],
    ),
    "a resource the node lacks is insufficient": FilterCase(
        pod=make_pod(gpu="1"),
        node_text="n1:cpu=2",
        on_node=[],
        reasons=["Insufficient nvidia.com/gpu"],
    ),
    "a full pod count": FilterCase(
        pod=make_pod(),
        node_text="n1:cpu=2,pods=1",
        on_node=[make_pod("a")],
        reasons=["Too many pods"],
    ),
    "a cordoned node": FilterCase(
        pod=make_pod(),
        node_text="n1:cpu=2,unschedulable",
        on_node=[],
        reasons=["node(s) were unschedulable"],
    ),
    "a cordoned node for a pod tolerating it": FilterCase(
        pod=make_pod(
            tolerations=[
                {
                    "key": "node.kubernetes.io/unschedulable",
                    "operator": "Exists",
                    "effect": "NoSchedule",
                }
            ]
        ),
        node_text="n1:cpu=2,unschedulable",
        on_node=[],
        reasons=[],
    ),
    "an untolerated taint names key and value": FilterCase(
        pod=make_pod(),
        node_text="n1:cpu=2,taint.gpu=present:NoSchedule",
        on_node=[],
        reasons=["node(s) had untolerated taint {gpu: present}"],
    ),
    "a tolerated taint": FilterCase(
        pod=make_pod(tolerations=[{"key": "gpu", "operator": "Exists"}]),
        node_text="n1:cpu=2,taint.gpu=present:NoSchedule",
        on_node=[],
        reasons=[],
    ),
    "a taint stops before resources are checked": FilterCase(
        pod=make_pod(cpu="9"),
        node_text="n1:cpu=2,taint.gpu:NoExecute",
        on_node=[],
        reasons=["node(s) had untolerated taint {gpu: }"],
    ),
    "a nodeSelector label that differs": FilterCase(
        pod=make_pod(nodeSelector={"pool": "gpu"}),
        node_text="n1:cpu=2,label.pool=cpu",
        on_node=[],
        reasons=["node(s) didn't match Pod's node affinity/selector"],
    ),
    "a nodeSelector that matches": FilterCase(
        pod=make_pod(nodeSelector={"pool": "gpu"}),
        node_text="n1:label.pool=gpu",
        on_node=[],
        reasons=[],
    ),
    "required affinity with one matching term of two": FilterCase(
        pod=make_pod(
            affinity=required(
                {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["x"]}]},
                {"matchExpressions": [{"key": "pool", "operator": "Exists"}]},
            )
        ),
        node_text="n1:label.pool=gpu",
        on_node=[],
        reasons=[],
    ),
    "required affinity with no matching term": FilterCase(
        pod=make_pod(
            affinity=required({"matchExpressions": [{"key": "pool", "operator": "DoesNotExist"}]})
        ),
        node_text="n1:label.pool=gpu",
        on_node=[],
        reasons=["node(s) didn't match Pod's node affinity/selector"],
    ),
    "required affinity by metadata.name field": FilterCase(
        pod=make_pod(
            affinity=required(
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
            )
        ),
        node_text="n1:cpu=1",
        on_node=[],
        reasons=[],
    ),
    "an empty term matches no node": FilterCase(
        pod=make_pod(affinity=required({})),
        node_text="n1:cpu=1",
        on_node=[],
        reasons=["node(s) didn't match Pod's node affinity/selector"],
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


class MessageCase(NamedTuple):
    reasons: Any
    message: Any


MESSAGE_CASES = {
    "one reason on every node": MessageCase(
        reasons={"a": ["Insufficient cpu"], "b": ["Insufficient cpu"], "c": ["Insufficient cpu"]},
        message="0/3 nodes are available: 3 Insufficient cpu.",
    ),
    "reasons are counted per node and sorted as strings": MessageCase(
        reasons={
            "a": ["Insufficient cpu", "Insufficient memory"],
            "b": ["node(s) were unschedulable"],
            "c": ["Insufficient cpu"],
        },
        message="0/3 nodes are available: 1 Insufficient memory, 1 node(s) were unschedulable, "
        "2 Insufficient cpu.",
    ),
    "ten sorts before two, as upstream": MessageCase(
        reasons={
            **{f"n{i:02}": ["Insufficient cpu"] for i in range(10)},
            "x": ["Too many pods"],
            "y": ["Too many pods"],
        },
        message="0/12 nodes are available: 10 Insufficient cpu, 2 Too many pods.",
    ),
    "no nodes at all": MessageCase(reasons={}, message="no nodes available to schedule pods"),
}


@pytest.mark.parametrize(("reasons", "message"), MESSAGE_CASES.values(), ids=MESSAGE_CASES.keys())
def test_the_unschedulable_message_is_kube_schedulers_fit_error(
    reasons: dict[str, list[str]], message: str
) -> None:
    assert simulation.fit_error_message(reasons) == message


class ChoiceCase(NamedTuple):
    pod: Any
    node_texts: Any
    placed: Any
    expected: Any


CHOICE_CASES = {
    "the node with the most free room wins": ChoiceCase(
        pod=make_pod(cpu="1"),
        node_texts=["a:cpu=4,memory=8Gi", "b:cpu=8,memory=8Gi"],
        placed={},
        expected=("b", ""),
    ),
    "identical room goes to the first name": ChoiceCase(
        pod=make_pod(cpu="1"),
        node_texts=["b:cpu=4,memory=8Gi", "a:cpu=4,memory=8Gi"],
        placed={},
        expected=("a", ""),
    ),
    "pods already placed make a node less free": ChoiceCase(
        pod=make_pod(cpu="1"),
        node_texts=["a:cpu=4,memory=8Gi", "b:cpu=4,memory=8Gi"],
        placed={"a": [make_pod("x", cpu="2")]},
        expected=("b", ""),
    ),
    "pods without requests still spread, by the non-zero defaults": ChoiceCase(
        pod=make_pod(),
        node_texts=["a:cpu=4,memory=8Gi", "b:cpu=4,memory=8Gi"],
        placed={"a": [make_pod("x")]},
        expected=("b", ""),
    ),
    "an infeasible node is never chosen": ChoiceCase(
        pod=make_pod(cpu="6"),
        node_texts=[
            "a:cpu=4,memory=8Gi",
            "b:cpu=8,memory=8Gi,taint.t:NoSchedule",
            "c:cpu=6,memory=1Gi",
        ],
        placed={},
        expected=("c", ""),
    ),
    "no feasible node gives the message": ChoiceCase(
        pod=make_pod(cpu="16"),
        node_texts=["a:cpu=4", "b:cpu=8", "c:cpu=8,unschedulable"],
        placed={},
        expected=(
            None,
            "0/3 nodes are available: 1 node(s) were unschedulable, 2 Insufficient cpu.",
        ),
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


class NodeFlagCase(NamedTuple):
    text: Any
    capacity: Any
    spec: Any


NODE_FLAG_CASES = {
    "a bare name gets the default pod count": NodeFlagCase(
        text="n1", capacity={"pods": "110"}, spec={}
    ),
    "pods can be set": NodeFlagCase(
        text="n1:pods=4,cpu=1", capacity={"pods": "4", "cpu": "1"}, spec={}
    ),
    "unschedulable cordons": NodeFlagCase(
        text="n1:unschedulable", capacity={"pods": "110"}, spec={"unschedulable": True}
    ),
    "unschedulable=false does not": NodeFlagCase(
        text="n1:unschedulable=false", capacity={"pods": "110"}, spec={}
    ),
}


@pytest.mark.parametrize(
    ("text", "capacity", "spec"), NODE_FLAG_CASES.values(), ids=NODE_FLAG_CASES.keys()
)
def test_node_flag_items_set_capacity_and_spec(
    text: str, capacity: dict[str, str], spec: dict[str, Any]
) -> None:
    node = simulation.parse_node_flag(text)
    assert (node["status"]["allocatable"], node["spec"]) == (capacity, spec)


class BadNodeFlagCase(NamedTuple):
    text: Any
    message: Any


BAD_NODE_FLAG_CASES = {
    "no name": BadNodeFlagCase(
        text=":cpu=1", message="--node ':cpu=1': the node name is missing (NAME[:ITEM,...])"
    ),
    "a bad quantity": BadNodeFlagCase(
        text="n1:cpu=lots",
        message="--node 'n1:cpu=lots': item 'cpu=lots': quantity 'lots': not a Kubernetes quantity",
    ),
    "a resource without a value": BadNodeFlagCase(
        text="n1:cpu",
        message="--node 'n1:cpu': item 'cpu': a resource is RESOURCE=QUANTITY",
    ),
    "a label without a value": BadNodeFlagCase(
        text="n1:label.x",
        message="--node 'n1:label.x': item 'label.x': a label is label.KEY=VALUE",
    ),
    "a taint with an unknown effect": BadNodeFlagCase(
        text="n1:taint.x=y:Never",
        message=(
            "--node 'n1:taint.x=y:Never': item 'taint.x=y:Never': a "
            "taint is taint.KEY[=VALUE]:EFFECT, "
            "EFFECT one of NoSchedule, PreferNoSchedule, NoExecute"
        ),
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


class BadFileCase(NamedTuple):
    text: Any
    message: Any


BAD_FILE_CASES = {
    "a document of another kind": BadFileCase(
        text="apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n",
        message="document 1: expected a Node, got Pod",
    ),
    "a node without a name": BadFileCase(
        text="kind: Node\nmetadata: {}\n",
        message="document 1: Node manifest: metadata.name is required",
    ),
    "a bad quantity": BadFileCase(
        text="kind: Node\nmetadata: {name: a}\nstatus: {capacity: {cpu: x}}\n",
        message=(
            "document 1: node a: status.capacity['cpu']: quantity 'x': not a Kubernetes quantity"
        ),
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


class UpdateCase(NamedTuple):
    pod: Any
    expected: Any


UPDATE_CASES = {
    "no condition yet": UpdateCase(pod=make_pod(), expected=True),
    "the gate condition is replaced": UpdateCase(
        pod=with_condition(status="False", reason="SchedulingGated", message="blocked"),
        expected=True,
    ),
    "the same message is not rewritten": UpdateCase(
        pod=with_condition(
            status="False",
            reason="Unschedulable",
            message="0/1 nodes are available: 1 Too many pods.",
        ),
        expected=False,
    ),
    "another message is rewritten": UpdateCase(
        pod=with_condition(
            status="False",
            reason="Unschedulable",
            message="0/2 nodes are available: 2 Too many pods.",
        ),
        expected=True,
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
