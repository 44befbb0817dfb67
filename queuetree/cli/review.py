"""``queuetree review``: run one webhook endpoint on one AdmissionReview, offline.

``queuetree review --path PATH -f REVIEW.json [--queues QUEUES.yaml] [webhook flags]`` runs
exactly the code of the webhook endpoint ``PATH`` (``queuetree.webhooks.reviewing.review``) with
the queues of ``QUEUES.yaml`` as the cluster, and prints the bytes the webhook would send.
``QUEUES.yaml`` holds Queue manifests (status included) and may also hold Namespace and
PodGroup manifests (namespace opt-in and pod-group queues for the pod endpoints; a PodGroup
without ``spec.queue`` is in ``--default-queue``, as in the webhook) and Node manifests (the
resources nodes offer, for the root-capability warning).

Exit codes: 0 whenever a response was produced, allowed or not; 2 when an input file cannot be
read or is not an AdmissionReview (the message the webhook would send with its HTTP 400 goes
to stderr).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import Any

from queuetree.api import manifest_files, readers
from queuetree.cli import inputs, webhook
from queuetree.core import objects
from queuetree.webhooks import reviewing, views


class _InputError(Exception):
    pass


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "review",
        help="answer one AdmissionReview offline, exactly as the webhook would",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--path",
        required=True,
        choices=sorted(reviewing.ENDPOINTS),
        help="the webhook endpoint to run",
    )
    parser.add_argument(
        "-f",
        "--filename",
        required=True,
        metavar="REVIEW.json",
        help="the AdmissionReview request (JSON; - for stdin)",
    )
    parser.add_argument(
        "--queues",
        metavar="QUEUES.yaml",
        help="existing queues (multi-document YAML; Namespace and PodGroup documents too)",
    )
    webhook.add_review_flags(parser)
    inputs.add_max_file_bytes_flag(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    try:
        body = _read_bytes(args.filename, limit=args.max_file_bytes)
        limit = args.max_file_bytes
        view = load_view(args.queues, limit=limit) if args.queues else views.ClusterView()
    except _InputError as exc:
        print(f"queuetree review: {exc}", file=sys.stderr)
        return 2
    answer = reviewing.review(
        args.path,
        body,
        view=view,
        settings=webhook.settings_from(args),
        limits=webhook.body_limits_from(args),
    )
    if answer.status != 200:
        print(f"queuetree review: {args.filename}: {answer.body.decode()}", file=sys.stderr, end="")
        return 2
    sys.stdout.buffer.write(answer.body)
    sys.stdout.flush()
    return 0


def _read_bytes(path: str, *, limit: int = inputs.MAX_FILE_BYTES) -> bytes:
    try:
        return inputs.read_bytes(path, limit=limit, stdin=sys.stdin.buffer)
    except inputs.TooLarge as exc:
        raise _InputError(str(exc)) from exc
    except OSError as exc:
        raise _InputError(f"cannot read {path}: {exc.strerror}") from exc


def load_view(path: str, *, limit: int = inputs.MAX_FILE_BYTES) -> views.ClusterView:
    """The cluster of a ``--queues`` file: Queue, Namespace, PodGroup and Node documents."""
    queues: list[objects.Queue] = []
    namespaces: dict[str, Mapping[str, str]] = {}
    pod_groups: dict[str, str] = {}
    gang_starts: dict[str, views.GangStart] = {}
    nodes: set[str] = set()
    for where, document in _documents(path, limit=limit):
        kind = document.get("kind")
        if kind == "Queue":
            queue = views.queue_from_manifest(document)
            if queue is None:
                raise _InputError(f"{where}: a Queue needs metadata.name")
            queues.append(queue)
        elif kind == "Namespace":
            found = views.namespace_annotations(document)
            if found is None:
                raise _InputError(f"{where}: a Namespace needs metadata.name")
            namespaces[found[0]] = found[1]
        elif kind == "PodGroup":
            group = views.pod_group_queue(document)
            if group is None:
                raise _InputError(f"{where}: a PodGroup needs metadata.name")
            pod_groups[group[0]] = group[1]
            start = views.gang_start(document)
            if start is not None:
                gang_starts[start[0]] = start[1]
        elif kind == "Node":
            node = views.node_resource_names(document)
            if node is None:
                raise _InputError(f"{where}: a Node needs metadata.name")
            nodes |= node[1]
        else:
            raise _InputError(
                f"{where}: kind {kind!r} (expected Queue, Namespace, PodGroup or Node)"
            )
    return views.ClusterView.of(
        queues=queues,
        namespaces=namespaces,
        pod_groups=pod_groups,
        node_resources=nodes,
        gang_starts=gang_starts,
    )


def _documents(path: str, *, limit: int) -> list[tuple[str, Mapping[str, Any]]]:
    """``(origin, manifest)`` of each document (a List's items too), read as ``queuetree
    session`` reads its files: syntax errors, non-objects and nesting too deep for the reader
    are input errors naming the file, the document and the field."""
    try:
        text = _read_bytes(path, limit=limit).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _InputError(f"{path}: not UTF-8: {exc.reason}") from exc
    try:
        documents = manifest_files.load_documents(text, source=path)
    except readers.ManifestError as exc:
        raise _InputError("; ".join(str(p) for p in exc.problems)) from exc
    return [(d.origin, d.manifest) for d in documents]
