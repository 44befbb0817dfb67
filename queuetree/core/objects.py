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
import operator
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NewType

from queuetree.core import quantities, resources


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
DEFAULT_SCHEDULER = "default-scheduler"
"""kube-scheduler's name: the ``spec.schedulerName`` of a pod that names none."""
VOLCANO_SCHEDULER = "volcano"
"""Volcano's scheduler name, which Volcano's examples and every Volcano integration (the
Kubeflow training operator, KubeRay, Spark, ...) write into ``spec.schedulerName``."""
DEFAULT_ADOPTED_SCHEDULERS = frozenset({VOLCANO_SCHEDULER})
"""``--adopt-scheduler-names``: the names whose pods the webhook hands to the placing scheduler
at creation (``ADOPTED_SCHEDULER_ANNOTATION``)."""

MAX_QUEUE_DEPTH = 100
"""The deepest level below root a queue may have (root's children are level 1).

Volcano's webhook bounds depth with ``--max-queue-depth`` (default 5) and nothing else; queuetree
bounds the flag too (the webhook refuses a larger value) and the scheduling core treats a
queue deeper than this, created while no webhook validated it, as broken: it admits nothing and
says why, and no walk of the tree ever goes further (each queue's ancestor chain stays short).
A hundred levels is far more than any organisation chart; the figure is what keeps one chain
of thousands of queues from costing every cycle time and memory in proportion to its square."""

QUEUE_ALLOCATION_GATE = "scheduling.volcano.sh/queue-allocation-gate"
"""Both the opt-in pod annotation (value exactly ``"true"``) and the scheduling gate's name."""
ADMITTED_QUEUE_ANNOTATION = "scheduling.queuetree.io/admitted-queue"
"""Written on a pod by the operator in the same write that removes its gate: the queue the pod
was admitted to and is charged to until it finishes or is deleted, whatever its queue-name or
group-name annotations (or its PodGroup's ``spec.queue``) say later. The webhook refuses any
change to it."""
ADMITTED_DEVICES_ANNOTATION = "scheduling.queuetree.io/admitted-devices"
"""Written beside :data:`ADMITTED_QUEUE_ANNOTATION`, in the same write, on a pod whose own
ResourceClaims (generated from templates) were charged to its queue: that charge, as a JSON
resource list (``{"nvidia.com/gpu": "2"}``). It is the floor of the pod's charge for them
(``core.devices.charge_pod``) after an operator restart, when the claim it was admitted on may
be gone or made again smaller: the memory of the running operator is not all that remembers
it. The webhook refuses any change to it, as to the queue record."""
ADMISSION_RECORDS = (ADMITTED_QUEUE_ANNOTATION, ADMITTED_DEVICES_ANNOTATION)
"""The annotations only the operator writes, when it admits a pod (the webhook refuses them at
creation and any change to them after; the operator ignores them where the webhook does not
review pods)."""
QUEUE_IN_USE_FINALIZER = "scheduling.queuetree.io/queue-in-use"
"""The finalizer the operator holds on a queue while pods are charged to it (allocated or
reserved, its subtree included), as kube-controller-manager holds
``kubernetes.io/pvc-protection`` on a PersistentVolumeClaim a pod uses: it is written before the
first pod is admitted to the queue, and removed once none is charged there any more, so a queue
deleted while busy stays (Terminating, admitting nothing) and keeps counting its pods until they
finish (docs/concepts.md, "Deleting a busy queue")."""
UNREVIEWED_NAMESPACES = frozenset({"kube-system", "queuetree-system"})
"""Namespaces the pod webhooks never review (their ``namespaceSelector``), so the cluster and
queuetree itself can always start."""
ADMISSION_SWITCH_LABEL = "queuetree.io/admission"
"""A namespace labelled with it, value :data:`ADMISSION_DISABLED`, is taken out of the pod
webhooks (break-glass, docs/operations.md)."""
ADMISSION_DISABLED = "disabled"
ADOPTED_SCHEDULER_ANNOTATION = "scheduling.queuetree.io/adopted-scheduler-name"
"""Written on a pod by the webhook at creation when it adopts the pod: the ``spec.schedulerName``
the pod was created with (``--adopt-scheduler-names``, ``volcano`` by default), which the webhook
replaced with the scheduler that places admitted pods (the first ``--scheduler-name``).
Informational: nothing reads it to decide."""
ADMISSION_REASON_ANNOTATION = "scheduling.queuetree.io/admission-reason"
"""Pod annotation in which the operator says why the pod is still held by the queue gate."""
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
NO_QUANTITIES: Mapping[str, quantities.Quantity] = MappingProxyType({})


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
OCCUPYING_STATUSES = ALLOCATED_STATUSES | {TaskStatus.PIPELINED, TaskStatus.RELEASING}
"""Statuses in which a pod with a node name holds room on that node (Volcano's node accounting:
a Releasing pod's room comes back once it is gone, a Pipelined one's is promised)."""


@dataclasses.dataclass(frozen=True, slots=True)
class QueueAsWritten:
    """What the queue webhook's rules read beyond the parsed fields: the quota maps and the
    state exactly as written.

    Volcano's webhook checks a Queue as decoded, with exact quantities and every resource name
    written; the vectors of :class:`Queue` keep only the names the scheduler reads, in its
    units (``gpu`` without a domain is dropped, CPU is rounded to milli-units). So the reader
    keeps the written quota here, once parsed: every entry that parsed, by name.
    """

    capability: Mapping[str, quantities.Quantity] = dataclasses.field(
        default_factory=_empty_mapping
    )
    deserved: Mapping[str, quantities.Quantity] = dataclasses.field(default_factory=_empty_mapping)
    guarantee: Mapping[str, quantities.Quantity] = dataclasses.field(default_factory=_empty_mapping)
    """``spec.guarantee.resource``."""
    state: str = ""
    """``status.state`` as written ("" when absent or not a string), known state or not."""


NOT_WRITTEN = QueueAsWritten()


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
    """``status.allocated`` as a controller last wrote it (read by the webhook only); its
    ``pods`` is the number of pods running in the queue's subtree."""
    reserved: resources.Resource = resources.EMPTY
    """``status.reserved`` as the operator last wrote it (read by the webhook only): the
    requests, and ``pods`` the number, of pods admitted in the subtree and not yet placed."""
    annotations: Mapping[str, str] = dataclasses.field(default_factory=_empty_mapping)
    created: datetime.datetime = EPOCH
    uid: str = ""
    deleting: bool = False
    """``metadata.deletionTimestamp`` is set: the queue was deleted and stays only while a
    finalizer holds it (:data:`QUEUE_IN_USE_FINALIZER`); it admits no new pods, and its pods
    still count at every ancestor until they finish."""
    as_written: QueueAsWritten = dataclasses.field(default=NOT_WRITTEN, compare=False, repr=False)
    """The quota and state as written, for the webhook's rules (no session reads it); not
    part of equality: two spellings of the same quota (``1`` and ``1000m``) are the same
    queue to everything that compares queues."""

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
class GroupCounts:
    """A PodGroup's pod counts as Volcano's scheduler writes them into its status."""

    running: int = 0
    """Pods in phase Running (``status.running``, the ``RUNNINGS`` column)."""
    succeeded: int = 0
    failed: int = 0


NO_COUNTS = GroupCounts()


@dataclasses.dataclass(frozen=True, slots=True)
class Condition:
    """One entry of a PodGroup's ``status.conditions`` as written (Volcano's
    ``PodGroupCondition``). The operator reads its own (``conditions.GROUP_CONDITION``) and
    rewrites the list keeping the others as they are."""

    type: str
    status: str
    """``True``, ``False`` or ``Unknown``, as written."""
    reason: str = ""
    message: str = ""
    last_transition: datetime.datetime | None = None
    """``lastTransitionTime``; None when absent or unreadable."""
    transition_id: str = ""
    """``transitionID`` (Volcano's scheduler writes its session's id)."""


@dataclasses.dataclass(frozen=True, slots=True)
class OwnerReference:
    """An object that owns another (a Job its PodGroup, a ReplicaSet its pods)."""

    api_version: str
    kind: str
    name: str
    uid: str


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
    missing: bool = False
    """True for the stand-in of a PodGroup that pods name but that does not exist (yet): its
    gated pods wait until it exists, however many of them would fit (a gang is never split)."""
    counts: GroupCounts = NO_COUNTS
    """``status.running``, ``succeeded`` and ``failed`` as last written (no session reads
    them: the operator compares what it would write with them)."""
    outside: int = 0
    """How many of the group's pods run outside queue admission (not :attr:`Pod.governed`):
    set where an admission snapshot is made (``governing.admission_snapshot``, the operator's
    state), 0 everywhere else. Those pods are not in the snapshot: they count in no figure of
    the group or its queue, nor towards ``minMember``. A group with such pods and no governed
    one is outside queue admission itself: it is never enqueued and holds nothing in its queue
    (not even its ``minResources``); its phase is Pending and its counts are zero, which is
    what its queue sees of it (``governing.group_in_admission``)."""
    status_written: bool = False
    """``status.phase`` is set: a controller wrote the group's status. Until then the
    operator writes phase and counts even when they equal the defaults (Pending, 0), so
    ``kubectl get podgroups`` fills its STATUS and RUNNINGS columns."""
    conditions: tuple[Condition, ...] = ()
    """``status.conditions`` as written. The admission condition among them
    (``conditions.GROUP_CONDITION``) says when the group last entered Inqueue or was
    released for lack of pods, which bounds its reservation (``inqueue_bounds``)."""
    created: datetime.datetime = EPOCH
    uid: str = ""
    owner: OwnerReference | None = None
    """The workload the group is for (its controller ownerReference, else its first one):
    the operator tells it, as well as the group, when the group waits or is admitted."""

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
class ClaimRef:
    """One entry of a pod's ``spec.resourceClaims``: a shared ResourceClaim (``claim``) or a
    ResourceClaimTemplate that makes the pod a claim of its own (``template``); exactly one is
    set. Both name objects of the pod's namespace. How they are charged: ``core.devices``."""

    name: str
    claim: str = ""
    template: str = ""
    generated: str = ""
    """With ``template``: the name of the ResourceClaim generated for the pod from it, as the
    pod's ``status.resourceClaimStatuses`` records; empty until the resourceclaim controller
    made it. The pod is charged from that claim, not from the template (``core.devices``)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Pod:
    """A pod as a scheduling task.

    ``resreq`` is the pod's request as Kubernetes computes it (``PodRequests``): what
    kube-scheduler holds on the pod's node, and ResourceQuota charges, for the pod's whole life.
    It is what the pod is charged in its queue and every ancestor, and on its node: the larger,
    per dimension, of the containers' requests (with sidecars) and each init container's (with
    the sidecars started before it), plus the overhead. Volcano charges the containers' sum
    alone and reads the init containers only to check that a node fits; queuetree charges
    what the cluster holds (docs/compatibility.md). It never contains ``pods: 1``: a pod's
    count is ``count``.
    """

    namespace: str
    name: str
    group: str
    """The key of the pod's PodGroup (``namespace/name``); synthetic groups use the pod's key."""
    status: TaskStatus = TaskStatus.PENDING
    resreq: resources.Resource = resources.EMPTY
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
    scheduler_name: str = DEFAULT_SCHEDULER
    created: datetime.datetime = EPOCH
    uid: str = ""
    count: int = 1
    """How many pods this record stands for: 1, or the number of pods that compaction folded
    into it (its requests are their sum); what queue figures count as ``pods``."""
    claims: tuple[ClaimRef, ...] = ()
    """``spec.resourceClaims``: devices through Dynamic Resource Allocation."""
    request_before_devices: resources.Resource | None = None
    """None: ``resreq`` holds no device charge. Otherwise ``resreq`` is this plus the devices
    of ``claims`` (``core.devices.charge_pod``), so that charging again starts from here."""
    own_devices: resources.Resource | None = None
    """The part of ``resreq`` that the pod's own claims (generated from templates) charge; None
    while they were never charged. An admitted pod is never charged less for them
    (``core.devices.charge_pod``'s ``floor``), and one charged more has outgrown its admission
    (``core.devices.outgrown``)."""
    admitted_devices: resources.Resource | None = None
    """What the admission record says the pod's own claims were charged when it was admitted
    (:data:`ADMITTED_DEVICES_ANNOTATION`); None without a record, or one that cannot be read.
    Read only for pods that name claims."""
    native_group: str = ""
    """The Workload API PodGroup the pod names (``spec.schedulingGroup.podGroupName``, set at
    creation, immutable), ``""`` for none. kube-scheduler queues the pending pods of such a
    group as one entity and keeps the whole entity back while any of them has a scheduling
    gate (docs/gangs.md), so admission ungates the gated ones together
    (``actions._admit_job``)."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def names_group(self) -> bool:
        """The pod names a PodGroup (the group-name annotation, whose key ``group`` is): it is
        never a lone pod, even when the group has the pod's own name."""
        return self.group != self.key or bool(self.annotations.get(GROUP_NAME_ANNOTATION))

    @property
    def admitted_queue(self) -> str:
        """The queue queuetree admitted the pod to (:data:`ADMITTED_QUEUE_ANNOTATION`); "" for a
        pod never admitted through the gate (still gated, or admitted before the record)."""
        return self.annotations.get(ADMITTED_QUEUE_ANNOTATION, "")

    @property
    def reserves(self) -> bool:
        """Whether the pod, once ungated and until placed, holds its queue's room (spec §5.3):
        it opted in, or it carries the admission record (so editing the opt-in annotation of
        an admitted pod cannot drop its reservation)."""
        return self.opted_in or ADMITTED_QUEUE_ANNOTATION in self.annotations

    @property
    def holds_reservation(self) -> bool:
        """Admitted and not placed yet, its request stays reserved in its queue and every
        ancestor (spec §5.3): Pending, with no scheduling gate, and :attr:`reserves`. The one
        statement of the rule: the capacity plugin's reserved figures, the session's in-flight
        counts and the operator's wake-ups (``state.holds_room``) all read it."""
        return self.status is TaskStatus.PENDING and not self.scheduling_gates and self.reserves

    @property
    def sch_gated(self) -> bool:
        """The pod has at least one scheduling gate (Volcano's ``task.SchGated``)."""
        return bool(self.scheduling_gates)

    @property
    def only_queue_gate(self) -> bool:
        """Exactly one gate, ours (:func:`only_queue_gate`)."""
        return only_queue_gate(self.scheduling_gates)

    @property
    def queue_gated(self) -> bool:
        """Our gate is among the pod's gates (the pod waits for queue admission, or for
        another controller's gates to go first)."""
        return QUEUE_ALLOCATION_GATE in self.scheduling_gates

    @property
    def held_by_other_gates(self) -> bool:
        """The pod has a gate that is not ours: another controller holds it, and queuetree
        neither admits it nor removes its own gate until that controller is done."""
        gates = self.scheduling_gates
        return bool(gates) and not only_queue_gate(gates)

    @property
    def opted_in(self) -> bool:
        """The pod carries the opt-in annotation with the exact value ``"true"``."""
        return self.annotations.get(QUEUE_ALLOCATION_GATE) == "true"

    @property
    def governed(self) -> bool:
        """The pod is governed by queuetree's admission, so that in admission mode (the
        operator, and every tool that shows or explains its decisions) its queue counts it:
        it carries our gate (:attr:`queue_gated`: it waits for admission, or for other
        controllers' gates to go first), or the admission record
        (:data:`ADMITTED_QUEUE_ANNOTATION`, written by the operator in the write that removes
        the gate; only the operator may change it), or it is :attr:`opted_in` (a pod admitted
        before the record existed).

        Every other pod runs outside queue admission, whatever queue it names (annotation,
        PodGroup, namespace): in admission mode it is charged to no queue (not in allocated,
        reserved, inqueue, the pod counts, shares, status figures or metrics), is never a
        reclaim or preempt victim and never blocks an admission; it only uses its node
        (:class:`Occupancy`). As Volcano's queues count only the pods its own scheduler
        places, queuetree's count the pods that went through its gate. Edges: a gated pod
        whose opt-in annotation was removed stays governed (its gate holds it, and it is told
        why); an opt-in value other than ``"true"`` governs no ungated pod; a pod held only by
        other controllers' gates is governed only when it opted in. Volcano mode (``queuetree
        session`` without ``--admission-only``) keeps Volcano's rule: every pod counts."""
        return (
            QUEUE_ALLOCATION_GATE in self.scheduling_gates
            or ADMITTED_QUEUE_ANNOTATION in self.annotations
            or self.annotations.get(QUEUE_ALLOCATION_GATE) == "true"
        )


_ONLY_OURS: tuple[str, ...] = (QUEUE_ALLOCATION_GATE,)


_POD_FIELDS = tuple(field.name for field in dataclasses.fields(Pod))
_pod_values = operator.attrgetter(*_POD_FIELDS)
_STATUS, _NODE_NAME, _UNSCHEDULABLE, _SCHEDULING_GATES = (
    _POD_FIELDS.index(name) for name in ("status", "node_name", "unschedulable", "scheduling_gates")
)
_all_but_placement = operator.attrgetter(
    *(name for name in _POD_FIELDS if name not in ("status", "node_name"))
)


def with_progress(
    pod: Pod,
    *,
    status: TaskStatus,
    node_name: str,
    unschedulable: bool,
    scheduling_gates: tuple[str, ...],
) -> Pod:
    """``dataclasses.replace(pod, ...)`` of what the cluster writes into a pod after its
    creation, at about half the cost (the fields are read in one C call and passed in order):
    the informer makes one for most watch events."""
    values = list(_pod_values(pod))
    values[_STATUS] = status
    values[_NODE_NAME] = node_name
    values[_UNSCHEDULABLE] = unschedulable
    values[_SCHEDULING_GATES] = scheduling_gates
    return Pod(*values)


def same_but_placement(before: Pod, after: Pod) -> bool:
    """``before`` and ``after`` differ at most in ``status`` and ``node_name``: what
    kube-scheduler and the kubelet change (``dataclasses.replace(before, status=...,
    node_name=...) == after``, without building a pod)."""
    return bool(_all_but_placement(before) == _all_but_placement(after))


def only_queue_gate(gates: tuple[str, ...]) -> bool:
    """The gate rule: queuetree judges a gated pod, and removes its gate, only while its gate
    is the last one left (Volcano's ``HasOnlyVolcanoSchedulingGate``): another controller's
    gate means that controller is not done with the pod."""
    return gates == _ONLY_OURS


def single_pod_group(
    pod: Pod, *, queue: str, name: str | None = None, admitted: bool = False
) -> PodGroup:
    """The single-pod group of ``pod`` in ``queue`` (``name``: the pod's own by default).

    Modelled on the PodGroup Volcano's controller creates for a pod without one: minMember 1,
    ``minResources`` the pod's requests, the pod's creation time and uid. Its phase follows the
    pod, because no controller has written one: Running while the pod holds resources (Bound,
    Binding, Running, Allocated, Releasing), Completed once it Succeeded or Failed; a Pending
    pod's group is Inqueue when ``admitted`` (it passed queue admission and only waits for a
    node: its request stays held in the queue's ``inqueue``, as Volcano holds an admitted
    group's), else Pending.
    """
    if pod.status in ALLOCATED_STATUSES or pod.status is TaskStatus.RELEASING:
        phase = PodGroupPhase.RUNNING
    elif pod.status in (TaskStatus.SUCCEEDED, TaskStatus.FAILED):
        phase = PodGroupPhase.COMPLETED
    elif admitted and pod.status is TaskStatus.PENDING:
        phase = PodGroupPhase.INQUEUE
    else:
        phase = PodGroupPhase.PENDING
    return PodGroup(
        namespace=pod.namespace,
        name=pod.name if name is None else name,
        queue=queue,
        min_member=1,
        min_resources=pod.resreq,
        phase=phase,
        synthetic=True,
        created=pod.created,
        uid=pod.uid,
    )


def pod_group_for_lone_pod(
    pod: Pod,
    *,
    namespace_queue: str = "",
    default_queue: str = DEFAULT_QUEUE,
    admitted: bool = False,
) -> PodGroup:
    """The single-pod group of a pod without the ``scheduling.k8s.io/group-name`` annotation
    (:func:`single_pod_group`; its key is the pod's key).

    Its queue is the one the pod was admitted to (``scheduling.queuetree.io/admitted-queue``:
    admission is bound, whatever the pod says now), else the pod's
    ``scheduling.volcano.sh/queue-name`` annotation, else ``namespace_queue`` (the same
    annotation on the pod's Namespace), else ``default_queue``. ``admitted`` makes a Pending
    pod's group Inqueue (see :func:`single_pod_group`).
    """
    queue = (
        pod.admitted_queue
        or pod.annotations.get(QUEUE_NAME_ANNOTATION)
        or namespace_queue
        or default_queue
    )
    return single_pod_group(pod, queue=queue, admitted=admitted)


def admission_lone_pod_group(pod: Pod, *, default_queue: str = DEFAULT_QUEUE) -> PodGroup:
    """The single-pod group of a lone pod of a live cluster, as admission sees it.

    As :func:`pod_group_for_lone_pod`, with a Pending pod that carries no scheduling gate
    counted as admitted (Inqueue): it was admitted (by this operator, or it never waited for
    queue admission) and kube-scheduler will place it whatever the queue's room, so its
    request is held in the queue's ``inqueue`` as Volcano holds an admitted group's until it
    runs. Built from the pod every cycle, the group would otherwise be Pending again and go
    through enqueue anew each cycle, where a full queue could leave it out of the figures and
    let a gated pod take room this pod is about to use. (An Inqueue lone group is also what
    lets ``compaction`` fold such pods.)
    """
    return pod_group_for_lone_pod(
        pod, default_queue=default_queue, admitted=not pod.scheduling_gates
    )


@dataclasses.dataclass(frozen=True, slots=True)
class Node:
    name: str
    allocatable: resources.Resource = resources.EMPTY
    """Includes the ``pods`` count as a plain scalar."""
    labels: Mapping[str, str] = dataclasses.field(default_factory=_empty_mapping)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class Occupancy:
    """The room pods outside queue admission (not :attr:`Pod.governed`) hold on one node.

    They are in no admission snapshot, yet they still use their nodes: a session subtracts
    ``used`` from the node's idle room (never from its allocatable, so cluster totals, root's
    capability and deserved shares do not change) and counts ``releasing`` as room that comes
    back, exactly as it would for the pods themselves. Reclaim, the one admission-mode action
    that reads a node's room, would otherwise think nodes freer than they are and evict pods for
    nothing."""

    used: resources.Resource = resources.EMPTY
    """The summed requests of those pods that hold the node (:data:`OCCUPYING_STATUSES`),
    Releasing ones included."""
    releasing: resources.Resource = resources.EMPTY
    """Of ``used``, what pods being deleted (Releasing) hold: free once they are gone."""


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
    outside: Mapping[str, Occupancy] = dataclasses.field(default_factory=_empty_mapping)
    """Node name -> what pods outside queue admission hold on it (:class:`Occupancy`): those
    pods are not in ``pods``. Empty in Volcano mode, where every pod is in ``pods``."""
