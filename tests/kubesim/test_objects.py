"""Object semantics over HTTP (kubesim-spec §2.4, §2.5, §2.7): codes, Status bodies, RVs,
generation, no-op writes, dry runs, finalizers, the status subresource and the patch types."""

from __future__ import annotations

from typing import Any

import pytest

from tests.kubesim import conftest
from tests.kubesim.conftest import CONFIGMAPS, PODS, WIDGETS, Api, call


def failure(code: int, reason: str, message: str, **details: Any) -> dict:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return body


async def test_create_sets_uid_rv_timestamp_and_answers_201(api: Api) -> None:
    answer = await call(api, "POST", CONFIGMAPS, conftest.configmap("c1"))
    assert answer.status == 201
    meta = answer.body["metadata"]
    # managedFields: kube-apiserver's only (kubesim/README.md, server-side apply).
    assert sorted(set(meta) - {"managedFields"}) == [
        "creationTimestamp",
        "name",
        "namespace",
        "resourceVersion",
        "uid",
    ]
    assert (meta["creationTimestamp"][-1], meta["resourceVersion"].isdigit()) == ("Z", True)
    read = await call(api, "GET", f"{CONFIGMAPS}/c1")
    assert (read.status, read.body) == (200, answer.body)


async def test_generate_name_appends_five_characters(api: Api) -> None:
    body = conftest.configmap("")
    body["metadata"] = {"generateName": "gen-"}
    answer = await call(api, "POST", CONFIGMAPS, body)
    name = answer.body["metadata"]["name"]
    assert (answer.status, name[:4], len(name)) == (201, "gen-", 9)
    assert set(name[4:]) <= set("abcdefghijklmnopqrstuvwxyz0123456789")


@pytest.mark.parametrize(
    ("method", "path", "body", "expected"),
    [
        (
            "GET",
            f"{CONFIGMAPS}/missing",
            None,
            failure(
                404, "NotFound", 'configmaps "missing" not found', name="missing", kind="configmaps"
            ),
        ),
        (
            "POST",
            "/api/v1/namespaces/nowhere/configmaps",
            conftest.configmap("c1"),
            failure(
                404, "NotFound", 'namespaces "nowhere" not found', name="nowhere", kind="namespaces"
            ),
        ),
        (
            "DELETE",
            f"{WIDGETS}/missing",
            None,
            failure(
                404,
                "NotFound",
                'widgets.example.com "missing" not found',
                name="missing",
                group="example.com",
                kind="widgets",
            ),
        ),
        (
            "POST",
            PODS,
            conftest.pod("p1", gates=("example.com/g",), nodeName="n1"),
            failure(
                422,
                "Invalid",
                'Pod "p1" is invalid: spec.nodeName: Forbidden: cannot be set until all '
                "schedulingGates have been cleared",
                name="p1",
                kind="Pod",
                causes=[
                    {
                        "reason": "FieldValueForbidden",
                        "message": "Forbidden: cannot be set until all schedulingGates "
                        "have been cleared",
                        "field": "spec.nodeName",
                    }
                ],
            ),
        ),
        (
            "POST",
            CONFIGMAPS,
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}},
            failure(
                400,
                "BadRequest",
                'Secret in version "v1" cannot be handled as a ConfigMap: converting '
                "(v1.Secret) to (core.ConfigMap): unknown conversion",
            ),
        ),
    ],
    ids=[
        "get missing",
        "create in a missing namespace",
        "delete a missing custom resource",
        "invalid pod",
        "wrong kind",
    ],
)
async def test_errors_are_status_bodies_with_the_upstream_codes(
    api: Api, method: str, path: str, body: Any, expected: dict
) -> None:
    await conftest.install_widgets(api)
    answer = await call(api, method, path, body)
    assert (answer.status, answer.body) == (expected["code"], expected)


async def test_creating_a_taken_name_is_409_already_exists(api: Api) -> None:
    await call(api, "POST", CONFIGMAPS, conftest.configmap("c1"))
    answer = await call(api, "POST", CONFIGMAPS, conftest.configmap("c1"))
    assert (answer.status, answer.body["reason"], answer.body["message"]) == (
        409,
        "AlreadyExists",
        'configmaps "c1" already exists',
    )


async def test_a_stale_resource_version_is_409_conflict(api: Api) -> None:
    created = (await call(api, "POST", CONFIGMAPS, conftest.configmap("c1"))).body
    created["data"] = {"k": "v2"}
    first = await call(api, "PUT", f"{CONFIGMAPS}/c1", created)
    second = await call(api, "PUT", f"{CONFIGMAPS}/c1", created)
    merge = await call(
        api,
        "PATCH",
        f"{CONFIGMAPS}/c1",
        {"metadata": {"resourceVersion": created["metadata"]["resourceVersion"]}, "data": {}},
        content_type="application/merge-patch+json",
    )
    message = (
        'Operation cannot be fulfilled on configmaps "c1": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )
    assert first.status == 200
    assert [(a.status, a.body["reason"], a.body["message"]) for a in (second, merge)] == [
        (409, "Conflict", message),
        (409, "Conflict", message),
    ]


async def test_a_no_op_write_keeps_the_resource_version(api: Api) -> None:
    created = (await call(api, "POST", CONFIGMAPS, conftest.configmap("c1"))).body
    same = await call(
        api,
        "PATCH",
        f"{CONFIGMAPS}/c1",
        {"data": {"k": "v"}},
        content_type="application/merge-patch+json",
    )
    put = await call(api, "PUT", f"{CONFIGMAPS}/c1", created)
    assert [same.body, put.body] == [created, created]


async def test_generation_bumps_on_spec_changes_only(api: Api) -> None:
    await conftest.install_widgets(api)
    await call(api, "POST", WIDGETS, conftest.widget("w1", size=1))
    generations = []
    for path, body in [
        ("w1", {"metadata": {"labels": {"a": "b"}}}),
        ("w1/status", {"status": {"phase": "x"}}),
        ("w1", {"spec": {"size": 2}}),
        ("w1", {"spec": {"size": 3}}),
    ]:
        answer = await call(
            api, "PATCH", f"{WIDGETS}/{path}", body, content_type="application/merge-patch+json"
        )
        generations.append(answer.body["metadata"]["generation"])
    assert generations == [1, 1, 2, 3]


async def test_the_main_endpoint_keeps_status_and_status_keeps_the_rest(
    api: Api,
) -> None:
    await conftest.install_widgets(api)
    await call(api, "POST", WIDGETS, conftest.widget("w1", size=1))
    main = await call(
        api,
        "PATCH",
        f"{WIDGETS}/w1",
        {"spec": {"size": 2}, "status": {"phase": "ignored"}},
        content_type="application/merge-patch+json",
    )
    status = await call(
        api,
        "PATCH",
        f"{WIDGETS}/w1/status",
        {"spec": {"size": 9}, "status": {"phase": "Ready"}},
        content_type="application/merge-patch+json",
    )
    assert ("status" in main.body, main.body["spec"]["size"]) == (False, 2)
    assert (status.body["status"], status.body["spec"]["size"]) == ({"phase": "Ready"}, 2)


async def test_status_of_a_resource_without_the_subresource_is_404(
    api: Api,
) -> None:
    await call(api, "POST", CONFIGMAPS, conftest.configmap("c1"))
    answer = await call(api, "GET", f"{CONFIGMAPS}/c1/status")
    assert answer.status == 404


@pytest.mark.parametrize(
    ("method", "path_suffix", "body", "content_type"),
    [
        ("POST", "", conftest.configmap("c2"), "application/json"),
        ("PUT", "/c1", None, "application/json"),
        ("PATCH", "/c1", {"data": {"k": "changed"}}, "application/merge-patch+json"),
        ("DELETE", "/c1", None, "application/json"),
    ],
    ids=["create", "update", "patch", "delete"],
)
async def test_dry_run_changes_nothing(
    api: Api, method: str, path_suffix: str, body: Any, content_type: str
) -> None:
    created = (await call(api, "POST", CONFIGMAPS, conftest.configmap("c1"))).body
    if body is None and method == "PUT":
        body = {**created, "data": {"k": "changed"}}
    answer = await call(
        api,
        method,
        CONFIGMAPS + path_suffix,
        body,
        content_type=content_type,
        params={"dryRun": "All"},
    )
    assert answer.status in (200, 201), answer.body
    listed = await api.get(CONFIGMAPS)
    assert [i["metadata"] for i in conftest.own_items(listed)] == [created["metadata"]]
    assert await api.get(f"{CONFIGMAPS}/c1") == created


async def test_finalizers_hold_a_deleted_object_until_they_are_removed(
    api: Api,
) -> None:
    await call(api, "POST", CONFIGMAPS, conftest.configmap("c1", finalizers=["example.com/f"]))
    deleted = await call(api, "DELETE", f"{CONFIGMAPS}/c1", {"propagationPolicy": "Background"})
    meta = deleted.body["metadata"]
    assert (deleted.status, meta["deletionGracePeriodSeconds"], "deletionTimestamp" in meta) == (
        200,
        0,
        True,
    )
    added = await call(
        api,
        "PATCH",
        f"{CONFIGMAPS}/c1",
        [{"op": "add", "path": "/metadata/finalizers/-", "value": "example.com/new"}],
        content_type="application/json-patch+json",
    )
    assert (added.status, added.body["reason"]) == (422, "Invalid")
    assert "no new finalizers can be added if the object is being deleted" in added.body["message"]
    released = await call(
        api,
        "PATCH",
        f"{CONFIGMAPS}/c1",
        {"metadata": {"finalizers": None}},
        content_type="application/merge-patch+json",
    )
    assert released.status == 200
    assert await api.get(f"{CONFIGMAPS}/c1") is None


@pytest.mark.parametrize(
    ("preconditions", "expected_status"),
    [
        ({"uid": "not-the-uid"}, 409),
        ({"resourceVersion": "1"}, 409),
        ({}, 200),
    ],
    ids=["wrong uid", "wrong resource version", "none"],
)
async def test_delete_honours_preconditions(
    api: Api, preconditions: dict, expected_status: int
) -> None:
    await call(api, "POST", CONFIGMAPS, conftest.configmap("c1"))
    answer = await call(api, "DELETE", f"{CONFIGMAPS}/c1", {"preconditions": preconditions})
    assert answer.status == expected_status
    exists = await api.get(f"{CONFIGMAPS}/c1") is not None
    assert exists == (expected_status != 200)


async def test_delete_without_finalizers_answers_a_success_status(api: Api) -> None:
    created = (await call(api, "POST", CONFIGMAPS, conftest.configmap("c1"))).body
    answer = await call(api, "DELETE", f"{CONFIGMAPS}/c1")
    assert (answer.status, answer.body) == (
        200,
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": {"name": "c1", "kind": "configmaps", "uid": created["metadata"]["uid"]},
        },
    )


@pytest.mark.parametrize(
    ("content_type", "patch", "expected_status", "expected_data"),
    [
        (
            "application/json-patch+json",
            [{"op": "add", "path": "/data/n", "value": "1"}],
            200,
            {"k": "v", "n": "1"},
        ),
        (
            "application/json-patch+json",
            [{"op": "test", "path": "/data/k", "value": "other"}],
            422,
            {"k": "v"},
        ),
        (
            "application/json-patch+json",
            [{"op": "remove", "path": "/data/missing"}],
            422,
            {"k": "v"},
        ),
        ("application/json-patch+json", {"op": "add"}, 400, {"k": "v"}),
        ("application/merge-patch+json", {"data": {"k": None, "n": "2"}}, 200, {"n": "2"}),
        ("application/strategic-merge-patch+json", {"data": {"n": "3"}}, 200, {"k": "v", "n": "3"}),
        (
            "application/apply-patch+yaml",
            {"apiVersion": "v1", "kind": "ConfigMap", "data": {"n": "4"}},
            422,
            {"k": "v"},
        ),
        ("text/plain", {"data": {}}, 415, {"k": "v"}),
    ],
    ids=[
        "json patch",
        "json patch failed test",
        "json patch bad path",
        "json patch not a list",
        "merge patch",
        "strategic merge patch",
        "apply without fieldManager",
        "unknown content type",
    ],
)
async def test_patch_types_and_their_failures(
    api: Api,
    content_type: str,
    patch: Any,
    expected_status: int,
    expected_data: dict,
) -> None:
    await call(api, "POST", CONFIGMAPS, conftest.configmap("c1"))
    answer = await call(api, "PATCH", f"{CONFIGMAPS}/c1", patch, content_type=content_type)
    assert answer.status == expected_status, answer.body
    stored = await api.get(f"{CONFIGMAPS}/c1")
    assert stored is not None
    assert stored["data"] == expected_data


async def test_strategic_merge_patch_is_refused_for_custom_resources(
    api: Api,
) -> None:
    await conftest.install_widgets(api)
    await call(api, "POST", WIDGETS, conftest.widget("w1", size=1))
    answer = await call(
        api,
        "PATCH",
        f"{WIDGETS}/w1",
        {"spec": {"size": 2}},
        content_type="application/strategic-merge-patch+json",
    )
    assert (answer.status, answer.body["reason"]) == (415, "UnsupportedMediaType")


async def test_apply_patch_creates_then_merges(api: Api) -> None:
    params = {"fieldManager": "test", "force": "true"}
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c1"}, "data": {"a": "1"}}
    created = await call(
        api,
        "PATCH",
        f"{CONFIGMAPS}/c1",
        body,
        content_type="application/apply-patch+yaml",
        params=params,
    )
    body["data"] = {"b": "2"}
    merged = await call(
        api,
        "PATCH",
        f"{CONFIGMAPS}/c1",
        body,
        content_type="application/apply-patch+yaml",
        params=params,
    )
    # kube-apiserver removes what the same manager stopped applying; kubesim has no field
    # ownership and merges (kubesim/README.md).
    expected = {"b": "2"} if api.real else {"a": "1", "b": "2"}
    assert (created.status, merged.status, merged.body["data"]) == (201, 200, expected)


async def test_creating_in_a_terminating_namespace_is_403(api: Api) -> None:
    await call(
        api,
        "POST",
        "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns1"}},
    )
    await call(
        api,
        "POST",
        "/api/v1/namespaces/ns1/configmaps",
        conftest.configmap("held", finalizers=["x/y"]),
    )
    deleted = await call(api, "DELETE", "/api/v1/namespaces/ns1")
    refused = await call(api, "POST", "/api/v1/namespaces/ns1/configmaps", conftest.configmap("c2"))
    assert (deleted.status, deleted.body["status"]["phase"]) == (200, "Terminating")
    assert (refused.status, refused.body["reason"]) == (403, "Forbidden")

    async def held_is_terminating() -> bool:
        held = await api.get("/api/v1/namespaces/ns1/configmaps/held")
        return held is not None and "deletionTimestamp" in held["metadata"]

    # The namespace's content is deleted a moment later, as the namespace controller does.
    await conftest.wait_for(held_is_terminating)
    await call(
        api,
        "PATCH",
        "/api/v1/namespaces/ns1/configmaps/held",
        {"metadata": {"finalizers": None}},
        content_type="application/merge-patch+json",
    )

    async def gone() -> bool:
        return await api.get("/api/v1/namespaces/ns1") is None

    await conftest.wait_for(gone)


async def test_the_initial_namespaces_exist_with_their_name_label(api: Api) -> None:
    initial = ("default", "kube-node-lease", "kube-public", "kube-system")
    answer = await call(api, "GET", "/api/v1/namespaces")
    assert [
        (n["metadata"]["name"], n["metadata"]["labels"])
        for n in answer.body["items"]
        if n["metadata"]["name"] in initial
    ] == [(name, {"kubernetes.io/metadata.name": name}) for name in initial]


async def test_query_booleans_are_false_only_when_0_or_false(api: Api) -> None:
    values = ("True", "false", "yes", "0", "FALSE", "")
    answers = [
        await call(api, "GET", CONFIGMAPS, params={"watch": value, "timeoutSeconds": "1"})
        for value in values
    ]
    lists = [isinstance(a.body, dict) and a.body.get("kind") == "ConfigMapList" for a in answers]
    assert [a.status for a in answers] == [200] * len(values)
    assert lists == [False, True, False, True, True, False]


def owned(name: str, *owners: dict) -> dict:
    refs = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": o["metadata"]["name"],
            "uid": o["metadata"]["uid"],
        }
        for o in owners
    ]
    return conftest.configmap(name, ownerReferences=refs)


@pytest.mark.parametrize(
    ("options", "expected_names", "expected_owner_names"),
    [
        ({"propagationPolicy": "Background"}, ["other", "shared"], {"shared": ["other"]}),
        (
            {"propagationPolicy": "Orphan"},
            ["child", "other", "shared"],
            {"child": [], "shared": ["other"]},
        ),
    ],
    ids=["background", "orphan"],
)
async def test_dependents_are_garbage_collected_with_their_last_owner(
    api: Api, options: dict, expected_names: list[str], expected_owner_names: dict
) -> None:
    owner = (await call(api, "POST", CONFIGMAPS, conftest.configmap("owner"))).body
    other = (await call(api, "POST", CONFIGMAPS, conftest.configmap("other"))).body
    await call(api, "POST", CONFIGMAPS, owned("child", owner))
    await call(api, "POST", CONFIGMAPS, owned("shared", owner, other))
    assert (await call(api, "DELETE", f"{CONFIGMAPS}/owner", options)).status == 200

    async def remaining() -> tuple[list[str], dict[str, list[str]]]:
        items = conftest.own_items(await api.get(CONFIGMAPS))
        owners = {
            o["metadata"]["name"]: [r["name"] for r in o["metadata"].get("ownerReferences", [])]
            for o in items
            if o["metadata"]["name"] in expected_owner_names
        }
        return [o["metadata"]["name"] for o in items], owners

    # The garbage collector of a real cluster is a controller: it acts a moment later.
    async def collected() -> bool:
        return await remaining() == (expected_names, expected_owner_names)

    await conftest.wait_for(collected)


async def test_delete_collection_deletes_the_selected_objects(api: Api) -> None:
    for name, tier in (("a", "web"), ("b", "web"), ("c", "db")):
        await call(api, "POST", CONFIGMAPS, conftest.configmap(name, labels={"tier": tier}))
    answer = await call(api, "DELETE", CONFIGMAPS, params={"labelSelector": "tier=web"})
    remaining = conftest.names(await api.get(CONFIGMAPS))
    assert (answer.status, remaining) == (200, ["c"])


async def test_an_unconditional_update_of_a_custom_resource_is_invalid(
    api: Api,
) -> None:
    await conftest.install_widgets(api)
    await call(api, "POST", WIDGETS, conftest.widget("w1", size=1))
    answer = await call(api, "PUT", f"{WIDGETS}/w1", conftest.widget("w1", size=2))
    assert (answer.status, answer.body["message"]) == (
        422,
        'widgets.example.com "w1" is invalid: metadata.resourceVersion: Invalid value: 0: '
        "must be specified for an update",
    )


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", f"{CONFIGMAPS}/c1"),
        ("DELETE", f"{PODS}/p1/status"),
        ("GET", f"{PODS}/p1/eviction"),
        ("PATCH", f"{PODS}/p1/binding"),
        ("PUT", CONFIGMAPS),
    ],
    ids=[
        "create on an object",
        "delete a status",
        "read an eviction",
        "patch a binding",
        "update a collection",
    ],
)
async def test_verbs_a_path_does_not_serve_are_405(api: Api, method: str, path: str) -> None:
    await call(api, "POST", CONFIGMAPS, conftest.configmap("c1"))
    await call(api, "POST", PODS, conftest.pod("p1"))
    answer = await call(api, method, path, {})
    assert (answer.status, answer.body["reason"]) == (405, "MethodNotAllowed")
    assert await api.get(f"{PODS}/p1") is not None


def webhook_configuration(timeout: int | None = None) -> dict:
    hook: dict[str, Any] = {
        "name": "pods.example.com",
        "clientConfig": {"url": "https://127.0.0.1:9443/mutate", "caBundle": ""},
        "rules": [
            {
                "operations": ["CREATE"],
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "resources": ["pods"],
            }
        ],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
    }
    if timeout is not None:
        hook["timeoutSeconds"] = timeout
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "example"},
        "webhooks": [hook],
    }


MUTATING = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"


async def test_webhook_configurations_are_defaulted_and_validated_on_write(
    api: Api,
) -> None:
    refused = await call(api, "POST", MUTATING, webhook_configuration(timeout=31))
    created = await call(api, "POST", MUTATING, webhook_configuration())
    hook = created.body["webhooks"][0]
    assert (refused.status, refused.body["details"]["causes"][0]["field"]) == (
        422,
        "webhooks[0].timeoutSeconds",
    )
    assert (
        created.status,
        hook["failurePolicy"],
        hook["timeoutSeconds"],
        hook["reinvocationPolicy"],
    ) == (
        201,
        "Fail",
        10,
        "Never",
    )
    patched = await call(
        api,
        "PATCH",
        f"{MUTATING}/example",
        [{"op": "replace", "path": "/webhooks/0/timeoutSeconds", "value": 0}],
        content_type="application/json-patch+json",
    )
    assert patched.status == 422
