"""The ``queuetree`` entry point itself."""

import argparse
import json
import subprocess
import sys

import pytest

from queuetree import cli


def test_no_command_prints_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == 2
    assert "usage: queuetree" in capsys.readouterr().err


def test_python_dash_m_queuetree_reports_the_version() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "queuetree", "--version"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0
    assert done.stdout.startswith("queuetree ")


@pytest.mark.parametrize(
    ("module", "names"),
    [pytest.param(module, names, id=module) for module, names in cli._COMMANDS],
)
def test_each_module_adds_the_subcommands_the_table_names(
    module: str, names: tuple[str, ...]
) -> None:
    parser = cli.build_parser([names[0]])
    (subparsers,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert tuple(subparsers.choices) == names


@pytest.mark.parametrize(
    ("argv", "imported_by_run", "foreign"),
    [
        pytest.param(
            ["operator"],
            "queuetree.operator.running",
            ("queuetree.webhooks.server", "cryptography", "rich", "kubesim"),
            id="the-operator-loads-no-webhook-view-or-simulator",
        ),
        pytest.param(
            ["webhook"],
            "queuetree.webhooks.server",
            ("queuetree.operator.running", "kopf", "rich", "kubesim"),
            id="the-webhook-loads-no-operator-view-or-simulator",
        ),
    ],
)
def test_a_subcommand_imports_its_own_modules_alone(
    argv: list[str], imported_by_run: str, foreign: tuple[str, ...]
) -> None:
    code = (
        "import json, sys\n"
        "from queuetree import cli\n"
        f"cli.build_parser({argv!r})\n"
        f"import {imported_by_run}\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert not set(foreign) & set(json.loads(done.stdout))


def test_the_help_lists_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    listed = capsys.readouterr().out
    for _, names in cli._COMMANDS:
        for name in names:
            assert f"    {name}" in listed
