"""Leader election on a ``coordination.k8s.io`` Lease (kubernetes-asyncio's ``leaderelection``).

Every replica watches and keeps its caches warm; only the one holding the Lease admits, removes
gates, evicts and writes status. :func:`campaign` runs ``lead`` (a coroutine function) while
this replica holds the lease: the library cancels it as soon as a renewal fails for
``renew_deadline``, which stops that work at once; then the replica campaigns again, so it can
take over later. Without election (``leader_elect=False``) ``lead`` simply runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from queuetree.operator import settings

logger = logging.getLogger(__name__)

LeadFn = Callable[[], Coroutine[Any, Any, None]]
StoppedFn = Callable[[], None]


async def campaign(
    *,
    config: settings.OperatorSettings,
    api_client: Any,
    lead: LeadFn,
    on_stopped: StoppedFn,
) -> None:
    """Campaign for the lease forever; run ``lead`` while holding it; never returns."""
    if not config.leader_elect:
        await lead()
        return
    from kubernetes_asyncio.leaderelection import electionconfig, leaderelection
    from kubernetes_asyncio.leaderelection.resourcelock import leaselock

    running: list[asyncio.Task[Any]] = []

    async def started() -> None:
        logger.info("Leading as %s", config.identity)
        task = asyncio.current_task()
        if task is not None:
            running.append(task)
        await lead()

    async def stopped() -> None:
        logger.warning("Lost the lease %s; admission stops", config.lease_name)

    while True:
        lock = leaselock.LeaseLock(
            config.lease_name, config.lease_namespace, config.identity, api_client
        )

        election = leaderelection.LeaderElection(
            electionconfig.Config(
                lock,
                # The library writes these into the Lease as whole seconds.
                lease_duration=max(1, round(config.lease_duration)),
                renew_deadline=max(1, round(config.renew_deadline)),
                retry_period=max(1, round(config.retry_period)),
                onstarted_leading=started,
                onstopped_leading=stopped,
            )
        )
        try:
            await election.run()
        finally:
            # The library cancels the leading task without waiting; wait here, so the gate
            # workers have stopped before anyone campaigns again.
            for task in running:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            running.clear()
            on_stopped()
