"""Storage formats and computation dtypes: bits per value, block scales counted in (archspec/memory).

Bytes per value: fp32 4, bf16 2, fp16 2, fp8 1, int8 1; int4 and the other quantised storage
formats (nf4, mxfp4, GGUF kinds) with their block scales, on the tensors each holds. The names and
their aliases (torch's, C's) are archspec.core.vocab's; this table gives each its bits.
"""

# Annotations are objects, not strings (no `from __future__ import annotations`): typing.NamedTuple
# compiles a ForwardRef for every string field when the class is made, at every start-up.

import math
from fractions import Fraction
from typing import NamedTuple

from archspec.core.errors import SpecError, shown
from archspec.core.vocab import dtype_key


class Storage(NamedTuple):
    """How one storage format holds weights: bits per value with its block scales counted in, and what
    a quantised format leaves in another format (``None``: the format itself).

    `dtype`: also a computation dtype (``--dtype``: weights, gradients, activations, KV cache);
    `tables`: embedding tables; `head`: an untied output head (a tied head gives its table this
    format); `vectors`: norm weights and biases; `router`: MoE router matrices; `more_bits`: the
    format llama.cpp's _M mixtures give the value projection and the MLP down projection of the layers
    its use_more_bits rule picks; `scale`: a matrix's scales stored beside it, one of `bits` per block of
    rows x columns (0 columns: one per row), counted on the matrix's shape."""

    bits: Fraction
    layout: str
    dtype: bool = False
    tables: str | None = None
    head: str | None = None
    vectors: str | None = None
    router: str | None = None
    more_bits: str | None = None
    scale: tuple[int, int, int] | None = None  # (block rows, block columns or 0 for a whole row, bits)

    @property
    def quantised(self) -> bool:
        return self.vectors is not None


_BNB = dict(tables="bf16", head="bf16", vectors="bf16", router="bf16")  # the blocks' matrices only
_GGUF = dict(vectors="fp32", router="fp32", head="q6_k")  # every matrix; 1-D tensors stay F32

# One vocabulary of dtypes and storage formats, bits per value including block scales, each from its
# format's specification. Block formats assume whole blocks per row (ggml requires a row width
# divisible by the block; llama.cpp's fallback types for other widths are not modelled).
STORAGE = {
    "fp32": Storage(Fraction(32), "IEEE 754 binary32", dtype=True),
    "bf16": Storage(Fraction(16), "bfloat16 (8 exponent, 7 mantissa bits)", dtype=True),
    "fp16": Storage(Fraction(16), "IEEE 754 binary16", dtype=True),
    "fp8": Storage(Fraction(8), "OCP 8-bit floating point (E4M3 / E5M2); a per-tensor scale (4 bytes a tensor) "
                   "not counted", dtype=True),
    "int8": Storage(Fraction(8), "8-bit integers; a per-tensor or per-row scale (bitsandbytes LLM.int8: 4 bytes "
                    "a row) not counted", dtype=True),
    "fp8_block": Storage(Fraction(8), "FP8 E4M3 with one fp32 scale per 128 x 128 block of each matrix, as "
                         "DeepSeek-V3 stores weight_scale_inv (quantization_config weight_block_size [128, 128]); "
                         "embeddings, head, router, norms and biases in bf16", scale=(128, 128, 32), **_BNB),
    "fp8_row": Storage(Fraction(8), "FP8 E4M3 with one fp32 scale per output row of each matrix (fbgemm_fp8 as "
                       "Meta's Llama 3.1 FP8 checkpoints store weight_scale; compressed-tensors' channel strategy); "
                       "embeddings, head, router, norms and biases in bf16", scale=(1, 0, 32), **_BNB),
    "int4": Storage(4 + Fraction(16 + 4, 128), "AWQ / GPTQ 4-bit: per group of 128 values an fp16 scale and a "
                    "packed 4-bit zero point, 4 + 20/128 = 4.15625 bits; the blocks' matrices only, embeddings, "
                    "head, router, norms and biases in bf16", dtype=True, **_BNB),
    "nf4": Storage(4 + Fraction(8, 64) + Fraction(32, 64 * 256), "NF4 with double quantisation (Dettmers et al. "
                   "2023, QLoRA, section 3): blocks of 64 with an 8-bit absmax, itself scaled by one fp32 per 256 "
                   "blocks, 4 + 8/64 + 32/(64*256) = 4.127 bits; the blocks' matrices only (bitsandbytes), the rest "
                   "in bf16", **_BNB),
    "mxfp4": Storage(4 + Fraction(8, 32), "OCP Microscaling Formats (MX) v1.0: blocks of 32 FP4 (E2M1) values and "
                     "one 8-bit E8M0 scale, 4 + 8/32 = 4.25 bits; the blocks' matrices only, the rest in bf16",
                     **_BNB),
    "q8_0": Storage(Fraction(34 * 8, 32), "GGUF Q8_0 (ggml block_q8_0): an fp16 scale and 32 int8 values, 34 "
                    "bytes per 32 = 8.5 bits; every matrix, 1-D tensors (norms, biases) and the router in F32",
                    **{**_GGUF, "head": None}),
    "q6_k": Storage(Fraction(210 * 8, 256), "GGUF Q6_K (ggml block_q6_K): ql[128] + qh[64] + 16 int8 scales + an "
                    "fp16 scale, 210 bytes per 256 = 6.5625 bits; every matrix, 1-D tensors and the router in F32",
                    **_GGUF),
    "q5_k_m": Storage(Fraction(176 * 8, 256), "llama.cpp Q5_K_M: Q5_K (block_q5_K: fp16 d and dmin, 12 bytes of "
                      "6-bit scales, qh[32], qs[128], 176 bytes per 256 = 5.5 bits) for every matrix, Q6_K for the "
                      "head (or the tied table) and for the value and MLP down projections of the layers "
                      "use_more_bits picks (the first and last eighth, every third between); 1-D tensors and the "
                      "router in F32", more_bits="q6_k", **_GGUF),
    "q4_k_m": Storage(Fraction(144 * 8, 256), "llama.cpp Q4_K_M: Q4_K (block_q4_K: fp16 d and dmin, 12 bytes of "
                      "6-bit scales, qs[128], 144 bytes per 256 = 4.5 bits) for every matrix, Q6_K for the head "
                      "(or the tied table) and for the value and MLP down projections of the layers use_more_bits "
                      "picks (the first and last eighth, every third between); 1-D tensors and the router in F32",
                      more_bits="q6_k", **_GGUF),
}  # fmt: skip
# the computation dtypes (--dtype, --kv-dtype): bytes per value
DTYPE_BYTES = {name: s.bits / 8 for name, s in STORAGE.items() if s.dtype}
# other names of the short ones (torch's): archspec.core.vocab.DTYPE_ALIASES


def canonical_dtype(dtype: str) -> str:
    """'bfloat16' -> 'bf16': the short name of a dtype, or a ValueError listing the known ones."""
    key = dtype_key(dtype)
    if key not in DTYPE_BYTES:
        raise SpecError(f"unknown dtype {shown(dtype)}; use one of {', '.join(DTYPE_BYTES)}")
    return key


def dtype_bytes(dtype: str) -> Fraction:
    return DTYPE_BYTES[canonical_dtype(dtype)]


def canonical_format(name: str, what: str = "--weights") -> str:
    """'bfloat16' -> 'bf16', 'Q4_K_M' -> 'q4_k_m': a weight storage format of STORAGE, or a SpecError
    naming `what` and listing the formats."""
    key = dtype_key(name)
    if key not in STORAGE:
        raise SpecError(f"unknown {what} format {shown(name)}; use one of {', '.join(STORAGE)}")
    return key


def use_more_bits(i: int, n: int) -> bool:
    """llama.cpp's use_more_bits(i, n) for layer i of n (src/llama-quant.cpp): i < n/8, i >= 7n/8, or
    (i - n/8) % 3 == 2, in integer division."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def scale_bits(fmt: str, rows: int, cols: int) -> int:
    """Bits of the scales format `fmt` stores beside one rows x cols matrix (0 for a format without)."""
    sc = STORAGE[fmt].scale
    if sc is None:
        return 0
    br, bc, bits = sc
    return -(-rows // br) * (-(-cols // bc) if bc else 1) * bits


def nbytes(count: int | Fraction, per: Fraction) -> int:
    return math.ceil(count * per)
