"""``queuetree.core.tree_rules``: the whole-tree report and the parent rule. (The webhook tables
in tests/webhooks/ cover each admission rule through the reviews.)"""

from __future__ import annotations

import pytest

from queuetree.core import objects, problems, queue_trees, resources, tree_rules
from tests.builders import queue


def tree(*queues: objects.Queue) -> queue_trees.QueueTree:
    return queue_trees.QueueTree.of(queues)


@pytest.mark.parametrize(
    ("queues", "expected"),
    [
        pytest.param(
            [
                queue("team").deserved(cpu="8").guarantee(cpu="4").capability(cpu="10").build(),
                queue("a").parent("team").deserved(cpu="4").guarantee(cpu="2").build(),
                queue("b").parent("team").deserved(cpu="4").guarantee(cpu="2").build(),
            ],
            {},
            id="consistent-tree",
        ),
        pytest.param(
            [queue("a").parent("b").build(), queue("b").parent("a").build()],
            {
                "a": [
                    problems.Problem(
                        "spec.parent",
                        problems.ErrorType.INVALID,
                        "queue a cannot have parent b: that would create the cycle a -> b -> a",
                        value="b",
                    )
                ],
                "b": [
                    problems.Problem(
                        "spec.parent",
                        problems.ErrorType.INVALID,
                        "queue b cannot have parent a: that would create the cycle b -> a -> b",
                        value="a",
                    )
                ],
            },
            id="cycle-reported-on-every-member",
        ),
        pytest.param(
            [queue("orphan").parent("gone").build()],
            {
                "orphan": [
                    problems.Problem(
                        "spec.parent",
                        problems.ErrorType.NOT_FOUND,
                        "parent queue gone of queue orphan does not exist",
                        value="gone",
                    )
                ]
            },
            id="missing-parent",
        ),
        pytest.param(
            [
                queue("team").deserved(cpu="4").capability(cpu="6").build(),
                queue("a").parent("team").deserved(cpu="3").capability(cpu="8").build(),
                queue("b").parent("team").deserved(cpu="3").build(),
            ],
            {
                "a": [
                    problems.Problem(
                        'spec.capability["cpu"]',
                        problems.ErrorType.INVALID,
                        "queue a capability[cpu]=8 exceeds its ancestor's capability=6 "
                        "(queue team)",
                        value="8",
                    )
                ],
                "team": [
                    problems.Problem(
                        'spec.capability["cpu"]',
                        problems.ErrorType.INVALID,
                        "queue team capability[cpu]=6 is smaller than its descendants' max "
                        "capability=8 (queue a)",
                        value="6",
                    ),
                    problems.Problem(
                        "spec.deserved",
                        problems.ErrorType.FORBIDDEN,
                        "queue team validation failed: sum of children's deserved (cpu 6, "
                        "memory 0) exceeds parent's deserved limit (cpu 4, memory 0) "
                        "(children: a, b)",
                    ),
                ],
            },
            id="quota-problems-once-on-the-parent",
        ),
        pytest.param(
            [
                queue("l1").build(),
                queue("l2").parent("l1").build(),
                queue("l3").parent("l2").build(),
            ],
            {
                "l3": [
                    problems.Problem(
                        "spec.parent",
                        problems.ErrorType.INVALID,
                        "queue l3 exceeds the maximum allowed depth of 2",
                        value="l2",
                    )
                ]
            },
            id="too-deep",
        ),
    ],
)
def test_the_whole_tree_report_names_each_problem_once(
    queues: list[objects.Queue], expected: dict[str, list[problems.Problem]]
) -> None:
    max_depth = 2 if any(q.name == "l3" for q in queues) else 5
    assert tree_rules.validate_tree(tree(*queues), max_depth=max_depth) == expected


def test_a_queue_with_allocated_pods_cannot_get_its_first_child() -> None:
    parent = objects.Queue(
        name="team", allocated=resources.Resource.from_resource_list({"pods": "2"})
    )
    child = queue("a").parent("team").build()
    assert tree_rules.validate_parent(child, tree=tree(parent), max_depth=5) == [
        problems.Problem(
            "spec.parent",
            problems.ErrorType.FORBIDDEN,
            "queue team cannot be the parent queue of queue a because it has allocated Pods: 2",
        )
    ]
