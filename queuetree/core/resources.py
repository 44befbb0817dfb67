"""Resource vectors and their comparison family (Volcano ``pkg/scheduler/api/resource_info.go``).

A :class:`Resource` holds milli-CPU, memory in bytes, and "scalar" resources (GPUs, hugepages,
ephemeral storage, extended resources) in milli-units, except ``pods``, which is a plain count.
Every figure the capacity policy reasons about (requests, allocations, deserved, capability) is
one of these; strings appear only at the edges, through ``queuetree.core.quantities``.

Numbers. Finite values are Python ``int`` (exact: no float rounding when millions of pods are
added and removed). "Unlimited" is one explicit infinity, :data:`UNLIMITED` (``math.inf``), to
which Volcano's sentinels ``MAXF`` (float64 max, used for CPU and memory) and ``MAXI`` (2**63-1,
used for scalars) both map; :meth:`Resource.debug_string` still prints ``maxFloat``/``maxInt``.
``float`` values other than infinity only appear after :meth:`Resource.multi`.

Missing dimensions. CPU and memory are always present. A scalar key absent from one side is read
according to the *default* passed to each comparison: :data:`ZERO` (absent means none) or
:data:`INFINITY` (absent means unlimited). ``scalars=None`` and an empty mapping are different
values, because Volcano behaves differently for them (``+``, ``-``, :meth:`Resource.min_dimension`,
:meth:`Resource.less_equal_with_dimension_and_names`).

Tolerance. The tolerant comparisons (``le``: ``a < b or |a - b| < EPS`` with ``EPS = 0.1``) are
used exactly where spec §1.4 puts them; ``lt``/``gt`` are strict. With integer milli-units the
tolerance only matters for the float results of :meth:`Resource.multi`.

Vectors are immutable: every operation returns a new vector. Scalar mappings may be shared
between vectors (never mutated after construction), which keeps ``+`` cheap on the hot path.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from queuetree.core import errors, quantities

Amount = int | float
"""A figure in the vector's units: ``int`` when finite, :data:`UNLIMITED`, or a float after
:meth:`Resource.multi`."""

UNLIMITED: Final = math.inf
"""The single infinity ("unlimited"); Volcano's MAXF and MAXI both map to it."""

EPS: Final = 0.1
"""Volcano's ``minResource``: the tolerance of ``le``/``equal`` and the "present" threshold."""

CPU: Final = "cpu"
MEMORY: Final = "memory"
PODS: Final = "pods"
GPU: Final = "nvidia.com/gpu"
IGNORED_SCALAR_RESOURCES: Final = frozenset({PODS})
"""Scalars skipped by :meth:`Resource.is_empty` and the dimension-filtered comparisons."""


class DimensionDefault(enum.Enum):
    """What a scalar key missing from one side means (Volcano ``DimensionDefaultValue``)."""

    ZERO = 0
    """A missing dimension holds nothing."""
    INFINITY = -1
    """A missing dimension is unlimited."""


ZERO: Final = DimensionDefault.ZERO
INFINITY: Final = DimensionDefault.INFINITY


def _minus(left: Amount, right: Amount) -> Amount:
    """``left - right`` where unlimited minus unlimited is 0, as Volcano's MAXF - MAXF is."""
    result = left - right
    return 0 if result != result else result  # NaN only from inf - inf


def _times(value: Amount, ratio: float) -> Amount:
    result = value * ratio
    return 0 if result != result else result  # NaN only from inf * 0


@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class Resource:
    """An immutable resource vector in the units of spec §1 (see the module docstring).

    ``Resource(milli_cpu=0, memory=0, scalars=None)`` accepts any scalar names (tests use
    ``rdma`` or ``gpu`` directly); use :meth:`from_resource_list` for Kubernetes maps, which
    applies Volcano's name rules. Equality is by value and distinguishes ``scalars=None`` from an
    empty mapping and a missing key from a key holding 0, because the comparisons do.
    """

    milli_cpu: Amount = 0
    memory: Amount = 0
    scalars: Mapping[str, Amount] | None = None

    def __post_init__(self) -> None:
        for name, value in (("milli_cpu", self.milli_cpu), ("memory", self.memory)):
            _check_amount(name, value)
        if self.scalars is not None:
            scalars = dict(self.scalars)  # our own copy: the caller's dict may change later
            for name, value in scalars.items():
                if not isinstance(name, str) or not name:
                    raise ValueError(f"Resource scalar name must be a non-empty string: {name!r}")
                _check_amount(f"scalars[{name!r}]", value)
            object.__setattr__(self, "scalars", scalars)

    # -- construction ------------------------------------------------------------------------

    @classmethod
    def _trusted(
        cls, milli_cpu: Amount, memory: Amount, scalars: Mapping[str, Amount] | None
    ) -> Resource:
        """Build without validation or copying: for core code whose inputs are already vectors."""
        return _make(milli_cpu, memory, scalars)

    @classmethod
    def infinite(cls) -> Resource:
        """Volcano's ``InfiniteResource``: unlimited CPU and memory, ``scalars=None``."""
        return INFINITE

    @classmethod
    def from_resource_list(
        cls, resource_list: Mapping[str, str | int | float], *, field: str = ""
    ) -> Resource:
        """Build a vector from a Kubernetes resource map, by Volcano's ``NewResource`` rules.

        ``cpu`` in milli-CPU; ``memory`` in bytes (rounded up); ``pods`` as a plain count;
        ``ephemeral-storage``, ``hugepages-*``, ``attachable-volumes-*``, ``kubernetes.io/``
        native names and valid extended resources (``nvidia.com/gpu``) in milli-units; names
        starting with ``count/`` and every other name (unprefixed ``gpu``, ``rdma``) are dropped
        silently. An empty map gives ``scalars=None``. A malformed quantity raises
        :class:`errors.QuantityError` naming ``field["name"]``. Numbers (YAML ``cpu: 2``) are
        read as their decimal spelling.
        """
        milli_cpu = 0
        memory = 0
        scalars: dict[str, Amount] | None = None
        for name, raw in resource_list.items():
            path = f'{field}["{name}"]' if field else f'["{name}"]'
            quantity = quantities.parse(_quantity_text(raw, path), field=path)
            if name == CPU:
                milli_cpu += quantities.to_milli(quantity)
            elif name == MEMORY:
                memory += quantities.to_value(quantity)
            elif name == PODS:
                scalars = {} if scalars is None else scalars
                scalars[name] = scalars.get(name, 0) + quantities.to_value(quantity)
            elif name.startswith("count/"):
                continue
            elif name == "ephemeral-storage" or is_scalar_resource_name(name):
                scalars = {} if scalars is None else scalars
                scalars[name] = scalars.get(name, 0) + quantities.to_milli(quantity)
        return _make(milli_cpu, memory, scalars)

    # -- accessors ---------------------------------------------------------------------------

    def get(self, name: str) -> Amount:
        """The amount of ``name``; a scalar that is absent (or ``scalars=None``) reads as 0."""
        if name == CPU:
            return self.milli_cpu
        if name == MEMORY:
            return self.memory
        scalars = self.scalars
        return scalars.get(name, 0) if scalars else 0

    def resource_names(self) -> list[str]:
        """Names whose amount is at least ``EPS``: cpu, memory, then scalars (``pods`` included)."""
        names = []
        if self.milli_cpu >= EPS:
            names.append(CPU)
        if self.memory >= EPS:
            names.append(MEMORY)
        if self.scalars:
            names.extend(name for name, value in self.scalars.items() if value >= EPS)
        return names

    def is_empty(self) -> bool:
        """True when every amount is below ``EPS``, ignoring ``pods`` (negative counts as empty)."""
        if self.milli_cpu >= EPS or self.memory >= EPS:
            return False
        if self.scalars:
            for name, value in self.scalars.items():
                if value >= EPS and name not in IGNORED_SCALAR_RESOURCES:
                    return False
        return True

    def is_zero(self, name: str) -> bool:
        """True when ``name`` is below ``EPS``; any scalar is zero when ``scalars`` is None.

        A scalar ``name`` absent from a non-None mapping raises :class:`errors.UnknownResourceError`
        (Volcano asserts there).
        """
        if name == CPU:
            return self.milli_cpu < EPS
        if name == MEMORY:
            return self.memory < EPS
        if self.scalars is None:
            return True
        if name not in self.scalars:
            raise errors.UnknownResourceError(name, resource=format_human(self))
        return self.scalars[name] < EPS

    # -- arithmetic --------------------------------------------------------------------------

    def __add__(self, other: Resource) -> Resource:
        """Add per dimension; ``scalars`` stays None when ``other`` has no scalar keys.

        Unlimited plus anything is unlimited.
        """
        if other.__class__ is not Resource:
            return NotImplemented
        left = self.scalars
        right = other.scalars
        if not right:
            scalars = left
        elif left is None:
            scalars = right  # shared, never mutated
        else:
            merged = dict(left)
            get = merged.get
            for name, value in right.items():
                merged[name] = get(name, 0) + value
            scalars = merged
        return _make(self.milli_cpu + other.milli_cpu, self.memory + other.memory, scalars)

    def __sub__(self, other: Resource) -> Resource:
        """Subtract after checking ``other.less_equal(self, ZERO)`` (Volcano's asserting Sub).

        Raises :class:`errors.InsufficientResourceError` naming both operands when ``other`` does
        not fit. When ``self.scalars`` is None, ``other``'s scalars are ignored.
        """
        if other.__class__ is not Resource:
            return NotImplemented
        if not other.less_equal(self, ZERO):
            raise errors.InsufficientResourceError(
                minuend=format_human(self), subtrahend=format_human(other)
            )
        return self.sub_without_assert(other)

    def sub_without_assert(self, other: Resource) -> Resource:
        """Subtract per dimension without the fit check; results may be negative.

        When ``self.scalars`` is None, ``other``'s scalars are ignored (the result keeps None);
        otherwise a key only ``other`` has becomes negative. Unlimited minus unlimited is 0.
        """
        left = self.scalars
        right = other.scalars
        if left is None or not right:
            scalars = left
        else:
            merged = dict(left)
            get = merged.get
            for name, value in right.items():
                merged[name] = _minus(get(name, 0), value)
            scalars = merged
        return _make(
            _minus(self.milli_cpu, other.milli_cpu), _minus(self.memory, other.memory), scalars
        )

    def multi(self, ratio: float) -> Resource:
        """Every amount times ``ratio`` (floats may result); unlimited times 0 is 0."""
        scalars = self.scalars
        return _make(
            _times(self.milli_cpu, ratio),
            _times(self.memory, ratio),
            None if scalars is None else {k: _times(v, ratio) for k, v in scalars.items()},
        )

    def set_max_resource(self, other: Resource | None) -> Resource:
        """Per-dimension maximum (Volcano ``SetMaxResource``); ``other`` None returns ``self``.

        When ``self.scalars`` is None, ``other``'s scalars are taken as they are; otherwise each key
        of ``other`` is taken when absent here or larger.
        """
        if other is None:
            return self
        left = self.scalars
        right = other.scalars
        if left is None:
            scalars = right
        elif not right:
            scalars = left
        else:
            merged = dict(left)
            for name, value in right.items():
                if name not in merged or value > merged[name]:
                    merged[name] = value
            scalars = merged
        return _make(max(self.milli_cpu, other.milli_cpu), max(self.memory, other.memory), scalars)

    def min_dimension(self, other: Resource, default: DimensionDefault) -> Resource:
        """Per-dimension minimum over ``self``'s keys (Volcano ``MinDimensionResource``).

        CPU and memory take the minimum. With ``scalars=None`` here nothing else changes. A key of
        ``self`` absent from ``other`` (or ``other.scalars`` None) is kept under INFINITY and set to
        0 under ZERO. Keys only ``other`` has are ignored.
        """
        left = self.scalars
        cpu = min(self.milli_cpu, other.milli_cpu)
        memory = min(self.memory, other.memory)
        if left is None:
            return _make(cpu, memory, None)
        right = other.scalars
        scalars: dict[str, Amount] = {}
        for name, value in left.items():
            if right is not None and name in right:
                scalars[name] = min(value, right[name])
            else:
                scalars[name] = value if default is INFINITY else 0
        return _make(cpu, memory, scalars)

    def diff(self, other: Resource, default: DimensionDefault) -> tuple[Resource, Resource]:
        """``(increased, decreased)``: what ``self`` has above and below ``other``, per dimension.

        CPU and memory: the positive difference goes to one side, 0 to the other. Scalars (the
        union of keys; both results always have a non-None mapping): a key missing from one side
        reads as ``default``; under INFINITY a key missing from ``self`` gives
        ``increased[key] = UNLIMITED`` and one missing from ``other`` gives
        ``decreased[key] = UNLIMITED`` (Volcano writes the marker -1 there). Otherwise the
        positive difference goes to ``increased`` when ``self`` is larger, else to ``decreased``,
        so equal keys appear in ``decreased`` with 0.
        """
        inc_cpu: Amount = 0
        dec_cpu: Amount = 0
        inc_mem: Amount = 0
        dec_mem: Amount = 0
        if self.milli_cpu > other.milli_cpu:
            inc_cpu = self.milli_cpu - other.milli_cpu
        else:
            dec_cpu = _minus(other.milli_cpu, self.milli_cpu)
        if self.memory > other.memory:
            inc_mem = self.memory - other.memory
        else:
            dec_mem = _minus(other.memory, self.memory)
        left = self.scalars or {}
        right = other.scalars or {}
        increased: dict[str, Amount] = {}
        decreased: dict[str, Amount] = {}
        names = list(left)
        names.extend(name for name in right if name not in left)
        for name in names:
            if default is INFINITY and name not in left:
                increased[name] = UNLIMITED
            elif default is INFINITY and name not in right:
                decreased[name] = UNLIMITED
            else:
                lv = left.get(name, 0)
                rv = right.get(name, 0)
                if lv > rv:
                    increased[name] = lv - rv
                else:
                    decreased[name] = _minus(rv, lv)
        return _make(inc_cpu, inc_mem, increased), _make(dec_cpu, dec_mem, decreased)

    # -- the nine comparisons ----------------------------------------------------------------

    def less(self, other: Resource, default: DimensionDefault) -> bool:
        """Every dimension strictly smaller (no tolerance).

        CPU and memory always count. Scalars: under INFINITY a key only ``other`` has makes it
        False, and a key only ``self`` has is skipped; under ZERO a key only ``self`` has compares
        with 0, and keys only ``other`` has are ignored.
        """
        if not (self.milli_cpu < other.milli_cpu and self.memory < other.memory):
            return False
        left = self.scalars
        right = other.scalars
        if default is INFINITY:
            # Every key of ``other`` must be one of ``self``'s: a missing one is infinite.
            if right and (not left or not right.keys() <= left.keys()):
                return False
            if left and right:
                for name, value in left.items():
                    bound = right.get(name)
                    if bound is not None and not value < bound:
                        return False
            return True
        if left:
            if right:
                get = right.get
                for name, value in left.items():
                    if not value < get(name, 0):
                        return False
            else:
                for value in left.values():
                    if not value < 0:
                        return False
        return True

    def less_equal(self, other: Resource, default: DimensionDefault) -> bool:
        """Every dimension smaller or equal within ``EPS``; missing keys as in :meth:`less`.

        ``pods`` counts. This is the hot "does it fit" test (``request.less_equal(idle, ZERO)``).
        """
        # Inlined _le: this is the hottest comparison of the scheduling engine.
        mine = self.milli_cpu
        bound = other.milli_cpu
        if not (mine <= bound or mine - bound < EPS):
            return False
        mine = self.memory
        bound = other.memory
        if not (mine <= bound or mine - bound < EPS):
            return False
        left = self.scalars
        right = other.scalars
        if default is INFINITY:
            # Every key of ``other`` must be one of ``self``'s: a missing one is infinite.
            if right and (not left or not right.keys() <= left.keys()):
                return False
            if left and right:
                for name, value in left.items():
                    limit = right.get(name)
                    if limit is not None and not (value <= limit or value - limit < EPS):
                        return False
            return True
        if left:
            if right:
                get = right.get
                for name, value in left.items():
                    limit = get(name, 0)
                    if not (value <= limit or value - limit < EPS):
                        return False
            else:
                for value in left.values():
                    if not (value <= 0 or value < EPS):
                        return False
        return True

    def less_partly(self, other: Resource, default: DimensionDefault) -> bool:
        """Some dimension strictly smaller (no tolerance).

        Under ZERO a key only ``other`` has makes it True, even when ``other`` holds 0 there
        (spec §7 item 10). Under INFINITY a key only ``self`` has makes it True.
        """
        if self.milli_cpu < other.milli_cpu or self.memory < other.memory:
            return True
        return self._scalars_partly(other, default, strict=True)

    def less_equal_partly(self, other: Resource, default: DimensionDefault) -> bool:
        """Some dimension smaller or equal within ``EPS``; missing keys as :meth:`less_partly`."""
        if _le(self.milli_cpu, other.milli_cpu) or _le(self.memory, other.memory):
            return True
        return self._scalars_partly(other, default, strict=False)

    def _scalars_partly(self, other: Resource, default: DimensionDefault, *, strict: bool) -> bool:
        left = self.scalars
        right = other.scalars
        if default is ZERO and right and (not left or not right.keys() <= left.keys()):
            return True
        if left:
            for name, value in left.items():
                bound = right.get(name) if right else None
                if bound is None:
                    if default is INFINITY:
                        return True
                    bound = 0
                if value < bound or (not strict and (value <= bound or value - bound < EPS)):
                    return True
        return False

    def equal(self, other: Resource, default: DimensionDefault) -> bool:
        """Equal within ``EPS`` on CPU, memory and the keys of ``self`` (absent in ``other``: 0).

        Keys only ``other`` has are ignored, so this is not symmetric (spec §7 item 10); ``default``
        is accepted for the uniform signature and unused, as in Volcano.
        """
        del default
        if not (_close(self.milli_cpu, other.milli_cpu) and _close(self.memory, other.memory)):
            return False
        left = self.scalars
        if left:
            right = other.scalars or _EMPTY
            for name, value in left.items():
                if not _close(value, right.get(name, 0)):
                    return False
        return True

    def greater(self, other: Resource, default: DimensionDefault) -> bool:
        """Every dimension larger: ``not self.less_equal_partly(other, default)``."""
        return not self.less_equal_partly(other, default)

    def greater_equal(self, other: Resource, default: DimensionDefault) -> bool:
        """Every dimension larger or equal: ``not self.less_partly(other, default)``."""
        return not self.less_partly(other, default)

    def greater_partly(self, other: Resource, default: DimensionDefault) -> bool:
        """Some dimension larger: ``not less_equal_with_names(other, default)[0]``.

        See :meth:`greater_partly_with_names` for the names of those dimensions.
        """
        return not self.less_equal_with_names(other, default)[0]

    def greater_partly_with_names(
        self, other: Resource, default: DimensionDefault
    ) -> tuple[bool, list[str]]:
        """Volcano's ``GreaterPartly``: negates :meth:`less_equal_with_names`, same names."""
        fits, names = self.less_equal_with_names(other, default)
        return not fits, names

    def greater_equal_partly(self, other: Resource, default: DimensionDefault) -> bool:
        """Some dimension larger or equal: ``not self.less(other, default)``."""
        return not self.less(other, default)

    def less_equal_with_names(
        self, other: Resource, default: DimensionDefault
    ) -> tuple[bool, list[str]]:
        """Like :meth:`less_equal`, also naming every dimension that does not fit.

        Names: ``cpu``, ``memory``, then scalar keys of ``self`` in order. Unlike
        :meth:`less_equal`, keys only ``other`` has are never checked, even under INFINITY
        (spec §7 item 10). Returns ``(not names, names)``.
        """
        names: list[str] = []
        if not _le(self.milli_cpu, other.milli_cpu):
            names.append(CPU)
        if not _le(self.memory, other.memory):
            names.append(MEMORY)
        left = self.scalars
        if left:
            right = other.scalars or _EMPTY
            for name, value in left.items():
                bound = right.get(name)
                if bound is None:
                    if default is INFINITY:
                        continue
                    bound = 0
                if not _le(value, bound):
                    names.append(name)
        return not names, names

    # -- dimension-filtered comparisons (spec §1.4) ------------------------------------------

    def less_equal_with_dimension_and_names(
        self, other: Resource | None, request: Resource | None
    ) -> tuple[bool, list[str]]:
        """Does ``self`` fit in ``other`` on the dimensions ``request`` uses? (strict, no EPS).

        ``other`` None: ``(False, self.resource_names())``. ``request`` None:
        :meth:`less_equal_with_names` with ZERO. Otherwise CPU/memory are checked when the request
        is positive there, and each positive scalar of the request except ``pods``, in request
        order, but only when ``self.scalars`` is not None; a key ``other`` lacks counts as 0
        capacity (spec §7 item 7). ``self`` above ``other`` (strictly) names the dimension.
        """
        if other is None:
            return False, self.resource_names()
        if request is None:
            return self.less_equal_with_names(other, ZERO)
        names: list[str] = []
        if request.milli_cpu > 0 and self.milli_cpu > other.milli_cpu:
            names.append(CPU)
        if request.memory > 0 and self.memory > other.memory:
            names.append(MEMORY)
        left = self.scalars
        if left is None:
            return not names, names
        wanted = request.scalars
        if wanted:
            right = other.scalars or _EMPTY
            for name, amount in wanted.items():
                if name in IGNORED_SCALAR_RESOURCES or not amount > 0:
                    continue
                if left.get(name, 0) > right.get(name, 0):
                    names.append(name)
        return not names, names

    def less_equal_partly_with_dimension(
        self, other: Resource, request: Resource | None
    ) -> tuple[bool, list[str]]:
        """Dimensions the request uses (positive, ``pods`` skipped) where ``self`` ≤ ``other``
        within ``EPS``: ``(found, names)``. ``request`` None: ``(False, [])``.
        """
        return self._partly_with_dimension(other, request, zero_filtered=False)

    def less_equal_partly_with_dimension_zero_filtered(
        self, other: Resource, request: Resource | None
    ) -> tuple[bool, list[str]]:
        """:meth:`less_equal_partly_with_dimension` on the request's dimensions where ``self`` or
        ``other`` holds at least ``EPS`` (a dimension both lack cannot vouch for anything).
        """
        return self._partly_with_dimension(other, request, zero_filtered=True)

    def _partly_with_dimension(
        self, other: Resource, request: Resource | None, *, zero_filtered: bool
    ) -> tuple[bool, list[str]]:
        if request is None:
            return False, []
        names: list[str] = []
        mine, bound = self.milli_cpu, other.milli_cpu
        if (
            request.milli_cpu > 0
            and not (zero_filtered and mine < EPS and bound < EPS)
            and (mine <= bound or mine - bound < EPS)
        ):
            names.append(CPU)
        mine, bound = self.memory, other.memory
        if (
            request.memory > 0
            and not (zero_filtered and mine < EPS and bound < EPS)
            and (mine <= bound or mine - bound < EPS)
        ):
            names.append(MEMORY)
        if request.scalars:
            left = self.scalars or _EMPTY
            right = other.scalars or _EMPTY
            for name, wanted in request.scalars.items():
                if name in IGNORED_SCALAR_RESOURCES or not wanted > 0:
                    continue
                mine = left.get(name, 0)
                bound = right.get(name, 0)
                if zero_filtered and mine < EPS and bound < EPS:
                    continue
                if mine <= bound or mine - bound < EPS:
                    names.append(name)
        return bool(names), names

    def greater_partly_with_dimension(
        self, other: Resource | None, request: Resource | None
    ) -> tuple[bool, list[str]]:
        """Dimensions the request uses (positive, ``pods`` skipped) where ``self`` > ``other``
        (strict): ``(found, names)``. ``request`` None: ``(False, [])``; ``other`` None reads as
        an empty vector.
        """
        return self._greater_partly(other, request, relevant_only=False)

    def greater_partly_with_relevant_dimensions(
        self, other: Resource | None, request: Resource | None
    ) -> tuple[bool, list[str]]:
        """:meth:`greater_partly_with_dimension` on the request's dimensions that ``other`` has:
        CPU/memory when ``other`` holds at least ``EPS``, a scalar when it is a *key* of
        ``other.scalars`` (even holding 0). ``request`` None: ``(False, [])``; ``other`` None
        reads as an empty vector.
        """
        return self._greater_partly(other, request, relevant_only=True)

    def _greater_partly(
        self, other: Resource | None, request: Resource | None, *, relevant_only: bool
    ) -> tuple[bool, list[str]]:
        if request is None:
            return False, []
        if other is None:
            other = EMPTY
        names: list[str] = []
        if (
            request.milli_cpu > 0
            and not (relevant_only and other.milli_cpu < EPS)
            and self.milli_cpu > other.milli_cpu
        ):
            names.append(CPU)
        if (
            request.memory > 0
            and not (relevant_only and other.memory < EPS)
            and self.memory > other.memory
        ):
            names.append(MEMORY)
        if request.scalars:
            left = self.scalars or _EMPTY
            right = other.scalars or _EMPTY
            for name, wanted in request.scalars.items():
                if name in IGNORED_SCALAR_RESOURCES or not wanted > 0:
                    continue
                if relevant_only and name not in right:
                    continue
                if left.get(name, 0) > right.get(name, 0):
                    names.append(name)
        return bool(names), names

    # -- printing ----------------------------------------------------------------------------

    def debug_string(self) -> str:
        """Volcano's ``String()``: ``cpu 2000.00, memory 4096.00, nvidia.com/gpu 1000.00``.

        Raw units; unlimited prints ``maxFloat`` for CPU/memory and ``maxInt`` for scalars
        (Volcano's MAXF/MAXI). For logs and tests; messages use :func:`format_human`.
        """
        parts = [
            f"cpu {_debug_amount(self.milli_cpu, 'maxFloat')}",
            f"memory {_debug_amount(self.memory, 'maxFloat')}",
        ]
        if self.scalars:
            parts.extend(
                f"{name} {_debug_amount(self.scalars[name], 'maxInt')}"
                for name in sorted(self.scalars)
            )
        return ", ".join(parts)

    def __str__(self) -> str:
        return format_human(self)

    # -- identity ----------------------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not Resource:
            return NotImplemented
        assert isinstance(other, Resource)
        return (
            self.milli_cpu == other.milli_cpu
            and self.memory == other.memory
            and self.scalars == other.scalars
        )

    def __hash__(self) -> int:
        # Computed on demand, never at construction: the hot path builds vectors it never hashes.
        # (Not cached: a cache slot would have to be a dataclass field, visible to asdict/copy.)
        scalars = self.scalars
        return hash(
            (self.milli_cpu, self.memory, None if scalars is None else frozenset(scalars.items()))
        )


# Slot setters bypass the frozen __setattr__: the fast, trusted construction path.
_NEW = object.__new__
_SET_CPU: Callable[[Resource, Amount], None] = Resource.__dict__["milli_cpu"].__set__
_SET_MEMORY: Callable[[Resource, Amount], None] = Resource.__dict__["memory"].__set__
_SET_SCALARS: Callable[[Resource, Mapping[str, Amount] | None], None] = Resource.__dict__[
    "scalars"
].__set__


def _make(milli_cpu: Amount, memory: Amount, scalars: Mapping[str, Amount] | None) -> Resource:
    """Build a vector trusting its inputs (no checks, no copy): the hot path."""
    resource: Resource = _NEW(Resource)
    _SET_CPU(resource, milli_cpu)
    _SET_MEMORY(resource, memory)
    _SET_SCALARS(resource, scalars)
    return resource


_EMPTY: Final[Mapping[str, Amount]] = {}

EMPTY: Final = _make(0, 0, None)
"""Volcano's ``EmptyResource()``: all zero, ``scalars=None``."""

INFINITE: Final = _make(UNLIMITED, UNLIMITED, None)
"""Volcano's ``InfiniteResource()``: unlimited CPU and memory, ``scalars=None``."""


def _check_amount(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"Resource.{name} must be an int or float, got {value!r}")
    if value != value or value == -math.inf:
        raise ValueError(f"Resource.{name} must be a number or +infinity, got {value!r}")


def _le(left: Amount, right: Amount) -> bool:
    """Volcano's tolerant ≤: ``left < right or |left - right| < EPS`` (unlimited ≤ unlimited)."""
    return left <= right or left - right < EPS


def _close(left: Amount, right: Amount) -> bool:
    """Equal within ``EPS`` (unlimited equals unlimited)."""
    return left == right or abs(left - right) < EPS


def _debug_amount(value: Amount, unlimited: str) -> str:
    return unlimited if value == UNLIMITED else f"{value:.2f}"


def _quantity_text(raw: object, path: str) -> str:
    if isinstance(raw, str):
        return raw
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        return repr(raw)
    raise errors.QuantityError(
        repr(raw), field=path, reason="a quantity must be a string or number"
    )


# -- Kubernetes resource names (k8s.io/kubernetes pkg/apis/core/helper) -------------------------

_QUALIFIED_NAME: Final = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]", re.ASCII)
_DNS_SUBDOMAIN: Final = re.compile(
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*", re.ASCII
)


def is_qualified_name(name: str) -> bool:
    """Kubernetes ``IsQualifiedName``: ``[prefix/]name``; prefix a DNS subdomain, name ≤ 63."""
    prefix, slash, local = name.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix)):
        return False
    return 0 < len(local) <= 63 and _QUALIFIED_NAME.fullmatch(local) is not None


def is_extended_resource_name(name: str) -> bool:
    """An extended resource: has a domain outside ``kubernetes.io``, not ``requests.``-prefixed,
    and ``requests.<name>`` is a qualified name (``nvidia.com/gpu``, ``example.com/foo``).
    """
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False
    return is_qualified_name("requests." + name)


def is_scalar_resource_name(name: str) -> bool:
    """Kubernetes ``IsScalarResourceName``: extended, ``hugepages-*``, ``kubernetes.io/``-prefixed
    native, or ``attachable-volumes-*``. Unprefixed names (``gpu``, ``rdma``) are not.
    """
    return (
        is_extended_resource_name(name)
        or name.startswith(("hugepages-", "attachable-volumes-"))
        or "kubernetes.io/" in name
    )


# -- helpers over two vectors (Volcano pkg/scheduler/plugins/util and api helpers) -------------


def exceeded_part(left: Resource | None, right: Resource | None) -> Resource:
    """What ``left`` has above ``right``: ``left.diff(right, ZERO)`` increased part.

    ``right`` None returns ``left`` itself; ``left`` None returns :data:`EMPTY`. A scalar where
    ``left`` ≤ ``right`` is absent from the result (not present with 0).
    """
    if right is None:
        return EMPTY if left is None else left
    if left is None:
        return EMPTY
    return left.diff(right, ZERO)[0]


def intersection(first: Resource, second: Resource) -> list[str]:
    """Names present (≥ ``EPS``) in both, in ``first``'s order; ``pods`` counts."""
    theirs = set(second.resource_names())
    return [name for name in first.resource_names() if name in theirs]


def intersection_with_ignored_scalar_resources(first: Resource, second: Resource) -> list[str]:
    """:func:`intersection` without the ignored scalars (``pods``)."""
    return [n for n in intersection(first, second) if n not in IGNORED_SCALAR_RESOURCES]


def maximum(left: Resource, right: Resource) -> Resource:
    """Per-dimension maximum (Volcano ``helpers.Max``): scalars None only if both are None;
    otherwise the union of keys, negative amounts dropped.
    """
    cpu = max(left.milli_cpu, right.milli_cpu)
    memory = max(left.memory, right.memory)
    if left.scalars is None and right.scalars is None:
        return _make(cpu, memory, None)
    scalars: dict[str, Amount] = {}
    for name, value in (left.scalars or _EMPTY).items():
        if value >= 0:
            scalars[name] = value
    for name, value in (right.scalars or _EMPTY).items():
        if value >= 0:
            scalars[name] = max(value, scalars.get(name, 0))
    return _make(cpu, memory, scalars)


def minimum(left: Resource, right: Resource) -> Resource:
    """Per-dimension minimum (Volcano ``helpers.Min``): scalars only when both sides have a
    mapping, over ``left``'s keys, a key ``right`` lacks reading as 0.
    """
    cpu = min(left.milli_cpu, right.milli_cpu)
    memory = min(left.memory, right.memory)
    if left.scalars is None or right.scalars is None:
        return _make(cpu, memory, None)
    right_scalars = right.scalars
    return _make(cpu, memory, {k: min(v, right_scalars.get(k, 0)) for k, v in left.scalars.items()})


def share(part: Amount, whole: Amount) -> float:
    """Volcano ``helpers.Share``: ``part / whole``; a zero ``whole`` gives 0 when ``part`` is 0,
    else 1. Unlimited over unlimited is 1 (as MAXF/MAXF), anything finite over unlimited is 0.
    """
    if whole == 0:
        return 0.0 if part == 0 else 1.0
    if part == UNLIMITED and whole == UNLIMITED:
        return 1.0
    return part / whole


def sum_all(items: Iterable[Resource]) -> Resource:
    """The sum of ``items`` (:data:`EMPTY` for none)."""
    total = EMPTY
    for item in items:
        total = total + item
    return total


# -- human forms -------------------------------------------------------------------------------


def format_amount(name: str, value: Amount) -> str:
    """One dimension ``name`` of a vector as a canonical quantity: ``20`` and ``500m`` (cpu and
    other milli-unit dimensions), ``40Gi`` (memory), ``110`` (pods); ``unlimited``, and
    ``-unlimited`` after a subtraction without the fit check; a fractional amount (after
    :meth:`Resource.multi`) is rounded up to the unit of the vector."""
    if value == UNLIMITED:
        return "unlimited"
    if value == -UNLIMITED:  # unlimited taken from a finite amount (sub_without_assert, multi)
        return "-unlimited"
    whole = value if isinstance(value, int) else math.ceil(value)
    if name == MEMORY:
        return quantities.format_bytes(whole)
    if name == PODS:
        return str(whole)
    return quantities.format_milli(whole)


def format_human(resource: Resource) -> str:
    """``cpu 9, memory 18Gi, nvidia.com/gpu 2``: canonical quantities, never raw milli-units.

    CPU and memory always, then scalars sorted by name; unlimited prints ``unlimited`` (and
    ``-unlimited`` after a subtraction without the fit check); a fractional amount (after
    :meth:`Resource.multi`) is rounded up to the unit of the vector.
    """
    parts = [
        f"cpu {format_amount(CPU, resource.milli_cpu)}",
        f"memory {format_amount(MEMORY, resource.memory)}",
    ]
    if resource.scalars:
        scalars = resource.scalars
        parts.extend(f"{name} {format_amount(name, scalars[name])}" for name in sorted(scalars))
    return ", ".join(parts)


def to_resource_list(resource: Resource) -> dict[str, str]:
    """The Kubernetes quantity map of ``resource`` (inverse of :meth:`Resource.from_resource_list`).

    ``cpu`` and ``memory`` always (``"0"`` included), then scalars sorted by name; ``pods`` as a
    count, other scalars from milli-units. Unlimited dimensions are omitted (negative unlimited,
    after :meth:`Resource.sub_without_assert`, too): a Kubernetes map has no spelling for them,
    and a missing capability dimension means "no limit".
    """
    result: dict[str, str] = {}
    if not math.isinf(resource.milli_cpu):
        result[CPU] = format_amount(CPU, resource.milli_cpu)
    if not math.isinf(resource.memory):
        result[MEMORY] = format_amount(MEMORY, resource.memory)
    if resource.scalars:
        scalars = resource.scalars
        for name in sorted(scalars):
            if not math.isinf(scalars[name]):
                result[name] = format_amount(name, scalars[name])
    return result
