"""Numerical parity with implementations nobody here wrote, given the same weights (float32)."""

import re

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from archspec import ModelSpec  # noqa: E402
from archspec.reference import (  # noqa: E402
    build,
    load_bert,
    load_gpt2,
    load_llama,
    load_torch_transformer,
    transformers_config,
)

ATOL = 1e-5

GPT2_TOY = ModelSpec(name="gpt2-toy", vocab_size=211, d_model=96, decoder_layers=3, n_heads=4, max_positions=64)
LLAMA_TOY = ModelSpec(name="llama-toy", vocab_size=173, d_model=64, decoder_layers=2, n_heads=8, n_kv_heads=2,
                      d_ff=172, max_positions=64, position="rotary", norm="rmsnorm", activation="swiglu",
                      bias=False, tie_embeddings=False)  # fmt: skip
BERT_TOY = ModelSpec(name="bert-toy", vocab_size=99, d_model=64, encoder_layers=2, n_heads=4, d_ff=128,
                     max_positions=40, norm_position="post", type_vocab_size=2, embedding_norm=True,
                     pooler=True, head="none")  # fmt: skip


def max_diff(a, b) -> float:
    return (a - b).abs().max().item()


def perturbed_differs(model, run, expected):
    """The comparison can fail: nudging one weight moves the output away from the other implementation."""
    with torch.no_grad():
        p = next(model.parameters())
        p.add_(1e-2 * torch.randn_like(p))
    return max_diff(run(), expected) > ATOL


@pytest.mark.parametrize(
    "spec, hf_class, load",
    [
        (GPT2_TOY, "GPT2LMHeadModel", load_gpt2),
        (LLAMA_TOY, "LlamaForCausalLM", load_llama),
        (LLAMA_TOY.replace(bias=True, tie_embeddings=True), "LlamaForCausalLM", load_llama),
        (GPT2_TOY.replace(activation="relu"), "GPT2LMHeadModel", load_gpt2),
        (GPT2_TOY.replace(norm_eps=1e-3, tie_embeddings=False), "GPT2LMHeadModel", load_gpt2),
        (LLAMA_TOY.replace(activation="geglu", norm_eps=1e-5), "LlamaForCausalLM", load_llama),
    ],
    ids=["gpt2", "llama-no-bias-untied", "llama-bias-tied", "gpt2-relu", "gpt2-eps-untied", "llama-geglu-eps"],
)
def test_decoder_matches_transformers_given_the_same_weights(spec, hf_class, load):
    torch.manual_seed(0)
    hf = getattr(transformers, hf_class)(transformers_config(spec)).eval()
    # a seed of its own: a loader that missed a tensor cannot pass on identically drawn initial weights
    model = load(build(spec, seed=1234), hf.state_dict()).eval()
    x = torch.randint(0, spec.vocab_size, (2, 33))
    with torch.no_grad():
        expected = hf(x).logits
        assert max_diff(model(x), expected) <= ATOL
        assert perturbed_differs(model, lambda: model(x), expected)


def test_encoder_decoder_matches_torch_nn_transformer():
    torch.manual_seed(0)
    ref = torch.nn.Transformer(d_model=64, nhead=4, num_encoder_layers=2, num_decoder_layers=3,
                               dim_feedforward=128, dropout=0.0, batch_first=True).eval()  # fmt: skip
    # nn.Transformer ends each stack in a norm, hence final_norm = true; it takes embedded inputs.
    spec = ModelSpec(name="t2017-toy", vocab_size=50, d_model=64, encoder_layers=2, decoder_layers=3, n_heads=4,
                     d_ff=128, max_positions=32, norm_position="post", final_norm=True, activation="relu",
                     position="none")  # fmt: skip
    model = load_torch_transformer(build(spec, seed=1234), ref.state_dict()).eval()
    src, tgt = torch.randn(2, 11, 64), torch.randn(2, 7, 64)
    with torch.no_grad():
        mask = torch.nn.Transformer.generate_square_subsequent_mask(7)
        expected = ref(src, tgt, tgt_mask=mask, tgt_is_causal=True)

        def run():
            return model.decoder(tgt, model.encoder(src))

        assert max_diff(run(), expected) <= ATOL
        assert perturbed_differs(model.encoder, run, expected)


@pytest.mark.parametrize("spec", [BERT_TOY, BERT_TOY.replace(activation="silu")], ids=["gelu", "silu"])
def test_bert_encoder_matches_transformers_bertmodel(spec):
    torch.manual_seed(0)
    hf = transformers.BertModel(transformers_config(spec)).eval()
    model = load_bert(build(spec, seed=1234), hf.state_dict()).eval()
    x, types = torch.randint(0, 99, (2, 25)), torch.randint(0, 2, (2, 25))
    with torch.no_grad():
        out = hf(x, token_type_ids=types)
        hidden = model.hidden_states(x, token_types=types)
        assert max_diff(hidden, out.last_hidden_state) <= ATOL
        assert max_diff(model.pool(hidden), out.pooler_output) <= ATOL
        assert perturbed_differs(model, lambda: model.hidden_states(x, token_types=types), out.last_hidden_state)


def test_loader_refuses_weights_of_another_shape():
    hf = transformers.GPT2LMHeadModel(transformers_config(GPT2_TOY))
    with pytest.raises(ValueError, match="has shape"):
        load_gpt2(build(GPT2_TOY.replace(d_ff=64)), hf.state_dict())


def test_no_transformers_equivalent_is_a_clear_error():
    with pytest.raises(ValueError, match="no transformers equivalent.*norm_position='post'"):
        transformers_config(GPT2_TOY.replace(norm_position="post"))


@pytest.mark.parametrize(
    "spec, field",
    [
        (GPT2_TOY.replace(activation="swiglu"), "activation='swiglu'"),
        (LLAMA_TOY.replace(embedding_norm=True), "embedding_norm=True"),
        (BERT_TOY.replace(head="lm"), "head='lm'"),
        (GPT2_TOY.replace(head={"kind": "lm", "bias": True}), "head.bias=true"),
        (LLAMA_TOY.replace(d_value=4), "d_value=4"),
    ],
    ids=["gpt2-gated", "llama-embedding-norm", "bert-with-lm-head", "head-bias", "d_value"],
)
def test_what_a_family_cannot_represent_is_refused_by_name(spec, field):
    with pytest.raises(ValueError, match=re.escape(field)):
        transformers_config(spec)


def test_loaders_check_that_every_parameter_was_written():
    """Both directions: a state dict that lacks nothing the loader reads still fails when a parameter
    of the reference model is left unwritten (here: a LLaMA state dict with the tied head cut, into an
    untied model whose head has no source)."""
    hf = transformers.LlamaForCausalLM(transformers_config(LLAMA_TOY.replace(tie_embeddings=True)))
    model = build(LLAMA_TOY.replace(tie_embeddings=True), seed=1)
    model.head.weight = torch.nn.Parameter(torch.zeros_like(model.head.weight))  # untie behind the loader's back
    with pytest.raises(ValueError, match="parameters were not written, e.g. \\['head.weight'\\]"):
        load_llama(model, hf.state_dict())
