"""The Queue and PodGroup CRDs: names, printer columns, and schemas that accept Volcano's manifests.

The schemas are checked with a real JSON-schema validator on the CRDs' ``openAPIV3Schema`` (the
same library kubesim uses), over manifests written the way Volcano users write them.
"""

from __future__ import annotations

import importlib.util
import pathlib
from typing import Any, NamedTuple

import jsonschema
import pytest
import yaml

from queuetree.api import statuses

ROOT = pathlib.Path(__file__).resolve().parents[2]
CRDS = ROOT / "crds"


def load_crd(plural: str) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(
        (CRDS / f"scheduling.volcano.sh_{plural}.yaml").read_text(encoding="utf-8")
    )
    return document


def validator(plural: str) -> jsonschema.protocols.Validator:
    (version,) = load_crd(plural)["spec"]["versions"]
    schema = version["schema"]["openAPIV3Schema"]
    return jsonschema.Draft4Validator(schema)


def error_paths(plural: str, manifest: str) -> list[str]:
    """Dotted paths of every schema violation in ``manifest`` (empty when it validates)."""
    document = yaml.safe_load(manifest)
    errors = validator(plural).iter_errors(document)
    return sorted(".".join(str(part) for part in error.absolute_path) for error in errors)


def generator() -> Any:
    spec = importlib.util.spec_from_file_location("gen_crds", ROOT / "hack" / "gen_crds.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_crds_are_what_the_generator_writes() -> None:
    module = generator()
    expected = {path.name: text for path, text in module.get_outputs(ROOT)}
    actual = {name: (CRDS / name).read_text(encoding="utf-8") for name in expected}
    assert actual == expected


def test_the_operator_writes_a_zero_for_every_resource_a_queue_column_shows() -> None:
    # kubectl get queues shows "0", not nothing, for a figure a queue lacks (issue 35): the
    # operator fills the amounts of exactly the columns' resources (statuses.amount_value).
    shown = tuple(resource for _, resource in generator().FIGURE_RESOURCES)
    assert shown == statuses.SHOWN_RESOURCES


@pytest.mark.parametrize(
    ("plural", "expected"),
    [
        (
            "queues",
            {
                "name": "queues.scheduling.volcano.sh",
                "group": "scheduling.volcano.sh",
                "scope": "Cluster",
                "names": {
                    "kind": "Queue",
                    "listKind": "QueueList",
                    "plural": "queues",
                    "singular": "queue",
                    "shortNames": ["q", "queue-v1beta1"],
                },
                "versions": [("v1beta1", True, True, {"status": {}})],
            },
        ),
        (
            "podgroups",
            {
                "name": "podgroups.scheduling.volcano.sh",
                "group": "scheduling.volcano.sh",
                "scope": "Namespaced",
                "names": {
                    "kind": "PodGroup",
                    "listKind": "PodGroupList",
                    "plural": "podgroups",
                    "singular": "podgroup",
                    "shortNames": ["pg", "podgroup-v1beta1"],
                },
                "versions": [("v1beta1", True, True, {"status": {}})],
            },
        ),
    ],
    ids=["queue", "podgroup"],
)
def test_the_crd_has_volcanos_names_scope_and_a_status_subresource(
    plural: str, expected: dict[str, Any]
) -> None:
    crd = load_crd(plural)
    actual = {
        "name": crd["metadata"]["name"],
        "group": crd["spec"]["group"],
        "scope": crd["spec"]["scope"],
        "names": crd["spec"]["names"],
        "versions": [
            (v["name"], v["served"], v["storage"], v["subresources"])
            for v in crd["spec"]["versions"]
        ],
    }
    assert actual == expected


@pytest.mark.parametrize(
    ("plural", "expected"),
    [
        (
            "queues",
            [
                ("Parent", ".spec.parent", 0),
                ("State", ".status.state", 0),
                ("Condition", '.status.conditions[?(@.type=="Ready")].reason', 0),
                ("CPU-Deserved", ".status.deserved.cpu", 0),
                ("CPU-Allocated", ".status.allocated.cpu", 0),
                ("Mem-Deserved", ".status.deserved.memory", 0),
                ("Mem-Allocated", ".status.allocated.memory", 0),
                ("GPU-Deserved", r".status.deserved.nvidia\.com/gpu", 0),
                ("GPU-Allocated", r".status.allocated.nvidia\.com/gpu", 0),
                ("CPU-Capability", ".status.realCapability.cpu", 1),
                ("CPU-Reserved", ".status.reserved.cpu", 1),
                ("Mem-Capability", ".status.realCapability.memory", 1),
                ("Mem-Reserved", ".status.reserved.memory", 1),
                ("GPU-Capability", r".status.realCapability.nvidia\.com/gpu", 1),
                ("GPU-Reserved", r".status.reserved.nvidia\.com/gpu", 1),
                ("Pending", ".status.pending", 0),
                ("Weight", ".spec.weight", 1),
                ("Age", ".metadata.creationTimestamp", 0),
            ],
        ),
        (
            "podgroups",
            [
                ("STATUS", ".status.phase", 0),
                ("minMember", ".spec.minMember", 0),
                ("RUNNINGS", ".status.running", 0),
                ("AGE", ".metadata.creationTimestamp", 0),
                ("QUEUE", ".spec.queue", 1),
                ("OWNER", ".metadata.ownerReferences[0].name", 0),
                ("OWNER-KIND", ".metadata.ownerReferences[0].kind", 1),
            ],
        ),
    ],
    ids=["queue", "podgroup"],
)
def test_printer_columns_show_the_tree_and_its_figures(
    plural: str, expected: list[tuple[str, str, int]]
) -> None:
    (version,) = load_crd(plural)["spec"]["versions"]
    columns = version["additionalPrinterColumns"]
    actual = [(c["name"], c["jsonPath"], c.get("priority", 0)) for c in columns]
    assert actual == expected


def get_untyped_paths(schema: dict[str, Any], path: str) -> list[str]:
    """Paths of schema nodes without a ``type``: kube-apiserver requires one (bar int-or-string)."""
    found: list[str] = []
    if "type" not in schema and not schema.get("x-kubernetes-int-or-string"):
        found.append(path)
    for name, child in schema.get("properties", {}).items():
        found += get_untyped_paths(child, f"{path}.{name}")
    if isinstance(schema.get("items"), dict):
        found += get_untyped_paths(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        found += get_untyped_paths(schema["additionalProperties"], f"{path}{{}}")
    return found


@pytest.mark.parametrize("plural", ["queues", "podgroups"])
def test_every_schema_node_has_a_type_as_structural_schemas_require(plural: str) -> None:
    (version,) = load_crd(plural)["spec"]["versions"]
    assert get_untyped_paths(version["schema"]["openAPIV3Schema"], "") == []


@pytest.mark.parametrize(
    ("plural", "path", "expected"),
    [
        ("queues", ("spec", "weight"), 1),
        ("queues", ("spec", "dequeueStrategy"), "traverse"),
        ("podgroups", ("spec", "queue"), "default"),
        ("podgroups", ("spec", "networkTopology", "mode"), "hard"),
        ("podgroups", ("spec", "subGroupPolicy", "[]", "subGroupSize"), 1),
        ("podgroups", ("spec", "subGroupPolicy", "[]", "minSubGroups"), 0),
    ],
    ids=lambda value: ".".join(value) if isinstance(value, tuple) else str(value),
)
def test_the_schema_declares_volcanos_defaults(
    plural: str, path: tuple[str, ...], expected: object
) -> None:
    (version,) = load_crd(plural)["spec"]["versions"]
    node = version["schema"]["openAPIV3Schema"]
    for part in path:
        node = node["items"] if part == "[]" else node["properties"][part]
    assert node["default"] == expected


VALID_QUEUES = {
    "a Volcano default queue": """
        apiVersion: scheduling.volcano.sh/v1beta1
        kind: Queue
        metadata: {name: default}
        spec: {weight: 1, reclaimable: true}
    """,
    "the capacity plugin user guide's child queue": """
        apiVersion: scheduling.volcano.sh/v1beta1
        kind: Queue
        metadata: {name: team-a}
        spec:
          parent: root
          weight: 1
          reclaimable: true
          priority: 10
          deserved: {cpu: "4", memory: 4Gi, nvidia.com/a100: 1}
          capability: {cpu: 8, memory: 8Gi, nvidia.com/a100: "2"}
          guarantee: {resource: {cpu: 1500m, memory: 1Gi}}
    """,
    "every spec field Volcano defines": """
        apiVersion: scheduling.volcano.sh/v1beta1
        kind: Queue
        metadata: {name: everything}
        spec:
          weight: 65535
          capability: {cpu: "1e3", memory: 0.5Gi, rdma/hca: 1k}
          reclaimable: false
          extendClusters:
          - {name: member-1, weight: 2, capacity: {cpu: 10}}
          guarantee: {resource: {}}
          affinity:
            nodeGroupAffinity:
              requiredDuringSchedulingIgnoredDuringExecution: [group-a]
              preferredDuringSchedulingIgnoredDuringExecution: [group-b]
            nodeGroupAntiAffinity:
              requiredDuringSchedulingIgnoredDuringExecution: [group-c]
          type: batch
          parent: a.b-c
          deserved: {cpu: "0"}
          priority: 0
          dequeueStrategy: fifo
    """,
    "an empty parent meaning root": """
        apiVersion: scheduling.volcano.sh/v1beta1
        kind: Queue
        metadata: {name: top}
        spec: {parent: ""}
    """,
    "a status written by Volcano's controllers": """
        apiVersion: scheduling.volcano.sh/v1beta1
        kind: Queue
        metadata: {name: written}
        spec: {weight: 1}
        status:
          state: Closing
          unknown: 0
          pending: 1
          running: 2
          inqueue: 3
          completed: 4
          reservation: {nodes: [n1], resource: {cpu: "1"}}
          allocated: {cpu: 2500m, memory: "3221225472", pods: "3"}
    """,
    "a status with queuetree's additions": """
        apiVersion: scheduling.volcano.sh/v1beta1
        kind: Queue
        metadata: {name: ours}
        status:
          state: Open
          allocated: {cpu: "1"}
          reserved: {cpu: 500m}
          deserved: {cpu: "2"}
          realCapability: {cpu: "4", nvidia.com/gpu: "9223372036854775807"}
          conditions:
          - type: Admitting
            status: "False"
            reason: CycleDetected
            message: "queue a is on the cycle a -> b -> a"
            lastTransitionTime: "2026-11-30T16:00:00Z"
            observedGeneration: 3
    """,
}


@pytest.mark.parametrize("manifest", VALID_QUEUES.values(), ids=VALID_QUEUES.keys())
def test_the_queue_schema_accepts_volcano_queue_manifests(manifest: str) -> None:
    assert error_paths("queues", manifest) == []


class InvalidQueuesCase(NamedTuple):
    fields: Any
    expected: Any


INVALID_QUEUES = {
    "weight 0": InvalidQueuesCase(fields="spec: {weight: 0}", expected=["spec.weight"]),
    "weight above 65535": InvalidQueuesCase(
        fields="spec: {weight: 65536}", expected=["spec.weight"]
    ),
    "a negative priority": InvalidQueuesCase(
        fields="spec: {priority: -1}", expected=["spec.priority"]
    ),
    "an unknown dequeue strategy": InvalidQueuesCase(
        fields="spec: {dequeueStrategy: lifo}", expected=["spec.dequeueStrategy"]
    ),
    "a parent that is not a DNS subdomain": InvalidQueuesCase(
        fields="spec: {parent: Team_A}", expected=["spec.parent"]
    ),
    "a parent longer than 253": InvalidQueuesCase(
        fields=f"spec: {{parent: {'a' * 254}}}", expected=["spec.parent"]
    ),
    "a quantity with a unit kubernetes does not know": InvalidQueuesCase(
        fields='spec: {capability: {cpu: "2 cores"}}',
        expected=["spec.capability.cpu"],
    ),
    "a state outside the four states": InvalidQueuesCase(
        fields="status: {state: Opened}", expected=["status.state"]
    ),
    "a negative PodGroup count": InvalidQueuesCase(
        fields="status: {running: -1}", expected=["status.running"]
    ),
    "a condition status outside True/False/Unknown": InvalidQueuesCase(
        fields="status: {conditions: [{type: Admitting, status: maybe}]}",
        expected=["status.conditions.0.status"],
    ),
    "every error at once": InvalidQueuesCase(
        fields="spec: {weight: 0, dequeueStrategy: lifo}\nstatus: {state: Opened}",
        expected=["spec.dequeueStrategy", "spec.weight", "status.state"],
    ),
}


@pytest.mark.parametrize(("fields", "expected"), INVALID_QUEUES.values(), ids=INVALID_QUEUES.keys())
def test_the_queue_schema_rejects_bad_queues_at_the_offending_field(
    fields: str, expected: list[str]
) -> None:
    manifest = "apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: q}\n"
    assert error_paths("queues", manifest + fields) == expected


VALID_PODGROUPS = {
    "the scheduling-gates e2e podgroup": """
        apiVersion: scheduling.volcano.sh/v1beta1
        kind: PodGroup
        metadata: {name: test-podgroup, namespace: default}
        spec:
          minMember: 1
          queue: capacity-test-queue
          minResources: {cpu: 500m, memory: 512Mi}
    """,
    "every spec field and a Volcano status": """
        apiVersion: scheduling.volcano.sh/v1beta1
        kind: PodGroup
        metadata: {name: full, namespace: ml}
        spec:
          minMember: 0
          minTaskMember: {worker: 2, ps: 1}
          queue: default
          priorityClassName: high
          minResources: {nvidia.com/gpu: 8}
          networkTopology: {mode: soft, highestTierAllowed: 0, highestTierName: rack}
          subGroupPolicy:
          - name: replicas
            networkTopology: {mode: hard, highestTierAllowed: 1}
            subGroupSize: 4
            minSubGroups: 2
            labelSelector:
              matchLabels: {app: train}
              matchExpressions: [{key: role, operator: In, values: [worker]}]
            matchLabelKeys: [replica-index]
        status:
          phase: Inqueue
          running: 0
          succeeded: 0
          failed: 0
          conditions:
          - type: Unschedulable
            status: "True"
            transitionID: 7f6e
            lastTransitionTime: "2026-11-30T16:00:00Z"
            reason: NotEnoughResources
            message: "queue resource quota insufficient"
    """,
}


@pytest.mark.parametrize("manifest", VALID_PODGROUPS.values(), ids=VALID_PODGROUPS.keys())
def test_the_podgroup_schema_accepts_volcano_podgroups(manifest: str) -> None:
    assert error_paths("podgroups", manifest) == []


class InvalidPodgroupsCase(NamedTuple):
    fields: Any
    expected: Any


INVALID_PODGROUPS = {
    "a negative minMember": InvalidPodgroupsCase(
        fields="spec: {minMember: -1}", expected=["spec.minMember"]
    ),
    "an unknown topology mode": InvalidPodgroupsCase(
        fields="spec: {networkTopology: {mode: strict}}",
        expected=["spec.networkTopology.mode"],
    ),
    "a sub-group of size 0": InvalidPodgroupsCase(
        fields="spec: {subGroupPolicy: [{name: s, subGroupSize: 0}]}",
        expected=["spec.subGroupPolicy.0.subGroupSize"],
    ),
    "a phase outside Volcano's five": InvalidPodgroupsCase(
        fields="status: {phase: Admitted}", expected=["status.phase"]
    ),
    "a negative count of failed pods": InvalidPodgroupsCase(
        fields="status: {failed: -1}", expected=["status.failed"]
    ),
    "a tier name longer than 253": InvalidPodgroupsCase(
        fields=f"spec: {{networkTopology: {{highestTierName: {'t' * 254}}}}}",
        expected=["spec.networkTopology.highestTierName"],
    ),
    "a queue name that is not a DNS subdomain": InvalidPodgroupsCase(
        fields="spec: {queue: My_Queue}", expected=["spec.queue"]
    ),
}


@pytest.mark.parametrize(
    ("fields", "expected"), INVALID_PODGROUPS.values(), ids=INVALID_PODGROUPS.keys()
)
def test_the_podgroup_schema_rejects_bad_podgroups_at_the_offending_field(
    fields: str, expected: list[str]
) -> None:
    manifest = (
        "apiVersion: scheduling.volcano.sh/v1beta1\nkind: PodGroup\n"
        "metadata: {name: pg, namespace: default}\n"
    )
    assert error_paths("podgroups", manifest + fields) == expected
