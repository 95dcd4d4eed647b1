"""Which accelerators, and how many, hold a model: the fewest devices for inference or training.

For each accelerator and weight dtype, the smallest layout whose per-device memory fits, as
archspec.memory plans it (``estimate_memory``, ``parallel_layout``, ``fits``); nothing here counts
bytes itself.

- inference: weights and the KV cache of `batch` sequences of `seq_len` tokens; tensor parallelism
  over 1, 2, 4 or 8 devices (the degrees that divide the heads, key/value heads and d_ff), then
  pipeline stages when even 8 do not hold it. The fewest devices win; among equals, the least
  pipelining.
- training: weights, gradients, AdamW states and activations of a micro-batch of `batch` sequences,
  in mixed precision (bf16, 16 bytes per parameter) or fp32; ZeRO stage 0 to 3 over data-parallel
  replicas, with tensor parallelism 1 to 8 when the activations or the unsharded states need it. The
  fewest devices win; among equals, the lowest ZeRO stage, then the least tensor parallelism.
- lora: a LoRA fine-tune (``estimate_memory(..., lora_rank=, lora_targets=)``): the frozen base stored
  in `dtype` (bf16, int8, or nf4 for QLoRA), rank-`lora_rank` adapters on `lora_targets` in mixed
  precision with gradients and AdamW states for the adapters alone, activations; laid out as training.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

from archspec.core.errors import SpecError, shown
from archspec.core.records import record, rendered
from archspec.core.vocab import TRAINING_FLAGS, TRAINING_OPTIONS, ZERO_STAGES
from archspec.describe.blocks import describing
from archspec.memory.runtime import Reserve
from archspec.plan.hardware import Accelerator
from archspec.spec.model import ModelSpec

TASKS = ("inference", "training", "lora")
# lora: the frozen base's storage format (archspec.memory.STORAGE); the adapters train in bf16
DTYPES = {"inference": ("bf16", "fp8", "int8", "int4"), "training": ("bf16", "fp32"), "lora": ("bf16", "int8", "nf4")}
LORA_RANK = 16  # the default rank of `archspec fit --task lora` (peft's examples and the QLoRA paper use 8 to 64)
LORA_TARGETS = "all"  # as `archspec memory --lora` adapts by default
TENSOR_PARALLEL = (1, 2, 4, 8)  # one node's NVLink domain, as serving engines and Megatron-LM use it
MAX_DEVICES = 65_536  # beyond this many, a model is reported as not fitting


@dataclass(frozen=True)
class Fit:
    """The fewest devices of one accelerator that hold `name` for `task` with weights in `dtype`;
    `devices` None when even MAX_DEVICES do not."""

    name: str
    accelerator: str
    task: str
    dtype: str
    batch: int
    seq_len: int
    devices: int | None
    tensor_parallel: int | None
    pipeline_parallel: int | None
    data_parallel: int | None
    zero_stage: int | None
    per_device_bytes: int | None
    capacity_bytes: int
    lora_rank: int | None = None
    lora_targets: str | None = None
    usable_bytes: int | None = None  # inference: what the engine's reserve leaves weights and cache of each device
    engine: str | None = None
    # inference: the engine's reserve per device at the layout's tensor-parallel degree (archspec.memory.runtime)
    reserve: Reserve | None = field(default=None, metadata=rendered(convert=lambda r: r and r.to_dict()))
    # inference at a price (archspec.plan.cost): what one device costs an hour, the user's figure, and what this
    # layout's tokens cost at it (None where it does not fit or generates nothing); recorded only with a price
    price_per_hour: Fraction | None = field(default=None, metadata=rendered(hidden=True))
    cost_per_million_generated: float | None = field(default=None, metadata=rendered(hidden=True))
    cost_per_million_prefilled: float | None = field(default=None, metadata=rendered(hidden=True))

    @property
    def layout(self) -> str:
        if self.devices is None:
            return f"no layout up to {MAX_DEVICES:,} devices"
        tp = f"TP {self.tensor_parallel}"
        if self.task == "inference":
            return tp + (f" x PP {self.pipeline_parallel}" if self.pipeline_parallel > 1 else "")
        if self.devices == 1:
            return "one device"
        parts = [tp] if self.tensor_parallel > 1 else []
        parts.append(f"ZeRO {self.zero_stage}")
        if self.data_parallel > 1:
            parts.append(f"DP {self.data_parallel}")
        return ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        out = record(self, derived=(("layout", "devices"),))
        if self.price_per_hour is not None:
            from archspec.plan.cost import exact_number

            out.update(price_per_hour=exact_number(self.price_per_hour),
                       cost_per_million_generated=self.cost_per_million_generated,
                       cost_per_million_prefilled=self.cost_per_million_prefilled)  # fmt: skip
        return out


def _valid_tp(spec: ModelSpec) -> list[int]:
    from archspec.memory import check_split

    out = []
    for tp in TENSOR_PARALLEL:
        try:
            check_split(spec, tp, 1)
        except SpecError:
            continue
        out.append(tp)
    return out


def _stages(spec: ModelSpec, pp: int) -> int:
    """The stages that `pp` fills: each holds ceil(layers / pp) layers (archspec.memory.stage_slots), so a
    degree that would leave stages empty holds what fewer stages hold, on fewer devices."""
    per = -(-spec.n_layers // pp)
    return -(-spec.n_layers // per)


_UNBOUNDED = [0]  # > 0 within unbounded()


@contextmanager
def unbounded() -> Iterator[None]:
    """Within the block, fit searches every layout the plain way: no refusal from the whole model, no
    lower bound on the devices, no refusal from the largest layout, each degree searched from one
    device up by halving. What the tests and benchmarks compare the bounds with."""
    _UNBOUNDED[0] += 1
    try:
        yield
    finally:
        _UNBOUNDED[0] -= 1


def _root(a: int, ea: int, b: int, eb: int, linear: bool) -> int | None:
    """The least integer at or past the zero of excess taken as c + d / n (c + d * n when `linear`) through
    (a, ea) and (b, eb), a < b, in integers however large; None where that line has no positive zero."""
    num, den = (ea * (b - a), ea - eb) if linear else ((ea - eb) * a * b, ea * a - eb * b)
    if den < 0:
        num, den = -num, -den
    if not den:
        return None
    n = (a if linear else 0) + -(-num // den)
    return n if n > 0 else None


def _smallest(lo: int, hi: int, excess: Callable[[int], int], known: Iterable[tuple[int, int]] = (),
              linear: bool = False) -> int | None:  # fmt: skip
    """The smallest n in [lo, hi] with excess(n) <= 0, for excess non-increasing (the bytes a layout of n
    holds beyond a device's capacity); None if none. `known`: (n, excess(n)) already probed, which narrow
    the search. The largest n is probed first, so that a plan none holds is refused by one probe; then
    the answer is bracketed, and each probe is the root of excess taken as c + d / n (bytes spread over n
    devices; c + d * n when `linear`) through the bracket's ends, halving instead when that did not halve
    the bracket. With none known not to fit, the first guess is the root through the two known to fit."""
    if hi < lo:
        return None
    over = dict(known)
    fits = [n for n, e in over.items() if e <= 0 and lo <= n <= hi]
    b = min(fits) if fits else hi
    eb = over[b] = over[b] if b in over else excess(b)
    if eb > 0:
        return None
    # the bracket's lower end: the largest n known not to fit, below lo too (it still gives the slope)
    failed = [n for n, e in over.items() if e > 0 and n < b]
    a = max(failed) if failed else None
    if a is None and b > lo:  # a guess just short of where the two smallest known to fit say it fits
        (n1, e1), (n2, e2) = (sorted((n, e) for n, e in over.items() if e <= 0 and n >= b) + [(0, 0)] * 2)[:2]
        root = _root(n1, e1, n2, e2, linear) if n2 > n1 else None
        if root is not None and lo <= root - 1 < b:
            e = over[root - 1] = excess(root - 1)
            a, b, eb = (root - 1, b, eb) if e > 0 else (None, root - 1, e)
    a = lo if a is None else a
    ea = over[a] if a in over else excess(a)
    if ea <= 0:
        return a
    halve = False
    while b - a > 1 and b > lo:  # excess(a) > 0 >= excess(b); the answer is in max(a + 1, lo) .. b
        m = None if halve else _root(a, ea, b, eb, linear)
        m = min(max((a + b) // 2 if m is None else m, a + 1, lo), b - 1)
        width = b - a
        e = excess(m)
        a, ea, b, eb = (a, ea, m, e) if e <= 0 else (m, e, b, eb)
        halve = not halve and 2 * (b - a) > width
    return b


def _fewest_stages(layers: int, lo: int, hi: int, excess: Callable[[int], int],
                   known: Iterable[tuple[int, int]] = ()) -> int | None:  # fmt: skip
    """The fewest pipeline stages in [lo, hi] with excess(stages) <= 0 (non-increasing), as _smallest finds
    them, searched by k, the layers a stage holds: p stages hold ceil(layers / p) a stage, and the fewest
    stages of at most k layers are ceil(layers / k), so excess moves by a layer's bytes with k, nearly
    linearly, where it stays flat over the many p of one k. `known`: (stages, excess) already probed."""
    if hi < lo:
        return None
    most = -(-layers // lo)  # the layers a stage of lo stages holds; searched as n = most - k

    def stages(n: int) -> int:
        return -(-layers // (most - n))

    by_k = ((most - -(-layers // p), e) for p, e in known)
    n = _smallest(0, most - -(-layers // hi), lambda n: excess(stages(n)), by_k, linear=True)
    return None if n is None else max(lo, stages(n))


def _halving(lo: int, hi: int, excess: Callable[[int], int]) -> int | None:
    """The smallest n in [lo, hi] with excess(n) <= 0 by plain halving (unbounded's search)."""
    if hi < lo or excess(hi) > 0:
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if excess(mid) <= 0 else (mid + 1, hi)
    return lo


def native(acc: Accelerator, weights: str) -> bool:
    """Whether `acc` computes with `weights` natively: an FP8 format (fp8, fp8_block, fp8_row, or a map
    or layout holding one) needs an FP8 matrix path in the hardware table; engines run it elsewhere
    as weight-only FP8 kernels (vLLM's FP8 Marlin), emulated."""
    from archspec.memory.roles import weight_plan

    plan = weight_plan(weights)
    formats = {plan.single} if plan.single else set(plan.roles.values())
    return acc.fp8_tflops is not None or not any(f.startswith("fp8") for f in formats)


def fit(spec: ModelSpec, acc: Accelerator, dtype: str, task: str = "inference", batch: int = 1,
        seq_len: int | None = None, memo: dict | None = None, lora_rank: int | None = None,
        lora_targets: str | None = None, training: dict | None = None, engine: str | None = None,
        memory_fraction: float | None = None, price_per_hour: float | None = None,
        max_batched_tokens: int | None = None, context_reserve: int | None = None) -> Fit:  # fmt: skip
    """The fewest devices of `acc` that hold `spec` for `task` with weights in `dtype` (see _fewest). With
    `price_per_hour` (what one device costs an hour, in your currency; default: the accelerator file's
    `price_per_hour`), an inference fit also carries what its tokens cost on that layout (archspec.plan.cost):
    the request that fills the context, a prompt of seq_len - 1 tokens and the decode step that
    generates the last, as `estimate_inference` times them."""
    # the layouts it tries all start from one description of the spec, kept in `memo` across accelerators
    # and formats with what it holds (each stage's parts, each part's bits)
    carry = None
    if isinstance(memo, dict) and isinstance(spec, ModelSpec):
        if memo.get(_DESCRIBED, (None,))[0] is not spec:
            memo[_DESCRIBED] = (spec, {})
        carry = memo[_DESCRIBED][1]
    with describing(spec, carry):
        return _fit(spec, acc, dtype, task, batch, seq_len, memo, lora_rank, lora_targets, training, engine,
                    memory_fraction, price_per_hour, max_batched_tokens, context_reserve)  # fmt: skip


_DESCRIBED = "described"  # memo's key of the spec it holds a description of, and what that holds


def _fit(spec, acc, dtype, task, batch, seq_len, memo, lora_rank, lora_targets, training, engine,
         memory_fraction, price_per_hour, max_batched_tokens, context_reserve) -> Fit:  # fmt: skip
    from archspec.plan.cost import exact_price

    price = exact_price(price_per_hour)
    if price is not None and task != "inference":
        raise SpecError(f"price_per_hour prices serving (task inference), not {task}; for training, "
                        "training_cost takes it")  # fmt: skip
    serve = dict(engine=engine, memory_fraction=memory_fraction, max_batched_tokens=max_batched_tokens,
                 context_reserve=context_reserve)  # fmt: skip
    f = _fewest(spec, acc, dtype, task, batch, seq_len, memo, lora_rank, lora_targets, training, **serve)
    if task != "inference":
        return f
    from archspec.plan.hardware import accelerator

    acc = accelerator(acc) if isinstance(acc, str) else acc
    price = price if price is not None else exact_price(acc.price_per_hour)
    if price is None:
        return f
    if f.seq_len < 2:
        raise SpecError("a price needs seq_len >= 2: fit prices a prompt of seq_len - 1 tokens and one generated")
    if f.devices is None or spec.kind != "decoder-only":  # nothing to run, or nothing generated
        return replace(f, price_per_hour=price)
    from archspec.plan.inference import estimate_inference

    e = estimate_inference(spec, acc, batch, f.seq_len - 1, 1, f.dtype, tensor_parallel=f.tensor_parallel,
                           pipeline_parallel=f.pipeline_parallel, price_per_hour=price, **serve)  # fmt: skip
    return replace(f, price_per_hour=price, cost_per_million_generated=e.cost.cost_per_million_generated,
                   cost_per_million_prefilled=e.cost.cost_per_million_prefilled)  # fmt: skip


def _fewest(spec: ModelSpec, acc: Accelerator, dtype: str, task: str = "inference", batch: int = 1,
            seq_len: int | None = None, memo: dict | None = None, lora_rank: int | None = None,
            lora_targets: str | None = None, training: dict | None = None, engine: str | None = None,
            memory_fraction: float | None = None, max_batched_tokens: int | None = None,
            context_reserve: int | None = None) -> Fit:  # fmt: skip
    """The fewest devices of `acc` that hold `spec` for `task` with weights in `dtype`. `memo` (a dict
    kept by the caller for one spec, batch and sequence length) remembers the plans of each layout
    across accelerators. `lora_rank` (default LORA_RANK) and `lora_targets` (default LORA_TARGETS)
    are the adapters of task 'lora', and refused for the other tasks. `training`: estimate_memory's
    training options (recompute, attention, optimizer, fp32_grads, dropout, offload) for training and
    lora; a LoRA fine-tune recomputes its activations (gradient checkpointing) unless told otherwise.
    Inference takes any --weights value (a format, a map by role, a layout), and fits weights and cache
    in what the serving `engine` (default vLLM) leaves of each device after its reserve at each
    tensor-parallel degree (archspec.memory.runtime: `memory_fraction`, `max_batched_tokens`,
    `context_reserve` bytes override its defaults)."""
    from archspec.core.checks import check_args, check_text
    from archspec.memory import estimate_memory
    from archspec.plan.hardware import accelerator

    check_args("fit", spec=spec, batch=batch, seq_len=seq_len)
    check_text("task", task, "fit")
    if isinstance(acc, str):  # a name of the table or an accelerator file, as estimate_inference takes
        acc = accelerator(acc)
    elif not isinstance(acc, Accelerator):
        raise TypeError(f"fit: acc must be an Accelerator or an accelerator's name, got {type(acc).__name__} "
                        f"{shown(acc, 60)}")  # fmt: skip
    if memo is not None and not isinstance(memo, dict):
        raise TypeError(f"fit: memo must be a dict or None, got {type(memo).__name__}")
    memo = {} if memo is None else memo
    if task not in TASKS:
        raise SpecError(f"unknown task {shown(task)}; use one of {', '.join(TASKS)}")
    key, plan, lora, tag = _plan(spec, task, dtype, lora_rank, lora_targets, training)
    from archspec.memory.serving import Serving

    serve = (engine, memory_fraction, max_batched_tokens, context_reserve)
    if task != "inference" and any(x is not None for x in serve):
        raise SpecError("engine, memory_fraction, max_batched_tokens and context_reserve are inference's (the "
                        "serving engine's reserve)")  # fmt: skip
    _check_serving(*serve)
    # inference: what the engine's reserve leaves of each device at each tensor-parallel degree (one reserve
    # per accelerator and degree, whatever the weights)
    reserves = memo.get(("reserves", acc, serve)) if task == "inference" else {}
    if reserves is None:
        reserves = {tp: Serving(*serve).reserve(spec, acc, tp) for tp in _valid_tp(spec)}
        memo[("reserves", acc, serve)] = reserves
    cap = {tp: r.usable_bytes for tp, r in reserves.items()} if reserves else acc.memory_bytes
    none = dict(usable_bytes=None, engine=reserves and next(iter(reserves.values())).engine)
    # no device holds less than its share of the whole: a plan that MAX_DEVICES cannot hold between them is
    # refused from one estimate, before any layout is searched
    if (*tag, "whole") not in memo:
        memo[(*tag, "whole")] = estimate_memory(spec, batch, seq_len, **plan)
    whole = memo[(*tag, "whole")]
    most = max(cap.values()) if reserves else cap
    total = whole.inference_total_bytes if task == "inference" else whole.training_total_bytes
    best = None
    if _UNBOUNDED[0] or total <= most * MAX_DEVICES:
        search = _inference_layouts if task == "inference" else _training_layouts
        best = search(spec, memo, tag, plan, batch, seq_len, cap, whole)
    if best is None:
        return Fit(spec.name, acc.name, task, key, batch, whole.seq_len, None, None, None, None, None, None,
                   acc.memory_bytes, **lora, **none)  # fmt: skip
    devices, _, tp, pp, dp, zero, used, T = best
    r = reserves.get(tp)
    return Fit(spec.name, acc.name, task, key, batch, T, devices, tp, pp, dp, zero, used, acc.memory_bytes, **lora,
               usable_bytes=r and r.usable_bytes, engine=r and r.engine, reserve=r)  # fmt: skip


def _plan(spec: ModelSpec, task: str, dtype: str, lora_rank: int | None, lora_targets: str | None,
          training: dict | None) -> tuple[str, dict, dict, tuple]:  # fmt: skip
    """One fit's weights (their key), estimate_memory's options for every layout, the LoRA adapters, and the
    tag its plans are remembered by; the options a task does not take are refused."""
    from archspec.memory import canonical_dtype, canonical_format, lora_params
    from archspec.memory.roles import canonical_weights
    from archspec.memory.storage import DTYPE_BYTES

    # inference of a format that is no computation dtype (fp8_block, a checkpoint's q4_k_m, a map by role):
    # weights stored so, computed in bf16
    if task == "inference":
        key = canonical_weights(dtype)
        stored = key not in DTYPE_BYTES
    else:
        stored = False
        key = canonical_format(dtype, "weight") if task == "lora" else canonical_dtype(dtype)
        if key not in DTYPES[task]:
            raise SpecError(f"{task} plans weights in {', '.join(DTYPES[task])}, not {key}")
    lora: dict[str, Any] = {}
    if task == "lora":
        lora = dict(lora_rank=LORA_RANK if lora_rank is None else lora_rank,
                    lora_targets=LORA_TARGETS if lora_targets is None else lora_targets)  # fmt: skip
        lora_params(spec, lora["lora_rank"], lora["lora_targets"])  # a bad rank or target: refused before any plan
    elif lora_rank is not None or lora_targets is not None:
        raise SpecError(f"lora_rank and lora_targets are the adapters of task lora, not {task}")
    _check_training(training)
    if training and task == "inference":
        raise SpecError(f"{', '.join(training)}: training options, not inference's")
    train = {"recompute": "full"} if task == "lora" else {}
    train |= training or {}
    # the plan of one layout: training's, LoRA's over a frozen base stored in `key`, a stored format's (in bf16)
    plan = dict(dtype="bf16", weights=key, **lora) if lora or stored else dict(dtype=key)
    plan |= train
    return key, plan, lora, (task, key, *lora.values(), *sorted(train.items()))


def _check_serving(engine: Any, *numbers: Any) -> None:
    """The serving settings' types, before they key a memo (their values the reserve checks)."""
    from archspec.memory.runtime import engine as engine_named

    if engine is not None:
        engine_named(engine)  # a name of ENGINES, or a TypeError or SpecError naming it
    for name, value in zip(("memory_fraction", "max_batched_tokens", "context_reserve"), numbers):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise TypeError(f"fit: {name} must be a number or None, got {type(value).__name__} {shown(value, 60)}")


def _check_training(training: Any) -> None:
    """`training` is None or a dict of estimate_memory's TRAINING_OPTIONS, each of its type (a TypeError naming it);
    their values estimate_memory checks."""
    from archspec.core.checks import check_bool, check_text

    if training is None:
        return
    if not isinstance(training, dict):
        raise TypeError(f"fit: training must be a dict of training options ({', '.join(TRAINING_OPTIONS)}) or None, "
                        f"got {type(training).__name__} {shown(training, 60)}")  # fmt: skip
    for name, value in training.items():
        if name not in TRAINING_OPTIONS:
            raise TypeError(
                f"fit: training has no option {shown(name, 60)}; its options: {', '.join(TRAINING_OPTIONS)}"
            )
        if name in TRAINING_FLAGS:
            check_bool(f"training[{name!r}]", value, "fit")
        elif not (name == "offload" and value is None):
            check_text(f"training[{name!r}]", value, "fit")


def _inference_layouts(spec: ModelSpec, memo: dict, tag: tuple, plan: dict, batch: int, seq_len: int | None,
                       caps: dict, whole) -> tuple | None:  # fmt: skip
    """The fewest devices that serve `spec` in caps[tp] bytes each: tensor parallel 1 to 8, then pipeline stages; as
    (devices, tie-breakers..., tp, pp, dp, zero, bytes, seq_len), None when no layout holds it. A degree is
    searched only up to the devices of the best layout so far: more cannot win."""
    from archspec.memory import nbytes, parallel_layout, stored_weights_bytes

    key, best, bounded = tag[1], None, not _UNBOUNDED[0]
    kv = whole.kv_cache_bytes  # the whole cache (one device): each layout's devices hold their share of it

    def per_device(tp: int, pp: int) -> int:
        """Weights and cache on the fullest of tp x pp devices, estimate_memory's inference_total_bytes, without
        the training figures inference does not read."""
        pp = _stages(spec, pp)
        if (key, tp, pp) not in memo:
            lay = parallel_layout(spec, tp * pp, tp, pp)
            weights = stored_weights_bytes(spec, whole.weights_format, None, lay.tensor_parallel, 1, pp)
            memo[key, tp, pp] = weights + nbytes(kv, Fraction(1, tp * pp))
            memo.setdefault(("probed", key, tp), {})[pp] = memo[key, tp, pp]
        return memo[key, tp, pp]

    L = spec.n_layers
    for tp, cap in caps.items():
        top = min(L, MAX_DEVICES // tp)
        if not bounded:
            pp = _halving(1, top, lambda p, tp=tp, cap=cap: per_device(tp, p) - cap)
        else:
            top = min(top, best[0] // tp) if best else top  # more devices than the best cannot win
            fewest = max(1, whole.inference_total_bytes // (cap * tp))  # no device holds less than its share
            known = ((p, b - cap) for p, b in memo.get(("probed", key, tp), {}).items())
            pp = _fewest_stages(L, fewest, top, lambda p, tp=tp, cap=cap: per_device(tp, p) - cap, known)
        if pp is None:
            continue
        pp = _stages(spec, pp)
        cand = (tp * pp, pp, tp, pp, 1, None, per_device(tp, pp), whole.seq_len)
        best = cand if best is None or cand[:3] < best[:3] else best
    return best


def _training_layouts(spec: ModelSpec, memo: dict, tag: tuple, plan: dict, batch: int, seq_len: int | None,
                      cap: int, whole) -> tuple | None:  # fmt: skip
    """The fewest devices that train `spec`: ZeRO stage 0 to 3 over data-parallel replicas, tensor parallel
    1 to 8; as _inference_layouts answers. A tensor-parallel degree whose ZeRO-3 layout on the most devices
    does not hold it is not searched (every stage shards no more than ZeRO-3)."""
    from archspec.core.compiled import full_way
    from archspec.memory import estimate_memory, parallel_layout

    best, bounded = None, not _UNBOUNDED[0]

    def per_device(tp: int, dp: int, zero: int):
        if (*tag, tp, dp, zero) not in memo:
            lay = parallel_layout(spec, tp * dp, tp, 1, zero)
            with full_way():
                memo[(*tag, tp, dp, zero)] = estimate_memory(spec, batch, seq_len, zero_stage=lay.zero_stage,
                                                           data_parallel=lay.data_parallel,
                                                           tensor_parallel=lay.tensor_parallel, **plan)  # fmt: skip
            memo.setdefault(("probed", *tag, tp, zero), {})[dp] = memo[(*tag, tp, dp, zero)].training_total_bytes
        return memo[(*tag, tp, dp, zero)]

    for tp in _valid_tp(spec):
        if bounded and per_device(tp, MAX_DEVICES // tp, 3).training_total_bytes > cap:
            continue
        for zero in ZERO_STAGES:
            hi = 1 if zero == 0 else MAX_DEVICES // tp
            over = lambda d, tp=tp, z=zero: per_device(tp, d, z).training_total_bytes - cap  # noqa: E731
            if not bounded:
                dp = _halving(1, hi, over)
            else:
                hi = min(hi, best[0] // tp) if best else hi  # more devices than the best cannot win
                fewest = max(1, whole.training_total_bytes // (cap * tp))  # no device holds less than its share
                known = ((d, b - cap) for d, b in memo.get(("probed", *tag, tp, zero), {}).items())
                dp = _smallest(fewest, hi, over, known)
            if dp is None:
                continue
            m = per_device(tp, dp, zero)
            z = 0 if tp * dp == 1 else zero  # one device: nothing to shard
            cand = (tp * dp, z, tp, 1, dp, z, m.training_total_bytes, m.seq_len)
            best = cand if best is None or cand[:3] < best[:3] else best
    return best
