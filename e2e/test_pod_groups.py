"""PodGroups as Volcano runs them: gangs never split, status as Volcano's scheduler writes it,
and a group that names ``default`` gets its namespace's queue."""

from __future__ import annotations

import json
from typing import Any

from e2e import support

TENTH = {"cpu": "100m", "memory": "64Mi"}


def group_status(kube: support.Kube, name: str) -> dict[str, Any]:
    return dict((kube.get(support.PODGROUP, name) or {}).get("status") or {})


def counts(kube: support.Kube, name: str) -> tuple[Any, ...]:
    status = group_status(kube, name)
    return (
        status.get("phase"),
        status.get("running", 0),
        status.get("succeeded", 0),
        status.get("failed", 0),
    )


def test_pods_created_before_their_pod_group_wait_for_the_whole_gang(kube: support.Kube) -> None:
    name = support.unique("gang-first")
    kube.must(kube.apply(support.queue(name, capability={"cpu": "200m"})))
    members = [f"member-{i}" for i in range(3)]
    tenant = kube.as_tenant()
    kube.must(
        tenant.apply(
            *(
                support.pod(m, namespace=kube.namespace, queue=name, requests=TENTH, group="gang")
                for m in members
            )
        )
    )
    support.eventually(
        lambda: all(kube.running(m) or kube.explanation(m) for m in members),
        what="every member is judged",
    )
    before_group = [kube.gated(m) for m in members]
    kube.must(
        tenant.apply(support.pod_group("gang", namespace=kube.namespace, queue=name, min_member=3))
    )
    support.eventually(
        lambda: all("minMember 3" in kube.explanation(m) for m in members),
        what="every member is told the whole gang does not fit",
    )
    gated_with_group = [kube.gated(m) for m in members]
    kube.must(
        kube.kubectl(
            "patch", "queue", name, "--type=merge", "-p", '{"spec":{"capability":{"cpu":"300m"}}}'
        )
    )
    support.eventually(
        lambda: all(kube.running(m) for m in members), what="the whole gang runs once it fits"
    )
    assert (before_group, gated_with_group) == ([True] * 3, [True] * 3)


def test_a_pod_group_counts_its_pods_and_completes_when_they_all_succeed(
    kube: support.Kube,
) -> None:
    name = support.unique("pg-status")
    kube.must(kube.apply(support.queue(name)))
    kube.must(
        kube.apply(support.pod_group("job", namespace=kube.namespace, queue=name, min_member=2))
    )
    # The members run until the test ends their work: with a fixed run time of 4 s, a CI run on
    # a loaded machine never saw both running at once in the group's status.
    members = [support.pod(f"worker-{i}", namespace=kube.namespace, group="job") for i in range(2)]
    for member in members:
        member["spec"]["restartPolicy"] = "Never"
    kube.must(kube.apply(*members))
    support.eventually(
        lambda: counts(kube, "job") == ("Running", 2, 0, 0),
        what="the group is Running with running: 2",
    )
    table = kube.must(kube.kubectl("get", support.PODGROUP, "job", "-n", kube.namespace)).stdout
    support.finish(kube, "worker-0", "worker-1")
    support.eventually(
        lambda: counts(kube, "job") == ("Completed", 0, 2, 0),
        what="the group is Completed with succeeded: 2",
    )
    header, row = table.splitlines()[:2]
    assert row.split()[header.split().index("RUNNINGS")] == "2", table


def test_a_gang_that_lost_members_while_running_is_unknown(kube: support.Kube) -> None:
    name = support.unique("pg-unknown")
    kube.must(kube.apply(support.queue(name)))
    kube.must(
        kube.apply(support.pod_group("gang", namespace=kube.namespace, queue=name, min_member=2))
    )
    kube.must(
        kube.apply(
            *(support.pod(f"member-{i}", namespace=kube.namespace, group="gang") for i in range(2))
        )
    )
    support.eventually(lambda: counts(kube, "gang")[:2] == ("Running", 2), what="the gang runs")
    kube.delete_pod("member-1")
    support.eventually(
        lambda: counts(kube, "gang")[:2] == ("Unknown", 1),
        what="the gang, one member short while the other runs, is Unknown",
    )


def test_a_pod_group_that_names_default_gets_its_namespaces_queue(kube: support.Kube) -> None:
    name, other = support.unique("ns-queue"), support.unique("ns-other")
    kube.must(kube.apply(support.queue(name), support.queue(other)))
    kube.must(
        kube.kubectl(
            "annotate", "namespace", kube.namespace, f"{support.QUEUE_NAME}={name}", "--overwrite"
        )
    )
    unnamed = support.pod_group("unnamed", namespace=kube.namespace, queue="")
    del unnamed["spec"]["queue"]
    tenant = kube.as_tenant()
    kube.must(
        tenant.apply(
            unnamed,
            support.pod_group("named-default", namespace=kube.namespace, queue="default"),
            support.pod_group("named-other", namespace=kube.namespace, queue=other),
        )
    )
    queues = {
        group: json.loads(
            kube.must(
                kube.kubectl(
                    "get", support.PODGROUP, group, "-n", kube.namespace, "-o", "jsonpath={.spec}"
                )
            ).stdout
        ).get("queue")
        for group in ("unnamed", "named-default", "named-other")
    }
    assert queues == {"unnamed": name, "named-default": name, "named-other": other}
