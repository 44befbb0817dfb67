"""What the cluster looks like right now, read with kubectl: queues, pods, pod groups, events.

An :class:`Observation` is one consistent-enough reading (four list calls) that the live view
renders and scenario conditions test. Pods are sorted into the stages a user follows:

- ``gated``: still carries queuetree's gate (waiting for its queue);
- ``admitted``: the gate is gone, no node yet (it reserves queue capacity);
- ``running``: bound to a node (Pending on a node counts here too: it is placed);
- ``succeeded`` / ``failed``: finished;
- ``evicted``: seen before, then evicted by reclaim (told by the operator's ``Reclaim`` events).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from queuetree.api import bodies
from queuetree.core import objects, quantities
from queuetree.sandbox import kubectl

STAGES = ("gated", "admitted", "running", "succeeded", "failed", "evicted")
EVICTED_PREFIX = "Evicted by queuetree reclaim"
_EVICTED_QUEUE = re.compile(re.escape(EVICTED_PREFIX) + r": queue (\S+) ")


@dataclasses.dataclass(frozen=True, slots=True)
class Observation:
    queues: Mapping[str, dict[str, Any]]
    """Queue name -> the Queue object."""
    pods: Mapping[str, dict[str, Any]]
    """``namespace/name`` -> the Pod object."""
    pod_groups: Mapping[str, dict[str, Any]]
    """``namespace/name`` -> the PodGroup object."""
    evicted: Mapping[str, str]
    """``namespace/name`` of each pod the operator evicted -> the event message."""


def observe(client: kubectl.Kubectl) -> Observation:
    """Read the cluster once; raises :class:`kubectl.KubectlError` if a list fails."""
    queues = {bodies.name_of(q): q for q in client.items("queues")}
    pods = {_key(p): p for p in client.items("pods", "--all-namespaces")}
    # In full: where the Workload API is served, the bare "podgroups" is kube-scheduler's.
    groups = {
        _key(g): g for g in client.items("podgroups.scheduling.volcano.sh", "--all-namespaces")
    }
    evicted = {}
    # Filtered here, not with --field-selector: not every API server indexes events by reason.
    for event in client.items("events", "--all-namespaces"):
        if event.get("reason") != "Reclaim":
            continue
        message = str(event.get("message", ""))
        involved = event.get("involvedObject") or {}
        if involved.get("kind") == "Pod" and message.startswith(EVICTED_PREFIX):
            evicted[f"{involved.get('namespace', '')}/{involved.get('name', '')}"] = message
    return Observation(queues=queues, pods=pods, pod_groups=groups, evicted=evicted)


def _key(obj: Mapping[str, Any]) -> str:
    meta = bodies.metadata_of(obj)
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def evicted_from(message: str) -> str:
    """The victim's queue named in the operator's eviction message ("Evicted by queuetree
    reclaim: queue X uses more than ..."); empty if the message names none."""
    match = _EVICTED_QUEUE.match(message)
    return match.group(1) if match else ""


def gates_of(pod: Mapping[str, Any]) -> list[str]:
    return [str(g.get("name")) for g in bodies.spec_of(pod).get("schedulingGates") or []]


def stage_of(pod: Mapping[str, Any]) -> str:
    """One of :data:`STAGES` except ``evicted`` (a pod object still exists)."""
    phase = bodies.status_of(pod).get("phase", "Pending")
    if phase == "Succeeded":
        return "succeeded"
    if phase == "Failed":
        return "failed"
    if objects.QUEUE_ALLOCATION_GATE in gates_of(pod):
        return "gated"
    if bodies.spec_of(pod).get("nodeName"):
        return "running"
    return "admitted"


def queue_of(pod: Mapping[str, Any], pod_groups: Mapping[str, Mapping[str, Any]]) -> str:
    """The pod's queue: the one it was admitted to (the operator's record), else its
    PodGroup's, else its queue-name annotation, else ``default``."""
    meta = bodies.metadata_of(pod)
    annotations = meta.get("annotations") or {}
    admitted = annotations.get(objects.ADMITTED_QUEUE_ANNOTATION)
    if admitted:
        return str(admitted)
    group = annotations.get(objects.GROUP_NAME_ANNOTATION)
    if group:
        found = pod_groups.get(f"{meta.get('namespace', '')}/{group}")
        if found is not None and bodies.spec_of(found).get("queue"):
            return str(bodies.spec_of(found)["queue"])
    return str(annotations.get(objects.QUEUE_NAME_ANNOTATION) or objects.DEFAULT_QUEUE)


def stage_counts(
    observation: Observation, *, pods: Mapping[str, Mapping[str, Any]] | None = None
) -> dict[str, int]:
    """Pods per stage (all of :data:`STAGES`, zeros included) among ``pods`` (default: all).

    Evicted pods count only when they are among ``pods`` or no longer exist.
    """
    selected = observation.pods if pods is None else pods
    counts = dict.fromkeys(STAGES, 0)
    for key, pod in selected.items():
        if key in observation.evicted and bodies.metadata_of(pod).get("deletionTimestamp"):
            counts["evicted"] += 1
            continue
        counts[stage_of(pod)] += 1
    if pods is None:
        counts["evicted"] += sum(1 for key in observation.evicted if key not in observation.pods)
    return counts


def milli(text: object) -> int:
    """A quantity in thousandths (``"500m"`` -> 500, ``"1Gi"`` -> 1073741824000)."""
    return quantities.to_milli(quantities.parse(str(text)))


def same_quantities(actual: Mapping[str, Any] | None, expected: Mapping[str, Any]) -> bool:
    """Every resource of ``expected`` equals ``actual``'s by value (``1Gi`` == ``1024Mi``);
    a resource absent from ``actual`` counts as zero."""
    actual = actual or {}
    return all(milli(actual.get(name, "0")) == milli(value) for name, value in expected.items())


def fingerprint(observation: Observation) -> tuple[Any, ...]:
    """What must stop changing for the cluster to count as settled: each pod's stage, node and
    gates, each queue's state and figures, the evictions."""
    pods = tuple(
        sorted(
            (key, stage_of(pod), bodies.spec_of(pod).get("nodeName", ""), tuple(gates_of(pod)))
            for key, pod in observation.pods.items()
        )
    )
    queues = tuple(
        sorted(
            (name, repr(sorted(bodies.status_of(queue).items())))
            for name, queue in observation.queues.items()
        )
    )
    return pods, queues, tuple(sorted(observation.evicted))
