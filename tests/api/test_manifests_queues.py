"""Queue manifests into ``objects.Queue``: defaults, quantities, and problems naming the field."""

from __future__ import annotations

import datetime
from typing import Any, NamedTuple

import pytest

from queuetree.api import queue_manifests, readers
from queuetree.core import objects, resources


def queue_manifest(name: str, *, spec: dict[str, Any] | None = None, **rest: Any) -> dict[str, Any]:
    manifest: dict[str, Any] = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
    }
    if spec is not None:
        manifest["spec"] = spec
    manifest.update(rest)
    return manifest


GPU = "nvidia.com/gpu"


class ParsedCase(NamedTuple):
    manifest: Any
    expected: Any


PARSED = {
    "a bare queue takes the CRD defaults and its name as uid": ParsedCase(
        manifest=queue_manifest("q1"),
        expected=objects.Queue(name="q1", uid="q1"),
    ),
    "every field is read in the spec's units": ParsedCase(
        manifest=queue_manifest(
            "team-a",
            spec={
                "parent": "org",
                "weight": 3,
                "priority": 2,
                "reclaimable": False,
                "capability": {"cpu": "8", "memory": "32Gi", GPU: 4},
                "deserved": {"cpu": 4, "memory": "16Gi", GPU: "2"},
                "guarantee": {"resource": {"cpu": "1500m"}},
            },
            status={"state": "Closing", "allocated": {"cpu": "2", "pods": "3"}},
        )
        | {
            "metadata": {
                "name": "team-a",
                "uid": "6f0c",
                "creationTimestamp": "2026-01-02T03:04:05Z",
                "annotations": {"volcano.sh/closed-by-parent": "true"},
            }
        },
        expected=objects.Queue(
            name="team-a",
            parent="org",
            weight=3,
            priority=2,
            reclaimable=False,
            capability=resources.Resource(8000, 32 * 2**30, {GPU: 4000}),
            deserved=resources.Resource(4000, 16 * 2**30, {GPU: 2000}),
            guarantee=resources.Resource(1500, 0),
            state=objects.QueueState.CLOSING,
            allocated=resources.Resource(2000, 0, {"pods": 3}),
            annotations={"volcano.sh/closed-by-parent": "true"},
            created=datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC),
            uid="6f0c",
        ),
    ),
    "an empty capability map is no capability": ParsedCase(
        manifest=queue_manifest("q1", spec={"capability": {}}),
        expected=objects.Queue(name="q1", uid="q1", capability=None),
    ),
    "a capability of dropped names only is a set, empty capability (as in Volcano)": ParsedCase(
        manifest=queue_manifest("q1", spec={"capability": {"rdma": 1000}}),
        expected=objects.Queue(name="q1", uid="q1", capability=resources.EMPTY),
    ),
    "an empty state reads as Open": ParsedCase(
        manifest=queue_manifest("q1", status={"state": ""}),
        expected=objects.Queue(name="q1", uid="q1", state=objects.QueueState.OPEN),
    ),
    "a parent is kept as written, root included": ParsedCase(
        manifest=queue_manifest("q1", spec={"parent": "root"}),
        expected=objects.Queue(name="q1", uid="q1", parent="root"),
    ),
}


@pytest.mark.parametrize(("manifest", "expected"), PARSED.values(), ids=PARSED.keys())
def test_a_queue_manifest_becomes_a_queue(
    manifest: dict[str, Any], expected: objects.Queue
) -> None:
    assert queue_manifests.parse_queue(manifest) == expected


class ProblemsCase(NamedTuple):
    manifest: Any
    expected: Any


PROBLEMS = {
    "every malformed quantity is named by its own path": ProblemsCase(
        manifest=queue_manifest(
            "q1", spec={"capability": {"cpu": "2x", GPU: "1 Gi"}, "deserved": {"memory": "1Qi"}}
        ),
        expected=[
            'q.yaml#0: Queue q1: spec.capability["cpu"]: invalid quantity: unknown suffix',
            'q.yaml#0: Queue q1: spec.capability["nvidia.com/gpu"]: invalid quantity:',
            'q.yaml#0: Queue q1: spec.deserved["memory"]: invalid quantity: unknown suffix',
        ],
    ),
    "wrong types are named with the value": ProblemsCase(
        manifest=queue_manifest("q1", spec={"weight": "3", "reclaimable": "yes", "guarantee": [1]}),
        expected=[
            'q.yaml#0: Queue q1: spec.weight: must be an integer (got "3")',
            "q.yaml#0: Queue q1: spec.guarantee: must be an object (got [1])",
            'q.yaml#0: Queue q1: spec.reclaimable: must be true or false (got "yes")',
        ],
    ),
    "negative quantities are refused, as the API server does": ProblemsCase(
        manifest=queue_manifest("q1", spec={"deserved": {"cpu": "-1", GPU: "-2"}}),
        expected=[
            'q.yaml#0: Queue q1: spec.deserved["cpu"]: must not be negative (got "-1")',
            'q.yaml#0: Queue q1: spec.deserved["nvidia.com/gpu"]: must not be negative (got "-2")',
        ],
    ),
    "an unknown state is refused": ProblemsCase(
        manifest=queue_manifest("q1", status={"state": "Draining"}),
        expected=[
            "q.yaml#0: Queue q1: status.state: must be one of Open, Closed, Closing, Unknown"
            ' (got "Draining")'
        ],
    ),
    "a queue needs a name": ProblemsCase(
        manifest={"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {}},
        expected=["q.yaml#0: Queue: metadata.name: is required"],
    ),
    "another kind or version is refused": ProblemsCase(
        manifest=queue_manifest("q1")
        | {"apiVersion": "scheduling.volcano.sh/v1alpha1", "kind": "Job"},
        expected=[
            'q.yaml#0: Queue q1: kind: expected Queue (got "Job")',
            "q.yaml#0: Queue q1: apiVersion: Queue must have apiVersion "
            'scheduling.volcano.sh/v1beta1 (got "scheduling.volcano.sh/v1alpha1")',
        ],
    ),
}


@pytest.mark.parametrize(("manifest", "expected"), PROBLEMS.values(), ids=PROBLEMS.keys())
def test_a_bad_queue_manifest_is_refused_with_every_problem(
    manifest: dict[str, Any], expected: list[str]
) -> None:
    with pytest.raises(readers.ManifestError) as caught:
        queue_manifests.parse_queue(manifest, origin="q.yaml#0")
    messages = [str(problem) for problem in caught.value.problems]
    assert len(messages) == len(expected), messages
    for message, start in zip(messages, expected, strict=True):
        assert message.startswith(start), (message, start)
