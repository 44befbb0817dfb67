"""Problems found in input files, and the error that carries all of them.

Parsing never stops at the first problem: every reader in ``queuetree.api`` collects
:class:`Problem` records (which document, which field, which value, what is wrong) and raises one
:class:`InputError` listing them all, so a person fixes a file in one pass (STYLE rule 6)::

    ValueError
     └── InputError                  problems of some input, as a tuple of Problem
          ├── manifests.ManifestError       Kubernetes manifests (Queue, PodGroup, Pod, ...)
          └── schedconf.ConfigurationError  a volcano-scheduler.conf file

Field paths are written the way ``kubectl explain`` and the API server print them, with map keys
quoted and list indexes in brackets: ``spec.capability["nvidia.com/gpu"]``,
``spec.containers[0].resources.requests["cpu"]``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from typing import Final

MAX_NESTING: Final = 100
"""Deepest nesting of lists and maps accepted in any input (manifests, configurations, review
bodies). Real objects stay far below (a pod with managed fields nests about fifteen levels);
deeper input only reaches recursion limits in code that parses, prints or copies it."""

NO_VALUE: Final = object()
"""The ``value`` of a :class:`Problem` about something absent (no value to show)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with one input document."""

    message: str
    """What is wrong, for a person (``invalid quantity '2x': ...``, ``queue "q1" not found``)."""
    document: str = ""
    """The object: ``Queue team-a``, ``Pod ml/trainer-0``; "" when it has no identity yet."""
    origin: str = ""
    """Where it came from: ``cluster.yaml#3`` (file and zero-based document index)."""
    field: str = ""
    """The field path inside the document; "" for the document as a whole."""
    value: object = NO_VALUE
    """The offending value as written (omitted from the text when not applicable)."""

    def __str__(self) -> str:
        where = ": ".join(part for part in (self.origin, self.document, self.field) if part)
        text = f"{where}: {self.message}" if where else self.message
        if self.value is not NO_VALUE:
            text += f" (got {describe_value(self.value)})"
        return text


class InputError(ValueError):
    """Input that queuetree does not understand; ``problems`` lists every reason, in input order."""

    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(str(problem) for problem in self.problems))


def describe_value(value: object) -> str:
    """A short, unambiguous rendering of a wire value (JSON where possible, else ``repr``)."""
    try:
        text = json.dumps(value, sort_keys=True, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def field_path(*parts: str | int) -> str:
    """Join path parts: names with dots, ints as ``[i]``, parts made by :func:`key` as they are.

    ``field_path("spec", "containers", 0, "resources")`` is ``spec.containers[0].resources``.
    Use :func:`key` for map keys, which are always quoted.
    """
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part.startswith("["):
            text += part
        else:
            text += f".{part}" if text else part
    return text


def key(name: str) -> str:
    """A map key as a path part: ``key("nvidia.com/gpu")`` is ``["nvidia.com/gpu"]``."""
    return f"[{json.dumps(name)}]"


def too_deep(value: object, *, limit: int = MAX_NESTING) -> str | None:
    """The path of the first list or map nested more than ``limit`` levels deep in ``value``
    (the top level is level 1), or None. Iterative: the check itself cannot exhaust the stack."""
    stack: list[tuple[object, int, tuple[str | int, ...]]] = [(value, 1, ())]
    while stack:
        current, depth, path = stack.pop()
        if isinstance(current, dict):
            items: Iterable[tuple[str | int, object]] = (
                (name if isinstance(name, str) and name.isidentifier() else key(str(name)), child)
                for name, child in current.items()
            )
        elif isinstance(current, list):
            items = enumerate(current)
        else:
            continue
        if depth > limit:
            # A path hundreds of levels long helps nobody: its start says where to look.
            shown = field_path(*path[:4]) + ("..." if len(path) > 4 else "")
            return shown or "(the document)"
        stack.extend((child, depth + 1, (*path, part)) for part, child in items)
    return None
