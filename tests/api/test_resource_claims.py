"""ResourceClaims, ResourceClaimTemplates and a pod's ``spec.resourceClaims`` into
``core.devices`` records."""

from __future__ import annotations

from typing import Any

import pytest

from queuetree.api import pod_manifests, readers, resource_claims
from queuetree.core import devices, objects

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


def test_a_pod_names_its_claims_and_templates() -> None:
    pod = pod_manifests.parse_pod(
        {
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {
                "containers": [{"name": "c", "resources": {"claims": [{"name": "a"}]}}],
                "resourceClaims": [
                    {"name": "a", "resourceClaimName": "shared"},
                    {"name": "b", "resourceClaimTemplateName": "one"},
                ],
            },
        }
    )
    assert pod.claims == (
        objects.ClaimRef(name="a", claim="shared"),
        objects.ClaimRef(name="b", template="one"),
    )
