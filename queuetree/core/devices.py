"""Devices through Dynamic Resource Allocation (DRA), charged to queues as resources.

A pod that gets devices through ``spec.resourceClaims`` asks for them in ResourceClaims, not in
its containers' requests, so nothing in ``Pod.resreq`` would count them. The scheduler
configuration maps device classes to resource names (``deviceClassMappings``, read by
``api.schedconf``; for instance ``gpu.example.com`` -> ``nvidia.com/gpu``), and a pod is charged,
on top of its containers' requests, the devices its claims ask for in mapped classes. Queue
``capability``, ``deserved`` and ``guarantee`` then limit them under the mapped name, like any
device-plugin resource. The one function every caller goes through is :func:`charge_pod`.

The rules (docs/configuration.md, "Devices through DRA"):

- A request ``exactly`` of a mapped class charges ``count`` devices (1 when unset).
- ``allocationMode: All`` (or any mode but ``ExactCount``) of a mapped class cannot be charged
  (the count is whatever the pool holds when the scheduler allocates): the pod waits, told so.
- Unmapped classes charge nothing: map every class whose devices a queue must limit.
- ``firstAvailable``: the scheduler picks one subrequest; the pod is charged the largest of them
  per resource, which covers whichever it picks.
- A claim that cannot be read yet (not in the cache) keeps a waiting pod waiting, told so: a
  pod is never admitted without the charge of a claim it names.
- A shared ResourceClaim (``resourceClaimName``) is counted once per queue, however many of its
  pods the queue holds: among the queue's pods that hold room (:func:`carries`), the first by
  key carries it; while none does, every waiting pod of the queue carries it (each must find
  room for it, since any may be the first to run). Pods of two queues sharing one claim charge it
  to each queue (each is limited as if it alone used the devices; a common ancestor counts it
  twice): sharing across queues never lets a queue exceed its capability.
- A claim from a template (``resourceClaimTemplateName``) is the pod's own: always charged, and
  charged from the ResourceClaim the resourceclaim controller generated for the pod (named in
  the pod's ``status.resourceClaimStatuses``), never from the template. That claim is what
  kube-scheduler allocates; the template is only what the controller copied it from, and a
  tenant can delete and re-create a template (its spec is immutable, its name is not) at any
  time. The controller generates claims for gated pods too, so until the generated claim exists,
  can be read, and is controlled by the pod (its ``ownerReferences``; kube-scheduler allocates
  no other for the pod either), the pod waits, told why: it is never admitted on a template's
  figure.
- An admitted pod never charges its own claims less than it was admitted with (``floor``): a
  generated claim deleted or re-created smaller after admission does not free room the pod may
  still hold. One whose own claims now charge more (its claim deleted after admission and made
  again from a larger template, before the pod was bound) has outgrown its admission
  (:func:`outgrown`): a gate cannot be put back, so the operator evicts it.
- The cluster sets no limit on mapped resources (:func:`claimed_dimensions`): only queues do.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence

from queuetree.core import objects, resources, vectors


@dataclasses.dataclass(frozen=True, slots=True)
class DeviceAsk:
    """``exactly`` of a request, or one ``firstAvailable`` subrequest."""

    device_class: str
    count: int = 1
    mode: str = "ExactCount"
    """``allocationMode``: only ``ExactCount`` has a count (``All`` takes every matching device
    of a pool, and later modes are unknown here)."""


@dataclasses.dataclass(frozen=True, slots=True)
class DeviceRequest:
    """One of ``spec.devices.requests``: one ask, or alternatives (``firstAvailable``)."""

    name: str
    asks: tuple[DeviceAsk, ...]
    first_available: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class ClaimSpec:
    """What a ResourceClaim, or every claim made from a ResourceClaimTemplate, asks for."""

    requests: tuple[DeviceRequest, ...] = ()
    owner: str = ""
    """The uid of the Pod that controls the claim (its controller owner reference), as on a claim
    generated from a template; empty for any other claim and for templates."""


@dataclasses.dataclass(frozen=True, slots=True)
class Found:
    """A claim a pod names, as the caller found it: ``kind`` ResourceClaim or
    ResourceClaimTemplate, ``key`` ``namespace/name``, ``spec`` None when it cannot be read
    yet, ``carried`` whether this pod carries it (:func:`carries`; its own claims always),
    ``own`` whether it is the pod's own claim (generated from a template), ``problem`` why it
    cannot be charged although it may be readable (empty when it can)."""

    kind: str
    key: str
    spec: ClaimSpec | None
    carried: bool = True
    own: bool = False
    problem: str = ""


EXACT_COUNT = "ExactCount"
CLAIM = "ResourceClaim"
TEMPLATE = "ResourceClaimTemplate"


def ask_charge(ask: DeviceAsk, mappings: Mapping[str, str]) -> resources.Resource | None:
    """The devices of ``ask`` as a resource; EMPTY for an unmapped class; None when it cannot be
    charged (``allocationMode: All`` of a mapped class)."""
    name = mappings.get(ask.device_class)
    if name is None:
        return resources.EMPTY
    if ask.mode != EXACT_COUNT:
        return None
    return resources.Resource.from_resource_list({name: str(ask.count)})


def claim_charge(
    spec: ClaimSpec, mappings: Mapping[str, str], *, subject: str
) -> resources.Resource | str:
    """The devices ``spec`` asks for in mapped classes, or why they cannot be charged
    (``subject`` names the claim in that sentence)."""
    total = resources.EMPTY
    for request in spec.requests:
        largest = resources.EMPTY
        for ask in request.asks:
            charge = ask_charge(ask, mappings)
            if charge is None:
                return (
                    f"{subject} request {request.name!r} asks for devices of class "
                    f"{ask.device_class!r} with allocationMode {ask.mode}, which has no count "
                    f"to charge to the queue as {mappings[ask.device_class]} before the "
                    "scheduler allocates; ask for a count (allocationMode: ExactCount)"
                )
            largest = largest.set_max_resource(charge)
        total = total + largest
    return total


def carries(key: str, holders: Iterable[str]) -> bool:
    """Whether pod ``key`` carries a shared claim in its queue, where ``holders`` are the keys of
    the queue's pods that name the claim and hold room: the first of them by key, or every pod
    while none holds room (see the module docstring)."""
    first = min(holders, default=None)
    return first is None or first == key


def charge_pod(
    pod: objects.Pod,
    found: Sequence[Found],
    mappings: Mapping[str, str],
    *,
    floor: resources.Resource = resources.EMPTY,
) -> objects.Pod | str:
    """``pod`` charged the devices of its claims (``found``, one per ``pod.claims`` entry, in
    order), or why it cannot be (a claim not read yet, not generated yet, not the pod's, or
    ``allocationMode: All``): the sentence a waiting pod is told. Its own claims charge at least
    ``floor`` per resource (an admitted pod's earlier charge of them, ``Pod.own_devices``; a pod
    without own claims has no floor).
    Charging a pod charged before starts from its request without devices, so the result does
    not depend on earlier charges."""
    base = pod.resreq if pod.request_before_devices is None else pod.request_before_devices
    devices = resources.EMPTY
    own = resources.EMPTY
    for item in found:
        subject = f"{item.kind} {item.key}"
        if item.problem:
            return item.problem
        if item.spec is None:
            return (
                f"{subject}, which the pod names in spec.resourceClaims, cannot be read yet, so "
                "the devices it asks for cannot be charged to the queue; the pod waits until it "
                "exists"
            )
        charge = claim_charge(item.spec, mappings, subject=subject)
        if isinstance(charge, str):
            return charge
        if item.own:
            own = own + charge
        elif item.carried:
            devices = devices + charge
    has_own = any(item.own for item in found)
    if has_own:
        own = own.set_max_resource(floor)
    if devices.is_empty() and not has_own and pod.request_before_devices is None:
        return pod
    return dataclasses.replace(
        pod,
        resreq=base + devices + own,
        request_before_devices=base,
        own_devices=own if has_own else None,
    )


def outgrown(admitted: resources.Resource | None, charged: objects.Pod) -> bool:
    """Whether an admitted pod, whose own claims charged ``admitted`` (``Pod.own_devices``;
    None: never charged, so nothing is known to have grown), is now ``charged`` more for them
    in some resource: more devices will be allocated than its queue admitted."""
    if admitted is None or charged.own_devices is None:
        return False
    return not charged.own_devices.less_equal(admitted, resources.ZERO)


def outgrown_reason(admitted: resources.Resource, charged: objects.Pod, queue: str) -> str:
    """What a pod that :func:`outgrown` its admission to ``queue`` is told as it is evicted."""

    def shown(resource: resources.Resource | None) -> str:
        listed = resources.to_resource_list(resource or resources.EMPTY)
        return ", ".join(f"{name} {value}" for name, value in sorted(listed.items())) or "nothing"

    return (
        f"the pod was admitted to queue {queue} with {shown(admitted)} for its own "
        f"ResourceClaims, which now ask for {shown(charged.own_devices)} (a claim was made "
        "again after admission, from a template made larger); a scheduling gate cannot be "
        "put back, so queuetree evicts the pod: made again (by its controller), it waits "
        "for room in its queue"
    )


def find_claims(
    pod: objects.Pod,
    *,
    claims: Mapping[str, ClaimSpec],
    templates: Mapping[str, ClaimSpec],
    carried: Callable[[str], bool],
) -> list[Found]:
    """What ``pod`` names, looked up in ``claims`` and ``templates`` (by ``namespace/name``);
    ``carried(key)`` tells whether the pod carries the shared claim ``key``. A template's entry
    is the claim generated from it (``ClaimRef.generated``); the template itself is read only to
    say why a pod without one waits."""
    found = []
    for ref in pod.claims:
        if ref.claim:
            key = f"{pod.namespace}/{ref.claim}"
            found.append(Found(CLAIM, key, claims.get(key), carried(key)))
        elif ref.template:
            found.append(_generated(pod, ref, claims=claims, templates=templates))
    return found


def _generated(
    pod: objects.Pod,
    ref: objects.ClaimRef,
    *,
    claims: Mapping[str, ClaimSpec],
    templates: Mapping[str, ClaimSpec],
) -> Found:
    """The claim generated for ``pod`` from the template of ``ref``, or why it waits for it."""
    template = f"{TEMPLATE} {pod.namespace}/{ref.template}"
    why = (
        "the pod is charged from that claim, which is what the scheduler allocates, not from "
        "the template, which may change; the pod waits until"
    )
    if not ref.generated:
        key = f"{pod.namespace}/{ref.template}"
        if key not in templates:
            problem = (
                f"{template}, which the pod names in spec.resourceClaims ({ref.name!r}), cannot "
                "be read yet, so the resourceclaim controller cannot make the pod its "
                f"ResourceClaim from it; {why} the template exists and the claim is made"
            )
        else:
            problem = (
                f"the resourceclaim controller has not yet made the pod its ResourceClaim for "
                f"{ref.name!r} from {template} (status.resourceClaimStatuses names none); "
                f"{why} the claim is made"
            )
        return Found(TEMPLATE, key, None, own=True, problem=problem)
    key = f"{pod.namespace}/{ref.generated}"
    spec = claims.get(key)
    subject = f"{CLAIM} {key}, which status.resourceClaimStatuses names for {ref.name!r}"
    if spec is None:
        problem = (
            f"{subject} (generated from {template}), cannot be read yet (not made yet, or "
            "deleted: the resourceclaim controller then makes the pod a new one); "
            f"{why} the pod's claim can be read"
        )
    elif not spec.owner or spec.owner != pod.uid:
        problem = (
            f"{subject}, is not controlled by the pod (its ownerReferences name "
            f"{spec.owner or 'no pod'} as controller, not the pod's uid {pod.uid}): the scheduler "
            "does not allocate it for the pod, and the resourceclaim controller makes the pod "
            "a claim of its own; the pod waits for that claim"
        )
    else:
        problem = ""
    return Found(CLAIM, key, spec, own=True, problem=problem)


def claimed_dimensions(mappings: Mapping[str, str], dims: vectors.Dims) -> list[int]:
    """The dimensions of ``dims`` that mapped DRA devices are charged as. No node's allocatable
    lists them (drivers publish devices in ResourceSlices, which queuetree does not count), so
    the cluster's total and root's capability leave them unlimited: queues' capabilities are
    what limits them."""
    return sorted({dims.index[name] for name in mappings.values() if name in dims.index})
