"""The ``queuetree`` entry point itself."""

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
