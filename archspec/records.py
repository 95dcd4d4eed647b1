"""Result types render from their fields: a result's JSON record is its fields, in the order they are
declared (nested results, dicts, lists and tuples copied as plain data), plus an explicit list of the
figures derived from them, each placed after the field it follows. No field is written twice.

Where a field's JSON form differs from the field itself, its metadata says so, declaratively
(``field(metadata=rendered(...))``): a key other than its name, a conversion (a Fraction as an exact
number), left out when None, shown as None unless a figure holds, spread out into the attributes of
a nested object, or not rendered at all (data the report keeps for its own text).

``Record`` is the base of the result types on the start-up path: their construction, freezing,
comparison, hash and repr, written once."""

# Annotations are objects, not strings (no `from __future__ import annotations`): typing.NamedTuple
# compiles a ForwardRef for every string field when the class is made, at every start-up.

from collections.abc import Callable, Mapping
from dataclasses import MISSING, FrozenInstanceError, fields, is_dataclass
from functools import cache
from reprlib import recursive_repr
from typing import Any, NamedTuple

_KEY = "archspec.record"


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


class Record:
    """The base of a result dataclass declared `@dataclass(init=False, eq=False, repr=False)`: it is
    made, is frozen, compares, hashes and shows as `@dataclass(frozen=True)`'s own generated methods
    would (each field by position or keyword, keyword-only ones by keyword, defaults and factories;
    a field set once, by __init__, and never again, nor any other attribute; equal to a result of the
    same class whose fields are equal, in order; hashed by those fields; `Name(field=value, ...)`), but
    from code compiled once, where `dataclass` writes and compiles each of these six methods for every
    class when the module loads (start-up: see the README's Performance section)."""

    __slots__ = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        cls = type(self)
        positional, plan = _init_plan(cls)
        if len(args) > len(positional):
            raise TypeError(f"{cls.__qualname__}.__init__() takes {len(positional) + 1} positional arguments "
                            f"but {len(args) + 1} were given")  # fmt: skip
        given = dict(zip(positional, args))
        for name in kwargs:
            if name in given:
                raise TypeError(f"{cls.__qualname__}.__init__() got multiple values for argument {name!r}")
        given.update(kwargs)
        put = object.__setattr__
        missing = []
        for name, default, factory, taken in plan:
            if taken and name in given:
                put(self, name, given.pop(name))
            elif default is not MISSING:
                put(self, name, default)
            elif factory is not MISSING:
                put(self, name, factory())
            elif taken:
                missing.append(name)
        if given:
            raise TypeError(f"{cls.__qualname__}.__init__() got an unexpected keyword argument {next(iter(given))!r}")
        if missing:
            raise TypeError(f"{cls.__qualname__}.__init__() missing {len(missing)} required argument"
                            f"{'s' if len(missing) > 1 else ''}: {', '.join(map(repr, missing))}")  # fmt: skip

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self.__dict__ or name not in self.__dataclass_fields__:
            raise FrozenInstanceError(f"cannot assign to field {name!r}")
        object.__setattr__(self, name, value)  # a subclass's generated __init__, once per field

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

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


@cache
def _init_plan(cls: type) -> tuple[tuple[str, ...], tuple[tuple[str, Any, Any, bool], ...]]:
    """The names a record type takes by position (its fields not keyword-only, in order) and every field
    __init__ sets: (name, default, default factory, taken as an argument), MISSING where there is none; a
    field with init=False is set from its default alone, as a generated __init__ sets it."""
    every = fields(cls)
    return (tuple(f.name for f in every if f.init and not f.kw_only),
            tuple((f.name, f.default, f.default_factory, f.init) for f in every))  # fmt: skip


def _compared(result: Any) -> tuple:
    return tuple(getattr(result, f.name) for f in fields(result) if f.compare)
