"""The live view: the queue tree of ``kubectl queuetree tree``, redrawn in place with rich.

:func:`render` is pure (an observation in, lines of text out) so it is tested as a table;
:func:`live` reads the cluster every ``refresh`` seconds and redraws it with rich's Live until
interrupted. The tree is ``queuetree.views.trees``, the very renderer of ``kubectl queuetree
tree`` (state, Ready condition, per resource used+reserved, deserved and ``realCapability``
with bars, gated/admitted/running pods of each subtree); below it the pods of the whole cluster
by stage (succeeded and evicted included) and the scenario's progress.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable

import rich.console
import rich.live
import rich.text

from queuetree.api import listings
from queuetree.sandbox import kubectl, observing
from queuetree.views import trees


def listing_of(observation: observing.Observation) -> listings.Listing:
    """The observation as ``kubectl queuetree`` reads a cluster."""
    return listings.read_listing(
        [
            *({"kind": "Queue", **q} for q in observation.queues.values()),
            *({"kind": "PodGroup", **g} for g in observation.pod_groups.values()),
            *({"kind": "Pod", **p} for p in observation.pods.values()),
        ]
    )


def footer(observation: observing.Observation) -> str:
    totals = observing.stage_counts(observation)
    return "pods: " + ", ".join(f"{totals[stage]} {stage}" for stage in observing.STAGES)


def render(
    observation: observing.Observation, *, header: str = "", width: int = trees.WIDTH
) -> list[str]:
    """The tree as ``kubectl queuetree tree`` prints it, then the pods by stage."""
    lines = [header] if header else []
    lines += trees.to_text(listing_of(observation), width=width).splitlines()
    return [*lines, "", footer(observation)]


def live(
    client: kubectl.Kubectl,
    *,
    refresh: float = 1.0,
    alive: Callable[[], None] = lambda: None,
    notes: Iterable[str] = (),
    banner: Iterable[str] = (),
) -> None:
    """Redraw every ``refresh`` seconds until KeyboardInterrupt (or ``alive`` raises: a
    component of the stack stopped), with ``banner`` above (where things are) and ``notes``
    (the scenario's progress) below."""
    console = rich.console.Console(highlight=False, soft_wrap=False)
    # rich's Live shows nothing but its last frame when the output is not a terminal (a log
    # file, a pipe): there, every frame is printed whole, one after the other.
    live_view = rich.live.Live(console=console, auto_refresh=False, screen=True)
    with live_view if console.is_terminal else contextlib.nullcontext():
        while True:
            alive()
            frame = _frame(client, banner=banner, notes=notes)
            if console.is_terminal:
                live_view.update(frame, refresh=True)
            else:
                console.print(frame)
                console.file.flush()
            time.sleep(refresh)


def _frame(
    client: kubectl.Kubectl, *, banner: Iterable[str], notes: Iterable[str]
) -> rich.console.Group:
    stamp = time.strftime("%H:%M:%S")
    parts: list[rich.console.RenderableType] = [
        f"queuetree sandbox  {stamp}  (Ctrl-C stops)",
        *(rich.text.Text(line, no_wrap=True, overflow="ellipsis") for line in banner),
    ]
    try:
        observation = observing.observe(client)
        rows = trees.build_rows(listing_of(observation))
        parts += [trees.render(rows), *trees.notes(rows), "", footer(observation)]
    except kubectl.KubectlError as exc:
        parts.append(f"(reading the cluster failed: {exc})")
    parts += ["", *list(notes)]
    return rich.console.Group(*parts)
