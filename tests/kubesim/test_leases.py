"""Leases as kubernetes-asyncio's leader election uses them: create, read, replace with 409s."""

from __future__ import annotations

import asyncio
import contextlib

from kubernetes_asyncio import client, config
from kubernetes_asyncio.leaderelection import electionconfig, leaderelection
from kubernetes_asyncio.leaderelection.resourcelock import leaselock

from tests.kubesim import conftest
from tests.kubesim.conftest import Api

LEASE = "queuetree-leader"


async def read_lease(api: client.ApiClient) -> client.V1Lease:
    return await client.CoordinationV1Api(api).read_namespaced_lease(LEASE, "default")


def candidate(api: client.ApiClient, identity: str, leaders: list[str]) -> asyncio.Task[None]:
    async def started() -> None:
        leaders.append(identity)

    async def stopped() -> None:
        return None

    lock = leaselock.LeaseLock(LEASE, "default", identity, api)
    settings = electionconfig.Config(
        lock,
        lease_duration=5,
        renew_deadline=3,
        retry_period=1,
        onstarted_leading=started,
        onstopped_leading=stopped,
    )
    return asyncio.create_task(leaderelection.LeaderElection(settings).run())


async def test_one_of_two_candidates_leads_and_renews_the_lease(api: Api) -> None:
    leaders: list[str] = []
    api = await config.new_client_from_config(config_file=str(api.kubeconfig))
    async with api:
        tasks = [candidate(api, identity, leaders) for identity in ("a", "b")]
        try:
            await conftest.wait_for(lambda: len(leaders) == 1)
            first = await read_lease(api)
            assert first.spec.holder_identity == leaders[0]

            async def renewed() -> bool:
                lease = await read_lease(api)
                return bool(lease.spec.renew_time != first.spec.renew_time)

            await conftest.wait_for(renewed)
            assert (len(leaders), (await read_lease(api)).spec.holder_identity) == (1, leaders[0])
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
