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
    if not name:
        raise SpecError(f"{where}: the field name is empty; expected FIELD=V1,V2,...")
    if name == "name":
        raise SpecError(f"{where}: the model's name cannot be varied; vary a shape field such as d_model")
    check_field(name, where)
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


def check_field(name: str, where: str) -> None:
    """A spec field (`d_model`) or a field of a sub-table (`mlp.top_k`, `attention.sliding_window`), or a
    SpecError naming the close ones."""
    from archspec.spec import SUBTABLES, TABLES

    fields = [f for f in ModelSpec.model_fields if f != "name"]
    table, dot, sub = name.partition(".")
    if not dot:
        if name not in fields:
            raise SpecError(f"{where}: unknown field {name!r}{did_you_mean(name, fields)} (see `archspec schema`)")
        return
    if table in SUBTABLES:
        inner = list(dict.fromkeys(f for m in SUBTABLES[table].values() for f in m.model_fields))
    elif table in TABLES:
        inner = list(TABLES[table].model_fields)
    else:
        tables = [*SUBTABLES, *TABLES]
        raise SpecError(f"{where}: {table!r} is not a table of the spec{did_you_mean(table, tables)}; "
                        f"dotted fields belong to {', '.join(tables)}")  # fmt: skip
    if sub not in inner:
        raise SpecError(f"{where}: {table} has no field {sub!r}{did_you_mean(sub, inner)}; it has {', '.join(inner)}")


def combinations(varies: list[Vary], zipped: list[list[str]] | None = None) -> list[dict[str, Any]]:
    """The product of the lists, the last field varying fastest: [{field: value, ...}, ...]. Each group
    of `zipped` field names varies in lock-step (its lists have one length and count as one axis of
    the product, at the place of its first field)."""
    if not varies:
        raise SpecError("a sweep needs at least one --vary FIELD=V1,V2,...")
    seen: set[str] = set()
    for v in varies:
        if v.field in seen:
            raise SpecError(f"--vary {v.field} is given twice; give each field once, with all its values")
        seen.add(v.field)
    by_field = {v.field: v for v in varies}
    group_of: dict[str, int] = {}
    for i, group in enumerate(zipped or []):
        if len(group) < 2:
            raise SpecError(f"--zip {','.join(group)}: name two or more --vary fields, e.g. --zip d_model,n_heads")
        for f in group:
            if f not in by_field:
                raise SpecError(f"--zip {','.join(group)}: {f!r} is not a --vary field{did_you_mean(f, by_field)}")
            if f in group_of:
                raise SpecError(f"--zip: {f!r} is in two groups; give each field to one --zip")
            group_of[f] = i
        lengths = {len(by_field[f].values) for f in group}
        if len(lengths) > 1:
            sizes = ", ".join(f"{f} has {len(by_field[f].values)}" for f in group)
            raise SpecError(f"--zip {','.join(group)}: lock-step fields need as many values each ({sizes})")
    axes: list[list[dict[str, Any]]] = []
    placed: set[int] = set()
    for v in varies:
        if v.field not in group_of:
            axes.append([{v.field: x} for x in v.values])
        elif group_of[v.field] not in placed:
            group = zipped[group_of[v.field]]
            placed.add(group_of[v.field])
            axes.append([dict(zip(group, xs)) for xs in zip(*(by_field[f].values for f in group))])
    n = 1
    for axis in axes:
        n *= len(axis)
    if n > MAX_COMBINATIONS:
        raise SpecError(f"the sweep has {n:,} combinations, over the limit of {MAX_COMBINATIONS:,}; narrow the ranges")
    order = [v.field for v in varies]
    out = []
    for combo in itertools.product(*axes):
        merged = {k: val for part in combo for k, val in part.items()}
        out.append({f: merged[f] for f in order})
    return out


KEEP = ("d_head",)


def keep_changes(spec: ModelSpec, changes: dict[str, Any], keep: str | None) -> dict[str, Any]:
    """`changes` plus what `keep` holds fixed: with ``keep="d_head"`` the heads follow a varied d_model
    (n_heads = d_model / d_head; key/value heads follow too when the model has one per query head)."""
    if keep is None or "d_model" not in changes:
        return changes
    d_model, d_head = changes["d_model"], spec.d_head
    out = dict(changes)
    if isinstance(d_model, int) and not isinstance(d_model, bool) and d_model % d_head == 0 and d_model > 0:
        out["n_heads"] = d_model // d_head
        if spec.n_kv_heads == spec.n_heads and "n_kv_heads" not in changes:
            out["n_kv_heads"] = out["n_heads"]
    else:
        raise SpecError(f"d_model={d_model} is not a multiple of d_head={d_head} (kept by --keep d_head)")
    return out


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
        "kv_cache_bytes_per_token": kv_cache_bytes_per_token(spec, dtype, flops.seq_len),
        "dtype": dtype,
    }


@dataclass(frozen=True)
class Skipped:
    """A combination the spec refuses, with the reason in one line."""

    changes: dict[str, Any]
    reason: str

    def __str__(self) -> str:
        return self.reason


def sweep(
    spec: ModelSpec,
    varies: list[Vary],
    seq_len: int | None = None,
    dtype: str = "bf16",
    progress: Callable[[int, int], None] | None = None,
    zipped: list[list[str]] | None = None,
    keep: str | None = None,
    skipped: list[Skipped] | None = None,
) -> list[dict[str, Any]]:
    """One row per combination: {"name", the varied fields..., "total", "active", "forward_per_token",
    "seq_len", "weights_bytes", "kv_cache_bytes_per_token", "dtype"}. `progress(done, total)` is called
    after each combination when given. `zipped` groups fields that vary in lock-step; `keep="d_head"`
    lets the heads follow a varied d_model (the rows then show n_heads too). A combination the spec
    refuses is a SpecError naming it, or, when a `skipped` list is given, is appended to it and left out."""
    from archspec.memory import dtype_bytes

    try:
        dtype_bytes(dtype)
    except ValueError as exc:
        raise SpecError(str(exc)) from None
    if keep is not None:
        if keep not in KEEP:
            raise SpecError(f"--keep {keep!r}: only {', '.join(KEEP)} can be kept")
        fields = [v.field for v in varies]
        if "d_model" not in fields:
            raise SpecError("--keep d_head needs --vary d_model (the heads follow the varied width)")
        if "n_heads" in fields:
            raise SpecError("--keep d_head sets n_heads from d_model; do not --vary n_heads with it")
    rows = []
    combos = combinations(varies, zipped)
    for i, changes in enumerate(combos):
        try:
            full = keep_changes(spec, changes, keep)
            s = apply(spec, full)
        except SpecError as exc:
            if skipped is None:
                raise
            reason = str(exc)
            if not reason.startswith(spec.name):
                reason = f"{spec.name} with {_describe(changes)}: {reason}"
            skipped.append(Skipped(changes, reason))
            if progress:
                progress(i + 1, len(combos))
            continue
        try:
            numbers = sweep_row(s, seq_len, dtype)
        except ValueError as exc:  # e.g. seq_len beyond a learned position table
            raise SpecError(f"{spec.name} with {_describe(changes)}: {exc}") from None
        shown = {**changes, **({"n_heads": full["n_heads"]} if keep else {})}
        rows.append({"name": spec.name, **shown, **numbers})
        if progress:
            progress(i + 1, len(combos))
    return rows


def _describe(changes: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in changes.items())
