"""``batch/v1`` Jobs, Indexed ones included: the pods of one Job share one group (an Indexed
Job's completion indexes are its pods' own business)."""

from queuetree.api.workloads import kinds

KIND = kinds.WorkloadKind(api_version="batch/v1", kind="Job", plural="jobs")
