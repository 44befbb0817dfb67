"""``make release``: the artifacts of one version of queuetree, in ``dist/`` (or ``--dist DIR``).

One version, pyproject.toml's, names everything a user can pin:

- ``queuetree-VERSION-py3-none-any.whl``: the Python package (``queuetree --version``);
- ``queuetree-image-VERSION.tar.gz``: the image's build context (the Dockerfile and the files it
  copies), reproducible byte for byte; where Docker runs, build it with ``docker build
  --build-arg VERSION=VERSION -t REGISTRY/queuetree:VERSION - < queuetree-image-VERSION.tar.gz``
  (the manifests and the chart run the tag VERSION);
- ``queuetree-VERSION.tgz``: the packaged Helm chart (chart version and appVersion VERSION).

Before building, it checks that the committed chart is what ``hack/gen_chart.py`` writes from
the manifests and that the CHANGELOG has a section for the version, and fails naming what to do
otherwise. Helm comes from the control plane's build cache (``make controlplane`` builds it).
"""

from __future__ import annotations

import argparse
import filecmp
import gzip
import io
import pathlib
import subprocess
import sys
import tarfile
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from controlplane import building  # noqa: E402

sys.path.insert(0, str(ROOT / "hack"))
import gen_chart  # noqa: E402

IMAGE_CONTEXT = ("Dockerfile", "pyproject.toml", "README.md", "LICENSE", "queuetree")
"""What the Dockerfile's build needs (its COPY lines), and nothing else (no kubesim)."""


class ReleaseError(RuntimeError):
    """The tree is not releasable; the message says what to do."""


def check_chart(version: str) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        fresh = pathlib.Path(scratch) / "queuetree"
        gen_chart.write(gen_chart.build(ROOT / "manifests"), fresh, version=version)
        committed = ROOT / "charts" / "queuetree"
        stale = _differences(fresh, committed)
        if stale:
            raise ReleaseError(
                "charts/queuetree differs from what hack/gen_chart.py writes "
                f"({', '.join(stale)}): run make chart and commit the chart"
            )


def _differences(a: pathlib.Path, b: pathlib.Path) -> list[str]:
    files = {p.relative_to(a) for p in a.rglob("*") if p.is_file()}
    files |= {p.relative_to(b) for p in b.rglob("*") if p.is_file()}
    return sorted(
        str(f)
        for f in files
        if not (
            (a / f).is_file() and (b / f).is_file() and filecmp.cmp(a / f, b / f, shallow=False)
        )
    )


def check_changelog(version: str) -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    if f"## [{version}]" not in text and f"## {version}" not in text:
        raise ReleaseError(
            f"CHANGELOG.md has no section for {version}: move the Unreleased entries under "
            f"'## [{version}]' before releasing"
        )


def image_context(dist: pathlib.Path, version: str) -> pathlib.Path:
    """The build context as a gzipped tar: sorted names, zero times and owners, so the same
    tree gives the same bytes."""
    out = dist / f"queuetree-image-{version}.tar.gz"
    paths: list[pathlib.Path] = []
    for name in IMAGE_CONTEXT:
        path = ROOT / name
        if path.is_dir():
            paths += sorted(
                p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts
            )
        else:
            paths.append(path)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for path in paths:
            info = archive.gettarinfo(str(path), arcname=str(path.relative_to(ROOT)))
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            info.mode = 0o644
            with path.open("rb") as handle:
                archive.addfile(info, handle)
    with gzip.GzipFile(out, "wb", mtime=0) as compressed:
        compressed.write(buffer.getvalue())
    return out


def wheel(dist: pathlib.Path) -> pathlib.Path:
    with tempfile.TemporaryDirectory() as scratch:
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
                scratch,
                str(ROOT),
            ],
            check=True,
            timeout=600,
        )
        (built,) = pathlib.Path(scratch).glob("queuetree-*.whl")
        target = dist / built.name
        built.replace(target)
    return target


def chart(dist: pathlib.Path, version: str) -> pathlib.Path:
    helm = building.build(building.HELM, log=lambda line: print(line, file=sys.stderr))
    done = subprocess.run(
        [str(helm.binary("helm")), "package", str(ROOT / "charts" / "queuetree"), "-d", str(dist)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise ReleaseError(f"helm package failed:\n{done.stderr}")
    return dist / f"queuetree-{version}.tgz"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dist", type=pathlib.Path, default=ROOT / "dist")
    args = parser.parse_args(argv)
    version = gen_chart.project_version(ROOT)
    try:
        check_chart(version)
        check_changelog(version)
        args.dist.mkdir(parents=True, exist_ok=True)
        built = [wheel(args.dist), image_context(args.dist, version), chart(args.dist, version)]
    except (ReleaseError, building.BuildError) as exc:
        print(f"make release: {exc}", file=sys.stderr)
        return 1
    for path in built:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
