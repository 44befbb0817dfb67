"""What a pod is charged, from its manifest to the admission session's decision.

Each case is a pod manifest in the red team's tree (``team``: cpu 4, memory 8Gi; its child
``b``: cpu 3, memory 4Gi), read as the operator reads it (``manifest_files``) and decided by
one admission session (the default configuration, gates on); the outcome is whether the pod is
ungated or its reason, and the figures of ``b`` and ``team``. Ids say what Volcano would do
where it differs.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import yaml

from queuetree.api import manifest_files, schedconf
from queuetree.core import features, resources, sessions

GATE = "scheduling.volcano.sh/queue-allocation-gate"
TREE = """\
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: root}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: team}
spec: {capability: {cpu: "4", memory: 8Gi}}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: b}
spec: {parent: team, capability: {cpu: "3", memory: 4Gi}}
---
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "64", memory: 256Gi, pods: "110"}}
"""


def container(name: str = "c", **requests: str) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "image": "busybox"}
    if requests:
        body["resources"] = {"requests": requests}
    return body


def pod(name: str, *, state: str = "gated", **spec: Any) -> dict[str, Any]:
    """An opted-in pod of queue ``b``: ``gated``, as the webhook leaves it; ``admitted`` by the
    operator (ungated, its admission recorded) and not placed yet; or ``running`` on n1."""
    annotations = {GATE: "true", "scheduling.volcano.sh/queue-name": "b"}
    manifest: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "t2", "annotations": annotations},
        "spec": {"containers": [container(cpu="1")], **spec},
        "status": {"phase": "Pending"},
    }
    if state == "gated":
        manifest["spec"]["schedulingGates"] = [{"name": GATE}]
        return manifest
    annotations["scheduling.queuetree.io/admitted-queue"] = "b"
    if state == "running":
        manifest["spec"]["nodeName"] = "n1"
        manifest["status"] = {"phase": "Running"}
    return manifest


@dataclasses.dataclass(frozen=True)
class Outcome:
    ungated: tuple[str, ...] = ()
    reasons: dict[str, str] = dataclasses.field(default_factory=dict)
    used: dict[str, tuple[str, str]] = dataclasses.field(default_factory=dict)
    """Queue -> its allocated and reserved figures (``resources.format_human``)."""


def decide(*pods: dict[str, Any]) -> Outcome:
    text = TREE + "".join("---\n" + yaml.safe_dump(manifest) for manifest in pods)
    snapshot = manifest_files.build_snapshot(
        manifest_files.load_documents(text, source="pods.yaml")
    ).snapshot
    result = sessions.run_session(
        snapshot,
        config=schedconf.parse_default().configuration,
        feature_gates=features.DEFAULTS,
        admission_only=True,
    )
    return Outcome(
        ungated=result.ungate,
        reasons=dict(result.reasons),
        used={
            name: (
                resources.format_human(result.queues[name].allocated),
                resources.format_human(result.queues[name].reserved),
            )
            for name in ("b", "team")
        },
    )


NOTHING = ("cpu 0, memory 0", "cpu 0, memory 0")
INIT_BIG = {
    "initContainers": [container("i", cpu="30", memory="100Gi")],
    "containers": [container(cpu="1")],
}

CASES = {
    "fix: an init container larger than the containers is charged "
    "(Volcano charges the containers' 1 CPU and admits the pod)": (
        (pod("init-big", **INIT_BIG),),
        Outcome(
            reasons={
                "t2/init-big": "pod t2/init-big is not admitted: queue 'b' cannot take the "
                "pod's requests on cpu: requested 30, used 0 of capability 3 (allocated plus "
                "inqueue groups)"
            },
            used={"b": NOTHING, "team": NOTHING},
        ),
    ),
    "a running pod is charged its init request in its queue and every ancestor": (
        (
            pod(
                "init-small",
                state="running",
                initContainers=[container("i", cpu="2", memory="1Gi")],
            ),
            pod("next", containers=[container(cpu="1500m")]),
        ),
        Outcome(
            reasons={
                "t2/next": "pod t2/next is not admitted: queue 'b' cannot take the pod's "
                "requests on cpu: requested 1500m, used 2 of capability 3 (allocated plus "
                "inqueue groups)"
            },
            used={"b": ("cpu 2, memory 1Gi", "cpu 0, memory 0")}
            | {"team": ("cpu 2, memory 1Gi", "cpu 0, memory 0")},
        ),
    ),
    "an admitted pod not placed yet reserves its init request": (
        (
            pod("init-small", state="admitted", initContainers=[container("i", cpu="2")]),
            pod("next", containers=[container(cpu="1500m")]),
        ),
        Outcome(
            reasons={
                "t2/next": "pod t2/next is not admitted: queue 'b' cannot take the pod's "
                "requests on cpu: requested 1500m, used 2 of capability 3 (allocated plus "
                "inqueue groups)"
            },
            used={"b": ("cpu 0, memory 0", "cpu 2, memory 0")}
            | {"team": ("cpu 0, memory 0", "cpu 2, memory 0")},
        ),
    ),
    "a pod admitted in the session holds its init request from the next": (
        (
            pod("init-small", initContainers=[container("i", cpu="2")]),
            pod("next", containers=[container(cpu="1500m")]),
        ),
        Outcome(
            ungated=("t2/init-small",),
            reasons={
                "t2/next": "pod t2/next is not admitted: queue 'b' cannot take the pod's "
                "requests on cpu: requested 1500m, used 2 of capability 3 (allocated plus "
                "inqueue groups)"
            },
            used={"b": ("cpu 0, memory 0", "cpu 2, memory 0")}
            | {"team": ("cpu 0, memory 0", "cpu 2, memory 0")},
        ),
    ),
    "fix: pod-level requests are the pod's requests "
    "(Volcano reads the containers only: a best-effort pod, admitted)": (
        (
            pod(
                "podlevel",
                resources={
                    "requests": {"cpu": "20", "memory": "50Gi"},
                    "limits": {"cpu": "20", "memory": "50Gi"},
                },
                containers=[container()],
            ),
        ),
        Outcome(
            reasons={
                "t2/podlevel": "pod t2/podlevel is not admitted: queue 'b' cannot take the "
                "pod's requests on cpu: requested 20, used 0 of capability 3 (allocated plus "
                "inqueue groups)"
            },
            used={"b": NOTHING, "team": NOTHING},
        ),
    ),
    "pod-level limits alone are the requests, as the API server defaults them": (
        (
            pod(
                "limits-only",
                state="running",
                resources={"limits": {"cpu": "2", "memory": "3Gi"}},
                containers=[container()],
            ),
            pod("next", containers=[container(cpu="1500m")]),
        ),
        Outcome(
            reasons={
                "t2/next": "pod t2/next is not admitted: queue 'b' cannot take the pod's "
                "requests on cpu: requested 1500m, used 2 of capability 3 (allocated plus "
                "inqueue groups)"
            },
            used={"b": ("cpu 2, memory 3Gi", "cpu 0, memory 0")}
            | {"team": ("cpu 2, memory 3Gi", "cpu 0, memory 0")},
        ),
    ),
    "sidecars count beside the containers and before the init containers after them": (
        (
            pod(
                "sidecar",
                initContainers=[
                    {**container("proxy", cpu="1"), "restartPolicy": "Always"},
                    container("fetch", cpu="2"),
                ],
                containers=[container(cpu="1")],
            ),
        ),
        Outcome(
            ungated=("t2/sidecar",),
            used={"b": ("cpu 0, memory 0", "cpu 3, memory 0")}
            | {"team": ("cpu 0, memory 0", "cpu 3, memory 0")},
        ),
    ),
}


@pytest.mark.parametrize(("pods", "expected"), CASES.values(), ids=CASES.keys())
def test_a_pod_is_charged_what_kubernetes_holds_for_it(
    pods: tuple[dict[str, Any], ...], expected: Outcome
) -> None:
    assert decide(*pods) == expected
