"""The exception tree of the pure core.

Every error raised on purpose by ``queuetree.core`` derives from :class:`CoreError`, and also from
the built-in exception a Python caller would naturally catch for that kind of problem::

    CoreError
     ├── QuantityError(ValueError)             a malformed or out-of-range Kubernetes quantity
     ├── InsufficientResourceError(ArithmeticError)
     │                                         ``a - b`` where ``b`` does not fit in ``a``
     └── UnknownResourceError(LookupError)     a scalar resource asked for by name is absent

Messages name the object, the field and the offending value, so that they can be shown to a
person as they are (the webhook joins them into denial messages, the operator into events).
Other components may add classes here; keep this drawing current when they do.
"""

from __future__ import annotations


class CoreError(Exception):
    """Base class of every error the core raises on purpose."""


class QuantityError(CoreError, ValueError):
    """A Kubernetes quantity string that the API server would reject, or that queuetree refuses.

    ``text`` is the offending string, ``field`` the path it came from (``None`` when unknown),
    ``reason`` a short explanation.
    """

    def __init__(self, text: str, *, field: str | None, reason: str) -> None:
        self.text = text
        self.field = field
        self.reason = reason
        where = f" in {field}" if field else ""
        super().__init__(f"invalid quantity {text!r}{where}: {reason}")


class InsufficientResourceError(CoreError, ArithmeticError):
    """Subtracting a resource vector that does not fit in the minuend (Volcano's asserting Sub).

    ``minuend`` and ``subtrahend`` are the human forms of both operands.
    """

    def __init__(self, *, minuend: str, subtrahend: str) -> None:
        self.minuend = minuend
        self.subtrahend = subtrahend
        super().__init__(
            f"resource is not sufficient to do operation: <{minuend}> sub <{subtrahend}>"
        )


class UnknownResourceError(CoreError, LookupError):
    """A scalar name that is not a key of the vector's scalars (Volcano's IsZero asserts)."""

    def __init__(self, name: str, *, resource: str) -> None:
        self.name = name
        self.resource = resource
        super().__init__(f"unknown resource {name!r} in <{resource}>")
