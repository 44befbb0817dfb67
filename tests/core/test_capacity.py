"""The capacity plugin's admission checks and the comparisons they make, one table each:
comparisons, shares, the reservation rule of an evicted pod, a pods capability, enqueue and its
refusals, scalar resources, the plugin's arguments. (The tree's figures, the orders and reclaim
have tests of their own: test_capacity_tree, test_capacity_order, test_capacity_reclaim.)"""

from __future__ import annotations

from typing import Any, NamedTuple

import pytest

from queuetree.core import configs, objects, sessions, vectors
from tests import builders as b

GPU = "nvidia.com/gpu"
DIMS = vectors.Dims.of([GPU])
G = DIMS.index[GPU]


def vec(cpu: float = 0, memory: float = 0, gpu: float = 0) -> vectors.Vec:
    out = DIMS.zero()
    out[vectors.CPU], out[vectors.MEMORY], out[G] = cpu, memory, gpu
    return out


class RelevantCase(NamedTuple):
    used: Any
    deserved: Any
    keys: Any
    req: Any
    expected: Any


RELEVANT = {
    "a gpu deserved key that is absent is not relevant": RelevantCase(
        used=vec(gpu=2),
        deserved=vec(),
        keys=set(),
        req=vec(gpu=1),
        expected=False,
    ),
    "a cpu deserved below EPS is not relevant": RelevantCase(
        used=vec(cpu=4), deserved=vec(cpu=0), keys=set(), req=vec(cpu=2), expected=False
    ),
    "a gpu deserved key holding 0 is relevant": RelevantCase(
        used=vec(gpu=2), deserved=vec(gpu=0), keys={G}, req=vec(gpu=1), expected=True
    ),
    "a cpu deserved of 0.1 is relevant": RelevantCase(
        used=vec(cpu=4), deserved=vec(cpu=0.1), keys=set(), req=vec(cpu=2), expected=True
    ),
    "over on gpu": RelevantCase(
        used=vec(4, 8192, 2), deserved=vec(2, 8192, 1), keys={G}, req=vec(gpu=1), expected=True
    ),
    "over on cpu and gpu": RelevantCase(
        used=vec(4, 8192, 2),
        deserved=vec(2, 8192, 1),
        keys={G},
        req=vec(cpu=2, gpu=1),
        expected=True,
    ),
    "equal memory is not over": RelevantCase(
        used=vec(4, 8192, 2),
        deserved=vec(2, 8192, 1),
        keys={G},
        req=vec(memory=4096),
        expected=False,
    ),
}


@pytest.mark.parametrize(
    ("used", "deserved", "keys", "req", "expected"), RELEVANT.values(), ids=RELEVANT.keys()
)
def test_greater_on_relevant_dimensions_follows_the_documented_examples(
    used: vectors.Vec, deserved: vectors.Vec, keys: set[int], req: vectors.Vec, expected: bool
) -> None:
    assert (
        vectors.greater_on_relevant(
            used, deserved, deserved_keys=frozenset(keys), req=req, dims=DIMS
        )
        is expected
    )


class SharesCase(NamedTuple):
    deserved: Any
    allocated: Any
    expected: Any


SHARES = {
    "best effort (no deserved) is 1 whatever the usage": SharesCase(
        deserved=vec(), allocated=vec(5000, 5), expected=1.0
    ),
    "nothing allocated is 0": SharesCase(
        deserved=vec(2000, 2 * 2**30), allocated=vec(), expected=0.0
    ),
    "half": SharesCase(deserved=vec(2000, 2 * 2**30), allocated=vec(1000, 2**30), expected=0.5),
    "full": SharesCase(deserved=vec(2000, 2 * 2**30), allocated=vec(2000, 2 * 2**30), expected=1.0),
    "the largest dimension wins": SharesCase(
        deserved=vec(2000, 4 * 2**30), allocated=vec(1000, 3 * 2**30), expected=0.75
    ),
    "over deserved": SharesCase(
        deserved=vec(2000, 2 * 2**30), allocated=vec(3000, 2 * 2**30), expected=1.5
    ),
    "a zero deserved is empty, hence 1": SharesCase(
        deserved=vec(0, 0), allocated=vec(1000, 2**30), expected=1.0
    ),
}


@pytest.mark.parametrize(("deserved", "allocated", "expected"), SHARES.values(), ids=SHARES.keys())
def test_share_is_the_largest_allocated_to_deserved_ratio(
    deserved: vectors.Vec, allocated: vectors.Vec, expected: float
) -> None:
    assert vectors.share(allocated, deserved, DIMS) == expected


class FirstExceedingCase(NamedTuple):
    used: Any
    limit: Any
    dims: Any
    expected: Any


FIRST_EXCEEDING = {
    "fits exactly": FirstExceedingCase(
        used=vec(cpu=2000), limit=vec(cpu=2000), dims=(vectors.CPU,), expected=-1
    ),
    "strict: 0.05 over fails": FirstExceedingCase(
        used=vec(cpu=2000.05), limit=vec(cpu=2000), dims=(vectors.CPU,), expected=vectors.CPU
    ),
    "an unrequested dimension over its limit is ignored": FirstExceedingCase(
        used=vec(cpu=1000, memory=9),
        limit=vec(cpu=2000, memory=1),
        dims=(vectors.CPU,),
        expected=-1,
    ),
    "a missing gpu capability is 0": FirstExceedingCase(
        used=vec(gpu=1000), limit=vec(), dims=(G,), expected=G
    ),
}


@pytest.mark.parametrize(
    ("used", "limit", "dims", "expected"), FIRST_EXCEEDING.values(), ids=FIRST_EXCEEDING.keys()
)
def test_capacity_checks_are_strict_and_only_on_requested_dimensions(
    used: vectors.Vec, limit: vectors.Vec, dims: tuple[int, ...], expected: int
) -> None:
    assert vectors.first_exceeding(used, limit, req_dims=dims) == expected


def test_an_evicted_opted_in_pod_does_not_reserve_its_queue() -> None:
    result = sessions.run_session(
        b.snapshot(
            b.node("n1").allocatable(cpu="1", memory="8Gi"),
            b.queue("owner").deserved(cpu="1"),
            b.queue("borrower"),
            b.pod_group("ns", "victim").queue("borrower").phase(objects.PodGroupPhase.RUNNING),
            b.pod("ns", "victim").group("victim").requests(cpu="1").opted_in().running_on("n1"),
            b.pod_group("ns", "claim").queue("owner").phase(objects.PodGroupPhase.INQUEUE),
            b.pod("ns", "claim").group("claim").requests(cpu="1"),
        ),
        config=b.config(
            [b.plugin("gang", "enableJobStarving", "enableJobPipelined")],
            [b.plugin("predicates"), b.plugin("capacity")],
            actions=("enqueue", "reclaim"),
        ),
        feature_gates=b.GATES_ON,
    )
    # Volcano would reserve the victim's cpu in "borrower" for the rest of the session.
    assert (result.evict, result.queues["borrower"].reserved) == (("ns/victim",), b.res())


def test_allocate_binds_no_more_pods_than_a_pods_capability_allows() -> None:
    result = sessions.run_session(
        b.snapshot(
            b.node("n1").allocatable(cpu="8", memory="8Gi", pods="110"),
            b.queue("root"),
            b.queue("team").capability(pods="2"),
            b.queue("q").parent("team"),
            *(
                item
                for i in range(3)
                for item in (
                    b.pod_group("ns", f"p{i}").queue("q").phase(objects.PodGroupPhase.INQUEUE),
                    b.pod("ns", f"p{i}").group(f"p{i}").requests(cpu="1").created(i),
                )
            ),
        ),
        config=b.config(
            [b.plugin("gang")],
            [b.plugin("predicates"), b.plugin("capacity", hierarchy=True)],
            actions=("enqueue", "allocate"),
        ),
        feature_gates=b.GATES_ON,
    )
    assert (result.bind, result.queues["team"].allocated_pods) == (
        {"ns/p0": "n1", "ns/p1": "n1"},
        2,
    )
    # q inherits team's capability of pods, as it would any other resource's.
    assert result.reasons["ns/p2"] == (
        "queue 'q' has no room for pods: requested 1, used 2 of capability 2"
    )


def test_enqueue_refusal_is_explained_with_the_groups_min_resources() -> None:
    result = sessions.run_session(
        b.snapshot(
            b.node("n1").allocatable(cpu="8", memory="8Gi"),
            b.queue("root"),
            b.queue("q").capability(cpu="2"),
            b.pod_group("ns", "big").queue("q").min_resources(cpu="3"),
            b.pod("ns", "big").group("big").requests(cpu="3"),
        ),
        config=b.config([b.plugin("gang"), b.plugin("capacity", hierarchy=True)]),
        feature_gates=b.GATES_ON,
    )
    assert (dict(result.reasons), dict(result.pod_groups), [e.message for e in result.events]) == (
        {
            "ns/big": "pod group ns/big is not admitted: queue 'q' cannot take the pod group's "
            "minResources on cpu: requested 3, used 0 of capability 2 (allocated plus inqueue "
            "groups)"
        },
        {"ns/big": objects.PodGroupPhase.PENDING},
        ["queue resource quota insufficient: insufficient cpu"],
    )


class PodsEnqueueCase(NamedTuple):
    capability: str
    running: int
    """Pods of an admitted group already running in the queue."""
    gangs: tuple[int, ...]
    """The minMember of each pending gang, oldest first."""
    inqueue: tuple[str, ...]


PODS_ENQUEUE = {
    "a gang that fits the pods left is admitted": PodsEnqueueCase("4", 1, (3,), ("g0",)),
    "a gang larger than the pods left waits": PodsEnqueueCase("4", 2, (3,), ()),
    "a gang larger than the capability waits": PodsEnqueueCase("2", 0, (3,), ()),
    "admitted gangs hold their pods for the next": PodsEnqueueCase("5", 0, (3, 3), ("g0",)),
    "two that fit together are both admitted": PodsEnqueueCase("6", 0, (3, 3), ("g0", "g1")),
}


@pytest.mark.parametrize(
    PodsEnqueueCase._fields, list(PODS_ENQUEUE.values()), ids=list(PODS_ENQUEUE)
)
def test_enqueue_counts_the_pods_a_gang_needs_against_a_pods_capability(
    capability: str, running: int, gangs: tuple[int, ...], inqueue: tuple[str, ...]
) -> None:
    """Issue 35: a gang of more pods than a ``pods`` capability leaves was admitted (Inqueue,
    holding its minResources) and could never run."""
    items: list[Any] = [
        b.node("n1").allocatable(cpu="64", memory="64Gi", pods="110"),
        b.queue("root"),
        b.queue("q").capability(pods=capability),
        b.pod_group("ns", "run").queue("q").phase(objects.PodGroupPhase.RUNNING).min_member(1),
    ]
    items += [
        b.pod("ns", f"run-{i}").group("run").requests(cpu="1").opted_in().running_on("n1")
        for i in range(running)
    ]
    for index, size in enumerate(gangs):
        name = f"g{index}"
        items.append(
            b.pod_group("ns", name).queue("q").min_member(size).min_resources(cpu=str(size))
        )
        items += [
            b.pod("ns", f"{name}-{i}").group(name).requests(cpu="1").admission().created(index)
            for i in range(size)
        ]
    result = sessions.run_session(
        b.snapshot(*items),
        config=b.config(
            [b.plugin("gang"), b.plugin("capacity", hierarchy=True)], actions=("enqueue",)
        ),
        feature_gates=b.GATES_ON,
        admission_only=True,
    )
    admitted = tuple(
        sorted(
            key.split("/")[1]
            for key, phase in result.pod_groups.items()
            if phase is objects.PodGroupPhase.INQUEUE and key != "ns/run"
        )
    )
    assert admitted == inqueue


def test_enqueue_refusal_of_a_lone_pod_speaks_of_the_pod_and_its_requests() -> None:
    # A lone pod has no PodGroup a tenant could look up: its synthetic group's minResources
    # are its own requests, and the reason and the remedy say so.
    lone = b.pod("ns", "lone").requests(cpu="3").gated().opted_in().build()
    result = sessions.run_session(
        b.snapshot(
            b.node("n1").allocatable(cpu="8", memory="8Gi"),
            b.queue("root"),
            b.queue("default").capability(cpu="2"),
            lone,
            objects.single_pod_group(lone, queue="default"),
        ),
        config=b.config(
            [b.plugin("gang"), b.plugin("capacity", hierarchy=True)],
            actions=("enqueue", "allocate"),
        ),
        feature_gates=b.GATES_ON,
    )
    assert (dict(result.reasons), dict(result.remedies)) == (
        {
            "ns/lone": "pod ns/lone is not admitted: queue 'default' cannot take the pod's "
            "requests on cpu: requested 3, used 0 of capability 2 (allocated plus inqueue groups)"
        },
        {
            "ns/lone": "1 more cpu must be free in queue 'default' (pods charged to it finishing "
            "or deleted), or its capability for cpu must be at least 3, for the pod to fit"
        },
    )


def test_ancestor_reclaim_level_must_be_a_non_negative_integer() -> None:
    warnings = []
    for level in (-1, "2"):
        result = sessions.run_session(
            b.snapshot(b.queue("root")),
            config=configs.SchedulerConfiguration(
                actions=(),
                tiers=(
                    configs.Tier(
                        plugins=(
                            b.plugin(
                                "capacity",
                                hierarchy=True,
                                arguments={"ancestorReclaimLevel": level},
                            ),
                        )
                    ),
                ),
            ),
            feature_gates=b.GATES_ON,
        )
        warnings.extend(result.warnings)
    assert warnings == [
        "ancestorReclaimLevel should be non-negative, got -1. Falling back to 0.",
        "capacity plugin: argument ancestorReclaimLevel must be an integer, got '2'; using 0",
    ]


GPU_NODE = b.node("n1").allocatable(cpu="8", memory="8Gi", gpu="4", pods="20")


class GpuCase(NamedTuple):
    queues: Any
    hierarchy: Any
    ungate: Any


GPU_CASES = {
    "flat: a capability of 0 GPUs is set, and caps GPUs at 0": GpuCase(
        queues=(b.queue("q").capability(gpu="0"),),
        hierarchy=False,
        ungate=(),
    ),
    "flat: no capability: the cluster's GPUs": GpuCase(
        queues=(b.queue("q"),), hierarchy=False, ungate=("ns/p",)
    ),
    "hierarchy: a root capability of pods only is empty, hence unlimited": GpuCase(
        queues=(b.queue("root").capability(pods="100"), b.queue("q")),
        hierarchy=True,
        ungate=("ns/p",),
    ),
    "hierarchy: a root capability without GPUs gives no GPUs (kept, spec 7.7)": GpuCase(
        queues=(b.queue("root").capability(cpu="100"), b.queue("q")),
        hierarchy=True,
        ungate=(),
    ),
    "hierarchy: an empty root is unlimited on every resource the nodes have": GpuCase(
        queues=(b.queue("root"), b.queue("q")),
        hierarchy=True,
        ungate=("ns/p",),
    ),
}


@pytest.mark.parametrize(
    ("queues", "hierarchy", "ungate"), GPU_CASES.values(), ids=GPU_CASES.keys()
)
def test_gpu_requests_meet_the_capability_rules_of_scalar_resources(
    queues: tuple[object, ...], hierarchy: bool, ungate: tuple[str, ...]
) -> None:
    result = sessions.run_session(
        b.snapshot(
            GPU_NODE,
            *queues,  # type: ignore[arg-type]
            b.pod_group("ns", "p").queue("q").phase(objects.PodGroupPhase.INQUEUE),
            b.pod("ns", "p").group("p").requests(cpu="1", gpu="1").admission(),
        ),
        config=b.config([b.plugin("gang"), b.plugin("capacity", hierarchy=hierarchy)]),
        feature_gates=b.GATES_ON,
        admission_only=True,
    )
    assert result.ungate == ungate


def _min_group(name: str, *, cpu: str, phase: objects.PodGroupPhase) -> b.PodGroupBuilder:
    return b.pod_group("ns", name).queue("q").min_resources(cpu=cpu).phase(phase)


class EnqueueCase(NamedTuple):
    existing: Any
    phase: Any


ENQUEUE = {
    "inqueue groups count: the second group does not fit": EnqueueCase(
        existing=(
            _min_group("first", cpu="2", phase=objects.PodGroupPhase.INQUEUE),
            b.pod("ns", "first").group("first").requests(cpu="2").admission(),
        ),
        phase=objects.PodGroupPhase.PENDING,
    ),
    "a group held by another gate does not count as inqueue (DeductSchGated)": EnqueueCase(
        existing=(
            _min_group("first", cpu="2", phase=objects.PodGroupPhase.INQUEUE),
            b.pod("ns", "first")
            .group("first")
            .requests(cpu="2")
            .opted_in()
            .gated(objects.QUEUE_ALLOCATION_GATE, "example.com/hold"),
        ),
        phase=objects.PodGroupPhase.INQUEUE,
    ),
    "a running group without minResources is all elastic, cancels its usage (7.18)": EnqueueCase(
        existing=(
            b.pod_group("ns", "first").queue("q").phase(objects.PodGroupPhase.RUNNING),
            b.pod("ns", "first").group("first").requests(cpu="2").running_on("n1"),
        ),
        phase=objects.PodGroupPhase.INQUEUE,
    ),
    "a running group with minResources is not elastic up to them": EnqueueCase(
        existing=(
            _min_group("first", cpu="2", phase=objects.PodGroupPhase.RUNNING),
            b.pod("ns", "first").group("first").requests(cpu="2").admitted_to("q").running_on("n1"),
        ),
        phase=objects.PodGroupPhase.PENDING,
    ),
}


@pytest.mark.parametrize(("existing", "phase"), ENQUEUE.values(), ids=ENQUEUE.keys())
def test_enqueue_counts_allocated_plus_inqueue_minus_elastic(
    existing: tuple[object, ...], phase: objects.PodGroupPhase
) -> None:
    result = sessions.run_session(
        b.snapshot(
            b.node("n1").allocatable(cpu="8", memory="8Gi"),
            b.queue("root"),
            b.queue("q").capability(cpu="3"),
            *existing,  # type: ignore[arg-type]
            _min_group("second", cpu="2", phase=objects.PodGroupPhase.PENDING),
            b.pod("ns", "second").group("second").requests(cpu="2").admission(),
        ),
        config=b.config(
            [b.plugin("gang"), b.plugin("capacity", hierarchy=True)], actions=("enqueue",)
        ),
        feature_gates=b.GATES_ON,
        admission_only=True,
    )
    assert result.pod_groups["ns/second"] == phase
