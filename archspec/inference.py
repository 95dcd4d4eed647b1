"""Inference cost on one accelerator: a roofline estimate of generation by a decoder-only model.

A request is B sequences of P prompt tokens that each generate G tokens.

- Prefill is taken as compute-bound: the exact forward matmul FLOPs of B sequences of P tokens
  (``count_flops``) / (peak FLOP/s x ``mfu``). The estimate reports whether that holds: prefill's
  FLOPs per byte of weights read against the accelerator's ridge point.
- Decode is taken as memory-bound: each of the G steps reads every weight once and the whole KV
  cache of the tokens before it, (weights + KV cache read) / (bandwidth x ``mbu``). The cache grows
  by one token per step, so the bytes per step are averaged over the G steps (P to P + G - 1
  cached tokens); compute, communication and kernel launches are not modelled.
- ``tokens_per_second`` = B x G generated tokens / (prefill + G decode steps).
- ``max_batch`` = the most sequences of P + G tokens whose KV cache fits in the accelerator's
  memory beside the weights (activations and framework overhead not counted).

Every figure is an estimate from the accelerator table (``archspec.hardware``) and the exact
counts; the assumptions travel with it (``InferenceEstimate.assumptions``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from archspec.errors import SpecError
from archspec.hardware import Accelerator, accelerator
from archspec.spec import ModelSpec


def kv_bytes(spec: ModelSpec, batch: int, tokens: int, dtype: str) -> int:
    """Keys and values cached for `batch` sequences of `tokens` tokens (decoder-only)."""
    from archspec.memory import kv_cache_bytes

    return kv_cache_bytes(spec, batch, tokens, dtype)


@dataclass(frozen=True)
class InferenceEstimate:
    """A roofline estimate for one request; times in seconds (floats), bytes and FLOPs exact ints."""

    name: str
    accelerator: str
    batch: int
    prompt_len: int
    gen_len: int
    dtype: str
    kv_dtype: str
    mfu: float
    mbu: float
    peak_flops: float
    bandwidth: float  # bytes per second
    capacity_bytes: int
    prefill_flops: int
    weights_bytes: int
    kv_cache_bytes: int  # the batch's cache at P + G tokens
    decode_kv_bytes_per_token: Fraction  # mean cache read by one decode step
    prefill_seconds: float
    decode_seconds_per_token: float
    max_batch: int
    assumptions: tuple[str, ...] = field(default=())

    @property
    def decode_bytes_per_token(self) -> Fraction:
        """Bytes one decode step reads: every weight once and the mean KV cache."""
        return self.weights_bytes + self.decode_kv_bytes_per_token

    @property
    def total_seconds(self) -> float:
        return self.prefill_seconds + self.gen_len * self.decode_seconds_per_token

    @property
    def tokens_per_second(self) -> float:
        """Generated tokens (B x G) per second of the whole request, prefill included."""
        return self.batch * self.gen_len / self.total_seconds

    @property
    def fits(self) -> bool:
        """Weights and the batch's KV cache at P + G tokens fit in the accelerator's memory."""
        return self.weights_bytes + self.kv_cache_bytes <= self.capacity_bytes

    @property
    def prefill_intensity(self) -> float:
        """Prefill FLOPs per byte of weights read (each weight read once)."""
        return self.prefill_flops / self.weights_bytes

    @property
    def ridge_intensity(self) -> float:
        """FLOPs per byte above which the accelerator is compute-bound: (peak x mfu) / (bandwidth x mbu)."""
        return (self.peak_flops * self.mfu) / (self.bandwidth * self.mbu)

    @property
    def prefill_compute_bound(self) -> bool:
        return self.prefill_intensity >= self.ridge_intensity

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "estimate": "roofline: prefill bound by compute, decode bound by memory bandwidth",
            "accelerator": self.accelerator,
            "batch": self.batch,
            "prompt_len": self.prompt_len,
            "gen_len": self.gen_len,
            "dtype": self.dtype,
            "kv_dtype": self.kv_dtype,
            "prefill_seconds": self.prefill_seconds,
            "decode_seconds_per_token": self.decode_seconds_per_token,
            "tokens_per_second": self.tokens_per_second,
            "total_seconds": self.total_seconds,
            "max_batch": self.max_batch,
            "fits": self.fits,
            "prefill_flops": self.prefill_flops,
            "weights_bytes": self.weights_bytes,
            "kv_cache_bytes": self.kv_cache_bytes,
            "decode_bytes_per_token": float(self.decode_bytes_per_token),
            "peak_flops": self.peak_flops,
            "mfu": self.mfu,
            "bandwidth_bytes_per_second": self.bandwidth,
            "mbu": self.mbu,
            "capacity_bytes": self.capacity_bytes,
            "prefill_compute_bound": self.prefill_compute_bound,
            "assumptions": list(self.assumptions),
        }


def max_batch(spec: ModelSpec, tokens: int, dtype: str, weights: int, capacity: int) -> int:
    """The most sequences of `tokens` tokens whose KV cache fits in `capacity` bytes beside `weights`."""
    room = capacity - weights
    if room < 0:
        return 0
    per_sequence = kv_bytes(spec, 1, tokens, dtype)
    b = room // per_sequence
    # kv_bytes rounds up per call (int4), so settle the last step against the function itself
    while b > 0 and kv_bytes(spec, b, tokens, dtype) > room:
        b -= 1
    while kv_bytes(spec, b + 1, tokens, dtype) <= room:
        b += 1
    return b


def estimate_inference(
    spec: ModelSpec,
    gpu: str | Accelerator,
    batch: int = 1,
    prompt_len: int = 512,
    gen_len: int = 128,
    dtype: str = "bf16",
    kv_dtype: str | None = None,
    mfu: float = 0.4,
    mbu: float = 1.0,
) -> InferenceEstimate:
    """Roofline estimate of generating `gen_len` tokens after a `prompt_len`-token prompt, for `batch`
    sequences on one `gpu` (a name from archspec.hardware.ACCELERATORS, or an Accelerator).

    Weights in `dtype`; the KV cache in `kv_dtype` (default: `dtype`, bf16 when `dtype` is int4).
    `mfu` scales the peak FLOP/s for prefill, `mbu` the peak bandwidth for decode; both in (0, 1].
    """
    from archspec.flops import count_flops
    from archspec.memory import canonical_dtype, kv_cache_dtype, weights_bytes

    acc = gpu if isinstance(gpu, Accelerator) else accelerator(gpu)
    if spec.kind != "decoder-only":
        raise SpecError(f"{spec.name} is {spec.kind}; the inference estimate models generation by a decoder-only model")
    for what, n in (("batch", batch), ("prompt_len", prompt_len), ("gen_len", gen_len)):
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise SpecError(f"{what} must be a positive whole number, got {n!r}")
    for what, x in (("mfu", mfu), ("mbu", mbu)):
        if not 0 < x <= 1:
            raise SpecError(f"{what} must be in (0, 1], got {x}")
    key = canonical_dtype(dtype)
    kv_key = kv_cache_dtype(kv_dtype or key)  # the one KV-cache policy: int4 is weight-only
    context = prompt_len + gen_len
    if spec.position.kind == "learned" and context > spec.max_positions:
        raise SpecError(
            f"prompt_len + gen_len = {context} is longer than {spec.name}'s learned position table "
            f"(max_positions={spec.max_positions})"
        )

    peak = acc.peak(key)
    prefill_flops = count_flops(spec, batch, prompt_len).forward
    weights = weights_bytes(spec, key)
    # step i of G reads the cache of the P + i - 1 tokens before it; the cache is linear in its
    # length, so the mean over the G steps is the mean of the first and the last step's cache
    kv_read = Fraction(kv_bytes(spec, batch, prompt_len, kv_key) + kv_bytes(spec, batch, context - 1, kv_key), 2)
    decode_seconds = float(weights + kv_read) / (acc.bandwidth * mbu)
    capacity = acc.memory_bytes
    assumptions = (
        "prefill compute-bound: exact forward matmul FLOPs (full attention score matrix) / "
        f"({acc.title} dense peak {peak / 1e12:g} TFLOP/s "
        f"x mfu {mfu:g})"
        + ("; 8- and 4-bit weights computed at the 16-bit peak" if key in ("fp8", "int8", "int4") else ""),
        f"decode memory-bound: (weights + mean KV cache read) / (bandwidth {acc.bandwidth_gbs:g} GB/s x mbu {mbu:g}) "
        "per step; compute, communication and kernel launches not modelled",
        f"weights in {key}, KV cache in {kv_key}; one accelerator, no tensor or pipeline parallelism",
        f"max_batch: sequences of {context:,} tokens whose KV cache fits in {acc.memory_gib:g} GiB beside the "
        "weights; activations, workspace and fragmentation not counted",
        "tokens_per_second: batch x gen_len generated tokens over prefill + gen_len decode steps",
    )
    return InferenceEstimate(
        name=spec.name,
        accelerator=acc.name,
        batch=batch,
        prompt_len=prompt_len,
        gen_len=gen_len,
        dtype=key,
        kv_dtype=kv_key,
        mfu=mfu,
        mbu=mbu,
        peak_flops=peak,
        bandwidth=acc.bandwidth,
        capacity_bytes=capacity,
        prefill_flops=prefill_flops,
        weights_bytes=weights,
        kv_cache_bytes=kv_bytes(spec, batch, context, kv_key),
        decode_kv_bytes_per_token=kv_read,
        prefill_seconds=prefill_flops / (peak * mfu),
        decode_seconds_per_token=decode_seconds,
        max_batch=max_batch(spec, context, kv_key, weights, capacity),
        assumptions=assumptions,
    )
