"""``queuetree operator``: the queue controller and admission operator (Kopf, cluster-wide).

Flags follow Volcano's scheduler and Kubernetes components (``--name=value``). The scheduler
configuration file is read at start-up; an unreadable file is a usage error (exit 2).
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import gc
import logging
import sys
from typing import TYPE_CHECKING, Any

from queuetree.cli import flags

if TYPE_CHECKING:
    from queuetree.core import configs
    from queuetree.operator import settings

NAME = "operator"
SWITCH_INTERVAL = 0.001
"""Seconds between forced hand-overs of the interpreter lock in the operator process."""
GC_THRESHOLDS = (20_000, 20, 100)
"""The cyclic collector's thresholds in the operator process (CPython's default: 700, 10, 10).

What the operator allocates per watch event and request is freed by reference counting; with
the default thresholds the collector still ran about 230 times in a burst of 5,000 pods on the
real control plane, two of them full collections walking every stored pod (0.28 s each), 1.2 s
of the operator's 7.7 s. With these, 4 young collections (0.18 s), 0.2 ms less CPU per pod
(docs/operator.md, Benchmark)."""


def tune_interpreter() -> None:
    """Set the operator process's switch interval and collector thresholds (process-wide)."""
    # The session runs in a thread beside the event loop. With the default 5 ms switch
    # interval, every socket read of the loop waits up to 5 ms for the interpreter lock while
    # a session computes (a convoy); 1 ms keeps watch events and gate removals flowing.
    sys.setswitchinterval(SWITCH_INTERVAL)
    gc.set_threshold(*GC_THRESHOLDS)


def add_parser(subparsers: Any) -> None:
    # The defaults are the settings' own (one place for each), shown in --help.
    from queuetree.operator import settings

    defaults = settings.DEFAULTS
    parser: argparse.ArgumentParser = subparsers.add_parser(
        NAME,
        help="run the operator (queue controller, admission cycle, gate removal, reclaim)",
        description=__doc__,
    )
    parser.add_argument(
        "--config",
        "--scheduler-conf",
        dest="config",
        default="",
        metavar="FILE",
        help="scheduler configuration file (volcano-scheduler.conf format); default: built-in",
    )
    flags.add_feature_gates_flag(parser)
    workers = defaults.gate_workers
    flags.add_values(
        parser,
        (
            "--gate-removal-worker-num",
            int,
            workers,
            "N",
            f"gate-removal workers; values below 1 mean {workers} (default {workers})",
        ),
        ("--kube-api-qps", float, defaults.qps, "QPS", "API writes per second"),
        ("--kube-api-burst", int, defaults.burst, "N", "API write burst"),
        (
            "--schedule-period",
            float,
            defaults.cycle_period,
            "SECONDS",
            f"fallback period of the admission cycle (default {defaults.cycle_period:g})",
        ),
        ("--metrics-port", int, defaults.metrics_port, "PORT", "0 disables /metrics"),
        (
            "--inqueue-timeout",
            _seconds,
            defaults.inqueue_timeout,
            "SECONDS",
            "how long an Inqueue PodGroup with minResources and no pod holds its queue's room "
            f"before it goes back to Pending; 0: for ever (default {defaults.inqueue_timeout:g})",
        ),
    )
    flags.add_bool_flag(
        parser, "--leader-elect", default=defaults.leader_elect, help="take a Lease before acting"
    )
    parser.add_argument("--lock-object-name", default=defaults.lease_name, metavar="NAME")
    parser.add_argument(
        "--lock-object-namespace",
        "--leader-election-namespace",
        dest="lock_object_namespace",
        default=defaults.lease_namespace,
        metavar="NAMESPACE",
    )
    flags.add_values(
        parser,
        ("--health-port", int, defaults.health_port, "PORT", "kopf's /healthz; 0: none"),
        ("--leader-elect-lease-duration", float, defaults.lease_duration, "SECONDS", None),
        ("--leader-elect-renew-deadline", float, defaults.renew_deadline, "SECONDS", None),
        ("--leader-elect-retry-period", float, defaults.retry_period, "SECONDS", None),
    )
    parser.add_argument("--default-queue", default=defaults.default_queue, metavar="NAME")
    flags.add_scheduler_name_flag(
        parser,
        help="schedulers that place admitted pods: a gated pod that names another stays gated "
        "and is told why (ungated, nothing would place it and it would hold its queue's room)",
    )
    flags.add_adopt_scheduler_names_flag(
        parser,
        help="the webhook's flag of the same name: a gated pod that still names one of these "
        "was not adopted at creation, and is told so",
    )
    flags.add_native_pod_groups_flag(
        parser,
        help="create, for every PodGroup, the scheduling.k8s.io PodGroup its pods name, so "
        "kube-scheduler places each gang all or nothing (the webhook's flag of the same name)",
    )
    parser.add_argument("--identity", default="", metavar="ID", help="lease holder identity")
    flags.add_bool_flag(parser, "--standalone", default=True, help="no kopf peering (always)")
    parser.set_defaults(run=run)


def _seconds(text: str) -> float:
    """A non-negative number of seconds (``--inqueue-timeout``)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value >= 0:  # refuses NaN too
        raise argparse.ArgumentTypeError(f"must be 0 or more seconds, got {text!r}")
    return value


def load_config(path: str) -> configs.SchedulerConfiguration:
    """The configuration in ``path`` (``queuetree.api.schedconf``), or the built-in default."""
    from queuetree.api import schedconf

    if not path:
        return schedconf.parse_default().configuration
    with open(path, encoding="utf-8") as stream:
        parsed = schedconf.parse_configuration(stream.read(), source=path)
    for warning in parsed.warnings:
        print(f"queuetree operator: warning: {warning}", file=sys.stderr)
    return parsed.configuration


def build_settings(
    args: argparse.Namespace, scheduler_config: configs.SchedulerConfiguration
) -> settings.OperatorSettings:
    """The operator's settings from parsed flags (``--gate-removal-worker-num`` below 1 is the
    default)."""
    from queuetree.operator import settings

    workers = args.gate_removal_worker_num
    if workers < 1:
        workers = settings.DEFAULTS.gate_workers
    options: dict[str, Any] = {}
    if args.identity:
        options["identity"] = args.identity
    return settings.OperatorSettings(
        scheduler_config=scheduler_config,
        gate_workers=workers,
        qps=args.kube_api_qps,
        burst=args.kube_api_burst,
        cycle_period=args.schedule_period,
        metrics_port=args.metrics_port,
        health_port=args.health_port,
        leader_elect=args.leader_elect,
        lease_name=args.lock_object_name,
        lease_namespace=args.lock_object_namespace,
        lease_duration=args.leader_elect_lease_duration,
        renew_deadline=args.leader_elect_renew_deadline,
        retry_period=args.leader_elect_retry_period,
        inqueue_timeout=args.inqueue_timeout,
        native_pod_groups=args.native_pod_groups,
        **flags.shared(args),
        **options,
    )


def run(args: argparse.Namespace) -> int:
    import uvloop

    from queuetree.operator import running

    try:
        scheduler_config = load_config(args.config)
    except (OSError, ValueError) as error:
        print(f"queuetree operator: --config={args.config}: {error}", file=sys.stderr)
        return 2
    config = build_settings(args, scheduler_config)
    tune_interpreter()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    # kopf logs every successful watch-event handler at INFO: one line per queue, pod group and
    # node event (every status write echoes back as one), which says nothing; its warnings and
    # errors about objects still show.
    logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    try:
        # uvloop: the operator's CPU goes mostly to sockets, TLS and HTTP (a watch event and a
        # gate removal per pod), which cost less on uvloop's event loop than on asyncio's
        # (measured in docs/operator.md, Benchmark).
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(running.run(config))
    except OSError as error:
        if error.errno not in (errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES):
            raise
        print(
            f"queuetree operator: cannot listen (--metrics-port={args.metrics_port}, "
            f"--health-port={args.health_port}): {error.strerror or error}; choose a free port "
            "or stop what uses it",
            file=sys.stderr,
        )
        return 2
    return 0
