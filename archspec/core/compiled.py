"""Counters compiled per structure: the arithmetic of a count, without describing the model again.

A planning script counts thousands of shapes that differ only in their widths and depths. What a count
does with a spec is decided by everything but those numbers (the kinds of its tables, its flags, which
fields were given); the numbers only flow through arithmetic. So when a question (a counter and its
arguments) is asked a second time of a structure, the count is recorded (archspec.core.tracing: the
counter runs on numbers that write down what is done with them, and every comparison it makes becomes a
guard), and the count of every later shape of that structure is the recorded program run on its
numbers: the same operations in the same order, so the same exact numbers. A question asked once (a
scan of batch sizes) never pays for a recording.

- The structure of a spec: its type, the fields it was given, and the value of every field except its
  whole-number ones (``d_model``, ``n_heads``, ``decoder_layers``, ...), which are the program's inputs.
  A sub-table (experts, windows) is part of the structure, its numbers included.
- A program answers None where one of its guards does not hold (``n_kv_heads == n_heads`` was true when
  recorded and is not now; a window shorter than the sequence): the count is then made the full way and
  recorded again for that branch (up to ``BRANCHES`` programs a structure).
- A counter that cannot be recorded (its numbers pass through ``int()``, an index, a hash) is made the
  full way, always, for that structure.
- Each program is checked against the full way at the shape it was recorded at and at the first
  ``CHECKED`` other shapes it answers for; a difference retires it (the full way, from then on).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache, partial, wraps
from typing import Any, TypeVar

from archspec.core.plancode import compile_plan
from archspec.core.tracing import RECORDING, Sym, Tape, result_source

T = TypeVar("T")
BRANCHES = 8  # programs recorded for one structure and question (one per branch its guards take)
CHECKED = 2  # shapes besides the recorded one at which a program is compared with the full way
MAX_STRUCTURES = 4096  # structures remembered; the tables are emptied when full, so memory stays bounded
MAX_PROGRAMS = 16384  # questions remembered (a structure's, each with its arguments), emptied when full
# a spec of more layer kinds is counted the full way: its program would be as long as its kinds, and
# recording one costs many full counts (benchmarks/kinds.py)
RECORDED_KINDS = 64
STRUCTURE = "_archspec_structure"  # where a spec keeps its structure's number (beside cached views)

_lock = threading.Lock()
_structures: dict[tuple, int] = {}  # structure -> its number
_inputs: dict[int, tuple[str, ...]] = {}  # structure's number -> the fields that are the programs' inputs
_input_set: dict[int, frozenset[str]] = {}
_count = [0]  # structure numbers given (never one twice: a spec keeps its number when the tables are emptied)


@dataclass
class _Programs:
    """The programs of one question about one structure."""

    plans: list[Callable[..., Any]] = field(default_factory=list)
    unchecked: list[int] = field(default_factory=list)  # per plan: shapes still to compare with the full way
    retired: bool = False  # a counter that cannot be recorded, or a program that differed
    answered: int = 0  # counts a program answered without the full way
    missed: int = 0  # counts made the full way for want of a program (the first is not recorded)


_programs: dict[tuple, _Programs] = {}


@cache
def whole_fields(cls: type) -> tuple[str, ...]:
    """The fields of a spec class whose values are whole numbers: the inputs of the programs."""
    return tuple(n for n, info in cls.model_fields.items() if info.annotation is int)


def structure(spec: Any) -> int | None:
    """The number of the spec's structure (kept on the spec), or None when it cannot be keyed."""
    sid = spec.__dict__.get(STRUCTURE)
    if sid is not None and sid in _inputs:
        return sid
    values = spec.__dict__
    whole = whole_fields(type(spec))
    inputs = tuple(f for f in whole if type(values[f]) is int)
    rest = tuple((f, values[f]) for f in type(spec).model_fields if f not in inputs)
    key = (type(spec), frozenset(spec.model_fields_set), inputs, rest)
    try:
        with _lock:
            sid = _structures.get(key)
            if sid is None:
                if len(_structures) >= MAX_STRUCTURES:
                    _structures.clear()
                    _inputs.clear()
                    _input_set.clear()
                    _programs.clear()
                _count[0] += 1
                sid = _structures[key] = _count[0]
                _inputs[sid] = inputs
                _input_set[sid] = frozenset(inputs)
    except TypeError:  # a value that cannot be hashed
        return None
    values[STRUCTURE] = sid
    return sid


def keep_structure(old: Any, new: Any, changed: set[str]) -> None:
    """`new` is `old` with the fields `changed`: it has old's structure when it was given the same fields
    and each changed field is a whole number (an input of the programs) or has its old value."""
    if new.__pydantic_fields_set__ != old.__pydantic_fields_set__:
        return
    sid = structure(old)
    inputs = _input_set.get(sid)
    if inputs is None:
        return
    now, before = new.__dict__, old.__dict__
    for f in changed:
        v = now[f]
        if not (type(v) is int if f in inputs else type(v) is type(before[f]) and v == before[f]):
            return
    now[STRUCTURE] = sid


def traced(spec: Any, syms: list[Sym]) -> Any:
    """A copy of `spec` whose whole-number fields are the recorded numbers `syms` (not validated: the
    spec was)."""
    data = {f: spec.__dict__[f] for f in type(spec).model_fields}
    data.update(zip(_inputs[structure(spec)], syms))
    return type(spec).model_construct(_fields_set=set(spec.model_fields_set), **data)


def per_structure(full: Callable[..., T]) -> Callable[..., T]:
    """full(spec, ...) answered by evaluate: the question is its name and its arguments with their types
    (True is not 1: an argument full would refuse never shares the program of one it took)."""
    name = full.__qualname__

    @wraps(full)
    def run(spec: Any, *args: Any, **kwargs: Any) -> T:
        question = (name, args, tuple(map(type, args)), tuple(kwargs.items()), tuple(map(type, kwargs.values())))
        return evaluate(question, partial(full, **kwargs) if kwargs else full, spec, *args)

    return run


def evaluate(question: tuple, full: Callable[..., Any], spec: Any, *args: Any) -> Any:
    """full(spec, *args), from the program of the spec's structure for `question` (a hashable key naming
    the counter and its arguments) where there is one that holds, else the full way (recorded for the
    next spec of the structure)."""
    if RECORDING[0] or _full_way[0]:
        return full(spec, *args)
    try:
        if len(spec.__dict__.get("kinds", ())) > RECORDED_KINDS:
            return full(spec, *args)
        sid = structure(spec)
        key = (question, sid)
        programs = _programs.get(key)
    except (TypeError, AttributeError, KeyError):  # not a spec, or an argument that cannot be hashed
        return full(spec, *args)
    if sid is None:
        return full(spec, *args)
    if programs is None:
        if len(_programs) >= MAX_PROGRAMS:  # many questions (a scan of batch sizes): memory stays bounded
            _programs.clear()
        programs = _programs.setdefault(key, _Programs())
    if programs.retired:
        return full(spec, *args)
    values = spec.__dict__
    for i, plan in enumerate(programs.plans):
        try:
            out = plan(spec, values)
        except (ArithmeticError, ValueError):  # a line before its guard, at a shape of another branch
            continue
        if out is None:
            continue
        if programs.unchecked[i]:
            return _checked(programs, i, out, full(spec, *args))
        programs.answered += 1
        return out
    out = full(spec, *args)
    programs.missed += 1
    if programs.missed > 1 and len(programs.plans) < BRANCHES:  # asked again: worth a program
        _record(programs, full, spec, args, _inputs[sid], out)
    return out


def _checked(programs: _Programs, i: int, got: Any, expected: Any) -> Any:
    programs.unchecked[i] -= 1
    if got != expected:
        programs.retired = True
    return expected


def _record(programs: _Programs, full: Callable[..., Any], spec: Any, args: tuple, inputs: tuple[str, ...],
            expected: Any) -> None:  # fmt: skip
    """Record full(spec, *args) as a program, checked against `expected` at once."""
    holder: dict[str, Any] = {}

    def run(syms: list[Sym]) -> Any:
        holder["spec"] = t = traced(spec, syms)
        return full(t, *args)

    def build(result: Any, tape: Tape) -> str:
        return result_source(result, tape, {id(holder["spec"]): "obj"})

    try:
        plan = compile_plan(run, [spec.__dict__[f] for f in inputs], build, inputs)
        ok = plan(spec, spec.__dict__) == expected
    except Exception:  # noqa: BLE001 - Escape, or a step that needs a plain number: the full way, always
        ok = False
    if not ok:
        programs.retired = True
        return
    with _lock:
        programs.plans.append(plan)
        programs.unchecked.append(CHECKED)


_full_way = [0]  # open full_way() blocks


@contextmanager
def full_way() -> Iterator[None]:
    """Within the block, every count is made the full way (no program answers, none is recorded): what
    the tests and benchmarks compare the programs with."""
    _full_way[0] += 1
    try:
        yield
    finally:
        _full_way[0] -= 1


def answered() -> int:
    """How many counts programs answered (without the full way) since the tables were last emptied."""
    return sum(p.answered for p in _programs.values())


def forget() -> None:
    """Empty the tables (for tests and benchmarks that measure the full way)."""
    with _lock:
        _structures.clear()
        _inputs.clear()
        _input_set.clear()
        _programs.clear()
