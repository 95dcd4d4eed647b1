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


@pytest.mark.parametrize("step", [1, 3])
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
