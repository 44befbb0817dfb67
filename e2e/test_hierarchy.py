"""Hierarchical caps, the close cascade and the explanations, as kubectl shows them.

A parent's capability bounds its whole subtree even when each child's own capability would
allow more; closing a parent closes its children first; a pod held by its queue says why in
``kubectl describe pod`` (an event from the operator, and an annotation).
"""

from __future__ import annotations

from typing import Any

from e2e import support
from queuetree.sandbox import observing

TENTH = {"cpu": "100m", "memory": "64Mi"}


def held(kube: support.Kube, names: list[str]) -> dict[str, str]:
    """Pod name -> ``running`` / ``gated`` / ``other``, read with kubectl."""
    stages = {}
    for name in names:
        if kube.running(name):
            stages[name] = "running"
        elif kube.gated(name):
            stages[name] = "gated"
        else:
            stages[name] = "other"
    return stages


def explanation(kube: support.Kube, name: str) -> str:
    found = kube.pod(name) or {}
    return str(
        ((found.get("metadata") or {}).get("annotations") or {}).get(support.REASON_ANNOTATION, "")
    )


def test_a_parent_capability_caps_the_sum_of_its_children(kube: support.Kube) -> None:
    parent, left, right = (support.unique(p) for p in ("caps-parent", "caps-left", "caps-right"))
    kube.must(
        kube.apply(
            support.queue(parent, capability={"cpu": "300m"}),
            support.queue(left, parent=parent, capability={"cpu": "300m"}),
            support.queue(right, parent=parent, capability={"cpu": "300m"}),
        )
    )
    pods = [f"{side}-{i}" for side in ("left", "right") for i in range(3)]
    kube.must(
        kube.apply(
            *(
                support.pod(
                    name,
                    namespace=kube.namespace,
                    queue=left if name.startswith("left") else right,
                    requests=TENTH,
                )
                for name in pods
            )
        )
    )

    def three_and_three() -> dict[str, str] | None:
        stages = held(kube, pods)
        values = sorted(stages.values())
        return stages if values == ["gated"] * 3 + ["running"] * 3 else None

    stages = support.eventually(three_and_three, what="three pods run and three wait")
    waiting = [name for name, stage in stages.items() if stage == "gated"]
    # Every waiting pod has been judged (and told why) and is still gated: no over-admission.
    support.eventually(
        lambda: all(parent in explanation(kube, name) for name in waiting),
        what=f"the waiting pods name {parent} as what blocks them",
    )
    assert sorted(held(kube, pods).values()) == ["gated"] * 3 + ["running"] * 3
    # kubectl get queue -o json: the parent's status counts its whole subtree.
    support.eventually(
        lambda: observing.same_quantities(
            ((kube.queue(parent) or {}).get("status") or {}).get("allocated"),
            {"cpu": "300m", "memory": "192Mi"},
        ),
        what=f"{parent} status.allocated is the three running pods",
    )
    finished = next(name for name, stage in stages.items() if stage == "running")
    kube.delete_pod(finished)
    support.eventually(
        lambda: (
            sorted(held(kube, [p for p in pods if p != finished]).values())
            == ["gated"] * 2 + ["running"] * 3
        ),
        what="one waiting pod takes the freed room",
    )


def test_kubectl_describe_tells_why_a_pod_waits(kube: support.Kube) -> None:
    name = support.unique("explain")
    kube.must(kube.apply(support.queue(name, capability={"cpu": "100m"})))
    kube.must(
        kube.apply(support.pod("first", namespace=kube.namespace, queue=name, requests=TENTH))
    )
    support.eventually(lambda: kube.running("first"), what="the first pod runs")
    kube.must(
        kube.apply(support.pod("second", namespace=kube.namespace, queue=name, requests=TENTH))
    )
    described = support.eventually(
        lambda: (text := kube.describe_pod("second")) and "QueueAdmissionPending" in text and text,
        what="an explanation event on the waiting pod",
    )
    reason = explanation(kube, "second")
    assert (
        f"queue {name!r}" in reason,
        "cpu: requested 100m" in reason,
        "capability 100m" in reason,
        reason.splitlines()[0][:60] in described,
        kube.gates("second"),
    ) == (True, True, True, True, [support.GATE]), (reason, described)


def queue_states(kube: support.Kube, names: list[str]) -> dict[str, tuple[str, str]]:
    """Queue -> (status.state, the closed-by-parent annotation)."""
    found: dict[str, tuple[str, str]] = {}
    for name in names:
        queue: dict[str, Any] = kube.queue(name) or {}
        annotations = (queue.get("metadata") or {}).get("annotations") or {}
        found[name] = (
            str((queue.get("status") or {}).get("state", "")),
            str(annotations.get("volcano.sh/closed-by-parent", "")),
        )
    return found


def test_closing_a_parent_closes_its_children_and_reopening_reopens_them(
    kube: support.Kube,
) -> None:
    dept, busy, idle = (support.unique(p) for p in ("dept", "busy", "idle"))
    kube.must(
        kube.apply(
            support.queue(dept), support.queue(busy, parent=dept), support.queue(idle, parent=dept)
        )
    )
    kube.must(kube.apply(support.pod("worker", namespace=kube.namespace, queue=busy)))
    support.eventually(lambda: kube.running("worker"), what="the worker runs")
    kube.set_queue_state(dept, "Closed")
    closed = {dept: ("Closed", ""), busy: ("Closing", "true"), idle: ("Closed", "true")}
    support.eventually(
        lambda: queue_states(kube, list(closed)) == closed,
        what="the parent closed, its children closed by it (busy still has a pod)",
    )
    refused = kube.apply(support.pod("late", namespace=kube.namespace, queue=busy))
    assert (refused.ok, "pods can only be submitted to Open queues" in refused.stderr) == (
        False,
        True,
    ), refused.describe()
    kube.set_queue_state(dept, "Open")
    reopened = {dept: ("Open", ""), busy: ("Open", "false"), idle: ("Open", "false")}
    support.eventually(
        lambda: queue_states(kube, list(reopened)) == reopened,
        what="the parent and the children it closed reopened",
    )
    kube.must(kube.apply(support.pod("late", namespace=kube.namespace, queue=busy)))
    support.eventually(lambda: kube.running("late"), what="a new pod runs in the reopened queue")


def test_a_leaf_closed_with_a_running_pod_is_closing_until_the_pod_is_gone(
    kube: support.Kube,
) -> None:
    leaf = support.unique("closing")
    kube.must(kube.apply(support.queue(leaf)))
    kube.must(kube.apply(support.pod("worker", namespace=kube.namespace, queue=leaf)))
    support.eventually(lambda: kube.running("worker"), what="the worker runs")
    kube.set_queue_state(leaf, "Closed")
    support.eventually(
        lambda: queue_states(kube, [leaf]) == {leaf: ("Closing", "")},
        what="the leaf is Closing while its pod runs",
    )
    kube.delete_pod("worker")
    support.eventually(
        lambda: queue_states(kube, [leaf]) == {leaf: ("Closed", "")},
        what="the leaf is Closed once its pod is gone",
    )
