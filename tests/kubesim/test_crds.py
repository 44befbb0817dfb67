"""CustomResourceDefinitions (kubesim-spec §2.9): establishment, discovery, pruning, defaults,
fieldValidation, schema validation, printer columns, deletion of a CRD with its objects."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from tests.kubesim import conftest
from tests.kubesim.conftest import CRDS, WIDGETS, Api, call

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


async def test_a_crd_is_established_and_discoverable_at_once(api: Api) -> None:
    await conftest.install_widgets(api)
    crd = (await call(api, "GET", f"{CRDS}/widgets.example.com")).body
    groups = (await call(api, "GET", "/apis")).body["groups"]
    resources = (await call(api, "GET", "/apis/example.com/v1")).body["resources"]
    assert [(c["type"], c["status"]) for c in crd["status"]["conditions"]] == [
        ("NamesAccepted", "True"),
        ("Established", "True"),
    ]
    assert {
        "name": "example.com",
        "versions": [{"groupVersion": "example.com/v1", "version": "v1"}],
        "preferredVersion": {"groupVersion": "example.com/v1", "version": "v1"},
    } in groups
    assert [
        (r["name"], r.get("singularName"), r["namespaced"], r["kind"], r.get("shortNames"))
        for r in resources
    ] == [
        ("widgets", "widget", True, "Widget", ["wd"]),
        ("widgets/status", "", True, "Widget", None),
    ]


async def test_a_crd_named_otherwise_than_plural_dot_group_is_invalid(
    api: Api,
) -> None:
    crd = yaml.safe_load((conftest.DATA / "widgets-crd.yaml").read_text())
    crd["metadata"]["name"] = "gadgets.example.com"
    answer = await call(api, "POST", CRDS, crd)
    assert (answer.status, answer.body["details"]["causes"][0]["field"]) == (422, "metadata.name")


@pytest.mark.parametrize(
    ("validation", "spec", "expected_status", "expected_spec", "expected_warnings"),
    [
        ("Strict", {"size": 1, "bogus": 2}, 400, None, []),
        (
            "Warn",
            {"size": 1, "bogus": 2},
            201,
            {"size": 1, "color": "blue"},
            ['299 - "unknown field \\"spec.bogus\\""'],
        ),
        ("Ignore", {"size": 1, "bogus": 2}, 201, {"size": 1, "color": "blue"}, []),
        (
            "Strict",
            {"size": 1, "extra": {"anything": [1]}},
            201,
            {"size": 1, "color": "blue", "extra": {"anything": [1]}},
            [],
        ),
        ("Strict", {"size": -1}, 422, None, []),
        ("Strict", {"size": "big"}, 422, None, []),
    ],
    ids=[
        "strict unknown field",
        "warn unknown field",
        "ignore unknown field",
        "preserved unknown fields",
        "minimum",
        "type",
    ],
)
async def test_custom_resources_are_pruned_defaulted_and_validated(
    api: Api,
    validation: str,
    spec: dict,
    expected_status: int,
    expected_spec: dict | None,
    expected_warnings: list[str],
) -> None:
    await conftest.install_widgets(api)
    answer = await call(
        api,
        "POST",
        WIDGETS,
        conftest.widget("w1", **spec),
        params={"fieldValidation": validation},
    )
    assert answer.status == expected_status, answer.body
    assert answer.headers.getall("Warning", []) == expected_warnings
    if expected_spec is not None:
        assert answer.body["spec"] == expected_spec


async def test_schema_errors_name_the_field(api: Api) -> None:
    await conftest.install_widgets(api)
    answer = await call(api, "POST", WIDGETS, conftest.widget("w1", size=-1))
    assert answer.body["message"] == (
        'Widget.example.com "w1" is invalid: spec.size: Invalid value: -1: spec.size in body '
        "should be greater than or equal to 0"
    )


async def test_a_table_uses_the_printer_columns(api: Api) -> None:
    await conftest.install_widgets(api)
    await call(api, "POST", WIDGETS, conftest.widget("w1", size=4))
    table = (await call(api, "GET", WIDGETS, headers={"Accept": TABLE})).body
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Size", "Ready", "Age"]
    cells = table["rows"][0]["cells"]
    assert (cells[:3], cells[3].endswith("s")) == (["w1", 4, None], True)


async def test_deleting_a_crd_deletes_its_objects_and_stops_serving_them(
    api: Api,
) -> None:
    await conftest.install_widgets(api)
    await call(api, "POST", WIDGETS, conftest.widget("w1", size=1))
    held = conftest.widget("w2", size=1)
    held["metadata"]["finalizers"] = ["example.com/hold"]
    await call(api, "POST", WIDGETS, held)
    await call(api, "DELETE", f"{CRDS}/widgets.example.com")

    async def only_the_held_one_left() -> bool:
        items = (await api.get("/apis/example.com/v1/widgets"))["items"]
        return [(i["metadata"]["name"], "deletionTimestamp" in i["metadata"]) for i in items] == [
            ("w2", True)
        ]

    await conftest.wait_for(only_the_held_one_left)
    await call(
        api,
        "PATCH",
        f"{WIDGETS}/w2",
        {"metadata": {"finalizers": None}},
        content_type="application/merge-patch+json",
    )

    # kubesim removes the CRD with its last object; kube-apiserver's finalizer a moment later.
    async def gone() -> bool:
        return [
            (await call(api, "GET", WIDGETS)).status,
            (await call(api, "GET", f"{CRDS}/widgets.example.com")).status,
        ] == [404, 404]

    await conftest.wait_for(gone)


async def test_a_second_served_version_reads_the_same_objects(api: Api) -> None:
    crd: dict[str, Any] = yaml.safe_load((conftest.DATA / "widgets-crd.yaml").read_text())
    v2 = copy.deepcopy(crd["spec"]["versions"][0])
    v2.update(name="v2", storage=False)
    crd["spec"]["versions"].append(v2)
    await conftest.install_widgets(api, crd)
    await call(api, "POST", WIDGETS, conftest.widget("w1", size=1))
    read = await call(api, "GET", "/apis/example.com/v2/namespaces/{namespace}/widgets/w1")
    assert (read.body["apiVersion"], read.body["spec"]["size"]) == ("example.com/v2", 1)


async def test_cluster_scoped_custom_resources_have_no_namespace(api: Api) -> None:
    crd = yaml.safe_load((conftest.DATA / "widgets-crd.yaml").read_text())
    crd["spec"]["scope"] = "Cluster"
    await conftest.install_widgets(api, crd)
    created = await call(api, "POST", "/apis/example.com/v1/widgets", conftest.widget("w1", size=1))
    namespaced = await call(api, "GET", WIDGETS)
    assert (created.status, "namespace" in created.body["metadata"], namespaced.status) == (
        201,
        False,
        404,
    )
