"""Result types compare, hash and show as frozen dataclasses would: archspec.records.Record writes the
three methods once (start-up), and each result type on it must behave as `@dataclass(frozen=True)`'s own
generated methods do. The twin of each type is a plain frozen dataclass with the same fields, made here."""

import dataclasses
import functools

import pytest

import archspec
from archspec.catalog import get_preset
from archspec.compare import compare
from archspec.flops import count_flops, training_cost
from archspec.memory import estimate_memory, parallel_layout
from archspec.params import count_params
from archspec.records import Record


def _pairs():
    """(a result, another of its type with one field different), for every result type on Record."""
    gpt2, medium = archspec.preset("gpt2"), archspec.preset("gpt2-medium")
    return {
        "ParamCount": (count_params(gpt2), count_params(medium)),
        "FlopCount": (count_flops(gpt2, 1, 128), count_flops(gpt2, 2, 128)),
        "TrainingCost": (training_cost(count_flops(gpt2), 10**9), training_cost(count_flops(gpt2), 10**10)),
        "Comparison": (compare(gpt2), compare(gpt2, 512)),
        "Preset": (get_preset("gpt2"), get_preset("gpt2-medium")),
        "MemoryEstimate": (estimate_memory(gpt2, 1, 128), estimate_memory(gpt2, 2, 128)),
        "ParallelLayout": (parallel_layout(gpt2, 8, 2), parallel_layout(gpt2, 8, 4)),
    }


@functools.cache
def _twin_type(cls):
    """A plain frozen dataclass of the same name and fields (the methods dataclass generates)."""
    twin = dataclasses.make_dataclass(cls.__name__, [(f.name, f.type, dataclasses.field(repr=f.repr, compare=f.compare,
                                      hash=f.hash)) for f in dataclasses.fields(cls)], frozen=True)  # fmt: skip
    twin.__qualname__ = cls.__qualname__
    return twin


def _twin(result):
    """The same values in the twin type."""
    return _twin_type(type(result))(**{f.name: getattr(result, f.name) for f in dataclasses.fields(result)})


def test_every_result_type_on_record_is_checked():
    import archspec.compare  # noqa: F401  (the modules that define them)
    import archspec.flops  # noqa: F401
    import archspec.memory  # noqa: F401

    assert {c.__name__ for c in Record.__subclasses__() if c.__module__.startswith("archspec")} <= set(_pairs())


@pytest.mark.parametrize(
    "name", ["ParamCount", "FlopCount", "TrainingCost", "Comparison", "Preset", "MemoryEstimate", "ParallelLayout"]
)
def test_a_result_compares_hashes_and_shows_as_a_frozen_dataclass(name):
    a, b = _pairs()[name]
    again = dataclasses.replace(a)
    ta, tb, tagain = _twin(a), _twin(b), _twin(again)
    assert repr(a) == repr(ta) and repr(b) == repr(tb)
    assert (a == again, a == b, a != b, a == ta) == (ta == tagain, ta == tb, ta != tb, False)
    assert a.__eq__(object()) is NotImplemented and ta.__eq__(object()) is NotImplemented
    try:
        expected = hash(ta)
    except TypeError:  # a field holds a dict: unhashable, as the dataclass is
        with pytest.raises(TypeError):
            hash(a)
    else:
        assert hash(a) == expected
    first = dataclasses.fields(a)[0].name
    for target in (a, ta):  # a field, another attribute, a deletion: refused alike, with the same words
        for change in (lambda r: setattr(r, first, None), lambda r: setattr(r, "other", 1),
                       lambda r: delattr(r, first)):  # fmt: skip
            with pytest.raises(dataclasses.FrozenInstanceError) as refused:
                change(target)
            assert str(refused.value).startswith("cannot ")
    assert getattr(a, first) == getattr(again, first)  # nothing changed


@pytest.mark.parametrize(
    "name", ["ParamCount", "FlopCount", "TrainingCost", "Comparison", "Preset", "MemoryEstimate", "ParallelLayout"]
)
def test_a_result_is_made_as_a_dataclass_generated_init_makes_it(name):
    """Record's one __init__ takes what the class's generated __init__ would: every field by keyword, the
    fields not keyword-only by position too, defaults and factories for the rest; and refuses what it would
    refuse (a missing field, an unknown one, a field twice, a positional one too many), with a TypeError."""
    a, _ = _pairs()[name]
    cls = type(a)
    assert cls.__init__ is Record.__init__  # declared init=False: no generated __init__ compiled at start-up
    twin = _twin_type(cls)
    reference = dataclasses.make_dataclass(
        cls.__name__, [(f.name, f.type, c) for f, c in zip(dataclasses.fields(cls), _copied_fields(cls), strict=True)]
    )
    values = {f.name: getattr(a, f.name) for f in dataclasses.fields(a)}
    assert cls(**values) == a and _twin(cls(**values)) == twin(**values)
    positional = [f.name for f in dataclasses.fields(cls) if not f.kw_only]
    if positional:
        made = cls(*[values[n] for n in positional], **{k: v for k, v in values.items() if k not in positional})
        assert made == a
    required = [f.name for f in dataclasses.fields(cls)
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]  # fmt: skip
    defaulted = {f.name for f in dataclasses.fields(cls)} - set(required)
    least = {k: v for k, v in values.items() if k in required}
    ours, theirs = cls(**least), reference(**least)
    assert all(getattr(ours, n) == getattr(theirs, n) for n in defaulted)  # defaults and factories
    bad = [{k: v for k, v in values.items() if k != required[0]}, {**values, "no_such_field": 1}]
    for kwargs in bad:
        for make in (cls, reference):
            with pytest.raises(TypeError):
                make(**kwargs)
    for make in (cls, reference):
        if positional:  # a field by position and by keyword
            with pytest.raises(TypeError):
                make(values[positional[0]], **values)
        with pytest.raises(TypeError):  # one positional argument more than the fields
            make(*[values[n] for n in positional], *range(len(values) + 1 - len(positional)))


def _copied_fields(cls):
    """The class's fields as fresh dataclass fields (kw_only, default and factory kept) for a reference type."""
    out = []
    for f in dataclasses.fields(cls):
        kw = dict(kw_only=f.kw_only)
        if f.default is not dataclasses.MISSING:
            kw["default"] = f.default
        if f.default_factory is not dataclasses.MISSING:
            kw["default_factory"] = f.default_factory
        out.append(dataclasses.field(**kw))
    return out


def test_a_field_left_out_of_init_is_set_from_its_default_as_dataclass_sets_it():
    """A field declared init=False: not an argument, set from its default or factory (the generated
    __init__'s rule), for a record type made here on Record and its plain dataclass twin alike."""
    fields = [("a", int), ("b", int, dataclasses.field(default=2)),
              ("c", list, dataclasses.field(init=False, default_factory=list)),
              ("d", int, dataclasses.field(init=False, default=4))]  # fmt: skip
    ours = dataclasses.make_dataclass("R", fields, bases=(Record,), init=False, eq=False, repr=False)
    ours.__module__ = __name__  # a test's type, not one of archspec's results
    theirs = dataclasses.make_dataclass("R", fields, frozen=True)
    for make in (ours, theirs):
        r = make(1)
        assert (r.a, r.b, r.c, r.d) == (1, 2, [], 4)
        with pytest.raises(TypeError):
            make(1, c=[1])
        with pytest.raises(TypeError):
            make(1, 2, 3)
    assert repr(ours(1)) == repr(theirs(1)) and ours(1) == ours(1)
