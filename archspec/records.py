"""Result types render from their fields: a result's JSON record is `dataclasses.asdict` of it (nested
dicts and lists copied), in the order its fields are declared, plus an explicit list of the figures
derived from them (properties), each placed after the field it follows. No field is written twice.

``Record`` is the base of the result types: their comparison, hash and repr, written once."""

from __future__ import annotations

from dataclasses import asdict, fields
from reprlib import recursive_repr
from typing import Any


class Record:
    """The base of a frozen result dataclass declared `@dataclass(frozen=True, eq=False, repr=False)`:
    it compares, hashes and shows as the dataclass's own generated methods would (equal to a result of
    the same class whose fields are equal, in order; hashed by those fields; `Name(field=value, ...)`),
    but from code compiled once, where `dataclass` writes and compiles each of the three for every
    class when the module loads (start-up: see the README's Performance section)."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return _compared(self) == _compared(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, f.name) for f in fields(self) if (f.compare if f.hash is None else f.hash)))

    @recursive_repr()
    def __repr__(self) -> str:
        shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self) if f.repr)
        return f"{self.__class__.__qualname__}({shown})"


def _compared(result: Any) -> tuple:
    return tuple(getattr(result, f.name) for f in fields(result) if f.compare)


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
