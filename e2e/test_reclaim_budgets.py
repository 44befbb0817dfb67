"""Reclaim through the Eviction API respects PodDisruptionBudgets.

The operator evicts reclaim's victims with ``policy/v1`` Evictions, never deletes. A victim
that a budget protects gets a 429 ("Cannot evict pod as it would violate the pod's disruption
budget"): reclaim then passes it over for the time the API server asks (10 s on
kube-apiserver), so another victim is evicted if there is one, and the reclaimer gets a
``ReclaimBlocked`` event saying why it waits. On the real backend the budget's status comes
from kube-controller-manager's disruption controller; kubesim keeps it itself.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from e2e import support
from e2e.test_reclaim import ONE, TWO, reclaim_events, separate_subtrees, unschedulable


def budget(name: str, *, namespace: str, app: str) -> dict[str, Any]:
    """A budget that allows no disruption of the pods labelled ``app`` (minAvailable 1 of 1)."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": app}}},
    }


def blocked_events(kube: support.Kube) -> list[str]:
    """The messages of the ReclaimBlocked events of this namespace."""
    events = kube.client.items("events", "-n", kube.namespace)
    return [e.get("message", "") for e in events if e.get("reason") == "ReclaimBlocked"]


def budget_observed(kube: support.Kube, name: str) -> bool:
    found = kube.get("pdb", name) or {}
    status = found.get("status") or {}
    return (
        status.get("observedGeneration") == (found.get("metadata") or {}).get("generation")
        and status.get("currentHealthy") == 1
    )


@pytest.fixture
def high_priority(kube: support.Kube) -> Iterator[str]:
    """A PriorityClass for the victim that reclaim should keep: victims of lower priority go
    first (the job that comes later in job order loses its tasks first)."""
    name = support.unique("e2e-high")
    kube.must(
        kube.apply(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": name},
                "value": 1000,
                "description": "e2e: a victim reclaim should take last",
            }
        )
    )
    yield name
    kube.kubectl("delete", "priorityclass", name, "--wait=false")


def _levels_evicting(kube: support.Kube) -> None:
    if kube.cluster.reclaim_level > 1:
        pytest.skip(
            f"the operator's ancestorReclaimLevel is {kube.cluster.reclaim_level}: reclaim "
            "across these subtrees needs 0 or 1"
        )


def test_reclaim_passes_over_a_victim_its_budget_protects_and_evicts_another(
    kube: support.Kube, slot_node: str, high_priority: str
) -> None:
    _levels_evicting(kube)
    suffix = support.unique("b").removeprefix("b-")
    kube.must(kube.apply(*separate_subtrees(suffix)))
    victims, reclaimers = f"queue-b-{suffix}", f"queue-a-{suffix}"
    free = support.pod("free", namespace=kube.namespace, queue=victims, requests=ONE)
    free["spec"]["priorityClassName"] = high_priority
    kube.must(kube.apply(free))
    protected = support.pod(
        "protected", namespace=kube.namespace, queue=victims, requests=ONE, labels={"app": "kept"}
    )
    kube.must(kube.apply(protected, budget("kept", namespace=kube.namespace, app="kept")))
    for name in ("free", "protected"):
        support.eventually(lambda n=name: kube.running(n), what=f"{name} runs on {slot_node}")
    support.eventually(lambda: budget_observed(kube, "kept"), what="the budget is observed")

    kube.must(
        kube.apply(
            support.pod("reclaimer", namespace=kube.namespace, queue=reclaimers, requests=ONE)
        )
    )
    # The lower-priority victim is chosen first, refused by its budget, passed over; the other
    # is evicted instead.
    support.eventually(lambda: kube.pod("free") is None, what="the unprotected victim is evicted")
    support.eventually(lambda: kube.running("reclaimer"), what="the reclaimer runs")
    blocked = support.eventually(
        lambda: blocked_events(kube) or None, what="a ReclaimBlocked event"
    )
    assert (
        kube.running("protected"),
        f"Reclaim waits: the eviction of {kube.namespace}/protected" in blocked[0],
        "disruption budget" in blocked[0],
        "reclaimer" in reclaim_events(kube),
    ) == (True, True, True, True), blocked


def test_reclaim_waits_for_a_budget_and_says_why_until_the_budget_allows_it(
    kube: support.Kube, slot_node: str
) -> None:
    _levels_evicting(kube)
    suffix = support.unique("w").removeprefix("w-")
    kube.must(kube.apply(*separate_subtrees(suffix)))
    victims, reclaimers = f"queue-b-{suffix}", f"queue-a-{suffix}"
    kube.must(
        kube.apply(
            support.pod(
                "victim",
                namespace=kube.namespace,
                queue=victims,
                requests=TWO,
                labels={"app": "kept"},
            ),
            budget("kept", namespace=kube.namespace, app="kept"),
        )
    )
    support.eventually(lambda: kube.running("victim"), what=f"the victim runs on {slot_node}")
    support.eventually(lambda: budget_observed(kube, "kept"), what="the budget is observed")
    kube.must(
        kube.apply(
            support.pod("reclaimer", namespace=kube.namespace, queue=reclaimers, requests=TWO)
        )
    )
    blocked = support.eventually(
        lambda: blocked_events(kube) or None, what="the reclaimer is told why reclaim waits"
    )
    reclaimer = kube.pod("reclaimer") or {}
    described = kube.describe_pod("reclaimer")
    assert (
        kube.running("victim"),
        unschedulable(reclaimer),
        "ReclaimBlocked" in described,
        f"{kube.namespace}/victim" in blocked[0],
    ) == (True, True, True, True), (blocked, described)

    # The budget goes: the next attempt (at the latest after the API server's retry time)
    # evicts the victim, and the reclaimer runs.
    kube.must(kube.kubectl("delete", "pdb", "kept", "-n", kube.namespace))
    support.eventually(lambda: kube.pod("victim") is None, what="the victim is evicted")
    support.eventually(lambda: kube.running("reclaimer"), what="the reclaimer runs")
    events = json.dumps(reclaim_events(kube))
    assert "reclaimer" in events
