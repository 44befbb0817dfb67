"""``queuetree sandbox``: a cluster, the webhook and the operator on this machine (``make run``).

    queuetree sandbox                                   # the demo, live, until Ctrl-C
    queuetree sandbox --scenario FILE                   # another scenario, live
    queuetree sandbox --scenario FILE --until-settled   # run it to the end; exit 0 if it held
    queuetree sandbox --backend real                    # the same on the real control plane
    queuetree sandbox --backend real --peer kueue       # ... with Kueue beside queuetree
    queuetree sandbox --no-demo --headless --env-out F  # an empty stack for other tools

It starts the backend (kubesim with simulated nodes, scheduler and kubelet; or, with
``--backend real``, etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok
built by ``make controlplane``), installs the sandbox overlay with kubectl, starts the webhook
(TLS, self-managed certificates) and the operator, prints the kubeconfig path, runs the
scenario's steps, and then either shows the queue tree live until interrupted or, with
``--until-settled``, waits until nothing changes any more and checks the scenario's
expectations. ``--headless`` shows nothing: it writes ``KUBECONFIG=...`` to ``--env-out``
once the stack is ready and serves until SIGINT or SIGTERM. Exit codes: 0 everything held,
1 a step or an expectation failed or the stack did not start, 2 the command line or the
scenario file is not understood. See docs/sandbox.md.

``--serve-kubesim SPEC`` (hidden) is the kubesim process of the stack: the only place in
queuetree that imports kubesim, and it runs in a process of its own.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import dataclasses
import importlib.util
import json
import pathlib
import signal
import sys
import tempfile
import threading
import time
from typing import Any

from controlplane import karpenter
from queuetree.cli import flags
from queuetree.sandbox import scenarios, stack, view

NAME = "sandbox"
DEFAULT_SCENARIO = stack.REPO / "examples" / "sandbox" / "demo.yaml"


def add_parser(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        NAME,
        help="run the local sandbox: kubesim, the webhook and the operator (make run)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    flags.add_values(
        parser,
        (
            "--scenario",
            pathlib.Path,
            DEFAULT_SCENARIO,
            "FILE",
            "scenario file (YAML; docs/sandbox.md); default: examples/sandbox/demo.yaml",
        ),
    )
    parser.add_argument(
        "--backend",
        choices=stack.BACKENDS,
        default="kubesim",
        help="kubesim: the in-repo emulator (default); real: kube-apiserver, etcd, "
        "kube-controller-manager, kube-scheduler and kwok from their Go modules "
        "(built and cached by make controlplane; needs Go)",
    )
    flags.add_values(
        parser,
        (
            "--config",
            pathlib.Path,
            stack.SCHEDULER_CONFIG,
            "SCHED.conf",
            "the operator's scheduler configuration (volcano-scheduler.conf format; "
            "default: the Deployment's, manifests/base/workloads/scheduler.conf)",
        ),
    )
    parser.add_argument(
        "--autoscaler",
        action="store_true",
        help="with --backend real: run Karpenter with its kwok provider as the cluster's "
        "autoscaler (nodes bought for Unschedulable pods, consolidated when empty; built by "
        "make controlplane; docs/sandbox.md)",
    )
    parser.add_argument(
        "--peer",
        action="append",
        choices=("kueue",),
        default=[],
        help="with --backend real: start this peer beside queuetree (kueue: Kueue v0.17.0, "
        "built by make controlplane-peers, or here on first use; its pod integration admits "
        "pods labelled kueue.x-k8s.io/queue-name; docs/sandbox.md)",
    )
    parser.add_argument(
        "--no-demo",
        action="store_true",
        help="apply no scenario: an empty cluster (with the scenario's nodes, or the example "
        "nodes) and queuetree",
    )
    parser.add_argument(
        "--headless",
        action="store_true",
        help="no live view: write KUBECONFIG=... to --env-out once ready, then serve until "
        "SIGINT or SIGTERM",
    )
    flags.add_values(
        parser,
        (
            "--env-out",
            pathlib.Path,
            None,
            "FILE",
            "with --headless: where to write KUBECONFIG=PATH (one line) once the stack is ready",
        ),
    )
    parser.add_argument(
        "--until-settled",
        action="store_true",
        help="run the scenario, wait until the cluster settles, check its expectations, exit",
    )
    flags.add_values(
        parser,
        (
            "--workdir",
            pathlib.Path,
            None,
            "DIR",
            "kubeconfigs and logs go here (default: a new temporary directory, removed at exit)",
        ),
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep the temporary work directory (kubeconfigs, logs) at exit; a --workdir is "
        "always kept",
    )
    flags.add_values(
        parser,
        ("--refresh", float, 1.0, "SECONDS", "live view refresh period (default 1)"),
        (
            "--settle",
            float,
            None,
            "SECONDS",
            "how long nothing may change for the cluster to count as settled "
            "(default: the scenario's, else 3)",
        ),
    )
    parser.add_argument("--serve-kubesim", default=None, help=argparse.SUPPRESS)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if (args.serve_kubesim or args.backend == "kubesim") and importlib.util.find_spec(
        "kubesim"
    ) is None:
        print(
            "queuetree sandbox: kubesim is not installed (the production image ships without "
            "it): run the sandbox from a checkout of queuetree (make run)",
            file=sys.stderr,
        )
        return 2
    if args.serve_kubesim:
        return serve_kubesim(pathlib.Path(args.serve_kubesim))
    problem = _option_problem(args)
    if problem:
        print(f"queuetree sandbox: {problem}", file=sys.stderr)
        return 2
    try:
        scenario = scenarios.load(args.scenario)
    except scenarios.ScenarioError as exc:
        print(f"queuetree sandbox: {exc}", file=sys.stderr)
        return 2
    if args.workdir is not None:
        return _run_in(args, scenario, args.workdir.resolve())
    if args.keep:
        directory = tempfile.mkdtemp(prefix="queuetree-sandbox-")
        try:
            return _run_in(args, scenario, pathlib.Path(directory))
        finally:
            print(f"queuetree sandbox: kept {directory}", file=sys.stderr)
    # Removed at exit, whatever happens: logs of a failed start are printed before.
    with tempfile.TemporaryDirectory(
        prefix="queuetree-sandbox-", ignore_cleanup_errors=True
    ) as directory:
        return _run_in(args, scenario, pathlib.Path(directory))


def _option_problem(args: argparse.Namespace) -> str | None:
    if args.headless and args.env_out is None:
        return "--headless needs --env-out FILE (where KUBECONFIG=... is written once ready)"
    if args.env_out is not None and not args.headless:
        return "--env-out is only for --headless"
    if args.headless and args.until_settled:
        return "--headless and --until-settled exclude each other"
    if args.no_demo and args.until_settled:
        return "--no-demo applies no scenario, so there is nothing to settle (drop --until-settled)"
    if args.autoscaler and args.backend != "real":
        return "--autoscaler needs --backend real (Karpenter runs against the real control plane)"
    if args.peer and args.backend != "real":
        return (
            f"--peer {args.peer[0]} needs --backend real (it runs against the real control plane)"
        )
    if not args.config.is_file():
        return f"--config {args.config}: no such file"
    return None


def _run_in(args: argparse.Namespace, scenario: scenarios.Scenario, workdir: pathlib.Path) -> int:
    # SIGTERM ends the sandbox like Ctrl-C: through KeyboardInterrupt, so every `finally` runs.
    # SIGINT is set too: a shell starts background jobs with it ignored, and Python keeps that.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # A scenario that names no nodes gets the example GPU cluster rather than none at all.
    named = scenario.nodes_files or scenario.node_flags
    options = stack.Options(
        workdir=workdir,
        nodes_files=scenario.nodes_files if named else (stack.DEFAULT_NODES,),
        node_flags=scenario.node_flags,
        scheduler_config=args.config.resolve(),
        backend=args.backend,
        autoscaler=karpenter.Options() if args.autoscaler else None,
        peers=tuple(dict.fromkeys(args.peer)),
    )
    backend = "kubesim" if args.backend == "kubesim" else "the real control plane"
    print(
        f"queuetree sandbox: starting {backend}, the webhook and the operator in {workdir}",
        flush=True,
    )
    try:
        running = stack.start(options)
    except stack.StartupError as exc:
        print(f"queuetree sandbox: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    try:
        banner = where(running, workdir)
        for line in banner:
            print(line, flush=True)
        settle = args.settle if args.settle is not None else scenario.settle
        runner = scenarios.Runner(running.kubectl, settle=settle, log=_log)
        if args.headless:
            _write_env(args.env_out, running)
            if not args.no_demo:
                threading.Thread(
                    target=runner.run_steps, args=(scenario,), name="scenario", daemon=True
                ).start()
            _serve(running)
            return 0
        if args.until_settled:
            failures = runner.run(scenario)
            return _report(scenario, failures)
        # Live: the steps run in a thread while the view redraws; their progress is the
        # view's footer, so a long `wait` step never freezes the screen.
        notes: collections.deque[str] = collections.deque(maxlen=6)
        runner.log = notes.append

        def show() -> None:
            view.live(
                running.kubectl,
                refresh=args.refresh,
                alive=running.check_alive,
                notes=notes,
                banner=banner,
            )

        if args.no_demo:
            show()
            return 0

        def steps() -> None:
            failures = runner.run_steps(scenario)
            notes.extend(f"FAILED {failure}" for failure in failures)
            notes.append("scenario steps done" if not failures else "scenario stopped")

        threading.Thread(target=steps, name="scenario", daemon=True).start()
        show()
        return 0
    except KeyboardInterrupt:
        print("\nqueuetree sandbox: stopping", file=sys.stderr)
        return 0
    except stack.StartupError as exc:
        print(f"queuetree sandbox: a component stopped: {exc}", file=sys.stderr)
        return 1
    finally:
        running.stop()


def where(running: stack.Stack, workdir: pathlib.Path) -> list[str]:
    """What a person needs to look around from another terminal: the kubeconfig, the ports."""
    return [
        f"export KUBECONFIG={running.kubeconfig}",
        f"  (kubectl get queues; kubectl queuetree tree; logs in {workdir / 'logs'})",
        f"  webhook https://127.0.0.1:{running.webhook_port}  "
        f"metrics: operator http://127.0.0.1:{running.operator_metrics_port}/metrics, "
        f"webhook http://127.0.0.1:{running.webhook_metrics_port}/metrics",
    ]


def _write_env(path: pathlib.Path, running: stack.Stack) -> None:
    """``KUBECONFIG=PATH`` in ``path``, written whole at once (a reader polling for the file
    never sees half a line)."""
    path = path.resolve()
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(f"KUBECONFIG={running.kubeconfig}\n")
    tmp.replace(path)


def _serve(running: stack.Stack) -> None:
    """Until SIGINT or SIGTERM (KeyboardInterrupt here), or until a component stops."""
    while True:
        running.check_alive()
        time.sleep(1.0)


def _log(text: str) -> None:
    print(text, flush=True)


def _report(scenario: scenarios.Scenario, failures: list[str]) -> int:
    if failures:
        for failure in failures:
            print(f"queuetree sandbox: {scenario.name}: {failure}", file=sys.stderr)
        return 1
    print(f"queuetree sandbox: {scenario.name}: every expectation held", flush=True)
    return 0


# --------------------------------------------------------------------------- the kubesim process


def serve_kubesim(spec_path: pathlib.Path) -> int:
    """Serve kubesim as the stack's ``Options`` describe it (a JSON spec from ``stack``) until
    SIGTERM or SIGINT; the audit log is appended to the spec's ``auditFile`` as it grows."""
    from kubesim import server, simulation

    spec = json.loads(spec_path.read_text())
    nodes: list[dict[str, Any]] = []
    for path in spec.get("nodesFiles", []):
        nodes.extend(simulation.load_nodes_file(path))
    nodes.extend(simulation.parse_node_flag(flag) for flag in spec.get("nodeFlags", []))
    services = {
        (s["namespace"], s["name"], int(s["port"])): (s["host"], int(s["targetPort"]))
        for s in spec.get("services", [])
    }

    def resolve(namespace: str, name: str, port: int) -> tuple[str, int]:
        try:
            return services[(namespace, name, port)]
        except KeyError:
            raise LookupError(f"no endpoints for service {namespace}/{name}:{port}") from None

    sim = server.KubeSim(
        token=spec["adminToken"],
        users=spec.get("users", {}),
        service_resolver=resolve,
        simulate=simulation.SimulationOptions(nodes=nodes),
        tls=True,
    )
    audit_path = pathlib.Path(spec["auditFile"])
    port_file = pathlib.Path(spec["portFile"])
    written = 0
    lock = threading.Lock()

    def flush_audit() -> None:
        nonlocal written
        with lock:
            records = sim.audit()
            fresh = records[written:]
            if fresh:
                with audit_path.open("a") as out:
                    for record in fresh:
                        out.write(json.dumps(dataclasses.asdict(record)) + "\n")
                written = len(records)

    def ready(running: server.KubeSim) -> None:
        # The CA first: the stack reads it as soon as the port file appears.
        ca_file = pathlib.Path(spec["caFile"])
        ca_tmp = ca_file.with_name(ca_file.name + ".tmp")
        ca_tmp.write_text(running.ca_bundle or "")
        ca_tmp.replace(ca_file)
        tmp = port_file.with_name(port_file.name + ".tmp")
        tmp.write_text(str(running.port))
        tmp.replace(port_file)

    async def flush_forever() -> None:
        # Once a second: readers of a running sandbox see recent calls, and copying kubesim's
        # whole log stays cheap even after hours of traffic.
        while True:
            await asyncio.sleep(1.0)
            flush_audit()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, sim.stop_soon)
        flusher = loop.create_task(flush_forever())
        try:
            await sim.serve(on_ready=ready)
        finally:
            flusher.cancel()
            flush_audit()

    asyncio.run(main())
    return 0
