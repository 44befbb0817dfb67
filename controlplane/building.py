"""Build the control plane's binaries from their Go modules, into a cache outside the work tree.

Three wrapper modules under ``hack/controlplane/`` pin what is built, each its own module graph
(``../shared/control-plane-notes.md``: one graph would move kwok's and etcd's dependencies):

- ``kubernetes``: kube-apiserver, kube-controller-manager, kube-scheduler and kubectl, built
  from the upstream ``cmd/*`` packages of ``k8s.io/kubernetes``. That module requires its
  staging modules at ``v0.0.0`` and maps them to its own tree, so the wrapper replaces each with
  the published ``v0.<minor>.<patch>``; :func:`staging_replacements` derives that list from the
  kubernetes module's own go.mod, and :func:`build` refuses to build when the committed go.mod
  disagrees with it (``python -m controlplane sync`` rewrites it);
- ``etcd``: the ``go.etcd.io/etcd/server/v3`` main package;
- ``kwok``: ``sigs.k8s.io/kwok/cmd/kwok``, plus the Stage manifests its module ships (the kwok
  binary has no built-in stages);
- ``karpenter``: Karpenter's kwok cloud provider (``sigs.k8s.io/karpenter/kwok``, the
  autoscaler of the e2e autoscaling scenarios), plus the CRDs its module ships. Cluster
  Autoscaler would be the other choice, but the Go module proxy serves no version of
  ``k8s.io/autoscaler/cluster-autoscaler`` (403 "This module version is not available").
  Karpenter's go.mod has no replace lines, so its wrapper needs none.
- ``helm``: Helm's CLI (``helm.sh/helm/v4/cmd/helm``), not part of the control plane but a tool
  its tests run (:data:`TOOLS`): the chart ``charts/queuetree`` is linted, rendered and
  installed, upgraded, rolled back and uninstalled with it, as an administrator would.

The cache key of a component is a hash of its go.mod and go.sum, the Go version, the target
platform, the flags and :data:`FORMAT`; its binaries live in
``$QUEUETREE_CACHE_DIR/controlplane/<component>-<version>-<go>-<key>/`` (the cache directory
defaults to ``$XDG_CACHE_HOME/queuetree``, else ``~/.cache/queuetree``). A cached component is
not rebuilt, so a second ``make controlplane`` takes seconds. A build goes to a temporary
directory that is renamed into place only when every binary linked, so an interrupted build
leaves nothing that looks complete. A file lock lets concurrent callers wait for one build.

The ``go`` command runs with ``GOTOOLCHAIN=local`` (no silent toolchain download),
``GOWORK=off`` (no go.work from a parent directory), ``GOFLAGS=-mod=readonly`` (go.sum is
committed; a build never edits it) and ``CGO_ENABLED=0`` (upstream builds these statically).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

REPO = pathlib.Path(__file__).resolve().parents[1]
MODULES = REPO / "hack" / "controlplane"
"""Where the wrapper modules (go.mod, go.sum) are committed."""

FORMAT = 1
"""Bumped whenever what a cached component holds changes (layout, stages, stamping)."""

GO_ENV = {
    "GOTOOLCHAIN": "local",
    "GOWORK": "off",
    "GOFLAGS": "-mod=readonly",
    "CGO_ENABLED": "0",
}
BUILD_FLAGS = ("-trimpath",)
STRIP = "-s -w"


class BuildError(RuntimeError):
    """A component could not be built; the message names the module and the reason."""


class GoMissing(BuildError):
    """There is no usable ``go`` command on this machine."""


@dataclasses.dataclass(frozen=True, slots=True)
class Component:
    """One wrapper module and the binaries built from it."""

    name: str
    """The wrapper module's directory under ``hack/controlplane/``."""
    module: str
    """The upstream module the wrapper requires; its version comes from the wrapper's go.mod."""
    binaries: tuple[tuple[str, str], ...]
    """(binary name, package path) pairs."""
    version_flags: Callable[[str], tuple[str, ...]] = lambda version: ()
    """``-X`` linker flags that stamp the version, given the module's version."""
    extras: Callable[[pathlib.Path, pathlib.Path], None] | None = None
    """Copies data files from the downloaded module (its directory, the output directory)."""
    extras_inputs: tuple[str, ...] = ()
    """What :attr:`extras` copies (the module paths it reads and leaves out): part of the cache
    key, so changing the list rebuilds the component (the function's code is not hashed)."""
    root: pathlib.Path = MODULES
    """Where the wrapper module's directory is (tests build modules of their own)."""

    @property
    def directory(self) -> pathlib.Path:
        return self.root / self.name


def _kubernetes_version_flags(version: str) -> tuple[str, ...]:
    """What upstream's hack/lib/version.sh stamps: /version and client-side checks read it."""
    major, minor = version.lstrip("v").split(".")[:2]
    values = {
        "gitVersion": version,
        "gitMajor": major,
        "gitMinor": minor,
        "gitTreeState": "clean",
        "buildDate": "1970-01-01T00:00:00Z",  # reproducible: the key, not the date, names a build
    }
    flags: list[str] = []
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [f"-X {package}.{name}={value}" for name, value in values.items()]
    return tuple(flags)


KWOK_STAGES = ("node/fast", "node/heartbeat-with-lease", "pod/fast")
"""kwok's own Stage manifests the cluster runs: nodes become Ready and keep their leases; pods
become Running at once, and Job pods complete. Its ``pod-delete`` is left out: it removes a
Terminating pod at once, where a kubelet waits for the grace period, so the harness brings its
own (``controlplane/stages.yaml``)."""
KWOK_STAGES_LEFT_OUT = ("pod-delete.yaml",)


def _kwok_stages(module_dir: pathlib.Path, out: pathlib.Path) -> None:
    """Copy :data:`KWOK_STAGES` from the downloaded kwok module into ``out/stages``."""
    target = out / "stages"
    for part in KWOK_STAGES:
        source = module_dir / "kustomize" / "stage" / part
        files = [
            f
            for f in sorted(source.glob("*.yaml"))
            if f.name != "kustomization.yaml" and f.name not in KWOK_STAGES_LEFT_OUT
        ]
        if not files:
            raise BuildError(f"kwok: no Stage manifests in {source}")
        for file in files:
            destination = target / f"{part.replace('/', '-')}-{file.name}"
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(file, destination)


KUBERNETES = Component(
    name="kubernetes",
    module="k8s.io/kubernetes",
    binaries=tuple(
        (name, f"k8s.io/kubernetes/cmd/{name}")
        for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
    ),
    version_flags=_kubernetes_version_flags,
)
ETCD = Component(
    name="etcd",
    module="go.etcd.io/etcd/server/v3",
    binaries=(("etcd", "go.etcd.io/etcd/server/v3"),),
)
KWOK = Component(
    name="kwok",
    module="sigs.k8s.io/kwok",
    binaries=(("kwok", "sigs.k8s.io/kwok/cmd/kwok"),),
    version_flags=lambda version: (f"-X sigs.k8s.io/kwok/pkg/consts.Version={version}",),
    extras=_kwok_stages,
    extras_inputs=(*KWOK_STAGES, *(f"-{name}" for name in sorted(KWOK_STAGES_LEFT_OUT))),
)


KARPENTER_CRDS = (
    "pkg/apis/crds/karpenter.sh_nodepools.yaml",
    "pkg/apis/crds/karpenter.sh_nodeclaims.yaml",
    "pkg/apis/crds/karpenter.sh_nodeoverlays.yaml",
    "kwok/apis/crds/karpenter.kwok.sh_kwoknodeclasses.yaml",
)
"""The CustomResourceDefinitions Karpenter's kwok provider watches: its NodePools, NodeClaims
and NodeOverlays, and the provider's KWOKNodeClass. (Its ``autoscaling.x-k8s.io``
CapacityBuffer CRD is left out: the controller for it is off unless a feature gate is set.)"""
KARPENTER_CHART_RBAC = (
    "kwok/charts/templates/clusterrole.yaml",
    "kwok/charts/templates/clusterrole-kwok.yaml",
    "kwok/charts/templates/role.yaml",
)
"""The Helm chart templates that hold the Roles and ClusterRoles Karpenter's kwok provider
runs with (:func:`controlplane.karpenter.chart_rules` reads their literal rules)."""


def _module_files(
    name: str, groups: Mapping[str, Sequence[str]]
) -> Callable[[pathlib.Path, pathlib.Path], None]:
    """An :attr:`Component.extras` that copies each group's module paths into ``out/<group>``
    (a file under its own name; every ``*.yaml`` file of a directory)."""

    def copy(module_dir: pathlib.Path, out: pathlib.Path) -> None:
        for directory, parts in groups.items():
            target = out / directory
            target.mkdir(parents=True, exist_ok=True)
            for part in parts:
                source = module_dir / part
                files = sorted(source.glob("*.yaml")) if source.is_dir() else [source]
                files = [f for f in files if f.name != "kustomization.yaml"]
                if not files or not all(f.is_file() for f in files):
                    raise BuildError(f"{name}: no {directory} manifest at {source}")
                for file in files:
                    shutil.copyfile(file, target / file.name)

    return copy


KARPENTER = Component(
    name="karpenter",
    module="sigs.k8s.io/karpenter",
    binaries=(("karpenter-kwok", "sigs.k8s.io/karpenter/kwok"),),
    version_flags=lambda version: (f"-X sigs.k8s.io/karpenter/pkg/operator.Version={version}",),
    extras=_module_files("karpenter", {"crds": KARPENTER_CRDS, "chart": KARPENTER_CHART_RBAC}),
    extras_inputs=(*KARPENTER_CRDS, *KARPENTER_CHART_RBAC),
)

TRAINING_OPERATOR_FILES = {
    "crds": ("manifests/base/crds",),
    "rbac": ("manifests/base/rbac/role.yaml",),
    "webhook": ("manifests/base/webhook/manifests.yaml",),
}
"""What the Kubeflow training operator's own kustomize base installs beside its Deployment:
its CRDs (PyTorchJob, TFJob, ...), its ClusterRole and its validating webhooks."""
TRAINING_OPERATOR = Component(
    name="training-operator",
    module="github.com/kubeflow/training-operator",
    binaries=(
        ("training-operator", "github.com/kubeflow/training-operator/cmd/training-operator.v1"),
    ),
    extras=_module_files("training-operator", TRAINING_OPERATOR_FILES),
    extras_inputs=tuple(p for parts in TRAINING_OPERATOR_FILES.values() for p in parts),
)
KUBERAY_FILES = {
    "crds": ("config/crd/bases",),
    "rbac": ("config/rbac/role.yaml",),
}
"""KubeRay's CRDs (RayCluster, RayJob, RayService) and the operator's ClusterRole (its
webhooks are off by default, as in its Helm chart)."""
KUBERAY = Component(
    name="kuberay",
    module="github.com/ray-project/kuberay/ray-operator",
    binaries=(("kuberay-operator", "github.com/ray-project/kuberay/ray-operator"),),
    extras=_module_files("kuberay", KUBERAY_FILES),
    extras_inputs=tuple(p for parts in KUBERAY_FILES.values() for p in parts),
)
COMPANIONS = (TRAINING_OPERATOR, KUBERAY)
"""Workload controllers that create PodGroups and pods for Volcano (issue 33): built by
``make controlplane`` because ``make e2e-real`` runs their scenarios; started only when a
test asks (:mod:`controlplane.companions`)."""
COMPONENTS = (ETCD, KUBERNETES, KWOK, KARPENTER, *COMPANIONS)

KUEUE_FILES = {
    "crds": ("config/components/crd/bases",),
    "conversion": (
        "config/components/crd/patches/webhook_in_clusterqueues.yaml",
        "config/components/crd/patches/webhook_in_cohorts.yaml",
        "config/components/crd/patches/webhook_in_localqueues.yaml",
        "config/components/crd/patches/webhook_in_multikueueclusters.yaml",
        "config/components/crd/patches/webhook_in_workloads.yaml",
    ),
    "rbac": (
        "config/components/rbac/role.yaml",
        "config/components/rbac/manager_secrets_role.yaml",
        "config/components/rbac/metrics_auth_role.yaml",
        "config/components/rbac/metrics_reader_role.yaml",
    ),
    "webhook": ("config/components/webhook/manifests.yaml",),
}
"""Kueue's CRDs, the conversion webhooks its kustomization patches into five of them, the
manager's roles and its admission webhooks."""
KUEUE = Component(
    name="kueue",
    module="sigs.k8s.io/kueue",
    binaries=(("kueue", "sigs.k8s.io/kueue/cmd/kueue"),),
    version_flags=lambda version: (f"-X sigs.k8s.io/kueue/pkg/version.GitVersion={version}",),
    extras=_module_files("kueue", KUEUE_FILES),
    extras_inputs=tuple(p for parts in KUEUE_FILES.values() for p in parts),
)
PEERS = (KUEUE,)
"""Peers compared with queuetree (issue 32): never built by ``make controlplane`` nor
``make test`` (``make controlplane-peers``)."""


def _helm_version_flags(version: str) -> tuple[str, ...]:
    """What Helm's Makefile stamps for a clean release build (``helm version`` prints it)."""
    package = "helm.sh/helm/v4/internal/version"
    return (
        f"-X {package}.version={version}",
        f"-X {package}.metadata=",
        f"-X {package}.gitTreeState=clean",
    )


HELM = Component(
    name="helm",
    module="helm.sh/helm/v4",
    binaries=(("helm", "helm.sh/helm/v4/cmd/helm"),),
    version_flags=_helm_version_flags,
)
TOOLS = (HELM,)
"""Built by ``make controlplane`` beside :data:`COMPONENTS`, but no control plane needs them:
a cluster starts without them, and the tests that run one find it with :func:`find`."""


@dataclasses.dataclass(frozen=True, slots=True)
class Built:
    """A component in the cache."""

    component: Component
    version: str
    directory: pathlib.Path
    info: Mapping[str, Any]
    """``build.json``: versions, key, build seconds, peak RSS."""

    def binary(self, name: str) -> pathlib.Path:
        return self.directory / "bin" / name


def cache_root() -> pathlib.Path:
    """``$QUEUETREE_CACHE_DIR``, else ``$XDG_CACHE_HOME/queuetree``, else ``~/.cache/queuetree``."""
    explicit = os.environ.get("QUEUETREE_CACHE_DIR")
    if explicit:
        return pathlib.Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = pathlib.Path(xdg) if xdg else pathlib.Path.home() / ".cache"
    return base / "queuetree"


def _go(*args: str, cwd: pathlib.Path, env: Mapping[str, str] | None = None) -> str:
    go = shutil.which("go")
    if go is None:
        raise GoMissing("the go command is not on PATH")
    completed = subprocess.run(
        [go, *args],
        cwd=cwd,
        env={**os.environ, **GO_ENV, **(env or {})},
        capture_output=True,
        text=True,
        check=False,
    )
    if completed.returncode != 0:
        raise BuildError(
            f"go {' '.join(args)} (in {cwd}) exited with {completed.returncode}:\n"
            + _tail(completed.stderr or completed.stdout)
        )
    return completed.stdout


def _go_build(*args: str, cwd: pathlib.Path) -> tuple[float, float]:
    """``go build ARGS``; the CPU seconds and the peak RSS (MiB) of that build alone (its
    largest process: the compiler or the linker)."""
    go = shutil.which("go")
    if go is None:
        raise GoMissing("the go command is not on PATH")
    with tempfile.TemporaryFile() as output:
        popen = subprocess.Popen(
            [go, "build", *args],
            cwd=cwd,
            env={**os.environ, **GO_ENV},
            stdout=output,
            stderr=subprocess.STDOUT,
        )
        _, status, usage = os.wait4(popen.pid, 0)
        popen.returncode = os.waitstatus_to_exitcode(status)
        if popen.returncode != 0:
            output.seek(0)
            raise BuildError(
                f"go build {' '.join(args)} (in {cwd}) exited with {popen.returncode}:\n"
                + _tail(output.read().decode(errors="replace"))
            )
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def go_version() -> str:
    """``go env GOVERSION`` (``go1.26.8``); :class:`GoMissing` when there is no go command."""
    return _go("env", "GOVERSION", cwd=REPO).strip()


def _module_file(component: Component) -> dict[str, Any]:
    """The wrapper's go.mod as ``go mod edit -json`` reads it."""
    parsed: dict[str, Any] = json.loads(_go("mod", "edit", "-json", cwd=component.directory))
    return parsed


def required_version(component: Component) -> str:
    """The version of ``component.module`` that the wrapper's go.mod requires (read without go)."""
    for line in (component.directory / "go.mod").read_text().splitlines():
        words = line.split()
        if words[:1] == ["require"]:
            words = words[1:]
        if len(words) >= 2 and words[0] == component.module:
            return words[1]
    raise BuildError(
        f"{component.name}: {component.directory}/go.mod does not require {component.module}"
    )


def _ldflags(component: Component, version: str) -> str:
    return " ".join((STRIP, *component.version_flags(version)))


def cache_key(component: Component, go: str) -> str:
    """The hash that names a build: go.mod, go.sum, Go version, platform, flags, what the
    extras copy, FORMAT."""
    digest = hashlib.sha256()
    version = required_version(component)
    parts = {
        "format": FORMAT,
        "component": component.name,
        "go": go,
        "platform": f"{os.uname().sysname.lower()}/{os.uname().machine}",
        "env": GO_ENV,
        "flags": list(BUILD_FLAGS),
        "ldflags": _ldflags(component, version),
        "binaries": [list(b) for b in component.binaries],
        "extras": list(component.extras_inputs),
        "go.mod": (component.directory / "go.mod").read_text(),
        "go.sum": (component.directory / "go.sum").read_text(),
    }
    digest.update(json.dumps(parts, sort_keys=True).encode())
    return digest.hexdigest()[:16]


def cached_directory(component: Component, go: str) -> pathlib.Path:
    version = required_version(component)
    key = cache_key(component, go)
    return cache_root() / "controlplane" / f"{component.name}-{version}-{go}-{key}"


def _downloaded(module: str, version: str, *, cwd: pathlib.Path) -> dict[str, Any]:
    """``go mod download -json module@version``: its directory and go.mod file in the cache."""
    info: dict[str, Any] = json.loads(
        _go("mod", "download", "-json", f"{module}@{version}", cwd=cwd)
    )
    if info.get("Error"):
        raise BuildError(f"{module}@{version}: {info['Error']}")
    return info


def staging_modules(kubernetes_go_mod: str) -> list[str]:
    """The modules that k8s.io/kubernetes requires at ``v0.0.0``: its staging tree, which it
    replaces with local directories and which a consumer must therefore pin itself."""
    staging: list[str] = []
    in_require = False
    for raw in kubernetes_go_mod.splitlines():
        line = raw.split("//")[0].strip()
        if line.startswith("require ("):
            in_require = True
            continue
        if in_require and line == ")":
            in_require = False
            continue
        words = line.split()
        if words[:1] == ["require"]:
            words = words[1:]
        elif not in_require:
            continue
        if len(words) == 2 and words[1] == "v0.0.0":
            staging.append(words[0])
    return sorted(staging)


def staging_replacements(kubernetes_go_mod: str, kubernetes_version: str) -> dict[str, str]:
    """Each staging module mapped to its published version: ``v1.M.P`` publishes ``v0.M.P``."""
    published = "v0." + kubernetes_version.lstrip("v").split(".", 1)[1]
    return dict.fromkeys(staging_modules(kubernetes_go_mod), published)


def _kubernetes_go_mod(version: str) -> str:
    info = _downloaded(KUBERNETES.module, version, cwd=KUBERNETES.directory)
    return pathlib.Path(info["GoMod"]).read_text()


def replacement_problems(component: Component = KUBERNETES) -> list[str]:
    """How the wrapper's replace lines differ from those derived from the kubernetes go.mod;
    empty when they agree."""
    version = required_version(component)
    wanted = staging_replacements(_kubernetes_go_mod(version), version)
    present = {
        r["Old"]["Path"]: r["New"].get("Version", r["New"]["Path"])
        for r in _module_file(component).get("Replace") or []
    }
    problems = [
        f"missing: replace {m} => {m} {v}" for m, v in sorted(wanted.items()) if m not in present
    ]
    problems += [
        f"wrong: replace {m} => {present[m]} (expected {v})"
        for m, v in sorted(wanted.items())
        if m in present and present[m] != v
    ]
    problems += [f"extra: replace {m} => {present[m]}" for m in sorted(set(present) - set(wanted))]
    return problems


def sync_kubernetes(version: str | None = None) -> list[str]:
    """Rewrite the kubernetes wrapper's replace lines from the kubernetes module's own go.mod
    (optionally moving it to ``version``), then ``go mod tidy``; the go.mod edits made."""
    directory = KUBERNETES.directory
    tidy_env = {"GOFLAGS": "-mod=mod"}
    if version:
        _go("mod", "edit", f"-require={KUBERNETES.module}@{version}", cwd=directory)
    version = required_version(KUBERNETES)
    wanted = staging_replacements(_kubernetes_go_mod(version), version)
    edits = [
        f"-dropreplace={r['Old']['Path']}" for r in _module_file(KUBERNETES).get("Replace") or []
    ]
    edits += [f"-replace={m}={m}@{v}" for m, v in sorted(wanted.items())]
    _go("mod", "edit", *edits, cwd=directory)
    _go("mod", "tidy", cwd=directory, env=tidy_env)
    return edits


@contextlib.contextmanager
def _locked(root: pathlib.Path) -> Iterator[None]:
    root.mkdir(parents=True, exist_ok=True)
    with (root / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _load(component: Component, directory: pathlib.Path) -> Built | None:
    info_file = directory / "build.json"
    if not info_file.exists():
        return None
    info = json.loads(info_file.read_text())
    if not all((directory / "bin" / name).exists() for name, _ in component.binaries):
        return None
    return Built(component, info["version"], directory, info)


def find(component: Component) -> Built | None:
    """The cached build of ``component`` for this Go and these modules, or None."""
    return _load(component, cached_directory(component, go_version()))


def build(component: Component, *, log: Callable[[str], None] = print) -> Built:
    """The cached build of ``component``, building it first if the cache has none."""
    go = go_version()
    directory = cached_directory(component, go)
    with _locked(directory.parent):
        found = _load(component, directory)
        if found is not None:
            log(f"controlplane: {component.name} {found.version} ({go}) is cached in {directory}")
            return found
        version = required_version(component)
        if component.module == KUBERNETES.module:
            problems = replacement_problems(component)
            if problems:
                raise BuildError(
                    f"kubernetes ({component.module} {version}): "
                    "hack/controlplane/kubernetes/go.mod does not replace the staging modules "
                    "that the kubernetes go.mod requires; run `python -m controlplane sync` to "
                    "regenerate them:\n  " + "\n  ".join(problems)
                )
        log(f"controlplane: building {component.name} ({component.module} {version}, {go})")
        started = time.monotonic()
        cpu_seconds, peak_mib = 0.0, 0.0
        staging = pathlib.Path(tempfile.mkdtemp(prefix=f".{component.name}-", dir=directory.parent))
        try:
            bin_dir = staging / "bin"
            bin_dir.mkdir()
            try:
                for name, package in component.binaries:
                    cpu, peak = _go_build(
                        *BUILD_FLAGS,
                        f"-ldflags={_ldflags(component, version)}",
                        "-o",
                        str(bin_dir / name),
                        package,
                        cwd=component.directory,
                    )
                    cpu_seconds += cpu
                    peak_mib = max(peak_mib, peak)
                    log(f"controlplane:   {name} linked ({time.monotonic() - started:.0f} s)")
                if component.extras is not None:
                    module_dir = pathlib.Path(
                        _downloaded(component.module, version, cwd=component.directory)["Dir"]
                    )
                    component.extras(module_dir, staging)
            except BuildError as exc:
                raise BuildError(
                    f"{component.name} ({component.module} {version}): {exc}"
                ) from None
            info = {
                "component": component.name,
                "module": component.module,
                "version": version,
                "go": go,
                "key": cache_key(component, go),
                "seconds": round(time.monotonic() - started, 1),
                "cpu_seconds": round(cpu_seconds, 1),
                "peak_rss_mib": round(peak_mib),
            }
            (staging / "build.json").write_text(json.dumps(info, indent=2) + "\n")
            staging.rename(directory)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        log(
            f"controlplane: {component.name} built in {info['seconds']} s "
            f"({info['cpu_seconds']} CPU-s, peak RSS {info['peak_rss_mib']} MiB)"
        )
        built = _load(component, directory)
        assert built is not None
        return built


def build_all(
    components: Sequence[Component] = COMPONENTS, *, log: Callable[[str], None] = print
) -> dict[str, Built]:
    """Every component, from the cache or freshly built, by component name."""
    return {component.name: build(component, log=log) for component in components}


def find_all(components: Sequence[Component] = COMPONENTS) -> dict[str, Built] | None:
    """Every component from the cache, or None if any is missing (nothing is built)."""
    found = {component.name: find(component) for component in components}
    if any(built is None for built in found.values()):
        return None
    return {name: built for name, built in found.items() if built is not None}
