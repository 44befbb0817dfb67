"""``queuetree.core.field_rules``: the pieces of the field rules not seen whole through a review.
(The webhook tables in tests/webhooks/ cover each admission rule through the reviews.)"""

from __future__ import annotations

import pytest

from queuetree.core import field_rules


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        pytest.param("pods", True, id="pods"),
        pytest.param("nvidia.com/gpu", True, id="extended"),
        pytest.param("cpu", False, id="cpu"),
        pytest.param("hugepages-2Mi", False, id="hugepages"),
        pytest.param("kubernetes.io/batch", False, id="prefixed-native"),
        pytest.param("gpu", False, id="unprefixed"),
    ],
)
def test_integer_resources_are_counts_and_extended_resources(name: str, expected: bool) -> None:
    assert field_rules.is_integer_resource_name(name) is expected
