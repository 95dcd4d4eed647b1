"""Memory for training and inference: weights, gradients, optimizer states, activations, KV cache.

Conventions:

- Bytes per value: fp32 4, bf16 2, fp16 2, fp8 1, int8 1, int4 1/2 (rounded up per tensor set).
- Training in mixed precision (dtype bf16/fp16) with AdamW keeps 16 bytes per parameter — 2 for
  the weights, 2 for the gradients, 12 for the fp32 master copy and the two Adam moments
  (Rajbhandari et al. 2020, ZeRO, section 3.1). This is what is shown by default.
  ``fp32_grads=True`` keeps gradients in fp32 instead, the 18-byte convention (2 + 4 + 12) of
  frameworks that accumulate gradients in fp32. Training in fp32 needs no master copy: 4 + 4 + 8.
- Activations follow Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large
  Transformer Models", section 4), generalised tensor by tensor to grouped-query attention,
  d_head · n_heads ≠ d_model, d_ff ≠ 4 d_model, gated MLPs and cross-attention. For the GPT
  block with 16-bit activations and dropout it is exactly their s·b·h·(34 + 5·a·s/h) per layer;
  selective recomputation drops the a·s² terms (34·s·b·h); full recomputation keeps each
  layer's input (2·s·b·h). Tensor parallelism t is taken with sequence parallelism: all
  activations divide by t. Pipeline parallelism does not reduce the first stage's activations
  (it holds p micro-batches of L/p layers, section 4.2.3).
- KV cache: decoder_layers × n_kv_heads × (d_head + d_value) × sequence × batch × bytes, plus the
  cross-attention keys and values over the source for an encoder-decoder.
- ZeRO stage 1 divides optimizer states by the data-parallel degree, stage 2 also gradients,
  stage 3 also weights; tensor and pipeline parallel degrees divide the weights, gradients and
  optimizer states.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from archspec.checks import check_args
from archspec.flops import exact_number, workload_lengths
from archspec.params import count_params
from archspec.spec import ModelSpec

DTYPE_BYTES = {
    "fp32": Fraction(4),
    "bf16": Fraction(2),
    "fp16": Fraction(2),
    "fp8": Fraction(1),
    "int8": Fraction(1),
    "int4": Fraction(1, 2),
}
DTYPE_ALIASES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float": "fp32"}
OPTIMIZERS = {  # states per parameter, each kept in fp32
    "adamw": 2,
    "adam": 2,
    "sgd-momentum": 1,
    "sgd": 0,
    "none": 0,
}
RECOMPUTE = ("none", "selective", "full")


def dtype_bytes(dtype: str) -> Fraction:
    key = DTYPE_ALIASES.get(dtype.lower(), dtype.lower())
    if key not in DTYPE_BYTES:
        raise ValueError(f"unknown dtype {dtype!r}; use one of {', '.join(DTYPE_BYTES)}")
    return DTYPE_BYTES[key]


def nbytes(count: int | Fraction, per: Fraction) -> int:
    return math.ceil(count * per)


def weights_bytes(spec: ModelSpec, dtype: str = "bf16") -> int:
    """All parameters stored in `dtype`."""
    check_args("weights_bytes", spec=spec, dtype=dtype)
    return nbytes(count_params(spec).total, dtype_bytes(dtype))


def kv_cache_bytes(spec: ModelSpec, batch: int, seq_len: int, dtype: str = "bf16", src_len: int | None = None) -> int:
    """Keys and values cached for `batch` sequences of `seq_len` (and, cross-attention, `src_len`) tokens."""
    check_args("kv_cache_bytes", spec=spec, batch=batch, seq_len=seq_len, dtype=dtype, src_len=src_len)
    per_position = spec.decoder_layers * spec.n_kv_heads * (spec.d_head + spec.d_value)
    positions = seq_len + ((src_len if src_len is not None else seq_len) if spec.kind == "encoder-decoder" else 0)
    return nbytes(per_position * positions * batch, dtype_bytes(dtype))


def activation_bytes_per_layer(
    spec: ModelSpec, batch: int, seq: int, src: int | None, stack: str, dtype: str, recompute: str, dropout: bool
) -> dict[str, int]:
    """Korthikanti et al. 2022, tensor by tensor, for one block of `stack`. Returns {part: bytes}."""
    e = dtype_bytes(dtype)
    m = 1 if dropout else 0  # dropout masks: one byte per element
    b, s, h, a = batch, seq, spec.d_model, spec.n_heads
    if recompute == "full":
        return {"layer_input": nbytes(s * b * h, e)}
    out: dict[str, int] = {}
    keep_scores = recompute == "none"

    def attention(T: int, S: int, self_attention: bool, name: str) -> None:
        parts = (
            e * T * b * h  # input to the Q (and K, V) projections
            + e * b * (T * spec.d_q + S * spec.d_k_total)  # Q and K for Q·Kᵀ
            + e * b * S * spec.d_v_total  # V
            + e * T * b * spec.d_attn_out  # input to the output projection
            + m * T * b * h  # dropout mask after the output projection
        )
        # cross-attention's K/V input (the encoder output) is counted once per stack, not per layer
        scores = (2 * e + m) * a * T * S * b if keep_scores else 0  # softmax out, dropout mask, dropout out
        out[name] = nbytes(parts, 1)
        out[name + "_scores"] = nbytes(scores, 1)

    attention(s, s, True, "attention")
    n_norms = 2
    if stack == "decoder" and spec.encoder_layers:
        attention(s, src, False, "cross_attention")
        n_norms = 3
    f = spec.d_ff
    mlp = e * s * b * h + (4 if spec.gated else 2) * e * s * b * f + m * s * b * h
    out["mlp"] = nbytes(mlp, 1)  # input, activation input(s) and output, down-projection input, mask
    out["norms"] = nbytes(n_norms * e * s * b * h, 1)
    return out


@dataclass(frozen=True)
class MemoryEstimate:
    name: str
    batch: int
    seq_len: int
    src_len: int | None
    dtype: str
    optimizer: str
    recompute: str
    params: int
    weights_bytes: int
    gradients_bytes: int
    optimizer_bytes: int
    activations_bytes: int
    kv_cache_bytes: int
    inference_weights_bytes: int  # weights split by tensor and pipeline parallelism only (no ZeRO)
    activations_detail: dict[str, int]
    bytes_per_param_training: float
    per_param_note: str
    parallel: dict[str, int]

    @property
    def training_total_bytes(self) -> int:
        return self.weights_bytes + self.gradients_bytes + self.optimizer_bytes + self.activations_bytes

    @property
    def inference_total_bytes(self) -> int:
        return self.inference_weights_bytes + self.kv_cache_bytes

    @property
    def kv_cache_bytes_per_token(self) -> Fraction:
        """Cache per (target) token of one sequence, the source's share included for an encoder-decoder."""
        return Fraction(self.kv_cache_bytes, self.batch * self.seq_len)

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "batch": self.batch,
            "seq_len": self.seq_len,
            **({"src_len": self.src_len} if self.src_len is not None else {}),
            "dtype": self.dtype,
            "optimizer": self.optimizer,
            "recompute": self.recompute,
            "params": self.params,
            "weights_bytes": self.weights_bytes,
            "gradients_bytes": self.gradients_bytes,
            "optimizer_bytes": self.optimizer_bytes,
            "activations_bytes": self.activations_bytes,
            "kv_cache_bytes": self.kv_cache_bytes,
            "kv_cache_bytes_per_token": exact_number(self.kv_cache_bytes_per_token),
            "training_total_bytes": self.training_total_bytes,
            "inference_total_bytes": self.inference_total_bytes,
            "inference_weights_bytes": self.inference_weights_bytes,
            "bytes_per_param_training": self.bytes_per_param_training,
            "bytes_per_param_note": self.per_param_note,
            "activations_detail": dict(self.activations_detail),
            "parallel": dict(self.parallel),
        }


def training_bytes_per_param(dtype: str, optimizer: str = "adamw", fp32_grads: bool = False) -> tuple:
    """(weights, gradients, optimizer states) bytes per parameter when training in `dtype`.

    Mixed precision (any dtype but fp32) keeps an fp32 master copy beside the optimizer's fp32 states;
    gradients are 16-bit unless `fp32_grads`. AdamW in bf16: 2 + 2 + 12 = 16 (ZeRO's convention).
    """
    key = DTYPE_ALIASES.get(dtype.lower(), dtype.lower())
    e = dtype_bytes(key)
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {optimizer!r}; use one of {', '.join(OPTIMIZERS)}")
    if optimizer == "none":
        return e, Fraction(0), Fraction(0)
    mixed = key != "fp32"
    grads = Fraction(4) if (fp32_grads or not mixed) else (e if key in ("bf16", "fp16") else Fraction(2))
    optim = Fraction(4 * OPTIMIZERS[optimizer]) + (Fraction(4) if mixed else Fraction(0))
    return e, grads, optim


def estimate_memory(
    spec: ModelSpec,
    batch: int = 1,
    seq_len: int | None = None,
    dtype: str = "bf16",
    optimizer: str = "adamw",
    recompute: str = "none",
    src_len: int | None = None,
    fp32_grads: bool = False,
    dropout: bool = True,
    zero_stage: int = 0,
    data_parallel: int = 1,
    tensor_parallel: int = 1,
    pipeline_parallel: int = 1,
) -> MemoryEstimate:
    """Memory of training and inference for `spec`, per device when parallel degrees are given."""
    check_args("estimate_memory", spec=spec, batch=batch, seq_len=seq_len, dtype=dtype, optimizer=optimizer,
               recompute=recompute, src_len=src_len, fp32_grads=fp32_grads, dropout=dropout, zero_stage=zero_stage,
               data_parallel=data_parallel, tensor_parallel=tensor_parallel,
               pipeline_parallel=pipeline_parallel)  # fmt: skip
    T, S = workload_lengths(spec, batch, seq_len, src_len)
    for what, n in (("data_parallel", data_parallel), ("tensor_parallel", tensor_parallel),
                    ("pipeline_parallel", pipeline_parallel)):  # fmt: skip
        if n < 1:
            raise ValueError(f"{what} must be positive, got {n}")
    if recompute not in RECOMPUTE:
        raise ValueError(f"unknown recompute {recompute!r}; use one of {', '.join(RECOMPUTE)}")
    if zero_stage not in (0, 1, 2, 3):
        raise ValueError(f"zero_stage must be 0, 1, 2 or 3, got {zero_stage}")
    key = DTYPE_ALIASES.get(dtype.lower(), dtype.lower())
    N = count_params(spec).total
    mixed = key != "fp32"
    model_split = tensor_parallel * pipeline_parallel
    shard = Fraction(1, model_split)

    weights_pp, grads_pp, optim_pp = training_bytes_per_param(key, optimizer, fp32_grads)
    states = OPTIMIZERS[optimizer]
    zero_div = {
        "weights": data_parallel if zero_stage >= 3 else 1,
        "gradients": data_parallel if zero_stage >= 2 else 1,
        "optimizer": data_parallel if zero_stage >= 1 else 1,
    }
    weights = nbytes(N * shard / zero_div["weights"], weights_pp)
    grads = nbytes(N * shard / zero_div["gradients"], grads_pp)
    optim = nbytes(N * shard / zero_div["optimizer"], optim_pp)

    # activations: one micro-batch of `batch` sequences, in the training dtype (16-bit in the paper)
    act_dtype = "fp32" if key == "fp32" else "bf16"
    detail: dict[str, int] = {}
    stacks = []
    if spec.encoder_layers:
        stacks.append(("encoder", spec.encoder_layers, S if spec.decoder_layers else T))
    if spec.decoder_layers:
        stacks.append(("decoder", spec.decoder_layers, T))
    for stack, n_layers, length in stacks:
        per = activation_bytes_per_layer(spec, batch, length, S, stack, act_dtype, recompute, dropout)
        for k, v in per.items():
            detail[f"{stack}.{k}"] = n_layers * v
    ea = dtype_bytes(act_dtype)
    h, V = spec.d_model, spec.vocab_size
    if spec.kind == "encoder-decoder":
        detail["decoder.memory"] = nbytes(ea * S * batch * h, 1)  # encoder output read by every cross-attention
    # output layer (Korthikanti 4.3): final-norm input, head input, fp32 logits for the loss
    detail["output.head_input"] = nbytes((2 if spec.final_norm else 1) * ea * T * batch * h, 1)
    detail["output.logits_fp32"] = 4 * T * batch * V
    if dropout:
        detail["embedding.dropout_mask"] = sum(length * batch * h for _, _, length in stacks)
    activations = nbytes(sum(detail.values()), Fraction(1, tensor_parallel))

    kv = kv_cache_bytes(spec, batch, T, dtype if key not in ("int4",) else "bf16", S)
    kv = nbytes(kv, Fraction(1, model_split))
    per_param = float(weights_pp + grads_pp + optim_pp)
    master = "an fp32 master copy and " if mixed and optimizer != "none" else ""
    note = (
        f"{per_param:g} = {float(weights_pp):g} weights + {float(grads_pp):g} gradients"
        f"{' (fp32, the 18-byte convention)' if fp32_grads and mixed else ''} + {float(optim_pp):g} optimizer "
        f"({master}{states} fp32 state{'s' if states != 1 else ''} of {optimizer})"
    )
    return MemoryEstimate(
        name=spec.name,
        batch=batch,
        seq_len=T,
        src_len=S,
        dtype=key,
        optimizer=optimizer,
        recompute=recompute,
        params=N,
        weights_bytes=weights,
        gradients_bytes=grads,
        optimizer_bytes=optim,
        activations_bytes=activations,
        kv_cache_bytes=kv,
        inference_weights_bytes=nbytes(N * shard, weights_pp),
        activations_detail=detail,
        bytes_per_param_training=per_param,
        per_param_note=note,
        parallel={
            "zero_stage": zero_stage,
            "data_parallel": data_parallel,
            "tensor_parallel": tensor_parallel,
            "pipeline_parallel": pipeline_parallel,
        },
    )
