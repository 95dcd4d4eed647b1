"""Writes toy-qwen3-Q4_K_M.gguf, the GGUF file the documents' examples read: a two-layer Qwen3 at toy
widths with a tied head, written by gguf.GGUFWriter as llama.cpp's converter writes a Qwen3 model (its
keys, its tensor names and shapes) and its quantiser types it for Q4_K_M (src/llama-quant.cpp,
llama_tensor_get_type): Q6_K for the tied token table (it serves as the output), Q6_K for attn_v and
ffn_down of the layers use_more_bits picks, Q4_K for every other matrix, F32 for the norms. The values
are zeros: only the header and the sizes matter.

    python tests/data/gguf/make_toy.py [OUT]    # tests/test_gguf.py checks it writes the committed bytes
"""

from __future__ import annotations

import sys
from pathlib import Path

import gguf
import numpy as np

T = gguf.GGMLQuantizationType
D, FF, LAYERS, HEADS, KV_HEADS, HEAD_DIM, VOCAB = 256, 256, 2, 4, 2, 64, 256


def use_more_bits(i: int, n: int) -> bool:
    """llama-quant.cpp: the first and last eighth of the layers, and every third between."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def tensors() -> dict[str, tuple[tuple[int, ...], T]]:
    out = {"token_embd.weight": ((VOCAB, D), T.Q6_K), "output_norm.weight": ((D,), T.F32)}
    for i in range(LAYERS):
        b = f"blk.{i}."
        more = T.Q6_K if use_more_bits(i, LAYERS) else T.Q4_K
        out |= {
            b + "attn_norm.weight": ((D,), T.F32),
            b + "attn_q.weight": ((HEADS * HEAD_DIM, D), T.Q4_K),
            b + "attn_k.weight": ((KV_HEADS * HEAD_DIM, D), T.Q4_K),
            b + "attn_v.weight": ((KV_HEADS * HEAD_DIM, D), more),
            b + "attn_q_norm.weight": ((HEAD_DIM,), T.F32),
            b + "attn_k_norm.weight": ((HEAD_DIM,), T.F32),
            b + "attn_output.weight": ((D, HEADS * HEAD_DIM), T.Q4_K),
            b + "ffn_norm.weight": ((D,), T.F32),
            b + "ffn_gate.weight": ((FF, D), T.Q4_K),
            b + "ffn_up.weight": ((FF, D), T.Q4_K),
            b + "ffn_down.weight": ((D, FF), more),
        }
    return out


def write(path: Path) -> None:
    w = gguf.GGUFWriter(path, "qwen3")
    w.add_name("toy-qwen3")
    w.add_block_count(LAYERS)
    w.add_context_length(4096)
    w.add_embedding_length(D)
    w.add_feed_forward_length(FF)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_rope_freq_base(1_000_000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_K_M)
    w.add_tokenizer_model("gpt2")
    w.add_token_list([f"t{i}" for i in range(VOCAB)])
    for name, (shape, kind) in tensors().items():
        if kind == T.F32:
            w.add_tensor(name, np.zeros(shape, dtype=np.float32))
        else:
            w.add_tensor(name, np.zeros(gguf.quants.quant_shape_to_byte_shape(shape, kind), np.uint8), raw_dtype=kind)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("toy-qwen3-Q4_K_M.gguf"))
