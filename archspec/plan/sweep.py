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

import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from archspec.core.errors import SpecError, did_you_mean, shown
from archspec.spec.model import ModelSpec

LIMIT = 1_000_000  # combinations a sweep runs unless told more (a guard against a typo such as d_model=1:10**9)
SKIPPED_KEPT = 1_000  # refused combinations kept with their reasons (all of them are counted)
FIGURES = ("total", "active", "forward_per_token", "seq_len", "weights_bytes", "kv_cache_bytes_per_token")


@dataclass(frozen=True)
class Vary:
    """One field and the values it takes, in order (a tuple, or a range for START:STOP:STEP)."""

    field: str
    values: Sequence[Any]

    def __str__(self) -> str:
        v = self.values
        if isinstance(v, range) and _size(v) > 3:
            return f"{self.field}={v.start}:{v.start + (_size(v) - 1) * v.step}:{v.step}"
        return f"{self.field}={','.join(str(x) for x in v)}"


def _range(start: int, stop: int, step: int, where: str, limit: int | None) -> range:
    """range(start, stop + 1, step) after its size is checked (a size past what Python can index, or past
    `limit`, is refused by arithmetic, before range or len sees it)."""
    if step < 1:
        raise SpecError(f"{where}: the step must be positive, got {step}")
    if start > stop:
        raise SpecError(f"{where}: empty range (start {start} is above stop {stop}; the stop is included)")
    n = (stop - start) // step + 1
    if limit is not None and n > limit:
        raise SpecError(f"{where}: {n:,} values, over the limit of {limit:,} combinations; widen the step or raise "
                        "the limit (--limit N, or --force)")  # fmt: skip
    if n > sys.maxsize:
        raise SpecError(f"{where}: {n:,} values, more than a sweep can hold; widen the step")
    return range(start, stop + 1, step)


def parse_vary(text: str, limit: int | None = LIMIT) -> Vary:
    """'d_model=512,1024' or 'd_model=512:4096:512' (start:stop:step, stop included; step 1 when left
    out) -> Vary. Values of a list are numbers, true/false or words (``activation=gelu,swiglu``)."""
    from archspec.io.loading import parse_number, parse_value

    if not isinstance(text, str):
        raise TypeError(f"parse_vary(text=...): expected text such as 'd_model=512,1024', got {type(text).__name__}")
    where = f"--vary {shown(text)}"
    if "=" not in text:
        raise SpecError(f"{where}: expected FIELD=V1,V2,... or FIELD=START:STOP:STEP, e.g. --vary d_model=512,1024")
    name, rhs = (part.strip() for part in text.split("=", 1))
    if not name:
        raise SpecError(f"{where}: the field name is empty; expected FIELD=V1,V2,...")
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
        return Vary(name, _range(start, stop, step, where, limit))
    items = [v.strip() for v in rhs.split(",")]
    if not all(items):
        raise SpecError(f"{where}: an empty value in the list; expected V1,V2,...")
    if limit is not None and len(items) > limit:
        raise SpecError(f"{where}: {len(items):,} values, over the limit of {limit:,} combinations")
    return Vary(name, tuple(parse_value(v) for v in items))


def check_field(name: str, where: str) -> None:
    """A spec field (`d_model`) or a field of a sub-table (`mlp.top_k`, `attention.sliding_window`), or a
    SpecError naming the close ones."""
    from archspec.spec.model import SUBTABLES, TABLES

    if name == "name":
        raise SpecError(f"{where}: the model's name cannot be varied; vary a shape field such as d_model")
    fields = [f for f in ModelSpec.model_fields if f != "name"]
    table, dot, sub = name.partition(".")
    if not dot:
        if name not in fields:
            raise SpecError(f"{where}: unknown field {shown(name)}{did_you_mean(name, fields)} (see `archspec schema`)")
        return
    if table in SUBTABLES:
        inner = list(dict.fromkeys(f for m in SUBTABLES[table].values() for f in m.model_fields))
    elif table in TABLES:
        inner = list(TABLES[table].model_fields)
    else:
        tables = [*SUBTABLES, *TABLES]
        raise SpecError(f"{where}: {shown(table)} is not a table of the spec{did_you_mean(table, tables)}; "
                        f"dotted fields belong to {', '.join(tables)}")  # fmt: skip
    if sub not in inner:
        raise SpecError(f"{where}: {table} has no field {shown(sub)}{did_you_mean(sub, inner)}; "
                        f"it has {', '.join(inner)}")  # fmt: skip


def as_varies(vary: Any, limit: int | None = LIMIT) -> list[Vary]:
    """The fields a sweep varies, from the API's forms: {field: values} (a list, tuple or range of values,
    one value, or the text of --vary's values: '512:4096:512', 'gelu,swiglu'), or a list of Vary or of
    --vary texts ('d_model=512,1024')."""
    if isinstance(vary, Vary):
        return [vary]
    if isinstance(vary, str):
        return [parse_vary(vary, limit)]
    if isinstance(vary, Mapping):
        out = []
        for field, values in vary.items():
            if not isinstance(field, str):
                raise TypeError(f"sweep(vary=...): field names are text, got {type(field).__name__}")
            if isinstance(values, str):
                out.append(parse_vary(f"{field}={values}", limit))
                continue
            check_field(field, f"vary {shown(field)}")
            if isinstance(values, range):
                seq: Sequence[Any] = values
            elif isinstance(values, (list, tuple)):
                seq = tuple(values)
            elif isinstance(values, (int, float, bool)) or values is None:
                seq = (values,)
            else:
                raise TypeError(f"sweep(vary={{{field!r}: ...}}): expected a list, tuple or range of values, "
                                f"got {type(values).__name__}")  # fmt: skip
            if limit is not None and _size(seq) > limit:
                raise SpecError(f"vary {field}: {_size(seq):,} values, over the limit of {limit:,} combinations")
            if not _size(seq):
                raise SpecError(f"vary {field}: no values")
            out.append(Vary(field, seq))
        return out
    if isinstance(vary, Iterable) and not isinstance(vary, (bytes, bytearray)):
        out = []
        for v in vary:
            if isinstance(v, Vary):
                out.append(v)
            elif isinstance(v, str):
                out.append(parse_vary(v, limit))
            else:
                raise TypeError(f"sweep(vary=[...]): expected Vary or text such as 'd_model=512,1024', "
                                f"got {type(v).__name__}")  # fmt: skip
        return out
    raise TypeError(f"sweep: vary must be {{field: values}} or a list of 'FIELD=VALUES', got {type(vary).__name__}")


def _size(values: Sequence[Any]) -> int:
    """len(values), also for a range too long for len()."""
    if isinstance(values, range):
        return max(0, (values.stop - values.start + values.step - (1 if values.step > 0 else -1)) // values.step)
    return len(values)


def _axes(varies: list[Vary], zipped: list[list[str]] | None) -> list[tuple[tuple[str, ...], list[Sequence[Any]]]]:
    """The sweep's axes: each a group of fields and their lists (one field, or a --zip group that moves in
    lock-step), in the order of the first field of each."""
    if not varies:
        raise SpecError("a sweep needs at least one --vary FIELD=V1,V2,...")
    by_field: dict[str, Vary] = {}
    for v in varies:
        if v.field in by_field:
            raise SpecError(f"--vary {v.field} is given twice; give each field once, with all its values")
        by_field[v.field] = v
    group_of: dict[str, int] = {}
    groups = [list(g) for g in zipped or []]
    for i, group in enumerate(groups):
        if len(group) < 2:
            named = ",".join(map(str, group))
            raise SpecError(f"--zip {named}: name two or more --vary fields, e.g. --zip d_model,n_heads")
        for f in group:
            if f not in by_field:
                raise SpecError(f"--zip {','.join(map(str, group))}: {shown(f)} is not a --vary field"
                                f"{did_you_mean(str(f), by_field)}")  # fmt: skip
            if f in group_of:
                raise SpecError(f"--zip: {f!r} is in two groups; give each field to one --zip")
            group_of[f] = i
        sizes = {_size(by_field[f].values) for f in group}
        if len(sizes) > 1:
            told = ", ".join(f"{f} has {_size(by_field[f].values):,}" for f in group)
            raise SpecError(f"--zip {','.join(group)}: lock-step fields need as many values each ({told})")
    axes, placed = [], set()
    for v in varies:
        if v.field not in group_of:
            axes.append(((v.field,), [v.values]))
        elif group_of[v.field] not in placed:
            placed.add(group_of[v.field])
            group = groups[group_of[v.field]]
            axes.append((tuple(group), [by_field[f].values for f in group]))
    return axes


def count_combinations(varies: list[Vary], zipped: list[list[str]] | None = None) -> int:
    """How many rows the product of the lists has (arithmetic: nothing is enumerated)."""
    n = 1
    for _, lists in _axes(varies, zipped):
        n *= _size(lists[0])
    return n


def combinations(varies: list[Vary], zipped: list[list[str]] | None = None) -> Iterator[dict[str, Any]]:
    """The product of the lists, the last field varying fastest, one {field: value, ...} at a time. Each
    group of `zipped` field names varies in lock-step (its lists have one length and count as one axis of
    the product, at the place of its first field). Nothing is enumerated ahead: memory does not grow with
    the lists (itertools.product would copy each of them first)."""
    axes = _axes(varies, zipped)
    order = [v.field for v in varies]
    for combo in _product(axes):
        merged = {f: x for fields, xs in combo for f, x in zip(fields, xs)}
        yield {f: merged[f] for f in order}


def _product(axes: list[tuple[tuple[str, ...], list[Sequence[Any]]]]) -> Iterator[tuple]:
    """(fields, values) of each axis, for every combination, the last axis fastest."""
    if not axes:
        yield ()
        return
    (fields, lists), rest = axes[0], axes[1:]
    for xs in zip(*lists):
        for tail in _product(rest):
            yield ((fields, xs), *tail)


# ---------------------------------------------------------------- constraints

_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<=": lambda a, b: a <= b,
    ">=": lambda a, b: a >= b, "<": lambda a, b: a < b, ">": lambda a, b: a > b,
}  # fmt: skip
_COMPARE = r"\s*([A-Za-z_][\w.]*)\s*(==|!=|<=|>=|<|>)\s*(\S+)\s*"
_WITHIN = r"(?i)\s*([A-Za-z_][\w.]*)\s+within\s+([0-9][0-9_.]*(?:e[+-]?[0-9]+)?)\s*%\s+of\s+(\S+)\s*"


@dataclass(frozen=True)
class Constraint:
    """One condition on a row: a spec field or a figure compared with a value (`d_head == 128`), or a figure
    within a percentage of a value (`total within 1% of 7e9`)."""

    text: str
    field: str
    op: str  # one of _OPS, or "within"
    value: Any
    percent: Fraction = Fraction(0)

    @property
    def on_spec(self) -> bool:
        """Tested on the replaced spec, before anything is counted."""
        return self.field not in FIGURES

    def holds(self, value: Any) -> bool:
        if self.op == "within":
            x = Fraction(value) if isinstance(value, int | Fraction) else Fraction(repr(value))
            return abs(x - self.value) * 100 <= self.percent * abs(self.value)
        try:
            return _OPS[self.op](value, self.value)
        except TypeError:  # a word compared with a number: a row whose field is not a number
            return False

    def __str__(self) -> str:
        return self.text


def parse_where(text: str) -> Constraint:
    """'d_head == 128', 'total within 1% of 7e9', 'kv_cache_bytes_per_token <= 131072' -> Constraint: a spec
    field (d_head, n_heads, d_ff, ...: what the replaced spec holds) or a figure of the row (FIGURES)."""
    from archspec.io.loading import parse_number, parse_value

    if not isinstance(text, str):
        raise TypeError(f"sweep(where=...): a constraint is text such as 'd_head == 128', got {type(text).__name__}")
    where = f"--where {shown(text)}"
    fields = [f for f in ModelSpec.model_fields if f != "name"]
    m = re.fullmatch(_WITHIN, text)
    if m:
        field, pct, target = m.groups()
        _check_where_field(field, where, fields)
        percent = Fraction(parse_number(pct, f"{where}: the percentage"))
        value = parse_number(target, f"{where}: the value")
        return Constraint(text.strip(), field, "within", Fraction(value) if isinstance(value, int) else
                          Fraction(repr(value)), percent)  # fmt: skip
    m = re.fullmatch(_COMPARE, text)
    if not m:
        raise SpecError(f"{where}: expected FIELD OP VALUE (OP one of ==, !=, <, <=, >, >=) or FIELD within P% of "
                        "VALUE, e.g. 'd_head == 128' or 'total within 1% of 7e9'")  # fmt: skip
    field, op, raw = m.groups()
    _check_where_field(field, where, fields)
    value = parse_value(raw, f"{where}: the value")
    if op not in ("==", "!=") and not (isinstance(value, int | float) and not isinstance(value, bool)):
        raise SpecError(f"{where}: {op} compares numbers; {shown(raw)} is not one (words take == or !=)")
    return Constraint(text.strip(), field, op, value)


def _check_where_field(field: str, where: str, fields: list[str]) -> None:
    if field in FIGURES or field in fields:
        return
    names = [*FIGURES, *fields]
    raise SpecError(f"{where}: unknown field {shown(field)}{did_you_mean(field, names)}; a constraint names a "
                    f"figure ({', '.join(FIGURES)}) or a spec field (see `archspec schema`)")  # fmt: skip


def as_constraints(where: Any) -> list[Constraint]:
    if where is None:
        return []
    if isinstance(where, str | Constraint):
        where = [where]
    if not isinstance(where, Iterable) or isinstance(where, bytes | bytearray | Mapping):
        raise TypeError(f"sweep(where=...): expected a list of constraints such as 'd_head == 128', "
                        f"got {type(where).__name__}")  # fmt: skip
    return [c if isinstance(c, Constraint) else parse_where(c) for c in where]


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
