"""Full sessions (queuetree session / Volcano scheduler mode): allocate, backfill, reclaim,
preempt, enqueue, predicates and node order, flat and hierarchical."""

from __future__ import annotations

import dataclasses

import pytest

from queuetree.core import configs, objects, sessions
from tests import builders as b

RUNNING = objects.PodGroupPhase.RUNNING
INQUEUE = objects.PodGroupPhase.INQUEUE
PENDING = objects.PodGroupPhase.PENDING


def _config(
    *, hierarchy: bool, actions: tuple[str, ...], extra: tuple[configs.PluginOption, ...] = ()
) -> configs.SchedulerConfiguration:
    return b.config(
        [
            b.plugin("priority"),
            b.plugin(
                "gang",
                "enableJobOrder",
                "enableJobReady",
                "enableJobPipelined",
                "enableJobStarving",
            ),
            # Conformance votes on preemption only: an enabled reclaim vote in tier 1 would decide
            # reclaim there and capacity (tier 2) would never be asked (Volcano's tier semantics).
            b.plugin("conformance", "enablePreemptable"),
        ],
        [
            b.plugin("predicates"),
            b.plugin("capacity", hierarchy=hierarchy),
            b.plugin("nodeorder"),
            *extra,
        ],
        actions=actions,
    )


def _job(
    name: str, queue: str, phase: objects.PodGroupPhase = INQUEUE, **req: str
) -> tuple[b.PodGroupBuilder, b.PodBuilder]:
    return (
        b.pod_group("ns", name).queue(queue).phase(phase),
        b.pod("ns", name).group(name).requests(**req),
    )


@dataclasses.dataclass(frozen=True)
class Case:
    objects: tuple[object, ...]
    actions: tuple[str, ...] = ("enqueue", "allocate", "backfill")
    hierarchy: bool = True
    bind: dict[str, str] = dataclasses.field(default_factory=dict)
    pipeline: dict[str, str] = dataclasses.field(default_factory=dict)
    evict: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    extra: tuple[configs.PluginOption, ...] = ()


TWO_NODES = (
    b.node("n1").allocatable(cpu="4", memory="8Gi", pods="10"),
    b.node("n2").allocatable(cpu="4", memory="8Gi", pods="10"),
)

CASES = {
    "least-allocated: the pod goes to the emptier node": Case(
        objects=(
            *TWO_NODES,
            b.queue("root"),
            b.queue("q"),
            b.pod_group("ns", "busy").queue("q").phase(RUNNING),
            b.pod("ns", "busy").group("busy").requests(cpu="2", memory="1Gi").running_on("n1"),
            *_job("p1", "q", cpu="1", memory="1Gi"),
        ),
        bind={"ns/p1": "n2"},
    ),
    "an untolerated taint and a node selector steer the pod": Case(
        objects=(
            b.node("tainted")
            .allocatable(cpu="4", memory="8Gi")
            .taints(objects.Taint(key="gpu", value="yes")),
            b.node("plain").allocatable(cpu="4", memory="8Gi").labels(zone="a"),
            b.node("other").allocatable(cpu="4", memory="8Gi").labels(zone="b"),
            b.queue("root"),
            b.queue("q"),
            b.pod_group("ns", "p1").queue("q").phase(INQUEUE),
            b.pod("ns", "p1").group("p1").requests(cpu="1").node_selector(zone="a"),
        ),
        bind={"ns/p1": "plain"},
    ),
    "a capability in flat mode binds only what fits": Case(
        objects=(
            *TWO_NODES,
            b.queue("q").capability(cpu="1"),
            *_job("p1", "q", cpu="1"),
            *_job("p2", "q", cpu="1"),
        ),
        hierarchy=False,
        bind={"ns/p1": "n1"},
    ),
    "a best-effort pod is placed by backfill": Case(
        objects=(*TWO_NODES, b.queue("root"), b.queue("q"), *_job("be", "q")),
        bind={"ns/be": "n1"},
    ),
    "a gang binds all of minMember or nothing": Case(
        objects=(
            b.node("n1").allocatable(cpu="2", memory="8Gi"),
            b.queue("root"),
            b.queue("q"),
            b.pod_group("ns", "g").queue("q").phase(INQUEUE).min_member(3),
            *(b.pod("ns", f"g{i}").group("g").requests(cpu="1") for i in range(3)),
        ),
    ),
    "fix: ancestor shares follow allocations (reference: a2 binds, its parent looking idle)": Case(
        objects=(
            b.node("n1").allocatable(cpu="4", memory="8Gi"),
            b.queue("root"),
            b.queue("A").deserved(cpu="4"),
            b.queue("a1").parent("A"),
            b.queue("a2").parent("A"),
            b.queue("B").deserved(cpu="4"),
            b.queue("b1").parent("B"),
            *_job("j-a1", "a1", cpu="3"),
            *_job("j-a2", "a2", cpu="1"),
            *_job("j-b1", "b1", cpu="1"),
        ),
        bind={"ns/j-a1": "n1", "ns/j-b1": "n1"},
    ),
    "a pod group whose minResources exceed the queue stays Pending": Case(
        objects=(
            *TWO_NODES,
            b.queue("root"),
            b.queue("q").capability(cpu="1"),
            b.pod_group("ns", "big").queue("q").min_resources(cpu="2"),
            b.pod("ns", "big").group("big").requests(cpu="2"),
        ),
    ),
    "an unknown plugin is ignored with a warning": Case(
        objects=(*TWO_NODES, b.queue("root"), b.queue("q"), *_job("p1", "q", cpu="1")),
        extra=(b.plugin("binpack"),),
        bind={"ns/p1": "n1"},
        warnings=(
            "tier 2: plugin 'binpack' is not supported by queuetree and is ignored (supported: "
            "capacity, conformance, gang, nodeorder, predicates, priority)",
        ),
    ),
    "reclaim: a best-effort queue's pod makes room for a queue under its deserved": Case(
        objects=(
            b.node("n1").allocatable(cpu="1", memory="8Gi"),
            b.queue("owner").deserved(cpu="1"),
            b.queue("borrower"),
            *_job("victim", "borrower", RUNNING, cpu="1"),
            *_job("claim", "owner", cpu="1"),
        ),
        hierarchy=False,
        actions=("enqueue", "reclaim", "allocate"),
        evict=("ns/victim",),
        pipeline={"ns/claim": "n1"},
    ),
    "reclaim: guarantee protection keeps a queue's pods below its guarantee": Case(
        objects=(
            b.node("n1").allocatable(cpu="1", memory="8Gi"),
            b.queue("owner").deserved(cpu="1"),
            b.queue("guarded").guarantee(memory="4Gi"),
            *_job("victim", "guarded", RUNNING, cpu="1"),
            *_job("claim", "owner", cpu="1"),
        ),
        hierarchy=False,
        actions=("enqueue", "reclaim", "allocate"),
    ),
    "preempt: a higher-priority job evicts a lower one in the same queue": Case(
        objects=(
            b.node("n1").allocatable(cpu="1", memory="8Gi"),
            objects.PriorityClass(name="high", value=100),
            b.queue("root"),
            b.queue("q"),
            *_job("low", "q", RUNNING, cpu="1"),
            b.pod_group("ns", "high").queue("q").phase(INQUEUE).priority_class("high"),
            b.pod("ns", "high").group("high").requests(cpu="1"),
        ),
        actions=("enqueue", "allocate", "preempt"),
        evict=("ns/low",),
        pipeline={"ns/high": "n1"},
    ),
    "preempt: a job over its queue's capability makes room within the queue": Case(
        objects=(
            b.node("n1").allocatable(cpu="4", memory="8Gi"),
            objects.PriorityClass(name="high", value=100),
            b.queue("root"),
            b.queue("q").capability(cpu="1"),
            *_job("low", "q", RUNNING, cpu="1"),
            b.pod_group("ns", "high").queue("q").phase(INQUEUE).priority_class("high"),
            b.pod("ns", "high").group("high").requests(cpu="1"),
        ),
        actions=("enqueue", "allocate", "preempt"),
        evict=("ns/low",),
        pipeline={"ns/high": "n1"},
    ),
    "preempt: an equal-priority job is not a victim": Case(
        objects=(
            b.node("n1").allocatable(cpu="1", memory="8Gi"),
            b.queue("root"),
            b.queue("q"),
            *_job("low", "q", RUNNING, cpu="1"),
            *_job("same", "q", cpu="1"),
        ),
        actions=("enqueue", "allocate", "preempt"),
    ),
}


def _fix_running(objs: tuple[object, ...]) -> tuple[object, ...]:
    # Running jobs of the table run on n1.
    out: list[object] = []
    for item in objs:
        if isinstance(item, b.PodBuilder) and item.build().name in ("victim", "low"):
            item = item.running_on("n1")
        out.append(item)
    return tuple(out)


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_session_binds_pipelines_and_evicts_as_configured(case: Case) -> None:
    result = sessions.run_session(
        b.snapshot(*_fix_running(case.objects)),  # type: ignore[arg-type]
        config=_config(hierarchy=case.hierarchy, actions=case.actions, extra=case.extra),
        feature_gates=b.GATES_ON,
    )
    assert (
        result.errors,
        result.warnings,
        dict(result.bind),
        dict(result.pipeline),
        result.evict,
    ) == ((), case.warnings, case.bind, case.pipeline, case.evict)


def test_hierarchical_figures_report_inherited_and_real_capability() -> None:
    result = sessions.run_session(
        b.snapshot(
            b.node("n1").allocatable(cpu="8", memory="8Gi", gpu="2"),
            b.queue("root"),
            b.queue("org").capability(cpu="4").guarantee(cpu="1"),
            b.queue("team").parent("org").deserved(cpu="2"),
        ),
        config=_config(hierarchy=True, actions=("enqueue",)),
        feature_gates=b.GATES_ON,
    )
    team = result.queues["team"]
    assert (team.capability, team.real_capability, team.deserved, team.share) == (
        b.res(cpu="4", memory="0", **{b.GPU: "2"}).__class__(
            milli_cpu=4000, memory=float("inf"), scalars={b.GPU: float("inf")}
        ),
        b.res(cpu="4").__class__(
            milli_cpu=4000, memory=float("inf"), scalars={b.GPU: float("inf")}
        ),
        b.res(cpu="2"),
        0.0,
    )
