"""How many routed experts a decode step reads: the expected share of a layer's experts that a batch
of tokens touches, each token choosing its top-k uniformly and independently (archspec.plan.inference's
decode bound and the assumptions it prints both read it)."""

from __future__ import annotations

import math
from fractions import Fraction

EXACT_TOUCHED_UP_TO = 1024


def touched(moe, batch: int) -> Fraction:
    """The expected share of a layer's routed experts that `batch` tokens touch, each choosing top_k of
    the experts uniformly and independently: 1 - (1 - k/E)^B. An expectation, not a count: computed in
    floating point (-expm1(B log1p(-k/E)), accurate for small k/E), as exact powers would hold numbers of
    B digits (batch 10^12), and held as the Fraction of that float; exact up to EXACT_TOUCHED_UP_TO."""
    if moe.top_k >= moe.experts:
        return Fraction(1)
    if batch <= EXACT_TOUCHED_UP_TO:  # exact while the power stays small (numbers of about 8 x batch bits)
        return 1 - (1 - Fraction(moe.top_k, moe.experts)) ** batch
    return Fraction(-math.expm1(batch * math.log1p(-moe.top_k / moe.experts)))

