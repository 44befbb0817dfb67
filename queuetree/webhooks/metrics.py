"""Prometheus metrics of the webhook: reviews by endpoint and outcome, and review latency.

Each server gets its own registry (tests run several servers in one process).
"""

from __future__ import annotations

import prometheus_client

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
"""Seconds; reviews take about a millisecond, and kube-apiserver gives up at the webhook's
timeoutSeconds (5-10 s), so the buckets are dense below 10 ms."""


class Metrics:
    def __init__(self) -> None:
        self.registry = prometheus_client.CollectorRegistry(auto_describe=True)
        self.reviews = prometheus_client.Counter(
            "queuetree_webhook_reviews_total",
            "AdmissionReviews answered, by endpoint and outcome "
            "(allowed, patched, denied, rejected, error).",
            ["endpoint", "outcome"],
            registry=self.registry,
        )
        self.latency = prometheus_client.Histogram(
            "queuetree_webhook_review_duration_seconds",
            "Time from the request's arrival to the answer, by endpoint.",
            ["endpoint"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.cache_ready = prometheus_client.Gauge(
            "queuetree_webhook_cache_ready",
            "1 once the queue, namespace and pod-group caches have listed once.",
            registry=self.registry,
        )
        self.cache_misses = prometheus_client.Counter(
            "queuetree_webhook_cache_misses_total",
            "Reviews that named a queue or namespace missing from the cache, by outcome: absent "
            "(a live read says it does not exist: answered at once), found (it reached the "
            "cache within --cache-wait), timeout (the wait ran out).",
            ["outcome"],
            registry=self.registry,
        )
        self.certificate_loads = prometheus_client.Counter(
            "queuetree_webhook_certificate_loads_total",
            "Serving certificates loaded (1 at start, then one per rotation).",
            registry=self.registry,
        )

    def observe(self, endpoint: str, outcome: str, seconds: float) -> None:
        self.reviews.labels(endpoint, outcome).inc()
        self.latency.labels(endpoint).observe(seconds)

    def render(self) -> bytes:
        return prometheus_client.generate_latest(self.registry)


CONTENT_TYPE = prometheus_client.CONTENT_TYPE_LATEST
