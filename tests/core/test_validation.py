"""``queuetree.core.validation``: the queue tree, the whole-tree report the operator uses, and
the small pieces every message is made of. (The webhook tables in tests/webhooks/ cover each
admission rule through the reviews.)"""

from __future__ import annotations

import pytest

from queuetree.core import objects, problems, resources, validation
from tests.builders import queue


def tree(*queues: objects.Queue) -> validation.QueueTree:
    return validation.QueueTree.of(queues)


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
    assert validation.validate_tree(tree(*queues), max_depth=max_depth) == expected


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        pytest.param("cpu", 20_000, "20", id="cpu-whole"),
        pytest.param("cpu", 500, "500m", id="cpu-milli"),
        pytest.param("memory", 40 * 1024**3, "40Gi", id="memory-binary"),
        pytest.param("memory", 1_500_000, "1500k", id="memory-decimal"),
        pytest.param("pods", 110, "110", id="pods-count"),
        pytest.param("nvidia.com/gpu", 10_000, "10", id="gpu-whole-not-10000.00"),
        pytest.param("cpu", resources.UNLIMITED, "unlimited", id="unlimited"),
    ],
)
def test_amounts_print_as_canonical_quantities(name: str, value: int, expected: str) -> None:
    assert validation.format_amount(name, value) == expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        pytest.param("pods", True, id="pods"),
        pytest.param("nvidia.com/gpu", True, id="extended"),
        pytest.param("cpu", False, id="cpu"),
        pytest.param("hugepages-2Mi", False, id="hugepages"),
        pytest.param("kubernetes.io/batch", False, id="prefixed-native"),
        pytest.param("gpu", False, id="unprefixed"),
    ],
)
def test_integer_resources_are_counts_and_extended_resources(name: str, expected: bool) -> None:
    assert validation.is_integer_resource_name(name) is expected


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        pytest.param(["one"], "one", id="single"),
        pytest.param(["one", "two"], "[one, two]", id="several"),
    ],
)
def test_errors_aggregate_as_kubernetes_prints_them(messages: list[str], expected: str) -> None:
    assert validation.aggregate(messages) == expected


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        pytest.param(
            problems.Problem("spec.x", problems.ErrorType.INVALID, "bad", value="1"),
            'requestBody.spec.x: Invalid value: "1": bad',
            id="with-value",
        ),
        pytest.param(
            problems.Problem("spec", problems.ErrorType.FORBIDDEN, "no"),
            "requestBody.spec: Forbidden: no",
            id="without-value",
        ),
    ],
)
def test_field_errors_render_with_a_prefix(error: problems.Problem, expected: str) -> None:
    assert error.render("requestBody.") == expected


def test_a_queue_with_allocated_pods_cannot_get_its_first_child() -> None:
    parent = objects.Queue(
        name="team", allocated=resources.Resource.from_resource_list({"pods": "2"})
    )
    child = queue("a").parent("team").build()
    assert validation.validate_parent(child, tree=tree(parent), max_depth=5) == [
        problems.Problem(
            "spec.parent",
            problems.ErrorType.FORBIDDEN,
            "queue team cannot be the parent queue of queue a because it has allocated Pods: 2",
        )
    ]
