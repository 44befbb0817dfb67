"""Which pods reach queuetree's pod webhooks, and which are gated, as the webhook configurations
decide it (manifests/base/cluster/webhook-configurations.yaml, docs/configuration.md):

- a pod that carries the opt-in annotation ``scheduling.volcano.sh/queue-allocation-gate``
  (any value) is sent by the per-pod entries' CEL ``matchConditions``; only ``"true"`` opts in;
- every pod of a namespace *labelled* with the key ``"true"`` is sent by the namespace-wide
  entries' ``namespaceSelector``, and gated (a pod's ``"false"`` cannot undo its namespace's
  opt-in: kubectl prints a warning);
- nothing else is sent: not a pod of a namespace that carries the key as an annotation (a
  matchCondition cannot see namespaces), nor one whose label value is not ``"true"``, nor one
  that only names a queue, nor any pod of a namespace labelled ``queuetree.io/admission=disabled``.

A pod that is not sent is not gated and runs outside queue admission: no queue counts it, even
the one it names (e2e/test_outside_admission.py).

A user who writes the namespace's opt-in wrongly is told at once: ``kubectl annotate`` or
``kubectl label`` prints the namespace webhook's warning. So is a pod whose opt-in value is
neither ``"true"`` nor ``"false"``.

Whether a pod reached the webhook is read from the webhook's review counter, on the backends
whose sandbox the suite started. kubesim evaluates no matchConditions (kubesim/README.md):
there every pod of a selected namespace reaches the webhook, which then decides the same
(a namespace annotation does not opt in), so the gates agree on both backends and only the
real backend is asked about the counter.
"""

from __future__ import annotations

import dataclasses

import pytest

from e2e import support

DISABLED = "queuetree.io/admission"
NOT_BY_ANNOTATION = "a namespace opts in to queue admission by label, not by annotation"
MISSPELT_LABEL = 'is neither "true" nor "false": the namespace does not opt in'
MISSPELT_POD = 'is neither "true" nor "false": the pod is not held for queue admission'
OVERRULED = "cannot opt the pod out of namespace"


@dataclasses.dataclass(frozen=True)
class Case:
    pod_annotations: dict[str, str]
    gated: bool
    reaches: bool
    """Whether the pod webhooks are called for the pod (on a cluster that evaluates CEL)."""
    namespace_labels: dict[str, str] = dataclasses.field(default_factory=dict)
    namespace_annotations: dict[str, str] = dataclasses.field(default_factory=dict)
    namespace_warning: str = ""
    """Words of the warning kubectl prints when the namespace is labelled or annotated."""
    pod_warning: str = ""


CASES = {
    "a pod with the opt-in annotation": Case({support.GATE: "true"}, gated=True, reaches=True),
    "a pod whose opt-in value is misspelt": Case(
        {support.GATE: "True"}, gated=False, reaches=True, pod_warning=MISSPELT_POD
    ),
    "a pod that names a queue without opting in": Case({}, gated=False, reaches=False),
    "any pod of a namespace labelled with the opt-in": Case(
        {}, gated=True, reaches=True, namespace_labels={support.GATE: "true"}
    ),
    "a pod that cannot opt out of a labelled namespace": Case(
        {support.GATE: "false"},
        gated=True,
        reaches=True,
        namespace_labels={support.GATE: "true"},
        pod_warning=OVERRULED,
    ),
    "a pod of a namespace annotated, not labelled, with the opt-in": Case(
        {},
        gated=False,
        reaches=False,
        namespace_annotations={support.GATE: "true"},
        namespace_warning=NOT_BY_ANNOTATION,
    ),
    "a pod of a namespace whose opt-in label is misspelt": Case(
        {},
        gated=False,
        reaches=False,
        namespace_labels={support.GATE: "True"},
        namespace_warning=MISSPELT_LABEL,
    ),
    "an opted-in pod of a namespace taken out by the break-glass label": Case(
        {support.GATE: "true"}, gated=False, reaches=False, namespace_labels={DISABLED: "disabled"}
    ),
}


def reviews(cluster: support.Cluster) -> tuple[float, float] | None:
    """How many reviews ``/pods/mutate`` and ``/pods/validate`` answered so far; None where
    they cannot be read or where every pod is sent (kubesim evaluates no matchConditions)."""
    if cluster.sandbox is None or cluster.backend == "kubesim":
        return None
    name = "queuetree_webhook_reviews_total"
    return (
        support.metric(cluster, "webhook", name, endpoint="/pods/mutate"),
        support.metric(cluster, "webhook", name, endpoint="/pods/validate"),
    )


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_match_conditions_and_namespace_selectors_decide_which_pods_are_gated(
    kube: support.Kube, case: Case
) -> None:
    queue = support.unique("match")
    # No room (5m of CPU, the pod asks 10m): a gate, once added, stays while the test looks.
    kube.must(kube.apply(support.queue(queue, capability={"cpu": "5m"})))
    warnings = []
    for verb, pairs in (("label", case.namespace_labels), ("annotate", case.namespace_annotations)):
        if pairs:
            done = kube.must(
                kube.kubectl(
                    verb, "namespace", kube.namespace, *(f"{k}={v}" for k, v in pairs.items())
                )
            )
            warnings += [line for line in done.stderr.splitlines() if line.startswith("Warning:")]
    manifest = support.pod("p", namespace=kube.namespace, queue=queue, opted_in=False)
    # Every pod names the queue; what differs is how (and whether) it opts in.
    manifest["metadata"]["annotations"] = {**case.pod_annotations, support.QUEUE_NAME: queue}
    before = reviews(kube.cluster)
    created = kube.must(kube.create(manifest))
    after = reviews(kube.cluster)
    gates = [g["name"] for g in created.json()["spec"].get("schedulingGates") or []]
    pod_warnings = [line for line in created.stderr.splitlines() if line.startswith("Warning:")]
    actual = {
        "gated": gates == [support.GATE],
        "namespace warned": any(case.namespace_warning in w for w in warnings)
        if case.namespace_warning
        else warnings == [],
        "pod warned": any(case.pod_warning in w for w in pod_warnings)
        if case.pod_warning
        else pod_warnings == [],
    }
    expected = {"gated": case.gated, "namespace warned": True, "pod warned": True}
    if before is not None and after is not None:
        actual["reviews"] = (after[0] - before[0], after[1] - before[1])
        expected["reviews"] = (1.0, 1.0) if case.reaches else (0.0, 0.0)
    assert actual == expected, (warnings, pod_warnings)
