"""Numerical parity with implementations nobody here wrote, given the same weights (float32)."""

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from archspec import ModelSpec  # noqa: E402
from archspec.reference import build, load_bert, load_gpt2, load_llama, load_torch_transformer  # noqa: E402

ATOL = 1e-5


def perturbed_differs(model, run, expected):
    """The comparison can fail: nudging one weight moves the output away from the other implementation."""
    with torch.no_grad():
        p = next(model.parameters())
        p.add_(1e-2 * torch.randn_like(p))
    return (run() - expected).abs().max().item() > ATOL


def test_gpt2_matches_transformers_gpt2lmheadmodel():
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(
        vocab_size=211,
        n_positions=64,
        n_embd=96,
        n_layer=3,
        n_head=4,
        activation_function="gelu",
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
    )
    hf = transformers.GPT2LMHeadModel(cfg).eval()
    spec = ModelSpec(name="gpt2-toy", vocab_size=211, d_model=96, decoder_layers=3, n_heads=4, max_positions=64)
    model = load_gpt2(build(spec), hf.state_dict()).eval()
    x = torch.randint(0, 211, (2, 40))
    with torch.no_grad():
        expected = hf(x).logits
        assert (model(x) - expected).abs().max().item() <= ATOL
        assert perturbed_differs(model, lambda: model(x), expected)


def test_llama_matches_transformers_llamaforcausallm():
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        vocab_size=173,
        hidden_size=64,
        intermediate_size=172,
        num_hidden_layers=2,
        num_attention_heads=8,
        num_key_value_heads=2,
        max_position_embeddings=64,
        tie_word_embeddings=False,
        rms_norm_eps=1e-6,
        attention_bias=False,
    )
    hf = transformers.LlamaForCausalLM(cfg).eval()
    spec = ModelSpec(
        name="llama-toy",
        vocab_size=173,
        d_model=64,
        decoder_layers=2,
        n_heads=8,
        n_kv_heads=2,
        d_ff=172,
        max_positions=64,
        position="rotary",
        norm="rmsnorm",
        activation="swiglu",
        bias=False,
        tie_embeddings=False,
    )
    model = load_llama(build(spec), hf.state_dict()).eval()
    x = torch.randint(0, 173, (2, 33))
    with torch.no_grad():
        expected = hf(x).logits
        assert (model(x) - expected).abs().max().item() <= ATOL
        assert perturbed_differs(model, lambda: model(x), expected)


def test_encoder_decoder_matches_torch_nn_transformer():
    torch.manual_seed(0)
    ref = torch.nn.Transformer(
        d_model=64,
        nhead=4,
        num_encoder_layers=2,
        num_decoder_layers=3,
        dim_feedforward=128,
        dropout=0.0,
        batch_first=True,
    ).eval()
    # nn.Transformer ends each stack in a norm, hence final_norm = true; it takes embedded inputs.
    spec = ModelSpec(
        name="t2017-toy",
        vocab_size=50,
        d_model=64,
        encoder_layers=2,
        decoder_layers=3,
        n_heads=4,
        d_ff=128,
        max_positions=32,
        norm_position="post",
        final_norm=True,
        activation="relu",
        position="none",
    )
    model = load_torch_transformer(build(spec), ref.state_dict()).eval()
    src, tgt = torch.randn(2, 11, 64), torch.randn(2, 7, 64)
    with torch.no_grad():
        expected = ref(src, tgt, tgt_mask=torch.nn.Transformer.generate_square_subsequent_mask(7), tgt_is_causal=True)

        def run():
            return model.decoder(tgt, model.encoder(src))

        assert (run() - expected).abs().max().item() <= ATOL
        assert perturbed_differs(model.encoder, run, expected)


def test_bert_encoder_matches_transformers_bertmodel():
    torch.manual_seed(0)
    cfg = transformers.BertConfig(
        vocab_size=99,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        max_position_embeddings=40,
        type_vocab_size=2,
        layer_norm_eps=1e-5,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        hidden_act="gelu",
    )
    hf = transformers.BertModel(cfg).eval()
    spec = ModelSpec(
        name="bert-toy",
        vocab_size=99,
        d_model=64,
        encoder_layers=2,
        n_heads=4,
        d_ff=128,
        max_positions=40,
        norm_position="post",
        type_vocab_size=2,
        embedding_norm=True,
        pooler=True,
    )
    model = load_bert(build(spec), hf.state_dict()).eval()
    x, types = torch.randint(0, 99, (2, 25)), torch.randint(0, 2, (2, 25))
    with torch.no_grad():
        out = hf(x, token_type_ids=types)
        hidden = model.hidden_states(x, token_types=types)
        assert (hidden - out.last_hidden_state).abs().max().item() <= ATOL
        assert (model.pool(hidden) - out.pooler_output).abs().max().item() <= ATOL
        assert perturbed_differs(model, lambda: model.hidden_states(x, token_types=types), out.last_hidden_state)


def test_loader_refuses_weights_of_another_shape():
    cfg = transformers.GPT2Config(vocab_size=50, n_positions=16, n_embd=32, n_layer=1, n_head=4)
    hf = transformers.GPT2LMHeadModel(cfg)
    spec = ModelSpec(name="wrong", vocab_size=50, d_model=32, decoder_layers=1, n_heads=4, max_positions=16, d_ff=64)
    with pytest.raises(ValueError, match="has shape"):
        load_gpt2(build(spec), hf.state_dict())
