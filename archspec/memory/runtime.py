"""What the serving engine keeps on each device besides weights and KV cache (archspec/memory).

A device of C bytes gives weights and cache C minus a reserve of three items, each with a default
taken from the engine's own code and logs, and each settable:

- the engine's memory fraction f: C x (1 - f) is never used for weights and cache (vLLM's
  ``gpu_memory_utilization``, 0.9; SGLang's ``mem_fraction_static``, from its own formula);
- the activations of the largest prefill chunk (``--max-batched-tokens``): vLLM profiles a forward
  pass of ``max_num_batched_tokens`` tokens and its sampler on ``max_num_seqs`` sequences and
  subtracts the peak inside its fraction; SGLang sizes its fraction for them (they live in the
  C x (1 - f) it holds back); llama.cpp allocates a compute buffer for ``n_ubatch`` tokens;
- the CUDA context, communication buffers and allocator slack (``--context-reserve``): what the
  driver does not report of the device plus the memory the engine uses outside torch's allocator.

The activations of a chunk of N tokens are estimated from the description: per token, the residual
stream and its normed copy (2 d_model) beside what the widest sublayer writes (its matrices' outputs
and a gated product: a gated MLP's gate, up, product and down; a mixture of experts' top-k experts and
shared experts), split over the tensor-parallel devices, in bf16; or, when larger, the sampler after
the forward pass on its rows of the vocabulary in fp32 (logits, vLLM's dummy prompt ids, their sort
with int64 indices, the probabilities).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from archspec.core.errors import SpecError, shown

GiB = 2**30
# What the driver does not report of a device plus what the engine uses outside torch's allocator, as a
# share of the device: vLLM's memory profiles give 0.78 GiB (total_gpu_memory 79.22GiB) + 1.79 GiB
# (non_torch_memory) of an 80 GiB H100 (https://github.com/vllm-project/vllm/pull/10511) and 0.42 GiB
# (23.58GiB) + 0.35 GiB of a 24 GiB RTX 3090 (https://github.com/vllm-project/vllm/issues/10517): 3.2 % of each
CONTEXT = Fraction(32, 1000)
CONTEXT_SOURCE = "3.2 % of the device, as vLLM's memory profiles of an H100 and an RTX 3090 log it"


@dataclass(frozen=True)
class Engine:
    """One serving engine's conventions: its memory fraction (None: SGLang's formula), whether the
    fraction holds the prefill activations inside it ('inside': vLLM subtracts them; 'share': the held
    back share is sized for them; 'added': a compute buffer beside weights and cache; 'none'), its
    context reserve (a share of the device), and its KV page in tokens; each with its source."""

    name: str
    fraction: float | None
    fraction_source: str
    activations: str
    activations_source: str
    context: Fraction
    context_source: str
    page_tokens: int
    page_source: str


ENGINES = {
    e.name: e
    for e in (
        Engine("vllm", 0.9, "vLLM's --gpu-memory-utilization default (docs.vllm.ai, Engine Arguments)",
               "inside", "profiled inside vLLM's fraction; `vllm serve` defaults for the device (vllm/engine/"
               "arg_utils.py, get_batch_defaults)",
               CONTEXT, CONTEXT_SOURCE,
               16, "blocks of 16 tokens (vLLM's CacheConfig.block_size on CUDA)"),
        Engine("sglang", None, "SGLang's --mem-fraction-static default (python/sglang/srt/server_args.py, "
               "_handle_gpu_memory_settings): (memory - reserved) / memory, reserved = 512 MB + 1.5 MB per prefill "
               "token + 2 MB per CUDA-graph batch + tp/8 GB, at least 10 GB above 60 GB",
               "share", "held in the share SGLang's fraction leaves; chunked_prefill_size for the device "
               "(server_args.py)",
               CONTEXT, CONTEXT_SOURCE + "; the driver's share and the CUDA context do not depend on the engine",
               1, "pages of 1 token (SGLang's --page-size default)"),
        Engine("llama.cpp", 1.0, "llama.cpp allocates model, KV cache and compute buffers exactly",
               "added", "llama.cpp's compute buffer for one micro-batch (n_ubatch 512, common/common.h)",
               CONTEXT, CONTEXT_SOURCE + "; the driver's share and the CUDA context do not depend on the engine",
               256, "contexts of n_ctx cells padded to a multiple of 256 (llama.cpp's src/llama-context.cpp)"),
        Engine("none", 1.0, "no engine: the whole device for weights and cache", "none", "no engine",
               Fraction(0), "no engine", 1, "unpaged"),
    )
}  # fmt: skip
DEFAULT_ENGINE = "vllm"


def engine(name: str) -> Engine:
    if not isinstance(name, str):
        raise TypeError(f"engine must be an engine's name ({', '.join(ENGINES)}) or None, got {type(name).__name__} "
                        f"{shown(name, 60)}")  # fmt: skip
    if name not in ENGINES:
        raise SpecError(f"unknown engine {shown(name)}; use one of {', '.join(ENGINES)}")
    return ENGINES[name]


def check_fraction(f: object, what: str = "memory fraction") -> float:
    if isinstance(f, bool) or not isinstance(f, (int, float)) or not 0 < f <= 1:
        raise SpecError(f"{what} must be in (0, 1], got {shown(f, 60)}")
    return float(f)


def usable_bytes(capacity: int, engine_name: str = DEFAULT_ENGINE, fraction: float | None = None) -> int:
    """The bytes of a device of `capacity` bytes inside the engine's fraction (or `fraction`, in (0, 1]):
    the first item of the reserve only (reserve() gives all three)."""
    e = engine(engine_name)
    f = e.fraction if fraction is None else fraction
    f = sglang_fraction(capacity, 1, sglang_chunk(capacity)) if f is None else f
    return int(capacity * check_fraction(f))


def vllm_batch_defaults(capacity: int, accelerator: str) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) of `vllm serve` (vllm/engine/arg_utils.py get_batch_defaults):
    8192 and 1024 on a device of 70 GiB or more that is no A100, else 2048 and 256."""
    big = capacity >= 70 * GiB and "a100" not in accelerator.lower()
    return (8192, 1024) if big else (2048, 256)


def sglang_chunk(capacity: int) -> int:
    """SGLang's default chunked_prefill_size by the device's memory (server_args.py)."""
    mb = capacity / 2**20
    return 2048 if mb < 35 * 1024 else 4096 if mb < 60 * 1024 else 8192 if mb < 160 * 1024 else 16384


def sglang_fraction(capacity: int, tp: int, chunk: int) -> float:
    """SGLang's default mem_fraction_static (ServerArgs._handle_gpu_memory_settings, server_args.py)."""
    mb = capacity / 2**20
    graph_bs = (8 if mb < 20 * 1024 else (24 if tp < 4 else 80) if mb < 35 * 1024
                else (32 if tp < 4 else 160) if mb < 60 * 1024 else (256 if tp < 4 else 512) if mb < 160 * 1024
                else 512)  # fmt: skip
    reserved = 512 + max(chunk, 2048) * 1.5 + graph_bs * 2 + tp / 8 * 1024
    if mb > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    return round((mb - reserved) / mb, 3)


@dataclass(frozen=True)
class Item:
    """One item of the reserve: its bytes per device and why."""

    name: str
    bytes: int
    why: str


@dataclass(frozen=True)
class Reserve:
    """What one device keeps besides weights and cache under `engine`; `usable_bytes` is the rest."""

    engine: str
    capacity_bytes: int
    fraction: float
    max_batched_tokens: int
    items: tuple[Item, ...]
    page_tokens: int

    @property
    def reserved_bytes(self) -> int:
        return sum(i.bytes for i in self.items)

    @property
    def usable_bytes(self) -> int:
        return self.capacity_bytes - self.reserved_bytes

    def to_dict(self) -> dict:
        return {"engine": self.engine, "fraction": self.fraction, "max_batched_tokens": self.max_batched_tokens,
                "page_tokens": self.page_tokens, "reserved_bytes": self.reserved_bytes,
                "usable_bytes": self.usable_bytes,
                "items": [{"name": i.name, "bytes": i.bytes, "why": i.why} for i in self.items]}  # fmt: skip

    def lines(self, human) -> list[str]:
        """One line per item, for people (`human` renders bytes)."""
        return [f"{i.name}: {human(i.bytes)} ({i.why})" for i in self.items]


def widest_sublayer(spec) -> int:
    """Values per token the widest sublayer writes: its matrices' outputs and a gated product beside
    them (the parts at one path and kind together: a mixture of experts' router, routed experts at
    their top-k and shared experts)."""
    from archspec.describe.blocks import describe, held
    from archspec.describe.entries import Linear, Pointwise

    def written(e) -> int:
        if isinstance(e, Linear) and e.rows == "tokens":
            return e.n_out * e.per_row
        return e.width if isinstance(e, Pointwise) and e.cost == "gate" and e.rows == "tokens" else 0

    def widest() -> int:
        widths: dict = {}
        for part in describe(spec):
            if part.layered:
                key = (part.path, part.kind)
                widths[key] = widths.get(key, 0) + sum(written(e) for e in part.entries)
        return max(widths.values(), default=0)

    return held(spec, "widest_sublayer", widest)  # once while describing(spec) holds the spec


# per vocabulary entry of a sampled row in vLLM's profile (https://github.com/vllm-project/vllm/pull/13594: a
# dummy sampler run with top-k, top-p and int64 prompt_token_ids of the logits' shape): fp32 logits 4, the
# prompt ids 8, their sort's fp32 values 4 and int64 indices 8, fp32 probabilities 4
SAMPLER_BYTES = 28


def chunk_activation_bytes(spec, tokens: int, tp: int = 1, sampled_rows: int = 0) -> int:
    """The peak of a forward pass over `tokens` tokens on one of `tp` tensor-parallel devices, in bf16
    (2 d_model for the residual and normed input plus the widest sublayer's outputs / tp, per token), or
    of the sampler after it on `sampled_rows` rows of the vocabulary (SAMPLER_BYTES each), the larger."""
    per_token = 2 * spec.d_model + -(-widest_sublayer(spec) // tp)
    return max(tokens * per_token * 2, sampled_rows * spec.vocab_size * SAMPLER_BYTES)


def _check_size(value: object, what: str, capacity: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < capacity:
        raise SpecError(
            f"{what} must be a whole number of bytes from 0 to the device's {capacity:,}, got {shown(value, 60)}"
        )
    return value


def reserve(spec, acc, engine_name: str | None = None, tp: int = 1, fraction: float | None = None,
            max_batched_tokens: int | None = None, context_bytes: int | None = None,
            max_num_seqs: int | None = None) -> Reserve:  # fmt: skip
    """The reserve of one device of `acc` serving `spec` over `tp` tensor-parallel devices under
    `engine_name` (default vLLM), with the engine's defaults unless `fraction` (in (0, 1]),
    `max_batched_tokens` (the largest prefill chunk), `context_bytes` or (vLLM) `max_num_seqs` (the
    sequences its sampler is profiled on) are given."""
    e = engine(engine_name or DEFAULT_ENGINE)
    cap = acc.memory_bytes
    rows = 0
    if e.name == "vllm":
        chunk, rows = vllm_batch_defaults(cap, acc.name)
        rows = rows if max_num_seqs is None else max_num_seqs
    else:
        chunk = {"sglang": sglang_chunk(cap), "llama.cpp": 512}.get(e.name, 0)
    if max_batched_tokens is not None:
        if isinstance(max_batched_tokens, bool) or not isinstance(max_batched_tokens, int) or max_batched_tokens < 1:
            raise SpecError(f"max_batched_tokens must be a positive whole number, got {shown(max_batched_tokens, 60)}")
        chunk = max_batched_tokens
    given = fraction is not None
    f = check_fraction(fraction if given else e.fraction if e.fraction is not None else sglang_fraction(cap, tp, chunk))
    ctx = int(cap * e.context) if context_bytes is None else _check_size(context_bytes, "context reserve", cap)
    act = chunk_activation_bytes(spec, chunk, tp, rows) if e.activations != "none" else 0
    share = f"{acc.memory_gib:g} GiB x (1 - {f:g}): " + ("--gpu-memory-utilization" if given else e.fraction_source)
    if e.activations == "share":
        act_item = Item("prefill activations", 0, f"{act / GiB:.2f} GiB for a chunk of {chunk:,} tokens, "
                        + e.activations_source)  # fmt: skip
    else:
        what = f"a chunk of {chunk:,} tokens" + (f" or the sampler on {rows:,} sequences, the larger" if rows else "")
        act_item = Item("prefill activations", act, f"{what}; {e.activations_source}")
    items = (Item("engine's memory fraction", cap - int(cap * f), share), act_item,
             Item("CUDA context and allocator slack", ctx, "--context-reserve" if context_bytes is not None
                  else e.context_source))  # fmt: skip
    return Reserve(e.name, cap, f, chunk, items, e.page_tokens)
