"""Property: for any valid spec, analytic == instantiated, component by component."""

import pytest

torch = pytest.importorskip("torch")
from hypothesis import assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from archspec import ModelSpec, count_params  # noqa: E402
from archspec.reference import build, compare_tensors, count_by_component, count_total  # noqa: E402


@st.composite
def specs(draw) -> ModelSpec:
    n_kv = draw(st.integers(1, 4))
    n_heads = n_kv * draw(st.integers(1, 3))
    position = draw(st.sampled_from(["learned", "sinusoidal", "rotary", "none"]))
    explicit_head = draw(st.booleans())
    even = position in ("sinusoidal", "rotary")
    if explicit_head:
        d_head = draw(st.integers(1, 12)) * (2 if position == "rotary" else 1)
        d_model = draw(st.integers(1, 48)) * (2 if position == "sinusoidal" else 1)
        head = {"d_head": d_head}
    else:
        per = draw(st.integers(1, 8)) * (2 if even else 1)
        d_model, head = n_heads * per, {}
    enc, dec = draw(st.sampled_from([(0, 1), (0, 3), (2, 0), (1, 1), (2, 3), (3, 1)]))
    norm_position = draw(st.sampled_from(["pre", "post"]))
    data = dict(
        name="prop",
        vocab_size=draw(st.integers(1, 97)),
        d_model=d_model,
        encoder_layers=enc,
        decoder_layers=dec,
        n_heads=n_heads,
        n_kv_heads=n_kv,
        max_positions=draw(st.integers(1, 64)),
        position=position,
        norm=draw(st.sampled_from(["layernorm", "rmsnorm"])),
        norm_position=norm_position,
        activation=draw(st.sampled_from(["relu", "gelu", "silu", "swiglu", "geglu"])),
        bias=draw(st.booleans()),
        tie_embeddings=draw(st.booleans()),
        type_vocab_size=draw(st.integers(0, 3)),
        embedding_norm=draw(st.booleans()),
        pooler=enc > 0 and draw(st.booleans()),
        head=draw(st.sampled_from(["lm", {"kind": "lm", "bias": True}, "none"])),
        embedding_scale=draw(st.sampled_from(["none", "sqrt_d_model"])),
        **head,
    )
    for optional, strategy in (
        ("d_value", st.integers(1, 12)),
        ("d_ff", st.integers(1, 80)),
        ("final_norm", st.booleans()),
    ):
        if draw(st.booleans()):
            data[optional] = draw(strategy)
    return ModelSpec(**data)


@pytest.mark.slow  # dozens of drawn specs, each built (and run); one-spec tests elsewhere are fast
@settings(max_examples=150, deadline=None)
@given(specs())
def test_any_valid_spec_analytic_equals_instantiated(spec):
    model = build(spec, device="meta")
    assert count_by_component(model) == count_params(spec).components
    assert count_total(model) == count_params(spec).total
    assert compare_tensors(spec, model) == []  # every tensor, by path and shape


@pytest.mark.slow  # dozens of drawn specs, each built (and run); one-spec tests elsewhere are fast
@settings(max_examples=25, deadline=None)
@given(specs())
def test_any_valid_spec_runs_forward_on_cpu(spec):
    model = build(spec, seed=0)
    assert count_by_component(model) == count_params(spec).components  # real weights, not only meta
    T = min(spec.max_positions, 5)
    tokens = torch.randint(0, spec.vocab_size, (2, T))
    out = model(tokens, tokens) if spec.kind == "encoder-decoder" else model(tokens)
    width = spec.vocab_size if spec.head.kind == "lm" else spec.d_model
    assert out.shape == (2, T, width) and torch.isfinite(out).all()


@pytest.mark.slow  # dozens of drawn specs, each built (and run); one-spec tests elsewhere are fast
@settings(max_examples=60, deadline=None)
@given(specs(), st.integers(1, 3), st.integers(1, 12), st.integers(1, 12))
def test_any_valid_spec_forward_flops_equal_flopcountermode(spec, batch, T, S):
    from archspec.count.flops import count_flops
    from archspec.reference.measure import example_inputs, measure_flops

    T = min(T, spec.max_positions)
    S = min(S, spec.max_positions) if spec.kind == "encoder-decoder" else None
    total, by_component = measure_flops(build(spec, device="meta"), example_inputs(spec, batch, T, S))
    analytic = count_flops(spec, batch, T, S)
    assert analytic.forward == total
    assert all(by_component.get(c, 0) == v for c, v in analytic.components.items())


@pytest.mark.slow  # dozens of drawn specs, each built (and run); one-spec tests elsewhere are fast
@settings(max_examples=30, deadline=None)
@given(specs(), st.integers(1, 3), st.integers(1, 9))
def test_any_decoder_kv_cache_equals_the_cached_tensors(spec, batch, T):
    from archspec.memory import kv_cache_bytes
    from archspec.reference import cache_bytes

    assume(spec.decoder_layers > 0)  # an encoder-only model has no cache
    model = build(spec, seed=0).eval()
    T = min(T, spec.max_positions)
    S = min(4, spec.max_positions)
    tokens = torch.randint(0, spec.vocab_size, (batch, T))
    cache = model.new_cache()
    with torch.no_grad():
        if spec.kind == "encoder-decoder":
            model.decode(tokens, model.encode(torch.randint(0, spec.vocab_size, (batch, S))), cache)
        else:
            model(tokens, cache=cache)
    src = S if spec.kind == "encoder-decoder" else None
    assert kv_cache_bytes(spec, batch, T, "fp32", src) == cache_bytes(cache)
