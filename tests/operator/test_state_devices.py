"""The cluster state charges pods their DRA devices (``core.devices``): a shared claim once per
queue, a template's devices per pod, and a gated pod whose claim cannot be read waits."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from queuetree.core import devices, objects, resources
from queuetree.operator import state
from tests import builders as b
from tests.operator import fakes

GPU = "nvidia.com/gpu"
MAPPINGS = {"gpu.example.com": GPU}
ONE_GPU = devices.ClaimSpec(
    requests=(devices.DeviceRequest(name="gpu", asks=(devices.DeviceAsk("gpu.example.com"),)),)
)
SHARED = objects.ClaimRef(name="gpu", claim="shared")
OWN = objects.ClaimRef(name="gpu", template="one")
"""A claim from a template before the resourceclaim controller generated it."""


def own(generated: str) -> objects.ClaimRef:
    """A claim from the template ``one``, generated as ``generated`` (as the pod's
    status.resourceClaimStatuses records it)."""
    return dataclasses.replace(OWN, generated=generated)


def gpus_spec(count: int, owner: str = "") -> devices.ClaimSpec:
    ask = devices.DeviceAsk("gpu.example.com", count=count)
    return devices.ClaimSpec(
        requests=(devices.DeviceRequest(name="gpu", asks=(ask,)),), owner=owner
    )


def claiming(
    name: str, *refs: objects.ClaimRef, queue: str = "team", gated: bool = True
) -> objects.Pod:
    pod = fakes.pod(name, queue=queue, gates=(objects.QUEUE_ALLOCATION_GATE,) if gated else ())
    if not gated:
        annotations = {**pod.annotations, objects.ADMITTED_QUEUE_ANNOTATION: queue}
        pod = dataclasses.replace(
            pod, node_name="n1", status=objects.TaskStatus.RUNNING, annotations=annotations
        )
    return dataclasses.replace(pod, claims=refs)


def gpus(cluster: state.ClusterState) -> dict[str, str]:
    """Each pod's GPUs in the snapshot ("-" for a pod that is not in it)."""
    shown = cluster.view().snapshot.pods
    return {
        key: resources.format_amount(GPU, pod.resreq.get(GPU)) if pod.resreq.scalars else "0"
        for key, pod in sorted(shown.items())
    }


def cluster_with_claims() -> state.ClusterState:
    cluster = state.ClusterState(device_classes=MAPPINGS)
    cluster.upsert_claim(devices.CLAIM, "ns/shared", ONE_GPU)
    cluster.upsert_claim(devices.TEMPLATE, "ns/one", ONE_GPU)
    for pod in ("a", "b"):
        cluster.upsert_claim(devices.CLAIM, f"ns/{pod}-gpu", gpus_spec(1, owner=f"uid-{pod}"))
    return cluster


@pytest.mark.parametrize(
    ("pods", "charged"),
    [
        pytest.param(
            [claiming("a", SHARED), claiming("b", SHARED)],
            {"ns/a": "1", "ns/b": "1"},
            id="waiting-pods-each-carry-the-claim-while-none-runs",
        ),
        pytest.param(
            [claiming("a", SHARED, gated=False), claiming("b", SHARED)],
            {"ns/a": "1", "ns/b": "0"},
            id="a-pod-that-holds-room-carries-it-for-the-queue",
        ),
        pytest.param(
            [claiming("b", SHARED, gated=False), claiming("a", SHARED, gated=False)],
            {"ns/a": "1", "ns/b": "0"},
            id="two-running-pods-charge-it-once",
        ),
        pytest.param(
            [claiming("a", SHARED, gated=False), claiming("b", SHARED, queue="other")],
            {"ns/a": "1", "ns/b": "1"},
            id="a-pod-of-another-queue-charges-it-to-its-own",
        ),
        pytest.param(
            [claiming("a", own("a-gpu"), gated=False), claiming("b", own("b-gpu"))],
            {"ns/a": "1", "ns/b": "1"},
            id="claims-from-a-template-are-each-pods-own",
        ),
        pytest.param(
            [claiming("a", own("a-gpu"), gated=False), claiming("b", own("a-gpu"))],
            {"ns/a": "1"},
            id="a-claim-generated-for-another-pod-is-not-this-pods",
        ),
        pytest.param(
            [
                claiming("a", own("a-gpu"), gated=False),
                claiming("b", objects.ClaimRef(name="gpu", claim="a-gpu")),
            ],
            {"ns/a": "1", "ns/b": "0"},
            id="sharing-another-pods-generated-claim-in-its-queue-charges-it-once",
        ),
        pytest.param(
            [
                claiming("a", own("a-gpu"), gated=False),
                claiming("b", objects.ClaimRef(name="gpu", claim="a-gpu"), queue="other"),
            ],
            {"ns/a": "1", "ns/b": "1"},
            id="sharing-another-pods-generated-claim-from-another-queue-charges-both",
        ),
        pytest.param(
            [claiming("a", own("a-gpu")), claiming("b", SHARED, queue="other")],
            {"ns/a": "1", "ns/b": "1"},
            id="a-generated-claim-and-a-shared-one",
        ),
    ],
)
def test_pods_are_charged_their_devices(pods: list[objects.Pod], charged: dict[str, str]) -> None:
    cluster = cluster_with_claims()
    for pod in pods:
        cluster.upsert_pod(pod)
    assert gpus(cluster) == charged


def test_the_charge_moves_to_another_pod_when_the_carrier_goes() -> None:
    cluster = cluster_with_claims()
    cluster.upsert_pod(claiming("a", SHARED, gated=False))
    cluster.upsert_pod(claiming("b", SHARED, gated=False))
    before = gpus(cluster)
    cluster.delete_pod("ns/a")
    assert (before, gpus(cluster)) == ({"ns/a": "1", "ns/b": "0"}, {"ns/b": "1"})


def test_an_admitted_pod_carries_the_claim_and_the_waiting_one_is_released() -> None:
    cluster = cluster_with_claims()
    cluster.upsert_pod(claiming("a", SHARED))
    cluster.upsert_pod(claiming("b", SHARED))
    assert cluster.assume_ungated("ns/b", decided_at=1.0)
    assert gpus(cluster) == {"ns/a": "0", "ns/b": "1"}


def test_a_gated_pod_waits_told_why_until_its_template_exists_and_its_claim_is_made() -> None:
    cluster = state.ClusterState(device_classes=MAPPINGS)
    cluster.upsert_pod(claiming("a", OWN))
    waiting = cluster.view()
    cluster.upsert_claim(devices.TEMPLATE, "ns/one", ONE_GPU)
    still = cluster.view()
    cluster.upsert_claim(devices.CLAIM, "ns/a-gpu-1", gpus_spec(1, owner="uid-a"))
    cluster.upsert_pod(claiming("a", own("a-gpu-1")))
    after = cluster.view()
    assert (
        dict(waiting.snapshot.pods),
        "ResourceClaimTemplate ns/one" in waiting.device_waits["ns/a"][1],
        dict(still.snapshot.pods),
        "has not yet made" in still.device_waits["ns/a"][1],
        dict(after.device_waits),
        gpus(cluster),
    ) == ({}, True, {}, True, {}, {"ns/a": "1"})


# What a tenant does to a template and to the claims generated from it, step by step: each step
# is a call on the state as the watches would make it; after each, the pod's GPUs in the
# snapshot ("-": not in it, waiting) and what its wait says ("" when it does not wait).
Step = tuple[str, Any]


def template(count: int) -> Step:
    return ("upsert", (devices.TEMPLATE, "ns/one", gpus_spec(count)))


def made(name: str, count: int, owner: str = "uid-a") -> Step:
    """The resourceclaim controller makes claim ``name`` and records it in the pod's status."""
    return ("made", (name, gpus_spec(count, owner=owner)))


DELETE_TEMPLATE: Step = ("delete", (devices.TEMPLATE, "ns/one"))


def delete_claim(name: str) -> Step:
    return ("delete", (devices.CLAIM, f"ns/{name}"))


ADMIT: Step = ("admit", None)
BIND: Step = ("bind", None)


@pytest.mark.parametrize(
    ("steps", "shown", "said", "outgrown"),
    [
        pytest.param(
            [template(4), made("a-gpu-1", 4), DELETE_TEMPLATE, template(1)],
            "4",
            "",
            False,
            id="gated-template-re-created-smaller-charges-its-claim",
        ),
        pytest.param(
            [template(4), DELETE_TEMPLATE, template(1), made("a-gpu-1", 4)],
            "4",
            "",
            False,
            id="gated-template-swapped-before-the-claim-was-made",
        ),
        pytest.param(
            [template(1)],
            "-",
            "has not yet made",
            False,
            id="gated-the-template-alone-admits-nothing",
        ),
        pytest.param(
            [template(4), made("a-gpu-1", 4), delete_claim("a-gpu-1")],
            "-",
            "cannot be read yet",
            False,
            id="gated-its-claim-deleted-waits",
        ),
        pytest.param(
            [
                template(4),
                made("a-gpu-1", 4),
                delete_claim("a-gpu-1"),
                template(1),
                made("a-gpu-2", 1),
            ],
            "1",
            "",
            False,
            id="gated-its-claim-re-made-smaller-charges-what-is-allocated",
        ),
        pytest.param(
            [template(1), made("a-gpu-1", 1, owner="uid-other")],
            "-",
            "not controlled by the pod",
            False,
            id="gated-a-claim-of-another-pod-recorded",
        ),
        pytest.param(
            [template(4), made("a-gpu-1", 4), ADMIT, DELETE_TEMPLATE, template(1)],
            "4",
            "",
            False,
            id="admitted-template-re-created-smaller",
        ),
        pytest.param(
            [template(4), made("a-gpu-1", 4), ADMIT, delete_claim("a-gpu-1")],
            "4",
            "",
            False,
            id="admitted-its-claim-deleted-keeps-its-charge",
        ),
        pytest.param(
            [
                template(4),
                made("a-gpu-1", 4),
                ADMIT,
                delete_claim("a-gpu-1"),
                template(1),
                made("a-gpu-2", 1),
            ],
            "4",
            "",
            False,
            id="admitted-its-claim-re-made-smaller-keeps-its-charge",
        ),
        pytest.param(
            [
                template(1),
                made("a-gpu-1", 1),
                ADMIT,
                delete_claim("a-gpu-1"),
                template(4),
                made("a-gpu-2", 4),
            ],
            "4",
            "",
            True,
            id="admitted-its-claim-re-made-larger-charges-the-larger-and-outgrows",
        ),
        pytest.param(
            [template(4), made("a-gpu-1", 4), ADMIT, BIND, DELETE_TEMPLATE, template(1)],
            "4",
            "",
            False,
            id="running-template-re-created-smaller",
        ),
    ],
)
def test_what_a_tenant_does_to_templates_and_claims_never_lowers_the_charge(
    steps: list[Step], shown: str, said: str, outgrown: bool
) -> None:
    cluster = state.ClusterState(device_classes=MAPPINGS)
    pod = claiming("a", OWN)
    cluster.upsert_pod(pod)
    for action, argument in steps:
        if action == "upsert":
            cluster.upsert_claim(*argument)
        elif action == "delete":
            cluster.delete_claim(*argument)
        elif action == "made":
            name, claim = argument
            cluster.upsert_claim(devices.CLAIM, f"ns/{name}", claim)
            pod = dataclasses.replace(pod, claims=(own(name),))
            cluster.upsert_pod(pod)
        elif action == "admit":
            assert cluster.assume_ungated("ns/a", decided_at=1.0)
            pod = dataclasses.replace(pod, scheduling_gates=())
            cluster.upsert_pod(pod)
        else:
            pod = dataclasses.replace(pod, node_name="n1", status=objects.TaskStatus.RUNNING)
            cluster.upsert_pod(pod)
    view = cluster.view()
    why = view.device_waits["ns/a"][1] if "ns/a" in view.device_waits else ""
    assert (
        gpus(cluster).get("ns/a", "-"),
        said in why,
        bool(why),
        "ns/a" in view.outgrown,
    ) == (shown, True, bool(said), outgrown), (why, dict(view.outgrown))


def test_an_outgrown_pod_is_told_what_it_was_admitted_with_and_what_it_asks_now() -> None:
    cluster = state.ClusterState(device_classes=MAPPINGS)
    cluster.upsert_claim(devices.CLAIM, "ns/a-gpu-1", gpus_spec(1, owner="uid-a"))
    cluster.upsert_pod(claiming("a", own("a-gpu-1")))
    assert cluster.assume_ungated("ns/a", decided_at=1.0)
    cluster.upsert_pod(claiming("a", own("a-gpu-1"), gated=False))
    cluster.delete_claim(devices.CLAIM, "ns/a-gpu-1")
    cluster.upsert_claim(devices.CLAIM, "ns/a-gpu-2", gpus_spec(3, owner="uid-a"))
    cluster.upsert_pod(claiming("a", own("a-gpu-2"), gated=False))
    uid, why = cluster.view().outgrown["ns/a"]
    cluster.delete_pod("ns/a")
    assert (uid, f"{GPU} 1 " in why, f"{GPU} 3 " in why, dict(cluster.view().outgrown)) == (
        "uid-a",
        True,
        True,
        {},
    ), why


def test_a_pod_first_seen_admitted_has_not_outgrown_anything() -> None:
    # After a restart, the operator may read an admitted pod before its claims: it then
    # charges what it reads, and nothing is known to have grown.
    cluster = state.ClusterState(device_classes=MAPPINGS)
    cluster.upsert_pod(claiming("a", own("a-gpu-1"), gated=False))
    cluster.upsert_claim(devices.CLAIM, "ns/a-gpu-1", gpus_spec(3, owner="uid-a"))
    assert (gpus(cluster), dict(cluster.view().outgrown)) == ({"ns/a": "3"}, {})


def recorded(count: int | None, *, claim: str = "a-gpu-1") -> objects.Pod:
    """Pod ``a`` admitted (gate gone, running) with its own claim ``claim``, as an operator
    that just started reads it: its admission record says its claims were charged ``count``
    GPUs (None: a pod admitted before the record existed)."""
    pod = claiming("a", own(claim), gated=False)
    if count is None:
        return pod
    charge = resources.Resource.from_resource_list({GPU: str(count)})
    return dataclasses.replace(pod, admitted_devices=charge)


@pytest.mark.parametrize(
    ("pod", "claim", "shown", "outgrown"),
    [
        pytest.param(recorded(4), None, "4", False, id="its-claim-not-read-yet-charges-the-record"),
        pytest.param(recorded(4), 4, "4", False, id="its-claim-as-admitted"),
        pytest.param(recorded(4), 1, "4", False, id="its-claim-re-made-smaller-charges-the-record"),
        pytest.param(
            recorded(1), 3, "3", False, id="a-larger-claim-charges-more-but-is-not-evicted-on-it"
        ),
        pytest.param(recorded(None), 1, "1", False, id="no-record-charges-its-claim"),
        pytest.param(recorded(None), None, "0", False, id="no-record-and-no-claim-charges-none"),
    ],
)
def test_after_a_restart_the_admission_record_is_the_floor_of_a_pods_charge(
    pod: objects.Pod, claim: int | None, shown: str, outgrown: bool
) -> None:
    # A record is a floor, never a reason to evict: a deviceClassMappings changed across the
    # restart may charge a claim more than it was admitted with, and nothing grew.
    cluster = state.ClusterState(device_classes=MAPPINGS)
    cluster.upsert_pod(pod)
    if claim is not None:
        cluster.upsert_claim(devices.CLAIM, "ns/a-gpu-1", gpus_spec(claim, owner="uid-a"))
    assert (gpus(cluster), "ns/a" in cluster.view().outgrown) == ({"ns/a": shown}, outgrown)


def test_a_record_in_a_namespace_the_webhook_does_not_review_is_not_believed() -> None:
    cluster = state.ClusterState(device_classes=MAPPINGS)
    cluster.set_namespace_reviewed("ns", False)
    cluster.upsert_pod(recorded(4))
    cluster.upsert_claim(devices.CLAIM, "ns/a-gpu-1", gpus_spec(1, owner="uid-a"))
    assert gpus(cluster) == {"ns/a": "1"}


def test_without_mappings_claims_charge_nothing() -> None:
    cluster = state.ClusterState()
    cluster.upsert_pod(claiming("a", OWN))
    assert (gpus(cluster), dict(cluster.view().device_waits)) == ({"ns/a": "0"}, {})


def test_a_running_pod_keeps_its_charge_when_its_claim_is_deleted() -> None:
    cluster = cluster_with_claims()
    cluster.upsert_pod(claiming("a", SHARED, gated=False))
    cluster.delete_claim(devices.CLAIM, "ns/shared")
    assert (gpus(cluster), dict(cluster.view().device_waits)) == ({"ns/a": "1"}, {})


def test_the_lone_group_asks_for_the_charged_request() -> None:
    cluster = cluster_with_claims()
    cluster.upsert_pod(claiming("a", own("a-gpu")))
    group = cluster.view().snapshot.pod_groups["ns/a"]
    assert group.min_resources == b.res(**{GPU: "1"})
