"""Prometheus metrics of the operator, in one registry served on ``--metrics-port``.

Queue figures carry their unit in their name, as Prometheus' conventions ask (one unit per
metric): ``queuetree_queue_<figure>_cpu_cores``, ``_memory_bytes`` and ``_pods`` per queue, and
``_scalar_resources`` per queue and resource for every other resource, in the resource's own
unit (GPUs for ``nvidia.com/gpu``; bytes for ``ephemeral-storage`` and ``hugepages-*``), where
``<figure>`` is ``allocated``, ``reserved``, ``deserved``, ``capability`` or
``real_capability``. Unlimited dimensions are not exported (a gauge has no spelling for "no
limit"). Series are replaced as a whole every cycle, so a deleted queue or a resource that
disappears stops being exported instead of keeping its last value.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

import prometheus_client

from queuetree.core import decisions, resources

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
FIGURES = ("allocated", "reserved", "deserved", "capability", "real_capability")
"""The ``QueueFigures`` attributes exported, one family of gauges each."""
UNITS = ("cpu_cores", "memory_bytes", "pods", "scalar_resources")
"""The gauges of each figure; ``scalar_resources`` alone has a ``resource`` label."""
_HELP = {
    "allocated": "Requests of the pods placed in the queue's subtree",
    "reserved": "Requests of the pods admitted (ungated) in the subtree and not placed yet",
    "deserved": "Effective deserved share",
    "capability": "Capability (inherited from the parent where unset)",
    "real_capability": "Effective limit: capability within what the parent leaves",
}


def unit_of(resource: str) -> str:
    """The gauge (of :data:`UNITS`) that exports ``resource``."""
    if resource == resources.CPU:
        return "cpu_cores"
    if resource == resources.MEMORY:
        return "memory_bytes"
    if resource == resources.PODS:
        return "pods"
    return "scalar_resources"


@dataclasses.dataclass(frozen=True, slots=True)
class Metrics:
    """Every metric the operator exports; :func:`create` builds them in a fresh registry."""

    registry: prometheus_client.CollectorRegistry
    queue_figures: Mapping[tuple[str, str], prometheus_client.Gauge]
    """(figure, unit) -> its gauge, e.g. ``("allocated", "cpu_cores")``."""
    queue_gated_pods: prometheus_client.Gauge
    queue_oldest_gated: prometheus_client.Gauge
    """Seconds since the oldest pod still behind the gate of each queue was created."""
    cycle_duration: prometheus_client.Histogram
    ungate_latency: prometheus_client.Histogram
    ungates: prometheus_client.Counter
    evictions: prometheus_client.Counter
    eviction_refusals: prometheus_client.Counter
    """Evictions the API server refused with 429 (a PodDisruptionBudget); reclaim chose
    other victims or waited."""
    api_errors: prometheus_client.Counter
    leader: prometheus_client.Gauge
    exported: dict[str, dict[tuple[str, ...], float]] = dataclasses.field(default_factory=dict)
    """Per queue gauge, the series last set (labels -> value): each cycle sets what changed and
    removes what is gone, instead of clearing and recreating every series (which cost more
    than the session itself during a burst)."""

    def record_api_error(self, verb: str, code: int) -> None:
        self.api_errors.labels(verb=verb, code=str(code)).inc()

    def record_queues(
        self,
        figures: Mapping[str, decisions.QueueFigures],
        gated: Mapping[str, int],
        oldest: Mapping[str, float] | None = None,
    ) -> None:
        """Replace every per-queue series by the figures of the last cycle (``oldest``: queue
        -> age in seconds of its oldest gated pod)."""
        for attribute in FIGURES:
            series: dict[str, dict[tuple[str, ...], float]] = {unit: {} for unit in UNITS}
            for queue, figure in figures.items():
                vector: resources.Resource = getattr(figure, attribute)
                for name, value in iter_dimensions(vector):
                    unit = unit_of(name)
                    labels = (queue, name) if unit == "scalar_resources" else (queue,)
                    series[unit][labels] = value
            for unit in UNITS:
                self._replace(
                    self.queue_figures[attribute, unit], f"{attribute}_{unit}", series[unit]
                )
        self._replace(
            self.queue_gated_pods,
            "gated",
            {(queue,): float(count) for queue, count in gated.items()},
        )
        self._replace(
            self.queue_oldest_gated,
            "oldest",
            {(queue,): age for queue, age in (oldest or {}).items()},
        )

    def _replace(
        self,
        gauge: prometheus_client.Gauge,
        name: str,
        series: dict[tuple[str, ...], float],
    ) -> None:
        """Make ``gauge``'s series exactly ``series``, touching only what changed."""
        previous = self.exported.get(name, {})
        for labels, value in series.items():
            if previous.get(labels) != value:
                gauge.labels(*labels).set(value)
        for labels in previous.keys() - series.keys():
            gauge.remove(*labels)
        self.exported[name] = series


def iter_dimensions(vector: resources.Resource) -> list[tuple[str, float]]:
    """``(resource, value in display units)`` for every finite dimension of ``vector``.

    CPU in cores and other milli-unit scalars in units; memory in bytes; ``pods`` as a count.
    """
    items: list[tuple[str, float]] = []
    for name, value, milli in (
        (resources.CPU, vector.milli_cpu, True),
        (resources.MEMORY, vector.memory, False),
    ):
        if not math.isinf(value):
            items.append((name, value / 1000 if milli else float(value)))
    for name, value in sorted((vector.scalars or {}).items()):
        if math.isinf(value):
            continue
        items.append((name, float(value) if name == resources.PODS else value / 1000))
    return items


def create() -> Metrics:
    registry = prometheus_client.CollectorRegistry()

    def gauge(name: str, text: str, labels: tuple[str, ...]) -> prometheus_client.Gauge:
        return prometheus_client.Gauge(name, text, labels, registry=registry)

    return Metrics(
        registry=registry,
        queue_figures={
            (figure, unit): gauge(
                f"queuetree_queue_{figure}_{unit}",
                f"{_HELP[figure]} ({unit.replace('_', ' ')}).",
                ("queue", "resource") if unit == "scalar_resources" else ("queue",),
            )
            for figure in FIGURES
            for unit in UNITS
        },
        queue_gated_pods=gauge(
            "queuetree_queue_gated_pods", "Pods still held by the queue gate.", ("queue",)
        ),
        queue_oldest_gated=gauge(
            "queuetree_queue_oldest_gated_pod_age_seconds",
            "Age of the oldest pod still held by the queue gate.",
            ("queue",),
        ),
        cycle_duration=prometheus_client.Histogram(
            "queuetree_cycle_duration_seconds",
            "Duration of one admission cycle.",
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        ),
        ungate_latency=prometheus_client.Histogram(
            "queuetree_ungate_latency_seconds",
            "From a pod's admission decision to the removal of its gate.",
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        ),
        ungates=prometheus_client.Counter(
            "queuetree_gate_removals", "Gate removals by outcome.", ("outcome",), registry=registry
        ),
        evictions=prometheus_client.Counter(
            "queuetree_evictions", "Evictions by reason.", ("reason",), registry=registry
        ),
        eviction_refusals=prometheus_client.Counter(
            "queuetree_eviction_refusals",
            "Evictions refused with 429 (a PodDisruptionBudget forbade them).",
            registry=registry,
        ),
        api_errors=prometheus_client.Counter(
            "queuetree_api_errors",
            "Refused API requests by verb and HTTP code (0: no answer).",
            ("verb", "code"),
            registry=registry,
        ),
        leader=gauge("queuetree_leader", "1 while this replica holds the lease.", ()),
    )
