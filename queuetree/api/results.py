"""Session results as the JSON object ``queuetree session`` prints (DESIGN.md's contract).

Keys are camelCase like Kubernetes' own output; quantities are Kubernetes quantity maps
(``{"cpu": "1500m", "memory": "2Gi", "nvidia.com/gpu": "1"}``) made by
``resources.to_resource_list``, in which an unlimited dimension is omitted (so a queue whose
capability is unlimited shows no ``cpu``/``memory`` at all, while a zero one shows ``"0"``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypedDict

from queuetree.core import decisions, resources

QuantityMap = dict[str, str]
"""A Kubernetes quantity map: resource name -> canonical quantity (``{"cpu": "1500m"}``)."""


class QueueOutput(TypedDict):
    """A queue's figures in the output."""

    allocated: QuantityMap
    deserved: QuantityMap
    capability: QuantityMap
    realCapability: QuantityMap
    share: float
    state: str


class EvictionOutput(TypedDict):
    """One eviction in the output: the victim, the pod it makes room for and the rule."""

    victim: str
    reclaimer: str
    action: str
    rule: str
    reason: str
    node: str
    victimQueue: str
    reclaimerQueue: str


class SessionOutput(TypedDict):
    """The JSON object ``queuetree session`` prints; keys are the contract's camelCase names."""

    ready: bool
    errors: list[str]
    warnings: list[str]
    bind: dict[str, str]
    pipeline: dict[str, str]
    evict: list[str]
    evictions: list[EvictionOutput]
    ungate: list[str]
    podGroups: dict[str, str]
    queues: dict[str, QueueOutput]
    reasons: dict[str, str]


def render_session_result(
    result: decisions.SessionResult, *, warnings: Iterable[str] = ()
) -> SessionOutput:
    """The contract's object: ``ready``, ``errors``, ``warnings``, ``bind``, ``pipeline``,
    ``evict``, ``evictions``, ``ungate``, ``podGroups``, ``queues`` and ``reasons``.

    ``warnings`` (from reading the input) come before the session's own. Lists keep the
    session's order (eviction and admission order); mappings are emitted as dicts whose keys the
    caller sorts when dumping.
    """
    return {
        "ready": result.ready,
        "errors": list(result.errors),
        "warnings": [*warnings, *result.warnings],
        "bind": dict(result.bind),
        "pipeline": dict(result.pipeline),
        "evict": list(result.evict),
        "evictions": [render_eviction(eviction) for eviction in result.evictions],
        "ungate": list(result.ungate),
        "podGroups": {key: str(phase) for key, phase in result.pod_groups.items()},
        "queues": {name: render_queue(figures) for name, figures in result.queues.items()},
        "reasons": dict(result.reasons),
    }


def render_queue(figures: decisions.QueueFigures) -> QueueOutput:
    """``allocated``, ``deserved``, ``capability``, ``realCapability``, ``share``, ``state``."""
    return {
        "allocated": resources.to_resource_list(figures.allocated),
        "deserved": resources.to_resource_list(figures.deserved),
        "capability": resources.to_resource_list(figures.capability),
        "realCapability": resources.to_resource_list(figures.real_capability),
        "share": float(figures.share),
        "state": str(figures.state),
    }


def render_eviction(eviction: decisions.Eviction) -> EvictionOutput:
    """``victim``, ``reclaimer`` (the pod the room is for: the reclaimer or the preemptor),
    ``action`` (``reclaim`` or ``preempt``), ``rule`` (``decisions.EvictionRule``), ``reason``,
    ``node``, ``victimQueue``, ``reclaimerQueue``."""
    return {
        "victim": eviction.victim,
        "reclaimer": eviction.reclaimer,
        "action": eviction.action,
        "rule": str(eviction.rule),
        "reason": eviction.reason,
        "node": eviction.node,
        "victimQueue": eviction.victim_queue,
        "reclaimerQueue": eviction.reclaimer_queue,
    }
