"""The shipped RBAC is exactly sufficient: every call the operator and the webhook make is
allowed, every rule they are granted is used, and a rule taken away shows as the failure it
causes.

The sandbox runs both components with their own ServiceAccounts' credentials (tokens that a
real kube-apiserver authenticates and authorizes with Node and RBAC; on kubesim, tokens it maps
to the same user names), and records each request in its audit log. The first test drives
every path that needs a permission beyond start-up (leader election, caches, the root and
default queues, the webhook's Secret and CA bundles happen there):

- the close cascade (the operator patches the ``closed-by-parent`` mark on the child queue);
- a queue under a missing parent (the webhook reads the parent once, ``get queues``);
- a PodGroup's phase (``podgroups/status``);
- a pod its queue cannot take yet, then can (its explanation annotation and event, then the
  gate removal);
- reclaim (``pods/eviction``);
- a certificate renewal (the webhook updates its Secret).

Then it compares the audit log with the rules that ``kubectl kustomize`` renders from the
installed overlay and binds to each ServiceAccount. kubesim runs no authorizer, so there the
test only compares the calls with the rules; on the real backend the same comparison is the
authorizer's own decision.

The other tests take one rule away (from the live ClusterRole, restored afterwards) and watch
what breaks and how the operator says so: real backend only.
"""

from __future__ import annotations

import base64
import collections
import json
from typing import Any

import pytest

from e2e import support, workloads
from queuetree.sandbox import stack

ACCOUNTS = {
    stack.OPERATOR.username: "queuetree-operator",
    stack.WEBHOOK.username: "queuetree-webhook",
}
CERTS = "queuetree-webhook-certs"
TWO = support.reclaim_units(2)
SMALL = {"cpu": "100m", "memory": "64Mi"}


def describe_call(call: dict[str, str]) -> str:
    resource = call["resource"] + (f"/{call['subresource']}" if call["subresource"] else "")
    where = call["namespace"] or "(cluster)"
    return f"{call['verb']} {call['group'] or 'core'}/{resource} {where}/{call['name']}"


NATIVE = "podgroups.scheduling.k8s.io"


def native_served(cluster: support.Cluster) -> bool:
    found = cluster.client.run("api-resources", "--api-group=scheduling.k8s.io", "-o", "name")
    return found.ok and NATIVE in found.stdout.split()


def unexercised(cluster: support.Cluster) -> set[str]:
    """Grants this test cannot use, each for a stated reason: the operator reads a native
    PodGroup only when its creation finds one there already (after a restart of the operator),
    and deletes one only when it is an earlier PodGroup's of the same name; where the API
    server does not serve native PodGroups (kubesim, or the real backend under
    ``QUEUETREE_WORKLOAD_API=0``), it writes none at all."""
    found = {
        "ClusterRole/queuetree-operator: get scheduling.k8s.io/podgroups",
        "ClusterRole/queuetree-operator: delete scheduling.k8s.io/podgroups",
    }
    if not native_served(cluster):
        found.add("ClusterRole/queuetree-operator: create scheduling.k8s.io/podgroups")
        found.add("ClusterRole/queuetree-operator: patch scheduling.k8s.io/podgroups")
    return found


def usage_report(cluster: support.Cluster) -> dict[str, dict[str, list[str]]]:
    """Per ServiceAccount: the calls no bound rule allows, and the grants no call used."""
    objects = support.rendered(cluster.client, support.sandbox(cluster).options.overlay)
    # Non-resource requests (discovery: /api, /apis, /version) are every authenticated
    # user's by the built-in system:discovery role, not by queuetree's rules.
    audit = [c for c in support.sandbox(cluster).audit() if c["user"] in ACCOUNTS and c["resource"]]
    # A grant of a group the API server does not serve cannot be used there: kubesim serves no
    # resource.k8s.io, and the operator watches ResourceClaims only where it is served.
    served = {
        "",
        *(line.split("/")[0] for line in cluster.client.run("api-versions").stdout.split()),
    }
    assert "scheduling.volcano.sh" in served, served  # discovery answered
    report = {}
    exempt = unexercised(cluster)
    for user, account in ACCOUNTS.items():
        rules = support.bound_rules(objects, account)
        calls = [c for c in audit if c["user"] == user]
        report[account] = {
            "refused": sorted(
                {describe_call(c) for c in calls if not any(r.allows(c) for r in rules)}
            ),
            "unused": sorted(
                str(grant)
                for rule in rules
                for grant in rule.grants()
                if grant.groups[0] in served
                and not any(grant.allows(c) for c in calls)
                and str(grant) not in exempt
            ),
        }
    return report


def close_and_reopen_a_parent(kube: support.Kube) -> None:
    parent, child = support.unique("rbac-parent"), support.unique("rbac-child")
    kube.must(kube.apply(support.queue(parent), support.queue(child, parent=parent)))
    kube.set_queue_state(parent, "Closed")
    support.eventually(lambda: kube.queue_state(child) == "Closed", what=f"{child} Closed")
    kube.set_queue_state(parent, "Open")
    support.eventually(lambda: kube.queue_state(child) == "Open", what=f"{child} Open")


def refuse_a_queue_under_a_missing_parent(kube: support.Kube) -> None:
    """The webhook reads the missing parent once (``get queues``) rather than wait for it."""
    refused = kube.apply(support.queue(support.unique("rbac-orphan"), parent="rbac-nowhere"))
    assert not refused.ok, refused.describe()


def wait_and_be_admitted(kube: support.Kube) -> None:
    """A PodGroup whose phase the operator writes, and a pod its queue cannot take until a
    running one goes (explained, then ungated)."""
    name = support.unique("rbac")
    kube.must(kube.apply(support.queue(name, capability=SMALL)))
    kube.must(kube.apply(support.pod_group("group", namespace=kube.namespace, queue=name)))
    kube.must(
        kube.apply(
            support.pod(
                "first", namespace=kube.namespace, queue=name, requests=SMALL, group="group"
            )
        )
    )
    support.eventually(lambda: kube.running("first"), what="first runs")
    support.eventually(
        lambda: ((kube.get(support.PODGROUP, "group") or {}).get("status") or {}).get("phase"),
        what="the operator writes the PodGroup's phase",
    )
    kube.must(
        kube.apply(support.pod("second", namespace=kube.namespace, queue=name, requests=SMALL))
    )
    support.eventually(
        lambda: (
            support.REASON_ANNOTATION
            in (((kube.pod("second") or {}).get("metadata") or {}).get("annotations") or {})
        ),
        what="second explained",
    )
    kube.delete_pod("first")
    support.eventually(lambda: kube.running("second"), what="second runs once first is gone")
    # Its queue deserves nothing: left running, it would be a reclaim victim too.
    kube.delete_pod("second")


def group_each_kind_of_workload(kube: support.Kube) -> None:
    """A Job, a Deployment and a StatefulSet of one pod each: the operator reads a pod and its
    owner (and watches the owners), and creates the owner's PodGroup; the StatefulSet's
    ``group-min-member``, changed, is patched into its PodGroup and, with native PodGroups,
    into the native one's ``minCount``."""
    name = support.unique("rbac-workloads")
    kube.must(kube.apply(support.queue(name)))
    made = [
        workloads.Workload(
            kube,
            workloads.job("rbac-job", namespace=kube.namespace, queue=name, pods=1, min_member=1),
        ),
        *(
            workloads.Workload(
                kube,
                workloads.replicated(
                    kind,
                    f"rbac-{kind.lower()}",
                    namespace=kube.namespace,
                    queue=name,
                    replicas=1,
                    min_member=1,
                ),
            )
            for kind in ("Deployment", "StatefulSet")
        ),
    ]
    support.eventually(
        lambda: all(workload.group() for workload in made), what="each workload has its group"
    )
    stateful = made[-1]
    kube.must(
        kube.kubectl(
            "annotate",
            "statefulset",
            stateful.name,
            "-n",
            kube.namespace,
            f"{workloads.MIN_MEMBER}=2",
            "--overwrite",
        )
    )
    support.eventually(
        lambda: (stateful.group().get("spec") or {}).get("minMember") == 2,
        what="the StatefulSet's PodGroup follows its group-min-member",
    )
    if native_served(kube.cluster):
        group = stateful.group()["metadata"]["name"]
        support.eventually(
            lambda: (
                (((kube.get(NATIVE, group) or {}).get("spec") or {}).get("schedulingPolicy") or {})
                .get("gang", {})
                .get("minCount")
                == 2
            ),
            what="the native PodGroup's minCount follows",
        )


def name_a_groups_native_group(kube: support.Kube) -> None:
    """With native PodGroups: the operator creates the native PodGroup of a PodGroup."""
    if not native_served(kube.cluster):
        return
    name = support.unique("rbac-native")
    kube.must(kube.apply(support.queue(name)))
    kube.must(kube.apply(support.pod_group("named", namespace=kube.namespace, queue=name)))
    support.eventually(
        lambda: kube.get(NATIVE, "named") is not None, what="the native PodGroup is created"
    )


def reclaim(kube: support.Kube) -> tuple[str, str]:
    """A victim evicted for a reclaimer (spec §3.12.1 case 5); returns their queues."""
    queues, victim_queue, reclaimer_queue = support.reclaim_queues(
        support.unique("r").removeprefix("r-")
    )
    kube.must(kube.apply(*queues))
    kube.must(
        kube.apply(
            support.pod("victim", namespace=kube.namespace, queue=victim_queue, requests=TWO)
        )
    )
    support.eventually(lambda: kube.running("victim"), what="the victim runs")
    kube.must(
        kube.apply(
            support.pod("reclaimer", namespace=kube.namespace, queue=reclaimer_queue, requests=TWO)
        )
    )
    return victim_queue, reclaimer_queue


def secret_data(kube: support.Kube) -> dict[str, str]:
    found = kube.client.get_json("secret", CERTS, "-n", stack.NAMESPACE)
    return dict(found["data"])


def renew_the_webhook_certificate(kube: support.Kube) -> None:
    """Break the Secret's serving certificate (the CA in its place: no DNS names), so that the
    webhook renews it with the same CA (the CA bundles stay as they are)."""
    secret: dict[str, Any] = kube.client.get_json("secret", CERTS, "-n", stack.NAMESPACE)
    secret["data"]["tls.crt"] = secret["data"]["ca.crt"]
    secret["data"]["tls.key"] = secret["data"]["ca.key"]
    kube.must(kube.kubectl("replace", "-f", "-", input=json.dumps(secret)))
    support.eventually(
        lambda: (data := secret_data(kube))["tls.crt"] != data["ca.crt"],
        what="the webhook renews its serving certificate",
    )
    renewed = base64.b64decode(secret_data(kube)["tls.crt"]).decode()
    assert "BEGIN CERTIFICATE" in renewed


@pytest.mark.backends(
    "kubesim", "real", reason="reads the audit log of the API server the suite started"
)
def test_every_call_is_allowed_and_every_granted_rule_is_used(
    kube: support.Kube, slot_node: str
) -> None:
    if kube.cluster.reclaim_level > 1:
        pytest.fail("the sandbox's scheduler configuration must let reclaim reach across subtrees")
    close_and_reopen_a_parent(kube)
    refuse_a_queue_under_a_missing_parent(kube)
    wait_and_be_admitted(kube)
    group_each_kind_of_workload(kube)
    name_a_groups_native_group(kube)
    reclaim(kube)
    support.eventually(lambda: kube.pod("victim") is None, what="the victim is evicted")
    renew_the_webhook_certificate(kube)
    clean = {account: {"refused": [], "unused": []} for account in ACCOUNTS.values()}
    # kubesim writes its audit log once a second: poll until the last calls are in.
    try:
        support.eventually(
            lambda: usage_report(kube.cluster) == clean, what="every call allowed, every rule used"
        )
    except AssertionError:
        calls = collections.Counter(
            describe_call(c) for c in support.sandbox(kube.cluster).audit() if c["user"] in ACCOUNTS
        )
        raise AssertionError(
            f"{json.dumps(usage_report(kube.cluster), indent=2)}\ncalls: {dict(calls)}"
        ) from None


def refused_removals(cluster: support.Cluster) -> float:
    return support.metric(cluster, "operator", "queuetree_gate_removals_total", outcome="403")


def cycles(cluster: support.Cluster) -> float:
    return support.metric(cluster, "operator", "queuetree_cycle_duration_seconds_count")


@pytest.mark.backends("real", reason="kubesim authorizes every request (no RBAC)")
def test_without_pods_patch_the_gate_stays_and_the_operator_says_so_with_a_backoff(
    kube: support.Kube,
) -> None:
    name = support.unique("rbac-patch")
    kube.must(kube.apply(support.queue(name, capability=SMALL)))
    since = len(support.log_lines(kube.cluster, "operator"))
    with support.without_permission(
        kube.cluster,
        role="queuetree-operator",
        resource="pods",
        verb="patch",
        user=stack.OPERATOR.username,
        namespace=kube.namespace,
    ):
        refused_before, cycles_before = refused_removals(kube.cluster), cycles(kube.cluster)
        kube.must(
            kube.apply(support.pod("p", namespace=kube.namespace, queue=name, requests=SMALL))
        )
        support.eventually(
            lambda: refused_removals(kube.cluster) > refused_before,
            what="the operator counts a refused gate removal",
        )
        logged = support.eventually(
            lambda: [
                line
                for line in support.log_lines(kube.cluster, "operator", since=since)
                if f"Failed to remove gate from {kube.namespace}/p" in line
            ],
            what="the operator logs the refusal",
        )
        # Time passes in cycles: enough of them for a retry loop to show.
        support.eventually(
            lambda: cycles(kube.cluster) >= cycles_before + 12, what="twelve admission cycles"
        )
        refused = refused_removals(kube.cluster) - refused_before
        ran = cycles(kube.cluster) - cycles_before
        gates = kube.gates("p")
    support.eventually(lambda: kube.running("p"), what="p runs once the permission is back")
    assert (
        gates,
        "403 Forbidden" in logged[0],
        f'cannot patch resource "pods" in API group "" in the namespace "{kube.namespace}"'
        in logged[0],
        # Held off between attempts (1 s, 2 s, 4 s...), not retried at every cycle.
        refused * 2 <= ran,
    ) == ([support.GATE], True, True, True), (logged, refused, ran)


@pytest.mark.backends("real", reason="kubesim authorizes every request (no RBAC)")
def test_without_pods_eviction_create_reclaim_evicts_nothing_and_the_operator_says_so(
    kube: support.Kube, slot_node: str
) -> None:
    if kube.cluster.reclaim_level > 1:
        pytest.fail("the sandbox's scheduler configuration must let reclaim reach across subtrees")
    since = len(support.log_lines(kube.cluster, "operator"))

    def refused_evictions() -> float:
        return support.metric(
            kube.cluster, "operator", "queuetree_api_errors_total", verb="create", code="403"
        )

    with support.without_permission(
        kube.cluster,
        role="queuetree-operator",
        resource="pods/eviction",
        verb="create",
        user=stack.OPERATOR.username,
        namespace=kube.namespace,
    ):
        before = refused_evictions()
        reclaim(kube)
        support.eventually(
            lambda: refused_evictions() > before, what="the operator counts a refused eviction"
        )
        logged = support.eventually(
            lambda: [
                line
                for line in support.log_lines(kube.cluster, "operator", since=since)
                if f"Eviction of {kube.namespace}/victim failed" in line
            ],
            what="the operator logs the refused eviction",
        )
        victim_stays = kube.running("victim")
        reclaimer_waits = not kube.running("reclaimer")
    support.eventually(lambda: kube.pod("victim") is None, what="the victim is evicted at last")
    support.eventually(lambda: kube.running("reclaimer"), what="the reclaimer runs")
    assert (
        victim_stays,
        reclaimer_waits,
        'cannot create resource "pods/eviction"' in logged[0],
    ) == (True, True, True), logged
