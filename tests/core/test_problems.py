"""Field paths and problem texts, as every reader in queuetree.api writes them."""

from __future__ import annotations

from typing import Any, NamedTuple

import pytest

from queuetree.core import problems


class PathsCase(NamedTuple):
    parts: Any
    expected: Any


PATHS = {
    "names join with dots": PathsCase(parts=("spec", "parent"), expected="spec.parent"),
    "indexes in brackets": PathsCase(
        parts=("spec", "containers", 0, "resources"), expected="spec.containers[0].resources"
    ),
    "map keys quoted": PathsCase(
        parts=("spec", "capability", problems.key("nvidia.com/gpu")),
        expected='spec.capability["nvidia.com/gpu"]',
    ),
    "nothing": PathsCase(parts=(), expected=""),
}


@pytest.mark.parametrize(("parts", "expected"), PATHS.values(), ids=PATHS.keys())
def test_field_paths_read_as_kubectl_prints_them(
    parts: tuple[str | int, ...], expected: str
) -> None:
    assert problems.field_path(*parts) == expected


class TextsCase(NamedTuple):
    problem: Any
    expected: Any


TEXTS = {
    "everything named": TextsCase(
        problem=problems.Problem(
            message="invalid quantity: unknown suffix 'x'",
            document="Queue team-a",
            origin="q.yaml#2",
            path='spec.capability["cpu"]',
            value="2x",
        ),
        expected=(
            'q.yaml#2: Queue team-a: spec.capability["cpu"]: '
            "invalid quantity: unknown suffix 'x' "
            '(got "2x")'
        ),
    ),
    "no value to show": TextsCase(
        problem=problems.Problem(message="is required", document="Pod ns/p", path="metadata.name"),
        expected="Pod ns/p: metadata.name: is required",
    ),
    "a null value is shown": TextsCase(
        problem=problems.Problem(message="is required", path="actions", value=None),
        expected="actions: is required (got null)",
    ),
    "a long value is cut": TextsCase(
        problem=problems.Problem(message="bad", value="x" * 200),
        expected="bad (got " + '"' + "x" * 116 + "...)",
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


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        pytest.param(["one"], "one", id="single"),
        pytest.param(["one", "two"], "[one, two]", id="several"),
    ],
)
def test_errors_aggregate_as_kubernetes_prints_them(messages: list[str], expected: str) -> None:
    assert problems.aggregate(messages) == expected


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
