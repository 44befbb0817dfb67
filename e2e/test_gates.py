"""The scheduling gate, from a user's seat: injected at create, removed when the queue has room.

Includes Volcano's two scheduling-gate e2e scenarios (spec §5.4): an ungated pod that cannot be
placed keeps its queue's capacity reserved (the reservation race), and a pod with another
controller's gate keeps both until that gate is gone, then loses ours too.
"""

from __future__ import annotations

from typing import Any

import pytest

from e2e import support

SLOT = {"cpu": "500m", "memory": "512Mi"}
"""The queue capacity and pod size of spec §5.4."""
OTHER_GATE = "example.com/other-gate"


def unschedulable(found: dict[str, Any] | None) -> bool:
    conditions = ((found or {}).get("status") or {}).get("conditions") or []
    return any(
        c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable" for c in conditions
    )


def explained(kube: support.Kube, name: str, words: str) -> bool:
    found = kube.pod(name) or {}
    annotations = (found.get("metadata") or {}).get("annotations") or {}
    return words in annotations.get(support.REASON_ANNOTATION, "")


GATE_INJECTION = {
    "an opted-in pod": (True, (), [support.GATE]),
    "a pod that did not opt in": (False, (), []),
    "an opted-in pod with another gate": (True, (OTHER_GATE,), [OTHER_GATE, support.GATE]),
}


@pytest.mark.parametrize(
    ("opted_in", "gates", "expected"), list(GATE_INJECTION.values()), ids=list(GATE_INJECTION)
)
def test_the_webhook_adds_the_gate_to_opted_in_pods_only_at_creation(
    kube: support.Kube, opted_in: bool, gates: tuple[str, ...], expected: list[str]
) -> None:
    # The queue has no room for the pod (5m of CPU, the pod asks 10m): nothing removes the gate.
    name = support.unique("gates")
    kube.must(kube.apply(support.queue(name, capability={"cpu": "5m"})))
    manifest = support.pod(
        "p", namespace=kube.namespace, queue=name, opted_in=opted_in, gates=gates
    )
    created = kube.must(kube.create(manifest)).json()
    returned = [g["name"] for g in created["spec"].get("schedulingGates") or []]
    assert (returned, kube.gates("p")) == (expected, expected)


def test_an_opted_in_pod_runs_once_its_queue_has_room(kube: support.Kube) -> None:
    name = support.unique("gates")
    kube.must(kube.apply(support.queue(name, capability=SLOT)))
    kube.must(kube.apply(support.pod("p", namespace=kube.namespace, queue=name, requests=SLOT)))
    support.eventually(lambda: kube.running("p"), what="pod p runs without gates")
    assert kube.gates("p") == []


def test_an_ungated_unschedulable_pod_reserves_its_queue_until_deleted(kube: support.Kube) -> None:
    """Spec §5.4, scenario 1 ("reservation race"), with the hold-back asserted as well."""
    name = support.unique("capacity-test-queue")
    kube.must(kube.apply(support.queue(name, capability=SLOT)))
    kube.must(
        kube.apply(
            support.pod_group(
                "test-podgroup", namespace=kube.namespace, queue=name, minResources=SLOT
            )
        )
    )

    def member(pod_name: str, **extra: Any) -> dict[str, Any]:
        return support.pod(
            pod_name,
            namespace=kube.namespace,
            queue=name,
            requests=SLOT,
            group="test-podgroup",
            **extra,
        )

    first = kube.must(kube.create(member("pod-1"))).json()
    assert [g["name"] for g in first["spec"]["schedulingGates"]] == [support.GATE]
    support.eventually(lambda: kube.running("pod-1"), what="pod-1 runs without gates")
    kube.delete_pod("pod-1")
    kube.must(kube.apply(member("pod-2", node_selector={"kubernetes.io/fake-node": "fake"})))
    support.eventually(
        lambda: kube.gates("pod-2") == [] and unschedulable(kube.pod("pod-2")),
        what="pod-2 ungated but unschedulable",
    )
    kube.must(kube.apply(member("pod-3")))
    support.eventually(
        lambda: explained(kube, "pod-3", name), what="pod-3 explained: its queue has no room"
    )
    held_back = kube.gates("pod-3")
    kube.delete_pod("pod-2")
    support.eventually(lambda: kube.running("pod-3"), what="pod-3 runs once pod-2 is gone")
    assert held_back == [support.GATE]


def test_our_gate_goes_only_after_every_other_gate_is_gone(kube: support.Kube) -> None:
    """Spec §5.4, scenario 2 ("multiple scheduling gates")."""
    name = support.unique("capacity-multigate-queue")
    kube.must(kube.apply(support.queue(name, capability=SLOT)))
    kube.must(
        kube.apply(
            support.pod_group(
                "test-pg-multigate", namespace=kube.namespace, queue=name, minResources=SLOT
            )
        )
    )
    kube.must(
        kube.apply(
            support.pod(
                "pod-multigate",
                namespace=kube.namespace,
                queue=name,
                requests=SLOT,
                group="test-pg-multigate",
                gates=(OTHER_GATE,),
            )
        )
    )
    # The operator has looked at the pod (and said why it waits) without touching its gates.
    support.eventually(
        lambda: explained(kube, "pod-multigate", OTHER_GATE),
        what="the operator explains that another gate holds the pod",
    )
    both = kube.gates("pod-multigate")
    kube.must(
        kube.kubectl(
            "patch",
            "pod",
            "pod-multigate",
            "-n",
            kube.namespace,
            "--type=json",
            "-p",
            '[{"op":"replace","path":"/spec/schedulingGates",'
            f'"value":[{{"name":"{support.GATE}"}}]}}]',
        )
    )
    support.eventually(lambda: kube.running("pod-multigate"), what="pod-multigate runs")
    assert both == [OTHER_GATE, support.GATE]


def test_a_gang_waits_whole_until_its_queue_can_take_all_of_it(kube: support.Kube) -> None:
    name = support.unique("gang")
    kube.must(kube.apply(support.queue(name, capability={"cpu": "300m"})))
    member = {"cpu": "200m", "memory": "64Mi"}
    kube.must(
        kube.apply(
            support.pod_group(
                "gang",
                namespace=kube.namespace,
                queue=name,
                min_member=2,
                minResources={"cpu": "400m", "memory": "128Mi"},
            ),
            *(
                support.pod(f"member-{i}", namespace=kube.namespace, requests=member, group="gang")
                for i in range(2)
            ),
        )
    )
    support.eventually(
        lambda: all(explained(kube, f"member-{i}", name) for i in range(2)),
        what="both members explained: the gang does not fit its queue",
    )
    waiting = [kube.gates(f"member-{i}") for i in range(2)]
    kube.must(
        kube.kubectl(
            "patch", "queue", name, "--type=merge", "-p", '{"spec":{"capability":{"cpu":"400m"}}}'
        )
    )
    support.eventually(
        lambda: all(kube.running(f"member-{i}") for i in range(2)),
        what="both members run once the queue can take the whole gang",
    )
    assert waiting == [[support.GATE], [support.GATE]]
