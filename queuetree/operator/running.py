"""Running the operator: kopf watches, leader election, the cycle and the gate workers.

:func:`run` is ``queuetree operator``. Kopf runs cluster-wide and standalone (no kopf peering;
the Lease decides who acts) with the handlers of ``queuetree.operator.handlers`` for queues,
pod groups and nodes; pods come from ``queuetree.operator.informing``. Leader
election runs beside it; while leading, :func:`lead` creates the root and default queues if
they are absent, starts the gate workers and runs the admission cycle. Losing the lease cancels
all of that at once and forgets every assumed gate removal: the next leader rebuilds the
reserved set from the cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import threading
from collections.abc import Callable
from typing import Any

import kopf

from queuetree.api import native_groups, resource_claims
from queuetree.core import decisions, inqueue_bounds, objects, sessions
from queuetree.operator import (
    cycle,
    gating,
    handlers,
    informing,
    kube,
    leading,
    metrics,
    settings,
    state,
    writing,
)

logger = logging.getLogger(__name__)

Flag = asyncio.Event | threading.Event

CONNECTIONS_BESIDES_WORKERS = 4
"""Connections the operator needs besides its gate workers' (pod watch, lease, writer, spare)."""


def make_session(config: settings.OperatorSettings, *, admission_only: bool) -> cycle.SessionFn:
    """The core session bound to the configuration (``queuetree.core.sessions.run_session``).

    The cycle hands it the state's view for the session (``StateView.for_session``), whose
    settled lone pods the state's compaction index has folded already; the session does not
    fold them again (a second pass over the folded pods would find nothing to fold: each
    bucket is one pod, and a view with an unschedulable pod is not folded by either).
    """

    def run_session(
        snapshot: objects.Snapshot,
        bound: inqueue_bounds.InqueueBound | None,
        unfolded: objects.Snapshot | None = None,
    ) -> decisions.SessionResult:
        return sessions.run_session(
            snapshot,
            config=config.scheduler_config,
            feature_gates=config.feature_gates,
            admission_only=admission_only,
            compact=False,
            scheduler_names=config.scheduler_names if admission_only else None,
            adopted_scheduler_names=config.adopted_scheduler_names,
            bound=bound,
            unfolded=unfolded,
        )

    return run_session


def build_cycle(
    *,
    config: settings.OperatorSettings,
    cluster: state.ClusterState,
    api: kube.KubeApi,
    metrics_: metrics.Metrics,
    session: cycle.SessionFn,
) -> tuple[cycle.AdmissionCycle, gating.GateRemover]:
    def on_outcome(outcome: gating.Outcome) -> None:
        if outcome.status is None:
            metrics_.ungate_latency.observe(outcome.latency)
        metrics_.ungates.labels(outcome=outcome.label).inc()

    remover = gating.GateRemover(
        cluster=cluster, api=api, workers=config.gate_workers, on_outcome=on_outcome
    )
    admission = cycle.AdmissionCycle(
        cluster=cluster,
        api=api,
        remover=remover,
        session=session,
        reclaim="reclaim" in config.scheduler_config.actions,
        metrics_=metrics_,
        config=config,
    )
    return admission, remover


async def resolve_native_pod_groups(
    config: settings.OperatorSettings, api: kube.KubeApi
) -> settings.OperatorSettings:
    """``config`` with ``--native-pod-groups=auto`` answered by the API server's discovery
    (``true`` or ``false``), said in the log either way."""
    served: bool | None = None
    if config.native_pod_groups == "auto":
        try:
            found = await api.read("discovery", native_groups.DISCOVERY_PATH)
            served = native_groups.serves_pod_groups(found)
        except kube.ApiError as error:
            served = False if error.status == 404 else None
    native, said = native_groups.resolve(config.native_pod_groups, served)
    logger.info("%s", said)
    return dataclasses.replace(config, native_pod_groups="true" if native else "false")


async def lead(
    *,
    config: settings.OperatorSettings,
    cluster: state.ClusterState,
    api: kube.KubeApi,
    metrics_: metrics.Metrics,
    session: cycle.SessionFn,
) -> None:
    """Everything the leader does, until cancelled."""
    metrics_.leader.set(1)
    admission, remover = build_cycle(
        config=config,
        cluster=cluster,
        api=api,
        metrics_=metrics_,
        session=session,
    )
    cluster.set_wake(admission.wake)
    remover.start()
    try:
        await writing.ensure_queues(api, default_queue=config.default_queue)
        await admission.run()
    finally:
        cluster.set_wake(lambda: None)
        await remover.stop()
        cluster.forget_all_ungates()
        metrics_.leader.set(0)


def kopf_settings() -> kopf.OperatorSettings:
    options = kopf.OperatorSettings()
    # Nothing is persisted on objects: only index and event handlers are registered.
    options.posting.enabled = False
    options.watching.server_timeout = 300
    options.watching.client_timeout = 330
    options.networking.request_timeout = 30
    return options


async def run(
    config: settings.OperatorSettings,
    *,
    stop_flag: Flag | None = None,
    ready_flag: Flag | None = None,
    session: cycle.SessionFn | None = None,
    metrics_: metrics.Metrics | None = None,
    on_state: Callable[[state.ClusterState], None] | None = None,
) -> None:
    """Run the operator until ``stop_flag`` is set (or forever)."""
    from kubernetes_asyncio import config as kube_config

    loader: Any = kube_config.load_incluster_config
    try:
        loader()
    except kube_config.ConfigException:
        # Read KUBECONFIG now: the library's default location was fixed when it was imported.
        await kube_config.load_kube_config(config_file=os.environ.get("KUBECONFIG"))
    metrics_ = metrics_ or metrics.create()
    metrics_server: Any = None
    if config.metrics_port:
        import prometheus_client

        metrics_server, _ = prometheus_client.start_http_server(
            config.metrics_port, registry=metrics_.registry
        )
    try:
        await _run(
            config,
            metrics_=metrics_,
            stop_flag=stop_flag,
            ready_flag=ready_flag,
            session=session,
            on_state=on_state,
        )
    finally:
        if metrics_server is not None:
            # shutdown() blocks until the serving thread has stopped: not on the event loop.
            await asyncio.to_thread(metrics_server.shutdown)
            metrics_server.server_close()


async def _run(
    config: settings.OperatorSettings,
    *,
    metrics_: metrics.Metrics,
    stop_flag: Flag | None,
    ready_flag: Flag | None,
    session: cycle.SessionFn | None,
    on_state: Callable[[state.ClusterState], None] | None,
) -> None:
    from kubernetes_asyncio import client

    configuration = client.Configuration.get_default_copy()
    # One connection per gate worker, plus the pod watch, the lease and the background writer:
    # the library's default (5 per CPU) would make gate workers wait for each other.
    configuration.connection_pool_maxsize = max(
        configuration.connection_pool_maxsize, config.gate_workers + CONNECTIONS_BESIDES_WORKERS
    )
    async with client.ApiClient(configuration) as api_client:
        kube.tune_client(api_client)
        api = kube.AsyncKube(
            api_client,
            limiter=kube.RateLimiter(qps=config.qps, burst=config.burst),
            on_error=metrics_.record_api_error,
        )
        config = await resolve_native_pod_groups(config, api)

        if config.scheduler_config.device_classes and not await _serves_dra(api):
            # Without the DRA API no pod can get devices through claims: nothing to charge, and
            # watches of kinds the API does not serve would keep the operator from ever syncing.
            logger.warning(
                "deviceClassMappings ignored: the API server does not serve %s",
                resource_claims.GROUP_VERSION,
            )
            unmapped = dataclasses.replace(config.scheduler_config, device_classes={})
            config = dataclasses.replace(config, scheduler_config=unmapped)
        cluster = state.ClusterState(
            sources=frozenset({"kopf", "pods"}),
            default_queue=config.default_queue,
            device_classes=config.scheduler_config.device_classes,
        )
        if on_state is not None:
            on_state(cluster)
        if session is None:
            session = make_session(config, admission_only=True)

        async def leading_work() -> None:
            await lead(
                config=config,
                cluster=cluster,
                api=api,
                metrics_=metrics_,
                session=session,
            )

        informer = asyncio.create_task(
            informing.PodInformer(cluster=cluster, api_client=api_client).run(),
            name="queuetree pod informer",
        )
        election = asyncio.create_task(
            leading.campaign(
                config=config,
                api_client=api_client,
                lead=leading_work,
                on_stopped=cluster.forget_all_ungates,
            ),
            name="queuetree leader election",
        )
        registry = handlers.build_registry(cluster, pods=False)
        own_work = (election, informer)
        kopf_stopping = asyncio.Event()

        @kopf.on.cleanup(registry=registry)
        async def stop_own_work(**_: Any) -> None:
            """End the election (and with it the leader's cycle, gate workers and writers) and
            the informer while kopf stops. Kopf counts every task started after it as its own
            and waits 5 s for them before it cancels them: without this, each stop took 5 s."""
            kopf_stopping.set()
            for task in own_work:
                task.cancel()
            await asyncio.wait(own_work)

        watching = asyncio.create_task(
            kopf.operator(
                clusterwide=True,
                standalone=True,
                registry=registry,
                settings=kopf_settings(),
                stop_flag=stop_flag,
                ready_flag=ready_flag,
                liveness_endpoint=(
                    f"http://0.0.0.0:{config.health_port}/healthz" if config.health_port else None
                ),
            ),
            name="queuetree kopf",
        )
        try:
            # Whichever ends first ends the process: kopf on its stop flag, the election only
            # by failing (it campaigns forever), and a replica that can no longer campaign
            # must not keep running as a silent follower.
            await asyncio.wait({watching, election, informer}, return_when=asyncio.FIRST_COMPLETED)
            if kopf_stopping.is_set():
                # Our work ended because kopf is stopping: let it finish its own shutdown.
                await asyncio.wait({watching})
        finally:
            for task in (election, informer, watching):
                task.cancel()
            for task in (election, informer, watching):
                with contextlib.suppress(asyncio.CancelledError):
                    await task


async def _serves_dra(api: kube.AsyncKube) -> bool:
    """Whether the API server serves ``resource.k8s.io/v1`` (ResourceClaims and templates)."""
    try:
        await api.read("resource.k8s.io/v1", f"/apis/{resource_claims.GROUP_VERSION}")
    except kube.ApiError as error:
        if error.status == 404:
            return False
        raise
    return True
