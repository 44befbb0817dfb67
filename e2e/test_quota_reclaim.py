"""Quota reclaim: a queue under its deserved share takes back what a sibling borrowed when their
parent's capability, not a node, is full (docs/compatibility.md: Volcano's gated pods never
reclaim).

The tree of benchmarks/peer_features.py, in tenths of a CPU: a parent deserving and capped at
four tenths over a borrower and a lender (deserving two each, capped at four). Five borrower
pods: four run (two of them the lender's share), the fifth waits. Then two lender pods arrive:
two borrower pods are evicted for them (and no more, although the victims take a while to
terminate), the lender's pods run once the victims are gone, and at no moment does the parent's
subtree run more than its capability: a watch records every version of every pod, and the test
replays them.
"""

from __future__ import annotations

import decimal
from typing import Any

from e2e import support

TENTH = {"cpu": "100m", "memory": "16Mi"}
GRACE_SECONDS = 8
"""How long an evicted borrower pod stays Terminating: several operator cycles."""


def cpu_of(pod: dict[str, Any]) -> decimal.Decimal:
    containers = (pod.get("spec") or {}).get("containers") or []
    total = decimal.Decimal(0)
    for container in containers:
        cpu = str(((container.get("resources") or {}).get("requests") or {}).get("cpu", "0"))
        total += decimal.Decimal(cpu[:-1]) / 1000 if cpu.endswith("m") else decimal.Decimal(cpu)
    return total


def most_admitted(events: list[dict[str, Any]]) -> decimal.Decimal:
    """The most CPU the admitted (ungated), unfinished pods of the watch held at any moment,
    Terminating ones included (they still hold their node)."""
    pods: dict[str, dict[str, Any]] = {}
    most = decimal.Decimal(0)
    for event in events:
        pod = event.get("object") or {}
        name = (pod.get("metadata") or {}).get("name", "")
        if event.get("type") == "DELETED":
            pods.pop(name, None)
        else:
            pods[name] = pod
        held = sum(
            (
                cpu_of(p)
                for p in pods.values()
                if support.GATE
                not in {g.get("name") for g in p["spec"].get("schedulingGates") or []}
                and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            ),
            decimal.Decimal(0),
        )
        most = max(most, held)
    return most


def test_a_lender_under_its_deserved_share_reclaims_what_its_sibling_borrowed(
    kube: support.Kube,
) -> None:
    s = support.unique("q").removeprefix("q-")
    parent, borrower, lender = f"cmp-parent-{s}", f"cmp-borrower-{s}", f"cmp-lender-{s}"
    two, four = {"cpu": "200m"}, {"cpu": "400m"}
    kube.must(
        kube.apply(
            support.queue(parent, deserved=four, capability=four),
            support.queue(borrower, parent=parent, deserved=two, capability=four),
            support.queue(lender, parent=parent, deserved=two, capability=four),
        )
    )
    watch = support.PodWatch(kube)
    try:
        borrowers = [f"borrower-{i}" for i in range(1, 6)]
        for name in borrowers:
            manifest = support.pod(name, namespace=kube.namespace, queue=borrower, requests=TENTH)
            manifest["spec"]["terminationGracePeriodSeconds"] = GRACE_SECONDS
            kube.must(kube.apply(manifest))
            support.eventually(
                lambda n=name: kube.running(n) or (n == borrowers[-1] and kube.gated(n)),
                what=f"{name} runs (the fifth waits gated)",
            )
        support.eventually(
            lambda: kube.gated("borrower-5") and "capability" in kube.explanation("borrower-5"),
            what="the fifth borrower pod waits, its queue at its capability",
        )
        lenders = ["lender-1", "lender-2"]
        for name in lenders:
            kube.must(
                kube.apply(
                    support.pod(name, namespace=kube.namespace, queue=lender, requests=TENTH)
                )
            )
        support.eventually(
            lambda: all(kube.running(n) for n in lenders),
            what="the lender's pods run once two borrower pods are gone",
            deadline=GRACE_SECONDS + 90,
            diagnose=lambda: "\n".join(
                f"{n}: {kube.explanation(n)}" for n in (*lenders, "borrower-5")
            ),
        )
        events = watch.events
        evicted = sorted(
            {
                e["object"]["metadata"]["name"]
                for e in events
                if e["object"]["metadata"].get("deletionTimestamp")
            }
        )
        reclaim = support.eventually(
            lambda: (
                (
                    found := {
                        e["involvedObject"]["name"]: e.get("message", "")
                        for e in kube.client.items("events", "-n", kube.namespace)
                        if e.get("reason") == "Reclaim"
                    }
                ).keys()
                >= set(evicted)
                and any(n in found for n in lenders)
                and found
            ),
            what="Reclaim events on the victims and a lender pod",
            diagnose=lambda: (
                f"evicted {evicted}; events "
                + str(
                    [
                        (e["involvedObject"]["name"], e.get("reason"), e.get("message"))
                        for e in kube.client.items("events", "-n", kube.namespace)
                    ]
                )
            ),
        )
    finally:
        events = watch.stop()
    assert (
        len(evicted),
        all(kube.running(n) for n in borrowers if n not in evicted and n != "borrower-5"),
        kube.gated("borrower-5"),
        all(any(n in reclaim[v] for n in lenders) for v in evicted),
        # Both victims may be for one lender pod (the other then admitted in the room the first
        # victim left, when a cycle took them in the other order): each victim names one.
        all(borrower in reclaim[n] for n in lenders if n in reclaim),
        most_admitted(events) <= decimal.Decimal("0.4"),
    ) == (2, True, True, True, True, True), (evicted, reclaim)
