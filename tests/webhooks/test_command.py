"""``queuetree webhook`` as a process: it serves TLS from files against kubesim, turns ready
once its caches have synced, stops cleanly on SIGTERM; bad flags exit 2."""

from __future__ import annotations

import asyncio
import pathlib
import signal
import ssl
import subprocess
import sys
import time

import aiohttp
import pytest

from controlplane.processes import free_port
from kubesim import harness
from queuetree import cli
from queuetree.webhooks import certificates

pytestmark = pytest.mark.slow

CRDS = pathlib.Path(__file__).parents[2] / "crds"


def test_files_mode_without_files_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["webhook", "--cert-mode=files"]) == 2
    assert "--tls-cert-file" in capsys.readouterr().err


@pytest.mark.parametrize(
    "flag",
    [
        pytest.param("--max-queue-depth=0", id="depth-below-one"),
        pytest.param("--feature-gates=Nope=true", id="unknown-gate"),
        pytest.param("--enable-root-queue-protection=maybe", id="not-a-boolean"),
    ],
)
def test_bad_flags_are_usage_errors(flag: str) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["webhook", flag])
    assert exited.value.code == 2


async def test_the_command_serves_until_sigterm(tmp_path: pathlib.Path) -> None:
    bundle = certificates.generate_bundle(service="queuetree-webhook", namespace="queuetree-system")
    (tmp_path / "tls.crt").write_bytes(bundle.serving.cert_pem)
    (tmp_path / "tls.key").write_bytes(bundle.serving.key_pem)
    port, metrics_port = free_port(), free_port()
    with harness.running(tmp_path) as cluster:
        for name in ("scheduling.volcano.sh_queues.yaml", "scheduling.volcano.sh_podgroups.yaml"):
            done = await asyncio.to_thread(cluster.kubectl, "apply", "-f", str(CRDS / name))
            assert done.returncode == 0, done.stderr
        log = (tmp_path / "webhook.log").open("wb")
        process = await asyncio.create_subprocess_exec(
            *[
                sys.executable,
                "-m",
                "queuetree",
                "webhook",
                f"--port={port}",
                "--bind-address=127.0.0.1",
                f"--tls-cert-file={tmp_path / 'tls.crt'}",
                f"--tls-private-key-file={tmp_path / 'tls.key'}",
                f"--kubeconfig={cluster.kubeconfig}",
                "--enable-root-queue-protection=false",
                f"--metrics-port={metrics_port}",
                "--shutdown-delay=0.2",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            context = ssl.create_default_context(cadata=bundle.ca.cert_pem.decode())
            context.hostname_checks_common_name = False
            deadline = time.monotonic() + 30
            status = 0
            while status != 200:
                assert process.returncode is None, (tmp_path / "webhook.log").read_text()
                assert time.monotonic() < deadline, "the webhook never turned ready"
                try:
                    async with (
                        aiohttp.ClientSession() as session,
                        session.get(
                            f"https://127.0.0.1:{port}/readyz",
                            ssl=context,
                            server_hostname="queuetree-webhook.queuetree-system.svc",
                        ) as response,
                    ):
                        status = response.status
                except aiohttp.ClientError:
                    status = 0
                if status != 200:
                    await asyncio.sleep(0.05)
            async with (
                aiohttp.ClientSession() as session,
                session.get(f"http://127.0.0.1:{metrics_port}/metrics") as response,
            ):
                metrics = await response.text()
        finally:
            process.send_signal(signal.SIGTERM)
            code = await asyncio.wait_for(process.wait(), 20)
            log.close()
    assert code == 0, (tmp_path / "webhook.log").read_text()
    assert "queuetree_webhook_cache_ready 1.0" in metrics.splitlines()
