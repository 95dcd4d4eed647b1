"""Sweeps: one row of planning numbers per combination of spec fields.

A sweep varies one or more spec fields over lists (``d_model=512,1024``) or inclusive integer
ranges (``d_model=512:4096:512``); the rows are the product of the lists, the last field varying
fastest. Each row holds the varied fields and, for the spec with those fields replaced, the exact
total and active parameters, the exact forward FLOPs per token, the weights' bytes and the KV
cache per token, all from the library's counters (``count_params``, ``count_flops``,
``weights_bytes``, ``kv_cache_bytes``). A planning script calls :func:`sweep` directly::

    from archspec.sweep import parse_vary, sweep
    rows = sweep(archspec.preset("gpt2"), [parse_vary("d_model=512:1024:256"), parse_vary("n_heads=8,16")])
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from archspec.errors import SpecError, did_you_mean
from archspec.spec import ModelSpec

MAX_COMBINATIONS = 10_000  # a guard against a typo such as d_model=1:100000 running for minutes


@dataclass(frozen=True)
class Vary:
    """One field and the values it takes, in order."""

    field: str
    values: tuple[Any, ...]

    def __str__(self) -> str:
        return f"{self.field}={','.join(str(v) for v in self.values)}"


def parse_vary(text: str) -> Vary:
    """'d_model=512,1024' or 'd_model=512:4096:512' (start:stop:step, stop included; step 1 when left
    out) -> Vary. Values of a list are numbers, true/false or words (``activation=gelu,swiglu``)."""
    from archspec.loading import parse_number, parse_value

    where = f"--vary {text!r}"
    if "=" not in text:
        raise SpecError(f"{where}: expected FIELD=V1,V2,... or FIELD=START:STOP:STEP, e.g. --vary d_model=512,1024")
    name, rhs = (part.strip() for part in text.split("=", 1))
    fields = [f for f in ModelSpec.model_fields if f != "name"]
    if not name:
        raise SpecError(f"{where}: the field name is empty; expected FIELD=V1,V2,...")
    if name == "name":
        raise SpecError(f"{where}: the model's name cannot be varied; vary a shape field such as d_model")
    if name not in fields:
        raise SpecError(f"{where}: unknown field {name!r}{did_you_mean(name, fields)} (see `archspec schema`)")
    if not rhs:
        raise SpecError(f"{where}: no values after '='")
    if ":" in rhs:
        parts = rhs.split(":")
        if len(parts) not in (2, 3) or not all(p.strip() for p in parts):
            raise SpecError(f"{where}: a range is START:STOP or START:STOP:STEP, e.g. 512:4096:512")
        bounds = [parse_number(p, f"{where}: range bound") for p in parts]
        if not all(isinstance(b, int) for b in bounds):
            raise SpecError(f"{where}: range bounds must be whole numbers")
        start, stop, step = bounds if len(bounds) == 3 else (*bounds, 1)
        if step < 1:
            raise SpecError(f"{where}: the step must be positive, got {step}")
        if start > stop:
            raise SpecError(f"{where}: empty range (start {start} is above stop {stop}; the stop is included)")
        values = tuple(range(start, stop + 1, step))
    else:
        items = [v.strip() for v in rhs.split(",")]
        if not all(items):
            raise SpecError(f"{where}: an empty value in the list; expected V1,V2,...")
        values = tuple(parse_value(v) for v in items)
    if len(values) > MAX_COMBINATIONS:
        raise SpecError(f"{where}: {len(values):,} values, over the limit of {MAX_COMBINATIONS:,}; widen the step")
    return Vary(name, values)


def combinations(varies: list[Vary]) -> list[dict[str, Any]]:
    """The product of the lists, the last field varying fastest: [{field: value, ...}, ...]."""
    if not varies:
        raise SpecError("a sweep needs at least one --vary FIELD=V1,V2,...")
    seen: set[str] = set()
    for v in varies:
        if v.field in seen:
            raise SpecError(f"--vary {v.field} is given twice; give each field once, with all its values")
        seen.add(v.field)
    n = 1
    for v in varies:
        n *= len(v.values)
    if n > MAX_COMBINATIONS:
        raise SpecError(f"the sweep has {n:,} combinations, over the limit of {MAX_COMBINATIONS:,}; narrow the ranges")
    return [dict(zip([v.field for v in varies], combo)) for combo in itertools.product(*(v.values for v in varies))]


def apply(spec: ModelSpec, changes: dict[str, Any]) -> ModelSpec:
    """`spec` with `changes`, validated again; an invalid combination is a SpecError naming it."""
    try:
        return spec.replace(**changes)
    except SpecError as exc:  # replace names the field; say which combination it was
        raise SpecError(f"{spec.name} with {_describe(changes)}: {exc}") from None


def sweep_row(spec: ModelSpec, seq_len: int | None = None, dtype: str = "bf16") -> dict[str, Any]:
    """The planning numbers of one spec: exact ints, except FLOPs per token when it is not whole.

    FLOPs per token are for one sequence of `seq_len` tokens (default: the spec's max_positions)."""
    from archspec.flops import count_flops, exact_number
    from archspec.memory import kv_cache_bytes_per_token, weights_bytes
    from archspec.params import count_params

    count = count_params(spec)
    flops = count_flops(spec, 1, seq_len)
    return {
        "total": count.total,
        "active": count.active,
        "forward_per_token": exact_number(flops.forward_per_token),
        "seq_len": flops.seq_len,
        "weights_bytes": weights_bytes(spec, dtype),
        "kv_cache_bytes_per_token": kv_cache_bytes_per_token(spec, dtype),
        "dtype": dtype,
    }


def sweep(
    spec: ModelSpec,
    varies: list[Vary],
    seq_len: int | None = None,
    dtype: str = "bf16",
    progress: Callable[[int, int], None] | None = None,
) -> list[dict[str, Any]]:
    """One row per combination: {"name", the varied fields..., "total", "active", "forward_per_token",
    "seq_len", "weights_bytes", "kv_cache_bytes_per_token", "dtype"}. `progress(done, total)` is called
    after each row when given."""
    from archspec.memory import dtype_bytes

    try:
        dtype_bytes(dtype)
    except ValueError as exc:
        raise SpecError(str(exc)) from None
    rows = []
    combos = combinations(varies)
    for changes in combos:
        s = apply(spec, changes)
        try:
            numbers = sweep_row(s, seq_len, dtype)
        except ValueError as exc:  # e.g. seq_len beyond a learned position table
            raise SpecError(f"{spec.name} with {_describe(changes)}: {exc}") from None
        rows.append({"name": spec.name, **changes, **numbers})
        if progress:
            progress(len(rows), len(combos))
    return rows


def _describe(changes: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in changes.items())
