"""The formula of any model: its exact parameter count and forward FLOPs as polynomials in its fields.

The polynomials are derived from the same description the counts use, not written a second time. Each
integer field the spec was given is replaced by a ``Traced`` integer: an ``int`` of the same value that
carries a sympy symbol, and whose arithmetic (``+ - * // % divmod **``) carries the expression along.
The description runs as it always does (every branch, comparison and ``range`` sees the real values),
so the count and the FLOPs come out as integers whose expressions say how they were computed:
``12·L·d² + 13·L·d + V·d + T·d + 2·d`` for GPT-2. A derived default follows its inputs (``d_ff`` =
4·d, ``d_head`` = d / h).

An expression is only as good as the arithmetic that carried it: a width that went through ``int()``
or a lookup table would come back as a constant. So every formula is proven before it is shown:
evaluated at the spec and at random points (the fields drawn afresh, the spec validated and counted
again), it must equal ``count_params`` and ``count_flops`` exactly. sympy is an optional extra
(``pip install archspec-transformers[formula]``), imported only here.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from archspec.core.errors import SpecError
from archspec.spec.model import ModelSpec

# spec field -> its symbol, in the order terms are sorted (the rest keep their field names)
SYMBOLS = {
    "decoder_layers": "L", "encoder_layers": "L_enc", "d_model": "d", "vocab_size": "V", "max_positions": "T",
    "n_heads": "h", "n_kv_heads": "h_kv", "d_head": "d_h", "d_value": "d_v", "d_ff": "f", "type_vocab_size": "V_type",
    "mlp.experts": "E", "mlp.top_k": "k", "mlp.d_expert": "f_e", "mlp.d_shared": "f_s",
    "mlp.d_dense": "f_dense", "mixer.sliding_window": "w", "mixer.q_rank": "r_q", "mixer.kv_rank": "r_kv",
    "mixer.rope_dims": "d_rope",
}  # fmt: skip
PLACES = ("mlp.dense_layers",)  # fields that place layers of a kind (counted as a run): numbers in the formula
# the order factors are written in within a term: counts before widths (V·d, T·d, as the seed formula writes)
WRITTEN = (
    "L",
    "L_enc",
    "E",
    "k",
    "V",
    "T",
    "V_type",
    "w",
    "d",
    "h",
    "h_kv",
    "d_h",
    "d_v",
    "d_rope",
    "r_q",
    "r_kv",
    "f",
    "f_e",
    "f_s",
    "f_dense",
)


class NotDerived(ValueError):
    """The description of a model is not arithmetic on its fields everywhere: the traced polynomial
    differs from archspec's count at some valid point."""


POINTS = 8  # random points each formula is proven at, besides the spec itself


def _sympy():
    try:
        import sympy
    except ImportError:
        raise SpecError(
            "archspec formula needs sympy: pip install 'archspec-transformers[formula]' (or pip install sympy)"
        ) from None
    return sympy


class Traced(int):
    """An int that carries the expression it was computed from (a sympy expression). It has no hash: a
    cache keyed by field values (archspec.describe.blocks keeps each layer kind's parts) would hand a traced
    spec the parts of an equal plain one, constants where the symbols should be; unhashable, the spec
    is described afresh."""

    expr: Any
    __hash__ = None  # type: ignore[assignment]

    def __new__(cls, value: int, expr: Any) -> Traced:
        out = super().__new__(cls, value)
        out.expr = expr
        return out

    def __repr__(self) -> str:
        return f"Traced({int(self)}, {self.expr})"


def _expr(x: int) -> Any:
    return x.expr if isinstance(x, Traced) else _sympy().Integer(int(x))


def _floor_div(a, b):
    sympy = _sympy()
    exact = int(b) != 0 and int(a) % int(b) == 0
    return _expr(a) / _expr(b) if exact else sympy.floor(_expr(a) / _expr(b))


def _operator(op, expr_of, reflected: bool):
    """Traced's method for one operator: the int result, carrying the expression of its operands."""

    def method(self, other):
        if not isinstance(other, int):  # a float or anything else: int's own arithmetic, untraced
            return NotImplemented
        a, b = (other, self) if reflected else (self, other)
        return Traced(op(int(a), int(b)), expr_of(a, b))

    return method


for _name, _op, _expr_of in (
    ("add", lambda a, b: a + b, lambda a, b: _expr(a) + _expr(b)),
    ("sub", lambda a, b: a - b, lambda a, b: _expr(a) - _expr(b)),
    ("mul", lambda a, b: a * b, lambda a, b: _expr(a) * _expr(b)),
    ("floordiv", lambda a, b: a // b, _floor_div),
    ("mod", lambda a, b: a % b, lambda a, b: _expr(a) - _expr(b) * _floor_div(a, b)),
):
    setattr(Traced, f"__{_name}__", _operator(_op, _expr_of, reflected=False))
    setattr(Traced, f"__r{_name}__", _operator(_op, _expr_of, reflected=True))


def _pow(self, other, mod=None):
    if mod is not None or not isinstance(other, int) or int(other) < 0:
        return int(self).__pow__(int(other) if isinstance(other, int) else other, mod)
    return Traced(int(self) ** int(other), _expr(self) ** _expr(other))


def _divmod(self, other):
    if not isinstance(other, int):
        return NotImplemented
    return self // other, self % other


def _rdivmod(self, other):
    if not isinstance(other, int):
        return NotImplemented
    return Traced(int(other), _expr(other)) // self, Traced(int(other), _expr(other)) % self


Traced.__pow__ = _pow
Traced.__divmod__ = _divmod
Traced.__rdivmod__ = _rdivmod
Traced.__neg__ = lambda self: Traced(-int(self), -_expr(self))
Traced.__pos__ = lambda self: self


# ---------------------------------------------------------------- the spec, traced


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def field_value(spec: ModelSpec, path: str) -> int:
    """A field's value by its path: 'd_model', or 'mlp.experts' in a sub-table."""
    table, _, name = path.rpartition(".")
    return getattr(getattr(spec, table) if table else spec, name)


def traced_fields(spec: ModelSpec, nested: bool = True) -> dict[str, str]:
    """field path -> symbol name, for the integer fields the spec was given, its own and (`nested`) those
    of the sub-tables it was given (the MLP's experts and their widths, a window): derived defaults follow
    them."""
    from archspec.spec.model import SUBTABLES

    out = {}
    for name in spec.model_fields_set:
        value = getattr(spec, name)
        if _whole(value):
            out[name] = SYMBOLS.get(name, name)
        elif nested and name in SUBTABLES and hasattr(value, "model_fields_set"):
            for sub in value.model_fields_set:
                if _whole(getattr(value, sub)) and f"{name}.{sub}" not in PLACES:
                    out[f"{name}.{sub}"] = SYMBOLS.get(f"{name}.{sub}", f"{name}.{sub}")
    order = list(SYMBOLS)
    return dict(sorted(out.items(), key=lambda kv: (order.index(kv[0]) if kv[0] in order else len(order), kv[0])))


def traced_spec(spec: ModelSpec, values: dict[str, int] | None = None, nested: bool = True
                ) -> tuple[ModelSpec, dict[str, Any]]:  # fmt: skip
    """The spec with each given integer field a Traced of its value (or of `values`' one), and the
    symbols by field path. Built without validation: `spec` (and `values`, by the caller) is valid."""
    sympy = _sympy()
    fields = traced_fields(spec, nested)
    symbols = {f: sympy.Symbol(s, positive=True, integer=True) for f, s in fields.items()}
    data = {k: getattr(spec, k) for k in spec.model_fields_set}
    tables: dict[str, dict[str, Any]] = {}
    for f, sym in symbols.items():
        traced = Traced((values or {}).get(f, field_value(spec, f)), sym)
        table, _, name = f.rpartition(".")
        if table:
            tables.setdefault(table, {})[name] = traced
        else:
            data[f] = traced
    for table, changes in tables.items():
        member = getattr(spec, table)
        given = {k: getattr(member, k) for k in member.model_fields_set}
        data[table] = type(member).model_construct(_fields_set=set(member.model_fields_set), **{**given, **changes})
    return ModelSpec.model_construct(_fields_set=set(data), **data), symbols


# ---------------------------------------------------------------- the formula


@dataclass(frozen=True)
class Term:
    """One term of a polynomial: as written, its coefficient (an int, or 'p/q'), and its value at the spec
    (an int when whole: FLOPs per token may be a fraction)."""

    term: str
    coefficient: int | str
    value: int | float


@dataclass(frozen=True)
class Polynomial:
    """A quantity as a polynomial in the spec's fields, its terms largest degree first, and its value."""

    quantity: str
    polynomial: str
    terms: list[Term]
    value: int | float
    expr: Any = field(repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {"quantity": self.quantity, "polynomial": self.polynomial, "value": self.value,
                "terms": [t.__dict__ for t in self.terms]}  # fmt: skip


@dataclass(frozen=True)
class Formula:
    """The parameter count and forward FLOPs per token of one model as polynomials, with the symbols
    (symbol -> field and value) and the points where each was checked against the counters."""

    name: str
    symbols: dict[str, dict[str, Any]]
    params: Polynomial
    flops_per_token: Polynomial
    points: int

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "symbols": self.symbols, "params": self.params.to_dict(),
                "forward_flops_per_token": self.flops_per_token.to_dict(), "proven_at": self.points}  # fmt: skip


_SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


def _monomial(powers: list[tuple[str, int]]) -> tuple[str, str]:
    """('L·d²', 'h') for L·d²/h: the numerator's factors and the denominator's."""
    up = [s + (str(p).translate(_SUPERSCRIPT) if p > 1 else "") for s, p in powers if p > 0]
    down = [s + (str(-p).translate(_SUPERSCRIPT) if p < -1 else "") for s, p in powers if p < 0]
    return "·".join(up), "·".join(down)


def _terms(expr, order: list) -> list[tuple[Any, Any, dict]]:
    """(coefficient, monomial, {symbol: power}) of an expanded expression, largest degree first, then in
    the order of the symbols (L before d before V before T ...)."""
    sympy = _sympy()
    out = []
    for term in sympy.Add.make_args(sympy.expand(expr)):
        coeff, rest = term.as_coeff_Mul()
        powers = {s: int(p) for s, p in rest.as_powers_dict().items() if s in order} if rest != 1 else {}
        # a floor() of the fields (where a pattern of layer kinds stops): written after the plain factors
        leftover = rest / sympy.Mul(*[s**p for s, p in powers.items()])
        out.append((coeff, rest, powers, leftover))

    def key(t):
        _, rest, powers, leftover = t
        return (leftover != 1, str(leftover), -sum(powers.values()), [-powers.get(s, 0) for s in order])

    return sorted(out, key=key)


def _written(coeff, rest, powers, leftover, order) -> str:
    sympy = _sympy()
    if rest == 1:
        return str(coeff)
    rank = {name: i for i, name in enumerate(WRITTEN)}
    names = sorted((str(s) for s in order), key=lambda n: (rank.get(n, len(rank)), n))
    by_name = {str(s): p for s, p in powers.items()}
    up, down = _monomial([(n, by_name.get(n, 0)) for n in names])
    if leftover != 1:
        up = "·".join(x for x in (up, str(leftover).replace(" ", "")) if x)
    num, den = sympy.fraction(sympy.Rational(coeff))
    head = up if num == 1 else f"-{up}" if num == -1 and up else f"{num}·{up}" if up else str(num)
    under = [x for x in (str(den) if den != 1 else "", down) if x]
    tail = "·".join(under)
    if "·" in tail:
        tail = f"({tail})"
    return f"{head}/{tail}" if tail else head


def at(expr, values: dict[Any, int]):
    """`expr` at whole values of its symbols (xreplace: sympy evaluates numbers as it rebuilds the tree,
    many times faster than subs)."""
    sympy = _sympy()
    return expr.xreplace({s: sympy.Integer(v) for s, v in values.items()})


def _exact(value) -> int | float:
    """A sympy number as JSON holds it: an int when whole, else the nearest float."""
    from fractions import Fraction

    from archspec.core.limits import float_or_int

    num, den = _sympy().fraction(value)
    return int(num) if den == 1 else float_or_int(Fraction(int(num), int(den)))


def polynomial(quantity: str, expr, symbols: dict[str, Any], values: dict[Any, int]) -> Polynomial:
    sympy = _sympy()
    order = list(symbols.values())
    terms = []
    for coeff, rest, powers, leftover in _terms(expr, order):
        text = _written(coeff, rest, powers, leftover, order)
        value = at(coeff * rest, values)
        num, den = sympy.fraction(sympy.Rational(coeff))
        terms.append(Term(text, int(num) if den == 1 else f"{num}/{den}", _exact(value)))
    written = " + ".join(t.term for t in terms).replace("+ -", "- ")
    return Polynomial(quantity, written, terms, _exact(at(expr, values)), expr)


def derive(spec: ModelSpec) -> Formula:
    """The parameter count and forward FLOPs per token of `spec` as polynomials in its given integer
    fields, derived from the description and proven against count_params and count_flops at the spec
    and at POINTS random points (NotDerived names the point where they differ). The sub-tables' fields
    (experts, their widths) are traced too where the proof holds for them; else they stay numbers."""
    try:
        return _derive(spec, nested=True)
    except NotDerived:  # a sub-table field that places layers rather than sizing them: its own value, fixed
        return _derive(spec, nested=False)


def _derive(spec: ModelSpec, nested: bool) -> Formula:
    from archspec.count.flops import count_flops
    from archspec.count.params import count_params

    sympy = _sympy()
    traced, symbols = traced_spec(spec, nested=nested)
    try:
        total = count_params(traced).total
        forward = count_flops(traced, 1, None).forward
    except (TypeError, ValueError, ArithmeticError) as exc:  # a step that needs a plain int (a hash, a float)
        raise NotDerived(f"{spec.name}: its description cannot be traced ({type(exc).__name__}: {exc})") from None
    T = symbols.get("max_positions")
    params_expr = sympy.expand(_expr(total))
    flops_expr = sympy.expand(_expr(forward) / (T if T is not None else spec.max_positions))
    here = {sym: field_value(spec, f) for f, sym in symbols.items()}
    points = prove(spec, symbols, params_expr, flops_expr)
    table = {str(sym): {"field": f, "value": field_value(spec, f)} for f, sym in symbols.items()}
    return Formula(
        spec.name,
        table,
        polynomial("params", params_expr, symbols, here),
        polynomial("forward_flops_per_token", flops_expr, symbols, here),
        points,
    )


def period(spec: ModelSpec) -> int:
    """Layers after which every stack's pattern of layer kinds repeats (1 for stacks of one kind)."""
    import math

    from archspec.spec.layers import placement

    return math.lcm(*(len(placement(spec, n)[0].pattern) for n in (spec.encoder_layers, spec.decoder_layers) if n))


def _draw(spec: ModelSpec, fields: list[str], rng: random.Random, patterned: bool) -> dict[str, int]:
    """Random values for the fields, kept in the ranges the spec's own divisibility rules allow: widths
    and counts scaled by small whole factors (heads and the width together, so d_model / n_heads stays
    whole), layers anywhere from 1 to twice the spec's, or, where the count depends on where a pattern
    of layer kinds stops (`patterned`), whole periods of the pattern more."""
    out = {}
    scale_heads = rng.randint(1, 3)
    for f in fields:
        v = field_value(spec, f)
        if f in ("decoder_layers", "encoder_layers"):
            out[f] = v + period(spec) * rng.randint(0, 3) if patterned else rng.randint(1, 2 * v)
        elif f == "n_heads":
            out[f] = v * scale_heads
        elif f == "d_model":
            out[f] = v * scale_heads * rng.randint(1, 3)
        else:
            out[f] = v * rng.randint(1, 3) + (rng.randint(1, 64) if f in ("vocab_size", "max_positions") else 0)
    return out


def prove(spec: ModelSpec, symbols: dict[str, Any], params_expr, flops_expr, points: int = POINTS, seed: int = 0
          ) -> int:  # fmt: skip
    """Check the polynomials against count_params and count_flops at the spec and at `points` random valid
    specs; returns how many points were checked. NotDerived names the first that differs."""
    from archspec.count.flops import count_flops
    from archspec.count.params import count_params

    rng = random.Random(seed)
    fields = list(symbols)
    patterned = not (params_expr.is_polynomial(*symbols.values()) and flops_expr.is_polynomial(*symbols.values()))
    candidates = [{}] + [_draw(spec, fields, rng, patterned) for _ in range(8 * points)]
    checked = 0
    for values in candidates:
        try:
            s = spec.replace(**values) if values else spec
        except SpecError:  # a draw the spec's rules refuse (a layer pattern, a divisibility)
            continue
        point = {sym: field_value(s, f) for f, sym in symbols.items()}
        exact = count_params(s).total
        flops = count_flops(s, 1, None).forward
        seq = s.max_positions
        got_p = at(params_expr, point)
        got_f = at(flops_expr, point) * seq
        if got_p != exact or got_f != flops:
            shown = ", ".join(f"{f} = {v}" for f, v in (values or {f: field_value(spec, f) for f in fields}).items())
            which = "parameter count" if got_p != exact else "forward FLOPs"
            raise NotDerived(
                f"{spec.name}: the traced {which} differs from archspec's count at {shown} "
                f"({got_p if got_p != exact else got_f} vs {exact if got_p != exact else flops}): part of its "
                "description is not arithmetic on its fields, so no formula is shown"
            )
        checked += 1
        if checked > points:
            break
    return checked


def term_of_gap(spec: ModelSpec, gap: int, within: int = 20) -> dict[str, Any] | None:
    """The term of the spec's parameter polynomial (or one unit of it: V·d of 2·V·d) whose value is
    closest to |gap|, when within 1/`within` of it; None when none is, or when the description cannot be
    traced. What a figure that stays off may be counting differently."""
    from archspec.count.params import count_params

    if not gap or abs(gap) > 2 * count_params(spec).total:  # no term is that large
        return None
    try:
        f = derive(spec)
    except NotDerived:
        return None
    candidates = []
    for t in f.params.terms:
        candidates.append({"term": t.term, "value": t.value})
        if isinstance(t.coefficient, int) and t.coefficient > 1 and "·" in t.term:
            unit = t.term.split("·", 1)[1]
            candidates.append({"term": unit, "value": t.value // t.coefficient, "of": t.term, "times": t.coefficient})
    if not candidates:
        return None
    best = min(candidates, key=lambda c: abs(abs(gap) - c["value"]))
    if abs(abs(gap) - best["value"]) * within > abs(gap):  # exact: gaps of any size
        return None
    return {"gap": gap, **best}
