"""The fast path of ``ModelSpec.replace``: a spec with a few plain fields changed (numbers, flags, names of
choices), validated as full validation would validate it, at the cost of what changed.

A planning script replaces a few numbers of a spec many times (a sweep: thousands of shapes a second).
Validating the whole spec again costs most of that, so when only plain fields change, each new value is
validated by its field's own rule (one comparison for a whole number bounded below, pydantic's validator
for the field otherwise), the derived defaults that read a changed field are derived again, and the rules
across tables are answered by the program archspec.core.compiled recorded for the spec's structure (the
full rules where there is none). The result equals the spec full validation makes, field for field (a
fuzz test compares both, and their counts). Anything else, or any error, takes the full path, which
gives the one error message. Measured in benchmarks/planning.py.
"""

from functools import cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from archspec.core.compiled import STRUCTURE, evaluate, keep_structure
from archspec.spec.rules import check_spec


@cache
def _defaults(cls: type[BaseModel]) -> tuple[tuple[str, Any, str], ...]:
    """(field, its FieldInfo, how it defaults: 'value', 'factory', 'data' for a factory that reads the
    fields before it, or 'required'), in field order."""

    def how(info: Any) -> str:
        if info.default_factory is not None:
            return "data" if info.default_factory_takes_validated_data else "factory"
        return "required" if info.is_required() else "value"

    return tuple((name, info, how(info)) for name, info in cls.model_fields.items())


@cache
def _plain_fields(cls: type[BaseModel]) -> frozenset[str]:
    """Fields whose value is a number, a flag or a choice: validated alone, the same as in the model."""
    from types import UnionType
    from typing import Union, get_args, get_origin

    def plain(tp: Any) -> bool:
        if get_origin(tp) in (Union, UnionType):
            return all(plain(a) for a in get_args(tp))
        return tp in (int, float, bool, str) or get_origin(tp) is Literal

    return frozenset(n for n, info in cls.model_fields.items() if n != "name" and plain(info.annotation))


@cache
def _field_validator(cls: type[BaseModel], name: str) -> Any:
    from typing import Annotated

    from pydantic import TypeAdapter

    info = cls.model_fields[name]
    tp = Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation
    return TypeAdapter(tp, config=ConfigDict(strict=True))


@cache
def fast_replace(cls: type[BaseModel]) -> tuple[tuple[str, ...], dict[str, int], tuple[tuple[str, Any, Any], ...]]:
    """What `replaced` needs of a class: its fields; the least value of each whole-number field bounded only
    below (ge / gt: one comparison checks a plain int, as strict validation would); and, in field order,
    each default that reads other fields with its factory and the fields it reads (the field names among
    the factory's constants: `data.get("d_model")`; None, read as "all", when it names none)."""
    import annotated_types as at

    names = tuple(cls.model_fields)
    bounds = {}
    for name, info in cls.model_fields.items():
        if info.annotation is int and info.metadata:
            least = [m.ge if isinstance(m, at.Ge) else m.gt + 1 if isinstance(m, at.Gt) else None
                     for m in info.metadata]  # fmt: skip
            if None not in least:
                bounds[name] = max(least)
    derived = []
    for name, info, how in _defaults(cls):
        if how == "data":
            code = info.default_factory.__code__
            consts = {c for c in code.co_consts if isinstance(c, str)} & set(names)
            derived.append((name, info.default_factory, frozenset(consts) or None))
    return names, bounds, tuple(derived)


def replaced(spec: BaseModel, changes: dict[str, Any]) -> Any:
    """`spec` with plain `changes`, validated as full validation would; None where it refuses them."""
    cls = type(spec)
    names, bounds, derived = fast_replace(cls)
    new = {}
    for k, v in changes.items():
        least = bounds.get(k)
        if least is not None and type(v) is int and v >= least:
            new[k] = v
            continue
        try:
            new[k] = _field_validator(cls, k).validate_python(v)
        except ValidationError:
            return None
    given = spec.__pydantic_fields_set__ | new.keys()
    values = spec.__dict__.copy()
    values.pop(STRUCTURE, None)  # kept below where the structure is the same
    if len(values) != len(names):  # views cached on `spec` (cached_property) are not its copy's
        values = {k: values[k] for k in names}
    values.update(new)
    changed = set(new)
    for name, factory, reads in derived:  # in field order: a derived default reads the fields before it
        if name not in given and (reads is None or not changed.isdisjoint(reads)):
            values[name] = factory(values)
            changed.add(name)
    out = cls.__new__(cls)  # the new values are given; the rest is shared, as validation shares it
    object.__setattr__(out, "__dict__", values)
    object.__setattr__(out, "__pydantic_fields_set__", given)
    object.__setattr__(out, "__pydantic_extra__", None)
    object.__setattr__(out, "__pydantic_private__", None)
    keep_structure(spec, out, changed)
    try:
        evaluate(("rules",), _rules_hold, out)
    except ValueError:
        return None
    return out


def _rules_hold(spec: Any) -> bool:
    """The rules across tables (archspec.spec.rules), as a question archspec.core.compiled answers per structure."""
    check_spec(spec)
    return True
