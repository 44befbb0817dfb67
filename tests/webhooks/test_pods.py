"""``/pods/mutate`` (the gate, exactly as spec §5.2, plus the namespace opt-in) and
``/pods/validate`` (the queue a pod names must exist, be a leaf and be Open)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

import pytest

from queuetree.core import features
from queuetree.webhooks import settings, views
from tests.webhooks.builders import (
    GATE,
    PODS,
    allowed,
    answer,
    cluster,
    denied,
    outcome,
    pod,
    queue,
    review,
)

OPT_IN = {GATE: "true"}
WHOLE_LIST = {"op": "add", "path": "/spec/schedulingGates", "value": [{"name": GATE}]}
APPEND = {"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": GATE}}
OPTED_NAMESPACE = {"ml": {GATE: "true"}}
OVERRULED = (
    f'metadata.annotations["{GATE}"]: "false" cannot opt the pod out of namespace ml, which '
    "opts in every pod it creates: the pod is held for queue admission (an administrator can "
    "take the namespace out)"
)
GATE_OFF = settings.ReviewSettings(feature_gates={features.SCHEDULING_GATES_QUEUE_ADMISSION: False})
ADOPTED = "scheduling.queuetree.io/adopted-scheduler-name"
TO_KUBE_SCHEDULER = {"op": "add", "path": "/spec/schedulerName", "value": "default-scheduler"}
ADOPTED_ANNOTATIONS = {
    "op": "add",
    "path": "/metadata/annotations",
    "value": {GATE: "true", ADOPTED: "volcano"},
}
NO_ADOPTION = settings.ReviewSettings(adopted_scheduler_names=frozenset())
PROFILES = settings.ReviewSettings(
    scheduler_names=frozenset({"gpu-profile", "default-scheduler"}),
    placing_scheduler="gpu-profile",
    adopted_scheduler_names=frozenset({"volcano", "yunikorn"}),
)
VOLCANO_PLACES = settings.ReviewSettings(
    scheduler_names=frozenset({"default-scheduler", "volcano"}),
)


JOB_REFERENCE = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "name": "train",
    "uid": "0b5c",
    "controller": True,
}


def owned(body: dict[str, Any], *references: dict[str, Any]) -> dict[str, Any]:
    """``body`` (a pod) with ``references`` as its ownerReferences."""
    body["metadata"]["ownerReferences"] = list(references)
    return body


WORKLOAD_GROUP = {
    "op": "add",
    "path": "/metadata/annotations/scheduling.k8s.io~1group-name",
    "value": "podgroup-0b5c",
}


NATIVE = settings.ReviewSettings(native_pod_groups=True)


def native_group(name: str) -> dict[str, Any]:
    """The patch that makes a pod name the scheduling.k8s.io PodGroup ``name``."""
    return {"op": "add", "path": "/spec/schedulingGroup", "value": {"podGroupName": name}}


def named(body: dict[str, Any], group: str) -> dict[str, Any]:
    """``body`` (a pod) naming ``group`` in ``spec.schedulingGroup`` already."""
    body["spec"]["schedulingGroup"] = {"podGroupName": group}
    return body


MIN_4 = {**OPT_IN, "scheduling.volcano.sh/group-min-member": "4"}
MINE = {**OPT_IN, "scheduling.k8s.io/group-name": "mine"}


def starts(key: str, min_member: int, *, started: bool) -> dict[str, views.GangStart]:
    return {key: views.GangStart(min_member=min_member, started=started)}


class NativeCase(NamedTuple):
    obj: dict[str, Any]
    expected: dict[str, Any]
    gang_starts: Mapping[str, views.GangStart] = MappingProxyType({})
    rules: settings.ReviewSettings | None = NATIVE


NATIVE_CASES = {
    "a workload's pod with group-min-member above 1 names its group's native group": NativeCase(
        owned(pod(annotations=MIN_4), JOB_REFERENCE),
        allowed(patch=[WHOLE_LIST, WORKLOAD_GROUP, native_group("podgroup-0b5c")]),
    ),
    "a workload's pod without group-min-member names none (no gang to place whole)": NativeCase(
        owned(pod(annotations=OPT_IN), JOB_REFERENCE),
        allowed(patch=[WHOLE_LIST, WORKLOAD_GROUP]),
    ),
    "a workload's pod created after its gang started names none (placed alone)": NativeCase(
        owned(pod(annotations=MIN_4), JOB_REFERENCE),
        allowed(patch=[WHOLE_LIST, WORKLOAD_GROUP]),
        starts("default/podgroup-0b5c", 4, started=True),
    ),
    "a workload's pod follows its template, not the group's minMember (all pods alike)": NativeCase(
        owned(pod(annotations=MIN_4), JOB_REFERENCE),
        allowed(patch=[WHOLE_LIST, WORKLOAD_GROUP, native_group("podgroup-0b5c")]),
        starts("default/podgroup-0b5c", 1, started=False),
    ),
    "a pod of a hand-written group not seen yet names its native group": NativeCase(
        pod(annotations=MINE), allowed(patch=[WHOLE_LIST, native_group("mine")])
    ),
    "a pod of a hand-written gang that has not started names its native group": NativeCase(
        pod(annotations=MINE),
        allowed(patch=[WHOLE_LIST, native_group("mine")]),
        starts("default/mine", 3, started=False),
    ),
    "a pod of a hand-written gang that started names none": NativeCase(
        pod(annotations=MINE), allowed(patch=[WHOLE_LIST]), starts("default/mine", 3, started=True)
    ),
    "a pod of a hand-written group of one names none": NativeCase(
        pod(annotations=MINE), allowed(patch=[WHOLE_LIST]), starts("default/mine", 1, started=False)
    ),
    "a pod that names a native group keeps it": NativeCase(
        named(pod(annotations=MINE), "own"), allowed(patch=[WHOLE_LIST])
    ),
    "a lone pod names none": NativeCase(pod(annotations=OPT_IN), allowed(patch=[WHOLE_LIST])),
    "a pod that did not opt in is left alone": NativeCase(
        pod(annotations={"scheduling.k8s.io/group-name": "mine"}), allowed()
    ),
    "native PodGroups off: none": NativeCase(
        pod(annotations=MINE), allowed(patch=[WHOLE_LIST]), rules=None
    ),
}


@pytest.mark.parametrize("case", NATIVE_CASES.values(), ids=NATIVE_CASES.keys())
def test_pods_of_a_gang_yet_to_start_name_its_native_group(case: NativeCase) -> None:
    obj = case.obj
    body = review("CREATE", obj, resource=PODS, namespace=obj["metadata"]["namespace"])
    view = views.ClusterView.of(gang_starts=case.gang_starts)
    assert outcome(answer("/pods/mutate", body, view, case.rules)) == case.expected


@pytest.mark.parametrize(
    ("obj", "namespaces", "rules", "expected"),
    [
        pytest.param(pod(), {}, None, allowed(), id="not-opted-in"),
        pytest.param(
            owned(pod(annotations=OPT_IN), JOB_REFERENCE),
            {},
            None,
            allowed(patch=[WHOLE_LIST, WORKLOAD_GROUP]),
            id="a-workloads-pod-joins-its-workloads-group",
        ),
        pytest.param(
            owned(pod(namespace="ml", annotations=OPT_IN), JOB_REFERENCE),
            {"ml": {"scheduling.volcano.sh/queue-name": "ml-q"}},
            None,
            allowed(patch=[WHOLE_LIST, WORKLOAD_GROUP]),
            id="a-workloads-group-takes-the-namespace-queue-not-its-pod",
        ),
        pytest.param(
            owned(
                pod(annotations={**OPT_IN, "scheduling.k8s.io/group-name": "mine"}), JOB_REFERENCE
            ),
            {},
            None,
            allowed(patch=[WHOLE_LIST]),
            id="a-pod-that-names-its-group-keeps-it",
        ),
        pytest.param(
            owned(pod(annotations=OPT_IN), {**JOB_REFERENCE, "controller": False}),
            {},
            None,
            allowed(patch=[WHOLE_LIST]),
            id="an-owner-that-is-not-the-controller-makes-no-workload",
        ),
        pytest.param(owned(pod(), JOB_REFERENCE), {}, None, allowed(), id="not-opted-in-workload"),
        pytest.param(
            pod(annotations={GATE: "True"}),
            {},
            None,
            allowed(
                warnings=[
                    f'metadata.annotations["{GATE}"]: "True" is neither "true" nor "false": the '
                    'pod is not held for queue admission (write "true" to opt in)'
                ]
            ),
            id="opt-in-value-must-be-true",
        ),
        pytest.param(
            pod(annotations={GATE: "false"}), {}, None, allowed(), id="opted-out-without-a-word"
        ),
        pytest.param(
            pod(annotations=OPT_IN), {}, None, allowed(patch=[WHOLE_LIST]), id="add-whole-list"
        ),
        pytest.param(
            pod(annotations=OPT_IN, gates=["example.com/other"]),
            {},
            None,
            allowed(patch=[APPEND]),
            id="append-after-other-gates",
        ),
        pytest.param(
            pod(annotations=OPT_IN, gates=[]),
            {},
            None,
            allowed(patch=[APPEND]),
            id="empty-list-is-appended-to",
        ),
        pytest.param(
            pod(annotations=OPT_IN, gates=["example.com/other", GATE]),
            {},
            None,
            allowed(),
            id="idempotent-when-gated",
        ),
        pytest.param(
            pod(annotations=OPT_IN),
            {},
            GATE_OFF,
            allowed(
                warnings=[
                    f'metadata.annotations["{GATE}"]: the feature gate '
                    "SchedulingGatesQueueAdmission is off: the pod is not held for queue admission"
                ]
            ),
            id="feature-gate-off",
        ),
        pytest.param(
            pod(namespace="ml"),
            OPTED_NAMESPACE,
            None,
            allowed(
                patch=[
                    WHOLE_LIST,
                    {"op": "add", "path": "/metadata/annotations", "value": {GATE: "true"}},
                ]
            ),
            id="namespace-opt-in-adds-gate-and-annotation",
        ),
        pytest.param(
            pod(namespace="ml", annotations={"team": "a"}),
            {"ml": {GATE: "true", "scheduling.volcano.sh/queue-name": "ml-q"}},
            None,
            allowed(
                patch=[
                    WHOLE_LIST,
                    {
                        "op": "add",
                        "path": "/metadata/annotations/"
                        "scheduling.volcano.sh~1queue-allocation-gate",
                        "value": "true",
                    },
                    {
                        "op": "add",
                        "path": "/metadata/annotations/scheduling.volcano.sh~1queue-name",
                        "value": "ml-q",
                    },
                ]
            ),
            id="namespace-opt-in-carries-the-namespace-queue",
        ),
        pytest.param(
            pod(namespace="ml", annotations=OPT_IN),
            {"ml": {"scheduling.volcano.sh/queue-name": "ml-q"}},
            None,
            allowed(
                patch=[
                    WHOLE_LIST,
                    {
                        "op": "add",
                        "path": "/metadata/annotations/scheduling.volcano.sh~1queue-name",
                        "value": "ml-q",
                    },
                ]
            ),
            id="own-opt-in-also-carries-the-namespace-queue-the-validator-checked",
        ),
        pytest.param(
            pod(namespace="ml", annotations={**OPT_IN, "scheduling.volcano.sh/queue-name": "q"}),
            {"ml": {"scheduling.volcano.sh/queue-name": "ml-q"}},
            None,
            allowed(patch=[WHOLE_LIST]),
            id="the-pods-own-queue-wins-over-the-namespace-queue",
        ),
        pytest.param(
            pod(namespace="ml", annotations={GATE: "false"}),
            OPTED_NAMESPACE,
            None,
            allowed(
                patch=[
                    WHOLE_LIST,
                    {
                        "op": "add",
                        "path": "/metadata/annotations/"
                        "scheduling.volcano.sh~1queue-allocation-gate",
                        "value": "true",
                    },
                ],
                warnings=[OVERRULED],
            ),
            id="a-pods-false-cannot-undo-the-namespace-opt-in",
        ),
        pytest.param(
            pod(namespace="ml", annotations={GATE: "false"}),
            {},
            None,
            allowed(),
            id="false-outside-an-opted-in-namespace-is-not-opted-in",
        ),
        pytest.param(
            pod(namespace="ml", annotations=OPT_IN, gates=[GATE]),
            OPTED_NAMESPACE,
            None,
            allowed(),
            id="idempotent-in-an-opted-in-namespace",
        ),
        pytest.param(
            pod(namespace="ml"),
            {"ml": {GATE: "yes"}},
            None,
            allowed(),
            id="namespace-value-must-be-true",
        ),
        pytest.param(
            pod(annotations=OPT_IN, node_name="n1"),
            {},
            None,
            allowed(),
            id="pod-bound-at-creation-is-not-gated-and-left-to-the-validator",
        ),
        pytest.param(
            pod(scheduler="volcano"),
            {},
            None,
            allowed(patch=[WHOLE_LIST, TO_KUBE_SCHEDULER, ADOPTED_ANNOTATIONS]),
            id="a-pod-for-volcano-is-adopted-opted-in-and-gated",
        ),
        pytest.param(
            pod(
                scheduler="volcano",
                annotations={GATE: "false", "scheduling.k8s.io/group-name": "pg"},
            ),
            {},
            None,
            allowed(
                patch=[
                    WHOLE_LIST,
                    TO_KUBE_SCHEDULER,
                    {
                        "op": "add",
                        "path": "/metadata/annotations/"
                        "scheduling.volcano.sh~1queue-allocation-gate",
                        "value": "true",
                    },
                    {
                        "op": "add",
                        "path": "/metadata/annotations/"
                        "scheduling.queuetree.io~1adopted-scheduler-name",
                        "value": "volcano",
                    },
                ],
                warnings=[
                    f'metadata.annotations["{GATE}"]: "false" cannot opt the pod out of queue '
                    "admission: it names spec.schedulerName volcano, whose pods all go through "
                    "their queue, and is held for queue admission (create it without "
                    "spec.schedulerName to run it outside queue admission)"
                ],
            ),
            id="an-adopted-pods-false-cannot-undo-its-opt-in",
        ),
        pytest.param(
            pod(scheduler="yunikorn", gates=["example.com/other"]),
            {},
            PROFILES,
            allowed(
                patch=[
                    APPEND,
                    {"op": "add", "path": "/spec/schedulerName", "value": "gpu-profile"},
                    {
                        "op": "add",
                        "path": "/metadata/annotations",
                        "value": {GATE: "true", ADOPTED: "yunikorn"},
                    },
                ]
            ),
            id="adopted-pods-go-to-the-first-scheduler-name",
        ),
        pytest.param(pod(scheduler="volcano"), {}, NO_ADOPTION, allowed(), id="adoption-off"),
        pytest.param(
            pod(scheduler="my-scheduler"),
            {},
            None,
            allowed(),
            id="another-scheduler-is-not-adopted",
        ),
        pytest.param(
            pod(scheduler="volcano"),
            {},
            VOLCANO_PLACES,
            allowed(),
            id="a-scheduler-name-that-places-pods-is-never-adopted",
        ),
        pytest.param(
            pod(scheduler="volcano"),
            {},
            GATE_OFF,
            allowed(
                warnings=[
                    f'metadata.annotations["{GATE}"]: the feature gate '
                    "SchedulingGatesQueueAdmission is off: the pod is not held for queue admission"
                ]
            ),
            id="nothing-is-adopted-with-the-feature-gate-off",
        ),
    ],
)
def test_pod_mutation_injects_the_gate(
    obj: dict[str, Any],
    namespaces: dict[str, dict[str, str]],
    rules: settings.ReviewSettings | None,
    expected: dict[str, Any],
) -> None:
    body = review("CREATE", obj, resource=PODS, namespace=obj["metadata"]["namespace"])
    view = views.ClusterView.of(namespaces=namespaces)
    assert outcome(answer("/pods/mutate", body, view, rules)) == expected


def test_pod_mutation_refuses_other_operations() -> None:
    body = review("UPDATE", pod(annotations=OPT_IN), resource=PODS, namespace="default")
    assert outcome(answer("/pods/mutate", body)) == denied(
        "invalid operation `UPDATE`, expect operation to be `CREATE`", code=400
    )


TREE = [
    queue("team", "root"),
    queue("a", "team"),
    queue("b", "team"),
    queue("closed", "root", state="Closed"),
    queue("default", "root"),
]
QUEUE_NAME = "scheduling.volcano.sh/queue-name"
GROUP_NAME = "scheduling.k8s.io/group-name"
BOUND_TO_NODE = (
    "spec.nodeName: Forbidden: pod default/p1 is opted in to queue admission (by its annotation) "
    "and cannot be created bound to node n1: queuetree admits a pod by removing its scheduling "
    "gate, and a bound pod cannot carry one, so it would run outside its queue's limits; remove "
    "spec.nodeName (to choose the node, set a nodeSelector on kubernetes.io/hostname)"
)
RECORD = "scheduling.queuetree.io/admitted-queue"


def created_with_record(value: str, *, subject: str = "default/p1") -> str:
    return (
        f'metadata.annotations["{RECORD}"]: Forbidden: "{value}": pod {subject} cannot be created '
        f"with the admission record {RECORD}: only the queuetree operator writes it, when it "
        "admits a pod (in the write that removes the pod's scheduling gate), and charges the pod "
        "to the queue it names; remove the annotation (a manifest copied from an admitted pod "
        f"carries it) and name the pod's queue with {QUEUE_NAME}"
    )


DEVICES_RECORD = "scheduling.queuetree.io/admitted-devices"


def devices_record_written(value: str) -> str:
    return (
        f'metadata.annotations["{DEVICES_RECORD}"]: Forbidden: {value}what the ResourceClaims '
        f"of pod default/p1 were charged when it was admitted is written by the queuetree "
        f"operator ({OPERATOR}) only, when it removes the pod's gate, and never changes after"
    )


FOREIGN_SCHEDULER = (
    "spec.schedulerName: my-scheduler: queuetree admits pods for default-scheduler only "
    "(--scheduler-name), so this pod stays gated (holding no room in its queue) and is told why; "
    "create it without spec.schedulerName, or with one of those (or with volcano, which the "
    "webhook hands to default-scheduler: --adopt-scheduler-names; see docs/compatibility.md)"
)


@pytest.mark.parametrize(
    ("obj", "namespaces", "pod_groups", "expected"),
    [
        pytest.param(pod(annotations={QUEUE_NAME: "ghost"}), {}, {}, allowed(), id="not-opted-in"),
        pytest.param(
            pod(annotations={**OPT_IN, QUEUE_NAME: "a"}), {}, {}, allowed(), id="open-leaf"
        ),
        pytest.param(pod(annotations=OPT_IN), {}, {}, allowed(), id="default-queue"),
        pytest.param(
            pod(annotations={**OPT_IN, QUEUE_NAME: "ghost"}),
            {},
            {},
            denied(
                f'metadata.annotations["{QUEUE_NAME}"]: Not found: "ghost": pod default/p1 names '
                f"queue ghost (from annotation {QUEUE_NAME}): the queue does not exist; create "
                "it or name an existing leaf queue"
            ),
            id="missing-queue",
        ),
        pytest.param(
            pod(annotations={**OPT_IN, QUEUE_NAME: "team"}),
            {},
            {},
            denied(
                f'metadata.annotations["{QUEUE_NAME}"]: Invalid value: "team": pod default/p1 '
                f"names queue team (from annotation {QUEUE_NAME}): pods can only be submitted to "
                "leaf queues, and queue team has 2 child queues: a, b"
            ),
            id="non-leaf-queue",
        ),
        pytest.param(
            pod(annotations={**OPT_IN, QUEUE_NAME: "closed"}),
            {},
            {},
            denied(
                f'metadata.annotations["{QUEUE_NAME}"]: Invalid value: "closed": pod default/p1 '
                f"names queue closed (from annotation {QUEUE_NAME}): pods can only be submitted "
                "to Open queues, and queue closed is Closed"
            ),
            id="closed-queue",
        ),
        pytest.param(
            pod(annotations={**OPT_IN, QUEUE_NAME: "root"}),
            {},
            {},
            denied(
                f'metadata.annotations["{QUEUE_NAME}"]: Invalid value: "root": pod default/p1 '
                f"names queue root (from annotation {QUEUE_NAME}): pods cannot be submitted to "
                "the root queue; name a leaf queue"
            ),
            id="root-queue",
        ),
        pytest.param(
            pod(annotations={**OPT_IN, QUEUE_NAME: "a", GROUP_NAME: "pg"}),
            {},
            {"default/pg": "closed"},
            denied(
                f'metadata.annotations["{GROUP_NAME}"]: Invalid value: "closed": pod default/p1 '
                "names queue closed (from PodGroup default/pg): pods can only be submitted to "
                "Open queues, and queue closed is Closed"
            ),
            id="pod-group-queue-wins",
        ),
        pytest.param(
            pod(annotations={**OPT_IN, QUEUE_NAME: "a", GROUP_NAME: "not-yet"}),
            {},
            {},
            allowed(),
            id="pod-group-not-created-yet-falls-back-to-the-annotation",
        ),
        pytest.param(
            pod(namespace="ml", annotations=OPT_IN),
            {"ml": {QUEUE_NAME: "team"}},
            {},
            denied(
                f'metadata.annotations["{QUEUE_NAME}"]: Invalid value: "team": pod ml/p1 names '
                f"queue team (from annotation {QUEUE_NAME} of namespace ml): pods can only be "
                "submitted to leaf queues, and queue team has 2 child queues: a, b"
            ),
            id="namespace-queue-name",
        ),
        pytest.param(
            pod(namespace="ml"),
            {"ml": {GATE: "true", QUEUE_NAME: "ghost"}},
            {},
            denied(
                f'metadata.annotations["{QUEUE_NAME}"]: Not found: "ghost": pod ml/p1 names queue '
                f"ghost (from annotation {QUEUE_NAME} of namespace ml): the queue does not "
                "exist; create it or name an existing leaf queue"
            ),
            id="namespace-opt-in-is-validated-too",
        ),
        pytest.param(
            pod(namespace="ml", annotations={GATE: "false", QUEUE_NAME: "a"}),
            OPTED_NAMESPACE,
            {},
            allowed(warnings=[OVERRULED]),
            id="a-pods-false-in-an-opted-in-namespace-is-validated-as-opted-in",
        ),
        pytest.param(
            pod(annotations={**OPT_IN, QUEUE_NAME: "a"}, node_name="n1"),
            {},
            {},
            denied(BOUND_TO_NODE),
            id="opted-in-pod-bound-to-a-node",
        ),
        pytest.param(
            pod(annotations={**OPT_IN, QUEUE_NAME: "ghost"}, node_name="n1"),
            {},
            {},
            denied(
                f"[{BOUND_TO_NODE}, "
                f'metadata.annotations["{QUEUE_NAME}"]: Not found: "ghost": pod default/p1 names '
                f"queue ghost (from annotation {QUEUE_NAME}): the queue does not exist; create "
                "it or name an existing leaf queue]"
            ),
            id="every-problem-in-one-denial",
        ),
        pytest.param(
            pod(annotations={QUEUE_NAME: "a"}, node_name="n1"),
            {},
            {},
            allowed(),
            id="a-pod-that-did-not-opt-in-may-be-bound",
        ),
        pytest.param(
            pod(annotations={**OPT_IN, QUEUE_NAME: "a", RECORD: "default"}),
            {},
            {},
            denied(created_with_record("default")),
            id="an-opted-in-pod-created-with-a-forged-admission-record",
        ),
        pytest.param(
            pod(annotations={**OPT_IN, QUEUE_NAME: "a", DEVICES_RECORD: '{"nvidia.com/gpu":"9"}'}),
            {},
            {},
            denied(
                f'metadata.annotations["{DEVICES_RECORD}"]: Forbidden: '
                '"{"nvidia.com/gpu":"9"}": pod default/p1 cannot be created with '
                f"the admission record {DEVICES_RECORD}: only the queuetree operator writes it, "
                "when it admits a pod (in the write that removes the pod's scheduling gate), and "
                "charges the pod's own ResourceClaims at least the devices it lists; remove the "
                "annotation (a manifest copied from an admitted pod carries it) and name the "
                f"pod's queue with {QUEUE_NAME}"
            ),
            id="an-opted-in-pod-created-with-a-forged-devices-record",
        ),
        pytest.param(
            pod(annotations={QUEUE_NAME: "a", RECORD: "b"}),
            {},
            {},
            denied(created_with_record("b")),
            id="a-pod-that-did-not-opt-in-created-with-an-admission-record",
        ),
        pytest.param(
            pod(annotations={RECORD: ""}),
            {},
            {},
            denied(created_with_record("")),
            id="an-empty-admission-record-at-creation",
        ),
        pytest.param(
            pod(namespace="ml", annotations={RECORD: "b"}),
            OPTED_NAMESPACE,
            {},
            denied(created_with_record("b", subject="ml/p1")),
            id="a-pod-of-an-opted-in-namespace-created-with-an-admission-record",
        ),
        pytest.param(
            pod(annotations={**OPT_IN, QUEUE_NAME: "ghost", RECORD: "a"}),
            {},
            {},
            denied(
                f"[{created_with_record('a')}, "
                f'metadata.annotations["{QUEUE_NAME}"]: Not found: "ghost": pod default/p1 names '
                f"queue ghost (from annotation {QUEUE_NAME}): the queue does not exist; create "
                "it or name an existing leaf queue]"
            ),
            id="a-forged-record-among-other-problems",
        ),
        pytest.param(
            pod(annotations={**OPT_IN, QUEUE_NAME: "a"}, scheduler="my-scheduler"),
            {},
            {},
            allowed(warnings=[FOREIGN_SCHEDULER]),
            id="another-scheduler-is-warned-about",
        ),
        pytest.param(
            pod(annotations={QUEUE_NAME: "ghost"}, scheduler="volcano"),
            {},
            {},
            denied(
                f'metadata.annotations["{QUEUE_NAME}"]: Not found: "ghost": pod default/p1 names '
                f"queue ghost (from annotation {QUEUE_NAME}): the queue does not exist; create "
                "it or name an existing leaf queue"
            ),
            id="a-pod-for-volcano-is-opted-in-and-its-queue-checked",
        ),
        pytest.param(
            pod(annotations={**OPT_IN, QUEUE_NAME: "a"}, scheduler="default-scheduler"),
            {},
            {},
            allowed(),
            id="kube-scheduler-named-explicitly",
        ),
    ],
)
def test_pod_validation_checks_the_queue(
    obj: dict[str, Any],
    namespaces: dict[str, dict[str, str]],
    pod_groups: dict[str, str],
    expected: dict[str, Any],
) -> None:
    body = review("CREATE", obj, resource=PODS, namespace=obj["metadata"]["namespace"])
    view = cluster(*TREE, namespaces=namespaces, pod_groups=pod_groups)
    assert outcome(answer("/pods/validate", body, view)) == expected


def test_a_missing_queue_is_reported_for_the_server_to_retry() -> None:
    from queuetree.api import admission
    from queuetree.webhooks import pods

    request = admission.read_request(
        review("CREATE", pod(annotations={**OPT_IN, QUEUE_NAME: "new"}), resource=PODS)
    )
    verdict = pods.validate(request, view=cluster(*TREE), settings=settings.ReviewSettings())
    assert verdict.missing == ("new",)


@pytest.mark.parametrize(
    ("path", "annotations", "expected"),
    [
        pytest.param("/pods/mutate", {}, ("ml",), id="mutate-depends-on-the-namespace"),
        pytest.param("/pods/mutate", OPT_IN, (), id="mutate-opted-in-by-the-pod-itself"),
        pytest.param("/pods/validate", {}, ("ml",), id="validate-depends-on-the-namespace"),
    ],
)
def test_a_namespace_missing_from_the_cache_is_reported_for_the_server_to_wait(
    path: str, annotations: dict[str, str], expected: tuple[str, ...]
) -> None:
    from queuetree.api import admission
    from queuetree.webhooks import pods

    request = admission.read_request(
        review("CREATE", pod(namespace="ml", annotations=annotations), resource=PODS)
    )
    review_fn = pods.mutate if path == "/pods/mutate" else pods.validate
    verdict = review_fn(request, view=cluster(*TREE), settings=settings.ReviewSettings())
    assert verdict.missing_namespaces == expected


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        # On a cluster the annotation sends no pod to the webhook (the configurations select
        # namespaces by label), so the view ignores it rather than gate only some pods.
        pytest.param({"name": "ml", "annotations": {GATE: "true"}}, {}, id="annotation-ignored"),
        pytest.param({"name": "ml", "labels": {GATE: "true"}}, {GATE: "true"}, id="label"),
        pytest.param(
            {"name": "ml", "annotations": {GATE: "false"}, "labels": {GATE: "true"}},
            {GATE: "true"},
            id="the-label-wins",
        ),
        pytest.param(
            {"name": "ml", "annotations": {"scheduling.volcano.sh/queue-name": "q"}},
            {"scheduling.volcano.sh/queue-name": "q"},
            id="other-annotations-kept",
        ),
        pytest.param({"name": "ml", "labels": {"team": "a"}}, {}, id="neither"),
    ],
)
def test_a_namespace_opts_in_by_label_only(
    metadata: dict[str, Any], expected: dict[str, str]
) -> None:
    found = views.namespace_annotations(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}
    )
    assert found is not None
    assert dict(found[1]) == expected


OPERATOR = settings.OPERATOR_USERNAME
TENANT = "system:serviceaccount:ml:tenant"
ADMITTED = {**OPT_IN, QUEUE_NAME: "a", RECORD: "a"}
GATE_REMOVED = (
    "spec.schedulingGates: Forbidden: only the queuetree operator "
    f"({OPERATOR}) may remove the scheduling gate {GATE} from pod default/p1, and it does so "
    f"once queue a has room for the pod; {TENANT} cannot (kubectl describe pod tells why it waits)"
)


LATE_OPT_IN = (
    f'metadata.annotations["{GATE}"]: Forbidden: "{{value}}": pod default/p1 was created '
    "without opting in to queue admission, so it runs outside it and no queue counts it; a pod "
    "opts in when it is created (that is when it gets the scheduling gate it waits behind): "
    f'delete it and create it again with the annotation {GATE}: "true" (or in a namespace '
    f"labelled {GATE}=true)"
)


def moved(key: str, value: str | None) -> str:
    return (
        f'metadata.annotations["{key}"]: Forbidden: "{value}": pod default/p1 was admitted to '
        "queue a and stays charged to it until it finishes or is deleted, so its queue cannot "
        "change; delete the pod and create it again to run it in another queue"
    )


class UpdatesCase(NamedTuple):
    old: Any
    new: Any
    user: Any
    expected: Any


UPDATES = {
    "a tenant removes the gate": UpdatesCase(
        old=pod(annotations={**OPT_IN, QUEUE_NAME: "a"}, gates=[GATE]),
        new=pod(annotations={**OPT_IN, QUEUE_NAME: "a"}),
        user=TENANT,
        expected=denied(GATE_REMOVED),
    ),
    "a tenant removes the gate and the opt-in together": UpdatesCase(
        old=pod(annotations={**OPT_IN, QUEUE_NAME: "a"}, gates=[GATE]),
        new=pod(annotations={QUEUE_NAME: "a"}),
        user=TENANT,
        expected=denied(GATE_REMOVED),
    ),
    "the operator removes the gate and writes the record": UpdatesCase(
        old=pod(annotations={**OPT_IN, QUEUE_NAME: "a"}, gates=[GATE]),
        new=pod(annotations=ADMITTED),
        user=OPERATOR,
        expected=allowed(),
    ),
    "another controller removes its own gate": UpdatesCase(
        old=pod(annotations={**OPT_IN, QUEUE_NAME: "a"}, gates=["example.com/other", GATE]),
        new=pod(annotations={**OPT_IN, QUEUE_NAME: "a"}, gates=[GATE]),
        user=TENANT,
        expected=allowed(),
    ),
    "a tenant moves a gated pod to another queue before it is admitted": UpdatesCase(
        old=pod(annotations={**OPT_IN, QUEUE_NAME: "a"}, gates=[GATE]),
        new=pod(annotations={**OPT_IN, QUEUE_NAME: "b"}, gates=[GATE]),
        user=TENANT,
        expected=allowed(),
    ),
    "a tenant moves an admitted pod": UpdatesCase(
        old=pod(annotations=ADMITTED),
        new=pod(annotations={**ADMITTED, QUEUE_NAME: "b"}),
        user=TENANT,
        expected=denied(moved(QUEUE_NAME, "b")),
    ),
    "a tenant puts an admitted pod in a group": UpdatesCase(
        old=pod(annotations=ADMITTED),
        new=pod(annotations={**ADMITTED, GROUP_NAME: "pg"}),
        user=TENANT,
        expected=denied(moved(GROUP_NAME, "pg")),
    ),
    "a tenant moves a pod admitted before the record existed": UpdatesCase(
        old=pod(annotations={**OPT_IN, QUEUE_NAME: "a"}),
        new=pod(annotations={**OPT_IN, QUEUE_NAME: "ghost"}),
        user=TENANT,
        expected=denied(moved(QUEUE_NAME, "ghost")),
    ),
    "a tenant edits the record": UpdatesCase(
        old=pod(annotations=ADMITTED),
        new=pod(annotations={**ADMITTED, RECORD: "b"}),
        user=TENANT,
        expected=denied(
            f'metadata.annotations["{RECORD}"]: Forbidden: "b": the queue pod default/p1 was '
            f"admitted to is written by the queuetree operator ({OPERATOR}) only, when it "
            "removes the pod's gate, and never changes after"
        ),
    ),
    "a tenant adds the record to a pod that never opted in": UpdatesCase(
        old=pod(annotations={QUEUE_NAME: "a"}),
        new=pod(annotations={QUEUE_NAME: "a", RECORD: "b"}),
        user=TENANT,
        expected=denied(
            f'metadata.annotations["{RECORD}"]: Forbidden: "b": the queue pod default/p1 was '
            f"admitted to is written by the queuetree operator ({OPERATOR}) only, when it "
            "removes the pod's gate, and never changes after"
        ),
    ),
    "a tenant lowers the devices its admitted pod was charged": UpdatesCase(
        old=pod(annotations={**ADMITTED, DEVICES_RECORD: '{"nvidia.com/gpu":"4"}'}),
        new=pod(annotations={**ADMITTED, DEVICES_RECORD: '{"nvidia.com/gpu":"1"}'}),
        user=TENANT,
        expected=denied(devices_record_written('"{"nvidia.com/gpu":"1"}": ')),
    ),
    "a tenant removes the devices record": UpdatesCase(
        old=pod(annotations={**ADMITTED, DEVICES_RECORD: '{"nvidia.com/gpu":"4"}'}),
        new=pod(annotations=ADMITTED),
        user=TENANT,
        expected=denied(devices_record_written("")),
    ),
    "the operator writes the devices record with the queue's": UpdatesCase(
        old=pod(annotations={**OPT_IN, QUEUE_NAME: "a"}, gates=[GATE]),
        new=pod(annotations={**ADMITTED, DEVICES_RECORD: '{"nvidia.com/gpu":"4"}'}),
        user=OPERATOR,
        expected=allowed(),
    ),
    "a tenant relabels an admitted pod": UpdatesCase(
        old=pod(annotations=ADMITTED),
        new=pod(annotations={**ADMITTED, "team": "b"}),
        user=TENANT,
        expected=allowed(),
    ),
    "a finished pod may be re-annotated": UpdatesCase(
        old=pod(annotations=ADMITTED, phase="Succeeded"),
        new=pod(annotations={**ADMITTED, QUEUE_NAME: "b"}, phase="Succeeded"),
        user=TENANT,
        expected=allowed(),
    ),
    "a pod that never opted in is none of queuetree's business": UpdatesCase(
        old=pod(annotations={QUEUE_NAME: "a"}),
        new=pod(annotations={QUEUE_NAME: "b"}),
        user=TENANT,
        expected=allowed(),
    ),
    "a running pod cannot opt in after its creation (it would be counted without waiting)": (
        UpdatesCase(
            old=pod(annotations={QUEUE_NAME: "a"}),
            new=pod(annotations={**OPT_IN, QUEUE_NAME: "b"}),
            user=TENANT,
            expected=denied(LATE_OPT_IN.format(value="true")),
        )
    ),
    "nor can one that said false at creation": UpdatesCase(
        old=pod(annotations={GATE: "false", QUEUE_NAME: "a"}),
        new=pod(annotations={**OPT_IN, QUEUE_NAME: "a"}),
        user=TENANT,
        expected=denied(LATE_OPT_IN.format(value="true")),
    ),
    "a gated pod may opt in again": UpdatesCase(
        old=pod(annotations={QUEUE_NAME: "a"}, gates=[GATE]),
        new=pod(annotations={**OPT_IN, QUEUE_NAME: "a"}, gates=[GATE]),
        user=TENANT,
        expected=allowed(),
    ),
    "a pod admitted before the record existed cannot drop its opt-in (it would leave its queue)": (
        UpdatesCase(
            old=pod(annotations={**OPT_IN, QUEUE_NAME: "a"}),
            new=pod(annotations={QUEUE_NAME: "a"}),
            user=TENANT,
            expected=denied(
                f'metadata.annotations["{GATE}"]: Forbidden: pod default/p1 was admitted to '
                "queue a (before the admission record existed) and its opt-in is what keeps it "
                "charged there until it finishes or is deleted, so it cannot be removed"
            ),
        )
    ),
    "an admitted pod with the record may drop its opt-in annotation": UpdatesCase(
        old=pod(annotations=ADMITTED),
        new=pod(annotations={QUEUE_NAME: "a", RECORD: "a"}),
        user=TENANT,
        expected=allowed(),
    ),
    "an admitted pod may get its opt-in annotation back": UpdatesCase(
        old=pod(annotations={QUEUE_NAME: "a", RECORD: "a"}),
        new=pod(annotations=ADMITTED),
        user=TENANT,
        expected=allowed(),
    ),
}


@pytest.mark.parametrize(("old", "new", "user", "expected"), UPDATES.values(), ids=UPDATES.keys())
def test_pod_updates_keep_admission_with_the_operator_and_bound_to_its_queue(
    old: dict[str, Any], new: dict[str, Any], user: str, expected: dict[str, Any]
) -> None:
    body = review("UPDATE", new, old=old, resource=PODS, namespace="default")
    body["request"]["userInfo"] = {"username": user, "groups": ["system:authenticated"]}
    assert outcome(answer("/pods/validate", body, cluster(*TREE))) == expected


def test_the_operator_is_whoever_the_flag_names() -> None:
    body = review(
        "UPDATE",
        pod(annotations={**OPT_IN, QUEUE_NAME: "a"}),
        old=pod(annotations={**OPT_IN, QUEUE_NAME: "a"}, gates=[GATE]),
        resource=PODS,
        namespace="default",
    )
    body["request"]["userInfo"] = {"username": "system:serviceaccount:ops:admitter"}
    rules = settings.ReviewSettings(operator_username="system:serviceaccount:ops:admitter")
    assert outcome(answer("/pods/validate", body, cluster(*TREE), rules)) == allowed()


ONE, TWENTY, HALF = {"cpu": "1"}, {"cpu": "20"}, {"cpu": "500m"}
GATED = {**OPT_IN, QUEUE_NAME: "a"}
DELETE_AND_CREATE = (
    "; delete the pod and create it again with the new requests, so that it waits for room in "
    "its queue (lowering requests is allowed)"
)


def admitted_resize(raised: str, queue_name: str = "a") -> str:
    return (
        f"spec: Forbidden: pod default/p1 was admitted to queue {queue_name} at the size it had "
        f"then, and a resize cannot raise its requests ({raised}): nothing checks the queue's "
        "room again on a resize, so the queue and its ancestors would run more than their "
        f"capability{DELETE_AND_CREATE}"
    )


def gated_resize(raised: str) -> str:
    return (
        "spec: Forbidden: pod default/p1 waits for room in queue a, and a resize cannot raise "
        f"its requests while it waits ({raised}): the queuetree operator checks the room at "
        "the size it read and then removes the gate, so a pod grown in between would run at a "
        f"size its queue never checked{DELETE_AND_CREATE}"
    )


class ResizesCase(NamedTuple):
    old: Any
    new: Any
    expected: Any
    user: Any = TENANT
    sub_resource: Any = "resize"


RESIZES = {
    "an admitted pod cannot grow": ResizesCase(
        old=pod(annotations=ADMITTED, requests=ONE),
        new=pod(annotations=ADMITTED, requests=TWENTY),
        expected=denied(admitted_resize("cpu from 1 to 20")),
    ),
    "a pod admitted before the record existed cannot grow": ResizesCase(
        old=pod(annotations={**OPT_IN, QUEUE_NAME: "b"}, requests=ONE),
        new=pod(annotations={**OPT_IN, QUEUE_NAME: "b"}, requests=TWENTY),
        expected=denied(admitted_resize("cpu from 1 to 20", "b")),
    ),
    "the record names the queue, whatever the annotations say": ResizesCase(
        old=pod(annotations={**ADMITTED, QUEUE_NAME: "b"}, requests=ONE),
        new=pod(annotations={**ADMITTED, QUEUE_NAME: "b"}, requests=TWENTY),
        expected=denied(admitted_resize("cpu from 1 to 20")),
    ),
    "an admitted pod may shrink": ResizesCase(
        old=pod(annotations=ADMITTED, requests=ONE),
        new=pod(annotations=ADMITTED, requests=HALF),
        expected=allowed(),
    ),
    "less cpu does not pay for more memory": ResizesCase(
        old=pod(annotations=ADMITTED, requests={"cpu": "1", "memory": "1Gi"}),
        new=pod(annotations=ADMITTED, requests={"cpu": "500m", "memory": "2Gi"}),
        expected=denied(admitted_resize("memory from 1Gi to 2Gi")),
    ),
    "every dimension raised is named": ResizesCase(
        old=pod(annotations=ADMITTED, requests={"cpu": "1", "memory": "1Gi"}),
        new=pod(annotations=ADMITTED, requests={"cpu": "2", "memory": "2Gi"}),
        expected=denied(admitted_resize("cpu from 1 to 2, memory from 1Gi to 2Gi")),
    ),
    "a sidecar of an admitted pod cannot grow": ResizesCase(
        old=pod(annotations=ADMITTED, requests=ONE, sidecar_requests=ONE),
        new=pod(annotations=ADMITTED, requests=ONE, sidecar_requests=TWENTY),
        expected=denied(admitted_resize("cpu from 2 to 21")),
    ),
    "nor an init container beyond the containers": ResizesCase(
        old=pod(annotations=ADMITTED, requests=ONE, init_requests=ONE),
        new=pod(annotations=ADMITTED, requests=ONE, init_requests=TWENTY),
        expected=denied(admitted_resize("cpu from 1 to 20")),
    ),
    "an init container may grow below the containers": ResizesCase(
        old=pod(annotations=ADMITTED, requests=TWENTY, init_requests=ONE),
        new=pod(annotations=ADMITTED, requests=TWENTY, init_requests={"cpu": "2"}),
        expected=allowed(),
    ),
    "a gated pod cannot grow while it waits": ResizesCase(
        old=pod(annotations=GATED, gates=[GATE], requests=ONE),
        new=pod(annotations=GATED, gates=[GATE], requests=TWENTY),
        expected=denied(gated_resize("cpu from 1 to 20")),
    ),
    "a gated pod may shrink": ResizesCase(
        old=pod(annotations=GATED, gates=[GATE], requests=ONE),
        new=pod(annotations=GATED, gates=[GATE], requests=HALF),
        expected=allowed(),
    ),
    "a pod that carries the gate without the opt-in is governed too": ResizesCase(
        old=pod(annotations={QUEUE_NAME: "a"}, gates=[GATE], requests=ONE),
        new=pod(annotations={QUEUE_NAME: "a"}, gates=[GATE], requests=TWENTY),
        expected=denied(gated_resize("cpu from 1 to 20")),
    ),
    "a pod queuetree does not govern is none of its business": ResizesCase(
        old=pod(annotations={QUEUE_NAME: "a"}, requests=ONE),
        new=pod(annotations={QUEUE_NAME: "a"}, requests=TWENTY),
        expected=allowed(),
    ),
    "a finished pod holds nothing": ResizesCase(
        old=pod(annotations=ADMITTED, requests=ONE, phase="Succeeded"),
        new=pod(annotations=ADMITTED, requests=TWENTY, phase="Succeeded"),
        expected=allowed(),
    ),
    "requests that cannot be read are refused": ResizesCase(
        old=pod(annotations=ADMITTED, requests=ONE),
        new=pod(annotations=ADMITTED, requests={"cpu": "-1"}),
        expected=denied(
            "spec: Forbidden: the requests of pod default/p1 cannot be read, so queuetree "
            "cannot tell whether the write raises them: "
            'spec.containers[0].resources.requests["cpu"]: Invalid value: "-1": must not be '
            "negative"
        ),
    ),
    "the operator is never refused": ResizesCase(
        old=pod(annotations=ADMITTED, requests=ONE),
        new=pod(annotations=ADMITTED, requests=TWENTY),
        user=OPERATOR,
        expected=allowed(),
    ),
    # Since 1.32 kube-apiserver refuses this before any webhook; before, a cluster with
    # InPlacePodVerticalScaling on resized pods this way.
    "requests raised through the pod itself are refused too": ResizesCase(
        old=pod(annotations=ADMITTED, requests=ONE),
        new=pod(annotations=ADMITTED, requests=TWENTY),
        sub_resource="",
        expected=denied(admitted_resize("cpu from 1 to 20")),
    ),
    "and lowered through the pod itself are allowed": ResizesCase(
        old=pod(annotations=ADMITTED, requests=ONE),
        new=pod(annotations=ADMITTED, requests=HALF),
        sub_resource="",
        expected=allowed(),
    ),
    "a growth and a move of an admitted pod are refused together": ResizesCase(
        old=pod(annotations=ADMITTED, requests=ONE),
        new=pod(annotations={**ADMITTED, QUEUE_NAME: "b"}, requests=TWENTY),
        sub_resource="",
        expected=denied(f"[{admitted_resize('cpu from 1 to 20')}, {moved(QUEUE_NAME, 'b')}]"),
    ),
}


@pytest.mark.parametrize(
    ("old", "new", "expected", "user", "sub_resource"), RESIZES.values(), ids=RESIZES.keys()
)
def test_an_in_place_resize_cannot_raise_the_requests_of_a_pod_queuetree_governs(
    old: dict[str, Any], new: dict[str, Any], expected: dict[str, Any], user: str, sub_resource: str
) -> None:
    body = review(
        "UPDATE", new, old=old, resource=PODS, namespace="default", sub_resource=sub_resource
    )
    body["request"]["userInfo"] = {"username": user, "groups": ["system:authenticated"]}
    assert outcome(answer("/pods/validate", body, cluster(*TREE))) == expected


GANG_START_CASES = {
    "a gang not placed yet": ({"minMember": 3}, {"phase": "Inqueue"}, views.GangStart(3, False)),
    "a running gang": ({"minMember": 3}, {"phase": "Running"}, views.GangStart(3, True)),
    "a completed gang": ({"minMember": 3}, {"phase": "Completed"}, views.GangStart(3, True)),
    "a gang running fewer than its minimum": (
        {"minMember": 3},
        {"phase": "Unknown"},
        views.GangStart(3, False),
    ),
    "no status yet": ({"minMember": 2}, {}, views.GangStart(2, False)),
    "a minMember that is not a number reads as 1": (
        {"minMember": "2"},
        {},
        views.GangStart(1, False),
    ),
}


@pytest.mark.parametrize(
    ("spec", "status", "expected"), GANG_START_CASES.values(), ids=GANG_START_CASES.keys()
)
def test_the_view_records_whether_a_pod_groups_gang_started(
    spec: dict[str, Any], status: dict[str, Any], expected: views.GangStart
) -> None:
    manifest = {
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "ml"},
        "spec": spec,
        "status": status,
    }
    assert views.gang_start(manifest) == ("ml/pg", expected)
