"""Pod watch events into the state: a change of only what the cluster writes after creation
(status, node name, gates) re-reads just that, and equals a whole parse."""

from __future__ import annotations

import copy
from typing import Any, NamedTuple

import hypothesis
import pytest

from queuetree.api import bodies, pod_fast_path, pod_manifests, watching
from queuetree.core import decisions, objects
from queuetree.operator import explaining, informing, state
from tests import properties
from tests.api import test_manifests_pods_fast as shapes

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


def with_progress_of(base: dict[str, Any], other: Any) -> dict[str, Any]:
    """``base`` with the status and the progress fields of ``spec`` of ``other`` (removed
    where ``other`` has none)."""
    changed = dict(base)
    changed["spec"] = dict(base["spec"])
    other_spec = other.get("spec") if isinstance(other, dict) else None
    spec = changed["spec"]
    for name in pod_fast_path.PROGRESS_SPEC_FIELDS:
        spec.pop(name, None)
        if isinstance(other_spec, dict) and name in other_spec:
            spec[name] = other_spec[name]
    changed.pop("status", None)
    if isinstance(other, dict) and "status" in other:
        changed["status"] = other["status"]
    return changed


def as_decoded(value: Any) -> Any:
    """``value`` as a watch event's decoder could give it: tuples become lists (JSON has
    arrays only, and the fingerprints that tell what changed read a tuple as the list it
    stands for); every other odd value stays."""
    if isinstance(value, tuple):
        return [as_decoded(item) for item in value]
    if type(value) is list:
        return [as_decoded(item) for item in value]
    if type(value) is dict:
        return {key: as_decoded(item) for key, item in value.items()}
    return value


def check_progress(first: dict[str, Any], later: Any) -> None:
    """After ``first`` and then ``first`` with ``later``'s progress, the state holds exactly
    what a whole parse of the second gives (or nothing, when it does not parse), whether the
    pod is governed by queue admission or not. Both are what a decoder gives
    (:func:`as_decoded`)."""
    first, later = as_decoded(first), as_decoded(later)
    second = with_progress_of(first, later)
    cluster, events = make()
    events.apply({"type": "ADDED", "object": first}, "0")
    events.apply({"type": "MODIFIED", "object": second}, "1")
    expected = informing.parse(second)
    assert cluster.get_pod(bodies.key_of(first)) == expected


def as_created(pod: dict[str, Any]) -> dict[str, Any]:
    """``pod`` as first written: no status, and nothing in the spec's fields that the cluster
    writes later (here the gates)."""
    changed = copy.deepcopy(pod)
    del changed["status"]
    for name in pod_fast_path.PROGRESS_SPEC_FIELDS:
        changed["spec"].pop(name, None)
    return changed


def nameless(pod: dict[str, Any]) -> dict[str, Any]:
    """``pod`` without ``metadata.name``: what a mutated manifest may be."""
    changed = copy.deepcopy(pod)
    del changed["metadata"]["name"]
    return changed


# Watch events always name the pod's namespace (the assumptions below).


@hypothesis.settings(max_examples=properties.examples(120))
@hypothesis.given(first=shapes.pod_shapes(odd=False), later=shapes.pod_shapes(odd=True))
@hypothesis.example(first=as_created(body("a")), later={"status": False})
def test_a_progress_change_of_a_well_formed_pod_equals_a_whole_parse(
    first: dict[str, Any], later: Any
) -> None:
    hypothesis.assume(first["metadata"].get("namespace"))
    check_progress(first, later)


@hypothesis.settings(max_examples=properties.examples(120))
@hypothesis.given(first=shapes.mutated_pod_manifests(), later=shapes.pod_shapes(odd=False))
@hypothesis.example(first=nameless(body("a")), later={"status": {"phase": "Running"}})
def test_a_progress_change_of_a_pod_with_an_odd_value_equals_a_whole_parse(
    first: dict[str, Any], later: Any
) -> None:
    hypothesis.assume(isinstance(first.get("metadata"), dict))
    hypothesis.assume(isinstance(first.get("spec"), dict))
    hypothesis.assume(first["metadata"].get("namespace"))
    check_progress(first, later)


@pytest.mark.parametrize(
    "progress",
    [
        {"spec": {"nodeName": "n1"}, "status": {"phase": "Pending"}},
        {
            "spec": {"nodeName": "n1"},
            "status": {
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": "True"}],
                "podIP": "10.0.0.7",
            },
        },
        {
            "spec": {},
            "status": {
                "phase": "Pending",
                "conditions": [
                    {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
                ],
            },
        },
        {"spec": {"nodeName": 7}, "status": {"phase": "Running"}},
        {"spec": {}, "status": {"phase": ["Running"]}},
        {"spec": {"schedulingGates": [{"name": "other"}]}, "status": "broken"},
    ],
    ids=[
        "bound",
        "running",
        "unschedulable",
        "a node name that is not a string is parsed whole and refused",
        "a phase that is not a string is parsed whole and refused",
        "a status that is not an object is parsed whole",
    ],
)
def test_progress_written_by_the_cluster_equals_a_whole_parse(progress: dict[str, Any]) -> None:
    check_progress(body("a"), progress)


def test_the_claim_generated_for_a_pod_is_read_from_its_status() -> None:
    # Only the resourceclaim controller's status write names the claim a pod with a template is
    # charged from (core.devices): a progress-only re-read must not miss it.
    cluster, events = make()
    created = body("a")
    created["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one"}]
    events.apply({"type": "ADDED", "object": created}, "0")
    written = copy.deepcopy(created)
    written["metadata"]["resourceVersion"] = "2"
    written["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": "a-gpu-x"}]
    events.apply({"type": "MODIFIED", "object": written}, "1")
    pod = cluster.get_pod("ns/a")
    assert pod is not None
    assert (pod == pod_manifests.parse_pod(written), pod.claims[0].generated) == (True, "a-gpu-x")


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
        ({"type": "ERROR", "object": {"code": 410}}, watching.Expired),
        ({"type": "ERROR", "object": {"code": 500, "message": "boom"}}, ValueError),
    ],
    ids=["410 means list again", "other errors restart the watch"],
)
def test_error_events_end_the_watch(event: dict[str, Any], error: type[Exception]) -> None:
    _, events = make()
    with pytest.raises(error):
        events.apply(event, "7")


def running(name: str, *, version: str, **status: Any) -> dict[str, Any]:
    placed = copy.deepcopy(body(name, gates=(), version=version))
    placed["spec"]["nodeName"] = "n1"
    placed["status"] = {"phase": "Running", **status}
    return placed


def scheduling_gated(name: str, *, version: str) -> dict[str, Any]:
    gated = body(name, version=version)
    gated["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}
    ]
    return gated


@pytest.mark.parametrize(
    ("first", "later", "changes"),
    [
        (body("a"), body("a", version="2"), False),
        (body("a"), scheduling_gated("a", version="2"), False),
        (
            running("a", version="1"),
            running("a", version="2", podIP="10.0.0.7", conditions=[{"type": "Ready"}]),
            False,
        ),
        (running("a", version="1"), running("a", version="2", phase="Succeeded"), True),
        (body("a"), body("a", gates=(), version="2"), True),
        (
            body("a"),
            with_progress_of(
                body("a"),
                {
                    "spec": {"schedulingGates": [{"name": GATE}]},
                    "status": {
                        "phase": "Pending",
                        "conditions": [
                            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
                        ],
                    },
                },
            ),
            True,
        ),
    ],
    ids=[
        "only the resourceVersion changed",
        "kube-scheduler's SchedulingGated condition",
        "a running pod's IP and conditions",
        "a running pod that finished",
        "the gate removed",
        "marked unschedulable",
    ],
)
def test_a_write_that_changes_nothing_a_parse_keeps_leaves_the_state_as_it_was(
    first: dict[str, Any], later: dict[str, Any], changes: bool
) -> None:
    """The re-read gives the very object it had (nothing is copied), the state keeps it and
    its version does not move: no snapshot, no index and no cycle sees anything new."""
    cluster, events = make()
    events.apply({"type": "ADDED", "object": first}, "0")
    stored = cluster.get_pod("ns/a")
    assert stored is not None
    assert (pod_manifests.reparse_progress(stored, later) is not stored) is changes
    version = cluster.view().version
    events.apply({"type": "MODIFIED", "object": later}, "1")
    assert cluster.get_pod("ns/a") == informing.parse(later)
    assert (cluster.get_pod("ns/a") is not stored) is changes
    assert (cluster.view().version != version) is changes


def unreadable(name: str, *, gates: tuple[str, ...] = (GATE,)) -> dict[str, Any]:
    found = body(name, gates=gates)
    found["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    return found


class UnreadableCase(NamedTuple):
    steps: list[tuple[str, dict[str, Any]]]
    """Watch events (``LIST`` replaces with one listing of that pod)."""
    told: list[str]
    """The pods ``StateView.unreadable`` holds afterwards."""


UNREADABLE = {
    "a gated pod that cannot be read is noted": UnreadableCase(
        [("ADDED", unreadable("a"))], ["ns/a"]
    ),
    "an ungated one is not (nothing waits for queuetree)": UnreadableCase(
        [("ADDED", unreadable("a", gates=()))], []
    ),
    "a readable version forgets it": UnreadableCase(
        [("ADDED", unreadable("a")), ("MODIFIED", body("a"))], []
    ),
    "its deletion forgets it": UnreadableCase(
        [("ADDED", unreadable("a")), ("DELETED", unreadable("a"))], []
    ),
    "a listing notes it too": UnreadableCase([("LIST", unreadable("a"))], ["ns/a"]),
    "a listing without it forgets it": UnreadableCase(
        [("ADDED", unreadable("a")), ("LIST", body("b"))], []
    ),
}


@pytest.mark.parametrize(UnreadableCase._fields, list(UNREADABLE.values()), ids=list(UNREADABLE))
def test_a_gated_pod_that_cannot_be_read_is_told_why_it_waits(
    steps: list[tuple[str, dict[str, Any]]], told: list[str]
) -> None:
    cluster, events = make()
    for kind, found in steps:
        if kind == "LIST":
            events.replace([found])
        else:
            events.apply({"type": kind, "object": found}, "0")
    view = cluster.view()
    assert sorted(view.unreadable) == told
    if told:
        assert "ns/a" not in view.snapshot.pods
        (planned,) = explaining.plan_explanations(
            view, decisions.SessionResult(ready=True), {}, budget=10
        )
        assert (planned.key, planned.uid, "queuetree cannot read this pod" in planned.reason) == (
            "ns/a",
            "uid-a",
            True,
        )
        assert "lots" in planned.reason
