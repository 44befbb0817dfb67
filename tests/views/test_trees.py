"""The tree of kubectl queuetree: rows from a listing, bars, and 80 columns that never wrap."""

from __future__ import annotations

from typing import Any, NamedTuple

import pytest

from queuetree.api import listings
from queuetree.views import reports, trees

GATE = "scheduling.volcano.sh/queue-allocation-gate"


def queue(name: str, parent: str = "", **status: Any) -> dict[str, Any]:
    spec = {"parent": parent} if parent else {}
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": spec,
        "status": {"state": "Open", **status},
    }


def pod(name: str, queue_name: str, *, gated: bool = False, node: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
    if gated:
        spec["schedulingGates"] = [{"name": GATE}]
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "annotations": {"scheduling.volcano.sh/queue-name": queue_name, GATE: "true"},
        },
        "spec": spec,
        "status": {"phase": "Running" if node else "Pending"},
    }


BROKEN = {"type": "Ready", "status": "False", "reason": "ParentNotFound", "message": "gone"}
LISTING = listings.read_listing(
    [
        queue("root"),
        queue(
            "org",
            "root",
            allocated={"cpu": "1"},
            reserved={"cpu": "1"},
            deserved={"cpu": "2"},
            realCapability={"cpu": "4"},
        ),
        queue("a-very-long-queue-name-indeed", "org"),
        queue("orphan", "gone", conditions=[BROKEN]),
        pod("run", "a-very-long-queue-name-indeed", node="n1"),
        pod("wait", "a-very-long-queue-name-indeed", gated=True),
        {"kind": "Pod", "metadata": {"name": "odd", "namespace": "ns"}, "spec": []},
    ]
)


def test_rows_follow_the_tree_with_the_subtree_counts_and_orphans_last() -> None:
    rows = trees.build_rows(LISTING)
    assert [(r.label, dict(r.counts), r.condition, r.ready) for r in rows] == [
        ("root", {"gated": 1, "admitted": 0, "running": 1}, "-", True),
        ("└ org", {"gated": 1, "admitted": 0, "running": 1}, "-", True),
        ("  └ a-very-long-queue-name-indeed", {"gated": 1, "admitted": 0, "running": 1}, "-", True),
        ("orphan", {"gated": 0, "admitted": 0, "running": 0}, "ParentNotFound", False),
    ]


def test_an_object_that_does_not_parse_is_left_out_with_a_warning() -> None:
    assert [w.split(":")[0] for w in LISTING.warnings] == ["Pod left out"]


class BarsCase(NamedTuple):
    figure: Any
    expected: Any


BARS = {
    "allocated and reserved against capability, deserved marked": BarsCase(
        figure=trees.Figure("cpu", allocated=1000, reserved=1000, deserved=6000, capability=8000),
        expected="█▒····|·",
    ),
    "full": BarsCase(figure=trees.Figure("cpu", 8000, 0, None, 8000), expected="████████"),
    "above capability stays full": BarsCase(
        figure=trees.Figure("cpu", 9000, 2000, None, 8000), expected="████████"
    ),
    "no capability, no bar": BarsCase(figure=trees.Figure("cpu", 1000, 0, 2000, None), expected=""),
}


@pytest.mark.parametrize(("figure", "expected"), BARS.values(), ids=BARS.keys())
def test_a_bar_shows_used_against_capability(figure: trees.Figure, expected: str) -> None:
    assert trees.bar(figure) == expected


def test_the_text_fits_80_columns_by_cutting_and_notes_broken_queues() -> None:
    text = trees.to_text(LISTING)
    lines = text.splitlines()
    assert (max(len(line) for line in lines), lines[-1]) == (80, "orphan: ParentNotFound: gone")
    org = next(line for line in lines if "org" in line)
    assert org.split()[1:8] == ["org", "Open", "-", "cpu", "1+1", "2", "4"]
    assert "…" in next(line for line in lines if "a-very" in line)


def test_subtree_lists_a_queue_and_everything_below_it_parents_first() -> None:
    assert reports.subtree(LISTING, "org") == ["org", "a-very-long-queue-name-indeed"]
