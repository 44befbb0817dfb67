"""Child processes that never outlive their parent, each with its own log file.

Every process runs in its own session, so a Ctrl-C in the terminal reaches only the parent,
which stops its children itself; on Linux each child also gets a signal (``death_signal``) if
the thread that started it ends (prctl PR_SET_PDEATHSIG), so none outlives a crashed parent:
start them from a thread that lives as long as they should (the main one). Logs are kept after
the process ends.

The death signal is SIGTERM by default. Give SIGKILL to a process whose graceful shutdown
needs its peers: kube-apiserver, told to stop at the moment etcd dies too, waits for etcd
and never exits.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import pathlib
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence


@dataclasses.dataclass(slots=True)
class Process:
    """One child process with its log file."""

    name: str
    popen: subprocess.Popen[bytes]
    log: pathlib.Path

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self, grace: float = 15.0) -> int:
        """SIGTERM, wait up to ``grace`` seconds, then SIGKILL; the exit code."""
        return stop_all([self], grace)[self.name]

    def kill(self) -> None:
        """SIGKILL at once (a crash, as a test wants it), and reap the process."""
        with contextlib.suppress(ProcessLookupError):
            self.popen.kill()
        self.popen.wait(10)

    def tail(self, lines: int = 30) -> str:
        """The last lines of the log, for failure messages."""
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def stop_all(group: Sequence[Process], grace: float = 15.0) -> dict[str, int]:
    """Stop ``group`` together: SIGTERM to each, then wait for them all within one ``grace``
    (SIGKILL to any still running after it); their exit codes by name. Processes that shut
    down gracefully in seconds each (a webhook draining, an operator ending its watches) take
    as long as the slowest of them, not as long as their sum."""
    for process in group:
        if process.alive():
            with contextlib.suppress(ProcessLookupError):
                process.popen.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    for process in group:
        try:
            process.popen.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                process.popen.kill()
            process.popen.wait(5)
    return {process.name: int(process.popen.returncode) for process in group}


EPHEMERAL_PORTS = pathlib.Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST_PORT = 10000
"""The lowest port :func:`free_port` hands out (below it lie the well-known and registered
services a machine may run)."""
_next_port: int | None = None


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (32768 unless configured otherwise)."""
    try:
        return int(EPHEMERAL_PORTS.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now, for a process that will
    listen on it a moment later.

    Chosen below the kernel's ephemeral range, where a port that the kernel handed out for
    ``bind(0)`` would be: there, the outgoing connection of any client on the machine can take
    it between this answer and the listener's bind ("address already in use"), and the more
    runs share the machine (make test runs two lanes at once), the likelier that is. Below the
    range only another listener can, so each process scans from its own starting point (from
    its pid), and never hands out the same port twice in a row. Each port handed out is also
    claimed for this process (:func:`_claim`): two processes scanning from different points can
    still meet on a port, and the one whose listener binds it later lost ("address already in
    use": Kueue, in a loaded fresh-clone run)."""
    global _next_port
    low, high = LOWEST_PORT, _ephemeral_low() - 1
    span = high - low + 1
    if span <= 0:  # a kernel whose ephemeral range starts low: take what bind(0) gives
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            return int(sock.getsockname()[1])
    if _next_port is None:
        _next_port = low + (os.getpid() * 7919) % span
    for _ in range(span):
        port = _next_port
        _next_port = low + (_next_port - low + 1) % span
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        if _claim(port):
            return port
    raise OSError(f"no free TCP port on 127.0.0.1 between {low} and {high}")


PORT_CLAIMS = pathlib.Path(tempfile.gettempdir()) / "queuetree-ports"
"""One file per port :func:`free_port` handed out on this machine, holding the pid it was
handed to; a claim holds while that process lives."""


def _claim(port: int) -> bool:
    """Claim ``port`` for this process: False when another live process holds it. The check
    and the claim are one step for every process of the machine (an exclusive lock on the
    folder's lock file)."""
    PORT_CLAIMS.mkdir(exist_ok=True)
    mine = os.getpid()
    with open(PORT_CLAIMS / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        path = PORT_CLAIMS / str(port)
        try:
            holder = int(path.read_text())
        except (OSError, ValueError):
            holder = 0
        if holder and holder != mine and _alive(holder):
            return False
        path.write_text(str(mine))
        return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _death_signal(signum: int) -> Callable[[], None]:
    def preexec() -> None:  # pragma: no cover - runs in the child between fork and exec
        """Ask Linux to signal this child when its parent dies (no orphans after a crash)."""
        if sys.platform.startswith("linux"):
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            pr_set_pdeathsig = 1
            libc.prctl(pr_set_pdeathsig, signum)

    return preexec


def spawn(
    name: str,
    command: Sequence[str],
    *,
    workdir: pathlib.Path,
    env: Mapping[str, str],
    death_signal: int = signal.SIGTERM,
) -> Process:
    """Start ``command`` in its own session, output appended to ``workdir/logs/<name>.log``;
    ``death_signal`` reaches it if the starting thread dies first."""
    logs = workdir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"{name}.log"
    with log.open("ab") as out:
        popen = subprocess.Popen(
            list(command),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=dict(env),
            start_new_session=True,
            preexec_fn=_death_signal(death_signal),  # only prctl: safe between fork and exec
        )
    return Process(name=name, popen=popen, log=log)


def http_status(url: str) -> int:
    """The HTTP status a plain GET of ``url`` gets within 2 s; 0 when nothing answers (a
    component's health endpoint before it listens)."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except (urllib.error.URLError, OSError):
        return 0
