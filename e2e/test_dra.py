"""GPUs through Dynamic Resource Allocation are charged to their queue (issue 35, item 2).

The suite's scheduler configuration maps the device class ``gpu.example.com`` to
``nvidia.com/gpu`` (e2e/scheduler.conf). The stand-in for a DRA driver is what a driver
publishes, nothing more: a DeviceClass selecting the driver ``gpu.example.com`` and one
ResourceSlice per kwok node with four devices. kube-scheduler's DynamicResources plugin
allocates claims against those slices and binds the pods; kwok runs them (no kubelet plugin is
needed to reach Running on a kwok node). The resourceclaim controller of
kube-controller-manager makes each pod its claim from a ResourceClaimTemplate.

Only on the real backend: kubesim does not serve ``resource.k8s.io`` (no ResourceClaims, no
DRA allocation in its scheduler), and the operator ignores the mapping there.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from e2e import support

pytestmark = pytest.mark.backends(
    "real", reason="kubesim does not serve resource.k8s.io (ResourceClaims, DRA allocation)"
)

DRIVER = "gpu.example.com"
DEVICE_CLASS = "gpu.example.com"
GPU = "nvidia.com/gpu"
DEVICES_PER_NODE = 4
API = "resource.k8s.io/v1"


@pytest.fixture(scope="module")
def gpus(cluster: support.Cluster) -> Iterator[None]:
    """The DeviceClass and one ResourceSlice per kwok node (removed afterwards)."""
    client = cluster.client
    nodes = [node["metadata"]["name"] for node in client.items("nodes")]
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": API,
            "kind": "DeviceClass",
            "metadata": {"name": DEVICE_CLASS},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        }
    ]
    for node in nodes:
        objects.append(
            {
                "apiVersion": API,
                "kind": "ResourceSlice",
                "metadata": {"name": f"e2e-gpus-{node}"},
                "spec": {
                    "driver": DRIVER,
                    "nodeName": node,
                    "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                    "devices": [{"name": f"gpu-{index}"} for index in range(DEVICES_PER_NODE)],
                },
            }
        )
    found = client.apply(objects)
    assert found.returncode == 0, found.stderr
    yield
    for item in objects:
        client.run("delete", item["kind"].lower(), item["metadata"]["name"], "--wait=false")


def template(name: str, namespace: str, *, count: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"spec": {"devices": {"requests": [_request(count)]}}},
    }


def claim(name: str, namespace: str, *, count: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": {"requests": [_request(count)]}},
    }


def _request(count: int) -> dict[str, Any]:
    return {"name": "gpu", "exactly": {"deviceClassName": DEVICE_CLASS, "count": count}}


def gpu_pod(
    name: str, kube: support.Kube, queue: str, *, template: str = "", claim: str = ""
) -> dict[str, Any]:
    """An opted-in pod of ``queue`` whose one claim comes from ``template`` or is ``claim``."""
    manifest = support.pod(name, namespace=kube.namespace, queue=queue)
    source = {"resourceClaimTemplateName": template} if template else {"resourceClaimName": claim}
    manifest["spec"]["resourceClaims"] = [{"name": "gpu", **source}]
    manifest["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    return manifest


def allocated_gpus(kube: support.Kube, queue: str) -> str:
    return support.queue_figures(kube, queue)["allocated"].get(GPU, "0")


def test_a_queue_capped_at_two_gpus_runs_two_pods_with_one_gpu_claims_never_three(
    kube: support.Kube, gpus: None
) -> None:
    name = support.unique("dra-two")
    kube.must(kube.apply(support.queue(name, capability={"cpu": "4", GPU: "2"})))
    kube.must(kube.apply(template("one-gpu", kube.namespace)))
    kube.must(
        kube.as_tenant().apply(
            *(gpu_pod(f"gpu-{index}", kube, name, template="one-gpu") for index in range(3))
        )
    )
    names = [f"gpu-{index}" for index in range(3)]
    support.eventually(
        lambda: sum(kube.running(pod) for pod in names) == 2,
        what="two of the three 1-GPU pods run",
        diagnose=lambda: "\n".join(kube.describe_pod(pod) for pod in names),
    )
    waiting = next(pod for pod in names if not kube.running(pod))
    reason = support.eventually(
        lambda: kube.explanation(waiting),
        what=f"{waiting} is told why it waits",
        diagnose=lambda: kube.describe_pod(waiting),
    )
    support.eventually(
        lambda: allocated_gpus(kube, name) == "2",
        what=f"{name} counts 2 GPUs allocated",
        diagnose=lambda: str(support.queue_figures(kube, name)),
    )
    assert (kube.gated(waiting), name in reason, GPU in reason) == (True, True, True), reason
    # Still never three: one more cycle's worth of waiting changes nothing.
    assert sum(kube.running(pod) for pod in names) == 2


def test_a_shared_claim_is_counted_once_in_its_queue(kube: support.Kube, gpus: None) -> None:
    name = support.unique("dra-shared")
    kube.must(kube.apply(support.queue(name, capability={"cpu": "4", GPU: "1"})))
    kube.must(kube.apply(claim("shared", kube.namespace), template("one-gpu", kube.namespace)))
    tenant = kube.as_tenant()
    kube.must(tenant.apply(gpu_pod("first", kube, name, claim="shared")))
    support.eventually(lambda: kube.running("first"), what="the first pod of the claim runs")
    kube.must(tenant.apply(gpu_pod("second", kube, name, claim="shared")))
    support.eventually(
        lambda: kube.running("second"),
        what="the second pod of the same claim runs: the claim's GPU is counted once",
        diagnose=lambda: kube.describe_pod("second") + str(support.queue_figures(kube, name)),
    )
    # The claim is charged (once): a pod with a GPU of its own finds no room.
    kube.must(tenant.apply(gpu_pod("own", kube, name, template="one-gpu")))
    reason = support.eventually(
        lambda: kube.explanation("own"),
        what="the pod with its own GPU is told the queue is full",
        diagnose=lambda: kube.describe_pod("own"),
    )
    assert (kube.gated("own"), GPU in reason, allocated_gpus(kube, name)) == (True, True, "1"), (
        reason
    )


def test_a_pod_whose_template_does_not_exist_waits_told_why(kube: support.Kube, gpus: None) -> None:
    name = support.unique("dra-missing")
    kube.must(kube.apply(support.queue(name, capability={"cpu": "4", GPU: "2"})))
    kube.must(kube.as_tenant().apply(gpu_pod("orphan", kube, name, template="not-yet")))
    reason = support.eventually(
        lambda: kube.explanation("orphan"),
        what="the pod whose template is missing is told why it waits",
        diagnose=lambda: kube.describe_pod("orphan"),
    )
    assert ("ResourceClaimTemplate" in reason, "not-yet" in reason) == (True, True), reason
    kube.must(kube.apply(template("not-yet", kube.namespace)))
    support.eventually(
        lambda: kube.running("orphan"),
        what="the pod runs once its template exists",
        diagnose=lambda: kube.describe_pod("orphan"),
    )
