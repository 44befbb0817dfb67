"""Kubernetes quantities (``100m``, ``1.5``, ``2Gi``, ``1e3``) as exact decimals.

This is the one place that reads and writes quantity strings. Everything else in the core works
on the integers of ``queuetree.core.resources`` (milli-CPU, bytes, milli-units); messages for
people go back through :func:`format_milli`, :func:`format_bytes` or :func:`format_quantity`.

Grammar (k8s.io/apimachinery ``pkg/api/resource/quantity.go``)::

    quantity  ::= [sign] number [suffix]
    number    ::= digits | digits "." | digits "." digits | "." digits
    suffix    ::= binarySI | decimalSI | ("e" | "E") [sign] digits
    binarySI  ::= Ki | Mi | Gi | Ti | Pi | Ei           (powers of 1024)
    decimalSI ::= n | u | m | "" | k | M | G | T | P | E (powers of 1000)

What is accepted is the intersection of what Go's ``ParseQuantity`` accepts and the pattern the
API server checks on CRD quantity fields (``x-kubernetes-int-or-string`` with the quantity
regular expression), because Queue capability/deserved/guarantee are CRD fields: so ``Gi`` or
``.`` (which Go alone reads as 0) and surrounding spaces are rejected. Values are rounded away
from zero to the nanounit, as Kubernetes does ("if you ask for some, you get some").

Deliberate limits beyond Kubernetes (documented in docs/resources.md): at most
:data:`MAX_DIGITS` digits in the number, and magnitudes above ``2**63 - 1`` are refused instead of
being silently capped (``8Ei``) or overflowing every int64 accessor (``1e19``).
"""

from __future__ import annotations

import dataclasses
import decimal
import enum
import re
import reprlib
from typing import Final

from queuetree.core import errors

MAX_DIGITS: Final = 64
"""Most digits accepted in the number part (integer and fraction together)."""

MAX_MAGNITUDE: Final = 2**63 - 1
"""Largest absolute value accepted, in whole units (the int64 range of Kubernetes accessors)."""

NANO_EXPONENT: Final = -9
"""Finest precision kept: Kubernetes rounds finer non-zero values away from zero to 1n."""


class Format(enum.Enum):
    """The suffix family a quantity was written in; formatting keeps it (Kubernetes ``Format``)."""

    DECIMAL_SI = "DecimalSI"
    BINARY_SI = "BinarySI"
    DECIMAL_EXPONENT = "DecimalExponent"


@dataclasses.dataclass(frozen=True, slots=True)
class Quantity:
    """An exact quantity and the suffix family it was written in.

    ``value`` is exact to the nanounit. ``format`` is the family used to print it back.
    """

    value: decimal.Decimal
    format: Format


_PATTERN: Final = re.compile(
    r"(?P<sign>[+-]?)(?P<int>[0-9]*)(?:\.(?P<frac>[0-9]*))?"
    r"(?P<suffix>[KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]+)?",
    re.ASCII,
)
_BINARY_POWERS: Final = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL_EXPONENTS: Final = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_DECIMAL_SUFFIXES: Final = {exponent: suffix for suffix, exponent in _DECIMAL_EXPONENTS.items()}
_BINARY_SUFFIXES: Final = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")


def parse(text: str, *, field: str | None = None) -> Quantity:
    """Parse one Kubernetes quantity string into an exact :class:`Quantity`.

    ``field`` names where the string came from (``spec.capability["nvidia.com/gpu"]``) and is
    quoted in the :class:`errors.QuantityError` raised when the string is malformed, has an unknown
    suffix, has more than :data:`MAX_DIGITS` digits, or exceeds :data:`MAX_MAGNITUDE`.
    A binary quantity below 1 in magnitude (``0.5Ki`` is 512, but ``0.0001Ki``) is re-labelled
    decimal, as Kubernetes does, because no binary suffix can print it.
    """
    if not isinstance(text, str):
        raise errors.QuantityError(repr(text), field=field, reason="a quantity must be a string")
    if not text:
        raise errors.QuantityError(text, field=field, reason="empty string")
    match = _PATTERN.fullmatch(text)
    if match is None:
        raise errors.QuantityError(text, field=field, reason=_explain_mismatch(text))
    integer, fraction = match["int"], match["frac"] or ""
    if not integer and not fraction:
        raise errors.QuantityError(text, field=field, reason="no digits before the suffix")
    if len(integer) + len(fraction) > MAX_DIGITS:
        raise errors.QuantityError(
            text, field=field, reason=f"too many digits (more than {MAX_DIGITS})"
        )
    suffix = match["suffix"] or ""
    negative = match["sign"] == "-"
    mantissa = int(integer + fraction or "0")
    exponent10 = -len(fraction)
    binary_power = 0
    if suffix in _BINARY_POWERS:
        quantity_format = Format.BINARY_SI
        binary_power = _BINARY_POWERS[suffix]
    elif suffix in _DECIMAL_EXPONENTS:
        quantity_format = Format.DECIMAL_SI
        exponent10 += _DECIMAL_EXPONENTS[suffix]
    else:
        quantity_format = Format.DECIMAL_EXPONENT
        if len(suffix) > 12:
            # Go reads the exponent as an int32; a longer one is out of range either way.
            raise errors.QuantityError(text, field=field, reason="exponent out of range")
        exponent10 += int(suffix[1:])
    if mantissa == 0:
        return Quantity(decimal.Decimal(0), Format.DECIMAL_SI)
    # Check the order of magnitude before building any power of ten: "1e999999999" must be
    # cheap. A binary suffix only makes the value larger, so this test never rejects too much.
    if len(str(mantissa)) + exponent10 > 20:
        raise errors.QuantityError(
            text, field=field, reason=f"out of range (larger than {MAX_MAGNITUDE})"
        )
    mantissa <<= 10 * binary_power
    if exponent10 < NANO_EXPONENT:
        # Round away from zero to the nanounit without computing 10**huge for "1e-999999999".
        shift = NANO_EXPONENT - exponent10
        if len(str(mantissa)) < shift:
            mantissa = 1
        else:
            quotient, remainder = divmod(mantissa, 10**shift)
            mantissa = quotient + (1 if remainder else 0)
        exponent10 = NANO_EXPONENT
    value = decimal.Decimal((1 if negative else 0, tuple(map(int, str(mantissa))), exponent10))
    if abs(value) > MAX_MAGNITUDE:
        raise errors.QuantityError(
            text, field=field, reason=f"out of range (larger than {MAX_MAGNITUDE})"
        )
    if quantity_format is Format.BINARY_SI and abs(value) < 1:
        quantity_format = Format.DECIMAL_SI
    return Quantity(value, quantity_format)


def _explain_mismatch(text: str) -> str:
    """Say why ``text`` does not match the grammar, for a person reading the error."""
    if not text:
        return "empty string"
    if text != text.strip() or " " in text:
        return "spaces are not allowed"
    head = re.match(r"[+-]?[0-9]*(?:\.[0-9]*)?", text, re.ASCII)
    rest = text[head.end() :] if head else text
    if rest.startswith("."):
        return "more than one decimal point"
    if rest[:1] in ("+", "-"):
        return "a sign is allowed only at the start and before an exponent's digits"
    if rest[:1] in ("e", "E"):
        return f"malformed exponent {rest!r}"
    return (
        f"unknown suffix {rest!r} (expected one of n u m k M G T P E, Ki Mi Gi Ti Pi Ei, "
        "or an exponent such as e3)"
    )


_REPR: Final = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother = 3, 40, 40


def text_of(raw: object) -> str:
    """A quantity as written in a manifest (a string, or a YAML/JSON number) as the text
    :func:`parse` reads; any other value as a person would write it, bounded (a nested or huge
    value must not become a huge message), for :func:`parse` to explain."""
    if isinstance(raw, str):
        return raw
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        return repr(raw)
    return _REPR.repr(raw)


def format_quantity(quantity: Quantity) -> str:
    """The canonical string the Kubernetes API server prints for ``quantity``.

    Kubernetes' canonical form: no fractional digits, the largest suffix that loses nothing,
    in the family the value was written in. A binary value that is below 1024 in magnitude or not
    a whole number prints in decimal (``0.5Ki`` -> ``512``, ``1.1Ki`` -> ``1126400m``); a whole
    binary value not divisible by 1024 prints bare (``1.5Ki`` -> ``1536``). Decimal values print
    with an exponent that is a multiple of three (``1.5`` -> ``1500m``, ``1000`` -> ``1k``,
    ``1.5e3`` -> ``1500``, ``12e6`` -> ``12e6``).

    Unlike Go, the input spelling is never reused: Go prints some inputs exactly as written
    (``+1``, ``01``, ``1E3``); queuetree always prints the canonical form (``1``, ``1``, ``1e3``).
    """
    value = quantity.value
    if not value:
        return "0"
    if quantity.format is Format.BINARY_SI and -1024 < value < 1024:
        return _format_decimal(value, Format.DECIMAL_SI)
    if quantity.format is Format.BINARY_SI and value == value.to_integral_value():
        return _format_binary(int(value))
    if quantity.format is Format.BINARY_SI:
        return _format_decimal(value, Format.DECIMAL_SI)
    return _format_decimal(value, quantity.format)


def canonicalize(text: str, *, field: str | None = None) -> str:
    """Parse ``text`` and print it back in canonical form (``1.5`` -> ``1500m``)."""
    return format_quantity(parse(text, field=field))


def _format_binary(number: int) -> str:
    magnitude, power = abs(number), 0
    while magnitude and magnitude % 1024 == 0 and power < len(_BINARY_SUFFIXES) - 1:
        magnitude //= 1024
        power += 1
    sign = "-" if number < 0 else ""
    return f"{sign}{magnitude}{_BINARY_SUFFIXES[power]}"


def _format_decimal(value: decimal.Decimal, quantity_format: Format) -> str:
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)  # finite by construction
    mantissa = int("".join(map(str, digits)))
    return _format_scaled(-mantissa if sign else mantissa, exponent, quantity_format)


def _format_scaled(mantissa: int, exponent: int, quantity_format: Format) -> str:
    """Print ``mantissa * 10**exponent`` with an exponent that is a multiple of three."""
    if mantissa == 0:
        return "0"
    magnitude = abs(mantissa)
    while magnitude % 10 == 0:
        magnitude //= 10
        exponent += 1
    # Lower the exponent to a multiple of three, growing the mantissa, never losing digits.
    extra = exponent % 3
    magnitude *= 10**extra
    exponent -= extra
    sign = "-" if mantissa < 0 else ""
    if quantity_format is Format.DECIMAL_SI and exponent in _DECIMAL_SUFFIXES:
        return f"{sign}{magnitude}{_DECIMAL_SUFFIXES[exponent]}"
    if exponent == 0:
        return f"{sign}{magnitude}"
    return f"{sign}{magnitude}e{exponent}"


def _scaled_int(quantity: Quantity, exponent: int) -> int:
    """``quantity / 10**exponent`` rounded away from zero to an integer (Go's ScaledValue)."""
    sign, digits, value_exponent = quantity.value.as_tuple()
    assert isinstance(value_exponent, int)  # finite by construction
    mantissa = int("".join(map(str, digits)))
    shift = value_exponent - exponent
    if shift >= 0:
        result: int = mantissa * 10**shift
    else:
        quotient, remainder = divmod(mantissa, 10**-shift)
        result = quotient + (1 if remainder else 0)
    return -result if sign else result


def to_milli(quantity: Quantity) -> int:
    """The value in thousandths, rounded away from zero (Kubernetes ``MilliValue``): 1n -> 1."""
    return _scaled_int(quantity, -3)


def to_value(quantity: Quantity) -> int:
    """The value in whole units, rounded away from zero (Kubernetes ``Value``): 100m -> 1."""
    return _scaled_int(quantity, 0)


def format_milli(milli: int) -> str:
    """Print thousandths as a canonical decimal quantity: 1500 -> ``1500m``, 2000 -> ``2``."""
    return _format_scaled(milli, -3, Format.DECIMAL_SI)


def format_bytes(count: int) -> str:
    """Print a byte count: binary suffix when exact (``18Gi``), decimal otherwise (``1500k``).

    Below 1024 or when not a multiple of 1024 the decimal form is used (1000 -> ``1k``,
    512 -> ``512``), which reads better than Kubernetes' bare binary form (``1500000``).
    """
    if count and count % 1024 == 0:
        return _format_binary(count)
    return _format_scaled(count, 0, Format.DECIMAL_SI)
