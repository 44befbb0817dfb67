"""``python -m controlplane build|sync|paths|up``: the control plane's build and a shell cluster.

- ``build`` (``make controlplane``): every component and tool (helm) from the cache, built
  first if missing; ``build --peers`` (``make controlplane-peers``) builds the peers compared
  with queuetree (Kueue) instead, which ``make controlplane`` and ``make test`` never build.
  Exit 0 when all are cached; 1 when a build failed (the message names the module and the
  reason); 3 when there is no ``go`` command (callers decide whether that skips or fails).
- ``sync [--kubernetes vX.Y.Z]``: regenerate the kubernetes wrapper's staging replace lines
  from the kubernetes module's own go.mod, then ``go mod tidy``.
- ``paths``: the cached binaries as JSON (nothing is built).
- ``up --workdir DIR``: start a cluster and serve until Ctrl-C (``source DIR/env``).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import signal
import sys
import threading

from controlplane import building

EXIT_NO_GO = 3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m controlplane", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser(
        "build", help="build every component into the cache (a no-op if cached)"
    )
    build.add_argument(
        "--peers", action="store_true", help="build the peers (Kueue) instead of the components"
    )
    sync = commands.add_parser("sync", help="regenerate the kubernetes staging replace lines")
    sync.add_argument("--kubernetes", metavar="VERSION", help="move to this k8s.io/kubernetes")
    commands.add_parser("paths", help="print the cached binaries as JSON")
    up = commands.add_parser("up", help="start a cluster and serve until Ctrl-C")
    up.add_argument("--workdir", type=pathlib.Path, required=True)
    up.add_argument("--nodes-file", type=pathlib.Path, action="append", default=[])
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            building.build_all(
                building.PEERS if args.peers else (*building.COMPONENTS, *building.TOOLS)
            )
        elif args.command == "sync":
            for edit in building.sync_kubernetes(args.kubernetes):
                print(f"go mod edit {edit}")
        elif args.command == "paths":
            found = {
                **(building.find_all((*building.COMPONENTS, *building.TOOLS)) or {}),
                **{c.name: b for c in building.PEERS if (b := building.find(c)) is not None},
            }
            if not all(c.name in found for c in (*building.COMPONENTS, *building.TOOLS)):
                found = {}
            if not found:
                print("controlplane: not built yet (make controlplane)", file=sys.stderr)
                return 1
            print(
                json.dumps(
                    {
                        name: {
                            "version": built.version,
                            "directory": str(built.directory),
                            **{b: str(built.binary(b)) for b, _ in built.component.binaries},
                        }
                        for name, built in found.items()
                    },
                    indent=2,
                )
            )
        elif args.command == "up":
            return _up(args.workdir, tuple(args.nodes_file))
    except building.GoMissing as exc:
        print(f"controlplane: {exc}", file=sys.stderr)
        return EXIT_NO_GO
    except building.BuildError as exc:
        print(f"controlplane: build failed: {exc}", file=sys.stderr)
        return 1
    return 0


def _up(workdir: pathlib.Path, nodes_files: tuple[pathlib.Path, ...]) -> int:
    from controlplane import cluster

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    options = cluster.Options(workdir=workdir.resolve(), nodes_files=nodes_files)
    with cluster.running(options) as running:
        env = workdir / "env"
        env.write_text(f"export KUBECONFIG={running.kubeconfig}\n")
        print(f"control plane up: source {env}", flush=True)
        stop.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
