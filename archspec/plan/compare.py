"""Models side by side: shape, parameters, FLOPs per token and memory, as one row per model.

The planning columns of `archspec compare`, as data a script can read; the CLI renders them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from archspec.core.records import record, rendered
from archspec.count.flops import count_flops, exact_number
from archspec.count.params import ParamCount, count_params
from archspec.describe.blocks import describing
from archspec.memory import default_kv_dtype, kv_cache_bytes_per_token, training_bytes_per_param, weights_bytes
from archspec.spec.model import ModelSpec


@dataclass(frozen=True, kw_only=True)
class Comparison:
    """One model's row: its shape, exact counts and the planning figures at `seq_len` in `dtype`. Its
    JSON record is the spec's shape, the count's totals and the fields below, in this order."""

    spec: ModelSpec = field(metadata=rendered(expand=(
        "name", "kind", "encoder_layers", "decoder_layers", "d_model", "n_heads", "n_kv_heads", "d_head", "d_ff",
        "vocab_size", "max_positions")))  # fmt: skip
    count: ParamCount = field(metadata=rendered(expand=("total", "active", "non_embedding", "estimate", "components")))
    seq_len: int
    seq_len_clamped: bool = False  # the asked length was beyond the model's context, so its context was used
    forward_per_token: Fraction = field(metadata=rendered(convert=exact_number))
    training_per_token: Fraction = field(metadata=rendered(convert=exact_number))
    dtype: str
    weights_bytes: int
    training_bytes_per_param: float
    kv_cache_bytes_per_token: int | float  # the mean over the sequence of seq_len tokens

    @property
    def kv_cache_dtype(self) -> str:
        return default_kv_dtype(self.dtype)

    def to_dict(self) -> dict[str, Any]:
        return record(self, derived=(("kv_cache_dtype", "training_bytes_per_param"),))

    def _repr_html_(self) -> str:  # a table in Jupyter
        from archspec.render.notebook import result_html

        return result_html(self)


DEFAULT_SEQ_LEN = 4096


def context_seq_len(spec: ModelSpec, seq_len: int) -> tuple[int, bool]:
    """(`seq_len`, False), or (max_positions, True) when `seq_len` is beyond the model's context: a
    length the model was not built for is never used silently."""
    return (spec.max_positions, True) if seq_len > spec.max_positions else (seq_len, False)


def compare(spec: ModelSpec, seq_len: int | None = DEFAULT_SEQ_LEN, dtype: str = "bf16") -> Comparison:
    """The comparison row of `spec`: FLOPs per token over one sequence of `seq_len` tokens (default
    4,096, one length for every model; beyond the model's context, its context, marked
    `seq_len_clamped`; None: its own context length), weights and KV cache per token in `dtype` (the
    cache as default_kv_dtype decides; its mean over the sequence: a window or a recurrent state does not
    grow with it)."""
    from archspec.core.checks import check_args

    check_args("compare", spec=spec, seq_len=seq_len, dtype=dtype)
    clamped = False
    if seq_len is not None:
        seq_len, clamped = context_seq_len(spec, seq_len)
    with describing(spec):  # the figures below start from one description of the spec
        f = count_flops(spec, 1, seq_len)
        return Comparison(
            spec=spec,
            count=count_params(spec),
            seq_len=f.seq_len,
            dtype=dtype,
            forward_per_token=f.forward_per_token,
            training_per_token=f.training_per_token,
            weights_bytes=weights_bytes(spec, dtype),
            training_bytes_per_param=float(sum(training_bytes_per_param(dtype, "adamw"))),
            kv_cache_bytes_per_token=kv_cache_bytes_per_token(spec, default_kv_dtype(dtype), f.seq_len),
            seq_len_clamped=clamped,
        )
