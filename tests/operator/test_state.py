"""The cluster state: assumed gate removals show in every snapshot until the truth catches up."""

from __future__ import annotations

from queuetree.core import objects
from queuetree.operator import state
from tests.operator import fakes

GATE = objects.QUEUE_ALLOCATION_GATE


def gates_in_view(cluster: state.ClusterState) -> dict[str, tuple[str, ...]]:
    return {key: pod.scheduling_gates for key, pod in cluster.view().snapshot.pods.items()}


def test_an_assumed_pod_appears_ungated_and_keeps_other_gates_out_of_reach() -> None:
    cluster = state.ClusterState()
    cluster.upsert_pod(fakes.pod("a"))
    cluster.upsert_pod(fakes.pod("b", gates=("example.com/other", GATE)))
    assert cluster.assume_ungated("ns/a", decided_at=1.0)
    assert not cluster.assume_ungated("ns/a", decided_at=2.0)
    assert not cluster.assume_ungated("ns/b", decided_at=1.0)
    assert not cluster.assume_ungated("ns/missing", decided_at=1.0)
    assert gates_in_view(cluster) == {"ns/a": (), "ns/b": ("example.com/other", GATE)}
    assert dict(cluster.view().assumed) == {"ns/a": 1.0}


def test_the_watch_confirming_the_removal_ends_the_assumption() -> None:
    cluster = state.ClusterState()
    cluster.upsert_pod(fakes.pod("a"))
    cluster.assume_ungated("ns/a", decided_at=1.0)
    cluster.upsert_pod(fakes.pod("a", gates=()))
    assert dict(cluster.view().assumed) == {}


def test_a_failed_removal_restores_the_gate_in_the_next_snapshot() -> None:
    cluster = state.ClusterState()
    cluster.upsert_pod(fakes.pod("a"))
    cluster.assume_ungated("ns/a", decided_at=1.0)
    cluster.forget_ungate("ns/a")
    assert gates_in_view(cluster) == {"ns/a": (GATE,)}


def test_lone_pods_get_their_single_pod_group_in_the_snapshot() -> None:
    cluster = state.ClusterState()
    cluster.upsert_pod(fakes.pod("a", queue="team"))
    groups = cluster.view().snapshot.pod_groups
    assert {key: (g.queue, g.synthetic) for key, g in groups.items()} == {"ns/a": ("team", True)}
    cluster.delete_pod("ns/a")
    assert dict(cluster.view().snapshot.pod_groups) == {}


def test_changes_wake_the_cycle_and_no_ops_do_not() -> None:
    wakes: list[int] = []
    cluster = state.ClusterState(wake=lambda: wakes.append(1))
    cluster.upsert_pod(fakes.pod("a"))
    cluster.upsert_pod(fakes.pod("a"))
    cluster.delete_pod("ns/missing")
    cluster.mark_synced()
    cluster.mark_synced()
    assert len(wakes) == 2


def test_status_figures_written_back_do_not_wake_the_cycle_but_states_do() -> None:
    wakes: list[int] = []
    cluster = state.ClusterState(wake=lambda: wakes.append(1))
    queue = objects.Queue(name="team", parent="root")
    cluster.upsert_queue(state.QueueRecord(queue=queue, status={"state": "Open"}))
    figures = {"state": "Open", "allocated": {"cpu": "1"}, "running": 1}
    cluster.upsert_queue(state.QueueRecord(queue=queue, status=figures))
    version = cluster.view().version
    cluster.upsert_queue(state.QueueRecord(queue=queue, status={**figures, "state": "Closed"}))
    assert (len(wakes), cluster.view().queue_records["team"].status["running"]) == (2, 1)
    assert cluster.view().version == version + 1
