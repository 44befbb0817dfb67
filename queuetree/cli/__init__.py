"""The ``queuetree`` command: one entry point, one module per subcommand.

Each subcommand module defines ``add_parser(subparsers)`` and ``run(args) -> int``; register it
in ``_COMMANDS``. Exit codes: 0 success, 2 input not understood (usage errors included).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from types import ModuleType

import queuetree
from queuetree.cli import flags
from queuetree.cli import operator as cli_operator
from queuetree.cli import plugin as cli_plugin
from queuetree.cli import review as cli_review
from queuetree.cli import sandbox as cli_sandbox
from queuetree.cli import session as cli_session
from queuetree.cli import webhook as cli_webhook

_COMMANDS: tuple[ModuleType, ...] = (
    cli_operator,
    cli_session,
    cli_webhook,
    cli_review,
    cli_sandbox,
    cli_plugin,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="queuetree",
        description="Hierarchical queue admission for Kubernetes (Volcano-compatible queues).",
    )
    parser.add_argument("--version", action="version", version=f"queuetree {queuetree.__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in _COMMANDS:
        command.add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return flags.dispatch(build_parser(), argv)
