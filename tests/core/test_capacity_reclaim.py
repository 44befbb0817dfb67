"""``queuetree.core.capacity_reclaim``: which pods reclaim may take."""

from __future__ import annotations

import pytest

from queuetree.core import objects, sessions
from tests import builders as b

RECLAIM_CONFIG = b.config(
    [b.plugin("gang", "enableJobStarving", "enableJobPipelined")],
    [b.plugin("predicates"), b.plugin("capacity")],
    actions=("enqueue", "reclaim"),
)
GUARANTEED_PODS = {
    "fix: a guarantee of 1 pod keeps one of two pods, not both "
    "(Volcano's figures count no pods: it protects every pod)": (1, ("ns/v1",)),
    "a guarantee of 2 pods keeps both": (2, ()),
}


@pytest.mark.parametrize(
    ("guarantee", "evicted"), GUARANTEED_PODS.values(), ids=GUARANTEED_PODS.keys()
)
def test_a_guarantee_of_pods_keeps_that_many_pods_from_reclaim(
    guarantee: int, evicted: tuple[str, ...]
) -> None:
    running = [
        item
        for name in ("v0", "v1")
        for item in (
            b.pod_group("ns", name).queue("borrower").phase(objects.PodGroupPhase.RUNNING),
            b.pod("ns", name).group(name).requests(cpu="1").running_on("n1").created(int(name[1])),
        )
    ]
    result = sessions.run_session(
        b.snapshot(
            b.node("n1").allocatable(cpu="2", memory="8Gi", pods="10"),
            b.queue("owner").deserved(cpu="1"),
            b.queue("borrower").guarantee(pods=str(guarantee)),
            *running,
            b.pod_group("ns", "claim").queue("owner").phase(objects.PodGroupPhase.INQUEUE),
            b.pod("ns", "claim").group("claim").requests(cpu="1"),
        ),
        config=RECLAIM_CONFIG,
        feature_gates=b.GATES_ON,
    )
    assert result.evict == evicted
