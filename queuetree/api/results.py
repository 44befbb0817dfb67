"""Session results as the JSON object ``queuetree session`` prints (DESIGN.md's contract).

Keys are camelCase like Kubernetes' own output; quantities are Kubernetes quantity maps
(``{"cpu": "1500m", "memory": "2Gi", "nvidia.com/gpu": "1"}``) made by
``resources.to_resource_list``, in which an unlimited dimension is omitted (so a queue whose
capability is unlimited shows no ``cpu``/``memory`` at all, while a zero one shows ``"0"``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from queuetree.core import decisions, resources


def render_session_result(
    result: decisions.SessionResult, *, warnings: Iterable[str] = ()
) -> dict[str, Any]:
    """The contract's object: ``ready``, ``errors``, ``warnings``, ``bind``, ``pipeline``,
    ``evict``, ``ungate``, ``podGroups``, ``queues`` and ``reasons``.

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
        "ungate": list(result.ungate),
        "podGroups": {key: str(phase) for key, phase in result.pod_groups.items()},
        "queues": {name: render_queue(figures) for name, figures in result.queues.items()},
        "reasons": dict(result.reasons),
    }


def render_queue(figures: decisions.QueueFigures) -> dict[str, Any]:
    """``allocated``, ``deserved``, ``capability``, ``realCapability``, ``share``, ``state``."""
    return {
        "allocated": resources.to_resource_list(figures.allocated),
        "deserved": resources.to_resource_list(figures.deserved),
        "capability": resources.to_resource_list(figures.capability),
        "realCapability": resources.to_resource_list(figures.real_capability),
        "share": float(figures.share),
        "state": str(figures.state),
    }
