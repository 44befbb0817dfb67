"""The non-capacity plugins: priority, gang, conformance, predicates, nodeorder.

Each reproduces the part of its Volcano namesake the issue asks for; hooks and their dispatch are
described on :class:`frameworks.Plugin`. :func:`build_tiers` turns the configuration's tiers into
plugin instances, reporting unknown plugin names as warnings (Volcano ignores them too).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from queuetree.core import capacity, configs, frameworks, objects, vectors

SYSTEM_CRITICAL_PRIORITY = 2_000_000_000
"""Pods at or above this priority (``system-cluster-critical``) are never evicted."""


class PriorityPlugin(frameworks.Plugin):
    """Higher job and task priority first; preemption only of lower priority (same queue)."""

    name = "priority"

    def job_order_key(self, job: frameworks.Job) -> int:
        return -job.priority

    def task_order_key(self, task: frameworks.Task) -> int:
        return -task.priority

    def preemptable(
        self, preemptor: frameworks.Task, preemptees: list[frameworks.Task]
    ) -> tuple[frameworks.Victims, int]:
        victims = []
        for preemptee in preemptees:
            if preemptee.job is not preemptor.job:
                if preemptee.job.priority < preemptor.job.priority:
                    victims.append(preemptee)
            elif preemptee.priority < preemptor.priority:
                victims.append(preemptee)
        return victims, frameworks.PERMIT

    def job_starving(self, job: frameworks.Job) -> bool:
        return job.ready + job.waiting < len(job.tasks)


class _SameVictims(frameworks.Plugin):
    """A plugin whose vote on victims is the same for reclaim and for preempt:
    :meth:`_evictable` over the candidates (the evictor does not matter)."""

    def _evictable(
        self, evictor: frameworks.Task, candidates: list[frameworks.Task]
    ) -> tuple[frameworks.Victims, int]:
        raise NotImplementedError

    def reclaimable(
        self, reclaimer: frameworks.Task, reclaimees: list[frameworks.Task]
    ) -> tuple[frameworks.Victims, int]:
        return self._evictable(reclaimer, reclaimees)

    def preemptable(
        self, preemptor: frameworks.Task, preemptees: list[frameworks.Task]
    ) -> tuple[frameworks.Victims, int]:
        return self._evictable(preemptor, preemptees)


class GangPlugin(_SameVictims):
    """All-or-nothing: a job runs only when ``minMember`` of its tasks can."""

    name = "gang"

    def job_valid(self, job: frameworks.Job) -> str | None:
        if job.valid < job.min_member:
            return (
                f"Not enough valid tasks for gang-scheduling, valid: {job.valid}, "
                f"min: {job.min_member}"
            )
        return None

    def _evictable(
        self, _: frameworks.Task, candidates: list[frameworks.Task]
    ) -> tuple[frameworks.Victims, int]:
        occupied: dict[str, int] = {}
        victims = []
        for candidate in candidates:
            job = candidate.job
            left = occupied.setdefault(job.key, job.ready)
            if left > job.min_member:
                occupied[job.key] = left - 1
                victims.append(candidate)
        return victims, frameworks.PERMIT

    def job_order_key(self, job: frameworks.Job) -> int:
        # Jobs that are not ready yet go first.
        return 1 if job.is_ready else 0

    def job_ready(self, job: frameworks.Job) -> bool:
        return job.is_ready

    def job_pipelined(self, job: frameworks.Job) -> int:
        return frameworks.PERMIT if job.is_pipelined else frameworks.REJECT

    def job_starving(self, job: frameworks.Job) -> bool:
        return job.is_starving


class ConformancePlugin(_SameVictims):
    """Never evict system-critical pods or pods of ``kube-system``."""

    name = "conformance"

    def _evictable(
        self, _: frameworks.Task, candidates: list[frameworks.Task]
    ) -> tuple[frameworks.Victims, int]:
        victims = [
            c
            for c in candidates
            if c.pod.namespace != "kube-system" and c.priority < SYSTEM_CRITICAL_PRIORITY
        ]
        return victims, frameworks.PERMIT


UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"


class PredicatesPlugin(frameworks.Plugin):
    """Node feasibility: unschedulable nodes, nodeSelector, required node affinity, taints and
    tolerations, and the node's pod count. Resource fit is the action's own first check."""

    name = "predicates"

    def predicate(
        self, task: frameworks.Task, node: frameworks.NodeState, *, for_preemption: bool
    ) -> str | None:
        pod = task.pod
        info = node.node
        if info.unschedulable and not _tolerates(
            pod.tolerations, objects.Taint(key=UNSCHEDULABLE_TAINT, effect="NoSchedule")
        ):
            return "node(s) were unschedulable"
        for key, value in pod.node_selector.items():
            if info.labels.get(key) != value:
                return "node(s) didn't match Pod's node selector"
        if pod.required_node_affinity and not any(
            _term_matches(term, info) for term in pod.required_node_affinity
        ):
            return "node(s) didn't match Pod's node affinity"
        for taint in info.taints:
            if taint.effect in ("NoSchedule", "NoExecute") and not _tolerates(
                pod.tolerations, taint
            ):
                return f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}"
        pods = node_pods_limit(node)
        if not for_preemption and pods is not None and len(node.tasks) + 1 > pods:
            return "node(s) had too many pods"
        return None


def node_pods_limit(node: frameworks.NodeState) -> int | None:
    scalars = node.node.allocatable.scalars
    if not scalars or vectors.PODS not in scalars:
        return None
    return int(scalars[vectors.PODS])


def _tolerates(tolerations: tuple[objects.Toleration, ...], taint: objects.Taint) -> bool:
    for toleration in tolerations:
        if toleration.effect and toleration.effect != taint.effect:
            continue
        if toleration.operator == "Exists":
            if not toleration.key or toleration.key == taint.key:
                return True
        elif toleration.key == taint.key and toleration.value == taint.value:
            return True
    return False


def _term_matches(term: objects.NodeSelectorTerm, node: objects.Node) -> bool:
    if not term.match_expressions and not term.match_fields:
        return False  # an empty term matches nothing (Kubernetes)
    for requirement in term.match_expressions:
        if not _requirement_holds(requirement, node.labels.get(requirement.key)):
            return False
    for requirement in term.match_fields:
        value = node.name if requirement.key == "metadata.name" else None
        if not _requirement_holds(requirement, value):
            return False
    return True


def _requirement_holds(requirement: objects.NodeSelectorRequirement, value: str | None) -> bool:
    operator = requirement.operator
    if operator == "In":
        return value is not None and value in requirement.values
    if operator == "NotIn":
        return value is None or value not in requirement.values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt") and value is not None and requirement.values:
        try:
            have, want = int(value), int(requirement.values[0])
        except ValueError:
            return False
        return have > want if operator == "Gt" else have < want
    return False


class NodeOrderPlugin(frameworks.Plugin):
    """Least-allocated scoring: prefer the node with the most CPU and memory left after placing
    the task (0..100 per dimension, averaged, times ``leastrequested.weight``, default 1)."""

    name = "nodeorder"

    def on_session_open(self, session: frameworks.Session) -> None:
        raw = self.option.arguments.get("leastrequested.weight", 1)
        self.weight = raw if isinstance(raw, int) and not isinstance(raw, bool) else 1

    def node_order(self, task: frameworks.Task, node: frameworks.NodeState) -> float:
        total = 0.0
        for i in (vectors.CPU, vectors.MEMORY):
            capacity_ = node.allocatable[i]
            if capacity_ <= 0:
                continue
            requested = capacity_ - node.idle[i] + task.resreq[i]
            total += max(capacity_ - requested, 0.0) * 100.0 / capacity_
        return self.weight * total / 2.0


PLUGIN_TYPES: Mapping[str, type[frameworks.Plugin]] = MappingProxyType(
    {
        plugin.name: plugin
        for plugin in (
            PriorityPlugin,
            GangPlugin,
            ConformancePlugin,
            PredicatesPlugin,
            capacity.CapacityPlugin,
            NodeOrderPlugin,
        )
    }
)
"""The plugins queuetree implements, by the name a configuration gives them (each class's
``name``), in the order messages list them."""


def build_tiers(
    config: configs.SchedulerConfiguration, warnings: list[str]
) -> list[list[frameworks.Plugin]]:
    """Instantiate the configured plugins, tier by tier; unknown names become warnings."""
    tiers: list[list[frameworks.Plugin]] = []
    for number, tier in enumerate(config.tiers, start=1):
        plugins = []
        for option in tier.plugins:
            factory = PLUGIN_TYPES.get(option.name)
            if factory is None:
                warnings.append(
                    f"tier {number}: plugin {option.name!r} is not supported by queuetree and "
                    f"is ignored (supported: {', '.join(sorted(PLUGIN_TYPES))})"
                )
                continue
            plugins.append(factory(option))
        tiers.append(plugins)
    return tiers
