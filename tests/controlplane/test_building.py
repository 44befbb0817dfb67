"""The control plane's build: the staging replace lines, the cache key, failures that name the
module and the reason."""

from __future__ import annotations

import dataclasses
import pathlib
import shutil
import subprocess
import sys
from typing import Any, NamedTuple

import pytest

from controlplane import __main__ as command
from controlplane import building

KUBERNETES_GO_MOD = """\
module k8s.io/kubernetes

go 1.26.0

require (
	github.com/blang/semver/v4 v4.0.0
	k8s.io/api v0.0.0
	k8s.io/apimachinery v0.0.0 // indirect
	k8s.io/utils v0.0.0-20260108192941-914a6e750570
)

require k8s.io/client-go v0.0.0

replace (
	k8s.io/api => ./staging/src/k8s.io/api
)
"""


class StagingCase(NamedTuple):
    go_mod: Any
    expected: Any


STAGING = {
    "a require block, an indirect one, and a one-line require": StagingCase(
        go_mod=KUBERNETES_GO_MOD,
        expected=["k8s.io/api", "k8s.io/apimachinery", "k8s.io/client-go"],
    ),
    "pseudo-versions and real versions are not staging": StagingCase(
        go_mod="require (\n\tk8s.io/utils v0.0.0-20260108192941-914a6e750570\n"
        "\tk8s.io/klog/v2 v2.130.1\n)\n",
        expected=[],
    ),
    "replace lines are not requirements": StagingCase(
        go_mod="replace k8s.io/api v0.0.0 => ./staging\n", expected=[]
    ),
}


@pytest.mark.parametrize(("go_mod", "expected"), list(STAGING.values()), ids=list(STAGING))
def test_the_staging_modules_are_the_v0_0_0_requirements(go_mod: str, expected: list[str]) -> None:
    assert building.staging_modules(go_mod) == expected


def test_a_kubernetes_release_publishes_its_staging_modules_at_v0_minor_patch() -> None:
    assert building.staging_replacements(KUBERNETES_GO_MOD, "v1.37.2") == {
        "k8s.io/api": "v0.37.2",
        "k8s.io/apimachinery": "v0.37.2",
        "k8s.io/client-go": "v0.37.2",
    }


def test_the_committed_replace_lines_are_those_the_kubernetes_go_mod_asks_for(go: str) -> None:
    assert building.replacement_problems() == []


def _copy(component: building.Component, root: pathlib.Path) -> building.Component:
    shutil.copytree(component.directory, root / component.name)
    return building.Component(
        name=component.name,
        module=component.module,
        binaries=component.binaries,
        version_flags=component.version_flags,
        root=root,
    )


class EditsCase(NamedTuple):
    edits: Any
    expected: Any


EDITS = {
    "a staging module left out": EditsCase(
        edits=["-dropreplace=k8s.io/kms"],
        expected=["missing: replace k8s.io/kms => k8s.io/kms v0.37.2"],
    ),
    "a staging module at another release": EditsCase(
        edits=["-replace=k8s.io/api=k8s.io/api@v0.36.3"],
        expected=["wrong: replace k8s.io/api => v0.36.3 (expected v0.37.2)"],
    ),
    "a replace of a module that is not staging": EditsCase(
        edits=["-replace=k8s.io/legacy-cloud-providers=k8s.io/legacy-cloud-providers@v0.30.0"],
        expected=["extra: replace k8s.io/legacy-cloud-providers => v0.30.0"],
    ),
}


@pytest.mark.parametrize(("edits", "expected"), list(EDITS.values()), ids=list(EDITS))
def test_replace_lines_that_drift_from_the_kubernetes_go_mod_are_named(
    go: str, tmp_path: pathlib.Path, edits: list[str], expected: list[str]
) -> None:
    component = _copy(building.KUBERNETES, tmp_path)
    subprocess.run(["go", "mod", "edit", *edits], cwd=component.directory, check=True)
    assert building.replacement_problems(component) == expected


def test_a_drifted_kubernetes_module_is_refused_before_anything_is_built(
    go: str, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QUEUETREE_CACHE_DIR", str(tmp_path / "cache"))
    component = _copy(building.KUBERNETES, tmp_path)
    subprocess.run(
        ["go", "mod", "edit", "-dropreplace=k8s.io/kms"], cwd=component.directory, check=True
    )
    with pytest.raises(building.BuildError) as refused:
        building.build(component, log=lambda line: None)
    assert (
        "kubernetes (k8s.io/kubernetes v1.37.2)" in str(refused.value),
        "python -m controlplane sync" in str(refused.value),
        "missing: replace k8s.io/kms" in str(refused.value),
        list((tmp_path / "cache").rglob("bin")),
    ) == (True, True, True, [])


def test_a_build_failure_names_the_module_and_quotes_go(
    go: str, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QUEUETREE_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "go.mod").write_text(
        "module queuetree.invalid/broken\n\ngo 1.26.0\n\nrequire example.invalid/tool v1.0.0\n"
    )
    (tmp_path / "broken" / "go.sum").write_text("")
    component = building.Component(
        name="broken",
        module="example.invalid/tool",
        binaries=(("tool", "example.invalid/tool/cmd/tool"),),
        root=tmp_path,
    )
    with pytest.raises(building.BuildError) as failed:
        building.build(component, log=lambda line: None)
    message = str(failed.value)
    assert (
        message.startswith("broken (example.invalid/tool v1.0.0): go build"),
        "example.invalid/tool" in message.splitlines()[-1],
        [p.name for p in (tmp_path / "cache" / "controlplane").iterdir() if p.name != ".lock"],
    ) == (True, True, [])


def test_the_cache_key_follows_go_sum_and_the_go_version(
    tmp_path: pathlib.Path,
) -> None:
    component = _copy(building.ETCD, tmp_path)
    first = building.cache_key(component, "go1.26.8")
    again = building.cache_key(component, "go1.26.8")
    other_go = building.cache_key(component, "go1.26.9")
    (component.directory / "go.sum").write_text(
        (component.directory / "go.sum").read_text() + "example.invalid/x v1.0.0 h1:AAAA=\n"
    )
    other_sum = building.cache_key(component, "go1.26.8")
    assert (first == again, len({first, other_go, other_sum})) == (True, 3)


def test_the_cache_key_follows_what_the_extras_copy(tmp_path: pathlib.Path) -> None:
    # A component whose build copies one more CRD must not be served from the old cache entry.
    component = _copy(building.KARPENTER, tmp_path)
    more = dataclasses.replace(
        component, extras_inputs=(*component.extras_inputs, "pkg/apis/crds/extra.yaml")
    )
    assert building.cache_key(component, "go1.26.8") != building.cache_key(more, "go1.26.8")


def test_without_go_the_build_command_exits_3_and_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(building.shutil, "which", lambda name: None)
    code = command.main(["build"])
    assert (code, capsys.readouterr().err) == (
        command.EXIT_NO_GO,
        "controlplane: the go command is not on PATH\n",
    )


def test_a_second_build_is_a_cache_hit_that_takes_seconds(binaries: object) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "controlplane", "build"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    lines = done.stdout.splitlines()
    assert (done.returncode, len(lines), all(" is cached in " in line for line in lines)) == (
        0,
        len(building.COMPONENTS) + len(building.TOOLS),
        True,
    ), done.stdout + done.stderr


class FilesCase(NamedTuple):
    module: Any
    groups: Any
    expected: Any


FILES = {
    "a file under its name, a directory's yaml without its kustomization": FilesCase(
        module={"rbac/role.yaml": "r", "crd/a.yaml": "a", "crd/kustomization.yaml": "k"},
        groups={"rbac": ("rbac/role.yaml",), "crds": ("crd",)},
        expected={"rbac/role.yaml": "r", "crds/a.yaml": "a"},
    ),
    "a missing path names the component, the group and the path": FilesCase(
        module={"crd/a.yaml": "a"},
        groups={"webhook": ("webhook/manifests.yaml",)},
        expected="demo: no webhook manifest at MODULE/webhook/manifests.yaml",
    ),
    "an empty directory is missing too": FilesCase(
        module={"crd/kustomization.yaml": "k"},
        groups={"crds": ("crd",)},
        expected="demo: no crds manifest at MODULE/crd",
    ),
}


@pytest.mark.parametrize(("module", "groups", "expected"), list(FILES.values()), ids=list(FILES))
def test_a_component_copies_its_manifests_from_the_module(
    module: dict[str, str],
    groups: dict[str, tuple[str, ...]],
    expected: Any,
    tmp_path: pathlib.Path,
) -> None:
    source, out = tmp_path / "module", tmp_path / "out"
    for name, text in module.items():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        (source / name).write_text(text)
    outcome: Any
    try:
        building._module_files("demo", groups)(source, out)
    except building.BuildError as exc:
        outcome = str(exc).replace(str(source), "MODULE")
    else:
        outcome = {str(f.relative_to(out)): f.read_text() for f in out.rglob("*") if f.is_file()}
    assert outcome == expected


def test_make_controlplane_builds_the_companions_and_never_the_peers() -> None:
    # make test builds COMPONENTS: the training operator and KubeRay serve make e2e-real;
    # Kueue only serves the comparison with queuetree (issue 32), built on request.
    names = {component.name for component in building.COMPONENTS}
    peers = {component.name for component in building.PEERS}
    assert (
        {"training-operator", "kuberay"} <= names,
        names & peers,
        peers,
    ) == (True, set(), {"kueue"})
