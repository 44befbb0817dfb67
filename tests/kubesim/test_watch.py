"""Lists and watches (kubesim-spec §2.6): RVs, replay, bookmarks, timeouts, 410 after compaction,
dropped streams, selectors and their transitions, limit/continue; raw HTTP and kubernetes-asyncio.
"""

from __future__ import annotations

import asyncio
import json
import pathlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client, config, watch
from kubernetes_asyncio.client import exceptions

from kubesim import harness
from tests.kubesim import conftest
from tests.kubesim.conftest import CONFIGMAPS, call


@pytest.fixture
def fast_bookmarks(tmp_path: pathlib.Path) -> Iterator[harness.Cluster]:
    with harness.running(tmp_path, bookmark_interval=0.2) as cluster:
        yield cluster


class Stream:
    """A raw watch stream: decoded events as they arrive."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self.response = response

    async def next(self, wait: float = 10.0) -> dict | None:
        line = await asyncio.wait_for(self.response.content.readline(), wait)
        return json.loads(line) if line else None

    async def until_end(self, wait: float = 10.0) -> list[dict]:
        events = []
        while (event := await self.next(wait)) is not None:
            events.append(event)
        return events


class Watcher:
    """Opens raw watch streams and closes them all at the end of the test."""

    def __init__(self, session: Watcher) -> None:
        self.session = session
        self.responses: list[aiohttp.ClientResponse] = []


@pytest.fixture
async def session() -> AsyncIterator[Watcher]:
    async with aiohttp.ClientSession(headers={"Authorization": "Bearer admin"}) as s:
        watcher = Watcher(s)
        try:
            yield watcher
        finally:
            for response in watcher.responses:
                response.close()


async def open_watch(
    session: Watcher, cluster: harness.Cluster, path: str, **params: str
) -> Stream:
    response = await session.session.get(cluster.url + path, params={"watch": "true", **params})
    session.responses.append(response)
    assert response.status == 200
    return Stream(response)


def summary(events: list[dict]) -> list[tuple[str, str, str]]:
    return [
        (
            e["type"],
            e["object"]["metadata"].get("name", ""),
            e["object"]["metadata"]["resourceVersion"],
        )
        for e in events
    ]


async def create(cluster: harness.Cluster, name: str, **metadata: Any) -> dict:
    answer = await call(cluster, "POST", CONFIGMAPS, conftest.configmap(name, **metadata))
    assert answer.status == 201
    return answer.body  # type: ignore[no-any-return]


async def test_a_list_carries_its_resource_version_and_sorted_items(
    kubesim: harness.Cluster,
) -> None:
    for name in ("b", "a", "c"):
        await create(kubesim, name)
    answer = await call(kubesim, "GET", "/api/v1/configmaps")
    assert answer.body["kind"] == "ConfigMapList"
    assert [i["metadata"]["name"] for i in answer.body["items"]] == ["a", "b", "c"]
    assert all("kind" not in i and "apiVersion" not in i for i in answer.body["items"])
    assert int(answer.body["metadata"]["resourceVersion"]) >= max(
        int(i["metadata"]["resourceVersion"]) for i in answer.body["items"]
    )


async def test_limit_and_continue_page_through_a_list(kubesim: harness.Cluster) -> None:
    for name in ("a", "b", "c", "d", "e"):
        await create(kubesim, name)
    names, token = [], ""
    while True:
        params = {"limit": "2", **({"continue": token} if token else {})}
        page = (await call(kubesim, "GET", CONFIGMAPS, params=params)).body
        names.append([i["metadata"]["name"] for i in page["items"]])
        token = page["metadata"].get("continue", "")
        if not token:
            break
    assert names == [["a", "b"], ["c", "d"], ["e"]]


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ({"labelSelector": "tier=web"}, ["a"]),
        ({"labelSelector": "tier!=web"}, ["b", "c"]),
        ({"labelSelector": "tier in (web,db)"}, ["a", "b"]),
        ({"labelSelector": "tier notin (web)"}, ["b", "c"]),
        ({"labelSelector": "tier"}, ["a", "b"]),
        ({"labelSelector": "!tier"}, ["c"]),
        ({"labelSelector": "tier==db,zone=z1"}, ["b"]),
        ({"fieldSelector": "metadata.name=c"}, ["c"]),
        ({"fieldSelector": "metadata.name!=c,metadata.namespace=default"}, ["a", "b"]),
    ],
    ids=[
        "equals",
        "not equals",
        "in",
        "notin",
        "exists",
        "does not exist",
        "two requirements",
        "field equals",
        "field not equals",
    ],
)
async def test_selectors_filter_lists(
    kubesim: harness.Cluster, selector: dict, expected: list[str]
) -> None:
    await create(kubesim, "a", labels={"tier": "web"})
    await create(kubesim, "b", labels={"tier": "db", "zone": "z1"})
    await create(kubesim, "c")
    answer = await call(kubesim, "GET", CONFIGMAPS, params=selector)
    assert [i["metadata"]["name"] for i in answer.body["items"]] == expected


async def test_an_unsupported_field_selector_is_400(kubesim: harness.Cluster) -> None:
    answer = await call(kubesim, "GET", CONFIGMAPS, params={"fieldSelector": "data.k=v"})
    assert (answer.status, answer.body["reason"]) == (400, "BadRequest")


async def test_pods_support_node_name_and_phase_field_selectors(kubesim: harness.Cluster) -> None:
    await call(kubesim, "POST", conftest.PODS, conftest.pod("p1", nodeName="n1"))
    await call(kubesim, "POST", conftest.PODS, conftest.pod("p2"))
    by_node = await call(
        kubesim, "GET", "/api/v1/pods", params={"fieldSelector": "spec.nodeName=n1"}
    )
    pending = await call(
        kubesim,
        "GET",
        "/api/v1/pods",
        params={"fieldSelector": "status.phase=Pending,spec.nodeName="},
    )
    assert [[i["metadata"]["name"] for i in a.body["items"]] for a in (by_node, pending)] == [
        ["p1"],
        ["p2"],
    ]


async def test_a_watch_without_rv_starts_with_synthetic_added_events(
    kubesim: harness.Cluster, session: Watcher
) -> None:
    first = await create(kubesim, "a")
    stream = await open_watch(session, kubesim, CONFIGMAPS)
    assert summary([await stream.next()]) == [("ADDED", "a", first["metadata"]["resourceVersion"])]


async def test_watch_events_carry_exactly_the_object_and_rv_each_write_returned(
    kubesim: harness.Cluster, session: Watcher
) -> None:
    listed = (await call(kubesim, "GET", CONFIGMAPS)).body["metadata"]["resourceVersion"]
    stream = await open_watch(session, kubesim, CONFIGMAPS, resourceVersion=listed)
    created = await create(kubesim, "a")
    patched = (
        await call(
            kubesim,
            "PATCH",
            f"{CONFIGMAPS}/a",
            {"data": {"k": "2"}},
            content_type="application/merge-patch+json",
        )
    ).body
    await call(kubesim, "DELETE", f"{CONFIGMAPS}/a")
    events = [await stream.next() for _ in range(3)]
    assert [(e["type"], e["object"]) for e in events[:2]] == [
        ("ADDED", created),
        ("MODIFIED", patched),
    ]
    assert events[2]["type"] == "DELETED"
    assert int(events[2]["object"]["metadata"]["resourceVersion"]) > int(
        patched["metadata"]["resourceVersion"]
    )


async def test_a_watch_from_an_rv_replays_the_later_events(
    kubesim: harness.Cluster, session: Watcher
) -> None:
    a = await create(kubesim, "a")
    b = await create(kubesim, "b")
    c = await create(kubesim, "c")
    stream = await open_watch(
        session, kubesim, CONFIGMAPS, resourceVersion=a["metadata"]["resourceVersion"]
    )
    events = [await stream.next(), await stream.next()]
    assert summary(events) == [
        ("ADDED", "b", b["metadata"]["resourceVersion"]),
        ("ADDED", "c", c["metadata"]["resourceVersion"]),
    ]


async def test_bookmarks_arrive_when_allowed(
    fast_bookmarks: harness.Cluster, session: Watcher
) -> None:
    listed = (await call(fast_bookmarks, "GET", CONFIGMAPS)).body["metadata"]["resourceVersion"]
    stream = await open_watch(
        session, fast_bookmarks, CONFIGMAPS, resourceVersion=listed, allowWatchBookmarks="true"
    )
    event = await stream.next()
    assert event == {
        "type": "BOOKMARK",
        "object": {
            "kind": "ConfigMap",
            "apiVersion": "v1",
            "metadata": {"resourceVersion": listed},
        },
    }


async def test_a_watch_ends_after_timeout_seconds(
    kubesim: harness.Cluster, session: Watcher
) -> None:
    listed = (await call(kubesim, "GET", CONFIGMAPS)).body["metadata"]["resourceVersion"]
    stream = await open_watch(
        session, kubesim, CONFIGMAPS, resourceVersion=listed, timeoutSeconds="1"
    )
    assert await stream.until_end(wait=5) == []


async def test_a_watch_from_a_compacted_rv_gets_410_expired(
    kubesim: harness.Cluster, session: Watcher
) -> None:
    old = await create(kubesim, "a")
    await create(kubesim, "b")
    floor = kubesim.sim.compact()
    old_rv = old["metadata"]["resourceVersion"]
    stream = await open_watch(
        session, kubesim, CONFIGMAPS, resourceVersion=old["metadata"]["resourceVersion"]
    )
    events = await stream.until_end()
    assert events == [
        {
            "type": "ERROR",
            "object": {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": f"too old resource version: {old_rv} ({floor})",
                "reason": "Expired",
                "code": 410,
            },
        }
    ]


async def test_drop_watches_closes_every_stream(kubesim: harness.Cluster, session: Watcher) -> None:
    listed = (await call(kubesim, "GET", CONFIGMAPS)).body["metadata"]["resourceVersion"]
    streams = [
        await open_watch(session, kubesim, CONFIGMAPS, resourceVersion=listed) for _ in range(3)
    ]
    await create(kubesim, "a")
    firsts = [await s.next() for s in streams]
    kubesim.sim.drop_watches()
    assert [e["type"] for e in firsts] == ["ADDED"] * 3
    assert [await s.until_end() for s in streams] == [[], [], []]


async def test_selector_transitions_become_added_and_deleted(
    kubesim: harness.Cluster, session: Watcher
) -> None:
    await create(kubesim, "a")
    listed = (await call(kubesim, "GET", CONFIGMAPS)).body["metadata"]["resourceVersion"]
    stream = await open_watch(
        session, kubesim, CONFIGMAPS, resourceVersion=listed, labelSelector="pick=yes"
    )
    for labels in ({"pick": "yes"}, {"pick": "yes", "x": "1"}, {"pick": "no"}):
        await call(
            kubesim,
            "PATCH",
            f"{CONFIGMAPS}/a",
            {"metadata": {"labels": labels}},
            content_type="application/merge-patch+json",
        )
    events = [await stream.next() for _ in range(3)]
    assert [(e["type"], e["object"]["metadata"]["labels"]) for e in events] == [
        ("ADDED", {"pick": "yes"}),
        ("MODIFIED", {"pick": "yes", "x": "1"}),
        ("DELETED", {"pick": "no", "x": "1"}),
    ]


async def test_kubernetes_asyncio_lists_watches_and_sees_410(kubesim: harness.Cluster) -> None:
    await config.load_kube_config(config_file=str(kubesim.kubeconfig))
    async with client.ApiClient() as api_client:
        core = client.CoreV1Api(api_client)
        created = await core.create_namespaced_config_map(
            "default", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="a"), data={"k": "v"})
        )
        listed = await core.list_namespaced_config_map("default")
        assert [i.metadata.name for i in listed.items] == ["a"]
        seen = []
        async with watch.Watch().stream(
            core.list_namespaced_config_map,
            "default",
            resource_version=created.metadata.resource_version,
            allow_watch_bookmarks=True,
            timeout_seconds=5,
        ) as stream:
            await core.patch_namespaced_config_map("a", "default", {"data": {"k": "2"}})
            async for event in stream:
                seen.append((event["type"], event["object"].data))
                break
        assert seen == [("MODIFIED", {"k": "2"})]
        kubesim.sim.compact()
        with pytest.raises(exceptions.ApiException) as caught:
            await drain(core, created.metadata.resource_version)
        assert caught.value.status == 410


async def drain(core: client.CoreV1Api, resource_version: str) -> None:
    async with watch.Watch().stream(
        core.list_namespaced_config_map,
        "default",
        resource_version=resource_version,
        timeout_seconds=5,
    ) as stream:
        async for _ in stream:
            pass


async def test_a_watcher_overtaken_by_log_compaction_gets_410(
    tmp_path: pathlib.Path, session: Watcher
) -> None:
    with harness.running(tmp_path, max_events=4) as cluster:
        listed = (await call(cluster, "GET", CONFIGMAPS)).body["metadata"]["resourceVersion"]
        stream = await open_watch(session, cluster, CONFIGMAPS, resourceVersion=listed)
        api = cluster.sim.api
        assert api is not None

        def burst() -> None:
            # Ten writes in one tick of the server's loop: the watcher cannot read in between.
            for i in range(10):
                obj = conftest.configmap(f"c{i}")
                obj["metadata"]["namespace"] = "default"
                api.store.create(("", "configmaps"), ("default", f"c{i}"), obj=obj)

        cluster.sim.call(burst)
        events = await stream.until_end()
        assert [(e["type"], e["object"]["code"], e["object"]["reason"]) for e in events] == [
            ("ERROR", 410, "Expired")
        ]
        assert events[0]["object"]["message"].startswith(f"too old resource version: {listed} (")


async def test_send_initial_events_ends_with_an_annotated_bookmark(
    kubesim: harness.Cluster, session: Watcher
) -> None:
    await create(kubesim, "a")
    stream = await open_watch(
        session,
        kubesim,
        CONFIGMAPS,
        sendInitialEvents="true",
        allowWatchBookmarks="true",
        resourceVersionMatch="NotOlderThan",
    )
    first, second = await stream.next(), await stream.next()
    assert (first["type"], first["object"]["metadata"]["name"]) == ("ADDED", "a")
    assert (second["type"], second["object"]["metadata"]["annotations"]) == (
        "BOOKMARK",
        {"k8s.io/initial-events-end": "true"},
    )


async def test_concurrent_writes_reach_a_watcher_in_rv_order_exactly_as_written(
    kubesim: harness.Cluster, session: Watcher
) -> None:
    names = [f"c{i}" for i in range(10)]
    for name in names:
        await create(kubesim, name)
    listed = (await call(kubesim, "GET", CONFIGMAPS)).body["metadata"]["resourceVersion"]
    stream = await open_watch(session, kubesim, CONFIGMAPS, resourceVersion=listed)

    async def bump(name: str, n: int) -> dict:
        answer = await call(
            kubesim,
            "PATCH",
            f"{CONFIGMAPS}/{name}",
            {"data": {"n": str(n)}},
            content_type="application/merge-patch+json",
        )
        assert answer.status == 200
        return answer.body  # type: ignore[no-any-return]

    written = await asyncio.gather(*(bump(name, n) for n in range(10) for name in names))
    events = [await stream.next() for _ in written]

    def rv(obj: dict) -> int:
        return int(obj["metadata"]["resourceVersion"])

    # Every write's answer arrives once, in RV order, as the very object the write returned.
    assert [e["object"] for e in events] == sorted(written, key=rv)
