"""Attention: the core softmax(q kᵀ) v (fused or explicit), and the attention modules that run it:
self-attention, latent attention (DeepSeek) and cross-attention.

Shapes: B batch, T query length, S key length, d d_model, nh query heads, nkv key/value heads,
dk per-head query/key width, dv per-head value width.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from archspec.blocks import AttentionShape, LatentShape
from archspec.reference.norms import make_norm
from archspec.reference.positions import Rotary
from archspec.spec import ModelSpec

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
        start = cache.get("seen", 0) if cache is not None else 0
        if isinstance(position, Rotary):
            q, k = position(q, start), position(k, start)
        if cache is not None:
            if "k" in cache:
                k = torch.cat((cache["k"], k), dim=-2)  # (B, nkv, held + T, dk)
                v = torch.cat((cache["v"], v), dim=-2)
            # a window of w keys needs only the w - 1 before the next query (as transformers' cache keeps)
            keep = k.shape[-2] if not self.window else min(k.shape[-2], self.window - 1)
            cache["k"], cache["v"], cache["seen"] = k[..., -keep:, :], v[..., -keep:, :], start + T
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
