"""Inference cost: a roofline estimate of generation by a decoder-only model, on one accelerator or
spread over tensor x expert x pipeline parallel devices.

A request is B sequences of P prompt tokens that each generate G tokens.

- Prefill is taken as compute-bound: the exact forward matmul FLOPs of B sequences of P tokens
  (``count_flops``: a mixture of experts counts its top-k experts, the active FLOPs), spread evenly
  over the tensor x expert parallel devices of a stage, / (peak FLOP/s x ``mfu``), stages one after
  another. The estimate reports whether that holds: prefill's FLOPs per byte of weights read against
  the accelerator's ridge point.
- Decode is taken as memory-bound: each of the G steps reads the weights a step touches and the KV
  cache of the tokens before it, (weights read + KV cache read) / (bandwidth x ``mbu``) on each
  stage, stages one after another (one batch in flight). The cache grows by one token per step, so
  its bytes are averaged over the G steps (P to P + G - 1 cached tokens).
- A mixture of experts: a step reads the routed experts its B tokens touch. With routing assumed
  uniform and independent, each of a layer's E experts is touched by at least one of B tokens (top-k
  each) with probability 1 - (1 - k/E)^B, so a layer reads E·(1 - (1 - k/E)^B) experts on average;
  shared experts, routers, dense layers, attention, embeddings and the head are read every step.
- Parallel layouts: ``tensor_parallel`` t splits every matrix as Megatron-LM does (the training
  planner's column and row splits, archspec.memory); ``expert_parallel`` e spreads each layer's routed
  experts over e devices, which hold the rest of the model tensor-split and serve B/e sequences each
  (data-parallel attention, as expert-parallel serving runs); ``pipeline_parallel`` p cuts the layers
  into p stages. Devices = t x e x p. Communication per step (archspec.plan.collectives: the bytes over the
  interconnect's bandwidth and each collective's latency) is added to the time, not overlapped.
- ``tokens_per_second`` = B x G generated tokens / (prefill + G decode steps).
- ``max_batch`` = the most sequences of P + G tokens whose KV cache, in the serving engine's pages, fits
  on every device beside its weights in what the engine's reserve leaves (archspec.memory.runtime).
- A layout whose weights and cache do not fit has no timings (``fits`` False, timings None).

Every figure is an estimate from the accelerator table (``archspec.plan.hardware``) and the exact
counts; the assumptions travel with it (``InferenceEstimate.assumptions``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import ClassVar

from archspec.core.errors import SpecError
from archspec.core.records import Exact, record, rendered
from archspec.describe.blocks import described
from archspec.memory.parallel import check_layout
from archspec.memory.runtime import Reserve
from archspec.plan.cost import ServingCost, exact_number, exact_price, serving_cost
from archspec.plan.hardware import Accelerator, accelerator
from archspec.plan.routing import touched
from archspec.spec.layers import moe_specs
from archspec.spec.model import ModelSpec


def expected_experts(experts: int, top_k: int, tokens: int) -> float:
    """Distinct experts of one layer that `tokens` tokens, each routed to `top_k` of `experts` uniformly
    and independently, touch on average: E·(1 - (1 - k/E)^B)."""
    return experts * (1 - (1 - top_k / experts) ** tokens)


@dataclass(frozen=True)
class Layout:
    """How the model is spread: tensor x expert x pipeline parallel devices."""

    tensor_parallel: int = 1
    expert_parallel: int = 1
    pipeline_parallel: int = 1

    @property
    def devices(self) -> int:
        return self.tensor_parallel * self.expert_parallel * self.pipeline_parallel


@dataclass(frozen=True, kw_only=True)
class InferenceEstimate:
    """A roofline estimate for one request; times in seconds (floats, None when it does not fit), bytes
    and FLOPs exact ints (per device: the fullest one). Its JSON record is its fields, in this order,
    with the figures to_dict derives."""

    name: str
    accelerator: str
    batch: int
    prompt_len: int
    gen_len: int
    dtype: str  # the weights' storage format
    experts_dtype: str | None = field(metadata=rendered("experts"))
    kv_dtype: str
    layout: Layout = field(metadata=rendered(expand=("tensor_parallel", "expert_parallel", "pipeline_parallel",
                                                     "devices")))  # fmt: skip
    suggestions: tuple[str, ...] = field(default=())
    communication_seconds_per_token: float = field(metadata=rendered(none_unless="fits"))
    # the part of it that is the collectives' fixed latency (archspec.plan.collectives)
    communication_latency_seconds_per_token: float = field(metadata=rendered(none_unless="fits"))
    max_batch: int
    prefill_flops: int
    weights_bytes: int  # on the fullest device
    kv_cache_bytes: int  # on the fullest device: the batch's cache at P + G tokens
    # weights one decode step reads, summed over the stages
    decode_weights_bytes: Fraction = field(metadata=rendered("decode_weights_bytes_per_token", convert=float))
    # mean cache one decode step reads, summed over the stages
    decode_kv_bytes_per_token: Fraction = field(metadata=rendered(hidden=True))
    # routed experts a decode step reads per MoE layer (the whole layer)
    expected_experts: float | None = field(metadata=rendered("expected_experts_per_layer"))
    peak_flops: float
    mfu: float
    bandwidth: float = field(metadata=rendered("bandwidth_bytes_per_second"))  # bytes per second
    # bytes per second per direction
    interconnect: float | None = field(metadata=rendered("interconnect_bytes_per_second"))
    mbu: float
    capacity_bytes: int  # what weights and cache may use of each device: its memory less the engine's reserve
    # the engine's reserve per device, item by item (archspec.memory.runtime)
    reserve: Reserve = field(metadata=rendered(convert=lambda r: r.to_dict()))
    assumptions: tuple[str, ...] = field(default=())
    prefill_communication_seconds: float = field(metadata=rendered(hidden=True))
    # what one device costs an hour, the user's figure (archspec.plan.cost); the costs follow it in the record
    price_per_hour: Fraction | None = field(default=None, metadata=rendered(omit_none=True, convert=exact_number))

    estimate: ClassVar[str] = "roofline: prefill bound by compute, decode bound by memory bandwidth"

    @property
    def weights(self) -> str:
        """The weights' storage format (dtype), under the name of the option that sets it."""
        return self.dtype

    @property
    def fits(self) -> bool:
        """Weights and the batch's KV cache at P + G tokens fit on every device."""
        return self.weights_bytes + self.kv_cache_bytes <= self.capacity_bytes

    @property
    def shortfall_bytes(self) -> int:
        return max(0, self.weights_bytes + self.kv_cache_bytes - self.capacity_bytes)

    @property
    def decode_bytes_per_token(self) -> Fraction:
        """Bytes one decode step reads on one device of each stage: the weights it touches and the mean KV cache."""
        return Exact(self.decode_weights_bytes + self.decode_kv_bytes_per_token)

    @property
    def prefill_seconds(self) -> float | None:
        if not self.fits:
            return None
        tp, ep = self.layout.tensor_parallel, self.layout.expert_parallel
        return self.prefill_flops / (tp * ep * self.peak_flops * self.mfu) + self.prefill_communication_seconds

    @property
    def decode_seconds_per_token(self) -> float | None:
        if not self.fits:
            return None
        return float(self.decode_bytes_per_token) / (self.bandwidth * self.mbu) + self.communication_seconds_per_token

    @property
    def total_seconds(self) -> float | None:
        if not self.fits:
            return None
        return self.prefill_seconds + self.gen_len * self.decode_seconds_per_token

    @property
    def tokens_per_second(self) -> float | None:
        """Generated tokens (B x G) per second of the whole request, prefill included."""
        if not self.fits:
            return None
        return self.batch * self.gen_len / self.total_seconds

    @property
    def prefill_intensity(self) -> float:
        """Prefill FLOPs per byte of weights read (each weight read once), per device."""
        tp, ep, pp = self.layout.tensor_parallel, self.layout.expert_parallel, self.layout.pipeline_parallel
        return self.prefill_flops / (tp * ep * pp) / self.weights_bytes

    @property
    def ridge_intensity(self) -> float:
        """FLOPs per byte above which the accelerator is compute-bound: (peak x mfu) / (bandwidth x mbu)."""
        return (self.peak_flops * self.mfu) / (self.bandwidth * self.mbu)

    @property
    def prefill_compute_bound(self) -> bool:
        return self.prefill_intensity >= self.ridge_intensity

    @property
    def decode_leaves_out(self) -> tuple[str, ...]:
        """What the decode bound does not model, so that an engine reaches a share of it."""
        out = ["kernel efficiency (matrix-vector and attention kernels reach a share of the peak bandwidth: "
               "--mbu)", "the time between steps (kernel launches, scheduling, sampling)",
               "compute within a step (large batches, long contexts)"]  # fmt: skip
        if self.expected_experts is not None:
            out.append("routing skew (experts chosen unevenly: more of them read, the busiest device sets the pace)")
        if self.layout.devices > 1:
            out.append("collectives slower than the published best, and waiting for the slowest device")
        return tuple(out)

    @property
    def cost(self) -> ServingCost | None:
        """What the layout and its tokens cost at price_per_hour (archspec.plan.cost); None without a price."""
        if self.price_per_hour is None:
            return None
        return serving_cost(self.price_per_hour, self.layout.devices, self.batch, self.prompt_len,
                            self.prefill_seconds, self.decode_seconds_per_token)  # fmt: skip

    def to_dict(self) -> dict:
        return self._record() | (self.cost.to_dict() if self.cost else {})

    def _record(self) -> dict:
        return record(self, derived=(
            ("estimate", "name"), ("weights", "dtype"), ("fits", "layout"), ("shortfall_bytes", "layout"),
            ("prefill_seconds", "suggestions"), ("decode_seconds_per_token", "suggestions"),
            ("tokens_per_second", "suggestions"), ("total_seconds", "suggestions"),
            ("decode_bytes_per_token", "kv_cache_bytes", float), ("prefill_compute_bound", "capacity_bytes"),
            ("decode_leaves_out", "assumptions"),
        ))  # fmt: skip


def _stage_weights(spec, slots, fmt, experts, layout, batch: int, cap: int | None = None):
    """(weights every decode step reads, routed-expert weights, the routed-expert weights a decode step
    of `batch` tokens reads) of one device of a stage, in bytes; each MoE kind with its own top_k of E.
    With `cap`: None as soon as the weights are known to be more than `cap` bytes."""
    from archspec.describe.blocks import held
    from archspec.memory.parallel import held_bits, part_bits

    tied = spec.head.kind != "none" and spec.tie_embeddings
    split = (fmt, experts, layout.tensor_parallel, layout.expert_parallel, tied)
    bits = held(spec, ("part bits", *split), dict)  # by part, while describing(spec) holds its parts
    always = routed = read = 0  # in bits, summed as ints where every format has whole bits
    for s in slots:
        if id(s.part) not in bits:
            bits[id(s.part)] = part_bits(s.part, *split)
        b = held_bits(s, bits[id(s.part)])
        if s.part.role == "expert":
            routed += b
            read += b * touched(s.part.group.spec.mlp, batch)
        else:
            always += b
        if cap is not None and always + routed > 8 * cap:  # every slot holds bits >= 0: the sum only grows
            return None
    return always / Fraction(8), routed / Fraction(8), read / Fraction(8)


def _mean_kv(spec, slots, batch_local, prompt_len: int, gen_len: int, kv_key, tp) -> Fraction:
    """The mean cache the G decode steps read (P, P + 1, ..., P + G - 1 cached tokens). The cache is
    linear in its length between the lengths where a window or chunk fills (w - 1 tokens): summed
    exactly segment by segment, each segment the mean of its ends times its steps."""
    first, last = prompt_len, prompt_len + gen_len - 1
    kinks = sorted({c.limit - 1 for s in slots for c in s.part.cached if c.limit and first < c.limit - 1 < last})
    total, lo = Fraction(0), first
    for hi in (*kinks, last):
        if hi < lo:
            continue
        ends = sum(_kv_device(spec, slots, batch_local, t, kv_key, tp) for t in (lo, hi))
        total += Fraction(ends * (hi - lo + 1), 2)
        lo = hi + 1
    return total / gen_len


def _kv_device(spec, slots, batch_local, tokens, kv_key, tp) -> int:
    from archspec.memory import kv_stage_bytes, nbytes

    split = 1 if spec.mixer.kind == "latent" else tp  # a latent cache is whole on every tensor-parallel rank
    return nbytes(kv_stage_bytes(spec, slots, batch_local, tokens, kv_key), Fraction(1, split))


PROMPT_LEN, GEN_LEN = 512, 128  # the defaults of estimate_inference and `archspec inference`


@described  # the layouts it tries all start from one description of the spec
def estimate_inference(
    spec: ModelSpec,
    gpu: str | Accelerator,
    batch: int = 1,
    prompt_len: int = PROMPT_LEN,
    gen_len: int = GEN_LEN,
    dtype: str = "bf16",
    kv_dtype: str | None = None,
    mfu: float = 0.4,
    mbu: float = 1.0,
    experts: str | None = None,
    tensor_parallel: int = 1,
    expert_parallel: int = 1,
    pipeline_parallel: int = 1,
    engine: str | None = None,
    memory_fraction: float | None = None,
    max_batched_tokens: int | None = None,
    context_reserve: int | None = None,
    price_per_hour: float | None = None,
) -> InferenceEstimate:
    """Roofline estimate of generating `gen_len` tokens after a `prompt_len`-token prompt, for `batch`
    sequences on `gpu` (a name from archspec.plan.hardware.ACCELERATORS, or an Accelerator), one device or
    tensor x expert x pipeline parallel ones.

    Weights stored in `dtype` (any format of archspec.memory.STORAGE: fp32 ... nf4, mxfp4, q4_k_m), the
    routed experts in `experts` when given; the KV cache in `kv_dtype` (default: default_kv_dtype of
    `dtype`: bf16 beside fp8, int8 or a weight-only format). `mfu` scales the peak FLOP/s for prefill, `mbu` the peak
    bandwidth for decode; both in (0, 1]. When it does not fit, `suggestions` names the smallest
    tensor-parallel degree and the widest weight format with which it would. Weights and cache fit in
    what the serving `engine` (vllm, the default, sglang, llama.cpp or none) leaves of each device after
    its reserve (archspec.memory.runtime: its memory fraction or `memory_fraction`, the activations of
    its largest prefill chunk or of `max_batched_tokens` tokens, the CUDA context or `context_reserve`
    bytes; `capacity_bytes`, `reserve`), the cache paged as the engine pages it. With `price_per_hour`
    (what one device costs an hour, in your currency; default: the accelerator file's `price_per_hour`),
    the estimate carries the cost per million tokens generated and prefilled (archspec.plan.cost).
    """
    import dataclasses

    from archspec.core.checks import check_args
    from archspec.memory.serving import Serving

    check_args("estimate_inference", spec=spec)
    if not isinstance(gpu, str | Accelerator):
        raise TypeError(f"estimate_inference: gpu must be an Accelerator or an accelerator's name, got "
                        f"{type(gpu).__name__}")  # fmt: skip
    acc = gpu if isinstance(gpu, Accelerator) else accelerator(gpu)
    price = exact_price(price_per_hour if price_per_hour is not None else acc.price_per_hour)
    serving = Serving(engine, memory_fraction, max_batched_tokens, context_reserve)
    e = _estimate(spec, acc, batch, prompt_len, gen_len, dtype, kv_dtype, mfu, mbu, experts, tensor_parallel,
                  expert_parallel, pipeline_parallel, serving)  # fmt: skip
    e = dataclasses.replace(e, price_per_hour=price)
    if e.fits:
        return e
    return dataclasses.replace(e, suggestions=_suggestions(spec, acc, e, kv_dtype, serving))


def _checked(spec, acc, batch, prompt_len, gen_len, mfu, mbu, layout, dtype, experts, kv_dtype):
    """Refuse, by name, a request archspec cannot estimate; (weights' format, experts', cache's)."""
    from archspec.core.checks import check_real
    from archspec.memory import canonical_format, default_kv_dtype
    from archspec.memory.roles import canonical_weights, check_roles

    if spec.kind != "decoder-only":
        raise SpecError(f"{spec.name} is {spec.kind}; the inference estimate models generation by a decoder-only model")
    for what, n in (("batch", batch), ("prompt_len", prompt_len), ("gen_len", gen_len)):
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise SpecError(f"{what} must be a positive whole number, got {n!r}")
    for what, x in (("mfu", mfu), ("mbu", mbu)):
        check_real(what, x, "estimate_inference", at_most=1.0)
    check_layout(spec, layout)
    key = canonical_weights(dtype, "dtype")
    check_roles(spec, key)  # a map by role names only roles the model has
    x_key = canonical_format(experts, "--experts") if experts else None
    if x_key and not moe_specs(spec):
        raise SpecError(f"--experts {x_key}: {spec.name} has no routed experts")
    context = prompt_len + gen_len
    if spec.position.kind == "learned" and context > spec.max_positions:
        raise SpecError(
            f"prompt_len + gen_len = {context} is longer than {spec.name}'s learned position table "
            f"(max_positions={spec.max_positions})"
        )
    if layout.devices > 1 and acc.interconnect_gbs is None:
        raise SpecError(
            f"{acc.name} has no interconnect bandwidth in the accelerator table ({acc.interconnect_source}); "
            "a parallel layout needs one for its communication time"
        )
    return key, x_key, default_kv_dtype(key, kv_dtype)


def _communication(spec, stages, counts, layout, acc, interconnect):
    """(seconds to send `rows` rows of activations per step, the collectives' latency per step, the
    collectives, the link): the tensor-parallel all-reduces, the experts' all-to-all and the stage
    hand-overs over the interconnect's bandwidth, plus each collective's latency (archspec.plan.collectives),
    not overlapped."""
    from archspec.describe.blocks import Pointwise
    from archspec.plan.collectives import LINKS, bandwidth_seconds, collectives, latency_seconds

    tp, ep, pp = layout.tensor_parallel, layout.expert_parallel, layout.pipeline_parallel
    # `counts`: how many stages each of `stages` stands for
    sublayers = sum(s.layers * c * sum(isinstance(e, Pointwise) and e.cost == "residual" for e in s.part.entries)
                    for st, c in zip(stages, counts) for s in st if s.part.layered)  # fmt: skip
    experts = [(s, c) for st, c in zip(stages, counts) for s in st if s.part.role == "expert"]
    # routed rows per token over all MoE layers: each MoE kind's layers times its top_k
    moe_routes = sum(s.layers * c * s.part.group.spec.mlp.top_k for s, c in experts)
    steps = collectives(sublayers, sum(s.layers * c for s, c in experts), tp, ep, pp)
    link = LINKS.get(acc.link) if layout.devices > 1 and acc.link else None
    latency = latency_seconds(link, steps)

    def comm(rows: int) -> float:
        if interconnect is None:
            return 0.0
        return bandwidth_seconds(steps, rows, spec.d_model, moe_routes, tp, ep, interconnect) + latency

    return comm, latency, steps, link


def _estimate(spec, gpu, batch, prompt_len, gen_len, dtype, kv_dtype, mfu, mbu, experts, tensor_parallel,
              expert_parallel, pipeline_parallel, serving=None, only_fits=False) -> InferenceEstimate:  # fmt: skip
    """The estimate of one layout; with `only_fits`, whether it fits (the estimate's `fits`), answered at the
    first stage whose weights and cache are known not to fit (what a search of layouts asks)."""
    from archspec.count.flops import count_flops
    from archspec.describe.blocks import held
    from archspec.memory import STORAGE, distinct_stages, stage_slots
    from archspec.memory.serving import Serving, max_batch, stage
    from archspec.plan.assumptions import assumptions
    from archspec.plan.collectives import latency_note

    acc = gpu if isinstance(gpu, Accelerator) else accelerator(gpu)
    layout = Layout(tensor_parallel, expert_parallel, pipeline_parallel)
    key, x_key, kv_key = _checked(spec, acc, batch, prompt_len, gen_len, mfu, mbu, layout, dtype, experts, kv_dtype)
    mfu, mbu = float(mfu), float(mbu)  # a Fraction or a Decimal as the float the roofline computes in
    context = prompt_len + gen_len
    tp, ep, pp = tensor_parallel, expert_parallel, pipeline_parallel
    interconnect = acc.interconnect_gbs * 1e9 if acc.interconnect_gbs else None
    b_local = -(-batch // ep)  # sequences one expert-parallel rank serves
    serving = serving or Serving()
    res = serving.reserve(spec, acc, tp)

    peak = acc.peak(key if key in STORAGE and STORAGE[key].dtype else "bf16")
    # a stage computed once for all the stages that hold what it holds (archspec.memory.distinct_stages)
    picked = distinct_stages(spec, pp)  # the same for every layout tried with these stages: made once
    stages = held(spec, ("stage_slots", pp), lambda: stage_slots(spec, pp, [s for s, _ in picked]))
    counts = [c for _, c in picked]
    weights = kv_full = 0
    decode_w = decode_kv = Fraction(0)
    devices = []
    for slots, c in zip(stages, counts):
        held_weights = _stage_weights(spec, slots, key, x_key, layout, batch, res.usable_bytes if only_fits else None)
        if held_weights is None:
            return False  # type: ignore[return-value]
        always, routed, read = held_weights
        dev = stage(spec, slots, math.ceil(always + routed), kv_key, res.engine, tp)
        kv = dev.cache_bytes(b_local, context)  # the batch's cache in the engine's pages
        if only_fits:
            if dev.weights + kv > res.usable_bytes:
                return False  # type: ignore[return-value]
            continue
        devices.append(dev)
        if dev.weights + kv > weights + kv_full:
            weights, kv_full = dev.weights, kv
        decode_w += (always + read) * c
        # step i of G reads the cache of the P + i tokens before it (a window or a state caps it): the mean
        # over the G steps, summed exactly
        decode_kv += _mean_kv(spec, slots, b_local, prompt_len, gen_len, kv_key, tp) * c
    if only_fits:
        return True  # type: ignore[return-value]
    comm, latency, steps, link = _communication(spec, stages, counts, layout, acc, interconnect)
    moes = [k.mlp for k in moe_specs(spec)]
    return InferenceEstimate(
        name=spec.name, accelerator=acc.name, batch=batch, prompt_len=prompt_len, gen_len=gen_len, dtype=key,
        experts_dtype=x_key, kv_dtype=kv_key, layout=layout, mfu=mfu, mbu=mbu, peak_flops=peak,
        bandwidth=acc.bandwidth, interconnect=interconnect, capacity_bytes=res.usable_bytes, reserve=res,
        prefill_flops=held(spec, ("prefill", batch, prompt_len), lambda: count_flops(spec, batch, prompt_len)).forward,
        weights_bytes=weights,
        kv_cache_bytes=kv_full,
        decode_weights_bytes=Exact(decode_w),
        decode_kv_bytes_per_token=Exact(decode_kv),
        communication_seconds_per_token=comm(b_local),
        communication_latency_seconds_per_token=latency,
        prefill_communication_seconds=comm(b_local * prompt_len),
        expected_experts=float(moes[0].experts * touched(moes[0], batch)) if moes else None,
        max_batch=max_batch(devices, res.usable_bytes, context, ep),
        assumptions=assumptions(
            spec, acc, key, x_key, kv_key, layout, batch, context, peak, mfu, mbu, res, latency_note(link, steps)
        ),
    )  # fmt: skip


def _suggestions(spec, acc, e: InferenceEstimate, kv_dtype, serving) -> tuple[str, ...]:
    """The smallest --tp, and the widest --weights, with which the same request would fit."""
    from archspec.memory import STORAGE

    lay = e.layout

    def trial(weights: str, tp: int) -> bool:
        try:
            return _estimate(spec, acc, e.batch, e.prompt_len, e.gen_len, weights, kv_dtype, e.mfu, e.mbu,
                             e.experts_dtype, tp, lay.expert_parallel, lay.pipeline_parallel, serving,
                             only_fits=True)  # fmt: skip
        except SpecError:  # a degree the model cannot be split into
            return False

    out = []
    tp = next((t for t in range(lay.tensor_parallel + 1, spec.n_heads + 1) if trial(e.dtype, t)), None)
    if tp:
        out.append(f"--tp {tp}")
    width = STORAGE[e.dtype].bits if e.dtype in STORAGE else Fraction(16)  # a map by role: below 16 bits
    narrower = sorted((n for n, s in STORAGE.items() if s.bits < width), key=lambda n: -STORAGE[n].bits)
    weights = next((n for n in narrower if trial(n, lay.tensor_parallel)), None)
    if weights:
        out.append(f"--weights {weights}")
    return tuple(out)
