"""The quota promise under attack: every known bypass, tried as a tenant (and, for the admin
mistakes, as an administrator) would, while a monitor checks all along that no queue and no
ancestor ever runs more than its capability.

The monitor reads the cluster with kubectl as any user could, and trusts nothing queuetree
writes about usage: for every queue, every ancestor of it and every resource, it sums the
requests of the admitted, unfinished pods charged to that subtree (admitted: the queue gate is
gone; charged: the queue the pod was admitted to, as the operator records it, else the queue
its annotations and PodGroup name now) and compares the sum with the queue's real capability,
the smallest ``spec.capability`` on the path from the queue to root (the tree has no
guarantees, so nothing else lowers it). A pod's requests are what Kubernetes holds for it
(init containers, sidecars, pod-level requests, overhead: :func:`requests_of`, computed here,
not by queuetree), and each pod counts one ``pods``.

The tenant is a ServiceAccount that may do anything to the pods and PodGroups of its namespace
(``support.Kube.as_tenant``), with a token from ``kubectl create token``: on kubesim it is
authenticated but not authorized (kubesim authorizes everything), on the real control plane it
is both, and every attack here stays within what its Role allows.
"""

from __future__ import annotations

import dataclasses
import decimal
import json
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from e2e import support
from queuetree.core import errors, quantities

TENTH = {"cpu": "100m", "memory": "64Mi"}
RESOURCES = ("cpu", "memory", "pods")
ADMITTED_QUEUE = "scheduling.queuetree.io/admitted-queue"


def amount(text: object) -> decimal.Decimal:
    """A quantity's exact value (sums of floats would see 0.1 + 0.2 above 0.3)."""
    try:
        return quantities.parse(str(text)).value
    except errors.QuantityError:
        return decimal.Decimal(0)


def requests_of(pod: Mapping[str, Any]) -> dict[str, decimal.Decimal]:
    """What kube-scheduler holds for the pod (Kubernetes' ``PodRequests``), on
    :data:`RESOURCES`, as the API server stores it (requests defaulted from limits): the
    containers plus sidecars, or an init container plus the sidecars before it where larger,
    each pod-level request in place of that, plus the overhead; and one pod."""
    spec = pod.get("spec") or {}

    def asked(container: Mapping[str, Any]) -> dict[str, decimal.Decimal]:
        listed = (container.get("resources") or {}).get("requests") or {}
        return {name: amount(listed.get(name, 0)) for name in RESOURCES}

    total = dict.fromkeys(RESOURCES, decimal.Decimal(0))
    sidecars = dict(total)
    peak = dict(total)
    for container in spec.get("containers") or []:
        total = {name: total[name] + value for name, value in asked(container).items()}
    for container in spec.get("initContainers") or []:
        own = asked(container)
        if container.get("restartPolicy") == "Always":
            total = {name: total[name] + value for name, value in own.items()}
            sidecars = {name: sidecars[name] + value for name, value in own.items()}
        else:
            peak = {name: max(peak[name], own[name] + sidecars[name]) for name in RESOURCES}
    total = {name: max(total[name], peak[name]) for name in RESOURCES}
    for name, value in ((spec.get("resources") or {}).get("requests") or {}).items():
        if name in ("cpu", "memory"):
            total[name] = amount(value)
    for name, value in (spec.get("overhead") or {}).items():
        if name in total:
            total[name] += amount(value)
    total["pods"] = decimal.Decimal(1)
    return total


def charged_queue(pod: Mapping[str, Any], groups: Mapping[str, str]) -> str:
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    if annotations.get(ADMITTED_QUEUE):
        return str(annotations[ADMITTED_QUEUE])
    group = annotations.get(support.GROUP_NAME)
    if group and group in groups:
        return groups[group]
    return str(annotations.get(support.QUEUE_NAME) or "default")


@dataclasses.dataclass(frozen=True)
class Violation:
    queue: str
    resource: str
    used: decimal.Decimal
    capability: decimal.Decimal
    pods: tuple[str, ...]


def violations(
    queues: list[dict[str, Any]], pods: list[dict[str, Any]], groups: list[dict[str, Any]]
) -> list[Violation]:
    """Every queue, ancestor and resource whose admitted, unfinished pods exceed its real
    capability (see the module docstring)."""
    parent = {q["metadata"]["name"]: (q.get("spec") or {}).get("parent") or "root" for q in queues}
    capability = {
        q["metadata"]["name"]: (q.get("spec") or {}).get("capability") or {} for q in queues
    }
    queue_of_group = {
        g["metadata"]["name"]: (g.get("spec") or {}).get("queue") or "default" for g in groups
    }
    used: dict[str, dict[str, decimal.Decimal]] = {}
    holders: dict[str, list[str]] = {}
    for pod in pods:
        gates = [g.get("name") for g in (pod.get("spec") or {}).get("schedulingGates") or []]
        phase = (pod.get("status") or {}).get("phase")
        if support.GATE in gates or phase in ("Succeeded", "Failed"):
            continue
        queue, seen = charged_queue(pod, queue_of_group), set()
        while queue and queue not in seen:  # the queue and every ancestor, cycles cut
            seen.add(queue)
            totals = used.setdefault(queue, dict.fromkeys(RESOURCES, decimal.Decimal(0)))
            for name, value in requests_of(pod).items():
                totals[name] += value
            holders.setdefault(queue, []).append(pod["metadata"]["name"])
            queue = parent.get(queue, "") if queue != "root" else ""
    found = []
    for queue, totals in used.items():
        for name, value in totals.items():
            limits, walk, seen = [], queue, set()
            while walk in capability and walk not in seen:
                seen.add(walk)
                if name in capability[walk]:
                    limits.append(amount(capability[walk][name]))
                walk = parent[walk]
            if limits and value > min(limits):
                found.append(Violation(queue, name, value, min(limits), tuple(holders[queue])))
    return found


class Monitor:
    """Checks the invariant in a thread, as often as kubectl answers, until stopped."""

    def __init__(self, kube: support.Kube) -> None:
        self._kube = kube
        self._stop = threading.Event()
        self.samples = 0
        self.seen: list[Violation] = []
        self._thread = threading.Thread(target=self._run, name="invariant monitor", daemon=True)

    def _read(self, *args: str) -> list[dict[str, Any]]:
        result = self._kube.kubectl("get", *args, "-o", "json")
        return list(result.json().get("items", [])) if result.ok else []

    def _run(self) -> None:
        namespace = self._kube.namespace
        while not self._stop.is_set():
            found = violations(
                self._read("queues"),
                self._read("pods", "-n", namespace),
                self._read(support.PODGROUP, "-n", namespace),
            )
            self.seen.extend(found)
            self.samples += 1

    def __enter__(self) -> Monitor:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(60)


@pytest.fixture
def monitor(kube: support.Kube) -> Iterator[Monitor]:
    with Monitor(kube) as watching:
        yield watching


@dataclasses.dataclass
class Attacks:
    """What each attempt printed: name -> (kubectl succeeded, the words that matter found)."""

    outcomes: dict[str, tuple[bool, bool]] = dataclasses.field(default_factory=dict)

    def record(self, name: str, result: Any, words: str) -> None:
        self.outcomes[name] = (bool(result.ok), words in result.stderr)


def test_no_queue_runs_more_than_its_capability_whatever_tenants_and_admins_try(
    kube: support.Kube, monitor: Monitor
) -> None:
    names = {
        role: support.unique(f"inv-{role}")
        for role in ("org", "a", "b", "dept", "team", "closed", "spare", "few")
    }
    org, a, b, spare = names["org"], names["a"], names["b"], names["spare"]
    kube.must(
        kube.apply(
            support.queue(org, capability={"cpu": "500m"}),
            support.queue(a, parent=org, capability={"cpu": "300m"}),
            support.queue(b, parent=org, capability={"cpu": "300m"}),
            support.queue(names["dept"]),
            support.queue(names["team"], parent=names["dept"]),
            support.queue(names["closed"]),
            support.queue(spare, capability={"cpu": "200m"}),
            support.queue(names["few"], capability={"cpu": "1", "pods": "1"}),
        )
    )
    support.eventually(
        lambda: kube.queue_state(names["closed"]) == "Open", what="the queues have a status"
    )
    kube.set_queue_state(names["closed"], "Closed")
    kube.must(kube.kubectl("label", "namespace", kube.namespace, f"{support.GATE}=true"))
    tenant = kube.as_tenant()
    attacks = Attacks()

    def pod(name: str, queue: str | None, **extra: Any) -> dict[str, Any]:
        return support.pod(name, namespace=kube.namespace, queue=queue, requests=TENTH, **extra)

    def patch(kind: str, name: str, body: object, *, how: str = "merge") -> Any:
        return tenant.kubectl(
            "patch", kind, name, "-n", kube.namespace, f"--type={how}", "-p", json.dumps(body)
        )

    # a full (three tenths of three), b holding an admitted gang of two: org is full (5 of 5).
    kube.must(tenant.apply(*(pod(f"a-{i}", a) for i in range(3))))
    kube.must(tenant.apply(support.pod_group("gang", namespace=kube.namespace, queue=b)))
    kube.must(tenant.apply(*(pod(f"gang-{i}", None, group="gang") for i in range(2))))
    support.eventually(
        lambda: all(kube.running(p) for p in ("a-0", "a-1", "a-2", "gang-0", "gang-1")),
        what="a and the gang in b run",
    )

    # 1. Move a running pod out of a (to b, to a missing queue), and its gang out of b (to
    #    another queue, to a queue with children): each frees room that is still used.
    for label, target in (("another queue", b), ("a missing queue", support.unique("inv-gone"))):
        attacks.record(
            f"move a running pod to {label}",
            patch("pod", "a-0", {"metadata": {"annotations": {support.QUEUE_NAME: target}}}),
            f"was admitted to queue {a}",
        )
    for label, target in (("another queue", spare), ("a queue with children", names["dept"])):
        attacks.record(
            f"move the running gang to {label}",
            patch(support.PODGROUP, "gang", {"spec": {"queue": target}}),
            f"was admitted to queue {b}",
        )
    kube.must(tenant.apply(pod("a-more", a), pod("b-more", b)))
    support.eventually(
        lambda: kube.judged("a-more", a) and kube.judged("b-more", org),
        what="the pods asking a and b for more are judged",
    )

    # 2. Take the gate off the waiting pod.
    attacks.record(
        "remove the gate of a waiting pod",
        patch("pod", "a-more", [{"op": "remove", "path": "/spec/schedulingGates"}], how="json"),
        "only the queuetree operator",
    )

    # 3. Opt out of the opted-in namespace; come bound to a node; name another scheduler.
    opted_out = pod("opted-out", a)
    opted_out["metadata"]["annotations"][support.GATE] = "false"
    attacks.record("opt out with false", tenant.create(opted_out), "cannot opt the pod out")
    bound = pod("bound", a)
    bound["spec"]["nodeName"] = kube.cluster.client.items("nodes")[0]["metadata"]["name"]
    attacks.record("come bound to a node", tenant.create(bound), "remove spec.nodeName")
    foreign = pod("foreign", a)
    foreign["spec"]["schedulerName"] = "my-scheduler"
    attacks.record("ask for another scheduler", tenant.create(foreign), "spec.schedulerName")

    # 4. A gang of three created before its PodGroup, in a queue with room for two of it.
    kube.must(tenant.apply(*(pod(f"early-{i}", spare, group="early") for i in range(3))))
    support.eventually(
        lambda: all("does not exist" in kube.explanation(f"early-{i}") for i in range(3)),
        what="the early gang waits for its group",
    )
    kube.must(
        tenant.apply(
            support.pod_group("early", namespace=kube.namespace, queue=spare, min_member=3)
        )
    )
    support.eventually(
        lambda: all("minMember 3" in kube.explanation(f"early-{i}") for i in range(3)),
        what="the early gang waits whole",
    )

    # 5. A best-effort pod in the full queue a: it uses nothing, so it runs.
    free = pod("free", a)
    free["spec"]["containers"][0]["resources"] = {}
    kube.must(tenant.apply(free))
    support.eventually(lambda: kube.running("free"), what="the best-effort pod runs")

    # 6. Forge the admission record at creation: a pod naming the full queue a, recorded as
    #    admitted to a queue without a capability. Then grow a running pod of a in place, and
    #    the pod that waits in a (a resize changes requests: nothing else may).
    forged = pod("forged", a)
    forged["metadata"]["annotations"][ADMITTED_QUEUE] = names["team"]
    attacks.record(
        "come with a forged admission record",
        tenant.create(forged),
        "cannot be created with the admission record",
    )
    kube.report_container_resources("a-1")
    grown = {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}
    attacks.record(
        "grow a running pod in place", tenant.resize("a-1", grown), f"was admitted to queue {a}"
    )
    attacks.record(
        "grow a waiting pod in place",
        tenant.resize("a-more", grown),
        f"waits for room in queue {a}",
    )

    # 7. Administrator mistakes: delete a busy queue; give a busy leaf a child; a tree deeper
    #    than queuetree supports, made while the webhook did not look at those queues.
    support.eventually(
        lambda: ((kube.queue(a) or {}).get("status") or {}).get("allocated", {}).get("pods") == "4",
        what=f"{a} counts its pods (three, and the best-effort one)",
    )
    attacks.record(
        "delete a busy queue",
        kube.kubectl("delete", "queue", a, "--wait=false"),
        f"queue {a} cannot be deleted because it has allocated Pods: 4",
    )
    attacks.record(
        "give a busy leaf a child",
        kube.apply(support.queue(support.unique("inv-child"), parent=a)),
        f"queue {a} cannot be the parent queue of queue",
    )
    prefix = support.unique("inv-deep")
    with support.unvalidated_queues(kube, prefix):
        kube.must(kube.create(*support.chain(prefix, 105, label=prefix)))
        kube.must(kube.apply(pod("deep", f"{prefix}-105"), pod("later", spare)))
        support.eventually(
            lambda: kube.running("later") and "levels below root" in kube.explanation("deep"),
            what="the deep queue's pod is told why it waits, and a sound queue still admits",
        )
        kube.delete_pod("deep")

    # 7. Requests the containers do not show, in spare (100m of 200m used by "later"): an init
    #    container of a whole CPU beside a container of a tenth, a pod that states a CPU for
    #    itself (spec.resources) and nothing in its container; and two pods in a queue whose
    #    capability allows one pod.
    init_big = pod("init-big", spare)
    init_big["spec"]["initContainers"] = [
        {"name": "init", "image": support.IMAGE, "resources": {"requests": {"cpu": "1"}}}
    ]
    pod_level = pod("pod-level", spare)
    pod_level["spec"]["containers"][0]["resources"] = {}
    pod_level["spec"]["resources"] = {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}
    kube.must(
        tenant.apply(init_big, pod_level, pod("few-0", names["few"]), pod("few-1", names["few"]))
    )
    support.eventually(
        lambda: (
            "on cpu: requested 1" in kube.explanation("init-big")
            and "on cpu: requested 1" in kube.explanation("pod-level")
            and sorted(kube.running(f"few-{i}") for i in range(2)) == [False, True]
            and any("no room for pods" in kube.explanation(f"few-{i}") for i in range(2))
        ),
        what="the init and pod-level requests, and the second pod of few, are told why they wait",
    )

    # One more look at the cluster after the last attempt, then the verdict.
    seen_before = monitor.samples
    support.eventually(lambda: monitor.samples > seen_before + 1, what="two more samples")
    waiting = (
        "a-more",
        "b-more",
        "opted-out",
        "foreign",
        "early-0",
        "early-1",
        "early-2",
        "init-big",
        "pod-level",
    )
    assert (
        attacks.outcomes,
        monitor.seen,
        [p for p in waiting if not kube.gated(p)],
        kube.pod("bound"),
        kube.pod("forged"),
    ) == (
        {
            "move a running pod to another queue": (False, True),
            "move a running pod to a missing queue": (False, True),
            "move the running gang to another queue": (False, True),
            "move the running gang to a queue with children": (False, True),
            "remove the gate of a waiting pod": (False, True),
            "opt out with false": (True, True),
            "come bound to a node": (False, True),
            "ask for another scheduler": (True, True),
            "come with a forged admission record": (False, True),
            "grow a running pod in place": (False, True),
            "grow a waiting pod in place": (False, True),
            "delete a busy queue": (False, True),
            "give a busy leaf a child": (False, True),
        },
        [],
        [],
        None,
        None,
    ), f"{monitor.samples} samples of the invariant"


def _queue(name: str, parent: str = "root", cpu: str | None = None) -> dict[str, Any]:
    return support.queue(name, parent=parent, capability={"cpu": cpu} if cpu else None)


def _pod(
    name: str,
    queue: str,
    *,
    gated: bool = False,
    init: str = "",
    pod_level: str = "",
    **annotations: str,
) -> dict[str, Any]:
    manifest = support.pod(name, namespace="ns", queue=queue, requests=TENTH)
    manifest["metadata"]["annotations"].update(annotations)
    if gated:
        manifest["spec"]["schedulingGates"] = [{"name": support.GATE}]
    if init:
        manifest["spec"]["initContainers"] = [
            {"name": "init", "resources": {"requests": {"cpu": init}}}
        ]
    if pod_level:
        manifest["spec"]["resources"] = {"requests": {"cpu": pod_level}}
    return manifest


TREE = [
    _queue("org", cpu="200m"),
    _queue("a", "org", cpu="200m"),
    support.queue("b", parent="org", capability={"pods": "1"}),
]
MONITOR_CASES = {
    "pods within every capability": ([_pod("p1", "a"), _pod("p2", "b")], []),
    "a leaf over its capability, and its parent with it": (
        [_pod(f"p{i}", "a") for i in range(3)],
        [("a", "cpu"), ("org", "cpu")],
    ),
    "a parent over its capability through two leaves": (
        [_pod("p1", "a"), _pod("p2", "a"), _pod("p3", "b")],
        [("org", "cpu")],
    ),
    "gated pods hold nothing": (
        [_pod("p1", "a"), _pod("p2", "a"), _pod("p3", "a", gated=True)],
        [],
    ),
    "a pod counts where it was admitted, whatever its annotation says now": (
        [_pod("p1", "a"), _pod("p2", "a"), _pod("p3", "b", **{ADMITTED_QUEUE: "a"})],
        [("a", "cpu"), ("org", "cpu")],
    ),
    "an init container larger than the containers counts": (
        [_pod("p1", "a", init="300m")],
        [("a", "cpu"), ("org", "cpu")],
    ),
    "a pod-level request counts in place of the containers'": (
        [_pod("p1", "b", pod_level="300m")],
        [("b", "cpu"), ("org", "cpu")],
    ),
    "each pod counts one pods": (
        [_pod("p1", "b"), _pod("p2", "b")],
        [("b", "pods")],
    ),
}


@pytest.mark.parametrize(
    ("pods", "expected"), list(MONITOR_CASES.values()), ids=list(MONITOR_CASES)
)
def test_the_monitor_sees_every_queue_and_ancestor_over_its_capability(
    pods: list[dict[str, Any]], expected: list[tuple[str, str]]
) -> None:
    """The monitor's own check, on objects as kubectl prints them: it must see a breach, or
    the scenario above proves nothing."""
    found = violations(TREE, pods, [])
    assert sorted((v.queue, v.resource) for v in found) == sorted(expected)
