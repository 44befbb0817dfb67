"""The informer's cheap pod copies and comparisons against the dataclass operations they stand
for (objects.with_progress, objects.same_but_placement)."""

from __future__ import annotations

import dataclasses
import datetime
from types import MappingProxyType
from typing import Any

import hypothesis
from hypothesis import strategies as st

from queuetree.core import objects, resources

GATE = objects.QUEUE_ALLOCATION_GATE

statuses = st.sampled_from(list(objects.TaskStatus))
gates = st.lists(st.sampled_from([GATE, "other.io/gate"]), max_size=2, unique=True).map(tuple)
names = st.sampled_from(["", "n1", "n2"])
mappings = st.dictionaries(st.sampled_from(["a", "b"]), st.sampled_from(["1", "2"])).map(
    lambda items: MappingProxyType(dict(sorted(items.items())))
)

pods = st.builds(
    objects.Pod,
    namespace=st.sampled_from(["ns", "other"]),
    name=st.sampled_from(["a", "b"]),
    group=st.sampled_from(["ns/a", "ns/g"]),
    status=statuses,
    resreq=st.sampled_from([resources.EMPTY, resources.Resource(milli_cpu=500, memory=0)]),
    priority=st.integers(-3, 3),
    node_name=names,
    scheduling_gates=gates,
    annotations=mappings,
    labels=mappings,
    preemptable=st.booleans(),
    unschedulable=st.booleans(),
    created=st.sampled_from([objects.EPOCH, datetime.datetime(2026, 12, 3, tzinfo=datetime.UTC)]),
    uid=st.sampled_from(["", "u1"]),
    count=st.integers(1, 3),
)

FIELDS = [field.name for field in dataclasses.fields(objects.Pod)]


@hypothesis.given(
    pod=pods, status=statuses, node_name=names, unschedulable=st.booleans(), gates=gates
)
def test_with_progress_is_the_dataclass_replace_of_the_same_fields(
    pod: objects.Pod,
    status: objects.TaskStatus,
    node_name: str,
    unschedulable: bool,
    gates: tuple[str, ...],
) -> None:
    changes: dict[str, Any] = {
        "status": status,
        "node_name": node_name,
        "unschedulable": unschedulable,
        "scheduling_gates": gates,
    }
    copied = objects.with_progress(pod, **changes)
    expected = dataclasses.replace(pod, **changes)
    assert type(copied) is objects.Pod
    assert copied == expected
    assert all(getattr(copied, name) is getattr(expected, name) for name in FIELDS)


@hypothesis.given(before=pods, other=pods, changed=st.sets(st.sampled_from(FIELDS), max_size=3))
def test_same_but_placement_is_a_replace_of_status_and_node_then_equality(
    before: objects.Pod, other: objects.Pod, changed: set[str]
) -> None:
    """``after`` takes the fields in ``changed`` from an unrelated pod: none, some of the
    placement fields only, or others too."""
    after = dataclasses.replace(before, **{name: getattr(other, name) for name in changed})
    expected = dataclasses.replace(before, status=after.status, node_name=after.node_name) == after
    assert objects.same_but_placement(before, after) is expected
