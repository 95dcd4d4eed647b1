"""DeepSeek-V3.2's sparse-attention indexer in the reference model (transformers' DeepseekV32Indexer):
its tensors, parameters and FLOPs against the analytic description, incremental decoding against the full
pass, its cached keys against the analytic KV cache, and the released config built and verified."""

from pathlib import Path

import pytest

import archspec
from archspec import ModelSpec
from archspec.memory import kv_cache_bytes

torch = pytest.importorskip("torch")
from archspec.reference import build, cache_bytes, verify  # noqa: E402

DATA = Path(__file__).parent / "data" / "hf"
TOY = dict(name="dsa-toy", vocab_size=64, d_model=48, decoder_layers=2, n_heads=4, d_head=24, d_value=16,
           n_kv_heads=4, d_ff=96, max_positions=64, position={"kind": "rotary", "interleaved": True}, norm="rmsnorm",
           norm_affine="weight", activation="swiglu", bias=False, tie_embeddings=False,
           attention={"kind": "latent", "q_rank": 20, "kv_rank": 12, "rope_dims": 8,
                      "indexer": {"heads": 8, "d_head": 16, "topk": 5}})  # fmt: skip


def toy(**changes) -> ModelSpec:
    return ModelSpec.model_validate({**TOY, **changes})


def test_toy_indexer_verifies_and_adds_its_tensors():
    spec = toy()
    report = verify(spec, seq_len=12)
    assert report.ok, report
    model = build(spec, device="meta")
    shapes = {n: tuple(p.shape) for n, p in model.named_parameters() if ".indexer." in n}
    ix = spec.attention.indexer
    assert shapes == {f"decoder.layers.{i}.attention.indexer.{name}": shape for i in range(2)
                      for name, shape in (("wq_b.weight", (ix.heads * ix.d_head, 20)), ("wk.weight", (ix.d_head, 48)),
                                          ("k_norm.weight", (ix.d_head,)), ("k_norm.bias", (ix.d_head,)),
                                          ("weights_proj.weight", (ix.heads, 48)))}  # fmt: skip
    dense = verify(toy(attention={**TOY["attention"], "indexer": None}), seq_len=12)
    assert dense.ok and report.params.measured - dense.params.measured == sum(
        torch.Size(s).numel() for s in shapes.values())  # fmt: skip
    assert report.flops.measured > dense.flops.measured


def test_released_deepseek_v32_builds_on_meta_and_verifies():
    spec = archspec.load_spec(str(DATA / "deepseek-v3.2.json"))
    assert spec.attention.indexer is not None
    report = verify(spec.replace(decoder_layers=5), seq_len=64)  # 3 dense layers and 2 with experts
    assert report.ok, report


def _logits_and_cache(spec, ids, step: int | None):
    torch.manual_seed(0)
    model = build(spec).eval()
    cache = model.new_cache()
    with torch.no_grad():
        if step is None:
            return model(ids, cache=cache), cache
        outs = [model(ids[:, i : i + step], cache=cache) for i in range(0, ids.shape[1], step)]
    return torch.cat(outs, dim=1), cache


@pytest.mark.parametrize("step", [1, pytest.param(3, marks=pytest.mark.slow)])
def test_incremental_decoding_equals_the_full_pass(step):
    spec = toy()
    ids = torch.randint(0, 64, (2, 12), generator=torch.Generator().manual_seed(1))
    full, _ = _logits_and_cache(spec, ids, None)
    steps, cache = _logits_and_cache(spec, ids, step)
    torch.testing.assert_close(steps, full, rtol=1e-5, atol=1e-5)
    dense, _ = _logits_and_cache(toy(attention={**TOY["attention"], "indexer": None}), ids, None)
    assert not torch.allclose(dense, full, atol=1e-3)  # topk 5 of 12 keys: the sparse mask changes the output
    assert cache[0]["self"]["index_k"].shape == (2, 12, 16)


@pytest.mark.parametrize("dtype, torch_dtype", [("fp32", torch.float32), ("bf16", torch.bfloat16)])
def test_cache_bytes_equal_the_analytic_kv_cache(dtype, torch_dtype):
    spec = toy()
    model = build(spec, dtype=torch_dtype).eval()
    cache = model.new_cache()
    with torch.no_grad():
        model(torch.randint(0, 64, (3, 9)), cache=cache)
    assert cache_bytes(cache) == kv_cache_bytes(spec, 3, 9, dtype)
    plain = toy(attention={**TOY["attention"], "indexer": None})
    assert kv_cache_bytes(spec, 3, 9, dtype) - kv_cache_bytes(plain, 3, 9, dtype) == 2 * 3 * 9 * 16 * torch.tensor(
        [], dtype=torch_dtype).element_size()  # fmt: skip


# transformers' DeepseekV32 names -> the reference model's, for dense layers (a table, read both ways)
HF_NAMES = (
    ("model.embed_tokens.", "embed."), ("lm_head.", "head."), ("model.norm.", "decoder.final_norm."),
    ("model.layers.", "decoder.layers."), (".input_layernorm.", ".attention_norm."),
    (".post_attention_layernorm.", ".mlp_norm."), (".self_attn.", ".attention."), (".q_a_proj.", ".q_a."),
    (".q_a_layernorm.", ".q_norm."), (".q_b_proj.", ".q_b."), (".kv_a_proj_with_mqa.", ".kv_a."),
    (".kv_a_layernorm.", ".kv_norm."), (".kv_b_proj.", ".kv_b."), (".o_proj.", ".out."),
    (".gate_proj.", ".gate."), (".up_proj.", ".up."), (".down_proj.", ".down."),
)  # fmt: skip


def _ours(name: str) -> str:
    for theirs, ours in HF_NAMES:
        name = name.replace(theirs, ours)
    return name


@pytest.mark.parametrize("attn", ["eager", pytest.param("sdpa", marks=pytest.mark.slow)])
def test_two_layers_equal_transformers_deepseek_v32(attn):
    """Two dense layers with the indexer keeping 5 of 12 keys: logits within 1e-5 of transformers'
    DeepseekV32ForCausalLM in float32 with the same weights, prompt and token by token."""
    transformers = pytest.importorskip("transformers")
    cfg = transformers.DeepseekV32Config(
        vocab_size=64, hidden_size=48, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=4, q_lora_rank=20, kv_lora_rank=12, qk_rope_head_dim=8, qk_nope_head_dim=16,
        v_head_dim=16, index_n_heads=8, index_head_dim=16, index_topk=5, first_k_dense_replace=2,
        max_position_embeddings=64, tie_word_embeddings=False, rms_norm_eps=1e-6, attn_implementation=attn,
    )  # fmt: skip
    torch.manual_seed(0)
    theirs = transformers.DeepseekV32ForCausalLM(cfg).eval()
    with torch.no_grad():  # LayerNorm starts at (1, 0): give k_norm weights that matter
        for p in theirs.parameters():
            p.normal_(0, 0.3 if p.ndim > 1 else 1.0)
    spec = toy()
    ours = build(spec).eval()
    state = {_ours(n): t for n, t in theirs.state_dict().items()}
    assert set(state) == set(ours.state_dict())
    ours.load_state_dict(state)
    ids = torch.randint(0, 64, (2, 12), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        expected = theirs(ids).logits
        torch.testing.assert_close(ours(ids), expected, rtol=0, atol=1e-5)
        cache = ours.new_cache()
        steps = torch.cat([ours(ids[:, i : i + 1], cache=cache) for i in range(12)], dim=1)
    torch.testing.assert_close(steps, expected, rtol=0, atol=1e-5)
    plain = build(toy(attention={**TOY["attention"], "indexer": None})).eval()
    plain.load_state_dict({n: t for n, t in state.items() if ".indexer." not in n})
    with torch.no_grad():
        assert (plain(ids) - expected).abs().max() > 1e-2  # the sparse mask is what makes them equal


def test_the_preset_is_the_released_config_and_verifies():
    preset = archspec.preset("deepseek-v3.2")
    released = archspec.load_spec(str(DATA / "deepseek-v3.2.json"))
    assert preset.model_dump(exclude={"name"}) == released.model_dump(exclude={"name"})
    report = verify(preset.replace(decoder_layers=4), seq_len=32, mtp=True)  # the MTP module built and counted too
    assert report.ok, report
