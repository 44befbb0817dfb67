"""Placed whole, not only admitted whole (issue 33 item 4; docs/gangs.md).

A gang of 4 pods that fits its queue but whose nodes fit only 3 of them:

- where the API server serves the Workload API (``scheduling.k8s.io/v1beta1`` PodGroups: the
  real control plane, which starts with ``controlplane.cluster.WORKLOAD_GATES`` by default),
  queuetree admits the gang and kube-scheduler places none of its pods, since ``minCount`` = 4
  cannot be placed together: no pod runs at any poll;
- where it does not (kubesim, the real control plane under ``QUEUETREE_WORKLOAD_API=0``,
  Kubernetes before 1.35), the pods are placed one by one: 3 run and hold their nodes while
  the fourth waits. That is what queuetree does instead, and says.

Either way the queue's reservation is held, as Volcano holds an admitted gang, and never in
silence: the PodGroup and its workload get a ``GangUnplaced`` Warning saying what is held and
how to give it back. Once the nodes fit all 4, all 4 run. The native PodGroup is
garbage-collected with the Volcano one, once no pod names it (kube-apiserver's
``scheduling.k8s.io/podgroup-protection`` finalizer keeps it until then).

The node room is an extended resource advertised on one node (as the reclaim tests do), so
the test needs no node of its own and runs on both backends.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from e2e import support

SLOT = "queuetree.io/e2e-gang-slot"
SMALL = {"cpu": "100m", "memory": "64Mi", SLOT: "1"}
VOLCANO = "podgroups.scheduling.volcano.sh"
"""Named in full: with the Workload API served, ``podgroups`` names two kinds."""
NATIVE = support.NATIVE_PODGROUP


def advertise(kube: support.Kube, node: str, count: int | None) -> None:
    value = None if count is None else str(count)
    patch = {"status": {"capacity": {SLOT: value}, "allocatable": {SLOT: value}}}
    kube.must(
        kube.kubectl(
            "patch", "node", node, "--subresource=status", "--type=merge", "-p", json.dumps(patch)
        )
    )


@pytest.fixture
def gang_node(kube: support.Kube) -> Iterator[str]:
    """A node with room for 3 of the gang's pods (and the only node with any)."""
    nodes = kube.client.items("nodes")
    usable = [
        n
        for n in nodes
        if not any(
            t.get("effect") == "NoExecute" for t in (n.get("spec") or {}).get("taints") or []
        )
    ]
    name = str((usable or nodes)[0]["metadata"]["name"])
    advertise(kube, name, 3)
    yield name
    advertise(kube, name, None)


def placed(kube: support.Kube, names: list[str]) -> int:
    return sum(bool(((kube.pod(n) or {}).get("spec") or {}).get("nodeName")) for n in names)


def held_cpu(kube: support.Kube, queue: str) -> int:
    """Millicores the queue holds for its pods: allocated (on nodes) and reserved (admitted,
    waiting for a node)."""
    status = (kube.queue(queue) or {}).get("status") or {}
    total = 0
    for figure in ("allocated", "reserved"):
        cpu = str((status.get(figure) or {}).get("cpu") or "0")
        total += int(cpu[:-1]) if cpu.endswith("m") else int(float(cpu) * 1000)
    return total


def unplaced_events(kube: support.Kube, kind: str, name: str) -> list[str]:
    return [
        str(e.get("message"))
        for e in kube.events_of(kind, name)
        if e.get("reason") == "GangUnplaced"
    ]


def test_a_gang_the_nodes_fit_three_of_four_of_runs_whole_or_says_why(
    kube: support.Kube, gang_node: str
) -> None:
    native = support.native_served(kube)
    queue = support.unique("gang-place")
    kube.must(kube.apply(support.queue(queue, capability={"cpu": "1", "memory": "1Gi"})))
    group = support.pod_group(
        "gang",
        namespace=kube.namespace,
        queue=queue,
        min_member=4,
        minResources={"cpu": "400m", "memory": "256Mi"},
    )
    kube.must(kube.apply(group))
    names = [f"member-{i}" for i in range(4)]
    kube.must(
        kube.apply(
            *(
                support.pod(n, namespace=kube.namespace, queue=queue, requests=SMALL, group="gang")
                for n in names
            )
        )
    )
    seen: list[int] = []

    def told() -> list[str]:
        seen.append(placed(kube, names))
        return unplaced_events(kube, "PodGroup", "gang")

    support.eventually(
        lambda: not any(kube.gated(n) for n in names), what="the queue admits all four"
    )
    message = support.eventually(
        told,
        what="the PodGroup is told the nodes do not fit the gang",
        diagnose=lambda: str([kube.pod(n) for n in names]),
    )[0]
    native_group: dict[str, Any] = (kube.get(NATIVE, "gang") or {}) if native else {}
    on_nodes = placed(kube, names)
    held = held_cpu(kube, queue)
    # Which kind the bare name reads where both are served (docs/gangs.md).
    bare = kube.must(kube.kubectl("get", "podgroups", "-n", kube.namespace, "-o", "name"))
    advertise(kube, gang_node, 4)
    support.eventually(
        lambda: all(kube.running(n) for n in names), what="all four run once the nodes fit"
    )
    kube.must(kube.kubectl("delete", VOLCANO, "gang", "-n", kube.namespace, "--wait=false"))
    # kube-apiserver keeps a native PodGroup (its podgroup-protection finalizer) while pods
    # name it: it goes once the workload's pods have gone too.
    kube.must(kube.kubectl("delete", "pods", *names, "-n", kube.namespace, "--wait=false"))
    if native:
        support.eventually(
            lambda: kube.get(NATIVE, "gang") is None,
            what="the native PodGroup is garbage-collected with the Volcano one and its pods",
        )
    policy = (native_group.get("spec") or {}).get("schedulingPolicy")
    owner = [
        (r.get("kind"), r.get("name"))
        for r in native_group.get("metadata", {}).get("ownerReferences") or []
    ]
    expected_placed = 0 if native else 3
    assert (
        max([*seen, on_nodes]) if native else on_nodes,
        "stay reserved in queue" in message,
        ("so none starts" if native else "the nodes fit only 3 of its 4 pods") in message,
        held,
        policy if native else None,
        owner if native else [],
        bare.stdout.split(),
    ) == (
        expected_placed,
        True,
        True,
        400,
        {"gang": {"minCount": 4}} if native else None,
        [("PodGroup", "gang")] if native else [],
        ["podgroup.scheduling.k8s.io/gang"] if native else ["podgroup.scheduling.volcano.sh/gang"],
    )
