"""Test matrices with a fast corner: every combination runs in CI (plain `python -m pytest`); the
fast set (`-m "not slow"`) keeps each case once, at one combination, and the first case at all."""

from __future__ import annotations

import itertools

import pytest


def fast_corner(cases, *axes, corner: tuple | None = None, ids=None, slow=()) -> list:
    """pytest.param(case, *combination) for every case and every combination of the axes, marked slow
    except each case at `corner` (default: the first value of each axis) and the first case at every
    combination; the cases named in `slow` (variants of a fast case that take seconds) are slow at
    every combination. `ids`: the cases' names (default: str of each)."""
    cases = list(cases)
    names = list(ids) if ids is not None else [str(c) for c in cases]
    corner = corner if corner is not None else tuple(axis[0] for axis in axes)
    assert set(slow) <= set(names), f"slow cases that are not cases: {sorted(set(slow) - set(names))}"
    params = []
    for i, (case, name) in enumerate(zip(cases, names, strict=True)):
        for combo in itertools.product(*axes):
            fast = (i == 0 or combo == corner) and name not in slow
            params.append(pytest.param(case, *combo, id="-".join([name, *map(str, combo)]),
                                       marks=() if fast else pytest.mark.slow))  # fmt: skip
    return params


def fast_only(cases, fast, ids=None) -> list:
    """pytest.param(case) for each of `cases` (a tuple: one value per argument name), marked slow unless
    its name is in `fast` (the representatives the fast set keeps); every name in `fast` must be a case."""
    cases = list(cases)
    names = list(ids) if ids is not None else [str(c) for c in cases]
    missing = set(fast) - set(names)
    assert not missing, f"fast cases that are not cases: {sorted(missing)}"
    return [pytest.param(*(c if isinstance(c, tuple) else (c,)), id=n, marks=() if n in fast else pytest.mark.slow)
            for c, n in zip(cases, names, strict=True)]  # fmt: skip
