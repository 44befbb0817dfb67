"""The predicates plugin and node choice: which node a pod lands on, and why none fits."""

from __future__ import annotations

from typing import Any, NamedTuple

import pytest

from queuetree.core import objects, sessions
from tests import builders as b

REQ = objects.NodeSelectorRequirement
TERM = objects.NodeSelectorTerm


def _run(*objs: object) -> sessions.decisions.SessionResult:
    return sessions.run_session(
        b.snapshot(
            b.queue("root"),
            b.queue("q"),
            b.pod_group("ns", "p").queue("q").phase(objects.PodGroupPhase.INQUEUE),
            *objs,  # type: ignore[arg-type]
        ),
        config=b.config(
            [
                b.plugin("gang"),
                b.plugin("predicates"),
                b.plugin("capacity", hierarchy=True),
                b.plugin("nodeorder"),
            ],
            actions=("enqueue", "allocate"),
        ),
        feature_gates=b.GATES_ON,
    )


def _pod() -> b.PodBuilder:
    return b.pod("ns", "p").group("p").requests(cpu="1", memory="1Gi")


class CasesCase(NamedTuple):
    objs: Any
    bind: Any
    reasons: Any


CASES = {
    "an unschedulable node is skipped": CasesCase(
        objs=(
            b.node("a").allocatable(cpu="4", memory="4Gi").unschedulable(),
            b.node("b").allocatable(cpu="2", memory="4Gi"),
            _pod(),
        ),
        bind={"ns/p": "b"},
        reasons={},
    ),
    "a toleration of the unschedulable taint allows a cordoned node": CasesCase(
        objs=(
            b.node("a").allocatable(cpu="4", memory="4Gi").unschedulable(),
            _pod().tolerations(
                objects.Toleration(key="node.kubernetes.io/unschedulable", operator="Exists")
            ),
        ),
        bind={"ns/p": "a"},
        reasons={},
    ),
    "required node affinity with In and Gt": CasesCase(
        objs=(
            b.node("a").allocatable(cpu="4", memory="4Gi").labels(zone="x", gen="3"),
            b.node("b").allocatable(cpu="4", memory="4Gi").labels(zone="y", gen="5"),
            _pod().affinity(
                TERM(match_expressions=(REQ("zone", "In", ("y", "z")), REQ("gen", "Gt", ("4",))))
            ),
        ),
        bind={"ns/p": "b"},
        reasons={},
    ),
    "a tolerated NoSchedule taint is fine, PreferNoSchedule is ignored": CasesCase(
        objs=(
            b.node("a")
            .allocatable(cpu="4", memory="4Gi")
            .taints(
                objects.Taint(key="gpu", value="yes", effect="NoSchedule"),
                objects.Taint(key="slow", effect="PreferNoSchedule"),
            ),
            _pod().tolerations(objects.Toleration(key="gpu", value="yes")),
        ),
        bind={"ns/p": "a"},
        reasons={},
    ),
    "a full node by pod count, and no room anywhere, is explained": CasesCase(
        objs=(
            b.node("a").allocatable(cpu="4", memory="4Gi", pods="1"),
            b.node("b").allocatable(cpu="0", memory="4Gi"),
            b.pod_group("ns", "other").queue("q").phase(objects.PodGroupPhase.RUNNING),
            b.pod("ns", "other").group("other").running_on("a"),
            _pod(),
        ),
        bind={},
        reasons={
            "ns/p": "no node fits the pod: 0/2 nodes are available: 1 Insufficient resources, "
            "1 node(s) had too many pods"
        },
    ),
}


@pytest.mark.parametrize(("objs", "bind", "reasons"), CASES.values(), ids=CASES.keys())
def test_predicates_choose_feasible_nodes_and_explain_when_none_fits(
    objs: tuple[object, ...], bind: dict[str, str], reasons: dict[str, str]
) -> None:
    result = _run(*objs)
    assert (dict(result.bind), dict(result.reasons)) == (bind, reasons)


def test_admission_mode_reclaims_for_unschedulable_pods_but_never_binds_or_pipelines() -> None:
    result = sessions.run_session(
        b.snapshot(
            b.node("n1").allocatable(cpu="1", memory="8Gi"),
            b.queue("owner").deserved(cpu="1"),
            b.queue("borrower"),
            b.pod_group("ns", "victim").queue("borrower").phase(objects.PodGroupPhase.RUNNING),
            b.pod("ns", "victim")
            .group("victim")
            .requests(cpu="1")
            .admitted_to("borrower")
            .running_on("n1"),
            b.pod_group("ns", "claim").queue("owner").phase(objects.PodGroupPhase.INQUEUE),
            b.pod("ns", "claim")
            .group("claim")
            .requests(cpu="1")
            .admitted_to("owner")
            .unschedulable(),
            b.pod_group("ns", "quiet").queue("owner").phase(objects.PodGroupPhase.INQUEUE),
            b.pod("ns", "quiet").group("quiet").requests(cpu="1").admitted_to("owner"),
        ),
        config=b.config(
            [b.plugin("gang", "enableJobStarving", "enableJobPipelined", "enableJobOrder")],
            [b.plugin("predicates"), b.plugin("capacity")],
            actions=("enqueue", "allocate", "reclaim"),
        ),
        feature_gates=b.GATES_ON,
        admission_only=True,
    )
    assert (result.evict, dict(result.pipeline), dict(result.bind)) == (("ns/victim",), {}, {})
