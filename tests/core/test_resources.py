"""Resource vectors: construction, accessors, arithmetic, helpers, identity and printing."""

from __future__ import annotations

import copy
import dataclasses
import math
import pickle
from collections.abc import Callable
from typing import Any, NamedTuple

import pytest

from queuetree.core import errors, resources
from queuetree.core.resources import INFINITY, ZERO, Resource

R = Resource
INF = INFINITY
UNL = resources.UNLIMITED
G = 2**30
GPU = "nvidia.com/gpu"


def test_the_public_contract_names_exist() -> None:
    nine = [
        "less",
        "less_equal",
        "less_partly",
        "less_equal_partly",
        "equal",
        "greater",
        "greater_equal",
        "greater_partly",
        "greater_equal_partly",
    ]
    assert [name for name in nine if not callable(getattr(Resource, name, None))] == []
    assert (ZERO.value, INFINITY.value) == (0, -1)
    assert (resources.EMPTY, Resource.infinite()) == (R(0, 0, None), R(UNL, UNL, None))


# -- construction from Kubernetes maps ----------------------------------------------------------


class FromResourceListCase(NamedTuple):
    resource_list: Any
    expected: Any


FROM_RESOURCE_LIST = {
    "the spec's example": FromResourceListCase(
        resource_list={
            "cpu": "4m",
            "memory": "2000",
            "scalar.test/scalar1": "1",
            "hugepages-test": "2",
            "ephemeral-storage": "3",
        },
        expected=R(
            4,
            2000,
            {"scalar.test/scalar1": 1000, "hugepages-test": 2000, "ephemeral-storage": 3000},
        ),
    ),
    "an empty list gives zero and scalars None": FromResourceListCase(
        resource_list={}, expected=R(0, 0, None)
    ),
    "cpu and memory only keep scalars None": FromResourceListCase(
        resource_list={"cpu": "2", "memory": "1Gi"}, expected=R(2000, G, None)
    ),
    "pods is a plain count": FromResourceListCase(
        resource_list={"pods": "110"}, expected=R(0, 0, {"pods": 110})
    ),
    "count/ names are ignored": FromResourceListCase(
        resource_list={"count/pods": "5", "cpu": "1"}, expected=R(1000, 0, None)
    ),
    "quirk 7.12: unprefixed custom names are dropped": FromResourceListCase(
        resource_list={"gpu": "1", "rdma": "1000", "fpga": "1"},
        expected=R(0, 0, None),
    ),
    "an extended resource in milli-units": FromResourceListCase(
        resource_list={GPU: "2"}, expected=R(0, 0, {GPU: 2000})
    ),
    "a kubernetes.io native name": FromResourceListCase(
        resource_list={"kubernetes.io/batteries": "1"},
        expected=R(0, 0, {"kubernetes.io/batteries": 1000}),
    ),
    "attachable volumes": FromResourceListCase(
        resource_list={"attachable-volumes-aws-ebs": "39"},
        expected=R(0, 0, {"attachable-volumes-aws-ebs": 39000}),
    ),
    "a requests.-prefixed name is dropped": FromResourceListCase(
        resource_list={"requests.nvidia.com/gpu": "1"}, expected=R(0, 0, None)
    ),
    "an extended name that is not a qualified name is dropped": FromResourceListCase(
        resource_list={"Nvidia.com/gpu": "1", "example.com/-bad": "1"},
        expected=R(0, 0, None),
    ),
    "memory rounds up to a byte and cpu to a milli": FromResourceListCase(
        resource_list={"memory": "1.5", "cpu": "0.1m"},
        expected=R(1, 2, None),
    ),
    "numbers read as their decimal spelling": FromResourceListCase(
        resource_list={"cpu": 2, "memory": 1024, GPU: 0.5},
        expected=R(2000, 1024, {GPU: 500}),
    ),
    "binary memory": FromResourceListCase(
        resource_list={"memory": "18Gi"}, expected=R(0, 18 * G, None)
    ),
}


@pytest.mark.parametrize(
    ("resource_list", "expected"), FROM_RESOURCE_LIST.values(), ids=FROM_RESOURCE_LIST.keys()
)
def test_from_resource_list_applies_volcanos_name_rules(
    resource_list: dict[str, Any], expected: Resource
) -> None:
    got = Resource.from_resource_list(resource_list, field="spec.capability")
    assert (got, got.scalars is None) == (expected, expected.scalars is None)


class FromResourceListErrorsCase(NamedTuple):
    resource_list: Any
    message: Any


FROM_RESOURCE_LIST_ERRORS = {
    "a bad suffix names the field": FromResourceListErrorsCase(
        resource_list={GPU: "1KB"},
        message=(
            "invalid quantity '1KB' in spec.capability[\"nvidia.com/gpu\"]: unknown suffix 'KB'"
        ),
    ),
    "a boolean is not a quantity": FromResourceListErrorsCase(
        resource_list={"cpu": True},
        message="invalid quantity 'True' in spec.capability[\"cpu\"]: "
        "a quantity must be a string or number",
    ),
    "null is not a quantity": FromResourceListErrorsCase(
        resource_list={"memory": None},
        message="invalid quantity 'None' in spec.capability[\"memory\"]: "
        "a quantity must be a string or number",
    ),
    "a dropped name is still parsed": FromResourceListErrorsCase(
        resource_list={"rdma": "lots"},
        message="invalid quantity 'lots' in spec.capability[\"rdma\"]: unknown suffix 'lots'",
    ),
}


@pytest.mark.parametrize(
    ("resource_list", "message"),
    FROM_RESOURCE_LIST_ERRORS.values(),
    ids=FROM_RESOURCE_LIST_ERRORS.keys(),
)
def test_from_resource_list_rejects_a_malformed_quantity_naming_the_field(
    resource_list: dict[str, Any], message: str
) -> None:
    with pytest.raises(errors.QuantityError) as caught:
        Resource.from_resource_list(resource_list, field="spec.capability")
    assert str(caught.value).startswith(message)


SCALAR_NAMES = {
    "nvidia.com/gpu": True,
    "example.com/foo": True,
    "a.b/c_d.e-f": True,
    "gpu": False,
    "kubernetes.io/batteries": True,
    "hugepages-2Mi": True,
    "attachable-volumes-csi-x": True,
    "requests.example.com/foo": False,
    "Example.com/foo": False,
    "example.com/": False,
    "example.com/" + "x" * 64: False,
    "/foo": False,
}


@pytest.mark.parametrize(("name", "expected"), SCALAR_NAMES.items(), ids=SCALAR_NAMES.keys())
def test_scalar_resource_names_follow_kubernetes(name: str, expected: bool) -> None:
    assert resources.is_scalar_resource_name(name) is expected


# -- the constructor ------------------------------------------------------------------------------


class ConstructorErrorsCase(NamedTuple):
    build: Any
    error: Any
    message: Any


CONSTRUCTOR_ERRORS = {
    "a string amount": ConstructorErrorsCase(
        build=lambda: R("1"),
        error=TypeError,
        message="Resource.milli_cpu must be an int or float, got '1'",
    ),  # type: ignore[arg-type]
    "a boolean amount": ConstructorErrorsCase(
        build=lambda: R(0, True),
        error=TypeError,
        message="Resource.memory must be an int or float, got True",
    ),
    "NaN": ConstructorErrorsCase(
        build=lambda: R(math.nan),
        error=ValueError,
        message="Resource.milli_cpu must be a number or +infinity, got nan",
    ),
    "minus infinity": ConstructorErrorsCase(
        build=lambda: R(0, 0, {GPU: -math.inf}),
        error=ValueError,
        message="Resource.scalars['nvidia.com/gpu'] must be a number or +infinity, got -inf",
    ),
    "an empty scalar name": ConstructorErrorsCase(
        build=lambda: R(0, 0, {"": 1}),
        error=ValueError,
        message="Resource scalar name must be a non-empty string: ''",
    ),
}


@pytest.mark.parametrize(
    ("build", "error", "message"), CONSTRUCTOR_ERRORS.values(), ids=CONSTRUCTOR_ERRORS.keys()
)
def test_the_constructor_rejects_what_is_not_an_amount(
    build: Callable[[], object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as caught:
        build()
    assert str(caught.value) == message


def test_the_constructor_copies_the_callers_mapping() -> None:
    scalars = {GPU: 1000}
    resource = R(0, 0, scalars)
    scalars[GPU] = 5
    assert resource.scalars == {GPU: 1000}


def test_a_resource_cannot_be_changed() -> None:
    resource = R(1, 2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        resource.milli_cpu = 5  # type: ignore[misc]


# -- identity -----------------------------------------------------------------------------------


class EqualityCase(NamedTuple):
    left: Any
    right: Any
    expected: Any


EQUALITY = {
    "same values": EqualityCase(left=R(1, 2, {GPU: 3}), right=R(1, 2, {GPU: 3}), expected=True),
    "int and float of the same value": EqualityCase(left=R(1, 2), right=R(1.0, 2.0), expected=True),
    "scalar order does not matter": EqualityCase(
        left=R(0, 0, {"a": 1, "b": 2}), right=R(0, 0, {"b": 2, "a": 1}), expected=True
    ),
    "scalars None differs from an empty mapping": EqualityCase(
        left=R(1, 2), right=R(1, 2, {}), expected=False
    ),
    "a key holding 0 differs from a missing key": EqualityCase(
        left=R(1, 2, {GPU: 0}), right=R(1, 2, {}), expected=False
    ),
    "unlimited equals unlimited": EqualityCase(
        left=Resource.infinite(), right=R(UNL, UNL), expected=True
    ),
    "different memory": EqualityCase(left=R(1, 2), right=R(1, 3), expected=False),
}


@pytest.mark.parametrize(("left", "right", "expected"), EQUALITY.values(), ids=EQUALITY.keys())
def test_equality_is_by_value_and_hash_agrees(
    left: Resource, right: Resource, expected: bool
) -> None:
    assert (left == right, right == left) == (expected, expected)
    if expected:
        assert hash(left) == hash(right)
        assert len({left, right}) == 1


COPIES: dict[str, Callable[[Resource], object]] = {
    "copy": copy.copy,
    "deepcopy": copy.deepcopy,
    "pickle": lambda resource: pickle.loads(pickle.dumps(resource)),
    "replace": lambda resource: dataclasses.replace(resource),
    "asdict": lambda resource: Resource(**dataclasses.asdict(resource)),
}


@pytest.mark.parametrize("duplicate", COPIES.values(), ids=COPIES.keys())
def test_a_resource_survives_copying_and_pickling(duplicate: Callable[[Resource], object]) -> None:
    resource = R(1, 2, {GPU: 3}) + R(1, 1)  # built on the trusted fast path
    assert duplicate(resource) == resource


def test_a_resource_is_not_equal_to_other_types() -> None:
    assert (R(0, 0) == 0, R(0, 0) != (0, 0, None)) == (False, True)


# -- accessors ----------------------------------------------------------------------------------


class GetCase(NamedTuple):
    resource: Any
    name: Any
    expected: Any


GET = {
    "cpu": GetCase(resource=R(5, 7, {GPU: 9}), name="cpu", expected=5),
    "memory": GetCase(resource=R(5, 7, {GPU: 9}), name="memory", expected=7),
    "a present scalar": GetCase(resource=R(5, 7, {GPU: 9}), name=GPU, expected=9),
    "an absent scalar reads 0": GetCase(resource=R(5, 7, {GPU: 9}), name="rdma", expected=0),
    "scalars None reads 0": GetCase(resource=R(5, 7), name=GPU, expected=0),
}


@pytest.mark.parametrize(("resource", "name", "expected"), GET.values(), ids=GET.keys())
def test_get_reads_a_dimension(resource: Resource, name: str, expected: int) -> None:
    assert resource.get(name) == expected


class ResourceNamesCase(NamedTuple):
    resource: Any
    expected: Any


RESOURCE_NAMES = {
    "quirk 7.11: pods counts, amounts below the tolerance do not": ResourceNamesCase(
        resource=R(1000, 0, {GPU: 1000, "pods": 1, "x": 0.05}),
        expected=["cpu", GPU, "pods"],
    ),
    "empty": ResourceNamesCase(resource=resources.EMPTY, expected=[]),
    "unlimited": ResourceNamesCase(resource=Resource.infinite(), expected=["cpu", "memory"]),
    "negative amounts are absent": ResourceNamesCase(
        resource=R(-5, 10, {GPU: -1}), expected=["memory"]
    ),
}


@pytest.mark.parametrize(
    ("resource", "expected"), RESOURCE_NAMES.values(), ids=RESOURCE_NAMES.keys()
)
def test_resource_names_lists_dimensions_of_at_least_the_tolerance(
    resource: Resource, expected: list[str]
) -> None:
    assert resource.resource_names() == expected


class IsEmptyCase(NamedTuple):
    resource: Any
    expected: Any


IS_EMPTY = {
    "empty": IsEmptyCase(resource=resources.EMPTY, expected=True),
    "quirk 7.11: pods is ignored": IsEmptyCase(resource=R(0, 0, {"pods": 5}), expected=True),
    "below the tolerance": IsEmptyCase(resource=R(0.05, 0, {GPU: 0.05}), expected=True),
    "a scalar": IsEmptyCase(resource=R(0, 0, {GPU: 1}), expected=False),
    "cpu": IsEmptyCase(resource=R(1, 0), expected=False),
    "negative amounts are empty": IsEmptyCase(resource=R(-5, -5, {GPU: -1}), expected=True),
    "unlimited": IsEmptyCase(resource=Resource.infinite(), expected=False),
}


@pytest.mark.parametrize(("resource", "expected"), IS_EMPTY.values(), ids=IS_EMPTY.keys())
def test_is_empty_ignores_pods_and_amounts_below_the_tolerance(
    resource: Resource, expected: bool
) -> None:
    assert resource.is_empty() is expected


class IsZeroCase(NamedTuple):
    resource: Any
    name: Any
    expected: Any


IS_ZERO = {
    "cpu below the tolerance": IsZeroCase(resource=R(0.05, 1), name="cpu", expected=True),
    "memory present": IsZeroCase(resource=R(0.05, 1), name="memory", expected=False),
    "any scalar of scalars None": IsZeroCase(resource=R(0, 0), name=GPU, expected=True),
    "a present scalar at 0": IsZeroCase(resource=R(0, 0, {GPU: 0}), name=GPU, expected=True),
    "a present scalar above 0": IsZeroCase(resource=R(0, 0, {GPU: 1}), name=GPU, expected=False),
}


@pytest.mark.parametrize(("resource", "name", "expected"), IS_ZERO.values(), ids=IS_ZERO.keys())
def test_is_zero_reads_one_dimension(resource: Resource, name: str, expected: bool) -> None:
    assert resource.is_zero(name) is expected


def test_is_zero_of_a_scalar_missing_from_a_mapping_raises_naming_it() -> None:
    with pytest.raises(errors.UnknownResourceError) as caught:
        R(1000, 0, {}).is_zero(GPU)
    assert str(caught.value) == "unknown resource 'nvidia.com/gpu' in <cpu 1, memory 0>"


# -- arithmetic ---------------------------------------------------------------------------------


class AddCase(NamedTuple):
    left: Any
    right: Any
    expected: Any


ADD = {
    "cpu and memory": AddCase(left=R(1, 2), right=R(3, 4), expected=R(4, 6)),
    "an empty right mapping keeps scalars None": AddCase(
        left=R(1, 1), right=R(1, 1, {}), expected=R(2, 2)
    ),
    "scalars None takes the right keys": AddCase(
        left=R(1, 1), right=R(0, 0, {GPU: 1}), expected=R(1, 1, {GPU: 1})
    ),
    "an empty left mapping stays a mapping": AddCase(
        left=R(0, 0, {}), right=R(1, 1), expected=R(1, 1, {})
    ),
    "union of keys": AddCase(
        left=R(0, 0, {"a": 1}), right=R(0, 0, {"a": 2, "b": 3}), expected=R(0, 0, {"a": 3, "b": 3})
    ),
    "unlimited absorbs": AddCase(
        left=Resource.infinite(), right=R(1, 1, {GPU: 1}), expected=R(UNL, UNL, {GPU: 1})
    ),
}


@pytest.mark.parametrize(("left", "right", "expected"), ADD.values(), ids=ADD.keys())
def test_add_sums_per_dimension(left: Resource, right: Resource, expected: Resource) -> None:
    got = left + right
    assert (got, got.scalars is None) == (expected, expected.scalars is None)


class SubCase(NamedTuple):
    left: Any
    right: Any
    expected: Any


SUB = {
    "fits": SubCase(left=R(5, 5, {GPU: 5}), right=R(1, 1, {GPU: 1}), expected=R(4, 4, {GPU: 4})),
    "scalars None ignores the right scalars": SubCase(
        left=R(5, 5), right=R(1, 1, {GPU: 0}), expected=R(4, 4)
    ),
    "a right-only key at 0 becomes present": SubCase(
        left=R(5, 5, {}), right=R(1, 1, {GPU: 0}), expected=R(4, 4, {GPU: 0})
    ),
    "unlimited minus unlimited is 0": SubCase(
        left=Resource.infinite(), right=Resource.infinite(), expected=R(0, 0)
    ),
    "unlimited minus finite stays unlimited": SubCase(
        left=Resource.infinite(), right=R(1, 1), expected=Resource.infinite()
    ),
    "within the tolerance": SubCase(left=R(2, 2), right=R(2.0625, 2), expected=R(-0.0625, 0)),
}


@pytest.mark.parametrize(("left", "right", "expected"), SUB.values(), ids=SUB.keys())
def test_sub_subtracts_what_fits(left: Resource, right: Resource, expected: Resource) -> None:
    got = left - right
    assert (got, got.scalars is None) == (expected, expected.scalars is None)


def test_sub_raises_naming_both_operands_when_the_right_side_does_not_fit() -> None:
    with pytest.raises(errors.InsufficientResourceError) as caught:
        R(1000, 18 * G) - R(2000, 0, {GPU: 1000})
    assert (str(caught.value), caught.value.minuend, caught.value.subtrahend) == (
        "resource is not sufficient to do operation: "
        "<cpu 1, memory 18Gi> sub <cpu 2, memory 0, nvidia.com/gpu 1>",
        "cpu 1, memory 18Gi",
        "cpu 2, memory 0, nvidia.com/gpu 1",
    )


class SubWithoutAssertCase(NamedTuple):
    left: Any
    right: Any
    expected: Any


SUB_WITHOUT_ASSERT = {
    "may go negative": SubWithoutAssertCase(left=R(1, 1), right=R(2, 2), expected=R(-1, -1)),
    "a right-only key goes negative in a mapping": SubWithoutAssertCase(
        left=R(0, 0, {}),
        right=R(0, 0, {GPU: 1000}),
        expected=R(0, 0, {GPU: -1000}),
    ),
    "scalars None ignores the right scalars": SubWithoutAssertCase(
        left=R(0, 0), right=R(0, 0, {GPU: 1000}), expected=R(0, 0)
    ),
}


@pytest.mark.parametrize(
    ("left", "right", "expected"), SUB_WITHOUT_ASSERT.values(), ids=SUB_WITHOUT_ASSERT.keys()
)
def test_sub_without_assert_never_raises(
    left: Resource, right: Resource, expected: Resource
) -> None:
    assert left.sub_without_assert(right) == expected


class MultiCase(NamedTuple):
    resource: Any
    ratio: Any
    expected: Any


MULTI = {
    "halves": MultiCase(
        resource=R(1000, 2048, {GPU: 1000}), ratio=0.5, expected=R(500, 1024, {GPU: 500})
    ),
    "unlimited times 0 is 0": MultiCase(resource=Resource.infinite(), ratio=0, expected=R(0, 0)),
    "unlimited times 2 stays unlimited": MultiCase(
        resource=Resource.infinite(), ratio=2, expected=Resource.infinite()
    ),
}


@pytest.mark.parametrize(("resource", "ratio", "expected"), MULTI.values(), ids=MULTI.keys())
def test_multi_scales_every_dimension(resource: Resource, ratio: float, expected: Resource) -> None:
    assert resource.multi(ratio) == expected


class SetMaxCase(NamedTuple):
    left: Any
    right: Any
    expected: Any


SET_MAX = {
    "None returns the left side": SetMaxCase(left=R(1, 2), right=None, expected=R(1, 2)),
    "scalars None takes the right mapping": SetMaxCase(
        left=R(1, 5), right=R(2, 1, {GPU: 1}), expected=R(2, 5, {GPU: 1})
    ),
    "per-key maximum and new keys": SetMaxCase(
        left=R(0, 0, {"a": 5, "b": 1}),
        right=R(0, 0, {"b": 3, "c": 2}),
        expected=R(0, 0, {"a": 5, "b": 3, "c": 2}),
    ),
    "right scalars None keeps the left mapping": SetMaxCase(
        left=R(0, 0, {"a": 1}), right=R(0, 0), expected=R(0, 0, {"a": 1})
    ),
}


@pytest.mark.parametrize(("left", "right", "expected"), SET_MAX.values(), ids=SET_MAX.keys())
def test_set_max_resource_takes_the_larger_amount(
    left: Resource, right: Resource | None, expected: Resource
) -> None:
    assert left.set_max_resource(right) == expected


class MinDimensionCase(NamedTuple):
    left: Any
    right: Any
    default: Any
    expected: Any


MIN_DIMENSION = {
    "left scalars None: only cpu and memory": MinDimensionCase(
        left=R(5, 5), right=R(1, 9, {GPU: 1}), default=ZERO, expected=R(1, 5)
    ),
    "right scalars None keeps the left under infinity": MinDimensionCase(
        left=R(5, 5, {GPU: 3}),
        right=R(9, 9),
        default=INF,
        expected=R(5, 5, {GPU: 3}),
    ),
    "right scalars None zeroes the left under zero": MinDimensionCase(
        left=R(5, 5, {GPU: 3}),
        right=R(9, 9),
        default=ZERO,
        expected=R(5, 5, {GPU: 0}),
    ),
    "shared keys take the minimum, right-only keys are ignored (infinity)": MinDimensionCase(
        left=R(0, 0, {"a": 5, "b": 5}),
        right=R(0, 0, {"a": 2, "c": 1}),
        default=INF,
        expected=R(0, 0, {"a": 2, "b": 5}),
    ),
    "shared keys take the minimum, left-only keys become 0 (zero)": MinDimensionCase(
        left=R(0, 0, {"a": 5, "b": 5}),
        right=R(0, 0, {"a": 2, "c": 1}),
        default=ZERO,
        expected=R(0, 0, {"a": 2, "b": 0}),
    ),
}


@pytest.mark.parametrize(
    ("left", "right", "default", "expected"), MIN_DIMENSION.values(), ids=MIN_DIMENSION.keys()
)
def test_min_dimension_caps_the_left_dimensions(
    left: Resource, right: Resource, default: resources.DimensionDefault, expected: Resource
) -> None:
    assert left.min_dimension(right, default) == expected


class DiffCase(NamedTuple):
    left: Any
    right: Any
    default: Any
    expected: Any


DIFF = {
    "cpu up, memory down, an equal key lands in decreased with 0": DiffCase(
        left=R(5, 1, {"a": 3}),
        right=R(2, 4, {"a": 3}),
        default=ZERO,
        expected=(R(3, 0, {}), R(0, 3, {"a": 0})),
    ),
    "missing keys read as 0 under zero": DiffCase(
        left=R(0, 0, {"a": 1}),
        right=R(0, 0, {"b": 1}),
        default=ZERO,
        expected=(R(0, 0, {"a": 1}), R(0, 0, {"b": 1})),
    ),
    "missing keys read as unlimited under infinity": DiffCase(
        left=R(0, 0, {"a": 1}),
        right=R(0, 0, {"b": 1}),
        default=INF,
        expected=(R(0, 0, {"b": UNL}), R(0, 0, {"a": UNL})),
    ),
    "both result mappings exist even without scalars": DiffCase(
        left=R(1, 1),
        right=R(1, 1),
        default=ZERO,
        expected=(R(0, 0, {}), R(0, 0, {})),
    ),
}


S1, HP = "scalar.test/scalar1", "hugepages-test"


class VolcanoDiffCase(NamedTuple):
    left: Any
    right: Any
    default: Any
    expected: Any


VOLCANO_DIFF = {
    # Volcano's TestDiff (pkg/scheduler/api/resource_info_test.go), both defaults. Volcano
    # writes the marker -1 where a dimension is missing under Infinity; here that is UNLIMITED.
    "zero: two empty vectors": VolcanoDiffCase(
        left=R(0, 0), right=R(0, 0), default=ZERO, expected=(R(0, 0, {}), R(0, 0, {}))
    ),
    "zero: more cpu and memory on the left": VolcanoDiffCase(
        left=R(1000, 2000),
        right=R(0, 0),
        default=ZERO,
        expected=(R(1000, 2000, {}), R(0, 0, {})),
    ),
    "zero: more cpu and memory on the right": VolcanoDiffCase(
        left=R(0, 0),
        right=R(1000, 2000),
        default=ZERO,
        expected=(R(0, 0, {}), R(1000, 2000, {})),
    ),
    "zero: a scalar only the left has": VolcanoDiffCase(
        left=R(1000, 2000, {S1: 1000}),
        right=R(2000, 1000),
        default=ZERO,
        expected=(R(0, 1000, {S1: 1000}), R(1000, 0, {})),
    ),
    "zero: a scalar only the right has": VolcanoDiffCase(
        left=R(2000, 1000),
        right=R(1000, 2000, {S1: 1000}),
        default=ZERO,
        expected=(R(1000, 0, {}), R(0, 1000, {S1: 1000})),
    ),
    "zero: a scalar both have": VolcanoDiffCase(
        left=R(1000, 2000, {S1: 3000}),
        right=R(2000, 1000, {S1: 1000}),
        default=ZERO,
        expected=(R(0, 1000, {S1: 2000}), R(1000, 0, {})),
    ),
    "infinity: a scalar only the left has is unlimited on the right": VolcanoDiffCase(
        left=R(1000, 2000, {S1: 1000}),
        right=R(2000, 1000),
        default=INFINITY,
        expected=(R(0, 1000, {}), R(1000, 0, {S1: resources.UNLIMITED})),
    ),
    "infinity: a scalar only the right has is unlimited on the left": VolcanoDiffCase(
        left=R(2000, 1000),
        right=R(1000, 2000, {S1: 1000}),
        default=INFINITY,
        expected=(R(1000, 0, {S1: resources.UNLIMITED}), R(0, 1000, {})),
    ),
    "infinity: unlimited cpu and memory on both sides differ by nothing": VolcanoDiffCase(
        left=resources.INFINITE,
        right=resources.INFINITE,
        default=INFINITY,
        expected=(R(0, 0, {}), R(0, 0, {})),
    ),
    "infinity: unlimited against the largest finite amounts": VolcanoDiffCase(
        left=R(resources.UNLIMITED, 2**63 - 1, {HP: resources.UNLIMITED}),
        right=R(2**63 - 1, resources.UNLIMITED, {S1: 1.7976931348623157e308}),
        default=INFINITY,
        expected=(
            R(resources.UNLIMITED, 0, {S1: resources.UNLIMITED}),
            R(0, resources.UNLIMITED, {HP: resources.UNLIMITED}),
        ),
    ),
}


@pytest.mark.parametrize(
    ("left", "right", "default", "expected"), VOLCANO_DIFF.values(), ids=VOLCANO_DIFF.keys()
)
def test_diff_gives_the_results_of_volcanos_tests(
    left: Resource,
    right: Resource,
    default: resources.DimensionDefault,
    expected: tuple[Resource, Resource],
) -> None:
    result = left.diff(right, default)
    printed = [(str(r), r.debug_string(), resources.to_resource_list(r)) for r in result]
    assert (result, len(printed)) == (expected, 2)


@pytest.mark.parametrize(("left", "right", "default", "expected"), DIFF.values(), ids=DIFF.keys())
def test_diff_splits_the_difference(
    left: Resource,
    right: Resource,
    default: resources.DimensionDefault,
    expected: tuple[Resource, Resource],
) -> None:
    assert left.diff(right, default) == expected


# -- helpers ------------------------------------------------------------------------------------


def test_exceeded_part_of_no_right_side_is_the_left_side_itself() -> None:
    left = R(1, 2, {GPU: 3})
    assert resources.exceeded_part(left, None) is left


class ExceededPartCase(NamedTuple):
    left: Any
    right: Any
    expected: Any


EXCEEDED_PART = {
    "no left side": ExceededPartCase(left=None, right=R(1, 1), expected=resources.EMPTY),
    "neither side": ExceededPartCase(left=None, right=None, expected=resources.EMPTY),
    "a key not exceeded is absent, not 0": ExceededPartCase(
        left=R(5, 1, {"a": 3, "b": 1}),
        right=R(2, 4, {"a": 1, "b": 2}),
        expected=R(3, 0, {"a": 2}),
    ),
}


@pytest.mark.parametrize(
    ("left", "right", "expected"), EXCEEDED_PART.values(), ids=EXCEEDED_PART.keys()
)
def test_exceeded_part_keeps_what_the_left_has_above_the_right(
    left: Resource | None, right: Resource | None, expected: Resource
) -> None:
    assert resources.exceeded_part(left, right) == expected


def test_intersection_counts_pods_unless_ignored() -> None:
    first = R(1000, 0, {"pods": 1, GPU: 1000, "x": 0.05})
    second = R(1000, 5, {"pods": 2, GPU: 0})
    assert (
        resources.intersection(first, second),
        resources.intersection_with_ignored_scalar_resources(first, second),
    ) == (["cpu", "pods"], ["cpu"])


class MaximumCase(NamedTuple):
    left: Any
    right: Any
    expected: Any


MAXIMUM = {
    "negative amounts are dropped": MaximumCase(
        left=R(1, 5, {"a": -1, "b": 2}),
        right=R(3, 2, {"b": 1, "c": -5}),
        expected=R(3, 5, {"b": 2}),
    ),
    "both scalars None": MaximumCase(left=R(1, 1), right=R(2, 0), expected=R(2, 1)),
    "one side None": MaximumCase(left=R(1, 1), right=R(0, 0, {"a": 1}), expected=R(1, 1, {"a": 1})),
}


@pytest.mark.parametrize(("left", "right", "expected"), MAXIMUM.values(), ids=MAXIMUM.keys())
def test_maximum_is_per_dimension(left: Resource, right: Resource, expected: Resource) -> None:
    got = resources.maximum(left, right)
    assert (got, got.scalars is None) == (expected, expected.scalars is None)


class MinimumCase(NamedTuple):
    left: Any
    right: Any
    expected: Any


MINIMUM = {
    "left keys, a key the right lacks reads 0": MinimumCase(
        left=R(1, 5, {"a": 3, "b": 2}),
        right=R(3, 2, {"a": 1, "c": 1}),
        expected=R(1, 2, {"a": 1, "b": 0}),
    ),
    "one side None gives scalars None": MinimumCase(
        left=R(1, 1, {"a": 1}), right=R(0, 0), expected=R(0, 0)
    ),
}


@pytest.mark.parametrize(("left", "right", "expected"), MINIMUM.values(), ids=MINIMUM.keys())
def test_minimum_is_per_dimension(left: Resource, right: Resource, expected: Resource) -> None:
    got = resources.minimum(left, right)
    assert (got, got.scalars is None) == (expected, expected.scalars is None)


class ShareCase(NamedTuple):
    part: Any
    whole: Any
    expected: Any


SHARE = {
    "nothing of nothing": ShareCase(part=0, whole=0, expected=0.0),
    "something of nothing": ShareCase(part=5, whole=0, expected=1.0),
    "a quarter": ShareCase(part=1, whole=4, expected=0.25),
    "unlimited of unlimited": ShareCase(part=UNL, whole=UNL, expected=1.0),
    "finite of unlimited": ShareCase(part=5, whole=UNL, expected=0.0),
}


@pytest.mark.parametrize(("part", "whole", "expected"), SHARE.values(), ids=SHARE.keys())
def test_share_is_a_ratio_with_volcanos_zero_rules(
    part: float, whole: float, expected: float
) -> None:
    assert resources.share(part, whole) == expected


def test_sum_all_adds_everything() -> None:
    assert (resources.sum_all([]), resources.sum_all([R(1, 2), R(3, 4, {GPU: 1})])) == (
        resources.EMPTY,
        R(4, 6, {GPU: 1}),
    )


# -- printing -----------------------------------------------------------------------------------


class HumanCase(NamedTuple):
    resource: Any
    text: Any


HUMAN = {
    "the brief's example": HumanCase(
        resource=R(9000, 18 * G, {GPU: 2000}), text="cpu 9, memory 18Gi, nvidia.com/gpu 2"
    ),
    "scalars sorted after cpu and memory": HumanCase(
        resource=R(1500, 1000, {"z/z": 1, "a/a": 1000}),
        text="cpu 1500m, memory 1k, a/a 1, z/z 1m",
    ),
    "pods as a count": HumanCase(resource=R(0, 0, {"pods": 110}), text="cpu 0, memory 0, pods 110"),
    "unlimited": HumanCase(
        resource=R(UNL, UNL, {GPU: UNL}),
        text="cpu unlimited, memory unlimited, nvidia.com/gpu unlimited",
    ),
    "a fraction rounds up": HumanCase(resource=R(1500.2, 10.5), text="cpu 1501m, memory 11"),
}


@pytest.mark.parametrize(("resource", "text"), HUMAN.values(), ids=HUMAN.keys())
def test_format_human_prints_canonical_quantities(resource: Resource, text: str) -> None:
    assert (resources.format_human(resource), str(resource)) == (text, text)


class DebugCase(NamedTuple):
    resource: Any
    text: Any


DEBUG = {
    "the spec's first example": DebugCase(
        resource=R(2000, 4096), text="cpu 2000.00, memory 4096.00"
    ),
    "the spec's second example": DebugCase(
        resource=R(UNL, UNL, {GPU: UNL}),
        text="cpu maxFloat, memory maxFloat, nvidia.com/gpu maxInt",
    ),
    "scalars sorted by name": DebugCase(
        resource=R(1, 2, {"b": 3, "a": 4}), text="cpu 1.00, memory 2.00, a 4.00, b 3.00"
    ),
}


@pytest.mark.parametrize(("resource", "text"), DEBUG.values(), ids=DEBUG.keys())
def test_debug_string_matches_volcanos_string(resource: Resource, text: str) -> None:
    assert resource.debug_string() == text


class ToResourceListCase(NamedTuple):
    resource: Any
    expected: Any


TO_RESOURCE_LIST = {
    "cpu, memory, scalars and pods": ToResourceListCase(
        resource=R(9000, 18 * G, {GPU: 2000, "pods": 110}),
        expected={"cpu": "9", "memory": "18Gi", GPU: "2", "pods": "110"},
    ),
    "empty keeps cpu and memory": ToResourceListCase(
        resource=resources.EMPTY, expected={"cpu": "0", "memory": "0"}
    ),
    "inexact bytes in decimal": ToResourceListCase(
        resource=R(1500, 1_500_000), expected={"cpu": "1500m", "memory": "1500k"}
    ),
    "unlimited dimensions are omitted": ToResourceListCase(
        resource=R(UNL, 5, {GPU: UNL, "x/y": 1}),
        expected={"memory": "5", "x/y": "1m"},
    ),
}


@pytest.mark.parametrize(
    ("resource", "expected"), TO_RESOURCE_LIST.values(), ids=TO_RESOURCE_LIST.keys()
)
def test_to_resource_list_prints_kubernetes_quantities(
    resource: Resource, expected: dict[str, str]
) -> None:
    assert resources.to_resource_list(resource) == expected


@pytest.mark.parametrize(
    "resource",
    [case[0] for case in list(TO_RESOURCE_LIST.values())[:3]],
    ids=list(TO_RESOURCE_LIST.keys())[:3],
)
def test_to_resource_list_is_the_inverse_of_from_resource_list(resource: Resource) -> None:
    assert Resource.from_resource_list(resources.to_resource_list(resource)) == resource


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        pytest.param("cpu", 20_000, "20", id="cpu-whole"),
        pytest.param("cpu", 500, "500m", id="cpu-milli"),
        pytest.param("memory", 40 * 1024**3, "40Gi", id="memory-binary"),
        pytest.param("memory", 1_500_000, "1500k", id="memory-decimal"),
        pytest.param("pods", 110, "110", id="pods-count"),
        pytest.param("nvidia.com/gpu", 10_000, "10", id="gpu-whole-not-10000.00"),
        pytest.param("cpu", resources.UNLIMITED, "unlimited", id="unlimited"),
    ],
)
def test_amounts_print_as_canonical_quantities(name: str, value: int, expected: str) -> None:
    assert resources.format_amount(name, value) == expected
