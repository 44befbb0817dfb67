"""The fast path of ``parse_pod`` gives exactly what the checked path gives, or declines.

``parse_pod`` first reads a pod through a fast path that handles only well-formed input and
declines (``_Unusual``) everything else; the checked path (``_parse_pod_checked``, the reference)
then reads it and names every problem. These properties generate pods, well formed and malformed
at every level, and require: whenever the fast path returns a pod, the checked path returns an
equal pod with no problem and no warning; ``parse_pod`` always ends exactly as the checked path
(the same pod, or the same error message and problems, and the same warnings); and neither
changes its input. Besides the generated pods, every field of a few rich pods is replaced in turn
by each of a list of odd values (or removed), so that no field depends on luck.
"""

from __future__ import annotations

import copy
import datetime
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

import hypothesis
import pytest
from hypothesis import strategies as st

from queuetree.api import pod_fast_path, pod_manifests, readers
from queuetree.core import objects, resources
from tests import properties

GATE = "scheduling.volcano.sh/queue-allocation-gate"
ABSENT = object()
"""A drawn field value meaning: leave the field out."""


class _Text(str):
    """A str subclass: the checked path reads it as a string, the fast path must decline it."""


class _Number(int):
    """An int subclass, for the same reason."""


# -- strategies -----------------------------------------------------------------------------

ODD_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-3, max_value=3),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=3),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
    st.just(datetime.date(2026, 1, 2)),
)
"""Values of the wrong type for most fields."""


def variant(value: Any) -> Any:
    """A look-alike of ``value`` of another type that the checked path may accept."""
    if isinstance(value, str):
        return _Text(value)
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return _Number(value)
    if isinstance(value, dict):
        return MappingProxyType(value)
    if isinstance(value, list):
        return tuple(value)
    return value


@st.composite
def field(draw: st.DrawFn, good: st.SearchStrategy[Any], *, odd: bool) -> Any:
    """Mostly a good value; sometimes absent; when ``odd``, sometimes a wrong or odd one."""
    choices = ["good"] * 8 + ["absent"] * 2 + (["odd", "variant"] if odd else [])
    choice = draw(st.sampled_from(choices))
    if choice == "absent":
        return ABSENT
    if choice == "odd":
        return draw(ODD_VALUES)
    value = draw(good)
    return variant(value) if choice == "variant" else value


@st.composite
def objects_of(
    draw: st.DrawFn, fields: Mapping[str, st.SearchStrategy[Any]], *, odd: bool
) -> dict[str, Any]:
    """A dict of the drawn fields (absent ones left out)."""
    drawn = {name: draw(field(strategy, odd=odd)) for name, strategy in fields.items()}
    return {name: value for name, value in drawn.items() if value is not ABSENT}


def items(strategy: st.SearchStrategy[Any], *, odd: bool) -> st.SearchStrategy[list[Any]]:
    """A short list; when ``odd``, items may be odd values too (None, a string, ...)."""
    item = st.one_of(strategy, ODD_VALUES) if odd else strategy
    return st.lists(item, max_size=3)


GOOD_QUANTITIES = ["10m", "1", "0.5", "16Mi", "2Gi", "1e3", "+1", "0", "100", "1.5k", "3"]
BAD_QUANTITIES = ["1GB", "one", "", "-1", "--1", " 1", "Gi", ".", "1e", "-500m"]
RESOURCE_NAMES = [
    "cpu",
    "memory",
    "nvidia.com/gpu",
    "pods",
    "ephemeral-storage",
    "hugepages-2Mi",
    "count/pods",
    "rdma",
]


def quantities(*, odd: bool) -> st.SearchStrategy[Any]:
    good = st.sampled_from(GOOD_QUANTITIES)
    if not odd:
        return good
    return st.one_of(
        good,
        good,
        good,
        st.sampled_from(BAD_QUANTITIES),
        st.integers(min_value=-2, max_value=2**62),
        st.floats(allow_nan=True, allow_infinity=True),
        st.just(2**60),
        st.just(2.0**60),
        st.booleans(),
        st.none(),
        st.lists(st.integers(), max_size=1),
    )


def resource_lists(*, odd: bool) -> st.SearchStrategy[dict[Any, Any]]:
    names: st.SearchStrategy[Any] = st.sampled_from(RESOURCE_NAMES)
    if odd:
        names = st.one_of(names, names, names, st.integers(min_value=0, max_value=2))
    return st.dictionaries(names, quantities(odd=odd), max_size=3)


@st.composite
def containers(draw: st.DrawFn, *, odd: bool, init: bool = False) -> dict[str, Any]:
    resources_fields = {"requests": resource_lists(odd=odd), "limits": resource_lists(odd=odd)}
    fields: dict[str, st.SearchStrategy[Any]] = {
        "name": st.sampled_from(["main", "side"]),
        "image": st.just("busybox"),
        "resources": objects_of(resources_fields, odd=odd),
    }
    if init:
        fields["restartPolicy"] = st.sampled_from(["Always", "Never", "OnFailure", ""])
    return draw(objects_of(fields, odd=odd))


@st.composite
def requirements(draw: st.DrawFn, *, odd: bool) -> dict[str, Any]:
    values = st.lists(st.sampled_from(["a", "b", ""]), max_size=2)
    if odd:
        values = st.lists(st.one_of(st.sampled_from(["a", "b"]), st.none(), st.integers()))
    fields = {
        "key": st.sampled_from(["zone", "metadata.name"]),
        "operator": st.sampled_from(["In", "NotIn", "Exists"]),
        "values": values,
    }
    return draw(objects_of(fields, odd=odd))


@st.composite
def affinities(draw: st.DrawFn, *, odd: bool) -> dict[str, Any]:
    term_fields = {
        "matchExpressions": items(requirements(odd=odd), odd=odd),
        "matchFields": items(requirements(odd=odd), odd=odd),
    }
    terms = items(objects_of(term_fields, odd=odd), odd=odd)
    required = objects_of({"nodeSelectorTerms": terms}, odd=odd)
    node_affinity = objects_of(
        {"requiredDuringSchedulingIgnoredDuringExecution": required}, odd=odd
    )
    return draw(objects_of({"nodeAffinity": node_affinity}, odd=odd))


@st.composite
def tolerations(draw: st.DrawFn, *, odd: bool) -> dict[str, Any]:
    fields = {
        "key": st.sampled_from(["node.kubernetes.io/not-ready", "gpu", ""]),
        "operator": st.sampled_from(["Exists", "Equal", ""]),
        "value": st.sampled_from(["ml", ""]),
        "effect": st.sampled_from(["NoSchedule", "NoExecute", ""]),
        "tolerationSeconds": st.just(300),
    }
    return draw(objects_of(fields, odd=odd))


@st.composite
def conditions(draw: st.DrawFn, *, odd: bool) -> dict[str, Any]:
    fields = {
        "type": st.sampled_from(["PodScheduled", "Ready"]),
        "status": st.sampled_from(["False", "True"]),
        "reason": st.sampled_from(["Unschedulable", "SchedulingGated"]),
        "message": st.just("why"),
    }
    return draw(objects_of(fields, odd=odd))


def string_maps(keys: list[str], values: list[str], *, odd: bool) -> st.SearchStrategy[Any]:
    value: st.SearchStrategy[Any] = st.sampled_from(values)
    key: st.SearchStrategy[Any] = st.sampled_from(keys)
    if odd:
        value = st.one_of(value, value, value, st.none(), st.booleans(), st.integers())
        key = st.one_of(key, key, key, st.integers(min_value=0, max_value=2))
    return st.dictionaries(key, value, max_size=4)


TIMES: list[Any] = [
    "2026-11-30T12:00:00Z",
    "2026-11-30T12:00:00+02:00",
    "2026-11-30T12:00:00",
    datetime.datetime(2026, 1, 2, 3, 4, 5),
    datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC),
]
ODD_TIMES = ["yesterday", "2026-13-01T00:00:00Z", ""]
ANNOTATIONS = [
    objects.GROUP_NAME_ANNOTATION,
    objects.QUEUE_NAME_ANNOTATION,
    objects.PREEMPTABLE_KEY,
    objects.TASK_PRIORITY_ANNOTATION,
    GATE,
]
ANNOTATION_VALUES = ["true", "false", "T", "yes", "42", "-2147483649", " 7", "1_0", "team", ""]


@st.composite
def pod_shapes(draw: st.DrawFn, *, odd: bool) -> dict[str, Any]:
    times = st.sampled_from(TIMES + (ODD_TIMES if odd else []))
    metadata = {
        "name": st.sampled_from(["p1", "trainer-0", ""] if odd else ["p1", "trainer-0"]),
        "namespace": st.sampled_from(["ns1", ""]),
        "uid": st.sampled_from(["0b8f3c1e", ""]),
        "resourceVersion": st.just("48213"),
        "creationTimestamp": times,
        "deletionTimestamp": times,
        "labels": string_maps(["app", objects.PREEMPTABLE_KEY], ANNOTATION_VALUES, odd=odd),
        "annotations": string_maps(ANNOTATIONS, ANNOTATION_VALUES, odd=odd),
        "managedFields": st.just([{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]),
    }
    spec = {
        "containers": items(containers(odd=odd), odd=odd),
        "initContainers": items(containers(odd=odd, init=True), odd=odd),
        "overhead": resource_lists(odd=odd),
        "resources": objects_of(
            {"requests": resource_lists(odd=odd), "limits": resource_lists(odd=odd)}, odd=odd
        ),
        "nodeName": st.sampled_from(["node-1", ""]),
        "schedulerName": st.sampled_from(["volcano", ""]),
        "schedulingGroup": objects_of({"podGroupName": st.sampled_from(["gang", ""])}, odd=odd),
        "priority": st.one_of(st.integers(min_value=-(2**40), max_value=2**40)),
        "priorityClassName": st.sampled_from(["high", "missing", ""]),
        "preemptionPolicy": st.sampled_from(["Never", ""]),
        "schedulingGates": items(
            st.fixed_dictionaries({"name": st.sampled_from([GATE, "x"])}), odd=odd
        ),
        "nodeSelector": string_maps(["gpu", "zone"], ["a100", "a"], odd=odd),
        "affinity": affinities(odd=odd),
        "tolerations": items(tolerations(odd=odd), odd=odd),
        "restartPolicy": st.just("Always"),
    }
    status = {
        "phase": st.sampled_from(["Pending", "Running", "Succeeded", "Failed", "Unknown", ""]),
        "conditions": items(conditions(odd=odd), odd=odd),
        "qosClass": st.just("Burstable"),
    }
    top = {
        "apiVersion": st.sampled_from(["v1", "", "apps/v1"] if odd else ["v1"]),
        "kind": st.sampled_from(["Pod", "", "Node"] if odd else ["Pod"]),
        "metadata": objects_of(metadata, odd=odd),
        "spec": objects_of(spec, odd=odd),
        "status": objects_of(status, odd=odd),
    }
    manifest = draw(objects_of(top, odd=odd))
    if not odd:  # well formed: a pod always has its name and spec
        manifest.setdefault("metadata", {}).setdefault("name", "p1")
        manifest.setdefault("spec", {})
    return dict(manifest)


@st.composite
def mutated_pod_manifests(draw: st.DrawFn) -> dict[str, Any]:
    """A well-formed pod with one value, anywhere in it, replaced by an odd one or removed:
    the inputs closest to the line between what the fast path takes and what it declines."""
    manifest = copy.deepcopy(draw(pod_shapes(odd=False)))
    places: list[tuple[Any, Any]] = []

    def collect(value: Any) -> None:
        keys = value.keys() if isinstance(value, dict) else range(len(value))
        for key in keys:
            places.append((value, key))
            if isinstance(value[key], dict | list):
                collect(value[key])

    collect(manifest)
    parent, key = draw(st.sampled_from(places))
    change = draw(st.sampled_from(["odd", "variant", "remove"]))
    if change == "remove" and isinstance(parent, dict):
        del parent[key]
    elif change == "variant":
        parent[key] = variant(parent[key])
    else:
        parent[key] = draw(ODD_VALUES)
    return manifest


CLASSES = {
    "high": objects.PriorityClass(name="high", value=1000),
    "everyday": objects.PriorityClass(name="everyday", value=10, global_default=True),
}
priority_class_sets = st.sampled_from([None, {}, CLASSES])


# -- properties -----------------------------------------------------------------------------

Outcome = tuple[Any, ...]


def outcome(
    parse: Callable[..., objects.Pod],
    manifest: Any,
    classes: Mapping[str, objects.PriorityClass] | None,
) -> Outcome:
    """How a parse ended: the pod or the error (message and problems), with the warnings."""
    warnings: list[str] = []
    try:
        pod = parse(
            manifest, origin="pods.yaml#0", priority_classes=classes, on_warning=warnings.append
        )
    except readers.ManifestError as error:
        return ("error", str(error), error.problems, warnings)
    except Exception as error:  # the same unexpected failure is an equal outcome too
        return ("raised", type(error), str(error), warnings)
    return ("pod", pod, warnings)


def fast(manifest: Any, classes: Mapping[str, objects.PriorityClass] | None) -> objects.Pod | None:
    try:
        return pod_fast_path.parse_pod_fast(manifest, priority_classes=classes)
    except pod_fast_path.Unusual:
        return None


def check_equivalence(manifest: Any, classes: Mapping[str, objects.PriorityClass] | None) -> bool:
    """Assert the properties of the module docstring; True when the fast path took the pod."""
    before = repr(manifest)
    reference = outcome(pod_manifests.parse_pod_checked, manifest, classes)
    taken = fast(manifest, classes)
    if taken is not None:
        assert reference == ("pod", taken, [])
    assert outcome(pod_manifests.parse_pod, manifest, classes) == reference
    assert repr(manifest) == before
    return taken is not None


@hypothesis.settings(max_examples=properties.examples(200))
@hypothesis.given(manifest=pod_shapes(odd=False), classes=priority_class_sets)
def test_a_well_formed_pod_parses_the_same_by_both_paths(
    manifest: dict[str, Any], classes: Mapping[str, objects.PriorityClass] | None
) -> None:
    taken = check_equivalence(manifest, classes)
    hypothesis.event("fast path" if taken else "checked path")


@hypothesis.settings(max_examples=properties.examples(300))
@hypothesis.given(manifest=mutated_pod_manifests(), classes=priority_class_sets)
def test_a_pod_with_one_odd_value_ends_as_the_checked_path_ends(
    manifest: dict[str, Any], classes: Mapping[str, objects.PriorityClass] | None
) -> None:
    taken = check_equivalence(manifest, classes)
    hypothesis.event("fast path" if taken else "checked path")


@hypothesis.settings(max_examples=properties.examples(150))
@hypothesis.given(manifest=pod_shapes(odd=True), classes=priority_class_sets)
def test_a_malformed_pod_ends_as_the_checked_path_ends(
    manifest: dict[str, Any], classes: Mapping[str, objects.PriorityClass] | None
) -> None:
    taken = check_equivalence(manifest, classes)
    hypothesis.event("fast path" if taken else "checked path")


@hypothesis.settings(max_examples=properties.examples(60))
@hypothesis.given(manifest=ODD_VALUES | pod_shapes(odd=True).map(MappingProxyType))
def test_a_manifest_that_is_not_a_dict_ends_as_the_checked_path_ends(manifest: Any) -> None:
    check_equivalence(manifest, None)


# -- the fast path is taken -----------------------------------------------------------------


def stored_container(name: str, requests: dict[str, str], limits: dict[str, str]) -> dict[str, Any]:
    return {
        "name": name,
        "image": "registry.example.com/trainer:1.4",
        "imagePullPolicy": "IfNotPresent",
        "resources": {"requests": requests, "limits": limits},
    }


def stored_pod(**spec: Any) -> dict[str, Any]:
    """A gated pod as the API server stores it (server metadata, defaults, status)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "trainer-0",
            "namespace": "ml",
            "uid": "0b8f3c1e",
            "resourceVersion": "48213",
            "creationTimestamp": "2026-11-30T12:00:00Z",
            "labels": {"app": "trainer"},
            "annotations": {GATE: "true", objects.QUEUE_NAME_ANNOTATION: "leaf-3"},
            "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}],
        },
        "spec": {
            "schedulingGates": [{"name": GATE}],
            "containers": [
                stored_container("main", {"cpu": "500m", "memory": "1Gi"}, {"cpu": "1"})
            ],
            "schedulerName": "default-scheduler",
            "schedulingGroup": {"podGroupName": "gang"},
            "preemptionPolicy": "PreemptLowerPriority",
            "priority": 0,
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}
            ],
            **spec,
        },
        "status": {
            "phase": "Pending",
            "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}
            ],
        },
    }


GI = 2**30


class WellFormedCase(NamedTuple):
    manifest: Any
    resreq: Any


WELL_FORMED = {
    "the operator benchmark's pod": WellFormedCase(
        manifest={
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "pod-1", "annotations": {GATE: "true"}},
            "spec": {
                "schedulingGates": [{"name": GATE}],
                "containers": [{"name": "main", "resources": {"requests": {"cpu": "10m"}}}],
            },
        },
        resreq=resources.Resource(10, 0, {}),
    ),
    "a stored pod": WellFormedCase(
        manifest=stored_pod(),
        resreq=resources.Resource(500, GI, {}),
    ),
    "a stored pod with a GPU sidecar, an init container, overhead, node affinity": WellFormedCase(
        manifest=stored_pod(
            containers=[
                stored_container("main", {"cpu": "4", "memory": "16Gi"}, {"nvidia.com/gpu": "1"}),
            ],
            initContainers=[
                stored_container("fetch", {"cpu": "6"}, {}),
                {**stored_container("proxy", {"cpu": "100m"}, {}), "restartPolicy": "Always"},
            ],
            overhead={"memory": "128Mi"},
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "z", "operator": "In", "values": ["a"]}]}
                        ]
                    }
                }
            },
        ),
        resreq=resources.Resource(6000, 16 * GI + 128 * 2**20, {"nvidia.com/gpu": 1000}),
    ),
    "a stored pod with pod-level requests and limits": WellFormedCase(
        manifest=stored_pod(
            containers=[{"name": "main", "image": "busybox"}],
            resources={"requests": {"cpu": "20"}, "limits": {"cpu": "20", "memory": "50Gi"}},
        ),
        resreq=resources.Resource(20_000, 50 * GI, {}),
    ),
}


@pytest.mark.parametrize(("manifest", "resreq"), WELL_FORMED.values(), ids=WELL_FORMED.keys())
def test_the_fast_path_takes_a_well_formed_pod_and_reads_it_as_the_checked_path(
    manifest: dict[str, Any], resreq: resources.Resource
) -> None:
    taken = fast(manifest, None)
    assert taken is not None
    assert (taken, taken.resreq) == (pod_manifests.parse_pod_checked(manifest), resreq)


class QuantityOrdersCase(NamedTuple):
    first: Any
    second: Any


QUANTITY_ORDERS = {
    "true after 1": QuantityOrdersCase(first={"cpu": 1}, second={"cpu": True}),
    "1 after true": QuantityOrdersCase(first={"cpu": True}, second={"cpu": 1}),
    "2**60 after 2.0**60": QuantityOrdersCase(first={"memory": 2.0**60}, second={"memory": 2**60}),
    "2.0**60 after 2**60": QuantityOrdersCase(first={"memory": 2**60}, second={"memory": 2.0**60}),
}


@pytest.mark.parametrize(("first", "second"), QUANTITY_ORDERS.values(), ids=QUANTITY_ORDERS.keys())
def test_a_quantity_reads_the_same_whatever_equal_number_was_read_before(
    first: dict[str, Any], second: dict[str, Any]
) -> None:
    def parse(requests: dict[str, Any]) -> Outcome:
        manifest = stored_pod(containers=[{"name": "c", "resources": {"requests": requests}}])
        return outcome(pod_manifests.parse_pod, manifest, None)

    alone = parse(second)
    readers._resource_from_items.cache_clear()
    pod_fast_path._well_formed_resource.cache_clear()
    parse(first)
    assert parse(second) == alone


# -- every field of rich pods, replaced by every odd value ----------------------------------

REPLACEMENTS: list[Callable[[Any], Any]] = [
    lambda _: None,
    lambda _: True,
    lambda _: False,
    lambda _: 0,
    lambda _: 1,
    lambda _: -1,
    lambda _: 2.5,
    lambda _: float("nan"),
    lambda _: "",
    lambda _: "x",
    lambda _: "-1",
    lambda _: [],
    lambda _: [None],
    lambda _: {},
    lambda _: {"a": 1},
    lambda _: datetime.date(2026, 1, 2),
    variant,
    lambda value: [*value, None] if isinstance(value, list) else value,
    lambda value: [*value, "x"] if isinstance(value, list) else value,
    lambda value: {**value, "x": None} if isinstance(value, dict) else value,
]
REMOVE = object()


def rich_pod(*, annotations: dict[str, str], spec: dict[str, Any]) -> dict[str, Any]:
    """A stored pod with every field ``parse_pod`` reads."""
    manifest = stored_pod(
        containers=[
            stored_container("main", {"cpu": "1", "memory": "1Gi"}, {"memory": "2Gi", "pods": "1"}),
            {"name": "none", "resources": {}},
        ],
        initContainers=[
            {**stored_container("proxy", {"cpu": "100m"}, {"cpu": "1"}), "restartPolicy": "Always"},
            {
                **stored_container("fetch", {"cpu": "2"}, {"memory": "1Gi"}),
                "restartPolicy": "Never",
            },
        ],
        overhead={"cpu": "10m", "memory": "1Mi"},
        nodeName="node-1",
        nodeSelector={"zone": "a"},
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [{"key": "z", "operator": "In", "values": ["a"]}],
                            "matchFields": [
                                {"key": "metadata.name", "operator": "NotIn", "values": ["n"]}
                            ],
                        }
                    ]
                }
            }
        },
        tolerations=[
            {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},
            {"key": "team", "value": "ml", "effect": ""},
        ],
        **spec,
    )
    manifest["metadata"]["annotations"].update(annotations)
    manifest["metadata"]["labels"][objects.PREEMPTABLE_KEY] = "true"
    manifest["metadata"]["deletionTimestamp"] = "2026-11-30T13:00:00+01:00"
    manifest["status"]["conditions"] = [
        {"type": "Ready", "status": "False", "reason": "Unschedulable"},
        {"type": "PodScheduled", "status": "True", "reason": "Unschedulable"},
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"},
        {"type": "PodScheduled", "status": "False", "reason": "Gated"},
    ]
    return manifest


class RichPodsCase(NamedTuple):
    manifest: Any
    taken: Any


RICH_PODS = {
    "a pod with spec.priority": RichPodsCase(
        manifest=rich_pod(
            annotations={objects.GROUP_NAME_ANNOTATION: "trainer"},
            spec={"priority": 5, "priorityClassName": "high"},
        ),
        taken=[True, True],
    ),
    # Without the classes, a class name alone is a warning: the fast path declines it.
    "a pod with a class name only": RichPodsCase(
        manifest=rich_pod(annotations={}, spec={"priority": None, "priorityClassName": "high"}),
        taken=[False, True],
    ),
    "a pod with pod-level resources": RichPodsCase(
        manifest=rich_pod(
            annotations={},
            spec={
                "priority": 5,
                "resources": {
                    "requests": {"cpu": "4", "hugepages-2Mi": "1Gi"},
                    "limits": {"cpu": "8", "memory": "8Gi", "hugepages-1Gi": "2Gi"},
                },
            },
        ),
        taken=[True, True],
    ),
    "a pod with the task-priority annotation": RichPodsCase(
        manifest=rich_pod(
            annotations={objects.TASK_PRIORITY_ANNOTATION: "7"}, spec={"priority": 5}
        ),
        taken=[True, True],
    ),
}
"""Each pod, and whether the fast path takes it without and with the priority classes."""


def places(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The path of every value inside ``value``."""
    keys = value.keys() if isinstance(value, dict) else range(len(value))
    found = []
    for key in keys:
        found.append((*path, key))
        if isinstance(value[key], dict | list):
            found.extend(places(value[key], (*path, key)))
    return found


def replaced(manifest: Any, path: tuple[Any, ...], replacement: Any) -> Any:
    changed = copy.deepcopy(manifest)
    parent = changed
    for key in path[:-1]:
        parent = parent[key]
    if replacement is REMOVE:
        if isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent.pop(path[-1])
    else:
        parent[path[-1]] = replacement(parent[path[-1]])
    return changed


@pytest.mark.parametrize(("manifest", "taken"), RICH_PODS.values(), ids=RICH_PODS.keys())
def test_every_field_of_a_rich_pod_replaced_by_any_odd_value_ends_as_the_checked_path_ends(
    manifest: dict[str, Any], taken: list[bool]
) -> None:
    assert [check_equivalence(manifest, classes) for classes in (None, CLASSES)] == taken
    for path in places(manifest):
        for replacement in [*REPLACEMENTS, REMOVE]:
            changed = replaced(manifest, path, replacement)
            for classes in (None, CLASSES):
                try:
                    check_equivalence(changed, classes)
                except AssertionError as error:
                    raise AssertionError(f"{path} replaced: {changed}") from error
