"""``queuetree.core.capacity_order``: the queue order and the victim queue order, as tables, and
the queue order on a key.

Queue order on a key: ``Session.sorted_queues`` sorts on ``CapacityPlugin.queue_order_key``
when the queues at hand allow a key, and that order is exactly the comparator's
(``sorted(names, key=cmp_to_key(session.queue_order))``), whatever the tree, the shares and
their ties, the priorities and the creation times.

The generated trees give queues few distinct deserved quotas and running pods of few sizes,
so that shares tie often (within one parent and across parents), which is where a key may or
may not exist.
"""

from __future__ import annotations

import functools
import itertools
from typing import Any, NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from queuetree.core import capacity, frameworks, objects, sessions
from tests import builders as b
from tests import properties


@st.composite
def trees(draw: st.DrawFn) -> list[object]:
    objs: list[object] = [b.node("n1").allocatable(cpu="1000", memory="1000Gi"), b.queue("root")]
    names: list[str] = []
    parents: dict[str, str] = {}
    for i in range(draw(st.integers(min_value=1, max_value=9))):
        name = f"q{i}"
        parent = draw(st.sampled_from(["root", *names]))
        parents[name] = parent
        queue = b.queue(name).created(draw(st.integers(min_value=0, max_value=2)))
        if parent != "root":
            queue = queue.parent(parent)
        deserved = draw(st.sampled_from([0, 2, 4, 4]))
        if deserved:
            queue = queue.deserved(cpu=str(deserved))
        objs.append(queue.priority(draw(st.sampled_from([0, 0, 0, 1]))))
        names.append(name)
    leaves = [name for name in names if name not in parents.values()]
    for leaf in leaves:
        for p in range(draw(st.integers(min_value=0, max_value=2))):
            cpu = draw(st.sampled_from(["1", "2"]))
            objs.append(b.pod_group("ns", f"{leaf}-{p}").queue(leaf).phase(RUNNING))
            objs.append(
                b.pod("ns", f"{leaf}-{p}").group(f"{leaf}-{p}").requests(cpu=cpu).running_on("n1")
            )
    return objs


RUNNING = objects.PodGroupPhase.RUNNING


def _session(objs: list[object], *, hierarchy: bool) -> frameworks.Session:
    config = b.config([b.plugin("capacity", hierarchy=hierarchy)], actions=())
    session = sessions.open_session(
        b.snapshot(*objs),  # type: ignore[arg-type]
        config=config,
        feature_gates=b.GATES_ON,
    )
    session.register([[capacity.CapacityPlugin(config.tiers[0].plugins[0])]])
    return session


@pytest.mark.parametrize("hierarchy", [True, False], ids=["hierarchical", "flat"])
@settings(max_examples=properties.examples(300))
@given(objs=trees(), data=st.data())
def test_queues_sorted_on_a_key_come_in_the_comparators_order(
    hierarchy: bool, objs: list[object], data: st.DataObject
) -> None:
    session = _session(objs, hierarchy=hierarchy)
    queues = sorted(name for name in session.queues if name != "root")
    names = data.draw(st.sets(st.sampled_from(queues), min_size=1))
    assert session.sorted_queues(names) == comparator_order(session, names)


def _leaves_under(*parents: tuple[str, str, int]) -> list[object]:
    """Two parents, each with two leaves; ``(parent, leaf, running cpu)`` per leaf."""
    objs: list[object] = [
        b.node("n1").allocatable(cpu="100", memory="100Gi"),
        b.queue("root"),
        b.queue("A").deserved(cpu="4"),
        b.queue("B").deserved(cpu="4"),
    ]
    for parent, leaf, cpu in parents:
        objs.append(b.queue(leaf).parent(parent).deserved(cpu="4"))
        if cpu:
            objs.append(b.pod_group("ns", leaf).queue(leaf).phase(RUNNING))
            objs.append(b.pod("ns", leaf).group(leaf).requests(cpu=str(cpu)).running_on("n1"))
    return objs


KEYED = {
    "every share equal: a key (priority, then creation time and name)": (
        _leaves_under(("A", "a1", 0), ("A", "a2", 0), ("B", "b1", 0), ("B", "b2", 0)),
        True,
    ),
    "distinct shares at every level: a key": (
        _leaves_under(("A", "a1", 1), ("A", "a2", 2), ("B", "b1", 4), ("B", "b2", 0)),
        True,
    ),
    "parents tie, their children differ: no key": (
        _leaves_under(("A", "a1", 1), ("A", "a2", 0), ("B", "b1", 0), ("B", "b2", 1)),
        False,
    ),
}


@pytest.mark.parametrize(("objs", "keyed"), KEYED.values(), ids=KEYED.keys())
def test_the_capacity_plugin_gives_a_key_where_the_shares_allow_one(
    objs: list[object], keyed: bool
) -> None:
    session = _session(objs, hierarchy=True)
    (plugin,) = session.plugins
    names = {"a1", "a2", "b1", "b2"}
    assert (plugin.queue_order_key(names) is not None) == keyed
    assert session.sorted_queues(names) == comparator_order(session, names)


def comparator_order(session: frameworks.Session, names: set[str]) -> list[str]:
    """The comparator's order of ``names``, given in creation-time-then-name order (the
    comparator is not always transitive: see the cycle below)."""
    given = sorted(names, key=lambda name: (session.queues[name].created, name))
    return sorted(given, key=functools.cmp_to_key(session.queue_order))


def test_a_cycle_of_the_comparator_sorts_the_same_whatever_order_the_queues_come_in() -> None:
    """Hierarchy mode: q1 and q3 (siblings under q0) compare by their own shares (q3 first:
    q1 deserves nothing), each against q2 by q0's share and q2's (equal, so creation time
    decides: q1 before q2 before q3). A sort of such a cycle depends on its input's order,
    and a set's order on the process's hash seed: found by the folding equivalence test,
    whose two sessions ordered the same three pods differently."""
    objs: list[object] = [
        b.node("n1").allocatable(cpu="100", memory="100Gi"),
        b.queue("root"),
        b.queue("q0").created(0).deserved(cpu="1"),
        b.queue("q1").created(1).parent("q0"),
        b.queue("q2").created(2).deserved(cpu="1"),
        b.queue("q3").created(3).parent("q0").deserved(cpu="1"),
    ]
    session = _session(objs, hierarchy=True)
    cmp = session.queue_order
    assert cmp("q3", "q1") < 0
    assert cmp("q1", "q2") < 0
    assert cmp("q2", "q3") < 0
    orders = {
        tuple(session.sorted_queues(names)) for names in itertools.permutations(["q1", "q2", "q3"])
    }
    assert orders == {tuple(comparator_order(session, {"q1", "q2", "q3"}))}


class QueueOrderCase(NamedTuple):
    objs: Any
    expected: Any


QUEUE_ORDER = {
    "higher priority first": QueueOrderCase(
        objs=(b.queue("root"), b.queue("lo").deserved(cpu="1"), b.queue("hi").priority(5)),
        expected=["hi", "lo"],
    ),
    "a queue with deserved before a best-effort one at equal share": QueueOrderCase(
        objs=(b.queue("root"), b.queue("be"), b.queue("ds").deserved(cpu="1")),
        expected=["ds", "be"],
    ),
    "ties fall back to creation time then name": QueueOrderCase(
        objs=(
            b.queue("root"),
            b.queue("z").created(1),
            b.queue("y").created(2),
            b.queue("x").created(2),
        ),
        expected=["z", "x", "y"],
    ),
    "leaves before parents": QueueOrderCase(
        objs=(b.queue("root"), b.queue("p").deserved(cpu="1"), b.queue("c").parent("p")),
        expected=["c", "p"],
    ),
    "two leaves compare the children of their deepest common ancestor": QueueOrderCase(
        objs=(
            b.queue("root"),
            b.queue("A").deserved(cpu="4"),
            b.queue("a1").parent("A").deserved(cpu="8"),
            b.queue("a2").parent("A"),
            b.queue("B").deserved(cpu="4"),
            b.queue("b1").parent("B").deserved(cpu="1"),
            b.pod_group("ns", "a2").queue("a2").phase(objects.PodGroupPhase.RUNNING),
            b.pod("ns", "a2").group("a2").requests(cpu="3").running_on("n1"),
            b.pod_group("ns", "b1").queue("b1").phase(objects.PodGroupPhase.RUNNING),
            b.pod("ns", "b1").group("b1").requests(cpu="500m").running_on("n1"),
        ),
        # a1's own share (0) is below b1's (0.5), but A (0.75) is above B (0.125).
        expected=["b1", "a1", "a2", "B", "A"],
    ),
}


@pytest.mark.parametrize(("objs", "expected"), QUEUE_ORDER.values(), ids=QUEUE_ORDER.keys())
def test_queue_order_puts_priority_then_share_then_deserved_then_age_first(
    objs: tuple[object, ...], expected: list[str]
) -> None:
    session = _session([b.node("n1").allocatable(cpu="8"), *objs], hierarchy=True)
    names = [q for q in session.queues if q != "root"]
    assert sorted(names, key=functools.cmp_to_key(session.queue_order)) == expected


def test_victim_queues_closer_to_the_reclaimer_lose_pods_first() -> None:
    session = _session(
        [
            b.queue("root"),
            b.queue("org"),
            b.queue("team").parent("org"),
            b.queue("sibling").parent("org"),
            b.queue("cousin-parent"),
            b.queue("cousin").parent("cousin-parent"),
        ],
        hierarchy=True,
    )
    order = sorted(
        ["cousin", "sibling"],
        key=functools.cmp_to_key(
            lambda left, right: session.victim_queue_order(left, right, "team")
        ),
    )
    assert order == ["sibling", "cousin"]
