"""Snapshot objects: the immutable input of one scheduling session.

A session never sees Kubernetes manifests: ``queuetree.api`` turns Queue, PodGroup, Pod, Node and
PriorityClass manifests into these records, and the operator builds them from its caches. Every
record is a frozen dataclass; mappings inside them are never mutated after construction.

Identity and order: pods and pod groups are keyed ``namespace/name``; queues by name (Volcano uses
the queue name as its UID). ``created`` defaults to :data:`EPOCH` (Go's zero time, the earliest
instant), so objects without a creation timestamp compare equal to each other and before any real
timestamp; every ordering breaks remaining ties by ``uid``, so results never depend on input order.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NewType

from queuetree.core import resources


def _empty_mapping() -> Mapping[str, Any]:
    """The shared empty read-only mapping (Python 3.11 refuses a mappingproxy as a default)."""
    return _EMPTY


_EMPTY: Mapping[str, Any] = MappingProxyType({})

QueueName = NewType("QueueName", str)
PodKey = NewType("PodKey", str)
"""``namespace/name`` of a pod."""
PodGroupKey = NewType("PodGroupKey", str)
"""``namespace/name`` of a pod group (synthetic groups use the pod's own key)."""
NodeName = NewType("NodeName", str)

ROOT_QUEUE = "root"
DEFAULT_QUEUE = "default"

MAX_QUEUE_LEVELS = 100
"""Most levels a queue may sit below root (a child of root is level 1). The webhook's
``--max-queue-depth`` (5 by default) keeps real trees far shallower; the bound is for trees
written past the webhook, so that walking one from the root cannot exhaust the stack."""

QUEUE_ALLOCATION_GATE = "scheduling.volcano.sh/queue-allocation-gate"
"""Both the opt-in pod annotation (value exactly ``"true"``) and the scheduling gate's name."""
GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"
QUEUE_NAME_ANNOTATION = "scheduling.volcano.sh/queue-name"
PREEMPTABLE_KEY = "volcano.sh/preemptable"
TASK_PRIORITY_ANNOTATION = "volcano.sh/task-priority"
CLOSED_BY_PARENT_ANNOTATION = "volcano.sh/closed-by-parent"
HIERARCHY_ANNOTATION = "volcano.sh/hierarchy"
HIERARCHY_WEIGHTS_ANNOTATION = "volcano.sh/hierarchy-weights"

FEATURE_SCHEDULING_GATES_QUEUE_ADMISSION = "SchedulingGatesQueueAdmission"

EPOCH = datetime.datetime(1, 1, 1, tzinfo=datetime.UTC)
"""The creation time of an object that has none (Go's zero time)."""

NO_LABELS: Mapping[str, str] = MappingProxyType({})


class QueueState(enum.StrEnum):
    OPEN = "Open"
    CLOSED = "Closed"
    CLOSING = "Closing"
    UNKNOWN = "Unknown"


class PodGroupPhase(enum.StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    UNKNOWN = "Unknown"
    INQUEUE = "Inqueue"
    COMPLETED = "Completed"


class TaskStatus(enum.StrEnum):
    """A pod's status as the scheduler sees it (Volcano's TaskStatus)."""

    PENDING = "Pending"
    ALLOCATED = "Allocated"
    PIPELINED = "Pipelined"
    BINDING = "Binding"
    BOUND = "Bound"
    RUNNING = "Running"
    RELEASING = "Releasing"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"


ALLOCATED_STATUSES = frozenset(
    {TaskStatus.BOUND, TaskStatus.BINDING, TaskStatus.RUNNING, TaskStatus.ALLOCATED}
)
"""Statuses whose requests count as a queue's ``allocated`` (spec §3.2)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Queue:
    """A ``scheduling.volcano.sh/v1beta1`` Queue, parsed.

    ``capability`` is None when ``spec.capability`` is absent or an empty map: the capacity
    policy distinguishes "not set" from "set to zero" (a zero cpu or memory capability means
    unlimited on that dimension, spec §3.3). ``parent`` is ``spec.parent`` as written ("" when
    unset); use :attr:`parent_name` for the effective parent.
    """

    name: str
    parent: str = ""
    weight: int = 1
    priority: int = 0
    capability: resources.Resource | None = None
    deserved: resources.Resource = resources.EMPTY
    guarantee: resources.Resource = resources.EMPTY
    reclaimable: bool | None = None
    """None means reclaimable (Volcano's ``Reclaimable()`` returns True for nil)."""
    state: QueueState = QueueState.OPEN
    """``status.state``; an empty state reads as Open."""
    allocated: resources.Resource = resources.EMPTY
    """``status.allocated`` as a controller last wrote it (read by the webhook only)."""
    annotations: Mapping[str, str] = dataclasses.field(default_factory=_empty_mapping)
    created: datetime.datetime = EPOCH
    uid: str = ""

    @property
    def parent_name(self) -> str:
        """The effective parent: ``spec.parent``, or ``root`` when empty; "" for root itself."""
        if self.name == ROOT_QUEUE:
            return ""
        return self.parent or ROOT_QUEUE

    @property
    def is_reclaimable(self) -> bool:
        return self.reclaimable is None or self.reclaimable


@dataclasses.dataclass(frozen=True, slots=True)
class PodGroup:
    """A ``scheduling.volcano.sh/v1beta1`` PodGroup, or the synthetic group of a lone pod."""

    namespace: str
    name: str
    queue: str = DEFAULT_QUEUE
    min_member: int = 1
    min_task_member: Mapping[str, int] = dataclasses.field(default_factory=_empty_mapping)
    min_resources: resources.Resource | None = None
    """None when ``spec.minResources`` is absent (enqueue then skips the capacity check, §3.7)."""
    priority_class_name: str = ""
    phase: PodGroupPhase = PodGroupPhase.PENDING
    synthetic: bool = False
    """True for the single-pod group made for a pod without the group-name annotation."""
    created: datetime.datetime = EPOCH
    uid: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclasses.dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    """"" tolerates every effect."""


@dataclasses.dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"


@dataclasses.dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    key: str
    operator: str
    """In, NotIn, Exists, DoesNotExist, Gt, Lt."""
    values: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """Requirements that must all hold (a term of ``requiredDuringScheduling...``)."""

    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class Pod:
    """A pod as a scheduling task.

    ``resreq`` is the sum of the containers' requests (plus overhead); ``init_resreq`` is what a
    node must have free to start the pod: the larger, per dimension, of ``resreq`` and each init
    container's request (Kubernetes' effective request). Neither contains ``pods: 1``.
    """

    namespace: str
    name: str
    group: str
    """The key of the pod's PodGroup (``namespace/name``); synthetic groups use the pod's key."""
    status: TaskStatus = TaskStatus.PENDING
    resreq: resources.Resource = resources.EMPTY
    init_resreq: resources.Resource = resources.EMPTY
    priority: int = 1
    node_name: str = ""
    scheduling_gates: tuple[str, ...] = ()
    annotations: Mapping[str, str] = dataclasses.field(default_factory=_empty_mapping)
    labels: Mapping[str, str] = dataclasses.field(default_factory=_empty_mapping)
    node_selector: Mapping[str, str] = dataclasses.field(default_factory=_empty_mapping)
    required_node_affinity: tuple[NodeSelectorTerm, ...] = ()
    """ORed terms; empty means no required node affinity."""
    tolerations: tuple[Toleration, ...] = ()
    preemptable: bool = True
    preemption_policy: str = "PreemptLowerPriority"
    unschedulable: bool = False
    """True when the pod has condition PodScheduled=False with reason Unschedulable."""
    scheduler_name: str = "default-scheduler"
    created: datetime.datetime = EPOCH
    uid: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def sch_gated(self) -> bool:
        """The pod has at least one scheduling gate (Volcano's ``task.SchGated``)."""
        return bool(self.scheduling_gates)

    @property
    def only_queue_gate(self) -> bool:
        """Exactly one gate, ours (``HasOnlyVolcanoSchedulingGate``)."""
        return self.scheduling_gates == (QUEUE_ALLOCATION_GATE,)

    @property
    def opted_in(self) -> bool:
        """The pod carries the opt-in annotation with the exact value ``"true"``."""
        return self.annotations.get(QUEUE_ALLOCATION_GATE) == "true"


@dataclasses.dataclass(frozen=True, slots=True)
class Node:
    name: str
    allocatable: resources.Resource = resources.EMPTY
    """Includes the ``pods`` count as a plain scalar."""
    labels: Mapping[str, str] = dataclasses.field(default_factory=_empty_mapping)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class PriorityClass:
    name: str
    value: int
    global_default: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything one session reads. Keys: queue name, pod group key, pod key, node name."""

    queues: Mapping[str, Queue]
    pod_groups: Mapping[str, PodGroup]
    pods: Mapping[str, Pod]
    nodes: Mapping[str, Node]
    priority_classes: Mapping[str, PriorityClass] = dataclasses.field(
        default_factory=_empty_mapping
    )
