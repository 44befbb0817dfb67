"""kubesim driven by real kubectl 1.32: CRDs, custom resources, Tables, wait, patch, delete."""

from __future__ import annotations

import json
import pathlib

import pytest

from kubesim import harness
from tests.kubesim import conftest


def apply_crd(cluster: harness.Cluster) -> None:
    result = cluster.kubectl("apply", "-f", str(conftest.DATA / "widgets-crd.yaml"))
    assert result.returncode == 0, result.stderr
    waited = cluster.kubectl(
        "wait", "--for=condition=Established", "crd/widgets.example.com", "--timeout=20s"
    )
    assert waited.returncode == 0, waited.stderr


REPLACE_SIZE_9 = '[{"op":"replace","path":"/spec/size","value":9}]'


def table_rows(output: str) -> list[list[str]]:
    return [line.split() for line in output.strip().splitlines()]


def test_kubectl_reports_the_server_version_as_1_32(kubesim: harness.Cluster) -> None:
    result = kubesim.kubectl("version", "-o", "json")
    assert result.returncode == 0, result.stderr
    server = json.loads(result.stdout)["serverVersion"]
    assert (server["major"], server["minor"], server["gitVersion"]) == ("1", "32", "v1.32.0")


def test_kubectl_applies_a_crd_and_waits_for_it_to_be_established(
    kubesim: harness.Cluster,
) -> None:
    apply_crd(kubesim)
    crd = json.loads(kubesim.kubectl("get", "crd", "widgets.example.com", "-o", "json").stdout)
    conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert conditions == {"NamesAccepted": "True", "Established": "True"}


def test_kubectl_get_prints_the_printer_columns_of_a_custom_resource(
    kubesim: harness.Cluster,
) -> None:
    apply_crd(kubesim)
    assert kubesim.kubectl("apply", "-f", str(conftest.DATA / "widget-w1.yaml")).returncode == 0
    patched = kubesim.kubectl(
        "patch",
        "widget",
        "w1",
        "--subresource=status",
        "--type=merge",
        "-p",
        '{"status":{"conditions":[{"type":"Ready","status":"True"}]}}',
    )
    assert patched.returncode == 0, patched.stderr
    result = kubesim.kubectl("get", "widgets")
    assert result.returncode == 0, result.stderr
    rows = table_rows(result.stdout)
    assert rows[0] == ["NAME", "SIZE", "READY", "AGE"]
    assert rows[1][:3] == ["w1", "3", "True"]
    assert rows[1][3].endswith("s")


@pytest.mark.parametrize(
    ("args", "expected_size"),
    [
        (("apply", "-f", "{file}"), 5),
        (("apply", "--server-side", "-f", "{file}"), 5),
        (("patch", "widget", "w1", "--type=merge", "-p", '{"spec":{"size":7}}'), 7),
        (("patch", "widget", "w1", "--type=json", "-p", REPLACE_SIZE_9), 9),
    ],
    ids=["client-side apply", "server-side apply", "merge patch", "json patch"],
)
def test_kubectl_changes_a_custom_resource(
    kubesim: harness.Cluster, tmp_path: pathlib.Path, args: tuple[str, ...], expected_size: int
) -> None:
    apply_crd(kubesim)
    assert kubesim.kubectl("apply", "-f", str(conftest.DATA / "widget-w1.yaml")).returncode == 0
    changed = tmp_path / "w1.yaml"
    changed.write_text((conftest.DATA / "widget-w1.yaml").read_text().replace("size: 3", "size: 5"))
    result = kubesim.kubectl(*(a.replace("{file}", str(changed)) for a in args))
    assert result.returncode == 0, result.stderr
    widget = kubesim.sim.get_object("example.com", "widgets", "default", "w1")
    assert widget is not None
    assert (widget["spec"], widget["metadata"]["generation"]) == (
        {"size": expected_size, "color": "blue"},
        2,
    )


def test_kubectl_delete_removes_a_custom_resource_and_waits_until_it_is_gone(
    kubesim: harness.Cluster,
) -> None:
    apply_crd(kubesim)
    assert kubesim.kubectl("apply", "-f", str(conftest.DATA / "widget-w1.yaml")).returncode == 0
    result = kubesim.kubectl("delete", "widget", "w1", "--wait=true")
    assert (result.returncode, result.stdout.strip()) == (0, 'widget.example.com "w1" deleted')
    assert kubesim.sim.get_object("example.com", "widgets", "default", "w1") is None
