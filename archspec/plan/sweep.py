"""Sweeps: one row of planning numbers per combination of spec fields, streamed.

A sweep varies one or more spec fields over lists (``d_model=512,1024``) or inclusive integer
ranges (``d_model=512:4096:512``); the rows are the product of the lists, the last field varying
fastest, and fields named together in ``zipped`` vary in lock-step. Each row holds the varied fields
and, for the spec with those fields replaced, the exact total and active parameters, the exact
forward FLOPs per token, the weights' bytes and the KV cache per token, all from the library's
counters (``count_params``, ``count_flops``, ``weights_bytes``, ``kv_cache_bytes``). Constraints
(``where``) keep the rows that satisfy them: ``"d_head == 128"`` tests the replaced spec before
anything is counted, ``"total within 1% of 7e9"`` tests a row's figures.

``archspec.plan.sweep`` is the function :func:`sweep`; this module's other names import as
``from archspec.plan.sweep import parse_vary, Vary, Sweep``. The result streams: rows are made one at a
time as it is iterated, so memory stays bounded however many combinations there are::

    import archspec
    shapes = archspec.sweep(archspec.preset("llama-3-8b"),
                            {"d_model": range(3072, 6145, 128), "decoder_layers": range(16, 49)},
                            where=["total within 1% of 7e9"])
    for row in shapes:
        print(row["d_model"], row["decoder_layers"], row["total"])
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from archspec.core.errors import SpecError, shown
from archspec.plan.sweep_terms import (
    FIGURES,
    LIMIT,
    Constraint,
    Vary,
    as_constraints,
    as_varies,
    check_field,
    combinations,
    count_combinations,
    parse_vary,
    parse_where,
)
from archspec.spec.model import ModelSpec

__all__ = ["FIGURES", "KEEP", "LIMIT", "SKIPPED_KEPT", "Constraint", "Skipped", "Sweep", "Vary", "as_constraints",
           "as_varies", "check_field", "combinations", "count_combinations", "parse_vary", "parse_where", "sweep",
           "sweep_row"]  # fmt: skip

SKIPPED_KEPT = 1_000  # refused combinations kept with their reasons (all of them are counted)


# ---------------------------------------------------------------- rows

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

    FLOPs per token are for one sequence of `seq_len` tokens (default: the spec's max_positions). The
    numbers come from the program archspec.compiled records for the spec's structure, where it holds."""
    from fractions import Fraction

    from archspec.core.compiled import evaluate
    from archspec.count.flops import exact_number

    question = ("sweep_row", seq_len, type(seq_len), dtype, type(dtype))
    total, active, forward, tokens, T, weights, kv = evaluate(question, _row_numbers, spec, seq_len, dtype)
    return {
        "total": total,
        "active": active,
        "forward_per_token": exact_number(Fraction(forward, tokens)),
        "seq_len": T,
        "weights_bytes": weights,
        "kv_cache_bytes_per_token": kv,
        "dtype": dtype,
    }


def _row_numbers(spec: ModelSpec, seq_len: int | None, dtype: str) -> tuple:
    """(total, active, forward FLOPs, tokens, seq_len, weights' bytes, KV cache per token) from the counters."""
    from archspec.count.flops import count_flops
    from archspec.count.params import count_params
    from archspec.describe.blocks import describing
    from archspec.memory import kv_cache_bytes_per_token, weights_bytes

    with describing(spec):  # one description feeds the four figures
        count = count_params(spec)
        flops = count_flops(spec, 1, seq_len)
        weights = weights_bytes(spec, dtype)
        kv = kv_cache_bytes_per_token(spec, dtype, flops.seq_len)
        return count.total, count.active, flops.forward, flops.tokens, flops.seq_len, weights, kv


@dataclass(frozen=True)
class Skipped:
    """A combination the spec refuses, with the reason in one line."""

    changes: dict[str, Any]
    reason: str

    def __str__(self) -> str:
        return self.reason


class Sweep:
    """The rows of a sweep, made one at a time as it is iterated (each iteration runs the sweep again).

    Each row is a dict: "name", the varied fields (and n_heads with keep="d_head"), then FIGURES and
    "dtype". After an iteration, `skipped` holds the first SKIPPED_KEPT combinations the spec refused
    (each with its reason), `n_skipped` how many it refused, `n_rows` how many rows it gave and
    `n_filtered` how many the constraints left out."""

    def __init__(self, spec: ModelSpec, varies: list[Vary], *, zipped: list[list[str]] | None, keep: str | None,
                 where: list[Constraint], seq_len: int | None, dtype: str, progress: Any,
                 strict: bool) -> None:  # fmt: skip
        self.spec, self.varies, self.zipped, self.keep, self.where = spec, varies, zipped, keep, where
        self.seq_len, self.dtype, self.progress, self.strict = seq_len, dtype, progress, strict
        self.n_combinations = count_combinations(varies, zipped)
        self.skipped: list[Skipped] = []
        self.n_skipped = self.n_rows = self.n_filtered = 0

    @property
    def fields(self) -> list[str]:
        """The varied fields as the rows show them."""
        return [v.field for v in self.varies] + (["n_heads"] if self.keep else [])

    @property
    def columns(self) -> list[str]:
        return ["name", *self.fields, *FIGURES, "dtype"]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        self.skipped, self.n_skipped, self.n_rows, self.n_filtered = [], 0, 0, 0
        spec, total = self.spec, self.n_combinations
        on_spec = [c for c in self.where if c.on_spec]
        on_row = [c for c in self.where if not c.on_spec]
        tick = _progress(self.progress, total, f"sweep {spec.name}")
        try:
            for i, changes in enumerate(combinations(self.varies, self.zipped)):
                if tick:
                    tick(i + 1)
                try:
                    full = keep_changes(spec, changes, self.keep)
                    s = apply(spec, full)
                except SpecError as exc:
                    if self.strict:
                        raise
                    self._skip(changes, str(exc))
                    continue
                if not all(c.holds(getattr(s, c.field)) for c in on_spec):
                    self.n_filtered += 1
                    continue
                try:
                    numbers = sweep_row(s, self.seq_len, self.dtype)
                except (SpecError, ValueError) as exc:  # e.g. seq_len beyond a learned position table
                    raise SpecError(f"{spec.name} with {_describe(changes)}: {exc}") from None
                if not all(c.holds(numbers[c.field]) for c in on_row):
                    self.n_filtered += 1
                    continue
                shown_ = {**changes, **({"n_heads": full["n_heads"]} if self.keep else {})}
                self.n_rows += 1
                yield {"name": spec.name, **shown_, **numbers}
        finally:
            if tick:
                tick(None)

    def _skip(self, changes: dict[str, Any], reason: str) -> None:
        if not reason.startswith(self.spec.name):
            reason = f"{self.spec.name} with {_describe(changes)}: {reason}"
        self.n_skipped += 1
        if len(self.skipped) < SKIPPED_KEPT:
            self.skipped.append(Skipped(changes, reason))

    def rows(self) -> list[dict[str, Any]]:
        """Every row, in a list (memory grows with the rows; iterate to stream them)."""
        return list(self)

    def to_pandas(self):
        """The rows as a pandas DataFrame, one column per key (pandas: the extra archspec[pandas])."""
        from archspec.render.notebook import to_pandas

        return to_pandas(self, columns=self.columns)

    def _repr_html_(self) -> str:
        from archspec.render.notebook import sweep_html

        return sweep_html(self)

    def __repr__(self) -> str:
        varied = " ".join(f"--vary {v}" for v in self.varies)
        where = "".join(f" --where {c.text!r}" for c in self.where)
        return f"<Sweep of {self.spec.name}: {varied}{where}; {self.n_combinations:,} combinations>"


def _progress(progress: Any, total: int, label: str) -> Callable[[int | None], None] | None:
    """A tick(done) function (tick(None) ends it) from sweep's `progress`: a (done, total) callback, True for a
    progress bar (tqdm, on stderr), or None/False for none."""
    if not progress:
        return None
    if progress is True:
        from archspec.core.progress import bar, done

        b = bar(total, label)

        def draw(n: int | None) -> None:
            if n is None:
                done(b)
            else:
                b.update(n - b.n)

        return draw

    def tick(n: int | None) -> None:
        progress(total if n is None else n, total)

    return tick


def sweep(
    spec: ModelSpec,
    vary: Any,
    seq_len: int | None = None,
    dtype: str = "bf16",
    *,
    where: Any = None,
    zipped: list[list[str]] | None = None,
    keep: str | None = None,
    limit: int | None = LIMIT,
    progress: Any = None,
    strict: bool = False,
) -> Sweep:
    """Planning numbers for every combination of the `vary` fields' values, streamed (see :class:`Sweep`).

    `vary`: {field: values} (a list, tuple or range, or the text '512:4096:512' / 'gelu,swiglu'), or a list
    of 'FIELD=VALUES' texts (as --vary) or Vary. `where`: constraints ('d_head == 128', 'total within 1% of
    7e9'). `zipped`: groups of fields that vary in lock-step. `keep="d_head"`: the heads follow a varied
    d_model. `limit`: the most combinations it runs (None: no limit). `progress`: True for a progress bar,
    or a (done, total) callback. A combination the spec refuses is left out and reported in
    `Sweep.skipped`; with `strict`, it is a SpecError naming it. Bad arguments are a SpecError or a
    TypeError naming them, before anything is counted."""
    from archspec.core.checks import check_int, check_spec
    from archspec.memory import dtype_bytes

    check_spec(spec, "sweep")
    if not isinstance(dtype, str):
        raise TypeError(f"sweep: dtype must be a dtype name such as 'bf16', got {type(dtype).__name__}")
    try:
        dtype_bytes(dtype)
    except ValueError as exc:
        raise SpecError(str(exc)) from None
    check_int("seq_len", seq_len, "sweep", minimum=1, optional=True)
    check_int("limit", limit, "sweep", minimum=1, optional=True)
    if zipped is not None and (isinstance(zipped, str) or not isinstance(zipped, Iterable) or
                               not all(isinstance(g, list | tuple) and all(isinstance(f, str) for f in g)
                                       for g in zipped)):  # fmt: skip
        raise TypeError("sweep: zipped must be a list of field-name lists, e.g. [['d_model', 'n_heads']]")
    if keep is not None and not isinstance(keep, str):
        raise TypeError(f"sweep: keep must be {' or '.join(map(repr, KEEP))} or None, got {type(keep).__name__}")
    if progress is not None and not (isinstance(progress, bool) or callable(progress)):
        raise TypeError(f"sweep: progress must be True, False or a (done, total) callback, "
                        f"got {type(progress).__name__}")  # fmt: skip
    varies = as_varies(vary, limit)
    constraints = as_constraints(where)
    if keep is not None:
        if keep not in KEEP:
            raise SpecError(f"--keep {shown(keep)}: only {', '.join(KEEP)} can be kept")
        fields = [v.field for v in varies]
        if "d_model" not in fields:
            raise SpecError("--keep d_head needs --vary d_model (the heads follow the varied width)")
        if "n_heads" in fields:
            raise SpecError("--keep d_head sets n_heads from d_model; do not --vary n_heads with it")
    result = Sweep(spec, varies, zipped=[list(g) for g in zipped] if zipped else None, keep=keep,
                   where=constraints, seq_len=seq_len, dtype=dtype, progress=progress, strict=bool(strict))  # fmt: skip
    if limit is not None and result.n_combinations > limit:
        raise SpecError(f"the sweep has {result.n_combinations:,} combinations, over the limit of {limit:,}; "
                        "narrow the ranges or raise the limit (--limit N, or --force)")  # fmt: skip
    return result


def _describe(changes: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in changes.items())
