"""The reference Transformer, generated from a ModelSpec.

One small module per concept, each tagged with the component of the analytic breakdown it holds
(``component = "attention"`` ...), so measured and analytic counts compare key by key. Attributes
are named after the same components: ``embed``, ``position``, ``token_type``, ``attention``,
``cross_attention``, ``mlp`` (``router``, ``experts``, ``shared``), ``*_norm``, ``pooler``, ``head``.
Every width comes from the shapes of archspec.blocks (AttentionShape, LatentShape, MLPShape,
stack_shapes), the same objects the analytic description is built from.

Shapes: B batch, T target (or only) length, S source/key length, d d_model, nh query heads,
nkv key/value heads, dk per-head query/key width, dv per-head value width, V vocabulary.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from archspec.blocks import AttentionShape, LatentShape, MLPShape, StackShape, stack_shapes
from archspec.errors import SpecError
from archspec.spec import ModelSpec

SINUSOID_BASE = 10000.0  # Vaswani et al. 2017, section 3.5


# ---------------------------------------------------------------- components


class TokenEmbedding(nn.Embedding):
    component = "embed"
    role = "embedding"


class TokenTypeEmbedding(nn.Embedding):
    component = "token_type"
    role = "embedding"


class LayerNorm(nn.LayerNorm):
    component = "norm"


class RMSNorm(nn.RMSNorm):
    component = "norm"


def make_norm(spec: ModelSpec, width: int | None = None, kind: str | None = None, inside: bool = False) -> nn.Module:
    """A norm of the spec's kind and epsilon over d_model (or `width`). `inside` a component (QK-norm,
    latent attention, the masked-LM head) it is untagged, so its parameters count with that component."""
    layernorm = (kind or spec.norm) == "layernorm"
    cls = (nn.LayerNorm if layernorm else nn.RMSNorm) if inside else (LayerNorm if layernorm else RMSNorm)
    return cls(width or spec.d_model, eps=spec.norm_eps)


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
    rotate-half layout or GPT-J's interleaved pairs; frequencies are a buffer."""

    component = "position"

    def __init__(self, dims: int, base: float, interleaved: bool):
        super().__init__()
        self.dims, self.base, self.interleaved = dims, base, interleaved
        self.register_buffer("inv_freq", self._inv_freq(), persistent=False)

    def _inv_freq(self, device=None) -> torch.Tensor:
        return 1.0 / self.base ** (torch.arange(0, self.dims, 2, dtype=torch.float32, device=device) / self.dims)

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
    key-query distance (half the buckets exact, half logarithmic up to max_distance)."""

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

    def bias(self, T: int, S: int, start: int, device, dtype) -> torch.Tensor:
        q = torch.arange(start, start + T, device=device)[:, None]
        k = torch.arange(S, device=device)[None, :]
        return self.weight[self.bucket(k - q)].permute(2, 0, 1).to(dtype)  # (nh, T, S)


# ---------------------------------------------------------------- attention


ATTENTION_MODES = ("flash", "eager")
RECOMPUTE_MODES = ("none", "selective", "full")


def attend(q, k, v, causal: bool, start: int = 0, scale: float | None = None, bias=None, window: int | None = None,
           softcap: float | None = None, gqa: bool = False, mode: str = "flash") -> torch.Tensor:  # fmt: skip
    """softmax(scale · q kᵀ + bias) v over all heads; q (B, nh, T, dk), k (B, nkv, S, dk), v (B, nkv, S, dv).

    The full score matrix is computed (and counted). A causal mask hides the future; `start` keys
    (a cache) precede the T queries; `window` hides keys more than window - 1 positions back;
    `bias` (nh, T, S) is added to the scores; `softcap` caps them as c · tanh(s / c). With `gqa`,
    fewer K/V heads than query heads are shared by groups (grouped-query attention).
    mode 'flash': torch's fused kernel (it keeps its output and the log-sum-exp for backward, not
    the scores); 'eager': explicit products and softmax (autograd keeps the probabilities). No fused
    kernel soft-caps: with `softcap` the products are always explicit.
    """
    T, S = q.shape[-2], k.shape[-2]
    if mode == "flash" and causal and T == S and not window and bias is None and softcap is None:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale, enable_gqa=gqa)
    mask = None
    if (causal and T > 1) or window:
        qpos = torch.arange(S - T, S, device=q.device)[:, None]  # the queries are the last T positions
        kpos = torch.arange(S, device=q.device)[None, :]
        mask = torch.ones(T, S, dtype=torch.bool, device=q.device)
        if causal:
            mask &= kpos <= qpos
        if window:
            mask &= kpos > qpos - window
    if mode == "eager" or softcap is not None:
        return eager_attention(q, k, v, mask, scale, bias, softcap)
    if bias is not None:
        if mask is not None:
            bias = bias.masked_fill(~mask, float("-inf"))
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=scale, enable_gqa=gqa)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, enable_gqa=gqa)


def eager_attention(q, k, v, mask=None, scale: float | None = None, bias=None, softcap: float | None = None):
    """The same attention as explicit steps, scores and probabilities materialised; `mask` (T, S) is
    True where a query may see a key."""
    group = q.shape[1] // k.shape[1]
    if group > 1:  # each K/V head serves `group` consecutive query heads
        k = k.repeat_interleave(group, dim=1)  # (B, nh, S, dk)
        v = v.repeat_interleave(group, dim=1)  # (B, nh, S, dv)
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()  # head-major copies, kept by the products
    scores = (q @ k.transpose(-2, -1)) * (q.shape[-1] ** -0.5 if scale is None else scale)  # (B, nh, T, S)
    if softcap is not None:
        scores = softcap * torch.tanh(scores / softcap)
    if bias is not None:
        scores = scores + bias
    if mask is not None:  # additive: keys a query may not see get -inf
        scores = scores + torch.zeros(mask.shape, dtype=scores.dtype, device=q.device).masked_fill(~mask, -math.inf)
    return scores.softmax(dim=-1) @ v  # (B, nh, T, dv)


class AttentionCore(nn.Module):
    """What the attention modules share: how the core softmax(q kᵀ) v runs.

    `mode` is 'flash' or 'eager' (see attend); `recompute_core` (selective recomputation) keeps
    only q, k, v for backward and runs the core again there (torch.utils.checkpoint).
    Set both through Transformer.set_execution. On the CPU, torch's fused kernel needs
    d_head == d_value; otherwise, in training, 'flash' runs eager attention rather than torch's own
    fallback, so that what autograd keeps is the same at every batch size and dtype (in eval mode
    torch's scaled_dot_product_attention chooses, as FLOP counters expect to see it).
    """

    mode = "flash"
    recompute_core = False

    def core(self, q, k, v, *args, **kwargs) -> torch.Tensor:
        mode = self.mode
        if self.training and mode == "flash" and q.device.type == "cpu" and q.shape[-1] != v.shape[-1]:
            mode = "eager"
        if self.recompute_core and torch.is_grad_enabled():
            return checkpoint(attend, q, k, v, *args, mode=mode, use_reentrant=False, **kwargs)
        return attend(q, k, v, *args, mode=mode, **kwargs)


class SelfAttention(AttentionCore):
    """Multi-head self-attention with grouped-query K/V, independent d_head / d_value, optional
    QK-norm, score scale, soft-capping and a sliding window."""

    component = "attention"

    def __init__(self, spec: ModelSpec, a: AttentionShape, causal: bool, window: int | None):
        super().__init__()
        cfg = spec.attention
        self.causal, self.window, self.scale, self.softcap = causal, window, cfg.scale, cfg.softcap
        self.nh, self.nkv, self.dk, self.dv = a.heads, a.kv_heads, a.d_head, a.d_value
        self.split = (a.q, a.k, a.v)
        self.qkv = nn.Linear(a.d_model, sum(self.split), bias=a.qkv_bias)
        self.q_norm = make_norm(spec, a.d_head, inside=True) if cfg.qk_norm else None
        self.k_norm = make_norm(spec, a.d_head, inside=True) if cfg.qk_norm else None
        self.out = nn.Linear(a.out_in, a.d_model, bias=a.out_bias)

    def forward(self, x, position=None, cache: dict | None = None, bias=None) -> torch.Tensor:
        B, T, _ = x.shape
        q, k, v = self.qkv(x).split(self.split, dim=-1)
        q = q.view(B, T, self.nh, self.dk).transpose(1, 2)  # (B, nh, T, dk)
        k = k.view(B, T, self.nkv, self.dk).transpose(1, 2)  # (B, nkv, T, dk)
        v = v.view(B, T, self.nkv, self.dv).transpose(1, 2)  # (B, nkv, T, dv)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        start = cache["k"].shape[-2] if cache is not None and "k" in cache else 0
        if isinstance(position, Rotary):
            q, k = position(q, start), position(k, start)
        if cache is not None:
            if "k" in cache:
                k = torch.cat((cache["k"], k), dim=-2)  # (B, nkv, start + T, dk)
                v = torch.cat((cache["v"], v), dim=-2)
            cache["k"], cache["v"] = k, v
        y = self.core(q, k, v, self.causal, start, self.scale, bias, self.window, self.softcap, self.nkv != self.nh)
        return self.out(y.transpose(1, 2).reshape(B, T, self.nh * self.dv))


class LatentAttention(AttentionCore):
    """Multi-head latent attention (DeepSeek-V2/V3): queries through q_a -> norm -> q_b (or one q),
    keys and values through kv_a (the latent and one rotary key shared by the heads) -> norm -> kv_b;
    the cache keeps the latent and the rotary key."""

    component = "attention"

    def __init__(self, spec: ModelSpec, s: LatentShape):
        super().__init__()
        self.s, self.scale = s, spec.attention.scale if hasattr(spec.attention, "scale") else None
        if s.q_rank:
            self.q_a = nn.Linear(s.d_model, s.q_rank, bias=s.qkv_bias)
            self.q_norm = make_norm(spec, s.q_rank, inside=True)
            self.q_b = nn.Linear(s.q_rank, s.q, bias=False)
        else:
            self.q = nn.Linear(s.d_model, s.q, bias=False)
        self.kv_a = nn.Linear(s.d_model, s.kv_a, bias=s.qkv_bias)
        self.kv_norm = make_norm(spec, s.kv_rank, inside=True)
        self.kv_b = nn.Linear(s.kv_rank, s.kv_b, bias=False)
        self.out = nn.Linear(s.out_in, s.d_model, bias=s.out_bias)

    def forward(self, x, position=None, cache: dict | None = None, bias=None) -> torch.Tensor:
        s, (B, T, _) = self.s, x.shape
        nope, rope = s.d_head - s.rope_dims, s.rope_dims
        q = self.q_b(self.q_norm(self.q_a(x))) if s.q_rank else self.q(x)
        q = q.view(B, T, s.heads, s.d_head).transpose(1, 2)  # (B, nh, T, dk)
        latent, k_rope = self.kv_a(x).split((s.kv_rank, rope), dim=-1)  # (B, T, kv_rank), (B, T, rope)
        start = cache["latent"].shape[1] if cache is not None and "latent" in cache else 0
        k_rope = position(k_rope[:, None], start)  # (B, 1, T, rope): one rotary key for every head
        if cache is not None:
            if "latent" in cache:
                latent = torch.cat((cache["latent"], latent), dim=1)
                k_rope = torch.cat((cache["k_rope"], k_rope), dim=2)
            cache["latent"], cache["k_rope"] = latent, k_rope
        S = latent.shape[1]
        kv = self.kv_b(self.kv_norm(latent)).view(B, S, s.heads, nope + s.d_value).transpose(1, 2)
        k_nope, v = kv.split((nope, s.d_value), dim=-1)  # (B, nh, S, nope), (B, nh, S, dv)
        q = torch.cat((q[..., :nope], position(q[..., nope:], start)), dim=-1)
        k = torch.cat((k_nope, k_rope.expand(B, s.heads, S, rope)), dim=-1)  # (B, nh, S, dk)
        y = self.core(q, k, v, True, start, self.scale)  # (B, nh, T, dv)
        return self.out(y.transpose(1, 2).reshape(B, T, s.heads * s.d_value))


class CrossAttention(AttentionCore):
    """Decoder queries over the encoder output (memory): keys and values come from the memory."""

    component = "cross_attention"

    def __init__(self, spec: ModelSpec, a: AttentionShape):
        super().__init__()
        self.scale = spec.attention.scale
        self.nh, self.nkv, self.dk, self.dv = a.heads, a.kv_heads, a.d_head, a.d_value
        self.split = (a.k, a.v)
        self.q = nn.Linear(a.d_model, a.q, bias=a.qkv_bias)
        self.kv = nn.Linear(a.d_model, sum(self.split), bias=a.qkv_bias)
        self.out = nn.Linear(a.out_in, a.d_model, bias=a.out_bias)

    def forward(self, x, memory, cache: dict | None = None) -> torch.Tensor:
        B, T, _ = x.shape
        q = self.q(x).view(B, T, self.nh, self.dk).transpose(1, 2)  # (B, nh, T, dk)
        if cache is not None and "k" in cache:  # the memory's keys and values are computed once
            k, v = cache["k"], cache["v"]
        else:
            S = memory.shape[1]
            k, v = self.kv(memory).split(self.split, dim=-1)
            k = k.view(B, S, self.nkv, self.dk).transpose(1, 2)  # (B, nkv, S, dk)
            v = v.view(B, S, self.nkv, self.dv).transpose(1, 2)  # (B, nkv, S, dv)
            if cache is not None:
                cache["k"], cache["v"] = k, v
        y = self.core(q, k, v, causal=False, scale=self.scale, gqa=self.nkv != self.nh)  # (B, nh, T, dv)
        return self.out(y.transpose(1, 2).reshape(B, T, self.nh * self.dv))


# ---------------------------------------------------------------- MLP, experts and blocks


ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu, "silu": F.silu}


class MLP(nn.Module):
    """down(act(up(x))), or for gated kinds down(act(gate(x)) * up(x))."""

    component = "mlp"

    def __init__(self, m: MLPShape):
        super().__init__()
        self.act = ACTIVATIONS[m.pointwise]
        self.gate = nn.Linear(m.d_model, m.d_ff, bias=m.bias) if "gate" in m.inputs else None
        self.up = nn.Linear(m.d_model, m.d_ff, bias=m.bias)
        self.down = nn.Linear(m.d_ff, m.d_model, bias=m.bias)

    def forward(self, x):
        h = self.act(self.gate(x)) * self.up(x) if self.gate is not None else self.act(self.up(x))
        return self.down(h)


class StackedLinear(nn.Module):
    """`copies` linear maps n_in -> n_out in one (copies, n_out, n_in) tensor (the experts)."""

    def __init__(self, copies: int, n_in: int, n_out: int, bias: bool):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(copies, n_out, n_in))
        self.bias = nn.Parameter(torch.empty(copies, n_out)) if bias else None

    def forward(self, x, e: int):
        return F.linear(x, self.weight[e], self.bias[e] if self.bias is not None else None)


class Experts(nn.Module):
    """The routed experts, each an MLP of d_expert; each one runs on the tokens routed to it only."""

    component = "experts"
    role = "expert"

    def __init__(self, m: MLPShape, experts: int):
        super().__init__()
        self.act = ACTIVATIONS[m.pointwise]
        self.gate = StackedLinear(experts, m.d_model, m.d_ff, m.bias) if "gate" in m.inputs else None
        self.up = StackedLinear(experts, m.d_model, m.d_ff, m.bias)
        self.down = StackedLinear(experts, m.d_ff, m.d_model, m.bias)

    def forward(self, x, e: int | slice):
        """Expert e on the rows x (N, d) routed to it; or, for a slice of experts, each on its own rows
        x (E', rows, d) as batched matmuls (the meta device, where only shapes matter)."""
        if isinstance(e, slice):

            def lin(m, h):  # (E', rows, n_in) @ (E', n_in, n_out)
                return torch.bmm(h, m.weight[e].transpose(1, 2))

            h = self.act(lin(self.gate, x)) * lin(self.up, x) if self.gate is not None else self.act(lin(self.up, x))
            return lin(self.down, h)
        h = self.act(self.gate(x, e)) * self.up(x, e) if self.gate is not None else self.act(self.up(x, e))
        return self.down(h, e)


class Router(nn.Linear):
    component = "router"
    role = "router"


class SharedExpert(MLP):
    component = "shared_experts"
    role = "shared_expert"


class SharedGate(nn.Linear):
    component = "shared_experts"
    role = "shared_expert"


class MoE(nn.Module):
    """A router picks top_k experts per token (softmax over the experts, renormalised over the
    top k when `normalize`); their outputs are summed with those weights, beside the shared expert
    (gated by sigmoid(shared_gate(x)) where there is one)."""

    def __init__(self, spec: ModelSpec):
        super().__init__()
        moe = spec.mlp
        self.top_k, self.normalize = moe.top_k, moe.normalize
        self.router = Router(spec.d_model, moe.experts, bias=moe.router_bias)
        self.experts = Experts(MLPShape.of(spec, moe.d_expert), moe.experts)
        self.shared = SharedExpert(MLPShape.of(spec, moe.d_shared)) if moe.d_shared else None
        self.shared_gate = SharedGate(spec.d_model, 1, bias=False) if moe.shared_gate else None

    def forward(self, x):
        B, T, d = x.shape
        flat = x.reshape(B * T, d)  # (N, d)
        if flat.is_meta:  # shapes only: no values to route by, so spread the N·k routed rows evenly
            return self._meta_forward(flat).view(B, T, d)
        probs = self.router(flat).float().softmax(dim=-1)  # (N, E)
        weights, chosen = probs.topk(self.top_k, dim=-1)  # (N, k)
        if self.normalize:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        out = torch.zeros_like(flat)
        for e in range(self.router.out_features):  # each expert on the tokens routed to it
            rows, slot = (chosen == e).nonzero(as_tuple=True)
            if rows.numel():
                y = self.experts(flat[rows], e) * weights[rows, slot, None].to(flat.dtype)
                out = out.index_add(0, rows, y)
        if self.shared is not None:
            shared = self.shared(flat)
            if self.shared_gate is not None:
                shared = torch.sigmoid(self.shared_gate(flat)) * shared
            out = out + shared
        return out.view(B, T, d)

    def _meta_forward(self, flat):
        """On the meta device: the same modules on the same number of rows (N·k routed rows in all,
        which is what the FLOPs depend on), expert e taking N·k // E of them (one more for the first
        N·k mod E experts)."""
        E, routed = self.router.out_features, flat.shape[0] * self.top_k
        self.router(flat)
        out = torch.zeros_like(flat)
        q, extra = divmod(routed, E)
        for rows, experts in ((q + 1, slice(0, extra)), (q, slice(extra, E))):
            if rows and experts.stop > experts.start:
                self.experts(flat.new_empty(experts.stop - experts.start, rows, flat.shape[1]), experts)
        if self.shared is not None:
            shared = self.shared(flat)
            out = out + (torch.sigmoid(self.shared_gate(flat)) * shared if self.shared_gate is not None else shared)
        return out


def sliding_window(spec: ModelSpec, index: int) -> int | None:
    """The window of layer `index`'s self-attention (None: it sees every earlier key): every layer, the
    even ones (Gemma 2: 0, 2, ...) or the odd ones (GPT-Neo), as attention.sliding_layers says."""
    att = spec.attention
    if att.kind != "standard" or not att.sliding_window:
        return None
    layers = att.sliding_layers
    return att.sliding_window if layers == "all" or (layers == "even") == (index % 2 == 0) else None


class Block(nn.Module):
    """Self-attention, cross-attention (decoder with an encoder), MLP, each with a residual and its
    norm(s): pre x + f(N(x)), post N(x + f(x)), sandwich x + N2(f(N1(x))); or, in a parallel block,
    x + attention(N1(x)) + mlp(N2(x)) with N2 = N1 when the norm is shared.

    `recompute_all` (full recomputation): the block keeps only its inputs for backward and runs again
    there (torch.utils.checkpoint); set through Transformer.set_execution.
    """

    recompute_all = False

    def __init__(self, spec: ModelSpec, stack: StackShape, index: int):
        super().__init__()
        self.norm_position = spec.norm_position
        self.parallel = spec.block.kind == "parallel"
        att = spec.attention
        window = sliding_window(spec, index)
        self.attention_norm = make_norm(spec)
        if att.kind == "latent":
            self.attention = LatentAttention(spec, LatentShape.of(spec))
        else:
            self.attention = SelfAttention(spec, AttentionShape.of(spec), stack.causal, window)
        self.attention_post_norm = make_norm(spec) if self.norm_position == "sandwich" else None
        self.cross_attention_norm = make_norm(spec) if stack.cross else None
        self.cross_attention = CrossAttention(spec, AttentionShape.of(spec)) if stack.cross else None
        self.cross_attention_post_norm = make_norm(spec) if stack.cross and self.norm_position == "sandwich" else None
        shared_norm = self.parallel and spec.block.shared_norm
        self.mlp_norm = None if shared_norm else make_norm(spec)
        moe = spec.mlp.kind == "moe" and index >= spec.mlp.dense_layers
        self.mlp = MoE(spec) if moe else MLP(MLPShape.of(spec))
        self.mlp_post_norm = make_norm(spec) if self.norm_position == "sandwich" else None

    def residual(self, x, norm, f, post_norm=None):
        if self.norm_position == "post":
            return norm(x + f(x))
        if self.norm_position == "sandwich":
            return x + post_norm(f(norm(x)))
        return x + f(norm(x))

    def forward(self, x, memory=None, position=None, cache: dict | None = None, bias=None):
        if self.recompute_all and cache is None and torch.is_grad_enabled():
            return checkpoint(self.run, x, memory, position, None, bias, use_reentrant=False)
        return self.run(x, memory, position, cache, bias)

    def run(self, x, memory=None, position=None, cache: dict | None = None, bias=None):
        self_cache = cache["self"] if cache is not None else None
        cross_cache = cache["cross"] if cache is not None else None
        if self.parallel:
            h = self.attention_norm(x)
            m = self.mlp_norm(x) if self.mlp_norm is not None else h
            return x + self.attention(h, position, self_cache, bias) + self.mlp(m)
        x = self.residual(x, self.attention_norm, lambda h: self.attention(h, position, self_cache, bias),
                          self.attention_post_norm)  # fmt: skip
        if self.cross_attention is not None:
            x = self.residual(x, self.cross_attention_norm, lambda h: self.cross_attention(h, memory, cross_cache),
                              self.cross_attention_post_norm)  # fmt: skip
        return self.residual(x, self.mlp_norm, self.mlp, self.mlp_post_norm)


class Stack(nn.Module):
    """Positions, an optional embedding norm, the blocks (one shared block run `layers` times with
    share_layers), an optional final norm."""

    def __init__(self, spec: ModelSpec, stack: StackShape):
        super().__init__()
        p, e = spec.position, spec.d_embed
        self.n_layers = stack.layers
        self.position = {
            "learned": lambda: LearnedPosition(spec.max_positions, p.offset, e),
            "sinusoidal": lambda: SinusoidalPosition(spec.max_positions, e),
            "rotary": lambda: Rotary(spec.rotary_dims, p.base, p.interleaved),
            "alibi": lambda: Alibi(spec.n_heads),
            "relative": lambda: RelativePosition(p.buckets, p.max_distance, spec.n_heads, not stack.causal),
            "none": lambda: None,
        }[p.kind]()
        if spec.attention.kind == "latent":  # the rotary part of each head only
            self.position = Rotary(spec.attention.rope_dims, p.base, p.interleaved)
        self.embedding_norm = make_norm(spec, e) if spec.embedding_norm else None
        copies = 1 if spec.share_layers else stack.layers
        self.layers = nn.ModuleList(Block(spec, stack, i) for i in range(copies))
        self.final_norm = make_norm(spec) if spec.final_norm else None

    def embed_positions(self, x, start: int = 0):
        """x: (B, T, d_embed) summed embeddings -> with additive positions and the embedding norm."""
        if isinstance(self.position, (LearnedPosition, SinusoidalPosition)):
            x = x + self.position(x.shape[1], start).to(x.dtype)
        return self.embedding_norm(x) if self.embedding_norm is not None else x

    def forward(self, x, memory=None, cache: list | None = None, start: int = 0):
        """x: (B, T, d) embedded input -> (B, T, d)."""
        T = x.shape[1]
        bias = None
        if isinstance(self.position, Alibi):
            bias = self.position.bias(T, start + T, x.device, x.dtype)
        elif isinstance(self.position, RelativePosition):
            bias = self.position.bias(T, start + T, start, x.device, x.dtype)
        for i in range(self.n_layers):
            layer = self.layers[i if len(self.layers) > 1 else 0]
            x = layer(x, memory, self.position, cache[i] if cache is not None else None, bias)
        return self.final_norm(x) if self.final_norm is not None else x


class Head(nn.Module):
    """The output projection d -> V (with an optional bias, an input scale and a logit soft-cap);
    with tied embeddings its weight is the token embedding."""

    component = "head"
    role = "head"

    def __init__(self, spec: ModelSpec):
        super().__init__()
        h = spec.head
        self.scale, self.softcap = h.scale, h.softcap
        self.weight = nn.Parameter(torch.empty(spec.vocab_size, spec.d_model))
        self.bias = nn.Parameter(torch.empty(spec.vocab_size)) if h.bias else None

    def forward(self, x):
        logits = F.linear(x * self.scale if self.scale != 1.0 else x, self.weight, self.bias)  # (B, T, V)
        return self.softcap * torch.tanh(logits / self.softcap) if self.softcap else logits


class MLMHead(nn.Module):
    """BERT's masked-LM head: LayerNorm(act(dense(x))) @ token tableᵀ + bias."""

    component = "head"
    role = "head"

    def __init__(self, spec: ModelSpec):
        super().__init__()
        e = spec.d_embed
        self.dense = nn.Linear(spec.d_model, e)
        self.act = ACTIVATIONS[MLPShape.of(spec).pointwise]
        self.norm = make_norm(spec, e, "layernorm", inside=True)
        self.weight = nn.Parameter(torch.empty(spec.vocab_size, e))
        self.bias = nn.Parameter(torch.empty(spec.vocab_size))

    def forward(self, x):
        return F.linear(self.norm(self.act(self.dense(x))), self.weight, self.bias)  # (B, T, V)


class EmbeddingProjection(nn.Linear):
    """ALBERT: the factorised embedding's d_embed -> d_model map."""

    component = "embed"


class Pooler(nn.Module):
    """tanh(W h[:, 0] + b): BERT's pooled first token."""

    component = "pooler"

    def __init__(self, d_model: int):
        super().__init__()
        self.dense = nn.Linear(d_model, d_model)

    def forward(self, h):
        return torch.tanh(self.dense(h[:, 0]))  # (B, d)


# ---------------------------------------------------------------- the model


class Transformer(nn.Module):
    """Decoder-only, encoder-only or encoder-decoder, as the spec's layer counts say.

    - decoder-only and encoder-only: ``model(tokens) -> logits (B, T, V)``
    - encoder-decoder: ``model(src, tgt) -> logits (B, T, V)``
    - with ``head = "none"``: the last hidden states (B, T, d) instead of logits
    """

    def __init__(self, spec: ModelSpec):
        super().__init__()
        self.spec = spec
        d, V, e = spec.d_model, spec.vocab_size, spec.d_embed
        self.kind = spec.kind
        self.embed = TokenEmbedding(V, e)
        untied_pair = self.kind == "encoder-decoder" and not spec.share_embeddings
        self.target_embed = TokenEmbedding(V, e) if untied_pair else None
        self.token_type = TokenTypeEmbedding(spec.type_vocab_size, e) if spec.type_vocab_size else None
        self.embed_proj = EmbeddingProjection(e, d) if e != d else None
        # Vaswani et al. 2017, 3.4 (and Gemma): embeddings multiplied by sqrt(d_model)
        self.embed_scale = math.sqrt(d) if spec.embedding_scale == "sqrt_d_model" else 1.0
        stacks = {s.name: Stack(spec, s) for s in stack_shapes(spec)}
        self.encoder = stacks.get("encoder")
        self.decoder = stacks.get("decoder")
        self.pooler = Pooler(d) if spec.pooler else None
        self.head = {"lm": Head, "mlm": MLMHead, "none": lambda s: None}[spec.head.kind](spec)
        self.tie_weights()
        self.attention_mode, self.recompute = "flash", "none"

    def set_execution(self, attention: str | None = None, recompute: str | None = None) -> Transformer:
        """How forward runs, weights and spec unchanged (returns the model).

        attention: 'flash' (torch's fused kernel) or 'eager' (explicit softmax, probabilities saved).
        recompute: 'none'; 'selective' (the attention core runs again in backward); 'full' (every
        block runs again in backward, keeping only its inputs). Recomputation applies while autograd
        records (training), never with a cache.
        """
        attention = self.attention_mode if attention is None else attention
        recompute = self.recompute if recompute is None else recompute
        if attention not in ATTENTION_MODES:
            raise SpecError(f"unknown attention {attention!r}; use one of {', '.join(ATTENTION_MODES)}")
        if recompute not in RECOMPUTE_MODES:
            raise SpecError(f"unknown recompute {recompute!r}; use one of {', '.join(RECOMPUTE_MODES)}")
        for module in self.modules():
            if isinstance(module, AttentionCore):
                module.mode, module.recompute_core = attention, recompute == "selective"
            elif isinstance(module, Block):
                module.recompute_all = recompute == "full"
        self.attention_mode, self.recompute = attention, recompute
        return self

    def tied(self) -> dict[str, str]:
        """Parameters that are another module's tensor, as the spec ties them: {path: owner's path}.
        With tie_embeddings, the output head's weight is the token embedding."""
        return {"head.weight": "embed.weight"} if self.spec.tie_embeddings and self.head is not None else {}

    def tie_weights(self) -> None:
        """Tie what `tied` names. Moving a model off the meta device (`to_empty`) gives every module a
        tensor of its own, so materialize() ties again."""
        for path, owner in self.tied().items():
            module, _, name = path.rpartition(".")
            setattr(self.get_submodule(module), name, self.get_parameter(owner))

    # -- pieces

    def _check_tokens(self, tokens: torch.Tensor, what: str, rows: int | None = None) -> None:
        """Token ids (B, T) in [0, rows) (default: vocab_size), T >= 1; values are checked off the meta device."""
        rows = self.spec.vocab_size if rows is None else rows
        if not isinstance(tokens, torch.Tensor):
            raise TypeError(f"{what} must be a tensor of token ids of shape (B, T), got {type(tokens).__name__}")
        if tokens.dim() != 2:
            raise ValueError(f"{what} must have shape (B, T), got {tuple(tokens.shape)}")
        if tokens.dtype not in (torch.int64, torch.int32, torch.int16, torch.uint8):
            raise TypeError(f"{what} must hold integer token ids, got dtype {tokens.dtype}")
        if tokens.shape[1] == 0 or tokens.shape[0] == 0:
            raise ValueError(f"{what} is empty (shape {tuple(tokens.shape)}); give at least one sequence of one token")
        if not tokens.is_meta:
            low, high = int(tokens.min()), int(tokens.max())
            if low < 0 or high >= rows:
                raise ValueError(f"{what} holds ids from {low} to {high}; this model's ids run from 0 to {rows - 1}")
        if tokens.device != self.embed.weight.device and not self.embed.weight.is_meta:
            raise ValueError(f"{what} is on {tokens.device}, the model on {self.embed.weight.device}")

    def _check_cache(self, cache, batch: int) -> None:
        """A cache from new_cache() of this model, filled (if at all) for the same batch."""
        n = self.decoder.n_layers if self.decoder is not None else 0
        if self.decoder is None:
            raise ValueError("an encoder-only model has no decoder to cache")
        if (
            not isinstance(cache, list)
            or len(cache) != n
            or not all(
                isinstance(c, dict) and set(c) == {"self", "cross"} and all(isinstance(v, dict) for v in c.values())
                for c in cache
            )
        ):
            raise TypeError(
                f"cache must come from this model's new_cache(): a list of {n} {{'self': {{}}, 'cross': {{}}}}"
            )
        held = [t for part in cache[0].values() for t in part.values()]
        if held and (not isinstance(held[0], torch.Tensor) or held[0].shape[0] != batch):
            raise ValueError(f"the cache holds a batch of {held[0].shape[0]} sequences, the input {batch}")
        for i, (layer, entry) in enumerate(zip(self.decoder.layers, cache)):  # a cache of another model
            want = _cache_shapes(layer)
            for part, tensors in entry.items():
                for key, t in tensors.items():
                    shape, expected = _shape_of(t), want.get(part, {}).get(key)
                    if not _fits(shape, expected):
                        shown = (
                            "nothing" if expected is None else "(" + ", ".join(str(d or "*") for d in expected) + ")"
                        )
                        raise SpecError(
                            f"the cache was made by another model: layer {i} {part}-attention {key!r} has shape "
                            f"{shape}, this model caches {shown} there (* = batch or length); use its new_cache()"
                        )

    def _embed(self, tokens, embed: nn.Embedding, stack: Stack, token_types=None, first_stack=True, start=0):
        x = embed(tokens) * self.embed_scale if self.embed_scale != 1.0 else embed(tokens)
        if token_types is not None:
            if self.token_type is None or not first_stack:
                raise ValueError("token_types given, but this model has no token-type table (type_vocab_size=0)")
            self._check_tokens(token_types, "token_types", self.spec.type_vocab_size)
            if token_types.shape != tokens.shape:
                raise ValueError(f"token_types has shape {tuple(token_types.shape)}, the tokens {tuple(tokens.shape)}")
        if self.token_type is not None and first_stack:
            if token_types is None:
                token_types = torch.zeros_like(tokens)
            x = x + self.token_type(token_types)
        x = stack.embed_positions(x, start)
        return self.embed_proj(x) if self.embed_proj is not None else x  # (B, T, d)

    def encode(self, src: torch.Tensor, token_types: torch.Tensor | None = None) -> torch.Tensor:
        """The encoder's output (B, S, d)."""
        self._check_tokens(src, "src" if self.kind == "encoder-decoder" else "tokens")
        return self.encoder(self._embed(src, self.embed, self.encoder, token_types))

    def decode(self, tgt, memory=None, cache=None, token_types=None) -> torch.Tensor:
        """The decoder's output (B, T, d); `cache` (see new_cache) holds keys and values of earlier steps."""
        self._check_tokens(tgt, "tgt" if self.kind == "encoder-decoder" else "tokens")
        if cache is not None:
            self._check_cache(cache, tgt.shape[0])
        if memory is not None and memory.shape[0] != tgt.shape[0]:
            raise ValueError(f"src has a batch of {memory.shape[0]} sequences, tgt {tgt.shape[0]}")
        embed = self.target_embed if self.target_embed is not None else self.embed
        start = cache_length(cache) if cache is not None else 0
        x = self._embed(tgt, embed, self.decoder, token_types, first_stack=self.encoder is None, start=start)
        return self.decoder(x, memory, cache, start)

    def hidden_states(self, *inputs, token_types=None, cache=None) -> torch.Tensor:
        """The last stack's output (B, T, d), before the output head."""
        if self.kind == "encoder-decoder":
            if len(inputs) != 2:
                raise TypeError(f"an encoder-decoder model takes model(src, tgt): two token tensors, got {len(inputs)}")
            src, tgt = inputs
            both = isinstance(src, torch.Tensor) and isinstance(tgt, torch.Tensor) and src.dim() == tgt.dim() == 2
            if both and src.shape[0] != tgt.shape[0]:
                raise ValueError(f"src has a batch of {src.shape[0]} sequences, tgt {tgt.shape[0]}")
            return self.decode(tgt, self.encode(src), cache)
        if len(inputs) != 1:
            raise TypeError(f"a {self.kind} model takes model(tokens): one token tensor, got {len(inputs)}")
        if self.kind == "encoder-only":
            return self.encode(inputs[0], token_types)
        return self.decode(inputs[0], cache=cache, token_types=token_types)

    def pool(self, hidden: torch.Tensor) -> torch.Tensor:
        if self.pooler is None:
            raise ValueError("this spec has no pooler (pooler=false)")
        if not isinstance(hidden, torch.Tensor) or hidden.dim() != 3 or hidden.shape[1] == 0:
            raise ValueError("pool() takes hidden states (B, T, d) with at least one position")
        return self.pooler(hidden)

    def forward(self, *inputs, token_types=None, cache=None, pool: bool = False):
        """Logits (B, T, V); hidden states (B, T, d) for a spec without a head (head = "none").
        With `pool`, also the pooler's output (B, d), as BertModel's forward returns both."""
        hidden = self.hidden_states(*inputs, token_types=token_types, cache=cache)
        out = self.head(hidden) if self.head is not None else hidden
        return (out, self.pool(hidden)) if pool else out

    def new_cache(self) -> list[dict]:
        """An empty key/value cache for incremental decoding: one {'self': {}, 'cross': {}} per decoder layer."""
        if self.decoder is None:
            raise ValueError("an encoder-only model has no decoder to cache")
        return [{"self": {}, "cross": {}} for _ in range(self.decoder.n_layers)]


def _cache_shapes(layer: nn.Module) -> dict[str, dict[str, tuple]]:
    """What one decoder layer keeps in its cache, by part and key: shapes with None for the batch and
    the cached length (see the forward passes of the attention modules)."""
    out: dict[str, dict[str, tuple]] = {}
    for m in layer.modules():
        if isinstance(m, LatentAttention):
            out["self"] = {"latent": (None, None, m.s.kv_rank), "k_rope": (None, 1, None, m.s.rope_dims)}
        elif isinstance(m, (SelfAttention, CrossAttention)):
            part = "self" if isinstance(m, SelfAttention) else "cross"
            out[part] = {"k": (None, m.nkv, None, m.dk), "v": (None, m.nkv, None, m.dv)}
    return out


def _shape_of(t) -> tuple | None:
    return tuple(t.shape) if isinstance(t, torch.Tensor) else None


def _fits(shape: tuple | None, expected: tuple | None) -> bool:
    return (shape is not None and expected is not None and len(shape) == len(expected)
            and all(e is None or e == d for e, d in zip(expected, shape)))  # fmt: skip


def cache_length(cache: list[dict]) -> int:
    """Positions already held by a cache."""
    first = cache[0]["self"] if cache else {}
    if "latent" in first:
        return first["latent"].shape[1]
    return first["k"].shape[-2] if "k" in first else 0


def cache_bytes(cache: list[dict]) -> int:
    """Bytes held by the keys and values of a cache, self- and cross-attention."""
    return sum(t.numel() * t.element_size() for layer in cache for part in layer.values() for t in part.values())
