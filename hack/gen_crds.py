"""Generate crds/*.yaml: the Queue and PodGroup CRDs of scheduling.volcano.sh/v1beta1.

The schemas are written here once, as Python data, because the Kubernetes quantity schema
(int-or-string with the quantity pattern) repeats a dozen times and hand-copied YAML drifts.
Run ``.venv/bin/python hack/gen_crds.py`` after editing; ``tests/deploy/test_crds.py`` fails
when the committed files differ from what this script writes.

Compatibility rules (spec-volcano-semantics.md §2, docs/compatibility.md):

- every Volcano field keeps its name, type, default and bounds, so an existing Volcano Queue or
  PodGroup manifest, and a status written by Volcano's own controllers, still validate;
- queuetree's own status fields are additions (``reserved``, ``deserved``, ``realCapability``,
  ``conditions``) and never change the meaning of a Volcano field;
- one deliberate difference: the PodGroup CRD has a ``status`` subresource (Volcano's has none),
  so that the operator writes a group's phase through ``podgroups/status`` and users' spec
  edits can never overwrite it. Clients that update a PodGroup's status through the main
  resource (Volcano's own controllers) would see that change ignored.
"""

from __future__ import annotations

import pathlib
import sys
from typing import Any

import yaml

GROUP = "scheduling.volcano.sh"
VERSION = "v1beta1"

# The pattern kube-apiserver itself publishes for resource.Quantity (k8s.io/apimachinery).
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
DNS1123_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
INT32_MAX = 2**31 - 1

Schema = dict[str, Any]


def quantity_map(description: str) -> Schema:
    """A ``ResourceList``: resource name -> quantity (``2``, ``500m``, ``4Gi``)."""
    return {
        "description": description,
        "type": "object",
        "additionalProperties": {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": True,
        },
    }


def int32(description: str, *, minimum: int | None = None, maximum: int | None = None) -> Schema:
    schema: Schema = {"description": description, "type": "integer", "format": "int32"}
    if minimum is not None:
        schema["minimum"] = minimum
    if maximum is not None:
        schema["maximum"] = maximum
    return schema


def string(description: str, **extra: Any) -> Schema:
    return {"description": description, "type": "string", **extra}


def string_list(description: str) -> Schema:
    return {"description": description, "type": "array", "items": {"type": "string"}}


def node_group_terms(description: str) -> Schema:
    return {
        "description": description,
        "type": "object",
        "properties": {
            "requiredDuringSchedulingIgnoredDuringExecution": string_list(
                "Node groups the queue's pods must (affinity) or must not (anti-affinity) use."
            ),
            "preferredDuringSchedulingIgnoredDuringExecution": string_list(
                "Node groups the queue's pods should (affinity) or should not (anti-affinity) use."
            ),
        },
    }


def conditions(description: str) -> Schema:
    """Standard ``metav1.Condition`` list, one entry per type."""
    return {
        "description": description,
        "type": "array",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
        "items": {
            "type": "object",
            "required": ["type", "status"],
            "properties": {
                "type": string("CamelCase condition type, e.g. Ready or CycleDetected."),
                "status": string("True, False or Unknown.", enum=["True", "False", "Unknown"]),
                "reason": string("CamelCase machine-readable reason of the last transition."),
                "message": string("Human-readable details of the last transition."),
                "lastTransitionTime": string("When the status last changed.", format="date-time"),
                "observedGeneration": {
                    "description": "metadata.generation the condition was computed from.",
                    "type": "integer",
                    "format": "int64",
                    "minimum": 0,
                },
            },
        },
    }


def object_meta_schema(description: str, properties: Schema) -> Schema:
    return {
        "description": description,
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            **properties,
        },
    }


def network_topology() -> Schema:
    return {
        "description": "Network-topology constraint of the group (hyperNode tiers).",
        "type": "object",
        "properties": {
            "mode": string(
                "hard: never cross highestTierAllowed; soft: prefer not to.",
                enum=["hard", "soft"],
                default="hard",
            ),
            "highestTierAllowed": {
                "description": "Highest hyperNode tier the group may span.",
                "type": "integer",
                "minimum": 0,
            },
            "highestTierName": string(
                "Name of the highest tier the group may span (not with highestTierAllowed).",
                maxLength=253,
            ),
        },
    }


def label_selector() -> Schema:
    return {
        "description": "Standard label selector choosing the pods of the sub-group.",
        "type": "object",
        "x-kubernetes-map-type": "atomic",
        "properties": {
            "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}},
            "matchExpressions": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["key", "operator"],
                    "properties": {
                        "key": {"type": "string"},
                        "operator": {"type": "string"},
                        "values": {"type": "array", "items": {"type": "string"}},
                    },
                },
            },
        },
    }


def queue_crd() -> Schema:
    spec = {
        "description": "Desired behaviour of the queue.",
        "type": "object",
        "properties": {
            "weight": int32(
                "Relative weight among sibling queues (proportion plugin).",
                minimum=1,
                maximum=65535,
            )
            | {"default": 1},
            "capability": quantity_map(
                "Hard upper limit of the resources the queue (and its subtree) may use."
            ),
            "reclaimable": {
                "description": "Whether other queues may reclaim resources this queue uses "
                "beyond its deserved share. Unset means true.",
                "type": "boolean",
            },
            "extendClusters": {
                "description": "Clusters the queue's jobs may be dispatched to (multi-cluster; "
                "accepted for compatibility, not used by queuetree).",
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "weight": int32("Relative weight of the cluster."),
                        "capacity": quantity_map("Capacity of the cluster for this queue."),
                    },
                },
            },
            "guarantee": {
                "description": "Resources reserved for this queue: never lent, never reclaimed.",
                "type": "object",
                "properties": {
                    "resource": quantity_map("The amount of cluster resources reserved."),
                },
            },
            "affinity": {
                "description": "Node-group affinity of the queue's pods (accepted for "
                "compatibility, not used by queuetree).",
                "type": "object",
                "properties": {
                    "nodeGroupAffinity": node_group_terms("Node groups to use."),
                    "nodeGroupAntiAffinity": node_group_terms("Node groups to avoid."),
                },
            },
            "type": string("Free-form type of the queue.", maxLength=253),
            "parent": string(
                'Name of the parent queue; empty means "root".',
                maxLength=253,
                pattern=f"^({DNS1123_SUBDOMAIN})?$",
            ),
            "deserved": quantity_map(
                "The share the queue is entitled to: usage above it may be reclaimed by "
                "queues below theirs."
            ),
            "priority": int32(
                "Higher values are scheduled first and reclaimed from later.", minimum=0
            ),
            "dequeueStrategy": string(
                "Order in which pending jobs leave the queue.",
                enum=["fifo", "traverse"],
                default="traverse",
            ),
        },
    }
    status = {
        "description": "Observed state of the queue, written by the operator.",
        "type": "object",
        "properties": {
            # Volcano's fields, unchanged.
            "state": string(
                "Queue state: Open admits new work; Closing and Closed do not.",
                enum=["Open", "Closed", "Closing", "Unknown"],
            ),
            "unknown": int32("Number of Unknown PodGroups in the queue.", minimum=0),
            "pending": int32("Number of Pending PodGroups in the queue.", minimum=0),
            "running": int32("Number of Running PodGroups in the queue.", minimum=0),
            "inqueue": int32("Number of Inqueue PodGroups in the queue.", minimum=0),
            "completed": int32("Number of Completed PodGroups in the queue.", minimum=0),
            "reservation": {
                "description": "Nodes locked for the queue (Volcano reservation).",
                "type": "object",
                "properties": {
                    "nodes": string_list("Locked nodes."),
                    "resource": quantity_map("Idle resources on the locked nodes."),
                },
            },
            "allocated": quantity_map(
                "Resources used by the queue's bound and running pods (subtree for a parent)."
            ),
            # queuetree's additions.
            "reserved": quantity_map(
                "Resources held by pods whose scheduling gate was removed but that are not "
                "bound yet: they count against capability until placed or deleted."
            ),
            "deserved": quantity_map(
                "Effective deserved share used by the last admission cycle (spec.deserved, "
                "at least the guarantee; for root, the sum of its children)."
            ),
            "realCapability": quantity_map(
                "Effective limit used by the last admission cycle: the parent's real "
                "capability minus the siblings' guarantees, plus this queue's guarantee, "
                "capped by capability."
            ),
            "conditions": conditions(
                "Why the queue does or does not admit work (e.g. a cycle or a missing parent)."
            ),
        },
    }
    columns = [
        ("Parent", "string", ".spec.parent", "Parent queue.", 0),
        ("State", "string", ".status.state", "Queue state.", 0),
        (
            "Condition",
            "string",
            '.status.conditions[?(@.type=="Ready")].reason',
            "Reason of the Ready condition: Ready, or why the queue does not admit.",
            0,
        ),
        *figure_columns(),
        ("Pending", "integer", ".status.pending", "Pending pod groups (waiting workloads).", 0),
        ("Weight", "integer", ".spec.weight", "Weight among siblings.", 1),
        ("Age", "date", ".metadata.creationTimestamp", "Time since creation.", 0),
    ]
    return crd(
        plural="queues",
        singular="queue",
        kind="Queue",
        scope="Cluster",
        short_names=["q", "queue-v1beta1"],
        schema=object_meta_schema(
            "Queue: a node of the queue tree, with guarantee <= deserved <= capability.",
            {"spec": spec, "status": status},
        ),
        columns=columns,
    )


FIGURE_RESOURCES = (("CPU", "cpu"), ("Mem", "memory"), ("GPU", "nvidia.com/gpu"))
"""The resources ``kubectl get queues`` shows, column prefix and resource name."""
FIGURES = (
    ("Deserved", "deserved", "Effective deserved", 0),
    ("Allocated", "allocated", "Allocated", 0),
    ("Capability", "realCapability", "Effective limit on", 1),
    ("Reserved", "reserved", "Held by ungated pods not placed yet:", 1),
)
"""The figures per resource: column suffix, status key, description, priority (1: -o wide)."""


def figure_columns() -> list[tuple[str, str, str, str, int]]:
    """Deserved and allocated of each resource by default, capability and reserved with
    ``-o wide``: derived from two tables so that the columns stay in step."""
    columns = []
    for priority in (0, 1):
        for prefix, resource in FIGURE_RESOURCES:
            for suffix, key, text, rank in FIGURES:
                if rank != priority:
                    continue
                # A dot inside a key is escaped in Kubernetes JSONPath (nvidia\.com/gpu).
                path = f".status.{key}.{resource.replace('.', chr(92) + '.')}"
                columns.append((f"{prefix}-{suffix}", "string", path, f"{text} {resource}.", rank))
    return columns


def podgroup_crd() -> Schema:
    spec = {
        "description": "Desired behaviour of the pod group.",
        "type": "object",
        "properties": {
            "minMember": int32(
                "Minimum number of pods that must run together (gang size).", minimum=0
            ),
            "minTaskMember": {
                "description": "Minimum number of pods per task name.",
                "type": "object",
                "additionalProperties": {"type": "integer", "format": "int32"},
            },
            "queue": string(
                "Queue the group is admitted through.",
                default="default",
                maxLength=253,
                pattern=f"^{DNS1123_SUBDOMAIN}$",
            ),
            "priorityClassName": string("PriorityClass of the group.", maxLength=253),
            "minResources": quantity_map(
                "Resources the group needs to start; checked against the queue at enqueue."
            ),
            "networkTopology": network_topology(),
            "subGroupPolicy": {
                "description": "Sub-groups of the gang (accepted for compatibility).",
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "name": string("Name of the sub-group.", maxLength=253),
                        "networkTopology": network_topology(),
                        "subGroupSize": int32("Pods per sub-group.", minimum=1) | {"default": 1},
                        "minSubGroups": int32("Minimum number of sub-groups.", minimum=0)
                        | {"default": 0},
                        "labelSelector": label_selector(),
                        "matchLabelKeys": string_list("Label keys that split pods into sub-groups.")
                        | {"x-kubernetes-list-type": "atomic"},
                    },
                },
            },
        },
    }
    status = {
        "description": "Observed state of the pod group.",
        "type": "object",
        "properties": {
            "phase": string(
                "Pending, Inqueue (admitted), Running, Completed or Unknown.",
                enum=["Pending", "Running", "Unknown", "Inqueue", "Completed"],
            ),
            "conditions": {
                "description": "Scheduling conditions (Unschedulable, Scheduled).",
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "type": {"type": "string"},
                        "status": {"type": "string"},
                        "transitionID": {"type": "string"},
                        "lastTransitionTime": {"type": "string", "format": "date-time"},
                        "reason": {"type": "string"},
                        "message": {"type": "string"},
                    },
                },
            },
            "running": int32("Number of running pods.", minimum=0),
            "succeeded": int32("Number of succeeded pods.", minimum=0),
            "failed": int32("Number of failed pods.", minimum=0),
        },
    }
    columns = [
        ("STATUS", "string", ".status.phase", "Phase of the group.", 0),
        ("minMember", "integer", ".spec.minMember", "Gang size.", 0),
        ("RUNNINGS", "integer", ".status.running", "Running pods.", 0),
        ("AGE", "date", ".metadata.creationTimestamp", "Time since creation.", 0),
        ("QUEUE", "string", ".spec.queue", "Queue of the group.", 1),
        (
            "OWNER",
            "string",
            ".metadata.ownerReferences[0].name",
            "The workload the group is for (a Job, a ReplicaSet, a PyTorchJob, ...).",
            0,
        ),
        (
            "OWNER-KIND",
            "string",
            ".metadata.ownerReferences[0].kind",
            "The kind of the workload the group is for.",
            1,
        ),
    ]
    return crd(
        plural="podgroups",
        singular="podgroup",
        kind="PodGroup",
        scope="Namespaced",
        short_names=["pg", "podgroup-v1beta1"],
        schema=object_meta_schema(
            "PodGroup: pods admitted and scheduled together.",
            {"spec": spec, "status": status},
        ),
        columns=columns,
    )


def crd(
    *,
    plural: str,
    singular: str,
    kind: str,
    scope: str,
    short_names: list[str],
    schema: Schema,
    columns: list[tuple[str, str, str, str, int]],
) -> Schema:
    printer_columns: list[Schema] = []
    for name, type_, path, description, priority in columns:
        column: Schema = {"name": name, "type": type_, "jsonPath": path, "description": description}
        if priority:
            column["priority"] = priority
        printer_columns.append(column)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{plural}.{GROUP}",
            "labels": {"app.kubernetes.io/part-of": "queuetree"},
        },
        "spec": {
            "group": GROUP,
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": singular,
                "shortNames": short_names,
            },
            "scope": scope,
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": printer_columns,
                    "schema": {"openAPIV3Schema": schema},
                }
            ],
        },
    }


HEADER = "# Generated by hack/gen_crds.py: edit that file, then run it. Do not edit by hand.\n"


def render(document: Schema) -> str:
    body = yaml.safe_dump(document, sort_keys=False, width=100, default_flow_style=False)
    return HEADER + "---\n" + body


def get_outputs(root: pathlib.Path) -> list[tuple[pathlib.Path, str]]:
    """Every generated file with its content, for the writer and for the drift test."""
    crds = root / "crds"
    return [
        (crds / f"{GROUP}_queues.yaml", render(queue_crd())),
        (crds / f"{GROUP}_podgroups.yaml", render(podgroup_crd())),
    ]


def main() -> int:
    root = pathlib.Path(__file__).resolve().parent.parent
    for path, text in get_outputs(root):
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(root)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
