"""``queuetree sandbox``: scenario files, the live table, and the command end to end.

The pure parts (reading scenarios, checking conditions, rendering the table) are tables; the
command itself runs the real stack (kubesim, the TLS webhook, the operator) as a user would:
``--until-settled`` exits 0 when every expectation holds and 1 naming the one that does not,
a scenario it cannot read exits 2 before starting anything, and SIGINT on the live view stops
every process it started.
"""

from __future__ import annotations

import os
import pathlib
import signal
import socket
import subprocess
import sys
import textwrap
import time
from typing import Any, NamedTuple

import pytest

from queuetree.sandbox import observing, scenarios, view
from queuetree.views import trees

ROOT = pathlib.Path(__file__).resolve().parents[2]
GATE = "scheduling.volcano.sh/queue-allocation-gate"


def queue(name: str, parent: str = "root", **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"parent": parent}, "status": status}


def pod(
    name: str,
    *,
    queue_name: str = "team",
    gates: tuple[str, ...] = (),
    node: str = "",
    phase: str = "Pending",
    labels: dict[str, str] | None = None,
    reason: str = "",
) -> dict[str, Any]:
    # Opted in, as the sandbox's pods are: the tree counts only pods governed by queue admission.
    annotations = {"scheduling.volcano.sh/queue-name": queue_name, GATE: "true"}
    if reason:
        annotations[scenarios.REASON_ANNOTATION] = reason
    spec: dict[str, Any] = {"schedulingGates": [{"name": g} for g in gates]}
    if node:
        spec["nodeName"] = node
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "annotations": annotations,
            "labels": labels or {},
        },
        "spec": spec,
        "status": {"phase": phase},
    }


def observation(
    *pods: dict[str, Any],
    queues: tuple[dict[str, Any], ...] = (),
    evicted: dict[str, str] | None = None,
) -> Any:
    return observing.Observation(
        queues={q["metadata"]["name"]: q for q in queues},
        pods={f"ns/{p['metadata']['name']}": p for p in pods},
        pod_groups={},
        evicted=evicted or {},
    )


class StagesCase(NamedTuple):
    manifest: Any
    stage: Any


STAGES = {
    "our gate": StagesCase(manifest=pod("p", gates=(GATE,)), stage="gated"),
    "our gate and another": StagesCase(
        manifest=pod("p", gates=("example.com/x", GATE)), stage="gated"
    ),
    "no gate, no node": StagesCase(manifest=pod("p"), stage="admitted"),
    "on a node": StagesCase(manifest=pod("p", node="n1", phase="Running"), stage="running"),
    "bound, still Pending": StagesCase(manifest=pod("p", node="n1"), stage="running"),
    "finished": StagesCase(manifest=pod("p", node="n1", phase="Succeeded"), stage="succeeded"),
    "failed": StagesCase(manifest=pod("p", node="n1", phase="Failed"), stage="failed"),
}


@pytest.mark.parametrize(("manifest", "stage"), list(STAGES.values()), ids=list(STAGES))
def test_each_pod_is_in_exactly_one_stage(manifest: dict[str, Any], stage: str) -> None:
    assert observing.stage_of(manifest) == stage


TEAM = queue("team", state="Open", allocated={"cpu": "1500m", "memory": "1Gi"})


class ConditionsCase(NamedTuple):
    condition: Any
    problem: Any


CONDITIONS = {
    "a pod in the stage named": ConditionsCase(
        condition={"pod": "a", "namespace": "ns", "stage": "gated"}, problem=""
    ),
    "a pod in another stage": ConditionsCase(
        condition={"pod": "b", "namespace": "ns", "stage": "gated"},
        problem="pod ns/b: stage is running, expected gated",
    ),
    "a missing pod expected gone": ConditionsCase(
        condition={"pod": "zz", "namespace": "ns", "exists": False}, problem=""
    ),
    "a missing pod": ConditionsCase(
        condition={"pod": "zz", "namespace": "ns"}, problem="pod ns/zz does not exist"
    ),
    "exact gates": ConditionsCase(
        condition={"pod": "a", "namespace": "ns", "gates": [GATE]}, problem=""
    ),
    "an explanation saying": ConditionsCase(
        condition={"pod": "a", "namespace": "ns", "explained": "no room"}, problem=""
    ),
    "counts by label": ConditionsCase(
        condition={"pods": {"app": "x"}, "counts": {"gated": 1, "running": 1}}, problem=""
    ),
    "every gated pod explained": ConditionsCase(
        condition={"pods": {"app": "x"}, "explained": "no room"}, problem=""
    ),
    "a gated pod explained otherwise": ConditionsCase(
        condition={"pods": {"app": "x"}, "explained": "closed"},
        problem="pods {'app': 'x'}: gated without an explanation saying 'closed': ['ns/a']",
    ),
    "wrong counts": ConditionsCase(
        condition={"pods": {"app": "x"}, "counts": {"gated": 2}},
        problem="pods {'app': 'x'}: counts {'gated': 1}, expected {'gated': 2} "
        "(all: {'gated': 1, 'admitted': 0, 'running': 1, 'succeeded': 0, 'failed': 0, "
        "'evicted': 0})",
    ),
    "queue figures compared by value": ConditionsCase(
        condition={
            "queue": "team",
            "state": "Open",
            "allocated": {"cpu": "1.5", "memory": "1024Mi"},
        },
        problem="",
    ),
    "a resource the status lacks counts as zero": ConditionsCase(
        condition={"queue": "team", "allocated": {"nvidia.com/gpu": "0"}},
        problem="",
    ),
    "a wrong queue figure": ConditionsCase(
        condition={"queue": "team", "allocated": {"cpu": "2"}},
        problem="queue team: allocated is {'cpu': '1500m', 'memory': '1Gi'}, expected {'cpu': '2'}",
    ),
}


@pytest.mark.parametrize(("condition", "problem"), list(CONDITIONS.values()), ids=list(CONDITIONS))
def test_a_condition_says_exactly_what_differs(condition: dict[str, Any], problem: str) -> None:
    seen = observation(
        pod("a", gates=(GATE,), labels={"app": "x"}, reason="queue 'team' has no room for cpu"),
        pod("b", node="n1", phase="Running", labels={"app": "x"}),
        queues=(TEAM,),
    )
    assert scenarios.check(condition, seen) == problem


class BadScenariosCase(NamedTuple):
    text: Any
    says: Any


BAD_SCENARIOS = {
    "not a mapping": BadScenariosCase(
        text="- apply: x.yaml\n", says="expected a mapping with steps"
    ),
    "an unknown key": BadScenariosCase(
        text="name: x\nsteeps: []\n", says="unknown keys ['steeps']"
    ),
    "a step with two actions": BadScenariosCase(
        text="steps:\n- {wait: {queue: root}, expect: {queue: root}}\n",
        says="step 1: needs exactly one of apply, delete, patch, wait, expect",
    ),
    "a file that does not exist": BadScenariosCase(
        text="steps:\n- apply: nowhere.yaml\n",
        says="step 1: ",
    ),
    "a condition about nothing": BadScenariosCase(
        text="steps:\n- wait: {color: red}\n", says="step 1: a condition names"
    ),
    "a stage that does not exist": BadScenariosCase(
        text="steps:\n- wait: {pod: p, stage: sleeping}\n",
        says="step 1: stage 'sleeping' is not one of",
    ),
    "a delete without a kind": BadScenariosCase(
        text="steps:\n- delete: p\n", says="step 1: delete takes RESOURCE/NAME"
    ),
}


@pytest.mark.parametrize(("text", "says"), list(BAD_SCENARIOS.values()), ids=list(BAD_SCENARIOS))
def test_a_scenario_that_cannot_be_understood_exits_2_before_starting_anything(
    tmp_path: pathlib.Path, text: str, says: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    done = run_sandbox("--scenario", str(path), "--until-settled", timeout=30)
    assert (done.returncode, says in done.stderr, "starting" in done.stdout) == (2, True, False), (
        done.stderr
    )


class RealOnlyCase(NamedTuple):
    flags: Any
    says: Any


REAL_ONLY = {
    "the autoscaler": RealOnlyCase(
        flags=("--autoscaler",), says="--autoscaler needs --backend real"
    ),
    "Kueue as a peer": RealOnlyCase(
        flags=("--peer", "kueue"), says="--peer kueue needs --backend real"
    ),
}


@pytest.mark.parametrize(("flags", "says"), list(REAL_ONLY.values()), ids=list(REAL_ONLY))
def test_a_real_only_component_on_kubesim_exits_2_before_starting_anything(
    flags: tuple[str, ...], says: str
) -> None:
    done = run_sandbox(*flags, "--no-demo", timeout=30)
    assert (done.returncode, says in done.stderr) == (2, True), done.stderr


def test_every_example_scenario_is_understood() -> None:
    loaded = {
        path.name: len(scenarios.load(path).steps)
        for path in sorted((ROOT / "examples" / "sandbox").glob("*.yaml"))
        if path.name != "burst.yaml"
    }
    assert {name: count > 0 for name, count in loaded.items()} == {
        "demo.yaml": True,
        "tour.yaml": True,
    }


def test_the_table_shows_the_tree_the_figures_and_the_pods_of_each_subtree() -> None:
    seen = observation(
        pod("a", queue_name="left", gates=(GATE,)),
        pod("b", queue_name="left", node="n1", phase="Running"),
        pod("c", queue_name="right"),
        queues=(
            queue("root", "", state="Open", allocated={"cpu": "1"}),
            queue("dept", state="Open", allocated={"cpu": "1"}, reserved={"cpu": "500m"}),
            {
                "metadata": {"name": "left"},
                "spec": {"parent": "dept", "deserved": {"cpu": "1"}, "capability": {"cpu": "2"}},
                "status": {"state": "Open", "allocated": {"cpu": "1"}},
            },
            queue("right", "dept", state="Closed", reserved={"cpu": "500m"}),
        ),
        evicted={
            "ns/gone": "Evicted by queuetree reclaim: queue right uses more than its deserved "
            "share and pod ns/x of queue left is below its own; victim chosen by the capacity "
            "plugin with ancestorReclaimLevel=0"
        },
    )
    lines = view.render(seen)
    listing = view.listing_of(seen)
    assert (lines[:-2], lines[-1]) == (
        trees.to_text(listing).splitlines(),
        "pods: 1 gated, 1 admitted, 1 running, 0 succeeded, 0 failed, 1 evicted",
    )
    # The tree of kubectl queuetree tree: the subtree's pods and the closed queue.
    rows = {row.name: row for row in trees.build_rows(listing)}
    assert (dict(rows["dept"].counts), rows["right"].state, rows["left"].figures[0]) == (
        {"gated": 1, "admitted": 1, "running": 1},
        "Closed",
        trees.Figure(
            resource="cpu", allocated=1000.0, reserved=0.0, deserved=1000.0, capability=2000.0
        ),
    )


# --------------------------------------------------------------------------- the command


def run_sandbox(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "queuetree", "sandbox", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=ROOT,
    )


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def children_of(pid: int) -> set[int]:
    found = set()
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.add(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def logs_of(workdir: pathlib.Path) -> str:
    """The last lines of each component's log, for failure messages."""
    parts = []
    for log in sorted((workdir / "logs").glob("*.log")):
        parts.append(f"\n--- {log.name}\n" + "\n".join(log.read_text().splitlines()[-40:]))
    return "".join(parts)


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_until_settled_runs_the_tour_and_exits_0_when_every_expectation_holds(
    tmp_path: pathlib.Path,
) -> None:
    done = run_sandbox(
        "--scenario",
        str(ROOT / "examples" / "sandbox" / "tour.yaml"),
        "--until-settled",
        f"--workdir={tmp_path}",
        timeout=220,
    )
    port = int((tmp_path / "kubesim.port").read_text())
    assert (
        done.returncode,
        f"export KUBECONFIG={tmp_path / 'kubeconfig'}" in done.stdout,
        "tour: every expectation held" in done.stdout,
        port_open(port),
    ) == (0, True, True, False), done.stdout + done.stderr + logs_of(tmp_path)


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_until_settled_exits_1_naming_the_expectation_that_failed(tmp_path: pathlib.Path) -> None:
    scenario = tmp_path / "wrong.yaml"
    scenario.write_text(
        textwrap.dedent(
            """
            name: wrong
            nodeFlags: ["n1:cpu=1,memory=1Gi"]
            settle: 1
            steps:
              - wait: {queue: default, state: Open}
            expect:
              - {queue: root, state: Closed}
            """
        )
    )
    done = run_sandbox(
        "--scenario", str(scenario), "--until-settled", f"--workdir={tmp_path / 'w'}", timeout=170
    )
    assert (done.returncode, done.stderr.strip().splitlines()[-1]) == (
        1,
        "queuetree sandbox: wrong: expect 1: queue root: state is Open, expected Closed",
    )


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_ctrl_c_on_the_live_view_stops_every_process_it_started(tmp_path: pathlib.Path) -> None:
    scenario = tmp_path / "idle.yaml"
    scenario.write_text('name: idle\nnodeFlags: ["n1:cpu=1,memory=1Gi"]\nsteps: []\n')
    workdir = tmp_path / "w"
    log = (tmp_path / "out.txt").open("w")
    sandbox = subprocess.Popen(
        [
            *(sys.executable, "-m", "queuetree", "sandbox", "--scenario", str(scenario)),
            *(f"--workdir={workdir}", "--refresh=0.5"),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=ROOT,
        env=dict(os.environ),
    )
    try:
        deadline = time.monotonic() + 150
        while "QUEUE" not in (tmp_path / "out.txt").read_text():
            assert sandbox.poll() is None, (tmp_path / "out.txt").read_text()
            assert time.monotonic() < deadline, "the live view never appeared"
            time.sleep(0.1)
        started = children_of(sandbox.pid)
        port = int((workdir / "kubesim.port").read_text())
        sandbox.send_signal(signal.SIGINT)
        code = sandbox.wait(60)
    finally:
        if sandbox.poll() is None:
            sandbox.kill()
        log.close()
    assert (code, len(started), [pid for pid in started if alive(pid)], port_open(port)) == (
        0,
        3,
        [],
        False,
    )


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_stack_that_cannot_start_exits_1_quoting_the_log_of_the_process_that_failed(
    tmp_path: pathlib.Path,
) -> None:
    scenario = tmp_path / "nowhere.yaml"
    scenario.write_text("name: nowhere\nnodes: [missing-nodes.yaml]\nsteps: []\n")
    done = run_sandbox("--scenario", str(scenario), "--until-settled", timeout=110)
    assert (
        done.returncode,
        "queuetree sandbox: kubesim exited with 1:" in done.stderr,
        "missing-nodes.yaml" in done.stderr,
    ) == (1, True, True), done.stderr
