"""Every layer its own kind, on the reference model: for random layer kinds and patterns (windows,
chunks, NoPE, rotary bases, per-kind heads and widths, dense / MoE / no MLP, no mixer, QK-norm modes,
sinks, output gates, keys as values, relu2, clamped SwiGLU, norms without bias or weights, OLMo 2's
post-sublayer norms, sigmoid routers with a correction bias, residual and embedding multipliers,
MTP modules), the analytic description equals the instantiated model tensor by tensor, in
parameters and in FLOPs (FlopCounterMode, on meta and with real routing on the CPU); incremental
decoding with a cache equals the full pass and the cache holds kv_cache_bytes. Each feature's
computation is also held against transformers' own function where transformers has one."""

from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
from hypothesis import HealthCheck, assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from pydantic import ValidationError  # noqa: E402

from archspec import ModelSpec, SpecError, count_params  # noqa: E402
from archspec.count.flops import count_flops  # noqa: E402
from archspec.memory import kv_cache_bytes  # noqa: E402
from archspec.reference import build, cache_bytes, compare_tensors, count_by_component, count_total, verify  # noqa: E402
from archspec.reference.measure import count_by_role, example_inputs, measure_flops  # noqa: E402
from archspec.spec.layers import layer_kinds  # noqa: E402

BASE = dict(name="k", vocab_size=53, d_model=32, n_heads=4, d_head=8, max_positions=24)
QK = [False, True, "head", "full", "l2"]


@st.composite
def kind_tables(draw, model_position: str) -> dict:
    kind: dict = {}
    mixer = draw(st.sampled_from(["inherit", "standard", "none"]))
    if mixer == "none":
        kind["attention"] = "none"
    elif mixer == "standard":
        att: dict = {}
        limit = draw(st.sampled_from([None, "sliding_window", "chunk"]))
        if limit:
            att[limit] = draw(st.sampled_from([2, 3, 5]))
        for flag in ("sinks", "gate", "shared_kv", "value_norm"):
            if draw(st.booleans()):
                att[flag] = True
        if draw(st.booleans()):
            att["qk_norm"] = draw(st.sampled_from(QK))
        kind["attention"] = att
    if model_position in ("rotary", "none") and draw(st.booleans()):
        proportional = {"kind": "rotary", "fraction": 0.5, "proportional": True}
        kind["position"] = draw(st.sampled_from(["none", {"kind": "rotary", "base": 1e6},
                                                 {"kind": "rotary", "fraction": 0.5}, proportional]))  # fmt: skip
    if draw(st.booleans()):
        kind["n_kv_heads"] = draw(st.sampled_from([1, 2]))
    if draw(st.booleans()):
        kind["d_head"] = draw(st.sampled_from([4, 12]))
    if draw(st.booleans()):
        kind["d_ff"] = draw(st.sampled_from([8, 20]))
    mlp = draw(st.sampled_from(["inherit", "dense", "moe", "none"]))
    if mlp == "moe":
        kind["mlp"] = {"kind": "moe", "experts": draw(st.integers(2, 4)), "top_k": draw(st.integers(1, 2)),
                       "d_expert": 8, "d_shared": draw(st.sampled_from([0, 12])),
                       "scoring": draw(st.sampled_from(["softmax", "sigmoid"])),
                       "correction_bias": draw(st.booleans()), "normalize": draw(st.booleans()),
                       "routed_scale": draw(st.sampled_from([1.0, 2.5])),
                       "router_bias": draw(st.booleans())}  # fmt: skip
    elif mlp != "inherit":
        kind["mlp"] = mlp
    return kind


@st.composite
def kind_specs(draw) -> ModelSpec:
    norm = draw(st.sampled_from(["layernorm", "rmsnorm"]))
    position = draw(st.sampled_from(["rotary", "none", "learned"]))
    layers = draw(st.integers(2, 5))
    activation = draw(st.sampled_from(["gelu", "swiglu", "relu2", "clamped_swiglu"]))
    data = dict(
        BASE,
        decoder_layers=layers,
        n_kv_heads=draw(st.sampled_from([1, 2, 4])),
        position=position,
        norm=norm,
        norm_affine=draw(st.sampled_from(["weight", "none"] + (["weight_bias"] if norm == "layernorm" else []))),
        norm_position=draw(st.sampled_from(["pre", "post", "sandwich", "post_sublayer"])),
        activation=activation,
        bias=draw(st.sampled_from([True, False, {"qkv": True, "out": False, "mlp": True}])),
        tie_embeddings=draw(st.booleans()),
        residual_scale=draw(st.sampled_from([1.0, 0.5])),
        embedding_scale=draw(st.sampled_from(["none", 2.0])),
        attention={"kind": "standard", "qk_norm": draw(st.sampled_from(QK))},
    )
    if activation == "clamped_swiglu":
        data["swiglu_limit"] = draw(st.sampled_from([0.5, 7.0]))
    n = draw(st.integers(1, 3))
    names = [f"k{i}" for i in range(n)]
    data["kinds"] = {name: draw(kind_tables(position)) for name in names}
    order = draw(st.permutations(names))
    prefix = [order[0]] if n > 1 and draw(st.booleans()) else []
    unit = list(order[1:] if prefix else order) or list(order)
    unit += draw(st.lists(st.sampled_from(names), max_size=max(0, layers - len(prefix) - len(unit))))
    assume(len(prefix) + len(unit) <= layers)
    data["layers"] = {"prefix": prefix, "pattern": unit}
    if draw(st.booleans()):
        data["mtp"] = {"modules": draw(st.integers(1, 2)), "kind": draw(st.sampled_from([None, *names])),
                       "own_tables": draw(st.booleans())}  # fmt: skip
    try:
        return ModelSpec(**data)
    except ValidationError:
        assume(False)


SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])


@pytest.mark.slow  # 120 drawn stacks; the patterns one by one are fast tests below
@settings(max_examples=120, **SETTINGS)
@given(kind_specs())
def test_any_layer_pattern_analytic_equals_instantiated_tensor_by_tensor(spec):
    model = build(spec, device="meta")
    assert compare_tensors(spec, model) == []
    pc = count_params(spec)
    assert count_by_component(model) == pc.components
    assert count_by_role(model) == pc.roles
    assert count_total(model) == pc.total
    if spec.mtp is not None:  # the MTP modules, built only when asked, at the paths the description names
        with_mtp = build(spec, device="meta", mtp=True)
        assert compare_tensors(spec, with_mtp, mtp=True) == []
        assert count_by_component(with_mtp) == count_params(spec, mtp=True).components
        assert count_by_role(with_mtp) == count_params(spec, mtp=True).roles


@pytest.mark.slow  # dozens of drawn stacks; the patterns one by one are fast tests below
@settings(max_examples=60, **SETTINGS)
@given(kind_specs(), st.integers(1, 2), st.integers(1, 9))
def test_any_layer_pattern_forward_flops_equal_flopcountermode_on_meta(spec, batch, T):
    total, by_component = measure_flops(build(spec, device="meta"), example_inputs(spec, batch, T))
    analytic = count_flops(spec, batch, T)
    assert analytic.forward == total
    assert all(by_component.get(c, 0) == v for c, v in analytic.components.items())


@pytest.mark.slow  # dozens of drawn stacks; the patterns one by one are fast tests below
@settings(max_examples=25, **SETTINGS)
@given(kind_specs())
def test_any_layer_pattern_runs_on_cpu_with_its_flops(spec):
    """Real weights: finite outputs, and FLOPs with the experts really routing equal to the count."""
    model = build(spec, seed=0)
    x = torch.randint(0, spec.vocab_size, (2, 7), generator=torch.Generator().manual_seed(0))
    assert torch.isfinite(model(x)).all()
    total, _ = measure_flops(model, (x,))
    assert total == count_flops(spec, 2, 7).forward


@pytest.mark.slow  # dozens of drawn stacks; the patterns one by one are fast tests below
@settings(max_examples=30, **SETTINGS)
@given(kind_specs(), st.integers(1, 4))
def test_any_layer_pattern_decodes_with_a_cache_as_the_full_pass(spec, prompt):
    """Token by token after a prompt, each layer keeping what its kind keeps (a window or chunk of w:
    the last w - 1 keys), the logits equal the full pass; the cache holds kv_cache_bytes."""
    model = build(spec, seed=0).eval()
    x = torch.randint(0, spec.vocab_size, (2, 10), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        full = model(x)
        cache = model.new_cache()
        steps = [model(x[:, :prompt], cache=cache)] + [model(x[:, t : t + 1], cache=cache) for t in range(prompt, 10)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=1e-4, atol=1e-4)
    assert cache_bytes(cache) == kv_cache_bytes(spec, 2, 10, "fp32")


# ---------------------------------------------------------------- each kind builds what it says

PATTERN = ModelSpec(**BASE, decoder_layers=6, position="rotary", norm="rmsnorm", activation="swiglu", bias=False,
                    kinds={"local": {"attention": {"sliding_window": 4}, "position": {"base": 1e4}},
                           "nope": {"attention": {"chunk": 4}, "position": "none", "mlp": {
                               "kind": "moe", "experts": 4, "top_k": 2, "d_expert": 8}},
                           "global": {"position": {"base": 1e6}, "n_kv_heads": 1, "d_head": 12, "d_ff": 24}},
                    layers={"pattern": ["local", "local", "nope", "global"]})  # fmt: skip


def test_each_layer_is_built_from_its_kind():
    model = build(PATTERN, device="meta")
    for i, (name, kind) in enumerate(layer_kinds(PATTERN, 6)):
        att = model.decoder.layers[i].attention
        assert (att.window, att.chunk) == (kind.attention.sliding_window, kind.attention.chunk)
        assert (att.nkv, att.dk) == (kind.n_kv_heads, kind.d_head)
        if name == "nope":
            assert att.rotary is None and type(model.decoder.layers[i].mlp).__name__ == "MoE"
        else:
            assert att.rotary.base == kind.position.base
    assert model.decoder.layers[3].attention.rotary.base == 1e6 and model.decoder.layers[0].attention.rotary.base == 1e4
    assert verify(PATTERN, seq_len=9).ok


def test_a_chunk_hides_keys_of_earlier_chunks():
    spec = ModelSpec(**BASE, decoder_layers=1, position="none", attention={"kind": "standard", "chunk": 4})
    model = build(spec, seed=0).eval()
    x = torch.randint(0, 53, (1, 8))
    y = x.clone()
    y[0, 3] = (y[0, 3] + 1) % 53  # position 3 is in chunk 0; positions 4..7 form chunk 1
    torch.testing.assert_close(model(x)[:, 4:], model(y)[:, 4:])
    assert not torch.allclose(model(x)[:, 3], model(y)[:, 3])


def test_a_layer_without_mixer_or_mlp_has_no_sub_layer_nor_its_norm():
    spec = ModelSpec(**BASE, decoder_layers=2, kinds={"m": {"attention": "none"}, "a": {"mlp": "none"}},
                     layers={"pattern": ["m", "a"]})  # fmt: skip
    names = {n for n, _ in build(spec, device="meta").named_parameters()}
    assert not any(n.startswith(("decoder.layers.0.attention", "decoder.layers.1.mlp")) for n in names)
    assert "decoder.layers.0.mlp_norm.weight" in names and "decoder.layers.1.attention_norm.weight" in names


def test_mtp_modules_are_built_only_when_asked_and_verify():
    spec = PATTERN.replace(mtp={"modules": 2, "kind": "nope"})
    assert not any(n.startswith("mtp.") for n, _ in build(spec, device="meta").named_parameters())
    names = {n for n, _ in build(spec, device="meta", mtp=True).named_parameters()}
    assert {"mtp.1.proj.weight", "mtp.0.block.mlp.experts.up.weight", "mtp.1.head.weight"} <= names
    report = verify(spec, seq_len=9, mtp=True)
    assert report.ok and report.components["mtp"].measured == count_params(spec, mtp=True).components["mtp"] > 0


# ---------------------------------------------------------------- against transformers' own functions


def test_sinks_join_the_softmax_as_gpt_oss_computes_them():
    gpt_oss = pytest.importorskip("transformers.models.gpt_oss.modeling_gpt_oss")
    spec = ModelSpec(**BASE, decoder_layers=1, n_kv_heads=2, position="none",
                     attention={"kind": "standard", "sinks": True})  # fmt: skip
    att = build(spec, seed=0).decoder.layers[0].attention.eval()
    with torch.no_grad():
        att.sinks.copy_(torch.tensor([0.5, -1.0, 2.0, 0.0]))
    g = torch.Generator().manual_seed(0)
    q, k, v = (
        torch.randn(2, 4, 5, 8, generator=g),
        torch.randn(2, 2, 5, 8, generator=g),
        torch.randn(2, 2, 5, 8, generator=g),
    )
    mask = torch.full((5, 5), float("-inf")).triu(1)
    module = SimpleNamespace(sinks=att.sinks, num_key_value_groups=2, training=False)
    theirs, _ = gpt_oss.eager_attention_forward(module, q, k, v, mask, scaling=8**-0.5)
    ours = att.core(q, k, v, True, 0, None, None, None, None, True, sinks=att.sinks)
    torch.testing.assert_close(ours.transpose(1, 2), theirs)
    with torch.no_grad():  # without the sinks the rows sum to one again: the outputs differ
        assert not torch.allclose(att.core(q, k, v, True, gqa=True).transpose(1, 2), theirs)


def test_clamped_swiglu_is_gpt_oss_gate():
    gpt_oss = pytest.importorskip("transformers.models.gpt_oss.modeling_gpt_oss")
    from archspec.reference.mlp import clamped_swiglu

    gate_up = torch.randn(3, 16, generator=torch.Generator().manual_seed(0)) * 5
    theirs = gpt_oss.GptOssExperts._apply_gate(SimpleNamespace(alpha=1.702, limit=2.0), gate_up)
    torch.testing.assert_close(clamped_swiglu(gate_up[..., ::2], gate_up[..., 1::2], 2.0), theirs)


def test_proportional_rotary_is_gemma4s():
    """position.proportional: transformers' 'proportional' frequencies (over the whole head, zero past the
    rotated pairs) applied by Gemma 4's apply_rotary_pos_emb to the whole head; a spec with it verifies, runs on
    the CPU and turns only the first fraction * d_head / 2 pairs of the two halves."""
    gemma4 = pytest.importorskip("transformers.models.gemma4.modeling_gemma4")
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    from archspec.reference.attention import rotary_of

    spec = ModelSpec(**{**BASE, "d_head": 16}, decoder_layers=2, position={"kind": "rotary", "base": 1e4,
                     "fraction": 0.25, "proportional": True}, norm="rmsnorm")  # fmt: skip
    rotary = rotary_of(spec)
    config = SimpleNamespace(head_dim=16, hidden_size=32, num_attention_heads=4, standardize_rope_params=lambda: None,
                             rope_parameters={"rope_type": "proportional", "rope_theta": 1e4,
                                              "partial_rotary_factor": 0.25})  # fmt: skip
    inv_freq, _ = ROPE_INIT_FUNCTIONS["proportional"](config)
    torch.testing.assert_close(rotary.inv_freq, inv_freq)
    x = torch.randn(1, 4, 6, 16, generator=torch.Generator().manual_seed(0))  # (B, h, T, dk)
    angles = torch.arange(6.0)[:, None] * inv_freq
    emb = torch.cat((angles, angles), dim=-1)
    expected = gemma4.apply_rotary_pos_emb(x, emb.cos()[None], emb.sin()[None], unsqueeze_dim=1)
    torch.testing.assert_close(rotary(x), expected)
    turned = [0, 1, 8, 9]  # pairs (0, 8) and (1, 9) of the two halves
    still = [i for i in range(16) if i not in turned]
    torch.testing.assert_close(rotary(x)[..., still], x[..., still])
    assert not torch.allclose(rotary(x)[..., turned], x[..., turned])
    assert verify(spec, seq_len=9).ok and torch.isfinite(build(spec, seed=0)(torch.zeros(1, 5, dtype=torch.long))).all()
    with pytest.raises(SpecError, match="position: proportional turns pairs of the two halves; it excludes interl"):
        spec.replace(position={"kind": "rotary", "fraction": 0.25, "proportional": True, "interleaved": True})


def test_value_norm_is_gemma4s_v_norm_on_the_raw_keys_it_takes_as_values():
    """attention.value_norm: Gemma 4's weightless Gemma4RMSNorm (with_scale=False) over each value head; with
    shared_kv the values are the raw keys, normed so (before the keys' own norm and rotation)."""
    gemma4 = pytest.importorskip("transformers.models.gemma4.modeling_gemma4")
    attention = {"kind": "standard", "shared_kv": True, "qk_norm": "head", "value_norm": True}
    spec = ModelSpec(**BASE, decoder_layers=1, position="rotary", norm="rmsnorm", norm_eps=1e-6, attention=attention)
    att = build(spec, seed=0).decoder.layers[0].attention
    assert not list(att.v_norm.parameters())
    x = torch.randn(1, 5, 4, 8, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(att.v_norm(x), gemma4.Gemma4RMSNorm(8, eps=1e-6, with_scale=False)(x))
    seen = {}
    core = att.core
    att.core = lambda q, k, v, *args, **kwargs: core(q, k, seen.setdefault("v", v), *args, **kwargs)
    h = torch.randn(1, 5, 32)
    att(h)
    raw_k = att.qkv(h).split(att.split, dim=-1)[1].view(1, 5, 4, 8).transpose(1, 2)
    torch.testing.assert_close(seen["v"], att.v_norm(raw_k))
    assert verify(spec, seq_len=9).ok


def test_l2_qk_norm_is_llama4s_and_runs_after_the_rotation():
    llama4 = pytest.importorskip("transformers.models.llama4.modeling_llama4")
    from archspec.reference.norms import L2Norm

    x = torch.randn(2, 3, 8, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(L2Norm(1e-6)(x), llama4.Llama4TextL2Norm(1e-6)(x))
    spec = ModelSpec(**BASE, decoder_layers=1, position="rotary", norm="rmsnorm",
                     attention={"kind": "standard", "qk_norm": "l2"})  # fmt: skip
    att = build(spec, seed=0).decoder.layers[0].attention
    assert not list(att.parameters())[2:] or all("norm" not in n for n, _ in att.named_parameters())
    h = torch.randn(1, 5, 32)
    seen = {}
    att.q_norm.register_forward_hook(lambda m, a, out: seen.setdefault("q_in", a[0]))
    att(h)
    q = att.qkv(h).split(att.split, dim=-1)[0].view(1, 5, 4, 8).transpose(1, 2)
    torch.testing.assert_close(seen["q_in"], att.rotary(q))  # the norm sees the rotated queries


def test_sigmoid_router_with_a_correction_picks_as_deepseek_v3():
    ds = pytest.importorskip("transformers.models.deepseek_v3.modeling_deepseek_v3")
    spec = ModelSpec(**BASE, decoder_layers=1, bias=False, mlp={"kind": "moe", "experts": 8, "top_k": 2, "d_expert": 8,
                     "scoring": "sigmoid", "correction_bias": True, "routed_scale": 2.5}, norm="rmsnorm")  # fmt: skip
    moe = build(spec, seed=0).decoder.layers[0].mlp
    with torch.no_grad():
        moe.router_correction.copy_(torch.linspace(-0.5, 0.5, 8))
    config = SimpleNamespace(num_experts_per_tok=2, num_local_experts=8, hidden_size=32, routed_scaling_factor=2.5,
                             n_group=1, topk_group=1, norm_topk_prob=True)  # fmt: skip
    router = ds.DeepseekV3TopkRouter(config)
    with torch.no_grad():
        router.weight.copy_(moe.router.weight)
        router.e_score_correction_bias.copy_(moe.router_correction)
    x = torch.randn(6, 32, generator=torch.Generator().manual_seed(0))
    _, w_theirs, i_theirs = router(x)
    w, i = moe.route(x)
    order, order_theirs = i.sort(dim=-1).indices, i_theirs.sort(dim=-1).indices
    torch.testing.assert_close(i.gather(1, order), i_theirs.gather(1, order_theirs))
    torch.testing.assert_close(w.gather(1, order), w_theirs.gather(1, order_theirs))


def test_post_sublayer_norms_olmo2_style():
    spec = ModelSpec(**BASE, decoder_layers=1, norm="rmsnorm", norm_position="post_sublayer", position="none",
                     residual_scale=0.5)  # fmt: skip
    block = build(spec, seed=0).decoder.layers[0].eval()
    assert block.attention_norm is None and block.mlp_norm is None
    x = torch.randn(1, 4, 32)
    h = x + 0.5 * block.attention_post_norm(block.attention(x))
    torch.testing.assert_close(block(x), h + 0.5 * block.mlp_post_norm(block.mlp(h)))


def test_norm_affine_builds_layernorm_without_bias_or_weights():
    for affine, expected in (("weight_bias", 2), ("weight", 1), ("none", 0)):
        spec = ModelSpec(**BASE, decoder_layers=1, norm_affine=affine)
        norm = build(spec, device="meta").decoder.layers[0].attention_norm
        assert len(list(norm.parameters())) == expected


# ---------------------------------------------------------------- recurrent mixers


@pytest.mark.parametrize("mixer", [
    {"kind": "mamba", "d_inner": 64, "dt_rank": 4, "d_state": 8},
    pytest.param({"kind": "mamba2", "heads": 4, "head_dim": 16, "d_state": 8, "groups": 2}, marks=pytest.mark.slow),
    pytest.param({"kind": "gated_deltanet", "key_heads": 2, "value_heads": 4, "d_key": 8, "d_value_head": 8},
                 marks=pytest.mark.slow),
], ids=["mamba", "mamba2", "gated_deltanet"])  # fmt: skip
def test_hybrid_stacks_build_their_recurrent_mixers(mixer):
    pytest.importorskip("archspec.reference.mixers")
    spec = ModelSpec(**BASE, decoder_layers=4, position="rotary", norm="rmsnorm",
                     kinds={"mix": {"attention": mixer}, "att": {}},
                     layers={"pattern": ["mix", "mix", "mix", "att"]})  # fmt: skip
    model = build(spec, device="meta")
    assert model.decoder.layers[0].mixer.component == "mixer" and model.decoder.layers[0].attention is None
    assert compare_tensors(spec, model) == []
    real = build(spec, seed=0).eval()
    x = torch.randint(0, 53, (2, 8))
    with torch.no_grad():
        full = real(x)
        cache = real.new_cache()
        steps = [real(x[:, :3], cache=cache)] + [real(x[:, t : t + 1], cache=cache) for t in range(3, 8)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=1e-4, atol=1e-4)
    assert cache_bytes(cache) == kv_cache_bytes(spec, 2, 8, "fp32")


def test_the_reference_model_derives_its_widths_without_the_analytic_description():
    """The proof is independent: the modules that build the model never import the description
    (archspec/describe/: blocks, parts, attention, mlp, mixers, entries) nor the counts folded over it
    (verify compares against them; the builders read the spec and its layer view)."""
    import inspect
    import re

    from archspec.reference import attention, mixers, mlp, model, norms, positions

    counted = ("archspec.describe", "archspec.count", "archspec.memory", "archspec.plan")
    read = set()
    for module in (model, attention, mixers, mlp, norms, positions):
        imports = re.findall(r"^\s*(?:from|import) (archspec(?:\.\w+)+)", inspect.getsource(module), re.M)
        assert not [m for m in imports if m.startswith(counted)], (module.__name__, imports)
        read.update(imports)
    assert "archspec.spec.layers" in read  # the pattern finds what the builders do read
