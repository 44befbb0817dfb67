"""``queuetree.operator.writing``: the gate removal patch that cannot hurt anyone. (The
writes of the cycle are tested through it: test_cycle.py; the workers: test_gating.py.)"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import pytest

from queuetree.core import objects, resources
from queuetree.operator import explaining, writing
from tests.operator import fakes

GATE = objects.QUEUE_ALLOCATION_GATE

RECORD = {
    "op": "add",
    "path": "/metadata/annotations/scheduling.queuetree.io~1admitted-queue",
    "value": "team",
}


class PatchesCase(NamedTuple):
    gates: Any
    expected: Any


PATCHES = {
    "our gate alone is removed with tests of uid and gates, and the queue recorded": PatchesCase(
        gates=(GATE,),
        expected=[
            {"op": "test", "path": "/metadata/uid", "value": "uid-p"},
            {"op": "test", "path": "/spec/schedulingGates", "value": [{"name": GATE}]},
            {"op": "remove", "path": "/spec/schedulingGates"},
            RECORD,
        ],
    ),
    "another controller's gate blocks removal": PatchesCase(
        gates=(GATE, "example.com/other"), expected=None
    ),
    "a pod without our gate is left alone": PatchesCase(
        gates=("example.com/other",), expected=None
    ),
    "a pod without gates is left alone": PatchesCase(gates=(), expected=None),
}


@pytest.mark.parametrize(("gates", "expected"), list(PATCHES.values()), ids=list(PATCHES))
def test_build_gate_removal_patch_only_removes_a_lone_queue_gate(
    gates: tuple[str, ...], expected: list[dict[str, Any]] | None
) -> None:
    assert writing.build_gate_removal_patch(fakes.pod("p", gates=gates), queue="team") == expected


def test_an_explained_pod_loses_its_explanation_in_the_same_patch() -> None:
    pod = dataclasses.replace(
        fakes.pod("p"), annotations={explaining.REASON_ANNOTATION: "queue team: cpu 2 > 1"}
    )
    assert writing.build_gate_removal_patch(pod, queue="team") == [
        {"op": "test", "path": "/metadata/uid", "value": "uid-p"},
        {"op": "test", "path": "/spec/schedulingGates", "value": [{"name": GATE}]},
        {"op": "remove", "path": "/spec/schedulingGates"},
        RECORD,
        {"op": "remove", "path": "/metadata/annotations/scheduling.queuetree.io~1admission-reason"},
    ]


def test_a_pod_without_annotations_gets_the_record_as_its_first_annotation() -> None:
    pod = dataclasses.replace(fakes.pod("p"), annotations={})
    assert writing.build_gate_removal_patch(pod, queue="team") == [
        {"op": "test", "path": "/metadata/uid", "value": "uid-p"},
        {"op": "test", "path": "/spec/schedulingGates", "value": [{"name": GATE}]},
        {"op": "remove", "path": "/spec/schedulingGates"},
        {
            "op": "add",
            "path": "/metadata/annotations",
            "value": {"scheduling.queuetree.io/admitted-queue": "team"},
        },
    ]


@pytest.mark.parametrize(
    ("own_devices", "recorded"),
    [
        pytest.param(
            resources.Resource.from_resource_list({"nvidia.com/gpu": "2"}),
            {"scheduling.queuetree.io~1admitted-devices": '{"nvidia.com/gpu":"2"}'},
            id="a-pod-charged-its-own-claims-records-that-charge",
        ),
        pytest.param(
            resources.EMPTY,
            {"scheduling.queuetree.io~1admitted-devices": "{}"},
            id="own-claims-that-charged-nothing-record-nothing-charged",
        ),
        pytest.param(None, {}, id="a-pod-without-own-claims-records-only-its-queue"),
    ],
)
def test_the_admission_record_keeps_what_a_pods_own_claims_were_charged(
    own_devices: resources.Resource | None, recorded: dict[str, str]
) -> None:
    pod = dataclasses.replace(fakes.pod("p"), own_devices=own_devices)
    patch = writing.build_gate_removal_patch(pod, queue="team") or []
    adds = {
        op["path"].removeprefix("/metadata/annotations/"): op["value"]
        for op in patch
        if op["op"] == "add"
    }
    assert adds == {"scheduling.queuetree.io~1admitted-queue": "team", **recorded}
