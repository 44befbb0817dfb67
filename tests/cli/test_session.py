"""``queuetree session``: DESIGN.md's contract (one JSON object, exit 0 or 2), flags, errors."""

from __future__ import annotations

import io
import json
import pathlib
import subprocess
import sys
import textwrap
from collections.abc import Mapping
from typing import Any, NamedTuple

import pytest

from queuetree import cli
from queuetree.api import schedconf
from queuetree.core import configs, decisions, errors, objects, quantities, sessions

ROOT = pathlib.Path(__file__).parents[2]
EXAMPLES = ROOT / "examples"
EXAMPLE_ARGS = [
    "-f",
    str(EXAMPLES / "queues" / "hierarchy.yaml"),
    "-f",
    str(EXAMPLES / "nodes.yaml"),
    "-f",
    str(EXAMPLES / "pods"),
]
CONTRACT_KEYS = [
    "bind",
    "errors",
    "evict",
    "evictions",
    "pipeline",
    "podGroups",
    "queues",
    "ready",
    "reasons",
    "ungate",
    "warnings",
]
QUEUE_KEYS = ["allocated", "capability", "deserved", "realCapability", "share", "state"]

SMALL_CLUSTER = """\
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: root}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: default}
spec: {capability: {cpu: "2"}}
---
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "10"}}
---
apiVersion: v1
kind: Pod
metadata: {name: p1, namespace: ns1}
spec: {containers: [{name: c, resources: {requests: {cpu: "1", memory: 1Gi}}}]}
"""


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(["session", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_command_prints_one_json_object_with_the_contract_keys_sorted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run(EXAMPLE_ARGS, capsys)
    output = json.loads(out)
    assert (code, err) == (0, "")
    assert out == json.dumps(output, sort_keys=True, indent=2) + "\n"
    assert list(output) == CONTRACT_KEYS
    assert {name: list(figures) for name, figures in output["queues"].items()} == dict.fromkeys(
        output["queues"], QUEUE_KEYS
    )
    assert output["queues"]["vision-segmentation"] == {
        "allocated": {"cpu": "16", "memory": "128Gi", "nvidia.com/gpu": "8"},
        "capability": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"},
        "deserved": {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": "4"},
        "realCapability": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"},
        "share": 2.0,
        "state": "Open",
    }


def test_the_real_command_runs_as_a_process_and_reads_stdin() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "queuetree", "session", "-f", "-"],
        input=SMALL_CLUSTER,
        capture_output=True,
        text=True,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert json.loads(done.stdout)["bind"] == {"ns1/p1": "n1"}


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The keyword arguments of every ``run_session`` call (which still runs)."""
    calls: list[dict[str, Any]] = []
    real = sessions.run_session

    def spy(
        snapshot: objects.Snapshot,
        *,
        config: configs.SchedulerConfiguration,
        feature_gates: Mapping[str, bool],
        admission_only: bool = False,
        scheduler_names: frozenset[str] | None = None,
    ) -> decisions.SessionResult:
        calls.append(
            {
                "config": config,
                "feature_gates": dict(feature_gates),
                "admission_only": admission_only,
                "scheduler_names": scheduler_names,
            }
        )
        return real(
            snapshot,
            config=config,
            feature_gates=feature_gates,
            admission_only=admission_only,
            scheduler_names=scheduler_names,
        )

    monkeypatch.setattr(sessions, "run_session", spy)
    return calls


GATES_ON = {"SchedulingGatesQueueAdmission": True}
GATES_OFF = {"SchedulingGatesQueueAdmission": False}
KUBE_SCHEDULER = frozenset({"default-scheduler"})


class FlagsCase(NamedTuple):
    flags: Any
    gates: Any
    admission_only: Any
    scheduler_names: Any


FLAGS = {
    "defaults": FlagsCase(flags=[], gates=GATES_ON, admission_only=False, scheduler_names=None),
    "--admission-only alone means true": FlagsCase(
        flags=["--admission-only"],
        gates=GATES_ON,
        admission_only=True,
        scheduler_names=KUBE_SCHEDULER,
    ),
    "--admission-only=true": FlagsCase(
        flags=["--admission-only=true"],
        gates=GATES_ON,
        admission_only=True,
        scheduler_names=KUBE_SCHEDULER,
    ),
    "--admission-only=false": FlagsCase(
        flags=["--admission-only=false"], gates=GATES_ON, admission_only=False, scheduler_names=None
    ),
    "feature gates": FlagsCase(
        flags=["--feature-gates=SchedulingGatesQueueAdmission=false"],
        gates=GATES_OFF,
        admission_only=False,
        scheduler_names=None,
    ),
    "scheduler names, which only admission reads": FlagsCase(
        flags=["--admission-only", "--scheduler-name=default-scheduler,volcano"],
        gates=GATES_ON,
        admission_only=True,
        scheduler_names=frozenset({"default-scheduler", "volcano"}),
    ),
}


@pytest.mark.parametrize(
    ("flags", "gates", "admission_only", "scheduler_names"), FLAGS.values(), ids=FLAGS.keys()
)
def test_flags_reach_the_session_in_kubernetes_style(
    flags: list[str],
    gates: dict[str, bool],
    admission_only: bool,
    scheduler_names: frozenset[str] | None,
    recorded: list[dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(SMALL_CLUSTER))
    code, _, err = run(["-f", "-", *flags], capsys)
    assert (code, err) == (0, "")
    assert recorded == [
        {
            "config": schedconf.parse_default().configuration,
            "feature_gates": gates,
            "admission_only": admission_only,
            "scheduler_names": scheduler_names,
        }
    ]


def test_a_configuration_file_replaces_the_default_and_its_warnings_come_first(
    tmp_path: pathlib.Path,
    recorded: list[dict[str, Any]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = tmp_path / "volcano-scheduler.conf"
    config.write_text("actions: enqueue, allocate\ntiers:\n- plugins:\n  - name: binpack\n")
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(
        SMALL_CLUSTER.replace(
            "metadata: {name: p1, namespace: ns1}",
            "metadata: {name: p1, namespace: ns1, annotations: {volcano.sh/task-priority: high}}",
        )
    )
    code, out, _ = run(["-f", str(cluster), "--config", str(config)], capsys)
    assert code == 0
    assert recorded[0]["config"] == configs.SchedulerConfiguration(
        actions=("enqueue", "allocate"), tiers=(configs.Tier(),)
    )
    assert json.loads(out)["warnings"][:2] == [
        f"{config}: tiers[0].plugins[0]: plugin 'binpack' is not implemented by queuetree, ignored",
        f'{cluster}#3: Pod ns1/p1: metadata.annotations["volcano.sh/task-priority"]: '
        'not a 32-bit integer, ignored (got "high")',
    ]


def write(directory: pathlib.Path, name: str, text: str) -> str:
    path = directory / name
    path.write_text(textwrap.dedent(text))
    return str(path)


class InputErrorsCase(NamedTuple):
    files: Any
    argv: Any
    expected: Any


INPUT_ERRORS = {
    "a file that does not exist": InputErrorsCase(
        files={},
        argv=["-f", "{tmp}/missing.yaml"],
        expected=["{tmp}/missing.yaml: cannot read: No such file or directory"],
    ),
    "a malformed quantity names the object and the field": InputErrorsCase(
        files={
            "q.yaml": """\
            apiVersion: scheduling.volcano.sh/v1beta1
            kind: Queue
            metadata: {name: team-a}
            spec: {capability: {nvidia.com/gpu: two}}
            """
        },
        argv=["-f", "{tmp}/q.yaml"],
        expected=[
            '{tmp}/q.yaml#0: Queue team-a: spec.capability["nvidia.com/gpu"]: invalid quantity: '
            '{reason} (got "two")'
        ],
    ),
    "an unknown kind and a duplicate, in two files": InputErrorsCase(
        files={
            "a.yaml": """\
            apiVersion: batch/v1
            kind: Job
            metadata: {name: j}
            """,
            "b.yaml": """\
            apiVersion: scheduling.volcano.sh/v1beta1
            kind: Queue
            metadata: {name: q}
            ---
            apiVersion: scheduling.volcano.sh/v1beta1
            kind: Queue
            metadata: {name: q}
            """,
        },
        argv=["-f", "{tmp}/a.yaml", "-f", "{tmp}/b.yaml"],
        expected=[
            "{tmp}/a.yaml#0: kind: unsupported kind (a session reads Queue, PodGroup, Pod, Node, "
            'PriorityClass, Namespace; workloads are not expanded) (got "Job")',
            "{tmp}/b.yaml#1: Queue q: defined twice (first in {tmp}/b.yaml#0)",
        ],
    ),
    "a configuration with proportion and capacity": InputErrorsCase(
        files={
            "c.conf": """\
            actions: allocate
            tiers:
            - plugins: [{name: proportion}, {name: capacity}]
            """,
            "empty.yaml": "",
        },
        argv=["-f", "{tmp}/empty.yaml", "--config", "{tmp}/c.conf"],
        expected=[
            "{tmp}/c.conf: tiers: proportion and capacity cannot be enabled together: both "
            "manage queue shares; remove proportion (queuetree implements capacity)"
        ],
    ),
    "standard input twice": InputErrorsCase(
        files={},
        argv=["-f", "-", "--config", "-"],
        expected=["-: standard input (-) can be given only once"],
    ),
    "YAML that does not parse": InputErrorsCase(
        files={"bad.yaml": "kind: Pod\nmetadata: {name: [}\n"},
        argv=["-f", "{tmp}/bad.yaml"],
        expected=[
            "{tmp}/bad.yaml: invalid YAML at line 2, column 19: expected the node content, "
            "but found '}}'"
        ],
    ),
}


@pytest.mark.parametrize(
    ("files", "argv", "expected"), INPUT_ERRORS.values(), ids=INPUT_ERRORS.keys()
)
def test_input_that_is_not_understood_exits_2_with_every_problem_on_stderr(
    files: dict[str, str],
    argv: list[str],
    expected: list[str],
    tmp_path: pathlib.Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name, text in files.items():
        write(tmp_path, name, text)
    code, out, err = run([arg.format(tmp=tmp_path) for arg in argv], capsys)
    lines = err.splitlines()
    with pytest.raises(errors.QuantityError) as bad_quantity:
        quantities.parse("two")
    reason = bad_quantity.value.reason
    count = len(expected)
    assert (code, out) == (2, "")
    assert lines == [
        *(f"queuetree session: {e.format(tmp=tmp_path, reason=reason)}" for e in expected),
        f"queuetree session: input not understood ({count} problem{'s' * (count != 1)})",
    ]


class UsageErrorsCase(NamedTuple):
    argv: Any
    message: Any


USAGE_ERRORS = {
    "no file": UsageErrorsCase(
        argv=[], message="the following arguments are required: -f/--filename"
    ),
    "an unknown feature gate": UsageErrorsCase(
        argv=["-f", "-", "--feature-gates=Nope=true"],
        message="unknown feature gate 'Nope'",
    ),
    "a boolean flag with a value that is not a boolean": UsageErrorsCase(
        argv=["-f", "-", "--admission-only=maybe"],
        message="invalid boolean value 'maybe'",
    ),
}


@pytest.mark.parametrize(("argv", "message"), USAGE_ERRORS.values(), ids=USAGE_ERRORS.keys())
def test_usage_errors_exit_2_with_the_reason(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        cli.main(["session", *argv])
    assert caught.value.code == 2
    assert message in capsys.readouterr().err


def test_a_directory_reads_its_manifest_files_in_name_order(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    documents = SMALL_CLUSTER.split("---\n")
    for index, document in enumerate(documents):
        write(tmp_path, f"{index}.yaml", document)
    write(tmp_path, "notes.txt", "not a manifest")
    code, out, err = run(["-f", str(tmp_path)], capsys)
    assert (code, err) == (0, "")
    assert json.loads(out)["bind"] == {"ns1/p1": "n1"}


class RecursionCase(NamedTuple):
    flags: Any
    bind: Any


RECURSION = {
    "without -R only the directory's own files": RecursionCase(flags=[], bind={}),
    "with -R its subdirectories too": RecursionCase(flags=["-R"], bind={"ns1/p1": "n1"}),
}


@pytest.mark.parametrize(("flags", "bind"), RECURSION.values(), ids=RECURSION.keys())
def test_subdirectories_are_read_with_recursive_as_kubectl_does(
    flags: list[str],
    bind: dict[str, str],
    tmp_path: pathlib.Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    *cluster, pod = SMALL_CLUSTER.split("---\n")
    write(tmp_path, "cluster.yaml", "---\n".join(cluster))
    (tmp_path / "work").mkdir()
    write(tmp_path / "work", "pod.yaml", pod)
    code, out, err = run(["-f", str(tmp_path), *flags], capsys)
    assert (code, err) == (0, "")
    assert json.loads(out)["bind"] == bind


def test_a_reader_that_stops_early_is_not_an_error(tmp_path: pathlib.Path) -> None:
    queues = "".join(
        "---\napiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\n"
        f"metadata: {{name: q{index}}}\nspec: {{deserved: {{cpu: '1'}}}}\n"
        for index in range(1000)
    )
    cluster = tmp_path / "many.yaml"
    cluster.write_text(queues)
    with subprocess.Popen(
        [sys.executable, "-m", "queuetree", "session", "-f", str(cluster)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as process:
        assert process.stdout is not None
        assert process.stderr is not None
        assert process.stdout.read(1) == b"{"
        process.stdout.close()  # like `| head -c1`: the rest (>64 KiB) no longer fits the pipe
        stderr = process.stderr.read()
        assert (process.wait(timeout=120), stderr) == (0, b"")


def documented_example() -> tuple[list[str], dict[str, Any]]:
    """The command and output that docs/session.md shows after its ``session-example`` marker."""
    text = (ROOT / "docs" / "session.md").read_text()
    marker = "<!-- session-example: "
    start = text.index(marker) + len(marker)
    argv = text[start : text.index(" -->", start)].split()
    block = text.index("```json\n", start) + len("```json\n")
    return argv, json.loads(text[block : text.index("\n```", block)])


def test_the_examples_print_the_json_that_docs_session_md_shows(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv, documented = documented_example()
    monkeypatch.chdir(ROOT)
    code, out, err = run(argv, capsys)
    output = json.loads(out)
    assert (code, err) == (0, "")
    # The wording of reasons belongs to the engine and may improve; which pods have one may not.
    assert sorted(output.pop("reasons")) == sorted(documented.pop("reasons"))
    assert output == documented


def test_the_seed_configuration_decides_the_same_on_the_examples_with_two_warnings(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv, documented = documented_example()
    monkeypatch.chdir(ROOT)
    config = argv.index("--config") + 1
    argv[config] = "examples/config/seed-example.conf"
    code, out, err = run(argv, capsys)
    output = json.loads(out)
    decisions_only = ("bind", "evict", "pipeline", "ungate", "podGroups", "errors", "ready")
    assert (code, err) == (0, "")
    assert {key: output[key] for key in decisions_only} == {
        key: documented[key] for key in decisions_only
    }
    assert output["warnings"] == [
        "examples/config/seed-example.conf: tiers[1].plugins[0]: plugin 'drf' is not "
        "implemented by queuetree, ignored",
        "examples/config/seed-example.conf: tiers[1].plugins[4]: plugin 'binpack' is not "
        "implemented by queuetree, ignored",
    ]


def documented_evictions() -> tuple[list[str], list[dict[str, str]]]:
    """The command and ``.evictions`` that docs/session.md shows in its evictions example."""
    text = (ROOT / "docs" / "session.md").read_text()
    start = text.index("$ queuetree session -f tests/scenarios/")
    command = text[start : text.index("| jq .evictions", start)]
    argv = command.replace("\\\n", " ").split()[3:]
    block = text.index("\n", text.index("| jq .evictions", start)) + 1
    return argv, json.loads(text[block : text.index("\n```", block)])


def test_each_victim_is_printed_with_its_reclaimer_and_rule_as_docs_session_md_shows(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv, documented = documented_evictions()
    monkeypatch.chdir(ROOT)
    code, out, err = run(argv, capsys)
    output = json.loads(out)
    assert (code, err, output["evictions"]) == (0, "", documented)
    assert [e["victim"] for e in output["evictions"]] == output["evict"]


def test_a_live_dump_with_a_pod_naming_a_deleted_queue_is_understood(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # What `kubectl get queues,podgroups,pods,nodes -A -o yaml` prints: one List.
    dump = write(
        tmp_path,
        "dump.yaml",
        """\
        apiVersion: v1
        kind: List
        items:
        - apiVersion: scheduling.volcano.sh/v1beta1
          kind: Queue
          metadata: {name: root}
        - apiVersion: v1
          kind: Pod
          metadata:
            name: p
            namespace: ns
            annotations:
              scheduling.volcano.sh/queue-name: ml-a
              scheduling.volcano.sh/queue-allocation-gate: "true"
          spec:
            schedulingGates: [{name: scheduling.volcano.sh/queue-allocation-gate}]
            containers: [{name: c, resources: {requests: {cpu: "1"}}}]
        """,
    )
    code, out, _ = run(["-f", dump, "--admission-only"], capsys)
    result = json.loads(out)
    assert (code, result["ungate"], result["reasons"]["ns/p"], len(result["warnings"])) == (
        0,
        [],
        "queue 'ml-a' does not exist: create it or name an existing leaf in the pod's "
        "scheduling.volcano.sh/queue-name annotation",
        1,
    )


NOT_OPTED_IN = """\
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: root}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: b}
spec: {capability: {cpu: "3"}}
---
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "32", memory: 64Gi, pods: "110"}}
---
apiVersion: v1
kind: Pod
metadata:
  name: noopt
  namespace: t2
  annotations: {scheduling.volcano.sh/queue-name: b}
spec:
  nodeName: n1
  containers: [{name: c, resources: {requests: {cpu: "5"}}}]
status: {phase: Running}
---
apiVersion: v1
kind: Pod
metadata:
  name: honest
  namespace: t2
  annotations:
    scheduling.volcano.sh/queue-name: b
    scheduling.volcano.sh/queue-allocation-gate: "true"
spec:
  schedulingGates: [{name: scheduling.volcano.sh/queue-allocation-gate}]
  containers: [{name: c, resources: {requests: {cpu: "1"}}}]
"""


@pytest.mark.parametrize(
    ("flags", "allocated", "ungate", "warned"),
    [
        pytest.param(
            ["--admission-only"], {"cpu": "0", "memory": "0"}, ["t2/honest"], True, id="operator"
        ),
        pytest.param([], {"cpu": "5", "memory": "0"}, [], False, id="volcano-counts-every-pod"),
    ],
)
def test_with_admission_only_a_pod_that_did_not_opt_in_counts_in_no_queue(
    tmp_path: pathlib.Path,
    capsys: pytest.CaptureFixture[str],
    flags: list[str],
    allocated: dict[str, str],
    ungate: list[str],
    warned: bool,
) -> None:
    """A pod that names a queue without opting in, as ``queuetree session`` decides it: with
    ``--admission-only`` (the operator's rule), ``noopt`` is in no queue and is warned about;
    in Volcano mode it counts, as every pod does in Volcano."""
    path = write(tmp_path, "cluster.yaml", NOT_OPTED_IN)
    code, out, _ = run(
        ["-f", path, "--feature-gates=SchedulingGatesQueueAdmission=true", *flags], capsys
    )
    result = json.loads(out)
    outside = [w for w in result["warnings"] if "t2/noopt names queue 'b'" in w]
    assert (code, result["queues"]["b"].get("allocated"), result["ungate"], bool(outside)) == (
        0,
        allocated,
        ungate,
        warned,
    )
