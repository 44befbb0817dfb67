"""``queuetree.core.capacity_tree``: the quota figures the tree derives (real capability,
deserved), flat and hierarchical."""

from __future__ import annotations

from queuetree.core import capacity, sessions, vectors
from tests import builders as b

GPU = "nvidia.com/gpu"


def _open(*objs: object, hierarchy: bool) -> capacity.CapacityPlugin:
    config = b.config([b.plugin("capacity", hierarchy=hierarchy)], actions=())
    snapshot = b.snapshot(*objs)  # type: ignore[arg-type]
    result = sessions.run_session(snapshot, config=config, feature_gates=b.GATES_ON)
    assert result.errors == ()
    # Re-open a session to inspect the plugin's attributes (the result holds only figures).
    session = sessions.open_session(
        snapshot,
        config=config,
        feature_gates=b.GATES_ON,
    )
    plugin = capacity.CapacityPlugin(config.tiers[0].plugins[0])
    session.register([[plugin]])
    return plugin


def test_flat_real_capability_is_total_minus_all_guarantees_plus_own_capped_by_capability() -> None:
    plugin = _open(
        b.node("n1").allocatable(cpu="10", memory="10Gi"),
        b.queue("a").guarantee(cpu="2").capability(cpu="5"),
        b.queue("b").guarantee(cpu="3").deserved(cpu="9"),
        b.queue("c"),
        hierarchy=False,
    )
    real = {name: plugin.attrs[name].real_capability[:2] for name in ("a", "b", "c")}
    deserved = {name: plugin.attrs[name].deserved[:2] for name in ("a", "b", "c")}
    gib = 10 * 2**30
    assert (real, deserved) == (
        {"a": [5000, gib], "b": [8000, gib], "c": [5000, gib]},
        {"a": [2000, 0], "b": [8000, 0], "c": [0, 0]},
    )


def test_hierarchical_real_capability_subtracts_sibling_guarantees_and_inherits() -> None:
    plugin = _open(
        b.node("n1").allocatable(cpu="10", memory="10Gi", gpu="4"),
        b.queue("root"),
        b.queue("org").capability(cpu="8", gpu="2"),
        b.queue("a").parent("org").guarantee(cpu="3"),
        b.queue("b").parent("org").guarantee(cpu="1").capability(cpu="6"),
        hierarchy=True,
    )
    figures = {
        name: (
            plugin.attrs[name].real_capability[vectors.CPU],
            plugin.attrs[name].real_capability[plugin.dims.index[GPU]],
        )
        for name in ("org", "a", "b")
    }
    assert figures == {"org": (8000, 2000), "a": (7000, 2000), "b": (5000, 2000)}
