"""``make release`` (hack/release.py): the three artifacts of one version, built as CI builds them.

It packages the chart with the helm that ``make controlplane`` builds, so it runs in the real
control plane's lane, after the build (as tests/deploy/test_chart.py does).
"""

from __future__ import annotations

import hashlib
import importlib.util
import pathlib
import subprocess
import sys
import tarfile
import tomllib
import zipfile

import pytest
import yaml

from tests.deploy import test_chart

ROOT = pathlib.Path(__file__).resolve().parents[2]
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]

pytestmark = [pytest.mark.controlplane, pytest.mark.xdist_group("controlplane")]


def release(dist: pathlib.Path) -> subprocess.CompletedProcess[str]:
    test_chart.helm_binary()  # skips (or fails in CI) with the reason when helm is not built
    return subprocess.run(
        [sys.executable, str(ROOT / "hack" / "release.py"), "--dist", str(dist)],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )


def test_make_release_builds_the_wheel_the_image_context_and_the_chart_of_one_version(
    tmp_path: pathlib.Path,
) -> None:
    done = release(tmp_path)
    assert done.returncode == 0, done.stderr
    names = sorted(p.name for p in tmp_path.iterdir())
    with zipfile.ZipFile(tmp_path / f"queuetree-{VERSION}-py3-none-any.whl") as wheel:
        metadata = next(n for n in wheel.namelist() if n.endswith("METADATA"))
        wheel_version = next(
            line.split(":", 1)[1].strip()
            for line in wheel.read(metadata).decode().splitlines()
            if line.startswith("Version:")
        )
    with tarfile.open(tmp_path / f"queuetree-{VERSION}.tgz") as packaged:
        chart = yaml.safe_load(packaged.extractfile("queuetree/Chart.yaml").read())  # type: ignore[union-attr]
    with tarfile.open(tmp_path / f"queuetree-image-{VERSION}.tar.gz") as context:
        tops = sorted({name.split("/", 1)[0] for name in context.getnames()})
    assert (names, wheel_version, chart["version"], chart["appVersion"], tops) == (
        sorted(
            [
                f"queuetree-{VERSION}-py3-none-any.whl",
                f"queuetree-{VERSION}.tgz",
                f"queuetree-image-{VERSION}.tar.gz",
            ]
        ),
        VERSION,
        VERSION,
        VERSION,
        ["Dockerfile", "LICENSE", "README.md", "pyproject.toml", "queuetree"],
    )


def test_the_image_context_is_the_same_bytes_from_the_same_tree(tmp_path: pathlib.Path) -> None:
    spec = importlib.util.spec_from_file_location("release", ROOT / "hack" / "release.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    digests = []
    for attempt in ("first", "second"):
        (tmp_path / attempt).mkdir()
        built = module.image_context(tmp_path / attempt, VERSION)
        digests.append(hashlib.sha256(built.read_bytes()).hexdigest())
    assert digests[0] == digests[1]
