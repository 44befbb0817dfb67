"""Queue tree validation as a user meets it: kubectl apply, patch and delete, and what it prints.

The webhook (validatequeue.volcano.sh, mutatequeue.volcano.sh) guards the tree: depth, the
children's sums against their parent's, capability against the nearest ancestor's, the root
queue's figures, which queues may be deleted. Denials are printed by kubectl as
``admission webhook "<name>" denied the request: <message>``; warnings as ``Warning: ...``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

import pytest

from e2e import support
from queuetree.sandbox import observing

CPU = "cpu"


@dataclasses.dataclass(frozen=True)
class Denial:
    """Queues to create first, then one manifest to apply, and the words of the denial."""

    setup: Callable[[str], list[dict[str, Any]]]
    attempt: Callable[[str], dict[str, Any]]
    says: str


def chain(prefix: str, length: int) -> list[dict[str, Any]]:
    """Queues ``prefix-1`` under root, ``prefix-2`` under it, ... ``length`` levels deep."""
    return [
        support.queue(f"{prefix}-{level}", parent=f"{prefix}-{level - 1}" if level > 1 else "root")
        for level in range(1, length + 1)
    ]


DENIALS = {
    "a sixth level below root": Denial(
        setup=lambda p: chain(p, 5),
        attempt=lambda p: support.queue(f"{p}-6", parent=f"{p}-5"),
        says="exceeds the maximum allowed depth of 5",
    ),
    "deserved above capability": Denial(
        setup=lambda p: [],
        attempt=lambda p: support.queue(p, deserved={CPU: "2"}, capability={CPU: "1"}),
        says="must be <= capability",
    ),
    "guarantee above deserved": Denial(
        setup=lambda p: [],
        attempt=lambda p: support.queue(p, guarantee={CPU: "2"}, deserved={CPU: "1"}),
        says="must be >= guarantee",
    ),
    "children deserving more than their parent": Denial(
        setup=lambda p: [
            support.queue(f"{p}-parent", deserved={CPU: "2"}, capability={CPU: "4"}),
            support.queue(f"{p}-a", parent=f"{p}-parent", deserved={CPU: "1500m"}),
        ],
        attempt=lambda p: support.queue(f"{p}-b", parent=f"{p}-parent", deserved={CPU: "1"}),
        says="exceeds parent's deserved limit",
    ),
    "a child allowed more than its ancestor": Denial(
        setup=lambda p: [
            support.queue(f"{p}-grand", deserved={CPU: "1"}, capability={CPU: "2"}),
            support.queue(f"{p}-parent", parent=f"{p}-grand", deserved={CPU: "1"}),
        ],
        attempt=lambda p: support.queue(
            f"{p}-child", parent=f"{p}-parent", deserved={CPU: "1"}, capability={CPU: "3"}
        ),
        says="exceeds its ancestor's capability",
    ),
    "a queue as its own parent": Denial(
        setup=lambda p: [],
        attempt=lambda p: support.queue(p, parent=p),
        says="cannot use itself as parent",
    ),
}


@pytest.mark.parametrize("case", list(DENIALS.values()), ids=list(DENIALS))
def test_kubectl_prints_why_the_webhook_refuses_a_queue(kube: support.Kube, case: Denial) -> None:
    prefix = support.unique("qt")
    for manifest in case.setup(prefix):
        kube.must(kube.apply(manifest))
    result = kube.apply(case.attempt(prefix))
    assert (result.ok, "denied the request" in result.stderr, case.says in result.stderr) == (
        False,
        True,
        True,
    ), result.describe()


def test_a_new_queue_gets_volcano_defaults_and_its_figures_in_status(kube: support.Kube) -> None:
    name = support.unique("qt-defaults")
    kube.must(kube.apply(support.queue(name, deserved={CPU: "1"}, capability={CPU: "2"})))
    created = kube.queue(name) or {}
    spec = created.get("spec") or {}
    assert (spec.get("weight"), spec.get("reclaimable"), spec.get("parent")) == (1, True, "root")
    status = support.eventually(
        lambda: (
            ((kube.queue(name) or {}).get("status") or {}).get("realCapability")
            and (kube.queue(name) or {})["status"]
        ),
        what=f"queue {name} gets its figures in status",
    )
    assert (
        status.get("state"),
        observing.same_quantities(status.get("deserved"), {CPU: "1"}),
        observing.same_quantities(status.get("realCapability"), {CPU: "2"}),
    ) == ("Open", True, True), status


def test_a_resource_name_the_scheduler_ignores_is_allowed_with_a_warning(
    kube: support.Kube,
) -> None:
    name = support.unique("qt-warn")
    result = kube.apply(support.queue(name, capability={"gpu": "1"}))
    says = 'Warning: spec.capability["gpu"]: the scheduler ignores the resource name "gpu"'
    assert (result.ok, says in result.stderr) == (True, True), result.describe()


ROOT_CHANGES = {
    "capability": {"spec": {"capability": {CPU: "1"}}},
    "deserved": {"spec": {"deserved": {CPU: "1"}}},
}


@pytest.mark.parametrize("patch", list(ROOT_CHANGES.values()), ids=list(ROOT_CHANGES))
def test_the_root_queue_figures_are_protected(kube: support.Kube, patch: dict[str, Any]) -> None:
    result = kube.kubectl("patch", "queue", "root", "--type=merge", "-p", json.dumps(patch))
    says = "root queue's resource attributes (capability, deserved, guarantee) cannot be modified"
    assert (result.ok, says in result.stderr) == (False, True), result.describe()


def test_root_default_and_parents_with_children_cannot_be_deleted(kube: support.Kube) -> None:
    parent, child = support.unique("qt-parent"), support.unique("qt-child")
    kube.must(kube.apply(support.queue(parent), support.queue(child, parent=parent)))
    outcomes = {
        name: kube.kubectl("delete", "queue", name, "--wait=false")
        for name in ("root", "default", parent)
    }
    says = {
        "root": "`root` queue can not be deleted",
        "default": "`default` queue can not be deleted",
        parent: f"queue {parent} can not be deleted because it has 1 child queues: {child}",
    }
    assert {name: (r.ok, says[name] in r.stderr) for name, r in outcomes.items()} == dict.fromkeys(
        says, (False, True)
    ), {name: r.stderr for name, r in outcomes.items()}
    leaf = kube.kubectl("delete", "queue", child, "--wait=true", "--timeout=60s")
    emptied = kube.kubectl("delete", "queue", parent, "--wait=true", "--timeout=60s")
    assert (leaf.ok, emptied.ok) == (True, True), leaf.describe() + emptied.describe()


def test_pods_must_name_an_open_leaf_queue(kube: support.Kube) -> None:
    parent, leaf = support.unique("qt-parent"), support.unique("qt-leaf")
    missing = support.unique("qt-missing")
    kube.must(kube.apply(support.queue(parent), support.queue(leaf, parent=parent)))
    attempts = {
        "root": "pods cannot be submitted to the root queue",
        parent: f"pods can only be submitted to leaf queues, and queue {parent} has 1 child queues",
        missing: "the queue does not exist",
    }
    outcomes = {}
    for queue, _ in attempts.items():
        result = kube.apply(support.pod(support.unique("p"), namespace=kube.namespace, queue=queue))
        outcomes[queue] = (result.ok, attempts[queue] in result.stderr)
    assert outcomes == dict.fromkeys(attempts, (False, True))
