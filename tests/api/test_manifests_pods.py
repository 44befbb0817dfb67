"""Pod manifests into scheduling tasks: status, effective requests, priority, preemptability."""

from __future__ import annotations

import datetime
from typing import Any, NamedTuple

import pytest

from queuetree.api import pod_manifests, pod_rules, readers
from queuetree.core import objects, resources

GPU = "nvidia.com/gpu"
GI = 2**30


def pod_manifest(
    name: str = "p1",
    *,
    namespace: str = "ns1",
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    spec: dict[str, Any] | None = None,
    status: dict[str, Any] | None = None,
    **metadata: Any,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, **metadata}
    if annotations is not None:
        meta["annotations"] = annotations
    if labels is not None:
        meta["labels"] = labels
    manifest: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": spec if spec is not None else {"containers": [{"name": "c"}]},
    }
    if status is not None:
        manifest["status"] = status
    return manifest


def container(requests: dict[str, Any] | None = None, **more: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"name": "c", **more}
    if requests is not None:
        body["resources"] = {"requests": requests}
    return body


def test_a_bare_pod_is_a_pending_task_of_its_own_group_with_empty_requests() -> None:
    assert pod_manifests.parse_pod(pod_manifest()) == objects.Pod(
        namespace="ns1",
        name="p1",
        group="ns1/p1",
        status=objects.TaskStatus.PENDING,
        resreq=resources.Resource(0, 0, {}),
        priority=1,
        uid="ns1-p1",
    )


def test_every_scheduling_field_of_a_pod_is_read() -> None:
    manifest = pod_manifest(
        "trainer-0",
        namespace="ml",
        uid="abc",
        creationTimestamp="2026-03-04T05:06:07Z",
        annotations={
            "scheduling.k8s.io/group-name": "trainer",
            "scheduling.volcano.sh/queue-allocation-gate": "true",
        },
        labels={"app": "trainer"},
        spec={
            "containers": [container({"cpu": "2", "memory": "4Gi", GPU: 1})],
            "nodeName": "",
            "schedulerName": "volcano",
            "priority": 7,
            "preemptionPolicy": "Never",
            "schedulingGates": [{"name": "scheduling.volcano.sh/queue-allocation-gate"}],
            "nodeSelector": {"gpu": "a100"},
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "zone", "operator": "In", "values": ["a", "b"]}
                                ],
                                "matchFields": [
                                    {"key": "metadata.name", "operator": "NotIn", "values": ["n9"]}
                                ],
                            }
                        ]
                    }
                }
            },
            "tolerations": [
                {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},
                {"key": "team", "value": "ml"},
            ],
        },
        status={
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        },
    )
    request = resources.Resource(2000, 4 * GI, {GPU: 1000})
    assert pod_manifests.parse_pod(manifest) == objects.Pod(
        namespace="ml",
        name="trainer-0",
        group="ml/trainer",
        status=objects.TaskStatus.PENDING,
        resreq=request,
        priority=7,
        scheduling_gates=("scheduling.volcano.sh/queue-allocation-gate",),
        annotations={
            "scheduling.k8s.io/group-name": "trainer",
            "scheduling.volcano.sh/queue-allocation-gate": "true",
        },
        labels={"app": "trainer"},
        node_selector={"gpu": "a100"},
        required_node_affinity=(
            objects.NodeSelectorTerm(
                match_expressions=(
                    objects.NodeSelectorRequirement(key="zone", operator="In", values=("a", "b")),
                ),
                match_fields=(
                    objects.NodeSelectorRequirement(
                        key="metadata.name", operator="NotIn", values=("n9",)
                    ),
                ),
            ),
        ),
        tolerations=(
            objects.Toleration(key="gpu", operator="Exists", effect="NoSchedule"),
            objects.Toleration(key="team", operator="Equal", value="ml"),
        ),
        preemptable=True,
        preemption_policy="Never",
        unschedulable=True,
        scheduler_name="volcano",
        created=datetime.datetime(2026, 3, 4, 5, 6, 7, tzinfo=datetime.UTC),
        uid="abc",
    )


class StatusesCase(NamedTuple):
    phase: Any
    deleting: Any
    node_name: Any
    expected: Any


STATUSES = {
    "running": StatusesCase(
        phase="Running", deleting=False, node_name="n1", expected=objects.TaskStatus.RUNNING
    ),
    "running and being deleted": StatusesCase(
        phase="Running", deleting=True, node_name="n1", expected=objects.TaskStatus.RELEASING
    ),
    "pending without a node": StatusesCase(
        phase="Pending", deleting=False, node_name="", expected=objects.TaskStatus.PENDING
    ),
    "pending with a node": StatusesCase(
        phase="Pending", deleting=False, node_name="n1", expected=objects.TaskStatus.BOUND
    ),
    "pending and being deleted": StatusesCase(
        phase="Pending", deleting=True, node_name="n1", expected=objects.TaskStatus.RELEASING
    ),
    "succeeded": StatusesCase(
        phase="Succeeded", deleting=False, node_name="n1", expected=objects.TaskStatus.SUCCEEDED
    ),
    "failed": StatusesCase(
        phase="Failed", deleting=True, node_name="n1", expected=objects.TaskStatus.FAILED
    ),
    "unknown phase": StatusesCase(
        phase="Unknown", deleting=False, node_name="n1", expected=objects.TaskStatus.UNKNOWN
    ),
    "a phase Kubernetes does not have": StatusesCase(
        phase="Evicted", deleting=False, node_name="", expected=objects.TaskStatus.UNKNOWN
    ),
}


@pytest.mark.parametrize(
    ("phase", "deleting", "node_name", "expected"), STATUSES.values(), ids=STATUSES.keys()
)
def test_the_task_status_follows_volcanos_get_task_status(
    phase: str, deleting: bool, node_name: str, expected: objects.TaskStatus
) -> None:
    metadata = {"deletionTimestamp": "2026-01-01T00:00:00Z"} if deleting else {}
    manifest = pod_manifest(
        spec={"containers": [container()], "nodeName": node_name},
        status={"phase": phase},
        **metadata,
    )
    assert pod_rules.task_status(phase, deleting=deleting, node_name=node_name) == expected
    assert pod_manifests.parse_pod(manifest).status == expected


class RequestsCase(NamedTuple):
    spec: Any
    expected: Any


REQUESTS = {
    "containers are summed": RequestsCase(
        spec={"containers": [container({"cpu": "1", "memory": "1Gi"}), container({"cpu": "500m"})]},
        expected=resources.Resource(1500, GI, {}),
    ),
    "limits stand in for missing requests, per resource": RequestsCase(
        spec={
            "containers": [
                {
                    "name": "c",
                    "resources": {
                        "requests": {"cpu": "1"},
                        "limits": {"cpu": "4", "memory": "2Gi", GPU: "1"},
                    },
                }
            ]
        },
        expected=resources.Resource(1000, 2 * GI, {GPU: 1000}),
    ),
    # Volcano's Resreq is the containers' 1 CPU: it keeps the init request for the node check.
    "a large init container raises the request, per resource": RequestsCase(
        spec={
            "initContainers": [container({"cpu": "4"}), container({"memory": "1Gi"})],
            "containers": [container({"cpu": "1", "memory": "2Gi"})],
        },
        expected=resources.Resource(4000, 2 * GI, {}),
    ),
    "a sidecar adds to the pod and to the init containers after it": RequestsCase(
        spec={
            "initContainers": [
                container({"cpu": "1"}),
                container({"cpu": "500m"}, restartPolicy="Always"),
                container({"cpu": "3"}),
            ],
            "containers": [container({"cpu": "1"})],
        },
        expected=resources.Resource(3500, 0, {}),
    ),
    "sidecars alone raise the request above a smaller init container": RequestsCase(
        spec={
            "initContainers": [
                container({"cpu": "500m"}, restartPolicy="Always"),
                container({"cpu": "1"}),
            ],
            "containers": [container({"cpu": "1"})],
        },
        expected=resources.Resource(1500, 0, {}),
    ),
    "an init container's extended resource is requested though no container asks for it": (
        RequestsCase(
            spec={
                "initContainers": [container({GPU: "1"})],
                "containers": [container({"cpu": "1"})],
            },
            expected=resources.Resource(1000, 0, {GPU: 1000}),
        )
    ),
    "the overhead is added after the larger of the two": RequestsCase(
        spec={
            "initContainers": [container({"cpu": "2"})],
            "containers": [container({"cpu": "1"})],
            "overhead": {"cpu": "250m", "memory": "120Mi"},
        },
        expected=resources.Resource(2250, 120 * 2**20, {}),
    ),
    # PodLevelResources (beta, on by default since Kubernetes 1.34): kube-scheduler reads these.
    "pod-level requests replace the containers' aggregate": RequestsCase(
        spec={
            "resources": {"requests": {"cpu": "20", "memory": "50Gi"}},
            "containers": [container()],
        },
        expected=resources.Resource(20_000, 50 * GI, {}),
    ),
    "a pod-level request replaces only its own resource": RequestsCase(
        spec={
            "resources": {"requests": {"memory": "8Gi"}},
            "containers": [container({"cpu": "1", "memory": "1Gi", GPU: "1"})],
        },
        expected=resources.Resource(1000, 8 * GI, {GPU: 1000}),
    ),
    "a pod-level request replaces the init containers' peak too": RequestsCase(
        spec={
            "resources": {"requests": {"cpu": "40"}},
            "initContainers": [container({"cpu": "30"})],
            "containers": [container({"cpu": "1"})],
        },
        expected=resources.Resource(40_000, 0, {}),
    ),
    "a pod-level limit alone is the request of what no container states": RequestsCase(
        spec={
            "resources": {"limits": {"cpu": "20", "memory": "50Gi"}},
            "containers": [container({"cpu": "1"})],
        },
        expected=resources.Resource(1000, 50 * GI, {}),
    ),
    "a container's limit states the resource as its request does": RequestsCase(
        spec={
            "resources": {"limits": {"memory": "50Gi"}},
            "containers": [{"name": "c", "resources": {"limits": {"memory": "1Gi"}}}],
        },
        expected=resources.Resource(0, GI, {}),
    ),
    "a container's zero request states the resource": RequestsCase(
        spec={
            "resources": {"limits": {"cpu": "4"}},
            "initContainers": [container({"cpu": "0"})],
            "containers": [container()],
        },
        expected=resources.Resource(0, 0, {}),
    ),
    "hugepages: the pod-level limit is the request, whatever the containers state": RequestsCase(
        spec={
            "resources": {"limits": {"hugepages-2Mi": "2Gi"}},
            "containers": [
                {
                    "name": "c",
                    "resources": {
                        "requests": {"hugepages-2Mi": "1Gi"},
                        "limits": {"hugepages-2Mi": "1Gi"},
                    },
                }
            ],
        },
        expected=resources.Resource(0, 0, {"hugepages-2Mi": 2 * GI * 1000}),
    ),
    "the overhead is added to the pod-level request": RequestsCase(
        spec={
            "resources": {"requests": {"cpu": "2"}},
            "containers": [container()],
            "overhead": {"cpu": "250m"},
        },
        expected=resources.Resource(2250, 0, {}),
    ),
    "a resource that is not a pod-level one is ignored, as kube-scheduler ignores it": (
        RequestsCase(
            spec={
                "resources": {"requests": {GPU: "1", "cpu": "2"}},
                "containers": [container({"cpu": "1"})],
            },
            expected=resources.Resource(2000, 0, {}),
        )
    ),
}


@pytest.mark.parametrize(("spec", "expected"), REQUESTS.values(), ids=REQUESTS.keys())
def test_the_request_is_what_kubernetes_holds_for_the_pod(
    spec: dict[str, Any], expected: resources.Resource
) -> None:
    assert pod_manifests.parse_pod(pod_manifest(spec=spec)).resreq == expected


CLASSES = {
    "high": objects.PriorityClass(name="high", value=1000),
    "everyday": objects.PriorityClass(name="everyday", value=10, global_default=True),
    "also-default": objects.PriorityClass(name="also-default", value=20, global_default=True),
}


class PrioritiesCase(NamedTuple):
    annotations: Any
    spec: Any
    classes: Any
    expected: Any
    warned: Any


PRIORITIES = {
    "the task-priority annotation wins over everything": PrioritiesCase(
        annotations={"volcano.sh/task-priority": "42"},
        spec={"priority": 7, "priorityClassName": "high"},
        classes=CLASSES,
        expected=42,
        warned=[],
    ),
    "spec.priority wins over the class name": PrioritiesCase(
        annotations={},
        spec={"priority": 7, "priorityClassName": "high"},
        classes=CLASSES,
        expected=7,
        warned=[],
    ),
    "the class name is looked up": PrioritiesCase(
        annotations={},
        spec={"priorityClassName": "high"},
        classes=CLASSES,
        expected=1000,
        warned=[],
    ),
    "the lowest global default applies when nothing is set": PrioritiesCase(
        annotations={}, spec={}, classes=CLASSES, expected=10, warned=[]
    ),
    "without classes the task priority is 1": PrioritiesCase(
        annotations={}, spec={}, classes={}, expected=1, warned=[]
    ),
    "an unparsable annotation is ignored": PrioritiesCase(
        annotations={"volcano.sh/task-priority": "high"},
        spec={"priority": 7},
        classes={},
        expected=7,
        warned=[
            'Pod ns1/p1: metadata.annotations["volcano.sh/task-priority"]: not a 32-bit '
            'integer, ignored (got "high")'
        ],
    ),
    "an unresolvable class name (classes unknown, as in a cluster) gives 1": PrioritiesCase(
        annotations={},
        spec={"priorityClassName": "high"},
        classes=None,
        expected=1,
        warned=[
            "Pod ns1/p1: spec.priorityClassName: 'high' cannot be resolved here and "
            "spec.priority is not set; using priority 1"
        ],
    ),
}


@pytest.mark.parametrize(
    ("annotations", "spec", "classes", "expected", "warned"),
    PRIORITIES.values(),
    ids=PRIORITIES.keys(),
)
def test_the_task_priority_follows_annotation_spec_class_default(
    annotations: dict[str, str],
    spec: dict[str, Any],
    classes: dict[str, objects.PriorityClass] | None,
    expected: int,
    warned: list[str],
) -> None:
    warnings: list[str] = []
    manifest = pod_manifest(annotations=annotations, spec={"containers": [container()], **spec})
    pod = pod_manifests.parse_pod(manifest, priority_classes=classes, on_warning=warnings.append)
    assert (pod.priority, warnings) == (expected, warned)


class PreemptableCase(NamedTuple):
    annotations: Any
    labels: Any
    expected: Any


PREEMPTABLE = {
    "absent is preemptable": PreemptableCase(annotations={}, labels={}, expected=True),
    "the annotation false": PreemptableCase(
        annotations={"volcano.sh/preemptable": "false"}, labels={}, expected=False
    ),
    "the label false": PreemptableCase(
        annotations={}, labels={"volcano.sh/preemptable": "false"}, expected=False
    ),
    "the annotation wins over the label": PreemptableCase(
        annotations={"volcano.sh/preemptable": "true"},
        labels={"volcano.sh/preemptable": "false"},
        expected=True,
    ),
    "Go's spellings of true": PreemptableCase(
        annotations={"volcano.sh/preemptable": "T"}, labels={}, expected=True
    ),
    "an invalid value is not preemptable": PreemptableCase(
        annotations={"volcano.sh/preemptable": "yes"}, labels={}, expected=False
    ),
}


@pytest.mark.parametrize(
    ("annotations", "labels", "expected"), PREEMPTABLE.values(), ids=PREEMPTABLE.keys()
)
def test_preemptability_reads_the_annotation_then_the_label(
    annotations: dict[str, str], labels: dict[str, str], expected: bool
) -> None:
    pod = pod_manifests.parse_pod(pod_manifest(annotations=annotations, labels=labels))
    assert pod.preemptable is expected


class BadPodsCase(NamedTuple):
    manifest: Any
    expected: Any


BAD_PODS = {
    "every malformed request is named": BadPodsCase(
        manifest=pod_manifest(
            spec={
                "containers": [
                    container({"cpu": "one"}),
                    {"name": "d", "resources": {"limits": {"memory": "1GB"}}},
                ]
            }
        ),
        expected=[
            'spec.containers[0].resources.requests["cpu"]: invalid quantity',
            'spec.containers[1].resources.limits["memory"]: invalid quantity',
        ],
    ),
    "an annotation must be a string (as the API server requires)": BadPodsCase(
        manifest=pod_manifest(annotations={"scheduling.volcano.sh/queue-allocation-gate": True}),  # type: ignore[dict-item]
        expected=[
            'metadata.annotations["scheduling.volcano.sh/queue-allocation-gate"]: '
            "must be a string (got true)"
        ],
    ),
    "a priority class that is not given": BadPodsCase(
        manifest=pod_manifest(spec={"containers": [container()], "priorityClassName": "urgent"}),
        expected=[
            'spec.priorityClassName: no PriorityClass with this name was given (got "urgent")'
        ],
    ),
    "every malformed pod-level quantity is named": BadPodsCase(
        manifest=pod_manifest(
            spec={
                "containers": [container()],
                "resources": {"requests": {"cpu": "-1"}, "limits": {"memory": "1GB"}},
            }
        ),
        expected=[
            'spec.resources.requests["cpu"]: must not be negative',
            'spec.resources.limits["memory"]: invalid quantity',
        ],
    ),
    "pod-level resources must be an object": BadPodsCase(
        manifest=pod_manifest(spec={"containers": [container()], "resources": ["cpu"]}),
        expected=['spec.resources: must be an object (got ["cpu"])'],
    ),
    "containers must be a list": BadPodsCase(
        manifest=pod_manifest(spec={"containers": {"name": "c"}}),
        expected=['spec.containers: must be a list (got {"name": "c"})'],
    ),
}


@pytest.mark.parametrize(("manifest", "expected"), BAD_PODS.values(), ids=BAD_PODS.keys())
def test_a_bad_pod_is_refused_naming_each_field(
    manifest: dict[str, Any], expected: list[str]
) -> None:
    with pytest.raises(readers.ManifestError) as caught:
        pod_manifests.parse_pod(manifest, origin="pods.yaml#1", priority_classes={})
    messages = [str(problem) for problem in caught.value.problems]
    prefix = "pods.yaml#1: Pod ns1/p1: "
    assert [m.startswith(prefix) for m in messages] == [True] * len(expected), messages
    assert len(messages) == len(expected), messages
    for message, start in zip(messages, expected, strict=True):
        assert message[len(prefix) :].startswith(start), (message, start)


def test_a_resource_that_is_not_a_pod_level_one_is_named_in_a_warning() -> None:
    warnings: list[str] = []
    manifest = pod_manifest(
        spec={"containers": [container()], "resources": {"limits": {"pods": "1", GPU: "2"}}}
    )
    pod_manifests.parse_pod(manifest, origin="pods.yaml#0", on_warning=warnings.append)
    assert warnings == [
        f'pods.yaml#0: Pod ns1/p1: spec.resources.limits["{name}"]: not a pod-level resource '
        "(only cpu, memory and hugepages-* are): ignored, as kube-scheduler ignores it (the "
        "API server refuses such a pod); request it in the containers' resources"
        for name in ("pods", GPU)
    ]
