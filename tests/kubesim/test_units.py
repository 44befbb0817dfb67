"""Unit tables for kubesim's pure parts: patches, selectors, tables, quantities, versions,
the protobuf decoder and the event log."""

from __future__ import annotations

import asyncio
from typing import Any, NamedTuple

import pytest

from kubesim import cel, errors, patching, pods, protobuf, registry, selectors, store, tables


@pytest.mark.parametrize(
    ("target", "patch", "expected"),
    [
        (
            {"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]}},
            {"spec": {"containers": [{"name": "b", "image": "z"}]}},
            {"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "z"}]}},
        ),
        (
            {"spec": {"containers": [{"name": "a"}, {"name": "b"}]}},
            {"spec": {"containers": [{"name": "a", "$patch": "delete"}]}},
            {"spec": {"containers": [{"name": "b"}]}},
        ),
        (
            {"spec": {"containers": [{"name": "a"}, {"name": "b"}]}},
            {"spec": {"containers": [{"name": "c"}, {"$patch": "replace"}]}},
            {"spec": {"containers": [{"name": "c"}]}},
        ),
        (
            {
                "spec": {
                    "containers": [{"name": "a", "ports": [{"containerPort": 80, "name": "http"}]}]
                }
            },
            {
                "spec": {
                    "containers": [
                        {
                            "name": "a",
                            "ports": [
                                {"containerPort": 80, "protocol": "TCP"},
                                {"containerPort": 81},
                            ],
                        }
                    ]
                }
            },
            {
                "spec": {
                    "containers": [
                        {
                            "name": "a",
                            "ports": [
                                {"containerPort": 80, "name": "http", "protocol": "TCP"},
                                {"containerPort": 81},
                            ],
                        }
                    ]
                }
            },
        ),
        (
            {"spec": {"ports": [{"port": 80, "name": "a"}]}},
            {"spec": {"ports": [{"port": 80, "targetPort": 8080}]}},
            {"spec": {"ports": [{"port": 80, "name": "a", "targetPort": 8080}]}},
        ),
        (
            {"metadata": {"finalizers": ["a", "b"]}},
            {"metadata": {"finalizers": ["b", "c"]}},
            {"metadata": {"finalizers": ["a", "b", "c"]}},
        ),
        (
            {"metadata": {"finalizers": ["a", "b"]}},
            {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}},
            {"metadata": {"finalizers": ["b"]}},
        ),
        (
            {"spec": {"tolerations": [{"key": "a"}]}},
            {"spec": {"tolerations": [{"key": "b"}]}},
            {"spec": {"tolerations": [{"key": "b"}]}},
        ),
        (
            {"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}},
            {"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}},
            {"spec": {"strategy": {"type": "Recreate"}}},
        ),
        (
            {"data": {"a": "1", "b": "2"}},
            {"$setElementOrder/data": ["b"], "data": {"a": None}},
            {"data": {"b": "2"}},
        ),
        (
            {"spec": {"selector": {"a": "1"}}},
            {"spec": {"selector": {"$patch": "replace", "b": "2"}}},
            {"spec": {"selector": {"b": "2"}}},
        ),
        (
            {
                "status": {
                    "conditions": [
                        {"type": "Ready", "status": "False"},
                        {"type": "PodScheduled", "status": "True"},
                    ]
                }
            },
            {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
            {
                "status": {
                    "conditions": [
                        {"type": "Ready", "status": "True"},
                        {"type": "PodScheduled", "status": "True"},
                    ]
                }
            },
        ),
    ],
    ids=[
        "containers by name",
        "delete directive",
        "replace directive in a list",
        "container ports by containerPort",
        "service ports by port",
        "finalizers as a set",
        "delete from a primitive list",
        "atomic list replaced",
        "retain keys",
        "set element order stripped and null deletes",
        "replace directive in a map",
        "conditions by type",
    ],
)
def test_strategic_merge_patch(target: dict, patch: dict, expected: dict) -> None:
    assert patching.apply_strategic_merge_patch(target, patch) == expected


@pytest.mark.parametrize(
    ("target", "patch", "expected"),
    [
        ({"a": {"b": 1, "c": 2}}, {"a": {"b": None, "d": 3}}, {"a": {"c": 2, "d": 3}}),
        ({"a": [1, 2]}, {"a": [3]}, {"a": [3]}),
        ({"a": 1}, {"a": {"b": 2}}, {"a": {"b": 2}}),
    ],
    ids=["nested merge and delete", "lists replace", "scalar becomes object"],
)
def test_merge_patch(target: dict, patch: dict, expected: dict) -> None:
    assert patching.apply_merge_patch(target, patch) == expected


def test_a_strategic_list_item_without_its_merge_key_is_a_bad_request() -> None:
    with pytest.raises(errors.ApiError) as caught:
        patching.apply_strategic_merge_patch(
            {"spec": {"containers": []}}, {"spec": {"containers": [{"image": "x"}]}}
        )
    assert caught.value.code == 400


@pytest.mark.parametrize(
    ("text", "labels", "expected"),
    [
        ("a=1", {"a": "1"}, True),
        ("a==1", {"a": "2"}, False),
        ("a!=1", {}, True),
        ("a in (1, 2)", {"a": "2"}, True),
        ("a notin (1,2)", {"a": "3"}, True),
        ("a,!b", {"a": "x"}, True),
        ("a,!b", {"a": "x", "b": "y"}, False),
        ("example.com/tier=web", {"example.com/tier": "web"}, True),
        ("", {}, True),
    ],
    ids=[
        "equals",
        "double equals",
        "not equals absent",
        "in",
        "notin",
        "exists and not",
        "exists and present",
        "prefixed key",
        "empty",
    ],
)
def test_label_selectors(text: str, labels: dict[str, str], expected: bool) -> None:
    assert (
        selectors.labels_match(selectors.parse_labels(text), {"metadata": {"labels": labels}})
        == expected
    )


@pytest.mark.parametrize(
    "text", ["a in (1", "=1", "a=1,,b"], ids=["unclosed set", "no key", "empty requirement"]
)
def test_malformed_label_selectors_are_bad_requests(text: str) -> None:
    with pytest.raises(errors.ApiError) as caught:
        selectors.parse_labels(text)
    assert caught.value.code == 400


def test_structured_selectors_translate_match_expressions() -> None:
    selector = selectors.from_label_selector(
        {
            "matchLabels": {"app": "a"},
            "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["db"]}],
        }
    )
    assert selector is not None
    matches = [
        selectors.labels_match(selector, {"metadata": {"labels": labels}})
        for labels in ({"app": "a"}, {"app": "a", "tier": "db"}, {})
    ]
    assert matches == [True, False, False]


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        (-5, "<invalid>"),
        (-0.5, "0s"),
        (12, "12s"),
        (119, "119s"),
        (184, "3m4s"),
        (600, "10m"),
        (3 * 3600 + 300, "3h5m"),
        (30 * 3600, "30h"),
        (3 * 86400 + 3600, "3d1h"),
        (40 * 86400, "40d"),
        (3 * 365 * 86400 + 86400, "3y1d"),
    ],
    ids=[
        "invalid",
        "clock skew",
        "seconds",
        "under two minutes",
        "minutes and seconds",
        "minutes",
        "hours and minutes",
        "hours",
        "days and hours",
        "days",
        "years and days",
    ],
)
def test_human_durations_are_kubectls(seconds: float, expected: str) -> None:
    assert tables.human_duration(seconds) == expected


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (".spec.size", [3]),
        ('.status.conditions[?(@.type=="Ready")].status', ["True"]),
        (".status.conditions[1].type", ["Other"]),
        (".status.conditions[*].type", ["Ready", "Other"]),
        ("{.spec.missing}", []),
        (r".spec.limits.nvidia\.com/gpu", ["2"]),
    ],
    ids=["field", "filter", "index", "wildcard", "missing", "an escaped dot in a key"],
)
def test_json_paths_of_printer_columns(path: str, expected: list[Any]) -> None:
    obj = {
        "spec": {"size": 3, "limits": {"nvidia.com/gpu": "2"}},
        "status": {
            "conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "Other", "status": "False"},
            ]
        },
    }
    assert tables.json_path(obj, path) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("500m", "0.5"),
        ("1Gi", "1073741824"),
        ("2k", "2000"),
        ("1e3", "1000"),
        ("3", "3"),
        ("bogus", "0"),
    ],
    ids=["milli", "binary", "decimal", "exponent", "plain", "invalid"],
)
def test_quantities(text: str, expected: str) -> None:
    assert pods.parse_quantity(text) == pods.parse_quantity(expected)


def test_versions_sort_ga_then_beta_then_alpha() -> None:
    versions = ["v1alpha1", "v2beta1", "v1", "v1beta2", "v2", "foo"]
    assert sorted(versions, key=registry.version_priority) == [
        "v2",
        "v1",
        "v2beta1",
        "v1beta2",
        "v1alpha1",
        "foo",
    ]


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, payload: bytes | int) -> bytes:
    if isinstance(payload, int):
        return _varint(number << 3) + _varint(payload)
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _entry(number: int, key: str, value: bytes) -> bytes:
    return _field(number, _field(1, key.encode()) + _field(2, value))


def test_the_protobuf_envelope_of_a_secret_decodes_to_json() -> None:
    meta = _field(1, b"s1") + _field(3, b"ns1") + _entry(11, "app", b"a")
    secret = (
        _field(1, meta) + _entry(2, "password", b"\x00\xff") + _field(3, b"Opaque") + _field(5, 1)
    )
    unknown = _field(1, _field(1, b"v1") + _field(2, b"Secret")) + _field(2, secret)
    assert protobuf.decode(protobuf.MAGIC + unknown) == {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s1", "namespace": "ns1", "labels": {"app": "a"}},
        "data": {"password": "AP8="},
        "type": "Opaque",
        "immutable": True,
    }


@pytest.mark.parametrize(
    ("body", "expected_code"),
    [
        (b"not protobuf", 400),
        (protobuf.MAGIC + _field(1, _field(1, b"apps/v1") + _field(2, b"Deployment")), 415),
        (protobuf.MAGIC + b"\x0a\xff", 400),
    ],
    ids=["no magic", "unsupported kind", "truncated"],
)
def test_undecodable_protobuf_bodies(body: bytes, expected_code: int) -> None:
    with pytest.raises(errors.ApiError) as caught:
        protobuf.decode(body)
    assert caught.value.code == expected_code


def _event(rv: int) -> store.Event:
    obj = {"metadata": {"name": f"o{rv}", "resourceVersion": str(rv)}}
    return store.Event(rv, store.ADDED, obj, store.encode(obj), None)


async def test_the_event_log_resumes_after_an_rv_and_keeps_positions_through_compaction() -> None:
    log = store.ResourceLog()
    for rv in (3, 5, 8, 9):
        log.append(_event(rv))
    position = log.position_after(5)
    assert [e.rv for e in log.events_from(position)] == [8, 9]
    log.compact(keep=1)
    assert (
        log.compacted_rv,
        log.offset,
        [e.rv for e in log.events_from(log.position_after(8))],
    ) == (8, 3, [9])
    waiter = log.wait()
    log.append(_event(10))
    await asyncio.wait_for(waiter, 1)
    log.compact(upto_rv=12)
    assert (log.compacted_rv, log.events, log.end()) == (12, [], 5)


def _gated_pod(**spec: Any) -> dict:
    return {
        "spec": {
            "schedulingGates": [{"name": "example.com/g"}],
            "containers": [{"name": "c", "image": "i"}],
            **spec,
        }
    }


def _required(*expressions: dict) -> dict:
    terms = [{"matchExpressions": list(expressions)}]
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
        }
    }


ZONE_A = {"key": "zone", "operator": "In", "values": ["a"]}
GPU = {"key": "gpu", "operator": "Exists"}


@pytest.mark.parametrize(
    ("old_spec", "new_spec", "allowed"),
    [
        ({}, {"affinity": _required(ZONE_A)}, True),
        ({"affinity": _required(ZONE_A)}, {"affinity": _required(ZONE_A, GPU)}, True),
        ({"affinity": _required(ZONE_A)}, {"affinity": _required(GPU)}, False),
        ({"affinity": _required(ZONE_A)}, {"affinity": {}}, False),
        ({"nodeSelector": {"zone": "a"}}, {"nodeSelector": {"zone": "a", "gpu": "yes"}}, True),
        ({"nodeSelector": {"zone": "a"}}, {"nodeSelector": {"zone": "b"}}, False),
        ({"activeDeadlineSeconds": 100}, {"activeDeadlineSeconds": 50}, True),
        ({"activeDeadlineSeconds": 100}, {"activeDeadlineSeconds": 200}, False),
        ({}, {"priorityClassName": "high"}, False),
    ],
    ids=[
        "affinity set where there was none",
        "required expression appended",
        "required expression replaced",
        "required affinity removed",
        "node selector entry added",
        "node selector entry changed",
        "deadline shortened",
        "deadline extended",
        "priority class changed",
    ],
)
def test_updates_of_a_gated_pod_may_only_tighten_its_placement(
    old_spec: dict, new_spec: dict, allowed: bool
) -> None:
    old, new = _gated_pod(**old_spec), _gated_pod(**new_spec)
    assert (pods.validate_update(new, old) == []) == allowed


POD = {"metadata": {"name": "p1", "annotations": {"a": "b"}}, "spec": {}}


class CelCase(NamedTuple):
    expressions: Any
    expected: Any


CEL_CASES = {
    "no conditions call the webhook": CelCase(expressions=[], expected=cel.Decision(matches=True)),
    "all true call it": CelCase(
        expressions=["has(object.metadata.annotations)", "request.operation == 'CREATE'"],
        expected=cel.Decision(matches=True),
    ),
    "a false one skips it": CelCase(
        expressions=["true", "object.metadata.name == 'other'"], expected=cel.Decision(False)
    ),
    "a false one wins over an error": CelCase(
        expressions=["object.metadata.labels['x'] == 'y'", "false"],
        expected=cel.Decision(matches=False),
    ),
    "an error without a false is an error": CelCase(
        expressions=["object.metadata.annotations['x'] == 'y'", "true"],
        expected=cel.Decision(
            False,
            "expression 'object.metadata.annotations['x'] == 'y'' resulted in error: "
            "no such key: x",
        ),
    ),
    "a non-boolean is an error": CelCase(
        expressions=["1"],
        expected=cel.Decision(
            False, "expression '1' resulted in error: expected bool, got IntType"
        ),
    ),
    "oldObject is null on a create": CelCase(
        expressions=["oldObject == null"], expected=cel.Decision(matches=True)
    ),
}


@pytest.mark.parametrize(("expressions", "expected"), CEL_CASES.values(), ids=CEL_CASES.keys())
def test_match_conditions_decide_as_kube_apiserver_does(
    expressions: list[str], expected: cel.Decision
) -> None:
    conditions = [{"name": f"c{i}", "expression": e} for i, e in enumerate(expressions)]
    decision = cel.evaluate(conditions, obj=POD, old_obj=None, request={"operation": "CREATE"})
    assert decision == expected


@pytest.mark.parametrize(
    ("expression", "expected"),
    [("object.metadata.name == 'p1'", None), ("object.metadata.name ==", "ERROR: <input>:1:")],
    ids=["valid", "syntax error"],
)
def test_match_conditions_are_compiled(expression: str, expected: str | None) -> None:
    problem = cel.compile_error(expression)
    assert (problem or "")[: len(expected or "")] == (expected or "")
    assert (problem is None) == (expected is None)
