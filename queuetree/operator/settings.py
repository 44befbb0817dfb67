"""The operator's settings, one record built from the command line (``queuetree operator``).

Each default is written here once: ``queuetree operator``'s flags and the admission cycle read
their defaults from :data:`DEFAULTS`."""

from __future__ import annotations

import dataclasses
import os
import socket
from collections.abc import Mapping

from queuetree.core import configs, features, objects

EVICTION_RETRY = 10.0
"""Seconds a victim whose eviction was refused with 429 (a PodDisruptionBudget) stays out of
reclaim's choice when the server names no ``retryAfterSeconds`` (kube-apiserver names 10 for a
budget that forbids it, 0 for one its disruption controller has not observed yet): long enough
for the other victims to be tried, short enough that a budget that allows it again is noticed."""


def default_identity() -> str:
    """``<hostname>_<pid>``: unique per replica, readable in the Lease's holderIdentity."""
    return f"{socket.gethostname()}_{os.getpid()}"


@dataclasses.dataclass(frozen=True, slots=True)
class OperatorSettings:
    scheduler_config: configs.SchedulerConfiguration = dataclasses.field(
        default_factory=configs.SchedulerConfiguration
    )
    """The session's actions and plugin tiers (``--scheduler-conf``)."""
    feature_gates: Mapping[str, bool] = dataclasses.field(default_factory=lambda: features.DEFAULTS)
    gate_workers: int = 5
    """Gate-removal workers (``--gate-removal-worker-num``; below 1 falls back to 5, as Volcano)."""
    qps: float = 50.0
    """Sustained API writes per second of this process (``--kube-api-qps``; 0: unlimited)."""
    burst: int = 100
    """Writes allowed at once above ``qps`` (``--kube-api-burst``)."""
    cycle_period: float = 1.0
    """Seconds between cycles when nothing wakes them (``--schedule-period``)."""
    backlog_wait: float = 5.0
    """Longest seconds a cycle waits for the gate workers to work their backlog down (to
    ``gating.BACKLOG_PER_WORKER`` pending removals per worker) before it decides again. While
    they have a backlog, what a cycle admits only queues behind it, so the wait delays no
    admission; bounded by ``cycle_period`` instead, a 5,000-pod burst on the real control plane
    ran a cycle every second (36 to 71 of them; 19 to 28 with this bound). What the wait does
    delay (explanations, evictions, queue states) is late by at most this much; the next
    cycle's explanation budget grows with the time waited."""
    debounce: float = 0.02
    """Seconds a wake-up waits so a burst of watch events becomes one cycle."""
    pace: float = 1.0
    """After a cycle that took D seconds, the next waits at least ``pace * D``: under a constant
    stream of changes the (CPU-bound) session takes at most 1 / (1 + pace) of the process, and
    watch events and gate removals keep flowing."""
    min_interval: float = 0.1
    """Least seconds from the start of one cycle to the start of the next: under a stream of
    new pods a cycle decides about what arrived since the last (about ``min_interval`` times
    the arrival rate), instead of about a pod or two as often as ``pace`` allows; each cycle's
    fixed cost (the view, the session over every queue and folded bucket, the plans) is then
    shared by more pods. After a quiet spell the first cycle waits only ``debounce``; at most
    this much is added to the time from a pod's arrival to its admission."""
    explanation_budget: int = 400
    """Most pod explanations (annotations of held pods, oldest first) one cycle plans: with
    thousands of held pods, the rest follow in later cycles instead of one long write. With
    ``status_writers`` 16, 400 a cycle told each of 5,000 held pods why within 8.7 s of its
    creation on the real control plane of the benchmark (200 and 8: 18 s)."""
    status_writers: int = 16
    """Writes of the cycle's background writer in flight at once (queue statuses, PodGroup
    statuses, pod explanations; each is for one object): one at a time, a round of queue
    figures held up explanations, and 5,000 held pods took minutes to be told why they wait.
    Gate removals have their own workers."""
    event_writers: int = 2
    """Explanation Events in flight at once. A held pod's annotation is written first (the
    durable record, retried until written); its Event follows in a lane of its own, so 5,000
    new held pods cost one write each before any of them waits for a second one. An Event
    whose explanation changed or was removed before it went out is not sent."""
    figures_interval: float = 5.0
    """Seconds between writes that only refresh a queue's figures (``allocated``,
    ``reserved``...): during a burst every cycle changes them, and a status write per queue per
    cycle would cost more than the admissions themselves (kueue #8095). Each write also comes
    back as a watch event (about 0.6 ms of kopf's time): at 2 s, 111 busy queues took a
    quarter of the operator's CPU under a stream of pods."""
    busy_figures_factor: float = 5.0
    """How many times longer ``figures_interval`` is while the gate workers have a backlog: the
    API server's time goes to admissions first."""
    eviction_retry: float = EVICTION_RETRY
    """Seconds a victim whose eviction got a 429 without ``retryAfterSeconds`` is left alone."""
    metrics_port: int = 8080
    """Port of ``/metrics`` (0: no metrics server)."""
    health_port: int = 0
    """Port of kopf's liveness endpoint ``/healthz`` (0: none)."""
    leader_elect: bool = True
    """Take a coordination.k8s.io Lease before admitting (``--leader-elect``)."""
    lease_name: str = "queuetree-operator"
    lease_namespace: str = "kube-system"
    lease_duration: float = 15.0
    """Seconds a lease stays valid without renewal (client-go's default)."""
    renew_deadline: float = 10.0
    """Seconds the leader keeps trying to renew before it stops admitting."""
    retry_period: float = 2.0
    """Seconds between attempts to take or renew the lease (at least 1)."""
    identity: str = dataclasses.field(default_factory=default_identity)
    default_queue: str = objects.DEFAULT_QUEUE
    """Name of the default queue created at start-up when absent."""
    inqueue_timeout: float = 300.0
    """Seconds an Inqueue PodGroup with ``minResources`` and no pod holds its queue's room
    (``--inqueue-timeout``; 0: for ever, as Volcano). Then it goes back to Pending, with a
    condition and an Event saying why, takes only room no other waiting work wants for as long
    again, then waits in its usual place (``core.inqueue_bounds``). The bound runs until the
    first pod exists, not until pods run: a controller that is alive creates its first pod
    within seconds of the group becoming Inqueue (Volcano's job controller and the Kubeflow
    training operator watch their PodGroups), so 300 s is generous for a controller that
    restarts, takes back its lease (15 s) and works off a backlog or client-side rate limits,
    and for pod creation retried past a slow admission webhook (10 s a try); and short enough
    that the room held for a controller that is gone (or whose pods a namespace ResourceQuota
    refuses) returns to other work within minutes. Kueue's ``waitForPodsReady`` gives
    admitted workloads 5 minutes too, for a stronger promise (pods ready)."""
    scheduler_names: frozenset[str] = frozenset({objects.DEFAULT_SCHEDULER})
    """``--scheduler-name``: the schedulers that place the pods it ungates; a gated pod that
    names another is never ungated (nothing would place it, and it would hold its queue's
    room for ever), and is told why."""
    placing_scheduler: str = objects.DEFAULT_SCHEDULER
    """The first ``--scheduler-name`` (what ``kubectl queuetree try`` hands adopted pods to)."""
    native_pod_groups: str = "auto"
    """``--native-pod-groups`` (``auto``, ``true``, ``false``; ``auto`` asks the API server at
    start-up, then holds the answer): create, for every Volcano PodGroup, the
    ``scheduling.k8s.io`` PodGroup its pods name, so kube-scheduler places each gang all or
    nothing (``api.native_groups``). The webhook's flag of the same name must agree."""
    adopted_scheduler_names: frozenset[str] = objects.DEFAULT_ADOPTED_SCHEDULERS
    """``--adopt-scheduler-names``, the webhook's flag: the webhook hands pods created for these
    schedulers to the first ``--scheduler-name``; a gated pod that still names one did not pass
    through the webhook's adoption, and is told so."""


DEFAULTS = OperatorSettings(identity="")
"""Every default, for the flags of ``queuetree operator`` and the cycle's own parameters (the
identity, computed per process, is left empty here)."""
