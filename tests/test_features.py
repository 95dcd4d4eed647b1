"""The spec features of 2019-2025 models: for any valid combination, the analytic description equals
the reference model tensor by tensor and in FLOPs; and each feature does what its family does."""

import pytest

torch = pytest.importorskip("torch")
from hypothesis import HealthCheck, assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from matrix import fast_only  # noqa: E402
from pydantic import ValidationError  # noqa: E402

import archspec  # noqa: E402
from archspec import ModelSpec, count_params  # noqa: E402
from archspec.count.flops import count_flops  # noqa: E402
from archspec.memory import kv_cache_bytes  # noqa: E402
from archspec.reference import build, cache_bytes, compare_tensors, count_by_component, count_total  # noqa: E402
from archspec.reference.measure import count_by_role, example_inputs, measure_flops  # noqa: E402

BASE = dict(name="f", vocab_size=53, d_model=32, n_heads=4, max_positions=24, norm="rmsnorm")


@st.composite
def modern_specs(draw) -> ModelSpec:
    n_kv = draw(st.sampled_from([1, 2, 4]))
    d_head = draw(st.sampled_from([4, 8, 12]))
    enc, dec = draw(st.sampled_from([(0, 2), (0, 3), (2, 0), (1, 2)]))
    kind = draw(st.sampled_from(["learned", "sinusoidal", "rotary", "alibi", "relative", "transformer_xl", "none"]))
    position: dict = {"kind": kind}
    if kind == "learned":
        position["offset"] = draw(st.integers(0, 2))
    if kind == "rotary":
        position.update(fraction=draw(st.sampled_from([1.0, 0.5])), interleaved=draw(st.booleans()))
    if kind == "transformer_xl":
        position["per_layer"] = draw(st.booleans())
    latent = dec and not enc and kind == "rotary" and draw(st.booleans())
    data = dict(
        BASE,
        d_head=d_head,
        n_kv_heads=4 if latent else n_kv,
        encoder_layers=enc,
        decoder_layers=dec,
        position=position,
        norm=draw(st.sampled_from(["layernorm", "rmsnorm"])),
        norm_position=draw(st.sampled_from(["pre", "post", "sandwich", "post_sublayer"])),
        activation=draw(st.sampled_from(["gelu", "swiglu", "relu2", "clamped_swiglu"])),
        residual_scale=draw(st.sampled_from([1.0, 0.5])),
        bias=draw(
            st.sampled_from(
                [True, False, {"qkv": True, "out": False, "mlp": False}, {"qkv": False, "out": True, "mlp": True}]
            )
        ),  # fmt: skip
        tie_embeddings=draw(st.booleans()),
    )
    if enc and dec:
        data["share_embeddings"] = draw(st.booleans())
    if not (enc and dec) and draw(st.booleans()):
        data["block"] = {"kind": "parallel", "shared_norm": draw(st.booleans())}
        data["norm_position"] = "pre"
    if data["norm"] == "layernorm" or draw(st.booleans()):
        data["norm_affine"] = draw(st.sampled_from(["weight", "none"] + (["weight_bias"] if data["norm"] == "layernorm"
                                                                         else [])))  # fmt: skip
    if latent:
        data["attention"] = {"kind": "latent", "q_rank": draw(st.sampled_from([None, 16])), "kv_rank": 8,
                             "rope_dims": 4}  # fmt: skip
        data["d_value"] = draw(st.sampled_from([4, 8]))
    elif draw(st.booleans()):
        data["attention"] = {"kind": "standard", "qk_norm": draw(st.sampled_from([False, True, "full", "l2"])),
                             "sinks": draw(st.booleans()), "gate": draw(st.booleans()),
                             "shared_kv": draw(st.booleans()), "value_norm": draw(st.booleans()),
                             "scale": draw(st.sampled_from([None, 1.0])),
                             "softcap": draw(st.sampled_from([None, 20.0])),
                             "sliding_window": draw(st.sampled_from([None, 3])),
                             "sliding_layers": draw(st.sampled_from(["all", "even", "odd"]))}  # fmt: skip
    if draw(st.booleans()):
        layers = max(enc, dec)
        data["mlp"] = {"kind": "moe", "experts": draw(st.integers(2, 4)), "top_k": draw(st.integers(1, 2)),
                       "d_expert": draw(st.sampled_from([8, 16])), "d_shared": draw(st.sampled_from([0, 12])),
                       "router_bias": draw(st.booleans()),
                       "scoring": draw(st.sampled_from(["softmax", "sigmoid"])),
                       "correction_bias": draw(st.booleans()),
                       "dense_layers": draw(st.integers(0, layers - 1)),
                       "router_norm": draw(st.booleans()), "expert_scales": draw(st.booleans())}  # fmt: skip
        data["mlp"]["shared_gate"] = bool(data["mlp"]["d_shared"]) and draw(st.booleans())
        if data["norm_position"] == "sandwich":
            data["mlp"]["d_dense"] = draw(st.sampled_from([0, 12]))
    elif enc and not dec and draw(st.booleans()):  # ALBERT: factorised embeddings, one shared block
        data.update(embedding={"d_embed": 16}, share_layers=draw(st.booleans()), type_vocab_size=2,
                    embedding_norm=True, head=draw(st.sampled_from(["mlm", "none"])), tie_embeddings=True)  # fmt: skip
    elif draw(st.booleans()):
        data["head"] = draw(st.sampled_from([{"kind": "lm", "bias": True, "scale": 0.5, "softcap": 10.0}, "none"]))
    try:
        return ModelSpec(**data)
    except ValidationError:
        assume(False)


@pytest.mark.slow  # dozens of drawn models; the features one by one are fast tests below
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(modern_specs())
def test_any_modern_spec_analytic_equals_instantiated_tensor_by_tensor(spec):
    model = build(spec, device="meta")
    assert compare_tensors(spec, model) == []
    assert count_by_component(model) == count_params(spec).components
    assert count_by_role(model) == count_params(spec).roles
    assert count_total(model) == count_params(spec).total


@pytest.mark.slow  # dozens of drawn models; the features one by one are fast tests below
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(modern_specs(), st.integers(1, 2), st.integers(1, 9))
def test_any_modern_spec_forward_flops_equal_flopcountermode_on_meta(spec, batch, T):
    S = 5 if spec.kind == "encoder-decoder" else None
    total, by_component = measure_flops(build(spec, device="meta"), example_inputs(spec, batch, T, S))
    analytic = count_flops(spec, batch, T, S)
    assert analytic.forward == total
    assert all(by_component.get(c, 0) == v for c, v in analytic.components.items())


@pytest.mark.slow  # dozens of drawn models; the features one by one are fast tests below
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(modern_specs())
def test_any_modern_spec_runs_on_cpu_and_routes_its_tokens(spec):
    """Real weights on the CPU: finite outputs, and FLOPs (experts really routing tokens) equal to the
    analytic count, attention products included (SDPA's math backend)."""
    model = build(spec, seed=0)
    inputs = example_inputs(spec, 2, 6, 5 if spec.kind == "encoder-decoder" else None, device="cpu")
    inputs = tuple(torch.randint(0, spec.vocab_size, x.shape) for x in inputs)
    out = model(*inputs)
    assert torch.isfinite(out).all()
    total, by_component = measure_flops(model, inputs)
    assert total == count_flops(spec, 2, 6, 5 if spec.kind == "encoder-decoder" else None).forward


MOE = ModelSpec(**BASE, decoder_layers=3, n_kv_heads=2, position="rotary", activation="swiglu", bias=False,
                tie_embeddings=False, mlp={"kind": "moe", "experts": 4, "top_k": 2, "d_expert": 24, "d_shared": 16,
                                           "shared_gate": True, "dense_layers": 1})  # fmt: skip


def test_active_parameters_leave_out_the_experts_a_token_skips():
    pc = count_params(MOE)
    expert = 3 * 32 * 24  # gate, up, down of one expert, no biases
    assert pc.components["experts"] == 2 * 4 * expert  # two MoE layers of four experts
    assert pc.total - pc.active == 2 * (4 - 2) * expert  # each token uses 2 of the 4
    assert pc.components["router"] == 2 * 32 * 4 and pc.components["shared_experts"] == 2 * (3 * 32 * 16 + 32)


@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow), pytest.param(2, marks=pytest.mark.slow)])
def test_moe_flops_on_the_cpu_with_real_routing_equal_the_analytic_count(seed):
    """Whatever the router picks, N tokens make N·k expert passes: the count is exact."""
    model = build(MOE, seed=seed)
    x = torch.randint(0, 53, (3, 7), generator=torch.Generator().manual_seed(seed))
    total, by_component = measure_flops(model, (x,))
    f = count_flops(MOE, 3, 7)
    assert total == f.forward and by_component["experts"] == f.components["experts"] > 0


# Gemma 4's MoE block (transformers' Gemma4TextDecoderLayer): a dense MLP beside the experts, the
# router's weightless norm and per-channel scale, a scale per expert
GEMMA4_MOE = MOE.replace(norm_position="sandwich", activation="geglu",
                         mlp={**MOE.mlp.model_dump(), "d_shared": 0, "shared_gate": False, "d_dense": 20,
                              "router_norm": True, "expert_scales": True})  # fmt: skip


def test_gemma4_moe_block_verifies_and_runs_on_the_cpu():
    assert archspec.reference.verify(GEMMA4_MOE).ok
    pc = count_params(GEMMA4_MOE)
    # per MoE layer: router 32x4 + router_scale 32 + expert_scale 4; the dense MLP 3x32x20 (the first,
    # dense layer has its own d_ff MLP); three norms of 32 more per MoE layer
    assert pc.components["router"] == 2 * (32 * 4 + 32 + 4)
    assert pc.components["mlp"] == 3 * 32 * MOE.d_ff + 2 * 3 * 32 * 20
    model = build(GEMMA4_MOE, seed=0)
    x = torch.randint(0, 53, (2, 6), generator=torch.Generator().manual_seed(0))
    total, _ = measure_flops(model, (x,))
    assert total == count_flops(GEMMA4_MOE, 2, 6).forward
    assert torch.isfinite(model(x)).all()


GEMMA4_OFF = [{}, {"d_dense": 0, "router_norm": False}, {"d_dense": 0, "expert_scales": False},
              {"router_norm": False, "expert_scales": False}]  # fmt: skip


@pytest.mark.parametrize("off", fast_only(GEMMA4_OFF, {"all"}, ids=["all", "expert_scales", "router_norm", "d_dense"]))
def test_gemma4_moe_options_keep_what_autograd_measures_in_fp32(off):
    from archspec.reference import verify_memory

    spec = GEMMA4_MOE.replace(mlp={**GEMMA4_MOE.mlp.model_dump(), **off})
    assert verify_memory(spec).ok, verify_memory(spec).mismatches()


def test_gemma4_moe_layer_computes_its_two_branches_from_the_same_residual():
    model = build(GEMMA4_MOE, seed=0).eval()
    layer = model.decoder.layers[1]
    moe, x = layer.mlp, torch.randn(1, 5, 32)
    with torch.no_grad():
        moe.expert_scale.copy_(torch.tensor([0.5, 1.0, 2.0, 3.0]))
        flat = x.reshape(5, 32)
        r = flat * torch.rsqrt(flat.pow(2).mean(-1, keepdim=True) + GEMMA4_MOE.norm_eps) * moe.router_scale / 32**0.5
        w, idx = moe.router(r).softmax(-1).topk(2, dim=-1)
        w = w / w.sum(-1, keepdim=True) * moe.expert_scale[idx]
        h = moe.experts_norm(x).reshape(5, 32)
        routed = torch.stack([sum(w[n, j] * moe.experts(h[n : n + 1], int(idx[n, j]))[0] for j in range(2))
                              for n in range(5)]).reshape(1, 5, 32)  # fmt: skip
        h1 = moe.dense_post_norm(moe.dense(layer.mlp_norm(x)))
        expected = x + layer.mlp_post_norm(h1 + moe.experts_post_norm(routed))
        torch.testing.assert_close(layer.residual(x, "mlp", lambda h: moe(h, x)), expected)


def test_moe_routes_each_token_to_its_top_k_experts():
    model = build(MOE.replace(mlp={**MOE.mlp.model_dump(), "d_shared": 0, "shared_gate": False}), seed=0).eval()
    moe = model.decoder.layers[1].mlp
    x = torch.randn(1, 5, 32)
    flat = x.reshape(5, 32)
    probs = moe.router(flat).softmax(-1)
    w, idx = probs.topk(2, dim=-1)
    w = w / w.sum(-1, keepdim=True)
    expected = torch.stack([sum(w[n, j] * moe.experts(flat[n : n + 1], int(idx[n, j]))[0] for j in range(2))
                            for n in range(5)])  # fmt: skip
    torch.testing.assert_close(moe(x).reshape(5, 32), expected)


@pytest.mark.parametrize(
    "changes",
    [
        {"attention": {"kind": "latent", "q_rank": 16, "kv_rank": 8, "rope_dims": 4}, "d_head": 12, "d_value": 8},
        {"position": "alibi"},
        {"position": {"kind": "relative", "buckets": 8, "max_distance": 16}},
        {"position": {"kind": "relative", "buckets": 8, "max_distance": 16, "per_layer": True}},
        {"position": "transformer_xl"},
        {"position": {"kind": "transformer_xl", "per_layer": False}, "n_kv_heads": 2},
        {"attention": {"kind": "standard", "sliding_window": 4}},
        {"position": {"kind": "rotary", "fraction": 0.5, "interleaved": True}},
        {"norm_position": "sandwich", "attention": {"kind": "standard", "softcap": 5.0, "qk_norm": True}},
        {"block": {"kind": "parallel", "shared_norm": False}},
    ],
    ids=[
        "latent",
        "alibi",
        "relative",
        "relative-per-layer",
        "transformer-xl",
        "transformer-xl-shared-gqa",
        "sliding",
        "partial-interleaved-rotary",
        "sandwich-softcap-qknorm",
        "parallel",
    ],  # fmt: skip
)
def test_incremental_decoding_with_a_cache_matches_the_full_pass(changes):
    spec = ModelSpec(**{**BASE, "decoder_layers": 2, "position": "rotary", **changes})
    model = build(spec, seed=0).eval()
    x = torch.randint(0, 53, (2, 10))
    full = model(x)
    cache = model.new_cache()
    steps = [model(x[:, :4], cache=cache)] + [model(x[:, t : t + 1], cache=cache) for t in range(4, 10)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=1e-5, atol=1e-5)
    assert cache_bytes(cache) == kv_cache_bytes(spec, 2, 10, "fp32")


def test_a_sliding_window_hides_keys_beyond_it():
    spec = ModelSpec(**BASE, decoder_layers=1, position="rotary", attention={"kind": "standard", "sliding_window": 3})
    model = build(spec, seed=0).eval()
    x = torch.randint(0, 53, (1, 8))
    y = x.clone()
    y[0, 2] = (y[0, 2] + 1) % 53  # position 2 is outside the window of position 5 (3, 4, 5) with one layer
    torch.testing.assert_close(model(x)[:, 5:], model(y)[:, 5:])
    assert not torch.allclose(model(x)[:, 3], model(y)[:, 3])


def test_a_bidirectional_window_hides_keys_beyond_it_on_either_side():
    """In an encoder layer, sliding_window = 3 lets position 4 see positions 2 to 6 (|i - j| < 3), as
    ModernBERT's local layers see local_attention / 2 positions each side."""
    spec = ModelSpec(**BASE, encoder_layers=1, position="rotary", head="none",
                     attention={"kind": "standard", "sliding_window": 3})  # fmt: skip
    model = build(spec, seed=0).eval()
    x = torch.randint(0, 53, (1, 9))
    for far, near in ((1, 2), (7, 6)):  # one position beyond the window behind, then ahead
        y, z = x.clone(), x.clone()
        y[0, far] = (y[0, far] + 1) % 53
        z[0, near] = (z[0, near] + 1) % 53
        torch.testing.assert_close(model(x)[:, 4], model(y)[:, 4])
        assert not torch.allclose(model(x)[:, 4], model(z)[:, 4])


def test_a_layer_without_attention_norm_reads_the_residual_stream():
    """attention_norm = false (ModernBERT's first layer) drops one norm of d_model and changes the output;
    it needs pre-norm sequential blocks."""
    base = ModelSpec(**BASE, encoder_layers=2, position="rotary", head="none")
    bare = base.replace(kinds={"first": {"attention_norm": False}, "rest": {}}, layers={"prefix": ["first"],
                                                                                      "pattern": ["rest"]})  # fmt: skip
    assert count_params(base).total - count_params(bare).total == 32  # one RMSNorm weight of d_model
    assert compare_tensors(bare, build(bare, device="meta")) == []
    a, b = build(base, seed=0).eval(), build(bare, seed=0).eval()
    b.load_state_dict(a.state_dict(), strict=False)
    x = torch.randint(0, 53, (1, 6))
    assert not torch.allclose(a(x), b(x))
    with pytest.raises(archspec.SpecError, match="attention_norm=false"):
        base.replace(attention_norm=False, norm_position="post")


def test_shared_layers_count_once_and_run_every_layer():
    albert = ModelSpec(**{**BASE, "norm": "layernorm"}, encoder_layers=4, share_layers=True, embedding={"d_embed": 16},
                       type_vocab_size=2, embedding_norm=True, norm_position="post", head="mlm")  # fmt: skip
    once = albert.replace(encoder_layers=1)
    pc, pc1 = count_params(albert), count_params(once)
    assert pc.total == pc1.total  # the same parameters, one block's worth
    assert count_flops(albert, 1, 8).components["mlp"] == 4 * count_flops(once, 1, 8).components["mlp"]
    model = build(albert, device="meta")
    assert len(model.encoder.layers) == 1 and count_total(model) == pc.total
    # the factorised embedding: V x 16 table, a 16 -> 32 projection with bias
    assert pc.components["embed"] == 53 * 16 + 16 * 32 + 32


def test_t5_v1_1_shares_source_and_target_tables_with_an_untied_head():
    t5 = ModelSpec(**BASE, encoder_layers=2, decoder_layers=2, position="relative", bias=False, activation="geglu",
                   share_embeddings=True, tie_embeddings=False,
                   attention={"kind": "standard", "scale": 1.0})  # fmt: skip
    pc = count_params(t5)
    assert pc.components["embed"] == 53 * 32 and pc.components["head"] == 53 * 32
    assert pc.components["position"] == 2 * 32 * 4  # one buckets x heads table per stack
    assert count_params(t5.replace(share_embeddings=False)).components["embed"] == 2 * 53 * 32


def test_umt5_gives_every_layer_its_own_relative_bias_table():
    """position.per_layer (umT5): one buckets x heads table in each layer's self-attention, none per stack; the
    reference model builds them in the layers, and each layer's scores read its own table."""
    per_stack = ModelSpec(**BASE, encoder_layers=2, decoder_layers=3, position="relative", bias=False,
                          activation="geglu", attention={"kind": "standard", "scale": 1.0})  # fmt: skip
    per_layer = per_stack.replace(position={"kind": "relative", "per_layer": True})
    assert count_params(per_stack).components["position"] == 2 * 32 * 4
    assert count_params(per_layer).components["position"] == (2 + 3) * 32 * 4
    assert count_flops(per_layer, 1, 8).forward == count_flops(per_stack, 1, 8).forward  # lookups, no matmul
    model = build(per_layer, seed=0).eval()
    assert model.encoder.position is None and model.decoder.position is None
    tables = [layer.position.weight for stack in (model.encoder, model.decoder) for layer in stack.layers]
    assert len({t.data_ptr() for t in tables}) == 5
    g = torch.Generator().manual_seed(0)
    src, tgt = torch.randint(0, 53, (1, 6), generator=g), torch.randint(0, 53, (1, 5), generator=g)
    before = model(src, tgt)
    table = model.encoder.layers[1].position.weight  # the second encoder layer's table only
    with torch.no_grad():  # not a constant shift, which softmax would not see
        table.add_(torch.randn(table.shape, generator=g))
    assert not torch.allclose(model(src, tgt), before)
    from archspec.reference import verify

    report = verify(per_layer, seq_len=8)
    assert report.ok and not report.tensor_mismatches


def test_learned_offset_adds_rows_not_context():
    opt = ModelSpec(**BASE, decoder_layers=1, position={"kind": "learned", "offset": 2})
    assert count_params(opt).components["position"] == (24 + 2) * 32
    with pytest.raises(archspec.SpecError, match="longer than the learned position table"):
        count_flops(opt, 1, 25)


@pytest.mark.slow  # every preset built again on the meta device: a second or so
def test_presets_still_verify_with_every_feature_in_place():
    from archspec.reference import verify

    assert all(verify(archspec.preset(n), seq_len=16).ok for n in ("gpt2", "bert-base", "transformer-base"))


def test_set_changes_one_field_of_a_sub_table(run_json):
    (obj,) = run_json("params", "gpt2", "--set", "mlp.kind=moe", "--set", "mlp.experts=8", "--set", "mlp.top_k=2",
                      "--set", "mlp.d_expert=3072")  # fmt: skip
    moe = archspec.preset("gpt2").replace(mlp={"kind": "moe", "experts": 8, "top_k": 2, "d_expert": 3072})
    assert (obj["total"], obj["active"]) == (count_params(moe).total, count_params(moe).active)
    (obj,) = run_json("params", "gpt2", "--set", "bias.qkv=false")
    assert obj["total"] == 124_439_808 - 12 * 3 * 768  # twelve layers lose their Q, K and V biases
    spec = archspec.preset("gpt2").replace(**{"position.kind": "rotary", "position.base": 5e5})
    assert (spec.position.kind, spec.position.base) == ("rotary", 5e5)


@pytest.mark.parametrize(
    "name, total, active",
    [("mixtral-8x7b", "46.7B", "12.9B"), ("mixtral-8x22b", "141B", "39B")],
)
def test_published_total_and_active_pairs_are_reproduced(name, total, active):
    from archspec.validate.claims import parse_printed

    pc = count_params(archspec.preset(name))
    for value, printed in ((pc.total, total), (pc.active, active)):
        claimed, precision = parse_printed(printed)
        assert abs(value - claimed) <= precision / 2, (name, value, printed)


def test_deepseek_v3_is_671b_with_37b_active_less_the_input_table():
    pc = count_params(archspec.preset("deepseek-v3"))
    assert round(pc.total / 1e9) == 671
    assert round((pc.active - pc.components["embed"]) / 1e9) == 37  # the lookup multiplies nothing
