"""Queue order on a key: ``Session.sorted_queues`` sorts on ``CapacityPlugin.queue_order_key``
when the queues at hand allow a key, and that order is exactly the comparator's
(``sorted(names, key=cmp_to_key(session.queue_order))``), whatever the tree, the shares and
their ties, the priorities and the creation times.

The generated trees give queues few distinct deserved quotas and running pods of few sizes,
so that shares tie often (within one parent and across parents), which is where a key may or
may not exist.
"""

from __future__ import annotations

import functools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from queuetree.core import capacity, frameworks, objects, sessions
from tests import builders as b


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
@settings(max_examples=300, deadline=None)
@given(objs=trees(), data=st.data())
def test_queues_sorted_on_a_key_come_in_the_comparators_order(
    hierarchy: bool, objs: list[object], data: st.DataObject
) -> None:
    session = _session(objs, hierarchy=hierarchy)
    queues = sorted(name for name in session.queues if name != "root")
    names = data.draw(st.sets(st.sampled_from(queues), min_size=1))
    assert session.sorted_queues(names) == sorted(
        names, key=functools.cmp_to_key(session.queue_order)
    )


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
    assert session.sorted_queues(names) == sorted(
        names, key=functools.cmp_to_key(session.queue_order)
    )
