"""The cluster state charges pods their DRA devices (``core.devices``): a shared claim once per
queue, a template's devices per pod, and a gated pod whose claim cannot be read waits."""

from __future__ import annotations

import dataclasses

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
            [claiming("a", OWN, gated=False), claiming("b", OWN)],
            {"ns/a": "1", "ns/b": "1"},
            id="claims-from-a-template-are-each-pods-own",
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


def test_a_gated_pod_waits_told_why_until_its_template_exists() -> None:
    cluster = state.ClusterState(device_classes=MAPPINGS)
    cluster.upsert_pod(claiming("a", OWN))
    waiting = cluster.view()
    cluster.upsert_claim(devices.TEMPLATE, "ns/one", ONE_GPU)
    after = cluster.view()
    assert (
        dict(waiting.snapshot.pods),
        "ResourceClaimTemplate ns/one" in waiting.device_waits["ns/a"][1],
        dict(after.device_waits),
        gpus(cluster),
    ) == ({}, True, {}, {"ns/a": "1"})


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
    cluster.upsert_pod(claiming("a", OWN))
    group = cluster.view().snapshot.pod_groups["ns/a"]
    assert group.min_resources == b.res(**{GPU: "1"})
