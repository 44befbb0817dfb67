"""``/namespaces/validate``: a namespace whose opt-in key would silently opt nothing in gets a
warning (an annotation instead of the label, a label value other than "true"); nothing is ever
refused."""

from __future__ import annotations

from typing import Any

import pytest

from tests.webhooks.builders import GATE, allowed, answer, outcome, review

NAMESPACES = {"group": "", "version": "v1", "resource": "namespaces"}
NOT_BY_ANNOTATION = (
    f'metadata.annotations["{GATE}"]: a namespace opts in to queue admission by label, not by '
    "annotation, so the annotation is ignored: "
)
UNGATED = (
    "its pods are not held for queue admission unless they carry the annotation themselves; "
    f"to opt the namespace in: kubectl label namespace ml {GATE}=true"
)


def namespace(
    *, annotations: dict[str, str] | None = None, labels: dict[str, str] | None = None
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "ml"}
    if annotations is not None:
        metadata["annotations"] = annotations
    if labels is not None:
        metadata["labels"] = labels
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}


@pytest.mark.parametrize(
    ("operation", "obj", "expected"),
    [
        pytest.param("CREATE", namespace(labels={GATE: "true"}), allowed(), id="label-true"),
        pytest.param("UPDATE", namespace(labels={GATE: "false"}), allowed(), id="label-false"),
        pytest.param("CREATE", namespace(), allowed(), id="no-key"),
        pytest.param(
            "CREATE",
            namespace(annotations={GATE: "true"}),
            allowed(warnings=[NOT_BY_ANNOTATION + UNGATED]),
            id="annotation-instead-of-label",
        ),
        pytest.param(
            "UPDATE",
            namespace(annotations={GATE: "false"}, labels={GATE: "true"}),
            allowed(
                warnings=[
                    NOT_BY_ANNOTATION
                    + "the namespace is opted in by its label, whatever the annotation says"
                ]
            ),
            id="annotation-beside-the-label",
        ),
        pytest.param(
            "UPDATE",
            namespace(labels={GATE: "True"}),
            allowed(
                warnings=[
                    f'metadata.labels["{GATE}"]: "True" is neither "true" nor "false": the '
                    'namespace does not opt in to queue admission (write "true" to opt in)'
                ]
            ),
            id="label-misspelt",
        ),
        pytest.param(
            "CREATE",
            namespace(annotations={GATE: "true"}, labels={GATE: "yes"}),
            allowed(
                warnings=[
                    NOT_BY_ANNOTATION + UNGATED,
                    f'metadata.labels["{GATE}"]: "yes" is neither "true" nor "false": the '
                    'namespace does not opt in to queue admission (write "true" to opt in)',
                ]
            ),
            id="both-mistakes",
        ),
    ],
)
def test_a_namespace_whose_opt_in_does_nothing_is_warned_about(
    operation: str, obj: dict[str, Any], expected: dict[str, Any]
) -> None:
    response = answer("/namespaces/validate", review(operation, obj, resource=NAMESPACES))
    assert outcome(response) == expected


def test_a_namespace_review_of_another_operation_is_refused_as_a_configuration_error() -> None:
    response = answer(
        "/namespaces/validate", review("DELETE", None, old=namespace(), resource=NAMESPACES)
    )
    assert (response["allowed"], response["status"]["code"]) == (False, 400)
