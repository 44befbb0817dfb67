"""``apps/v1`` StatefulSets."""

from queuetree.api.workloads import kinds

KIND = kinds.WorkloadKind(api_version="apps/v1", kind="StatefulSet", plural="statefulsets")
