"""A minimal Kopf operator against kubesim (kubesim-spec §2.1, §4): create/update/delete handlers,
a timer, an index, finalizers and status patches, through bookmarks, a forced 410, dropped
connections and injected 5xx answers, without missing an event."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import pathlib
import threading
import warnings
from collections.abc import Iterator
from typing import Any

import kopf
import pytest

from kubesim import harness, server
from tests.kubesim import conftest
from tests.kubesim.conftest import PODS, WIDGETS, call

pytestmark = pytest.mark.kubesim_only(
    reason="the operator is tested through kubesim's faults, compaction, dropped watches and "
    "audit records; the e2e suite runs the real operator on the real backend"
)

MERGE = "application/merge-patch+json"


@dataclasses.dataclass
class Recorder:
    """What the handlers saw, appended from the operator's thread."""

    calls: list[tuple[Any, ...]] = dataclasses.field(default_factory=list)
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    def add(self, *entry: Any) -> None:
        with self.lock:
            self.calls.append(entry)

    def of(self, kind: str) -> list[tuple[Any, ...]]:
        with self.lock:
            return [c[1:] for c in self.calls if c[0] == kind]


def make_registry(url: str, recorder: Recorder) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()
    widgets = ("example.com", "v1", "widgets")

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        return kopf.ConnectionInfo(server=url, token="admin")

    @kopf.on.startup(registry=registry)
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.posting.enabled = False
        settings.watching.reconnect_backoff = 0.1
        settings.networking.error_backoffs = [0.1, 0.2, 0.5]
        settings.execution.max_workers = 4

    @kopf.on.create(*widgets, id="created", registry=registry)
    def created(name: str, spec: kopf.Spec, **_: Any) -> dict:
        recorder.add("create", name, spec.get("size"))
        return {"seen": spec.get("size")}

    @kopf.on.update(*widgets, field="spec.size", registry=registry)
    def updated(name: str, new: Any, **_: Any) -> None:
        recorder.add("update", name, new)

    @kopf.on.delete(*widgets, registry=registry)
    def deleted(name: str, **_: Any) -> None:
        recorder.add("delete", name)

    @kopf.timer(*widgets, interval=0.3, registry=registry)
    def tick(name: str, patch: kopf.Patch, **_: Any) -> None:
        recorder.add("tick", name)
        patch.status["ticked"] = True

    @kopf.index("pods", id="by_node", registry=registry)
    def by_node(name: str, spec: kopf.Spec, **_: Any) -> dict:
        return {spec.get("nodeName"): name}

    @kopf.on.create("pods", registry=registry)
    def pod_created(name: str, by_node: kopf.Index, **_: Any) -> None:
        recorder.add("pod", name, sorted(by_node.get(None, [])))

    return registry


@dataclasses.dataclass(frozen=True)
class Operator:
    cluster: harness.Cluster
    recorder: Recorder


@contextlib.contextmanager
def running_operator(cluster: harness.Cluster) -> Iterator[Operator]:
    """The operator of `make_registry` in a thread of its own (kopf cancels foreign tasks)."""
    recorder = Recorder()
    registry = make_registry(cluster.url, recorder)
    ready, stop = threading.Event(), threading.Event()
    failures: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(
                kopf.operator(
                    registry=registry,
                    clusterwide=True,
                    standalone=True,
                    ready_flag=ready,
                    stop_flag=stop,
                )
            )
        except BaseException as exc:  # reported below
            failures.append(exc)

    thread = threading.Thread(target=run, name="kopf-operator", daemon=True)
    thread.start()
    assert ready.wait(20), failures
    try:
        yield Operator(cluster, recorder)
    finally:
        stop.set()
        thread.join(30)
        # kopf 1.45 can leave an API session unclosed when it stops in the middle of a request;
        # finalize it now rather than at interpreter exit, where pytest would report it.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            gc.collect()
    assert not thread.is_alive()
    assert failures == []


@pytest.fixture
def operator(tmp_path: pathlib.Path) -> Iterator[Operator]:
    with harness.running(tmp_path, bookmark_interval=0.3) as cluster:
        asyncio.run(conftest.install_widgets(cluster))
        with running_operator(cluster) as running:
            yield running


async def widget_status(cluster: harness.Cluster, name: str) -> dict:
    answer = await call(cluster, "GET", f"{WIDGETS}/{name}")
    return answer.body.get("status", {}) if answer.status == 200 else {}  # type: ignore[no-any-return]


async def test_handlers_run_with_finalizers_and_status_patches(operator: Operator) -> None:
    cluster, recorder = operator.cluster, operator.recorder
    await call(cluster, "POST", WIDGETS, conftest.widget("w1", size=1))
    await conftest.wait_for(lambda: recorder.of("create") == [("w1", 1)])
    await conftest.wait_for(lambda: _has(widget_status(cluster, "w1"), {"created": {"seen": 1}}))
    await conftest.wait_for(lambda: _has(widget_status(cluster, "w1"), {"ticked": True}))
    stored = cluster.sim.get_object("example.com", "widgets", "default", "w1")
    assert stored is not None
    assert stored["metadata"]["finalizers"] == ["kopf.zalando.org/KopfFinalizerMarker"]
    await call(cluster, "PATCH", f"{WIDGETS}/w1", {"spec": {"size": 2}}, content_type=MERGE)
    await conftest.wait_for(lambda: recorder.of("update") == [("w1", 2)])
    await call(cluster, "DELETE", f"{WIDGETS}/w1")
    await conftest.wait_for(lambda: recorder.of("delete") == [("w1",)])
    await conftest.wait_for(
        lambda: cluster.sim.get_object("example.com", "widgets", "default", "w1") is None
    )


async def test_the_index_is_filled_before_handlers_run(operator: Operator) -> None:
    cluster, recorder = operator.cluster, operator.recorder
    await call(cluster, "POST", PODS, conftest.pod("p1"))
    await conftest.wait_for(lambda: recorder.of("pod") == [("p1", ["p1"])])


async def test_no_event_is_missed_across_410_dropped_watches_and_server_errors(
    operator: Operator,
) -> None:
    cluster, recorder = operator.cluster, operator.recorder
    for i in range(3):
        await call(cluster, "POST", WIDGETS, conftest.widget(f"w{i}", size=i))
    await conftest.wait_for(
        lambda: sorted(recorder.of("create")) == [("w0", 0), ("w1", 1), ("w2", 2)]
    )
    # Drop the watches and hold kopf's next widgets watch for a second: meanwhile w3 is created,
    # w1 changes and the log is compacted, so the watch resumes from an expired RV (410) and kopf
    # must re-list to see both changes.
    cluster.sim.add_fault(
        server.Fault(method="GET", path=r"/widgets\?.*watch=", count=1, status=None, delay=1.0)
    )
    cluster.sim.drop_watches()
    await call(cluster, "POST", WIDGETS, conftest.widget("w3", size=3))
    await call(cluster, "PATCH", f"{WIDGETS}/w1", {"spec": {"size": 10}}, content_type=MERGE)
    cluster.sim.compact()
    # kopf's next two status patches fail with a 503: it retries them.
    cluster.sim.add_fault(
        server.Fault(method="PATCH", path="/widgets/[^/]+/status", count=2, status=503)
    )
    # A plain dropped connection: kopf resumes from its last RV and misses nothing.
    await conftest.wait_for(lambda: ("w3", 3) in recorder.of("create"), deadline=20)
    cluster.sim.drop_watches()
    await call(cluster, "PATCH", f"{WIDGETS}/w2", {"spec": {"size": 20}}, content_type=MERGE)
    await conftest.wait_for(lambda: ("w3", 3) in recorder.of("create"), deadline=20)
    await conftest.wait_for(
        lambda: sorted(recorder.of("update")) == [("w1", 10), ("w2", 20)], deadline=20
    )
    for name, size in (("w1", 10), ("w2", 20), ("w3", 3)):
        await conftest.wait_for(
            lambda n=name: _has(widget_status(cluster, n), {"ticked": True}), deadline=20
        )
        stored = cluster.sim.get_object("example.com", "widgets", "default", name)
        assert stored is not None
        assert stored["spec"]["size"] == size
    verbs = [
        r.verb
        for r in cluster.sim.audit()
        if r.resource == "widgets" and r.verb in ("list", "watch")
    ]
    # The first list and watch, a watch per drop, and a re-list after the 410 of the compaction.
    assert (verbs.count("list") >= 2, verbs.count("watch") >= 3) == (True, True), verbs


async def _has(status: Any, expected: dict) -> bool:
    current = await status
    return all(current.get(k) == v for k, v in expected.items())


async def test_a_crd_created_after_the_operator_started_is_served_to_it(
    tmp_path: pathlib.Path,
) -> None:
    with (
        harness.running(tmp_path, bookmark_interval=0.3) as cluster,
        running_operator(cluster) as op,
    ):
        # kopf's resource observer sees the CRD's watch event, rescans discovery, then watches.
        await conftest.install_widgets(cluster)
        await conftest.wait_for(
            lambda: any(r.resource == "widgets" and r.verb == "watch" for r in cluster.sim.audit())
        )
        await call(cluster, "POST", WIDGETS, conftest.widget("late", size=7))
        await conftest.wait_for(lambda: op.recorder.of("create") == [("late", 7)])
