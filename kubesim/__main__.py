"""`python -m kubesim`: serve until interrupted, for the sandbox and for shells.

    python -m kubesim --port-file /tmp/ks.port --kubeconfig-out /tmp/ks.kubeconfig \
        [--simulate --node gpu-1=cpu=8,memory=32Gi,nvidia.com/gpu=4 --nodes-file nodes.yaml]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import pathlib
import signal
import sys
import tempfile
from typing import Any

from kubesim import kubeconfigs, server


def parse_node(text: str) -> dict:
    """A `--node` flag as a Node manifest (`simulation.parse_node_flag` does the work).

    Both `NAME:cpu=8,memory=32Gi` and `NAME=cpu=8,memory=32Gi` are accepted: a node name cannot
    contain `=`, so an `=` before any `:` ends the name.
    """
    simulation = importlib.import_module("kubesim.simulation")
    equals, colon = text.find("="), text.find(":")
    if equals != -1 and (colon == -1 or equals < colon):
        text = text[:equals] + ":" + text[equals + 1 :]
    try:
        return simulation.parse_node_flag(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _flag_bool(value: str) -> bool:
    if value.lower() in ("1", "t", "true", "yes"):
        return True
    if value.lower() in ("0", "f", "false", "no"):
        return False
    raise argparse.ArgumentTypeError(f"not a boolean: {value!r}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m kubesim", description="Kubernetes API server emulator"
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--port-file", help="write the port here once serving")
    parser.add_argument("--kubeconfig-out", help="write a kubeconfig for this server here")
    parser.add_argument(
        "--env-out",
        help="write `export KUBECONFIG=... KUBECACHEDIR=...` here, for a shell to source",
    )
    parser.add_argument("--token", default="admin", help="bearer token written to the kubeconfig")
    parser.add_argument(
        "--tls",
        nargs="?",
        const=True,
        default=False,
        type=_flag_bool,
        help="serve HTTPS with a fresh CA (written into the kubeconfig); kubectl sends bearer "
        "tokens only over HTTPS",
    )
    parser.add_argument(
        "--bookmark-interval", type=float, default=10.0, help="seconds between watch bookmarks"
    )
    parser.add_argument(
        "--simulate",
        nargs="?",
        const=True,
        default=False,
        type=_flag_bool,
        help="run the simulated scheduler and kubelet",
    )
    parser.add_argument("--scheduler", nargs="?", const=True, default=True, type=_flag_bool)
    parser.add_argument("--kubelet", nargs="?", const=True, default=True, type=_flag_bool)
    parser.add_argument(
        "--node", action="append", type=parse_node, default=[], metavar="NAME=cpu=8,memory=32Gi,..."
    )
    parser.add_argument(
        "--nodes-file", action="append", default=[], help="YAML file of Node manifests"
    )
    return parser


def simulation_options(args: argparse.Namespace) -> Any:
    if not args.simulate:
        return None
    simulation = importlib.import_module("kubesim.simulation")
    nodes = list(args.node)
    for path in args.nodes_file:
        nodes.extend(simulation.load_nodes_file(path))
    return simulation.SimulationOptions(nodes=nodes, scheduler=args.scheduler, kubelet=args.kubelet)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    sim = server.KubeSim(
        host=args.host,
        port=args.port,
        token=args.token,
        bookmark_interval=args.bookmark_interval,
        simulate=simulation_options(args),
        tls=args.tls,
    )
    cache = tempfile.TemporaryDirectory(prefix="kubesim-cache-")  # removed when serving ends
    cache_dir = cache.name

    def ready(running: server.KubeSim) -> None:
        if args.kubeconfig_out:
            kubeconfigs.write_kubeconfig(
                pathlib.Path(args.kubeconfig_out),
                url=running.url,
                token=running.token,
                ca_bundle=running.ca_bundle,
            )
        if args.env_out and args.kubeconfig_out:
            env = pathlib.Path(args.env_out)
            kubeconfig = pathlib.Path(args.kubeconfig_out).resolve()
            env.write_text(f"export KUBECONFIG={kubeconfig}\nexport KUBECACHEDIR={cache_dir}\n")
        if args.port_file:
            tmp = pathlib.Path(args.port_file + ".tmp")
            tmp.write_text(str(running.port))
            os.replace(tmp, args.port_file)
        print(f"kubesim serving on {running.url}", flush=True)
        if args.kubeconfig_out:
            print(f"export KUBECONFIG={args.kubeconfig_out} KUBECACHEDIR={cache_dir}", flush=True)

    async def run() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, sim.stop_soon)
        await sim.serve(on_ready=ready)

    with cache:
        asyncio.run(run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
