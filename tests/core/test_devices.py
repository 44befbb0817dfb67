"""``core.devices``: what a pod's DRA claims charge its queue (tables of named cases)."""

from __future__ import annotations

import dataclasses

import pytest

from queuetree.core import configs, devices, objects, resources, sessions
from tests import builders as b

GPU = "nvidia.com/gpu"
MAPPINGS = {"gpu.example.com": GPU, "big.example.com": GPU, "nic.example.com": "example.com/nic"}


def exact(
    device_class: str = "gpu.example.com", count: int = 1, mode: str = "ExactCount"
) -> devices.DeviceAsk:
    return devices.DeviceAsk(device_class=device_class, count=count, mode=mode)


def spec(*requests: devices.DeviceRequest) -> devices.ClaimSpec:
    return devices.ClaimSpec(requests=requests)


def one(*asks: devices.DeviceAsk) -> devices.DeviceRequest:
    return devices.DeviceRequest(name="r", asks=asks, first_available=len(asks) > 1)


@pytest.mark.parametrize(
    ("claim", "charged"),
    [
        pytest.param(spec(one(exact())), b.res(**{GPU: "1"}), id="one-device"),
        pytest.param(spec(one(exact(count=3))), b.res(**{GPU: "3"}), id="a-count"),
        pytest.param(
            spec(one(exact()), one(exact("big.example.com", 2))),
            b.res(**{GPU: "3"}),
            id="two-requests-of-classes-mapped-to-one-resource-add-up",
        ),
        pytest.param(
            spec(one(exact("other.example.com", 8))), resources.EMPTY, id="unmapped-charges-nothing"
        ),
        pytest.param(
            spec(one(exact("other.example.com", mode="All"))),
            resources.EMPTY,
            id="all-devices-of-an-unmapped-class-charge-nothing",
        ),
        pytest.param(
            spec(one(exact(count=1), exact("big.example.com", 4), exact(count=2))),
            b.res(**{GPU: "4"}),
            id="first-available-charges-the-largest-subrequest",
        ),
        pytest.param(
            spec(one(exact(count=2), exact("nic.example.com", 1))),
            b.res(**{GPU: "2", "example.com/nic": "1"}),
            id="first-available-of-two-resources-charges-the-largest-of-each",
        ),
        pytest.param(spec(), resources.EMPTY, id="no-requests"),
    ],
)
def test_a_claim_charges_the_devices_of_mapped_classes(
    claim: devices.ClaimSpec, charged: resources.Resource
) -> None:
    assert devices.claim_charge(claim, MAPPINGS, subject="ResourceClaim ns/c") == charged


@pytest.mark.parametrize(
    "claim",
    [
        pytest.param(spec(one(exact(mode="All"))), id="all-devices"),
        pytest.param(spec(one(exact(count=1), exact(mode="All"))), id="all-among-subrequests"),
        pytest.param(spec(one(exact(mode="Fancy"))), id="a-mode-unknown-here"),
    ],
)
def test_a_claim_without_a_count_of_a_mapped_class_cannot_be_charged(
    claim: devices.ClaimSpec,
) -> None:
    why = devices.claim_charge(claim, MAPPINGS, subject="ResourceClaim ns/c")
    assert isinstance(why, str)
    assert ("ResourceClaim ns/c" in why, GPU in why, "ExactCount" in why) == (True, True, True)


@pytest.mark.parametrize(
    ("key", "holders", "carried"),
    [
        pytest.param("ns/b", [], True, id="nobody-holds-room-every-waiting-pod-carries"),
        pytest.param("ns/b", ["ns/a"], False, id="another-pod-holds-it"),
        pytest.param("ns/a", ["ns/b", "ns/a"], True, id="the-first-holder-by-key-carries"),
        pytest.param("ns/b", ["ns/b", "ns/a"], False, id="a-later-holder-does-not"),
    ],
)
def test_a_shared_claim_is_carried_by_one_pod_of_a_queue(
    key: str, holders: list[str], carried: bool
) -> None:
    assert devices.carries(key, holders) is carried


def claimed(*refs: objects.ClaimRef, cpu: str = "1") -> objects.Pod:
    return dataclasses.replace(b.pod("ns", "p").requests(cpu=cpu).build(), claims=refs, uid="uid-p")


TEMPLATE = objects.ClaimRef(name="gpu", template="t")
GENERATED = objects.ClaimRef(name="gpu", template="t", generated="p-gpu-x")
SHARED = objects.ClaimRef(name="gpu", claim="c")
TWO = spec(one(exact(count=2)))
FOUR = spec(one(exact(count=4)))


def generated(claim: devices.ClaimSpec, owner: str = "uid-p") -> dict[str, devices.ClaimSpec]:
    """The claims table with ``claim`` as the one generated for pod p (controlled by ``owner``)."""
    return {"ns/p-gpu-x": dataclasses.replace(claim, owner=owner)}


@pytest.mark.parametrize(
    ("pod", "claims", "templates", "carried", "request_"),
    [
        pytest.param(
            claimed(GENERATED), generated(TWO), {"ns/t": TWO}, True, "2", id="from-its-claim"
        ),
        pytest.param(
            claimed(GENERATED),
            generated(FOUR),
            {"ns/t": spec(one(exact(count=1)))},
            True,
            "4",
            id="its-claim-not-the-template-made-smaller-since",
        ),
        pytest.param(
            claimed(GENERATED),
            generated(spec(one(exact(count=1)))),
            {"ns/t": FOUR},
            True,
            "1",
            id="its-claim-not-the-template-made-larger-since",
        ),
        pytest.param(
            claimed(GENERATED), generated(TWO), {}, True, "2", id="its-claim-the-template-deleted"
        ),
        pytest.param(claimed(SHARED), {"ns/c": TWO}, {}, True, "2", id="a-shared-claim-carried"),
        pytest.param(
            claimed(SHARED), {"ns/c": TWO}, {}, False, "", id="a-shared-claim-not-carried"
        ),
        pytest.param(
            claimed(SHARED, GENERATED),
            {"ns/c": TWO, **generated(TWO)},
            {},
            False,
            "2",
            id="its-own-claim-is-charged-whoever-carries-the-shared-claim",
        ),
    ],
)
def test_a_pod_is_charged_its_devices_on_top_of_its_containers(
    pod: objects.Pod,
    claims: dict[str, devices.ClaimSpec],
    templates: dict[str, devices.ClaimSpec],
    carried: bool,
    request_: str,
) -> None:
    found = devices.find_claims(pod, claims=claims, templates=templates, carried=lambda _: carried)
    charged = devices.charge_pod(pod, found, MAPPINGS)
    assert isinstance(charged, objects.Pod)
    wanted = b.res(cpu="1", **({GPU: request_} if request_ else {}))
    assert charged.resreq == wanted


@pytest.mark.parametrize(
    ("pod", "claims", "floor", "request_"),
    [
        pytest.param(claimed(GENERATED), generated(TWO), "4", "4", id="never-below-its-floor"),
        pytest.param(claimed(GENERATED), generated(FOUR), "2", "4", id="a-larger-claim-counts"),
        pytest.param(claimed(SHARED), {"ns/c": TWO}, "4", "2", id="a-shared-claim-has-no-floor"),
    ],
)
def test_an_admitted_pods_own_claims_never_charge_less_than_its_floor(
    pod: objects.Pod, claims: dict[str, devices.ClaimSpec], floor: str, request_: str
) -> None:
    found = devices.find_claims(pod, claims=claims, templates={}, carried=lambda _: True)
    charged = devices.charge_pod(pod, found, MAPPINGS, floor=b.res(**{GPU: floor}))
    assert isinstance(charged, objects.Pod)
    assert charged.resreq == b.res(cpu="1", **{GPU: request_})


def test_charging_again_starts_from_the_request_without_devices() -> None:
    pod = claimed(SHARED)
    found = devices.find_claims(pod, claims={"ns/c": TWO}, templates={}, carried=lambda _: True)
    once = devices.charge_pod(pod, found, MAPPINGS)
    assert isinstance(once, objects.Pod)
    twice = devices.charge_pod(once, found, MAPPINGS)
    dropped = devices.find_claims(once, claims={"ns/c": TWO}, templates={}, carried=lambda _: False)
    released = devices.charge_pod(once, dropped, MAPPINGS)
    assert isinstance(twice, objects.Pod)
    assert isinstance(released, objects.Pod)
    assert (twice.resreq, released.resreq) == (b.res(cpu="1", **{GPU: "2"}), b.res(cpu="1"))


@pytest.mark.parametrize(
    ("pod", "claims", "templates", "said"),
    [
        pytest.param(
            claimed(TEMPLATE),
            {},
            {},
            ("ResourceClaimTemplate ns/t", "cannot be read yet"),
            id="template-not-read-yet",
        ),
        pytest.param(
            claimed(TEMPLATE),
            {},
            {"ns/t": TWO},
            ("ResourceClaimTemplate ns/t", "has not yet made", "status.resourceClaimStatuses"),
            id="its-claim-not-generated-yet-the-template-is-not-charged",
        ),
        pytest.param(
            claimed(GENERATED),
            {},
            {"ns/t": TWO},
            ("ResourceClaim ns/p-gpu-x", "cannot be read yet", "deleted"),
            id="its-generated-claim-not-read-yet-or-deleted",
        ),
        pytest.param(
            claimed(GENERATED),
            generated(TWO, owner="uid-other"),
            {"ns/t": TWO},
            ("ResourceClaim ns/p-gpu-x", "not controlled by the pod", "uid-other"),
            id="its-recorded-claim-is-another-pods",
        ),
        pytest.param(
            claimed(GENERATED),
            generated(TWO, owner=""),
            {"ns/t": TWO},
            ("ResourceClaim ns/p-gpu-x", "not controlled by the pod", "no pod"),
            id="its-recorded-claim-is-controlled-by-no-pod",
        ),
        pytest.param(
            claimed(SHARED), {}, {}, ("ResourceClaim ns/c", "cannot be read yet"), id="claim"
        ),
    ],
)
def test_a_pod_whose_claim_cannot_be_charged_is_not_charged_but_told_why(
    pod: objects.Pod,
    claims: dict[str, devices.ClaimSpec],
    templates: dict[str, devices.ClaimSpec],
    said: tuple[str, ...],
) -> None:
    found = devices.find_claims(pod, claims=claims, templates=templates, carried=lambda _: True)
    why = devices.charge_pod(pod, found, MAPPINGS)
    assert isinstance(why, str)
    assert [part for part in said if part not in why] == [], why


def admission_config(*, hierarchy: bool, mapped: bool) -> configs.SchedulerConfiguration:
    tiers = b.config(
        [b.plugin("priority"), b.plugin("gang"), b.plugin("conformance")],
        [b.plugin("predicates"), b.plugin("capacity", hierarchy=hierarchy), b.plugin("nodeorder")],
    )
    return dataclasses.replace(tiers, device_classes=MAPPINGS if mapped else {})


@pytest.mark.parametrize("hierarchy", [True, False], ids=["hierarchy", "flat"])
@pytest.mark.parametrize(
    ("mapped", "ungated"),
    [
        pytest.param(True, ("ns/p0", "ns/p1"), id="mapped-the-queue-capability-is-the-limit"),
        pytest.param(False, (), id="unmapped-the-nodes-without-gpus-are-the-limit"),
    ],
)
def test_no_node_lists_devices_so_only_queues_limit_mapped_resources(
    hierarchy: bool, mapped: bool, ungated: tuple[str, ...]
) -> None:
    # Two GPUs of capability, three pods of one GPU each (as charged for their claims), and
    # nodes that list no GPU: DRA devices are in ResourceSlices, not in allocatable.
    pods = [
        b.pod("ns", f"p{index}")
        .requests(cpu="100m", **{GPU: "1"})
        .admission()
        .annotate(**{objects.QUEUE_NAME_ANNOTATION: "q"})
        .created(index)
        for index in range(3)
    ]
    snapshot = b.snapshot(
        b.queue("root"),
        b.queue("q").capability(cpu="4", **{GPU: "2"}),
        b.node("n1").allocatable(cpu="8", memory="8Gi", pods="20"),
        *pods,
    )
    result = sessions.run_session(
        snapshot,
        config=admission_config(hierarchy=hierarchy, mapped=mapped),
        feature_gates=b.GATES_ON,
        admission_only=True,
    )
    assert result.ungate == ungated


@pytest.mark.parametrize(
    ("admitted", "now", "grown"),
    [
        pytest.param(None, "4", False, id="never-charged-before-nothing-known"),
        pytest.param("2", "2", False, id="the-same"),
        pytest.param("2", "4", True, id="more-devices"),
        pytest.param("0", "1", True, id="devices-where-none-were"),
    ],
)
def test_an_admitted_pod_outgrows_its_admission_when_its_own_claims_ask_for_more(
    admitted: str | None, now: str, grown: bool
) -> None:
    pod = claimed(GENERATED)
    found = devices.find_claims(
        pod, claims=generated(spec(one(exact(count=int(now))))), templates={}, carried=bool
    )
    floor = None if admitted is None else b.res(**{GPU: admitted})
    charged = devices.charge_pod(pod, found, MAPPINGS, floor=floor or resources.EMPTY)
    assert isinstance(charged, objects.Pod)
    assert devices.outgrown(floor, charged) is grown


def test_a_pod_without_claims_of_its_own_has_no_own_charge() -> None:
    # own_devices None: nothing of its own was charged, so nothing can outgrow an admission.
    pod = claimed(SHARED)
    found = devices.find_claims(pod, claims={"ns/c": TWO}, templates={}, carried=lambda _: True)
    charged = devices.charge_pod(pod, found, MAPPINGS)
    assert isinstance(charged, objects.Pod)
    assert (charged.own_devices, devices.outgrown(resources.EMPTY, charged)) == (None, False)
