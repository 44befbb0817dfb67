"""Dense resource vectors for the inner loops of one session.

A session converts every :class:`queuetree.core.resources.Resource` it reads once, at session
open, into a :data:`Vec`: a list of numbers indexed by the session's :class:`Dims` (``cpu`` at 0,
``memory`` at 1, then every scalar name seen anywhere in the snapshot, sorted). The capacity
policy then compares and accumulates plain lists, which keeps per-pod work to a handful of float
operations (the benchmark target of 100,000 pods per second needs that).

Semantics are those of spec §1.4 for the comparisons the session uses; a scalar key missing from
a ``Resource`` is 0 here. Where Volcano's result depends on whether a key is *present* (only
``GreaterPartlyWithRelevantDimensions`` and capability inheritance), callers keep the set of
present indices next to the vector (see :class:`Presence`).

Units are those of ``resources``: milli-CPU, bytes, milli-units for scalars, a plain count for
``pods``. Vectors are mutable on purpose and never leave the session: results are converted back
with :meth:`Dims.to_resource`.

Why two types for one thing. :class:`resources.Resource` is the contract (immutable, exact integers,
a scalar key either present or absent, the nine comparisons of spec §1.4); a :data:`Vec` is its
session-local, dense, mutable float form, which only the capacity policy's inner loops use, where a
new immutable vector per operation would cost more than the work itself
(``benchmarks/bench_session.py`` measures it). Two types, then, but their facts are shared: the
tolerance, the infinity and the resource names are ``resources``' own (:data:`EPS`, :data:`MAXF`,
:data:`MAXI` and :data:`PODS` below are those values), and :data:`CPU` and :data:`MEMORY` here are
the *indices* of ``resources.CPU`` and ``resources.MEMORY`` in every :class:`Dims`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping

from queuetree.core import quantities, resources

Vec = list[float]
"""A dense vector over a session's :class:`Dims`; index 0 is milli-CPU, 1 is bytes of memory."""

EPS = resources.EPS
"""Volcano's ``minResource``: the tolerance of the tolerant comparisons (``resources.EPS``)."""
MAXF = resources.UNLIMITED
"""Volcano's infinite CPU and memory (float64 max): ``resources.UNLIMITED``, the one infinity."""
MAXI = resources.UNLIMITED
"""Volcano's infinite scalar (int64 max); the same infinity."""

CPU = 0
"""The index of ``resources.CPU`` (milli-CPU) in every vector."""
MEMORY = 1
"""The index of ``resources.MEMORY`` (bytes) in every vector."""
PODS = resources.PODS


@dataclasses.dataclass(frozen=True, slots=True)
class Dims:
    """The dimensions of one session: cpu, memory, then the sorted scalar names."""

    names: tuple[str, ...]
    index: Mapping[str, int]
    pods: int
    """Index of the ``pods`` scalar, or -1 when no object mentions it."""
    formatted: dict[tuple[int, float], str] = dataclasses.field(
        default_factory=dict, compare=False, repr=False
    )
    """:meth:`format_value`'s answers so far (a session's explanations repeat a few figures
    across thousands of refusals; a Dims lives for one session)."""

    @classmethod
    def of(cls, scalar_names: Iterable[str]) -> Dims:
        dense = (resources.CPU, resources.MEMORY)
        names = (*dense, *sorted(set(scalar_names) - set(dense)))
        index = {name: position for position, name in enumerate(names)}
        return cls(names=names, index=index, pods=index.get(PODS, -1))

    @property
    def size(self) -> int:
        return len(self.names)

    def zero(self) -> Vec:
        return [0.0] * len(self.names)

    def vec(self, resource: resources.Resource | None) -> Vec:
        """The dense form of ``resource`` (None reads as empty); unknown names raise KeyError."""
        out = [0.0] * len(self.names)
        if resource is None:
            return out
        out[CPU] = float(resource.milli_cpu)
        out[MEMORY] = float(resource.memory)
        if resource.scalars:
            index = self.index
            for name, value in resource.scalars.items():
                out[index[name]] = float(value)
        return out

    def present(self, resource: resources.Resource | None) -> frozenset[int]:
        """Indices of the scalar keys ``resource`` carries (cpu and memory are never "present")."""
        if resource is None or not resource.scalars:
            return frozenset()
        return frozenset(self.index[name] for name in resource.scalars)

    def to_resource(self, vec: Vec, *, keys: Iterable[int] | None = None) -> resources.Resource:
        """Back to a ``Resource``: scalars for ``keys`` (default: every non-zero scalar)."""
        if keys is None:
            keys = [i for i in range(2, len(vec)) if vec[i] != 0]
        scalars = {self.names[i]: _integral(vec[i]) for i in sorted(keys) if i >= 2}
        return resources.Resource(
            milli_cpu=_integral(vec[CPU]),
            memory=_integral(vec[MEMORY]),
            scalars=scalars or None,
        )

    def format_value(self, i: int, value: float) -> str:
        """One figure in canonical Kubernetes form: ``1500m``, ``18Gi``, GPUs as counts."""
        text = self.formatted.get((i, value))
        if text is None:
            if value >= MAXI:
                text = "unlimited"
            elif i == MEMORY:
                text = quantities.format_bytes(round(value))
            elif i == self.pods:
                text = str(round(value))
            else:
                text = quantities.format_milli(round(value))
            self.formatted[i, value] = text
        return text

    def format(self, vec: Vec) -> str:
        """``cpu 9, memory 18Gi, nvidia.com/gpu 2`` (zero scalars left out)."""
        parts = []
        for i, value in enumerate(vec):
            if i >= 2 and value == 0:
                continue
            parts.append(f"{self.names[i]} {self.format_value(i, value)}")
        return ", ".join(parts)


def _integral(value: float) -> resources.Amount:
    """Finite figures are integers in ``resources``; infinity stays ``resources.UNLIMITED``."""
    if value == math.inf:
        return resources.UNLIMITED
    return round(value)


def add(a: Vec, b: Vec) -> Vec:
    return [x + y for x, y in zip(a, b, strict=True)]


def sub(a: Vec, b: Vec) -> Vec:
    return [x - y for x, y in zip(a, b, strict=True)]


def iadd(a: Vec, b: Vec) -> None:
    for i, y in enumerate(b):
        if y:
            a[i] += y


def isub(a: Vec, b: Vec) -> None:
    for i, y in enumerate(b):
        if y:
            a[i] -= y


def exceeded(a: Vec, b: Vec) -> Vec:
    """``ExceededPart``: per dimension ``max(a - b, 0)``."""
    return [x - y if x > y else 0.0 for x, y in zip(a, b, strict=True)]


EXACT = 2.0**53
"""Below this, integral floats add exactly (every partial sum is a representable integer)."""


def repeat_add(base: float, step: float, times: int) -> float:
    """``base`` with ``step`` added ``times`` times, exactly as that many ``+=`` compute it: in
    one multiplication when every partial sum is an exactly representable integer (requests
    are integers: milli-CPU, bytes, counts), else by the additions themselves (a figure past
    2**53, or an infinite one)."""
    if times <= 0:
        return base
    if base % 1 == 0 and step % 1 == 0 and abs(base) + abs(step) * times < EXACT:
        return base + step * times
    for _ in range(times):
        base += step
    return base


def requested_dims(req: Vec, dims: Dims) -> tuple[int, ...]:
    """The dimensions a request needs: value > 0, never ``pods`` (spec §7.11)."""
    return tuple(i for i, value in enumerate(req) if value > 0 and i != dims.pods)


def is_empty(vec: Vec, dims: Dims) -> bool:
    """``IsEmpty``: every dimension below EPS, ``pods`` ignored."""
    return all(value < EPS for i, value in enumerate(vec) if i != dims.pods)


def names(vec: Vec) -> frozenset[int]:
    """``ResourceNames``: the dimensions with a value of at least EPS (``pods`` included)."""
    return frozenset(i for i, value in enumerate(vec) if value >= EPS)


def le(x: float, y: float) -> bool:
    """Volcano's tolerant ``<=``."""
    return x <= y or abs(x - y) < EPS


def less_equal_zero(left: Vec, right: Vec) -> bool:
    """``LessEqual(right, Zero)`` on dense vectors (missing keys are 0 on both sides)."""
    return all(le(x, y) for x, y in zip(left, right, strict=True))


def first_exceeding(used: Vec, limit: Vec, *, req_dims: tuple[int, ...]) -> int:
    """``LessEqualWithDimensionAndResourcesName``: the first requested dimension where
    ``used > limit`` (strict, no tolerance), or -1 when every requested dimension fits."""
    for i in req_dims:
        if used[i] > limit[i]:
            return i
    return -1


def partly_within_zero_filtered(used: Vec, limit: Vec, *, req: Vec, dims: Dims) -> bool:
    """``LessEqualPartlyWithDimensionZeroFiltered(limit, req)``: on at least one requested
    dimension, skipping those where both sides are below EPS, ``used <= limit`` (tolerant)."""
    for i, value in enumerate(req):
        if value <= 0 or i == dims.pods:
            continue
        if used[i] < EPS and limit[i] < EPS:
            continue
        if le(used[i], limit[i]):
            return True
    return False


def greater_on_relevant(
    used: Vec, deserved: Vec, *, deserved_keys: frozenset[int], req: Vec, dims: Dims
) -> bool:
    """``GreaterPartlyWithRelevantDimensions(deserved, req)``: cpu/memory count when the
    request needs them and deserved is at least EPS; a scalar counts when requested and a key of
    ``deserved`` (even with value 0); then ``used > deserved`` (strict) on any counted one."""
    for i, value in enumerate(req):
        if value <= 0 or i == dims.pods:
            continue
        if i < 2:
            if deserved[i] < EPS:
                continue
        elif i not in deserved_keys:
            continue
        if used[i] > deserved[i]:
            return True
    return False


def share(allocated: Vec, deserved: Vec, dims: Dims) -> float:
    """Spec §3.5: 1 for an empty deserved; else the largest ``allocated / deserved`` over the
    dimensions where deserved is at least EPS (``pods`` included)."""
    if is_empty(deserved, dims):
        return 1.0
    result = 0.0
    for a, d in zip(allocated, deserved, strict=True):
        if d >= EPS:
            value = a / d
            if value > result:
                result = value
        # d == 0 with a != 0 gives Share 1 in Volcano, but only names >= EPS are visited.
    return result
