"""Running kubesim for tests and for a shell: kubeconfig, environment, a pytest fixture, kubectl.

    from kubesim import harness

    def test_x(kubesim: harness.Cluster) -> None:  # the fixture below, re-exported by a conftest
        kubesim.kubectl("apply", "-f", "crd.yaml")

`Cluster.env` holds KUBECONFIG and KUBECACHEDIR for subprocesses; the `kubesim` fixture also sets
them in `os.environ` for the test (kopf and kubernetes-asyncio read KUBECONFIG).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pathlib
import subprocess
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

from kubesim import kubeconfigs, server

KUBECTL = os.environ.get("KUBESIM_KUBECTL", "kubectl")
KUBECTL_TIMEOUT = "--request-timeout=10s"


@dataclasses.dataclass(frozen=True, slots=True)
class Cluster:
    """A running kubesim with its kubeconfig and the environment that points clients at it."""

    sim: server.KubeSim
    kubeconfig: pathlib.Path
    cache_dir: pathlib.Path

    @property
    def url(self) -> str:
        return self.sim.url

    @property
    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            "KUBECACHEDIR": str(self.cache_dir),
        }

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = False, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl against this cluster with a request timeout; output is text."""
        return subprocess.run(
            [KUBECTL, KUBECTL_TIMEOUT, *args],
            input=input,
            capture_output=True,
            text=True,
            env=self.env,
            check=check,
            timeout=timeout,
        )


@contextlib.contextmanager
def running(directory: pathlib.Path | None = None, **options: Any) -> Iterator[Cluster]:
    """Start kubesim (`options` go to `server.KubeSim`), write its kubeconfig; stop at the end."""
    with contextlib.ExitStack() as stack:
        if directory is None:
            directory = pathlib.Path(
                stack.enter_context(tempfile.TemporaryDirectory(prefix="kubesim-"))
            )
        sim = server.KubeSim(**options).start()
        stack.callback(sim.stop)
        cache_dir = directory / "kubecache"
        cache_dir.mkdir(exist_ok=True)
        kubeconfig = kubeconfigs.write_kubeconfig(
            directory / "kubeconfig", url=sim.url, token=sim.token, ca_bundle=sim.ca_bundle
        )
        yield Cluster(sim, kubeconfig, cache_dir)


@pytest.fixture
def kubesim(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cluster]:
    """A fresh kubesim per test, with KUBECONFIG and KUBECACHEDIR set for the test."""
    with running(tmp_path) as cluster:
        monkeypatch.setenv("KUBECONFIG", str(cluster.kubeconfig))
        monkeypatch.setenv("KUBECACHEDIR", str(cluster.cache_dir))
        yield cluster
