"""The Helm chart ``charts/queuetree``: generated from the kustomize manifests, the same objects.

``hack/gen_chart.py`` writes the chart from what ``kubectl kustomize`` renders; these tests run
the real ``helm`` (built from its Go module by ``make controlplane``, so they run in the real
control plane's lane, after the build) and check that the chart with its default values prints
exactly the objects of ``overlays/default``, with ``certificates.mode=cert-manager`` those of
``overlays/cert-manager``, with monitoring on those of ``overlays/monitoring``; that each value
admins change reaches the field it names; and that the values schema refuses what would not run.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys
import tomllib
from typing import Any

import pytest
import yaml

from controlplane import building
from tests.deploy.test_manifests import overlay

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "queuetree"
KEEP = "helm.sh/resource-policy"

# helm is built with the control plane: run where make controlplane ran first (one worker).
pytestmark = [pytest.mark.controlplane, pytest.mark.xdist_group("controlplane")]

Obj = dict[str, Any]
Key = tuple[str, str, str]


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("gen_chart", ROOT / "hack" / "gen_chart.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their annotations through it
    spec.loader.exec_module(module)
    return module


@functools.cache
def helm_binary() -> str:
    found = building.find(building.HELM) if shutil.which("go") else None
    if found is None:
        reason = "helm is not built: run make controlplane (it needs go)"
        if os.environ.get("QUEUETREE_REQUIRE_REAL"):
            pytest.fail(f"QUEUETREE_REQUIRE_REAL is set, but {reason}")
        pytest.skip(reason)
    return str(found.binary("helm"))


def helm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [helm_binary(), *args], capture_output=True, text=True, check=False, timeout=120
    )


@functools.cache
def template(*sets: str) -> dict[Key, Obj]:
    """``helm template`` of the chart with ``--set`` each of ``sets``, by kind, namespace, name."""
    done = helm("template", "queuetree", str(CHART), *(a for s in sets for a in ("--set", s)))
    assert done.returncode == 0, done.stderr
    return keyed(d for d in yaml.safe_load_all(done.stdout) if d)


def keyed(objects: Any) -> dict[Key, Obj]:
    return {
        (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in objects
    }


def without_keep(objects: dict[Key, Obj]) -> dict[Key, Obj]:
    """The chart's one addition: its CRDs outlive ``helm uninstall`` (docs/operations.md)."""
    stripped = {}
    for key, obj in objects.items():
        annotations = dict(obj["metadata"].get("annotations") or {})
        if obj["kind"] == "CustomResourceDefinition":
            assert annotations.pop(KEEP) == "keep"
        metadata = {k: v for k, v in obj["metadata"].items() if k != "annotations"}
        if annotations:
            metadata["annotations"] = annotations
        stripped[key] = {**obj, "metadata": metadata}
    return stripped


def container(objects: dict[Key, Obj], component: str) -> Obj:
    deployment = objects[("Deployment", "queuetree-system", f"queuetree-{component}")]
    (found,) = deployment["spec"]["template"]["spec"]["containers"]
    return dict(found)


def test_the_committed_chart_is_what_the_generator_writes(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "queuetree"
    generator = _generator()
    generator.write(
        generator.build(ROOT / "manifests"), out, version=generator.project_version(ROOT)
    )
    written = {p.relative_to(out): p.read_text() for p in out.rglob("*") if p.is_file()}
    committed = {p.relative_to(CHART): p.read_text() for p in CHART.rglob("*") if p.is_file()}
    stale = sorted(
        str(p) for p in written.keys() | committed.keys() if written.get(p) != committed.get(p)
    )
    assert stale == [], "charts/queuetree is stale: run .venv/bin/python hack/gen_chart.py"


@pytest.mark.parametrize(
    ("sets", "name"),
    [
        ((), "default"),
        (("certificates.mode=cert-manager",), "cert-manager"),
        (
            ("monitoring.serviceMonitor.enabled=true", "monitoring.dashboard.enabled=true"),
            "monitoring",
        ),
    ],
    ids=["defaults-are-the-default-overlay", "cert-manager-mode", "monitoring-on"],
)
def test_helm_template_prints_exactly_the_objects_of_the_overlay(
    sets: tuple[str, ...], name: str
) -> None:
    rendered = without_keep(template(*sets))
    expected = keyed(overlay(name))
    differing = sorted(k for k in rendered.keys() & expected.keys() if rendered[k] != expected[k])
    assert (
        sorted(rendered.keys() - expected.keys()),
        sorted(expected.keys() - rendered.keys()),
        differing,
    ) == ([], [], [])


def test_the_crds_outlive_helm_uninstall() -> None:
    crds = [o for o in template().values() if o["kind"] == "CustomResourceDefinition"]
    assert sorted((o["metadata"]["name"], o["metadata"]["annotations"][KEEP]) for o in crds) == [
        ("podgroups.scheduling.volcano.sh", "keep"),
        ("queues.scheduling.volcano.sh", "keep"),
    ]


def _args(component: str) -> Any:
    return lambda objects: container(objects, component)["args"][-3:]


def _pod(component: str, field: str) -> Any:
    return lambda objects: objects[("Deployment", "queuetree-system", f"queuetree-{component}")][
        "spec"
    ]["template"]["spec"].get(field)


def _urls(objects: dict[Key, Obj]) -> set[str]:
    """Where the API server calls each webhook: the scheme and host of its URL, or "service"."""
    return {
        "/".join(w["clientConfig"]["url"].split("/")[:3])
        if "url" in w["clientConfig"]
        else "service"
        for o in objects.values()
        if o["kind"] in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
        for w in o["webhooks"]
    }


@pytest.mark.parametrize(
    ("sets", "read", "expected"),
    [
        (
            (
                "image.repository=registry.example/queuetree",
                "image.tag=9.9.9",
                "image.pullPolicy=Always",
            ),
            lambda o: {
                (c["image"], c["imagePullPolicy"])
                for c in (container(o, "operator"), container(o, "webhook"))
            },
            {("registry.example/queuetree:9.9.9", "Always")},
        ),
        (
            ("operator.replicas=3", "webhook.replicas=4"),
            lambda o: [
                o[("Deployment", "queuetree-system", f"queuetree-{c}")]["spec"]["replicas"]
                for c in ("operator", "webhook")
            ],
            [3, 4],
        ),
        (
            ("operator.resources.requests.cpu=1",),
            lambda o: container(o, "operator")["resources"],
            {"requests": {"cpu": 1, "memory": "256Mi"}, "limits": {"memory": "1Gi"}},
        ),
        (
            (
                "defaultQueue=batch",
                "schedulerNames={default-scheduler,gpu}",
                "featureGates.SchedulingGatesQueueAdmission=true",
            ),
            lambda o: (_args("operator")(o), _args("webhook")(o)),
            (
                [
                    "--default-queue=batch",
                    "--scheduler-name=default-scheduler,gpu",
                    "--feature-gates=SchedulingGatesQueueAdmission=true",
                ],
                [
                    "--default-queue=batch",
                    "--scheduler-name=default-scheduler,gpu",
                    "--feature-gates=SchedulingGatesQueueAdmission=true",
                ],
            ),
        ),
        (
            (
                "operator.extraArgs={--inqueue-timeout=30}",
                "webhook.extraArgs={--max-queue-depth=3}",
            ),
            lambda o: (container(o, "operator")["args"][-1], container(o, "webhook")["args"][-1]),
            ("--inqueue-timeout=30", "--max-queue-depth=3"),
        ),
        (
            (
                "operator.nodeSelector.pool=system",
                "operator.tolerations[0].key=dedicated",
                "operator.tolerations[0].operator=Exists",
                "operator.affinity=null",
            ),
            lambda o: (
                _pod("operator", "nodeSelector")(o),
                _pod("operator", "tolerations")(o),
                _pod("operator", "affinity")(o),
            ),
            ({"pool": "system"}, [{"key": "dedicated", "operator": "Exists"}], None),
        ),
        (
            ("webhook.externalURL=https://127.0.0.1:9443",),
            _urls,
            {"https://127.0.0.1:9443"},
        ),
    ],
    ids=[
        "image",
        "replicas",
        "resources",
        "shared-flags-reach-both-components",
        "extra-args",
        "node-placement",
        "webhook-outside-the-cluster",
    ],
)
def test_each_value_reaches_the_field_it_names(
    sets: tuple[str, ...], read: Any, expected: Any
) -> None:
    assert read(template(*sets)) == expected


@pytest.mark.parametrize(
    ("value", "complaint"),
    [
        ("certificates.mode=vault", "/certificates/mode"),
        ("operator.replicas=-1", "/operator/replicas"),
        ("webhook.extraArgs={port=1}", "/webhook/extraArgs/0"),
        ("webhook.externalURL=http://insecure", "/webhook/externalURL"),
        ("operator.replica=2", "replica"),
    ],
    ids=[
        "unknown-certificate-mode",
        "negative-replicas",
        "an-argument-that-is-not-a-flag",
        "webhook-url-not-https",
        "a-misspelt-value",
    ],
)
def test_the_values_schema_refuses_what_would_not_run(value: str, complaint: str) -> None:
    done = helm("template", "queuetree", str(CHART), "--set", value)
    assert (done.returncode != 0, complaint in done.stderr) == (True, True), done.stderr


def test_helm_lint_passes_strictly() -> None:
    done = helm("lint", "--strict", str(CHART))
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_chart_is_the_release_of_pyproject_toml() -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert (chart["version"], chart["appVersion"]) == (version, version)
