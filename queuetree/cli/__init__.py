"""The ``queuetree`` command: one entry point, one module per subcommand.

Each subcommand module defines ``add_parser(subparsers)`` and ``run(args) -> int``; register it
in ``_COMMANDS`` with the subcommands it adds. Exit codes: 0 success, 2 input not understood
(usage errors included).

A process imports only the module of the subcommand it runs: the operator has no use for the
webhook's certificates (``cryptography``), the sandbox's views (``rich``) or kubesim, and each
module imported is resident memory for the process's whole life (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Final

import queuetree
from queuetree.cli import flags

_COMMANDS: Final = (
    ("queuetree.cli.operator", ("operator",)),
    ("queuetree.cli.session", ("session",)),
    ("queuetree.cli.webhook", ("webhook",)),
    ("queuetree.cli.review", ("review",)),
    ("queuetree.cli.sandbox", ("sandbox",)),
    ("queuetree.cli.plugin", ("tree", "explain", "pending", "whatif", "close", "open")),
)
"""Each subcommand module, in the order of the help, with the subcommands it adds."""


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The command's parser; when ``argv`` starts with a subcommand, with that subcommand's
    module alone (every module for anything else: the help, a typo, ``--version``)."""
    parser = argparse.ArgumentParser(
        prog="queuetree",
        description="Hierarchical queue admission for Kubernetes (Volcano-compatible queues).",
    )
    parser.add_argument("--version", action="version", version=f"queuetree {queuetree.__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = [module for module, names in _COMMANDS if argv[:1] and argv[0] in names]
    for module in chosen or [module for module, _ in _COMMANDS]:
        importlib.import_module(module).add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    given = sys.argv[1:] if argv is None else argv
    return flags.dispatch(build_parser(given), given)
