"""Prometheus metrics of the operator, in one registry served on ``--metrics-port``.

Queue figures are per queue and resource, in the units a person reads on a dashboard: CPU in
cores, memory and other byte quantities in bytes, GPUs and other scalars in units, ``pods`` as a
count; unlimited dimensions are not exported (a gauge has no spelling for "no limit"). They are
replaced as a whole every cycle, so a deleted queue or a resource that disappears stops being
exported instead of keeping its last value.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

import prometheus_client

from queuetree.core import decisions, resources

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


@dataclasses.dataclass(frozen=True, slots=True)
class Metrics:
    """Every metric the operator exports; :func:`create` builds them in a fresh registry."""

    registry: prometheus_client.CollectorRegistry
    queue_allocated: prometheus_client.Gauge
    queue_reserved: prometheus_client.Gauge
    queue_deserved: prometheus_client.Gauge
    queue_capability: prometheus_client.Gauge
    queue_real_capability: prometheus_client.Gauge
    queue_gated_pods: prometheus_client.Gauge
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
        self, figures: Mapping[str, decisions.QueueFigures], gated: Mapping[str, int]
    ) -> None:
        """Replace every per-queue series by the figures of the last cycle."""
        gauges = (
            (self.queue_allocated, "allocated"),
            (self.queue_reserved, "reserved"),
            (self.queue_deserved, "deserved"),
            (self.queue_capability, "capability"),
            (self.queue_real_capability, "real_capability"),
        )
        for gauge, attribute in gauges:
            series: dict[tuple[str, ...], float] = {}
            for queue, figure in figures.items():
                vector: resources.Resource = getattr(figure, attribute)
                for name, value in iter_dimensions(vector):
                    series[(queue, name)] = value
            self._replace(gauge, attribute, series)
        self._replace(
            self.queue_gated_pods,
            "gated",
            {(queue,): float(count) for queue, count in gated.items()},
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

    queue_labels = ("queue", "resource")
    return Metrics(
        registry=registry,
        queue_allocated=gauge(
            "queuetree_queue_allocated", "Resources of bound pods (subtree).", queue_labels
        ),
        queue_reserved=gauge(
            "queuetree_queue_reserved",
            "Resources of ungated pods not yet bound (subtree).",
            queue_labels,
        ),
        queue_deserved=gauge("queuetree_queue_deserved", "Effective deserved.", queue_labels),
        queue_capability=gauge("queuetree_queue_capability", "Capability.", queue_labels),
        queue_real_capability=gauge(
            "queuetree_queue_real_capability", "Effective capability.", queue_labels
        ),
        queue_gated_pods=gauge(
            "queuetree_queue_gated_pods", "Pods still held by the queue gate.", ("queue",)
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
