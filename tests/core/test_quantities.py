"""Kubernetes quantities: parsing, canonical printing, rounding, and what is rejected."""

from __future__ import annotations

import decimal
from typing import Any, NamedTuple

import hypothesis
import pytest
from hypothesis import strategies as st

from queuetree.core import errors, quantities

D = decimal.Decimal
DSI = quantities.Format.DECIMAL_SI
BSI = quantities.Format.BINARY_SI
DEX = quantities.Format.DECIMAL_EXPONENT

# text -> (exact value, format remembered, canonical string the API server prints)
CANONICAL = {
    "100m": (D("0.1"), DSI, "100m"),
    "1.5": (D("1.5"), DSI, "1500m"),
    "2Gi": (D(2 * 2**30), BSI, "2Gi"),
    "1e3": (D(1000), DEX, "1e3"),
    "1E3": (D(1000), DEX, "1e3"),
    "1e+3": (D(1000), DEX, "1e3"),
    "1e0": (D(1), DEX, "1"),
    "12e6": (D(12_000_000), DEX, "12e6"),
    "1.5e3": (D(1500), DEX, "1500"),
    "1200e-3": (D("1.2"), DEX, "1200e-3"),
    "1e-20": (D("1e-9"), DEX, "1e-9"),
    "500Mi": (D(500 * 2**20), BSI, "500Mi"),
    "0.5Ki": (D(512), BSI, "512"),
    "0.5Mi": (D(512 * 1024), BSI, "512Ki"),
    "1.5Ki": (D(1536), BSI, "1536"),
    "1.5Gi": (D(1536 * 2**20), BSI, "1536Mi"),
    "1.1Ki": (D("1126.4"), BSI, "1126400m"),
    "1024Mi": (D(2**30), BSI, "1Gi"),
    "1048576Ki": (D(2**30), BSI, "1Gi"),
    "100Mi": (D(100 * 2**20), BSI, "100Mi"),
    "1Ti": (D(2**40), BSI, "1Ti"),
    "5.5Ei": (D(11 * 2**59), BSI, "5632Pi"),
    "7Ei": (D(7 * 2**60), BSI, "7Ei"),
    "0.0001Ki": (D("0.1024"), DSI, "102400u"),
    "-1.5Gi": (D(-1536 * 2**20), BSI, "-1536Mi"),
    "+1": (D(1), DSI, "1"),
    "-1": (D(-1), DSI, "-1"),
    ".5": (D("0.5"), DSI, "500m"),
    "1.": (D(1), DSI, "1"),
    "01": (D(1), DSI, "1"),
    "0": (D(0), DSI, "0"),
    "0.0": (D(0), DSI, "0"),
    "-0": (D(0), DSI, "0"),
    "0Gi": (D(0), DSI, "0"),
    "1000": (D(1000), DSI, "1k"),
    "1024": (D(1024), DSI, "1024"),
    "1025": (D(1025), DSI, "1025"),
    "1000k": (D(10**6), DSI, "1M"),
    "100000k": (D(10**8), DSI, "100M"),
    "1000m": (D(1), DSI, "1"),
    "1001m": (D("1.001"), DSI, "1001m"),
    "0.001": (D("0.001"), DSI, "1m"),
    "1n": (D("1e-9"), DSI, "1n"),
    "0.1n": (D("1e-9"), DSI, "1n"),
    "-0.1n": (D("-1e-9"), DSI, "-1n"),
    "1.2345": (D("1.2345"), DSI, "1234500u"),
    "1E": (D(10**18), DSI, "1E"),
    "1.5E": (D(15 * 10**17), DSI, "1500P"),
    "9223372036854775807": (D(2**63 - 1), DSI, "9223372036854775807"),
}


@pytest.mark.parametrize(("text", "expected"), CANONICAL.items(), ids=CANONICAL.keys())
def test_a_quantity_parses_exactly_and_prints_in_canonical_form(
    text: str, expected: tuple[decimal.Decimal, quantities.Format, str]
) -> None:
    quantity = quantities.parse(text)
    printed = quantities.format_quantity(quantity)
    assert (quantity.value, quantity.format, printed) == expected
    assert quantities.canonicalize(text) == printed


@pytest.mark.parametrize(
    "text", [expected[2] for expected in CANONICAL.values()], ids=list(CANONICAL)
)
def test_a_canonical_string_is_a_fixed_point(text: str) -> None:
    assert quantities.canonicalize(text) == text


# text -> (Value(), MilliValue()): both round away from zero like Kubernetes
ROUNDING = {
    "100m": (1, 100),
    "1n": (1, 1),
    "1.5": (2, 1500),
    "-1.5": (-2, -1500),
    "0.1m": (1, 1),
    "-0.1m": (-1, -1),
    "2Gi": (2 * 2**30, 2 * 2**30 * 1000),
    "0": (0, 0),
    "1e3": (1000, 1_000_000),
    "1.1Ki": (1127, 1_126_400),
}


@pytest.mark.parametrize(("text", "expected"), ROUNDING.items(), ids=ROUNDING.keys())
def test_to_value_and_to_milli_round_away_from_zero(text: str, expected: tuple[int, int]) -> None:
    quantity = quantities.parse(text)
    assert (quantities.to_value(quantity), quantities.to_milli(quantity)) == expected


# text -> the reason the message gives
INVALID = {
    "": "empty string",
    "1.5.5": "more than one decimal point",
    "Gi": "no digits before the suffix",
    "Ki": "no digits before the suffix",
    ".": "no digits before the suffix",
    "+": "no digits before the suffix",
    "-": "no digits before the suffix",
    "e3": "no digits before the suffix",
    "1 Gi": "spaces are not allowed",
    " 1": "spaces are not allowed",
    "1 ": "spaces are not allowed",
    "1KB": "unknown suffix 'KB'",
    "1K": "unknown suffix 'K'",
    "1gi": "unknown suffix 'gi'",
    "1mi": "unknown suffix 'mi'",
    "1i": "unknown suffix 'i'",
    "1Gii": "unknown suffix 'Gii'",
    "0x10": "unknown suffix 'x10'",
    "1_000": "unknown suffix '_000'",
    "--1": "a sign is allowed only at the start",
    "+-1": "a sign is allowed only at the start",
    "1-": "a sign is allowed only at the start",
    "\u0661": "unknown suffix '\u0661'",
    "1e": "malformed exponent 'e'",
    "1ee3": "malformed exponent 'ee3'",
    "1e3.5": "malformed exponent 'e3.5'",
    "1e1.5": "malformed exponent 'e1.5'",
    "1" * 65: "too many digits (more than 64)",
    "0." + "0" * 63 + "1": "too many digits (more than 64)",
    "1e99999999999999": "exponent out of range",
    "1e19": "out of range (larger than 9223372036854775807)",
    "9223372036854775808": "out of range (larger than 9223372036854775807)",
    "8Ei": "out of range (larger than 9223372036854775807)",
    "-8Ei": "out of range (larger than 9223372036854775807)",
    "1e999999999": "out of range (larger than 9223372036854775807)",
}


@pytest.mark.parametrize(("text", "reason"), INVALID.items(), ids=[repr(t) for t in INVALID])
def test_a_malformed_quantity_is_rejected_naming_the_string_and_the_field(
    text: str, reason: str
) -> None:
    field = 'spec.capability["nvidia.com/gpu"]'
    with pytest.raises(errors.QuantityError) as caught:
        quantities.parse(text, field=field)
    assert (caught.value.text, caught.value.field) == (text, field)
    assert caught.value.reason.startswith(reason)
    assert str(caught.value).startswith(f"invalid quantity {text!r} in {field}: {reason}")


def test_a_quantity_error_is_a_value_error_and_reads_without_a_field() -> None:
    with pytest.raises(ValueError, match=r"^invalid quantity '1KB': unknown suffix 'KB'"):
        quantities.parse("1KB")


def test_a_non_string_is_rejected() -> None:
    with pytest.raises(errors.QuantityError, match="a quantity must be a string"):
        quantities.parse(1, field="spec.x")  # type: ignore[arg-type]


def test_a_tiny_exponent_rounds_up_to_one_nanounit_without_building_huge_numbers() -> None:
    quantity = quantities.parse("5e-999999999")
    assert (quantity.value, quantities.format_quantity(quantity)) == (D("1e-9"), "1e-9")


class FormatMilliCase(NamedTuple):
    milli: Any
    text: Any


FORMAT_MILLI = {
    "zero": FormatMilliCase(milli=0, text="0"),
    "one milli": FormatMilliCase(milli=1, text="1m"),
    "fractional cores": FormatMilliCase(milli=1500, text="1500m"),
    "whole cores": FormatMilliCase(milli=9000, text="9"),
    "thousand cores": FormatMilliCase(milli=1_000_000, text="1k"),
    "negative": FormatMilliCase(milli=-250, text="-250m"),
    "hundred milli": FormatMilliCase(milli=100, text="100m"),
    "trailing zeros kept to a multiple of three": FormatMilliCase(milli=10_000, text="10"),
}


@pytest.mark.parametrize(("milli", "text"), FORMAT_MILLI.values(), ids=FORMAT_MILLI.keys())
def test_format_milli_prints_thousandths_canonically(milli: int, text: str) -> None:
    assert quantities.format_milli(milli) == text
    assert quantities.to_milli(quantities.parse(text)) == milli


class FormatBytesCase(NamedTuple):
    count: Any
    text: Any


FORMAT_BYTES = {
    "zero": FormatBytesCase(count=0, text="0"),
    "exact gibibytes": FormatBytesCase(count=18 * 2**30, text="18Gi"),
    "exact mebibytes": FormatBytesCase(count=1536 * 2**20, text="1536Mi"),
    "one kibibyte": FormatBytesCase(count=1024, text="1Ki"),
    "below 1024 prints decimal": FormatBytesCase(count=512, text="512"),
    "round thousand prints decimal": FormatBytesCase(count=1000, text="1k"),
    "not a multiple of 1024 prints decimal": FormatBytesCase(count=1_500_000, text="1500k"),
    "odd byte count": FormatBytesCase(count=1025, text="1025"),
    "negative exact": FormatBytesCase(count=-2 * 2**30, text="-2Gi"),
}


@pytest.mark.parametrize(("count", "text"), FORMAT_BYTES.values(), ids=FORMAT_BYTES.keys())
def test_format_bytes_uses_binary_suffixes_only_when_exact(count: int, text: str) -> None:
    assert quantities.format_bytes(count) == text
    assert quantities.to_value(quantities.parse(text)) == count


@hypothesis.given(
    mantissa=st.integers(min_value=-(10**6), max_value=10**6),
    suffix=st.sampled_from(
        ["", "n", "u", "m", "k", "M", "Ki", "Mi", "Gi", "e3", "e-3", "E2", "e-9"]
    ),
    fraction=st.sampled_from(["", ".5", ".25", ".001", ".123456789"]),
)
def test_printing_then_parsing_gives_back_the_same_value(
    mantissa: int, suffix: str, fraction: str
) -> None:
    quantity = quantities.parse(f"{mantissa}{fraction}{suffix}")
    reparsed = quantities.parse(quantities.format_quantity(quantity))
    assert reparsed.value == quantity.value


@hypothesis.given(st.integers(min_value=-(10**15), max_value=10**15))
def test_format_milli_and_format_bytes_round_trip(number: int) -> None:
    assert quantities.to_milli(quantities.parse(quantities.format_milli(number))) == number
    assert quantities.to_value(quantities.parse(quantities.format_bytes(number))) == number
