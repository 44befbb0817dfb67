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
    minimum: dict[str, str] | None = None,
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
