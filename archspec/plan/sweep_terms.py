"""What a sweep varies and keeps: the fields and their values (``--vary``), the fields that move in
lock-step (``--zip``), the combinations in order, and the constraints on a row (``--where``). The rows
themselves are made by archspec.plan.sweep, which re-exports these names."""

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
    """A spec field (`d_model`) or a field of a sub-table (`mlp.top_k`, `mixer.sliding_window`; `attention`
    is the mixer's older name), or a SpecError naming the close ones."""
    from archspec.spec.model import SUBTABLES, TABLES, newer_key

    if name == "name":
        raise SpecError(f"{where}: the model's name cannot be varied; vary a shape field such as d_model")
    fields = [f for f in ModelSpec.model_fields if f != "name"]
    table, dot, sub = newer_key(name).partition(".")
    if not dot:
        if table not in fields:
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
