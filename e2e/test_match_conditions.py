"""Which pods reach queuetree's pod webhooks, and which are gated, as the webhook configurations
decide it (manifests/base/cluster/webhook-configurations.yaml, docs/configuration.md):

- a pod that carries the opt-in annotation ``scheduling.volcano.sh/queue-allocation-gate``
  (any value) is sent by the per-pod entries' CEL ``matchConditions``; only ``"true"`` opts in;
- every pod of a namespace *labelled* with the key ``"true"`` is sent by the namespace-wide
  entries' ``namespaceSelector``, and gated (a pod's ``"false"`` cannot undo its namespace's
  opt-in: kubectl prints a warning);
- a pod created carrying the admission record ``scheduling.queuetree.io/admitted-queue`` is
  sent to ``/pods/validate`` (not to ``/pods/mutate``), opted in or not, and refused: only the
  operator writes the record, when it removes a pod's gate;
- nothing else is sent: not a pod of a namespace that carries the key as an annotation (a
  matchCondition cannot see namespaces), nor one whose label value is not ``"true"``, nor one
  that only names a queue, nor any pod of a namespace labelled ``queuetree.io/admission=disabled``.

A pod that is not sent is not gated and runs outside queue admission: no queue counts it, even
the one it names (e2e/test_outside_admission.py).

A user who writes the namespace's opt-in wrongly is told at once: ``kubectl annotate`` or
``kubectl label`` prints the namespace webhook's warning. So is a pod whose opt-in value is
neither ``"true"`` nor ``"false"``.

Whether a pod reached the webhook is read from the webhook's review counter, on the backends
whose sandbox the suite started: kube-apiserver evaluates the conditions with cel-go, kubesim
with cel-python (kubesim/README.md), and both must call the webhook for the same pods.
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
RECORD = "scheduling.queuetree.io/admitted-queue"
RECORD_REFUSED = f"cannot be created with the admission record {RECORD}"
BOTH, NEITHER, VALIDATION_ONLY = (1.0, 1.0), (0.0, 0.0), (0.0, 1.0)


@dataclasses.dataclass(frozen=True)
class Case:
    pod_annotations: dict[str, str]
    gated: bool
    reaches: tuple[float, float]
    """How many times ``/pods/mutate`` and ``/pods/validate`` are called for the pod's creation
    (on a cluster that evaluates CEL)."""
    namespace_labels: dict[str, str] = dataclasses.field(default_factory=dict)
    namespace_annotations: dict[str, str] = dataclasses.field(default_factory=dict)
    namespace_warning: str = ""
    """Words of the warning kubectl prints when the namespace is labelled or annotated."""
    pod_warning: str = ""
    refused: str = ""
    """Words of the denial, when the creation is refused."""


CASES = {
    "a pod with the opt-in annotation": Case({support.GATE: "true"}, gated=True, reaches=BOTH),
    "a pod whose opt-in value is misspelt": Case(
        {support.GATE: "True"}, gated=False, reaches=BOTH, pod_warning=MISSPELT_POD
    ),
    "a pod that names a queue without opting in": Case({}, gated=False, reaches=NEITHER),
    "a pod created with an admission record without opting in": Case(
        {RECORD: "default"}, gated=False, reaches=VALIDATION_ONLY, refused=RECORD_REFUSED
    ),
    "an opted-in pod created with an admission record": Case(
        {support.GATE: "true", RECORD: "default"},
        gated=False,
        reaches=BOTH,
        refused=RECORD_REFUSED,
    ),
    "any pod of a namespace labelled with the opt-in": Case(
        {}, gated=True, reaches=BOTH, namespace_labels={support.GATE: "true"}
    ),
    "a pod that cannot opt out of a labelled namespace": Case(
        {support.GATE: "false"},
        gated=True,
        reaches=BOTH,
        namespace_labels={support.GATE: "true"},
        pod_warning=OVERRULED,
    ),
    "a pod of a namespace annotated, not labelled, with the opt-in": Case(
        {},
        gated=False,
        reaches=NEITHER,
        namespace_annotations={support.GATE: "true"},
        namespace_warning=NOT_BY_ANNOTATION,
    ),
    "a pod of a namespace whose opt-in label is misspelt": Case(
        {},
        gated=False,
        reaches=NEITHER,
        namespace_labels={support.GATE: "True"},
        namespace_warning=MISSPELT_LABEL,
    ),
    "an opted-in pod of a namespace taken out by the break-glass label": Case(
        {support.GATE: "true"},
        gated=False,
        reaches=NEITHER,
        namespace_labels={DISABLED: "disabled"},
    ),
}


def reviews(cluster: support.Cluster) -> tuple[float, float] | None:
    """How many reviews ``/pods/mutate`` and ``/pods/validate`` answered so far; None where
    they cannot be read (an existing cluster: no sandbox)."""
    if cluster.sandbox is None:
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
    created = kube.create(manifest)
    after = reviews(kube.cluster)
    if case.refused:
        refusal = (created.ok, case.refused in created.stderr, kube.pod("p"))
        assert refusal == (False, True, None), created.describe()
        gates = []
    else:
        gates = [g["name"] for g in kube.must(created).json()["spec"].get("schedulingGates") or []]
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
        expected["reviews"] = case.reaches
    assert actual == expected, (warnings, pod_warnings)
