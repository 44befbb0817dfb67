"""The operator's cluster state: the only mutable state of queuetree, behind one lock.

Kopf handlers write into it (parse, then :meth:`ClusterState.upsert_pod` and friends) and wake
the admission cycle; the cycle takes an immutable :meth:`ClusterState.snapshot` under the lock,
runs the pure core on it, and records what it did (assumed gate removals, reasons explained,
status written) back here. Nothing else in the operator keeps cluster facts between cycles.

Assumed gate removals (kueue's "assume, then write, then forget on failure"): when the cycle
admits a pod it marks the pod here *before* the PATCH is sent. Every snapshot shows an assumed
pod without our gate, so the core counts it as reserved capacity at once and the next cycle can
never admit the same room twice. The mark disappears when the watch shows the gate gone (the
truth caught up), when the pod is deleted, or when the removal failed (:meth:`forget_ungate`),
after which the next cycle decides again from the cluster as it is.

Pods outside queue admission (not ``objects.Pod.governed``: they never opted in) are kept apart
(``core.governing`` states the rule for a whole snapshot; the state applies it pod by pod):
they are in no snapshot's ``pods``, they have no single-pod group, and neither the compaction
index nor the group tally sees them. What they hold on their nodes is kept per node and shown
as ``Snapshot.outside``; a real PodGroup with such pods is shown marked
(``governing.group_in_admission``); the ones that name a queue are in ``StateView.outside``,
for the metrics and the Event that tells them they are not in it.
"""

from __future__ import annotations

import collections
import dataclasses
import threading
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, TypeVar

from queuetree.core import devices, governing, inqueue_bounds, objects, resources
from queuetree.operator import compacting

WakeFn = Callable[[], None]
StoredT = TypeVar("StoredT")


@dataclasses.dataclass(frozen=True, slots=True)
class QueueRecord:
    """A queue as parsed, plus the raw ``status`` the controller compares its writes against."""

    queue: objects.Queue
    status: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    finalizers: tuple[str, ...] = ()
    """``metadata.finalizers``: whether the queue carries ours (``protecting``)."""
    resource_version: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class StateView:
    """One consistent reading of the state, taken under the lock (see :meth:`ClusterState.view`)."""

    snapshot: objects.Snapshot
    queue_records: Mapping[str, QueueRecord]
    pod_groups: Mapping[str, objects.PodGroup]
    """The real PodGroups (the snapshot also holds the single-pod group of every lone pod)."""
    assumed: Mapping[str, float]
    """Pod key -> monotonic time of the admission decision, for pods assumed ungated."""
    version: int
    """Bumped by every change that may change a decision: equal versions, equal decisions."""
    synced: bool
    """Every source delivered its initial listing (no decision is made before)."""
    session_snapshot: objects.Snapshot | None = None
    """What the admission session reads: ``snapshot`` with the settled lone pods already
    folded (``core.compaction``), kept folded between cycles so that a cycle does not walk
    every pod of the cluster; None means ``snapshot`` itself. The session's result over it
    equals its result over ``snapshot`` (tests/operator/test_state_compaction.py)."""

    gated: frozenset[str] = frozenset()
    """Keys of the pods that snapshots show with our gate (assumed removals excluded)."""
    group_tally: Mapping[tuple[str, objects.PodGroupPhase], int] | None = None
    """How many of ``snapshot.pod_groups`` each (queue, phase) has, kept by the state as the
    groups change (a cycle does not walk every group to count them); None: count the
    snapshot's."""
    outside: Mapping[str, objects.Pod] = dataclasses.field(
        default_factory=lambda: MappingProxyType({})
    )
    """The unfinished pods outside queue admission that name a queue (``governing.named_queue``:
    a queue-name annotation or a PodGroup), by key: no queue counts them, and they are told so.
    Pods that name nothing (most of a cluster's) are not here."""
    unreadable: Mapping[str, tuple[str, str]] = dataclasses.field(
        default_factory=lambda: MappingProxyType({})
    )
    """Pods with our gate that the operator cannot read, by key: (uid, the problems). They are
    in no snapshot, so no queue admits them; they are told why (``explaining``)."""
    device_waits: Mapping[str, tuple[str, str]] = dataclasses.field(
        default_factory=lambda: MappingProxyType({})
    )
    """Gated pods whose DRA devices cannot be charged yet, by key: (uid, why). They are in no
    snapshot, so no queue admits them uncharged; they are told why (``explaining``)."""
    outgrown: Mapping[str, tuple[str, str]] = dataclasses.field(
        default_factory=lambda: MappingProxyType({})
    )
    """Admitted pods whose own DRA claims now charge more than they were admitted with, by key:
    (uid, why): evicted (``planning``), as a gate cannot be put back (``core.devices``)."""
    declared_minimums: Mapping[str, str | None] = dataclasses.field(
        default_factory=lambda: MappingProxyType({})
    )
    """Workload uid -> its ``group-min-member`` (None: it says none), for the generated
    groups' owners the watches showed; an owner not here is not known yet."""

    @property
    def for_session(self) -> objects.Snapshot:
        return self.session_snapshot if self.session_snapshot is not None else self.snapshot


class ClusterState:
    """Queues, pods, pod groups, nodes and PriorityClasses as the watches last showed them.

    Every method takes the lock for a short, non-blocking critical section (no awaits inside),
    so the state may be touched from kopf's handlers, the cycle and the gate workers alike.
    ``wake`` is called after every change that may change an admission decision.
    """

    def __init__(
        self,
        *,
        wake: WakeFn | None = None,
        sources: frozenset[str] = frozenset({"kopf"}),
        default_queue: str = objects.DEFAULT_QUEUE,
        device_classes: Mapping[str, str] = MappingProxyType({}),
    ) -> None:
        self._lock = threading.Lock()
        self.device_classes = device_classes
        """DRA device class -> resource name (``deviceClassMappings``): pods that name claims
        are charged their devices (``core.devices``); empty, claims charge nothing."""
        self._claim_specs: dict[str, devices.ClaimSpec] = {}
        self._template_specs: dict[str, devices.ClaimSpec] = {}
        """ResourceClaims and ResourceClaimTemplates by ``namespace/name``."""
        self._named_by: dict[tuple[str, str], set[str]] = {}
        """(kind, claim or template key) -> the governed pods that name it."""
        self._names_of: dict[str, frozenset[tuple[str, str]]] = {}
        """Pod key -> what it names (the inverse of ``_named_by``)."""
        self._device_waits: dict[str, tuple[objects.Pod, str]] = {}
        """Gated pods whose devices cannot be charged yet: key -> (the pod, why)."""
        self._outgrown: dict[str, tuple[str, str]] = {}
        """Admitted pods whose own claims now charge more than they were admitted with, to be
        evicted: key -> (uid, why) (``core.devices.outgrown``)."""
        self._recharging = False
        self.default_queue = default_queue
        """The queue of lone pods and PodGroups that name none (``--default-queue``)."""
        self._sources = sources
        """What must have delivered its initial listing before decisions are made."""
        self._listed: set[str] = set()
        self._wake: WakeFn = wake or (lambda: None)
        self._queues: dict[str, QueueRecord] = {}
        self._pods: dict[str, objects.Pod] = {}
        self._pod_groups: dict[str, objects.PodGroup] = {}
        self._lone_groups: dict[str, objects.PodGroup] = {}
        self._nodes: dict[str, objects.Node] = {}
        self._priority_classes: dict[str, objects.PriorityClass] = {}
        self._declared_minimums: dict[str, str | None] = {}
        """Workload uid -> the ``group-min-member`` it declares (None: none), for every
        workload of a registered kind the watches showed (``api.workloads``)."""
        self._assumed: dict[str, float] = {}
        self._assumed_view: dict[str, objects.Pod] = {}
        """Assumed pods as snapshots show them: without our gate."""
        self._assumed_groups: dict[str, objects.PodGroup] = {}
        """The single-pod groups of assumed lone pods, as snapshots show them (admitted)."""
        self._explained: dict[str, str] = {}
        self._compaction = compacting.CompactionIndex()
        """The settled lone pods by compaction bucket, fed pod by pod (see _classify)."""
        self._gated: set[str] = set()
        self._group_tally: collections.Counter[tuple[str, objects.PodGroupPhase]] = (
            collections.Counter()
        )
        self._tallied: dict[str, tuple[str, objects.PodGroupPhase]] = {}
        """Group key -> the (queue, phase) it is counted under in ``_group_tally``."""
        self._outside: dict[str, objects.Pod] = {}
        """Pods outside queue admission (not ``governed``), by key; never in ``_pods``."""
        self._naming: dict[str, objects.Pod] = {}
        """Of ``_outside``, the unfinished pods that name a queue (``StateView.outside``)."""
        self._on_nodes: dict[str, dict[str, objects.Pod]] = {}
        """Node -> the pods of ``_outside`` that hold room on it (``governing.holds_node``)."""
        self._occupancy: dict[str, objects.Occupancy] = {}
        """Node -> what ``_on_nodes`` holds there, summed when a view finds it dirty."""
        self._dirty_nodes: set[str] = set()
        self._governed_members: collections.Counter[str] = collections.Counter()
        self._outside_members: collections.Counter[str] = collections.Counter()
        """Group key -> how many pods of ``_pods`` / ``_outside`` name it (``Pod.group``)."""
        self._marked: dict[str, objects.PodGroup] = {}
        """Real PodGroups with pods outside queue admission, as snapshots show them
        (``governing.group_in_admission``); they shadow the groups of ``_pod_groups``."""
        self._version = 0
        self._synced = False
        self._unreviewed: set[str] = set(objects.UNREVIEWED_NAMESPACES)
        """Namespaces the pod webhooks do not review (see :meth:`set_namespace_reviewed`)."""
        self._distrusted: dict[str, objects.Pod] = {}
        """Pods stored without the admission record they carry, as delivered (to restore)."""
        self._unreadable: dict[str, tuple[str, str]] = {}
        """Gated pods that cannot be read: key -> (uid, problems) (``StateView.unreadable``)."""

    def set_wake(self, wake: WakeFn) -> None:
        """Replace the wake callback (the cycle installs its own when it starts)."""
        with self._lock:
            self._wake = wake

    def _changed(self) -> None:
        self._version += 1

    # Writers, called by the kopf handlers.

    def mark_synced(self, source: str = "kopf") -> None:
        """``source`` has delivered its initial listing; once every source has, decisions may
        be made (``kopf``: queues, pod groups, nodes and, without the informer, pods;
        ``pods``: the pod informer)."""
        with self._lock:
            self._listed.add(source)
            if self._synced or not self._sources <= self._listed:
                return
            self._synced = True
            self._changed()
        self._wake()

    def upsert_queue(self, record: QueueRecord) -> None:
        """Store ``record``; wake the cycle only when a decision may change.

        The status figures the controller itself writes (``allocated``, ``reserved``, the
        counters...) come back through the watch; they are stored (the next status diff reads
        them) but neither wake a cycle nor invalidate the last decisions, or every status write
        would cause another session.
        """
        with self._lock:
            previous = self._queues.get(record.queue.name)
            if previous == record:
                return
            self._queues[record.queue.name] = record
            if previous is not None and _decisive(previous) == _decisive(record):
                return
            self._changed()
        self._wake()

    def delete_queue(self, name: str) -> None:
        self._drop(self._queues, name)

    def upsert_pod(self, pod: objects.Pod) -> None:
        """Store ``pod``; a pod that no longer carries our gate confirms its assumed removal.

        Wakes the cycle when what snapshots show of the pod changed, unless the change only takes
        room (:func:`only_takes_room`): the periodic cycle shows that in the figures.
        """
        with self._lock:
            self._unreadable.pop(pod.key, None)
            wake = self._store_pod(self._trusted(pod))
        if wake:
            self._wake()

    def note_unreadable(self, key: str, *, uid: str, problem: str) -> None:
        """Pod ``key`` carries our gate and cannot be read (``problem``): it is dropped from
        the snapshots, and told why. ``replace`` with a listing's notes (``replace_unreadable``)
        or a later readable version (``upsert_pod``) or deletion forgets it."""
        with self._lock:
            self._drop_pod(key)
            self._unreadable[key] = (uid, problem)
            self._changed()
        self._wake()

    def replace_unreadable(self, notes: Mapping[str, tuple[str, str]]) -> None:
        """After a fresh listing: exactly these pods are unreadable (key -> (uid, problem))."""
        with self._lock:
            self._unreadable = dict(notes)

    def _trusted(self, pod: objects.Pod) -> objects.Pod:
        """``pod`` as far as the operator may believe it: in a namespace the pod webhooks do not
        review, its admission record is ignored (issue 35). There nothing kept anyone from
        creating a pod with a record, or writing one, so a record would charge a pod that never
        waited for its queue to any queue it names (filling the queue, keeping it from being
        deleted). Such a pod counts as its annotations say, like any pod created there while
        the webhook looked away; a gated pod there is admitted as usual."""
        key = pod.key
        if (
            pod.namespace not in self._unreviewed
            or objects.ADMITTED_QUEUE_ANNOTATION not in pod.annotations
        ):
            self._distrusted.pop(key, None)
            return pod
        self._distrusted[key] = pod
        kept = {
            name: value
            for name, value in pod.annotations.items()
            if name not in objects.ADMISSION_RECORDS
        }
        return dataclasses.replace(pod, annotations=MappingProxyType(kept), admitted_devices=None)

    def set_namespace_reviewed(self, namespace: str, reviewed: bool) -> None:
        """Whether the pod webhooks review ``namespace`` (it is not labelled
        ``queuetree.io/admission=disabled``; the namespaces of
        ``objects.UNREVIEWED_NAMESPACES`` never are). The pods stored there are read again
        (:meth:`_trusted`)."""
        if namespace in objects.UNREVIEWED_NAMESPACES:
            return
        with self._lock:
            if (namespace not in self._unreviewed) == reviewed:
                return
            if reviewed:
                self._unreviewed.discard(namespace)
            else:
                self._unreviewed.add(namespace)
            stored = [
                self._distrusted.get(key) or pod
                for key, pod in (*self._pods.items(), *self._outside.items())
                if pod.namespace == namespace
            ]
            for pod in stored:
                self._store_pod(self._trusted(pod))
            self._changed()
        self._wake()

    def _store_pod(self, pod: objects.Pod) -> bool:
        """Store ``pod``; True when what snapshots show of it changed in a way worth a cycle soon.

        The watch confirming an assumed removal changes nothing a snapshot shows (the assumed
        pod already appears without our gate), so it wakes no cycle; nor does a change that only
        takes room (:func:`only_takes_room`), although it changes the version. A pod outside
        queue admission goes apart (:meth:`_store_outside`).
        """
        key = pod.key
        if not pod.governed:
            return self._store_outside(pod)
        if pod.claims and self.device_classes:
            charged = self._charged(pod)
            if charged is None:
                return True
            pod = charged
        elif key in self._names_of:
            self._forget_names(key)
        if key in self._outside:
            # It was outside queue admission (a pod can opt in only where the webhook lets it,
            # but the state takes any history): it leaves the outside books first.
            self._drop_outside(key)
        stored = self._pods.get(key)
        if (stored is pod or stored == pod) and (pod.queue_gated or key not in self._assumed):
            # Nothing changed that a snapshot shows or an index holds: a placed pod's later
            # status writes (its conditions' timestamps, its IP, its containers' states).
            return False
        try:
            return self._store_pod_unclassified(pod)
        finally:
            self._classify(key)

    # Devices through DRA (``core.devices``): a pod that names claims is stored charged them.

    def _charged(self, pod: objects.Pod) -> objects.Pod | None:
        """``pod`` charged its devices; None when a gated pod cannot be charged yet (it is
        dropped from the snapshots and waits, told why). An admitted pod whose claim is gone
        keeps the charge it was admitted with (it still holds the devices), and never charges
        its own claims less than before (a generated claim deleted and re-created smaller):
        less than this operator charged it, nor less than its admission record says
        (``objects.ADMITTED_DEVICES_ANNOTATION``, what an operator that restarted since knows)."""
        key = pod.key
        self._note_names(key, pod)
        queue = self._queue_of(pod)
        found = devices.find_claims(
            pod,
            claims=self._claim_specs,
            templates=self._template_specs,
            carried=lambda claim: devices.carries(key, self._holders(claim, queue)),
        )
        previous = self._pods.get(key)
        admitted = not pod.queue_gated or key in self._assumed
        remembered = previous.own_devices if admitted and previous is not None else None
        admitted_with = _admitted_charge(pod, remembered) if admitted else None
        charged = devices.charge_pod(
            pod, found, self.device_classes, floor=admitted_with or resources.EMPTY
        )
        if not isinstance(charged, str):
            self._device_waits.pop(key, None)
            # Grown only against what this operator charged: the record is a floor, never a
            # reason to evict (a deviceClassMappings changed across a restart charges more).
            if (
                key not in self._outgrown
                and remembered is not None
                and devices.outgrown(remembered, charged)
            ):
                # Kept until the pod is gone: its charge keeps the larger figure from now on.
                why = devices.outgrown_reason(remembered, charged, queue)
                self._outgrown[key] = (pod.uid, why)
                self._changed()
            return charged
        if pod.queue_gated and key not in self._assumed:
            if key not in self._device_waits:
                self._drop_pod(key, keep_names=True)
            if self._device_waits.get(key) != (pod, charged):
                self._device_waits[key] = (pod, charged)
                self._changed()
            return None
        self._device_waits.pop(key, None)
        if previous is None or previous.request_before_devices is None:
            if admitted_with is None:
                return pod
            # Known from its record only (the operator restarted, the claim is not read yet or
            # gone): charged what it records, and own_devices stays None, as nothing charged
            # its claims yet: the record must not become what a later claim outgrows.
            return dataclasses.replace(
                pod, resreq=pod.resreq + admitted_with, request_before_devices=pod.resreq
            )
        return dataclasses.replace(
            pod,
            resreq=previous.resreq,
            request_before_devices=previous.request_before_devices,
            own_devices=previous.own_devices,
        )

    def _queue_of(self, pod: objects.Pod) -> str:
        """The queue ``pod`` is charged to: its admission record, else its group's queue."""
        if pod.admitted_queue:
            return pod.admitted_queue
        group = self._shown_group(pod.group)
        if group is None:
            group = objects.admission_lone_pod_group(pod, default_queue=self.default_queue)
        return group.queue

    def _holders(self, claim: str, queue: str) -> list[str]:
        """The pods of ``queue`` that name the shared ResourceClaim ``claim`` and hold room."""
        found = []
        for key in self._named_by.get((devices.CLAIM, claim), ()):
            shown = self._assumed_view.get(key) or self._pods.get(key)
            if (
                shown is not None
                and not shown.queue_gated
                and holds_room(shown)
                and self._queue_of(shown) == queue
            ):
                found.append(key)
        return found

    def _note_names(self, key: str, pod: objects.Pod) -> None:
        names: set[tuple[str, str]] = set()
        for ref in pod.claims:
            if ref.claim:
                names.add((devices.CLAIM, f"{pod.namespace}/{ref.claim}"))
            elif ref.template:
                # The template only explains a wait; the claim generated from it is charged.
                names.add((devices.TEMPLATE, f"{pod.namespace}/{ref.template}"))
                if ref.generated:
                    names.add((devices.CLAIM, f"{pod.namespace}/{ref.generated}"))
        if self._names_of.get(key) == frozenset(names):
            return
        self._forget_names(key)
        self._names_of[key] = frozenset(names)
        for name in names:
            self._named_by.setdefault(name, set()).add(key)

    def _forget_names(self, key: str) -> frozenset[tuple[str, str]]:
        names = self._names_of.pop(key, frozenset())
        for name in names:
            users = self._named_by.get(name)
            if users is not None:
                users.discard(key)
                if not users:
                    del self._named_by[name]
        return names

    def _recharge(self, names: frozenset[tuple[str, str]] | set[tuple[str, str]]) -> None:
        """Charge again the pods that name any of ``names`` (a claim or template changed, or
        which pod carries a shared claim may have)."""
        if self._recharging:
            return
        self._recharging = True
        try:
            keys = sorted({key for name in names for key in self._named_by.get(name, ())})
            for key in keys:
                waiting = self._device_waits.get(key)
                stored = waiting[0] if waiting is not None else self._pods.get(key)
                if stored is not None:
                    self._store_pod(stored)
        finally:
            self._recharging = False

    def _recharge_shared(self, key: str) -> None:
        """After pod ``key`` changed: the pods sharing its claims may carry them differently."""
        names = self._names_of.get(key)
        if names and not self._recharging:
            self._recharge({name for name in names if name[0] == devices.CLAIM})

    def upsert_claim(self, kind: str, key: str, spec: devices.ClaimSpec) -> None:
        """Store a ResourceClaim or ResourceClaimTemplate (``kind``) and charge its pods."""
        table = self._claim_specs if kind == devices.CLAIM else self._template_specs
        with self._lock:
            if table.get(key) == spec:
                return
            table[key] = spec
            self._recharge({(kind, key)})
            self._changed()
        self._wake()

    def delete_claim(self, kind: str, key: str) -> None:
        table = self._claim_specs if kind == devices.CLAIM else self._template_specs
        with self._lock:
            if table.pop(key, None) is None:
                return
            self._recharge({(kind, key)})
            self._changed()
        self._wake()

    def _store_pod_unclassified(self, pod: objects.Pod) -> bool:
        key = pod.key
        before = self._assumed_view.get(key) or self._pods.get(key)
        if not pod.queue_gated:
            self._unassume(key)
        previous = self._pods.get(key)
        if previous == pod:
            return False
        self._pods[key] = pod
        if previous is None or previous.group != pod.group:
            if previous is not None:
                self._count_member(self._governed_members, previous.group, -1)
            self._count_member(self._governed_members, pod.group, 1)
        if pod.names_group:
            self._lone_groups.pop(key, None)
        else:
            self._lone_groups[key] = objects.admission_lone_pod_group(
                pod, default_queue=self.default_queue
            )
        if key in self._assumed:
            self._assume_view(key, pod)
        after = self._assumed_view.get(key) or pod
        if after == before:
            return False
        self._changed()
        return not only_takes_room(before, after)

    def _assume_view(self, key: str, pod: objects.Pod) -> None:
        shown = self._assumed_view[key] = _without_queue_gate(pod)
        if key in self._lone_groups:
            self._assumed_groups[key] = objects.admission_lone_pod_group(
                shown, default_queue=self.default_queue
            )

    def _unassume(self, key: str) -> bool:
        """Forget the assumption about ``key``; True when there was one."""
        self._assumed_view.pop(key, None)
        self._assumed_groups.pop(key, None)
        return self._assumed.pop(key, None) is not None

    def _drop_pod(self, key: str, *, keep_names: bool = False) -> bool:
        """Forget pod ``key``; True when that is worth a cycle soon (a pod outside queue
        admission is worth one only when a PodGroup's mark changed). ``keep_names``: it
        still names its claims (it waits for them)."""
        if key in self._outside:
            return self._drop_outside(key)
        if not keep_names:
            self._device_waits.pop(key, None)
            self._outgrown.pop(key, None)
            names = self._forget_names(key)
            if names:
                self._recharge({name for name in names if name[0] == devices.CLAIM})
        self._unassume(key)
        self._explained.pop(key, None)
        self._lone_groups.pop(key, None)
        gone = self._pods.pop(key, None)
        self._classify(key)
        if gone is None:
            return False
        self._count_member(self._governed_members, gone.group, -1)
        self._changed()
        return True

    def _store_outside(self, pod: objects.Pod) -> bool:
        """Store ``pod``, outside queue admission; True when a real PodGroup's mark changed
        (worth a cycle soon: a group left with no governed pod gives its room back). What it
        holds on its node changes the version but wakes nothing: only reclaim reads it."""
        key = pod.key
        wake = False
        if key in self._pods:
            # It leaves the queues (a pod admitted before the record whose opt-in annotation
            # was removed): everything it held there goes with it.
            self._drop_pod(key)
            wake = True
        previous = self._outside.get(key)
        if previous is pod or previous == pod:
            return wake
        self._outside[key] = pod
        if governing.named_queue(pod, self._pod_groups) is not None and not _finished(pod):
            self._naming[key] = pod
        else:
            self._naming.pop(key, None)
        if previous is None or previous.group != pod.group:
            if previous is not None:
                wake |= self._count_member(self._outside_members, previous.group, -1)
            wake |= self._count_member(self._outside_members, pod.group, 1)
        if self._place_outside(key, previous, pod):
            self._changed()
        return wake

    def _drop_outside(self, key: str) -> bool:
        """Forget pod ``key``, outside queue admission; True when a PodGroup's mark changed."""
        gone = self._outside.pop(key, None)
        if gone is None:
            return False
        self._naming.pop(key, None)
        wake = self._count_member(self._outside_members, gone.group, -1)
        if self._place_outside(key, gone, None):
            self._changed()
        return wake

    def _place_outside(
        self, key: str, before: objects.Pod | None, after: objects.Pod | None
    ) -> bool:
        """Move pod ``key`` (outside queue admission) from where ``before`` held room to where
        ``after`` does (None: nowhere); True when a node's occupancy changed."""
        held_before = before is not None and governing.holds_node(before)
        held_after = after is not None and governing.holds_node(after)
        if not (held_before or held_after):
            return False
        if (
            held_before
            and held_after
            and before is not None
            and after is not None
            and before.node_name == after.node_name
            and before.resreq == after.resreq
            and (before.status is objects.TaskStatus.RELEASING)
            is (after.status is objects.TaskStatus.RELEASING)
        ):
            self._on_nodes[after.node_name][key] = after
            return False  # the same room on the same node (Bound -> Running, say)
        if held_before and before is not None:
            node = self._on_nodes[before.node_name]
            del node[key]
            if not node:
                del self._on_nodes[before.node_name]
            self._dirty_nodes.add(before.node_name)
        if held_after and after is not None:
            self._on_nodes.setdefault(after.node_name, {})[key] = after
            self._dirty_nodes.add(after.node_name)
        return True

    def _count_member(self, counter: collections.Counter[str], group: str, delta: int) -> bool:
        """Count a pod in (``delta`` 1) or out of (-1) ``group`` in ``counter``, and mark the
        group anew when it has pods outside queue admission; True when its mark changed."""
        counter[group] += delta
        if not counter[group]:
            del counter[group]
        if group not in self._outside_members and group not in self._marked:
            return False
        return self._mark(group)

    def _mark(self, key: str) -> bool:
        """Show the real PodGroup ``key`` as admission sees it, given its members
        (``governing.group_in_admission``); True when that changed what snapshots show."""
        group = self._pod_groups.get(key)
        outside = self._outside_members.get(key, 0)
        before = self._marked.get(key)
        if group is None or not outside:
            after = None
            self._marked.pop(key, None)
        else:
            after = governing.group_in_admission(
                group, outside=outside, governed=self._governed_members.get(key, 0)
            )
            self._marked[key] = after
        if before == after:
            return False
        self._classify(key)
        self._changed()
        return True

    def _classify(self, key: str) -> None:
        """Tell the compaction index and the gated set about pod ``key`` as snapshots show it
        (gone, when it is). Called after every change to a pod, its assumption or the PodGroup
        of the same key."""
        pod = self._assumed_view.get(key) or self._pods.get(key)
        if pod is not None and pod.queue_gated:
            self._gated.add(key)
        else:
            self._gated.discard(key)
        self._compaction.update(key, pod, self._group_of(pod) if pod is not None else None)
        self._tally(key)
        self._recharge_shared(key)

    def _tally(self, key: str) -> None:
        """Count the group snapshots show under ``key`` (:meth:`_shown_group`) in
        ``_group_tally``, instead of what it was counted as. Every change to any of the three
        maps under a key ends in :meth:`_classify` of it."""
        shown = self._shown_group(key)
        entry = None if shown is None else (shown.queue, shown.phase)
        counted = self._tallied.get(key)
        if counted == entry:
            return
        if counted is not None:
            self._group_tally[counted] -= 1
            if not self._group_tally[counted]:
                del self._group_tally[counted]
        if entry is None:
            del self._tallied[key]
        else:
            self._tallied[key] = entry
            self._group_tally[entry] += 1

    def _group_of(self, pod: objects.Pod) -> objects.PodGroup | None:
        """The group snapshots show for ``pod`` (a real PodGroup shadows a lone pod's own)."""
        return self._shown_group(pod.group)

    def _shown_group(self, key: str) -> objects.PodGroup | None:
        """The group snapshots show under ``key``: the real PodGroup (marked when it has pods
        outside queue admission), else the assumed pod's, else the lone pod's (the precedence
        of the merge in :meth:`view`)."""
        return (
            self._marked.get(key)
            or self._pod_groups.get(key)
            or self._assumed_groups.get(key)
            or self._lone_groups.get(key)
        )

    def replace_pods(self, pods: list[objects.Pod]) -> None:
        """Make the pods exactly ``pods`` (a fresh LIST): pods missing from it were deleted
        while nobody watched. Marks the ``pods`` source listed."""
        with self._lock:
            fresh = {pod.key for pod in pods}
            known = (*self._pods, *self._outside, *self._device_waits)
            for key in [key for key in known if key not in fresh]:
                self._drop_pod(key)
            self._distrusted.clear()
            for pod in pods:
                self._store_pod(self._trusted(pod))
            self._changed()
        self.mark_synced("pods")
        self._wake()

    def delete_pod(self, key: str) -> None:
        with self._lock:
            self._distrusted.pop(key, None)
            self._unreadable.pop(key, None)
            changed = self._drop_pod(key)
        if changed:
            self._wake()

    def upsert_pod_group(self, group: objects.PodGroup) -> None:
        """Store ``group``; the counts and conditions the operator itself writes into its
        status come back through the watch and are stored without waking a cycle (no decision
        reads them), except the times of the admission condition, which bound the group's
        Inqueue reservation (``core.inqueue_bounds``)."""
        with self._lock:
            previous = self._pod_groups.get(group.key)
            if previous == group:
                return
            self._pod_groups[group.key] = group
            written = dataclasses.replace(
                previous or group,
                counts=group.counts,
                status_written=group.status_written,
                conditions=group.conditions,
            )
            if previous is not None and written == group and _marks(previous) == _marks(group):
                return
            self._mark(group.key)
            # A lone pod of the same key now belongs to this group.
            self._classify(group.key)
            self._changed()
        self._wake()

    def delete_pod_group(self, key: str) -> None:
        with self._lock:
            if self._pod_groups.pop(key, None) is None:
                return
            self._mark(key)
            self._classify(key)
            self._changed()
        self._wake()

    def upsert_node(self, node: objects.Node) -> None:
        self._put(self._nodes, node.name, node)

    def delete_node(self, name: str) -> None:
        self._drop(self._nodes, name)

    def upsert_priority_class(self, priority_class: objects.PriorityClass) -> None:
        """PriorityClasses give PodGroups their priority (``spec.priorityClassName``, else the
        global default): the order in which queues' jobs are admitted."""
        self._put(self._priority_classes, priority_class.name, priority_class)

    def delete_priority_class(self, name: str) -> None:
        self._drop(self._priority_classes, name)

    def upsert_declared_minimum(self, uid: str, declared: str | None) -> None:
        """What workload ``uid`` says in ``group-min-member`` (None: nothing): its generated
        PodGroup follows it (``workload_groups.plan_group_resizes``)."""
        self._put(self._declared_minimums, uid, declared)

    def delete_declared_minimum(self, uid: str) -> None:
        with self._lock:
            if self._declared_minimums.pop(uid, "") == "":
                return
            self._changed()
        self._wake()

    def _put(self, table: dict[str, StoredT], key: str, value: StoredT) -> None:
        """Store ``value`` under ``key`` in ``table``; a change is a new version and wakes the
        cycle."""
        with self._lock:
            if key in table and table[key] == value:
                return
            table[key] = value
            self._changed()
        self._wake()

    def _drop(self, table: dict[str, StoredT], key: str) -> None:
        """Forget ``key`` in ``table``; a change is a new version and wakes the cycle."""
        with self._lock:
            if table.pop(key, None) is None:
                return
            self._changed()
        self._wake()

    # Readers and the cycle's bookkeeping.

    def view(self) -> StateView:
        """An immutable snapshot for one cycle, with assumed gate removals applied.

        The dictionaries are copied (objects are frozen and shared), so later writes never show
        through. An assumed pod appears with our gate removed and every other gate kept, which is
        exactly what the cluster will show once the PATCH lands.
        """
        with self._lock:
            pods = dict(self._pods)
            pods.update(self._assumed_view)
            pod_groups = MappingProxyType(dict(self._pod_groups))
            shown_groups = {**self._pod_groups, **self._marked} if self._marked else pod_groups
            snapshot = objects.Snapshot(
                queues=MappingProxyType({name: r.queue for name, r in self._queues.items()}),
                # A pod without a group gets its single-pod group, as Volcano's controller makes.
                pod_groups=MappingProxyType(
                    {**self._lone_groups, **self._assumed_groups, **shown_groups}
                ),
                pods=MappingProxyType(pods),
                nodes=MappingProxyType(dict(self._nodes)),
                priority_classes=MappingProxyType(dict(self._priority_classes)),
                outside=MappingProxyType(self._node_occupancy()),
            )
            return StateView(
                snapshot=snapshot,
                session_snapshot=self._compaction.folded(
                    snapshot, pod_groups=shown_groups, group_of=self._group_of
                ),
                outside=MappingProxyType(dict(self._naming)),
                gated=frozenset(self._gated),
                group_tally=MappingProxyType(dict(self._group_tally)),
                queue_records=MappingProxyType(dict(self._queues)),
                pod_groups=pod_groups,
                assumed=MappingProxyType(dict(self._assumed)),
                version=self._version,
                synced=self._synced,
                unreadable=MappingProxyType(dict(self._unreadable)),
                device_waits=MappingProxyType(
                    {key: (pod.uid, why) for key, (pod, why) in self._device_waits.items()}
                ),
                outgrown=MappingProxyType(dict(self._outgrown)),
                declared_minimums=MappingProxyType(
                    {
                        group.owner.uid: self._declared_minimums[group.owner.uid]
                        for group in self._pod_groups.values()
                        if group.owner is not None and group.owner.uid in self._declared_minimums
                    }
                ),
            )

    def _node_occupancy(self) -> dict[str, objects.Occupancy]:
        """Node -> what pods outside queue admission hold there (the nodes whose pods changed
        since the last call are summed again)."""
        for node in self._dirty_nodes:
            found = self._on_nodes.get(node)
            if found:
                self._occupancy[node] = governing.occupancy(found.values())
            else:
                self._occupancy.pop(node, None)
        self._dirty_nodes.clear()
        return dict(self._occupancy)

    def get_pod(self, key: str) -> objects.Pod | None:
        """The pod as last stored, governed by queue admission or not."""
        with self._lock:
            return self._pods.get(key) or self._outside.get(key)

    def assume_ungated(self, key: str, *, decided_at: float) -> bool:
        """Mark ``key`` as admitted before its gate is removed; False when it cannot be.

        Refused when the pod is gone, already assumed, or does not carry our gate as its only
        gate (we never remove a gate while another controller still holds the pod), or did not
        opt in (the core never admits such a pod: ungated, it would be outside queue admission,
        ``objects.Pod.governed``, while snapshots still showed it in its queue).
        """
        with self._lock:
            pod = self._pods.get(key)
            if pod is None or key in self._assumed or not pod.only_queue_gate:
                return False
            if not pod.reserves:
                return False
            self._assumed[key] = decided_at
            self._assume_view(key, pod)
            self._classify(key)
            self._changed()
            return True

    def forget_ungate(self, key: str, *, wake: bool = True) -> None:
        """Drop an assumption after a failed removal; the next cycle decides the pod again
        (with ``wake=False``, the next periodic one: the cause will not have gone sooner)."""
        with self._lock:
            if not self._unassume(key):
                return
            self._classify(key)
            self._changed()
        if wake:
            self._wake()

    def forget_all_ungates(self) -> None:
        """Drop every assumption (leadership lost: the next leader rebuilds from the cluster)."""
        with self._lock:
            if not self._assumed:
                return
            keys = list(self._assumed)
            self._assumed.clear()
            self._assumed_view.clear()
            self._assumed_groups.clear()
            for key in keys:
                self._classify(key)
            self._changed()

    def swap_explanation(self, key: str, reason: str) -> str | None:
        """Record ``reason`` as the explanation shown for pod ``key``; return the previous one.

        An empty ``reason`` clears it. Pods that are gone are ignored (returns ``reason`` so the
        caller sees no change and writes nothing).
        """
        with self._lock:
            if key not in self._pods and key not in self._device_waits:
                return reason
            previous = self._explained.get(key)
            if reason:
                self._explained[key] = reason
            else:
                self._explained.pop(key, None)
            return previous

    def explanations(self) -> Mapping[str, str]:
        with self._lock:
            return MappingProxyType(dict(self._explained))

    def explanation_of(self, key: str) -> str:
        """The explanation shown for pod ``key`` ("" for none)."""
        with self._lock:
            return self._explained.get(key, "")


def _marks(group: objects.PodGroup) -> tuple[object, object]:
    """What of a group's conditions a decision reads: when it entered Inqueue, and when it
    was released for lack of pods (``core.inqueue_bounds``)."""
    return inqueue_bounds.inqueue_since(group), inqueue_bounds.released_at(group)


def _finished(pod: objects.Pod) -> bool:
    return pod.status in (objects.TaskStatus.SUCCEEDED, objects.TaskStatus.FAILED)


def holds_room(pod: objects.Pod) -> bool:
    """``pod`` counts in its queue's usage: placed (``objects.ALLOCATED_STATUSES``), or admitted
    and reserving its room until it is placed (``objects.Pod.holds_reservation``)."""
    return pod.status in objects.ALLOCATED_STATUSES or pod.holds_reservation


def only_takes_room(before: objects.Pod | None, after: objects.Pod) -> bool:
    """The change of a pod from ``before`` (None: it is new) to ``after`` gives no room back and
    asks for no decision: a pod without our gate that is new, or changed only in its status and
    node without leaving its queue's usage (:func:`holds_room`), and is not unschedulable.
    kube-scheduler binding a pod, the kubelet starting it, and pods created without the gate
    are such changes.

    Such a change can only take room (or move a queue's figures from ``reserved`` to
    ``allocated``), so it cannot let in a pod that was not let in before: deciding again at
    once would only cost a session. Between admission and running a pod makes two or three such
    changes, and with thousands of pods being placed they kept the cycle running without pause.
    Deciding later is always safe: every cycle decides from the view it takes when it runs.
    """
    if after.queue_gated or after.unschedulable:
        return False
    if before is None:
        return True
    return not (holds_room(before) and not holds_room(after)) and objects.same_but_placement(
        before, after
    )


def _decisive(record: QueueRecord) -> tuple[objects.Queue, object]:
    """What of a queue record the session and the state machine read: the queue without its
    written ``allocated`` figure, and the written state."""
    return (
        dataclasses.replace(record.queue, allocated=resources.EMPTY),
        record.status.get("state"),
    )


def _without_queue_gate(pod: objects.Pod) -> objects.Pod:
    """``pod`` as it will be once our gate is removed (every other gate kept)."""
    gates = tuple(gate for gate in pod.scheduling_gates if gate != objects.QUEUE_ALLOCATION_GATE)
    return dataclasses.replace(pod, scheduling_gates=gates)


def _admitted_charge(
    pod: objects.Pod, remembered: resources.Resource | None
) -> resources.Resource | None:
    """What an admitted ``pod``'s own claims were charged at least: the larger, per resource, of
    this operator's last charge (``remembered``) and the pod's admission record; None when
    neither knows (never charged)."""
    recorded = pod.admitted_devices
    if remembered is None or recorded is None:
        return recorded if remembered is None else remembered
    return resources.maximum(remembered, recorded)
