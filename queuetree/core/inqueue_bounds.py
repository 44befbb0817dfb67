"""The time bound of an Inqueue reservation: when a PodGroup that has no pod gives its room back.

Volcano's enqueue moves a PodGroup to Inqueue once its ``minResources`` fit its queue, before
any pod exists: controllers such as Volcano's job controller and the Kubeflow training operator
create pods only then. From then on the queue (and every ancestor) counts the group's
``minResources`` as ``inqueue``, which keeps later groups and lone pods from taking that room
(spec §3.2, §3.7). Volcano holds it for as long as the group is Inqueue: a controller that never
creates the pods (it is gone, or a namespace ResourceQuota refuses them) holds its queue's room
for ever.

queuetree bounds it (``--inqueue-timeout``, :class:`InqueueBound`):

* **Release.** A real PodGroup with ``minResources`` that has been Inqueue for the bound and
  has no pod that is not finished goes back to Pending at session open (:func:`expired`): its
  room is counted nowhere, and the session does not enqueue it again. Its admission condition
  says so (``conditions.GroupReason.INQUEUE_TIMEOUT``), with the time of the release.
* **Yield, then take its turn again.** For one more bound after its release, while it still has
  no pod, the group is enqueued only after every other pending group of the session
  (:func:`yielding`): it takes the room no waiting work wants, so the release gives the room
  to whoever waited for it and costs the group nothing when nobody did. Once that window is
  over it waits in its usual place (priority, then creation time), so work that arrives later
  never starves a slow controller: when room comes back, an older group gets it first, and
  its controller gets another bound to create pods. A group whose pods arrive is enqueued
  and admitted as any other, its gang as a whole.

The times are the PodGroup's own: its admission condition's ``lastTransitionTime``, written by
the operator when the group enters Inqueue or is released. A group Inqueue without that
condition (enqueued before queuetree wrote one) is never released until the operator has
written it, which it does in the next cycle. Pure: ``now`` comes from the caller.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterable

from queuetree.core import conditions, objects


@dataclasses.dataclass(frozen=True, slots=True)
class InqueueBound:
    """How long an Inqueue PodGroup without pods holds its queue's room, as of ``now``."""

    timeout: datetime.timedelta
    """More than zero (no bound is no :class:`InqueueBound` at all)."""
    now: datetime.datetime
    """Timezone-aware, as the times of conditions are."""


def admission_condition(group: objects.PodGroup) -> objects.Condition | None:
    """The group's admission condition (type ``conditions.GROUP_CONDITION``), if written."""
    for condition in group.conditions:
        if condition.type == conditions.GROUP_CONDITION:
            return condition
    return None


def _since(group: objects.PodGroup, status: str, reason: str) -> datetime.datetime | None:
    """When the group's admission condition last took this status and reason; None if it has
    another (or none)."""
    found = admission_condition(group)
    if found is not None and found.status == status and found.reason == reason:
        return found.last_transition
    return None


def inqueue_since(group: objects.PodGroup) -> datetime.datetime | None:
    """When the group last entered Inqueue, as its condition records it; None if it does not."""
    return _since(group, "False", conditions.GroupReason.INQUEUE)


def released_at(group: objects.PodGroup) -> datetime.datetime | None:
    """When the group was last released for lack of pods, as its condition records it."""
    return _since(group, "True", conditions.GroupReason.INQUEUE_TIMEOUT)


def holds_room(group: objects.PodGroup) -> bool:
    """The group's ``minResources`` name some amount: only such a group holds room that a
    bound gives back (a group without them holds nothing while Inqueue)."""
    minimum = group.min_resources
    return minimum is not None and not minimum.is_empty()


def expired(group: objects.PodGroup, *, bound: InqueueBound) -> bool:
    """The group (a real one, with no unfinished pod: the caller's check) has been Inqueue for
    at least the bound and holds room: it is released."""
    if group.phase is not objects.PodGroupPhase.INQUEUE or group.synthetic:
        return False
    since = inqueue_since(group)
    return since is not None and holds_room(group) and bound.now - since >= bound.timeout


def yielding(group: objects.PodGroup, *, bound: InqueueBound) -> bool:
    """The group (Pending, with no unfinished pod: the caller's check) was released less than
    a bound ago: it is enqueued only after every other pending group."""
    if group.phase is not objects.PodGroupPhase.PENDING:
        return False
    released = released_at(group)
    return released is not None and bound.now - released < bound.timeout


def due(groups: Iterable[objects.PodGroup], *, bound: InqueueBound) -> frozenset[str]:
    """The keys of the Pending and Inqueue groups whose bound, or whose window after a release,
    has run out at ``bound.now``: what changes a session's decisions with time alone (the
    operator reuses its last decisions while the state and this set stay the same)."""
    found: set[str] = set()
    for group in groups:
        if not group.conditions or group.synthetic:
            continue
        mark = (
            inqueue_since(group)
            if group.phase is objects.PodGroupPhase.INQUEUE
            else released_at(group)
            if group.phase is objects.PodGroupPhase.PENDING
            else None
        )
        if mark is not None and bound.now - mark >= bound.timeout:
            found.add(group.key)
    return frozenset(found)


def describe_timeout(timeout: datetime.timedelta) -> str:
    """``5m``, ``90s``, ``1h30m``: the bound as a person writes it."""
    seconds = timeout.total_seconds()
    if seconds != int(seconds):
        return f"{seconds:g}s"
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [
        f"{hours}h" if hours else "",
        f"{minutes}m" if minutes else "",
        f"{secs}s" if secs else "",
    ]
    return "".join(parts) or "0s"
