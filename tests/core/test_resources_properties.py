"""Properties of resource vectors that must hold for every input (hypothesis)."""

from __future__ import annotations

import hypothesis
from hypothesis import strategies as st

from queuetree.core import resources
from queuetree.core.resources import Resource
from tests import properties
from tests.core import test_resources_comparisons

NAMES = ["nvidia.com/gpu", "pods", "rdma", "hugepages-2Mi"]
VALID_NAMES = ["nvidia.com/gpu", "pods", "hugepages-2Mi"]

finite = st.integers(min_value=0, max_value=10**12)
amounts = st.one_of(finite, finite.map(lambda n: n / 8), st.just(resources.UNLIMITED))
defaults = st.sampled_from([resources.ZERO, resources.INFINITY])


def vectors(values: st.SearchStrategy[float], names: list[str]) -> st.SearchStrategy[Resource]:
    scalars = st.one_of(st.none(), st.dictionaries(st.sampled_from(names), values, max_size=4))
    return st.builds(Resource, values, values, scalars)


any_vectors = vectors(amounts, NAMES)
finite_vectors = vectors(finite, NAMES)


@hypothesis.given(any_vectors, any_vectors, defaults)
def test_the_greater_family_is_the_negation_of_the_less_family(
    left: Resource, right: Resource, default: resources.DimensionDefault
) -> None:
    fits, names = left.less_equal_with_names(right, default)
    assert (
        left.greater(right, default),
        left.greater_equal(right, default),
        left.greater_partly(right, default),
        left.greater_partly_with_names(right, default),
        left.greater_equal_partly(right, default),
    ) == (
        not left.less_equal_partly(right, default),
        not left.less_partly(right, default),
        not fits,
        (not fits, names),
        not left.less(right, default),
    )


@hypothesis.given(any_vectors, any_vectors, defaults)
def test_strict_comparisons_imply_their_tolerant_forms(
    left: Resource, right: Resource, default: resources.DimensionDefault
) -> None:
    implications = {
        "less implies less_equal": (left.less(right, default), left.less_equal(right, default)),
        "less_partly implies less_equal_partly": (
            left.less_partly(right, default),
            left.less_equal_partly(right, default),
        ),
        "less_equal implies less_equal_partly": (
            left.less_equal(right, default),
            left.less_equal_partly(right, default),
        ),
    }
    assert {name: not p or q for name, (p, q) in implications.items()} == dict.fromkeys(
        implications, True
    )


@hypothesis.given(any_vectors, defaults)
def test_a_vector_is_less_equal_to_and_equal_to_itself(
    resource: Resource, default: resources.DimensionDefault
) -> None:
    assert (
        resource.less_equal(resource, default),
        resource.equal(resource, default),
        resource.less(resource, default),
        resource.less_equal_with_names(resource, default),
    ) == (True, True, False, (True, []))


@hypothesis.given(finite_vectors, finite_vectors)
def test_adding_then_subtracting_gives_back_every_amount(left: Resource, right: Resource) -> None:
    back = (left + right) - right
    names = ["cpu", "memory", *NAMES]
    assert {name: back.get(name) for name in names} == {name: left.get(name) for name in names}


@hypothesis.given(finite_vectors, finite_vectors)
def test_adding_then_subtracting_gives_back_the_vector_when_no_new_key_appears(
    left: Resource, right: Resource
) -> None:
    hypothesis.assume(
        not right.scalars or (left.scalars is not None and set(right.scalars) <= set(left.scalars))
    )
    assert (left + right) - right == left


@hypothesis.given(any_vectors)
def test_a_copy_is_equal_and_hashes_the_same(resource: Resource) -> None:
    copy = Resource(resource.milli_cpu, resource.memory, resource.scalars)
    assert (copy == resource, hash(copy) == hash(resource)) == (True, True)


@hypothesis.given(vectors(finite, VALID_NAMES))
def test_to_resource_list_round_trips_through_from_resource_list(resource: Resource) -> None:
    hypothesis.assume(resource.scalars is None or resource.scalars)
    assert Resource.from_resource_list(resources.to_resource_list(resource)) == resource


extreme = st.one_of(
    st.integers(min_value=0, max_value=2**63 - 1),
    st.floats(min_value=0, max_value=1.7976931348623157e308),
    st.sampled_from([resources.UNLIMITED, 1.7976931348623157e308, 2**63 - 1, float(2**63 - 1)]),
)
extreme_vectors = vectors(extreme, ["nvidia.com/gpu", "pods", "scalar.test/scalar1"])


@hypothesis.settings(max_examples=properties.examples(300))
@hypothesis.given(extreme_vectors, extreme_vectors, defaults, st.floats(-2, 2, allow_nan=False))
def test_every_operation_is_total_over_both_defaults_and_prints(
    left: Resource, right: Resource, default: resources.DimensionDefault, ratio: float
) -> None:
    """Unlimited, Volcano's MAXF and MAXI and every finite amount, under ZERO and INFINITY:
    no operation raises, and every result prints (messages, debug strings, quantity maps)."""
    results = [
        *left.diff(right, default),
        left + right,
        left.sub_without_assert(right),
        left.min_dimension(right, default),
        left.set_max_resource(right),
        left.multi(ratio),
        resources.exceeded_part(left, right),
    ]
    if right.less_equal(left, resources.ZERO):
        results.append(left - right)
    verdicts = [getattr(left, name)(right, default) for name in test_resources_comparisons.NINE]
    printed = [(str(r), r.debug_string(), resources.to_resource_list(r)) for r in results]
    assert (len(printed), all(isinstance(v, bool) for v in verdicts)) == (len(results), True)
