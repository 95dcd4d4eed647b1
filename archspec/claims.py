"""Published claims and how a spec measures up to them.

A claim lives with its preset (``[[models.NAME.claims]]`` in a family file)::

    quantity = "params"            # or "training_flops", "pf_days"
    printed = "117M"               # as the source prints it: 117M, 1.3B, 12,850M, 3.14E+23, 2.60
    source = "Radford et al. 2019, Table 2"
    explanation = "..."            # optional: why it deviates; required for `off` claims to pass
    what_if = { vocab_size = 40478 }   # optional: spec changes that might reproduce the figure
    what_if_source = "..."         # where the what-if comes from; without it, it is a hypothesis
    solve_for = "vocab_size"       # optional: the range of this field that would reproduce it
    precision = 1e6                # optional: the printed precision, when trailing zeros mislead

Compute claims add ``method``: ``6nd`` (6·N·D with ``tokens``; ``using_params`` recomputes it with
the source's own rounded N), ``exact`` (archspec's exact training FLOPs for ``tokens`` at
``seq_len``), or ``hardware`` (``gpus`` × ``tflops`` × ``hours``: time at peak, as some papers
count).

A claim *matches* when the computed value rounds to the printed one at the printed precision
(trailing zeros of an integer are not significant: "340M" is 3.4·10⁸, "12,850M" is good to
10M); it is *near* within 1% and *off* beyond.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from archspec.errors import SpecError, describe_validation_error
from archspec.spec import ModelSpec

SUFFIX = {"K": Decimal(10) ** 3, "M": Decimal(10) ** 6, "B": Decimal(10) ** 9, "T": Decimal(10) ** 12}
NEAR = 0.01


class Claim(BaseModel):
    """One published figure about a model, with its source."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    quantity: Literal["params", "training_flops", "pf_days"]
    printed: str = Field(min_length=1)
    source: str = Field(min_length=1)
    explanation: str | None = None
    what_if: dict[str, Any] | None = None
    what_if_source: str | None = None
    solve_for: Literal["vocab_size", "max_positions"] | None = None
    precision: float | None = Field(None, gt=0)
    method: Literal["6nd", "exact", "hardware"] | None = None
    tokens: float | None = Field(None, gt=0)
    seq_len: int | None = Field(None, ge=1)
    using_params: str | None = None
    gpu: str | None = None
    gpus: int | None = Field(None, ge=1)
    hours: float | None = Field(None, gt=0)
    tflops: float | None = Field(None, gt=0)

    def model_post_init(self, _context: Any) -> None:
        parse_printed(self.printed)  # fails early on a figure that is not a number
        if self.quantity != "params":
            if self.method is None:
                raise ValueError(f"{self.quantity} claim {self.printed!r} needs a method (6nd, exact or hardware)")
            need = ("gpus", "tflops", "hours") if self.method == "hardware" else ("tokens",)
            missing = [k for k in need if getattr(self, k) is None]
            if missing:
                raise ValueError(f"{self.method} claim {self.printed!r} needs {', '.join(missing)}")


def parse_claims(items, where: str) -> tuple[Claim, ...]:
    out = []
    for i, item in enumerate(items):
        try:
            out.append(Claim.model_validate(item))
        except ValidationError as err:
            msg = describe_validation_error(err, f"{where}[{i}]").replace("unknown field", "unknown claim field")
            raise SpecError(msg) from None
        except ValueError as exc:
            raise SpecError(f"{where}[{i}]: {exc}") from None
    return tuple(out)


def parse_printed(text: str) -> tuple[Decimal, Decimal]:
    """'117M' -> (117e6, 1e6); '1.3B' -> (1.3e9, 1e8); '12,850M' -> (12850e6, 10e6); '3.14E+23' -> (3.14e23, 1e21).

    The precision is one unit of the last significant digit; trailing zeros of an integer are not
    significant.
    """
    s = text.strip().replace(",", "").replace("_", "")
    scale = Decimal(1)
    if s and s[-1].upper() in SUFFIX:
        scale, s = SUFFIX[s[-1].upper()], s[:-1]
    mantissa, _, exponent = s.lower().partition("e")
    try:
        value = Decimal(s)
        exp10 = int(exponent) if exponent else 0
    except (InvalidOperation, ValueError):
        raise SpecError(f"claimed figure {text!r} is not a number (e.g. 117M, 1.3B, 3.14E+23)") from None
    if value <= 0:
        raise SpecError(f"claimed figure {text!r} must be positive")
    digits = mantissa.lstrip("+")
    # one unit of the last significant digit; an integer mantissa's trailing zeros are not significant
    decimals = len(digits.split(".")[1]) if "." in digits else -(len(digits) - len(digits.rstrip("0")))
    unit_exp = exp10 - decimals
    return value * scale, Decimal(10) ** unit_exp * scale


def rounds_to(computed: int | float | Decimal, claimed: Decimal, precision: Decimal) -> bool:
    c = Decimal(computed) if not isinstance(computed, float) else Decimal(repr(computed))
    return (c / precision).quantize(Decimal(1), ROUND_HALF_UP) == (claimed / precision).quantize(
        Decimal(1), ROUND_HALF_UP
    )


def status_of(computed, claimed: Decimal, precision: Decimal) -> tuple[str, float]:
    deviation = float((Decimal(computed if not isinstance(computed, float) else repr(computed)) - claimed) / claimed)
    if rounds_to(computed, claimed, precision):
        return "match", deviation
    return ("near" if abs(deviation) <= NEAR else "off"), deviation


@dataclass(frozen=True)
class Assessment:
    """A claim measured against the spec: the computed value, deviation, status and what-ifs."""

    claim: Claim
    claimed: Decimal
    precision: Decimal
    computed: int | float
    deviation: float
    status: str
    method_note: str
    what_if: dict[str, Any] | None = None
    implied: dict[str, Any] | None = None
    using_params: dict[str, Any] | None = None

    @property
    def explained(self) -> bool:
        return bool(self.claim.explanation)

    @property
    def unexplained_off(self) -> bool:
        return self.status == "off" and not self.explained

    def to_dict(self) -> dict[str, Any]:
        c = self.claim
        out: dict[str, Any] = {
            "quantity": c.quantity,
            "claimed": _number(self.claimed),
            "printed": c.printed,
            "source": c.source,
            "computed": self.computed,
            "deviation": self.deviation,
            "status": self.status,
            "explanation": c.explanation or "",
            "method": self.method_note,
        }
        for key in ("what_if", "implied", "using_params"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out


def _number(d: Decimal) -> int | float:
    return int(d) if d == d.to_integral_value() else float(d)


def compute(spec: ModelSpec, claim: Claim) -> tuple[int | float, str]:
    """The value of the claimed quantity for `spec`, and how it was computed."""
    from archspec.params import count_params

    if claim.quantity == "params":
        return count_params(spec).total, "exact parameter count"
    if claim.method == "hardware":
        flops = round(Decimal(claim.gpus) * Decimal(repr(claim.tflops)) * 10**12 * Decimal(repr(claim.hours)) * 3600)
        what = f"{claim.gpus} x {claim.gpu or 'accelerator'} at {claim.tflops:g} TFLOP/s for {claim.hours:g} hours"
        value, note = int(flops), f"hardware time at peak: {what}"
    else:
        from archspec.flops import count_flops, training_cost

        tokens = int(Decimal(repr(claim.tokens)))
        cost = training_cost(count_flops(spec, 1, claim.seq_len), tokens)
        if claim.method == "6nd":
            value, note = cost.training_total_6nd, f"6 N D, N = {cost.params:,}, D = {tokens:,}"
        else:
            value, note = (
                cost.training_total,
                f"exact training FLOPs for D = {tokens:,} at seq_len {claim.seq_len or spec.max_positions}",
            )
    if claim.quantity == "pf_days":
        from archspec.flops import PF_DAY

        return value / PF_DAY, note + ", / 8.64e19 FLOPs per PF-day"
    return value, note


def assess(spec: ModelSpec, claim: Claim) -> Assessment:
    claimed, precision = parse_printed(claim.printed)
    if claim.precision is not None:
        precision = Decimal(repr(claim.precision))
    computed, note = compute(spec, claim)
    status, deviation = status_of(computed, claimed, precision)
    what_if = implied = using = None
    if claim.what_if:
        try:
            alt = spec.replace(**claim.what_if)
        except ValidationError as err:
            raise SpecError(describe_validation_error(err, f"{spec.name}: what_if {claim.what_if}")) from None
        alt_value, _ = compute(alt, claim)
        alt_status, alt_dev = status_of(alt_value, claimed, precision)
        what_if = {
            "changes": dict(claim.what_if),
            "computed": alt_value,
            "status": alt_status,
            "deviation": alt_dev,
            "label": f"sourced: {claim.what_if_source}" if claim.what_if_source else "hypothesis",
        }
    if claim.solve_for and claim.quantity == "params":
        implied = implied_range(spec, claim.solve_for, claimed, precision)
    if claim.using_params and claim.method == "6nd":
        n_printed, _ = parse_printed(claim.using_params)
        value = 6 * n_printed * Decimal(repr(claim.tokens))
        if claim.quantity == "pf_days":
            from archspec.flops import PF_DAY

            value = value / PF_DAY
        u_status, u_dev = status_of(float(value), claimed, precision)
        using = {"params": claim.using_params, "computed": float(value), "status": u_status, "deviation": u_dev}
    return Assessment(claim, claimed, precision, computed, deviation, status, note, what_if, implied, using)


def implied_range(spec: ModelSpec, field: str, claimed: Decimal, precision: Decimal) -> dict[str, Any]:
    """The values of `field` whose exact count rounds to the claimed figure (the count is affine in it)."""
    from archspec.params import count_params

    x0 = getattr(spec, field)
    c0, c1, c2 = (count_params(spec.replace(**{field: x0 + k})).total for k in (0, 1, 2))
    slope = c1 - c0
    if c2 - c1 != slope or slope <= 0:
        raise SpecError(f"{spec.name}: the count is not affine in {field}; cannot solve for it")
    base = c0 - slope * x0
    lo_count, hi_count = claimed - precision / 2, claimed + precision / 2  # [lo, hi) rounds to the claim
    lo = max(1, math.ceil((lo_count - base) / slope))
    hi = math.ceil((hi_count - base) / slope) - 1
    return {"field": field, "low": lo, "high": hi, "current": x0}
