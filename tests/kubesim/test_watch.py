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
from tests.kubesim import backends, conftest
from tests.kubesim.conftest import CONFIGMAPS, Api, call

COMPACTION = "compaction is kubesim's test hook (sim.compact); etcd compacts on its own schedule"


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

    def __init__(self) -> None:
        self.sessions: list[aiohttp.ClientSession] = []
        self.responses: list[aiohttp.ClientResponse] = []


@pytest.fixture
async def session() -> AsyncIterator[Watcher]:
    watcher = Watcher()
    try:
        yield watcher
    finally:
        for response in watcher.responses:
            response.close()
        for client_session in watcher.sessions:
            await client_session.close()


async def open_watch(
    session: Watcher, target: Api | harness.Cluster, path: str, **params: str
) -> Stream:
    api = target if isinstance(target, Api) else backends.of_kubesim(target)
    client_session = api.session()
    session.sessions.append(client_session)
    response = await client_session.get(
        api.url + api.path(path), params={"watch": "true", **params}
    )
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


async def create(cluster: Api | harness.Cluster, name: str, **metadata: Any) -> dict:
    answer = await call(cluster, "POST", CONFIGMAPS, conftest.configmap(name, **metadata))
    assert answer.status == 201
    return answer.body  # type: ignore[no-any-return]


async def test_a_list_carries_its_resource_version_and_sorted_items(
    api: Api,
) -> None:
    for name in ("b", "a", "c"):
        await create(api, name)
    answer = await call(api, "GET", "/api/v1/configmaps")
    items = answer.body["items"]
    keys = [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in items]
    assert answer.body["kind"] == "ConfigMapList"
    assert keys == sorted(keys)
    assert [n for ns, n in keys if ns == api.namespace and n != conftest.ROOT_CA] == ["a", "b", "c"]
    assert all("kind" not in i and "apiVersion" not in i for i in items)
    assert int(answer.body["metadata"]["resourceVersion"]) >= max(
        int(i["metadata"]["resourceVersion"]) for i in items
    )


async def test_limit_and_continue_page_through_a_list(api: Api) -> None:
    for name in ("a", "b", "c", "d", "e"):
        await create(api, name)
    names, token = [], ""
    while True:
        params = {"limit": "2", **({"continue": token} if token else {})}
        page = (await call(api, "GET", CONFIGMAPS, params=params)).body
        names.append([i["metadata"]["name"] for i in page["items"]])
        token = page["metadata"].get("continue", "")
        if not token:
            break
    # A real namespace also holds kube-root-ca.crt, which sorts after the test's own.
    last = ["e", conftest.ROOT_CA] if api.real else ["e"]
    assert names == [["a", "b"], ["c", "d"], last]


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
        ({"fieldSelector": "metadata.name!=c,metadata.namespace={namespace}"}, ["a", "b"]),
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
async def test_selectors_filter_lists(api: Api, selector: dict, expected: list[str]) -> None:
    await create(api, "a", labels={"tier": "web"})
    await create(api, "b", labels={"tier": "db", "zone": "z1"})
    await create(api, "c")
    answer = await call(api, "GET", CONFIGMAPS, params=selector)
    assert conftest.names(answer.body) == expected


async def test_an_unsupported_field_selector_is_400(api: Api) -> None:
    answer = await call(api, "GET", CONFIGMAPS, params={"fieldSelector": "data.k=v"})
    assert (answer.status, answer.body["reason"]) == (400, "BadRequest")


async def test_pods_support_node_name_and_phase_field_selectors(api: Api) -> None:
    await call(api, "POST", conftest.PODS, conftest.pod("p1", nodeName="n1"))
    await call(api, "POST", conftest.PODS, conftest.pod("p2"))
    by_node = await call(api, "GET", conftest.PODS, params={"fieldSelector": "spec.nodeName=n1"})
    pending = await call(
        api,
        "GET",
        conftest.PODS,
        params={"fieldSelector": "status.phase=Pending,spec.nodeName="},
    )
    assert [[i["metadata"]["name"] for i in a.body["items"]] for a in (by_node, pending)] == [
        ["p1"],
        ["p2"],
    ]


async def test_a_watch_without_rv_starts_with_synthetic_added_events(
    api: Api, session: Watcher
) -> None:
    first = await create(api, "a")
    stream = await open_watch(session, api, CONFIGMAPS)
    assert summary([await stream.next()]) == [("ADDED", "a", first["metadata"]["resourceVersion"])]


async def test_watch_events_carry_exactly_the_object_and_rv_each_write_returned(
    api: Api, session: Watcher
) -> None:
    listed = (await call(api, "GET", CONFIGMAPS)).body["metadata"]["resourceVersion"]
    stream = await open_watch(session, api, CONFIGMAPS, resourceVersion=listed)
    created = await create(api, "a")
    patched = (
        await call(
            api,
            "PATCH",
            f"{CONFIGMAPS}/a",
            {"data": {"k": "2"}},
            content_type="application/merge-patch+json",
        )
    ).body
    await call(api, "DELETE", f"{CONFIGMAPS}/a")
    events = [await stream.next() for _ in range(3)]
    assert [(e["type"], e["object"]) for e in events[:2]] == [
        ("ADDED", created),
        ("MODIFIED", patched),
    ]
    assert events[2]["type"] == "DELETED"
    assert int(events[2]["object"]["metadata"]["resourceVersion"]) > int(
        patched["metadata"]["resourceVersion"]
    )


async def test_a_watch_from_an_rv_replays_the_later_events(api: Api, session: Watcher) -> None:
    a = await create(api, "a")
    b = await create(api, "b")
    c = await create(api, "c")
    stream = await open_watch(
        session, api, CONFIGMAPS, resourceVersion=a["metadata"]["resourceVersion"]
    )
    events = [await stream.next(), await stream.next()]
    assert summary(events) == [
        ("ADDED", "b", b["metadata"]["resourceVersion"]),
        ("ADDED", "c", c["metadata"]["resourceVersion"]),
    ]


@pytest.mark.kubesim_only(
    reason="the bookmark interval is kubesim's option (0.2 s here); kube-apiserver sends one "
    "about a minute into a watch, too late for a unit test"
)
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


async def test_a_watch_ends_after_timeout_seconds(api: Api, session: Watcher) -> None:
    listed = (await call(api, "GET", CONFIGMAPS)).body["metadata"]["resourceVersion"]
    stream = await open_watch(session, api, CONFIGMAPS, resourceVersion=listed, timeoutSeconds="1")
    assert await stream.until_end(wait=5) == []


@pytest.mark.kubesim_only(reason=COMPACTION)
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


@pytest.mark.kubesim_only(reason="dropping every watch stream is kubesim's test hook")
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


async def test_selector_transitions_become_added_and_deleted(api: Api, session: Watcher) -> None:
    await create(api, "a")
    listed = (await call(api, "GET", CONFIGMAPS)).body["metadata"]["resourceVersion"]
    stream = await open_watch(
        session, api, CONFIGMAPS, resourceVersion=listed, labelSelector="pick=yes"
    )
    for labels in ({"pick": "yes"}, {"pick": "yes", "x": "1"}, {"pick": "no"}):
        await call(
            api,
            "PATCH",
            f"{CONFIGMAPS}/a",
            {"metadata": {"labels": labels}},
            content_type="application/merge-patch+json",
        )
    events = [await stream.next() for _ in range(3)]
    current = await api.get(f"{CONFIGMAPS}/a")
    # Leaving the selection is a DELETED event with the last state that matched, at the RV
    # of the change that made it leave (the watch cache's rule).
    assert [(e["type"], e["object"]["metadata"]["labels"]) for e in events] == [
        ("ADDED", {"pick": "yes"}),
        ("MODIFIED", {"pick": "yes", "x": "1"}),
        ("DELETED", {"pick": "yes", "x": "1"}),
    ]
    assert (
        events[2]["object"]["metadata"]["resourceVersion"]
        == (current["metadata"]["resourceVersion"])
    )


async def list_and_watch(core: client.CoreV1Api, namespace: str) -> str:
    """Create, list, watch and patch one ConfigMap; the RV of its creation."""
    created = await core.create_namespaced_config_map(
        namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="a"), data={"k": "v"})
    )
    listed = await core.list_namespaced_config_map(namespace)
    assert [i.metadata.name for i in listed.items if i.metadata.name != conftest.ROOT_CA] == ["a"]
    seen = []
    async with watch.Watch().stream(
        core.list_namespaced_config_map,
        namespace,
        resource_version=created.metadata.resource_version,
        allow_watch_bookmarks=True,
        timeout_seconds=5,
    ) as stream:
        await core.patch_namespaced_config_map("a", namespace, {"data": {"k": "2"}})
        async for event in stream:
            seen.append((event["type"], event["object"].data))
            break
    assert seen == [("MODIFIED", {"k": "2"})]
    return str(created.metadata.resource_version)


async def test_kubernetes_asyncio_lists_and_watches(api: Api) -> None:
    await config.load_kube_config(config_file=str(api.kubeconfig))
    async with client.ApiClient() as api_client:
        await list_and_watch(client.CoreV1Api(api_client), api.namespace)


@pytest.mark.kubesim_only(reason=COMPACTION)
async def test_kubernetes_asyncio_sees_410_after_compaction(kubesim: harness.Cluster) -> None:
    await config.load_kube_config(config_file=str(kubesim.kubeconfig))
    async with client.ApiClient() as api_client:
        core = client.CoreV1Api(api_client)
        created = await list_and_watch(core, "default")
        kubesim.sim.compact()
        with pytest.raises(exceptions.ApiException) as caught:
            await drain(core, created)
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


@pytest.mark.kubesim_only(reason="it writes to kubesim's store directly, faster than a watch reads")
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
    api: Api, session: Watcher
) -> None:
    await create(api, "a")
    stream = await open_watch(
        session,
        api,
        CONFIGMAPS,
        sendInitialEvents="true",
        allowWatchBookmarks="true",
        resourceVersionMatch="NotOlderThan",
    )
    events = [await stream.next()]
    while events[-1]["type"] != "BOOKMARK":
        events.append(await stream.next())
    added = [e["object"]["metadata"]["name"] for e in events[:-1] if e["type"] == "ADDED"]
    assert ([n for n in added if n != conftest.ROOT_CA], len(added)) == (["a"], len(events) - 1)
    assert events[-1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


async def test_concurrent_writes_reach_a_watcher_in_rv_order_exactly_as_written(
    api: Api, session: Watcher
) -> None:
    names = [f"c{i}" for i in range(10)]
    for name in names:
        await create(api, name)
    listed = (await call(api, "GET", CONFIGMAPS)).body["metadata"]["resourceVersion"]
    stream = await open_watch(session, api, CONFIGMAPS, resourceVersion=listed)

    async def bump(name: str, n: int) -> dict:
        answer = await call(
            api,
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
