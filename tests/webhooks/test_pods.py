"""``/pods/mutate`` (the gate, exactly as spec §5.2, plus the namespace opt-in) and
``/pods/validate`` (the queue a pod names must exist, be a leaf and be Open)."""

from __future__ import annotations

from typing import Any

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
GATE_OFF = settings.ReviewSettings(feature_gates={features.SCHEDULING_GATES_QUEUE_ADMISSION: False})


@pytest.mark.parametrize(
    ("obj", "namespaces", "rules", "expected"),
    [
        pytest.param(pod(), {}, None, allowed(), id="not-opted-in"),
        pytest.param(
            pod(annotations={GATE: "True"}), {}, None, allowed(), id="opt-in-value-must-be-true"
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
                    f"metadata.annotations[{GATE}]: the feature gate "
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
            allowed(),
            id="pod-annotation-opts-out-of-namespace",
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
            allowed(
                warnings=[
                    "spec.nodeName: the pod is bound to node n1 at creation, so it cannot be "
                    "held by the queue-allocation gate and bypasses queue admission"
                ]
            ),
            id="pod-bound-at-creation-is-not-gated",
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
                f'metadata.annotations[{QUEUE_NAME}]: Not found: "ghost": pod default/p1 names '
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
                f'metadata.annotations[{QUEUE_NAME}]: Invalid value: "team": pod default/p1 '
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
                f'metadata.annotations[{QUEUE_NAME}]: Invalid value: "closed": pod default/p1 '
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
                f'metadata.annotations[{QUEUE_NAME}]: Invalid value: "root": pod default/p1 '
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
                f'metadata.annotations[{GROUP_NAME}]: Invalid value: "closed": pod default/p1 '
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
                f'metadata.annotations[{QUEUE_NAME}]: Invalid value: "team": pod ml/p1 names '
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
                f'metadata.annotations[{QUEUE_NAME}]: Not found: "ghost": pod ml/p1 names queue '
                f"ghost (from annotation {QUEUE_NAME} of namespace ml): the queue does not "
                "exist; create it or name an existing leaf queue"
            ),
            id="namespace-opt-in-is-validated-too",
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
        pytest.param(
            {"name": "ml", "annotations": {GATE: "true"}}, {GATE: "true"}, id="annotation"
        ),
        pytest.param({"name": "ml", "labels": {GATE: "true"}}, {GATE: "true"}, id="label"),
        pytest.param(
            {"name": "ml", "annotations": {GATE: "false"}, "labels": {GATE: "true"}},
            {GATE: "false"},
            id="the-annotation-wins",
        ),
        pytest.param({"name": "ml", "labels": {"team": "a"}}, {}, id="neither"),
    ],
)
def test_a_namespace_opts_in_by_annotation_or_label(
    metadata: dict[str, Any], expected: dict[str, str]
) -> None:
    found = views.namespace_annotations(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}
    )
    assert found is not None
    assert dict(found[1]) == expected
