"""Problems: what is wrong with some input, where, and the one syntax of field paths.

Every reader (``queuetree.api``) and every queue rule (``core.field_rules``, ``tree_rules``,
``deletion_rules``) reports a :class:`Problem` and never stops at the first one (STYLE rule
6); a reader raises one :class:`InputError` listing every problem of its input, so a person
fixes a file in one pass::

    ValueError
     └── InputError                  problems of some input, as a tuple of Problem
          ├── manifests.ManifestError       Kubernetes manifests (Queue, PodGroup, Pod, ...)
          └── schedconf.ConfigurationError  a volcano-scheduler.conf file

A problem renders two ways, for its two audiences:

- :meth:`Problem.render`, as Kubernetes' ``field.Error`` prints it, for admission denials
  (``spec.deserved["cpu"]: Invalid value: "-1": must be greater than or equal to 0``);
- ``str()``, for a person fixing a file: where it came from, the object, the field, what is
  wrong and the value (``cluster.yaml#3: Queue team-a: spec.capability["nvidia.com/gpu"]:
  invalid quantity: ... (got "2x")``).

Paths. :class:`FieldPath` (or :func:`field_path` over parts) builds every path, in one syntax:
names joined by dots, map keys quoted in brackets (a resource name or an annotation key has
dots and slashes of its own), list indexes in brackets: ``spec.capability["nvidia.com/gpu"]``,
``metadata.annotations["scheduling.volcano.sh/queue-name"]``, ``spec.containers[0].resources``.

Messages. Many problems are told as one message the way Kubernetes aggregates errors
(:func:`aggregate`, at most :data:`MAX_LISTED` of them); long texts and lists of names are
cut (:func:`shorten`, :func:`list_names`): an object may carry megabytes.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Iterable, Sequence
from typing import Final


class ErrorType(enum.StrEnum):
    """The kind of a problem, spelled as Kubernetes' ``field.ErrorType`` prints it."""

    INVALID = "Invalid value"
    FORBIDDEN = "Forbidden"
    NOT_FOUND = "Not found"


MAX_NESTING: Final = 100
"""Deepest nesting of lists and maps accepted in any input (manifests, configurations, review
bodies). Real objects stay far below (a pod with managed fields nests about fifteen levels);
deeper input only reaches recursion limits in code that parses, prints or copies it."""

NO_VALUE: Final = object()
"""The ``value`` of a :class:`Problem` about something absent (no value to show)."""


def key(name: str) -> str:
    """A map key as a path part: ``key("nvidia.com/gpu")`` is ``["nvidia.com/gpu"]``."""
    return f"[{json.dumps(name)}]"


def field_path(*parts: str | int) -> str:
    """Join path parts: names with dots, ints as ``[i]``, parts made by :func:`key` as they are.

    ``field_path("spec", "containers", 0, "resources")`` is ``spec.containers[0].resources``.
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


@dataclasses.dataclass(frozen=True, slots=True)
class FieldPath:
    """A field path, built step by step: ``FieldPath("spec").child("capability").key("cpu")``
    is ``spec.capability["cpu"]``; ``str()`` renders it."""

    parts: tuple[str | int, ...] = ()

    @classmethod
    def of(cls, dotted: str) -> FieldPath:
        """The path of plain names written with dots (``"spec.guarantee.resource"``)."""
        return cls(tuple(dotted.split("."))) if dotted else cls()

    def child(self, name: str) -> FieldPath:
        return FieldPath((*self.parts, name))

    def key(self, name: str) -> FieldPath:
        return FieldPath((*self.parts, key(name)))

    def index(self, position: int) -> FieldPath:
        return FieldPath((*self.parts, position))

    def __str__(self) -> str:
        return field_path(*self.parts)


@dataclasses.dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with one input: where (``path``), what kind, why, and the value."""

    path: str = ""
    """The field path inside the object (:class:`FieldPath`); "" for the object as a whole."""
    type: ErrorType = ErrorType.INVALID
    message: str = ""
    """What is wrong, for a person (``must be greater than or equal to 0``)."""
    value: object = NO_VALUE
    """The offending value as written (omitted from the text when :data:`NO_VALUE`)."""
    document: str = ""
    """The object: ``Queue team-a``, ``Pod ml/trainer-0``; "" when it has no identity yet."""
    origin: str = ""
    """Where it came from: ``cluster.yaml#3`` (file and zero-based document index)."""
    heading: str = ""
    """What the value fails to be, put before the message in the text for a person
    (``invalid quantity``); :meth:`render` leaves it out, as Kubernetes does (its type says
    ``Invalid value``)."""

    def render(self, prefix: str = "") -> str:
        """The problem as Kubernetes' ``field.Error`` prints it, its path prefixed by ``prefix``
        (``requestBody.``); a value longer than 64 characters is shortened (an object may carry
        megabytes)."""
        if self.value is NO_VALUE or self.value is None:
            return f"{prefix}{self.path}: {self.type}: {self.message}"
        return f'{prefix}{self.path}: {self.type}: "{shorten(str(self.value))}": {self.message}'

    def __str__(self) -> str:
        where = ": ".join(part for part in (self.origin, self.document, self.path) if part)
        message = f"{self.heading}: {self.message}" if self.heading else self.message
        text = f"{where}: {message}" if where else message
        if self.value is not NO_VALUE:
            text += f" (got {describe_value(self.value)})"
        return text


class InputError(ValueError):
    """Input that queuetree does not understand; ``problems`` lists every reason, in input order."""

    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(str(problem) for problem in self.problems))


MAX_LISTED = 20
"""Most problems one message lists; the rest are counted (a map with thousands of bad entries
must not become a megabyte of text)."""


def aggregate(messages: list[str]) -> str:
    """One message for many, as Kubernetes' ``utilerrors.NewAggregate`` prints them:
    one error alone, several as ``[e1, e2]``; beyond :data:`MAX_LISTED`, the first ones and
    ``and N more``."""
    if len(messages) == 1:
        return messages[0]
    if len(messages) > MAX_LISTED:
        rest = len(messages) - MAX_LISTED
        messages = [*messages[:MAX_LISTED], f"and {rest} more"]
    return "[" + ", ".join(messages) + "]"


def list_names(names: Sequence[str], *, shown: int = 10) -> str:
    """``a, b, c`` or, for long lists, the first ``shown`` names and how many more."""
    if len(names) <= shown:
        return ", ".join(names)
    return f"{', '.join(names[:shown])} and {len(names) - shown} more"


def shorten(text: str, limit: int = 64) -> str:
    """``text`` cut to ``limit`` characters (ending in ``...`` when cut), for messages."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe_value(value: object) -> str:
    """A short, unambiguous rendering of a wire value (JSON where possible, else ``repr``)."""
    try:
        text = json.dumps(value, sort_keys=True, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


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
