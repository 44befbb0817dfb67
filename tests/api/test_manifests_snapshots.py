"""PodGroups, Nodes, PriorityClasses, multi-document files, and the snapshot they describe."""

from __future__ import annotations

import datetime
import textwrap
from typing import Any, NamedTuple

import hypothesis
import hypothesis.strategies
import pytest

from queuetree.api import manifest_files, pod_manifests, queue_manifests, readers
from queuetree.core import objects, resources
from tests import properties

GPU = "nvidia.com/gpu"
GI = 2**30


def test_a_pod_group_manifest_becomes_a_pod_group() -> None:
    manifest = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "pg1", "namespace": "ml"},
        "spec": {
            "queue": "team-a",
            "minMember": 4,
            "minTaskMember": {"worker": 3, "ps": 1},
            "minResources": {"cpu": "4", GPU: "4"},
            "priorityClassName": "high",
        },
        "status": {"phase": "Inqueue"},
    }
    assert queue_manifests.parse_pod_group(manifest) == objects.PodGroup(
        namespace="ml",
        name="pg1",
        queue="team-a",
        min_member=4,
        min_task_member={"ps": 1, "worker": 3},
        min_resources=resources.Resource(4000, 0, {GPU: 4000}),
        priority_class_name="high",
        phase=objects.PodGroupPhase.INQUEUE,
        status_written=True,
        uid="ml-pg1",
    )


class GroupDefaultsCase(NamedTuple):
    extra: Any
    expected: Any


GROUP_DEFAULTS = {
    "a bare group is in the default namespace and queue, with no minimum": GroupDefaultsCase(
        extra={},
        expected=objects.PodGroup(
            namespace="default", name="pg", queue="default", min_member=0, uid="default-pg"
        ),
    ),
    "an empty queue is the default queue": GroupDefaultsCase(
        extra={"spec": {"queue": ""}},
        expected=objects.PodGroup(
            namespace="default", name="pg", queue="default", min_member=0, uid="default-pg"
        ),
    ),
    "empty minResources is set and empty, not absent": GroupDefaultsCase(
        extra={"spec": {"minResources": {}}},
        expected=objects.PodGroup(
            namespace="default",
            name="pg",
            min_member=0,
            min_resources=resources.EMPTY,
            uid="default-pg",
        ),
    ),
}


@pytest.mark.parametrize(("extra", "expected"), GROUP_DEFAULTS.values(), ids=GROUP_DEFAULTS.keys())
def test_pod_group_defaults_follow_volcano(
    extra: dict[str, Any], expected: objects.PodGroup
) -> None:
    manifest = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "pg"},
        **extra,
    }
    assert queue_manifests.parse_pod_group(manifest) == expected


WRITTEN_AT = "2026-01-01T00:01:40Z"


class ConditionsCase(NamedTuple):
    conditions: Any
    expected: Any


CONDITIONS = {
    "every field read, times as times": ConditionsCase(
        conditions=[
            {
                "type": "Unschedulable",
                "status": "False",
                "reason": "Inqueue",
                "message": "admitted",
                "lastTransitionTime": WRITTEN_AT,
                "transitionID": "t1",
            }
        ],
        expected=(
            objects.Condition(
                type="Unschedulable",
                status="False",
                reason="Inqueue",
                message="admitted",
                last_transition=datetime.datetime(2026, 1, 1, 0, 1, 40, tzinfo=datetime.UTC),
                transition_id="t1",
            ),
        ),
    ),
    "an entry that is no object, or has no type, is left out": ConditionsCase(
        conditions=["Scheduled", {"status": "True"}, {"type": "Scheduled", "status": "True"}],
        expected=(objects.Condition(type="Scheduled", status="True"),),
    ),
    "a field of the wrong type or an unreadable time reads as absent": ConditionsCase(
        conditions=[{"type": "Scheduled", "status": True, "lastTransitionTime": "yesterday"}],
        expected=(objects.Condition(type="Scheduled", status=""),),
    ),
    "conditions that are no list read as none": ConditionsCase(
        conditions={"type": "Scheduled"}, expected=()
    ),
}


@pytest.mark.parametrize(("conditions", "expected"), CONDITIONS.values(), ids=CONDITIONS.keys())
def test_a_pod_groups_conditions_are_read_without_refusing_the_group(
    conditions: Any, expected: tuple[objects.Condition, ...]
) -> None:
    manifest = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "pg"},
        "status": {"phase": "Inqueue", "conditions": conditions},
    }
    assert queue_manifests.parse_pod_group(manifest).conditions == expected


class NodesCase(NamedTuple):
    manifest: Any
    expected: Any


NODES = {
    "allocatable, labels, taints and cordon are read": NodesCase(
        manifest={
            "metadata": {"name": "n1", "labels": {"zone": "a"}},
            "spec": {
                "unschedulable": True,
                "taints": [{"key": "gpu", "value": "a100", "effect": "NoSchedule"}],
            },
            "status": {
                "allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110", GPU: "8"},
                "capacity": {"cpu": "17"},
            },
        },
        expected=objects.Node(
            name="n1",
            allocatable=resources.Resource(16000, 64 * GI, {"pods": 110, GPU: 8000}),
            labels={"zone": "a"},
            taints=(objects.Taint(key="gpu", value="a100", effect="NoSchedule"),),
            unschedulable=True,
        ),
    ),
    "capacity stands in for a missing allocatable": NodesCase(
        manifest={"metadata": {"name": "n2"}, "status": {"capacity": {"cpu": "4", "pods": 10}}},
        expected=objects.Node(name="n2", allocatable=resources.Resource(4000, 0, {"pods": 10})),
    ),
}


@pytest.mark.parametrize(("manifest", "expected"), NODES.values(), ids=NODES.keys())
def test_a_node_manifest_becomes_a_node(manifest: dict[str, Any], expected: objects.Node) -> None:
    assert pod_manifests.parse_node({"apiVersion": "v1", "kind": "Node", **manifest}) == expected


def test_a_priority_class_manifest_becomes_a_priority_class() -> None:
    manifest = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "high"},
        "value": 1000,
        "globalDefault": True,
    }
    assert pod_manifests.parse_priority_class(manifest) == objects.PriorityClass(
        name="high", value=1000, global_default=True
    )


QUEUES = """\
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: root}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: default}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: team-a}
spec: {parent: root, deserved: {cpu: 4}}
"""

WORKLOAD = """\
apiVersion: v1
kind: Namespace
metadata: {name: ml}
---
apiVersion: v1
kind: Pod
metadata:
  name: lone
  namespace: ml
  annotations: {scheduling.volcano.sh/queue-name: team-a}
spec:
  priorityClassName: high
  containers: [{name: c, resources: {requests: {cpu: "1"}}}]
---
apiVersion: v1
kind: Pod
metadata:
  name: worker-0
  namespace: ml
  annotations: {scheduling.k8s.io/group-name: job}
spec:
  nodeName: n1
  containers: [{name: c, resources: {requests: {cpu: "2"}}}]
status: {phase: Running}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: job, namespace: ml}
spec: {queue: team-a, minMember: 1}
status: {phase: Running}
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata: {name: n1}
  status: {allocatable: {cpu: "8", pods: "10"}}
- apiVersion: scheduling.k8s.io/v1
  kind: PriorityClass
  metadata: {name: high}
  value: 100
"""


def test_files_in_any_order_give_one_sorted_snapshot() -> None:
    documents = manifest_files.load_documents(WORKLOAD, source="work.yaml")
    documents += manifest_files.load_documents(QUEUES, source="queues.yaml")
    parsed = manifest_files.build_snapshot(documents)
    reversed_parsed = manifest_files.build_snapshot(list(reversed(documents)))
    lone_request = resources.Resource(1000, 0, {})
    assert parsed.snapshot == reversed_parsed.snapshot
    assert parsed.warnings == ()
    assert list(parsed.snapshot.queues) == ["default", "root", "team-a"]
    assert parsed.snapshot.nodes == {
        "n1": objects.Node(name="n1", allocatable=resources.Resource(8000, 0, {"pods": 10}))
    }
    assert parsed.snapshot.priority_classes == {
        "high": objects.PriorityClass(name="high", value=100)
    }
    assert dict(parsed.snapshot.pod_groups) == {
        "ml/job": objects.PodGroup(
            namespace="ml",
            name="job",
            queue="team-a",
            min_member=1,
            phase=objects.PodGroupPhase.RUNNING,
            status_written=True,
            uid="ml-job",
        ),
        "ml/lone": objects.PodGroup(
            namespace="ml",
            name="lone",
            queue="team-a",
            min_member=1,
            min_resources=lone_request,
            phase=objects.PodGroupPhase.PENDING,
            synthetic=True,
            uid="ml-lone",
        ),
    }
    assert {
        key: (pod.group, pod.status, pod.priority) for key, pod in parsed.snapshot.pods.items()
    } == {
        "ml/lone": ("ml/lone", objects.TaskStatus.PENDING, 100),
        "ml/worker-0": ("ml/job", objects.TaskStatus.RUNNING, 1),
    }


def problems_of(*texts: str) -> list[str]:
    documents = []
    for index, text in enumerate(texts):
        documents += manifest_files.load_documents(textwrap.dedent(text), source=f"f{index}.yaml")
    with pytest.raises(readers.ManifestError) as caught:
        manifest_files.build_snapshot(documents)
    return [str(problem) for problem in caught.value.problems]


def test_every_problem_of_every_file_is_reported_at_once() -> None:
    found = problems_of(
        """\
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: web}
        ---
        apiVersion: scheduling.volcano.sh/v1beta1
        kind: PodGroup
        metadata: {name: pg1, namespace: ns1}
        spec: {queue: missing}
        ---
        apiVersion: v1
        kind: Pod
        metadata:
          name: p1
          namespace: ns1
          annotations: {scheduling.k8s.io/group-name: nope}
        spec: {containers: [{name: c}]}
        """,
        """\
        apiVersion: v1
        kind: Pod
        metadata: {name: p2, namespace: ns1}
        spec: {containers: [{name: c, resources: {requests: {cpu: lots}}}]}
        ---
        apiVersion: v1
        kind: Pod
        metadata: {name: p3, namespace: ns1}
        spec: {containers: [{name: c}]}
        ---
        apiVersion: v1
        kind: Pod
        metadata: {name: p3, namespace: ns1}
        spec: {containers: [{name: c}]}
        ---
        apiVersion: scheduling.volcano.sh/v1beta1
        kind: Queue
        metadata: {name: q}
        """,
    )
    assert found == [
        "f0.yaml#0: kind: unsupported kind (a session reads Queue, PodGroup, Pod, Node, "
        'PriorityClass, Namespace; workloads are not expanded) (got "Deployment")',
        'f1.yaml#0: Pod ns1/p2: spec.containers[0].resources.requests["cpu"]: invalid quantity: '
        + found[1].split("invalid quantity: ", 1)[1],
        "f1.yaml#2: Pod ns1/p3: defined twice (first in f1.yaml#1)",
    ]


def test_dangling_references_of_a_live_cluster_are_warnings_not_problems() -> None:
    # A dump of a live cluster (kubectl get ... -o yaml, a List) holds pods whose queue or
    # PodGroup was deleted: the snapshot keeps them, and the session tells why they wait.
    documents = manifest_files.load_documents(
        textwrap.dedent(
            """\
            apiVersion: v1
            kind: List
            items:
            - apiVersion: scheduling.volcano.sh/v1beta1
              kind: PodGroup
              metadata: {name: pg1, namespace: ns1}
              spec: {queue: missing}
            - apiVersion: v1
              kind: Pod
              metadata:
                name: p1
                namespace: ns1
                annotations: {scheduling.k8s.io/group-name: nope}
              spec: {containers: [{name: c}]}
            - apiVersion: v1
              kind: Pod
              metadata:
                name: p2
                namespace: ns1
                annotations: {scheduling.volcano.sh/queue-name: ml-a}
              spec: {containers: [{name: c}]}
            """
        ),
        source="dump.yaml",
    )
    parsed = manifest_files.build_snapshot(documents)
    assert (sorted(parsed.snapshot.pods), parsed.warnings) == (
        ["ns1/p1", "ns1/p2"],
        (
            'dump.yaml#0.items[1]: Pod ns1/p1: metadata.annotations["scheduling.k8s.io/group-name"]'
            ': PodGroup ns1/nope is not given (got "nope"); its pods wait for it',
            'dump.yaml#0.items[2]: Pod ns1/p2: metadata.annotations["scheduling.volcano.sh/'
            'queue-name"]: queue "ml-a" is not given (got "ml-a"); the pod waits until it exists',
            'dump.yaml#0.items[0]: PodGroup ns1/pg1: spec.queue: queue "missing" is not given '
            '(got "missing"); its pods wait until it exists',
        ),
    )


class DocumentProblemsCase(NamedTuple):
    text: Any
    expected: Any


DOCUMENT_PROBLEMS = {
    "a YAML syntax error names the line": DocumentProblemsCase(
        text="kind: Pod\nmetadata: {name: [}\n",
        expected=[
            "bad.yaml: invalid YAML at line 2, column 19: expected the node content, but found '}'"
        ],
    ),
    "a document that is not an object": DocumentProblemsCase(
        text="- a\n- b\n",
        expected=["bad.yaml#0: a document must be an object"],
    ),
    "a list whose items are not a list": DocumentProblemsCase(
        text="apiVersion: v1\nkind: List\nitems: 3\n",
        expected=["bad.yaml#0: items: must be a list (got 3)"],
    ),
}


@pytest.mark.parametrize(
    ("text", "expected"), DOCUMENT_PROBLEMS.values(), ids=DOCUMENT_PROBLEMS.keys()
)
def test_unreadable_files_are_refused_with_their_location(text: str, expected: list[str]) -> None:
    with pytest.raises(readers.ManifestError) as caught:
        manifest_files.load_documents(text, source="bad.yaml")
    messages = [str(problem) for problem in caught.value.problems]
    assert len(messages) == len(expected)
    for message, start in zip(messages, expected, strict=True):
        assert message.startswith(start), (message, start)


def test_empty_documents_are_skipped() -> None:
    assert manifest_files.load_documents("---\n---\n", source="empty.yaml") == []


@hypothesis.settings(max_examples=properties.examples(30))
@hypothesis.given(order=hypothesis.strategies.permutations(range(9)))
def test_the_snapshot_never_depends_on_the_order_of_the_documents(order: list[int]) -> None:
    documents = manifest_files.load_documents(WORKLOAD, source="work.yaml")
    documents += manifest_files.load_documents(QUEUES, source="queues.yaml")
    assert len(documents) == len(order)
    shuffled = [documents[index] for index in order]
    assert (
        manifest_files.build_snapshot(shuffled).snapshot
        == manifest_files.build_snapshot(documents).snapshot
    )


class LonePodQueuesCase(NamedTuple):
    annotations: Any
    namespace_queue: Any
    expected: Any


LONE_POD_QUEUES = {
    "the pod's annotation wins": LonePodQueuesCase(
        annotations={"scheduling.volcano.sh/queue-name": "q-pod"},
        namespace_queue="q-ns",
        expected="q-pod",
    ),
    "else its Namespace's annotation": LonePodQueuesCase(
        annotations={}, namespace_queue="q-ns", expected="q-ns"
    ),
    "else the default queue": LonePodQueuesCase(
        annotations={}, namespace_queue="", expected="q-default"
    ),
}


@pytest.mark.parametrize(
    ("annotations", "namespace_queue", "expected"),
    LONE_POD_QUEUES.values(),
    ids=LONE_POD_QUEUES.keys(),
)
def test_a_lone_pod_goes_to_the_queue_its_pod_then_namespace_then_default_names(
    annotations: dict[str, str], namespace_queue: str, expected: str
) -> None:
    namespace: dict[str, Any] = {"name": "ns1"}
    if namespace_queue:
        namespace["annotations"] = {"scheduling.volcano.sh/queue-name": namespace_queue}
    manifests_of_cluster: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": namespace},
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p1", "namespace": "ns1", "annotations": annotations},
            "spec": {"containers": [{"name": "c"}]},
        },
        *(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": name},
            }
            for name in ("q-pod", "q-ns", "q-default")
        ),
    ]
    documents = [
        manifest_files.Document(manifest=manifest, origin=f"c.yaml#{index}")
        for index, manifest in enumerate(manifests_of_cluster)
    ]
    parsed = manifest_files.build_snapshot(documents, default_queue="q-default")
    assert parsed.snapshot.pod_groups["ns1/p1"].queue == expected


def test_a_pod_group_without_a_queue_goes_to_the_default_queue_given() -> None:
    manifest = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "ns1"},
    }
    assert queue_manifests.parse_pod_group(manifest, default_queue="batch").queue == "batch"


class BadObjectsCase(NamedTuple):
    parse: Any
    manifest: Any
    expected: Any


BAD_OBJECTS = {
    "a pod group with a negative minimum and an unknown phase": BadObjectsCase(
        parse=queue_manifests.parse_pod_group,
        manifest={
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "pg", "namespace": "ns1"},
            "spec": {"minMember": -1, "minTaskMember": {"worker": "two"}},
            "status": {"phase": "Waiting"},
        },
        expected=[
            'o#0: PodGroup ns1/pg: spec.minTaskMember["worker"]: must be an integer (got "two")',
            "o#0: PodGroup ns1/pg: spec.minMember: must not be negative (got -1)",
            "o#0: PodGroup ns1/pg: status.phase: must be one of Pending, Running, Unknown, "
            'Inqueue, Completed (got "Waiting")',
        ],
    ),
    "a node with a taint Kubernetes would refuse": BadObjectsCase(
        parse=pod_manifests.parse_node,
        manifest={
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n1"},
            "spec": {"taints": [{"effect": "NoRun"}], "unschedulable": "yes"},
        },
        expected=[
            "o#0: Node n1: spec.taints[0].key: is required",
            "o#0: Node n1: spec.taints[0].effect: must be NoSchedule, PreferNoSchedule or "
            'NoExecute (got "NoRun")',
            'o#0: Node n1: spec.unschedulable: must be true or false (got "yes")',
        ],
    ),
    "a priority class without a value": BadObjectsCase(
        parse=pod_manifests.parse_priority_class,
        manifest={
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "p"},
        },
        expected=["o#0: PriorityClass p: value: is required"],
    ),
    "a creation time that is not RFC 3339": BadObjectsCase(
        parse=pod_manifests.parse_node,
        manifest={"metadata": {"name": "n1", "creationTimestamp": "yesterday"}},
        expected=[
            "o#0: Node n1: metadata.creationTimestamp: must be an RFC 3339 time such as "
            '2024-05-01T12:00:00Z (got "yesterday")'
        ],
    ),
}


@pytest.mark.parametrize(
    ("parse", "manifest", "expected"), BAD_OBJECTS.values(), ids=BAD_OBJECTS.keys()
)
def test_bad_objects_of_every_kind_are_refused_naming_each_field(
    parse: Any, manifest: dict[str, Any], expected: list[str]
) -> None:
    with pytest.raises(readers.ManifestError) as caught:
        parse(manifest, origin="o#0")
    assert [str(problem) for problem in caught.value.problems] == expected
