"""One description of every block: each rule that keeps the analytic side and the reference model
one source, and the figures two descriptions once let drift."""

import json

import pytest

import archspec
from archspec import ModelSpec
from archspec.count.flops import count_flops
from archspec.describe.blocks import AttentionShape, MLPShape, stack_shapes
from archspec.memory import DTYPE_BYTES, kv_cache_bytes

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from archspec.reference import build, count_by_component  # noqa: E402
from archspec.reference.measure import measure_flops  # noqa: E402

TOY = dict(name="toy", vocab_size=61, d_model=32, n_heads=4, max_positions=24, decoder_layers=2)


# ---------------------------------------------------------------- tensor by tensor


def test_a_tensor_the_description_lacks_is_named():
    """The comparison the preset test reads can fail, and names the tensor: a model with one more norm."""
    from archspec.reference import compare_tensors

    spec = ModelSpec(**TOY)
    model = build(spec, device="meta")
    model.decoder.layers[1].extra = nn.LayerNorm(32, device="meta")
    assert compare_tensors(spec, model) == [
        "tensor decoder.layers.1.extra.weight (32,) is in the model, not in the description",
        "tensor decoder.layers.1.extra.bias (32,) is in the model, not in the description",
    ]


def test_widths_are_read_from_one_shape_by_both_sides():
    spec = ModelSpec(**{**TOY, "n_kv_heads": 2, "d_value": 12, "activation": "swiglu", "d_ff": 40})
    a, m = AttentionShape.of(spec), MLPShape.of(spec)
    model = build(spec, device="meta")
    layer = model.decoder.layers[0]
    assert layer.attention.qkv.out_features == a.q + a.k + a.v == 32 + 16 + 24
    assert layer.attention.out.in_features == a.out_in == 4 * 12
    assert (layer.mlp.gate.out_features, layer.mlp.up.out_features) == (m.d_ff, m.d_ff) and m.inputs == ("gate", "up")


def test_stacks_say_what_they_read_and_whether_they_cross_attend():
    enc_dec = ModelSpec(**{**TOY, "encoder_layers": 3})
    assert [(s.name, s.reads, s.cross, s.causal) for s in stack_shapes(enc_dec)] == [
        ("encoder", "source", False, False),
        ("decoder", "target", True, True),
    ]
    model = build(enc_dec, device="meta")
    assert len(model.encoder.layers) == 3 and model.decoder.layers[0].cross_attention is not None


# ---------------------------------------------------------------- explicit fields


def test_head_none_has_no_output_projection_and_returns_hidden_states():
    spec = ModelSpec(**TOY, head="none", tie_embeddings=False)
    model = build(spec)
    assert model.head is None and "head" not in dict(model.named_parameters())
    assert archspec.count_params(spec).components["head"] == 0
    assert model(torch.randint(0, 61, (2, 5))).shape == (2, 5, 32)
    assert count_flops(spec, 1, 8).components["head"] == 0


def test_head_bias_is_counted_built_and_added():
    spec = ModelSpec(**TOY, head={"kind": "lm", "bias": True})
    model = build(spec)
    assert tuple(model.head.bias.shape) == (61,)
    assert archspec.count_params(spec).components["head"] == 61  # the weight is the tied embedding
    with torch.no_grad():
        model.head.bias.fill_(1.0)
        x = torch.randint(0, 61, (1, 4))
        hidden = model.hidden_states(x)
        torch.testing.assert_close(model(x), hidden @ model.embed.weight.T + 1.0)


def test_norm_eps_reaches_every_norm():
    spec = ModelSpec(**TOY, norm="rmsnorm", norm_eps=1e-5)
    norms = [m for m in build(spec, device="meta").modules() if isinstance(m, nn.RMSNorm)]
    assert norms and all(m.eps == 1e-5 for m in norms)
    assert ModelSpec(**TOY, norm="rmsnorm").norm_eps == 1e-6  # LLaMA 1's default, as before


def test_embedding_scale_and_init_are_explicit_with_the_old_defaults():
    enc_dec = ModelSpec(**{**TOY, "encoder_layers": 1})
    assert (enc_dec.embedding_scale, enc_dec.init) == ("sqrt_d_model", "xavier")
    assert (ModelSpec(**TOY).embedding_scale, ModelSpec(**TOY).init) == ("none", "gpt2")
    scaled = build(ModelSpec(**TOY, embedding_scale="sqrt_d_model"), seed=0)
    plain = build(ModelSpec(**TOY), seed=0)
    x = torch.randint(0, 61, (1, 4))
    assert scaled.embed_scale == 32**0.5 and plain.embed_scale == 1.0
    assert not torch.allclose(scaled(x), plain(x))


def test_a_bare_string_names_a_sub_table_member_with_its_defaults(tmp_path):
    path = tmp_path / "m.toml"
    path.write_text('name = "m"\nvocab_size = 10\nd_model = 8\ndecoder_layers = 1\nn_heads = 2\nmax_positions = 4\n'
                    '[head]\nkind = "lm"\nbias = true\n')  # fmt: skip
    assert archspec.load_spec(path).head.bias is True
    assert ModelSpec(**TOY, head="lm") == ModelSpec(**TOY, head={"kind": "lm"}) == ModelSpec(**TOY)


# ---------------------------------------------------------------- drift that two descriptions allowed


def test_bert_forward_flops_equal_transformers_bertmodel():
    """BertModel computes no vocabulary head: 22,348,431,360 FLOPs at 1 x 128 on bert-base, pooler included."""
    transformers = pytest.importorskip("transformers")
    from torch.utils.flop_counter import FlopCounterMode

    from archspec.reference import transformers_config

    spec = archspec.preset("bert-base")
    config = transformers_config(spec)
    config._attn_implementation = "eager"  # explicit matmuls, which FlopCounterMode counts
    with torch.device("meta"):
        hf = transformers.BertModel(config).eval()
        x = torch.zeros(1, 128, dtype=torch.long)
    with FlopCounterMode(display=False) as counter:
        hf(x)
    assert count_flops(spec, 1, 128).forward == counter.get_total_flops() == 22_348_431_360


@pytest.mark.parametrize("tie", [True, False], ids=["tied", "untied"])
def test_palm_formula_counts_matmul_parameters_tied_or_untied(tie):
    spec = archspec.preset("gpt3-6.7b").replace(tie_embeddings=tie)
    f = count_flops(spec, 1, 2048)
    assert abs(f.approximations["palm"]["deviation"]) < 0.005
    pc = archspec.count_params(spec)
    # N of PaLM: every matrix that multiplies, the head once; the position table and norms never multiply
    lookup_only = pc.components["position"] + pc.components["norm"] + (0 if tie else spec.vocab_size * spec.d_model)
    assert pc.matmul == pc.total - lookup_only
    assert f.approximations["6ND"]["value"] == 6 * pc.total * 2048  # all parameters, as GPT-3 counts


# bytes per cached value, written out: int4 is a weight-only format, its cache stays in bf16
# the cache's bytes per value for a model in each dtype: its own for 16 and 32 bits, bf16 beside 8-bit and
# quantised weights (the engines' default cache; --kv-dtype asks for another)
KV_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 2, "int8": 2, "int4": 2, "bfloat16": 2, "float32": 4,
            "float8_e4m3fn": 2}  # fmt: skip


@pytest.mark.parametrize("dtype", KV_BYTES)
def test_compare_and_memory_agree_on_the_kv_cache_for_every_dtype(run_json, dtype):
    (c,) = run_json("compare", "gpt2", "--dtype", dtype)
    (m,) = run_json("memory", "gpt2", "--dtype", dtype, "--batch", "1", "--seq-len", "1")
    assert c["kv_cache_bytes_per_token"] == m["kv_cache_bytes_per_token"] == m["kv_cache_bytes"]
    assert set(KV_BYTES) >= set(DTYPE_BYTES)  # every dtype archspec knows is covered
    assert m["kv_cache_bytes"] == 12 * 12 * (64 + 64) * KV_BYTES[dtype]  # layers x heads x (k + v) x bytes


def test_the_kv_cache_is_a_sum_over_the_cached_entries():
    spec = ModelSpec(**{**TOY, "encoder_layers": 2, "n_kv_heads": 2, "d_value": 6})
    # decoder layers x (self: T + cross: S) x kv heads x (d_head + d_value) x batch, fp32
    assert kv_cache_bytes(spec, 3, 5, "fp32", 7) == 2 * (5 + 7) * 2 * (8 + 6) * 3 * 4


# ---------------------------------------------------------------- the FLOPs of a pooler and a missing head


def test_flops_count_the_pooler_and_measure_it():
    spec = ModelSpec(**{**TOY, "decoder_layers": 0, "encoder_layers": 2}, pooler=True, head="none")
    f = count_flops(spec, 3, 10)
    assert f.components["pooler"] == 2 * 3 * 32 * 32  # one d x d product per sequence
    total, by_component = measure_flops(build(spec, device="meta"), (torch.zeros(3, 10, dtype=torch.long),))
    assert total == f.forward and by_component["pooler"] == f.components["pooler"]
    assert count_by_component(build(spec, device="meta")) == archspec.count_params(spec).components


def test_markdown_output_is_a_pipe_table(run_cli):
    code, out, _ = run_cli("compare", "gpt2", "bert-base", "--format", "markdown")
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith("| model") and set(lines[1]) <= set("|-: ")
    assert sum(line.startswith("| gpt2 ") or line.startswith("| bert-base ") for line in lines) == 2


def test_show_writes_a_default_member_as_its_kind_and_others_as_tables(run_cli):
    code, out, _ = run_cli("show", "bert-base", "--format", "json")
    assert code == 0 and json.loads(out)[0]["head"] == "none" and json.loads(out)[0]["position"] == "learned"
    code, out, _ = run_cli("show", "gpt2", "--set", "position=rotary", "--format", "json")
    assert json.loads(out)[0]["position"] == "rotary"
    spec = ModelSpec(**TOY, position={"kind": "rotary", "base": 5e5})
    assert spec.model_dump()["position"] == {
        "kind": "rotary",
        "base": 5e5,
        "fraction": 1.0,
        "interleaved": False,
        "proportional": False,
    }


@pytest.mark.parametrize("name", ["qwen3-next-80b-a3b", "mistral-7b", "t5-base"])
def test_compare_kv_per_token_is_the_mean_over_its_sequence(run_json, name):
    """compare's KV/token is the cache of one sequence of its seq_len over that length, as memory's is: a
    recurrent state (Qwen3-Next) is one per sequence and a window (Mistral) holds w - 1 keys, so the cache
    of a one-token sequence is not a token's share of a long one; a plain stack's is the same either way."""
    (c,) = run_json("compare", name, "--seq-len", "4096")
    (m,) = run_json("memory", name, "--batch", "1", "--seq-len", "4096")
    assert c["kv_cache_bytes_per_token"] == m["kv_cache_bytes_per_token"] == pytest.approx(m["kv_cache_bytes"] / 4096)
    (one,) = run_json("memory", name, "--batch", "1", "--seq-len", "1")
    assert (one["kv_cache_bytes"] == c["kv_cache_bytes_per_token"]) == (name == "t5-base")
