"""The KV cache paged as the serving engine pages it, on one device of one pipeline stage (archspec/memory).

Each cached entry of the description (keys and values of full, sliding-window or chunked attention, a
latent cache, a recurrent state) is one kind of layer cache: bytes per token and layer (a state: bytes
per sequence and layer), the tokens it keeps at most, and the layers of the stage that hold it. Keys
and values split over the tensor-parallel devices by key/value heads (a device keeps at least one
head, as vLLM replicates them); a latent cache is whole on every device.

- ``vllm``: blocks of 16 tokens (vllm/v1/core/kv_cache_utils.py, kv_cache_interface.py). One kind of
  layer: a block of every layer holds 16 tokens, and the pool is free // (16 x bytes per token of all
  layers) blocks. Several kinds (a hybrid model): every page has one size, the largest; a smaller
  attention page grows its block (more tokens a page) and a recurrent state's page is padded to it,
  after the attention block has grown until its page holds the state (HybridAttentionMambaModelConfig).
  The layers of each kind are cut into groups of `group_size` layers (the fewest layers of any kind,
  or the most when that is below 1.5 x the fewest), the last group of a kind padded; the pool is
  free // (page x group_size) blocks, each group taking its own blocks for a sequence: full attention
  ceil(T / block), a window ceil((w - 1) / block) + 1 at most, a state one. vLLM reports its capacity
  as blocks // groups x block tokens ("GPU KV cache size") and its concurrency as blocks // blocks per
  sequence ("Maximum concurrency").
- ``sglang``: pages of one token (--page-size 1): capacity free // bytes per token of all layers.
- ``llama.cpp``: a context of n_ctx cells padded to a multiple of 256 per sequence.
- ``none``: bytes as the cache holds them, unpaged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from archspec.memory.cache import cached_bytes
from archspec.memory.storage import dtype_bytes

VLLM_BLOCK = 16
LLAMA_CPP_PAD = 256


@dataclass(frozen=True)
class LayerCache:
    """One kind of layer cache on one device: `token_bytes` per token and layer (or `state_bytes` per
    sequence and layer), at most `keeps` tokens (None: all), held by `layers` layers."""

    layers: int
    token_bytes: int = 0
    state_bytes: int = 0
    keeps: int | None = None

    def sequence_bytes(self, tokens: int) -> int:
        held = tokens if self.keeps is None else min(tokens, self.keeps)
        return self.layers * (self.token_bytes * held + self.state_bytes)


def stage_caches(spec, slots, kv_dtype: str, tp: int = 1) -> list[LayerCache]:
    """The layer caches one device of a stage (its `slots`, archspec.memory.stage_slots) holds, by kind."""
    per = dtype_bytes(kv_dtype)
    kinds: dict[tuple, int] = {}
    for s in slots:
        if not s.part.layered:
            continue
        heads = s.part.group.spec.n_kv_heads if s.part.group is not None else spec.n_kv_heads
        state = 0  # a layer's states (Mamba's conv and SSM states) are one page in vLLM
        for c in s.part.cached:
            if c.rows == "state":
                state += math.ceil(Fraction(c.width) * cached_bytes(c, per) / tp)
                continue
            split = 1 if spec.attention.kind == "latent" else min(tp, heads)
            each = math.ceil(Fraction(c.width) * cached_bytes(c, per) / split)
            key = (each, 0, None if c.limit is None else c.limit - 1)
            kinds[key] = kinds.get(key, 0) + s.layers
        if state:
            kinds[0, state, None] = kinds.get((0, state, None), 0) + s.layers
    return [LayerCache(n, tb, sb, keeps) for (tb, sb, keeps), n in kinds.items()]


@dataclass(frozen=True)
class Paging:
    """A device's layer caches paged by `engine`; bytes and counts per device."""

    engine: str
    caches: tuple[LayerCache, ...]

    def sequence_bytes(self, tokens: int) -> int:
        """The cache one sequence of `tokens` tokens takes, in whole pages."""
        if self.engine == "vllm" and self.caches:
            v = self._vllm()
            return v[0] * v[1] * self._blocks(tokens, v)
        if self.engine == "llama.cpp":
            tokens = -(-tokens // LLAMA_CPP_PAD) * LLAMA_CPP_PAD
        return sum(c.sequence_bytes(tokens) for c in self.caches)

    def max_sequences(self, free: int, tokens: int) -> int:
        """The most sequences of `tokens` tokens whose cache fits in `free` bytes."""
        if free < 0:
            return 0
        if self.engine == "vllm" and self.caches:
            v = self._vllm()
            blocks = self._blocks(tokens, v)
            return free // (v[0] * v[1]) // blocks if blocks else 0
        per = self.sequence_bytes(tokens)
        return free // per if per else 0

    def capacity_tokens(self, free: int) -> int:
        """Tokens the pool holds in `free` bytes, as the engine reports it: vLLM blocks // groups x block
        tokens; otherwise free // bytes per token of every layer (windows and states left out)."""
        if free <= 0:
            return 0
        if self.engine == "vllm" and self.caches:
            page, group, kinds = self._vllm()
            groups = sum(n for _, n, _ in kinds)
            return free // (page * group) // groups * min(b for _, _, b in kinds)
        per = sum(c.layers * c.token_bytes for c in self.caches)
        tokens = free // per if per else 0
        return tokens - tokens % LLAMA_CPP_PAD if self.engine == "llama.cpp" else tokens

    def _vllm(self) -> tuple[int, int, list[tuple[LayerCache, int, int]]]:
        """(page bytes, group size, [(cache, groups, block tokens)]) as vLLM's KV cache manager lays them."""
        attn = [c for c in self.caches if c.token_bytes]
        state = max((c.state_bytes for c in self.caches if c.state_bytes), default=0)
        block = VLLM_BLOCK
        if state and attn:  # the attention block grows until its page holds the state
            block = VLLM_BLOCK * -(-state // (VLLM_BLOCK * max(c.token_bytes for c in attn)))
        page = max([block * c.token_bytes for c in attn] + [state])
        counts = [c.layers for c in self.caches]
        group = min(counts) if max(counts) >= 1.5 * min(counts) else max(counts)
        kinds = []
        for c in self.caches:
            tokens = page // c.token_bytes if c.token_bytes else block  # a smaller page: a larger block
            kinds.append((c, -(-c.layers // group), tokens))
        return page, group, kinds

    def _blocks(self, tokens: int, v) -> int:
        """Blocks one sequence of `tokens` tokens takes across the groups."""
        out = 0
        for c, groups, block in v[2]:
            if c.state_bytes:
                need = 1
            elif c.keeps is None:
                need = -(-tokens // block)
            else:
                need = min(-(-tokens // block), -(-c.keeps // block) + 1)
            out += groups * need
        return out


def paging(spec, slots, kv_dtype: str, engine: str, tp: int = 1) -> Paging:
    return Paging(engine, tuple(stage_caches(spec, slots, kv_dtype, tp)))
