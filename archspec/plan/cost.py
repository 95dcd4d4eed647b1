"""What a plan costs at the user's price of one device for an hour (``price_per_hour``, in the user's
currency). archspec holds no price of its own: the figure comes from ``--price-per-hour`` or from the
``price_per_hour`` of an accelerator file.

- Serving (``estimate_inference``, ``fit``): every device of the layout is paid for the whole time.
  Each phase's device time is charged to the tokens it produces:
  cost per million generated = devices x price / 3600 x decode seconds per step / batch x 10^6 (a step
  generates one token for each of the batch's sequences), and cost per million prefilled = devices x
  price / 3600 x prefill seconds / (batch x prompt tokens) x 10^6.
- Training (``training_cost``): device-hours x price, where device-hours = training FLOPs / (peak
  FLOP/s x mfu) / 3600 (the device count cancels: twice the devices, half the time).

Arithmetic is exact on the figures it is given (a price as typed, 2.49 as 249/100); only a time that
is itself a float estimate makes the result a float.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from decimal import Decimal
from fractions import Fraction

from archspec.core.errors import SpecError, shown
from archspec.core.limits import float_or_int
from archspec.core.records import Exact

SECONDS_PER_HOUR = 3600
MILLION = 10**6


def exact_price(price, what: str = "price_per_hour") -> Exact | None:
    """`price` (an int, float, Decimal or Fraction, or None) as an exact positive Fraction; a float as
    the decimal it prints as (2.49 is 249/100). Anything else, zero, a negative or a non-finite price
    is a SpecError naming `what`."""
    if price is None:
        return None
    if isinstance(price, bool) or not isinstance(price, (int, float, Decimal, Fraction)):
        raise SpecError(f"{what} must be a number (what one device costs an hour), got {shown(price)}")
    finite = price.is_finite() if isinstance(price, Decimal) else not isinstance(price, float) or math.isfinite(price)
    if not finite:
        raise SpecError(f"{what} must be a finite number, got {price}")
    if isinstance(price, int) and price.bit_length() > 1024:
        raise SpecError(f"{what} is too large: {shown(price)}")
    exact = Fraction(repr(price)) if isinstance(price, float) else Fraction(price)
    if exact <= 0:
        raise SpecError(f"{what} must be greater than 0 (what one device costs an hour), got {shown(price)}")
    return Exact(exact)  # formats as a number: f"{price:,.2f}"


def exact_number(x: Fraction) -> float | int:
    """A JSON-ready figure: an int when whole, else the nearest float."""
    return int(x) if x.denominator == 1 else float_or_int(x)


def per_million(price: Fraction, devices: int, seconds: float | Fraction, tokens: int) -> float | int:
    """What `tokens` tokens that keep `devices` devices busy for `seconds` cost, per million tokens."""
    return float_or_int(price * devices * Fraction(seconds) * MILLION / (SECONDS_PER_HOUR * tokens))


@dataclass(frozen=True)
class ServingCost:
    """What a serving layout costs at the user's price: an hour of its devices, and a million tokens of
    each phase (None where the plan does not fit, so has no times)."""

    cost_per_hour: float | int
    cost_per_million_generated: float | int | None
    cost_per_million_prefilled: float | int | None

    def to_dict(self) -> dict:
        return asdict(self)


def serving_cost(price: Fraction, devices: int, batch: int, prompt_len: int, prefill_seconds: float | None,
                 decode_seconds: float | None) -> ServingCost:  # fmt: skip
    """Each phase's device time charged to the tokens it makes: a decode step makes `batch` tokens, the
    prefill `batch` x `prompt_len`."""
    fits = prefill_seconds is not None and decode_seconds is not None
    return ServingCost(
        exact_number(price * devices),
        per_million(price, devices, decode_seconds, batch) if fits else None,
        per_million(price, devices, prefill_seconds, batch * prompt_len) if fits else None,
    )


def run_cost(price: Fraction, training_flops: int, peak_flops: float, mfu: float) -> float | int:
    """What a training run of `training_flops` costs at `price` a device-hour, each device reaching
    `mfu` of `peak_flops`: device-hours x price."""
    device_seconds = Fraction(training_flops) / (Fraction(peak_flops) * Fraction(mfu))
    return float_or_int(price * device_seconds / SECONDS_PER_HOUR)


def money(x: float | int | Fraction) -> str:
    """A cost for people: two decimals from 10 up (thousands separated), three significant figures below."""
    x = float(x)
    if x >= 10:
        return f"{x:,.2f}"
    return f"{x:.3g}"
