"""A recorded program (archspec.core.tracing) as Python source, its fractions kept as pairs of integers.

The counters of bytes multiply element counts by Fractions (2 bytes a bf16 value, 4 + 20/128 bits an
int4 one) and round up at the end. Python's Fraction reduces by a gcd at every step and costs
microseconds an operation; a program of a few hundred of them would cost milliseconds. So a value that
was a Fraction when recorded is held as its numerator and a positive denominator, unreduced:

- ``a + b``, ``a - b``, ``a * b``, ``a / b``, ``Fraction(a, b)``, ``-a``, ``abs(a)`` of fractions and
  whole numbers: integer arithmetic on the pairs;
- ``math.ceil``, ``math.floor`` (whole numbers), ``float`` (int / int, correctly rounded, as
  ``Fraction.__float__``), comparisons and truth tests (by cross-multiplying, the denominators positive):
  the same answers as the Fractions give;
- anything else, and a fraction the result holds, is made a Fraction first (the same value: a Fraction
  is reduced when made), and the recorded expression runs on it.

The numbers are the same as the recorded operations give, exactly; only their representation differs
on the way.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import archspec.core.tracing as tracing
from archspec.core.tracing import NAMES, Escape, Line, Sym, Tape

_ARITHMETIC = {"({} + {})": "+", "({} - {})": "-", "({} * {})": "*", "({} / {})": "/", "Fraction({}, {})": "/"}
_COMPARE = {f"({{}} {op} {{}})": op for op in ("<", "<=", ">", ">=", "==", "!=")}


def _pair(n: int, d: int) -> tuple[int, int]:
    """n / d with a positive denominator (a zero one fails as Fraction fails)."""
    if d == 0:
        raise ZeroDivisionError(f"Fraction({n}, 0)")
    return (-n, -d) if d < 0 else (n, d)


def _mul(a: str, b: str) -> str:
    if a == "1":
        return b
    if b == "1":
        return a
    return f"({a} * {b})"


class _Writer:
    """The lines of one program's source, fraction by fraction."""

    def __init__(self, tape: Tape) -> None:
        self.consts = tape.consts
        self.fractions = {line.name for line in tape.lines if line.fraction}
        self.fractions |= {k for k, v in tape.consts.items() if type(v) is Fraction}
        self.whole = {line.name for line in tape.lines if line.whole} | {f"x{i}" for i in range(tape.n_inputs)}
        self.body: list[str] = []
        self.made: set[str] = set()

    def exact(self, code: str) -> bool:
        """A fraction or a whole number (compared by cross-multiplying: exact, as a float's would not be)."""
        return code in self.fractions or code in self.whole or re.fullmatch(r"-?\d+|True|False", code) is not None

    def nd(self, code: str) -> tuple[str, str]:
        """Numerator and denominator of an operand (a whole number's is 1)."""
        if code not in self.fractions:
            return code, "1"
        if code in self.consts:
            v = self.consts[code]
            return repr(v.numerator), repr(v.denominator)
        return f"{code}n", f"{code}d"

    def value(self, code: str) -> str:
        """The operand as the recorded program saw it: a fraction made a Fraction (once)."""
        if code not in self.fractions or code in self.consts:
            return code
        if code not in self.made:
            self.made.add(code)
            self.body.append(f"    {code}f = _Fr({code}n, {code}d)")
        return f"{code}f"

    def line(self, line: Line) -> None:
        name, template, args = line.name, line.template, line.args
        if not any(a in self.fractions for a in args) and not line.fraction:
            self.body.append(f"    {name} = {template.format(*args)}")
            return
        fast = self.fast(line)
        if fast is not None:
            self.body.append(f"    {fast}")
            return
        expr = template.format(*(self.value(a) for a in args))
        if line.fraction:
            self.body.append(f"    {name}f = {expr}")
            self.body.append(f"    {name}n, {name}d = {name}f.numerator, {name}f.denominator")
            self.made.add(name)
        else:
            self.body.append(f"    {name} = {expr}")

    def fast(self, line: Line) -> str | None:
        """The line as integer arithmetic on pairs, or None where it has no such form."""
        name, template, args = line.name, line.template, line.args
        if line.fraction and template in _ARITHMETIC:
            (an, ad), (bn, bd) = self.nd(args[0]), self.nd(args[1])
            op = _ARITHMETIC[template]
            if op in "+-":
                return f"{name}n, {name}d = {_mul(an, bd)} {op} {_mul(bn, ad)}, {_mul(ad, bd)}"
            if op == "*":
                return f"{name}n, {name}d = {_mul(an, bn)}, {_mul(ad, bd)}"
            return f"{name}n, {name}d = _pair({_mul(an, bd)}, {_mul(ad, bn)})"
        if line.fraction and template in ("(-{})", "abs({})"):
            n, d = self.nd(args[0])
            return f"{name}n, {name}d = {template.format(n)}, {d}"
        if not line.fraction and len(args) == 1 and args[0] in self.fractions:
            n, d = self.nd(args[0])
            shapes = {"_ceil({})": f"-(-{n} // {d})", "_floor({})": f"{n} // {d}", "float({})": f"{n} / {d}"}
            if template in shapes:
                return f"{name} = {shapes[template]}"
        return None

    def condition(self, guard: Line) -> str:
        """A guard's test, true where the recorded branch is taken again."""
        template, args = guard.template, guard.args
        if template in _COMPARE and any(a in self.fractions for a in args) and all(map(self.exact, args)):
            (an, ad), (bn, bd) = self.nd(args[0]), self.nd(args[1])
            test = f"({_mul(an, bd)} {_COMPARE[template]} {_mul(bn, ad)})"
        elif template == "bool({})" and args[0] in self.fractions:
            test = f"({self.nd(args[0])[0]} != 0)"
        else:
            test = template.format(*(self.value(a) for a in args))
        return test if guard.name == "True" else f"not {test}"


def assemble(tape: Tape, out: str, name: str, keys: Sequence[str]) -> Any:
    """The function `name`(obj, mapping) of a recorded program: the inputs read from mapping[keys[i]],
    the lines the result and the guards need, the guards (None where one does not hold), the result."""
    needed = set(re.findall(r"\b_\d+\b", out)) | {n for g in tape.guards.values() for n in g.deps}
    for line in reversed(tape.lines):
        if line.name in needed:
            needed.update(line.deps)
    w = _Writer(tape)
    w.body = [f"    x{i} = mapping[{k!r}]" for i, k in enumerate(keys) if f"x{i}" in needed]
    for line in tape.lines:
        if line.name in needed:
            w.line(line)
    tests = [w.condition(g) for g in tape.guards.values()]
    if tests:
        w.body.append(f"    if not ({' and '.join(tests)}):\n        return None")
    out = re.sub(r"\b_\d+\b", lambda m: w.value(m.group(0)), out)
    w.body.append(f"    return {out}")
    source = f"def {name}(obj, mapping):\n" + "\n".join(w.body) + "\n"
    namespace: dict[str, Any] = {**NAMES, **tape.consts, "_Fr": Fraction, "_pair": _pair}
    exec(compile(source, f"<archspec plan {name}>", "exec"), namespace)  # noqa: S102 - our own program
    namespace[name].source = source
    return namespace[name]


def compile_plan(fn: Callable[[list[Sym]], Any], values: Sequence[Any], build: Callable[[Any, Tape], str],
                 keys: Sequence[str], name: str = "plan") -> Callable[[Any, dict], Any]:  # fmt: skip
    """fn(syms) recorded, as a function plan(obj, mapping) that reads the numbers from mapping[keys[i]] and
    returns what the source `build(result, tape)` writes (an expression of the program's names, and of
    `obj`), or None where a guard does not hold."""
    tape = Tape(len(values))
    inputs = [Sym(tape, v, f"x{i}") for i, v in enumerate(values)]
    if getattr(tracing._local, "tape", None) is not None:
        raise Escape("a recording inside a recording")
    tracing._local.tape = tape
    tracing.RECORDING[0] += 1
    try:
        result = fn(inputs)
        out = build(result, tape)
    finally:
        tracing._local.tape = None
        tracing.RECORDING[0] -= 1
    return assemble(tape, out, name, keys)
