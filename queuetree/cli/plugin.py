"""``kubectl queuetree`` (the ``kubectl-queuetree`` plugin) and ``queuetree tree|explain|...``.

    kubectl queuetree tree [--watch]              the live queue tree
    kubectl queuetree explain POD|pod/NAME|podgroup/NAME|KIND/NAME [-n NS]
    kubectl queuetree pending [QUEUE]             the admission order, with positions
    kubectl queuetree whatif -f CHANGES.yaml      the operator's decision with the changes
    kubectl queuetree close QUEUE | open QUEUE    ask the operator to close or open a queue

The same six commands are subcommands of ``queuetree``. Everything is read with kubectl, as the
user (``reading``); positions, reasons and the what-if come from the operator's own session
over what was read (``operator.offline``), with the operator's scheduler configuration (its
ConfigMap, when readable; ``--config`` overrides). Exit codes: 0 done, 1 the cluster could not
be read or the object is not there, 2 the command line or a file is not understood.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

import rich.console
import rich.live

from queuetree.api import bodies, listings, manifest_files, readers, schedconf, statuses
from queuetree.cli import flags, reading
from queuetree.core import objects
from queuetree.operator import offline, settings
from queuetree.views import reports, trees
from queuetree.webhooks import settings as webhook_settings
from queuetree.webhooks import trying, views

COMMANDS = ("tree", "explain", "pending", "whatif", "close", "open")
GROUP_PREFIXES = ("podgroup/", "podgroups/", "pg/", "podgroup.scheduling.volcano.sh/")
POD_PREFIXES = ("pod/", "pods/", "po/")


class UsageError(Exception):
    """The command line or a file is not understood (exit 2)."""


def add_parser(subparsers: Any) -> None:
    """The six commands as ``queuetree`` subcommands."""
    for name in COMMANDS:
        _add_command(subparsers, name)


def build_kubectl_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kubectl queuetree",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        _add_command(commands, name)
    return parser


def kubectl_main(argv: Sequence[str] | None = None) -> int:
    """The ``kubectl-queuetree`` console script (kubectl runs it for ``kubectl queuetree``)."""
    return flags.dispatch(build_kubectl_parser(), argv)


_HELP = {
    "tree": "the live queue tree: state, condition, figures with bars, pod counts",
    "explain": "why a pod or a pod group waits, its position, and what would admit it",
    "pending": "the pods waiting behind the gate, in each queue's admission order",
    "whatif": "what the operator would decide if the changes in a file were applied",
    "close": "ask the operator to close a queue (it admits nothing new)",
    "open": "ask the operator to open a queue",
}


def _add_command(subparsers: Any, name: str) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name, help=_HELP[name], description=_HELP[name]
    )
    reading.add_flags(parser)
    if name in ("close", "open"):
        parser.add_argument("queue", metavar="QUEUE")
        parser.set_defaults(run=_run_state)
        return
    flags.add_values(
        parser,
        (
            "--width",
            int,
            trees.WIDTH,
            "COLUMNS",
            f"cut lines at this width (default {trees.WIDTH})",
        ),
    )
    if name == "tree":
        parser.add_argument("-w", "--watch", action="store_true", help="redraw until Ctrl-C")
        parser.add_argument(
            "--interval", type=float, default=2.0, metavar="SECONDS", help="with --watch"
        )
        parser.add_argument(
            "--default-queue",
            default=objects.DEFAULT_QUEUE,
            metavar="NAME",
            help="the operator's --default-queue (where lone pods that name none go)",
        )
        parser.set_defaults(run=_run_tree)
        return
    parser.add_argument(
        "--config",
        default=None,
        metavar="SCHED.conf",
        help="the operator's scheduler configuration (default: its ConfigMap in "
        "queuetree-system, else the built-in one)",
    )
    parser.add_argument("--default-queue", default=objects.DEFAULT_QUEUE, metavar="NAME")
    flags.add_feature_gates_flag(parser)
    flags.add_scheduler_name_flag(parser, help="the operator's --scheduler-name")
    flags.add_adopt_scheduler_names_flag(parser, help="the operator's --adopt-scheduler-names")
    if name == "explain":
        parser.add_argument(
            "target",
            metavar="POD|pod/NAME|podgroup/NAME|KIND/NAME",
            help="a pod, a pod group, or a workload whose pods go through a PodGroup it owns: "
            "job/NAME, pytorchjob/NAME, raycluster/NAME, statefulset/NAME, deployment/NAME, ...",
        )
        parser.add_argument("-n", "--namespace", default=None)
        parser.set_defaults(run=_run_explain)
    elif name == "pending":
        parser.add_argument("queue", nargs="?", default=None, metavar="QUEUE")
        parser.set_defaults(run=_run_pending)
    else:
        parser.add_argument(
            "-f",
            "--filename",
            required=True,
            metavar="CHANGES.yaml",
            help="queues to add or edit, pods, batch/v1 Jobs or PodGroups to submit",
        )
        parser.set_defaults(run=_run_whatif)


def _cluster(args: argparse.Namespace) -> reading.Cluster:
    return reading.Cluster(
        kubeconfig=args.kubeconfig, context=args.context, request_timeout=args.request_timeout
    )


def _guarded(run: Any) -> Any:
    def wrapped(args: argparse.Namespace) -> int:
        try:
            result: int = run(args)
        except reading.ReadError as error:
            print(f"kubectl queuetree {args.command}: {error}", file=sys.stderr)
            return 1
        except UsageError as error:
            print(f"kubectl queuetree {args.command}: {error}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            return 130
        return result

    return wrapped


def _warn(listing: listings.Listing) -> None:
    for warning in listing.warnings:
        print(f"warning: {warning}", file=sys.stderr)


def _operator_settings(
    args: argparse.Namespace, cluster: reading.Cluster
) -> settings.OperatorSettings:
    if args.config is not None:
        try:
            with open(args.config, encoding="utf-8") as file:
                parsed = schedconf.parse_configuration(file.read(), source=args.config)
        except OSError as error:
            raise UsageError(f"--config {args.config}: {error.strerror}") from None
        except schedconf.ConfigurationError as error:
            raise UsageError(f"--config {args.config}: {error}") from None
    else:
        parsed, source = cluster.scheduler_config()
        if source.startswith("the built-in"):
            print(f"note: scheduler configuration: {source}", file=sys.stderr)
    return settings.OperatorSettings(
        scheduler_config=parsed.configuration,
        **flags.shared(args),
    )


@_guarded
def _run_tree(args: argparse.Namespace) -> int:
    cluster = _cluster(args)
    if not args.watch:
        listing = cluster.listing()
        _warn(listing)
        sys.stdout.write(trees.to_text(listing, width=args.width, default_queue=args.default_queue))
        return 0
    console = rich.console.Console(soft_wrap=False, highlight=False)
    if not console.is_terminal:
        # A pipe gets one frame after another, each complete.
        while True:
            listing = cluster.listing()
            sys.stdout.write(
                time.strftime("%H:%M:%S\n")
                + trees.to_text(listing, width=args.width, default_queue=args.default_queue)
                + "\n"
            )
            sys.stdout.flush()
            time.sleep(args.interval)
    with rich.live.Live(console=console, auto_refresh=False, screen=False) as live:
        while True:
            listing = cluster.listing()
            rows = trees.build_rows(listing, default_queue=args.default_queue)
            live.update(
                rich.console.Group(
                    time.strftime("kubectl queuetree tree  %H:%M:%S  (Ctrl-C stops)"),
                    trees.render(rows),
                    *trees.notes(rows),
                ),
                refresh=True,
            )
            time.sleep(args.interval)


def _target(args: argparse.Namespace, namespace: str) -> tuple[str, str]:
    """``("pod"|"podgroup"|KIND, "namespace/name")`` of the explain target; KIND is any other
    kind a user writes (``job``, ``pytorchjob``), for the PodGroups that kind owns."""
    target = str(args.target)
    for prefix in GROUP_PREFIXES:
        if target.startswith(prefix):
            return "podgroup", f"{namespace}/{target[len(prefix) :]}"
    for prefix in POD_PREFIXES:
        if target.startswith(prefix):
            return "pod", f"{namespace}/{target[len(prefix) :]}"
    kind, slash, name = target.partition("/")
    if slash and kind and name and "/" not in name:
        return kind.lower(), f"{namespace}/{name}"
    if slash:
        raise UsageError(
            f"{target}: name a pod (POD or pod/NAME), a pod group (podgroup/NAME) or a "
            "workload (job/NAME, pytorchjob/NAME, ...)"
        )
    return "pod", f"{namespace}/{target}"


WORKLOAD_KINDS = {
    "deploy": "deployment",
    "deployments": "deployment",
    "rs": "replicaset",
    "sts": "statefulset",
}
"""kubectl's short names and plurals of the kinds whose names do not end in a plain ``s``."""


def workload_groups(listing: listings.Listing, kind: str, key: str) -> list[str]:
    """The PodGroups that workload ``kind`` ``key`` (``namespace/name``) owns, by key. A
    Deployment owns its pods' groups through its ReplicaSets, named ``<deployment>-<hash>``."""
    wanted = WORKLOAD_KINDS.get(kind, kind)
    namespace, _, name = key.partition("/")
    found = []
    for group_key, group in listing.pod_groups.items():
        owner = group.owner
        if owner is None or group.namespace != namespace:
            continue
        owned = owner.kind.lower()
        if wanted in (owned, f"{owned}s") and owner.name == name:
            found.append(group_key)
        elif wanted == "deployment" and owned == "replicaset":
            prefix, dash, suffix = owner.name.rpartition("-")
            if dash and prefix == name and suffix:
                found.append(group_key)
    return sorted(found)


@_guarded
def _run_explain(args: argparse.Namespace) -> int:
    cluster = _cluster(args)
    namespace = args.namespace or cluster.namespace()
    kind, key = _target(args, namespace)
    config = _operator_settings(args, cluster)
    listing = cluster.listing()
    _warn(listing)
    decision = offline.decide(listing, config)
    if kind == "pod":
        if key not in listing.pods:
            raise reading.ReadError(f'pod "{key}" not found (namespace {namespace}; use -n)')
        lines = reports.explain_pod(
            key,
            listing=listing,
            result=decision.result,
            default_queue=config.default_queue,
            width=args.width,
        )
        sys.stdout.write("\n".join(lines) + "\n")
        return 0
    if kind == "podgroup":
        if key not in listing.pod_groups:
            raise reading.ReadError(f'podgroup "{key}" not found (namespace {namespace}; use -n)')
        groups = [key]
    else:
        groups = workload_groups(listing, kind, key)
        if not groups:
            raise reading.ReadError(
                f'{kind} "{key}" owns no PodGroup (namespace {namespace}; use -n): its pods '
                "name no group, did not opt in, or it does not exist"
            )
    for group in groups:
        sys.stdout.write(
            reports.explain_group(
                group,
                listing=listing,
                result=decision.result,
                default_queue=config.default_queue,
                width=args.width,
            )
        )
    return 0


@_guarded
def _run_pending(args: argparse.Namespace) -> int:
    cluster = _cluster(args)
    config = _operator_settings(args, cluster)
    listing = cluster.listing()
    _warn(listing)
    if args.queue is not None and args.queue not in listing.queues:
        raise reading.ReadError(f'queue "{args.queue}" not found')
    decision = offline.decide(listing, config)
    table = reports.pending_table(listing, decision.result, queue=args.queue)
    where = f"in queue {args.queue!r} or below it" if args.queue else "in any queue"
    if table is None:
        print(f"No pod waits behind the queue gate {where}.")
        return 0
    sys.stdout.write(reports.to_text(table, width=args.width))
    return 0


@_guarded
def _run_state(args: argparse.Namespace) -> int:
    wanted = objects.QueueState.CLOSED if args.command == "close" else objects.QueueState.OPEN
    cluster = _cluster(args)
    cluster.patch_status("queue", args.queue, statuses.state_patch(wanted))
    then = (
        "the operator closes it, Closing while it still has pod groups, and its children with it"
        if wanted is objects.QueueState.CLOSED
        else "the operator opens it (refused, with an event, while its parent is closed)"
    )
    print(f"queue {args.queue}: {args.command} requested (status.state {wanted}); {then}")
    return 0


@_guarded
def _run_whatif(args: argparse.Namespace) -> int:
    cluster = _cluster(args)
    config = _operator_settings(args, cluster)
    changes = _read_changes(args.filename)
    listing = cluster.listing()
    _warn(listing)
    changed, refused, items = apply_changes(listing, changes, config=config)
    after_listing = listings.read_listing(items)
    before = offline.decide(listing, config).result
    after = offline.decide(after_listing, config).result
    placed = offline.decide_full(after_listing, config, ungated=after.ungate)
    report = reports.what_if(
        changed=changed,
        before=before,
        after=after,
        placed=placed,
        refused=refused,
        outside=reports.outside_of(changed, after_listing),
    )
    sys.stdout.write("\n".join(reports.what_if_lines(report, width=args.width)) + "\n")
    return 0


def _read_changes(path: str) -> list[Mapping[str, Any]]:
    try:
        with open(path, encoding="utf-8") as file:
            text = file.read()
        documents = manifest_files.load_documents(text, source=path)
    except OSError as error:
        raise UsageError(f"-f {path}: {error.strerror}") from None
    except readers.ManifestError as error:
        raise UsageError(f"-f {path}: {error}") from None
    return [document.manifest for document in documents]


def apply_changes(
    listing: listings.Listing,
    changes: Sequence[Mapping[str, Any]],
    *,
    config: settings.OperatorSettings,
    namespace: str = "default",
) -> tuple[list[str], dict[str, str], list[Mapping[str, Any]]]:
    """The listed objects with ``changes`` applied as the API server would after the webhook:
    each Queue and Pod goes through the webhook's own review (``/queues/validate``,
    ``/pods/mutate`` then ``/pods/validate``) against the listed cluster, so a refused object
    is reported and left out and an opted-in pod gets its gate. Jobs (``batch/v1``) become
    their pods (``parallelism`` of them, named ``<job>-<n>``). Returns the keys of the pods
    submitted, the refusals (object -> message) and the items."""
    view = views.ClusterView.of(
        queues=listing.queues.values(),
        namespaces=listing.namespaces,
        pod_groups={key: group.queue for key, group in listing.pod_groups.items()},
    )
    review_settings = webhook_settings.ReviewSettings(
        default_queue=config.default_queue,
        scheduler_names=config.scheduler_names,
        placing_scheduler=config.placing_scheduler,
        adopted_scheduler_names=config.adopted_scheduler_names,
        feature_gates=config.feature_gates,
    )
    items = {_identity(item): item for item in listing.manifests}
    submitted: list[str] = []
    refused: dict[str, str] = {}
    for change in _expand_jobs(changes):
        kind = str(change.get("kind", ""))
        meta = dict(bodies.metadata_of(change))
        if kind in ("Pod", "PodGroup"):
            meta.setdefault("namespace", namespace)
        meta.setdefault(
            "uid", f"whatif-{kind.lower()}-{meta.get('namespace', '')}-{meta.get('name', '')}"
        )
        meta.setdefault("creationTimestamp", bodies.timestamp(time.time()))
        item = bodies.with_metadata(change, meta)
        where = f"{meta.get('namespace', '')}/" if kind != "Queue" else ""
        name = f"{kind} {where}{meta.get('name', '')}"
        old = items.get(_identity(item))
        if kind == "Queue":
            message = trying.try_object(
                "/queues/validate", item, old=old, view=view, settings=review_settings
            ).message
            if message is not None:
                refused[name] = message
                continue
            if old is not None:
                item = bodies.with_status_of(item, old)
        elif kind == "Pod":
            mutated = trying.try_object(
                "/pods/mutate", item, old=None, view=view, settings=review_settings
            )
            item = dict(mutated.object)
            checked = trying.try_object(
                "/pods/validate", item, old=None, view=view, settings=review_settings
            )
            if checked.message is not None:
                refused[name] = checked.message
                continue
            submitted.append(f"{meta['namespace']}/{meta['name']}")
        items[_identity(item)] = item
    return submitted, refused, list(items.values())


def _identity(item: Mapping[str, Any]) -> tuple[str, str, str]:
    meta = bodies.metadata_of(item)
    return str(item.get("kind", "")), str(meta.get("namespace", "")), str(meta.get("name", ""))


def _expand_jobs(changes: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    expanded: list[Mapping[str, Any]] = []
    for change in changes:
        if change.get("kind") != "Job" or not str(change.get("apiVersion", "")).startswith(
            "batch/"
        ):
            expanded.append(change)
            continue
        meta = bodies.metadata_of(change)
        spec = bodies.spec_of(change)
        template = spec.get("template") or {}
        count = spec.get("parallelism", 1)
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise UsageError(f"Job {meta.get('name')}: spec.parallelism must be a count")
        for index in range(count):
            pod_meta = dict(bodies.metadata_of(template))
            pod_meta["name"] = f"{meta.get('name')}-{index}"
            if "namespace" in meta:
                pod_meta["namespace"] = meta["namespace"]
            pod_meta["labels"] = {
                **(pod_meta.get("labels") or {}),
                "job-name": str(meta.get("name")),
            }
            expanded.append(bodies.pod_of_template(template, pod_meta))
    return expanded
