"""Result types render from their fields: a result's JSON record is its fields, in the order they are
declared (nested results, dicts, lists and tuples copied as plain data), plus an explicit list of the
figures derived from them, each placed after the field it follows. No field is written twice.

Where a field's JSON form differs from the field itself, its metadata says so, declaratively
(``field(metadata=rendered(...))``): a key other than its name, a conversion (a Fraction as an exact
number), left out when None, shown as None unless a figure holds, spread out into the attributes of
a nested object, or not rendered at all (data the report keeps for its own text).

The result types themselves are plain ``@dataclass(frozen=True)`` classes; this module only reads
their fields (``dataclasses.fields``) and each field's metadata."""

from collections.abc import Callable, Mapping
from dataclasses import fields, is_dataclass
from fractions import Fraction
from typing import Any, NamedTuple

_KEY = "archspec.record"


class Exact(Fraction):
    """An exact figure that formats as a number: `f"{x:,}"` gives 1,234 for a whole one, and any format
    a float takes (`f"{x:,.2f}"`, `f"{x:.3g}"`) for the others. Arithmetic gives plain Fractions."""

    __slots__ = ()

    def __format__(self, spec: str) -> str:
        if self.denominator == 1 and spec[-1:] not in tuple("eEfFgG%"):
            return format(self.numerator, spec)
        if not spec:
            return str(self)
        return format(float(self), spec)


class Rendering(NamedTuple):
    """How one field appears in its result's record (the field's metadata under archspec.record)."""

    key: str | None = None  # the JSON key, when it is not the field's name
    convert: Callable[[Any], Any] | None = None  # e.g. exact_number for a Fraction
    omit_none: bool = False  # no key at all when the value is None
    none_unless: str | None = None  # None when this attribute of the result is false (a plan that does not fit)
    expand: Mapping[str, str] | None = None  # key -> attribute of the value, written in its place
    hidden: bool = False  # kept for the text report or a caller, not part of the record


def rendered(key: str | None = None, *, convert: Callable[[Any], Any] | None = None, omit_none: bool = False,
             none_unless: str | None = None, expand: tuple[str, ...] | Mapping[str, str] | None = None,
             hidden: bool = False) -> dict[str, Rendering]:  # fmt: skip
    """Field metadata for a field whose record differs from `asdict`'s. `expand`: the attributes of the
    value (fields or properties) written in the field's place, by name or as a key -> attribute map."""
    if expand is not None and not isinstance(expand, Mapping):
        expand = {name: name for name in expand}
    return {_KEY: Rendering(key, convert, omit_none, none_unless, expand, hidden)}


def rendering(f) -> Rendering:
    """The Rendering of dataclass field `f` (the default: its name, its value)."""
    return f.metadata.get(_KEY, Rendering())


def plain(value: Any) -> Any:
    """`value` as JSON-ready data: a nested result by its own record (its `to_dict`), dicts, lists and
    tuples copied (a tuple as a list, as JSON writes it)."""
    if is_dataclass(value) and not isinstance(value, type):
        return value.to_dict() if hasattr(value, "to_dict") else record(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def _attribute(obj: Any, path: str) -> Any:
    for name in path.split("."):
        obj = getattr(obj, name)
    return obj


def record(result: Any, derived: tuple[tuple, ...] = ()) -> dict[str, Any]:
    """The record of dataclass `result`: each field as its metadata renders it (rendered()), and each
    derived figure `(path, after)` or `(path, after, convert)` — a property, class constant or dotted
    attribute `path`, keyed by its last name — placed after the field `after`, in the order given."""
    follows: dict[str, list[tuple]] = {}
    for entry in derived:
        follows.setdefault(entry[1], []).append(entry)
    out: dict[str, Any] = {}

    def put(key: str, value: Any) -> None:
        if key in out:
            raise AssertionError(f"{type(result).__name__}'s record has two figures named {key!r}")
        out[key] = plain(value)

    for f in fields(result):
        how = rendering(f)
        value = getattr(result, f.name)
        if how.hidden or (how.omit_none and value is None):
            pass
        elif how.expand is not None:
            for key, attr in how.expand.items():
                put(key, _attribute(value, attr))
        elif how.none_unless is not None and not getattr(result, how.none_unless):
            put(how.key or f.name, None)
        else:
            put(how.key or f.name, value if how.convert is None else how.convert(value))
        for path, _, *convert in follows.pop(f.name, ()):
            value = _attribute(result, path)
            put(path.rsplit(".", 1)[-1], convert[0](value) if convert else value)
    if follows:
        raise AssertionError(f"derived figures placed after no field: {follows}")
    return out


def per_item(result: Any, items: str) -> list[dict[str, Any]]:
    """One record per element of the field `items` of `result` (a plot's curves, one per model): the
    element's first figure (its name), then the result's own record with the element's other figures
    where the `items` field stands (that field is rendered hidden, it is not a figure itself)."""
    names = [f.name for f in fields(result)]
    before = set(names[: names.index(items)])
    shared = record(result)
    head = {k: v for k, v in shared.items() if k in before}
    tail = {k: v for k, v in shared.items() if k not in before}
    out = []
    for item in getattr(result, items):
        own = record(item)
        first = next(iter(own))
        out.append({first: own.pop(first), **head, **own, **tail})
    return out
