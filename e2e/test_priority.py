"""A PodGroup's PriorityClass orders admission within a queue (docs/compatibility.md, "Job
priority"): when room frees up, the group of the higher class goes first, even if it was
created later. The operator reads PriorityClasses from the cluster (a watch), so the class may
be created or changed at any time.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator

import pytest

from e2e import support

POD = {"cpu": "100m", "memory": "64Mi"}


@pytest.fixture
def priority_class(cluster: support.Cluster) -> Iterator[str]:
    name = support.unique("e2e-urgent")
    manifest = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": 100000,
        "description": "e2e: a PodGroup of this class is admitted first",
    }
    created = cluster.client.apply([manifest])
    assert created.ok, created.describe()
    yield name
    cluster.client.run("delete", "priorityclass", name, "--ignore-not-found")


def test_the_pod_group_of_the_higher_priority_class_is_admitted_first(
    kube: support.Kube, priority_class: str
) -> None:
    queue = support.unique("prio")
    kube.must(kube.apply(support.queue(queue, capability=POD)))
    kube.must(
        kube.apply(support.pod("blocker", namespace=kube.namespace, queue=queue, requests=POD))
    )
    support.eventually(lambda: kube.running("blocker"), what="blocker runs")
    for group, extra in (("older", {}), ("urgent", {"priorityClassName": priority_class})):
        kube.must(
            kube.apply(support.pod_group(group, namespace=kube.namespace, queue=queue, **extra))
        )
        kube.must(
            kube.apply(
                support.pod(group, namespace=kube.namespace, queue=queue, requests=POD, group=group)
            )
        )
        # Creation times have whole seconds, and equal ones fall back to the uid: the urgent
        # group must be younger by the clock for the test to show that priority decides.
        created = datetime.datetime.fromisoformat(
            (kube.get(support.PODGROUP, group) or {})["metadata"]["creationTimestamp"]
        )
        support.eventually(
            lambda c=created: (
                datetime.datetime.now(datetime.UTC) - c > datetime.timedelta(seconds=1)
            ),
            what=f"a second after {group} was created",
        )
    for name in ("older", "urgent"):
        support.eventually(
            lambda n=name: (
                support.REASON_ANNOTATION
                in (((kube.pod(n) or {}).get("metadata") or {}).get("annotations") or {})
            ),
            what=f"{name} waits for room, explained",
        )
    kube.delete_pod("blocker")
    support.eventually(lambda: kube.running("urgent"), what="urgent runs once blocker is gone")
    assert kube.gates("older") == [support.GATE]
