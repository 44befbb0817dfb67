"""The queue tree as a table: state, condition, figures with bars, and pod counts per queue.

One queue takes one row per resource shown (cpu, memory, GPUs and any other resource a queue
names): the first row carries the queue's name (indented under its parent), state, the reason
of its Ready condition and the pods of its subtree, **gated** (behind the queue gate),
**admitted** (gate removed, no node yet: they reserve room) and **running** (on a node); only
pods governed by queue admission are counted (``objects.Pod.governed``), and a queue that pods
name without opting in gets a note under the tree saying how many run outside it. Per
resource: used (allocated, ``+reserved`` when something is reserved), deserved and capability
(``realCapability`` as the operator last computed it, else ``spec.capability``; ``-`` unset),
and a bar of used against capability (``█`` allocated, ``▒`` reserved, ``|`` the deserved
share). Cells never wrap: at the console's width (80 columns by default) they are cut with an
ellipsis, so the tree stays one line per row.

:func:`build_rows` is pure and tested as a table; :func:`render` makes the rich Table.
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Mapping

import rich.box
import rich.console
import rich.table
import rich.text

from queuetree.api import listings, statuses
from queuetree.core import governing, objects, quantities, resources

WIDTH = 80
BAR = 8
"""Characters of a bar."""
PREFERRED = (resources.CPU, resources.MEMORY, "nvidia.com/gpu")
SHORT = {resources.MEMORY: "mem", "nvidia.com/gpu": "gpu"}
"""Resource labels that fit the column (others show their last path segment)."""
STAGES = ("gated", "admitted", "running")


@dataclasses.dataclass(frozen=True, slots=True)
class Figure:
    """One resource of one queue, in the resource's own units (cores, bytes, GPUs)."""

    resource: str
    allocated: float
    reserved: float
    deserved: float | None
    capability: float | None


@dataclasses.dataclass(frozen=True, slots=True)
class Row:
    """One queue of the tree, as drawn."""

    name: str
    label: str
    """The name under its tree guides (``├ team-a``)."""
    state: str
    condition: str
    ready: bool
    figures: tuple[Figure, ...]
    counts: Mapping[str, int]
    message: str = ""
    """The condition's message, for a queue that is not ready."""
    outside: int = 0
    """Unfinished pods that name this queue (``governing.named_queue``) without opting in: they
    run outside queue admission, and nothing in the row counts them."""


def stage_of(pod: objects.Pod) -> str:
    """``gated``, ``admitted``, ``running``, or "" for a finished pod."""
    if pod.status in (objects.TaskStatus.SUCCEEDED, objects.TaskStatus.FAILED):
        return ""
    if objects.QUEUE_ALLOCATION_GATE in pod.scheduling_gates:
        return "gated"
    if pod.node_name:
        return "running"
    return "admitted"


def build_rows(
    listing: listings.Listing, *, default_queue: str = objects.DEFAULT_QUEUE
) -> list[Row]:
    """Every queue connected to root, depth first, children by name; then, under a last
    pseudo-level, the queues that hang off a missing parent or a cycle (their condition
    says why)."""
    queues = listing.queues
    children = children_of(listing)
    own: dict[str, dict[str, int]] = {}
    outside: dict[str, int] = {}
    for pod in listing.pods.values():
        stage = stage_of(pod)
        if not stage:
            continue
        if not pod.governed:
            named = governing.named_queue(pod, listing.pod_groups)
            if named is not None:
                outside[named.queue] = outside.get(named.queue, 0) + 1
            continue
        counts = own.setdefault(listings.queue_of(pod, listing, default_queue=default_queue), {})
        counts[stage] = counts.get(stage, 0) + 1
    shown = _resources(listing)
    order: list[tuple[str, str]] = []
    seen: set[str] = set()
    # Depth first without recursion: a tree of any depth renders.
    stack: list[tuple[str, str, bool, bool]] = []
    if objects.ROOT_QUEUE in queues:
        stack.append((objects.ROOT_QUEUE, "", True, True))
    orphans = sorted(name for name in queues if name != objects.ROOT_QUEUE)
    while stack or orphans:
        if not stack:
            # Not reached from root (missing parent, cycle): shown flat, at the end.
            name = orphans.pop(0)
            if name not in seen:
                stack.append((name, "", True, True))
            continue
        name, prefix, last, top = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        # Two characters a level: deep trees keep room for their names.
        order.append((name, name if top else f"{prefix}{'└ ' if last else '├ '}{name}"))
        kids = sorted(k for k in children.get(name, []) if k not in seen)
        deeper = "" if top else prefix + ("  " if last else "│ ")
        stack.extend(
            (kid, deeper, index == len(kids) - 1, False)
            for index, kid in reversed(list(enumerate(kids)))
        )
    subtree = _subtree_counts([name for name, _ in order], children, own)
    rows = []
    for name, label in order:
        status = listing.statuses.get(name)
        queue = queues[name]
        condition = status.condition if status is not None else None
        rows.append(
            Row(
                name=name,
                label=label,
                state=(status.state if status is not None and status.state else "?"),
                condition=condition.reason if condition is not None else "-",
                ready=condition is None or condition.ready,
                figures=tuple(_figure(queue, status, resource) for resource in shown),
                counts=subtree[name],
                message=condition.message if condition is not None and not condition.ready else "",
                outside=outside.get(name, 0),
            )
        )
    return rows


def children_of(listing: listings.Listing) -> dict[str, list[str]]:
    """Queue -> the queues whose effective parent it is, in name order."""
    children: dict[str, list[str]] = {}
    for name, queue in listing.queues.items():
        if name != objects.ROOT_QUEUE:
            children.setdefault(queue.parent_name, []).append(name)
    return children


def _subtree_counts(
    order: list[str], children: Mapping[str, list[str]], own: Mapping[str, Mapping[str, int]]
) -> dict[str, dict[str, int]]:
    result: dict[str, dict[str, int]] = {}
    for name in reversed(order):  # children are listed after their parent
        counts = {stage: own.get(name, {}).get(stage, 0) for stage in STAGES}
        for kid in children.get(name, []):
            if kid in result and kid != name:
                for stage in STAGES:
                    counts[stage] += result[kid][stage]
        result[name] = counts
    return result


def _resources(listing: listings.Listing) -> list[str]:
    seen: set[str] = set()
    for name, queue in listing.queues.items():
        status = listing.statuses.get(name)
        for figure in (
            queue.deserved,
            queue.capability,
            *((status.allocated, status.reserved, status.deserved) if status is not None else ()),
        ):
            if figure is not None:
                seen.update(n for n in figure.resource_names() if not figure.is_zero(n))
    seen.discard(resources.PODS)
    seen.update((resources.CPU, resources.MEMORY))
    return [r for r in PREFERRED if r in seen] + sorted(seen - set(PREFERRED))


def _figure(queue: objects.Queue, status: statuses.QueueStatus | None, resource: str) -> Figure:
    allocated = status.allocated.get(resource) if status is not None else 0
    reserved = status.reserved.get(resource) if status is not None else 0
    deserved_vec = (
        status.deserved
        if status is not None and status.deserved.resource_names()
        else queue.deserved
    )
    capability_vec = (
        status.real_capability
        if status is not None and status.real_capability is not None
        else queue.capability
    )
    return Figure(
        resource=resource,
        allocated=float(allocated),
        reserved=float(reserved),
        deserved=_present(deserved_vec, resource),
        capability=_present(capability_vec, resource),
    )


def _present(vector: resources.Resource | None, resource: str) -> float | None:
    if vector is None or resource not in vector.resource_names():
        return None
    return float(vector.get(resource))


def format_amount(resource: str, amount: float | None) -> str:
    """A figure in canonical Kubernetes form (``1500m``, ``18Gi``, ``2``); ``-`` for None."""
    if amount is None:
        return "-"
    if resource == resources.MEMORY:
        return quantities.format_bytes(round(amount))
    if resource == resources.PODS:
        return str(round(amount))
    return quantities.format_milli(round(amount))


def bar(figure: Figure, width: int = BAR) -> str:
    """Used against capability: ``█`` allocated, ``▒`` reserved, ``|`` where deserved ends,
    ``·`` free; "" without a capability to compare with."""
    capability = figure.capability
    if not capability:
        return ""

    def cells(value: float) -> int:
        return min(width, round(width * value / capability))

    allocated = cells(figure.allocated)
    used = max(allocated, cells(figure.allocated + figure.reserved))
    chars = ["█"] * allocated + ["▒"] * (used - allocated) + ["·"] * (width - used)
    if figure.deserved is not None and 0 < figure.deserved < capability:
        mark = min(width - 1, cells(figure.deserved))
        if chars[mark] == "·":
            chars[mark] = "|"
    return "".join(chars)


def _used(figure: Figure) -> str:
    text = format_amount(figure.resource, figure.allocated)
    if figure.reserved:
        text += "+" + format_amount(figure.resource, figure.reserved)
    return text


COLUMNS = (
    ("STATE", "left", 6),
    ("READY", "left", 10),
    ("RES", "left", 3),
    ("USED", "right", 6),
    ("DESERV", "right", 6),
    ("CAP", "right", 6),
    ("", "left", BAR),
    ("GAT", "right", 3),
    ("ADM", "right", 3),
    ("RUN", "right", 3),
)
"""Every column but QUEUE, with its width: QUEUE takes what is left (16 of 80 columns)."""


def render(rows: list[Row]) -> rich.table.Table:
    """The tree as a rich Table whose cells never wrap (see the module docstring)."""
    table = rich.table.Table(box=None, pad_edge=False, padding=(0, 1, 0, 0), expand=True)
    table.add_column("QUEUE", no_wrap=True, overflow="ellipsis", ratio=1, min_width=8)
    for header, justify, width in COLUMNS:
        table.add_column(
            header,
            justify=justify,  # type: ignore[arg-type]
            no_wrap=True,
            overflow="ellipsis",
            width=width,
        )
    for row in rows:
        for index, figure in enumerate(row.figures):
            first = index == 0
            condition = rich.text.Text(row.condition if first else "")
            if first and not row.ready:
                condition.stylize("bold red")
            table.add_row(
                row.label if first else "",
                row.state if first else "",
                condition,
                SHORT.get(figure.resource, figure.resource.rsplit("/", 1)[-1]),
                _used(figure),
                format_amount(figure.resource, figure.deserved),
                format_amount(figure.resource, figure.capability),
                bar(figure),
                *(str(row.counts.get(stage, 0)) if first else "" for stage in STAGES),
            )
    return table


def notes(rows: list[Row]) -> list[str]:
    """One line per queue that is not ready (its condition's message), then one per queue that
    pods name without opting in."""
    lines = [f"{row.name}: {row.condition}: {row.message}" for row in rows if not row.ready]
    for row in rows:
        if row.outside:
            pods = "1 pod names it" if row.outside == 1 else f"{row.outside} pods name it"
            lines.append(
                f"{row.name}: {pods} without opting in: outside queue admission, not counted "
                "(kubectl queuetree explain POD)"
            )
    return lines


def to_text(
    listing: listings.Listing, *, width: int = WIDTH, default_queue: str = objects.DEFAULT_QUEUE
) -> str:
    """The tree and its notes as plain text ``width`` columns wide (what a pipe receives)."""
    rows = build_rows(listing, default_queue=default_queue)
    buffer = io.StringIO()
    out = rich.console.Console(
        width=width, file=buffer, soft_wrap=False, highlight=False, color_system=None
    )
    out.print(render(rows))
    for line in notes(rows):
        out.print(rich.text.Text(line, no_wrap=True, overflow="ellipsis"))
    return "\n".join(line.rstrip() for line in buffer.getvalue().splitlines()) + "\n"
