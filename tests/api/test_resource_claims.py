"""ResourceClaims, ResourceClaimTemplates and a pod's ``spec.resourceClaims`` into
``core.devices`` records."""

from __future__ import annotations

from typing import Any

import pytest

from queuetree.api import pod_manifests, readers, resource_claims
from queuetree.core import devices, objects, resources

EXACT = devices.DeviceAsk


def claim_spec(*requests: dict[str, Any]) -> dict[str, Any]:
    return {"devices": {"requests": list(requests)}}


@pytest.mark.parametrize(
    ("request_", "expected"),
    [
        pytest.param(
            {"name": "g", "exactly": {"deviceClassName": "gpu.example.com"}},
            devices.DeviceRequest(name="g", asks=(EXACT("gpu.example.com"),)),
            id="count-and-mode-default-to-one-exactly",
        ),
        pytest.param(
            {"name": "g", "exactly": {"deviceClassName": "gpu.example.com", "count": 3}},
            devices.DeviceRequest(name="g", asks=(EXACT("gpu.example.com", 3),)),
            id="a-count",
        ),
        pytest.param(
            {
                "name": "g",
                "exactly": {"deviceClassName": "gpu.example.com", "allocationMode": "All"},
            },
            devices.DeviceRequest(name="g", asks=(EXACT("gpu.example.com", 1, "All"),)),
            id="all-devices",
        ),
        pytest.param(
            {
                "name": "g",
                "firstAvailable": [
                    {"name": "big", "deviceClassName": "big.example.com", "count": 1},
                    {"name": "small", "deviceClassName": "gpu.example.com", "count": 2},
                ],
            },
            devices.DeviceRequest(
                name="g",
                asks=(EXACT("big.example.com", 1), EXACT("gpu.example.com", 2)),
                first_available=True,
            ),
            id="first-available",
        ),
    ],
)
def test_claims_and_templates_read_their_requests(
    request_: dict[str, Any], expected: devices.DeviceRequest
) -> None:
    meta = {"name": "c", "namespace": "ns"}
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": meta}
    template = {**claim, "kind": "ResourceClaimTemplate"}
    read_claim = resource_claims.parse_claim({**claim, "spec": claim_spec(request_)})
    read_template = resource_claims.parse_template(
        {**template, "spec": {"spec": claim_spec(request_)}}
    )
    wanted = ("ns/c", devices.ClaimSpec(requests=(expected,)))
    assert (read_claim, read_template) == (wanted, wanted)


def test_a_claim_of_another_api_version_is_refused() -> None:
    with pytest.raises(readers.ManifestError) as caught:
        resource_claims.parse_claim(
            {
                "apiVersion": "resource.k8s.io/v1beta1",
                "kind": "ResourceClaim",
                "metadata": {"name": "c"},
            }
        )
    assert "must have apiVersion resource.k8s.io/v1" in str(caught.value)


POD_CLAIMS = [
    {"name": "a", "resourceClaimName": "shared"},
    {"name": "b", "resourceClaimTemplateName": "one"},
]
POD_STATUS = {"name": "b", "resourceClaimName": "p-b-x7k2q"}


@pytest.mark.parametrize(
    ("statuses", "expected"),
    [
        pytest.param(
            None,
            (
                objects.ClaimRef(name="a", claim="shared"),
                objects.ClaimRef(name="b", template="one"),
            ),
            id="before-the-controller-generated-a-claim",
        ),
        pytest.param(
            [{"name": "b", "resourceClaimName": "p-b-x7k2q"}],
            (
                objects.ClaimRef(name="a", claim="shared"),
                objects.ClaimRef(name="b", template="one", generated="p-b-x7k2q"),
            ),
            id="the-claim-generated-from-the-template",
        ),
        pytest.param(
            [{"name": "a", "resourceClaimName": "other"}, {"name": "c", "resourceClaimName": "z"}],
            (
                objects.ClaimRef(name="a", claim="shared"),
                objects.ClaimRef(name="b", template="one"),
            ),
            id="a-status-only-counts-for-a-template-of-the-same-name",
        ),
        pytest.param(
            [{"name": "b"}],
            (
                objects.ClaimRef(name="a", claim="shared"),
                objects.ClaimRef(name="b", template="one"),
            ),
            id="a-status-without-a-claim-name-is-none-generated",
        ),
    ],
)
def test_a_pod_names_its_claims_and_templates_and_the_claims_generated_for_it(
    statuses: list[dict[str, Any]] | None, expected: tuple[objects.ClaimRef, ...]
) -> None:
    manifest: dict[str, Any] = {
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {
            "containers": [{"name": "c", "resources": {"claims": [{"name": "a"}]}}],
            "resourceClaims": POD_CLAIMS,
        },
    }
    if statuses is not None:
        manifest["status"] = {"resourceClaimStatuses": statuses}
    assert pod_manifests.parse_pod(manifest).claims == expected


def test_a_status_write_naming_the_generated_claim_is_read_again() -> None:
    # The informer re-reads only what the cluster writes after creation; the claim generated
    # for a pod is such a write (status.resourceClaimStatuses), and must not be missed.
    manifest: dict[str, Any] = {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
        "spec": {"containers": [{"name": "c"}], "resourceClaims": POD_CLAIMS},
    }
    before = pod_manifests.parse_pod(manifest)
    written = {**manifest, "status": {"resourceClaimStatuses": [POD_STATUS]}}
    after = pod_manifests.reparse_progress(before, written)
    assert after.claims[1].generated == "p-b-x7k2q"


def owned(*references: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "ns", "ownerReferences": list(references)},
        "spec": claim_spec(),
    }


POD_OWNER = {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u1", "controller": True}


@pytest.mark.parametrize(
    ("manifest", "owner"),
    [
        pytest.param(owned(POD_OWNER), "u1", id="generated-for-a-pod"),
        pytest.param(owned(), "", id="no-owner"),
        pytest.param(owned({**POD_OWNER, "controller": False}), "", id="a-pod-not-controller"),
        pytest.param(owned({**POD_OWNER, "kind": "Job"}), "", id="a-controller-not-a-pod"),
        pytest.param(
            owned({**POD_OWNER, "controller": False}, {**POD_OWNER, "uid": "u2"}),
            "u2",
            id="the-controller-among-owners",
        ),
    ],
)
def test_a_claim_reads_the_pod_that_controls_it(manifest: dict[str, Any], owner: str) -> None:
    assert resource_claims.parse_claim(manifest)[1].owner == owner


GPU = "nvidia.com/gpu"


@pytest.mark.parametrize(
    ("charged", "written"),
    [
        pytest.param({GPU: "2"}, '{"nvidia.com/gpu":"2"}', id="one-resource"),
        pytest.param(
            {GPU: "1", "example.com/fpga": "3"},
            '{"example.com/fpga":"3","nvidia.com/gpu":"1"}',
            id="names-sorted",
        ),
        pytest.param({}, "{}", id="nothing-charged"),
    ],
)
def test_the_devices_record_is_read_back_as_written(charged: dict[str, str], written: str) -> None:
    resource = resources.Resource.from_resource_list(charged)
    record = resource_claims.devices_record(resource)
    annotations = {objects.ADMITTED_DEVICES_ANNOTATION: record}
    assert (record, resource_claims.read_devices_record(annotations)) == (written, resource)


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("not json", id="not-json"),
        pytest.param('["nvidia.com/gpu"]', id="not-a-map"),
        pytest.param('{"nvidia.com/gpu": 2}', id="a-number-not-a-quantity"),
        pytest.param('{"nvidia.com/gpu": "two"}', id="a-malformed-quantity"),
    ],
)
def test_an_unreadable_devices_record_is_ignored(value: str) -> None:
    annotations = {objects.ADMITTED_DEVICES_ANNOTATION: value}
    assert resource_claims.read_devices_record(annotations) is None


@pytest.mark.parametrize(
    ("claims", "expected"),
    [
        pytest.param(POD_CLAIMS, {GPU: "2"}, id="a-pod-with-claims-reads-it"),
        pytest.param([], None, id="a-pod-without-claims-ignores-it"),
    ],
)
def test_a_pod_reads_its_devices_record_only_when_it_names_claims(
    claims: list[dict[str, Any]], expected: dict[str, str] | None
) -> None:
    manifest: dict[str, Any] = {
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "annotations": {objects.ADMITTED_DEVICES_ANNOTATION: '{"nvidia.com/gpu":"2"}'},
        },
        "spec": {"containers": [{"name": "c"}], "resourceClaims": claims},
    }
    read = pod_manifests.parse_pod(manifest).admitted_devices
    assert read == (None if expected is None else resources.Resource.from_resource_list(expected))
