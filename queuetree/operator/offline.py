"""The operator's decision over a listed cluster, for tools that ask what it would do.

``kubectl queuetree explain|pending|whatif`` must show the positions and reasons the running
operator computes, not a second opinion. So they feed a :class:`listings.Listing` into the
operator's own :class:`state.ClusterState` (the lone pods' groups, the assumed view and the
folding of settled pods are the operator's) and run the session the operator runs
(:func:`running.make_session`, admission mode). Nothing here talks to the API.
"""

from __future__ import annotations

import dataclasses
import time

from queuetree.api import listings
from queuetree.core import decisions
from queuetree.operator import cycle, running, settings, state


@dataclasses.dataclass(frozen=True, slots=True)
class Decision:
    """What the operator's next cycle would decide, and the view it decided on."""

    view: state.StateView
    result: decisions.SessionResult


def load_state(listing: listings.Listing, *, default_queue: str) -> state.ClusterState:
    """A cluster state holding ``listing``, synced, as the watches would fill it."""
    cluster = state.ClusterState(sources=frozenset({"listing"}), default_queue=default_queue)
    for queue in listing.queues.values():
        cluster.upsert_queue(state.QueueRecord(queue=queue))
    for group in listing.pod_groups.values():
        cluster.upsert_pod_group(group)
    for node in listing.nodes.values():
        cluster.upsert_node(node)
    cluster.replace_pods(list(listing.pods.values()))
    cluster.mark_synced("listing")
    return cluster


def decide(
    listing: listings.Listing, config: settings.OperatorSettings, *, now: float | None = None
) -> Decision:
    """The operator's admission session over ``listing`` with ``config``, its Inqueue bound as
    of ``now`` (epoch seconds; the current time by default)."""
    view = load_state(listing, default_queue=config.default_queue).view()
    session = running.make_session(config, admission_only=True)
    bound = cycle.inqueue_bound(config.inqueue_timeout, now=time.time() if now is None else now)
    # As the cycle does: the unfolded cluster too, where quota reclaim chooses its victims.
    unfolded = view.snapshot if view.session_snapshot is not None else None
    return Decision(view=view, result=session(view.for_session, bound, unfolded))


def decide_full(
    listing: listings.Listing, config: settings.OperatorSettings, *, ungated: tuple[str, ...]
) -> decisions.SessionResult:
    """The full session (placement, reclaim, preemption) over ``listing`` once the pods of
    ``ungated`` have lost their gate, as the operator's assumptions show them: where
    kube-scheduler could place what the admission session admitted, and whom reclaim would
    evict for those that no node fits."""
    cluster = load_state(listing, default_queue=config.default_queue)
    for key in ungated:
        cluster.assume_ungated(key, decided_at=0.0)
    bound = cycle.inqueue_bound(config.inqueue_timeout, now=time.time())
    return running.make_session(config, admission_only=False)(cluster.view().snapshot, bound, None)
