"""The admission cycle with a fake core and a fake API: assume, offer, patch, explain."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
from types import MappingProxyType
from typing import Any, NamedTuple

import pytest

from queuetree.api import queue_manifests
from queuetree.core import conditions, decisions, inqueue_bounds, objects, resources
from queuetree.operator import (
    cycle,
    explaining,
    gating,
    kube,
    metrics,
    queue_status,
    running,
    settings,
    state,
)
from tests import builders as b
from tests.operator import fakes


class FakeSession:
    """Returns the decisions it is told to, and records the snapshots it saw."""

    def __init__(self) -> None:
        self.ungate: tuple[str, ...] = ()
        self.reasons: dict[str, str] = {}
        self.faults: dict[str, tuple[conditions.Fault, ...]] = {}
        self.seen: list[objects.Snapshot] = []
        self.bounds: list[inqueue_bounds.InqueueBound | None] = []

    def __call__(
        self,
        snapshot: objects.Snapshot,
        bound: inqueue_bounds.InqueueBound | None = None,
        unfolded: objects.Snapshot | None = None,
    ) -> decisions.SessionResult:
        self.seen.append(snapshot)
        self.bounds.append(bound)
        return decisions.SessionResult(
            ready=True,
            ungate=self.ungate,
            reasons=MappingProxyType(dict(self.reasons)),
            queue_faults=MappingProxyType(dict(self.faults)),
        )


def make(
    *, workers: int = 1, api: fakes.FakeKube | None = None, **changes: Any
) -> tuple[
    state.ClusterState, fakes.FakeKube, gating.GateRemover, FakeSession, cycle.AdmissionCycle
]:
    """A cycle over a fresh state, ``api`` (a plain fake by default) and a fake session;
    ``changes`` are the operator settings that differ from the defaults."""
    cluster = state.ClusterState()
    api = api if api is not None else fakes.FakeKube()
    remover = gating.GateRemover(cluster=cluster, api=api, workers=workers)
    session = FakeSession()
    admission = cycle.AdmissionCycle(
        cluster=cluster,
        api=api,
        remover=remover,
        session=session,
        config=dataclasses.replace(settings.DEFAULTS, **changes),
        wall_clock=lambda: 0.0,
    )
    return cluster, api, remover, session, admission


async def test_nothing_is_decided_before_every_watch_has_listed() -> None:
    cluster, _, _, session, admission = make()
    cluster.upsert_pod(fakes.pod("a"))
    assert (await admission.run_once(), session.seen) == (cycle.CycleReport(ran=False), [])


async def test_an_admitted_pod_is_assumed_offered_patched_and_confirmed() -> None:
    cluster, api, remover, session, admission = make()
    cluster.upsert_pod(fakes.pod("a"))
    cluster.mark_synced()
    session.ungate = ("ns/a",)
    report = await admission.run_once()
    assert report.offered == ("ns/a",)
    assert cluster.view().snapshot.pods["ns/a"].scheduling_gates == ()
    remover.start()
    try:
        await fakes.wait_for(lambda: "pods/ns/a" in api.targets("patch"))
    finally:
        await remover.stop()
    cluster.upsert_pod(fakes.pod("a", gates=()))
    again = await admission.run_once()
    assert (dict(cluster.view().assumed), again.offered) == ({}, ())


async def test_a_full_gate_queue_defers_the_rest_to_the_next_cycle() -> None:
    cluster, _, remover, session, admission = make(workers=1)
    for index in range(gating.QUEUE_SLOTS_PER_WORKER - 1):
        assert remover.offer(f"ns/filler-{index}", queue="default", decided_at=0.0)
    for name in ("a", "b", "c"):
        cluster.upsert_pod(fakes.pod(name))
    cluster.mark_synced()
    session.ungate = ("ns/a", "ns/b", "ns/c")
    report = await admission.run_once()
    # One slot was left: the first admitted pod takes it, the others are not even assumed,
    # and the cycle asks to run again (after the workers have drained).
    assert (report.offered, report.deferred, sorted(cluster.view().assumed)) == (
        ("ns/a",),
        2,
        ["ns/a"],
    )
    assert admission.wake_pending


def annotations_written(api: fakes.FakeKube) -> list[object]:
    return [call.body for call in api.calls if call.verb == "annotate"]


def event_messages(api: fakes.FakeKube) -> list[str]:
    return [
        call.body["message"]
        for call in api.calls
        if call.target.startswith("events/") and call.body["involvedObject"]["kind"] == "Pod"
    ]


async def test_a_held_pod_is_explained_once_per_change_of_reason() -> None:
    cluster, api, _, session, admission = make()
    cluster.upsert_pod(fakes.pod("a"))
    cluster.mark_synced()
    key = explaining.REASON_ANNOTATION
    reasons = ("queue team: cpu 2 > 1", "queue team: cpu 2 > 1", "queue dept: cpu 3 > 2")
    for round_, reason in enumerate(reasons):
        # A change in the cluster (here a label) makes the next cycle decide afresh.
        cluster.upsert_pod(dataclasses.replace(fakes.pod("a"), labels={"round": str(round_)}))
        session.reasons = {"ns/a": reason}
        await admission.run_once()
        await admission.wait_writes()
    cluster.upsert_pod(fakes.pod("a", gates=()))
    session.reasons = {}
    await admission.run_once()
    await admission.wait_writes()
    assert annotations_written(api) == [
        {key: "queue team: cpu 2 > 1"},
        {key: "queue dept: cpu 3 > 2"},
        {key: None},
    ]
    assert event_messages(api) == ["queue team: cpu 2 > 1", "queue dept: cpu 3 > 2"]


YOUNG = {
    "1 s after its creation it is not told yet": (1.0, []),
    "3 s after its creation it is told": (
        3.0,
        [{explaining.REASON_ANNOTATION: "queue team: cpu 2 > 1"}],
    ),
}


@pytest.mark.parametrize(("age", "written"), YOUNG.values(), ids=YOUNG.keys())
async def test_a_held_pod_is_first_explained_once_it_has_waited_the_delay(
    age: float, written: list[object]
) -> None:
    created = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    cluster = state.ClusterState()
    api = fakes.FakeKube()
    session = FakeSession()
    admission = cycle.AdmissionCycle(
        cluster=cluster,
        api=api,
        remover=gating.GateRemover(cluster=cluster, api=api, workers=1),
        session=session,
        config=settings.DEFAULTS,
        wall_clock=lambda: created.timestamp() + age,
    )
    cluster.upsert_pod(dataclasses.replace(fakes.pod("a"), created=created))
    cluster.mark_synced()
    session.reasons = {"ns/a": "queue team: cpu 2 > 1"}
    await admission.run_once()
    await admission.wait_writes()
    assert (annotations_written(api), len(event_messages(api))) == (written, len(written))


async def test_an_explained_pod_is_admitted_with_one_write() -> None:
    cluster, api, remover, session, admission = make()
    key = explaining.REASON_ANNOTATION
    cluster.upsert_pod(fakes.pod("a"))
    cluster.mark_synced()
    session.reasons = {"ns/a": "queue team: cpu 2 > 1"}
    await admission.run_once()
    await admission.wait_writes()
    # The watch shows the annotation written; then room appears and the pod is admitted.
    explained = dataclasses.replace(
        fakes.pod("a"), annotations={**fakes.pod("a").annotations, key: "queue team: cpu 2 > 1"}
    )
    cluster.upsert_pod(explained)
    session.reasons, session.ungate = {}, ("ns/a",)
    await admission.run_once()
    await admission.wait_writes()
    remover.start()
    try:
        await fakes.wait_for(lambda: "pods/ns/a" in api.targets("patch"))
    finally:
        await remover.stop()
    admitted = dataclasses.replace(fakes.pod("a", gates=()), annotations=fakes.pod("a").annotations)
    cluster.upsert_pod(admitted)
    session.ungate = ()
    await admission.run_once()
    await admission.wait_writes()
    gate_patches = [call.body for call in api.calls if call.verb == "patch"]
    assert annotations_written(api) == [{key: "queue team: cpu 2 > 1"}]
    assert [operation["path"] for operation in gate_patches[0]][-1] == (
        "/metadata/annotations/scheduling.queuetree.io~1admission-reason"
    )
    assert dict(cluster.explanations()) == {}


async def test_a_cycle_with_nothing_new_reuses_the_last_decisions() -> None:
    cluster, _, _, session, admission = make()
    cluster.upsert_pod(fakes.pod("a"))
    cluster.mark_synced()
    await admission.run_once()
    await admission.run_once()
    cluster.upsert_pod(fakes.pod("b"))
    await admission.run_once()
    assert [sorted(snapshot.pods) for snapshot in session.seen] == [["ns/a"], ["ns/a", "ns/b"]]


async def test_an_explanation_event_names_the_pod_by_uid_for_kubectl_describe() -> None:
    # kubectl describe pod selects events by involvedObject name, namespace and uid.
    cluster, api, _, session, admission = make()
    cluster.upsert_pod(fakes.pod("a", uid="0f3c-a"))
    cluster.mark_synced()
    session.reasons = {"ns/a": "queue team: cpu 2 > 1"}
    await admission.run_once()
    await admission.wait_writes()
    involved = [
        call.body["involvedObject"] for call in api.calls if call.target.startswith("events/")
    ]
    assert involved == [
        {"kind": "Pod", "apiVersion": "v1", "name": "a", "namespace": "ns", "uid": "0f3c-a"}
    ]


async def test_a_queue_that_breaks_is_told_once_by_an_event_kubectl_describe_finds() -> None:
    # kubectl describe queue selects events by involvedObject kind, name, uid and an empty
    # namespace; a second cycle that plans the same condition while the watch still shows
    # the old status writes it again but raises no second event.
    cluster, api, _, session, admission = make()
    for name, parent, uid in (("root", "", "u-root"), ("team", "gone", "u-team")):
        queue = objects.Queue(name=name, parent=parent, uid=uid)
        cluster.upsert_queue(state.QueueRecord(queue=queue, status={"state": "Open"}))
    cluster.mark_synced()
    fault = conditions.Fault(conditions.QueueReason.PARENT_NOT_FOUND, "queue 'team': gone")
    session.faults = {"team": (fault,)}
    for _ in range(2):
        await admission.run_once()
        await admission.wait_writes()
        cluster.upsert_pod(fakes.pod(f"wake-{len(api.calls)}"))  # a new view, same queues
    events = [
        (call.body["involvedObject"], call.body["type"], call.body["reason"], call.body["message"])
        for call in api.calls
        if call.target.startswith("events/") and call.body["involvedObject"]["name"] == "team"
    ]
    assert events == [
        (
            {
                "kind": "Queue",
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "name": "team",
                "uid": "u-team",
            },
            "Warning",
            "ParentNotFound",
            "queue 'team': gone",
        )
    ]


class ThrottleCase(NamedTuple):
    backlog: Any
    status: Any
    later: Any
    written: Any


THROTTLE = {
    "figures are refreshed after the interval": ThrottleCase(
        backlog=False, status={"allocated": {"cpu": "1"}}, later=3.0, written=True
    ),
    "not before it": ThrottleCase(
        backlog=False, status={"allocated": {"cpu": "1"}}, later=1.0, written=False
    ),
    "a backlog of gate removals makes the interval five times longer": ThrottleCase(
        backlog=True,
        status={"allocated": {"cpu": "1"}},
        later=3.0,
        written=False,
    ),
    "and lets them through after it": ThrottleCase(
        backlog=True, status={"allocated": {"cpu": "1"}}, later=10.5, written=True
    ),
    "a state change is never delayed": ThrottleCase(
        backlog=True, status={"state": "Closing"}, later=0.5, written=True
    ),
}


@pytest.mark.parametrize(
    ("backlog", "status", "later", "written"), THROTTLE.values(), ids=THROTTLE.keys()
)
def test_figure_only_status_writes_wait_longer_while_admissions_queue(
    backlog: bool, status: dict[str, object], later: float, written: bool
) -> None:
    now = [0.0]
    cluster = state.ClusterState()
    api = fakes.FakeKube()
    remover = gating.GateRemover(cluster=cluster, api=api, workers=1)
    admission = cycle.AdmissionCycle(
        cluster=cluster,
        api=api,
        remover=remover,
        session=FakeSession(),
        config=dataclasses.replace(settings.DEFAULTS, figures_interval=2.0),
        clock=lambda: now[0],
    )
    first = queue_status.QueueWrite(name="team", status={"allocated": {"cpu": "2"}})
    assert admission._throttle([first]) == [first]
    if backlog:
        for index in range(gating.BACKLOG_PER_WORKER + 1):
            assert remover.offer(f"ns/p{index}", queue="default", decided_at=0.0)
    now[0] = later
    write = queue_status.QueueWrite(name="team", status=status)
    assert (admission._throttle([write]) == [write]) is written


class GroupThrottleCase(NamedTuple):
    first: Any
    """The status patch planned at 0 s (None: none)."""
    patch: Any
    later: Any
    backlog: Any
    written: Any


GROUP_THROTTLE = {
    "counts alone are refreshed after the interval": GroupThrottleCase(
        first={"phase": "Running", "running": 0, "succeeded": 0, "failed": 0},
        patch={"running": 4, "succeeded": 0, "failed": 0},
        later=2.0,
        backlog=False,
        written=True,
    ),
    "not before it": GroupThrottleCase(
        first={"phase": "Running", "running": 0, "succeeded": 0, "failed": 0},
        patch={"running": 4, "succeeded": 0, "failed": 0},
        later=1.0,
        backlog=False,
        written=False,
    ),
    "nor before five times the interval while the gate workers have a backlog": GroupThrottleCase(
        first={"phase": "Running", "running": 0, "succeeded": 0, "failed": 0},
        patch={"running": 4, "succeeded": 0, "failed": 0},
        later=3.0,
        backlog=True,
        written=False,
    ),
    "a phase change is never delayed": GroupThrottleCase(
        first={"phase": "Inqueue"},
        patch={"phase": "Running", "running": 0, "succeeded": 0, "failed": 0},
        later=0.5,
        backlog=True,
        written=True,
    ),
    "a condition change is never delayed": GroupThrottleCase(
        first={"running": 1, "succeeded": 0, "failed": 0},
        patch={"conditions": [{"type": "Unschedulable", "status": "True"}]},
        later=0.5,
        backlog=False,
        written=True,
    ),
    "the counts of a group not written since the operator started go at once": GroupThrottleCase(
        first=None,
        patch={"running": 4, "succeeded": 0, "failed": 0},
        later=0.5,
        backlog=False,
        written=True,
    ),
}


@pytest.mark.parametrize(
    ("first", "patch", "later", "backlog", "written"),
    GROUP_THROTTLE.values(),
    ids=GROUP_THROTTLE.keys(),
)
def test_pod_group_writes_of_counts_alone_are_paced_as_queue_figures(
    first: dict[str, object] | None,
    patch: dict[str, object],
    later: float,
    backlog: bool,
    written: bool,
) -> None:
    now = [0.0]
    cluster = state.ClusterState()
    api = fakes.FakeKube()
    remover = gating.GateRemover(cluster=cluster, api=api, workers=1)
    admission = cycle.AdmissionCycle(
        cluster=cluster,
        api=api,
        remover=remover,
        session=FakeSession(),
        config=dataclasses.replace(settings.DEFAULTS, figures_interval=2.0),
        clock=lambda: now[0],
    )
    present = {"ns/g"}
    if first is not None:
        assert admission._throttle_groups({"ns/g": first}, present=present) == {"ns/g": first}
    if backlog:
        for index in range(gating.BACKLOG_PER_WORKER + 1):
            assert remover.offer(f"ns/p{index}", queue="default", decided_at=0.0)
    now[0] = later
    kept = admission._throttle_groups({"ns/g": patch}, present=present)
    assert (kept == {"ns/g": patch}) is written


class ReclaimSession:
    """Reclaim as the core does it, reduced to what the cycle must honour: the first
    preemptable victim in key order is evicted for ``ns/r``."""

    VICTIMS = ("ns/a-protected", "ns/b-free")

    def __init__(self) -> None:
        self.seen: list[objects.Snapshot] = []

    def __call__(
        self,
        snapshot: objects.Snapshot,
        bound: inqueue_bounds.InqueueBound | None = None,
        unfolded: objects.Snapshot | None = None,
    ) -> decisions.SessionResult:
        self.seen.append(snapshot)
        victims = [k for k in self.VICTIMS if k in snapshot.pods and snapshot.pods[k].preemptable]
        if not victims:
            return decisions.SessionResult(ready=True)
        record = decisions.Eviction(
            victim=victims[0],
            reclaimer="ns/r",
            rule=decisions.EvictionRule.RECLAIM_OVER_DESERVED,
            action="reclaim",
            reason="queue 'b' is above its deserved share (cpu 2 > 1); ancestorReclaimLevel 1",
            node="n1",
            victim_queue="b",
            reclaimer_queue="a",
        )
        return decisions.SessionResult(ready=True, evict=(victims[0],), evictions=(record,))


class RefusalsCase(NamedTuple):
    retry_after: Any
    protected_for: Any


REFUSALS = {
    "the server's retryAfterSeconds": RefusalsCase(retry_after=7.0, protected_for=7.0),
    "the configured retry when the server names none": RefusalsCase(
        retry_after=None, protected_for=3.0
    ),
}


@pytest.mark.parametrize(
    ("retry_after", "protected_for"), list(REFUSALS.values()), ids=list(REFUSALS)
)
async def test_a_victim_whose_eviction_is_refused_is_passed_over_until_its_retry_time(
    retry_after: float | None, protected_for: float
) -> None:
    """A 429 (a PodDisruptionBudget) keeps that victim out of reclaim's choice for the
    retry time, so the next cycle evicts another; the reclaimer is told why it waited."""
    now = [100.0]
    cluster = state.ClusterState()
    api = fakes.FakeKube()
    refused = kube.ApiError(
        verb="create",
        target="pods/ns/a-protected/eviction",
        status=429,
        reason="TooManyRequests",
        message="Cannot evict pod as it would violate the pod's disruption budget.",
        retry_after=retry_after,
    )

    def refuse_once(call: fakes.Call) -> None:
        if (
            call.verb == "evict"
            and call.target == "pods/ns/a-protected"
            and api.calls.count(call) == 1
        ):
            raise refused

    api.on_call = refuse_once
    session = ReclaimSession()
    admission = cycle.AdmissionCycle(
        cluster=cluster,
        api=api,
        remover=gating.GateRemover(cluster=cluster, api=api, workers=1),
        session=session,
        reclaim=True,
        config=dataclasses.replace(settings.DEFAULTS, eviction_retry=3.0),
        clock=lambda: now[0],
        wall_clock=lambda: 0.0,
    )
    for name in ("a-protected", "b-free", "r"):
        cluster.upsert_pod(fakes.pod(name, gates=()))
    cluster.mark_synced()

    first = await admission.run_once()
    await admission.wait_writes()
    second = await admission.run_once()
    await admission.wait_writes()
    now[0] += protected_for + 0.1
    third = await admission.run_once()
    await admission.wait_writes()

    preemptable = [snapshot.pods["ns/a-protected"].preemptable for snapshot in session.seen]
    blocked = [
        (call.target, call.body["type"], call.body["involvedObject"]["name"], call.body["message"])
        for call in api.calls
        if call.verb == "create" and call.body.get("reason") == "ReclaimBlocked"
    ]
    assert (first.evictions, second.evictions, third.evictions) == (
        ("ns/a-protected",),
        ("ns/b-free",),
        ("ns/a-protected",),
    )
    assert preemptable == [True, False, True]
    assert blocked == [
        (
            "events/ns",
            "Warning",
            "r",
            "Reclaim waits: the eviction of ns/a-protected was refused (Cannot evict pod as it "
            "would violate the pod's disruption budget); other victims are considered meanwhile, "
            f"and ns/a-protected again in {protected_for:g}s",
        )
    ]


class SlowAnnotations(fakes.FakeKube):
    """Annotations take a while: records how many are in flight at once."""

    def __init__(self) -> None:
        super().__init__()
        self.in_flight = 0
        self.most = 0

    async def annotate_pod(self, namespace: str, name: str, annotations: Any) -> None:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        try:
            await asyncio.sleep(0)  # a round trip: the other writers get to start theirs
            await super().annotate_pod(namespace, name, annotations)
        finally:
            self.in_flight -= 1


@pytest.mark.parametrize("writers", [1, 3], ids=["one at a time", "three at once"])
async def test_the_writer_has_several_writes_in_flight_at_once(writers: int) -> None:
    api = SlowAnnotations()
    cluster, _, _, session, admission = make(api=api, status_writers=writers)
    names = [f"p{index}" for index in range(8)]
    for name in names:
        cluster.upsert_pod(fakes.pod(name))
    cluster.mark_synced()
    session.reasons = {f"ns/{name}": "queue team: cpu 2 > 1" for name in names}
    await admission.run_once()
    await admission.wait_writes()
    assert (len(annotations_written(api)), api.most) == (8, writers)


class PauseCase(NamedTuple):
    last_duration: Any
    since_last_start: Any
    pause: Any


PAUSES = {
    "the first cycle waits only the debounce": PauseCase(
        last_duration=0.0, since_last_start=float("inf"), pause=0.02
    ),
    "after a quiet spell, only the debounce": PauseCase(
        last_duration=0.01, since_last_start=5.0, pause=0.02
    ),
    "under a stream, what is left of the interval": PauseCase(
        last_duration=0.01, since_last_start=0.03, pause=0.07
    ),
    "a long cycle is paced by its duration": PauseCase(
        last_duration=0.3, since_last_start=0.3, pause=0.3
    ),
}


@pytest.mark.parametrize(
    ("last_duration", "since_last_start", "pause"), PAUSES.values(), ids=PAUSES.keys()
)
def test_a_wake_up_waits_the_debounce_the_pace_or_the_rest_of_the_interval(
    last_duration: float, since_last_start: float, pause: float
) -> None:
    assert cycle.cycle_pause(
        debounce=0.02,
        pace=1.0,
        min_interval=0.1,
        last_duration=last_duration,
        since_last_start=since_last_start,
    ) == pytest.approx(pause)


class BudgetCase(NamedTuple):
    since_last_start: float
    budget: int


BUDGETS = {
    "the first cycle plans the budget": BudgetCase(since_last_start=float("inf"), budget=400),
    "cycles closer than a period plan the budget": BudgetCase(since_last_start=0.1, budget=400),
    "a cycle a period after the last plans the budget": BudgetCase(
        since_last_start=1.0, budget=400
    ),
    "a cycle that waited out a backlog plans for each period waited": BudgetCase(
        since_last_start=5.0, budget=2000
    ),
    "a part of a period counts for its part": BudgetCase(since_last_start=2.5, budget=1000),
}


@pytest.mark.parametrize(("since_last_start", "budget"), BUDGETS.values(), ids=BUDGETS.keys())
def test_a_cycle_after_a_long_wait_explains_as_many_pods_as_the_cycles_it_stands_for(
    since_last_start: float, budget: int
) -> None:
    assert (
        cycle.explanation_budget(budget=400, period=1.0, since_last_start=since_last_start)
        == budget
    )


class BacklogCase(NamedTuple):
    backlog_wait: float
    runs_with_backlog: bool


BACKLOG = {
    "a cycle waits for the gate workers rather than the period": BacklogCase(
        backlog_wait=60.0, runs_with_backlog=False
    ),
    "a cycle waits for the gate workers at most backlog_wait": BacklogCase(
        backlog_wait=0.05, runs_with_backlog=True
    ),
}


@pytest.mark.parametrize(
    ("backlog_wait", "runs_with_backlog"), BACKLOG.values(), ids=BACKLOG.keys()
)
async def test_while_the_gate_workers_have_a_backlog_cycles_wait_for_them(
    backlog_wait: float, runs_with_backlog: bool
) -> None:
    cluster, _, remover, session, admission = make(
        workers=1, cycle_period=0.01, backlog_wait=backlog_wait
    )
    cluster.mark_synced()
    for index in range(gating.BACKLOG_PER_WORKER + 1):
        assert remover.offer(f"ns/p{index}", queue="default", decided_at=0.0)
    loop = asyncio.create_task(admission.run())
    try:
        admission.wake()
        if runs_with_backlog:
            await fakes.wait_for(lambda: len(session.seen) > 0)
        else:
            # Absence needs a window: ten periods in which a period-bound wait would have
            # let a cycle run.
            await asyncio.sleep(0.1)
        ran_with_backlog = len(session.seen) > 0
        remover.start()
        # Once drained, the waiting cycle runs at once, whatever backlog_wait is.
        await fakes.wait_for(lambda: len(session.seen) > 0)
    finally:
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)
        await remover.stop()
    assert ran_with_backlog == runs_with_backlog


class HeldEvents(fakes.FakeKube):
    """Events wait until ``release`` is set (an API server busy with other writes)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()

    async def create_event(self, namespace: str, body: Any) -> None:
        await self.release.wait()
        await super().create_event(namespace, body)


class LaneCase(NamedTuple):
    second: Any
    annotations: Any
    events: Any


LANE = {
    "a later reason replaces the Event not sent yet": LaneCase(
        second={"ns/a": "queue team: cpu 2 > 1", "ns/b": "queue dept: cpu 3 > 2"},
        annotations=[
            ("a", "queue team: cpu 2 > 1"),
            ("b", "queue team: cpu 2 > 1"),
            ("b", "queue dept: cpu 3 > 2"),
        ],
        events=[("a", "queue team: cpu 2 > 1"), ("b", "queue dept: cpu 3 > 2")],
    ),
    "an explanation removed before its Event went out sends none": LaneCase(
        second=None,
        annotations=[("a", "queue team: cpu 2 > 1"), ("b", "queue team: cpu 2 > 1"), ("b", None)],
        events=[("a", "queue team: cpu 2 > 1")],
    ),
}


@pytest.mark.parametrize(("second", "annotations", "events"), LANE.values(), ids=LANE.keys())
async def test_annotations_go_first_and_their_events_follow_in_a_lane_of_their_own(
    second: dict[str, str] | None, annotations: list[Any], events: list[Any]
) -> None:
    api = HeldEvents()
    cluster, _, _, session, admission = make(api=api, event_writers=1)
    for name in ("a", "b"):
        cluster.upsert_pod(fakes.pod(name))
    cluster.mark_synced()
    session.reasons = {"ns/a": "queue team: cpu 2 > 1", "ns/b": "queue team: cpu 2 > 1"}
    await admission.run_once()
    # Both annotations are written while the first Event is still on its way.
    await fakes.wait_for(lambda: len(annotations_written(api)) == 2)
    if second is None:
        # b is no longer held (its gate went another way): its explanation is removed.
        cluster.upsert_pod(fakes.pod("b", gates=()))
        session.reasons = {"ns/a": "queue team: cpu 2 > 1"}
    else:
        cluster.upsert_pod(dataclasses.replace(fakes.pod("b"), labels={"round": "2"}))
        session.reasons = second
    await admission.run_once()
    await fakes.wait_for(lambda: len(annotations_written(api)) == 3)
    api.release.set()
    await admission.wait_writes()
    key = explaining.REASON_ANNOTATION
    written = [
        (call.target.rpartition("/")[2], call.body[key])
        for call in api.calls
        if call.verb == "annotate"
    ]
    sent = [
        (call.body["involvedObject"]["name"], call.body["message"])
        for call in api.calls
        if call.target.startswith("events/")
    ]
    assert (written, sent) == (annotations, events)


async def test_an_event_queued_while_the_lane_finishes_its_last_send_is_sent_too() -> None:
    # The lane has one Event on its way and nothing queued; the next explanation's Event must
    # not wait for a third explanation to start a new lane.
    api = HeldEvents()
    cluster, _, _, session, admission = make(api=api, event_writers=1)
    cluster.upsert_pod(fakes.pod("a"))
    cluster.mark_synced()
    session.reasons = {"ns/a": "queue team: cpu 2 > 1"}
    await admission.run_once()
    await fakes.wait_for(lambda: len(annotations_written(api)) == 1)
    cluster.upsert_pod(fakes.pod("b"))
    session.reasons = {"ns/a": "queue team: cpu 2 > 1", "ns/b": "queue team: cpu 2 > 1"}
    await admission.run_once()
    await fakes.wait_for(lambda: len(annotations_written(api)) == 2)
    api.release.set()
    await admission.wait_writes()
    sent = [call.body["involvedObject"]["name"] for call in api.calls if call.verb == "create"]
    assert sent == ["a", "b"]


def notices_sent(api: fakes.FakeKube) -> list[tuple[str, str, str]]:
    return [
        (call.body["metadata"]["name"], call.body["type"], call.body["message"])
        for call in api.calls
        if call.target.startswith("events/")
        and call.body["reason"] == explaining.OUTSIDE_EVENT_REASON
    ]


NOOPT = (
    "pod ns/noopt names queue 'b' (its annotation scheduling.volcano.sh/queue-name) but did not "
)


async def test_a_pod_that_names_a_queue_without_opting_in_is_told_once_and_counted_by_queue() -> (
    None
):
    """The webhook never sees such a pod; the operator tells it, once, by a
    Warning Event named after it (a second sender gets 409), writes nothing into it, and the
    metrics count it per queue. A pod that names nothing is told nothing."""
    cluster, api, _, _, admission = make()
    noopt = fakes.pod("noopt", gates=(), opted_in=False, queue="b", uid="u1")
    cluster.upsert_pod(noopt)
    cluster.upsert_pod(
        dataclasses.replace(fakes.pod("plain", gates=(), opted_in=False), annotations={})
    )
    cluster.mark_synced()
    await admission.run_once()
    await admission.wait_writes()
    cluster.upsert_pod(dataclasses.replace(noopt, labels={"again": "yes"}))
    await admission.run_once()
    await admission.wait_writes()
    sent = notices_sent(api)
    assert [(name, kind, message.startswith(NOOPT)) for name, kind, message in sent] == [
        ("noopt.u1.outside-queue-admission", "Warning", True)
    ]
    assert annotations_written(api) == []
    none = resources.EMPTY
    figures = decisions.QueueFigures(
        allocated=none, deserved=none, capability=none, real_capability=none
    )
    result = decisions.SessionResult(ready=True, queues=MappingProxyType({"b": figures}))
    exported = metrics.create()
    view = cluster.view()
    exported.publish_queues(lambda: cycle.queue_reading(view, result))
    assert exported.registry.get_sample_value("queuetree_queue_outside_pods", {"queue": "b"}) == 1


async def test_a_notice_refused_by_the_server_is_tried_again_and_a_conflict_means_told() -> None:
    cluster, api, _, _, admission = make()
    cluster.upsert_pod(fakes.pod("noopt", gates=(), opted_in=False, queue="b", uid="u1"))
    cluster.mark_synced()
    api.fail["events/ns"] = [500, 409]
    for round_ in range(3):
        cluster.upsert_pod(
            dataclasses.replace(
                fakes.pod("noopt", gates=(), opted_in=False, queue="b", uid="u1"),
                labels={"round": str(round_)},
            )
        )
        await admission.run_once()
        await admission.wait_writes()
    assert len(notices_sent(api)) == 2


async def test_a_bound_running_out_is_decided_again_though_nothing_else_changed() -> None:
    wall = [b.at(200).timestamp()]
    cluster = state.ClusterState()
    api = fakes.FakeKube()
    session = FakeSession()
    admission = cycle.AdmissionCycle(
        cluster=cluster,
        api=api,
        remover=gating.GateRemover(cluster=cluster, api=api, workers=1),
        session=session,
        config=dataclasses.replace(settings.DEFAULTS, inqueue_timeout=300.0),
        wall_clock=lambda: wall[0],
    )
    cluster.upsert_pod_group(b.pod_group("ns", "g").min_resources(cpu="1").admitted_at(100).build())
    cluster.mark_synced()
    await admission.run_once()
    wall[0] = b.at(399).timestamp()
    await admission.run_once()  # within the bound: the last decisions stand
    wall[0] = b.at(400).timestamp()
    await admission.run_once()  # the bound ran out: decided again, as of now
    assert [bound.now if bound else None for bound in session.bounds] == [b.at(200), b.at(400)]


async def test_no_bound_is_given_to_the_session_when_the_timeout_is_zero() -> None:
    cluster, _, _, session, admission = make(inqueue_timeout=0.0)
    cluster.mark_synced()
    await admission.run_once()
    assert session.bounds == [None]


def _watched(group: objects.PodGroup, patch: dict[str, Any]) -> objects.PodGroup:
    """``group`` as the watch shows it once ``patch`` (a status merge patch) is written."""
    status = dict(patch["status"])
    manifest = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": group.name, "namespace": group.namespace, "uid": group.uid},
        "spec": {
            "queue": group.queue,
            "minMember": group.min_member,
            "minResources": resources.to_resource_list(group.min_resources or resources.EMPTY),
        },
        "status": {"phase": str(group.phase), **status},
    }
    return queue_manifests.parse_pod_group(manifest)


async def test_a_pod_group_without_pods_is_written_inqueue_then_released_once() -> None:
    wall = [b.at(0).timestamp()]
    cluster = state.ClusterState()
    api = fakes.FakeKube()
    config = settings.OperatorSettings(inqueue_timeout=300.0)
    admission = cycle.AdmissionCycle(
        cluster=cluster,
        api=api,
        remover=gating.GateRemover(cluster=cluster, api=api, workers=1),
        session=running.make_session(config, admission_only=True),
        config=config,
        wall_clock=lambda: wall[0],
    )
    for queue in (b.queue("root"), b.queue("default"), b.queue("q").capability(cpu="1")):
        cluster.upsert_queue(state.QueueRecord(queue=queue.build()))
    group = b.pod_group("ns", "g").queue("q").min_member(1).min_resources(cpu="1").build()
    cluster.upsert_pod_group(group)
    cluster.mark_synced()

    async def cycle_writes() -> list[tuple[str, Any]]:
        before = len(api.calls)
        await admission.run_once()
        await admission.wait_writes()
        found = []
        for call in api.calls[before:]:
            if call.target == "podgroups/ns/g/status":
                found.append(("status", call.body["status"]))
            elif call.target == "events/ns" and call.body["involvedObject"]["kind"] == "PodGroup":
                found.append(("event", (call.body["type"], call.body["reason"])))
        return found

    admitted = await cycle_writes()
    status = admitted[0][1]
    group = _watched(group, {"status": status})
    cluster.upsert_pod_group(group)
    wall[0] = b.at(299).timestamp()
    quiet = await cycle_writes()
    wall[0] = b.at(300).timestamp()
    released = await cycle_writes()
    assert (
        status["phase"],
        [(c["reason"], c["lastTransitionTime"]) for c in status["conditions"]],
        admitted[1:],
        quiet,
        released[0][1]["phase"],
        [(c["reason"], c["lastTransitionTime"]) for c in released[0][1]["conditions"]],
        released[1:],
    ) == (
        "Inqueue",
        [("Inqueue", "2026-01-01T00:00:00Z")],
        [("event", ("Normal", "Inqueue"))],
        [],
        "Pending",
        [("InqueueTimeout", "2026-01-01T00:05:00Z")],
        [("event", ("Warning", "InqueueTimeout"))],
    )
