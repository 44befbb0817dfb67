"""``apps/v1`` ReplicaSets, hence Deployments: the Deployment controller copies the
Deployment's annotations to each ReplicaSet it makes, and each rollout's ReplicaSet is a
workload of its own (its pods' controller), as in Volcano."""

from queuetree.api.workloads import kinds

KIND = kinds.WorkloadKind(api_version="apps/v1", kind="ReplicaSet", plural="replicasets")
