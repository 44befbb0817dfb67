"""api.bodies: the fingerprints the pod informer keeps instead of the parts of a pod."""

from __future__ import annotations

import datetime
import json
from types import MappingProxyType
from typing import Any

import pytest

from queuetree.api import bodies

SPEC = {"containers": [{"name": "main", "resources": {"requests": {"cpu": "1"}}}]}


@pytest.mark.parametrize(
    ("first", "second", "same"),
    [
        (("uid", {"a": "1"}, SPEC), ("uid", {"a": "1"}, SPEC), True),
        (("uid", {"a": "1"}, SPEC), ("uid", {"a": "2"}, SPEC), False),
        (({"cpu": "1"},), ({"cpu": 1},), False),
        (({"x": None},), ({"x": False},), False),
        (({"x": 1},), ({"x": 1.0},), False),
        ((MappingProxyType({"a": "1"}),), ({"a": "1"},), True),
        (({"a": "1", "b": "2"},), ({"b": "2", "a": "1"},), False),
    ],
    ids=[
        "the same values",
        "a label changed",
        "a string is not the number it spells",
        "null is not false",
        "an integer is not the float of the same value",
        "a read-only mapping reads as the dict it wraps",
        "the same keys in another order differ (an unneeded parse, never a missed one)",
    ],
)
def test_fingerprints_are_equal_only_for_equal_values(first: Any, second: Any, same: bool) -> None:
    assert (bodies.fingerprint(first) == bodies.fingerprint(second)) is same
    assert isinstance(bodies.fingerprint(first), int)


@pytest.mark.parametrize(
    "value",
    [
        {"created": datetime.datetime(2026, 12, 3, tzinfo=datetime.UTC)},
        {"items": {1, 2}},
        {1: "a key that is not a string"},
        {"n": 2**70},
        {"flag": True, "label": type("Label", (str,), {})("x")},
        {"spec": type("Spec", (dict,), {})(a="1")},
    ],
    ids=[
        "a datetime",
        "a set",
        "a key that is not a string",
        "an integer beyond 64 bits",
        "a subclass of str",
        "a subclass of dict",
    ],
)
def test_what_is_not_plain_json_has_no_fingerprint(value: Any) -> None:
    """The informer then treats the part as changed, and parses the pod again."""
    assert bodies.fingerprint(value) is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ([{"op": "remove", "path": "/spec/schedulingGates/0"}], None),
        ({"metadata": {"annotations": {"a": "b", "gone": None}}}, None),
        ({"status": {"allocated": {"cpu": "2"}, "running": 3, "ok": True}}, None),
        ({"x": MappingProxyType({"a": "1"})}, {"x": {"a": "1"}}),
        ({"ops": ("a", "b")}, {"ops": ["a", "b"]}),
        ({"name": "é ü ✓"}, None),
    ],
    ids=[
        "a JSON patch",
        "a merge patch, None removing a key",
        "numbers, strings and booleans",
        "a read-only mapping as the dict it holds",
        "a tuple as a list",
        "text beyond ASCII",
    ],
)
def test_a_request_body_is_its_json_text(value: Any, expected: Any) -> None:
    encoded = bodies.encode(value)
    assert json.loads(encoded) == (value if expected is None else expected)


@pytest.mark.parametrize(
    "value",
    [{"at": datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)}, {"x": {1, 2}}, {"x": object()}],
    ids=["a datetime (timestamps are sent as strings)", "a set", "an object"],
)
def test_what_is_not_json_is_refused_as_a_request_body(value: Any) -> None:
    with pytest.raises(TypeError):
        bodies.encode(value)
