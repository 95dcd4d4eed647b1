"""Recorded arithmetic: run a counter once on numbers that write down what is done with them, and get
back a plain Python function of those numbers that does only that arithmetic.

A ``Sym`` holds a number (an int, a float or a Fraction) and the name of the value it stands for in the
program being recorded (a ``Tape``). Its arithmetic (``+ - * / // % ** divmod``, negation, ``abs``,
``round``, ``math.floor``, ``math.ceil``, ``math.trunc``) computes the same value as the plain numbers
would and writes one line of the program. A comparison or a truth test answers from the value and
writes a guard: the program checks it before it answers, and answers None where a guard does not hold
(another branch of the counter would run: the caller counts the full way). Anything else that reads
the value — ``int()``, an index, ``range()``, a hash, text — could steer the counter without a guard,
so it stops the recording (``Escape``; a hash is a TypeError, as of any unhashable value).

``archspec.core.plancode.compile_plan(fn, inputs)`` runs ``fn`` on Syms and returns the program as a
function of the input numbers, or raises ``Escape``. The program computes every number with the
same operations in the same order as ``fn``, so its results are the same numbers, exactly. This
module knows nothing of specs; archspec.core.compiled uses it.
"""

from __future__ import annotations

import dataclasses
import math
import operator
import threading
from collections.abc import Callable
from fractions import Fraction
from typing import Any, NamedTuple


class Escape(Exception):
    """A recorded value was used in a way a program of arithmetic and guards cannot follow."""


_local = threading.local()  # the tape being recorded in this thread, if any


RECORDING = [0]  # tapes being recorded, in any thread: the counters take their full path meanwhile


def recording() -> bool:
    """Whether a tape is being recorded (the counters then take their full path)."""
    return RECORDING[0] > 0


class Line(NamedTuple):
    """One line of a recorded program: `name` = template.format(*args) (of a guard: its truth as name)."""

    name: str
    template: str
    args: tuple[str, ...]
    deps: tuple[str, ...]  # the program's names among args
    fraction: bool  # its value is a Fraction
    whole: bool = False  # its value is an int (or a bool)


class Tape:
    """The program being recorded: numbered lines, each a Python expression of earlier names."""

    def __init__(self, n_inputs: int) -> None:
        self.lines: list[Line] = []
        self.seen: dict[str, str] = {}  # expression -> the name that holds it (each computed once)
        self.guards: dict[str, Line] = {}  # condition -> the comparison, its name its truth
        self.consts: dict[str, Any] = {}
        self.n_inputs = n_inputs

    def const(self, x: Any) -> str:
        if type(x) is int or (type(x) is float and math.isfinite(x)):
            return repr(x)
        if type(x) in (bool, str) or x is None:
            return repr(x)
        name = f"_k{len(self.consts)}"
        self.consts[name] = x
        return name

    def term(self, x: Any) -> tuple[str, tuple[str, ...]]:
        if isinstance(x, Sym):
            if x.tape is not self:
                raise Escape("a value of another recording")
            return x.code, (x.code,)
        if isinstance(x, bool | int | float | Fraction):
            return self.const(x), ()
        raise Escape(f"arithmetic with {type(x).__name__}")

    def op(self, template: str, value: Any, *args: Any) -> Sym:
        terms = [self.term(a) for a in args]
        codes = tuple(t[0] for t in terms)
        expr = template.format(*codes)
        name = self.seen.get(expr)
        if name is None:
            name = f"_{len(self.lines)}"
            deps = tuple(n for t in terms for n in t[1])
            whole = isinstance(value, int)
            self.lines.append(Line(name, template, codes, deps, type(value) is Fraction, whole))
            self.seen[expr] = name
        return Sym(self, value, name)

    def guard(self, template: str, truth: bool, *args: Any) -> bool:
        terms = [self.term(a) for a in args]
        codes = tuple(t[0] for t in terms)
        deps = tuple(n for t in terms for n in t[1])
        self.guards[template.format(*codes)] = Line(str(bool(truth)), template, codes, deps, False)
        return truth


# x + 0, x - 0, x * 1, x // 1, x ** 1 are x and x * 0, x % 1 are 0, for a whole x and a whole (or bool)
# constant: the same numbers, with fewer lines in the program (a sum starts at 0, a flag multiplies)
_SAME = {"+": 0, "-": 0, "*": 1, "//": 1, "**": 1}
_ZERO = {"*": 0, "%": 1}


def _binary(symbol: str, fn: Callable[[Any, Any], Any]) -> tuple[Callable, Callable]:
    same, zero = _SAME.get(symbol), _ZERO.get(symbol)

    def forward(self: Sym, other: Any) -> Any:
        if not isinstance(other, Sym | int | float | Fraction):
            return NotImplemented
        if isinstance(other, int) and type(self.value) is int:
            if other == same:
                return self
            if other == zero:
                return 0
        return self.tape.op(f"({{}} {symbol} {{}})", fn(self.value, _value(other)), self, other)

    def reflected(self: Sym, other: Any) -> Any:
        if not isinstance(other, int | float | Fraction):
            return NotImplemented
        if isinstance(other, int) and type(self.value) is int and symbol in ("+", "*"):
            if other == same:
                return self
            if other == zero:
                return 0
        return self.tape.op(f"({{}} {symbol} {{}})", fn(other, self.value), other, self)

    return forward, reflected


def _compare(symbol: str, fn: Callable[[Any, Any], bool]) -> Callable:
    def method(self: Sym, other: Any) -> Any:
        if not isinstance(other, Sym | int | float | Fraction):
            return NotImplemented  # a word, None, a table: never equal to a number, whatever its value
        return self.tape.guard(f"({{}} {symbol} {{}})", fn(self.value, _value(other)), self, other)

    return method


def _value(x: Any) -> Any:
    return x.value if isinstance(x, Sym) else x


def _escape(what: str) -> Callable:
    def method(self: Sym, *args: Any) -> Any:
        raise Escape(f"{what} of a recorded value")

    return method


class Sym:
    """A number being recorded: its value, and its name in the tape's program."""

    __slots__ = ("tape", "value", "code")

    @property
    def archspec_whole(self) -> bool:
        """A whole number (read by the checks of arguments and the spec's derived defaults, which take ints)."""
        return type(self.value) is int

    def bit_length(self) -> Sym:
        return self.tape.op("{}.bit_length()", self.value.bit_length(), self)

    def __init__(self, tape: Tape, value: Any, code: str) -> None:
        self.tape, self.value, self.code = tape, value, code

    __add__, __radd__ = _binary("+", operator.add)
    __sub__, __rsub__ = _binary("-", operator.sub)
    __mul__, __rmul__ = _binary("*", operator.mul)
    __truediv__, __rtruediv__ = _binary("/", operator.truediv)
    __floordiv__, __rfloordiv__ = _binary("//", operator.floordiv)
    __mod__, __rmod__ = _binary("%", operator.mod)
    __pow__, __rpow__ = _binary("**", operator.pow)
    __lt__ = _compare("<", operator.lt)
    __le__ = _compare("<=", operator.le)
    __gt__ = _compare(">", operator.gt)
    __ge__ = _compare(">=", operator.ge)
    __eq__ = _compare("==", operator.eq)  # type: ignore[assignment]
    __ne__ = _compare("!=", operator.ne)  # type: ignore[assignment]
    __hash__ = None  # type: ignore[assignment]  # a cache keyed by the value would remember one branch

    def __divmod__(self, other: Any) -> Any:
        return self // other, self % other

    def __rdivmod__(self, other: Any) -> Any:
        return other // self, other % self

    def __neg__(self) -> Sym:
        return self.tape.op("(-{})", -self.value, self)

    def __pos__(self) -> Sym:
        return self

    def __abs__(self) -> Sym:
        return self.tape.op("abs({})", abs(self.value), self)

    def __floor__(self) -> Sym:
        return self.tape.op("_floor({})", math.floor(self.value), self)

    def __ceil__(self) -> Sym:
        return self.tape.op("_ceil({})", math.ceil(self.value), self)

    def __trunc__(self) -> Sym:
        return self.tape.op("_trunc({})", math.trunc(self.value), self)

    def __round__(self, digits: int | None = None) -> Sym:
        if digits is None:
            return self.tape.op("round({})", round(self.value), self)
        return self.tape.op(f"round({{}}, {int(digits)})", round(self.value, digits), self)

    def __bool__(self) -> bool:
        return self.tape.guard("bool({})", bool(self.value), self)

    __index__ = _escape("an index (range, a list position)")
    __int__ = _escape("int()")
    __float__ = _escape("float()")
    __complex__ = _escape("complex()")
    __str__ = _escape("text")
    __format__ = _escape("text")
    __repr__ = _escape("text")
    __reduce__ = _escape("a copy")


def fraction(numerator: Any, denominator: Any = 1) -> Any:
    """Fraction(numerator, denominator), recorded when either is a recorded number (Fraction itself
    reads its arguments' values)."""
    if isinstance(numerator, Sym) or isinstance(denominator, Sym):
        tape = numerator.tape if isinstance(numerator, Sym) else denominator.tape
        value = Fraction(_value(numerator), _value(denominator))
        return tape.op("Fraction({}, {})", value, numerator, denominator)
    return Fraction(numerator, denominator)


def as_float(x: Any) -> Any:
    """float(x), recorded when x is a recorded number (float() must return a plain float)."""
    if isinstance(x, Sym):
        return x.tape.op("float({})", float(x.value), x)
    return float(x)


NAMES = {"_floor": math.floor, "_ceil": math.ceil, "_trunc": math.trunc, "Fraction": Fraction}  # a program's own


# ---------------------------------------------------------------- results as source


def result_source(result: Any, tape: Tape, inputs: dict[int, str] | None = None) -> str:
    """Source that rebuilds `result` from the program's names: its numbers computed, the rest constants.
    Dicts, lists, tuples, named tuples, dataclasses and plain values are rebuilt; an object in `inputs`
    (by id) is the argument named there; any other object is an Escape (it may hold recorded numbers)."""
    inputs = inputs or {}
    if id(result) in inputs:
        return inputs[id(result)]
    if isinstance(result, Sym):
        tape.term(result)
        return result.code
    if result is None or isinstance(result, bool | int | float | str | Fraction):
        return tape.const(result)
    if type(result) is dict:
        items = ", ".join(f"{tape.const(k) if isinstance(k, str) else _key(k)}: {result_source(v, tape, inputs)}"
                          for k, v in result.items())  # fmt: skip
        return "{" + items + "}"
    if type(result) in (list, tuple):
        items = [result_source(v, tape, inputs) for v in result]
        return f"[{', '.join(items)}]" if type(result) is list else f"({''.join(i + ', ' for i in items)})"
    if isinstance(result, tuple) and hasattr(result, "_fields"):
        cls = tape.const(type(result))
        return f"{cls}({', '.join(result_source(v, tape, inputs) for v in result)})"
    if dataclasses.is_dataclass(result) and not isinstance(result, type) and not hasattr(result, "__slots__"):
        cls = tape.const(type(result))
        fields = ", ".join(f"{f!r}: {result_source(v, tape, inputs)}" for f, v in vars(result).items())
        return f"_made({cls}, {{{fields}}})"
    raise Escape(f"a result holding {type(result).__name__}")


def _key(k: Any) -> str:
    if isinstance(k, Sym):
        raise Escape("a recorded number as a key")
    if isinstance(k, bool | int | None | tuple):
        return repr(k)
    raise Escape(f"a key of type {type(k).__name__}")


def _made(cls: type, fields: dict[str, Any]) -> Any:
    """A dataclass with these field values, as the traced one was (no __init__ runs: it ran when traced)."""
    out = object.__new__(cls)
    out.__dict__.update(fields)
    return out


NAMES["_made"] = _made
