"""``/queues/mutate``: the defaults of spec §4.2, and ``spec.parent`` defaulted to root."""

from __future__ import annotations

from typing import Any

import pytest

from tests.webhooks.builders import allowed, answer, denied, outcome, queue, review

PATH = "/queues/mutate"
RECLAIMABLE = {"op": "add", "path": "/spec/reclaimable", "value": True}
WEIGHT = {"op": "add", "path": "/spec/weight", "value": 1}
PARENT = {"op": "add", "path": "/spec/parent", "value": "root"}


@pytest.mark.parametrize(
    ("operation", "obj", "expected"),
    [
        pytest.param(
            "CREATE",
            queue("a"),
            allowed(patch=[RECLAIMABLE, WEIGHT, PARENT]),
            id="every-default-in-order",
        ),
        pytest.param(
            "CREATE",
            queue("a", "team", reclaimable=False, weight=3),
            allowed(),
            id="nothing-to-default-means-no-patch",
        ),
        pytest.param(
            "CREATE",
            queue("a", "team", reclaimable=True, weight=0),
            allowed(patch=[WEIGHT]),
            id="weight-zero-becomes-one",
        ),
        pytest.param(
            "CREATE",
            queue("root", reclaimable=False, weight=1),
            allowed(),
            id="root-gets-no-parent",
        ),
        pytest.param(
            "CREATE",
            queue("a", "", reclaimable=True, weight=1),
            allowed(patch=[PARENT]),
            id="empty-parent-becomes-root",
        ),
        pytest.param(
            "CREATE",
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": "a"},
            },
            allowed(
                patch=[{"op": "add", "path": "/spec", "value": {}}, RECLAIMABLE, WEIGHT, PARENT]
            ),
            id="no-spec-at-all",
        ),
        pytest.param(
            "CREATE",
            queue(
                "a",
                "root",
                reclaimable=True,
                weight=1,
                annotations={"volcano.sh/hierarchy": "a/b", "volcano.sh/hierarchy-weights": "2/3"},
            ),
            allowed(
                patch=[
                    {
                        "op": "add",
                        "path": "/metadata/annotations/volcano.sh~1hierarchy",
                        "value": "root/a/b",
                    },
                    {
                        "op": "add",
                        "path": "/metadata/annotations/volcano.sh~1hierarchy-weights",
                        "value": "1/2/3",
                    },
                ]
            ),
            id="legacy-hierarchy-gets-root-prefix",
        ),
        pytest.param(
            "CREATE",
            queue(
                "a",
                "root",
                reclaimable=True,
                weight=1,
                annotations={
                    "volcano.sh/hierarchy": "root/a",
                    "volcano.sh/hierarchy-weights": "1/3",
                },
            ),
            allowed(),
            id="legacy-hierarchy-already-rooted",
        ),
        pytest.param(
            "UPDATE",
            queue("a"),
            denied("invalid operation `UPDATE`, expect operation to be `CREATE`", code=400),
            id="update-is-not-mutated",
        ),
    ],
)
def test_queue_defaults_are_added_as_json_patch(
    operation: str, obj: dict[str, Any], expected: dict[str, Any]
) -> None:
    assert outcome(answer(PATH, review(operation, obj, old=obj))) == expected
