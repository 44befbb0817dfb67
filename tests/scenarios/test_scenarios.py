"""The spec's ancestor-reclaim scenarios (§3.12.1) and the seed's reservation race (§5.3), as
manifest files run through ``queuetree session``.

Each directory holds ``cluster.yaml`` (the cluster, written from the fixture descriptions:
``BuildPod`` uid ``<ns>-<name>``, minMember 1, weight 1, Open queues), ``scheduler.conf`` (the
tier the reference test builds) and ``expected.json``: the exact ``bind``, ``pipeline``,
``evict`` and ``ungate`` decisions, ``ready``, no ``errors`` and no ``warnings`` (the files say
nothing queuetree ignores), and for the race also ``reasonsFor``: exactly the pods that must be
told why they wait. Any decision not listed fails the scenario, as
in the reference test. The spec's "pipelined PodGroups (-> node)" appear as the pipelined pods of
those groups (each group has one pod), since the output is keyed by pod. A few run the real
command as a subprocess; the rest call ``cli.main``.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
from typing import Any

import pytest

from queuetree import cli

HERE = pathlib.Path(__file__).parent
SCENARIOS = sorted(path for path in HERE.iterdir() if (path / "expected.json").is_file())
AS_SUBPROCESS = frozenset(
    {"ancestor-reclaim-01", "ancestor-reclaim-08", "gates-race-3-ungated-unschedulable"}
)


def run_session(
    directory: pathlib.Path, capsys: pytest.CaptureFixture[str], *flags: str
) -> dict[str, Any]:
    argv = [
        "session",
        "-f",
        str(directory / "cluster.yaml"),
        "--config",
        str(directory / "scheduler.conf"),
        *flags,
    ]
    if directory.name in AS_SUBPROCESS:
        done = subprocess.run(
            [sys.executable, "-m", "queuetree", *argv],
            capture_output=True,
            text=True,
            check=False,
        )
        assert (done.returncode, done.stderr) == (0, "")
        output: dict[str, Any] = json.loads(done.stdout)
        return output
    code = cli.main(argv)
    captured = capsys.readouterr()
    assert (code, captured.err) == (0, "")
    result: dict[str, Any] = json.loads(captured.out)
    return result


def test_every_scenario_directory_is_complete() -> None:
    names = [path.name for path in SCENARIOS]
    assert len([n for n in names if n.startswith("ancestor-reclaim-")]) == 11
    assert len([n for n in names if n.startswith("gates-race-")]) == 4
    for directory in SCENARIOS:
        assert sorted(p.name for p in directory.iterdir()) == [
            "cluster.yaml",
            "expected.json",
            "scheduler.conf",
        ]


@pytest.mark.parametrize("directory", SCENARIOS, ids=[path.name for path in SCENARIOS])
def test_the_session_decides_exactly_what_the_scenario_expects(
    directory: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = json.loads((directory / "expected.json").read_text())
    explained = expected.pop("reasonsFor", None)
    output = run_session(directory, capsys)
    assert {key: output[key] for key in expected} == expected
    if explained is not None:  # which pods are told why they wait (the wording is the engine's)
        assert sorted(output["reasons"]) == explained


RACE = [path for path in SCENARIOS if path.name.startswith("gates-race-")]


@pytest.mark.parametrize("directory", RACE, ids=[path.name for path in RACE])
def test_the_operators_admission_mode_decides_the_race_the_same_way(
    directory: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = json.loads((directory / "expected.json").read_text())
    explained = expected.pop("reasonsFor")
    # The race's pods are Volcano's e2e pods (schedulerName: volcano): name it, as an operator
    # running beside Volcano's scheduler would, or they are never admitted.
    output = run_session(directory, capsys, "--admission-only", "--scheduler-name=volcano")
    assert {key: output[key] for key in expected} == expected
    assert sorted(output["reasons"]) == explained
