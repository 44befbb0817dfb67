"""The live view: the queue tree with its figures and pod stages, redrawn in place.

:func:`render` is pure (an observation in, lines of text out) so it is tested as a table;
:func:`live` reads the cluster every ``refresh`` seconds and redraws until interrupted.

Per queue and resource it shows ``allocated+reserved/deserved/capability`` (``-`` when unset;
capability falls back to ``realCapability``), and per queue the pods of its subtree in each
stage: gated, admitted (ungated, not placed), running, succeeded, evicted.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TextIO

from queuetree.core import objects
from queuetree.sandbox import kubectl, observing

STAGE_COLUMNS = ("gated", "admitted", "running", "succeeded", "evicted")
PREFERRED = ("cpu", "memory", "nvidia.com/gpu")
CLEAR = "\x1b[H\x1b[2J"


def render(observation: observing.Observation, *, header: str = "") -> list[str]:
    """The table: one line per queue, depth-first from root, children sorted by name."""
    queues = observation.queues
    children: dict[str, list[str]] = {}
    for name, queue in queues.items():
        if name == objects.ROOT_QUEUE:
            continue
        parent = (queue.get("spec") or {}).get("parent") or objects.ROOT_QUEUE
        children.setdefault(parent if parent in queues else objects.ROOT_QUEUE, []).append(name)
    resources = _resources(queues)
    counts = _subtree_counts(observation, children)
    rows: list[tuple[str, ...]] = []
    # Depth first without recursion: a tree of any depth renders (the operator, not the view,
    # is what refuses trees that are too deep).
    stack: list[tuple[str, str, bool, bool]] = []
    if objects.ROOT_QUEUE in queues:
        stack.append((objects.ROOT_QUEUE, "", True, True))
    while stack:
        name, prefix, last, top = stack.pop()
        label = name if top else f"{prefix}{'└─ ' if last else '├─ '}{name}"
        status = queues[name].get("status") or {}
        stage = counts.get(name, {})
        rows.append(
            (
                label,
                str(status.get("state", "?")),
                *(_figure(queues[name], resource) for resource in resources),
                *(str(stage.get(column, 0)) for column in STAGE_COLUMNS),
            )
        )
        kids = sorted(children.get(name, []))
        deeper = "" if top else prefix + ("   " if last else "│  ")
        stack.extend(
            (kid, deeper, index == len(kids) - 1, False)
            for index, kid in reversed(list(enumerate(kids)))
        )
    header_row = (
        "QUEUE",
        "STATE",
        *(f"{r} alloc+resv/deserved/cap" for r in resources),
        *(c.upper() for c in STAGE_COLUMNS),
    )
    widths = [max(len(row[i]) for row in [header_row, *rows]) for i in range(len(header_row))]
    lines = [header] if header else []
    for row in [header_row, *rows]:
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))
    totals = observing.stage_counts(observation)
    lines.append("")
    lines.append("pods: " + ", ".join(f"{totals[stage]} {stage}" for stage in observing.STAGES))
    return [line.rstrip() for line in lines]


def _resources(queues: Mapping[str, Mapping[str, Any]]) -> list[str]:
    seen: set[str] = set()
    for queue in queues.values():
        spec, status = queue.get("spec") or {}, queue.get("status") or {}
        for figures in (
            spec.get("deserved"),
            spec.get("capability"),
            status.get("allocated"),
            status.get("reserved"),
        ):
            seen.update((figures or {}).keys())
    seen.discard("pods")
    return [r for r in PREFERRED if r in seen] + sorted(seen - set(PREFERRED))


def _figure(queue: Mapping[str, Any], resource: str) -> str:
    spec, status = queue.get("spec") or {}, queue.get("status") or {}
    allocated = (status.get("allocated") or {}).get(resource)
    reserved = (status.get("reserved") or {}).get(resource)
    deserved = (spec.get("deserved") or {}).get(resource) or (status.get("deserved") or {}).get(
        resource
    )
    capability = (spec.get("capability") or {}).get(resource)
    used = str(allocated or 0)
    if reserved and observing.milli(reserved) != 0:
        used += f"+{reserved}"
    return f"{used}/{deserved or '-'}/{capability or '-'}"


def _subtree_counts(
    observation: observing.Observation, children: Mapping[str, list[str]]
) -> dict[str, dict[str, int]]:
    own: dict[str, dict[str, dict[str, Any]]] = {}
    for key, pod in observation.pods.items():
        queue = observing.queue_of(pod, observation.pod_groups)
        own.setdefault(queue, {})[key] = pod
    # Evicted pods are gone: their queue is the one the eviction event names.
    gone: dict[str, int] = {}
    for key, message in observation.evicted.items():
        if key not in observation.pods:
            queue = observing.evicted_from(message)
            gone[queue] = gone.get(queue, 0) + 1
    result: dict[str, dict[str, int]] = {}
    if objects.ROOT_QUEUE not in observation.queues:
        return result
    # Parents before children, then summed children first (no recursion, whatever the depth).
    order: list[str] = []
    stack = [objects.ROOT_QUEUE]
    while stack:
        name = stack.pop()
        order.append(name)
        stack.extend(children.get(name, []))
    for name in reversed(order):
        counts = observing.stage_counts(observation, pods=own.get(name, {}))
        counts["evicted"] += gone.get(name, 0)
        for kid in children.get(name, []):
            for stage, number in result[kid].items():
                counts[stage] += number
        result[name] = counts
    return result


def live(
    client: kubectl.Kubectl,
    *,
    refresh: float = 1.0,
    alive: Callable[[], None] = lambda: None,
    notes: Iterable[str] = (),
    out: TextIO = sys.stdout,
) -> None:
    """Redraw the table every ``refresh`` seconds until KeyboardInterrupt (or ``alive``
    raises: a component of the stack stopped), with ``notes`` (the scenario's progress) below."""
    while True:
        alive()
        stamp = time.strftime("%H:%M:%S")
        header = f"queuetree sandbox  {stamp}  KUBECONFIG={client.kubeconfig}  (Ctrl-C stops)"
        try:
            lines = render(observing.observe(client), header=header)
        except kubectl.KubectlError as exc:
            lines = [header, f"(reading the cluster failed: {exc})"]
        lines.extend(["", *list(notes)])
        if out.isatty():
            out.write(CLEAR)
        out.write("\n".join(lines) + "\n")
        out.flush()
        time.sleep(refresh)
