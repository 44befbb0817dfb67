"""The webhook's settings: what its flags set, in one record (flags in ``queuetree.cli.webhook``).

The names and defaults are those of Volcano's webhook-manager, so a Volcano deployment's flags
mean the same here; ``--default-queue``, which Volcano's webhook lacks (its default queue is
fixed), is the operator's flag of that name. ``queuetree review`` accepts the same flags.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from queuetree.core import features, objects

OPERATOR_USERNAME = "system:serviceaccount:queuetree-system:queuetree-operator"
"""The operator's ServiceAccount (manifests/base/cluster/rbac-operator.yaml) as a username."""
DEFAULT_SCHEDULER_NAMES = frozenset({objects.DEFAULT_SCHEDULER})


@dataclasses.dataclass(frozen=True, slots=True)
class ReviewSettings:
    """How the review functions decide (no transport or certificate settings here)."""

    max_queue_depth: int = 5
    """``--max-queue-depth``: most levels below root; a queue directly under root is level 1.
    At most ``objects.MAX_QUEUE_DEPTH`` (100): the operator admits nothing in deeper queues."""
    enable_root_queue_protection: bool = True
    """``--enable-root-queue-protection``: refuse changes to root's capability, deserved and
    guarantee (the scheduler derives root's figures; editing them is almost always a mistake)."""
    enable_queue_allocated_pods_check: bool = True
    """``--enable-queue-allocated-pods-check``: refuse deleting a queue whose ``status.allocated``
    (or ``status.reserved``) still counts pods. On by default, unlike Volcano (off): deleting a
    busy queue would drop its pods' usage from every ancestor, so the tree would admit more
    than its capabilities (docs/compatibility.md)."""
    default_queue: str = objects.DEFAULT_QUEUE
    """``--default-queue``: the queue of an opted-in pod that names none (no PodGroup, no
    queue-name annotation on the pod or its namespace) and of a PodGroup without
    ``spec.queue``; it cannot be deleted. The operator's flag of the same name must have the
    same value, or pods are checked against one queue and admitted through another. Volcano
    fixes it to ``default``."""
    operator_username: str = OPERATOR_USERNAME
    """``--operator-username``: the only user that may remove the queue-allocation gate from a
    pod (the operator's ServiceAccount, as the API server names it)."""
    scheduler_names: frozenset[str] = DEFAULT_SCHEDULER_NAMES
    """``--scheduler-name``: the schedulers that place admitted pods (the operator's flag of the
    same name); an opted-in pod that names another gets a warning at creation."""
    placing_scheduler: str = objects.DEFAULT_SCHEDULER
    """The first ``--scheduler-name``: the scheduler an adopted pod is handed to."""
    adopted_scheduler_names: frozenset[str] = objects.DEFAULT_ADOPTED_SCHEDULERS
    """``--adopt-scheduler-names``: a pod created naming one of these (and not one of
    ``scheduler_names``) is opted in to queue admission, and its ``spec.schedulerName`` is
    rewritten to ``placing_scheduler`` (the original is kept in
    ``objects.ADOPTED_SCHEDULER_ANNOTATION``). Volcano's integrations set ``volcano`` on every
    pod they create, in code their users cannot change; no Volcano scheduler runs beside
    queuetree, so without adoption those pods would wait for ever."""
    feature_gates: Mapping[str, bool] = dataclasses.field(default_factory=lambda: features.DEFAULTS)
    """``--feature-gates``; ``SchedulingGatesQueueAdmission`` is on by default in queuetree."""
    native_pod_groups: bool = False
    """``--native-pod-groups`` as resolved at start-up (``auto`` asks the API server): an
    opted-in pod of a PodGroup is created naming the ``scheduling.k8s.io`` PodGroup of the same
    name, which the operator creates, so kube-scheduler places the gang all or nothing
    (``api.native_groups``)."""

    def adopts(self, scheduler: object) -> bool:
        """Whether a pod created with ``spec.schedulerName`` ``scheduler`` is adopted."""
        return (
            isinstance(scheduler, str)
            and scheduler in self.adopted_scheduler_names
            and scheduler not in self.scheduler_names
        )

    @property
    def gates_pods(self) -> bool:
        """Whether ``/pods/mutate`` injects the queue-allocation gate."""
        return bool(self.feature_gates.get(features.SCHEDULING_GATES_QUEUE_ADMISSION, False))
