"""``controlplane.processes.free_port``: a port another live process was handed is never handed
out again, so two processes' listeners never race for one port."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from controlplane import processes


@pytest.fixture
def claims(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    monkeypatch.setattr(processes, "PORT_CLAIMS", tmp_path)
    return tmp_path


def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    finished = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    return int(finished.stdout)


@pytest.mark.parametrize(
    ("holder", "handed"),
    [
        pytest.param(None, True, id="a-port-nobody-claimed"),
        pytest.param("self", True, id="a-port-this-process-claimed-before"),
        pytest.param("parent", False, id="a-port-another-live-process-claimed"),
        pytest.param("dead", True, id="a-port-whose-claimant-has-exited"),
        pytest.param("garbage", True, id="an-unreadable-claim"),
    ],
)
def test_a_port_is_handed_out_unless_another_live_process_claimed_it(
    claims: pathlib.Path, monkeypatch: pytest.MonkeyPatch, holder: str | None, handed: bool
) -> None:
    port = processes.free_port()  # free now, and claimed by this process
    written = {
        "self": str(os.getpid()),
        "parent": str(os.getppid()),
        "dead": str(dead_pid()),
        "garbage": "not a pid",
    }
    (claims / str(port)).unlink()
    if holder is not None:
        (claims / str(port)).write_text(written[holder])
    monkeypatch.setattr(processes, "_next_port", port)
    got = processes.free_port()
    assert ((got == port), (claims / str(got)).read_text()) == (handed, str(os.getpid()))
