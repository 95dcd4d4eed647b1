"""Memory for training and inference: weights, gradients, optimizer states, activations, KV cache.

Conventions:

- Bytes per value: fp32 4, bf16 2, fp16 2, fp8 1, int8 1, int4 1/2 (rounded up per tensor set).
- Training in mixed precision (dtype bf16/fp16) with AdamW keeps 16 bytes per parameter — 2 for
  the weights, 2 for the gradients, 12 for the fp32 master copy and the two Adam moments
  (Rajbhandari et al. 2020, ZeRO, section 3.1). This is what is shown by default.
  ``fp32_grads=True`` keeps gradients in fp32 instead, the 18-byte convention (2 + 4 + 12) of
  frameworks that accumulate gradients in fp32. Training in fp32 needs no master copy: 4 + 4 + 8.
- Activations are the tensors each part of the model's description (archspec.blocks) declares
  saved. They follow Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large
  Transformer Models", section 4), generalised tensor by tensor to grouped-query attention,
  d_head · n_heads ≠ d_model, d_ff ≠ 4 d_model, gated MLPs and cross-attention. For the GPT
  block with 16-bit activations and dropout it is exactly their s·b·h·(34 + 5·a·s/h) per layer;
  selective recomputation drops the a·s² terms (34·s·b·h); full recomputation keeps each
  layer's input (2·s·b·h). Tensor parallelism t is taken with sequence parallelism: all
  activations divide by t. Pipeline parallelism does not reduce the first stage's activations
  (it holds p micro-batches of L/p layers, section 4.2.3).
- KV cache: decoder_layers × n_kv_heads × (d_head + d_value) × sequence × batch × bytes, plus the
  cross-attention keys and values over the source for an encoder-decoder, in kv_cache_dtype(dtype):
  the dtype asked for, except int4 (a weight-only format), whose cache stays in bf16.
- ZeRO stage 1 divides optimizer states by the data-parallel degree, stage 2 also gradients,
  stage 3 also weights; tensor and pipeline parallel degrees divide the weights, gradients and
  optimizer states.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from archspec.blocks import Lengths, Part, describe
from archspec.checks import check_args
from archspec.errors import SpecError, shown
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
# torch's names (torch.float32, bfloat16, float8_e4m3fn ...) for the short ones
DTYPE_ALIASES = {
    "float32": "fp32",
    "float": "fp32",
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "float8_e4m3fn": "fp8",
    "float8_e4m3fnuz": "fp8",
    "float8_e5m2": "fp8",
    "float8_e5m2fnuz": "fp8",
}
OPTIMIZERS = {  # states per parameter, each kept in fp32
    "adamw": 2,
    "adam": 2,
    "sgd-momentum": 1,
    "sgd": 0,
    "none": 0,
}
RECOMPUTE = ("none", "selective", "full")


def canonical_dtype(dtype: str) -> str:
    """'bfloat16' -> 'bf16': the short name of a dtype, or a ValueError listing the known ones."""
    name = dtype.strip().lower().removeprefix("torch.") if isinstance(dtype, str) else None
    key = DTYPE_ALIASES.get(name, name)
    if key not in DTYPE_BYTES:
        raise SpecError(f"unknown dtype {shown(dtype)}; use one of {', '.join(DTYPE_BYTES)}")
    return key


def dtype_bytes(dtype: str) -> Fraction:
    return DTYPE_BYTES[canonical_dtype(dtype)]


@dataclass(frozen=True)
class ParallelLayout:
    """How `gpus` devices split one model: data x tensor x pipeline parallel, with a ZeRO stage."""

    gpus: int
    data_parallel: int
    tensor_parallel: int
    pipeline_parallel: int
    zero_stage: int


def parallel_layout(spec: ModelSpec, gpus: int = 1, tensor_parallel: int = 1, pipeline_parallel: int = 1,
                    zero_stage: int = 0) -> ParallelLayout:  # fmt: skip
    """`gpus` split into data-parallel replicas of tensor x pipeline parallel groups, checked against the
    model: tensor parallelism splits heads, key/value heads and the MLP width; each pipeline stage
    needs at least one layer. A layout that cannot be is a SpecError naming the numbers."""
    for what, n in (("gpus", gpus), ("tensor_parallel", tensor_parallel), ("pipeline_parallel", pipeline_parallel)):
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise SpecError(f"{what} must be a positive whole number, got {n!r}")
    if zero_stage not in (0, 1, 2, 3):
        raise SpecError(f"zero_stage must be 0, 1, 2 or 3, got {zero_stage!r}")
    if gpus % (tensor_parallel * pipeline_parallel):
        raise SpecError(
            f"gpus={gpus} is not divisible by tensor_parallel={tensor_parallel} x pipeline_parallel={pipeline_parallel}"
        )
    check_split(spec, tensor_parallel, pipeline_parallel)
    return ParallelLayout(gpus, gpus // (tensor_parallel * pipeline_parallel), tensor_parallel, pipeline_parallel,
                          zero_stage)  # fmt: skip


def check_split(spec: ModelSpec, tensor_parallel: int, pipeline_parallel: int) -> None:
    """Tensor parallelism t splits query heads, key/value heads and d_ff t ways (Megatron-LM's column
    and row split); pipeline parallelism p needs at least p layers."""
    if tensor_parallel > 1:
        for what, n in (("n_heads", spec.n_heads), ("n_kv_heads", spec.n_kv_heads), ("d_ff", spec.d_ff)):
            if n % tensor_parallel:
                raise SpecError(
                    f"tensor_parallel={tensor_parallel} does not divide {what}={n} of {spec.name}; "
                    f"tensor parallelism splits {what} evenly across devices"
                )
    if pipeline_parallel > spec.n_layers:
        raise SpecError(
            f"pipeline_parallel={pipeline_parallel} is more stages than {spec.name} has layers ({spec.n_layers}); "
            "each stage needs at least one layer"
        )


def nbytes(count: int | Fraction, per: Fraction) -> int:
    return math.ceil(count * per)


def weights_bytes(spec: ModelSpec, dtype: str = "bf16") -> int:
    """All parameters stored in `dtype`."""
    check_args("weights_bytes", spec=spec, dtype=dtype)
    return nbytes(count_params(spec).total, dtype_bytes(dtype))


def kv_cache_dtype(dtype: str) -> str:
    """The one policy for the KV cache's dtype: the dtype asked for, except int4, a weight-only format
    (GPTQ, AWQ) whose keys and values stay in bf16. Every command and function asks this one."""
    key = canonical_dtype(dtype)
    return "bf16" if key == "int4" else key


def kv_cache_bytes(spec: ModelSpec, batch: int, seq_len: int, dtype: str = "bf16", src_len: int | None = None) -> int:
    """Keys and values cached for `batch` sequences of `seq_len` (and, cross-attention, `src_len`)
    tokens, in kv_cache_dtype(dtype): a sum over the model's cached entries."""
    check_args("kv_cache_bytes", spec=spec, batch=batch, seq_len=seq_len, dtype=dtype, src_len=src_len)
    lengths = Lengths(batch, seq_len, (src_len if src_len is not None else seq_len) if spec.encoder_layers else None)
    values = sum(
        part.repeat * batch * lengths.rows(c.rows, part.stack) * c.width for part in describe(spec) for c in part.cached
    )
    return nbytes(values, dtype_bytes(kv_cache_dtype(dtype)))


def kv_cache_bytes_per_token(spec: ModelSpec, dtype: str = "bf16") -> int:
    """Cache per (target) token of one sequence, one source token per target token for an encoder-decoder."""
    return kv_cache_bytes(spec, 1, 1, dtype, 1 if spec.kind == "encoder-decoder" else None)


ATTENTION = ("flash", "eager")


def attention_mode(spec: ModelSpec, attention: str) -> str:
    """The attention that actually runs: 'flash' (a fused kernel: scores never stored) or 'eager'
    (explicit products: the probabilities stored). Soft-capped scores have no fused kernel, and the
    CPU's fused kernel needs d_head = d_value, so those run eagerly whatever is asked."""
    if attention not in ATTENTION:
        raise SpecError(f"unknown attention {shown(attention)}; use flash (fused, the default) or eager")
    softcap = spec.attention.kind == "standard" and spec.attention.softcap is not None
    return "eager" if softcap or spec.d_head != spec.d_value else attention


def saved_bytes(
    parts: list[Part],
    lengths: Lengths,
    dtype: str,
    recompute: str,
    dropout: bool,
    layers: bool | None = None,
    attention: str = "flash",
) -> dict[str, int]:
    """Bytes of the tensors autograd saves, summed by '{stack}.{group}' (the head's under 'output.'),
    over the parts given; `layers` True keeps only the blocks' parts, False only the rest."""
    e = dtype_bytes(dtype)
    per_value = {"act": e, "mask": Fraction(1 if dropout else 0), "fp32": Fraction(4), "int64": Fraction(8)}
    out: dict[str, int] = {}
    for part in parts:
        if not part.saved or (layers is not None and part.layered != layers):
            continue
        where = "output" if part.component == "head" else part.stack.name
        for s in part.saved:
            if recompute not in s.kept or (s.attention is not None and s.attention != attention):
                continue
            if s.rows == "pairs":
                rows = lengths.rows("tokens", part.stack) * lengths.rows(s.keys, part.stack)
            else:
                rows = lengths.rows(s.rows, part.stack)
            copies = 1 if s.shared else part.repeat
            batch = lengths.batch if s.per_batch else 1
            key = f"{where}.{s.group}"
            out[key] = out.get(key, 0) + nbytes(copies * batch * rows * s.width, per_value[s.dtype])
    return out


def activation_bytes_per_layer(
    spec: ModelSpec,
    batch: int,
    seq: int,
    src: int | None,
    stack: str,
    dtype: str,
    recompute: str,
    dropout: bool = False,
    attention: str = "flash",
) -> dict[str, int]:
    """Bytes saved by one block of `stack` ('encoder' or 'decoder'), by group. `seq` is the stack's
    own length, `src` the source length for cross-attention (the encoder output, which every layer
    reads, is counted with the first)."""
    parts = [p for p in describe(spec) if p.layered and p.stack.name == stack and p.start == 0]
    if not parts:
        raise SpecError(f"{spec.name} has no {stack}")
    lengths = Lengths(batch, seq, src) if stack == "decoder" else Lengths(batch, seq, seq)
    mode = attention_mode(spec, attention)
    per_stack = saved_bytes([p._replace(repeat=1) for p in parts], lengths, dtype, recompute, dropout, True, mode)
    return {key.removeprefix(f"{stack}."): v for key, v in per_stack.items()}


def korthikanti_bytes_per_layer(spec: ModelSpec, batch: int, seq: int, recompute: str = "none") -> int:
    """Korthikanti et al. 2022 (section 4) for one GPT block with 16-bit activations and dropout:
    s·b·h·(34 + 5·a·s/h); 34·s·b·h with selective recomputation; 2·s·b·h with full. A published
    approximation, shown beside the exact figure (it assumes d_ff = 4h, the attention scores stored,
    dropout, no fused kernel, no norm statistics, no fp32 upcasts)."""
    s, b, h, a = seq, batch, spec.d_model, spec.n_heads
    return {"none": s * b * h * 34 + 5 * a * s * s * b, "selective": 34 * s * b * h, "full": 2 * s * b * h}[recompute]


@dataclass(frozen=True)
class MemoryEstimate:
    name: str
    batch: int
    seq_len: int
    src_len: int | None
    dtype: str
    optimizer: str
    recompute: str
    attention: str
    params: int
    weights_bytes: int
    gradients_bytes: int
    optimizer_bytes: int
    activations_bytes: int
    kv_cache_bytes: int
    kv_cache_dtype: str
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
            "attention": self.attention,
            "params": self.params,
            "weights_bytes": self.weights_bytes,
            "gradients_bytes": self.gradients_bytes,
            "optimizer_bytes": self.optimizer_bytes,
            "activations_bytes": self.activations_bytes,
            "kv_cache_bytes": self.kv_cache_bytes,
            "kv_cache_bytes_per_token": exact_number(self.kv_cache_bytes_per_token),
            "kv_cache_dtype": self.kv_cache_dtype,
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
    key = canonical_dtype(dtype)
    e = dtype_bytes(key)
    if optimizer not in OPTIMIZERS:
        raise SpecError(f"unknown optimizer {shown(optimizer)}; use one of {', '.join(OPTIMIZERS)}")
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
    dropout: bool = False,
    zero_stage: int = 0,
    data_parallel: int = 1,
    tensor_parallel: int = 1,
    pipeline_parallel: int = 1,
    attention: str = "flash",
) -> MemoryEstimate:
    """Memory of training and inference for `spec`, per device when parallel degrees are given.

    Activations are what autograd saves in one training step of the reference model: `attention`
    'flash' (a fused kernel, the default of modern trainers: no score matrix) or 'eager' (the
    probabilities stored); `dropout` adds Korthikanti et al.'s one-byte masks (the reference model
    runs none, so they are not measured)."""
    check_args("estimate_memory", spec=spec, batch=batch, seq_len=seq_len, dtype=dtype, optimizer=optimizer,
               recompute=recompute, src_len=src_len, fp32_grads=fp32_grads, dropout=dropout, zero_stage=zero_stage,
               data_parallel=data_parallel, tensor_parallel=tensor_parallel,
               pipeline_parallel=pipeline_parallel)  # fmt: skip
    lengths = workload_lengths(spec, batch, seq_len, src_len)
    for what, n in (("data_parallel", data_parallel), ("tensor_parallel", tensor_parallel),
                    ("pipeline_parallel", pipeline_parallel)):  # fmt: skip
        if n < 1:
            raise SpecError(f"{what} must be positive, got {n}")
    if recompute not in RECOMPUTE:
        raise SpecError(f"unknown recompute {shown(recompute)}; use one of {', '.join(RECOMPUTE)}")
    if zero_stage not in (0, 1, 2, 3):
        raise SpecError(f"zero_stage must be 0, 1, 2 or 3, got {zero_stage}")
    check_split(spec, tensor_parallel, pipeline_parallel)
    key = canonical_dtype(dtype)
    mode = attention_mode(spec, attention)
    N = count_params(spec).total
    mixed = key != "fp32"
    model_split = tensor_parallel * pipeline_parallel

    weights_pp, grads_pp, optim_pp = training_bytes_per_param(key, optimizer, fp32_grads)
    states = OPTIMIZERS[optimizer]
    zero_div = {
        "weights": data_parallel if zero_stage >= 3 else 1,
        "gradients": data_parallel if zero_stage >= 2 else 1,
        "optimizer": data_parallel if zero_stage >= 1 else 1,
    }
    local = {k: rank_elements(spec, div, tensor_parallel) for k, div in zero_div.items()}
    weights = nbytes(local["weights"] / pipeline_parallel, weights_pp)
    grads = nbytes(local["gradients"] / pipeline_parallel, grads_pp)
    optim = nbytes(local["optimizer"] / pipeline_parallel, optim_pp)

    # activations: one micro-batch of `batch` sequences, in the dtype of the computation (fp32 keeps
    # fp32 activations; mixed precision computes in 16 bits)
    act_dtype = "fp32" if key == "fp32" else "bf16"
    detail = saved_bytes(describe(spec), lengths, act_dtype, recompute, dropout, attention=mode)
    activations = nbytes(sum(detail.values()), Fraction(1, tensor_parallel))

    kv = nbytes(kv_cache_bytes(spec, batch, lengths.target, key, lengths.source), Fraction(1, model_split))
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
        seq_len=lengths.target,
        src_len=lengths.source,
        dtype=key,
        optimizer=optimizer,
        recompute=recompute,
        attention=mode,
        params=N,
        weights_bytes=weights,
        gradients_bytes=grads,
        optimizer_bytes=optim,
        activations_bytes=activations,
        kv_cache_bytes=kv,
        kv_cache_dtype=kv_cache_dtype(key),
        inference_weights_bytes=nbytes(rank_elements(spec, 1, tensor_parallel) / pipeline_parallel, weights_pp),
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


# Tensor parallelism (Megatron-LM): column-parallel maps split their output rows, row-parallel maps
# their input columns (their biases stay whole); vocabulary tables split their rows; norms, position
# tables and token types stay whole on every rank.
COLUMN_PARALLEL = ("qkv", "q", "kv", "gate", "up", "q_a", "q_b", "kv_a", "kv_b", "router")
ROW_PARALLEL = ("out", "down")


def rank_elements(spec: ModelSpec, shards: int, tensor_parallel: int = 1) -> int:
    """Parameter elements the largest rank holds: each tensor split `tensor_parallel` ways as
    Megatron-LM splits it, then its dimension 0 split `shards` ways as FSDP2 (ZeRO-3) shards it —
    ceil(rows / shards) rows on the first rank, which every rank pads to."""
    total = 0
    for part in describe(spec):
        # every copy of a part (each layer of a stack) holds the same tensors: count one, times the
        # copies, so that the cost does not grow with depth; the module is the same in every copy
        first = next(part.paths())
        copies = part.copies if part.layered else 1
        for entry in part.entries:
            for name, shape_ in entry.tensors():
                shape = list(shape_)
                *_, module, leaf = ("", *".".join(n for n in (first, entry.name, name) if n).split("."))
                if tensor_parallel > 1:
                    if module in ROW_PARALLEL:
                        if leaf == "weight":
                            shape[-1] = -(-shape[-1] // tensor_parallel)
                    elif module in COLUMN_PARALLEL or module in ("embed", "target_embed", "head"):
                        shape[0] = -(-shape[0] // tensor_parallel)
                shape[0] = -(-shape[0] // shards)
                n = 1
                for s in shape:
                    n *= s
                total += n * copies
    return total


def fits(m: MemoryEstimate, capacity_bytes: int) -> dict[str, bool]:
    """Whether training (weights, gradients, optimizer states, activations) and inference (weights and
    KV cache) fit in `capacity_bytes` per device."""
    return {
        "training": m.training_total_bytes <= capacity_bytes,
        "inference": m.inference_total_bytes <= capacity_bytes,
    }
