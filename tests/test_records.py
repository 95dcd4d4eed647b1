"""Result types render from their fields (archspec.core.records): every field of every result type is in its
JSON record, under the key its metadata names, unless it is declared hidden; and a field added to a type
appears in the record with no edit to a to_dict."""

from dataclasses import field, fields, make_dataclass

import pytest

import archspec
from archspec.core.records import plain, rendering

# GPT-2 (its preset, Radford et al. 2019) shrunk to toy size, and an encoder-decoder shrunk the same way
SMALL = {"d_model": 64, "n_heads": 4, "vocab_size": 1000, "max_positions": 32}


def _gpt2():
    return archspec.preset("gpt2").replace(decoder_layers=2, **SMALL)


def _t5():
    return archspec.preset("t5-base").replace(encoder_layers=1, decoder_layers=1, d_ff=128, d_head=16, **SMALL)


def _params():
    return archspec.count_params(_gpt2())


def _flops():
    return archspec.count_flops(_t5(), batch=2, seq_len=8, src_len=12)


def _comparison():
    from archspec.plan.compare import compare

    return compare(_gpt2(), seq_len=16)


def _inference():
    from archspec.plan.hardware import accelerator
    from archspec.plan.inference import estimate_inference

    return estimate_inference(_gpt2(), accelerator("h100"), 2, 8, 8, "bf16")


def _memory():
    from archspec.memory import estimate_memory

    return estimate_memory(_gpt2(), batch=2, seq_len=16)


def _assessment():
    """A claim of the 2017 paper's base model with a what-if and the figure it implies (its preset)."""
    from archspec.io.catalog import claim_sets
    from archspec.validate.claims import assess

    [(spec, claims)] = claim_sets(["transformer-base"])
    return assess(spec, next(c for c in claims if c.what_if))


def _accelerator():
    from archspec.plan.hardware import accelerator

    return accelerator("h100")


def _fit():
    from archspec.plan.fit import fit
    from archspec.plan.hardware import accelerator

    return fit(_gpt2(), accelerator("h100"), "bf16", task="lora")


def _verify():
    pytest.importorskip("torch")
    from archspec.reference import verify

    return verify(_t5(), batch=1, seq_len=8, src_len=4)


def _verify_memory():
    pytest.importorskip("torch")
    from archspec.reference import verify_memory

    return verify_memory(_gpt2(), seq_len=8)


def _activations():
    pytest.importorskip("torch")
    from archspec.reference.memory_measure import measure_activations

    return measure_activations(_gpt2(), 2, 8, "fp32", "eager", "none")


def _ranks():
    pytest.importorskip("torch")
    from archspec.reference.distributed import measure_ranks

    return measure_ranks(_gpt2(), 2, 3, 1)


def _verify_ranks():
    pytest.importorskip("torch")
    from archspec.reference import verify_ranks

    return verify_ranks(_gpt2(), 2, 3, 1)


RESULTS = [_params, _flops, _comparison, _inference, _memory, _assessment, _accelerator, _fit, _verify,
           _verify_memory, _activations, pytest.param(_ranks, marks=pytest.mark.slow),
           pytest.param(_verify_ranks, marks=pytest.mark.slow)]  # fmt: skip


def _expected_keys(result) -> list[str]:
    """The keys the record must hold for each field of `result`, read from the fields' metadata."""
    keys = []
    for f in fields(result):
        how = rendering(f)
        if how.hidden or (how.omit_none and getattr(result, f.name) is None):
            continue
        keys += list(how.expand) if how.expand is not None else [how.key or f.name]
    return keys


@pytest.mark.parametrize("make", RESULTS, ids=lambda make: make.__name__.strip("_"))
def test_every_field_is_in_the_record(make):
    result = make()
    out = result.to_dict()
    for f in fields(result):
        how, value = rendering(f), getattr(result, f.name)
        key = how.key or f.name
        if how.hidden:
            continue
        if how.expand is not None:
            for key, attr in how.expand.items():
                assert out[key] == plain(getattr(value, attr)), (f.name, key)
        elif how.omit_none and value is None:
            assert key not in out, f.name
        elif how.none_unless is not None and not getattr(result, how.none_unless):
            assert out[key] is None, f.name
        else:
            assert out[key] == plain(value if how.convert is None else how.convert(value)), f.name
    assert [k for k in out if k in _expected_keys(result)] == _expected_keys(result)  # in declared order

    # a field added to the type is in its record, with no edit to to_dict; the rest is unchanged
    probe = make_dataclass(f"Probe{type(result).__name__}", [("probe_figure", int, field(default=7, kw_only=True))],
                           bases=(type(result),), frozen=type(result).__dataclass_params__.frozen)  # fmt: skip
    extended = probe(**{f.name: getattr(result, f.name) for f in fields(result) if f.init}).to_dict()
    assert extended.pop("probe_figure") == 7
    assert extended == out


@pytest.mark.parametrize("kind", ["memory", "scaling"])
def test_a_plot_record_per_curve_holds_the_curve_and_the_shared_settings(kind):
    """per_item: one record per curve, its name first, every field of the curve and every setting of the
    plot (the curves themselves not a key); a field added to the curve type appears in every record."""
    from archspec.render import plot

    specs = [_gpt2(), _gpt2().replace(name="wider", d_model=128)]
    data = (plot.memory_data(specs, gpu="h100", longest=24) if kind == "memory"
            else plot.scaling_data(specs, "decoder_layers=1:3"))  # fmt: skip
    rows = data.to_dicts()
    shared = {f.name: getattr(data, f.name) for f in fields(data) if f.name != "curves"}
    assert len(rows) == len(data.curves) == 2
    for row, curve in zip(rows, data.curves):
        assert next(iter(row)) == "name" and row["name"] == curve.name
        assert {k: row[k] for k in shared} == {k: plain(v) for k, v in shared.items()}
        own = {f.name: plain(getattr(curve, f.name)) for f in fields(curve)}
        assert {k: row[k] for k in own} == own and set(row) == set(shared) | set(own)

    probe = make_dataclass("ProbeCurve", [("probe_figure", int, field(default=7, kw_only=True))],
                           bases=(type(data.curves[0]),), frozen=True)  # fmt: skip
    curves = [probe(**{f.name: getattr(c, f.name) for f in fields(c)}) for c in data.curves]
    extended = type(data)(**{**{f.name: getattr(data, f.name) for f in fields(data)}, "curves": curves}).to_dicts()
    assert [r.pop("probe_figure") for r in extended] == [7, 7] and extended == rows
