"""kubectl as a user runs it: one subprocess per command, against one kubeconfig.

Every call carries ``--request-timeout=10s`` so a stuck API server fails the call instead of
hanging it, and a private ``KUBECACHEDIR`` so discovery caches of other clusters never leak in.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import yaml

T = TypeVar("T")

KUBECTL = os.environ.get("QUEUETREE_KUBECTL", "kubectl")
REQUEST_TIMEOUT = "--request-timeout=10s"


@dataclasses.dataclass(frozen=True, slots=True)
class Result:
    """What one kubectl run printed; ``ok`` when it exited 0."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def json(self) -> Any:
        """The standard output decoded as JSON (for ``-o json``)."""
        return json.loads(self.stdout)

    def describe(self) -> str:
        """The command and everything it printed, for failure messages."""
        return (
            f"kubectl {' '.join(self.args)} exited {self.returncode}\n"
            f"stdout: {self.stdout.strip()}\nstderr: {self.stderr.strip()}"
        )


@dataclasses.dataclass(frozen=True, slots=True)
class Kubectl:
    """kubectl bound to one kubeconfig (``None``: whatever the environment says)."""

    kubeconfig: str | None = None
    cache_dir: str | None = None
    executable: str = KUBECTL

    @property
    def env(self) -> dict[str, str]:
        """The environment for kubectl and any other client of this cluster."""
        env = dict(os.environ)
        if self.kubeconfig is not None:
            env["KUBECONFIG"] = self.kubeconfig
        if self.cache_dir is not None:
            env["KUBECACHEDIR"] = self.cache_dir
        return env

    def run(self, *args: str, input: str | None = None, timeout: float = 60.0) -> Result:
        """Run ``kubectl ARGS`` and return what it printed, whatever the exit code.

        A kubectl that does not return within ``timeout`` seconds counts as a failure (exit
        code -1) rather than an exception, so callers that poll simply try again.
        """
        command = [self.executable, REQUEST_TIMEOUT, *args]
        try:
            done = subprocess.run(
                command,
                input=input,
                capture_output=True,
                text=True,
                env=self.env,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            return Result(tuple(args), -1, _text(exc.stdout), f"timed out after {timeout}s")
        return Result(tuple(args), done.returncode, done.stdout, done.stderr)

    def check(self, *args: str, input: str | None = None, timeout: float = 60.0) -> Result:
        """Like :meth:`run`, but a non-zero exit raises :class:`KubectlError`."""
        result = self.run(*args, input=input, timeout=timeout)
        if not result.ok:
            raise KubectlError(result)
        return result

    def get_json(self, *args: str) -> Any:
        """``kubectl get ARGS -o json`` decoded; raises :class:`KubectlError` on failure."""
        return self.check("get", *args, "-o", "json").json()

    def items(self, resource: str, *args: str) -> list[dict[str, Any]]:
        """The items of ``kubectl get RESOURCE ARGS -o json`` (a list of objects)."""
        answer = self.get_json(resource, *args)
        items: list[dict[str, Any]] = answer.get("items", [])
        return items

    def apply(self, manifests: Sequence[Mapping[str, Any]] | str) -> Result:
        """``kubectl apply -f -`` of documents (dicts) or of YAML/JSON text."""
        return self.run("apply", "-f", "-", input=manifest_text(manifests))


class KubectlError(RuntimeError):
    """A kubectl command that was expected to succeed failed."""

    def __init__(self, result: Result) -> None:
        super().__init__(result.describe())
        self.result = result


def manifest_text(manifests: Sequence[Mapping[str, Any]] | str) -> str:
    """YAML documents for ``kubectl ... -f -`` (text is passed through)."""
    if isinstance(manifests, str):
        return manifests
    # Documents, not a v1 List: kubectl validates each document against its own kind.
    return yaml.safe_dump_all([dict(m) for m in manifests], sort_keys=False)


def _text(value: str | bytes | None) -> str:
    if value is None:
        return ""
    return value.decode(errors="replace") if isinstance(value, bytes) else value


def poll(
    probe: Callable[[], T | None],
    *,
    timeout: float,
    what: str,
    interval: float = 0.1,
) -> T:
    """Call ``probe`` until it returns something other than None or False; return that.

    Raises :class:`TimeoutError` naming ``what`` after ``timeout`` seconds. The interval is
    only the pause between attempts, never a substitute for checking the state.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value is not None and value is not False:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{what}: not reached within {timeout:g}s")
        time.sleep(interval)
