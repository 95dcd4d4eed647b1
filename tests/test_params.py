"""The exact counter against numbers obtained without it: closed forms written out here,
published reference counts, and HuggingFace models built from a config (random weights)."""

import pytest

import archspec
from archspec import ModelSpec, count_params


def gpt2_closed_form(L: int, d: int, V: int = 50257, ctx: int = 1024) -> int:
    """GPT-2 block: qkv d*3d+3d, proj d*d+d, fc d*4d+4d, proj 4d*d+d, two LayerNorms 4d."""
    block = (3 * d * d + 3 * d) + (d * d + d) + (4 * d * d + 4 * d) + (4 * d * d + d) + 4 * d
    return V * d + ctx * d + L * block + 2 * d


# Reference counts: HuggingFace GPT2LMHeadModel (tied), the table, GPT-3 175B.
PUBLISHED = {
    "gpt2": 124_439_808,
    "gpt2-medium": 354_823_168,
    "gpt2-large": 774_030_080,
    "gpt2-xl": 1_557_611_200,
    "transformer-base": 63_082_496,
    "gpt3-175b": 174_604_259_328,
}


@pytest.mark.parametrize("name, expected", PUBLISHED.items(), ids=list(PUBLISHED))
def test_reference_counts_come_out_exactly(name, expected):
    assert count_params(archspec.preset(name)).total == expected


@pytest.mark.parametrize(
    "name, L, d, ctx",
    [
        ("gpt2", 12, 768, 1024),
        ("gpt2-xl", 48, 1600, 1024),
        ("gpt3-small", 12, 768, 2048),
        ("gpt3-2.7b", 32, 2560, 2048),
        ("gpt3-175b", 96, 12288, 2048),
    ],
)
def test_gpt_family_matches_the_closed_form(name, L, d, ctx):
    assert count_params(archspec.preset(name)).total == gpt2_closed_form(L, d, ctx=ctx)


def test_transformer_base_closed_form():
    d, f, V, N = 512, 2048, 37000, 6
    attn = 4 * d * d + 4 * d
    ffn = d * f + f + f * d + d
    enc = attn + ffn + 2 * 2 * d
    dec = 2 * attn + ffn + 3 * 2 * d
    assert count_params(archspec.preset("transformer-base")).total == V * d + N * enc + N * dec


def test_tied_embedding_counts_once():
    tied = ModelSpec(name="t", vocab_size=1000, d_model=32, decoder_layers=1, n_heads=4, max_positions=8)
    untied = tied.replace(tie_embeddings=False)
    assert count_params(untied).total - count_params(tied).total == 1000 * 32
    assert count_params(untied).components["head"] == 1000 * 32
    assert count_params(tied).components["head"] == 0


def test_untied_encoder_decoder_has_three_matrices():
    s = archspec.preset("transformer-base").replace(tie_embeddings=False)
    c = count_params(s).components
    assert (c["embed"], c["head"]) == (2 * 37000 * 512, 37000 * 512)


def test_grouped_query_attention_shrinks_k_and_v():
    s = ModelSpec(
        name="g", vocab_size=10, d_model=64, decoder_layers=1, n_heads=8, n_kv_heads=2, max_positions=4, bias=False
    )
    # q: 64x64, k and v: 64x(2*8), o: 64x64
    assert count_params(s).components["attention"] == 64 * 64 + 2 * 64 * 16 + 64 * 64


def test_d_value_sets_value_and_output_widths():
    s = ModelSpec(
        name="v", vocab_size=10, d_model=64, decoder_layers=1, n_heads=4, d_head=8, d_value=24, max_positions=4
    )
    q, k, v, o = 64 * 32 + 32, 64 * 32 + 32, 64 * 96 + 96, 96 * 64 + 64
    assert count_params(s).components["attention"] == q + k + v + o


def test_gated_mlp_has_two_input_projections_and_rmsnorm_no_bias():
    s = ModelSpec(
        name="l",
        vocab_size=10,
        d_model=64,
        decoder_layers=2,
        n_heads=4,
        d_ff=172,
        max_positions=4,
        activation="swiglu",
        norm="rmsnorm",
        bias=False,
        position="rotary",
        tie_embeddings=False,
    )
    c = count_params(s).components
    assert c["mlp"] == 2 * (3 * 64 * 172)
    assert c["norm"] == 2 * 2 * 64 + 64
    assert c["position"] == 0


def test_non_embedding_and_estimate():
    c = count_params(archspec.preset("gpt2"))
    assert c.non_embedding == c.total - 50257 * 768 - 1024 * 768
    assert c.estimate == 12 * 12 * 768**2 + 50257 * 768


def test_counts_are_python_ints():
    c = count_params(archspec.preset("gpt3-175b"))
    assert type(c.total) is int and all(type(v) is int for v in c.components.values())


HF_MODELS = {"gpt2": "GPT2LMHeadModel", "llama": "LlamaForCausalLM", "bert": "BertModel"}
LLAMA_SHAPED = ModelSpec(name="llama", vocab_size=320, d_model=64, decoder_layers=3, n_heads=8, n_kv_heads=2,
                         d_ff=172, max_positions=64, position="rotary", norm="rmsnorm", activation="swiglu",
                         bias=False, tie_embeddings=False)  # fmt: skip


@pytest.mark.parametrize(
    "spec, family, expected",
    [
        (archspec.preset("gpt2"), "gpt2", 124_439_808),
        (archspec.preset("gpt2-medium"), "gpt2", 354_823_168),
        (LLAMA_SHAPED, "llama", None),
        (archspec.preset("bert-base"), "bert", 109_482_240),
        (archspec.preset("bert-large"), "bert", 335_141_888),
    ],
    ids=["gpt2", "gpt2-medium", "llama-shaped", "bert-base", "bert-large"],
)
def test_counts_match_transformers_models_built_from_a_config(spec, family, expected):
    """An independent count: transformers' own model class from the equivalent config, on the meta device
    (parameters() counts a tied tensor once)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from archspec.reference import transformers_config

    with torch.device("meta"):
        hf = getattr(transformers, HF_MODELS[family])(transformers_config(spec))
    measured = sum(p.numel() for p in hf.parameters())
    assert count_params(spec).total == measured
    if expected is not None:
        assert measured == expected
