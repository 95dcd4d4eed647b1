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

    assert {c.__name__ for c in Record.__subclasses__()} <= set(_pairs())


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
