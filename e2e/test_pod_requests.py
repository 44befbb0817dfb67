"""A pod is charged what Kubernetes holds for it, and a ``pods`` capability counts pods.

The red team's three findings, replayed as a tenant with kubectl (pods are created with the
tenant's own credentials, :meth:`support.Kube.as_tenant`) in its tree: ``team`` (cpu 4,
memory 8Gi) and its child ``b`` (cpu 3, memory 4Gi).

- An init container that asks for more than the containers raises the pod's request:
  kube-scheduler holds it on the node for the pod's whole life (docs/compatibility.md, 17).
- Pod-level resources (``spec.resources``, on by default since Kubernetes 1.34) are the pod's
  requests; a pod-level limit alone is the request, as the API server defaults it (18).
- A ``pods`` capability limits how many pods run in the queue (19).

Each test shows that the pod that does not fit waits, told which queue, which resource and the
figures, and that the queue status counts what the admitted pod is charged.
"""

from __future__ import annotations

from typing import Any

from e2e import support
from queuetree.core import quantities

TENTH = {"cpu": "100m", "memory": "64Mi"}


def tree(kube: support.Kube, *, pods: str | None = None) -> tuple[str, str]:
    """The red team's ``team`` and ``b`` (``b`` with a ``pods`` capability when given)."""
    team, leaf = support.unique("requests-team"), support.unique("requests-b")
    capability = {"cpu": "3", "memory": "4Gi"}
    if pods is not None:
        capability["pods"] = pods
    kube.must(
        kube.apply(
            support.queue(team, capability={"cpu": "4", "memory": "8Gi"}),
            support.queue(leaf, parent=team, capability=capability),
        )
    )
    return team, leaf


def container(name: str = "main", **requests: str) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "image": support.IMAGE}
    if requests:
        body["resources"] = {"requests": requests, "limits": requests}
    return body


def shaped(name: str, kube: support.Kube, queue: str, **spec: Any) -> dict[str, Any]:
    """An opted-in pod of ``queue`` whose spec fields ``spec`` replace the usual ones."""
    manifest = support.pod(name, namespace=kube.namespace, queue=queue, requests=TENTH)
    manifest["spec"].update(spec)
    return manifest


def milli(figures: dict[str, dict[str, str]], figure: str, resource: str) -> int:
    """A figure of ``support.queue_figures`` in milli-units (0 when absent)."""
    return quantities.to_milli(quantities.parse(figures[figure].get(resource, "0")))


def charged(kube: support.Kube, queues: tuple[str, ...], resource: str, amount: str) -> bool:
    """Every queue of ``queues`` has ``amount`` of ``resource`` allocated in its status."""
    wanted = quantities.to_milli(quantities.parse(amount))
    return all(
        milli(support.queue_figures(kube, name), "allocated", resource) == wanted for name in queues
    )


def test_an_init_container_larger_than_the_containers_is_charged(kube: support.Kube) -> None:
    team, leaf = tree(kube)
    tenant = kube.as_tenant()
    kube.must(
        tenant.apply(
            shaped(
                "init-big",
                kube,
                leaf,
                initContainers=[container("init", cpu="30", memory="100Gi")],
                containers=[container(cpu="1")],
            ),
            shaped(
                "init-small",
                kube,
                leaf,
                initContainers=[container("init", cpu="300m", memory="64Mi")],
                containers=[container(cpu="100m", memory="32Mi")],
            ),
        )
    )
    reason = support.eventually(
        lambda: kube.explanation("init-big"),
        what="the pod with a 30-CPU init container is told why it waits",
        diagnose=lambda: kube.describe_pod("init-big"),
    )
    support.eventually(lambda: kube.running("init-small"), what="init-small runs")
    support.eventually(
        lambda: charged(kube, (leaf, team), "cpu", "300m"),
        what=f"{leaf} and {team} count init-small's init request (300m), not its 100m",
        diagnose=lambda: f"{support.queue_figures(kube, leaf)} {support.queue_figures(kube, team)}",
    )
    figures = support.queue_figures(kube, leaf)
    assert (
        kube.gated("init-big"),
        f"queue {leaf!r} cannot take the pod's requests on cpu: requested 30, used" in reason,
        "of capability 3" in reason,
        milli(figures, "allocated", "memory"),
    ) == (True, True, True, 64 * 2**20 * 1000), (reason, figures)


def test_pod_level_resources_are_the_pods_requests(kube: support.Kube) -> None:
    team, leaf = tree(kube)
    tenant = kube.as_tenant()
    kube.must(
        tenant.apply(
            shaped(
                "podlevel",
                kube,
                leaf,
                resources={
                    "requests": {"cpu": "20", "memory": "50Gi"},
                    "limits": {"cpu": "20", "memory": "50Gi"},
                },
                containers=[container()],
            ),
            # Limits only: the API server defaults the pod-level requests to them.
            shaped(
                "limits-only",
                kube,
                leaf,
                resources={"limits": {"cpu": "200m", "memory": "96Mi"}},
                containers=[container()],
            ),
        )
    )
    reason = support.eventually(
        lambda: kube.explanation("podlevel"),
        what="the pod with pod-level requests of 20 CPU is told why it waits",
        diagnose=lambda: kube.describe_pod("podlevel"),
    )
    support.eventually(lambda: kube.running("limits-only"), what="limits-only runs")
    support.eventually(
        lambda: charged(kube, (leaf, team), "cpu", "200m"),
        what=f"{leaf} and {team} count limits-only's pod-level request (200m)",
        diagnose=lambda: f"{support.queue_figures(kube, leaf)} {support.queue_figures(kube, team)}",
    )
    figures = support.queue_figures(kube, leaf)
    assert (
        kube.gated("podlevel"),
        f"queue {leaf!r} cannot take the pod's requests on cpu: requested 20, used" in reason,
        "of capability 3" in reason,
        milli(figures, "allocated", "memory"),
    ) == (True, True, True, 96 * 2**20 * 1000), (reason, figures)


def test_a_pods_capability_limits_how_many_pods_run(kube: support.Kube) -> None:
    team, leaf = tree(kube)
    # As the red team did: the administrator adds pods to the capability of a live queue.
    kube.must(
        kube.kubectl(
            "patch",
            "queue",
            leaf,
            "--type=json",
            "-p",
            '[{"op":"replace","path":"/spec/capability",'
            '"value":{"cpu":"3","memory":"4Gi","pods":"1"}}]',
        )
    )
    tenant = kube.as_tenant()
    names = ["pc1", "pc2", "pc3"]
    kube.must(
        tenant.apply(
            *(
                support.pod(name, namespace=kube.namespace, queue=leaf, requests=TENTH)
                for name in names
            )
        )
    )
    support.eventually(
        lambda: (
            sum(kube.running(name) for name in names) == 1
            and all(kube.running(name) or kube.explanation(name) for name in names)
        ),
        what="one pod runs and the two others are told why they wait",
        diagnose=lambda: "\n".join(f"{n}: {kube.explanation(n)}" for n in names),
    )
    support.eventually(
        lambda: all(
            support.queue_figures(kube, name)["allocated"].get("pods") == "1"
            for name in (leaf, team)
        ),
        what=f"{leaf} and {team} count one allocated pod",
    )
    waiting = [name for name in names if not kube.running(name)]
    reasons = [kube.explanation(name) for name in waiting]
    status = (kube.queue(leaf) or {}).get("status") or {}
    assert (
        len(waiting),
        all(kube.gated(name) for name in waiting),
        all(
            f"queue {leaf!r} has no room for pods: requested 1, used 1 of capability 1" in reason
            for reason in reasons
        ),
        (status.get("realCapability") or {}).get("pods"),
    ) == (2, True, True, "1"), (reasons, status)
