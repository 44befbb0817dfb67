"""Reports on pods: the pending order of queues, why one pod waits, what a change would do.

Every figure comes from the operator's own session over the cluster (``SessionResult``:
``order`` for positions, ``reasons`` and ``remedies`` for why and what would have to change,
``ungate`` for what the next cycle admits); these functions only arrange it for a person.
Tables cut their cells at the console's width; explanations wrap, because their sentences are
the point.
"""

from __future__ import annotations

import dataclasses
import io
import textwrap
from collections.abc import Iterable, Mapping

import rich.console
import rich.table
import rich.text
import rich.tree

from queuetree.api import listings
from queuetree.core import decisions, governing, objects, resources
from queuetree.views import trees

ADMIT_NEXT = "admitted by the next cycle: its queue and every ancestor have room"


@dataclasses.dataclass(frozen=True, slots=True)
class Position:
    queue: str
    position: int
    """1 for the first pod the queue considers."""
    total: int


def positions(result: decisions.SessionResult) -> dict[str, Position]:
    """Pod key -> where it stands in its queue's admission order."""
    found: dict[str, Position] = {}
    for queue, keys in result.order.items():
        for index, key in enumerate(keys, start=1):
            found[key] = Position(queue=queue, position=index, total=len(keys))
    return found


def subtree(listing: listings.Listing, top: str) -> list[str]:
    """``top`` and every queue below it, parents first, children by name."""
    children = trees.children_of(listing)
    order, stack, seen = [], [top], set()
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        order.append(name)
        stack.extend(sorted(children.get(name, []), reverse=True))
    return order


def requests(pod: objects.Pod) -> str:
    """``cpu 2, mem 4Gi, gpu 1``: the resources the pod asks for, short."""
    parts = []
    for name in (
        *trees.PREFERRED,
        *sorted(set(pod.resreq.resource_names()) - set(trees.PREFERRED)),
    ):
        if name == resources.PODS or name not in pod.resreq.resource_names():
            continue
        amount = pod.resreq.get(name)
        if amount:
            label = trees.SHORT.get(name, name.rsplit("/", 1)[-1])
            parts.append(f"{label} {trees.format_amount(name, float(amount))}")
    return ", ".join(parts) or "nothing (best effort)"


def _verdict(key: str, result: decisions.SessionResult) -> str:
    if key in result.ungate:
        return "admitted next"
    return result.briefs.get(key) or result.reasons.get(key, "waiting (no reason recorded)")


def pending_table(
    listing: listings.Listing, result: decisions.SessionResult, *, queue: str | None
) -> rich.table.Table | None:
    """The pods waiting behind the gate, queue by queue in admission order; None when none
    wait in ``queue``'s subtree (or anywhere, without a queue)."""
    names = subtree(listing, queue) if queue is not None else sorted(result.order)
    table = rich.table.Table(box=None, pad_edge=False, padding=(0, 1, 0, 0), expand=True)
    for header, ratio, width in (
        ("QUEUE", None, None),
        ("POS", None, None),
        ("POD", None, None),
        ("WORKLOAD", None, None),
        ("REQUESTS", None, None),
        ("NEXT", 1, None),  # takes what the others leave
    ):
        table.add_column(header, no_wrap=True, overflow="ellipsis", ratio=ratio, width=width)
    rows = 0
    for name in names:
        for index, key in enumerate(result.order.get(name, ()), start=1):
            pod = listing.pods.get(key)
            table.add_row(
                name if index == 1 else "",
                f"{index}/{len(result.order[name])}",
                key,
                workload_of(pod, listing) if pod is not None else "",
                requests(pod) if pod is not None else "",
                _verdict(key, result),
            )
            rows += 1
    return table if rows else None


def workload_of(pod: objects.Pod, listing: listings.Listing) -> str:
    """What the pod's group is for: its owner as ``Kind/name`` (a Job, a PyTorchJob), else
    ``PodGroup/name`` for a group of its own, else "" (a lone pod)."""
    group = listing.pod_groups.get(pod.group)
    if group is None:
        return ""
    if group.owner is not None:
        return f"{group.owner.kind}/{group.owner.name}"
    return f"PodGroup/{group.name}"


def _wrap(label: str, text: str, width: int) -> list[str]:
    lead = f"  {label:<11} "
    return textwrap.wrap(
        text, width=width, initial_indent=lead, subsequent_indent=" " * len(lead)
    ) or [lead]


def explain_pod(
    key: str,
    *,
    listing: listings.Listing,
    result: decisions.SessionResult,
    default_queue: str,
    width: int = trees.WIDTH,
) -> list[str]:
    """Why pod ``key`` waits (or that it does not), in lines at most ``width`` wide; for a pod
    outside queue admission, that no queue counts it and how to queue it."""
    pod = listing.pods[key]
    group = pod.group if pod.names_group else "none (a lone pod)"
    if not pod.governed:
        status = governing.outside_message(key, governing.named_queue(pod, listing.pod_groups))
        return [
            f"Pod {key}",
            *_wrap("queue", "none: it runs outside queue admission", width),
            *_wrap("pod group", group, width),
            *_wrap("status", status, width),
        ]
    queue = listings.queue_of(pod, listing, default_queue=default_queue)
    lines = [f"Pod {key}", *_wrap("queue", queue, width), *_wrap("pod group", group, width)]
    stage = trees.stage_of(pod)
    where = positions(result).get(key)
    if stage == "gated":
        if where is not None:
            lines += _wrap(
                "position",
                f"{where.position} of {where.total} in the admission order of queue "
                f"{where.queue!r}" + (" (the first it considers)" if where.position == 1 else ""),
                width,
            )
        if key in result.ungate:
            lines += _wrap("status", ADMIT_NEXT, width)
        else:
            lines += _wrap("waits", result.reasons.get(key, "no reason recorded"), width)
            remedy = result.remedies.get(key)
            if remedy:
                lines += _wrap("to admit", remedy, width)
            written = pod.annotations.get(objects.ADMISSION_REASON_ANNOTATION)
            if written and written != result.reasons.get(key):
                lines += _wrap("operator", f"last wrote: {written}", width)
    elif stage == "admitted":
        lines += _wrap(
            "status",
            f"admitted to queue {pod.admitted_queue or queue!r}, not placed yet: it reserves "
            "its requests there until kube-scheduler binds it (kubectl describe pod says why "
            "not yet)"
            + ("; kube-scheduler found no node (Unschedulable)" if pod.unschedulable else ""),
            width,
        )
        if key in result.reasons:
            lines += _wrap("reclaim", result.reasons[key], width)
    elif stage == "running":
        lines += _wrap("status", f"running on {pod.node_name}: nothing holds it", width)
    else:
        lines += _wrap("status", f"finished ({pod.status}): it holds nothing", width)
    return lines


def outside_of(keys: Iterable[str], listing: listings.Listing) -> dict[str, str]:
    """Pod key -> why no queue counts it, for the pods of ``keys`` in ``listing`` that are not
    governed by queue admission (they did not opt in)."""
    found: dict[str, str] = {}
    for key in keys:
        pod = listing.pods.get(key)
        if pod is not None and not pod.governed:
            found[key] = governing.outside_message(
                key, governing.named_queue(pod, listing.pod_groups)
            )
    return found


def explain_group(
    key: str,
    *,
    listing: listings.Listing,
    result: decisions.SessionResult,
    default_queue: str,
    width: int = trees.WIDTH,
) -> str:
    """A pod group, its phase and each of its pods explained, as a rich Tree in text."""
    group = listing.pod_groups[key]
    phase = result.pod_groups.get(key, group.phase)
    root = rich.tree.Tree(
        f"PodGroup {key}: queue {group.queue!r}, minMember {group.min_member}, phase {phase}"
    )
    members = sorted(k for k, pod in listing.pods.items() if pod.group == key)
    if not members:
        wanted = result.group_conditions.get(key)
        root.add(
            f"no pods yet: {wanted.message}"
            if wanted is not None
            else "no pods yet: the group's pods wait for it, and it for them"
        )
    elif not any(listing.pods[member].governed for member in members):
        root.add(
            "none of its pods opted in to queue admission: they run outside it, and the group "
            f"holds nothing in queue {group.queue!r} (it stays Pending, counting no pod)"
        )
    for member in members:
        lines = explain_pod(
            member, listing=listing, result=result, default_queue=default_queue, width=width - 4
        )
        branch = root.add(lines[0])
        for line in lines[3:]:  # queue and group are the group's
            branch.add(line.strip())
    return to_text(root, width=width)


def to_text(renderable: rich.console.RenderableType, *, width: int = trees.WIDTH) -> str:
    buffer = io.StringIO()
    out = rich.console.Console(
        width=width, file=buffer, soft_wrap=False, highlight=False, color_system=None
    )
    out.print(renderable)
    return "\n".join(line.rstrip() for line in buffer.getvalue().splitlines()) + "\n"


@dataclasses.dataclass(frozen=True, slots=True)
class WhatIf:
    """What the changes would do, against what the cluster does without them."""

    admitted: Mapping[str, str]
    """Pod key -> where it would go: its queue, and the node placement found, if any."""
    waiting: Mapping[str, str]
    """Pod key -> why it would wait."""
    evicted: Mapping[str, str]
    """Victim pod key -> for whom and by which rule."""
    refused: Mapping[str, str]
    """Object -> why the webhook would refuse it."""
    outside: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Pod key -> why no queue would count it (it did not opt in: it would run at once)."""
    unchanged: int = 0
    """Pods behind the gate whose outcome the changes do not alter."""


def what_if(
    *,
    changed: Iterable[str],
    before: decisions.SessionResult,
    after: decisions.SessionResult,
    placed: decisions.SessionResult,
    refused: Mapping[str, str],
    outside: Mapping[str, str] | None = None,
) -> WhatIf:
    """Compare the operator's decision with the changes (``after``, then ``placed``: the full
    session once ``after``'s admissions lost their gate) and without them (``before``).
    Listed: the pods of ``changed`` and every pod whose outcome differs; the pods of ``changed``
    that would run outside queue admission (``outside``: key -> why) are listed apart."""
    outside = dict(outside or {})
    new = set(changed) - outside.keys()
    admitted: dict[str, str] = {}
    waiting: dict[str, str] = {}
    gated = {key for keys in after.order.values() for key in keys}
    unchanged = 0
    for key in sorted(gated | new):
        if key in after.ungate:
            outcome = ("admit", "")
        else:
            outcome = ("wait", after.reasons.get(key, "no reason recorded"))
        old = ("admit", "") if key in before.ungate else ("wait", before.reasons.get(key, ""))
        if key not in new and outcome[0] == old[0]:  # a new reason alone is no new outcome
            unchanged += 1
            continue
        if outcome[0] == "admit":
            node = placed.bind.get(key) or placed.pipeline.get(key)
            queue = after.admitted_to.get(key, "")
            admitted[key] = f"queue {queue!r}" + (
                f", kube-scheduler can place it on {node}"
                if node
                else "; no node has room for it now: "
                + placed.reasons.get(key, "reclaim found nothing to evict")
            )
        else:
            waiting[key] = outcome[1]
    evicted = {
        e.victim: f"queue {e.victim_queue!r}, for {e.reclaimer} ({e.rule}): {e.reason}"
        for e in (*after.evictions, *placed.evictions)
    }
    before_evicted = {e.victim for e in (*before.evictions,)}
    return WhatIf(
        admitted=admitted,
        waiting=waiting,
        evicted={k: v for k, v in evicted.items() if k not in before_evicted},
        refused=dict(refused),
        outside=outside,
        unchanged=unchanged,
    )


def what_if_lines(report: WhatIf, *, width: int = trees.WIDTH) -> list[str]:
    lines: list[str] = []
    for title, entries in (
        ("Refused by the webhook", report.refused),
        ("Admitted", report.admitted),
        ("Waiting", report.waiting),
        ("Evicted", report.evicted),
        ("Outside queue admission", report.outside),
    ):
        if title == "Outside queue admission" and not entries:
            continue  # the usual case: every pod submitted opted in
        lines.append(f"{title} ({len(entries)}):")
        for key, text in entries.items():
            lines += textwrap.wrap(
                f"{key}: {text}", width=width, initial_indent="  ", subsequent_indent="      "
            )
    lines.append(f"Unchanged: {report.unchanged} other pods behind the gate")
    return lines


def text_lines(*lines: str, width: int = trees.WIDTH) -> str:
    """Lines cut at ``width`` with an ellipsis (no wrapping)."""
    return to_text(rich.text.Text("\n".join(lines), no_wrap=True, overflow="ellipsis"), width=width)
