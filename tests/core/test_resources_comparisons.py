"""The nine comparisons and the dimension-filtered variants of spec §1.4, as tables.

Units are the vector's: milli-CPU, bytes, milli-units for scalars, a count for ``pods``. Every
expected value below was derived by hand from the rules of spec §1.4 (and, for the three
``greater*`` functions not in the reference code, from the seed's negation relations).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import pytest

from queuetree.core import resources

R = resources.Resource
ZERO = resources.ZERO
INF = resources.INFINITY
UNL = resources.UNLIMITED
G = 2**30
GPU = "nvidia.com/gpu"

NINE = (
    "less",
    "less_equal",
    "less_partly",
    "less_equal_partly",
    "equal",
    "greater",
    "greater_equal",
    "greater_partly",
    "greater_equal_partly",
)

# -- the seed's three cases (../seeds/resource-comparison.md), for both defaults --------------

SEED_CASE_1 = (R(1000, 1 * G), R(2000, 2 * G, {GPU: 2000}))  # L lacks gpu
SEED_CASE_2 = (R(1000, 1 * G, {GPU: 1000}), R(2000, 2 * G))  # R lacks gpu
SEED_CASE_3 = (R(1000, 1 * G), R(0, 0, {GPU: 2000}))  # no shared dimension

# (left, right, default) -> the nine results in NINE order.
# The seed prints the first four columns; the last five follow from Equal's rule and the
# negations Greater = !LessEqualPartly, GreaterEqual = !LessPartly, GreaterPartly =
# !LessEqualWithResourcesName, GreaterEqualPartly = !Less.
SEED = {
    "case 1 (left lacks gpu), zero": (
        *SEED_CASE_1,
        ZERO,
        (True, True, True, True, False, False, False, False, False),
    ),
    # GreaterPartly is False although LessEqual is False: LessEqualWithResourcesName never looks
    # at keys only the right side has (spec §7 item 10), unlike the seed's "!LessEqual" column.
    "case 1 (left lacks gpu), infinity, greater_partly ignores right-only keys": (
        *SEED_CASE_1,
        INF,
        (False, False, True, True, False, False, False, False, True),
    ),
    "case 2 (right lacks gpu), zero": (
        *SEED_CASE_2,
        ZERO,
        (False, False, True, True, False, False, False, True, True),
    ),
    "case 2 (right lacks gpu), infinity": (
        *SEED_CASE_2,
        INF,
        (True, True, True, True, False, False, False, False, False),
    ),
    "case 3 (no shared dimension), zero": (
        *SEED_CASE_3,
        ZERO,
        (False, False, True, True, False, False, False, True, True),
    ),
    # The seed's table says LessPartly/LessEqualPartly are True here, reading the right side's
    # absent cpu/memory as "max". The reference code (and spec §1.1) never treats cpu or memory as
    # missing: they are 0 on the right, so no dimension of the left is smaller.
    "case 3 (no shared dimension), infinity, cpu and memory are never missing": (
        *SEED_CASE_3,
        INF,
        (False, False, False, False, False, True, True, True, True),
    ),
}


@pytest.mark.parametrize(
    ("left", "right", "default", "expected"), SEED.values(), ids=list(SEED.keys())
)
def test_the_seed_cases_give_the_expected_nine_results(
    left: R, right: R, default: resources.DimensionDefault, expected: tuple[bool, ...]
) -> None:
    got = tuple(getattr(left, name)(right, default) for name in NINE)
    assert dict(zip(NINE, got, strict=True)) == dict(zip(NINE, expected, strict=True))


# -- one table per function ------------------------------------------------------------------

Case = tuple[R, R, resources.DimensionDefault, Any]

LESS: dict[str, Case] = {
    "cpu and memory both smaller": (R(1, 1), R(2, 2), ZERO, True),
    "equal cpu is not less (strict)": (R(2, 1), R(2, 2), ZERO, False),
    "equal memory is not less (strict)": (R(1, 2), R(2, 2), ZERO, False),
    "a difference below the tolerance still counts (no tolerance)": (
        R(1, 1),
        R(1.05, 2),
        ZERO,
        True,
    ),
    "left-only scalar compares with 0 under zero": (R(1, 1, {GPU: 1}), R(2, 2), ZERO, False),
    "negative left-only scalar is below 0 under zero": (R(1, 1, {GPU: -1}), R(2, 2), ZERO, True),
    "left-only scalar is skipped under infinity": (R(1, 1, {GPU: 1}), R(2, 2), INF, True),
    "right-only scalar is ignored under zero, even at 0": (R(1, 1), R(2, 2, {GPU: 0}), ZERO, True),
    "right-only scalar fails under infinity": (R(1, 1), R(2, 2, {GPU: 5}), INF, False),
    "right-only scalar fails under infinity with an empty left mapping": (
        R(1, 1, {}),
        R(2, 2, {GPU: 5}),
        INF,
        False,
    ),
    "shared scalar equal is not less": (R(1, 1, {GPU: 5}), R(2, 2, {GPU: 5}), ZERO, False),
    "shared scalar smaller": (R(1, 1, {GPU: 4}), R(2, 2, {GPU: 5}), INF, True),
    "unlimited is not less than unlimited": (R.infinite(), R.infinite(), ZERO, False),
    "finite is less than unlimited": (R(1, 1), R.infinite(), ZERO, True),
    "empty vectors are not less than each other": (resources.EMPTY, resources.EMPTY, ZERO, False),
}

LESS_EQUAL: dict[str, Case] = {
    "equal vectors": (R(2, 2, {GPU: 1}), R(2, 2, {GPU: 1}), ZERO, True),
    "within the tolerance": (R(2.05, 2), R(2, 2), ZERO, True),
    "beyond the tolerance": (R(2.2, 2), R(2, 2), ZERO, False),
    "one larger dimension fails": (R(3, 1), R(2, 2), ZERO, False),
    "left-only scalar compares with 0 under zero": (R(1, 1, {GPU: 1000}), R(2, 2), ZERO, False),
    "left-only scalar at 0 fits under zero": (R(1, 1, {GPU: 0}), R(2, 2), ZERO, True),
    "left-only scalar is skipped under infinity": (R(1, 1, {GPU: 1000}), R(2, 2), INF, True),
    "right-only scalar is ignored under zero": (R(1, 1), R(2, 2, {GPU: 1000}), ZERO, True),
    "right-only scalar fails under infinity": (R(1, 1), R(2, 2, {GPU: 1000}), INF, False),
    "pods counts": (R(0, 0, {"pods": 111}), R(0, 0, {"pods": 110}), ZERO, False),
    "unlimited fits in unlimited": (R.infinite(), R.infinite(), ZERO, True),
    "unlimited does not fit in finite": (R.infinite(), R(1, 1), ZERO, False),
    "None scalars against an empty mapping under infinity": (R(1, 1), R(1, 1, {}), INF, True),
    "empty vectors": (resources.EMPTY, resources.EMPTY, INF, True),
}

LESS_PARTLY: dict[str, Case] = {
    "cpu smaller": (R(1, 5), R(2, 2), ZERO, True),
    "memory smaller": (R(5, 1), R(2, 2), ZERO, True),
    "all equal is not partly less": (R(2, 2), R(2, 2), ZERO, False),
    "a difference below the tolerance counts (no tolerance)": (R(1.95, 2), R(2, 2), ZERO, True),
    "quirk 7.10: right-only scalar at 0 makes it true under zero": (
        R(2, 2),
        R(2, 2, {GPU: 0}),
        ZERO,
        True,
    ),
    "right-only scalar is ignored under infinity": (R(2, 2), R(2, 2, {GPU: 5}), INF, False),
    "left-only scalar makes it true under infinity": (R(2, 2, {GPU: 5}), R(2, 2), INF, True),
    "left-only scalar compares with 0 under zero": (R(2, 2, {GPU: 5}), R(2, 2), ZERO, False),
    "negative left-only scalar under zero": (R(2, 2, {GPU: -1}), R(2, 2), ZERO, True),
    "shared scalar smaller": (R(2, 2, {GPU: 1}), R(2, 2, {GPU: 2}), INF, True),
    "unlimited against unlimited": (R.infinite(), R.infinite(), ZERO, False),
}

LESS_EQUAL_PARTLY: dict[str, Case] = {
    "equal is partly less-equal": (R(2, 2), R(2, 2), ZERO, True),
    "every dimension larger": (R(3, 3), R(2, 2), ZERO, False),
    "cpu within the tolerance": (R(2.05, 3), R(2, 2), ZERO, True),
    "right-only scalar under zero": (R(3, 3), R(2, 2, {GPU: 0}), ZERO, True),
    "right-only scalar is ignored under infinity": (R(3, 3), R(2, 2, {GPU: 0}), INF, False),
    "left-only scalar under infinity": (R(3, 3, {GPU: 5}), R(2, 2), INF, True),
    "left-only scalar at 0 under zero": (R(3, 3, {GPU: 0}), R(2, 2), ZERO, True),
    "left-only positive scalar under zero": (R(3, 3, {GPU: 5}), R(2, 2), ZERO, False),
    "unlimited against unlimited": (R.infinite(), R.infinite(), INF, True),
}

EQUAL: dict[str, Case] = {
    "identical": (R(1, 2, {GPU: 3}), R(1, 2, {GPU: 3}), ZERO, True),
    "within the tolerance": (R(1.05, 2), R(1, 2), ZERO, True),
    "memory differs": (R(1, 2), R(1, 3), ZERO, False),
    "quirk 7.10: right-only keys are ignored (asymmetric)": (
        R(1, 2),
        R(1, 2, {GPU: 5}),
        ZERO,
        True,
    ),
    "left-only key compares with 0": (R(1, 2, {GPU: 5}), R(1, 2), ZERO, False),
    "left-only key at 0 equals absence": (R(1, 2, {GPU: 0}), R(1, 2), INF, True),
    "the default is unused": (R(1, 2, {GPU: 5}), R(1, 2), INF, False),
    "unlimited equals unlimited": (R.infinite(), R.infinite(), ZERO, True),
}

GREATER: dict[str, Case] = {
    "every dimension larger": (R(3, 3), R(2, 2), ZERO, True),
    "one equal dimension": (R(3, 2), R(2, 2), ZERO, False),
    "within the tolerance is not greater": (R(2.05, 3), R(2, 2), ZERO, False),
    "right-only scalar blocks it under zero": (R(3, 3), R(2, 2, {GPU: 0}), ZERO, False),
    "right-only scalar is ignored under infinity": (R(3, 3), R(2, 2, {GPU: 0}), INF, True),
    "left-only scalar blocks it under infinity": (R(3, 3, {GPU: 5}), R(2, 2), INF, False),
    "left-only positive scalar is greater than 0 under zero": (
        R(3, 3, {GPU: 5}),
        R(2, 2),
        ZERO,
        True,
    ),
}

GREATER_EQUAL: dict[str, Case] = {
    "equal is greater-equal": (R(2, 2), R(2, 2), ZERO, True),
    "one smaller dimension": (R(1, 3), R(2, 2), ZERO, False),
    "quirk 7.10: right-only scalar at 0 blocks it under zero": (
        R(2, 2),
        R(2, 2, {GPU: 0}),
        ZERO,
        False,
    ),
    "right-only scalar is ignored under infinity": (R(2, 2), R(2, 2, {GPU: 5}), INF, True),
    "left-only scalar blocks it under infinity": (R(2, 2, {GPU: 5}), R(2, 2), INF, False),
}


class GreaterPartlyCase(NamedTuple):
    left: Any
    right: Any
    default: Any
    expected: Any


GREATER_PARTLY = {
    "cpu larger": GreaterPartlyCase(
        left=R(3, 1), right=R(2, 2), default=ZERO, expected=(True, ["cpu"])
    ),
    "every dimension fits": GreaterPartlyCase(
        left=R(2, 2), right=R(2, 2), default=ZERO, expected=(False, [])
    ),
    "within the tolerance is not greater": GreaterPartlyCase(
        left=R(2.05, 2), right=R(2, 2), default=ZERO, expected=(False, [])
    ),
    "left-only scalar under zero": GreaterPartlyCase(
        left=R(1, 1, {GPU: 1}), right=R(2, 2), default=ZERO, expected=(True, [GPU])
    ),
    "left-only scalar is skipped under infinity": GreaterPartlyCase(
        left=R(1, 1, {GPU: 1}), right=R(2, 2), default=INF, expected=(False, [])
    ),
    "quirk 7.10: right-only scalar is never checked, even under infinity": GreaterPartlyCase(
        left=R(1, 1),
        right=R(2, 2, {GPU: 5}),
        default=INF,
        expected=(False, []),
    ),
    "names come as cpu, memory, then scalars in left order": GreaterPartlyCase(
        left=R(3, 3, {"b": 5, "a": 5}),
        right=R(2, 2, {"a": 9, "b": 1}),
        default=ZERO,
        expected=(True, ["cpu", "memory", "b"]),
    ),
    "pods counts": GreaterPartlyCase(
        left=R(0, 0, {"pods": 2}),
        right=R(0, 0, {"pods": 1}),
        default=ZERO,
        expected=(True, ["pods"]),
    ),
}

GREATER_EQUAL_PARTLY: dict[str, Case] = {
    "equal": (R(2, 2), R(2, 2), ZERO, True),
    "every dimension smaller": (R(1, 1), R(2, 2), ZERO, False),
    "one dimension equal": (R(1, 2), R(2, 2), ZERO, True),
    "right-only scalar under infinity": (R(1, 1), R(2, 2, {GPU: 5}), INF, True),
    "left-only scalar under zero": (R(1, 1, {GPU: 5}), R(2, 2), ZERO, True),
}

LESS_EQUAL_WITH_NAMES: dict[str, Case] = {
    "fits": (R(1, 1, {GPU: 1}), R(2, 2, {GPU: 1}), ZERO, (True, [])),
    "cpu and memory named": (R(3, 3), R(2, 2), ZERO, (False, ["cpu", "memory"])),
    "quirk 7.10: right-only scalar unchecked under infinity": (
        R(1, 1),
        R(2, 2, {GPU: 5}),
        INF,
        (True, []),
    ),
    "left-only scalar under zero": (R(1, 1, {GPU: 1}), R(2, 2), ZERO, (False, [GPU])),
    "left-only scalar is skipped under infinity": (R(1, 1, {GPU: 1}), R(2, 2), INF, (True, [])),
    "within the tolerance": (R(2.05, 2), R(2, 2), ZERO, (True, [])),
    "pods counts": (R(0, 0, {"pods": 2}), R(0, 0, {"pods": 1}), ZERO, (False, ["pods"])),
    "unlimited does not fit in finite": (
        R(UNL, 0, {GPU: UNL}),
        R(1, 1, {GPU: 1}),
        ZERO,
        (False, ["cpu", GPU]),
    ),
}

TABLES: dict[str, dict[str, Case]] = {
    "less": LESS,
    "less_equal": LESS_EQUAL,
    "less_partly": LESS_PARTLY,
    "less_equal_partly": LESS_EQUAL_PARTLY,
    "equal": EQUAL,
    "greater": GREATER,
    "greater_equal": GREATER_EQUAL,
    "greater_partly_with_names": GREATER_PARTLY,
    "greater_equal_partly": GREATER_EQUAL_PARTLY,
    "less_equal_with_names": LESS_EQUAL_WITH_NAMES,
}
ROWS = [(function, *case) for function, table in TABLES.items() for case in table.values()]
ROW_IDS = [f"{function}: {name}" for function, table in TABLES.items() for name in table]


@pytest.mark.parametrize(("function", "left", "right", "default", "expected"), ROWS, ids=ROW_IDS)
def test_each_comparison_follows_the_rules_of_section_1_4(
    function: str, left: R, right: R, default: resources.DimensionDefault, expected: Any
) -> None:
    assert getattr(left, function)(right, default) == expected


@pytest.mark.parametrize(
    ("left", "right", "default", "expected"),
    GREATER_PARTLY.values(),
    ids=list(GREATER_PARTLY.keys()),
)
def test_greater_partly_is_the_boolean_of_greater_partly_with_names(
    left: R, right: R, default: resources.DimensionDefault, expected: tuple[bool, list[str]]
) -> None:
    assert left.greater_partly(right, default) == expected[0]


# -- dimension-filtered variants -------------------------------------------------------------

DimCase = tuple[R, R | None, R | None, tuple[bool, list[str]]]

WITH_DIMENSION_AND_NAMES: dict[str, DimCase] = {
    "no right side names every present dimension of the left": (
        R(1000, 0, {GPU: 1000, "pods": 1, "x/y": 0}),
        None,
        R(1, 1),
        (False, ["cpu", GPU, "pods"]),
    ),
    "no request falls back to less_equal_with_names with zero": (
        R(3, 1, {GPU: 1}),
        R(2, 2),
        None,
        (False, ["cpu", GPU]),
    ),
    "quirk 7.9: a dimension the request does not use is not checked": (
        R(3000, 1),
        R(2000, 2),
        R(0, 1),
        (True, []),
    ),
    "equal fits (strict comparison)": (R(2, 2), R(2, 2), R(1, 1), (True, [])),
    "quirk 7.9: no tolerance": (R(2.05, 0), R(2, 0), R(1, 0), (False, ["cpu"])),
    "quirk 7.7: a scalar the right side lacks counts as zero capacity": (
        R(0, 0, {GPU: 1000}),
        R(10, 10),
        R(0, 0, {GPU: 1000}),
        (False, [GPU]),
    ),
    "quirk 7.7: the infinite resource has no scalar keys, so any scalar fails": (
        R(5, 5, {GPU: 5}),
        R.infinite(),
        R(1, 1, {GPU: 1}),
        (False, [GPU]),
    ),
    "left scalars None skips every scalar check": (
        R(5, 0),
        R(1, 0, {GPU: -1000}),
        R(1, 0, {GPU: 1}),
        (False, ["cpu"]),
    ),
    "left empty mapping still checks scalars": (
        R(5, 0, {}),
        R(1, 0, {GPU: -1000}),
        R(1, 0, {GPU: 1}),
        (False, ["cpu", GPU]),
    ),
    "quirk 7.11: pods is skipped": (
        R(0, 0, {"pods": 200}),
        R(0, 0, {"pods": 110}),
        R(0, 0, {"pods": 1}),
        (True, []),
    ),
    "a zero request dimension is skipped": (
        R(0, 0, {GPU: 5}),
        R(0, 0, {GPU: 1}),
        R(0, 0, {GPU: 0}),
        (True, []),
    ),
    "scalar names come in request order": (
        R(0, 0, {"a/a": 5, "b/b": 5}),
        R(0, 0, {"a/a": 1, "b/b": 1}),
        R(0, 0, {"b/b": 1, "a/a": 1}),
        (False, ["b/b", "a/a"]),
    ),
}

PARTLY_WITH_DIMENSION: dict[str, DimCase] = {
    "no request": (R(1, 1), R(2, 2), None, (False, [])),
    "cpu within the tolerance counts": (R(2.05, 5), R(2, 2), R(1, 1), (True, ["cpu"])),
    "nothing fits": (R(5, 5), R(2, 2), R(1, 1), (False, [])),
    "a scalar both sides lack fits as 0 <= 0": (R(5, 5), R(1, 1), R(0, 0, {GPU: 1}), (True, [GPU])),
    "quirk 7.11: pods is skipped": (
        R(0, 0, {"pods": 1}),
        R(0, 0, {"pods": 5}),
        R(0, 0, {"pods": 1}),
        (False, []),
    ),
    "an empty request finds nothing": (R(0, 0), R(5, 5), resources.EMPTY, (False, [])),
    "names in order cpu, memory, scalars": (
        R(1, 1, {GPU: 1}),
        R(2, 2, {GPU: 2}),
        R(1, 1, {GPU: 1}),
        (True, ["cpu", "memory", GPU]),
    ),
}

PARTLY_WITH_DIMENSION_ZERO_FILTERED: dict[str, DimCase] = {
    "no request": (R(1, 1), R(2, 2), None, (False, [])),
    "a scalar both sides lack is filtered out": (R(5, 5), R(1, 1), R(0, 0, {GPU: 1}), (False, [])),
    "a scalar only the left has is kept (and does not fit)": (
        R(5, 5, {GPU: 1000}),
        R(1, 1),
        R(0, 0, {GPU: 1}),
        (False, []),
    ),
    "a scalar only the right has is kept (and fits)": (
        R(5, 5),
        R(1, 1, {GPU: 1000}),
        R(0, 0, {GPU: 1}),
        (True, [GPU]),
    ),
    "cpu both lack is filtered out": (R(0, 5), R(0, 1), R(1, 1), (False, [])),
    "cpu present on one side is kept": (R(0, 5), R(1000, 1), R(1, 1), (True, ["cpu"])),
}

GREATER_PARTLY_WITH_DIMENSION: dict[str, DimCase] = {
    "no request": (R(5, 5), R(1, 1), None, (False, [])),
    "no right side reads as empty": (R(1, 0), None, R(1, 0), (True, ["cpu"])),
    "equal is not greater (strict)": (R(2, 2), R(2, 2), R(1, 1), (False, [])),
    "greater within the tolerance still counts (strict)": (
        R(2.05, 0),
        R(2, 0),
        R(1, 0),
        (True, ["cpu"]),
    ),
    "an unrequested dimension is ignored": (R(5, 5), R(1, 1), R(0, 1), (True, ["memory"])),
    "quirk 7.11: pods is skipped": (
        R(0, 0, {"pods": 9}),
        R(0, 0, {"pods": 1}),
        R(0, 0, {"pods": 1}),
        (False, []),
    ),
    "a scalar the right side lacks reads as 0": (
        R(0, 0, {GPU: 1}),
        R(0, 0),
        R(0, 0, {GPU: 1}),
        (True, [GPU]),
    ),
}

GPU2 = {"gpu": 2000}
RELEVANT_DIMENSIONS: dict[str, DimCase] = {
    "no request": (R(5, 5), R(1, 1), None, (False, [])),
    "no right side reads as empty, so nothing is relevant": (R(5, 5), None, R(1, 1), (False, [])),
    "documented: r{gpu2} rr{} req{gpu1}": (
        R(0, 0, GPU2),
        R(0, 0, {}),
        R(0, 0, {"gpu": 1000}),
        (False, []),
    ),
    "documented: r{cpu4} rr{cpu0} req{cpu2}": (R(4000, 0), R(0, 0), R(2000, 0), (False, [])),
    "documented: r{gpu2} rr{gpu0} req{gpu1}": (
        R(0, 0, GPU2),
        R(0, 0, {"gpu": 0}),
        R(0, 0, {"gpu": 1000}),
        (True, ["gpu"]),
    ),
    "documented: r{cpu4} rr{cpu0.1} req{cpu2}": (
        R(4000, 0),
        R(100, 0),
        R(2000, 0),
        (True, ["cpu"]),
    ),
    "documented: mixed, req{gpu1}": (
        R(4000, 8192, GPU2),
        R(2000, 8192, {"gpu": 1000}),
        R(0, 0, {"gpu": 1000}),
        (True, ["gpu"]),
    ),
    "documented: mixed, req{cpu2,gpu1}": (
        R(4000, 8192, GPU2),
        R(2000, 8192, {"gpu": 1000}),
        R(2000, 0, {"gpu": 1000}),
        (True, ["cpu", "gpu"]),
    ),
    "documented: mixed, req{mem4096}": (
        R(4000, 8192, GPU2),
        R(2000, 8192, {"gpu": 1000}),
        R(0, 4096),
        (False, []),
    ),
    "a right scalar key holding 0 is relevant": (
        R(0, 0, {GPU: 1}),
        R(0, 0, {GPU: 0}),
        R(0, 0, {GPU: 1}),
        (True, [GPU]),
    ),
    "right cpu below the tolerance is not relevant": (R(5, 0), R(0.05, 0), R(1, 0), (False, [])),
}

DIMENSION_TABLES: dict[str, dict[str, DimCase]] = {
    "less_equal_with_dimension_and_names": WITH_DIMENSION_AND_NAMES,
    "less_equal_partly_with_dimension": PARTLY_WITH_DIMENSION,
    "less_equal_partly_with_dimension_zero_filtered": PARTLY_WITH_DIMENSION_ZERO_FILTERED,
    "greater_partly_with_dimension": GREATER_PARTLY_WITH_DIMENSION,
    "greater_partly_with_relevant_dimensions": RELEVANT_DIMENSIONS,
}
DIMENSION_ROWS = [
    (function, *case) for function, table in DIMENSION_TABLES.items() for case in table.values()
]
DIMENSION_IDS = [
    f"{function}: {name}" for function, table in DIMENSION_TABLES.items() for name in table
]


@pytest.mark.parametrize(
    ("function", "left", "right", "request_", "expected"), DIMENSION_ROWS, ids=DIMENSION_IDS
)
def test_each_dimension_filtered_comparison_follows_section_1_4(
    function: str, left: R, right: R | None, request_: R | None, expected: tuple[bool, list[str]]
) -> None:
    assert getattr(left, function)(right, request_) == expected
