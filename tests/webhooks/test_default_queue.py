"""``--default-queue``: pods and PodGroups that name no queue are checked against the configured
default queue (the operator's ``--default-queue``), and that queue cannot be deleted."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from queuetree.api import admission
from queuetree.webhooks import pods, server, settings, views
from tests.webhooks.builders import (
    GATE,
    PODS,
    allowed,
    answer,
    cluster,
    denied,
    outcome,
    pod,
    queue,
    review,
)

QUEUE_NAME = "scheduling.volcano.sh/queue-name"
GROUP_NAME = "scheduling.k8s.io/group-name"
OPT_IN = {GATE: "true"}
IN_GROUP = {**OPT_IN, GROUP_NAME: "pg"}
BATCH = settings.ReviewSettings(default_queue="batch")
NO_QUEUE_SOURCE = "the default queue batch: no PodGroup, no queue-name annotation"
GROUP_SOURCE = "PodGroup default/pg, which names no queue: the default queue batch"


@pytest.mark.parametrize(
    ("queues", "annotations", "pod_groups", "rules", "expected"),
    [
        pytest.param(
            [queue("batch", "root"), queue("default", "root", state="Closed")],
            OPT_IN,
            {},
            BATCH,
            allowed(),
            id="a-lone-pod-naming-no-queue-is-admitted-to-an-open-configured-default-queue",
        ),
        pytest.param(
            [queue("batch", "root", state="Closed"), queue("default", "root")],
            OPT_IN,
            {},
            BATCH,
            denied(
                f'metadata.annotations["{QUEUE_NAME}"]: Invalid value: "batch": pod default/p1 '
                f"names queue batch (from {NO_QUEUE_SOURCE}): pods can only be submitted to "
                "Open queues, and queue batch is Closed"
            ),
            id="a-lone-pod-naming-no-queue-is-refused-when-the-configured-queue-is-closed",
        ),
        pytest.param(
            [queue("default", "root")],
            OPT_IN,
            {},
            BATCH,
            denied(
                f'metadata.annotations["{QUEUE_NAME}"]: Not found: "batch": pod default/p1 names '
                f"queue batch (from {NO_QUEUE_SOURCE}): the queue does not exist; create it or "
                "name an existing leaf queue"
            ),
            id="a-lone-pod-naming-no-queue-is-refused-when-the-configured-queue-is-missing",
        ),
        pytest.param(
            [queue("batch", "root"), queue("team", "batch")],
            OPT_IN,
            {},
            BATCH,
            denied(
                f'metadata.annotations["{QUEUE_NAME}"]: Invalid value: "batch": pod default/p1 '
                f"names queue batch (from {NO_QUEUE_SOURCE}): pods can only be submitted to "
                "leaf queues, and queue batch has 1 child queues: team"
            ),
            id="a-lone-pod-naming-no-queue-is-refused-when-the-configured-queue-has-children",
        ),
        pytest.param(
            [queue("batch", "root"), queue("default", "root", state="Closed")],
            IN_GROUP,
            {"default/pg": ""},
            BATCH,
            allowed(),
            id="a-pod-of-a-podgroup-without-spec-queue-is-admitted-to-the-configured-queue",
        ),
        pytest.param(
            [queue("batch", "root", state="Closed"), queue("default", "root")],
            IN_GROUP,
            {"default/pg": ""},
            BATCH,
            denied(
                f'metadata.annotations["{GROUP_NAME}"]: Invalid value: "batch": pod default/p1 '
                f"names queue batch (from {GROUP_SOURCE}): pods can only be submitted to Open "
                "queues, and queue batch is Closed"
            ),
            id="a-podgroup-without-spec-queue-is-refused-when-the-configured-queue-is-closed",
        ),
        pytest.param(
            [queue("default", "root")],
            IN_GROUP,
            {"default/pg": ""},
            BATCH,
            denied(
                f'metadata.annotations["{GROUP_NAME}"]: Not found: "batch": pod default/p1 names '
                f"queue batch (from {GROUP_SOURCE}): the queue does not exist; create it or "
                "name an existing leaf queue"
            ),
            id="a-podgroup-without-spec-queue-is-refused-when-the-configured-queue-is-missing",
        ),
        pytest.param(
            [queue("batch", "root", state="Closed"), queue("a", "root")],
            IN_GROUP,
            {"default/pg": "a"},
            BATCH,
            allowed(),
            id="a-podgroup-that-names-its-queue-is-not-sent-to-the-default-queue",
        ),
        pytest.param(
            [queue("batch", "root", state="Closed"), queue("a", "root")],
            {**OPT_IN, QUEUE_NAME: "a"},
            {},
            BATCH,
            allowed(),
            id="a-pod-that-names-its-queue-is-not-sent-to-the-default-queue",
        ),
        pytest.param(
            [queue("batch", "root")],
            OPT_IN,
            {},
            settings.ReviewSettings(),
            denied(
                f'metadata.annotations["{QUEUE_NAME}"]: Not found: "default": pod default/p1 names '
                "queue default (from the default queue default: no PodGroup, no queue-name "
                "annotation): the queue does not exist; create it or name an existing leaf queue"
            ),
            id="without-the-flag-the-default-queue-is-default",
        ),
        pytest.param(
            [queue("batch", "root"), queue("default", "root", state="Closed")],
            IN_GROUP,
            {"default/pg": ""},
            settings.ReviewSettings(),
            denied(
                f'metadata.annotations["{GROUP_NAME}"]: Invalid value: "default": pod default/p1 '
                "names queue default (from PodGroup default/pg, which names no queue: the "
                "default queue default): pods can only be submitted to Open queues, and queue "
                "default is Closed"
            ),
            id="without-the-flag-a-podgroup-without-spec-queue-is-in-default",
        ),
    ],
)
def test_pods_that_name_no_queue_are_checked_against_the_configured_default_queue(
    queues: list[dict[str, Any]],
    annotations: dict[str, str],
    pod_groups: dict[str, str],
    rules: settings.ReviewSettings,
    expected: dict[str, Any],
) -> None:
    body = review("CREATE", pod(annotations=annotations), resource=PODS, namespace="default")
    view = cluster(*queues, pod_groups=pod_groups)
    assert outcome(answer("/pods/validate", body, view, rules)) == expected


@pytest.mark.parametrize(
    ("annotations", "pod_groups", "expected"),
    [
        pytest.param(OPT_IN, {}, ("batch",), id="a-lone-pod"),
        pytest.param(IN_GROUP, {"default/pg": ""}, ("batch",), id="a-pod-of-a-podgroup"),
    ],
)
def test_a_missing_default_queue_is_reported_for_the_server_to_wait_for(
    annotations: dict[str, str], pod_groups: dict[str, str], expected: tuple[str, ...]
) -> None:
    request = admission.read_request(
        review("CREATE", pod(annotations=annotations), resource=PODS, namespace="default")
    )
    verdict = pods.validate(request, view=cluster(pod_groups=pod_groups), settings=BATCH)
    assert verdict.missing == expected


@pytest.mark.parametrize(
    ("name", "rules", "expected"),
    [
        pytest.param(
            "batch",
            BATCH,
            denied(
                "requestBody.metadata.name: Forbidden: `batch` queue can not be deleted: it is "
                "the default queue (--default-queue=batch)"
            ),
            id="the-configured-default-queue-cannot-be-deleted",
        ),
        pytest.param(
            "default",
            BATCH,
            denied("requestBody.metadata.name: Forbidden: `default` queue can not be deleted"),
            id="default-stays-protected-as-in-volcano-since-the-podgroup-crd-writes-it",
        ),
        pytest.param(
            "root",
            BATCH,
            denied("requestBody.metadata.name: Forbidden: `root` queue can not be deleted"),
            id="root-stays-protected",
        ),
        pytest.param(
            "batch",
            settings.ReviewSettings(),
            allowed(),
            id="without-the-flag-a-queue-named-batch-is-an-ordinary-queue",
        ),
    ],
)
def test_the_configured_default_queue_cannot_be_deleted(
    name: str, rules: settings.ReviewSettings, expected: dict[str, Any]
) -> None:
    existing = [queue("root"), queue("default", "root"), queue("batch", "root")]
    old = next(q for q in existing if q["metadata"]["name"] == name)
    body = review("DELETE", None, old=old, name=name)
    assert outcome(answer("/queues/validate", body, cluster(*existing), rules)) == expected


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param({"queue": "a"}, ("ml/pg", "a"), id="a-named-queue"),
        pytest.param({}, ("ml/pg", ""), id="no-spec-queue-is-recorded-as-none"),
        pytest.param({"queue": ""}, ("ml/pg", ""), id="an-empty-spec-queue-is-recorded-as-none"),
        pytest.param({"queue": 7}, ("ml/pg", ""), id="a-spec-queue-that-is-not-a-string-is-none"),
    ],
)
def test_the_view_records_the_queue_a_podgroup_names_and_leaves_defaulting_to_the_review(
    spec: dict[str, Any], expected: tuple[str, str]
) -> None:
    manifest = {"kind": "PodGroup", "metadata": {"name": "pg", "namespace": "ml"}, "spec": spec}
    assert views.pod_group_queue(manifest) == expected


async def test_the_server_checks_pods_against_its_configured_default_queue(
    aiohttp_client: Any,
) -> None:
    view = cluster(queue("batch", "root", state="Closed"), queue("default", "root"))
    app = server.build_app(source=server.StaticSource(view), settings=BATCH)
    client: TestClient[web.Request, web.Application] = await aiohttp_client(app)
    body = review("CREATE", pod(annotations=OPT_IN), resource=PODS, namespace="default")
    response = await client.post("/pods/validate", json=body)
    expected = denied(
        f'metadata.annotations["{QUEUE_NAME}"]: Invalid value: "batch": pod default/p1 names '
        f"queue batch (from {NO_QUEUE_SOURCE}): pods can only be submitted to Open queues, "
        "and queue batch is Closed"
    )
    assert (response.status, outcome((await response.json())["response"])) == (200, expected)
