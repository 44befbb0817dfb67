"""The wire shapes of the Workload API's PodGroup (``api.native_groups``)."""

from __future__ import annotations

from typing import Any

import pytest

from queuetree.api import native_groups

OWNER = {
    "apiVersion": "scheduling.volcano.sh/v1beta1",
    "kind": "PodGroup",
    "name": "g",
    "uid": "u1",
}


@pytest.mark.parametrize(
    ("min_member", "policy"),
    [
        pytest.param(4, {"gang": {"minCount": 4}}, id="a-gang-of-four"),
        pytest.param(1, {"gang": {"minCount": 1}}, id="a-group-of-one-is-a-gang-of-one"),
    ],
)
def test_the_native_group_of_a_volcano_group(min_member: int, policy: dict[str, Any]) -> None:
    body = native_groups.pod_group(namespace="ns", name="g", min_member=min_member, owner_uid="u1")
    assert body == {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "ns", "ownerReferences": [OWNER]},
        "spec": {"schedulingPolicy": policy},
    }
    assert native_groups.owner_uid(body) == "u1"


@pytest.mark.parametrize(
    ("discovery", "served"),
    [
        pytest.param(
            {"resources": [{"name": "workloads"}, {"name": "podgroups"}]}, True, id="served"
        ),
        pytest.param({"resources": [{"name": "workloads"}]}, False, id="other-resources"),
        pytest.param({}, False, id="an-empty-answer"),
    ],
)
def test_discovery_says_whether_podgroups_are_served(
    discovery: dict[str, Any], served: bool
) -> None:
    assert native_groups.serves_pod_groups(discovery) is served


@pytest.mark.parametrize(
    ("mode", "served", "on", "said"),
    [
        pytest.param("auto", True, True, "the API server serves", id="auto-served"),
        pytest.param("auto", False, False, "does not serve", id="auto-not-served"),
        pytest.param("auto", None, False, "could not be asked", id="auto-unknown"),
        pytest.param("true", False, True, "--native-pod-groups=true", id="forced-on"),
        pytest.param("false", True, False, "--native-pod-groups=false", id="forced-off"),
    ],
)
def test_the_mode_is_resolved_and_said(mode: str, served: bool | None, on: bool, said: str) -> None:
    resolved, line = native_groups.resolve(mode, served)
    assert (resolved, said in line) == (on, True)


@pytest.mark.parametrize(
    ("spec", "patch", "named"),
    [
        pytest.param(
            {"containers": []},
            [{"op": "add", "path": "/spec/schedulingGroup", "value": {"podGroupName": "g"}}],
            None,
            id="a-pod-naming-none",
        ),
        pytest.param(
            {"schedulingGroup": {"podGroupName": "other"}},
            [{"op": "add", "path": "/spec/schedulingGroup", "value": {"podGroupName": "g"}}],
            "other",
            id="a-pod-naming-one-already",
        ),
    ],
)
def test_a_pod_is_made_to_name_its_native_group(
    spec: dict[str, Any], patch: list[dict[str, Any]], named: str | None
) -> None:
    pod = {"metadata": {"name": "p"}, "spec": spec}
    assert (native_groups.pod_patch(pod, "g"), native_groups.group_of_pod(pod)) == (patch, named)
