"""What the serving engine keeps besides weights and cache: the share of each device's memory it
lets the model's weights and KV cache use (archspec/memory).

vLLM sizes its KV cache so that weights, cache and its profiled activations stay under
gpu_memory_utilization x the device's memory (EngineArgs, default 0.9: docs.vllm.ai, Engine Arguments);
llama.cpp allocates exact buffers and keeps no such share; `none` gives the whole device to weights
and cache, as archspec planned before. The share is settable (`--gpu-memory-utilization`).
"""

from __future__ import annotations

from dataclasses import dataclass

from archspec.core.errors import SpecError, shown


@dataclass(frozen=True)
class Engine:
    name: str
    fraction: float  # the share of each device's memory weights and cache may use
    source: str


ENGINES = {
    e.name: e
    for e in (
        Engine("vllm", 0.9, "vLLM Engine Arguments: --gpu-memory-utilization, the fraction of GPU memory the "
               "model executor uses, default 0.9 (docs.vllm.ai/en/latest/models/engine_args.html)"),
        Engine("llama.cpp", 1.0, "llama.cpp allocates its model, KV cache and compute buffers exactly; no share "
               "held back"),
        Engine("none", 1.0, "no engine: the whole device for weights and cache"),
    )
}  # fmt: skip
DEFAULT_ENGINE = "vllm"


def engine(name: str) -> Engine:
    if name not in ENGINES:
        raise SpecError(f"unknown engine {shown(name)}; use one of {', '.join(ENGINES)}")
    return ENGINES[name]


def usable_bytes(capacity: int, engine_name: str = DEFAULT_ENGINE, fraction: float | None = None) -> int:
    """The bytes of a device of `capacity` bytes that weights and KV cache may use under `engine_name`,
    or under `fraction` when given (in (0, 1])."""
    f = engine(engine_name).fraction if fraction is None else fraction
    if isinstance(f, bool) or not isinstance(f, (int, float)) or not 0 < f <= 1:
        raise SpecError(f"memory fraction must be in (0, 1], got {f!r}")
    return int(capacity * f)
