"""Queue and PodGroup manifests (``scheduling.volcano.sh/v1beta1``), read once.

:func:`read_queue` is the one reader of the Queue shape: sessions and the operator use
:func:`parse_queue` (which refuses a queue with problems), the webhook validates the queue it
gives (``core.field_rules``, ``core.tree_rules``) beside its reading problems.
:func:`parse_pod_group` reads a PodGroup, and the webhook refuses what it cannot read
(:func:`pod_group_problems`). Reading is :mod:`readers`'s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from queuetree.api import bodies, readers
from queuetree.core import objects, problems, quantities, resources

_QUEUE_STATES: Final = {state.value: state for state in objects.QueueState}
_POD_GROUP_PHASES: Final = {phase.value: phase for phase in objects.PodGroupPhase}


# -- Queue --------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class QueueReading:
    """A Queue as read, whatever its problems: the queue (fields that could not be read keep
    their defaults) and every problem found on the way, in reading order."""

    queue: objects.Queue
    problems: tuple[problems.Problem, ...] = ()


def _named(manifest: object, name: str) -> object:
    """``manifest`` with ``name`` standing in for a missing ``metadata.name`` (an admission
    request names the object); as it is when it has a name, or ``name`` is ""."""
    if isinstance(manifest, Mapping) and name:
        metadata = manifest.get("metadata")
        if not (isinstance(metadata, Mapping) and metadata.get("name")):
            written = metadata if isinstance(metadata, Mapping) else {}
            return {**manifest, "metadata": {**written, "name": name}}
    return manifest


def read_queue(manifest: object, *, origin: str = "", name: str = "") -> QueueReading:
    """A ``scheduling.volcano.sh/v1beta1`` Queue and its reading problems; never raises.

    The one reader of the Queue shape: :func:`parse_queue` (sessions, the operator) refuses a
    queue with problems, the webhook validates the queue it gives (``core.field_rules``,
    ``tree_rules``) and adds these problems to its own. ``name`` stands in for a missing
    ``metadata.name`` (an admission request names the object). ``capability`` is None when
    ``spec.capability`` is absent or an empty map; a map whose names are all dropped by
    Volcano's name rules (``rdma: 1000``) is a set, empty capability, as in Volcano.
    ``spec.weight`` defaults to 1 (the CRD default), ``spec.parent`` is kept as written,
    ``status.state`` "" or absent (or a state queuetree does not know) reads as Open,
    ``status.allocated`` and ``status.reserved`` are read for the webhook. The quota maps and
    the state are also kept as written (``objects.QueueAsWritten``): every entry that parsed,
    exactly. A quantity that does not parse or is negative is a problem (and its map's vector
    None, or empty); the webhook's further rules (whole numbers, guarantee <= deserved <=
    capability, the tree) are ``core.field_rules`` and ``core.tree_rules``. The uid is the name,
    as in Volcano.
    """
    manifest = _named(manifest, name)
    try:
        root, sink, meta = readers.start(manifest, kind="Queue", origin=origin, namespaced=False)
    except readers.ManifestError as error:  # not even an object
        return QueueReading(queue=objects.Queue(name=name), problems=error.problems)
    spec = root.at("spec")
    spec.mapping()
    parent = spec.at("parent").string()
    weight = spec.at("weight").integer(1)
    priority = spec.at("priority").integer(0)
    written_capability, capability = spec.at("capability").quota()
    written_deserved, deserved = spec.at("deserved").quota()
    written_guarantee, guarantee = spec.at("guarantee", "resource").quota()
    reclaimable = spec.at("reclaimable").boolean()
    state_text = root.at("status", "state").string()
    queue = objects.Queue(
        name=meta.name,
        parent=parent,
        weight=weight,
        priority=priority,
        capability=capability,
        deserved=deserved or resources.EMPTY,
        guarantee=guarantee or resources.EMPTY,
        reclaimable=reclaimable,
        state=_QUEUE_STATES.get(state_text) or objects.QueueState.OPEN,
        allocated=root.at("status", "allocated").resource_list() or resources.EMPTY,
        reserved=root.at("status", "reserved").resource_list() or resources.EMPTY,
        annotations=meta.annotations,
        created=meta.created,
        uid=root.at("metadata", "uid").string() or meta.name,
        deleting=bool(root.at("metadata", "deletionTimestamp").string()),
        as_written=objects.QueueAsWritten(
            capability=written_capability,
            deserved=written_deserved,
            guarantee=written_guarantee,
            state=state_text,
        ),
    )
    return QueueReading(queue=queue, problems=tuple(sink.found))


def parse_queue(manifest: readers.RawManifest, *, origin: str = "") -> objects.Queue:
    """A Queue a session can use (:func:`read_queue`), or :class:`readers.ManifestError` listing
    every problem: the reading problems and :func:`unusable_queue_problems`.

    Validation of the values (whole numbers, guarantee <= deserved <= capability, weight
    range, the tree) is not done here: that is the webhook's and the session's work.
    """
    reading = read_queue(manifest, origin=origin)
    found = [*reading.problems, *unusable_queue_problems(reading.queue, origin=origin)]
    if found:
        raise readers.ManifestError(found)
    return reading.queue


def unusable_queue_problems(queue: objects.Queue, *, origin: str = "") -> list[problems.Problem]:
    """What a session cannot use in a queue that reads well: a negative quantity of a
    resource the scheduler reads (the API server refuses negative requests and quotas alike; a
    name the scheduler drops is not looked at), and a ``status.state`` queuetree does not know.
    """
    found: list[problems.Problem] = []
    document = f"Queue {queue.name}" if queue.name else "Queue"
    written = queue.as_written
    for path, quota in (
        ("spec.capability", written.capability),
        ("spec.deserved", written.deserved),
        ("spec.guarantee.resource", written.guarantee),
    ):
        for name, quantity in quota.items():
            text = quantities.format_quantity(quantity)
            if quantity.value < 0 and readers.has_negative(
                resources.Resource.from_resource_list({name: text})
            ):
                found.append(
                    problems.Problem(
                        path=f"{path}{problems.key(name)}",
                        message="must not be negative",
                        value=text,
                        document=document,
                        origin=origin,
                    )
                )
    if written.state and written.state not in _QUEUE_STATES:
        found.append(
            problems.Problem(
                path="status.state",
                message=f"must be one of {', '.join(_QUEUE_STATES)}",
                value=written.state,
                document=document,
                origin=origin,
            )
        )
    return found


# -- PodGroup -----------------------------------------------------------------------------------


def named_queue(manifest: object) -> str:
    """The queue a PodGroup manifest names (``spec.queue``), "" when it names none or the
    value is not a string: the tolerant reading of reviews and caches, which resolve "" to the
    configured default queue as :func:`parse_pod_group` does."""
    named = bodies.spec_of(manifest).get("queue")
    return named if isinstance(named, str) else ""


def parse_pod_group(
    manifest: readers.RawManifest, *, origin: str = "", default_queue: str = objects.DEFAULT_QUEUE
) -> objects.PodGroup:
    """A ``scheduling.volcano.sh/v1beta1`` PodGroup.

    ``spec.queue`` absent or "" is ``default_queue`` (the CRD default and Volcano's mutating
    webhook); ``spec.minMember`` absent is 0 (Go's zero value: Volcano sets no default);
    ``minResources`` absent is None (enqueue then skips the capacity check, spec §3.7) while
    ``{}`` is an empty vector; ``status.phase`` "" or absent is Pending; ``status.running``,
    ``succeeded`` and ``failed`` absent are 0. Raises :class:`readers.ManifestError`.
    """
    root, sink, meta = readers.start(manifest, kind="PodGroup", origin=origin, namespaced=True)
    spec = root.at("spec")
    spec.mapping()
    min_task_member: dict[str, int] = {}
    task_members = spec.at("minTaskMember")
    for task in task_members.mapping():
        min_task_member[str(task)] = task_members.entry(str(task)).integer(0)
    min_member = spec.at("minMember")
    if min_member.integer(0) < 0:
        min_member.fail("must not be negative", value=min_member.value)
    phase_reader = root.at("status", "phase")
    phase_text = phase_reader.string()
    phase = _POD_GROUP_PHASES.get(phase_text or objects.PodGroupPhase.PENDING.value)
    if phase is None:
        phase_reader.fail(f"must be one of {', '.join(_POD_GROUP_PHASES)}", value=phase_text)
    group = objects.PodGroup(
        namespace=meta.namespace,
        name=meta.name,
        queue=spec.at("queue").string() or default_queue,
        min_member=min_member.integer(0),
        min_task_member=MappingProxyType(dict(sorted(min_task_member.items()))),
        min_resources=spec.at("minResources").resource_list(),
        priority_class_name=spec.at("priorityClassName").string(),
        phase=phase or objects.PodGroupPhase.PENDING,
        counts=objects.GroupCounts(
            running=root.at("status", "running").integer(0),
            succeeded=root.at("status", "succeeded").integer(0),
            failed=root.at("status", "failed").integer(0),
        ),
        status_written=bool(phase_text),
        conditions=read_conditions(root.at("status", "conditions").value),
        created=meta.created,
        uid=meta.uid,
        owner=owner_of(root.at("metadata", "ownerReferences").value),
    )
    sink.raise_if_any()
    return group


def owner_of(value: object) -> objects.OwnerReference | None:
    """The owner an object's ``metadata.ownerReferences`` names: its controller, else the
    first complete entry; None when there is none (an entry that misses a field is skipped,
    never an error: an owner someone else wrote badly never makes the group unreadable)."""
    if not isinstance(value, list):
        return None
    found: list[tuple[bool, objects.OwnerReference]] = []
    for entry in value:
        if not isinstance(entry, Mapping):
            continue
        fields = [entry.get(k) for k in ("apiVersion", "kind", "name", "uid")]
        if all(isinstance(field, str) and field for field in fields):
            api_version, kind, name, uid = (str(field) for field in fields)
            owner = objects.OwnerReference(api_version, kind, name, uid)
            found.append((entry.get("controller") is True, owner))
    controllers = [owner for controller, owner in found if controller]
    candidates = controllers or [owner for _, owner in found]
    return candidates[0] if candidates else None


def read_conditions(value: object) -> tuple[objects.Condition, ...]:
    """``status.conditions`` of a PodGroup, tolerantly: an entry that is not an object, or
    that has no string ``type``, is left out; a field of the wrong type reads as absent (a
    condition someone else wrote badly never makes the group unreadable)."""
    if not isinstance(value, list):
        return ()
    found: list[objects.Condition] = []
    for item in value:
        if not isinstance(item, Mapping) or not isinstance(item.get("type"), str):
            continue
        found.append(
            objects.Condition(
                type=item["type"],
                status=_text(item.get("status")),
                reason=_text(item.get("reason")),
                message=_text(item.get("message")),
                last_transition=readers.rfc3339(item.get("lastTransitionTime")),
                transition_id=_text(item.get("transitionID")),
            )
        )
    return tuple(found)


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def pod_group_problems(
    manifest: readers.RawManifest, *, name: str = ""
) -> tuple[problems.Problem, ...]:
    """Why :func:`parse_pod_group` refuses ``manifest`` (the operator then ignores the group,
    and its pods wait for a group it never sees); empty when it reads. ``name`` stands in for a
    missing ``metadata.name``, as in :func:`read_queue`."""
    named = _named(manifest, name)
    assert isinstance(named, Mapping)
    try:
        parse_pod_group(named)
    except readers.ManifestError as error:
        return error.problems
    return ()
