"""Explanations: why a pod stays gated, told once per change of reason.

The core gives, per pod it did not admit, a reason for a person (which queue or ancestor,
which resource, the figures: ``SessionResult.reasons``). The operator shows it in two places
that ``kubectl describe pod`` prints: an annotation (:data:`REASON_ANNOTATION`, always the
current reason) and an Event (reason :data:`EVENT_REASON`), each written only when the reason
changes, never every cycle. Once the pod is admitted, the annotation is removed.

A pod is explained only once it has waited :data:`EXPLAIN_AFTER`: most pods of a burst, and
the first pods of a gang whose other members are still being created, are admitted within a
second or two, and an annotation and an Event written for a wait that is over before anyone
reads them cost two API requests each (a third of the operator's requests per pod for gangs
of 4; issue 32). A pod that still waits then is told, as before; a changed reason is written
at once.

A cycle writes at most ``budget`` explanations, the oldest pods first; the rest wait for later
cycles, so a burst of thousands of new gated pods never turns into thousands of writes ahead of
gate removals, and none waits behind pods that arrived after it. The cycle writes each
annotation before its Event, which follows in a lane of its own (``writing.Writer``).

A pod that names a queue but did not opt in runs outside queue admission, and no queue counts
it (``core.governing``); the webhook never sees it, so the operator tells it, once, with one
Warning Event (reason :data:`OUTSIDE_EVENT_REASON`): :func:`plan_outside_notices`, within what
is left of the same budget once the gated pods' explanations are planned. Never an annotation:
queuetree writes nothing into a pod that did not ask to be queued.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping, Set

from queuetree.core import decisions, governing, objects
from queuetree.operator import state

REASON_ANNOTATION = objects.ADMISSION_REASON_ANNOTATION
"""Pod annotation holding why the pod is still held by the queue gate."""
EVENT_REASON = "QueueAdmissionPending"
UNREADABLE = (
    "queuetree cannot read this pod, so no queue admits it and it keeps its gate: {problem}; "
    "create it again with a manifest queuetree reads, or remove the gate "
    "scheduling.volcano.sh/queue-allocation-gate to run it outside queue admission"
)
"""The explanation of a gated pod the operator cannot read (``StateView.unreadable``)."""
EXPLAIN_AFTER = datetime.timedelta(seconds=3)
"""How long a held pod waits, from its creation, before it is first explained. Counted from
``metadata.creationTimestamp``, which has whole seconds, so a pod is told after 2 to 3 s of
waiting (the next cycle: ``--schedule-period`` at the latest); in the benchmark's gangs (100
groups of 4 on the loaded 2-core machine) the pods explained were admitted 2.5 to 3.8 s after
their creation."""
OUTSIDE_EVENT_REASON = "OutsideQueueAdmission"
"""The reason of the Event telling a pod that names a queue that it runs outside it."""
_EVENT_NAME_LIMIT = 253


@dataclasses.dataclass(frozen=True, slots=True)
class Explanation:
    """Write ``reason`` for pod ``key``; an empty reason removes the annotation."""

    key: str
    reason: str
    uid: str = ""
    """The pod's uid: ``kubectl describe pod`` selects events by ``involvedObject.uid``."""


def plan_explanations(
    view: state.StateView,
    result: decisions.SessionResult,
    explained: Mapping[str, str],
    *,
    budget: int,
    now: datetime.datetime | None = None,
) -> list[Explanation]:
    """Explanations whose text differs from what was last written, at most ``budget``, oldest
    pod first (creation time, then key).

    A held pod not explained yet is left for a later cycle while it is younger than
    :data:`EXPLAIN_AFTER` at ``now`` (None: no pod is too young).

    Pods held by our gate (and not just admitted) get the core's reason; a pod with no reason
    from the core gets none written. Gated pods the operator cannot read
    (``StateView.unreadable``) come first, told why (:data:`UNREADABLE`), then gated pods whose
    DRA devices cannot be charged yet (``StateView.device_waits``). Pods that were
    explained and are no longer held get their annotation removed, except pods just admitted
    (assumed): their gate removal takes the annotation with it
    (``writing.build_gate_removal_patch``), or, when the cache did not show the annotation
    yet, the record stays and a later cycle removes it.
    """
    planned: list[Explanation] = []
    for key in sorted(view.unreadable):
        uid, problem = view.unreadable[key]
        reason = UNREADABLE.format(problem=problem)
        if len(planned) < budget and reason != explained.get(key, ""):
            planned.append(Explanation(key=key, reason=reason, uid=uid))
    for key in sorted(view.device_waits):
        uid, why = view.device_waits[key]
        if len(planned) < budget and why != explained.get(key, ""):
            planned.append(Explanation(key=key, reason=why, uid=uid))
    pods = view.snapshot.pods
    # Only pods with our gate or with an explanation can need a write: not every pod.
    found = [
        (pod.created, key, pod)
        for key in view.gated | explained.keys()
        if (pod := pods.get(key)) is not None
    ]
    found.sort()  # keys are distinct: no two entries get as far as comparing pods
    born_after = None if now is None else now - EXPLAIN_AFTER
    for _, key, pod in found:
        if len(planned) >= budget:
            break
        held = pod.queue_gated and key not in view.assumed
        previous = explained.get(key, "")
        if held:
            reason = result.reasons.get(key, "")
            if not previous and born_after is not None and pod.created > born_after:
                continue  # too young to be told: most such waits end within a cycle or two
            if reason and reason != previous:
                planned.append(Explanation(key=key, reason=reason, uid=pod.uid))
        elif previous and key not in view.assumed:
            planned.append(Explanation(key=key, reason="", uid=pod.uid))
    return planned


def notice_token(key: str, uid: str) -> str:
    """What identifies the notice of pod ``key``: its ``uid`` (a pod created again under the
    same name is another pod), else its key."""
    return uid or key


def notice_event_name(notice: Explanation) -> str:
    """The name of the Event of a notice, the same for every operator that sends it (the API
    server refuses the second with 409: told once, across restarts and leaders, for as long
    as Events live)."""
    token = notice_token(notice.key, notice.uid)
    suffix = f".{token.replace('/', '.')}.outside-queue-admission"
    name = notice.key.partition("/")[2]
    return name[: _EVENT_NAME_LIMIT - len(suffix)] + suffix


def plan_outside_notices(
    view: state.StateView, told: Set[str], *, budget: int
) -> list[Explanation]:
    """The notices still to send, at most ``budget``, oldest pod first (creation time, then
    key): each pod of ``view.outside`` (it names a queue, did not opt in, and has not finished)
    whose :func:`notice_token` is not in ``told`` gets one, saying that no queue counts it and
    how to queue it (``governing.outside_message``)."""
    if budget <= 0:
        return []
    waiting = sorted(
        (pod.created, key, pod)
        for key, pod in view.outside.items()
        if notice_token(key, pod.uid) not in told
    )
    planned = []
    for _, key, pod in waiting[:budget]:
        named = governing.named_queue(pod, view.pod_groups)
        planned.append(
            Explanation(key=key, reason=governing.outside_message(key, named), uid=pod.uid)
        )
    return planned
