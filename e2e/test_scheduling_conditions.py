"""The PodScheduled condition tells the truth about a pod, as autoscalers and people read it:

- a pod that waits for its queue is ``PodScheduled=False`` with reason ``SchedulingGated``
  (kube-apiserver's, for a pod with scheduling gates), never ``Unschedulable``, for the whole
  wait: a cluster autoscaler that saw ``Unschedulable`` would add nodes for a pod that quota,
  not capacity, holds back;
- once the queue admits it, the gate goes and the scheduler decides: ``PodScheduled=True``
  when a node fits, or ``Unschedulable`` with the scheduler's own message when none does (what
  an autoscaler scales up for).

The conditions are sampled at every poll while the test waits, not read once at the end.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from e2e import support

SMALL = {"cpu": "100m", "memory": "64Mi"}
HUGE = {"cpu": "1000", "memory": "64Mi"}
"""More CPU than any node has (kubesim's and the real backend's nodes alike)."""


@dataclasses.dataclass(frozen=True)
class Sample:
    gated: bool
    status: str
    reason: str


class Sampler:
    """Every PodScheduled condition of one pod seen while polling."""

    def __init__(self, kube: support.Kube, name: str) -> None:
        self.kube = kube
        self.name = name
        self.samples: list[Sample] = []

    def take(self) -> dict[str, Any] | None:
        found = self.kube.pod(self.name)
        condition = support.condition(found, "PodScheduled") or {}
        gates = [g["name"] for g in ((found or {}).get("spec") or {}).get("schedulingGates") or []]
        self.samples.append(
            Sample(
                gated=support.GATE in gates,
                status=str(condition.get("status", "")),
                reason=str(condition.get("reason", "")),
            )
        )
        return found

    def until(self, probe: Callable[[dict[str, Any] | None], bool], *, what: str) -> None:
        support.eventually(lambda: probe(self.take()), what=what)

    def while_gated(self) -> set[tuple[str, str]]:
        return {(s.status, s.reason) for s in self.samples if s.gated}


def explained(found: dict[str, Any] | None) -> bool:
    annotations = ((found or {}).get("metadata") or {}).get("annotations") or {}
    return bool(annotations.get(support.REASON_ANNOTATION))


def test_a_pod_waiting_for_its_queue_is_scheduling_gated_never_unschedulable(
    kube: support.Kube,
) -> None:
    name = support.unique("gated-cond")
    kube.must(kube.apply(support.queue(name, capability=SMALL)))
    kube.must(
        kube.apply(support.pod("first", namespace=kube.namespace, queue=name, requests=SMALL))
    )
    support.eventually(lambda: kube.running("first"), what="first runs")
    kube.must(
        kube.apply(support.pod("waiting", namespace=kube.namespace, queue=name, requests=SMALL))
    )
    sampler = Sampler(kube, "waiting")
    sampler.until(explained, what="the operator explains why waiting waits")
    # Keep sampling while the operator runs more cycles: pods of another queue are admitted
    # one after the other meanwhile.
    other = support.unique("gated-cond-other")
    kube.must(kube.apply(support.queue(other)))
    for index in range(3):
        kube.must(kube.apply(support.pod(f"other-{index}", namespace=kube.namespace, queue=other)))
        sampler.until(
            lambda _, i=index: kube.gates(f"other-{i}") == [], what=f"other-{index} admitted"
        )
    still_waiting = sampler.samples[-1].gated
    kube.delete_pod("first")
    sampler.until(
        lambda found: (
            support.condition(found, "PodScheduled") is not None
            and support.condition(found, "PodScheduled")["status"] == "True"
        ),
        what="waiting is admitted and scheduled once first is gone",
    )
    assert (still_waiting, sampler.while_gated(), sampler.samples[-1]) == (
        True,
        {("False", "SchedulingGated")},
        Sample(gated=False, status="True", reason=""),
    ), sampler.samples


def test_an_admitted_pod_that_no_node_fits_is_unschedulable_by_the_scheduler(
    kube: support.Kube,
) -> None:
    name = support.unique("unschedulable")
    kube.must(kube.apply(support.queue(name)))
    kube.must(kube.apply(support.pod("huge", namespace=kube.namespace, queue=name, requests=HUGE)))
    sampler = Sampler(kube, "huge")
    sampler.until(
        lambda found: (
            (support.condition(found, "PodScheduled") or {}).get("reason") == "Unschedulable"
        ),
        what="the scheduler finds no node for huge",
    )
    condition = support.condition(kube.pod("huge"), "PodScheduled") or {}
    message = str(condition.get("message", ""))
    assert (
        condition.get("status"),
        sampler.while_gated() <= {("False", "SchedulingGated")},
        "nodes are available" in message,
        "Insufficient cpu" in message,
        kube.gates("huge"),
    ) == ("False", True, True, True, []), (condition, sampler.samples)
