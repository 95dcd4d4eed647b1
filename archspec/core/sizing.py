"""Named rounding rules that model families use to pick their sizes.

A spec field means what it says (``d_ff = 11008`` is the width); these helpers compute such a width
the way a family's code does, for specs and planning scripts to call explicitly.
"""

from __future__ import annotations


def round_up(n: int, multiple: int) -> int:
    """The smallest multiple of `multiple` that is >= n."""
    if n < 1 or multiple < 1:
        raise ValueError(f"round_up needs positive numbers, got n={n}, multiple={multiple}")
    return -(-n // multiple) * multiple


def swiglu_hidden(d_model: int, multiple_of: int = 256, ffn_dim_multiplier: float | None = None) -> int:
    """LLaMA's SwiGLU width: 2/3 of 4·d_model (same parameters as a 4·d_model GELU MLP), times an
    optional multiplier, rounded up to `multiple_of` (meta-llama/llama, model.py, FeedForward)."""
    hidden = 2 * (4 * d_model) // 3  # exact: a float quotient drifts beyond 2^53
    if ffn_dim_multiplier is not None:
        hidden = int(ffn_dim_multiplier * hidden)
    return round_up(hidden, multiple_of)


def pad_vocab(vocab_size: int, multiple: int = 64) -> int:
    """A vocabulary padded for efficient matmuls (nanoGPT pads GPT-2's 50,257 to 50,304 = 64 × 786)."""
    return round_up(vocab_size, multiple)
