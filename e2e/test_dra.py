"""GPUs through Dynamic Resource Allocation are charged to their queue (issue 35, item 2).

The suite's scheduler configuration maps the device class ``gpu.example.com`` to
``nvidia.com/gpu`` (e2e/scheduler.conf). The stand-in for a DRA driver is what a driver
publishes, nothing more: a DeviceClass selecting the driver ``gpu.example.com`` and one
ResourceSlice per kwok node with four devices. kube-scheduler's DynamicResources plugin
allocates claims against those slices and binds the pods; kwok runs them (no kubelet plugin is
needed to reach Running on a kwok node). The resourceclaim controller of
kube-controller-manager makes each pod its claim from a ResourceClaimTemplate.

A pod with a template is charged from the claim the controller generated for it, never from the
template: the tests at the end swap, as a tenant may, a template while its pod waits or runs
(Kubernetes' ``edit`` role lets a tenant write ResourceClaims and ResourceClaimTemplates).

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


def tenant_with_claims(kube: support.Kube) -> support.Kube:
    """The namespace's tenant, also allowed to write its ResourceClaims and
    ResourceClaimTemplates, as Kubernetes' ``edit`` role allows (aggregate-to-edit)."""
    tenant = kube.as_tenant()
    name = f"{support.TENANT}-claims"
    kube.must(
        kube.apply(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": {"name": name, "namespace": kube.namespace},
                "rules": [
                    {
                        "apiGroups": ["resource.k8s.io"],
                        "resources": ["resourceclaims", "resourceclaimtemplates"],
                        "verbs": list(support.TENANT_VERBS),
                    }
                ],
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": name, "namespace": kube.namespace},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                "subjects": [
                    {"kind": "ServiceAccount", "name": support.TENANT, "namespace": kube.namespace}
                ],
            },
        )
    )
    return tenant


def trapping(name: str, namespace: str, *, count: int = 1) -> dict[str, Any]:
    """A template for ``count`` GPUs whose claims select a device no driver publishes:
    kube-scheduler never allocates them, so a pod admitted on one stays unscheduled and its
    claim unallocated, which its tenant may delete (queuetree charges counts, not selectors)."""
    manifest = template(name, namespace, count=count)
    nowhere = {"cel": {"expression": 'device.driver == "nobody.example.com"'}}
    manifest["spec"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [nowhere]
    return manifest


def swap_template(tenant: support.Kube, name: str, *, count: int, trap: bool = False) -> None:
    """Delete template ``name`` and create one of the same name for ``count`` GPUs (a
    template's spec is immutable; its name is not), a :func:`trapping` one when ``trap``."""
    tenant.must(
        tenant.kubectl(
            "delete", "resourceclaimtemplate", name, "-n", tenant.namespace, "--wait=true"
        )
    )
    made = trapping if trap else template
    tenant.must(tenant.apply(made(name, tenant.namespace, count=count)))


def generated_claim(kube: support.Kube, pod: str) -> str:
    """The claim the resourceclaim controller made for ``pod`` (status.resourceClaimStatuses);
    empty until it did."""
    found = kube.pod(pod) or {}
    for entry in (found.get("status") or {}).get("resourceClaimStatuses") or []:
        if entry.get("name") == "gpu":
            return str(entry.get("resourceClaimName") or "")
    return ""


def devices_allocated(kube: support.Kube) -> dict[str, int]:
    """The devices kube-scheduler allocated to each ResourceClaim of the namespace."""
    claims = kube.client.items("resourceclaims", "-n", kube.namespace)
    return {
        item["metadata"]["name"]: len(
            ((item.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results")
            or []
        )
        for item in claims
    }


def short_of_gpus(kube: support.Kube, pod: str) -> str:
    """Why ``pod`` waits when that names the GPUs its queue has no room for; empty otherwise
    (a pod still waiting for its claim is told that instead)."""
    said = kube.explanation(pod)
    return said if GPU in said else ""


def gpu_cell(kube: support.Kube, queue: str) -> str:
    """The GPU-ALLOCATED cell of ``kubectl get queue``."""
    return support.queue_cells(kube, queue)["GPU-ALLOCATED"]


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
        lambda: short_of_gpus(kube, waiting),
        what=f"{waiting} is told its queue has no GPU for it",
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
        lambda: short_of_gpus(kube, "own"),
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


def test_a_template_made_smaller_while_its_pod_waits_does_not_admit_it(
    kube: support.Kube, gpus: None
) -> None:
    name = support.unique("dra-swap")
    kube.must(kube.apply(support.queue(name, capability={"cpu": "4", GPU: "2"})))
    tenant = tenant_with_claims(kube)
    tenant.must(tenant.apply(template("swap", kube.namespace, count=4)))
    tenant.must(tenant.apply(gpu_pod("big", kube, name, template="swap")))
    made = support.eventually(
        lambda: generated_claim(kube, "big"),
        what="the resourceclaim controller makes the gated pod its 4-GPU claim",
        diagnose=lambda: kube.describe_pod("big"),
    )
    support.eventually(
        lambda: short_of_gpus(kube, "big"),
        what="big waits, told its queue has no room for its GPUs",
        diagnose=lambda: kube.describe_pod("big"),
    )
    # The tenant makes the template small while big waits: big's claim stays 4 GPUs.
    swap_template(tenant, "swap", count=1)
    tenant.must(tenant.apply(gpu_pod("small", kube, name, template="swap")))
    support.eventually(
        lambda: kube.running("small"),
        what="a pod made from the smaller template runs (the operator saw the new template)",
        diagnose=lambda: kube.describe_pod("small") + kube.describe_pod("big"),
    )
    support.eventually(
        lambda: gpu_cell(kube, name) == "1",
        what=f"kubectl get queue {name} shows 1 GPU allocated",
        diagnose=lambda: kube.kubectl("get", "queue", name).stdout,
    )
    allocated = devices_allocated(kube)
    assert (kube.gated("big"), allocated[made], sum(allocated.values())) == (True, 0, 1), (
        kube.explanation("big"),
        allocated,
    )


def test_a_running_pod_keeps_its_charge_when_its_template_is_made_smaller(
    kube: support.Kube, gpus: None
) -> None:
    name = support.unique("dra-keep")
    kube.must(kube.apply(support.queue(name, capability={"cpu": "4", GPU: "2"})))
    tenant = tenant_with_claims(kube)
    tenant.must(tenant.apply(template("pair", kube.namespace, count=2)))
    tenant.must(tenant.apply(gpu_pod("first", kube, name, template="pair")))
    support.eventually(lambda: kube.running("first"), what="the 2-GPU pod runs")
    swap_template(tenant, "pair", count=1)
    tenant.must(tenant.apply(gpu_pod("second", kube, name, template="pair")))
    reason = support.eventually(
        lambda: short_of_gpus(kube, "second"),
        what="the second pod waits, told the queue has no room for its GPU",
        diagnose=lambda: kube.describe_pod("second"),
    )
    cell = gpu_cell(kube, name)
    allocated = devices_allocated(kube)
    assert (kube.gated("second"), name in reason, cell, sum(allocated.values())) == (
        True,
        True,
        "2",
        2,
    ), (reason, allocated)


def test_a_waiting_pods_claim_deleted_by_its_tenant_is_charged_as_made_again(
    kube: support.Kube, gpus: None
) -> None:
    name = support.unique("dra-remade")
    kube.must(kube.apply(support.queue(name, capability={"cpu": "4", GPU: "2"})))
    tenant = tenant_with_claims(kube)
    tenant.must(tenant.apply(template("four", kube.namespace, count=4)))
    tenant.must(tenant.apply(gpu_pod("big", kube, name, template="four")))
    first = support.eventually(
        lambda: generated_claim(kube, "big"),
        what="the gated pod gets its 4-GPU claim",
        diagnose=lambda: kube.describe_pod("big"),
    )
    support.eventually(
        lambda: short_of_gpus(kube, "big"),
        what="big waits, told its queue has no room for its GPUs",
        diagnose=lambda: kube.describe_pod("big"),
    )
    # The tenant deletes the pod's claim after making the template small: the controller makes
    # the pod a new claim from the template as it is now, and that claim is what is allocated.
    swap_template(tenant, "four", count=1)
    tenant.must(
        tenant.kubectl("delete", "resourceclaim", first, "-n", kube.namespace, "--wait=true")
    )
    support.eventually(
        lambda: kube.running("big"),
        what="big runs on its new 1-GPU claim",
        diagnose=lambda: kube.describe_pod("big"),
    )
    second = generated_claim(kube, "big")
    support.eventually(
        lambda: gpu_cell(kube, name) == "1",
        what=f"kubectl get queue {name} shows 1 GPU allocated",
        diagnose=lambda: kube.kubectl("get", "queue", name).stdout,
    )
    assert (second != first, devices_allocated(kube)) == (True, {second: 1})


def test_an_admitted_pod_whose_claim_is_made_again_larger_is_evicted(
    kube: support.Kube, gpus: None
) -> None:
    # The tenant keeps an admitted pod unscheduled (its claim selects a device no driver
    # publishes: queuetree charges counts, not selectors), then deletes its claim and makes the
    # template larger: the controller makes the pod a 2-GPU claim, which would put 3 GPUs in a
    # 2-GPU queue. A gate cannot be put back: the operator evicts the pod, told why.
    name = support.unique("dra-outgrown")
    kube.must(kube.apply(support.queue(name, capability={"cpu": "4", GPU: "2"})))
    tenant = tenant_with_claims(kube)
    tenant.must(tenant.apply(template("one-gpu", kube.namespace), trapping("trap", kube.namespace)))
    tenant.must(tenant.apply(gpu_pod("honest", kube, name, template="one-gpu")))
    support.eventually(lambda: kube.running("honest"), what="the 1-GPU pod runs")
    tenant.must(tenant.apply(gpu_pod("sneaky", kube, name, template="trap")))
    support.eventually(
        lambda: kube.pod("sneaky") is not None and not kube.gated("sneaky"),
        what="sneaky is admitted on its 1-GPU claim (that no device matches)",
        diagnose=lambda: kube.describe_pod("sneaky"),
    )
    first = generated_claim(kube, "sneaky")
    swap_template(tenant, "trap", count=2)
    tenant.must(
        tenant.kubectl("delete", "resourceclaim", first, "-n", kube.namespace, "--wait=true")
    )
    # kube-controller-manager v1.37.2 may keep the claim it made in its mutation cache after the
    # deletion and make a new one only on the pod's next change (the audit log shows it); the
    # tenant makes that change. When it made the new claim at once, the operator may already
    # have evicted the pod: then there is nothing to poke.
    poked = tenant.kubectl("annotate", "pod", "sneaky", "-n", kube.namespace, "poke=1")
    assert poked.ok or "NotFound" in poked.stderr, poked.describe()
    support.eventually(
        lambda: kube.pod("sneaky") is None,
        what="the operator evicts sneaky, whose new claim asks for 2 GPUs",
        diagnose=lambda: kube.kubectl("describe", "pod", "sneaky", "-n", kube.namespace).stdout,
    )
    told = support.eventually(
        lambda: [
            str(event.get("message", ""))
            for event in kube.events_of("Pod", "sneaky")
            if event.get("reason") == "ClaimOutgrown"
        ],
        what="sneaky's eviction is told in a ClaimOutgrown Event",
    )
    support.eventually(
        lambda: gpu_cell(kube, name) == "1",
        what=f"kubectl get queue {name} shows 1 GPU allocated again",
        diagnose=lambda: kube.kubectl("get", "queue", name).stdout,
    )
    assert (len(told), all(f"{GPU} 2" in message for message in told)) == (1, True), told


def test_an_admitted_pods_charge_survives_a_restart_after_its_claim_was_made_smaller(
    kube: support.Kube, gpus: None
) -> None:
    # The tenant keeps an admitted 2-GPU pod unscheduled (its claim selects a device no driver
    # publishes), makes its template 1 GPU and deletes the claim: the controller makes a 1-GPU
    # claim. The pod stays charged 2 (the claim it was admitted on may be allocated yet), and
    # what the operator knew in memory only must survive a restart: its admission record says 2.
    name = support.unique("dra-record")
    kube.must(kube.apply(support.queue(name, capability={"cpu": "4", GPU: "2"})))
    tenant = tenant_with_claims(kube)
    tenant.must(tenant.apply(trapping("trap", kube.namespace, count=2)))
    tenant.must(tenant.apply(template("one-gpu", kube.namespace)))
    tenant.must(tenant.apply(gpu_pod("sneaky", kube, name, template="trap")))
    support.eventually(
        lambda: kube.pod("sneaky") is not None and not kube.gated("sneaky"),
        what="sneaky is admitted on its 2-GPU claim (that no device matches)",
        diagnose=lambda: kube.describe_pod("sneaky"),
    )
    record = ((kube.pod("sneaky") or {}).get("metadata") or {}).get("annotations") or {}
    first = generated_claim(kube, "sneaky")
    swap_template(tenant, "trap", count=1, trap=True)
    tenant.must(
        tenant.kubectl("delete", "resourceclaim", first, "-n", kube.namespace, "--wait=true")
    )
    # kube-controller-manager may make the new claim only on the pod's next change (see the
    # outgrown case above).
    tenant.must(tenant.kubectl("annotate", "pod", "sneaky", "-n", kube.namespace, "poke=1"))
    support.eventually(
        lambda: generated_claim(kube, "sneaky") not in ("", first),
        what="the controller makes sneaky a new, 1-GPU claim",
        diagnose=lambda: kube.describe_pod("sneaky"),
    )
    support.restart_operator(kube.cluster)
    tenant.must(tenant.apply(gpu_pod("honest", kube, name, template="one-gpu")))
    reason = support.eventually(
        lambda: short_of_gpus(kube, "honest"),
        what="honest waits, told its queue has no GPU left for it",
        diagnose=lambda: kube.describe_pod("honest") + kube.describe_pod("sneaky"),
    )
    assert (
        record.get("scheduling.queuetree.io/admitted-devices"),
        gpu_cell(kube, name),
        kube.gated("honest"),
        name in reason,
    ) == ('{"nvidia.com/gpu":"2"}', "2", True, True), reason
