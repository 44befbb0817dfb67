"""Prometheus metrics of the operator, in one registry served on ``--metrics-port``.

Queue figures carry their unit in their name, as Prometheus' conventions ask (one unit per
metric): ``queuetree_queue_<figure>_cpu_cores``, ``_memory_bytes`` and ``_pods`` per queue, and
``_scalar_resources`` per queue and resource for every other resource, in the resource's own
unit (GPUs for ``nvidia.com/gpu``; bytes for ``ephemeral-storage`` and ``hugepages-*``), where
``<figure>`` is ``allocated``, ``reserved``, ``deserved``, ``capability`` or
``real_capability``. Unlimited dimensions are not exported (a gauge has no spelling for "no
limit").

The per-queue series are computed when Prometheus scrapes, from the last cycle's decisions
(:class:`QueueCollector`): a cycle only hands over its immutable view and result, so the cost of
the series (a walk over every gated pod and every queue's figures) is paid once per scrape, not
once per cycle, which during a burst ran several times a second. Every scrape exports exactly
the queues and resources of the last cycle, so a deleted queue or a resource that disappears
stops being exported instead of keeping its last value.
"""

from __future__ import annotations

import dataclasses
import math
import threading
from collections.abc import Callable, Iterator, Mapping

import prometheus_client
from prometheus_client import core as prometheus_core
from prometheus_client import registry as prometheus_registry

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
class QueueReading:
    """What the per-queue series show: the figures of the last cycle, the pods each queue still
    holds behind the gate, and the age in seconds of its oldest such pod."""

    figures: Mapping[str, decisions.QueueFigures]
    gated: Mapping[str, int]
    oldest: Mapping[str, float]
    outside: Mapping[str, int] = dataclasses.field(default_factory=dict)
    """Queue -> unfinished pods that name it without opting in (outside queue admission)."""


ReadFn = Callable[[], QueueReading]
"""Called at scrape time, in the metrics server's thread: must only read immutable data."""


class QueueCollector(prometheus_registry.Collector):
    """The per-queue gauges, built at every scrape from the reading last published."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._read: ReadFn = lambda: QueueReading({}, {}, {})

    def publish(self, read: ReadFn) -> None:
        """From now on, scrapes show what ``read`` returns (called at each scrape)."""
        with self._lock:
            self._read = read

    def collect(self) -> Iterator[prometheus_core.Metric]:
        with self._lock:
            read = self._read
        reading = read()
        for attribute in FIGURES:
            families = {
                unit: prometheus_core.GaugeMetricFamily(
                    f"queuetree_queue_{attribute}_{unit}",
                    f"{_HELP[attribute]} ({unit.replace('_', ' ')}).",
                    labels=("queue", "resource") if unit == "scalar_resources" else ("queue",),
                )
                for unit in UNITS
            }
            for queue, figure in reading.figures.items():
                vector: resources.Resource = getattr(figure, attribute)
                for name, value in iter_dimensions(vector):
                    unit = unit_of(name)
                    labels = [queue, name] if unit == "scalar_resources" else [queue]
                    families[unit].add_metric(labels, value)
            yield from families.values()
        gated = prometheus_core.GaugeMetricFamily(
            "queuetree_queue_gated_pods", "Pods still held by the queue gate.", labels=("queue",)
        )
        for queue, count in reading.gated.items():
            gated.add_metric([queue], float(count))
        yield gated
        oldest = prometheus_core.GaugeMetricFamily(
            "queuetree_queue_oldest_gated_pod_age_seconds",
            "Age of the oldest pod still held by the queue gate.",
            labels=("queue",),
        )
        for queue, age in reading.oldest.items():
            oldest.add_metric([queue], age)
        yield oldest
        outside = prometheus_core.GaugeMetricFamily(
            "queuetree_queue_outside_pods",
            "Unfinished pods that name the queue without opting in: they run outside queue "
            "admission, and no figure of the queue counts them.",
            labels=("queue",),
        )
        for queue, count in reading.outside.items():
            outside.add_metric([queue], float(count))
        yield outside

    def describe(self) -> Iterator[prometheus_core.Metric]:
        # Without describe, registering would call collect() (and a read) once at start-up.
        yield from ()


@dataclasses.dataclass(frozen=True, slots=True)
class Metrics:
    """Every metric the operator exports; :func:`create` builds them in a fresh registry."""

    registry: prometheus_client.CollectorRegistry
    queues: QueueCollector
    """The per-queue gauges (figures, gated pods, oldest gated age), read at scrape time."""
    cycle_duration: prometheus_client.Histogram
    ungate_latency: prometheus_client.Histogram
    ungates: prometheus_client.Counter
    evictions: prometheus_client.Counter
    eviction_refusals: prometheus_client.Counter
    """Evictions the API server refused with 429 (a PodDisruptionBudget); reclaim chose
    other victims or waited."""
    api_errors: prometheus_client.Counter
    leader: prometheus_client.Gauge

    def record_api_error(self, verb: str, code: int) -> None:
        self.api_errors.labels(verb=verb, code=str(code)).inc()

    def publish_queues(self, read: ReadFn) -> None:
        """Scrapes show what ``read`` returns from now on (see :class:`QueueCollector`)."""
        self.queues.publish(read)

    def record_queues(
        self,
        figures: Mapping[str, decisions.QueueFigures],
        gated: Mapping[str, int],
        oldest: Mapping[str, float] | None = None,
    ) -> None:
        """Scrapes show exactly these figures from now on (``oldest``: queue -> age in seconds
        of its oldest gated pod)."""
        reading = QueueReading(figures, gated, oldest or {})
        self.queues.publish(lambda: reading)


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

    queues = QueueCollector()
    registry.register(queues)
    return Metrics(
        registry=registry,
        queues=queues,
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
