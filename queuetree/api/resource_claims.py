"""ResourceClaims and ResourceClaimTemplates (``resource.k8s.io/v1``) into ``core.devices``
records, and a pod's ``spec.resourceClaims``.

Only what queues are charged is read: each of ``spec.devices.requests`` (a template keeps the
claim's spec under ``spec.spec``) with its ``exactly`` ask or ``firstAvailable`` subrequests:
``deviceClassName``, ``allocationMode`` (``ExactCount`` when unset) and ``count`` (1 when
unset). Selectors, constraints and configuration do not change a count and are not read. A
claim's controlling Pod (``metadata.ownerReferences``) is read too: a generated claim charges
only the pod it was made for.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Final

from queuetree.api import readers
from queuetree.core import devices, objects, resources

API_GROUP: Final = "resource.k8s.io"
API_VERSION: Final = "v1"
GROUP_VERSION: Final = f"{API_GROUP}/{API_VERSION}"
RESOURCE_CLAIMS: Final = (API_GROUP, API_VERSION, "resourceclaims")
RESOURCE_CLAIM_TEMPLATES: Final = (API_GROUP, API_VERSION, "resourceclaimtemplates")
"""The (group, version, plural) of the two kinds the operator watches when classes are mapped."""


def _ask(reader: readers.Reader) -> devices.DeviceAsk:
    return devices.DeviceAsk(
        device_class=reader.at("deviceClassName").string(),
        count=reader.at("count").integer(1),
        mode=reader.at("allocationMode").string() or devices.EXACT_COUNT,
    )


def _claim_spec(spec: readers.Reader) -> devices.ClaimSpec:
    requests = []
    for item in spec.at("devices", "requests").items():
        name = item.at("name").string()
        alternatives = item.at("firstAvailable").items()
        if alternatives:
            asks = tuple(_ask(sub) for sub in alternatives)
            requests.append(devices.DeviceRequest(name=name, asks=asks, first_available=True))
        else:
            requests.append(devices.DeviceRequest(name=name, asks=(_ask(item.at("exactly")),)))
    return devices.ClaimSpec(requests=tuple(requests))


def _controlling_pod(root: readers.Reader) -> str:
    """The uid of the Pod that ``metadata.ownerReferences`` names as controller (as the
    resourceclaim controller writes on a claim it generates, and kube-scheduler checks before it
    allocates a generated claim for a pod); empty when no Pod controls the object."""
    for owner in root.at("metadata", "ownerReferences").items():
        if (
            owner.at("controller").boolean() is True
            and owner.at("kind").string() == "Pod"
            and owner.at("apiVersion").string() == "v1"
        ):
            return owner.at("uid").string()
    return ""


def _parse(
    manifest: readers.RawManifest, *, kind: str, path: tuple[str, ...]
) -> tuple[str, devices.ClaimSpec]:
    root, sink, meta = readers.start(
        manifest, kind=kind, origin="", namespaced=True, api_version=GROUP_VERSION
    )
    spec = _claim_spec(root.at(*path))
    if kind == devices.CLAIM:
        spec = dataclasses.replace(spec, owner=_controlling_pod(root))
    sink.raise_if_any()
    return f"{meta.namespace}/{meta.name}", spec


def parse_claim(manifest: readers.RawManifest) -> tuple[str, devices.ClaimSpec]:
    """A ResourceClaim: its key ``namespace/name`` and what it asks for. Raises
    :class:`readers.ManifestError`."""
    return _parse(manifest, kind=devices.CLAIM, path=("spec",))


def parse_template(manifest: readers.RawManifest) -> tuple[str, devices.ClaimSpec]:
    """A ResourceClaimTemplate: its key and what each claim made from it asks for. Raises
    :class:`readers.ManifestError`."""
    return _parse(manifest, kind=devices.TEMPLATE, path=("spec", "spec"))


def pod_claims(spec: readers.Reader, status: readers.Reader) -> tuple[objects.ClaimRef, ...]:
    """A pod's ``spec.resourceClaims``, each from a template with the name of the claim
    generated for it as ``status.resourceClaimStatuses`` records it (by the pod claim's name)."""
    generated = {
        item.at("name").string(): item.at("resourceClaimName").string()
        for item in status.at("resourceClaimStatuses").items()
    }
    found = []
    for item in spec.at("resourceClaims").items():
        name = item.at("name").string()
        template = item.at("resourceClaimTemplateName").string()
        found.append(
            objects.ClaimRef(
                name=name,
                claim=item.at("resourceClaimName").string(),
                template=template,
                generated=generated.get(name, "") if template else "",
            )
        )
    return tuple(found)


def devices_record(charged: resources.Resource) -> str:
    """The value of ``objects.ADMITTED_DEVICES_ANNOTATION`` for a pod whose own claims were
    charged ``charged``: a JSON resource list of its non-zero dimensions, names sorted
    (``{"nvidia.com/gpu":"2"}``; ``{}`` when they charged nothing)."""
    listed = resources.to_resource_list(charged)
    return json.dumps(
        {name: value for name, value in listed.items() if not charged.is_zero(name)},
        sort_keys=True,
        separators=(",", ":"),
    )


def read_devices_record(annotations: Mapping[str, str]) -> resources.Resource | None:
    """What ``objects.ADMITTED_DEVICES_ANNOTATION`` of ``annotations`` says (see
    :func:`devices_record`); None when there is none or it is not a resource list of valid
    quantities. Only the operator writes it and the webhook refuses any other writer, so an
    unreadable one was written past both: it is ignored, as if missing (the operator then
    charges the pod's claims as they are now, the figure it had before the record existed)."""
    raw = annotations.get(objects.ADMITTED_DEVICES_ANNOTATION)
    if raw is None:
        return None
    try:
        listed = json.loads(raw)
        if not isinstance(listed, dict) or not all(
            isinstance(value, str) for value in listed.values()
        ):
            return None
        return resources.Resource.from_resource_list(listed)
    except ValueError:  # malformed JSON, and errors.QuantityError
        return None
