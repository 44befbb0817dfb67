"""``/queues/validate``: every rule of spec §4.1, and the checks queuetree adds.

Each case is a cluster (existing queues), a request and the whole expected answer: allowed or
not, the code, the full message, the warnings.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from queuetree.webhooks import settings, views
from tests.webhooks.builders import allowed, answer, cluster, denied, outcome, queue, review

PATH = "/queues/validate"

TEAM = queue(
    "team",
    "root",
    capability={"cpu": "16", "memory": "32Gi"},
    deserved={"cpu": "8", "memory": "16Gi"},
    guarantee={"cpu": "8", "memory": "16Gi"},
)
TEAM_A = queue(
    "a",
    "team",
    deserved={"cpu": "5", "memory": "10Gi"},
    guarantee={"cpu": "5", "memory": "10Gi"},
)
CHAIN = [queue("l1", "root")] + [queue(f"l{i}", f"l{i - 1}") for i in range(2, 6)]


def case(
    existing: list[dict[str, Any]],
    operation: str,
    obj: dict[str, Any] | None,
    expected: dict[str, Any],
    *,
    old: dict[str, Any] | None = None,
    name: str | None = None,
    rules: settings.ReviewSettings | None = None,
    id: str,
) -> Any:
    return pytest.param(existing, operation, obj, old, name, rules, expected, id=id)


FIELD_CASES = [
    case([], "CREATE", queue("a", "root", deserved={"cpu": "1"}), allowed(), id="valid-leaf"),
    case(
        [],
        "CREATE",
        queue("a", capability={"cpu": "-1"}),
        denied(
            'requestBody.spec.capability["cpu"]: Invalid value: "-1": '
            "must be greater than or equal to 0"
        ),
        id="negative-capability",
    ),
    case(
        [],
        "CREATE",
        queue("a", capability={"nvidia.com/gpu": "1.5"}),
        denied(
            'requestBody.spec.capability["nvidia.com/gpu"]: Invalid value: "1500m": '
            "must be an integer"
        ),
        id="fractional-extended-resource-printed-canonically",
    ),
    case(
        [],
        "CREATE",
        queue("a", capability={"pods": "-2.5"}),
        denied(
            '[requestBody.spec.capability["pods"]: Invalid value: "-2500m": '
            "must be greater than or equal to 0, "
            'requestBody.spec.capability["pods"]: Invalid value: "-2500m": must be an integer]'
        ),
        id="negative-and-fractional-pods-both-reported",
    ),
    case(
        [],
        "CREATE",
        queue("a", deserved={"cpu": "2x"}),
        denied(
            'requestBody.spec.deserved["cpu"]: Invalid value: "2x": unknown suffix \'x\' '
            "(expected one of n u m k M G T P E, Ki Mi Gi Ti Pi Ei, or an exponent such as e3)"
        ),
        id="malformed-quantity",
    ),
    case(
        [],
        "CREATE",
        queue("a", deserved={"cpu": "1"}, guarantee={"cpu": "1", "memory": "1Gi"}),
        denied(
            'requestBody.spec.deserved["memory"]: Invalid value: "<nil>": '
            "deserved[memory] must be >= guarantee[memory]=1Gi"
        ),
        id="guarantee-without-deserved",
    ),
    case(
        [],
        "CREATE",
        queue("a", deserved={"cpu": "500m"}, guarantee={"cpu": "1"}),
        denied(
            'requestBody.spec.deserved["cpu"]: Invalid value: "500m": '
            "deserved[cpu]=500m must be >= guarantee[cpu]=1"
        ),
        id="deserved-below-guarantee",
    ),
    case(
        [],
        "CREATE",
        queue("a", capability={"cpu": "2"}, deserved={"cpu": "4", "memory": "8Gi"}),
        denied(
            'requestBody.spec.deserved["cpu"]: Invalid value: "4": '
            "deserved[cpu]=4 must be <= capability[cpu]=2"
        ),
        id="deserved-above-capability-and-a-name-capability-lacks-is-unlimited",
    ),
    case(
        [],
        "CREATE",
        queue("a", capability={"cpu": "2000m"}, deserved={"cpu": "2"}, guarantee={"cpu": "2"}),
        allowed(),
        id="equal-values-in-different-spellings",
    ),
    case(
        [],
        "CREATE",
        queue("a", state="Closing"),
        denied(
            'requestBody.spec.state: Invalid value: "Closing": queue state must be in [Open Closed]'
        ),
        id="user-cannot-write-closing",
    ),
    case(
        [queue("a", state="Closing")],
        "UPDATE",
        queue("a", "root", state="Closing", deserved={"cpu": "1"}),
        allowed(),
        old=queue("a", state="Closing"),
        id="controller-state-kept-on-update",
    ),
    case(
        [],
        "CREATE",
        queue(
            "a",
            capability={"cpu": "-1"},
            deserved={"cpu": "2"},
            guarantee={"cpu": "3"},
            state="Bogus",
        ),
        denied(
            '[requestBody.spec.capability["cpu"]: Invalid value: "-1": must be greater than or '
            'equal to 0, requestBody.spec.deserved["cpu"]: Invalid value: "2": deserved[cpu]=2 '
            "must be >= guarantee[cpu]=3, "
            'requestBody.spec.deserved["cpu"]: Invalid value: "2": deserved[cpu]=2 must be <= '
            "capability[cpu]=-1, "
            'requestBody.spec.state: Invalid value: "Bogus": queue state must be in [Open Closed]]'
        ),
        id="every-problem-listed-in-order",
    ),
]

LEGACY = "volcano.sh/hierarchy"
LEGACY_WEIGHTS = "volcano.sh/hierarchy-weights"

LEGACY_CASES = [
    case(
        [],
        "CREATE",
        queue("a", annotations={LEGACY: "root/a", LEGACY_WEIGHTS: "1/2"}),
        allowed(),
        id="legacy-hierarchy-valid",
    ),
    case(
        [],
        "CREATE",
        queue("a", annotations={LEGACY: "root/a/b", LEGACY_WEIGHTS: "1/2"}),
        denied(
            'requestBody.metadata.annotations["volcano.sh/hierarchy"]: Invalid value: "root/a/b": '
            "volcano.sh/hierarchy must have the same length with volcano.sh/hierarchy-weights"
        ),
        id="legacy-hierarchy-lengths-differ",
    ),
    case(
        [],
        "CREATE",
        queue("a", annotations={LEGACY: "root/a", LEGACY_WEIGHTS: "1/x"}),
        denied(
            'requestBody.metadata.annotations["volcano.sh/hierarchy-weights"]: Invalid value: '
            '"1/x": x in the 1/x is invalid number: strconv.ParseFloat: parsing "x": invalid syntax'
        ),
        id="legacy-weight-not-a-number",
    ),
    case(
        [],
        "CREATE",
        queue("a", annotations={LEGACY: "root/a", LEGACY_WEIGHTS: "1/0"}),
        denied(
            'requestBody.metadata.annotations["volcano.sh/hierarchy-weights"]: Invalid value: '
            '"1/0": 0 in the 1/0 must be larger than 0'
        ),
        id="legacy-weight-zero",
    ),
    case(
        [queue("deep", annotations={LEGACY: "root/a/b", LEGACY_WEIGHTS: "1/1/1"})],
        "CREATE",
        queue("a", annotations={LEGACY: "root/a", LEGACY_WEIGHTS: "1/1"}),
        denied(
            'requestBody.metadata.annotations["volcano.sh/hierarchy"]: Invalid value: "root/a": '
            "root/a is not allowed to be in the sub path of root/a/b of queue deep"
        ),
        id="legacy-path-above-an-existing-one",
    ),
    case(
        [queue("top", annotations={LEGACY: "root/a", LEGACY_WEIGHTS: "1/1"})],
        "CREATE",
        queue("b", annotations={LEGACY: "root/a/b", LEGACY_WEIGHTS: "1/1/1"}),
        allowed(),
        id="legacy-path-below-an-existing-one-is-allowed",
    ),
]

PARENT_CASES = [
    case(
        [],
        "CREATE",
        queue("a", "a"),
        denied('requestBody.spec.parent: Invalid value: "a": queue a cannot use itself as parent'),
        id="self-parent",
    ),
    case(
        [],
        "CREATE",
        queue("a", "ghost"),
        denied(
            'requestBody.spec.parent: Not found: "ghost": parent queue ghost of queue a does not '
            "exist"
        ),
        id="missing-parent",
    ),
    case([], "CREATE", queue("a", ""), allowed(), id="empty-parent-means-root"),
    case(
        [queue("x", "root"), queue("y", "x"), queue("z", "y")],
        "UPDATE",
        queue("x", "z"),
        denied(
            'requestBody.spec.parent: Invalid value: "z": queue x cannot have parent z: '
            "that would create the cycle x -> z -> y -> x"
        ),
        old=queue("x", "root"),
        id="cycle-through-descendants",
    ),
    case(
        CHAIN[:4],
        "CREATE",
        queue("l5", "l4"),
        allowed(),
        id="depth-five-allowed",
    ),
    case(
        CHAIN,
        "CREATE",
        queue("l6", "l5"),
        denied(
            'requestBody.spec.parent: Invalid value: "l5": queue l6 exceeds the maximum allowed '
            "depth of 5"
        ),
        id="depth-six-refused",
    ),
    case(
        CHAIN[:2],
        "CREATE",
        queue("l3", "l2"),
        denied(
            'requestBody.spec.parent: Invalid value: "l2": queue l3 exceeds the maximum allowed '
            "depth of 2"
        ),
        rules=settings.ReviewSettings(max_queue_depth=2),
        id="max-queue-depth-flag",
    ),
    case(
        [*CHAIN[:3], queue("m1", "root"), queue("m2", "m1"), queue("m3", "m2")],
        "UPDATE",
        queue("m1", "l3"),
        denied(
            'requestBody.spec.parent: Invalid value: "l3": moving queue m1 to level 4 puts its '
            "descendant m3 at level 6, beyond the maximum allowed depth of 5"
        ),
        old=queue("m1", "root"),
        id="moving-a-subtree-counts-its-deepest-descendant",
    ),
    case(
        [queue("team", "root", allocated={"pods": "3", "cpu": "3"})],
        "CREATE",
        queue("a", "team"),
        denied(
            "requestBody.spec.parent: Forbidden: queue team cannot be the parent queue of queue "
            "a because it has allocated Pods: 3"
        ),
        id="parent-running-pods-cannot-get-its-first-child",
    ),
    case(
        [queue("team", "root", allocated={"pods": "3"}), queue("b", "team")],
        "CREATE",
        queue("a", "team"),
        allowed(),
        id="parent-with-children-is-not-checked-for-pods",
    ),
]

QUOTA_CASES = [
    case(
        [queue("org", "root", capability={"cpu": "10"}), queue("team", "org")],
        "CREATE",
        queue("leaf", "team", capability={"cpu": "20", "memory": "1Gi"}),
        denied(
            'requestBody.spec.capability["cpu"]: Invalid value: "20": queue leaf '
            "capability[cpu]=20 exceeds its ancestor's capability=10 (queue org)"
        ),
        id="capability-above-nearest-capped-ancestor",
    ),
    case(
        [queue("org", "root", capability={"memory": "32Gi"}), queue("team", "org")],
        "CREATE",
        queue("leaf", "team", capability={"memory": "64Gi"}),
        denied(
            'requestBody.spec.capability["memory"]: Invalid value: "64Gi": queue leaf '
            "capability[memory]=64Gi exceeds its ancestor's capability=32Gi (queue org)"
        ),
        id="memory-printed-as-binary-quantity",
    ),
    case(
        [
            queue("org", "root", capability={"nvidia.com/gpu": "8"}),
            queue("team", "org", capability={"nvidia.com/gpu": "4"}),
        ],
        "CREATE",
        queue("leaf", "team", capability={"nvidia.com/gpu": "6"}),
        denied(
            'requestBody.spec.capability["nvidia.com/gpu"]: Invalid value: "6": queue leaf '
            "capability[nvidia.com/gpu]=6 exceeds its ancestor's capability=4 (queue team)"
        ),
        id="nearest-ancestor-wins-and-gpus-are-whole-numbers",
    ),
    case(
        [TEAM, TEAM_A],
        "CREATE",
        queue("b", "team", deserved={"cpu": "3", "memory": "6Gi"}, guarantee={"cpu": "4"}),
        denied(
            'requestBody.spec.deserved["cpu"]: Invalid value: "3": deserved[cpu]=3 must be >= '
            "guarantee[cpu]=4"
        ),
        id="field-errors-come-before-tree-checks",
    ),
    case(
        [TEAM, TEAM_A],
        "CREATE",
        queue(
            "b",
            "team",
            deserved={"cpu": "4", "memory": "8Gi"},
            guarantee={"cpu": "4", "memory": "8Gi"},
        ),
        denied(
            "[requestBody.spec.guarantee.resource: Forbidden: parent queue team validation "
            "failed: sum of children's guarantee (cpu 9, memory 18Gi) exceeds parent's guarantee "
            "limit (cpu 8, memory 16Gi) (children: a, b), "
            "requestBody.spec.deserved: Forbidden: parent queue team validation failed: sum of "
            "children's deserved (cpu 9, memory 18Gi) exceeds parent's deserved limit "
            "(cpu 8, memory 16Gi) (children: a, b)]"
        ),
        id="sibling-sums-exceed-parent",
    ),
    case(
        [TEAM, TEAM_A, queue("b", "team", deserved={"cpu": "3"})],
        "UPDATE",
        queue("b", "team", deserved={"cpu": "4"}),
        denied(
            "requestBody.spec.deserved: Forbidden: parent queue team validation failed: sum of "
            "children's deserved (cpu 9, memory 10Gi) exceeds parent's deserved limit "
            "(cpu 8, memory 16Gi) (children: a, b)"
        ),
        old=queue("b", "team", deserved={"cpu": "3"}),
        id="an-existing-child-growing-past-its-parent",
    ),
    case(
        [TEAM, TEAM_A],
        "CREATE",
        queue("b", "team", deserved={"cpu": "3", "memory": "6Gi"}),
        allowed(),
        id="sibling-sums-fit",
    ),
    case(
        [queue("team", "root")],
        "CREATE",
        queue("b", "team", deserved={"cpu": "1"}),
        denied(
            "requestBody.spec.deserved: Forbidden: parent queue team validation failed: sum of "
            "children's deserved (cpu 1, memory 0) exceeds parent's deserved limit "
            "(cpu 0, memory 0) (children: b)"
        ),
        id="parent-without-deserved-admits-no-child-deserved",
    ),
    case(
        [queue("big", "root", deserved={"cpu": "100"})],
        "CREATE",
        queue("b", "root", deserved={"cpu": "1000"}),
        allowed(),
        id="direct-children-of-root-get-no-sum-checks",
    ),
    case(
        [TEAM, queue("a", "team", capability={"cpu": "12"})],
        "UPDATE",
        queue(
            "team",
            "root",
            capability={"cpu": "10", "memory": "32Gi"},
            deserved={"cpu": "8", "memory": "16Gi"},
            guarantee={"cpu": "8", "memory": "16Gi"},
        ),
        denied(
            'requestBody.spec.capability["cpu"]: Invalid value: "10": queue team '
            "capability[cpu]=10 is smaller than its descendants' max capability=12 (queue a)"
        ),
        old=TEAM,
        id="parent-capability-below-a-descendant",
    ),
    case(
        [
            TEAM,
            queue("mid", "team"),
            queue("deep", "mid", capability={"cpu": "14"}),
        ],
        "UPDATE",
        queue(
            "team",
            "root",
            capability={"cpu": "12", "memory": "32Gi"},
            deserved={"cpu": "8", "memory": "16Gi"},
            guarantee={"cpu": "8", "memory": "16Gi"},
        ),
        denied(
            'requestBody.spec.capability["cpu"]: Invalid value: "12": queue team '
            "capability[cpu]=12 is smaller than its descendants' max capability=14 (queue deep)"
        ),
        old=TEAM,
        id="parent-capability-below-a-grandchild-through-an-uncapped-child",
    ),
    case(
        [TEAM, TEAM_A, queue("b", "team", deserved={"cpu": "3", "memory": "6Gi"})],
        "UPDATE",
        queue(
            "team",
            "root",
            capability={"cpu": "16", "memory": "32Gi"},
            deserved={"cpu": "6", "memory": "16Gi"},
            guarantee={"cpu": "5", "memory": "10Gi"},
        ),
        denied(
            "requestBody.spec.deserved: Forbidden: queue team validation failed: sum of "
            "children's deserved (cpu 8, memory 16Gi) exceeds parent's deserved limit "
            "(cpu 6, memory 16Gi) (children: a, b)"
        ),
        old=TEAM,
        id="parent-deserved-below-its-children",
    ),
    case(
        [queue("team", "root"), queue("a", "team", deserved={"cpu": "5"})],
        "UPDATE",
        queue("team", "root", annotations={"owner": "ml"}),
        allowed(),
        old=queue("team", "root"),
        id="update-without-quota-change-is-not-rechecked",
    ),
]

ROOT_CASES = [
    case(
        [queue("root", capability={"cpu": "100"})],
        "UPDATE",
        queue("root", capability={"cpu": "200"}),
        denied(
            "requestBody.spec: Forbidden: root queue's resource attributes (capability, "
            "deserved, guarantee) cannot be modified (changed: capability)"
        ),
        old=queue("root", capability={"cpu": "100"}),
        id="root-capability-protected",
    ),
    case(
        [queue("root", capability={"cpu": "100"})],
        "UPDATE",
        queue("root", capability={"cpu": "100000m"}),
        allowed(),
        old=queue("root", capability={"cpu": "100"}),
        id="root-same-values-other-spelling",
    ),
    case(
        [queue("root", capability={"cpu": "100"})],
        "UPDATE",
        queue("root", capability={"cpu": "200"}),
        allowed(),
        old=queue("root", capability={"cpu": "100"}),
        rules=settings.ReviewSettings(enable_root_queue_protection=False),
        id="root-protection-off",
    ),
]

DELETE_CASES = [
    case(
        [queue("default")],
        "DELETE",
        None,
        denied("requestBody.metadata.name: Forbidden: `default` queue can not be deleted"),
        old=queue("default"),
        id="delete-default",
    ),
    case(
        [queue("root")],
        "DELETE",
        None,
        denied("requestBody.metadata.name: Forbidden: `root` queue can not be deleted"),
        name="root",
        id="delete-root-without-old-object",
    ),
    case(
        [TEAM, TEAM_A, queue("b", "team")],
        "DELETE",
        None,
        denied(
            "requestBody.metadata.name: Forbidden: queue team can not be deleted because it has "
            "2 child queues: a, b"
        ),
        old=TEAM,
        id="delete-parent-with-children",
    ),
    case(
        [queue("a", "root", allocated={"pods": "2"})],
        "DELETE",
        None,
        allowed(),
        old=queue("a", "root", allocated={"pods": "2"}),
        rules=settings.ReviewSettings(enable_queue_allocated_pods_check=False),
        id="delete-with-pods-allowed-when-the-check-is-off-as-volcanos-default",
    ),
    case(
        [queue("a", "root", reserved={"cpu": "1", "pods": "3"})],
        "DELETE",
        None,
        denied(
            "requestBody.metadata.name: Forbidden: queue a cannot be deleted because it has "
            "admitted Pods not placed yet: 3"
        ),
        old=queue("a", "root", reserved={"cpu": "1", "pods": "3"}),
        id="delete-with-admitted-pods-not-placed-yet-refused",
    ),
    case(
        [queue("a", "root", allocated={"pods": "0"})],
        "DELETE",
        None,
        allowed(),
        old=queue("a", "root", allocated={"pods": "0"}),
        id="delete-with-no-pods-left",
    ),
    case(
        [queue("a", "root", allocated={"pods": "2"})],
        "DELETE",
        None,
        denied(
            "requestBody.metadata.name: Forbidden: queue a cannot be deleted because it has "
            "allocated Pods: 2"
        ),
        old=queue("a", "root", allocated={"pods": "2"}),
        id="delete-with-pods-refused-by-default",
    ),
    case(
        [queue("a", "root", state="Open")],
        "DELETE",
        None,
        allowed(),
        old=queue("a", "root", state="Open"),
        id="open-queue-can-be-deleted",
    ),
    case(
        [queue("a", "root")],
        "CONNECT",
        queue("a"),
        denied(
            "invalid operation `CONNECT`, expect operation to be `CREATE`, `UPDATE` or `DELETE`",
            code=400,
        ),
        id="unknown-operation",
    ),
]

WARNING_CASES = [
    case(
        [queue("root", capability={"cpu": "100", "memory": "1Ti"})],
        "CREATE",
        queue("gpus", "root", deserved={"nvidia.com/gpu": "4"}),
        allowed(
            warnings=[
                "root queue capability (cpu 100, memory 1Ti) omits nvidia.com/gpu, which nodes "
                "or queues have: every request for it will be refused; add it to root's "
                "capability or leave it empty (unlimited)"
            ]
        ),
        id="root-capability-omitting-a-used-resource",
    ),
    case(
        [],
        "CREATE",
        queue("a", "root", capability={"gpu": "4"}),
        allowed(
            warnings=[
                'spec.capability["gpu"]: the scheduler ignores the resource name "gpu": extended '
                "resources need a domain prefix such as nvidia.com/gpu"
            ]
        ),
        id="unprefixed-resource-name",
    ),
    case(
        [queue("team", "root", state="Closed")],
        "CREATE",
        queue("a", "team"),
        allowed(
            warnings=[
                "parent queue team is Closed: queue a will be closed by the queue controller "
                "until the parent is opened"
            ]
        ),
        id="child-of-a-closed-parent",
    ),
    case(
        [],
        "CREATE",
        queue("frozen", "root", capability={"cpu": "0", "memory": "0"}),
        allowed(
            warnings=[
                f'spec.capability["{name}"]: 0 does not stop queue frozen: a zero {name} '
                f"capability means the parent's (unlimited up to it), as in Volcano; to stop "
                "admitting, close the queue (kubectl queuetree close frozen), or set a small "
                "amount such as 1m"
                for name in ("cpu", "memory")
            ]
        ),
        id="zero-cpu-and-memory-capability-means-the-parents",
    ),
    case(
        [queue("c", "root", capability={"cpu": "4"}, allocated={"cpu": "2", "pods": "2"})],
        "UPDATE",
        queue("c", "root", capability={"cpu": "1"}, allocated={"cpu": "2", "pods": "2"}),
        allowed(
            warnings=[
                "spec.capability: queue c uses cpu 2 now (status.allocated plus "
                "status.reserved), above the new capability (cpu 1): nothing running is "
                "evicted; the queue admits no more pods that request cpu until its use falls "
                "below it (kubectl queuetree pending c lists what waits)"
            ]
        ),
        old=queue("c", "root", capability={"cpu": "4"}, allocated={"cpu": "2", "pods": "2"}),
        id="capability-lowered-below-what-the-queue-uses",
    ),
    case(
        [
            queue(
                "c",
                "root",
                capability={"cpu": "4", "pods": "5"},
                allocated={"cpu": "1", "pods": "2"},
                reserved={"cpu": "1", "pods": "1"},
            )
        ],
        "UPDATE",
        queue("c", "root", capability={"cpu": "2", "pods": "2"}),
        allowed(
            warnings=[
                "spec.capability: queue c uses pods 3 now (status.allocated plus "
                "status.reserved), above the new capability (pods 2): nothing running is "
                "evicted; the queue admits no more pods that request pods until its use "
                "falls below it (kubectl queuetree pending c lists what waits)"
            ]
        ),
        old=queue("c", "root", capability={"cpu": "4", "pods": "5"}),
        id="reserved-pods-count-as-use-and-a-capability-at-use-is-no-warning",
    ),
    case(
        [queue("c", "root", capability={"cpu": "4"}, allocated={"cpu": "2"})],
        "UPDATE",
        queue("c", "root", capability={"cpu": "3"}),
        allowed(),
        old=queue("c", "root", capability={"cpu": "4"}),
        id="capability-lowered-but-above-use",
    ),
    case(
        [
            queue("small", "root", capability={"cpu": "2"}, allocated={"cpu": "2"}),
            queue("sibling", "small", capability={"cpu": "2"}, allocated={"cpu": "2"}),
            queue("big", "root", capability={"cpu": "8"}, allocated={"cpu": "2"}),
            queue("b", "big", capability={"cpu": "2"}, allocated={"cpu": "2"}),
        ],
        "UPDATE",
        queue("b", "small", capability={"cpu": "2"}),
        allowed(
            warnings=[
                "spec.parent: under small, queue small would use cpu 4 with queue b's cpu 2, "
                "above its capability (cpu 2): nothing running is evicted; no queue under "
                "small admits pods that request cpu until its use falls below it"
            ]
        ),
        old=queue("b", "big", capability={"cpu": "2"}),
        id="a-busy-queue-moved-under-a-parent-without-room",
    ),
    case(
        [
            queue("big", "root", capability={"cpu": "8"}, allocated={"cpu": "2"}),
            queue("mid", "big", capability={"cpu": "4"}, allocated={"cpu": "1"}),
            queue("b", "big", capability={"cpu": "2"}, allocated={"cpu": "2"}),
        ],
        "UPDATE",
        queue("b", "mid", capability={"cpu": "2"}),
        allowed(),
        old=queue("b", "big", capability={"cpu": "2"}),
        id="a-busy-queue-moved-within-its-ancestor-counts-it-once",
    ),
    case(
        [],
        "CREATE",
        queue("a", "root", capability={"pods": "10"}, deserved={"cpu": "1", "pods": "5"}),
        allowed(
            warnings=[
                'spec.deserved["pods"]: a deserved number of pods changes nothing: shares and '
                "reclaim compare the resources pods request, and a pod requests no pods; to "
                'limit how many pods run in the queue, set spec.capability["pods"] (a guarantee '
                "of pods keeps them from siblings and from reclaim)"
            ]
        ),
        id="deserved-pods-without-a-guarantee-changes-nothing",
    ),
    case(
        [],
        "CREATE",
        queue(
            "a", "root", capability={"pods": "10"}, deserved={"pods": "5"}, guarantee={"pods": "5"}
        ),
        allowed(),
        id="deserved-pods-covering-a-guarantee-of-pods-is-needed",
    ),
    case(
        [queue("root", capability={"cpu": "1"})],
        "CREATE",
        queue("a", "root", capability={"cpu": "-1", "example.com/fpga": "1"}),
        denied(
            'requestBody.spec.capability["cpu"]: Invalid value: "-1": must be greater than or '
            "equal to 0"
        ),
        id="a-denied-queue-is-not-checked-for-warnings-that-need-it-parsed",
    ),
]


@pytest.mark.parametrize(
    ("existing", "operation", "obj", "old", "name", "rules", "expected"),
    FIELD_CASES
    + LEGACY_CASES
    + PARENT_CASES
    + QUOTA_CASES
    + ROOT_CASES
    + DELETE_CASES
    + WARNING_CASES,
)
def test_queue_validation_answers_with_every_problem(
    existing: list[dict[str, Any]],
    operation: str,
    obj: dict[str, Any] | None,
    old: dict[str, Any] | None,
    name: str | None,
    rules: settings.ReviewSettings | None,
    expected: dict[str, Any],
) -> None:
    body = review(operation, obj, old=old, name=name)
    assert outcome(answer(PATH, body, cluster(*existing), rules)) == expected


def test_a_root_capability_omitting_what_nodes_offer_is_a_warning() -> None:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1"},
        "status": {
            "allocatable": {
                "cpu": "8",
                "memory": "32Gi",
                "pods": "110",
                "nvidia.com/gpu": "4",
                "hugepages-2Mi": "0",
                "ephemeral-storage": "100Gi",
            }
        },
    }
    found = views.node_resource_names(node)
    assert found == ("n1", frozenset({"nvidia.com/gpu", "ephemeral-storage"}))
    view = dataclasses.replace(cluster(), node_resources=found[1])
    root = queue("root", capability={"cpu": "8", "memory": "32Gi"})
    response = answer(PATH, review("CREATE", root), view)
    assert outcome(response) == allowed(
        warnings=[
            "root queue capability (cpu 8, memory 32Gi) omits ephemeral-storage, nvidia.com/gpu, "
            "which nodes or queues have: every request for them will be refused; add them to "
            "root's capability or leave it empty (unlimited)"
        ]
    )


@pytest.mark.parametrize(
    ("capability", "existing", "expected"),
    [
        pytest.param(
            {"nvidia.com/gpus": "1"},
            [],
            [
                'spec.capability["nvidia.com/gpus"]: no node offers nvidia.com/gpus and no '
                "other queue names it (did you mean nvidia.com/gpu?): pods request resources "
                "by their exact name, so a quota on a misspelt one limits nothing"
            ],
            id="a-misspelt-extended-resource",
        ),
        pytest.param(
            {"example.com/fpga": "1"},
            [queue("other", "root", capability={"example.com/fpga": "2"})],
            [],
            id="a-resource-another-queue-names-is-no-typo",
        ),
        pytest.param({"nvidia.com/gpu": "1"}, [], [], id="a-resource-nodes-offer"),
        pytest.param(
            {"example.com/fpga": "1"},
            [],
            [
                'spec.capability["example.com/fpga"]: no node offers example.com/fpga and no '
                "other queue names it: pods request resources by their exact name, so a quota "
                "on a misspelt one limits nothing"
            ],
            id="any-resource-no-node-offers",
        ),
    ],
)
def test_a_resource_no_node_offers_is_a_warning_with_the_closest_names(
    capability: dict[str, str], existing: list[dict[str, Any]], expected: list[str]
) -> None:
    view = dataclasses.replace(
        cluster(*existing), node_resources=frozenset({"nvidia.com/gpu", "ephemeral-storage"})
    )
    response = answer(PATH, review("CREATE", queue("a", "root", capability=capability)), view)
    assert outcome(response) == allowed(warnings=expected)


@pytest.mark.parametrize(
    ("capability", "expected"),
    [
        pytest.param(
            {"nvidia.com/gpus": "1"},
            [
                'spec.capability["nvidia.com/gpus"]: no other queue names nvidia.com/gpus (did '
                "you mean nvidia.com/gpu?): pods request resources by their exact name, so a "
                "quota on a misspelt one limits nothing"
            ],
            id="close-to-a-well-known-device",
        ),
        pytest.param({"example.com/fpga": "1"}, [], id="an-unknown-device-is-not-a-typo"),
    ],
)
def test_without_nodes_only_names_close_to_known_ones_are_warned(
    capability: dict[str, str], expected: list[str]
) -> None:
    response = answer(PATH, review("CREATE", queue("a", "root", capability=capability)), cluster())
    assert outcome(response) == allowed(warnings=expected)


OPERATOR = settings.OPERATOR_USERNAME
BUSY = {"state": "Open", "allocated": {"cpu": "2", "pods": "2"}}


@pytest.mark.parametrize(
    ("user", "after", "expected"),
    [
        pytest.param(
            "kubernetes-admin", {**BUSY, "state": "Closed"}, allowed(), id="a-person-closes-it"
        ),
        pytest.param(
            "kubernetes-admin",
            {**BUSY, "allocated": {"cpu": "2", "pods": "0"}},
            denied(
                "requestBody.status.allocated: Forbidden: status.allocated of queue a is written "
                f"by the queuetree operator ({OPERATOR}) only (it counts the queue's pods, and "
                "deleting a queue is refused while they run); a person writes only "
                "status.state, to close or open the queue (kubectl queuetree close a)"
            ),
            id="a-person-zeroes-the-pods-it-counts",
        ),
        pytest.param(OPERATOR, {**BUSY, "allocated": {"pods": "0"}}, allowed(), id="the-operator"),
    ],
)
def test_only_the_operator_writes_a_queues_figures(
    user: str, after: dict[str, Any], expected: dict[str, Any]
) -> None:
    body = review(
        "UPDATE",
        {**queue("a", "root"), "status": after},
        old={**queue("a", "root"), "status": BUSY},
    )
    body["request"]["subResource"] = "status"
    body["request"]["userInfo"]["username"] = user
    assert outcome(answer(PATH, body, cluster(queue("a", "root")))) == expected
