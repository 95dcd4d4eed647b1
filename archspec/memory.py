"""Memory for training and inference: weights, gradients, optimizer states, activations, KV cache.

Conventions:

- Bytes per value: fp32 4, bf16 2, fp16 2, fp8 1, int8 1; int4 and the other quantised storage
  formats (STORAGE: nf4, mxfp4, GGUF kinds) with their block scales, on the tensors each holds.
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
from dataclasses import dataclass, field
from fractions import Fraction
from typing import NamedTuple

from archspec.blocks import AttentionShape, Cached, Lengths, Linear, Part, describe, stack_shapes
from archspec.checks import check_args, check_int, check_text
from archspec.errors import SpecError, shown
from archspec.flops import exact_number, workload_lengths
from archspec.layers import moe_specs
from archspec.params import count_params
from archspec.spec import ModelSpec
from archspec.vocab import ATTENTION, RECOMPUTE, ZERO_STAGES, attention_runs, dtype_key


class Storage(NamedTuple):
    """How one storage format holds weights: bits per value with its block scales counted in, and what
    a quantised format leaves in another format (``None``: the format itself).

    `dtype`: also a computation dtype (``--dtype``: weights, gradients, activations, KV cache);
    `tables`: embedding tables; `head`: an untied output head (a tied head gives its table this
    format); `vectors`: norm weights and biases; `router`: MoE router matrices; `more_bits`: the
    format llama.cpp's _M mixtures give the value projection and the MLP down projection of the layers
    its use_more_bits rule picks."""

    bits: Fraction
    layout: str
    dtype: bool = False
    tables: str | None = None
    head: str | None = None
    vectors: str | None = None
    router: str | None = None
    more_bits: str | None = None

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
# other names of the short ones (torch's): archspec.vocab.DTYPE_ALIASES
OPTIMIZERS = {  # states per parameter, each kept in fp32
    "adamw": 2,
    "adam": 2,
    "sgd-momentum": 1,
    "sgd": 0,
    "none": 0,
}


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


def more_bits_layers(part: Part, lo: int, hi: int) -> int:
    """How many of the part's layers among lo .. hi - 1 use_more_bits picks: the first n/8 and the last
    n/8 layers, and every third in between ((i - n/8) % 3 == 2), counted over the kind's placement."""
    n, where, kind = part.stack.layers, part.group.placement, part.kind
    a, b = n // 8, 7 * n // 8
    return (where.count_in(kind, lo, min(hi, a)) + where.count_in(kind, max(lo, b), hi)
            + where.count_in(kind, max(lo, a), min(hi, b), 3, a + 2))  # fmt: skip


def use_more_bits(i: int, n: int) -> bool:
    """llama.cpp's use_more_bits(i, n) for layer i of n (src/llama-quant.cpp): i < n/8, i >= 7n/8, or
    (i - n/8) % 3 == 2, in integer division."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


class Slot(NamedTuple):
    """One part on one pipeline stage: the layers lo .. hi - 1 of its stack that the stage holds (0, 1
    for a part outside the blocks), of which `layers` have the part's kind."""

    part: Part
    lo: int
    hi: int
    layers: int = 1

    @property
    def copies(self) -> int:
        if not self.part.holds:
            return 0
        return min(self.layers, 1) if self.part.shared else self.layers


def stage_slots(spec: ModelSpec, pipeline_parallel: int = 1) -> list[list[Slot]]:
    """The parts of each of `pipeline_parallel` stages: stage s holds layers s·k .. (s + 1)·k - 1 of all
    the stacks' layers in data-flow order, k = ceil(layers / p); a part outside the blocks sits with the
    next block (embeddings on the first stage, final norm and head on the last); a tied head keeps a
    copy of its table on the last stage (as Megatron-LM does) when p > 1."""
    parts = [p for p in describe(spec)]
    total = spec.n_layers
    k = -(-total // pipeline_parallel)
    offsets, at = {}, 0
    for st in stack_shapes(spec):
        offsets[st.name] = at
        at += st.layers
    stages: list[list[Slot]] = [[] for _ in range(pipeline_parallel)]
    pending: list[Part] = []
    for part in parts:
        if not part.layered:
            pending.append(part)
            continue
        g0, depth = offsets[part.stack.name], part.stack.layers
        for s in range(pipeline_parallel):
            lo, hi = max(g0, s * k) - g0, min(g0 + depth, (s + 1) * k) - g0
            n = part.group.placement.count_in(part.kind, lo, hi) if lo < hi else 0
            if n:
                stages[s] += [Slot(p, 0, 1) for p in pending]
                pending = []
                stages[s].append(Slot(part, lo, hi, n))
    stages[-1] += [Slot(p, 0, 1) for p in pending]
    head = next((p for p in parts if p.role == "head"), None)
    tied = head is not None and any(isinstance(e, Linear) and e.tied for e in head.entries)
    if pipeline_parallel > 1 and tied:
        stages[-1] += [Slot(p, 0, 1) for p in parts if p.path == "embed"]
    return stages


def _module(part: Part, entry_name: str) -> str:
    return ".".join(n for n in (part.path, entry_name) if n).rsplit(".", 1)[-1]


def slot_bytes(slot: Slot, weights: str, experts: str | None = None, tensor_parallel: int = 1,
               expert_parallel: int = 1, tied_table: bool = False) -> Fraction:  # fmt: skip
    """Bytes one device holds of `slot`: every tensor in its format (STORAGE), split as Megatron-LM splits
    it over `tensor_parallel` devices, a routed expert stack over `expert_parallel` devices.
    `tied_table`: the token table also serves as the head (a quantised format may store it as the head)."""
    part, n = slot.part, slot.copies
    if not n:
        return Fraction(0)
    fmt = experts if (experts and part.role == "expert") else weights
    f = STORAGE[fmt]

    def bits(kind: str) -> Fraction:  # kind: matrix, table, head, vector, router
        if not f.quantised:
            return f.bits
        name = {"matrix": None, "table": f.tables, "head": f.head, "vector": f.vectors, "router": f.router}[kind]
        return STORAGE[name or fmt].bits

    t = tensor_parallel
    out = Fraction(0)
    for e in part.entries:
        module = _module(part, e.name)
        copies = getattr(e, "copies", 1)
        for leaf, shape in e.tensors():
            shape = list(shape)
            if copies > 1:  # a stack of routed experts: (copies, n_out[, n_in])
                if part.role == "expert":
                    shape[0] = -(-shape[0] // expert_parallel)
                body = shape[1:]
            else:
                body = shape
            if t > 1 and module in ROW_PARALLEL:
                if leaf == "weight":
                    body[-1] = -(-body[-1] // t)
            elif t > 1 and (module in COLUMN_PARALLEL or module in ("embed", "target_embed", "head")):
                body[0] = -(-body[0] // t)
            shape = shape[:1] + body if copies > 1 else body
            values = 1
            for x in shape:
                values *= x
            if len(body) == 1:
                kind = "vector"
            elif part.role == "embedding":
                kind = "head" if tied_table and module == "embed" else "table"
            else:
                kind = "head" if part.role == "head" else "router" if part.role == "router" else "matrix"
            out += values * bits(kind) * n
            more_bits = f.more_bits and kind == "matrix" and leaf == "weight" and part.layered
            if more_bits and module in ("down", "qkv", "kv"):
                more = STORAGE[f.more_bits].bits - f.bits
                picked = more_bits_layers(part, slot.lo, slot.hi)
                if module == "down":
                    out += picked * values * more
                elif part.component in ("attention", "cross_attention"):  # the value rows of the fused projection
                    v = AttentionShape.of(part.group.spec).v
                    v = -(-v // t) if t > 1 else v
                    out += picked * v * shape[-1] * more
    return out / 8


def _head_tied(spec: ModelSpec) -> bool:
    return spec.head.kind != "none" and spec.tie_embeddings


def stored_weights_bytes(spec: ModelSpec, weights: str = "bf16", experts: str | None = None, tensor_parallel: int = 1,
                         expert_parallel: int = 1, pipeline_parallel: int = 1) -> int:  # fmt: skip
    """Bytes of weights on the largest device, each tensor in its storage format (STORAGE: `weights`
    for all, `experts` for the routed experts when given), split over tensor, expert and pipeline
    parallel devices."""
    w = canonical_format(weights)
    x = canonical_format(experts, "--experts") if experts else None
    tied = _head_tied(spec)
    return max(
        math.ceil(sum(slot_bytes(s, w, x, tensor_parallel, expert_parallel, tied) for s in stage))
        for stage in stage_slots(spec, pipeline_parallel)
    )


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
    if zero_stage not in ZERO_STAGES:
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
        from archspec.layers import kind_specs

        for k in kind_specs(spec):  # every kind's widths (Gemma 4: other heads on its global layers)
            for what, n in (("n_heads", k.n_heads), ("n_kv_heads", k.n_kv_heads), ("d_ff", k.d_ff)):
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
    """All parameters stored in `dtype` (a quantised one as STORAGE says which tensors it holds)."""
    check_args("weights_bytes", spec=spec, dtype=dtype)
    key = canonical_format(dtype, "dtype")
    if not STORAGE[key].quantised:
        return nbytes(count_params(spec).total, dtype_bytes(key))
    return stored_weights_bytes(spec, key)


def kv_cache_dtype(dtype: str) -> str:
    """The one policy for the KV cache's dtype: the dtype asked for, except a weight-only format (int4
    as GPTQ and AWQ store it, nf4, mxfp4, the GGUF kinds), whose keys and values stay in bf16. Every
    command and function asks this one."""
    key = canonical_format(dtype, "dtype") if isinstance(dtype, str) and dtype.strip().lower() in STORAGE else None
    key = key or canonical_dtype(dtype)
    return "bf16" if STORAGE[key].quantised else key


def kv_stage_bytes(spec: ModelSpec, slots: list[Slot], batch: int, tokens: int, dtype: str) -> Fraction:
    """Cache bytes of `batch` sequences of `tokens` tokens held by the parts of one pipeline stage, in
    kv_cache_dtype(dtype) (a recurrent state kept in fp32 in fp32)."""
    lengths = Lengths(batch, tokens, tokens if spec.encoder_layers else None)
    per = dtype_bytes(kv_cache_dtype(dtype))
    return sum((s.layers * batch * c.values(lengths, s.part.stack) * _cached_bytes(c, per) for s in slots
                if s.part.layered for c in s.part.cached), Fraction(0))  # fmt: skip


def kv_cache_bytes(spec: ModelSpec, batch: int, seq_len: int, dtype: str = "bf16", src_len: int | None = None) -> int:
    """Keys and values cached for `batch` sequences of `seq_len` (and, cross-attention, `src_len`)
    tokens, in kv_cache_dtype(dtype): a sum over the model's cached entries."""
    check_args("kv_cache_bytes", spec=spec, batch=batch, seq_len=seq_len, dtype=dtype, src_len=src_len)
    lengths = Lengths(batch, seq_len, (src_len if src_len is not None else seq_len) if spec.encoder_layers else None)
    per = dtype_bytes(kv_cache_dtype(dtype))
    return nbytes(sum(part.repeat * batch * c.values(lengths, part.stack) * _cached_bytes(c, per)
                      for part in describe(spec) for c in part.cached), 1)  # fmt: skip


def _cached_bytes(c: Cached, per: Fraction) -> Fraction:
    """Bytes per cached value: the cache's dtype, or fp32 for a state kept in fp32 (recurrent states)."""
    return DTYPE_BYTES["fp32"] if c.dtype == "fp32" else per


def kv_cache_bytes_per_token(spec: ModelSpec, dtype: str = "bf16") -> int:
    """Cache per (target) token of one sequence, one source token per target token for an encoder-decoder."""
    return kv_cache_bytes(spec, 1, 1, dtype, 1 if spec.kind == "encoder-decoder" else None)


def attention_mode(spec: ModelSpec, attention: str) -> str:
    """The attention that actually runs: 'flash' (a fused kernel: scores never stored) or 'eager'
    (explicit products: the probabilities stored), by the rule the reference model runs
    (archspec.vocab.attention_runs: soft-caps, sinks and d_head != d_value run eagerly)."""
    if attention not in ATTENTION:
        raise SpecError(f"unknown attention {shown(attention)}; use flash (fused, the default) or eager")
    from archspec.layers import layer_groups

    for stack_layers in (spec.encoder_layers, spec.decoder_layers):
        for group in layer_groups(spec, stack_layers) if stack_layers else ():
            att, standard = group.spec.attention, group.spec.attention.kind == "standard"
            runs = attention_runs(attention, softcap=att.softcap if standard else None, sinks=standard and att.sinks,
                                  d_qk=group.spec.d_head, d_v=group.spec.d_value)  # fmt: skip
            if runs == "eager":
                return "eager"
    return attention


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
    per_value = {"act": e, "mask": Fraction(1 if dropout else 0), "fp32": Fraction(4), "int64": Fraction(8),
                 "bool": Fraction(1), "fp32_copy": Fraction(0 if e == 4 else 4),
                 "fp32_self": Fraction(4 if e == 4 else 0)}  # fmt: skip
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
    kind: str | None = None,
) -> dict[str, int]:
    """Bytes saved by one block of `stack` ('encoder' or 'decoder') of layer kind `kind` (default: the
    kind most of its layers have), by group. `seq` is the stack's own length, `src` the source length
    for cross-attention (the encoder output, which every layer reads, is counted with the first)."""
    layered = [p for p in describe(spec) if p.layered and p.stack.name == stack and p.component != "mtp"]
    if not layered:
        raise SpecError(f"{spec.name} has no {stack}")
    kinds = {p.kind: p.repeat for p in layered}
    if kind is None:
        kind = max(kinds, key=kinds.get)
    elif kind not in kinds:
        raise SpecError(f"{spec.name}'s {stack} has no layers of kind {shown(kind)}; its kinds: {', '.join(kinds)}")
    parts = [p for p in layered if p.kind == kind]
    lengths = Lengths(batch, seq, src) if stack == "decoder" else Lengths(batch, seq, seq)
    attention_mode(spec, attention)  # checks the mode; a layer that always runs explicit products says so itself
    per_stack = saved_bytes([p._replace(repeat=1) for p in parts], lengths, dtype, recompute, dropout, True, attention)
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
    weights_format: str = "bf16"  # the storage of inference_weights_bytes (and of a LoRA's frozen base)
    experts_format: str | None = None
    trainable_params: int = 0
    lora: dict | None = None  # {"rank", "targets", "base_bytes", "adapter_bytes"} when LoRA
    global_batch: int | None = None
    accumulation_steps: int = 1
    offload: str | None = None  # "optimizer": the optimizer states (and fp32 master copy) in host memory
    # '{stack}.{kind}' -> {"layers", "activations_bytes_per_layer", "kv_cache_bytes_per_layer"} (one layer of
    # each kind, the whole batch, before any parallel split)
    kinds: dict[str, dict[str, int]] = field(default_factory=dict)

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
            "weights": self.weights_format,
            "experts": self.experts_format,
            "trainable_params": self.trainable_params,
            "lora": dict(self.lora) if self.lora else None,
            "kinds": {k: dict(v) for k, v in self.kinds.items()},
            "micro_batch": self.batch,
            "global_batch": self.global_batch,
            "accumulation_steps": self.accumulation_steps,
            "offload": self.offload,
            "host_bytes": self.host_bytes,
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
    storage = weights  # the parameter; `weights` below is the training weights' bytes
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
    # each attention says which products it runs (blocks.explicit_attention): the mode asked, per layer
    detail = saved_bytes(describe(spec), lengths, act_dtype, recompute, dropout, attention=attention)
    activations = nbytes(sum(detail.values()), Fraction(1, tensor_parallel))

    w_key = canonical_format(storage) if storage is not None else key
    x_key = canonical_format(experts, "--experts") if experts is not None else None
    if x_key and not moe_specs(spec):
        raise SpecError(f"--experts {x_key}: {spec.name} has no routed experts")
    kv_key = kv_cache_dtype(kv_dtype if kv_dtype is not None else w_key)
    if offload not in (None, "optimizer"):
        raise SpecError(f"unknown offload {shown(offload)}; use optimizer (the optimizer states to host memory)")
    steps = 1
    if global_batch is not None:
        check_int("global_batch", global_batch, "estimate_memory", minimum=1)
        if global_batch % (batch * data_parallel):
            raise SpecError(
                f"global_batch={global_batch} is not a multiple of micro_batch={batch} x data_parallel="
                f"{data_parallel}; gradient accumulation runs a whole number of micro-batches"
            )
        steps = global_batch // (batch * data_parallel)
    inference_weights = stored_weights_bytes(spec, w_key, x_key, tensor_parallel, 1, pipeline_parallel)
    trainable = N
    lora = None
    if lora_rank is not None:
        check_int("lora_rank", lora_rank, "estimate_memory", minimum=1)
        trainable, adapted = lora_params(spec, lora_rank, lora_targets)
        # the frozen base: stored in `weights`, no gradients, no optimizer states (ZeRO-3 shards it too)
        base = math.ceil(Fraction(inference_weights, zero_div["weights"]))
        # the adapters sit with their layers (split by the pipeline) and whole on every tensor-parallel rank
        share = Fraction(trainable, pipeline_parallel)
        adapter = nbytes(share / zero_div["weights"], weights_pp)
        weights, grads = base + adapter, nbytes(share / zero_div["gradients"], grads_pp)
        optim = nbytes(share / zero_div["optimizer"], optim_pp)
        # each adapted matrix keeps its rank-wide A·x for the gradient of B (the base's own saved tensors
        # are counted as in full training: an upper bound, a frozen projection needs not keep its input)
        e_act = dtype_bytes(act_dtype)
        extra = sum(lengths.batch * lengths.rows(rows, st) * lora_rank * n for st, rows, n in adapted)
        detail = {**detail, "lora.adapters": nbytes(extra, e_act)}
        activations = nbytes(sum(detail.values()), Fraction(1, tensor_parallel))
        lora = {"rank": lora_rank, "targets": lora_targets, "base_bytes": base, "adapter_bytes": adapter}

    kv = nbytes(kv_cache_bytes(spec, batch, lengths.target, kv_key, lengths.source), Fraction(1, model_split))
    kinds = layer_kinds_memory(spec, lengths, act_dtype, recompute, dropout, mode, kv_key)
    per_param = float(weights_pp + grads_pp + optim_pp)
    master = "an fp32 master copy and " if mixed and optimizer != "none" else ""
    note = (
        f"{per_param:g} = {float(weights_pp):g} weights + {float(grads_pp):g} gradients"
        f"{' (fp32, the 18-byte convention)' if fp32_grads and mixed else ''} + {float(optim_pp):g} optimizer "
        f"({master}{states} fp32 state{'s' if states != 1 else ''} of {optimizer})"
        + (f"; for the {trainable:,} adapter parameters only, over a frozen base in {w_key}" if lora else "")
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
        kv_cache_dtype=kv_key,
        inference_weights_bytes=inference_weights,
        activations_detail=detail,
        bytes_per_param_training=per_param,
        per_param_note=note,
        parallel={
            "zero_stage": zero_stage,
            "data_parallel": data_parallel,
            "tensor_parallel": tensor_parallel,
            "pipeline_parallel": pipeline_parallel,
        },
        weights_format=w_key,
        experts_format=x_key,
        trainable_params=trainable,
        lora=lora,
        global_batch=global_batch,
        accumulation_steps=steps,
        offload=offload,
        kinds=kinds,
    )


def layer_kinds_memory(spec: ModelSpec, lengths: Lengths, act_dtype: str, recompute: str, dropout: bool,
                       attention: str, kv_dtype: str) -> dict[str, dict[str, int]]:  # fmt: skip
    """One layer of each kind: the activation bytes it saves and the cache it holds, whole batch."""
    per_kv = dtype_bytes(kv_cache_dtype(kv_dtype))
    out: dict[str, dict[str, int]] = {}
    for part in describe(spec):
        if not part.layered:
            continue
        key = f"{part.stack.name}.{part.kind}"
        row = out.setdefault(key, {"layers": part.repeat, "activations_bytes_per_layer": 0,
                                   "kv_cache_bytes_per_layer": 0})  # fmt: skip
        saved = saved_bytes([part._replace(repeat=1)], lengths, act_dtype, recompute, dropout, True, attention)
        row["activations_bytes_per_layer"] += sum(saved.values())
        kv = sum(lengths.batch * c.values(lengths, part.stack) * _cached_bytes(c, per_kv) for c in part.cached)
        row["kv_cache_bytes_per_layer"] += nbytes(kv, 1)
    return out


LORA_GROUPS = {"attention": ("q", "k", "v", "o"), "mlp": ("gate", "up", "down")}
LORA_GROUPS["all"] = LORA_GROUPS["attention"] + LORA_GROUPS["mlp"]
LORA_PROJECTIONS = LORA_GROUPS["all"]


def lora_targets_of(targets: str) -> tuple[str, ...]:
    """'attention' -> ('q', 'k', 'v', 'o'); 'q,v' -> ('q', 'v'): groups (attention, mlp, all) and
    projections (q, k, v, o, gate, up, down), comma-separated."""
    check_text("lora_targets", targets, "lora_params")
    out: list[str] = []
    for word in (w.strip().lower() for w in targets.split(",")):
        names = LORA_GROUPS.get(word, (word,) if word in LORA_PROJECTIONS else None)
        if names is None:
            raise SpecError(
                f"unknown LoRA target {shown(word)}; use {', '.join(LORA_GROUPS)} or projections "
                f"{', '.join(LORA_PROJECTIONS)}, comma-separated"
            )
        out += [n for n in names if n not in out]
    return tuple(out)


def lora_params(spec: ModelSpec, rank: int, targets: str = "all") -> tuple[int, list]:
    """Trainable parameters of rank-`rank` LoRA adapters (Hu et al. 2021) on the `targets` projections:
    r·(d_in + d_out) per adapted matrix (A: r x d_in, B: d_out x r, no bias), as peft adds them.

    The description fuses q, k and v into one `qkv` map; adapters are counted as peft puts them on
    separate q, k and v projections (a LoRA on the fused map would be r·(d + q + k + v), less). `o` is
    the attention output projection; gate, up and down the MLP's, of dense MLPs, shared experts and
    every routed expert (one adapter per expert, as peft on per-expert Linear modules). Embeddings,
    routers and the head are never adapted. Returns (count, [(stack, rows, rank-wide outputs per row)]).
    """
    check_int("rank", rank, "lora_params", minimum=1)
    wanted = lora_targets_of(targets)
    total = 0
    adapted: list = []
    for part in describe(spec):
        if part.component in ("attention", "cross_attention"):
            kind_spec = part.group.spec
            if kind_spec.attention.kind != "standard":
                if any(t in wanted for t in LORA_GROUPS["attention"]):
                    raise SpecError(
                        f"LoRA on {spec.name}'s {kind_spec.attention.kind} attention is not modelled (its projections "
                        "are not q, k, v, o); target mlp projections only"
                    )
                continue
            a = AttentionShape.of(kind_spec)
            cross = part.component == "cross_attention"
            kv_rows = "source" if cross else "tokens"
            maps = {"q": (a.d_model, a.q, "tokens"), "k": (a.d_model, a.k, kv_rows), "v": (a.d_model, a.v, kv_rows),
                    "o": (a.out_in, a.d_model, "tokens")}  # fmt: skip
            for name in wanted:
                if name in maps:
                    n_in, n_out, rows = maps[name]
                    total += part.copies * rank * (n_in + n_out)
                    adapted.append((part.stack, rows, part.repeat))
        elif part.role in ("dense", "expert", "shared_expert") and part.component in ("mlp", "experts",
                                                                                        "shared_experts"):  # fmt: skip
            for e in part.entries:
                if isinstance(e, Linear) and _module(part, e.name) in wanted:
                    total += part.copies * e.copies * rank * (e.n_in + e.n_out)
                    uses = e.per_row if e.copies > 1 else 1
                    adapted.append((part.stack, e.rows, part.repeat * uses))
    return total, adapted


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
# tables and token types stay whole on every rank.
COLUMN_PARALLEL = ("qkv", "q", "kv", "gate", "up", "q_a", "q_b", "kv_a", "kv_b", "router")
ROW_PARALLEL = ("out", "down")


def rank_elements(spec: ModelSpec, shards: int, tensor_parallel: int = 1) -> int:
    """Parameter elements the largest rank holds: each tensor split `tensor_parallel` ways as
    Megatron-LM splits it, then its dimension 0 split `shards` ways as FSDP2 (ZeRO-3) shards it —
    ceil(rows / shards) rows on the first rank, which every rank pads to."""
    total = 0
    for part in describe(spec):  # one copy of each part times its copies: the cost follows the kinds, not the depth
        for entry in part.entries:
            for leaf, shape in entry.tensors():
                module = entry.name.rpartition(".")[2] if entry.name else part.path.rpartition(".")[2]
                shape = list(shape)
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
                total += part.copies * n
    return total


def fits(m: MemoryEstimate, capacity_bytes: int) -> dict[str, bool]:
    """Whether training (weights, gradients, optimizer states, activations) and inference (weights and
    KV cache) fit in `capacity_bytes` per device."""
    return {
        "training": m.training_total_bytes <= capacity_bytes,
        "inference": m.inference_total_bytes <= capacity_bytes,
    }
