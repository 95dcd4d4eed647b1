"""Training and inference memory on one device: weights, gradients, optimizer states, activations, KV
cache, by ZeRO stage and tensor / pipeline parallel degree, with LoRA and offloading (archspec/memory).

Training in mixed precision (dtype bf16/fp16) with AdamW keeps 16 bytes per parameter — 2 for the
weights, 2 for the gradients, 12 for the fp32 master copy and the two Adam moments (Rajbhandari et
al. 2020, ZeRO, section 3.1). This is what is shown by default. ``fp32_grads=True`` keeps gradients
in fp32 instead, the 18-byte convention (2 + 4 + 12) of frameworks that accumulate gradients in
fp32. Training in fp32 needs no master copy: 4 + 4 + 8. Tensor parallelism t is taken with sequence
parallelism: all activations divide by t. Pipeline parallelism does not reduce the first stage's
activations (it holds p micro-batches of L/p layers, Korthikanti et al. 2022, section 4.2.3).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

from archspec.core.checks import check_args, check_int
from archspec.core.compiled import per_structure
from archspec.core.errors import SpecError, shown
from archspec.core.records import Exact, record, rendered
from archspec.core.tracing import fraction
from archspec.core.vocab import RECOMPUTE, ZERO_STAGES
from archspec.count.flops import exact_number, workload_lengths
from archspec.count.params import count_params
from archspec.describe.blocks import Lengths, describe, described, held
from archspec.memory.activations import attention_mode, saved_bytes
from archspec.memory.cache import cached_bytes, default_kv_dtype, kv_cache_bytes, kv_cache_dtype
from archspec.memory.lora import lora_params
from archspec.memory.parallel import check_split, rank_elements, stored_weights_bytes
from archspec.memory.storage import canonical_dtype, canonical_format, dtype_bytes, nbytes
from archspec.spec.layers import moe_specs
from archspec.spec.model import ModelSpec

OPTIMIZERS = {  # states per parameter, each kept in fp32
    "adamw": 2,
    "adam": 2,
    "sgd-momentum": 1,
    "sgd": 0,
    "none": 0,
}


@dataclass(frozen=True)
class MemoryEstimate:
    name: str
    batch: int
    seq_len: int
    src_len: int | None = field(metadata=rendered(omit_none=True))
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
    bytes_per_param_training: float
    per_param_note: str = field(metadata=rendered("bytes_per_param_note"))
    activations_detail: dict[str, int]
    parallel: dict[str, int]
    # the storage of inference_weights_bytes (and of a LoRA's frozen base)
    weights_format: str = field(default="bf16", metadata=rendered("weights"))
    experts_format: str | None = field(default=None, metadata=rendered("experts"))
    trainable_params: int = 0
    # {"rank", "targets", "base_bytes", "adapter_bytes"} when LoRA
    lora: dict | None = field(default=None, metadata=rendered(convert=lambda v: dict(v) if v else None))
    # '{stack}.{kind}' -> {"layers", "activations_bytes_per_layer", "kv_cache_bytes_per_layer"} (one layer of
    # each kind, the whole batch, before any parallel split)
    kinds: dict[str, dict[str, int]] = field(default_factory=dict)
    global_batch: int | None = None
    accumulation_steps: int = 1
    offload: str | None = None  # "optimizer": the optimizer states (and fp32 master copy) in host memory

    @property
    def host_bytes(self) -> int:
        """Bytes kept in host memory (offloaded optimizer states)."""
        return self.optimizer_bytes if self.offload == "optimizer" else 0

    @property
    def training_total_bytes(self) -> int:
        """Bytes on the device: weights, gradients, optimizer states (unless offloaded) and activations."""
        device_optim = 0 if self.offload == "optimizer" else self.optimizer_bytes
        return self.weights_bytes + self.gradients_bytes + device_optim + self.activations_bytes

    @property
    def inference_total_bytes(self) -> int:
        return self.inference_weights_bytes + self.kv_cache_bytes

    @property
    def kv_cache_bytes_per_token(self) -> Fraction:
        """Cache per (target) token of one sequence, the source's share included for an encoder-decoder."""
        return Exact(self.kv_cache_bytes, self.batch * self.seq_len)

    @property
    def micro_batch(self) -> int:
        """Sequences per device per step: the batch the estimate is for."""
        return self.batch

    # the figures derived from the fields, each after the field it follows in the record
    DERIVED = (
        ("kv_cache_bytes_per_token", "kv_cache_bytes", exact_number),
        ("training_total_bytes", "kv_cache_dtype"),
        ("inference_total_bytes", "kv_cache_dtype"),
        ("micro_batch", "kinds"),
        ("host_bytes", "offload"),
    )

    def to_dict(self) -> dict:
        return record(self, self.DERIVED)

    def _repr_html_(self) -> str:  # a table in Jupyter
        from archspec.render.notebook import result_html

        return result_html(self)


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
    grads = Fraction(4) if (fp32_grads or not mixed) else Fraction(2)  # 16-bit gradients (fp8, int8 too)
    optim = Fraction(4 * OPTIMIZERS[optimizer]) + (Fraction(4) if mixed else Fraction(0))
    return e, grads, optim


@per_structure
@described
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
    weights: str | None = None,
    experts: str | None = None,
    kv_dtype: str | None = None,
    lora_rank: int | None = None,
    lora_targets: str = "all",
    global_batch: int | None = None,
    offload: str | None = None,
) -> MemoryEstimate:
    """Memory of training and inference for `spec`, per device when parallel degrees are given.

    `weights` (a STORAGE format, default `dtype`) stores the weights of the inference figures and the
    frozen base of a LoRA fine-tune, `experts` the routed experts, `kv_dtype` the cache. `lora_rank`
    trains low-rank adapters on `lora_targets` (see lora_params) over a frozen base: gradients and
    optimizer states for the adapters only (QLoRA: weights="nf4"). `batch` is the micro-batch;
    `global_batch` (a multiple of batch x data_parallel) sets the gradient accumulation steps.
    `offload="optimizer"` keeps the optimizer states (and the fp32 master copy) in host memory.

    Activations are what autograd saves in one training step of the reference model: `attention`
    'flash' (a fused kernel, the default of modern trainers: no score matrix) or 'eager' (the
    probabilities stored); `dropout` adds Korthikanti et al.'s one-byte masks (the reference model
    runs none, so they are not measured)."""
    lengths = _workload(spec, batch, seq_len, dtype, optimizer, recompute, src_len, fp32_grads, dropout, zero_stage,
                        data_parallel, tensor_parallel, pipeline_parallel)  # fmt: skip
    key = canonical_dtype(dtype)
    mode = attention_mode(spec, attention)
    N = count_params(spec).total
    per_param = training_bytes_per_param(key, optimizer, fp32_grads)
    zero_div = _zero_divisors(zero_stage, data_parallel)
    states = _training_states(spec, per_param, zero_div, tensor_parallel, pipeline_parallel)

    # activations: one micro-batch of `batch` sequences, in the dtype of the computation (fp32 keeps
    # fp32 activations; mixed precision computes in 16 bits)
    act_dtype = "fp32" if key == "fp32" else "bf16"
    workload = (lengths, act_dtype, recompute, dropout, attention)
    detail = _saved(spec, workload)

    w_key, x_key, kv_key = _formats(spec, key, weights, experts, kv_dtype)
    _check_offload(offload, optimizer, key, per_param[2])
    steps = _accumulation_steps(global_batch, batch, data_parallel)
    inference_weights = stored_weights_bytes(spec, w_key, x_key, tensor_parallel, 1, pipeline_parallel)
    trainable, lora = N, None
    if lora_rank is not None:
        check_int("lora_rank", lora_rank, "estimate_memory", minimum=1)
        trainable, lora, states, adapters = _lora_training(
            spec, lora_rank, lora_targets, lengths, act_dtype, inference_weights, per_param, zero_div,
            pipeline_parallel)  # fmt: skip
        detail = {**detail, "lora.adapters": adapters}
    activations = nbytes(sum(detail.values()), Fraction(1, tensor_parallel))
    kv = nbytes(kv_cache_bytes(spec, batch, lengths.target, kv_key, lengths.source),
                Fraction(1, tensor_parallel * pipeline_parallel))  # fmt: skip
    return MemoryEstimate(
        name=spec.name, batch=batch, seq_len=lengths.target, src_len=lengths.source, dtype=key, optimizer=optimizer,
        recompute=recompute, attention=mode, params=N, weights_bytes=states[0], gradients_bytes=states[1],
        optimizer_bytes=states[2], activations_bytes=activations, kv_cache_bytes=kv, kv_cache_dtype=kv_key,
        inference_weights_bytes=inference_weights, activations_detail=detail,
        bytes_per_param_training=float(sum(per_param)),
        per_param_note=_per_param_note(per_param, key, optimizer, fp32_grads, trainable if lora else None, w_key),
        parallel={"zero_stage": zero_stage, "data_parallel": data_parallel, "tensor_parallel": tensor_parallel,
                  "pipeline_parallel": pipeline_parallel},
        weights_format=w_key, experts_format=x_key, trainable_params=trainable, lora=lora,
        global_batch=global_batch, accumulation_steps=steps, offload=offload,
        kinds={k: dict(v) for k, v in held(spec, ("layer_kinds_memory", *workload, mode, kv_key), lambda: (
            layer_kinds_memory(spec, lengths, act_dtype, recompute, dropout, mode, kv_key))).items()},
    )  # fmt: skip


def _saved(spec: ModelSpec, workload: tuple) -> dict[str, int]:
    """What autograd saves of one micro-batch (lengths, dtype, recompute, dropout, attention), by tensor; each
    attention says which products it runs (archspec.memory.saved.attention.explicit_attention). The same
    for every layout a planner tries of the spec (archspec.describe.blocks.held): made once there."""
    lengths, act_dtype, recompute, dropout, attention = workload
    return dict(held(spec, ("saved_bytes", *workload), lambda: saved_bytes(
        describe(spec), lengths, act_dtype, recompute, dropout, attention=attention, spec=spec)))  # fmt: skip


def _workload(spec, batch, seq_len, dtype, optimizer, recompute, src_len, fp32_grads, dropout, zero_stage,
              data_parallel, tensor_parallel, pipeline_parallel) -> Lengths:  # fmt: skip
    """The arguments checked, and the lengths of one micro-batch's sequences."""
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
    if zero_stage not in ZERO_STAGES:
        raise SpecError(f"zero_stage must be 0, 1, 2 or 3, got {zero_stage}")
    check_split(spec, tensor_parallel, pipeline_parallel)
    return lengths


def _zero_divisors(zero_stage: int, data_parallel: int) -> dict[str, int]:
    """What ZeRO shards over the data-parallel devices: stage 1 the optimizer states, 2 the gradients too,
    3 the weights too."""
    return {
        "weights": data_parallel if zero_stage >= 3 else 1,
        "gradients": data_parallel if zero_stage >= 2 else 1,
        "optimizer": data_parallel if zero_stage >= 1 else 1,
    }


def _training_states(spec: ModelSpec, per_param: tuple, zero_div: dict[str, int], tensor_parallel: int,
                     pipeline_parallel: int) -> tuple[int, int, int]:  # fmt: skip
    """Bytes of the weights, gradients and optimizer states one device keeps in full training."""
    local = {k: rank_elements(spec, div, tensor_parallel) for k, div in zero_div.items()}
    return tuple(
        nbytes(fraction(local[k], pipeline_parallel), bytes_pp)
        for k, bytes_pp in zip(("weights", "gradients", "optimizer"), per_param)
    )


def _formats(spec: ModelSpec, key: str, weights: str | None, experts: str | None,
             kv_dtype: str | None) -> tuple[str, str | None, str]:  # fmt: skip
    """The storage of the inference weights (and a LoRA's frozen base), of the routed experts, of the cache."""
    from archspec.memory.roles import canonical_weights

    w_key = canonical_weights(weights) if weights is not None else key
    x_key = canonical_format(experts, "--experts") if experts is not None else None
    if x_key and not moe_specs(spec):
        raise SpecError(f"--experts {x_key}: {spec.name} has no routed experts")
    return w_key, x_key, default_kv_dtype(key, kv_dtype)


def _check_offload(offload: str | None, optimizer: str, key: str, optim_pp: Fraction) -> None:
    if offload not in (None, "optimizer"):
        raise SpecError(f"unknown offload {shown(offload)}; use optimizer (the optimizer states to host memory)")
    if offload == "optimizer" and not optim_pp:
        raise SpecError(
            f"offload optimizer: optimizer {shown(optimizer)} in {key} keeps no states and no master copy, so there is "
            "nothing to offload; choose an optimizer, or drop the offload"
        )


def _accumulation_steps(global_batch: int | None, batch: int, data_parallel: int) -> int:
    """Micro-batches per optimizer step on each data-parallel device."""
    if global_batch is None:
        return 1
    check_int("global_batch", global_batch, "estimate_memory", minimum=1)
    if global_batch % (batch * data_parallel):
        raise SpecError(
            f"global_batch={global_batch} is not a multiple of micro_batch={batch} x data_parallel="
            f"{data_parallel}; gradient accumulation runs a whole number of micro-batches"
        )
    return global_batch // (batch * data_parallel)


def _lora_training(spec: ModelSpec, rank: int, targets: str, lengths: Lengths, act_dtype: str, base_weights: int,
                   per_param: tuple, zero_div: dict[str, int], pipeline_parallel: int):  # fmt: skip
    """A LoRA fine-tune over a frozen base: the trainable parameters, the record of the adapters, the bytes
    of weights, gradients and optimizer states on one device, and the adapters' saved activations."""
    weights_pp, grads_pp, optim_pp = per_param
    trainable, adapted = lora_params(spec, rank, targets)
    # the frozen base: stored in `weights`, no gradients, no optimizer states (ZeRO-3 shards it too)
    base = math.ceil(fraction(base_weights, zero_div["weights"]))
    # the adapters sit with their layers (split by the pipeline) and whole on every tensor-parallel rank
    share = fraction(trainable, pipeline_parallel)
    adapter = nbytes(share / zero_div["weights"], weights_pp)
    states = (base + adapter, nbytes(share / zero_div["gradients"], grads_pp),
              nbytes(share / zero_div["optimizer"], optim_pp))  # fmt: skip
    # each adapted matrix keeps its rank-wide A·x for the gradient of B (the base's own saved tensors
    # are counted as in full training: an upper bound, a frozen projection needs not keep its input)
    extra = sum(lengths.batch * lengths.rows(rows, st) * rank * n for st, rows, n in adapted)
    lora = {"rank": rank, "targets": targets, "base_bytes": base, "adapter_bytes": adapter}
    return trainable, lora, states, nbytes(extra, dtype_bytes(act_dtype))


def _per_param_note(per_param: tuple, key: str, optimizer: str, fp32_grads: bool, adapters: int | None,
                    base_format: str) -> str:  # fmt: skip
    """'16 = 2 weights + 2 gradients + 12 optimizer (...)': the bytes per trained parameter, term by term."""
    weights_pp, grads_pp, optim_pp = per_param
    mixed = key != "fp32"
    states = OPTIMIZERS[optimizer]
    master = "an fp32 master copy and " if mixed and optimizer != "none" else ""
    return (
        f"{float(sum(per_param)):g} = {float(weights_pp):g} weights + {float(grads_pp):g} gradients"
        f"{' (fp32, the 18-byte convention)' if fp32_grads and mixed else ''} + {float(optim_pp):g} optimizer "
        f"({master}{states} fp32 state{'s' if states != 1 else ''} of {optimizer})"
        + (
            f"; for the {adapters:,} adapter parameters only, over a frozen base in {base_format}"
            if adapters is not None
            else ""
        )
    )


def layer_kinds_memory(spec: ModelSpec, lengths: Lengths, act_dtype: str, recompute: str, dropout: bool,
                       attention: str, kv_dtype: str) -> dict[str, dict[str, int]]:  # fmt: skip
    """One layer of each kind: the activation bytes it saves and the cache it holds, whole batch."""
    per_kv = dtype_bytes(kv_cache_dtype(kv_dtype))
    out: dict[str, dict[str, int]] = {}
    layers: dict[str, list] = {}  # one layer of each kind: its parts, each once
    for part in describe(spec):
        if not part.layered:
            continue
        key = f"{part.stack.name}.{part.kind}"
        row = out.setdefault(key, {"layers": part.repeat, "activations_bytes_per_layer": 0,
                                   "kv_cache_bytes_per_layer": 0})  # fmt: skip
        layers.setdefault(key, []).append(part._replace(repeat=1))
        kv = sum(lengths.batch * c.values(lengths, part.stack) * cached_bytes(c, per_kv) for c in part.cached)
        row["kv_cache_bytes_per_layer"] += nbytes(kv, 1)
    for key, parts in layers.items():  # the bytes of each part rounded up alone, as saved_bytes sums them
        saved = saved_bytes(parts, lengths, act_dtype, recompute, dropout, True, attention, spec=spec)
        out[key]["activations_bytes_per_layer"] += sum(saved.values())
    return out


def max_micro_batch(spec: ModelSpec, capacity_bytes: int, **options) -> int:
    """The largest micro-batch whose training memory (weights, gradients, optimizer states on the device,
    activations) fits in `capacity_bytes` per device with `options` (estimate_memory's); 0 if none."""

    options = {k: v for k, v in options.items() if k not in ("batch", "global_batch")}

    def fits(b: int) -> bool:
        return estimate_memory(spec, batch=b, **options).training_total_bytes <= capacity_bytes

    if not fits(1):
        return 0
    hi = 2
    while fits(hi):
        hi *= 2
    lo = hi // 2  # fits(lo), not fits(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


# Tensor parallelism (Megatron-LM): column-parallel maps split their output rows, row-parallel maps
# their input columns (their biases stay whole); vocabulary tables split their rows; norms, position


def fits(m: MemoryEstimate, capacity_bytes: int) -> dict[str, bool]:
    """Whether training (weights, gradients, optimizer states, activations) and inference (weights and
    KV cache) fit in `capacity_bytes` per device."""
    if not isinstance(m, MemoryEstimate):
        raise TypeError(f"fits: m must be a MemoryEstimate (from archspec.estimate_memory), got {type(m).__name__}")
    check_int("capacity_bytes", capacity_bytes, "fits", minimum=0)
    return {
        "training": m.training_total_bytes <= capacity_bytes,
        "inference": m.inference_total_bytes <= capacity_bytes,
    }
