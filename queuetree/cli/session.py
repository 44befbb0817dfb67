"""``queuetree session``: one scheduling session over manifest files, printed as one JSON object.

Parse (``queuetree.api``) → run (``queuetree.core.sessions.run_session``) → render
(``queuetree.api.results``). Exit 0 when the input was understood, whatever the session decided
(an unusable queue tree is ``"ready": false`` with ``errors``, still exit 0); exit 2, with every
problem on stderr and nothing on stdout, when a file cannot be read or understood.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
from typing import Any, TextIO

from queuetree.api import manifest_files, readers, results, schedconf
from queuetree.cli import flags, inputs
from queuetree.core import governing, objects, problems, sessions

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
"""Files read from a directory given to ``-f``, in name order (as kubectl does)."""


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "session",
        help="run one scheduling session over manifest files and print the decisions as JSON",
        description=(
            "Read Queue, PodGroup, Pod, Node and PriorityClass manifests, run one scheduling "
            "session with the configured actions, and print one JSON object: ready, errors, "
            "warnings, bind, pipeline, evict, ungate, podGroups, queues, reasons. "
            "Exit 0 when the input was understood, 2 when it was not."
        ),
    )
    parser.add_argument(
        "-f",
        "--filename",
        dest="filenames",
        action="append",
        required=True,
        metavar="FILE",
        help="multi-document YAML or JSON manifests; a directory reads its *.yaml, *.yml and "
        "*.json files; - reads stdin; repeat for more files",
    )
    parser.add_argument(
        "-R",
        "--recursive",
        nargs="?",
        const=True,
        default=False,
        type=flags.parse_bool,
        metavar="BOOL",
        help="read the directories given to -f recursively, as kubectl does (default false)",
    )
    parser.add_argument(
        "--config",
        "--scheduler-conf",
        metavar="FILE",
        default=None,
        help="scheduler configuration in the volcano-scheduler.conf format, or a ConfigMap "
        "holding one (default: queuetree's built-in configuration, examples/config/default.conf)",
    )
    parser.add_argument(
        "--default-queue",
        metavar="NAME",
        default=objects.DEFAULT_QUEUE,
        help="queue of PodGroups and lone pods that name none, and whose Namespace names none "
        f"(default {objects.DEFAULT_QUEUE})",
    )
    flags.add_feature_gates_flag(parser)
    inputs.add_max_file_bytes_flag(parser)
    flags.add_bool_flag(
        parser,
        "--admission-only",
        default=False,
        help="run as the operator does: admit and ungate, reclaim for unschedulable pods, "
        "but never bind or pipeline (kube-scheduler places pods); only pods governed by queue "
        "admission (gated, admitted or opted in) count in queues, the others only use their "
        "nodes (each that names a queue is warned about)",
    )
    flags.add_scheduler_name_flag(
        parser,
        help="with --admission-only: schedulers that place admitted pods, as the operator's "
        "flag (a gated pod that names another stays gated)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Parse, run, render: exit 0 with the JSON object, or 2 with the input's problems."""
    try:
        snapshot, configuration = read_inputs(
            args.filenames,
            config=args.config,
            default_queue=args.default_queue,
            recursive=args.recursive,
            stdin=sys.stdin,
            max_file_bytes=args.max_file_bytes,
        )
    except problems.InputError as error:
        _report(error.problems)
        return 2
    result = sessions.run_session(
        snapshot.snapshot,
        config=configuration.configuration,
        feature_gates=args.feature_gates,
        admission_only=args.admission_only,
        scheduler_names=args.scheduler_name if args.admission_only else None,
    )
    warnings = (*configuration.warnings, *snapshot.warnings)
    if args.admission_only:
        warnings += tuple(outside_warnings(snapshot.snapshot))
    _emit(results.render_session_result(result, warnings=warnings))
    return 0


def outside_warnings(snapshot: objects.Snapshot) -> list[str]:
    """With ``--admission-only``: one warning per pod that names a queue but is not governed by
    queue admission (``objects.Pod.governed``), in key order; the session counts it in no queue
    (``governing.admission_snapshot``), as the operator would not."""
    found = []
    for key in sorted(snapshot.pods):
        pod = snapshot.pods[key]
        if pod.governed:
            continue
        named = governing.named_queue(pod, snapshot.pod_groups)
        if named is not None:
            found.append(governing.outside_message(key, named))
    return found


def _report(found: tuple[problems.Problem, ...]) -> None:
    for problem in found:
        print(f"queuetree session: {problem}", file=sys.stderr)
    count = len(found)
    print(
        f"queuetree session: input not understood ({count} problem{'s' * (count != 1)})",
        file=sys.stderr,
    )


def _emit(output: results.SessionOutput) -> None:
    try:
        print(json.dumps(output, sort_keys=True, indent=2))
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader stopped early (`| head`): not an error of ours. Point stdout at /dev/null
        # so that the interpreter's own flush at exit does not fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def read_inputs(
    filenames: list[str],
    *,
    config: str | None,
    default_queue: str,
    recursive: bool = False,
    stdin: TextIO,
    max_file_bytes: int = inputs.MAX_FILE_BYTES,
) -> tuple[manifest_files.ParsedSnapshot, schedconf.ParsedConfiguration]:
    """Read and parse every file (each at most ``max_file_bytes``), collecting the problems of
    all of them before raising :class:`problems.InputError`."""
    found: list[problems.Problem] = []
    documents: list[manifest_files.Document] = []
    if [*filenames, config].count("-") > 1:
        raise problems.InputError(
            [problems.Problem(message="standard input (-) can be given only once", origin="-")]
        )
    for source, text in _read_sources(
        filenames, recursive=recursive, stdin=stdin, found=found, limit=max_file_bytes
    ):
        try:
            documents.extend(manifest_files.load_documents(text, source=source))
        except readers.ManifestError as error:
            found.extend(error.problems)
    configuration: schedconf.ParsedConfiguration | None = None
    if config is None:
        configuration = schedconf.parse_default()
    else:
        for source, text in _read_sources(
            [config], recursive=False, stdin=stdin, found=found, limit=max_file_bytes
        ):
            try:
                configuration = schedconf.parse_configuration(text, source=source)
            except schedconf.ConfigurationError as error:
                found.extend(error.problems)
    snapshot: manifest_files.ParsedSnapshot | None = None
    try:
        snapshot = manifest_files.build_snapshot(documents, default_queue=default_queue)
    except readers.ManifestError as error:
        found.extend(error.problems)
    if found or snapshot is None or configuration is None:
        raise problems.InputError(found)
    return snapshot, configuration


def _read_sources(
    names: list[str],
    *,
    recursive: bool,
    stdin: TextIO,
    found: list[problems.Problem],
    limit: int = inputs.MAX_FILE_BYTES,
) -> list[tuple[str, str]]:
    """``(source, text)`` per file; unreadable files and files above ``limit`` bytes become
    problems. A directory gives its manifest files in path order (with subdirectories when
    ``recursive``)."""
    texts: list[tuple[str, str]] = []
    for name in names:
        if name == "-":
            text = stdin.read(limit + 1)
            if len(text) > limit:
                message = f"more than the limit of {limit} (--max-file-bytes)"
                found.append(problems.Problem(message=message, origin="<stdin>"))
                continue
            texts.append(("<stdin>", text))
            continue
        path = pathlib.Path(name)
        if path.is_dir():
            listing = path.rglob("*") if recursive else path.iterdir()
            paths = sorted(p for p in listing if p.suffix in MANIFEST_SUFFIXES and p.is_file())
        else:
            paths = [path]
        for item in paths:
            try:
                data = inputs.read_bytes(str(item), limit=limit, stdin=sys.stdin.buffer)
                texts.append((str(item), data.decode("utf-8")))
            except inputs.TooLarge as error:
                found.append(problems.Problem(message=str(error)))
            except (OSError, UnicodeDecodeError) as error:
                reason: Any = error.strerror if isinstance(error, OSError) else error.reason
                found.append(problems.Problem(message=f"cannot read: {reason}", origin=str(item)))
    return texts
