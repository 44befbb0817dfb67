"""``/namespaces/validate``: warnings for a namespace whose opt-in would silently do nothing.

A namespace opts all its pods in to queue admission with the *label*
``scheduling.volcano.sh/queue-allocation-gate: "true"``: the webhook configurations send a
namespace's pods to the pod webhooks by a ``namespaceSelector`` on that label, and select
single pods by a CEL ``matchCondition`` on the pod's own annotation (a condition cannot see
the namespace). Two mistakes leave every pod of the namespace ungated without any error, on a
cluster, because those pods never reach the webhook:

- the key written as an *annotation* of the namespace (the pods' opt-in is an annotation, so
  it is an easy slip): ignored;
- the label with a value other than ``"true"`` (``"True"``, ``"yes"``): no opt-in.

This endpoint never refuses anything (its configuration uses ``failurePolicy: Ignore`` and
matches only namespaces carrying the key): it returns warnings, which kubectl prints at the
``kubectl annotate``, ``label``, ``create`` or ``apply`` that made the mistake.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from queuetree.api import admission, bodies
from queuetree.core import objects, problems
from queuetree.webhooks import settings as settings_
from queuetree.webhooks import verdicts, views

GATE = objects.QUEUE_ALLOCATION_GATE


def validate(
    request: admission.Request,
    *,
    view: views.ClusterView,
    settings: settings_.ReviewSettings,
) -> verdicts.Verdict:
    """CREATE and UPDATE of a Namespace: always allowed, with the warnings of
    :func:`opt_in_warnings`. Other operations are refused as a configuration error (code 400),
    as every endpoint does."""
    if request.operation not in ("CREATE", "UPDATE"):
        return verdicts.Verdict(verdicts.wrong_operation(request, expected="`CREATE` or `UPDATE`"))
    metadata = bodies.metadata_of(request.object)
    name = metadata.get("name") if isinstance(metadata.get("name"), str) else request.name
    warnings = opt_in_warnings(
        name=str(name or ""),
        annotations=verdicts.mapping(metadata.get("annotations")),
        labels=verdicts.mapping(metadata.get("labels")),
    )
    return verdicts.Verdict(admission.allow(request.uid, warnings=warnings))


def opt_in_warnings(
    *, name: str, annotations: Mapping[str, Any], labels: Mapping[str, Any]
) -> list[str]:
    """What is wrong with a namespace's opt-in, one sentence per mistake (see the module
    docstring); empty when nothing is."""
    warnings = []
    label = labels.get(GATE)
    if GATE in annotations:
        if label == "true":
            consequence = "the namespace is opted in by its label, whatever the annotation says"
        else:
            consequence = (
                "its pods are not held for queue admission unless they carry the annotation "
                f"themselves; to opt the namespace in: kubectl label namespace {name} {GATE}=true"
            )
        warnings.append(
            f"metadata.annotations{problems.key(GATE)}: a namespace opts in to queue admission by "
            f"label, not by annotation, so the annotation is ignored: {consequence}"
        )
    if label is not None and label not in ("true", "false"):
        warnings.append(
            f'metadata.labels{problems.key(GATE)}: "{label}" is neither "true" nor "false": the '
            'namespace does not opt in to queue admission (write "true" to opt in)'
        )
    return warnings
