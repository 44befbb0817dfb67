"""Gate removal: the workers' queue, their outcomes and the hold-off after a failure. (The
patch itself: test_writing.py.)"""

from __future__ import annotations

import asyncio
from typing import Any, NamedTuple

import pytest

from queuetree.core import objects
from queuetree.operator import gating, state, writing
from tests.operator import fakes

GATE = objects.QUEUE_ALLOCATION_GATE


def make(
    workers: int = 1,
) -> tuple[state.ClusterState, fakes.FakeKube, gating.GateRemover, list[gating.Outcome]]:
    cluster = state.ClusterState()
    api = fakes.FakeKube()
    outcomes: list[gating.Outcome] = []
    remover = gating.GateRemover(
        cluster=cluster, api=api, workers=workers, on_outcome=outcomes.append, clock=lambda: 10.0
    )
    return cluster, api, remover, outcomes


async def test_offer_deduplicates_and_respects_the_bound() -> None:
    _, _, remover, _ = make(workers=1)
    assert remover.offer("ns/a", queue="team", decided_at=0.0)
    assert not remover.offer("ns/a", queue="team", decided_at=0.0)
    for index in range(gating.QUEUE_SLOTS_PER_WORKER - 1):
        assert remover.offer(f"ns/p{index}", queue="team", decided_at=0.0)
    assert not remover.offer("ns/overflow", queue="team", decided_at=0.0)
    assert remover.pending == gating.QUEUE_SLOTS_PER_WORKER


class OutcomesCase(NamedTuple):
    failure: Any
    status: Any
    label: Any
    still_assumed: Any


OUTCOMES = {
    "success keeps the assumption until the watch confirms": OutcomesCase(
        failure=None, status=None, label="removed", still_assumed=True
    ),
    "a pod that is gone is a normal outcome": OutcomesCase(
        failure=404, status=404, label="404", still_assumed=False
    ),
    "a failed test is a normal outcome": OutcomesCase(
        failure=422, status=422, label="422", still_assumed=False
    ),
    "a server error drops the assumption for the next cycle": OutcomesCase(
        failure=500, status=500, label="500", still_assumed=False
    ),
    "no answer (a timeout, a dropped connection) is a failure, not a removal": OutcomesCase(
        failure=0, status=0, label="no-answer", still_assumed=False
    ),
}


@pytest.mark.parametrize(
    ("failure", "status", "label", "still_assumed"), list(OUTCOMES.values()), ids=list(OUTCOMES)
)
async def test_worker_outcomes(
    failure: int | None, status: int | None, label: str, still_assumed: bool
) -> None:
    cluster, api, remover, outcomes = make()
    cluster.upsert_pod(fakes.pod("p"))
    assert cluster.assume_ungated("ns/p", decided_at=9.5)
    if failure is not None:
        api.fail["pods/ns/p"] = [failure]
    remover.start()
    try:
        assert remover.offer("ns/p", queue="team", decided_at=9.5)
        await fakes.wait_for(lambda: bool(outcomes))
    finally:
        await remover.stop()
    assert outcomes == [gating.Outcome(key="ns/p", status=status, latency=0.5)]
    assert outcomes[0].label == label
    assert ("ns/p" in cluster.view().assumed) is still_assumed
    assert remover.holding_off("ns/p") is (status not in (None, *writing.NORMAL_STATUSES))


async def test_a_pod_that_gained_company_is_not_patched() -> None:
    cluster, api, remover, outcomes = make()
    cluster.upsert_pod(fakes.pod("p"))
    assert cluster.assume_ungated("ns/p", decided_at=10.0)
    cluster.upsert_pod(fakes.pod("p", gates=("example.com/other", GATE)))
    remover.start()
    try:
        assert remover.offer("ns/p", queue="team", decided_at=10.0)
        await fakes.wait_for(lambda: remover.pending == 0)
    finally:
        await remover.stop()
    assert (api.calls, outcomes, dict(cluster.view().assumed)) == ([], [], {})


async def test_the_cycle_may_decide_again_only_once_the_backlog_has_drained() -> None:
    cluster, _, remover, outcomes = make(workers=1)
    low_water = gating.BACKLOG_PER_WORKER
    for index in range(low_water + 1):
        cluster.upsert_pod(fakes.pod(f"p{index}"))
        assert cluster.assume_ungated(f"ns/p{index}", decided_at=10.0)
        assert remover.offer(f"ns/p{index}", queue="team", decided_at=10.0)
    drained = asyncio.create_task(remover.wait_drained())
    # Not started: the workers hold the whole backlog, so the wait must still be on.
    await asyncio.sleep(0)
    waiting_with_backlog = not drained.done()
    remover.start()
    try:
        await asyncio.wait_for(drained, timeout=5)
        await fakes.wait_for(lambda: len(outcomes) == low_water + 1)
    finally:
        await remover.stop()
    assert (waiting_with_backlog, remover.pending, drained.done()) == (True, 0, True)


async def test_a_refused_removal_holds_the_pod_off_for_a_doubling_backoff_without_waking() -> None:
    now = [100.0]
    wakes: list[int] = []
    cluster = state.ClusterState(wake=lambda: wakes.append(1))
    api = fakes.FakeKube()
    outcomes: list[gating.Outcome] = []
    remover = gating.GateRemover(
        cluster=cluster, api=api, on_outcome=outcomes.append, clock=lambda: now[0]
    )
    cluster.upsert_pod(fakes.pod("p"))
    api.fail["pods/ns/p"] = [403, 403, 403]
    held: list[tuple[float, bool, bool, bool]] = []
    remover.start()
    try:
        for attempt, delay in enumerate((1.0, 2.0, 4.0, 0.0)):
            assert cluster.assume_ungated("ns/p", decided_at=now[0])
            woken = len(wakes)
            assert remover.offer("ns/p", queue="team", decided_at=now[0])
            await fakes.wait_for(lambda a=attempt: len(outcomes) == a + 1)
            start = now[0]
            now[0] = start + max(delay - 0.1, 0)
            before = remover.holding_off("ns/p")
            now[0] = start + delay + 0.1
            held.append((delay, before, remover.holding_off("ns/p"), len(wakes) > woken))
    finally:
        await remover.stop()
    # Held off 1 s, 2 s, then 4 s, and no refusal starts a cycle; a success ends the backoff.
    assert held == [
        (1.0, True, False, False),
        (2.0, True, False, False),
        (4.0, True, False, False),
        (0.0, False, False, False),
    ]
    assert [o.status for o in outcomes] == [403, 403, 403, None]
