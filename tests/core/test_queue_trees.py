"""``queuetree.core.queue_trees``: the existing queues as a tree, as the queue rules read it."""

from __future__ import annotations

import pytest

from queuetree.core import objects, queue_trees
from tests.builders import queue


def tree(*queues: objects.Queue) -> queue_trees.QueueTree:
    return queue_trees.QueueTree.of(queues)


def test_children_are_indexed_by_effective_parent_and_sorted() -> None:
    built = tree(
        queue("b").parent("team").build(),
        queue("a").parent("team").build(),
        queue("team").build(),
        queue("root").build(),
    )
    assert dict(built.children) == {"team": ("a", "b"), "root": ("team",)}


@pytest.mark.parametrize(
    ("queues", "parent", "start", "expected"),
    [
        pytest.param(
            [queue("x").parent("y").build(), queue("y").build()], "x", "q", ["x", "y"], id="to-root"
        ),
        pytest.param([], "ghost", "q", ["ghost"], id="stops-at-a-missing-queue"),
        pytest.param(
            [queue("x").parent("q").build()], "x", "q", ["x", "q"], id="stops-at-the-start"
        ),
        pytest.param(
            [queue("x").parent("y").build(), queue("y").parent("x").build()],
            "x",
            "q",
            ["x", "y", "x"],
            id="stops-at-a-repeat",
        ),
    ],
)
def test_ancestor_walks_end_on_root_missing_queues_and_cycles(
    queues: list[objects.Queue], parent: str, start: str, expected: list[str]
) -> None:
    assert list(tree(*queues).iter_ancestors(parent, start=start)) == expected
