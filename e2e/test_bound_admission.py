"""Admission is bound, and only the operator admits: what a tenant tries with kubectl, refused.

Every attempt is made with the tenant's own credentials (:meth:`support.Kube.as_tenant`): a
ServiceAccount that may do anything to the pods and PodGroups of its namespace. A pod is
charged to the queue it was admitted to, recorded on the pod when its gate is removed; the
webhook refuses to move an admitted pod or PodGroup, to remove the queue gate (the operator
alone does), to create an opted-in pod already bound to a node, to create any pod that
carries the admission record, and to give a PodGroup a ``minResources`` the operator cannot
read; an opted-in namespace cannot be left by a pod annotated ``"false"``.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from e2e import support

TENTH = {"cpu": "100m", "memory": "64Mi"}
TWO_TENTHS = {"cpu": "200m"}
ADMITTED_QUEUE = "scheduling.queuetree.io/admitted-queue"


def annotations(found: dict[str, Any] | None) -> dict[str, str]:
    return dict(((found or {}).get("metadata") or {}).get("annotations") or {})


def fill(kube: support.Kube, queue: str, names: list[str], *, group: str = "") -> None:
    """Create pods of a tenth of a CPU each in ``queue`` and wait until they all run."""
    kube.must(
        kube.apply(
            *(
                support.pod(
                    name,
                    namespace=kube.namespace,
                    queue=None if group else queue,
                    group=group,
                    requests=TENTH,
                )
                for name in names
            )
        )
    )
    support.eventually(
        lambda: all(kube.running(name) for name in names), what=f"{', '.join(names)} run"
    )


TARGETS = {
    "to another queue": lambda other, missing: other,
    "to a missing queue": lambda other, missing: missing,
}


@pytest.mark.parametrize("target", list(TARGETS.values()), ids=list(TARGETS))
def test_a_running_pod_cannot_be_moved_out_of_the_queue_it_was_admitted_to(
    kube: support.Kube, target: Any
) -> None:
    full, other = support.unique("bound-full"), support.unique("bound-other")
    kube.must(kube.apply(support.queue(full, capability=TWO_TENTHS), support.queue(other)))
    fill(kube, full, ["first", "second"])
    tenant = kube.as_tenant()
    moved = tenant.kubectl(
        "annotate",
        "pod",
        "first",
        "-n",
        kube.namespace,
        "--overwrite",
        f"{support.QUEUE_NAME}={target(other, support.unique('bound-missing'))}",
    )
    kube.must(
        tenant.apply(support.pod("third", namespace=kube.namespace, queue=full, requests=TENTH))
    )
    support.eventually(lambda: kube.judged("third", full), what="third is judged")
    assert (
        moved.ok,
        f"was admitted to queue {full}" in moved.stderr,
        annotations(kube.pod("first")).get(ADMITTED_QUEUE),
        kube.gated("third"),
    ) == (False, True, full, True), moved.describe()


def test_an_admitted_pod_group_cannot_change_queue(kube: support.Kube) -> None:
    full, other = support.unique("bound-full"), support.unique("bound-other")
    kube.must(kube.apply(support.queue(full, capability=TWO_TENTHS), support.queue(other)))
    kube.must(kube.apply(support.pod_group("gang", namespace=kube.namespace, queue=full)))
    fill(kube, full, ["member-0", "member-1"], group="gang")
    tenant = kube.as_tenant()
    moved = tenant.kubectl(
        "patch",
        support.PODGROUP,
        "gang",
        "-n",
        kube.namespace,
        "--type=merge",
        "-p",
        json.dumps({"spec": {"queue": other}}),
    )
    kube.must(
        tenant.apply(support.pod("late", namespace=kube.namespace, queue=full, requests=TENTH))
    )
    support.eventually(lambda: kube.judged("late", full), what="late is judged")
    group = kube.get(support.PODGROUP, "gang") or {}
    assert (
        moved.ok,
        f"queue {full}" in moved.stderr,
        group["spec"]["queue"],
        kube.gated("late"),
    ) == (
        False,
        True,
        full,
        True,
    ), moved.describe()


NEGATIVE = {"cpu": "-10"}
UNREADABLE = (
    'spec.minResources["cpu"]: Invalid value: "-10": must not be negative: the queuetree '
    "operator cannot read pod group"
)


def test_a_pod_group_cannot_be_created_with_a_negative_min_resources(kube: support.Kube) -> None:
    """The operator could not read it: it would ignore the group, and its pods would wait,
    told that the group does not exist."""
    name = support.unique("negative")
    kube.must(kube.apply(support.queue(name)))
    created = kube.as_tenant().create(
        support.pod_group("neg", namespace=kube.namespace, queue=name, minResources=NEGATIVE)
    )
    assert (
        created.ok,
        UNREADABLE in created.stderr,
        "correct the value" in created.stderr,
        kube.get(support.PODGROUP, "neg"),
    ) == (False, True, True, None), created.describe()


def test_an_admitted_pod_group_cannot_be_given_a_negative_min_resources(
    kube: support.Kube,
) -> None:
    full = support.unique("negative-full")
    kube.must(kube.apply(support.queue(full, capability=TWO_TENTHS)))
    kube.must(
        kube.apply(
            support.pod_group("gang", namespace=kube.namespace, queue=full, minResources=TENTH)
        )
    )
    fill(kube, full, ["member-0", "member-1"], group="gang")
    tenant = kube.as_tenant()
    patched = tenant.kubectl(
        "patch",
        support.PODGROUP,
        "gang",
        "-n",
        kube.namespace,
        "--type=merge",
        "-p",
        json.dumps({"spec": {"minResources": NEGATIVE}}),
    )
    kube.must(
        tenant.apply(support.pod("late", namespace=kube.namespace, queue=full, requests=TENTH))
    )
    support.eventually(lambda: kube.judged("late", full), what="late is judged")
    group = kube.get(support.PODGROUP, "gang") or {}
    assert (
        patched.ok,
        UNREADABLE in patched.stderr,
        group["spec"]["minResources"],
        kube.gated("late"),
    ) == (False, True, TENTH, True), patched.describe()


DESTINATIONS = {
    "a queue with children": ("parent", "can only be submitted to leaf queues"),
    "a missing queue": ("missing", "does not exist"),
    "a closed queue": ("closed", "can only be submitted to Open queues"),
}


@pytest.mark.parametrize(
    ("destination", "says"), list(DESTINATIONS.values()), ids=list(DESTINATIONS)
)
def test_a_pod_group_cannot_be_moved_to_a_queue_that_cannot_admit_it(
    kube: support.Kube, destination: str, says: str
) -> None:
    names = {
        "leaf": support.unique("move-leaf"),
        "parent": support.unique("move-parent"),
        "child": support.unique("move-child"),
        "closed": support.unique("move-closed"),
        "missing": support.unique("move-missing"),
    }
    kube.must(
        kube.apply(
            support.queue(names["leaf"]),
            support.queue(names["parent"]),
            support.queue(names["child"], parent=names["parent"]),
            support.queue(names["closed"]),
        )
    )
    # Closed only once the controller has written the new queue's status: a close written
    # before that can be overwritten by the controller's first write.
    support.eventually(
        lambda: kube.queue_state(names["closed"]) == "Open", what="the queue has a status"
    )
    kube.set_queue_state(names["closed"], "Closed")
    support.eventually(
        lambda: kube.queue_state(names["closed"]) == "Closed", what="the queue is closed"
    )
    # Nothing of the group runs yet: only where it may go is at stake.
    tenant = kube.as_tenant()
    kube.must(
        tenant.apply(
            support.pod_group(
                "waiting", namespace=kube.namespace, queue=names["leaf"], min_member=9
            )
        )
    )
    moved = tenant.kubectl(
        "patch",
        support.PODGROUP,
        "waiting",
        "-n",
        kube.namespace,
        "--type=merge",
        "-p",
        json.dumps({"spec": {"queue": names[destination]}}),
    )
    assert (moved.ok, says in moved.stderr) == (False, True), moved.describe()


def test_only_the_operator_removes_the_queue_gate(kube: support.Kube) -> None:
    name = support.unique("gate-owner")
    kube.must(kube.apply(support.queue(name, capability={"cpu": "5m"})))
    tenant = kube.as_tenant()
    kube.must(tenant.apply(support.pod("p", namespace=kube.namespace, queue=name)))
    support.eventually(lambda: name in kube.explanation("p"), what="p is told it waits")
    removed = tenant.kubectl(
        "patch",
        "pod",
        "p",
        "-n",
        kube.namespace,
        "--type=json",
        "-p",
        '[{"op":"remove","path":"/spec/schedulingGates"}]',
    )
    assert (
        removed.ok,
        "only the queuetree operator" in removed.stderr,
        kube.gates("p"),
    ) == (False, True, [support.GATE]), removed.describe()


def test_a_pod_cannot_opt_out_of_an_opted_in_namespace(kube: support.Kube) -> None:
    name = support.unique("opt-out")
    kube.must(kube.apply(support.queue(name, capability={"cpu": "5m"})))
    kube.must(kube.kubectl("label", "namespace", kube.namespace, f"{support.GATE}=true"))
    manifest = support.pod("p", namespace=kube.namespace, queue=name, opted_in=False)
    manifest["metadata"]["annotations"][support.GATE] = "false"
    created = kube.as_tenant().create(manifest)
    assert (
        created.ok,
        "cannot opt the pod out" in created.stderr,
        kube.gates("p"),
        annotations(kube.pod("p")).get(support.GATE),
    ) == (True, True, [support.GATE], "true"), created.describe()


@dataclasses.dataclass(frozen=True)
class Forgery:
    opted_in: bool
    """The pod carries the opt-in annotation itself."""
    namespace_opts_in: bool = False
    """The namespace is labelled with the opt-in (the namespace-wide webhook entries)."""


FORGERIES = {
    "an opted-in pod": Forgery(opted_in=True),
    "a pod that does not opt in": Forgery(opted_in=False),
    "a pod of a namespace that opts in every pod": Forgery(opted_in=False, namespace_opts_in=True),
}


@pytest.mark.parametrize("forgery", list(FORGERIES.values()), ids=list(FORGERIES))
def test_no_pod_is_created_carrying_an_admission_record(
    kube: support.Kube, forgery: Forgery
) -> None:
    """The operator charges a pod to the queue its record names: a pod created with a forged
    record naming an open queue would run at once, whatever the room of the queue it names."""
    full, target = support.unique("forged-full"), support.unique("forged-target")
    # No room in `full` (5m of CPU, the pod asks a tenth): only a forged record would run it.
    kube.must(kube.apply(support.queue(full, capability={"cpu": "5m"}), support.queue(target)))
    if forgery.namespace_opts_in:
        kube.must(kube.kubectl("label", "namespace", kube.namespace, f"{support.GATE}=true"))
    manifest = support.pod(
        "forged", namespace=kube.namespace, queue=full, requests=TENTH, opted_in=forgery.opted_in
    )
    manifest["metadata"]["annotations"][ADMITTED_QUEUE] = target
    created = kube.as_tenant().create(manifest)
    assert (
        created.ok,
        f'"{target}": pod {kube.namespace}/forged cannot be created with the admission record '
        f"{ADMITTED_QUEUE}" in created.stderr,
        "remove the annotation" in created.stderr,
        kube.pod("forged"),
        support.all_zero(support.queue_figures(kube, target)),
        support.all_zero(support.queue_figures(kube, full)),
    ) == (False, True, True, None, True, True), created.describe()


def test_an_opted_in_pod_bound_to_a_node_at_creation_is_refused(kube: support.Kube) -> None:
    name = support.unique("bound-node")
    kube.must(kube.apply(support.queue(name)))
    node = kube.cluster.client.items("nodes")[0]["metadata"]["name"]
    manifest = support.pod("p", namespace=kube.namespace, queue=name)
    manifest["spec"]["nodeName"] = node
    created = kube.as_tenant().create(manifest)
    assert (
        created.ok,
        "spec.nodeName" in created.stderr,
        "remove spec.nodeName" in created.stderr,
        kube.pod("p"),
    ) == (False, True, True, None), created.describe()
