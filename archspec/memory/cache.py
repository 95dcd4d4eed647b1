"""The KV cache and recurrent states: what each cached entry of the description holds (archspec/memory).

Per layer, n_kv_heads x (d_head + d_value) x cached length x batch x bytes, the cached length being
the sequence, a sliding window or a chunk; a recurrent mixer's constant state per sequence; plus the
cross-attention keys and values over the source for an encoder-decoder; in kv_cache_dtype(dtype):
the dtype asked for, except a weight-only format, whose cache stays in bf16.
"""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING

from archspec.core.checks import check_args
from archspec.core.errors import SpecError, shown
from archspec.core.vocab import dtype_key
from archspec.describe.blocks import Cached, Lengths, describe
from archspec.memory.storage import DTYPE_BYTES, STORAGE, canonical_dtype, canonical_format, dtype_bytes, nbytes
from archspec.spec.model import ModelSpec

if TYPE_CHECKING:
    from archspec.memory.parallel import Slot


# the dtypes a KV cache is held in (a weight-only format such as int4, nf4 or mxfp4 holds no cache)
KV_DTYPES = tuple(name for name, s in STORAGE.items() if s.dtype and not s.quantised)


def kv_dtype_asked(kv_dtype: object, weights: str) -> str:
    """The cache's dtype: `kv_dtype` when one is asked (one of KV_DTYPES, else a SpecError naming it),
    else kv_cache_dtype(weights)."""
    if kv_dtype is None:
        return kv_cache_dtype(weights)
    if not isinstance(kv_dtype, str):
        raise TypeError(f"kv_dtype must be a str or None, got {type(kv_dtype).__name__} {shown(kv_dtype, 60)}")
    key = dtype_key(kv_dtype)
    if key not in KV_DTYPES:
        what = "is a weight-only format: no KV cache is held in it" if key in STORAGE else "is an unknown dtype"
        raise SpecError(f"kv_dtype {shown(kv_dtype)} {what}; use one of {', '.join(KV_DTYPES)}")
    return key


def kv_cache_dtype(dtype: str) -> str:
    """The one policy for the KV cache's dtype: the dtype asked for, except a weight-only format (int4
    as GPTQ and AWQ store it, nf4, mxfp4, the GGUF kinds), whose keys and values stay in bf16. Every
    command and function asks this one. A map by role or a released layout keeps a bf16 cache."""
    from archspec.memory.roles import LAYOUTS

    if isinstance(dtype, str) and ("=" in dtype or dtype_key(dtype) in LAYOUTS):
        return "bf16"
    key = canonical_format(dtype, "dtype") if isinstance(dtype, str) and dtype.strip().lower() in STORAGE else None
    key = key or canonical_dtype(dtype)
    return "bf16" if STORAGE[key].quantised else key


def default_kv_dtype(dtype: str, kv_dtype: str | None = None) -> str:
    """The cache's dtype for a model computed or stored in `dtype`: `kv_dtype` when one is asked for;
    else the model's own dtype when it is fp32, bf16 or fp16, and bf16 beside fp8, int8 or quantised
    weights (the engines keep a bf16 cache unless told otherwise: vLLM's kv_cache_dtype "auto")."""
    if kv_dtype is not None:
        return kv_dtype_asked(kv_dtype, dtype)  # one a cache is held in, or refused by name
    key = kv_cache_dtype(dtype)
    return key if key in ("fp32", "bf16", "fp16") else "bf16"


def kv_stage_bytes(spec: ModelSpec, slots: list[Slot], batch: int, tokens: int, dtype: str) -> Fraction:
    """Cache bytes of `batch` sequences of `tokens` tokens held by the parts of one pipeline stage, in
    kv_cache_dtype(dtype) (a recurrent state kept in fp32 in fp32)."""
    lengths = Lengths(batch, tokens, tokens if spec.encoder_layers else None)
    per = dtype_bytes(kv_cache_dtype(dtype))
    return sum((s.layers * batch * c.values(lengths, s.part.stack) * cached_bytes(c, per) for s in slots
                if s.part.layered for c in s.part.cached), Fraction(0))  # fmt: skip


def kv_cache_bytes(spec: ModelSpec, batch: int, seq_len: int, dtype: str = "bf16", src_len: int | None = None) -> int:
    """Keys and values cached for `batch` sequences of `seq_len` (and, cross-attention, `src_len`)
    tokens, in kv_cache_dtype(dtype): a sum over the model's cached entries."""
    check_args("kv_cache_bytes", spec=spec, batch=batch, seq_len=seq_len, dtype=dtype, src_len=src_len)
    lengths = Lengths(batch, seq_len, (src_len if src_len is not None else seq_len) if spec.encoder_layers else None)
    per = dtype_bytes(kv_cache_dtype(dtype))
    return nbytes(sum(part.repeat * batch * c.values(lengths, part.stack) * cached_bytes(c, per)
                      for part in describe(spec) for c in part.cached), 1)  # fmt: skip


def cached_bytes(c: Cached, per: Fraction) -> Fraction:
    """Bytes per cached value: the cache's dtype, or fp32 for a state kept in fp32 (recurrent states)."""
    return DTYPE_BYTES["fp32"] if c.dtype == "fp32" else per


def kv_cache_bytes_per_token(spec: ModelSpec, dtype: str = "bf16", seq_len: int | None = None) -> int | float:
    """Cache per (target) token of one sequence, one source token per target token for an encoder-decoder.
    With `seq_len`, the mean over one sequence of that length (an int when whole): a window holds at most
    its keys and a recurrent state is one per sequence, so the cache of one token is not a token's share of
    a long one (Qwen3-Next's Gated DeltaNet states are 74 MiB for any length)."""
    check_args("kv_cache_bytes_per_token", spec=spec, dtype=dtype, seq_len=seq_len)
    if seq_len is None:
        return kv_cache_bytes(spec, 1, 1, dtype, 1 if spec.kind == "encoder-decoder" else None)
    total = kv_cache_bytes(spec, 1, seq_len, dtype, seq_len if spec.kind == "encoder-decoder" else None)
    return total // seq_len if total % seq_len == 0 else total / seq_len
