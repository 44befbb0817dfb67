"""``/podgroups/mutate`` (a group that names ``default`` gets its namespace's queue, as
Volcano's PodGroup mutation) and ``/podgroups/validate`` (the queue must take the group, and an
admitted group keeps its queue)."""

from __future__ import annotations

from typing import Any, NamedTuple

import pytest

from tests.webhooks.builders import allowed, answer, cluster, denied, outcome, review
from tests.webhooks.test_pods import QUEUE_NAME, TREE

POD_GROUPS = {"group": "scheduling.volcano.sh", "version": "v1beta1", "resource": "podgroups"}


def pod_group(
    name: str = "pg",
    *,
    queue: str | None = "a",
    phase: str | None = None,
    spec: bool = True,
    minimum: dict[str, Any] | None = None,
    **counts: int,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "ml"},
    }
    if spec:
        body["spec"] = {"minMember": 1}
        if queue is not None:
            body["spec"]["queue"] = queue
        if minimum is not None:
            body["spec"]["minResources"] = minimum
    if phase is not None or counts:
        body["status"] = {**({"phase": phase} if phase else {}), **counts}
    return body


ML_QUEUE = {"ml": {QUEUE_NAME: "a"}}
SET_QUEUE = {"op": "add", "path": "/spec/queue", "value": "a"}


class MutationsCase(NamedTuple):
    group: Any
    namespaces: Any
    patch: Any


MUTATIONS = {
    "the CRD's default becomes the namespace's queue": MutationsCase(
        group=pod_group(queue="default"),
        namespaces=ML_QUEUE,
        patch=[SET_QUEUE],
    ),
    "no queue at all becomes the namespace's queue": MutationsCase(
        group=pod_group(queue=None), namespaces=ML_QUEUE, patch=[SET_QUEUE]
    ),
    "no spec at all gets one with the namespace's queue": MutationsCase(
        group=pod_group(spec=False),
        namespaces=ML_QUEUE,
        patch=[{"op": "add", "path": "/spec", "value": {"queue": "a"}}],
    ),
    "a queue the group names is kept": MutationsCase(
        group=pod_group(queue="b"), namespaces=ML_QUEUE, patch=[]
    ),
    "a namespace without a queue changes nothing": MutationsCase(
        group=pod_group(queue="default"), namespaces={"ml": {}}, patch=[]
    ),
}


@pytest.mark.parametrize(("group", "namespaces", "patch"), MUTATIONS.values(), ids=MUTATIONS.keys())
def test_a_pod_group_that_names_default_gets_its_namespaces_queue(
    group: dict[str, Any], namespaces: dict[str, dict[str, str]], patch: list[Any]
) -> None:
    body = review("CREATE", group, resource=POD_GROUPS, namespace="ml")
    view = cluster(*TREE, namespaces=namespaces)
    assert outcome(answer("/podgroups/mutate", body, view)) == allowed(patch=patch)


def names(queue_name: str, reasons: str, *, missing: bool = False) -> str:
    kind = "Not found" if missing else "Invalid value"
    return (
        f'spec.queue: {kind}: "{queue_name}": pod group ml/pg names queue {queue_name}: {reasons}'
    )


def unreadable(path: str, value: str, reason: str) -> str:
    return (
        f'{path}: Invalid value: "{value}": {reason}: the queuetree operator cannot read pod '
        "group ml/pg with this value, so it would ignore the group and its pods would never be "
        "admitted; correct the value"
    )


NEGATIVE_CPU = unreadable('spec.minResources["cpu"]', "-10", "must not be negative")
BAD_MEMORY = unreadable(
    'spec.minResources["memory"]',
    "1GB",
    "invalid quantity: unknown suffix 'GB' (expected one of n u m k M G T P E, Ki Mi Gi Ti Pi "
    "Ei, or an exponent such as e3)",
)

VALIDATIONS = {
    "created in an open leaf": ("CREATE", pod_group(), None, allowed()),
    "created without a queue: the default queue": (
        "CREATE",
        pod_group(queue=None),
        None,
        allowed(),
    ),
    "created in a missing queue": (
        "CREATE",
        pod_group(queue="ghost"),
        None,
        denied(
            names(
                "ghost",
                "the queue does not exist; create it or name an existing leaf queue",
                missing=True,
            )
        ),
    ),
    "created in a queue with children": (
        "CREATE",
        pod_group(queue="team"),
        None,
        denied(
            names(
                "team",
                "pod groups can only be submitted to leaf queues, and queue team has 2 child "
                "queues: a, b",
            )
        ),
    ),
    "created in a closed queue": (
        "CREATE",
        pod_group(queue="closed"),
        None,
        denied(
            names(
                "closed",
                "pod groups can only be submitted to Open queues, and queue closed is Closed",
            )
        ),
    ),
    "created in root": (
        "CREATE",
        pod_group(queue="root"),
        None,
        denied(
            names("root", "pod groups cannot be submitted to the root queue; name a leaf queue")
        ),
    ),
    "created with a negative minResources": (
        "CREATE",
        pod_group(minimum={"cpu": "-10"}),
        None,
        denied(NEGATIVE_CPU),
    ),
    "created with a negative integer minResources": (
        "CREATE",
        pod_group(minimum={"nvidia.com/gpu": -1}),
        None,
        denied(unreadable('spec.minResources["nvidia.com/gpu"]', "-1", "must not be negative")),
    ),
    "created with every problem at once": (
        "CREATE",
        pod_group(queue="ghost", minimum={"cpu": "-10", "memory": "1GB"}),
        None,
        denied(
            f"[{NEGATIVE_CPU}, {BAD_MEMORY}, "
            + names(
                "ghost",
                "the queue does not exist; create it or name an existing leaf queue",
                missing=True,
            )
            + "]"
        ),
    ),
    "created with zero minResources": (
        "CREATE",
        pod_group(minimum={"cpu": "0", "memory": "0"}),
        None,
        allowed(),
    ),
    "an admitted group patched to a negative minResources": (
        "UPDATE",
        pod_group(phase="Running", minimum={"cpu": "-10"}),
        pod_group(phase="Running", minimum={"cpu": "1"}),
        denied(NEGATIVE_CPU),
    ),
    "a pending group patched to an unparsable minResources": (
        "UPDATE",
        pod_group(minimum={"memory": "1GB"}),
        pod_group(phase="Pending"),
        denied(BAD_MEMORY),
    ),
    "a group written with a negative minResources before the rule may still be edited": (
        "UPDATE",
        {
            **pod_group(minimum={"cpu": "-10"}),
            "metadata": {"name": "pg", "namespace": "ml", "labels": {"x": "y"}},
        },
        pod_group(minimum={"cpu": "-10"}),
        allowed(),
    ),
    "and its problem fixed": (
        "UPDATE",
        pod_group(minimum={"cpu": "10"}),
        pod_group(minimum={"cpu": "-10"}),
        allowed(),
    ),
    "a pending group moves to another open leaf": (
        "UPDATE",
        pod_group(queue="b"),
        pod_group(queue="a", phase="Pending"),
        allowed(),
    ),
    "a pending group moves to a queue with children": (
        "UPDATE",
        pod_group(queue="team"),
        pod_group(queue="a", phase="Pending"),
        denied(
            names(
                "team",
                "pod groups can only be submitted to leaf queues, and queue team has 2 child "
                "queues: a, b",
            )
        ),
    ),
    "an update that keeps the queue is not checked (the queue closed since)": (
        "UPDATE",
        {
            **pod_group(queue="closed"),
            "metadata": {"name": "pg", "namespace": "ml", "labels": {"x": "y"}},
        },
        pod_group(queue="closed", phase="Running"),
        allowed(),
    ),
    "an Inqueue group without minResources holds nothing yet and may move": (
        "UPDATE",
        pod_group(queue="b"),
        pod_group(queue="a", phase="Inqueue"),
        allowed(),
    ),
    **{
        f"a {phase} group cannot move": (
            "UPDATE",
            pod_group(queue="b"),
            pod_group(queue="a", phase=phase, minimum={"cpu": "1"}, **counts),
            denied(
                f'spec.queue: Forbidden: "b": pod group ml/pg was admitted to queue a (phase '
                f"{phase}) and its pods are charged there until they finish, so it cannot move "
                "to queue b; delete the group and its pods and create them again to run in "
                "another queue"
            ),
        )
        for phase, counts in (
            ("Inqueue", {}),
            ("Running", {}),
            ("Unknown", {}),
            ("Completed", {}),
            ("Pending", {"succeeded": 1}),
        )
    },
}


@pytest.mark.parametrize(
    ("operation", "group", "old", "expected"), VALIDATIONS.values(), ids=VALIDATIONS.keys()
)
def test_a_pod_group_must_name_a_queue_that_takes_it_and_keeps_it_once_admitted(
    operation: str, group: dict[str, Any], old: dict[str, Any] | None, expected: dict[str, Any]
) -> None:
    body = review(operation, group, old=old, resource=POD_GROUPS, namespace="ml")
    assert outcome(answer("/podgroups/validate", body, cluster(*TREE))) == expected
