"""The production image (``Dockerfile``), checked without a Docker engine.

No Docker engine runs on the development machines, so the Dockerfile is read as text for what
it promises (a base pinned by digest, no kubesim, an unprivileged user), and the wheel its
build stage installs is built here from exactly the files it copies.
"""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess
import sys
import zipfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "Dockerfile").read_text()
DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")


def instructions(name: str) -> list[str]:
    """The arguments of every ``name`` instruction (continuation lines joined)."""
    joined = DOCKERFILE.replace("\\\n", " ")
    return [
        line.split(None, 1)[1].strip()
        for line in joined.splitlines()
        if line.split(None, 1)[:1] == [name]
    ]


def test_the_base_image_is_pinned_by_digest_in_both_stages() -> None:
    (default,) = [a for a in instructions("ARG") if a.startswith("PYTHON_IMAGE=")]
    image = default.removeprefix("PYTHON_IMAGE=")
    assert (
        image.startswith("python:3.11-slim-bookworm@"),
        bool(DIGEST.search(image)),
        instructions("FROM"),
    ) == (True, True, ["${PYTHON_IMAGE} AS build", "${PYTHON_IMAGE}"])


def test_only_queuetree_is_copied_into_the_build_and_the_image_runs_unprivileged() -> None:
    copied = [a.split()[0] for a in instructions("COPY") if not a.startswith("--from")]
    assert (copied, instructions("USER"), "kubesim" in DOCKERFILE.split("COPY", 1)[1]) == (
        ["pyproject.toml", "queuetree"],
        ["65532:65532"],
        False,
    )


def test_the_wheel_built_from_the_copied_files_has_no_kubesim(tmp_path: pathlib.Path) -> None:
    """What the build stage installs: pyproject.toml, README.md and queuetree/ only."""
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "queuetree", source / "queuetree", ignore=shutil.ignore_patterns("__pycache__")
    )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--wheel-dir",
            str(tmp_path / "dist"),
            str(source),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = (tmp_path / "dist").glob("queuetree-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        tops = {name.split("/", 1)[0] for name in archive.namelist()}
        metadata = next(n for n in archive.namelist() if n.endswith("METADATA"))
        requires = [
            line.split(":", 1)[1].strip()
            for line in archive.read(metadata).decode().splitlines()
            if line.startswith("Requires-Dist:") and "extra ==" not in line
        ]
    assert (
        sorted(t for t in tops if not t.endswith(".dist-info")),
        [r for r in requires if r.startswith("jsonschema")],
    ) == (["queuetree"], [])
