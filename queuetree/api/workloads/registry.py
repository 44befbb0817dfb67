"""The workload kinds queuetree reads: adding one is a module and one line here."""

from queuetree.api.workloads import jobs, kinds, replicasets, statefulsets

KINDS: tuple[kinds.WorkloadKind, ...] = (jobs.KIND, replicasets.KIND, statefulsets.KIND)
