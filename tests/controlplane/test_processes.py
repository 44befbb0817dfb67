"""``processes.stop_all``: a group is signalled together, and what ignores SIGTERM is killed."""

from __future__ import annotations

import pathlib
import signal
import sys
import time
from typing import NamedTuple

import pytest

from controlplane import processes

# On SIGTERM the child leaves a file named after itself, then exits 0 once its peer's file is
# there too (1 if it does not come within 20 s): it exits only if both were signalled before
# either had exited.
WAITS_FOR_PEER = """
import pathlib, signal, sys, time
here, peer = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
def stop(*_):
    here.touch()
    deadline = time.monotonic() + 20
    while not peer.exists():
        if time.monotonic() > deadline:
            sys.exit(1)
        time.sleep(0.01)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
pathlib.Path(sys.argv[3]).touch()
while True:
    time.sleep(1)
"""
EXITS_ON_TERM = """
import pathlib, sys, time
pathlib.Path(sys.argv[3]).touch()
while True:
    time.sleep(1)
"""
IGNORES_TERM = """
import pathlib, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
pathlib.Path(sys.argv[3]).touch()
while True:
    time.sleep(1)
"""


class StopCase(NamedTuple):
    scripts: tuple[str, str]
    grace: float
    codes: tuple[int, int]


STOPS = {
    "peers that wait for each other both stop cleanly": StopCase(
        (WAITS_FOR_PEER, WAITS_FOR_PEER), grace=30.0, codes=(0, 0)
    ),
    "one that ignores SIGTERM is killed after the grace, the other ends on it": StopCase(
        (IGNORES_TERM, EXITS_ON_TERM), grace=0.5, codes=(-signal.SIGKILL, -signal.SIGTERM)
    ),
}


@pytest.mark.parametrize("case", STOPS.values(), ids=STOPS.keys())
def test_stop_all(case: StopCase, tmp_path: pathlib.Path) -> None:
    started = []
    for index, script in enumerate(case.scripts):
        ready = tmp_path / f"ready-{index}"
        started.append(
            processes.spawn(
                f"child-{index}",
                [
                    sys.executable,
                    "-c",
                    script,
                    str(tmp_path / f"stopping-{index}"),
                    str(tmp_path / f"stopping-{1 - index}"),
                    str(ready),
                ],
                workdir=tmp_path,
                env={},
            )
        )
    for index in range(len(started)):
        wait_ready(tmp_path / f"ready-{index}")
    codes = processes.stop_all(started, grace=case.grace)
    assert codes == {"child-0": case.codes[0], "child-1": case.codes[1]}


def wait_ready(path: pathlib.Path, deadline: float = 20.0) -> None:
    """Wait until a child has set its SIGTERM handler (it touches ``path`` after)."""
    limit = time.monotonic() + deadline
    while not path.exists():
        assert time.monotonic() < limit, f"{path} was not written within {deadline} s"
        time.sleep(0.01)
