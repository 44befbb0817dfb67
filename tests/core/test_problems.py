"""Field paths and problem texts, as every reader in queuetree.api writes them."""

from __future__ import annotations

import pytest

from queuetree.core import problems

PATHS = {
    "names join with dots": (("spec", "parent"), "spec.parent"),
    "indexes in brackets": (("spec", "containers", 0, "resources"), "spec.containers[0].resources"),
    "map keys quoted": (
        ("spec", "capability", problems.key("nvidia.com/gpu")),
        'spec.capability["nvidia.com/gpu"]',
    ),
    "nothing": ((), ""),
}


@pytest.mark.parametrize(("parts", "expected"), PATHS.values(), ids=PATHS.keys())
def test_field_paths_read_as_kubectl_prints_them(
    parts: tuple[str | int, ...], expected: str
) -> None:
    assert problems.field_path(*parts) == expected


TEXTS = {
    "everything named": (
        problems.Problem(
            message="invalid quantity: unknown suffix 'x'",
            document="Queue team-a",
            origin="q.yaml#2",
            path='spec.capability["cpu"]',
            value="2x",
        ),
        "q.yaml#2: Queue team-a: spec.capability[\"cpu\"]: invalid quantity: unknown suffix 'x' "
        '(got "2x")',
    ),
    "no value to show": (
        problems.Problem(message="is required", document="Pod ns/p", path="metadata.name"),
        "Pod ns/p: metadata.name: is required",
    ),
    "a null value is shown": (
        problems.Problem(message="is required", path="actions", value=None),
        "actions: is required (got null)",
    ),
    "a long value is cut": (
        problems.Problem(message="bad", value="x" * 200),
        "bad (got " + '"' + "x" * 116 + "...)",
    ),
}


@pytest.mark.parametrize(("problem", "expected"), TEXTS.values(), ids=TEXTS.keys())
def test_a_problem_names_origin_document_field_and_value(
    problem: problems.Problem, expected: str
) -> None:
    assert str(problem) == expected


def test_an_input_error_lists_every_problem_one_per_line() -> None:
    error = problems.InputError(
        [problems.Problem(message="a", origin="f#0"), problems.Problem(message="b", origin="f#1")]
    )
    assert (str(error), len(error.problems)) == ("f#0: a\nf#1: b", 2)
