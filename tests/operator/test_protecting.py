"""The finalizer that keeps a queue while pods are charged to it: written before the first
admission, removed once the queue is idle, never crossed by the cycle's own writes."""

from __future__ import annotations

import dataclasses
from types import MappingProxyType
from typing import Any, NamedTuple

import pytest

from queuetree.core import decisions, objects, resources
from queuetree.operator import protecting, state
from tests.operator import fakes

FINALIZER = objects.QUEUE_IN_USE_FINALIZER
OTHER = "example.com/keep"


def record(
    name: str,
    *,
    parent: str = "root",
    finalizers: tuple[str, ...] = (),
    deleting: bool = False,
) -> state.QueueRecord:
    return state.QueueRecord(
        queue=objects.Queue(
            name=name, parent="" if name == "root" else parent, uid=name, deleting=deleting
        ),
        finalizers=finalizers,
        resource_version=f"rv-{name}",
    )


def view(*records: state.QueueRecord) -> state.StateView:
    cluster = state.ClusterState()
    for found in records:
        cluster.upsert_queue(found)
    cluster.mark_synced()
    return cluster.view()


def figures(pods: int = 0, reserved: int = 0) -> decisions.QueueFigures:
    empty = resources.EMPTY
    return decisions.QueueFigures(
        allocated=empty,
        deserved=empty,
        capability=empty,
        real_capability=empty,
        allocated_pods=pods,
        reserved_pods=reserved,
    )


def result(
    admitted: dict[str, str] | None = None, queues: dict[str, decisions.QueueFigures] | None = None
) -> decisions.SessionResult:
    admitted = admitted or {}
    return decisions.SessionResult(
        ready=True,
        ungate=tuple(admitted),
        admitted_to=MappingProxyType(admitted),
        queues=MappingProxyType(queues or {}),
    )


TREE = (record("root"), record("p"), record("a", parent="p"), record("b", parent="p"))
CARRIED = tuple(dataclasses.replace(r, finalizers=(FINALIZER,)) for r in TREE)


class GuardCase(NamedTuple):
    records: tuple[state.QueueRecord, ...]
    fail: dict[str, list[int]]
    written: list[tuple[str, list[dict[str, Any]]]]
    ungated: tuple[str, ...]


GUARDS = {
    "a first admission protects the leaf and every ancestor first": GuardCase(
        records=TREE,
        fail={},
        written=[
            (
                f"queues/{name}",
                [
                    {"op": "test", "path": "/metadata/resourceVersion", "value": f"rv-{name}"},
                    {"op": "add", "path": "/metadata/finalizers", "value": [FINALIZER]},
                ],
            )
            for name in ("a", "b", "p", "root")
        ],
        ungated=("ns/x", "ns/y"),
    ),
    "queues that carry it already are not written": GuardCase(
        records=CARRIED, fail={}, written=[], ungated=("ns/x", "ns/y")
    ),
    "another controller's finalizer is kept, and tested": GuardCase(
        records=(
            *CARRIED[:2],
            dataclasses.replace(TREE[2], finalizers=(OTHER,)),
            CARRIED[3],
        ),
        fail={},
        written=[
            (
                "queues/a",
                [
                    {"op": "test", "path": "/metadata/finalizers", "value": [OTHER]},
                    {"op": "add", "path": "/metadata/finalizers/-", "value": FINALIZER},
                ],
            )
        ],
        ungated=("ns/x", "ns/y"),
    ),
    "a queue that could not be protected keeps its pods for the next cycle": GuardCase(
        records=(*CARRIED[:2], TREE[2], CARRIED[3]),
        fail={"queues/a": [422]},
        written=[("queues/a", [])],
        ungated=("ns/y",),
    ),
    "a queue being deleted gets no finalizer, and nothing is admitted to it": GuardCase(
        records=(*CARRIED[:2], record("a", parent="p", deleting=True), CARRIED[3]),
        fail={},
        written=[],
        ungated=("ns/y",),
    ),
    "a parent being deleted admits nothing below it": GuardCase(
        records=(CARRIED[0], record("p", deleting=True), *CARRIED[2:]),
        fail={},
        written=[],
        ungated=(),
    ),
}


@pytest.mark.parametrize(GuardCase._fields, list(GUARDS.values()), ids=list(GUARDS))
async def test_admissions_wait_for_the_finalizer_on_their_queue_and_its_ancestors(
    records: tuple[state.QueueRecord, ...],
    fail: dict[str, list[int]],
    written: list[tuple[str, list[dict[str, Any]]]],
    ungated: tuple[str, ...],
) -> None:
    api = fakes.FakeKube()
    api.fail = {target: list(statuses) for target, statuses in fail.items()}
    protector = protecting.Protector(api=api)
    guarded = await protector.guard(view(*records), result({"ns/x": "a", "ns/y": "b"}))
    calls = [(c.target, c.body) for c in api.calls if c.verb == "patch-json"]
    # A refused write is recorded with its body; compare the targets only for those.
    calls = [(t, [] if t in fail else body) for t, body in calls]
    assert (calls, guarded.ungate) == (written, ungated)


class ReleaseCase(NamedTuple):
    records: tuple[state.QueueRecord, ...]
    queues: dict[str, decisions.QueueFigures]
    admitted: dict[str, str]
    released: list[str]


IDLE = {name: figures() for name in ("root", "p", "a", "b")}

RELEASES = {
    "idle queues that carry it lose it": ReleaseCase(
        records=CARRIED,
        queues=IDLE,
        admitted={},
        released=["queues/a", "queues/b", "queues/p", "queues/root"],
    ),
    "a queue with running pods, and its ancestors, keep it": ReleaseCase(
        records=CARRIED,
        queues={**IDLE, "a": figures(pods=1), "p": figures(pods=1), "root": figures(pods=1)},
        admitted={},
        released=["queues/b"],
    ),
    "pods admitted but not placed count too": ReleaseCase(
        records=CARRIED,
        queues={
            **IDLE,
            "b": figures(reserved=2),
            "p": figures(reserved=2),
            "root": figures(reserved=2),
        },
        admitted={},
        released=["queues/a"],
    ),
    "this cycle's admissions keep their chain": ReleaseCase(
        records=CARRIED, queues=IDLE, admitted={"ns/x": "a"}, released=["queues/b"]
    ),
    "a queue without figures is never idle": ReleaseCase(
        records=CARRIED, queues={}, admitted={}, released=[]
    ),
    "queues without it are not written": ReleaseCase(
        records=TREE, queues=IDLE, admitted={}, released=[]
    ),
}


@pytest.mark.parametrize(ReleaseCase._fields, list(RELEASES.values()), ids=list(RELEASES))
async def test_the_finalizer_goes_once_no_pod_is_charged_to_a_queue(
    records: tuple[state.QueueRecord, ...],
    queues: dict[str, decisions.QueueFigures],
    admitted: dict[str, str],
    released: list[str],
) -> None:
    api = fakes.FakeKube()
    protector = protecting.Protector(api=api)
    found = view(*records)
    await protector.release(found, result(admitted, queues))
    assert sorted(c.target for c in api.calls if c.verb == "patch-json") == released


async def test_a_release_is_never_trusted_away_by_a_stale_watch() -> None:
    """Released in one cycle, admitted to in the next before the watch showed the release:
    the finalizer is written again before the pod goes."""
    api = fakes.FakeKube()
    protector = protecting.Protector(api=api)
    stale = view(*CARRIED)
    await protector.release(stale, result({}, {"a": figures()}))
    guarded = await protector.guard(stale, result({"ns/x": "a"}))
    assert ([c.target for c in api.calls], guarded.ungate) == (
        ["queues/a", "queues/a"],
        ("ns/x",),
    )
    assert api.calls[1].body[-1] == {
        "op": "add",
        "path": "/metadata/finalizers/-",
        "value": FINALIZER,
    }


async def test_a_removal_that_got_no_answer_counts_as_done() -> None:
    api = fakes.FakeKube()
    api.fail = {"queues/a": [0]}
    protector = protecting.Protector(api=api)
    stale = view(*CARRIED)
    await protector.release(stale, result({}, {"a": figures()}))
    assert protector.carries(stale.queue_records["a"]) is False
