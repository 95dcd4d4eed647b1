"""Checks of the public functions' arguments: one call at the top of each function.

``check_args("count_flops", spec=spec, batch=batch, seq_len=seq_len)`` checks each argument by its
name against one table of rules, so that every function taking a ``batch`` reads it the same way.
A wrong type is a TypeError, a value out of range a SpecError (a ValueError); both name the
function and the argument, and neither repeats more than a short excerpt of the value:

    count_params("gpt2")                  TypeError: count_params: spec must be a ModelSpec, got str 'gpt2';
                                          use archspec.preset('gpt2') or archspec.load_spec(path)
    count_flops(spec, seq_len="1024")     TypeError: count_flops: seq_len must be an int or None, got str '1024'
    count_flops(spec, batch=2.0)          TypeError: count_flops: batch must be an int, got float 2.0
    count_flops(spec, batch=0)            SpecError: count_flops: batch must be at least 1, got 0
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from archspec.core.errors import SpecError, shown
from archspec.core.limits import MAX_INTEGER_BITS, integer_too_large


def check_spec(obj: Any, fn: str, name: str = "spec") -> None:
    from archspec.spec.model import ModelSpec

    if isinstance(obj, ModelSpec):
        return
    hint = (
        f"; use archspec.preset({obj!r}) or archspec.load_spec(path)"
        if isinstance(obj, str) and len(obj) <= 80
        else "; use archspec.preset(name), archspec.load_spec(path) or archspec.ModelSpec(...)"
    )
    raise TypeError(f"{fn}: {name} must be a ModelSpec, got {_what(obj)}{hint}")


def check_int(name: str, value: Any, fn: str, minimum: int | None = None, optional: bool = False) -> None:
    """An int (not a bool, not a float, not a numpy integer whose arithmetic wraps around), at least `minimum`."""
    if value is None and optional:
        return
    if not (isinstance(value, int) or getattr(value, "archspec_whole", False)) or isinstance(value, bool):
        kind = "an int or None" if optional else "an int"
        hint = " (convert it with int())" if hasattr(value, "__index__") and not isinstance(value, bool) else ""
        raise TypeError(f"{fn}: {name} must be {kind}, got {_what(value)}{hint}")
    if minimum is not None and value < minimum:
        raise SpecError(f"{fn}: {name} must be at least {minimum}, got {shown(value)}")
    if value.bit_length() > MAX_INTEGER_BITS:
        raise SpecError(f"{fn}: {name}: {integer_too_large()}")


def check_bool(name: str, value: Any, fn: str) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"{fn}: {name} must be True or False, got {_what(value)}")


def check_text(name: str, value: Any, fn: str) -> None:
    if not isinstance(value, str):
        raise TypeError(f"{fn}: {name} must be a str, got {_what(value)}")


def check_real(
    name: str, value: Any, fn: str, *, above: float = 0.0, at_most: float | None = None, optional: bool = False
) -> None:
    """A finite real number (int, float or Fraction) greater than `above` and at most `at_most`."""
    if value is None and optional:
        return
    from decimal import Decimal
    from fractions import Fraction

    if isinstance(value, bool) or not isinstance(value, (int, float, Fraction, Decimal)):
        raise TypeError(f"{fn}: {name} must be a number, got {_what(value)}")
    if isinstance(value, (float, Decimal)) and not math.isfinite(value):
        raise SpecError(f"{fn}: {name} must be a finite number, got {value}")
    if isinstance(value, int) and value.bit_length() > MAX_INTEGER_BITS:
        raise SpecError(f"{fn}: {name}: {integer_too_large()}")
    if not value > above or (at_most is not None and value > at_most):
        bound = f"in ({above:g}, {at_most:g}]" if at_most is not None else f"greater than {above:g}"
        raise SpecError(f"{fn}: {name} must be {bound}, got {shown(value)}")


def _flop_count(value: Any, fn: str, name: str) -> None:
    if not hasattr(value, "training_per_token"):
        raise TypeError(f"{fn}: {name} must be a FlopCount (from archspec.count_flops), got {_what(value)}")


def _zero_stage(value: Any, fn: str, name: str) -> None:
    check_int(name, value, fn, minimum=0)
    if value > 3:
        raise SpecError(f"{fn}: {name} must be 0, 1, 2 or 3, got {shown(value)}")


# The rule for each argument name that the public functions share.
RULES: dict[str, Callable[[Any, str, str], None]] = {
    "spec": lambda v, fn, n: check_spec(v, fn, n),
    "batch": lambda v, fn, n: check_int(n, v, fn, minimum=1),
    "seq_len": lambda v, fn, n: check_int(n, v, fn, minimum=1, optional=True),
    "src_len": lambda v, fn, n: check_int(n, v, fn, minimum=1, optional=True),
    "tokens": lambda v, fn, n: check_int(n, v, fn, minimum=1),
    "gpus": lambda v, fn, n: check_int(n, v, fn, minimum=1, optional=True),
    "data_parallel": lambda v, fn, n: check_int(n, v, fn, minimum=1),
    "tensor_parallel": lambda v, fn, n: check_int(n, v, fn, minimum=1),
    "pipeline_parallel": lambda v, fn, n: check_int(n, v, fn, minimum=1),
    "zero_stage": _zero_stage,
    "causal_half": lambda v, fn, n: check_bool(n, v, fn),
    "fp32_grads": lambda v, fn, n: check_bool(n, v, fn),
    "dropout": lambda v, fn, n: check_bool(n, v, fn),
    "mtp": lambda v, fn, n: check_bool(n, v, fn),
    "dtype": lambda v, fn, n: check_text(n, v, fn),
    "optimizer": lambda v, fn, n: check_text(n, v, fn),
    "recompute": lambda v, fn, n: check_text(n, v, fn),
    "name": lambda v, fn, n: check_text(n, v, fn),
    "ref": lambda v, fn, n: check_text(n, v, fn),
    "peak_flops": lambda v, fn, n: check_real(n, v, fn, optional=True),
    "mfu": lambda v, fn, n: check_real(n, v, fn, at_most=1.0, optional=True),
    "flops": _flop_count,
}


def check_args(fn: str, **arguments: Any) -> None:
    """Check each keyword argument by the rule for its name (see RULES)."""
    for name, value in arguments.items():
        RULES[name](value, fn, name)


def _what(value: Any) -> str:
    """'str 'gpt2'', 'float 2.0', 'NoneType None': the type and a short excerpt of a value."""
    return f"{type(value).__name__} {shown(value, 60)}"
