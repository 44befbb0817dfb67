"""Pod watch events into the state: a gate-only change skips the parse and equals it."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from queuetree.api import pod_manifests
from queuetree.core import objects
from queuetree.operator import informing, state

GATE = objects.QUEUE_ALLOCATION_GATE


def body(name: str, *, gates: tuple[str, ...] = (GATE,), version: str = "1") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "resourceVersion": version,
            "annotations": {GATE: "true", objects.QUEUE_NAME_ANNOTATION: "team"},
        },
        "spec": {
            "schedulingGates": [{"name": gate} for gate in gates],
            "containers": [{"name": "main", "resources": {"requests": {"cpu": "500m"}}}],
        },
        "status": {"phase": "Pending"},
    }


def make() -> tuple[state.ClusterState, informing.PodEvents]:
    cluster = state.ClusterState(sources=frozenset({"pods"}))
    return cluster, informing.PodEvents(cluster)


def test_a_gate_only_change_gives_exactly_what_a_parse_gives() -> None:
    cluster, events = make()
    assert events.apply({"type": "ADDED", "object": body("a")}, "0") == "1"
    ungated = body("a", gates=(), version="2")
    assert events.apply({"type": "MODIFIED", "object": ungated}, "1") == "2"
    assert cluster.get_pod("ns/a") == pod_manifests.parse_pod(ungated)


def test_other_changes_are_parsed_again() -> None:
    cluster, events = make()
    events.apply({"type": "ADDED", "object": body("a")}, "0")
    bound = copy.deepcopy(body("a", gates=(), version="2"))
    bound["spec"]["nodeName"] = "n1"
    bound["status"]["phase"] = "Running"
    events.apply({"type": "MODIFIED", "object": bound}, "1")
    assert cluster.get_pod("ns/a") == pod_manifests.parse_pod(bound)
    assert pod_manifests.parse_pod(bound).node_name == "n1"


def test_deletions_and_listings_remove_pods() -> None:
    cluster, events = make()
    events.apply({"type": "ADDED", "object": body("a")}, "0")
    events.apply({"type": "ADDED", "object": body("b")}, "1")
    events.apply({"type": "DELETED", "object": body("a")}, "2")
    assert sorted(cluster.view().snapshot.pods) == ["ns/b"]
    events.replace([body("c")])
    view = cluster.view()
    assert (sorted(view.snapshot.pods), view.synced) == (["ns/c"], True)


@pytest.mark.parametrize(
    ("event", "error"),
    [
        ({"type": "ERROR", "object": {"code": 410}}, informing.Expired),
        ({"type": "ERROR", "object": {"code": 500, "message": "boom"}}, ValueError),
    ],
    ids=["410 means list again", "other errors restart the watch"],
)
def test_error_events_end_the_watch(event: dict[str, Any], error: type[Exception]) -> None:
    _, events = make()
    with pytest.raises(error):
        events.apply(event, "7")
