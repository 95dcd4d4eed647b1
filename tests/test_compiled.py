"""Counters compiled per structure (archspec.compiled): for a shape made by the fast `replace`, the program
of its structure answers exactly what full validation and the full way give — the parameter count, the
FLOPs, the memory estimate and a sweep's row — and what the reference model holds."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from replacing import replaced_as_validated

import archspec
import archspec.describe.blocks as blocks
from archspec.core import compiled
from archspec.core.compiled import full_way
from archspec.core.errors import SpecError
from archspec.count.flops import count_flops
from archspec.memory import estimate_memory
from archspec.plan.sweep import sweep_row
from archspec.spec import ModelSpec

# a preset of each kind of structure
FAMILIES = [
    "gpt2",  # dense, learned positions, tied
    "llama-3-8b",  # grouped-query attention, rotary, gated MLP
    "phi-3-mini",  # as many key/value heads as query heads
    "mixtral-8x7b",  # experts
    "deepseek-v3",  # latent attention, dense layers before the experts, shared experts
    "gemma-2-2b",  # sliding windows on every other layer, sandwich norms
    "gemma-3-1b",  # five local layers to one global
    "gpt-oss-20b",  # windows and experts, clamped SwiGLU
    "jamba-1.5-large",  # Mamba layers among attention layers, experts
    "qwen3-next-80b-a3b",  # Gated DeltaNet with attention, experts
    "nemotron-h-56b",  # Mamba-2 hybrid
    "t5-base",  # encoder-decoder, relative positions
    "transformer-base",  # encoder-decoder, sinusoidal positions
    "bert-base",  # encoder only, token types, pooler, masked-LM head
    "bloom-176b",  # ALiBi
]
WHOLE = ("d_model", "n_heads", "n_kv_heads", "d_head", "d_ff", "decoder_layers", "encoder_layers", "vocab_size",
         "max_positions")  # fmt: skip


@pytest.fixture(autouse=True)
def answered_at_once(monkeypatch):
    """Programs answer from their first use after the one they were recorded at (no shape checked twice)."""
    monkeypatch.setattr(compiled, "CHECKED", 0)


def value_for(v: int, draw) -> int:
    return draw(st.sampled_from([v, v + 1, 2 * v, max(v // 2, 1), max(v - 1, 1), 3 * v, 8, 64, 128]))


@st.composite
def shapes(draw):
    spec = archspec.preset(draw(st.sampled_from(FAMILIES)))
    fields = draw(st.lists(st.sampled_from(WHOLE), min_size=1, max_size=3, unique=True))
    changes = {f: value_for(getattr(spec, f), draw) for f in fields}
    return spec, changes, draw(st.sampled_from([1, 7, 128, 1024, 4096, 8192]))


def figures(spec: ModelSpec, T: int) -> tuple:
    T = min(T, spec.max_positions)
    return (archspec.count_params(spec), count_flops(spec, 2, T), estimate_memory(spec, batch=2, seq_len=T),
            sweep_row(spec, T, "bf16"), sweep_row(spec, None, "int4"))  # fmt: skip


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shapes())
def test_a_program_answers_what_the_full_way_gives_for_any_replacement(case):
    spec, changes, T = case
    figures(spec, T), figures(spec, T)  # the programs of the preset's structure, recorded at its own shape
    replaced = replaced_as_validated(spec, changes)
    if replaced is None:  # both refuse
        return
    fast, fresh = replaced
    got = figures(fast, T)
    with full_way():
        blocks._BLOCKS.clear()
        assert got == figures(fresh, T)


def test_programs_answer_a_grid_of_shapes_exactly():
    compiled.forget()
    spec = archspec.preset("llama-3-8b")
    grid = [spec.replace(d_model=d, decoder_layers=n) for d in range(3072, 5121, 512) for n in (16, 31, 32, 47)]
    got = [figures(s, 2048) for s in grid]
    assert compiled.answered() >= 4 * (len(grid) - 3)  # recorded at the second shape (and a branch), then answered
    with full_way():
        assert got == [figures(s, 2048) for s in grid]


def test_a_guard_that_fails_takes_the_full_way_then_records_that_branch():
    compiled.forget()
    gemma = archspec.preset("gemma-2-2b")  # windows of 4,096 tokens: a sequence within them, then beyond
    shapes = [gemma.replace(max_positions=n) for n in (2048, 3000, 8192, 2048, 9000)]
    got = [sweep_row(s) for s in shapes]  # the cache of max_positions tokens: min(tokens, window - 1), a guard
    question = next(p for (q, _), p in compiled._programs.items() if q[0] == "sweep_row")
    assert len(question.plans) == 2 and question.answered == 2  # recorded when asked again, a branch each
    with full_way():
        assert got == [sweep_row(s) for s in shapes]
    assert got[0]["kv_cache_bytes_per_token"] != got[2]["kv_cache_bytes_per_token"]


def test_a_line_that_fails_before_its_guard_takes_the_full_way():
    def per_row(spec):  # the guard (a comparison) is written after the division it protects
        if spec.vocab_size == 1:
            raise SpecError("one token")
        return 10**6 // (spec.vocab_size - 1)

    gpt2 = archspec.preset("gpt2")
    assert compiled.evaluate(("per_row",), per_row, gpt2) == compiled.evaluate(("per_row",), per_row, gpt2)
    assert compiled.evaluate(("per_row",), per_row, gpt2.replace(vocab_size=1001)) == 1000
    with pytest.raises(SpecError, match="one token"):  # the program divides by zero: the full way says why
        compiled.evaluate(("per_row",), per_row, gpt2.replace(vocab_size=1))


def test_a_spec_with_an_unhashable_or_traced_field_takes_the_full_way():
    from archspec.count.formula import derive

    f = derive(archspec.preset("gpt2"))  # archspec.formula's traced ints (unhashable) count the full way
    assert f.params.value == archspec.count_params(archspec.preset("gpt2")).total


def test_structure_is_kept_by_replace_of_whole_numbers_only():
    spec = archspec.preset("llama-3-8b")
    sid = compiled.structure(spec)
    assert compiled.structure(spec.replace(d_model=5120, decoder_layers=40)) == sid
    assert compiled.structure(spec.replace(activation="gelu")) != sid
    assert compiled.structure(spec.replace(d_head=128)) != sid  # given now: its default no longer follows
    t5 = archspec.preset("t5-base")
    assert compiled.structure(t5.replace(encoder_layers=0)) != compiled.structure(t5)  # derived defaults change


# ---------------------------------------------------------------- against the reference model

torch = pytest.importorskip("torch")
from archspec.reference import build, count_by_component, count_total  # noqa: E402
from archspec.reference.measure import example_inputs, measure_flops  # noqa: E402

SMALL = {  # toy widths of each structure, small enough to build and run on the meta device
    "llama-3-8b": dict(d_model=64, n_heads=4, n_kv_heads=2, d_ff=96, vocab_size=97, decoder_layers=2),
    "mixtral-8x7b": dict(d_model=64, n_heads=4, n_kv_heads=2, d_ff=48, vocab_size=97, decoder_layers=2),
    "gemma-2-2b": dict(d_model=64, n_heads=4, n_kv_heads=2, d_head=16, d_ff=96, vocab_size=97, decoder_layers=4),
    "t5-base": dict(d_model=64, n_heads=4, d_head=16, d_ff=96, vocab_size=97, encoder_layers=2, decoder_layers=2),
    "gpt2": dict(d_model=64, n_heads=4, vocab_size=97, decoder_layers=2, max_positions=64),
}


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(SMALL)), st.integers(1, 3), st.integers(1, 4), st.integers(1, 5))
def test_shapes_made_by_the_fast_path_count_what_the_reference_model_holds(name, wider, deeper, T):
    base = archspec.preset(name).replace(**SMALL[name])
    for _ in range(2):  # the programs of the structure, recorded when asked again
        archspec.count_params(base), count_flops(base, 1, T)
    shape = base.replace(d_model=base.d_model * wider, n_heads=base.n_heads * wider,
                         decoder_layers=base.decoder_layers + deeper)  # fmt: skip
    model = build(shape, device="meta")
    count = archspec.count_params(shape)
    assert count.total == count_total(model) and count.components == count_by_component(model)
    S = T if shape.kind == "encoder-decoder" else None
    total, _ = measure_flops(model, example_inputs(shape, 1, T, S))
    assert count_flops(shape, 1, T, S).forward == total
