"""Attention: the core softmax(q kᵀ) v (fused or explicit), and the attention modules that run it:
self-attention, latent attention (DeepSeek, with DeepSeek-V3.2's sparse-attention indexer) and
cross-attention.

Every width is derived here from the spec of the layer's kind, in its own words: q is n_heads ·
d_head wide, k n_kv_heads · d_head, v n_kv_heads · d_value, the output projection reads n_heads ·
d_value. Each attention owns its rotary embedding (a buffer, no parameters), built from its kind's
position: a NoPE kind has none.

Shapes: B batch, T query length, S key length, d d_model, nh query heads, nkv key/value heads,
dk per-head query/key width, dv per-head value width.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from archspec.core.vocab import attention_runs
from archspec.reference.norms import L2Norm, make_norm
from archspec.reference.positions import Rotary
from archspec.spec.model import ModelSpec


def attend(q, k, v, causal: bool, start: int = 0, scale: float | None = None, bias=None, window: int | None = None,
           softcap: float | None = None, gqa: bool = False, mode: str = "flash", chunk: int | None = None,
           sinks=None) -> torch.Tensor:  # fmt: skip
    """softmax(scale · q kᵀ + bias) v over all heads; q (B, nh, T, dk), k (B, nkv, S, dk), v (B, nkv, S, dv).

    The full score matrix is computed (and counted). The T queries sit at positions start ..
    start + T - 1 and the S keys end with them (a cache holds the earlier ones). A causal mask hides
    the future; `window` hides keys more than window - 1 positions back (and, without the causal mask,
    more than window - 1 positions ahead: |i - j| < window); `chunk` hides keys outside
    the query's own chunk of positions (Llama 4's chunked attention); `bias` (nh, T, S) or (B, 1, T, S) is added to
    the scores; `softcap` caps them as c · tanh(s / c); `sinks` (nh,) is one more logit per head in
    the softmax's denominator (gpt-oss). With `gqa`, fewer K/V heads than query heads are shared by
    groups (grouped-query attention).
    mode 'flash': torch's fused kernel (it keeps its output and the log-sum-exp for backward, not
    the scores); 'eager': explicit products and softmax (autograd keeps the probabilities). No fused
    kernel soft-caps or has sinks: with `softcap` or `sinks` the products are always explicit.
    """
    T, S = q.shape[-2], k.shape[-2]
    mode = attention_runs(mode, softcap=softcap, sinks=sinks is not None, d_qk=q.shape[-1], d_v=v.shape[-1],
                          cpu_training=False)  # fmt: skip
    plain = not window and not chunk and bias is None
    if mode == "flash" and causal and T == S and plain:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale, enable_gqa=gqa)
    mask = None
    if (causal and T > 1) or window or chunk:
        qpos = torch.arange(start, start + T, device=q.device)[:, None]  # absolute positions
        kpos = torch.arange(start + T - S, start + T, device=q.device)[None, :]
        mask = torch.ones(T, S, dtype=torch.bool, device=q.device)
        if causal:
            mask &= kpos <= qpos
        if window:  # w - 1 positions back; in a bidirectional layer also w - 1 ahead (ModernBERT's local layers)
            mask &= (kpos > qpos - window) if causal else ((kpos - qpos).abs() < window)
        if chunk:
            mask &= kpos // chunk == qpos // chunk
    if mode == "eager":
        return eager_attention(q, k, v, mask, scale, bias, softcap, sinks)
    if bias is not None:
        if mask is not None:
            bias = bias.masked_fill(~mask, float("-inf"))
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=scale, enable_gqa=gqa)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, enable_gqa=gqa)


def eager_attention(q, k, v, mask=None, scale: float | None = None, bias=None, softcap: float | None = None,
                    sinks=None):  # fmt: skip
    """The same attention as explicit steps, scores and probabilities materialised; `mask` (T, S) is
    True where a query may see a key. With `sinks`, as transformers' gpt_oss eager_attention_forward:
    the sink logit joins each row, the row's maximum is subtracted, and the sink's probability is
    dropped after the softmax."""
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
    if sinks is None:
        return scores.softmax(dim=-1) @ v  # (B, nh, T, dv)
    B, nh, T, _ = scores.shape
    sink = sinks.to(scores.dtype).reshape(1, -1, 1, 1).expand(B, nh, T, 1)
    logits = torch.cat((scores, sink), dim=-1)  # (B, nh, T, S + 1)
    logits = logits - logits.max(dim=-1, keepdim=True).values
    return logits.softmax(dim=-1)[..., :-1] @ v  # (B, nh, T, dv): the sink's share dropped


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
        cpu_training = self.training and q.device.type == "cpu"
        mode = attention_runs(self.mode, d_qk=q.shape[-1], d_v=v.shape[-1], cpu_training=cpu_training)
        if self.recompute_core and torch.is_grad_enabled():
            return checkpoint(attend, q, k, v, *args, mode=mode, use_reentrant=False, **kwargs)
        return attend(q, k, v, *args, mode=mode, **kwargs)


def rotary_of(spec: ModelSpec, dims: int | None = None) -> Rotary | None:
    """The rotary embedding of a layer whose kind has rotary positions (on `dims` of each head, or the
    spec's rotated width), or None (NoPE, or positions added to the embeddings)."""
    p = spec.position
    if p.kind != "rotary":
        return None
    if p.proportional:  # the whole head turns, its first rotary_dims / 2 pairs of the halves at nonzero rates
        return Rotary(spec.d_head, p.base, False, pairs=spec.rotary_dims // 2)
    return Rotary(dims or spec.rotary_dims, p.base, p.interleaved)


class SelfAttention(AttentionCore):
    """Multi-head self-attention with grouped-query K/V, independent d_head / d_value, and the options
    of its kind: QK-norm (per head, over all heads, or weightless L2), a weightless norm per value head,
    score scale, soft-capping, a sliding window or chunks, sinks, an output gate, keys serving as values.

    The fused projection's output is [q | gate | k | v] in that order, each block head-major: q is
    nh · dk, the gate nh · dv (with `gate`: attn(..) * sigmoid(gate) before the output projection,
    as Qwen3-Next, whose q_proj interleaves q and gate per head — a weight map de-interleaves it),
    k nkv · dk, v nkv · dv (absent with `shared_kv`: the values are the raw keys, before any norm
    or rotation, as Gemma 4 takes them). The cache of a windowed or chunked layer keeps the last
    window - 1 (chunk - 1) keys and values, all the next query can see, as transformers' cache."""

    component = "attention"

    def __init__(self, spec: ModelSpec, causal: bool):
        super().__init__()
        att, b = spec.mixer, spec.biases
        self.causal, self.scale, self.softcap = causal, att.scale, att.softcap
        self.window, self.chunk = att.sliding_window, att.chunk
        self.nh, self.nkv, self.dk, self.dv = spec.n_heads, spec.n_kv_heads, spec.d_head, spec.d_value
        widths = {"q": self.nh * self.dk, "gate": self.nh * self.dv if att.gate else 0, "k": self.nkv * self.dk,
                  "v": 0 if att.shared_kv else self.nkv * self.dv}  # fmt: skip
        self.names = tuple(n for n, w in widths.items() if w)
        self.split = tuple(widths[n] for n in self.names)
        self.qkv = nn.Linear(spec.d_model, sum(self.split), bias=b.qkv)
        self.qk_norm = "head" if att.qk_norm is True else att.qk_norm or None
        if self.qk_norm == "full":  # over all heads at once (OLMo 2)
            self.q_norm = make_norm(spec, widths["q"], inside=True)
            self.k_norm = make_norm(spec, widths["k"], inside=True)
        elif self.qk_norm == "head":  # over d_head, one weight shared by the heads (Qwen3)
            self.q_norm, self.k_norm = make_norm(spec, self.dk, inside=True), make_norm(spec, self.dk, inside=True)
        elif self.qk_norm == "l2":  # weightless, after the rotation (Llama 4)
            self.q_norm, self.k_norm = L2Norm(spec.norm_eps), L2Norm(spec.norm_eps)
        else:
            self.q_norm = self.k_norm = None
        self.v_norm = L2Norm(spec.norm_eps) if att.value_norm else None  # weightless, per value head (Gemma 4)
        self.rotary = rotary_of(spec)
        self.sinks = nn.Parameter(torch.empty(self.nh)) if att.sinks else None
        self.out = nn.Linear(self.nh * self.dv, spec.d_model, bias=b.out)
        p = spec.position
        self.terms = tuple(t for t in ("c2p", "p2c") if p.kind == "disentangled" and getattr(p, t))
        # Transformer-XL: W_r of the relative encodings, and u and v of the layer's own (else the stack's)
        relative = p.kind == "transformer_xl"
        self.r_proj = nn.Linear(spec.d_model, self.nh * self.dk, bias=False) if relative else None
        own = relative and p.per_layer
        self.u = nn.Parameter(torch.empty(self.nh, self.dk)) if own else None  # the content bias
        self.v = nn.Parameter(torch.empty(self.nh, self.dk)) if own else None  # the position bias
        self.pos_key = self.pos_query = None
        if self.terms and not p.share_key:  # DeBERTa's own projections of the position table
            width = self.nh * self.dk
            self.pos_key = nn.Linear(spec.d_model, width, bias=b.qkv) if "c2p" in self.terms else None
            self.pos_query = nn.Linear(spec.d_model, width, bias=b.qkv) if "p2c" in self.terms else None

    def position_terms(self, q, k, table, c2p_index, p2c_index) -> torch.Tensor:
        """DeBERTa's disentangled bias (B, nh, T, T): q · k_posᵀ gathered at each pair's relative row (c2p)
        plus (k · q_posᵀ gathered)ᵀ (p2c), scaled as the scores are; k_pos and q_pos project the stack's
        table (2 · span, d) with the layer's key and query projections or with pos_key / pos_query."""
        B, nh, T, dk = q.shape
        qw, kw = self.nh * self.dk, self.nkv * self.dk
        w, b = self.qkv.weight, self.qkv.bias
        bias = 0
        if self.pos_key is None and self.pos_query is None and len(self.terms) == 1:
            # shared projections: DeBERTa's code projects the table with both, the unused one included
            unused = slice(qw, qw + kw) if "p2c" in self.terms else slice(0, qw)
            F.linear(table, w[unused], b[unused] if b is not None else None)
        if "c2p" in self.terms:
            key = (self.pos_key(table) if self.pos_key is not None
                   else F.linear(table, w[qw : qw + kw], b[qw : qw + kw] if b is not None else None))  # fmt: skip
            key = key.view(-1, nh, dk).permute(1, 2, 0)  # (nh, dk, 2 · span)
            c2p = torch.matmul(q, key)  # (B, nh, T, 2 · span)
            bias = bias + torch.gather(c2p, -1, c2p_index.expand(B, nh, T, T))
        if "p2c" in self.terms:
            query = (self.pos_query(table) if self.pos_query is not None
                     else F.linear(table, w[:qw], b[:qw] if b is not None else None))  # fmt: skip
            query = query.view(-1, nh, dk).permute(1, 2, 0)  # (nh, dk, 2 · span)
            p2c = torch.matmul(k, query)  # (B, nh, T keys, 2 · span)
            bias = bias + torch.gather(p2c, -1, p2c_index.expand(B, nh, T, T)).transpose(-1, -2)
        return bias * (self.scale if self.scale is not None else dk**-0.5)

    def relative_terms(self, q, R, shift, u, v) -> tuple[torch.Tensor, torch.Tensor]:
        """Transformer-XL's relative attention (Dai et al. 2019, section 3.3): the scores are
        (q + u) · k + (q + v) · W_r R_(i - j), scaled together. Returns the position term, shifted to each
        pair's distance and scaled as the scores are, (B, nh, T, S), and the queries of the content term, q + u.
        R (S, d) holds the encodings of the distances S - 1 .. 0, `shift` (T, S) the row of each pair."""
        B, nh, T, dk = q.shape
        u = self.u if self.u is not None else u
        v = self.v if self.v is not None else v
        S = R.shape[0]
        r = self.r_proj(R).view(S, nh, dk).permute(1, 2, 0)  # (nh, dk, S)
        by_distance = torch.matmul(q + v[:, None], r)  # (B, nh, T, S): column c is distance S - 1 - c
        term = torch.gather(by_distance, -1, shift.expand(B, nh, T, S))  # (B, nh, T, S): key j at distance i - j
        return term * (self.scale if self.scale is not None else dk**-0.5), q + u[:, None]

    def forward(self, x, cache: dict | None = None, bias=None) -> torch.Tensor:
        B, T, _ = x.shape
        parts = dict(zip(self.names, self.qkv(x).split(self.split, dim=-1), strict=True))
        q, k = parts["q"], parts["k"]
        v = parts.get("v", k)  # shared_kv: the raw keys serve as values
        if self.qk_norm == "full":
            q, k = self.q_norm(q), self.k_norm(k)
        q = q.view(B, T, self.nh, self.dk).transpose(1, 2)  # (B, nh, T, dk)
        k = k.view(B, T, self.nkv, self.dk).transpose(1, 2)  # (B, nkv, T, dk)
        v = v.view(B, T, self.nkv, self.dv).transpose(1, 2)  # (B, nkv, T, dv)
        if self.v_norm is not None:
            v = self.v_norm(v)
        if self.qk_norm == "head":
            q, k = self.q_norm(q), self.k_norm(k)
        start = cache.get("seen", 0) if cache is not None else 0
        if self.rotary is not None:
            q, k = self.rotary(q, start), self.rotary(k, start)
        if self.qk_norm == "l2":
            q, k = self.q_norm(q), self.k_norm(k)
        if self.terms:  # DeBERTa: `bias` is (table, c2p index, p2c index) from the stack
            bias = self.position_terms(q, k, *bias)
        elif self.r_proj is not None:  # Transformer-XL: `bias` is (R, shift, u, v) from the stack
            bias, q = self.relative_terms(q, *bias)
        if cache is not None:
            if "k" in cache:
                k = torch.cat((cache["k"], k), dim=-2)  # (B, nkv, held + T, dk)
                v = torch.cat((cache["v"], v), dim=-2)
            # a window (chunk) of w keys needs only the w - 1 before the next query (as transformers' cache keeps)
            limit = self.window or self.chunk
            keep = k.shape[-2] if not limit else min(k.shape[-2], limit - 1)
            held = k.shape[-2] - keep
            cache["k"], cache["v"], cache["seen"] = k[..., held:, :], v[..., held:, :], start + T
        y = self.core(q, k, v, self.causal, start, self.scale, bias, self.window, self.softcap, self.nkv != self.nh,
                      chunk=self.chunk, sinks=self.sinks)  # fmt: skip
        y = y.transpose(1, 2).reshape(B, T, self.nh * self.dv)  # (B, T, nh · dv)
        if "gate" in parts:
            y = y * torch.sigmoid(parts["gate"])
        return self.out(y)


class Indexer(nn.Module):
    """DeepSeek-V3.2's sparse-attention indexer, as transformers' DeepseekV32Indexer: queries
    wq_b(query latent) of `heads` x d_head, one key k_norm(wk(x)) shared by the heads (a LayerNorm
    with weight and bias, eps 1e-6), the first rope_dims of both rotated in the rotate-half layout
    (the latent attention's own rotation is interleaved). The index score of a query and a key is
    sum_h weights_proj(x)_h * heads^-1/2 * relu(q_h . k * d_head^-1/2), over every key, the causal mask
    added; each query keeps its top `topk` keys. Runs without gradients (transformers' no_grad); the
    cache keeps its keys, d_head per token."""

    def __init__(self, spec: ModelSpec):
        super().__init__()
        a, d = spec.mixer, spec.d_model
        ix = a.indexer
        self.heads, self.dk, self.topk = ix.heads, ix.d_head, ix.topk
        self.wq_b = nn.Linear(a.q_rank, ix.heads * ix.d_head, bias=False)
        self.wk = nn.Linear(d, ix.d_head, bias=False)
        self.k_norm = nn.LayerNorm(ix.d_head, eps=1e-6)  # transformers' fixed epsilon
        self.weights_proj = nn.Linear(d, ix.heads, bias=False)
        self.rotary = Rotary(a.rope_dims, spec.position.base, False) if spec.position.kind == "rotary" else None

    @torch.no_grad()
    def forward(self, x, q_latent, start: int, cache: dict | None = None) -> torch.Tensor:
        """(B, T, S) True where a query keeps a key: its top `topk` by index score among those it may see."""
        B, T, _ = x.shape
        q = self.wq_b(q_latent).view(B, T, self.heads, self.dk)  # (B, T, h, dk)
        k = self.k_norm(self.wk(x))[:, None]  # (B, 1, T, dk): one key for every head
        if self.rotary is not None:
            q, k = self.rotary(q.transpose(1, 2), start).transpose(1, 2), self.rotary(k, start)
        k = k[:, 0]  # (B, T, dk)
        if cache is not None:
            if "index_k" in cache:
                k = torch.cat((cache["index_k"], k), dim=1)  # (B, held + T, dk)
            cache["index_k"] = k
        S = k.shape[1]
        scores = torch.relu((q.float() @ k.transpose(-1, -2).float()[:, None]) * self.dk**-0.5)  # (B, T, h, S)
        weights = self.weights_proj(x).float() * self.heads**-0.5  # (B, T, h)
        index = (weights[..., None, :] @ scores)[..., 0, :]  # (B, T, S): the weighted sum over heads
        qpos = torch.arange(start, start + T, device=x.device)[:, None]
        kpos = torch.arange(start + T - S, start + T, device=x.device)[None, :]
        index = index.masked_fill(kpos > qpos, float("-inf"))  # the causal mask
        top = index.topk(min(self.topk, S), dim=-1).indices  # (B, T, topk)
        return torch.zeros(B, T, S, dtype=torch.bool, device=x.device).scatter(-1, top, True)


class LatentAttention(AttentionCore):
    """Multi-head latent attention (DeepSeek-V2/V3): queries through q_a -> norm -> q_b (or one q),
    keys and values through kv_a (the latent and one rotary key shared by the heads) -> norm -> kv_b;
    the cache keeps the latent and the rotary key. d_head = the no-rope width + rope_dims. With an
    indexer (DeepSeek-V3.2) each query attends only to the keys the indexer keeps (the others are
    masked in the full score matrix, as transformers' eager and sdpa paths do); its keys are cached too."""

    component = "attention"

    def __init__(self, spec: ModelSpec):
        super().__init__()
        a, b, d = spec.mixer, spec.biases, spec.d_model
        self.nh, self.dk, self.dv = spec.n_heads, spec.d_head, spec.d_value
        self.q_rank, self.kv_rank, self.rope = a.q_rank, a.kv_rank, a.rope_dims
        self.nope, self.scale = self.dk - self.rope, None
        if a.q_rank:
            self.q_a = nn.Linear(d, a.q_rank, bias=b.qkv)
            self.q_norm = make_norm(spec, a.q_rank, inside=True)
            self.q_b = nn.Linear(a.q_rank, self.nh * self.dk, bias=False)
        else:
            self.q = nn.Linear(d, self.nh * self.dk, bias=False)
        self.kv_a = nn.Linear(d, a.kv_rank + a.rope_dims, bias=b.qkv)
        self.kv_norm = make_norm(spec, a.kv_rank, inside=True)
        self.kv_b = nn.Linear(a.kv_rank, self.nh * (self.nope + self.dv), bias=False)
        self.rotary = rotary_of(spec, a.rope_dims)  # the rotary part of each head only
        self.out = nn.Linear(self.nh * self.dv, d, bias=b.out)
        self.indexer = Indexer(spec) if a.indexer is not None else None

    def forward(self, x, cache: dict | None = None, bias=None) -> torch.Tensor:
        B, T, _ = x.shape
        nh, nope, rope = self.nh, self.nope, self.rope
        q_latent = self.q_norm(self.q_a(x)) if self.q_rank else None
        q = self.q_b(q_latent) if self.q_rank else self.q(x)
        q = q.view(B, T, nh, self.dk).transpose(1, 2)  # (B, nh, T, dk)
        latent, k_rope = self.kv_a(x).split((self.kv_rank, rope), dim=-1)  # (B, T, kv_rank), (B, T, rope)
        start = cache["latent"].shape[1] if cache is not None and "latent" in cache else 0
        k_rope = self.rotary(k_rope[:, None], start)  # (B, 1, T, rope): one rotary key for every head
        if cache is not None:
            if "latent" in cache:
                latent = torch.cat((cache["latent"], latent), dim=1)
                k_rope = torch.cat((cache["k_rope"], k_rope), dim=2)
            cache["latent"], cache["k_rope"] = latent, k_rope
        S = latent.shape[1]
        kv = self.kv_b(self.kv_norm(latent)).view(B, S, nh, nope + self.dv).transpose(1, 2)
        k_nope, v = kv.split((nope, self.dv), dim=-1)  # (B, nh, S, nope), (B, nh, S, dv)
        q = torch.cat((q[..., :nope], self.rotary(q[..., nope:], start)), dim=-1)
        k = torch.cat((k_nope, k_rope.expand(B, nh, S, rope)), dim=-1)  # (B, nh, S, dk)
        sparse = None
        if self.indexer is not None:  # the keys it does not keep get -inf, for every head
            keep = self.indexer(x, q_latent, start, cache)  # (B, T, S)
            sparse = torch.zeros(keep.shape, dtype=q.dtype, device=x.device).masked_fill(~keep, float("-inf"))[:, None]
        y = self.core(q, k, v, True, start, self.scale, sparse)  # (B, nh, T, dv)
        return self.out(y.transpose(1, 2).reshape(B, T, nh * self.dv))


class CrossAttention(AttentionCore):
    """Decoder queries over the encoder output (memory): keys and values come from the memory (the
    keys serve as values with `shared_kv`)."""

    component = "cross_attention"

    def __init__(self, spec: ModelSpec):
        super().__init__()
        b, d = spec.biases, spec.d_model
        self.scale = spec.mixer.scale
        self.nh, self.nkv, self.dk, self.dv = spec.n_heads, spec.n_kv_heads, spec.d_head, spec.d_value
        shared = spec.mixer.shared_kv
        self.split = (self.nkv * self.dk,) if shared else (self.nkv * self.dk, self.nkv * self.dv)
        self.q = nn.Linear(d, self.nh * self.dk, bias=b.qkv)
        self.kv = nn.Linear(d, sum(self.split), bias=b.qkv)
        self.out = nn.Linear(self.nh * self.dv, d, bias=b.out)

    def forward(self, x, memory, cache: dict | None = None) -> torch.Tensor:
        B, T, _ = x.shape
        q = self.q(x).view(B, T, self.nh, self.dk).transpose(1, 2)  # (B, nh, T, dk)
        if cache is not None and "k" in cache:  # the memory's keys and values are computed once
            k, v = cache["k"], cache["v"]
        else:
            S = memory.shape[1]
            kv = self.kv(memory).split(self.split, dim=-1)
            k, v = kv if len(kv) == 2 else (kv[0], kv[0])
            k = k.view(B, S, self.nkv, self.dk).transpose(1, 2)  # (B, nkv, S, dk)
            v = v.view(B, S, self.nkv, self.dv).transpose(1, 2)  # (B, nkv, S, dv)
            if cache is not None:
                cache["k"], cache["v"] = k, v
        y = self.core(q, k, v, causal=False, scale=self.scale, gqa=self.nkv != self.nh)  # (B, nh, T, dv)
        return self.out(y.transpose(1, 2).reshape(B, T, self.nh * self.dv))
