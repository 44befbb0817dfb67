"""Flags in the style of Kubernetes and Volcano components.

``--name=value``; booleans accept ``--flag``, ``--flag=true`` and ``--flag=false`` (any spelling
Go's ``strconv.ParseBool`` accepts); feature gates ``--feature-gates=A=true,B=false``. The same
flag names are used by every subcommand that has the setting.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypedDict, TypeVar

from queuetree.core import features, objects

_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


ValueT = TypeVar("ValueT")


def parse_as(kind: Callable[[str], ValueT], text: str, *, what: str) -> ValueT:
    """``kind(text)``, or the usage error ``not {what}: 'text'`` when it raises ValueError."""
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not {what}: {text!r}") from None


def positive_int(text: str) -> int:
    """An integer of at least 1 (counts, sizes in bytes)."""
    value = parse_as(int, text, what="an integer")
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def positive_seconds(text: str) -> float:
    """A finite number above 0 (seconds, rates)."""
    value = parse_as(float, text, what="a number")
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def parse_bool(text: str) -> bool:
    """Go's ``strconv.ParseBool``: 1 t T TRUE true True / 0 f F FALSE false False."""
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise argparse.ArgumentTypeError(f"invalid boolean value {text!r} (use true or false)")


def add_bool_flag(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    name: str,
    *,
    default: bool,
    help: str,
) -> None:
    """Add ``--name`` that takes an optional boolean value (``--name`` alone means true)."""
    parser.add_argument(
        name,
        nargs="?",
        const=True,
        default=default,
        type=parse_bool,
        metavar="BOOL",
        help=f"{help} (default {str(default).lower()})",
    )


def parse_feature_gates(text: str) -> Mapping[str, bool]:
    """``A=true,B=false`` -> ``{"A": True, "B": False}``, only for gates queuetree knows.

    Raises ``argparse.ArgumentTypeError`` naming the offending entry, so argparse reports it as a
    usage error (exit 2).
    """
    gates: dict[str, bool] = {}
    for raw_entry in text.split(","):
        entry = raw_entry.strip()
        if not entry:
            continue
        name, sep, value = entry.partition("=")
        name = name.strip()
        if not sep:
            raise argparse.ArgumentTypeError(
                f"feature gate {entry!r} has no value (expected {name}=true or {name}=false)"
            )
        if name not in features.DEFAULTS:
            known = ", ".join(sorted(features.DEFAULTS))
            raise argparse.ArgumentTypeError(f"unknown feature gate {name!r} (known: {known})")
        gates[name] = parse_bool(value.strip())
    return features.resolve(gates)


def add_feature_gates_flag(parser: argparse.ArgumentParser) -> None:
    defaults = ",".join(f"{k}={str(v).lower()}" for k, v in sorted(features.DEFAULTS.items()))
    add_values(
        parser,
        (
            "--feature-gates",
            parse_feature_gates,
            features.DEFAULTS,
            "A=BOOL,...",
            f"feature gates (default {defaults})",
        ),
    )


Parser = argparse.ArgumentParser | argparse._ArgumentGroup
ValueFlag = tuple[str, Callable[[str], Any], Any, str | None, str | None]
"""``(flag, type, default, metavar, help)`` of a flag that takes a value; None: argparse's own
metavar, no help."""


def add_values(parser: Parser, *flags: ValueFlag) -> None:
    """Add each flag of ``flags``, in order (the order ``--help`` lists them in)."""
    for flag, kind, default, metavar, text in flags:
        parser.add_argument(flag, type=kind, default=default, metavar=metavar, help=text)


def dispatch(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> int:
    """Parse ``argv`` and run the subcommand it names (``args.run``); without one, the usage
    on stderr and exit code 2."""
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    result: int = args.run(args)
    return result


def _scheduler_names(text: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(name.strip() for name in text.split(",") if name.strip()))
    if not names:
        raise argparse.ArgumentTypeError("no scheduler name given")
    return names


PLACING_SCHEDULER_DEST = "placing_scheduler"
"""Where ``--scheduler-name`` leaves the first name it was given: the scheduler an adopted pod
is handed to (``--adopt-scheduler-names``)."""


class _SchedulerNames(argparse.Action):
    """``--scheduler-name`` repeated or comma-separated: the union of every value given (the
    default applies only when the flag is absent); the first name given is also kept, in
    ``PLACING_SCHEDULER_DEST``."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        given = getattr(namespace, self.dest, None)
        known: frozenset[str] = (
            given if isinstance(given, frozenset) and given is not self.default else frozenset()
        )
        assert isinstance(values, tuple)
        if not known:
            setattr(namespace, PLACING_SCHEDULER_DEST, values[0])
        setattr(namespace, self.dest, known | frozenset(values))


def add_scheduler_name_flag(parser: Parser, *, help: str) -> None:
    """``--scheduler-name``: the schedulers that place the pods queuetree admits (Volcano's
    scheduler flag of the same name lists the names it serves). Repeatable or comma-separated;
    default kube-scheduler's ``default-scheduler``. The first name given is the placing
    scheduler (``args.placing_scheduler``): the one an adopted pod is handed to."""
    parser.add_argument(
        "--scheduler-name",
        action=_SchedulerNames,
        type=_scheduler_names,
        default=frozenset({objects.DEFAULT_SCHEDULER}),
        metavar="NAME[,NAME...]",
        help=f"{help} (repeatable; the first one places adopted pods; default "
        f"{objects.DEFAULT_SCHEDULER})",
    )
    parser.set_defaults(**{PLACING_SCHEDULER_DEST: objects.DEFAULT_SCHEDULER})


def _adopted_names(text: str) -> frozenset[str]:
    """Comma-separated names; the empty value is no name (adoption off)."""
    return frozenset(name.strip() for name in text.split(",") if name.strip())


def add_adopt_scheduler_names_flag(parser: Parser, *, help: str) -> None:
    """``--adopt-scheduler-names``: the ``spec.schedulerName`` values whose pods are handed, at
    creation, to the placing scheduler (the first ``--scheduler-name``), as if they had named
    it. Comma-separated; default ``volcano``; ``--adopt-scheduler-names=`` adopts none. A name
    that ``--scheduler-name`` lists too is placed as it is, never adopted."""
    default = objects.DEFAULT_ADOPTED_SCHEDULERS
    parser.add_argument(
        "--adopt-scheduler-names",
        type=_adopted_names,
        default=default,
        metavar="NAME[,NAME...]",
        help=f"{help} (empty: none; default {','.join(sorted(default))})",
    )


class Shared(TypedDict):
    """The settings the webhook, the operator and the plugin take alike from their shared flags
    (the plugin acts as the operator would: they must agree)."""

    default_queue: str
    scheduler_names: frozenset[str]
    placing_scheduler: str
    adopted_scheduler_names: frozenset[str]
    feature_gates: Mapping[str, bool]


def shared(args: argparse.Namespace) -> Shared:
    """:class:`Shared` from parsed arguments."""
    return Shared(
        default_queue=args.default_queue,
        scheduler_names=args.scheduler_name,
        placing_scheduler=getattr(args, PLACING_SCHEDULER_DEST),
        adopted_scheduler_names=args.adopt_scheduler_names,
        feature_gates=args.feature_gates,
    )


NATIVE_POD_GROUPS_MODES = ("auto", "true", "false")
"""``--native-pod-groups``: ``auto`` (the default) asks the API server at start-up whether it
serves ``scheduling.k8s.io/v1beta1`` PodGroups (docs/gangs.md)."""


def _native_mode(text: str) -> str:
    if text == "auto":
        return text
    return "true" if parse_bool(text) else "false"


def add_native_pod_groups_flag(parser: Parser, *, help: str) -> None:
    """``--native-pod-groups=auto|true|false``: whether gangs are placed whole by kube-scheduler
    through the Workload API's PodGroup (``queuetree.api.native_groups``)."""
    parser.add_argument(
        "--native-pod-groups",
        type=_native_mode,
        default="auto",
        metavar="auto|BOOL",
        help=f"{help} (auto: when the API server serves scheduling.k8s.io/v1beta1 podgroups, "
        "checked at start-up; default auto)",
    )
