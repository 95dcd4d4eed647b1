"""Sizing helpers against the widths published configurations use."""

import pytest

from archspec.core.sizing import pad_vocab, round_up, swiglu_hidden


@pytest.mark.parametrize(
    "d_model, multiple_of, multiplier, published",
    [
        (4096, 256, None, 11008),  # LLaMA 7B: params.json dim 4096, FFN 11008
        (5120, 256, None, 13824),  # LLaMA 13B
        (8192, 4096, 1.3, 28672),  # Llama 2 70B: multiple_of 4096, ffn_dim_multiplier 1.3
    ],
)
def test_swiglu_hidden_reproduces_llama_widths(d_model, multiple_of, multiplier, published):
    assert swiglu_hidden(d_model, multiple_of, multiplier) == published


def test_pad_vocab_gives_nanogpts_50304():
    assert pad_vocab(50257) == 50304 == 64 * 786


def test_round_up_rejects_nonsense():
    with pytest.raises(ValueError):
        round_up(0, 64)
