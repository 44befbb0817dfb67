"""``--default-queue`` on ``queuetree webhook`` and ``queuetree review``: it parses into the
review settings, refuses names no default queue can have, matches the operator's flag, and
``queuetree review`` checks pods that name no queue against it."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest
import yaml

from queuetree import cli
from queuetree.cli import webhook as cli_webhook
from queuetree.core import objects

GATE = objects.QUEUE_ALLOCATION_GATE
QUEUE_NAME = objects.QUEUE_NAME_ANNOTATION
GROUP_NAME = objects.GROUP_NAME_ANNOTATION
COMMANDS = [
    pytest.param(["webhook"], id="webhook"),
    pytest.param(["review", "--path", "/pods/validate", "-f", "review.json"], id="review"),
]


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        pytest.param([], "default", id="absent-means-default"),
        pytest.param(["--default-queue=batch"], "batch", id="name-equals-value"),
        pytest.param(["--default-queue", "team.gpu-a"], "team.gpu-a", id="name-then-value"),
        pytest.param(["--default-queue=" + "q" * 253], "q" * 253, id="the-longest-name"),
    ],
)
def test_the_default_queue_flag_sets_the_review_settings(
    command: list[str], flags: list[str], expected: str
) -> None:
    args = cli.build_parser().parse_args([*command, *flags])
    assert cli_webhook.settings_from(args).default_queue == expected


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize(
    ("value", "message"),
    [
        pytest.param("", "not a queue name: ''", id="empty"),
        pytest.param("Batch", "not a queue name: 'Batch'", id="upper-case"),
        pytest.param("batch-", "not a queue name: 'batch-'", id="ends-with-a-dash"),
        pytest.param("q" * 254, "at most 253 characters", id="too-long"),
        pytest.param("root", "the root queue cannot be the default queue", id="root"),
    ],
)
def test_a_default_queue_no_pod_could_be_admitted_to_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], command: list[str], value: str, message: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.build_parser().parse_args([*command, f"--default-queue={value}"])
    error = capsys.readouterr().err
    assert (exited.value.code, "--default-queue" in error, message in error) == (2, True, True)


def test_the_webhook_and_the_operator_default_to_the_same_queue() -> None:
    parser = cli.build_parser()
    operator = parser.parse_args(["operator"])
    webhook = parser.parse_args(["webhook"])
    assert operator.default_queue == webhook.default_queue == objects.DEFAULT_QUEUE


def queue(name: str, state: str = "Open") -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"parent": "root"},
        "status": {"state": state},
    }


def pod_group(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "ml"},
        "spec": spec,
    }


def pod_review(annotations: dict[str, str]) -> dict[str, Any]:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p1", "namespace": "ml", "annotations": annotations},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "uid-1",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "name": "p1",
            "namespace": "ml",
            "operation": "CREATE",
            "userInfo": {"username": "kubernetes-admin"},
            "object": pod,
            "oldObject": None,
        },
    }


LONE = {GATE: "true"}
GROUPED = {GATE: "true", GROUP_NAME: "pg"}
CLOSED = (
    'Invalid value: "batch": pod ml/p1 names queue batch (from {source}): pods can only be '
    "submitted to Open queues, and queue batch is Closed"
)
MISSING = (
    'Not found: "batch": pod ml/p1 names queue batch (from {source}): the queue does not '
    "exist; create it or name an existing leaf queue"
)
LONE_SOURCE = "the default queue batch: no PodGroup, no queue-name annotation"
GROUP_SOURCE = "PodGroup ml/pg, which names no queue: the default queue batch"


@pytest.mark.parametrize(
    ("documents", "annotations", "expected"),
    [
        pytest.param(
            [queue("batch"), queue("default", "Closed")],
            LONE,
            {"allowed": True},
            id="a-lone-pod-is-admitted-to-the-open-configured-queue",
        ),
        pytest.param(
            [queue("batch", "Closed"), queue("default")],
            LONE,
            {
                "allowed": False,
                "message": f'metadata.annotations["{QUEUE_NAME}"]: '
                + CLOSED.format(source=LONE_SOURCE),
            },
            id="a-lone-pod-is-refused-when-the-configured-queue-is-closed",
        ),
        pytest.param(
            [queue("default")],
            LONE,
            {
                "allowed": False,
                "message": f'metadata.annotations["{QUEUE_NAME}"]: '
                + MISSING.format(source=LONE_SOURCE),
            },
            id="a-lone-pod-is-refused-when-the-configured-queue-is-missing",
        ),
        pytest.param(
            [queue("batch", "Closed"), queue("default"), pod_group({"minMember": 1})],
            GROUPED,
            {
                "allowed": False,
                "message": f'metadata.annotations["{GROUP_NAME}"]: '
                + CLOSED.format(source=GROUP_SOURCE),
            },
            id="a-podgroup-without-spec-queue-is-refused-when-the-configured-queue-is-closed",
        ),
        pytest.param(
            [queue("default"), pod_group({"queue": "", "minMember": 1})],
            GROUPED,
            {
                "allowed": False,
                "message": f'metadata.annotations["{GROUP_NAME}"]: '
                + MISSING.format(source=GROUP_SOURCE),
            },
            id="a-podgroup-with-an-empty-spec-queue-is-refused-when-the-configured-queue-is-missing",
        ),
        pytest.param(
            [queue("batch", "Closed"), queue("a"), pod_group({"queue": "a"})],
            GROUPED,
            {"allowed": True},
            id="a-podgroup-that-names-its-queue-keeps-it",
        ),
    ],
)
def test_queuetree_review_checks_pods_that_name_no_queue_against_the_flag(
    tmp_path: pathlib.Path,
    capsys: pytest.CaptureFixture[str],
    documents: list[dict[str, Any]],
    annotations: dict[str, str],
    expected: dict[str, Any],
) -> None:
    (tmp_path / "review.json").write_text(json.dumps(pod_review(annotations)))
    (tmp_path / "queues.yaml").write_text(yaml.safe_dump_all(documents))
    code = cli.main(
        [
            "review",
            "--path=/pods/validate",
            f"--filename={tmp_path / 'review.json'}",
            f"--queues={tmp_path / 'queues.yaml'}",
            "--default-queue=batch",
        ]
    )
    response = json.loads(capsys.readouterr().out)["response"]
    seen = {"allowed": response["allowed"]}
    if "status" in response:
        seen["message"] = response["status"]["message"]
    assert (code, seen) == (0, expected)
