"""kubesim and the real API server driven by the machine's kubectl (1.32): CRDs, custom
resources, Tables, wait, patch, delete."""

from __future__ import annotations

import json
import pathlib
import subprocess

import pytest

from tests.kubesim import conftest
from tests.kubesim.conftest import Api


def apply_crd(cluster: Api) -> None:
    result = cluster.kubectl("apply", "-f", str(conftest.DATA / "widgets-crd.yaml"))
    assert result.returncode == 0, result.stderr
    waited = cluster.kubectl(
        "wait", "--for=condition=Established", "crd/widgets.example.com", "--timeout=20s"
    )
    assert waited.returncode == 0, waited.stderr


REPLACE_SIZE_9 = '[{"op":"replace","path":"/spec/size","value":9}]'


def table_rows(output: str) -> list[list[str]]:
    return [line.split() for line in output.strip().splitlines()]


def test_kubectl_reports_the_server_version(api: Api) -> None:
    result = api.kubectl("version", "-o", "json")
    assert result.returncode == 0, result.stderr
    server = json.loads(result.stdout)["serverVersion"]
    # kubesim says 1.32, the minor of the machine's kubectl; the real control plane is what
    # hack/controlplane builds (kubesim/README.md).
    expected = ("1", "37", "v1.37.2") if api.real else ("1", "32", "v1.32.0")
    assert (server["major"], server["minor"], server["gitVersion"]) == expected


def test_kubectl_applies_a_crd_and_waits_for_it_to_be_established(
    api: Api,
) -> None:
    apply_crd(api)
    crd = json.loads(api.kubectl("get", "crd", "widgets.example.com", "-o", "json").stdout)
    conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert conditions == {"NamesAccepted": "True", "Established": "True"}


def test_kubectl_get_prints_the_printer_columns_of_a_custom_resource(
    api: Api,
) -> None:
    apply_crd(api)
    assert api.kubectl("apply", "-f", str(conftest.DATA / "widget-w1.yaml")).returncode == 0
    patched = api.kubectl(
        "patch",
        "widget",
        "w1",
        "--subresource=status",
        "--type=merge",
        "-p",
        '{"status":{"conditions":[{"type":"Ready","status":"True"}]}}',
    )
    assert patched.returncode == 0, patched.stderr
    result = api.kubectl("get", "widgets")
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
async def test_kubectl_changes_a_custom_resource(
    api: Api, tmp_path: pathlib.Path, args: tuple[str, ...], expected_size: int
) -> None:
    apply_crd(api)
    assert api.kubectl("apply", "-f", str(conftest.DATA / "widget-w1.yaml")).returncode == 0
    changed = tmp_path / "w1.yaml"
    changed.write_text((conftest.DATA / "widget-w1.yaml").read_text().replace("size: 3", "size: 5"))
    result = api.kubectl(*(a.replace("{file}", str(changed)) for a in args))
    assert result.returncode == 0, result.stderr
    widget = await api.get(f"{conftest.WIDGETS}/w1")
    assert widget is not None
    assert (widget["spec"], widget["metadata"]["generation"]) == (
        {"size": expected_size, "color": "blue"},
        2,
    )


async def test_kubectl_delete_removes_a_custom_resource_and_waits_until_it_is_gone(
    api: Api,
) -> None:
    apply_crd(api)
    assert api.kubectl("apply", "-f", str(conftest.DATA / "widget-w1.yaml")).returncode == 0
    result = api.kubectl("delete", "widget", "w1", "--wait=true")
    assert (result.returncode, result.stdout.strip()) == (0, 'widget.example.com "w1" deleted')
    assert await api.get(f"{conftest.WIDGETS}/w1") is None


async def test_client_side_apply_of_a_built_in_removes_what_the_manifest_dropped(
    api: Api, tmp_path: pathlib.Path
) -> None:
    manifest = tmp_path / "cm.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c1\n  labels: {a: '1', b: '2'}\n"
        "data: {x: '1', y: '2'}\n"
    )
    assert api.kubectl("apply", "-f", str(manifest)).returncode == 0
    manifest.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c1\n  labels: {a: '1'}\n"
        "data: {x: '3'}\n"
    )
    result = api.kubectl("apply", "-f", str(manifest))
    assert result.returncode == 0, result.stderr
    stored = await api.get(f"{conftest.CONFIGMAPS}/c1")
    assert stored is not None
    assert (stored["data"], stored["metadata"]["labels"]) == ({"x": "3"}, {"a": "1"})


async def test_client_side_apply_of_a_pod_changes_images_by_container_name(
    api: Api, tmp_path: pathlib.Path
) -> None:
    manifest = tmp_path / "pod.yaml"
    text = (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p1}\nspec:\n  containers:\n"
        "  - {name: a, image: 'nginx:1.25', env: [{name: A, value: '1'}]}\n"
        "  - {name: b, image: 'busybox:1'}\n"
    )
    manifest.write_text(text)
    assert api.kubectl("apply", "-f", str(manifest)).returncode == 0
    manifest.write_text(text.replace("nginx:1.25", "nginx:1.26"))
    result = api.kubectl("apply", "-f", str(manifest))
    assert result.returncode == 0, result.stderr
    stored = await api.get(f"{conftest.PODS}/p1")
    assert stored is not None
    assert [(c["name"], c["image"]) for c in stored["spec"]["containers"]] == [
        ("a", "nginx:1.26"),
        ("b", "busybox:1"),
    ]


def test_kubectl_wait_for_delete_returns_once_finalizers_are_released(
    api: Api,
) -> None:
    created = api.kubectl(
        "create",
        "-f",
        "-",
        input='{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"held","finalizers":["example.com/f"]}}',
    )
    assert created.returncode == 0, created.stderr
    deleted = api.kubectl("delete", "configmap", "held", "--wait=false")
    still = api.kubectl("wait", "--for=delete", "configmap/held", "--timeout=1s")
    released = api.kubectl(
        "patch",
        "configmap",
        "held",
        "--type=json",
        "-p",
        '[{"op":"remove","path":"/metadata/finalizers"}]',
    )
    gone = api.kubectl("wait", "--for=delete", "configmap/held", "--timeout=10s")
    assert [r.returncode for r in (deleted, still, released, gone)] == [0, 1, 0, 0]


def test_kubectl_get_nodes_prints_the_node_table(api: Api) -> None:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1", "labels": {"node-role.kubernetes.io/worker": ""}},
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "nodeInfo": {"kubeletVersion": "v1.32.0"},
        },
    }
    assert api.kubectl("create", "-f", "-", input=json.dumps(node)).returncode == 0
    rows = table_rows(api.kubectl("get", "nodes").stdout)
    assert rows[0] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert [rows[1][i] for i in (0, 1, 2, 4)] == ["n1", "Ready", "worker", "v1.32.0"]


def test_kubectl_get_watch_prints_table_rows_until_the_request_timeout(
    api: Api,
) -> None:
    apply_crd(api)
    assert api.kubectl("apply", "-f", str(conftest.DATA / "widget-w1.yaml")).returncode == 0
    result = subprocess.run(
        ["kubectl", "--request-timeout=2s", "get", "widgets", "--watch"],
        env=api.env,
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    rows = table_rows(result.stdout)
    assert rows[0] == ["NAME", "SIZE", "READY", "AGE"]
    assert rows[1][:2] == ["w1", "3"]


async def test_kubectl_label_and_annotate_patch_built_ins(api: Api) -> None:
    assert api.kubectl("label", "namespace", api.namespace, "team=a").returncode == 0
    assert api.kubectl("annotate", "namespace", api.namespace, "note=x").returncode == 0
    namespace = await api.get(f"/api/v1/namespaces/{api.namespace}")
    assert namespace is not None
    assert (namespace["metadata"]["labels"], namespace["metadata"]["annotations"]) == (
        {"kubernetes.io/metadata.name": api.namespace, "team": "a"},
        {"note": "x"},
    )


async def test_kubectl_applies_and_deletes_a_list_and_a_namespace_with_its_objects(
    api: Api, tmp_path: pathlib.Path
) -> None:
    manifest = tmp_path / "list.yaml"
    manifest.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "List",
                "items": [
                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}},
                    {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "metadata": {"name": "c1", "namespace": "team-a"},
                        "data": {"a": "1"},
                    },
                ],
            }
        )
    )
    applied = api.kubectl("apply", "-f", str(manifest))
    assert applied.returncode == 0, applied.stderr
    deleted = api.kubectl("delete", "-f", str(manifest), "--wait=true")
    assert deleted.returncode == 0, deleted.stderr
    assert await api.get("/api/v1/namespaces/team-a") is None
