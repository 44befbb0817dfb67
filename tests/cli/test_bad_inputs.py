"""Bad input to ``queuetree session`` and ``queuetree review`` exits 2 with a message naming the
file, the object and the field: never a traceback.

Each case writes the files it needs, runs the command in-process and compares the exit code and
the lines on stderr (paths relative to the test's directory).
"""

from __future__ import annotations

import json
import pathlib
from collections.abc import Callable
from typing import Any, NamedTuple

import pytest

from queuetree import cli
from tests.webhooks.builders import QUEUES, queue, review

QUEUE_HEADER = "apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\n"


def chain(levels: int) -> str:
    """Queues q0 (under root) to q<levels-1>, each the parent of the next."""
    return "---\n".join(
        f"{QUEUE_HEADER}metadata:\n  name: q{i}\nspec:\n  parent: {f'q{i - 1}' if i else 'root'}\n"
        for i in range(levels)
    )


def nested_yaml(levels: int) -> str:
    return f"{QUEUE_HEADER}metadata:\n  name: deep\nspec:\n  x: " + "[" * levels + "]" * levels


def nested_map(levels: int) -> str:
    lines = [f"{QUEUE_HEADER}metadata:\n  name: deep\nspec:"]
    lines += ["  " * (i + 1) + f"k{i}:" for i in range(levels)]
    return "\n".join(lines) + " v\n"


Files = dict[str, str]


class CasesCase(NamedTuple):
    files: Any
    argv: Any
    expected: Any


CASES = {
    "session: YAML nested 5,000 levels deep": CasesCase(
        files={"deep.yaml": nested_yaml(5000)},
        argv=lambda d: ["session", "-f", str(d / "deep.yaml")],
        expected=[
            "deep.yaml: nested deeper than 100 levels at line 6, column 104",
            "input not understood (1 problem)",
        ],
    ),
    "session: a map nested 5,000 levels deep": CasesCase(
        files={"deep.yaml": nested_map(5000)},
        argv=lambda d: ["session", "-f", str(d / "deep.yaml")],
        expected=[
            "deep.yaml: nested deeper than 100 levels at line 105, column 201",
            "input not understood (1 problem)",
        ],
    ),
    "session: nested 150 levels, within the reader but past the limit": CasesCase(
        files={"deep.yaml": nested_yaml(150)},
        argv=lambda d: ["session", "-f", str(d / "deep.yaml")],
        expected=[
            "deep.yaml#0: Queue deep: spec.x[0][0]...: nested deeper than 100 levels",
            "input not understood (1 problem)",
        ],
    ),
    "session: a queue chain 1,000 deep": CasesCase(
        files={"chain.yaml": chain(1000)},
        argv=lambda d: ["session", "-f", str(d / "chain.yaml")],
        expected=[
            "chain.yaml#100: Queue q100: spec.parent: the queue is level 101 below root, deeper "
            "than the 100 levels queuetree accepts (and the webhook allows --max-queue-depth, 5 "
            'by default): attach it higher up (got "q99")',
            "input not understood (1 problem)",
        ],
    ),
    "session: a file above --max-file-bytes": CasesCase(
        files={"big.yaml": chain(20)},
        argv=lambda d: ["session", "--max-file-bytes=1000", "-f", str(d / "big.yaml")],
        expected=[
            "big.yaml: 1977 bytes, more than the limit of 1000 (--max-file-bytes): split the file "
            "or raise the limit",
            "input not understood (1 problem)",
        ],
    ),
    "review: --queues nested 5,000 levels deep": CasesCase(
        files={
            "review.json": json.dumps(review("CREATE", queue("a"))),
            "deep.yaml": nested_yaml(5000),
        },
        argv=lambda d: [
            "review",
            "--path=/queues/validate",
            "-f",
            str(d / "review.json"),
            "--queues",
            str(d / "deep.yaml"),
        ],
        expected=["deep.yaml: nested deeper than 100 levels at line 6, column 104"],
    ),
    "review: a review file above --max-file-bytes": CasesCase(
        files={"review.json": json.dumps(review("CREATE", queue("a", "x" * 2000)))},
        argv=lambda d: [
            "review",
            "--path=/queues/validate",
            "--max-file-bytes=1000",
            "-f",
            str(d / "review.json"),
        ],
        expected=[
            "review.json: 2575 bytes, more than the limit of 1000 (--max-file-bytes): split the "
            "file or raise the limit"
        ],
    ),
    "review: a review nested deeper than --max-json-depth": CasesCase(
        files={"review.json": json.dumps({**review("CREATE", queue("a")), "x": [[[[[[]]]]]]})},
        argv=lambda d: [
            "review",
            "--path=/queues/validate",
            "--max-json-depth=4",
            "-f",
            str(d / "review.json"),
        ],
        expected=[
            'review.json: {"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
            '"message":"the request body is nested deeper than 4 levels, the limit '
            '(--max-json-depth)","reason":"BadRequest","code":400}'
        ],
    ),
}


@pytest.mark.parametrize(("files", "argv", "expected"), CASES.values(), ids=CASES.keys())
def test_bad_input_exits_2_naming_file_object_and_field(
    tmp_path: pathlib.Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    files: Files,
    argv: Callable[[pathlib.Path], list[str]],
    expected: list[str],
) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    code = cli.main(argv(pathlib.Path(".")))
    err = capsys.readouterr().err
    command = argv(pathlib.Path("."))[0]
    lines = [line.removeprefix(f"queuetree {command}: ") for line in err.splitlines()]
    assert (code, lines) == (2, expected)


def test_a_queue_chain_1000_deep_is_reviewed_without_a_traceback(
    tmp_path: pathlib.Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    (tmp_path / "chain.yaml").write_text(chain(1000))
    body = review("CREATE", queue("leaf", "q999"))
    assert body["request"]["resource"] == QUEUES
    (tmp_path / "review.json").write_text(json.dumps(body))
    code = cli.main(
        [
            "review",
            "--path=/queues/validate",
            # The most --max-queue-depth allows: the chain is ten times deeper still.
            "--max-queue-depth=100",
            "-f",
            str(tmp_path / "review.json"),
            "--queues",
            str(tmp_path / "chain.yaml"),
        ]
    )
    response = json.loads(capsysbinary.readouterr().out)["response"]
    assert (code, response["allowed"], "depth" in response["status"]["message"]) == (0, False, True)
