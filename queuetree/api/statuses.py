"""Status on the wire: a queue's readiness condition, what tools read back from a queue's
status, and a PodGroup's admission condition (:func:`group_conditions_value`).

The operator writes one condition of type :data:`READY_CONDITION` into ``status.conditions``
(``core.conditions.Readiness``, in the Kubernetes condition shape: ``type``, ``status``
``"True"``/``"False"``, ``reason``, ``message``, ``lastTransitionTime``); conditions of other
types that someone else wrote are kept. Tools (``kubectl queuetree``, the sandbox) read a
queue's figures and condition back with :func:`read_queue_status`. Only this module knows those
keys.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
from collections.abc import Mapping, Sequence
from typing import Any

from queuetree.core import conditions, objects, resources

SHOWN_RESOURCES = (resources.CPU, resources.MEMORY, resources.GPU)
"""The resources whose figures ``kubectl get queues`` shows in columns (hack/gen_crds.py's
``FIGURE_RESOURCES``, kept equal by tests/deploy)."""

READY_CONDITION = "Ready"
"""The type of the readiness condition (``kubectl get queues`` shows its reason)."""


@dataclasses.dataclass(frozen=True, slots=True)
class WrittenCondition:
    """A readiness condition as a status shows it."""

    ready: bool
    reason: str
    message: str
    last_transition: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class QueueStatus:
    """What a queue's status says, for a person: state, condition, figures and counts.

    Figures absent from the status are empty vectors, except ``real_capability``, which is
    None when the operator has not written it (unlimited: nothing to compare with).
    """

    state: str = ""
    condition: WrittenCondition | None = None
    allocated: resources.Resource = resources.EMPTY
    reserved: resources.Resource = resources.EMPTY
    deserved: resources.Resource = resources.EMPTY
    real_capability: resources.Resource | None = None
    pending: int = 0
    """Pending pod groups (``status.pending``)."""


def read_condition(status: Mapping[str, Any]) -> WrittenCondition | None:
    """The readiness condition of a raw ``status``, None when there is none."""
    for item in _conditions(status):
        if item.get("type") == READY_CONDITION:
            return WrittenCondition(
                ready=item.get("status") == "True",
                reason=str(item.get("reason", "")),
                message=str(item.get("message", "")),
                last_transition=str(item.get("lastTransitionTime", "")),
            )
    return None


def same_condition(written: WrittenCondition | None, wanted: conditions.Readiness) -> bool:
    """Whether ``written`` already says ``wanted`` (the time of the transition aside)."""
    return written is not None and (written.ready, written.reason, written.message) == (
        wanted.ready,
        str(wanted.reason),
        wanted.message,
    )


def conditions_value(
    status: Mapping[str, Any], wanted: conditions.Readiness, *, now: str
) -> list[dict[str, Any]]:
    """``status.conditions`` with the readiness condition set to ``wanted``.

    ``lastTransitionTime`` moves to ``now`` only when the condition's status flips (the
    Kubernetes convention); a new reason or message keeps the time of the last flip. Other
    condition types are kept as written, before ours.
    """
    written = read_condition(status)
    since = now
    if written is not None and written.ready == wanted.ready and written.last_transition:
        since = written.last_transition
    others = [dict(item) for item in _conditions(status) if item.get("type") != READY_CONDITION]
    return [
        *others,
        {
            "type": READY_CONDITION,
            "status": "True" if wanted.ready else "False",
            "reason": str(wanted.reason),
            "message": wanted.message,
            "lastTransitionTime": since,
        },
    ]


def group_conditions_value(
    written: Sequence[objects.Condition], wanted: conditions.GroupCondition, *, now: str
) -> list[dict[str, Any]]:
    """A PodGroup's ``status.conditions`` with its admission condition
    (``conditions.GROUP_CONDITION``) set to ``wanted``; the other conditions (``written``) are
    kept as they were, before it.

    ``lastTransitionTime`` moves to ``now`` when the status flips, when there was none, and
    when ``wanted.renew`` says the group entered Inqueue again (its bound starts then); a new
    reason or message keeps the time of the last flip, as the Kubernetes convention has it.
    """
    current = next((c for c in written if c.type == conditions.GROUP_CONDITION), None)
    status = "True" if wanted.unschedulable else "False"
    since = now
    if (
        current is not None
        and current.status == status
        and current.last_transition is not None
        and not wanted.renew
    ):
        since = format_time(current.last_transition)
    others = [_condition(c) for c in written if c.type != conditions.GROUP_CONDITION]
    return [
        *others,
        {
            "type": conditions.GROUP_CONDITION,
            "status": status,
            "reason": str(wanted.reason),
            "message": wanted.message,
            "lastTransitionTime": since,
        },
    ]


def _condition(condition: objects.Condition) -> dict[str, Any]:
    """``condition`` as it was written (the fields the PodGroup CRD keeps)."""
    item: dict[str, Any] = {"type": condition.type, "status": condition.status}
    if condition.transition_id:
        item["transitionID"] = condition.transition_id
    if condition.last_transition is not None:
        item["lastTransitionTime"] = format_time(condition.last_transition)
    if condition.reason:
        item["reason"] = condition.reason
    if condition.message:
        item["message"] = condition.message
    return item


def format_time(moment: datetime.datetime) -> str:
    """``moment`` as Kubernetes writes times: RFC 3339, whole seconds, UTC (``...Z``)."""
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def read_queue_status(manifest: Mapping[str, Any]) -> QueueStatus:
    """The status of a raw Queue, tolerant of anything missing or malformed (a tool shows
    what it can: a figure it cannot read counts as absent)."""
    status = manifest.get("status")
    if not isinstance(status, Mapping):
        return QueueStatus()
    capability = _resource(status.get("realCapability"))
    pending = status.get("pending")
    return QueueStatus(
        state=str(status.get("state") or ""),
        condition=read_condition(status),
        allocated=_resource(status.get("allocated")) or resources.EMPTY,
        reserved=_resource(status.get("reserved")) or resources.EMPTY,
        deserved=_resource(status.get("deserved")) or resources.EMPTY,
        real_capability=capability,
        pending=pending if isinstance(pending, int) and not isinstance(pending, bool) else 0,
    )


def queue_state(manifest: Mapping[str, Any]) -> objects.QueueState:
    """``status.state`` of a raw Queue: "" reads as Open, anything unrecognised as Unknown."""
    status = manifest.get("status")
    raw = str(status.get("state") or "") if isinstance(status, Mapping) else ""
    if not raw:
        return objects.QueueState.OPEN
    try:
        return objects.QueueState(raw)
    except ValueError:
        return objects.QueueState.UNKNOWN


def state_patch(state: objects.QueueState) -> dict[str, Any]:
    """The merge patch of the ``status`` subresource that asks for ``state`` (how a person
    closes or opens a queue: the operator reads it as a request, docs/operator.md)."""
    return {"status": {"state": str(state)}}


def _conditions(status: Mapping[str, Any]) -> Sequence[Mapping[str, Any]]:
    found = status.get("conditions")
    if not isinstance(found, list):
        return []
    return [item for item in found if isinstance(item, Mapping)]


def _resource(value: Any) -> resources.Resource | None:
    if not isinstance(value, Mapping):
        return None
    try:
        return resources.Resource.from_resource_list({str(k): v for k, v in value.items()})
    except (ValueError, TypeError):
        return None


def amount_value(amount: resources.Resource) -> dict[str, str]:
    """An amount figure of a queue's status (``allocated``, ``reserved``, ``deserved``): its
    quantity map, with ``"0"`` for each of :data:`SHOWN_RESOURCES` it lacks. A printer column
    cannot default a missing key, and an amount that is absent is zero: written, the columns
    of ``kubectl get queues`` show ``0`` instead of nothing (issue 35). ``realCapability`` is
    not an amount (absent means no limit) and is written as it is."""
    value = resources.to_resource_list(amount)
    missing = [
        name for name in SHOWN_RESOURCES if name not in value and not math.isinf(amount.get(name))
    ]
    if not missing:
        return value
    value.update(dict.fromkeys(missing, "0"))
    head = [name for name in (resources.CPU, resources.MEMORY) if name in value]
    return {name: value[name] for name in (*head, *sorted(value.keys() - set(head)))}
