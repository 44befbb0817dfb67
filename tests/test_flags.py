"""Kubernetes-style flags shared by every subcommand."""

import argparse

import pytest

from queuetree.cli import flags
from queuetree.core import features


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(exit_on_error=False)
    flags.add_bool_flag(parser, "--enable-root-queue-protection", default=True, help="protect root")
    flags.add_feature_gates_flag(parser)
    return parser


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        pytest.param([], True, id="absent-means-the-default"),
        pytest.param(["--enable-root-queue-protection"], True, id="bare-flag-means-true"),
        pytest.param(["--enable-root-queue-protection=false"], False, id="equals-false"),
        pytest.param(["--enable-root-queue-protection=true"], True, id="equals-true"),
        pytest.param(["--enable-root-queue-protection=0"], False, id="go-parsebool-zero"),
        pytest.param(["--enable-root-queue-protection", "F"], False, id="separate-value"),
    ],
)
def test_boolean_flags_accept_the_kubernetes_forms(argv: list[str], expected: bool) -> None:
    assert _parser().parse_args(argv).enable_root_queue_protection is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            "", {features.SCHEDULING_GATES_QUEUE_ADMISSION: True}, id="empty-keeps-defaults"
        ),
        pytest.param(
            "SchedulingGatesQueueAdmission=false",
            {features.SCHEDULING_GATES_QUEUE_ADMISSION: False},
            id="turn-off",
        ),
        pytest.param(
            " SchedulingGatesQueueAdmission = true ,",
            {features.SCHEDULING_GATES_QUEUE_ADMISSION: True},
            id="spaces-and-trailing-comma",
        ),
    ],
)
def test_feature_gates_parse(text: str, expected: dict[str, bool]) -> None:
    assert dict(flags.parse_feature_gates(text)) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("Nope=true", "unknown feature gate 'Nope'", id="unknown-gate"),
        pytest.param("SchedulingGatesQueueAdmission", "has no value", id="missing-value"),
        pytest.param("SchedulingGatesQueueAdmission=maybe", "invalid boolean", id="bad-bool"),
    ],
)
def test_bad_feature_gates_are_named(text: str, message: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=message):
        flags.parse_feature_gates(text)
