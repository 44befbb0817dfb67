"""Properties over generated trees: admission never over-commits any queue, and the result does
not depend on the order of the input."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from queuetree.core import objects, sessions
from tests import builders as b
from tests import properties


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[object], dict[str, str]]:
    """A random tree of up to 7 queues under root and up to 20 gated pods in random queues."""
    count = draw(st.integers(min_value=1, max_value=7))
    parents: dict[str, str] = {}
    items: list[object] = [b.node("n1").allocatable(cpu="64", memory="64Gi"), b.queue("root")]
    for i in range(count):
        name = f"q{i}"
        parent = draw(st.sampled_from(["root", *parents]))
        parents[name] = parent
        builder = b.queue(name).parent(parent)
        cpu = draw(st.one_of(st.none(), st.integers(min_value=0, max_value=8)))
        if cpu is not None:
            builder = builder.capability(cpu=str(cpu))
        items.append(builder)
    leaves = [q for q in parents if q not in parents.values()]
    for p in range(draw(st.integers(min_value=0, max_value=20))):
        queue = draw(st.sampled_from(leaves))
        cpu = draw(st.integers(min_value=1, max_value=3))
        items.append(b.pod_group("ns", f"p{p}").queue(queue).phase(objects.PodGroupPhase.INQUEUE))
        items.append(
            b.pod("ns", f"p{p}").group(f"p{p}").requests(cpu=str(cpu)).admission().created(p)
        )
    return items, parents


def _run(items: list[object]) -> sessions.decisions.SessionResult:
    return sessions.run_session(
        b.snapshot(*items),  # type: ignore[arg-type]
        config=b.config(
            [b.plugin("priority"), b.plugin("gang")], [b.plugin("capacity", hierarchy=True)]
        ),
        feature_gates=b.GATES_ON,
        admission_only=True,
    )


@settings(max_examples=properties.examples(150))
@given(clusters())
def test_admission_never_puts_more_into_a_queue_subtree_than_its_real_capability(
    cluster: tuple[list[object], dict[str, str]],
) -> None:
    items, parents = cluster
    result = _run(items)
    pods = {p.build().key: p.build() for p in items if isinstance(p, b.PodBuilder)}
    groups = {g.build().key: g.build() for g in items if isinstance(g, b.PodGroupBuilder)}
    used: dict[str, int] = {}
    for key in result.ungate:
        queue = groups[pods[key].group].queue
        while queue in parents:
            used[queue] = used.get(queue, 0) + int(pods[key].resreq.milli_cpu)
            queue = parents[queue]
    over = {
        queue: (amount, result.queues[queue].real_capability.milli_cpu)
        for queue, amount in used.items()
        if amount > result.queues[queue].real_capability.milli_cpu
    }
    assert over == {}


@settings(max_examples=properties.examples(60))
@given(clusters(), st.integers(min_value=0, max_value=2**32))
def test_the_result_does_not_depend_on_the_order_of_the_input(
    cluster: tuple[list[object], dict[str, str]], seed: int
) -> None:
    items, _ = cluster
    shuffled = list(items)
    random.Random(seed).shuffle(shuffled)
    first, second = _run(items), _run(shuffled)
    assert (
        first.ungate,
        first.errors,
        first.warnings,
        dict(first.reasons),
        dict(first.queues),
    ) == (second.ungate, second.errors, second.warnings, dict(second.reasons), dict(second.queues))
