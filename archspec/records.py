"""Result types render from their fields: a result's JSON record is `dataclasses.asdict` of it (nested
dicts and lists copied), in the order its fields are declared, plus an explicit list of the figures
derived from them (properties), each placed after the field it follows. No field is written twice."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any


def record(result: Any, derived: tuple[tuple[str, str], ...] = ()) -> dict[str, Any]:
    """`asdict(result)` with each derived figure `(name, after)`, the property `name`, placed after the
    field `after`."""
    follows: dict[str, list[str]] = {}
    for name, after in derived:
        follows.setdefault(after, []).append(name)
    out: dict[str, Any] = {}
    for key, value in asdict(result).items():
        out[key] = value
        for name in follows.pop(key, ()):
            out[name] = getattr(result, name)
    if follows:
        raise AssertionError(f"derived figures placed after no field: {follows}")
    return out
