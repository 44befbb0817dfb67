"""The CEL ``matchConditions`` of admission webhooks, evaluated as kube-apiserver does.

kube-apiserver calls a webhook whose rules and selectors match only if its match conditions
allow it: each condition's ``expression`` sees ``object``, ``oldObject`` (null where the
operation has none) and ``request`` (the AdmissionRequest, without the objects), and must be a
boolean.

- any condition false: the webhook is skipped, even if another one failed to evaluate;
- all true: the webhook is called;
- otherwise (an evaluation error and no false): under ``failurePolicy: Fail`` the request is
  rejected, under ``Ignore`` the webhook is skipped.

Expressions are compiled when a configuration is written (a syntax error is a 422) and cached.
The evaluator is cel-python, a complete CEL implementation without kube-apiserver's type
checker: an expression that kube-apiserver refuses for its types (comparing a string with an
int, a field the schema lacks) fails here only when evaluated, and kube-apiserver's own CEL
library functions (``authorizer``, ``quantity()``, ``url()``, ...) are not defined
(kubesim/README.md).
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import celpy
from celpy import adapter, celparser, celtypes, evaluation

MAX_CONDITIONS = 64
"""kube-apiserver refuses a webhook with more match conditions."""


class CompileError(ValueError):
    """The expression is not CEL."""


class EvaluationError(RuntimeError):
    """A condition could not be evaluated to a boolean; the message names it."""


@dataclasses.dataclass(frozen=True, slots=True)
class Decision:
    """What the match conditions of one webhook say for one request."""

    matches: bool
    error: str = ""
    """Why no decision was reached (the first condition that failed to evaluate, as
    kube-apiserver words it); set only when ``matches`` is False for want of one."""


_environment = celpy.Environment()
_lock = threading.Lock()  # cel-python's compiler keeps parser state


@functools.lru_cache(maxsize=512)
def _program(expression: str) -> celpy.Runner:
    with _lock:
        try:
            ast = _environment.compile(expression)
        except celparser.CELParseError as exc:
            # cel-python shows the source with a caret under the error: say where, as cel-go's
            # "ERROR: <input>:LINE:COLUMN: Syntax error" does (without its explanation).
            lines = str(exc).rstrip("\n").splitlines()
            column = lines[-1].find("^") + 1 if lines and "^" in lines[-1] else 0
            raise CompileError(f"ERROR: <input>:1:{column}: Syntax error") from None
        return _environment.program(ast)


def compile_error(expression: str) -> str | None:
    """Why ``expression`` does not compile, or None."""
    try:
        _program(expression)
    except CompileError as exc:
        return str(exc)
    return None


def _activation(
    obj: Mapping[str, Any] | None,
    old_obj: Mapping[str, Any] | None,
    request: Mapping[str, Any],
) -> dict[str, Any]:
    return {
        "object": adapter.json_to_cel(dict(obj)) if obj is not None else None,
        "oldObject": adapter.json_to_cel(dict(old_obj)) if old_obj is not None else None,
        "request": adapter.json_to_cel(dict(request)),
    }


def evaluate(
    conditions: Sequence[Mapping[str, Any]],
    *,
    obj: Mapping[str, Any] | None,
    old_obj: Mapping[str, Any] | None,
    request: Mapping[str, Any],
) -> Decision:
    """Whether a webhook with ``conditions`` is to be called (see the module docstring)."""
    if not conditions:
        return Decision(matches=True)
    activation = _activation(obj, old_obj, request)
    failures = []
    for condition in conditions:
        expression = str(condition.get("expression", ""))
        try:
            # object: cel-python may also return an error as a value instead of raising it.
            value: object = _program(expression).evaluate(activation)
        except (CompileError, evaluation.CELEvalError) as exc:
            value = exc
        if isinstance(value, (CompileError, evaluation.CELEvalError)):
            failures.append(f"expression '{expression}' resulted in error: {_reason(value)}")
        elif not isinstance(value, celtypes.BoolType):
            failures.append(
                f"expression '{expression}' resulted in error: expected bool, "
                f"got {type(value).__name__}"
            )
        elif not value:
            return Decision(matches=False)
    if failures:
        return Decision(matches=False, error=failures[0])
    return Decision(matches=True)


def _reason(error: Exception) -> str:
    """cel-go's words where cel-python's error says enough to rebuild them
    (``no such key: absent``)."""
    args = error.args
    if len(args) == 3 and args[1] is KeyError and args[2]:
        return f"{args[0]}: {args[2][0]}"
    return str(args[0]) if args else str(error)
