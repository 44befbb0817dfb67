"""The watch-backed caches against kubesim: list then watch, deletes, namespaces and pod
groups, re-list after the watch's version is compacted away, dropped connections."""

from __future__ import annotations

import asyncio
import json
import pathlib
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, NamedTuple

import aiohttp
import pytest

from kubesim import harness
from queuetree.webhooks import caching
from tests import timing
from tests.webhooks.builders import queue

CRDS = pathlib.Path(__file__).parents[2] / "crds"
QUEUES = "/apis/scheduling.volcano.sh/v1beta1/queues"


async def call(cluster: harness.Cluster, method: str, path: str, body: Any = None) -> Any:
    async with (
        aiohttp.ClientSession() as session,
        session.request(
            method,
            cluster.url + path,
            data=None if body is None else json.dumps(body),
            headers={
                "Authorization": f"Bearer {cluster.sim.token}",
                "Content-Type": "application/json",
            },
        ) as response,
    ):
        assert response.status < 300, await response.text()
        return await response.json()


async def eventually(check: Callable[[], bool], *, deadline: float = timing.DEADLINE) -> None:
    limit = time.monotonic() + deadline
    while not check():
        if time.monotonic() > limit:
            raise AssertionError(f"not reached within {deadline}s")
        await asyncio.sleep(0.02)


@pytest.fixture
async def cached(
    tmp_path: pathlib.Path,
) -> AsyncIterator[tuple[harness.Cluster, caching.ClusterCache]]:
    from kubernetes_asyncio import client, config

    with harness.running(tmp_path, bookmark_interval=0.2) as cluster:
        for name in ("scheduling.volcano.sh_queues.yaml", "scheduling.volcano.sh_podgroups.yaml"):
            done = await asyncio.to_thread(cluster.kubectl, "apply", "-f", str(CRDS / name))
            assert done.returncode == 0, done.stderr
        await call(cluster, "POST", QUEUES, queue("before", "root"))
        configuration = client.Configuration()
        await config.load_kube_config(
            config_file=str(cluster.kubeconfig), client_configuration=configuration
        )
        async with client.ApiClient(configuration) as api_client:
            cache = caching.ClusterCache()
            tasks = [asyncio.create_task(i.run()) for i in cache.connect(api_client)]
            await eventually(cache.ready, deadline=30.0)
            yield cluster, cache
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


def summary(cache: caching.ClusterCache) -> dict[str, Any]:
    view = cache.view()
    return {
        "queues": {n: (q.parent, q.state.value) for n, q in sorted(view.tree.queues.items())},
        "namespaces": {n: dict(a) for n, a in sorted(view.namespaces.items()) if a},
        "pod_groups": dict(view.pod_groups),
    }


async def test_the_cache_lists_then_follows_every_change(
    cached: tuple[harness.Cluster, caching.ClusterCache],
) -> None:
    cluster, cache = cached
    await call(cluster, "POST", QUEUES, queue("a", "root"))
    await call(cluster, "POST", QUEUES, queue("b", "a"))
    await call(cluster, "DELETE", f"{QUEUES}/before")
    await call(
        cluster,
        "POST",
        "/api/v1/namespaces",
        {"metadata": {"name": "ml", "annotations": {"scheduling.volcano.sh/queue-name": "b"}}},
    )
    await call(
        cluster,
        "POST",
        "/apis/scheduling.volcano.sh/v1beta1/namespaces/ml/podgroups",
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "pg"},
            "spec": {"queue": "b", "minMember": 1},
        },
    )
    expected = {
        "queues": {"a": ("root", "Open"), "b": ("a", "Open")},
        "namespaces": {"ml": {"scheduling.volcano.sh/queue-name": "b"}},
        "pod_groups": {"ml/pg": "b"},
    }
    await eventually(lambda: summary(cache) == expected)


async def test_the_cache_lists_again_after_compaction_and_dropped_watches(
    cached: tuple[harness.Cluster, caching.ClusterCache],
) -> None:
    cluster, cache = cached
    informer = cache.informers[0]
    await eventually(lambda: bool(informer.resource_version))
    # Stop the watch, change the world meanwhile, and compact the versions away: the informer
    # must notice (410) and list again rather than resume from a version that no longer exists.
    await call(cluster, "POST", QUEUES, queue("during", "root"))
    await asyncio.to_thread(cluster.sim.compact)
    await asyncio.to_thread(cluster.sim.drop_watches)
    await call(cluster, "POST", QUEUES, queue("after", "root"))
    await eventually(lambda: set(cache.view().tree.queues) == {"before", "during", "after"})


async def test_a_review_can_wait_for_a_queue_that_is_about_to_arrive(
    cached: tuple[harness.Cluster, caching.ClusterCache],
) -> None:
    cluster, cache = cached
    waiting = asyncio.create_task(cache.wait_for(queues=["soon"], patience=5.0))
    await call(cluster, "POST", QUEUES, queue("soon", "root"))
    missing = await cache.wait_for(queues=["never"], patience=0.05)
    assert (await waiting, missing) == (True, False)


async def test_a_live_read_confirms_a_queue_the_api_server_does_not_have(
    cached: tuple[harness.Cluster, caching.ClusterCache],
) -> None:
    _, cache = cached
    assert await cache.confirm_absent(queues=["never"]) is True


@pytest.mark.parametrize(
    ("forbidden", "ready"),
    [
        pytest.param(r"^/api/v1/nodes", True, id="nodes-only-feed-a-warning"),
        pytest.param(r"^/apis/scheduling\.volcano\.sh/v1beta1/queues", False, id="queues-matter"),
    ],
)
async def test_a_forbidden_list_holds_readiness_back_only_for_what_reviews_need(
    tmp_path: pathlib.Path, forbidden: str, ready: bool
) -> None:
    from kubernetes_asyncio import client, config

    from kubesim import server as kubesim_server

    with harness.running(tmp_path) as cluster:
        for name in ("scheduling.volcano.sh_queues.yaml", "scheduling.volcano.sh_podgroups.yaml"):
            done = await asyncio.to_thread(cluster.kubectl, "apply", "-f", str(CRDS / name))
            assert done.returncode == 0, done.stderr
        cluster.sim.add_fault(
            kubesim_server.Fault(method="GET", path=forbidden, count=None, status=403)
        )
        configuration = client.Configuration()
        await config.load_kube_config(
            config_file=str(cluster.kubeconfig), client_configuration=configuration
        )
        async with client.ApiClient(configuration) as api_client:
            cache = caching.ClusterCache()
            informers = cache.connect(api_client)
            tasks = [asyncio.create_task(i.run()) for i in informers]
            others = [i for i in informers if i.name not in ("nodes", "queues")]
            await eventually(lambda: all(i.synced.is_set() for i in others), deadline=30.0)
            if ready:
                await eventually(cache.ready, deadline=30.0)
            is_ready = cache.ready()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    assert (is_ready, cache.view().node_resources) == (ready, frozenset())


class AbsentCase(NamedTuple):
    cached: tuple[str, ...]
    answers: dict[str, bool | None]
    absent: bool
    read: list[str]


ABSENT = {
    "every missing queue is absent": AbsentCase((), {"a": False, "b": False}, True, ["a", "b"]),
    "one missing queue exists (the cache lags)": AbsentCase(
        (), {"a": False, "b": True}, False, ["a", "b"]
    ),
    "a read without an answer is no proof": AbsentCase((), {"a": None}, False, ["a"]),
    "a cached queue is not read": AbsentCase(("a",), {"b": False}, True, ["b"]),
}


@pytest.mark.parametrize(AbsentCase._fields, list(ABSENT.values()), ids=list(ABSENT))
async def test_a_live_read_tells_whether_a_missing_queue_is_worth_waiting_for(
    cached: tuple[str, ...], answers: dict[str, bool | None], absent: bool, read: list[str]
) -> None:
    cache = caching.ClusterCache()
    cache.reset_queues([queue(name, "root") for name in cached])
    seen: list[str] = []

    async def lookup(name: str) -> bool | None:
        seen.append(name)
        return answers[name]

    cache.lookup_queue = lookup
    result = await cache.confirm_absent(queues=["a", "b"] if "b" in answers else ["a"])
    assert (result, sorted(seen)) == (absent, read)


async def test_without_a_live_read_every_miss_waits() -> None:
    assert await caching.ClusterCache().confirm_absent(queues=["a"]) is False
