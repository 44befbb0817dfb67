"""Flags in the style of Kubernetes and Volcano components.

``--name=value``; booleans accept ``--flag``, ``--flag=true`` and ``--flag=false`` (any spelling
Go's ``strconv.ParseBool`` accepts); feature gates ``--feature-gates=A=true,B=false``. The same
flag names are used by every subcommand that has the setting.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping

from queuetree.core import features, objects

_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


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
    parser.add_argument(
        "--feature-gates",
        type=parse_feature_gates,
        default=features.DEFAULTS,
        metavar="A=BOOL,...",
        help=f"feature gates (default {defaults})",
    )


def _scheduler_names(text: str) -> frozenset[str]:
    names = frozenset(name.strip() for name in text.split(",") if name.strip())
    if not names:
        raise argparse.ArgumentTypeError("no scheduler name given")
    return names


class _SchedulerNames(argparse.Action):
    """``--scheduler-name`` repeated or comma-separated: the union of every value given (the
    default applies only when the flag is absent)."""

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
        assert isinstance(values, frozenset)
        setattr(namespace, self.dest, known | values)


def add_scheduler_name_flag(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup, *, help: str
) -> None:
    """``--scheduler-name``: the schedulers that place the pods queuetree admits (Volcano's
    scheduler flag of the same name lists the names it serves). Repeatable or comma-separated;
    default kube-scheduler's ``default-scheduler``."""
    parser.add_argument(
        "--scheduler-name",
        action=_SchedulerNames,
        type=_scheduler_names,
        default=frozenset({objects.DEFAULT_SCHEDULER}),
        metavar="NAME[,NAME...]",
        help=f"{help} (repeatable; default {objects.DEFAULT_SCHEDULER})",
    )
