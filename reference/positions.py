"""Positions: the learned and sinusoidal tables added to the embeddings, rotary embedding of queries
and keys, ALiBi's and T5's biases on the scores.

Shapes: B batch, T length, S key length, d width, nh heads, dk per-head width.
"""

from __future__ import annotations

import math

import torch
from torch import nn

SINUSOID_BASE = 10000.0  # Vaswani et al. 2017, section 3.5


class LearnedPosition(nn.Module):
    """A learned table of max_positions + offset rows, added to the embeddings; position p reads
    row p + offset (OPT, BART and RoBERTa keep 2 rows in front)."""

    component = "position"
    role = "embedding"

    def __init__(self, max_positions: int, offset: int, width: int):
        super().__init__()
        self.max_positions, self.offset = max_positions, offset
        self.weight = nn.Parameter(torch.empty(max_positions + offset, width))

    def forward(self, T: int, start: int = 0) -> torch.Tensor:
        if start + T > self.max_positions:
            raise ValueError(
                f"sequence of {start + T} positions is longer than the learned position table "
                f"(max_positions={self.max_positions})"
            )
        return self.weight[self.offset + start : self.offset + start + T]  # (T, d)


class SinusoidalPosition(nn.Module):
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...): a buffer, no parameters."""

    component = "position"

    def __init__(self, max_positions: int, d_model: int):
        super().__init__()
        self.d_model = d_model
        self.register_buffer("table", self._table(max_positions), persistent=False)

    def _table(self, n: int, device=None) -> torch.Tensor:
        pos = torch.arange(n, dtype=torch.float32, device=device)[:, None]  # (n, 1)
        inv = SINUSOID_BASE ** (-torch.arange(0, self.d_model, 2, dtype=torch.float32, device=device) / self.d_model)
        table = torch.empty(n, self.d_model, device=device)
        table[:, 0::2] = torch.sin(pos * inv)
        table[:, 1::2] = torch.cos(pos * inv)
        return table  # (n, d)

    def reset_buffers(self) -> None:
        self.table = self._table(self.table.shape[0], self.table.device)

    def forward(self, T: int, start: int = 0) -> torch.Tensor:
        if start + T > self.table.shape[0]:  # no table limit: extend on the fly
            return self._table(start + T, self.table.device)[start:]
        return self.table[start : start + T]


class Rotary(nn.Module):
    """Rotary position embedding (Su et al. 2021) on the first `dims` of each head, in LLaMA's
    rotate-half layout or GPT-J's interleaved pairs; frequencies are a buffer. With `pairs` (Gemma 4's
    proportional rotary), `dims` is the whole head and only its first `pairs` pairs of the two halves
    turn, at frequencies base^(-2i/dims); the others have frequency 0 (cos 1, sin 0)."""

    component = "position"

    def __init__(self, dims: int, base: float, interleaved: bool, pairs: int | None = None):
        super().__init__()
        self.dims, self.base, self.interleaved, self.pairs = dims, base, interleaved, pairs
        self.register_buffer("inv_freq", self._inv_freq(), persistent=False)

    def _inv_freq(self, device=None) -> torch.Tensor:
        turned = self.dims if self.pairs is None else 2 * self.pairs
        inv = 1.0 / self.base ** (torch.arange(0, turned, 2, dtype=torch.float32, device=device) / self.dims)
        if self.pairs is None:
            return inv
        return torch.cat((inv, torch.zeros(self.dims // 2 - self.pairs, device=device)))  # (dims/2,)

    def reset_buffers(self) -> None:
        self.inv_freq = self._inv_freq(self.inv_freq.device)

    def forward(self, x: torch.Tensor, start: int = 0) -> torch.Tensor:
        """x: (B, h, T, dk) -> x with its first `dims` rotated by positions start .. start + T - 1."""
        T = x.shape[-2]
        pos = torch.arange(start, start + T, dtype=torch.float32, device=x.device)
        freqs = torch.outer(pos, self.inv_freq.float())  # (T, dims/2)
        rot, rest = x[..., : self.dims], x[..., self.dims :]
        if self.interleaved:  # pairs (x0, x1), (x2, x3), ...
            cos, sin = (
                freqs.cos().repeat_interleave(2, -1).to(x.dtype),
                freqs.sin().repeat_interleave(2, -1).to(x.dtype),
            )
            pairs = rot.unflatten(-1, (-1, 2))
            turned = torch.stack((-pairs[..., 1], pairs[..., 0]), dim=-1).flatten(-2)
        else:  # the two halves
            angles = torch.cat((freqs, freqs), dim=-1)  # (T, dims)
            cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
            x1, x2 = rot.chunk(2, dim=-1)
            turned = torch.cat((-x2, x1), dim=-1)
        rotated = rot * cos + turned * sin
        return torch.cat((rotated, rest), dim=-1) if self.dims < x.shape[-1] else rotated  # no copy when whole


class Alibi(nn.Module):
    """ALiBi (Press et al. 2022): head h adds slope_h * (key position) to its scores, which softmax
    makes a penalty on distance; slopes as BLOOM computes them. No parameters."""

    component = "position"

    def __init__(self, heads: int):
        super().__init__()
        self.heads = heads

    def slopes(self, device) -> torch.Tensor:
        n = 2 ** math.floor(math.log2(self.heads))
        base = 2 ** (-(2 ** -(math.log2(n) - 3)))
        slopes = [base ** (i + 1) for i in range(n)]
        if n < self.heads:
            extra = 2 ** (-(2 ** -(math.log2(2 * n) - 3)))
            slopes += [extra ** (2 * i + 1) for i in range(self.heads - n)]
        return torch.tensor(slopes, device=device)

    def bias(self, T: int, S: int, device, dtype) -> torch.Tensor:
        keys = torch.arange(S, device=device, dtype=torch.float32)
        return (self.slopes(device)[:, None, None] * keys).to(dtype).expand(self.heads, T, S)  # (nh, T, S)


class RelativePosition(nn.Module):
    """T5's relative position bias: a table of buckets x heads, looked up by the bucket of each
    key-query distance (half the buckets exact, half logarithmic up to max_distance). umT5 gives every
    layer's self-attention a table of its own, all looked up by the stack's one bucket index."""

    component = "position"
    role = "embedding"

    def __init__(self, buckets: int, max_distance: int, heads: int, bidirectional: bool):
        super().__init__()
        self.buckets, self.max_distance, self.bidirectional = buckets, max_distance, bidirectional
        self.weight = nn.Parameter(torch.empty(buckets, heads))

    def bucket(self, relative: torch.Tensor) -> torch.Tensor:
        n, out = self.buckets, torch.zeros_like(relative)
        if self.bidirectional:
            n //= 2
            out += (relative > 0).long() * n
            relative = relative.abs()
        else:
            relative = -torch.clamp(relative, max=0)
        exact = n // 2
        large = (
            exact
            + (
                torch.log(relative.float().clamp(min=1) / exact) / math.log(self.max_distance / exact) * (n - exact)
            ).long()
        )
        large = torch.clamp(large, max=n - 1)
        return out + torch.where(relative < exact, relative, large)

    def index(self, T: int, S: int, start: int, device) -> torch.Tensor:
        """The bucket of each query (positions start .. start + T - 1) and key (0 .. S - 1): (T, S)."""
        q = torch.arange(start, start + T, device=device)[:, None]
        k = torch.arange(S, device=device)[None, :]
        return self.bucket(k - q)

    def lookup(self, index: torch.Tensor, dtype) -> torch.Tensor:
        return self.weight[index].permute(2, 0, 1).to(dtype)  # (T, S) -> (nh, T, S)

    def bias(self, T: int, S: int, start: int, device, dtype) -> torch.Tensor:
        return self.lookup(self.index(T, S, start, device), dtype)  # (nh, T, S)


class DisentangledPosition(nn.Module):
    """DeBERTa's relative-position table: 2 · span embeddings d_model wide, and the index of each
    query-key pair's row: the distance i - j, log-bucketed beyond buckets / 2 up to max_distance
    (transformers' make_log_bucket_position), shifted by span and clamped to the table, for the
    content-to-position term; the reversed distance for the position-to-content term."""

    component = "position"
    role = "embedding"

    def __init__(self, buckets: int, max_distance: int, d_model: int):
        super().__init__()
        self.buckets, self.max_distance = buckets, max_distance
        self.span = buckets or max_distance
        self.weight = nn.Parameter(torch.empty(2 * self.span, d_model))

    def distance(self, T: int, device) -> torch.Tensor:
        """(T, T) relative positions i - j, bucketed (int64)."""
        ids = torch.arange(T, device=device)
        rel = ids[:, None] - ids[None, :]
        if self.buckets > 0:
            mid = self.buckets // 2
            sign = torch.sign(rel)
            near = (rel < mid) & (rel > -mid)
            far = torch.where(near, torch.full_like(rel, mid - 1), rel.abs()).float()
            log = torch.ceil(torch.log(far / mid) / math.log((self.max_distance - 1) / mid) * (mid - 1)) + mid
            rel = torch.where(far <= mid, rel.float(), log * sign).long()
        return rel

    def indices(self, T: int, device) -> tuple[torch.Tensor, torch.Tensor]:
        """The table rows of each pair: c2p (query i, key j) and p2c (key i, query j), each (T, T)."""
        rel = self.distance(T, device)
        top = 2 * self.span - 1
        return torch.clamp(rel + self.span, 0, top), torch.clamp(-rel + self.span, 0, top)


class TransformerXLPosition(nn.Module):
    """Transformer-XL's relative encodings (Dai et al. 2019, section 3.3, as its code computes them): for S keys,
    R holds the sinusoids of the distances S - 1, ..., 1, 0 (row c: distance S - 1 - c), [sin | cos] of
    distance / 10000^(2i/d) over the two halves of d_model; no parameters but, when the stack's layers
    share them, the learned u and v (nh, dk). `shift` is the relative shift: for query i (of the last T
    positions) and key j, the row of the pair's distance, T - 1 - i + j (future keys, which the causal mask
    hides, clamped to the last row)."""

    component = "position"
    role = "dense"

    def __init__(self, d_model: int, heads: int, d_head: int, shared: bool):
        super().__init__()
        self.d_model = d_model
        self.u = nn.Parameter(torch.empty(heads, d_head)) if shared else None
        self.v = nn.Parameter(torch.empty(heads, d_head)) if shared else None

    def encodings(self, S: int, device) -> torch.Tensor:
        distance = torch.arange(S - 1, -1, -1, dtype=torch.float32, device=device)  # (S,)
        inv = SINUSOID_BASE ** (-torch.arange(0, self.d_model, 2, dtype=torch.float32, device=device) / self.d_model)
        angles = torch.outer(distance, inv)  # (S, d/2)
        return torch.cat((angles.sin(), angles.cos()), dim=-1)  # (S, d)

    def shift(self, T: int, S: int, device) -> torch.Tensor:
        i = torch.arange(T, device=device)[:, None]
        j = torch.arange(S, device=device)[None, :]
        return (T - 1 - i + j).clamp(max=S - 1)  # (T, S)
