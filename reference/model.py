"""The reference Transformer, generated from a ModelSpec.

One small module per concept, each tagged with the component of the analytic breakdown it holds
(``component = "attention"`` ...), so measured and analytic counts compare key by key. Attributes
are named after the same components: ``embed``, ``position``, ``token_type``, ``attention``,
``cross_attention``, ``mlp``, ``*_norm``, ``pooler``, ``head``.

Shapes: B batch, T target (or only) length, S source/key length, d d_model, nh query heads,
nkv key/value heads, dk per-head query/key width, dv per-head value width, V vocabulary.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from archspec.blocks import AttentionShape, MLPShape, StackShape, stack_shapes
from archspec.spec import ModelSpec

ROTARY_BASE = 10000.0  # RoFormer / LLaMA
SINUSOID_BASE = 10000.0  # Vaswani et al. 2017, section 3.5


# ---------------------------------------------------------------- components


class TokenEmbedding(nn.Embedding):
    component = "embed"


class TokenTypeEmbedding(nn.Embedding):
    component = "token_type"


class LayerNorm(nn.LayerNorm):
    component = "norm"


class RMSNorm(nn.RMSNorm):
    component = "norm"


def make_norm(spec: ModelSpec) -> nn.Module:
    if spec.norm == "layernorm":
        return LayerNorm(spec.d_model, eps=spec.norm_eps)
    return RMSNorm(spec.d_model, eps=spec.norm_eps)


class LearnedPosition(nn.Module):
    """A learned table of max_positions rows, added to the embeddings."""

    component = "position"

    def __init__(self, max_positions: int, d_model: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(max_positions, d_model))

    def forward(self, T: int, offset: int = 0) -> torch.Tensor:
        n = self.weight.shape[0]
        if offset + T > n:
            raise ValueError(
                f"sequence of {offset + T} positions is longer than the learned position table (max_positions={n})"
            )
        return self.weight[offset : offset + T]  # (T, d)


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

    def forward(self, T: int, offset: int = 0) -> torch.Tensor:
        if offset + T > self.table.shape[0]:  # no table limit: extend on the fly
            return self._table(offset + T, self.table.device)[offset:]
        return self.table[offset : offset + T]


class Rotary(nn.Module):
    """Rotary position embedding (Su et al. 2021) in LLaMA's rotate-half layout; frequencies are a buffer."""

    component = "position"

    def __init__(self, d_head: int):
        super().__init__()
        self.d_head = d_head
        self.register_buffer("inv_freq", self._inv_freq(), persistent=False)

    def _inv_freq(self, device=None) -> torch.Tensor:
        return 1.0 / ROTARY_BASE ** (torch.arange(0, self.d_head, 2, dtype=torch.float32, device=device) / self.d_head)

    def reset_buffers(self) -> None:
        self.inv_freq = self._inv_freq(self.inv_freq.device)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """x: (B, h, T, dk) -> x rotated by its positions offset .. offset + T - 1."""
        T = x.shape[-2]
        pos = torch.arange(offset, offset + T, dtype=torch.float32, device=x.device)
        freqs = torch.outer(pos, self.inv_freq.float())  # (T, dk/2)
        angles = torch.cat((freqs, freqs), dim=-1)  # (T, dk)
        cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
        x1, x2 = x.chunk(2, dim=-1)
        return x * cos + torch.cat((-x2, x1), dim=-1) * sin


# ---------------------------------------------------------------- attention


def attend(q, k, v, causal: bool, gqa: bool, offset: int = 0) -> torch.Tensor:
    """softmax(q k^T / sqrt(dk)) v over all heads; q (B, nh, T, dk), k (B, nkv, S, dk), v (B, nkv, S, dv).

    The full score matrix is computed (and counted); a causal mask hides the future. With a cache,
    `offset` keys precede the T queries. `gqa`: fewer K/V heads than query heads, each shared by a group.
    """
    T, S = q.shape[-2], k.shape[-2]
    if not causal or T == 1:
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=gqa)
    if offset == 0 and T == S:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)
    mask = torch.ones(T, S, dtype=torch.bool, device=q.device).tril(diagonal=S - T)  # (T, S)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=gqa)


class SelfAttention(nn.Module):
    """Multi-head self-attention with grouped-query K/V and independent d_head / d_value."""

    component = "attention"

    def __init__(self, a: AttentionShape, causal: bool):
        super().__init__()
        self.causal = causal
        self.nh, self.nkv, self.dk, self.dv = a.heads, a.kv_heads, a.d_head, a.d_value
        self.split = (a.q, a.k, a.v)
        self.qkv = nn.Linear(a.d_model, sum(self.split), bias=a.bias)
        self.out = nn.Linear(a.out_in, a.d_model, bias=a.bias)

    def forward(self, x, rotary: Rotary | None = None, cache: dict | None = None) -> torch.Tensor:
        B, T, _ = x.shape
        q, k, v = self.qkv(x).split(self.split, dim=-1)
        q = q.view(B, T, self.nh, self.dk).transpose(1, 2)  # (B, nh, T, dk)
        k = k.view(B, T, self.nkv, self.dk).transpose(1, 2)  # (B, nkv, T, dk)
        v = v.view(B, T, self.nkv, self.dv).transpose(1, 2)  # (B, nkv, T, dv)
        offset = cache["k"].shape[-2] if cache is not None and "k" in cache else 0
        if rotary is not None:
            q, k = rotary(q, offset), rotary(k, offset)
        if cache is not None:
            if "k" in cache:
                k = torch.cat((cache["k"], k), dim=-2)  # (B, nkv, offset + T, dk)
                v = torch.cat((cache["v"], v), dim=-2)
            cache["k"], cache["v"] = k, v
        y = attend(q, k, v, self.causal, self.nkv != self.nh, offset)  # (B, nh, T, dv)
        return self.out(y.transpose(1, 2).reshape(B, T, self.nh * self.dv))


class CrossAttention(nn.Module):
    """Decoder queries over the encoder output (memory): keys and values come from the memory."""

    component = "cross_attention"

    def __init__(self, a: AttentionShape):
        super().__init__()
        self.nh, self.nkv, self.dk, self.dv = a.heads, a.kv_heads, a.d_head, a.d_value
        self.split = (a.k, a.v)
        self.q = nn.Linear(a.d_model, a.q, bias=a.bias)
        self.kv = nn.Linear(a.d_model, sum(self.split), bias=a.bias)
        self.out = nn.Linear(a.out_in, a.d_model, bias=a.bias)

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
        y = attend(q, k, v, causal=False, gqa=self.nkv != self.nh)  # (B, nh, T, dv)
        return self.out(y.transpose(1, 2).reshape(B, T, self.nh * self.dv))


# ---------------------------------------------------------------- MLP and blocks


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


class Block(nn.Module):
    """Self-attention, cross-attention (decoder with an encoder), MLP; each with a residual and a norm."""

    def __init__(self, spec: ModelSpec, stack: StackShape):
        super().__init__()
        self.pre = spec.norm_position == "pre"
        a = AttentionShape.of(spec)
        self.attention_norm = make_norm(spec)
        self.attention = SelfAttention(a, stack.causal)
        self.cross_attention_norm = make_norm(spec) if stack.cross else None
        self.cross_attention = CrossAttention(a) if stack.cross else None
        self.mlp_norm = make_norm(spec)
        self.mlp = MLP(MLPShape.of(spec))

    def residual(self, x, norm, f):
        return x + f(norm(x)) if self.pre else norm(x + f(x))

    def forward(self, x, memory=None, rotary=None, cache: dict | None = None):
        self_cache = cache["self"] if cache is not None else None
        cross_cache = cache["cross"] if cache is not None else None
        x = self.residual(x, self.attention_norm, lambda h: self.attention(h, rotary, self_cache))
        if self.cross_attention is not None:
            x = self.residual(x, self.cross_attention_norm, lambda h: self.cross_attention(h, memory, cross_cache))
        return self.residual(x, self.mlp_norm, self.mlp)


class Stack(nn.Module):
    """Positions, an optional embedding norm, the blocks, an optional final norm."""

    def __init__(self, spec: ModelSpec, stack: StackShape):
        super().__init__()
        self.position = {
            "learned": lambda: LearnedPosition(spec.max_positions, spec.d_model),
            "sinusoidal": lambda: SinusoidalPosition(spec.max_positions, spec.d_model),
            "rotary": lambda: Rotary(spec.d_head),
            "none": lambda: None,
        }[spec.position]()
        self.embedding_norm = make_norm(spec) if spec.embedding_norm else None
        self.layers = nn.ModuleList(Block(spec, stack) for _ in range(stack.layers))
        self.final_norm = make_norm(spec) if spec.final_norm else None

    def forward(self, x, memory=None, cache: list | None = None, offset: int = 0):
        """x: (B, T, d) token embeddings -> (B, T, d)."""
        rotary = self.position if isinstance(self.position, Rotary) else None
        if self.position is not None and rotary is None:
            x = x + self.position(x.shape[1], offset).to(x.dtype)
        if self.embedding_norm is not None:
            x = self.embedding_norm(x)
        for i, layer in enumerate(self.layers):
            x = layer(x, memory, rotary, cache[i] if cache is not None else None)
        return self.final_norm(x) if self.final_norm is not None else x


class Head(nn.Module):
    """The output projection d -> V (with an optional bias); with tied embeddings its weight is the
    token embedding."""

    component = "head"

    def __init__(self, d_model: int, vocab_size: int, bias: bool):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(vocab_size, d_model))
        self.bias = nn.Parameter(torch.empty(vocab_size)) if bias else None

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)  # (B, T, V)


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
        d, V = spec.d_model, spec.vocab_size
        self.kind = spec.kind
        self.embed = TokenEmbedding(V, d)
        untied_pair = self.kind == "encoder-decoder" and not spec.tie_embeddings
        self.target_embed = TokenEmbedding(V, d) if untied_pair else None
        self.token_type = TokenTypeEmbedding(spec.type_vocab_size, d) if spec.type_vocab_size else None
        # Vaswani et al. 2017, 3.4 (and Gemma): embeddings multiplied by sqrt(d_model)
        self.embed_scale = math.sqrt(d) if spec.embedding_scale == "sqrt_d_model" else 1.0
        stacks = {s.name: Stack(spec, s) for s in stack_shapes(spec)}
        self.encoder = stacks.get("encoder")
        self.decoder = stacks.get("decoder")
        self.pooler = Pooler(d) if spec.pooler else None
        self.head = Head(d, V, spec.head.bias) if spec.head.kind == "lm" else None
        self.tie_weights()

    def tie_weights(self) -> None:
        """With tie_embeddings, the output head uses the token embedding's tensor. Moving a model off
        the meta device (`to_empty`) gives every module a tensor of its own, so materialize() ties again."""
        if self.spec.tie_embeddings and self.head is not None:
            self.head.weight = self.embed.weight

    # -- pieces

    def _check_tokens(self, tokens: torch.Tensor, what: str) -> None:
        if not isinstance(tokens, torch.Tensor):
            raise TypeError(f"{what} must be a tensor of token ids of shape (B, T), got {type(tokens).__name__}")
        if tokens.dim() != 2:
            raise ValueError(f"{what} must have shape (B, T), got {tuple(tokens.shape)}")
        if tokens.dtype not in (torch.int64, torch.int32):
            raise TypeError(f"{what} must hold integer token ids, got dtype {tokens.dtype}")

    def _embed(self, tokens, embed: nn.Embedding, token_types=None, first_stack: bool = True):
        x = embed(tokens) * self.embed_scale if self.embed_scale != 1.0 else embed(tokens)
        if self.token_type is not None and first_stack:
            if token_types is None:
                token_types = torch.zeros_like(tokens)
            x = x + self.token_type(token_types)
        return x  # (B, T, d)

    def encode(self, src: torch.Tensor, token_types: torch.Tensor | None = None) -> torch.Tensor:
        """The encoder's output (B, S, d)."""
        self._check_tokens(src, "src" if self.kind == "encoder-decoder" else "tokens")
        return self.encoder(self._embed(src, self.embed, token_types))

    def decode(self, tgt, memory=None, cache=None, token_types=None) -> torch.Tensor:
        """The decoder's output (B, T, d); `cache` (see new_cache) holds keys and values of earlier steps."""
        self._check_tokens(tgt, "tgt" if self.kind == "encoder-decoder" else "tokens")
        embed = self.target_embed if self.target_embed is not None else self.embed
        offset = cache_length(cache) if cache is not None else 0
        x = self._embed(tgt, embed, token_types, first_stack=self.encoder is None)
        return self.decoder(x, memory, cache, offset)

    def hidden_states(self, *inputs, token_types=None, cache=None) -> torch.Tensor:
        """The last stack's output (B, T, d), before the output head."""
        if self.kind == "encoder-decoder":
            if len(inputs) != 2:
                raise TypeError(f"an encoder-decoder model takes model(src, tgt): two token tensors, got {len(inputs)}")
            src, tgt = inputs
            return self.decode(tgt, self.encode(src), cache)
        if len(inputs) != 1:
            raise TypeError(f"a {self.kind} model takes model(tokens): one token tensor, got {len(inputs)}")
        if self.kind == "encoder-only":
            return self.encode(inputs[0], token_types)
        return self.decode(inputs[0], cache=cache, token_types=token_types)

    def pool(self, hidden: torch.Tensor) -> torch.Tensor:
        if self.pooler is None:
            raise ValueError("this spec has no pooler (pooler=false)")
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
        return [{"self": {}, "cross": {}} for _ in self.decoder.layers]


def cache_length(cache: list[dict]) -> int:
    """Positions already held by a cache."""
    first = cache[0]["self"] if cache else {}
    return first["k"].shape[-2] if "k" in first else 0


def cache_bytes(cache: list[dict]) -> int:
    """Bytes held by the keys and values of a cache, self- and cross-attention."""
    return sum(t.numel() * t.element_size() for layer in cache for part in layer.values() for t in part.values())
