"""``queuetree webhook``: the admission webhook server, and the review flags it shares with
``queuetree review``.

Every flag is documented in docs/webhook.md. Names follow Kubernetes and Volcano components
(``--tls-cert-file``, ``--max-queue-depth``...); booleans take ``--flag``, ``--flag=true`` and
``--flag=false``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import sys
from collections.abc import Callable

from queuetree.cli import flags
from queuetree.core import objects
from queuetree.webhooks import certificates, listening, reviewing, server
from queuetree.webhooks import settings as settings_

LIMITS = listening.DEFAULTS
"""The defaults of the transport limits: the flags below take theirs from here."""


def add_review_flags(parser: argparse.ArgumentParser) -> None:
    """The flags that change answers (shared by ``webhook`` and ``review``)."""
    group = parser.add_argument_group("review rules")
    group.add_argument(
        "--max-queue-depth",
        type=_queue_depth,
        default=5,
        metavar="N",
        help="most queue levels below root; a child of root is level 1 (default 5, at most "
        f"{objects.MAX_QUEUE_DEPTH})",
    )
    flags.add_bool_flag(
        group,
        "--enable-root-queue-protection",
        default=True,
        help="refuse changes to the root queue's capability, deserved and guarantee",
    )
    flags.add_bool_flag(
        group,
        "--enable-queue-allocated-pods-check",
        default=True,
        help="refuse deleting a queue whose status.allocated (or status.reserved) still counts "
        "pods (Volcano's default: false)",
    )
    group.add_argument(
        "--default-queue",
        type=_queue_name,
        default=objects.DEFAULT_QUEUE,
        metavar="NAME",
        help="queue of opted-in pods and PodGroups that name none, which cannot be deleted; "
        'give the operator the same value (default "default", fixed in Volcano)',
    )
    group.add_argument(
        "--operator-username",
        default=settings_.OPERATOR_USERNAME,
        metavar="USER",
        help="the only user that may remove the queue-allocation gate from pods: the "
        f"operator's ServiceAccount (default {settings_.OPERATOR_USERNAME})",
    )
    flags.add_scheduler_name_flag(
        group,
        help="schedulers that place admitted pods; an opted-in pod for another one gets a "
        "warning at creation (give the operator the same value)",
    )
    flags.add_adopt_scheduler_names_flag(
        group,
        help="pods created with one of these spec.schedulerName values (Volcano's, as its "
        "integrations write it) are opted in, handed to the first --scheduler-name and gated; "
        "the pod webhook configurations' matchConditions must send them (give the operator "
        "the same value)",
    )
    flags.add_native_pod_groups_flag(
        group,
        help="name, in every opted-in pod of a PodGroup, the scheduling.k8s.io PodGroup of the "
        "same name, so kube-scheduler places its gang all or nothing (give the operator the "
        "same value; queuetree review: auto is false)",
    )
    flags.add_feature_gates_flag(parser)
    add_body_limit_flags(parser)


def add_body_limit_flags(parser: argparse.ArgumentParser) -> None:
    """What a review body may be (shared by ``webhook`` and ``review``: both run the same
    checks before any review work)."""
    group = parser.add_argument_group("request body limits")
    _add_limit_flags(group, LIMITS.body, BODY_FLAGS)


def body_limits_from(args: argparse.Namespace) -> reviewing.BodyLimits:
    return reviewing.BodyLimits(**{flag.field: getattr(args, flag.field) for flag in BODY_FLAGS})


@dataclasses.dataclass(frozen=True, slots=True)
class LimitFlag:
    """A flag that sets one field of ``listening.Limits`` or ``reviewing.BodyLimits``; its
    default is the field's (the one place it is written) and appears in its help."""

    name: str
    field: str
    type: Callable[[str], float]
    metavar: str
    help: str


TRANSPORT_FLAGS = (
    LimitFlag(
        "--http-header-timeout",
        "header_timeout",
        flags.positive_seconds,
        "SECONDS",
        "time for the TLS handshake, and then for a request's headers",
    ),
    LimitFlag(
        "--http-idle-timeout",
        "idle_timeout",
        flags.positive_seconds,
        "SECONDS",
        "longest silence while a request body arrives",
    ),
    LimitFlag(
        "--http-request-timeout",
        "request_timeout",
        flags.positive_seconds,
        "SECONDS",
        "time from a request's first byte to its answer; keep it below the webhooks' "
        "timeoutSeconds",
    ),
    LimitFlag(
        "--http-keepalive-timeout",
        "keepalive_timeout",
        flags.positive_seconds,
        "SECONDS",
        "how long an idle keep-alive connection is kept",
    ),
    LimitFlag(
        "--max-connections",
        "max_connections",
        flags.positive_int,
        "N",
        "connections open at once, TLS handshakes included; more wait to be accepted",
    ),
    LimitFlag(
        "--max-connection-rate",
        "max_connection_rate",
        flags.positive_seconds,
        "PER_SECOND",
        "new connections accepted per second, in bursts of a tenth of that; more wait to be "
        "accepted",
    ),
)
BODY_FLAGS = (
    LimitFlag(
        "--max-request-body-bytes",
        "max_bytes",
        flags.positive_int,
        "BYTES",
        "largest request body (3 MiB, kube-apiserver's largest object, plus 256 KiB); larger "
        "ones get 413 unread",
    ),
    LimitFlag(
        "--max-json-depth",
        "max_depth",
        flags.positive_int,
        "N",
        "deepest nesting of JSON arrays and objects",
    ),
    LimitFlag(
        "--max-json-elements",
        "max_elements",
        flags.positive_int,
        "N",
        "most '[', '{' and ',' characters in a body, counted before decoding",
    ),
)


def _add_limit_flags(
    group: argparse._ArgumentGroup, defaults: object, table: tuple[LimitFlag, ...]
) -> None:
    for flag in table:
        default = getattr(defaults, flag.field)
        group.add_argument(
            flag.name,
            dest=flag.field,
            type=flag.type,
            default=default,
            metavar=flag.metavar,
            help=f"{flag.help} (default {default:g})"
            if isinstance(default, float)
            else f"{flag.help} (default {default})",
        )


def settings_from(args: argparse.Namespace) -> settings_.ReviewSettings:
    return settings_.ReviewSettings(
        max_queue_depth=args.max_queue_depth,
        enable_root_queue_protection=args.enable_root_queue_protection,
        enable_queue_allocated_pods_check=args.enable_queue_allocated_pods_check,
        operator_username=args.operator_username,
        native_pod_groups=args.native_pod_groups == "true",
        **flags.shared(args),
    )


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "webhook",
        help="run the admission webhook server (queues and pods)",
        description="The admission webhook server: queue validation and mutation, gate "
        "injection for opted-in pods, pod queue checks. TLS only. See docs/webhook.md.",
    )
    serving = parser.add_argument_group("serving")
    serving.add_argument("--port", type=_port, default=9443, help="HTTPS port (default 9443)")
    serving.add_argument(
        "--bind-address", default="0.0.0.0", help="address to listen on (default 0.0.0.0)"
    )
    serving.add_argument(
        "--metrics-port",
        type=_port,
        default=0,
        help="plain-HTTP port for /metrics, /healthz and /readyz; 0 serves them only on the "
        "HTTPS port (default 0)",
    )
    serving.add_argument(
        "--health-port",
        type=_port,
        default=0,
        help="plain-HTTP port for the liveness probe /healthz, answered by a thread so that a "
        "busy event loop does not fail it; 0 serves none (default 0)",
    )
    _add_limit_flags(serving, LIMITS, TRANSPORT_FLAGS)
    serving.add_argument(
        "--shutdown-delay",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="after SIGTERM, keep answering (with /readyz failing) this long so that callers "
        "stop routing here first (default 5)",
    )
    serving.add_argument(
        "--tls-min-version",
        choices=("VersionTLS12", "VersionTLS13"),
        default="VersionTLS12",
        help="lowest TLS version accepted (default VersionTLS12)",
    )
    certs = parser.add_argument_group("certificates")
    certs.add_argument(
        "--cert-mode",
        choices=("files", "self-managed", "cert-manager"),
        default="files",
        help="files: serve --tls-cert-file/--tls-private-key-file and reload them when they "
        "change; self-managed: generate a CA and serving certificate, keep them in a Secret "
        "and inject the CA into the webhook configurations; cert-manager: read the Secret "
        "cert-manager writes, write nothing (default files)",
    )
    certs.add_argument("--tls-cert-file", metavar="FILE", help="serving certificate (PEM)")
    certs.add_argument("--tls-private-key-file", metavar="FILE", help="its private key (PEM)")
    certs.add_argument(
        "--cert-check-interval",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="how often to look for rotated certificate files or a renewed Secret (default 10)",
    )
    certs.add_argument(
        "--secret-name",
        default="queuetree-webhook-certs",
        help="self-managed and cert-manager: the Secret holding the serving certificate",
    )
    certs.add_argument(
        "--service-name",
        default="queuetree-webhook",
        help="self-managed: the Service the certificate is for",
    )
    certs.add_argument(
        "--cert-extra-sans",
        type=_sans,
        default=(),
        metavar="SAN,...",
        help="self-managed: more subject alternative names for the serving certificate, IP "
        "addresses or DNS names, comma-separated (for a webhook reached by clientConfig.url)",
    )
    certs.add_argument(
        "--namespace",
        default=os.environ.get("POD_NAMESPACE", "queuetree-system"),
        help="namespace of the Secret and the Service (default $POD_NAMESPACE or queuetree-system)",
    )
    certs.add_argument(
        "--mutating-webhook-config-name",
        default="queuetree-mutating-webhook",
        help="self-managed: MutatingWebhookConfiguration whose caBundle to keep current",
    )
    certs.add_argument(
        "--validating-webhook-config-name",
        default="queuetree-validating-webhook",
        help="self-managed: ValidatingWebhookConfiguration whose caBundle to keep current",
    )
    cluster = parser.add_argument_group("cluster")
    cluster.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help="kubeconfig to use (default: in-cluster, then $KUBECONFIG, then ~/.kube/config)",
    )
    flags.add_bool_flag(
        cluster,
        "--watch-nodes",
        default=False,
        help="watch nodes (only the names of the resources they offer) to warn when a root "
        "capability omits one, or a quota names one no node offers; needs nodes list/watch",
    )
    cluster.add_argument(
        "--cache-wait",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="how long a review waits for a queue it does not know yet to reach the cache "
        "before answering that it does not exist (default 1)",
    )
    add_review_flags(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.cert_mode == "files" and not (args.tls_cert_file and args.tls_private_key_file):
        print(
            "queuetree webhook: --cert-mode=files needs --tls-cert-file and "
            "--tls-private-key-file (or use --cert-mode=self-managed)",
            file=sys.stderr,
        )
        return 2
    config = server.ServerConfig(
        port=args.port,
        bind_address=args.bind_address,
        metrics_port=args.metrics_port,
        health_port=args.health_port,
        limits=listening.Limits(
            **{flag.field: getattr(args, flag.field) for flag in TRANSPORT_FLAGS},
            body=body_limits_from(args),
        ),
        tls_min_version=args.tls_min_version,
        cert_mode=args.cert_mode,
        tls_cert_file=args.tls_cert_file,
        tls_private_key_file=args.tls_private_key_file,
        cert_check_interval=args.cert_check_interval,
        secret_name=args.secret_name,
        service_name=args.service_name,
        cert_extra_sans=args.cert_extra_sans,
        namespace=args.namespace,
        mutating_webhook_config_name=args.mutating_webhook_config_name,
        validating_webhook_config_name=args.validating_webhook_config_name,
        kubeconfig=args.kubeconfig,
        cache_wait=args.cache_wait,
        shutdown_delay=args.shutdown_delay,
        native_pod_groups=args.native_pod_groups,
        watch_nodes=args.watch_nodes,
        settings=settings_from(args),
    )
    return server.main(config)


def _sans(text: str) -> tuple[str, ...]:
    sans = tuple(s.strip() for s in text.split(",") if s.strip())
    try:
        certificates.split_sans(sans)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return sans


def _queue_depth(text: str) -> int:
    """1 to ``objects.MAX_QUEUE_DEPTH``: the operator admits nothing in a deeper queue, so a
    larger limit would let the webhook accept queues that can never run a pod."""
    value = flags.parse_as(int, text, what="an integer")
    if not 1 <= value <= objects.MAX_QUEUE_DEPTH:
        raise argparse.ArgumentTypeError(
            f"must be from 1 to {objects.MAX_QUEUE_DEPTH} (the deepest queue queuetree "
            f"admits pods in), got {value}"
        )
    return value


def _port(text: str) -> int:
    value = flags.parse_as(int, text, what="a port number")
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port out of range: {value}")
    return value


_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _queue_name(text: str) -> str:
    """A name a Queue can have (a DNS subdomain of at most 253 characters), except ``root``:
    pods are never admitted through root, so a default queue named so would refuse them all."""
    if text == objects.ROOT_QUEUE:
        raise argparse.ArgumentTypeError(
            "the root queue cannot be the default queue: pods are admitted through leaf queues"
        )
    if len(text) > 253 or not _DNS_SUBDOMAIN.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"not a queue name: {text!r} (lower-case letters, digits, '-' and '.', "
            "starting and ending with a letter or digit, at most 253 characters)"
        )
    return text
