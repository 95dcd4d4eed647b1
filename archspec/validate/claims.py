"""Published claims and how a spec measures up to them.

A claim lives with its preset (``[[models.NAME.claims]]`` in a family file)::

    quantity = "params"            # or "active_params", "non_embedding_params", "embedding_params",
                                   #    "training_flops", "pf_days"
    printed = "117M"               # as the source prints it: 117M, 1.3B, 12,850M, 3.14E+23, 2.60
    source = "Radford et al. 2019, Table 2"
    explanation = "..."            # optional: why it deviates; required for `off` claims to pass
    what_if = { vocab_size = 40478 }   # optional: spec changes that might reproduce the figure
    what_if_source = "..."         # where the what-if comes from; without it, it is a hypothesis; with it,
                                   #   a what-if that reproduces the figure explains it
    conventions = ["no_norms"]     # optional: counting conventions (archspec.validate.conventions) the source
                                   #   followed; the figure is recomputed under them
    solve_for = "vocab_size"       # optional: the range of this field that would reproduce it
    precision = 1e6                # optional: the printed precision, when trailing zeros mislead

Compute claims add ``method``: ``6nd`` (6·N·D with ``tokens``; ``using_params`` recomputes it with
the source's own rounded N), ``exact`` (archspec's exact training FLOPs for ``tokens`` at
``seq_len``), or ``hardware`` (``gpus`` × ``tflops`` × ``hours``: time at peak, as some papers
count).

A claim *matches* when the computed value rounds to the printed one at the printed precision
(trailing zeros of an integer are not significant: "340M" is 3.4·10⁸, "12,850M" is good to
10M); it is *truncated* when the value cut off at that precision is the printed one (LLaMA's
65.2B for 65,285,660,672) within 1%; it is *near* within 1% and *off* beyond. An `off` claim passes when it
is explained: by its `explanation`, by a sourced what-if that reproduces it, or by the named
`conventions` under which the count reproduces it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from archspec.core.errors import SpecError, clip, describe_validation_error, did_you_mean, shown
from archspec.core.limits import MAX_EXPONENT, float_or_int
from archspec.core.records import record, rendered
from archspec.spec.model import ModelSpec

SUFFIX = {"K": 3, "M": 6, "B": 9, "T": 12}  # powers of ten
NEAR = 0.01
COMPUTE_ONLY = ("method", "tokens", "seq_len", "using_params", "gpu", "gpus", "hours", "tflops")
METHOD_FIELDS = {  # the fields each method reads, besides quantity and printed
    "6nd": ("tokens", "using_params"),
    "exact": ("tokens", "seq_len"),
    "hardware": ("gpu", "gpus", "hours", "tflops"),
}


# parameter counts: no method, no workload
COUNTS = ("params", "active_params", "non_embedding_params", "embedding_params")
REPRODUCED = ("match", "truncated")  # statuses that reproduce the printed figure


class Claim(BaseModel):
    """One published figure about a model, with its source. Checked as data when it is read: a
    figure that is not a finite positive number, a field the claim's method does not read, or a
    what-if naming something that is not a spec field is an error before anything is computed."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    quantity: Literal[
        "params", "active_params", "non_embedding_params", "embedding_params", "training_flops", "pf_days"
    ]
    printed: str = Field(min_length=1, max_length=64)
    source: str = Field(min_length=1)
    explanation: str | None = None
    what_if: dict[str, Any] | None = None
    what_if_source: str | None = None
    solve_for: Literal["vocab_size", "max_positions"] | None = None
    precision: float | None = Field(None, gt=0)
    conventions: tuple[str, ...] = ()
    method: Literal["6nd", "exact", "hardware"] | None = None
    tokens: int | None = Field(None, ge=1)
    seq_len: int | None = Field(None, ge=1)
    using_params: str | None = Field(None, min_length=1, max_length=64)
    gpu: str | None = None
    gpus: int | None = Field(None, ge=1)
    hours: float | None = Field(None, gt=0)
    tflops: float | None = Field(None, gt=0)

    @field_validator("tokens", mode="before")
    @classmethod
    def _whole_tokens(cls, value: Any) -> Any:
        """tokens = 300e9 (a float in TOML) is the integer it reads as, never a float's binary value."""
        if isinstance(value, float) and math.isfinite(value):
            exact = Decimal(repr(value))
            if exact != exact.to_integral_value():
                raise ValueError(f"tokens must be a whole number, got {value!r}")
            return int(exact)
        if isinstance(value, str):
            from archspec.io.loading import parse_number

            return parse_number(value, "tokens", integer=True)
        return value

    @field_validator("what_if")
    @classmethod
    def _what_if_fields(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is None:
            return value
        fields = list(ModelSpec.model_fields)
        for key, v in value.items():
            if key not in fields:
                raise ValueError(f"what_if: unknown spec field {shown(key)}{did_you_mean(key, fields)}")
            if not isinstance(v, (int, float, str)):  # bool is an int
                raise ValueError(f"what_if.{key} must be a number, true/false or text, got {shown(v)}")
        return value

    def model_post_init(self, _context: Any) -> None:
        claimed, _ = parse_printed(self.printed)  # fails early on a figure that is not a number
        given = {k for k in type(self).model_fields if getattr(self, k) is not None}
        if self.quantity in COUNTS:
            extra = [k for k in COMPUTE_ONLY if k in given]
            if extra:
                raise ValueError(f"{', '.join(extra)}: only compute claims (training_flops, pf_days) read them")
        else:
            if self.method is None:
                raise ValueError(f"{self.quantity} claim {self.printed!r} needs a method (6nd, exact or hardware)")
            need = ("gpus", "tflops", "hours") if self.method == "hardware" else ("tokens",)
            missing = [k for k in need if getattr(self, k) is None]
            if missing:
                raise ValueError(f"{self.method} claim {self.printed!r} needs {', '.join(missing)}")
            extra = [k for k in COMPUTE_ONLY[1:] if k in given and k not in METHOD_FIELDS[self.method]]
            if extra:
                raise ValueError(f"{', '.join(extra)}: the {self.method} method does not read them")
            if self.solve_for:
                raise ValueError("solve_for applies to params claims only")
        if self.conventions:
            from archspec.validate.conventions import CONVENTIONS, unknown

            if self.quantity not in COUNTS:
                raise ValueError("conventions apply to parameter counts only")
            bad = unknown(self.conventions)
            if bad:
                raise ValueError(f"unknown convention {shown(bad[0])}{did_you_mean(bad[0], list(CONVENTIONS))}")
        if self.what_if_source and not self.what_if:
            raise ValueError("what_if_source names the source of a what_if, and there is none")
        if self.using_params is not None:
            parse_printed(self.using_params, "using_params")
        unit = None if self.precision is None else Fraction(repr(self.precision))
        if unit is not None and unit > _fraction(claimed):
            raise ValueError(
                f"precision {self.precision:g} is larger than the claimed figure {self.printed!r}; "
                "any computed value would round to it"
            )
        if unit is not None and unit < (last := _last_printed_digit(self.printed)):
            raise ValueError(  # 1e-300 on "124M": a precision the figure cannot hold, which only equality meets
                f"precision {self.precision:g} is finer than the last digit printed in {self.printed!r} ({last:g}); "
                "a precision says which printed digits count, from that digit up"
            )


def parse_claim(item, where: str) -> Claim:
    """One claim from its table, or a SpecError naming `where` and the problem."""
    try:
        return Claim.model_validate(item)
    except ValidationError as err:
        message = describe_validation_error(err, where, Claim.model_fields)
        raise SpecError(message.replace("unknown field", "unknown claim field")) from None
    except ValueError as exc:
        raise SpecError(f"{where}: {exc}") from None


def parse_claims(items, where: str) -> tuple[Claim, ...]:
    return tuple(parse_claim(item, f"{where}[{i}]") for i, item in enumerate(items))


_PRINTED = re.compile(r"([+-]?)([0-9]+(?:\.[0-9]+)?|\.[0-9]+)(?:[eE]([+-]?[0-9]+))?([KMBTkmbt]?)")


def parse_printed(text: str, what: str = "claimed figure") -> tuple[Decimal, Decimal]:
    """'117M' -> (117e6, 1e6); '1.3B' -> (1.3e9, 1e8); '12,850M' -> (12850e6, 10e6); '3.14E+23' -> (3.14e23, 1e21);
    '70 M' (a space before the unit, as Pythia's table prints it) -> (70e6, 10e6).

    The precision is one unit of the last significant digit; trailing zeros of an integer are not
    significant. Both are exact Decimals. A figure that is not a finite positive number (nan,
    Infinity), or whose exponent is beyond MAX_EXPONENT, is a SpecError.
    """
    if not isinstance(text, str):
        raise SpecError(f'{what} {shown(text)} must be text as printed, e.g. "117M"')
    s = text.strip().replace(",", "").replace("_", "").replace(" ", "")
    m = _PRINTED.fullmatch(s) if len(s) <= 64 else None
    if not m:
        raise SpecError(f"{what} {shown(text)} is not a number (e.g. 117M, 1.3B, 3.14E+23)")
    sign, digits, exponent, suffix = m.groups()
    exp10 = int(exponent) if exponent else 0
    if abs(exp10) > MAX_EXPONENT:
        raise SpecError(f"{what} {shown(text)} is out of range; exponents are limited to +-{MAX_EXPONENT}")
    exp10 += SUFFIX[suffix.upper()] if suffix else 0
    value = Decimal(f"{sign}{digits}e{exp10}")  # exact: built from the digits, no rounding context
    if value <= 0:
        raise SpecError(f"{what} {shown(text)} must be positive")
    # one unit of the last significant digit; an integer mantissa's trailing zeros are not significant
    decimals = len(digits.split(".")[1]) if "." in digits else -(len(digits) - len(digits.rstrip("0")))
    return value, Decimal(f"1e{exp10 - decimals}")


def _last_printed_digit(text: str) -> Decimal:
    """One unit of the last digit `text` prints, trailing zeros included: '124M' -> 1e6, '340M' -> 1e6,
    '2.60' -> 0.01 (parse_printed's precision counts an integer's trailing zeros out; this bound keeps them)."""
    _, precision = parse_printed(text)
    digits = _PRINTED.fullmatch(text.strip().replace(",", "").replace("_", "").replace(" ", "")).group(2)
    zeros = 0 if "." in digits else len(digits) - len(digits.rstrip("0"))
    return precision.scaleb(-zeros)


def _fraction(x: int | float | Decimal | Fraction) -> Fraction:
    """An exact rational: a float by its shortest decimal form (0.1 is 1/10), as it was written."""
    return Fraction(repr(x)) if isinstance(x, float) else Fraction(x)


def _round_half_up(x: Fraction) -> int:
    return math.floor(x + Fraction(1, 2))


def rounds_to(computed, claimed, precision) -> bool:
    """Whether `computed` rounds to `claimed` at `precision` (half up, exactly, at any size)."""
    unit = _fraction(precision)
    return _round_half_up(_fraction(computed) / unit) == _round_half_up(_fraction(claimed) / unit)


def truncates_to(computed, claimed, precision) -> bool:
    """Whether `computed`, cut off at `precision` (rounded down), is `claimed`: 65,286,216,704 is 65.2B."""
    unit = _fraction(precision)
    return math.floor(_fraction(computed) / unit) == math.floor(_fraction(claimed) / unit)


def status_of(computed, claimed, precision) -> tuple[str, float | int]:
    """match (rounds to the printed figure), truncated (cut off to it), near (within 1%) or off."""
    deviation = float_or_int((_fraction(computed) - _fraction(claimed)) / _fraction(claimed))
    if rounds_to(computed, claimed, precision):
        return "match", deviation
    if abs(deviation) <= NEAR and truncates_to(computed, claimed, precision):
        return "truncated", deviation
    return ("near" if abs(deviation) <= NEAR else "off"), deviation


def _number(d: Decimal) -> int | float:
    return int(d) if d == d.to_integral_value() else float_or_int(d)


@dataclass(frozen=True)
class Assessment:
    """A claim measured against the spec: the computed value, deviation, status and what-ifs. Its JSON
    record is its fields, in this order, with the claim's quantity, printed figure, source and
    explanation."""

    claim: Claim = field(metadata=rendered(expand=("quantity",)))
    claimed: Decimal = field(metadata=rendered(convert=_number))
    precision: Decimal = field(metadata=rendered(hidden=True))
    computed: int | float
    deviation: float
    status: str
    method_note: str = field(metadata=rendered("method"))
    what_if: dict[str, Any] | None = field(default=None, metadata=rendered(omit_none=True))
    implied: dict[str, Any] | None = field(default=None, metadata=rendered(omit_none=True))
    using_params: dict[str, Any] | None = field(default=None, metadata=rendered(omit_none=True))
    conventions: dict[str, Any] | None = field(default=None, metadata=rendered(omit_none=True))
    suggestions: list[dict[str, Any]] | None = field(default=None, metadata=rendered(omit_none=True))
    gap_term: dict[str, Any] | None = field(default=None, metadata=rendered(omit_none=True))

    @property
    def sourced_what_if(self) -> bool:
        """A what-if with its source that reproduces the printed figure."""
        w = self.what_if
        return w is not None and bool(self.claim.what_if_source) and w["status"] in REPRODUCED

    @property
    def by_conventions(self) -> bool:
        """The claim's named conventions reproduce the printed figure."""
        return self.conventions is not None and self.conventions["status"] in REPRODUCED

    @property
    def explanation(self) -> str:
        if self.claim.explanation:
            return self.claim.explanation
        if self.by_conventions:
            from archspec.validate.conventions import described

            return f"counted with {described(self.claim.conventions)}, as the source counts"
        if self.sourced_what_if:
            changes = ", ".join(f"{k} = {v}" for k, v in self.claim.what_if.items())
            return f"with {changes} ({self.claim.what_if_source}), the count reproduces the figure"
        return ""

    @property
    def explained(self) -> bool:
        return bool(self.explanation)

    @property
    def unexplained_off(self) -> bool:
        return self.status == "off" and not self.explained

    def to_dict(self) -> dict[str, Any]:
        return record(self, derived=(("claim.printed", "claimed"), ("claim.source", "claimed"),
                                     ("explanation", "status")))  # fmt: skip


def compute(spec: ModelSpec, claim: Claim) -> tuple[int | float, str]:
    """The value of the claimed quantity for `spec`, and how it was computed (exact, then as a JSON
    number: an int, or a float for PF-days)."""
    from archspec.count.params import count_params

    if claim.quantity in COUNTS:
        pc = count_params(spec)
        return {"params": (pc.total, "exact parameter count"),
                "active_params": (pc.active, "exact parameters one token uses (the top-k routed experts)"),
                "non_embedding_params": (pc.non_embedding, "exact count without embedding tables and head"),
                "embedding_params": (pc.total - pc.non_embedding, "exact count of embedding tables and head")}[
            claim.quantity]  # fmt: skip
    if claim.method == "hardware":
        flops = Fraction(claim.gpus) * _fraction(claim.tflops) * 10**12 * _fraction(claim.hours) * 3600
        gpu = clip(claim.gpu or "accelerator", 40)
        what = f"{claim.gpus} x {gpu} at {claim.tflops:g} TFLOP/s for {claim.hours:g} hours"
        value, note = round(flops), f"hardware time at peak: {what}"
    else:
        from archspec.count.flops import count_flops, training_cost

        tokens = claim.tokens
        cost = training_cost(count_flops(spec, 1, claim.seq_len), tokens)
        if claim.method == "6nd":
            value, note = cost.training_total_6nd, f"6 N D, N = {cost.params:,}, D = {tokens:,}"
        else:
            value, note = (
                cost.training_total,
                f"exact training FLOPs for D = {tokens:,} at seq_len {claim.seq_len or spec.max_positions}",
            )
    if claim.quantity == "pf_days":
        from archspec.count.flops import PF_DAY

        return float_or_int(Fraction(value, PF_DAY)), note + ", / 8.64e19 FLOPs per PF-day"
    return value, note


def _label(spec: ModelSpec, claim: Claim) -> str:
    return f"{spec.name}: {claim.quantity} claim {shown(claim.printed)} ({clip(claim.source, 60)})"


def check_claim(spec: ModelSpec, claim: Claim) -> ModelSpec | None:
    """The checks that need the spec, before anything is computed: the what-if makes a valid spec
    (returned), sequence lengths fit the learned position tables, solve_for has something to solve."""
    from archspec.count.flops import workload_lengths

    label = _label(spec, claim)
    alt = None
    if claim.what_if:
        try:
            alt = spec.replace(**claim.what_if)
        except SpecError as exc:
            raise SpecError(f"{label}: what_if: {exc}") from None
    if claim.method == "exact":
        for s, what in ((spec, "the spec"), (alt, "the what_if spec")):
            if s is not None:
                try:
                    workload_lengths(s, 1, claim.seq_len, None)
                except ValueError as exc:
                    raise SpecError(f"{label}: seq_len for {what}: {exc}") from None
    if claim.solve_for == "max_positions" and spec.position.kind != "learned":
        raise SpecError(
            f"{label}: solve_for = max_positions, but the count does not depend on it (position = {spec.position.kind})"
        )
    return alt


def assess(spec: ModelSpec, claim: Claim) -> Assessment:
    from archspec.core.checks import check_spec

    check_spec(spec, "assess")
    if not isinstance(claim, Claim):
        raise TypeError(f"assess: claim must be a Claim (archspec.validate.claims.Claim), got {type(claim).__name__}")
    alt = check_claim(spec, claim)
    claimed, precision = parse_printed(claim.printed)
    if claim.precision is not None:
        precision = Decimal(repr(claim.precision))
    try:
        computed, note = compute(spec, claim)
        what_if = implied = using = None
        if alt is not None:
            alt_value, _ = compute(alt, claim)
            alt_status, alt_dev = status_of(alt_value, claimed, precision)
            what_if = {
                "changes": dict(claim.what_if),
                "computed": alt_value,
                "status": alt_status,
                "deviation": alt_dev,
                "label": f"sourced: {claim.what_if_source}" if claim.what_if_source else "hypothesis",
            }
    except SpecError:
        raise
    except ValueError as exc:  # a planning function's bad-input error, named with the claim
        raise SpecError(f"{_label(spec, claim)}: {exc}") from None
    status, deviation = status_of(computed, claimed, precision)
    conventions = suggestions = None
    if claim.conventions:
        from archspec.validate.conventions import counts_under

        value = counts_under(spec, claim.conventions).of(claim.quantity)
        c_status, c_dev = status_of(value, claimed, precision)
        conventions = {"names": list(claim.conventions), "computed": value, "status": c_status, "deviation": c_dev}
    a = Assessment(claim, claimed, precision, computed, deviation, status, note, what_if, None, None, conventions)
    gap = None
    if status not in REPRODUCED and claim.quantity in COUNTS and not a.explained:
        suggestions = conventions_that_reproduce(spec, claim.quantity, claimed, precision)
        if not suggestions and status == "off":
            gap = gap_term(spec, round(_fraction(claimed)) - computed)
    if claim.solve_for and claim.quantity in COUNTS:
        implied = implied_range(spec, claim.solve_for, claimed, precision)
    if claim.using_params and claim.method == "6nd":
        n_printed, _ = parse_printed(claim.using_params, "using_params")
        value = 6 * _fraction(n_printed) * claim.tokens
        if claim.quantity == "pf_days":
            from archspec.count.flops import PF_DAY

            value = value / PF_DAY
        u_status, u_dev = status_of(value, claimed, precision)
        using = {"params": claim.using_params, "computed": float_or_int(value), "status": u_status, "deviation": u_dev}
    return Assessment(claim, claimed, precision, computed, deviation, status, note, what_if, implied, using,
                      conventions, suggestions, gap)  # fmt: skip


def gap_term(spec: ModelSpec, gap: int) -> dict[str, Any] | None:
    """Which term of the spec's parameter formula the gap (printed less computed) is the size of, when
    sympy is installed (the [formula] extra) and one is within 5% of it; else None."""
    try:
        import sympy  # noqa: F401
    except ImportError:
        return None
    from archspec.count.formula import term_of_gap

    return term_of_gap(spec, gap)


def conventions_that_reproduce(spec: ModelSpec, quantity: str, claimed, precision) -> list[dict[str, Any]]:
    """The smallest sets of known counting conventions under which `quantity` reproduces the printed
    figure (rounded or truncated), each with its count: what a spec or its source may be counting
    differently."""
    from archspec.validate.conventions import counts_under, described, search

    def reproduces(value: int) -> bool:
        return status_of(value, claimed, precision)[0] in REPRODUCED

    out = []
    for names in search(spec, quantity, reproduces):
        value = counts_under(spec, names).of(quantity)
        out.append({"conventions": list(names), "says": described(names), "computed": value,
                    "status": status_of(value, claimed, precision)[0]})  # fmt: skip
    return out


def implied_range(spec: ModelSpec, field: str, claimed, precision) -> dict[str, Any]:
    """The values of `field` whose exact count rounds to the claimed figure (the count is affine in
    it). When no positive value does, `low` and `high` are None and `note` says why."""
    from archspec.count.params import count_params

    x0 = getattr(spec, field)
    c0, c1, c2 = (count_params(spec.replace(**{field: x0 + k})).total for k in (0, 1, 2))
    slope = c1 - c0
    if c2 - c1 != slope or slope <= 0:
        raise SpecError(f"{spec.name}: the count is not affine in {field}; cannot solve for it")
    base = c0 - slope * x0  # the count at field = 0
    claimed, precision = _fraction(claimed), _fraction(precision)
    lo_count, hi_count = claimed - precision / 2, claimed + precision / 2  # [lo, hi) rounds to the claim
    lo = max(1, math.ceil((lo_count - base) / slope))
    hi = math.ceil((hi_count - base) / slope) - 1
    out: dict[str, Any] = {"field": field, "low": lo, "high": hi, "current": x0}
    if hi < lo:
        at_one = base + slope
        why = (
            f"the count is already {at_one:,} at {field} = 1"
            if at_one >= hi_count
            else f"the count steps by {slope:,} per unit of {field}, more than the printed precision"
        )
        out.update(low=None, high=None, note=f"no value of {field} reproduces the figure: {why}")
    return out
