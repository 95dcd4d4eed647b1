"""The reference Transformer, generated from a ModelSpec.

One small module per concept, each tagged with the component of the analytic breakdown it holds
(``component = "attention"`` ...), so measured and analytic counts compare key by key. Attributes
are named after the same components: ``embed``, ``position``, ``token_type``, ``attention``,
``mixer``, ``cross_attention``, ``mlp`` (``router``, ``experts``, ``shared``), ``*_norm``,
``pooler``, ``head``. Every width is derived from the spec's fields in this package's own code
(attention.py, mlp.py, norms.py, positions.py), never from the analytic description
(archspec.describe.blocks), so that "analytic == instantiated" compares two derivations. Layer i of a stack
is built from the spec of its kind, ``archspec.spec.layers.layer_kinds(spec, depth)[i]`` (the spec's
pattern resolved, not the description).

Shapes: B batch, T target (or only) length, S source/key length, d d_model, nh query heads,
nkv key/value heads, dk per-head query/key width, dv per-head value width, V vocabulary.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from archspec.core.errors import SpecError
from archspec.core.vocab import ATTENTION, RECOMPUTE
from archspec.reference.attention import (
    AttentionCore,
    CrossAttention,
    LatentAttention,
    SelfAttention,
)
from archspec.reference.cache import _cache_shapes, _fits, _shape_of
from archspec.reference.cache import cache_bytes as cache_bytes  # re-exported: archspec.reference.cache_bytes
from archspec.reference.cache import cache_length as cache_length
from archspec.reference.heads import DiscriminatorHead, Head, MLMHead, Pooler
from archspec.reference.mlp import MLP, MoE
from archspec.reference.norms import make_norm
from archspec.reference.positions import (
    Alibi,
    DisentangledPosition,
    LearnedPosition,
    RelativePosition,
    SinusoidalPosition,
    TransformerXLPosition,
)
from archspec.spec.layers import layer_kinds
from archspec.spec.model import MIXERS, ModelSpec

# ---------------------------------------------------------------- components


class TokenEmbedding(nn.Embedding):
    component = "embed"
    role = "embedding"


class TokenTypeEmbedding(nn.Embedding):
    component = "token_type"
    role = "embedding"


def sliding_window(spec: ModelSpec, index: int) -> int | None:
    """The window of layer `index`'s self-attention (None: it sees every earlier key), as the layer's
    kind says (attention.sliding_layers: every layer, the even ones (Gemma 2) or the odd ones (GPT-Neo))."""
    depth = max(spec.decoder_layers, spec.encoder_layers, index + 1)
    att = layer_kinds(spec, depth)[index][1].mixer
    return att.sliding_window if att.kind == "standard" else None


def build_mixer(spec: ModelSpec) -> nn.Module:
    """A recurrent mixer (Mamba, Mamba-2, Gated DeltaNet) of the layer's kind, from
    archspec.reference.mixers (imported on first use): forward(x, cache) -> (B, T, d)."""
    from archspec.reference import mixers

    return mixers.MIXERS[spec.mixer.kind](spec)


class Block(nn.Module):
    """One layer, built from the spec of its kind: its token mixer (self-attention, latent attention,
    a recurrent mixer, or none), cross-attention (decoder with an encoder), its MLP (dense, experts,
    or none), each sub-layer with a residual and its norm(s): pre x + f(N(x)), post N(x + f(x)),
    sandwich x + N2(f(N1(x))), post_sublayer x + N2(f(x)) (OLMo 2); or, in a parallel block,
    x + mixer(N1(x)) + mlp(N2(x)) with N2 = N1 when the norm is shared. Attention with a Mamba-2 mixer
    beside it (Falcon-H1): x + attention(N(x)) + mixer(N(x)), then the MLP. Each sub-layer's output is
    multiplied by residual_scale before its add (Granite).

    `recompute_all` (full recomputation): the block keeps only its inputs for backward and runs again
    there (torch.utils.checkpoint); set through Transformer.set_execution.
    """

    recompute_all = False

    def __init__(self, spec: ModelSpec, causal: bool, cross: bool):
        super().__init__()
        self.norm_position = spec.norm_position
        self.parallel = spec.block.kind == "parallel"
        self.residual_scale = spec.residual_scale
        pre = self.norm_position != "post_sublayer"  # a norm before (pre, sandwich) or after the add (post)
        after = self.norm_position in ("sandwich", "post_sublayer")  # a norm on the sub-layer's output
        mixer = spec.mixer.kind
        self.mixer_name = "mixer" if mixer in MIXERS else "attention" if mixer != "none" else None
        self.attention_norm = self.mixer_norm = self.attention = self.mixer = None
        if self.mixer_name is not None:
            # attention_norm = false: the mixer reads the residual stream itself (ModernBERT's first layer)
            setattr(self, f"{self.mixer_name}_norm", make_norm(spec) if pre and spec.attention_norm else None)
            if mixer in MIXERS:
                self.mixer = build_mixer(spec)
            else:
                self.attention = LatentAttention(spec) if mixer == "latent" else SelfAttention(spec, causal)
                if mixer == "standard" and spec.mixer.ssm is not None:  # Falcon-H1: Mamba-2 beside attention
                    from archspec.reference import mixers

                    self.mixer = mixers.Mamba2(spec, spec.mixer.ssm)
        self.attention_post_norm = make_norm(spec) if after and mixer not in MIXERS and mixer != "none" else None
        self.mixer_post_norm = make_norm(spec) if after and mixer in MIXERS else None
        self.cross_attention_norm = make_norm(spec) if cross and pre else None
        self.cross_attention = CrossAttention(spec) if cross else None
        self.cross_attention_post_norm = make_norm(spec) if cross and after else None
        has_mlp = spec.mlp.kind != "none"
        shared_norm = self.parallel and spec.block.shared_norm
        self.mlp_norm = make_norm(spec) if has_mlp and pre and not shared_norm else None
        self.mlp = {"moe": MoE, "dense": MLP, "none": lambda s: None}[spec.mlp.kind](spec)
        self.mlp_post_norm = make_norm(spec) if has_mlp and after else None
        p = spec.position  # umT5: the layer's own relative bias table, looked up by the stack's bucket index
        own = p.kind == "relative" and p.per_layer and self.attention is not None
        self.position = RelativePosition(p.buckets, p.max_distance, spec.n_heads, not causal) if own else None

    def residual(self, x, name: str, f):
        norm, post = getattr(self, f"{name}_norm"), getattr(self, f"{name}_post_norm")
        s = self.residual_scale

        def scaled(y):
            return y * s if s != 1 else y

        if self.norm_position == "post":
            return norm(x + scaled(f(x)))
        if self.norm_position == "sandwich":
            return x + scaled(post(f(norm(x))))
        if self.norm_position == "post_sublayer":
            return x + scaled(post(f(x)))
        return x + scaled(f(norm(x) if norm is not None else x))

    def forward(self, x, memory=None, cache: dict | None = None, bias=None):
        if self.recompute_all and cache is None and torch.is_grad_enabled():
            return checkpoint(self.run, x, memory, None, bias, use_reentrant=False)
        return self.run(x, memory, cache, bias)

    def mix(self, h, cache: dict | None, bias=None):
        """The token mixer on its (normalised) input."""
        if self.attention is not None:
            out = self.attention(h, cache, bias)
            return out if self.mixer is None else out + self.mixer(h, cache)  # Falcon-H1: the two outputs add
        seen = cache.get("seen", 0) if cache is not None else 0
        out = self.mixer(h, cache)
        if cache is not None:  # positions seen, for a model whose first layers hold no attention cache
            cache["seen"] = seen + h.shape[1]
        return out

    def run(self, x, memory=None, cache: dict | None = None, bias=None):
        if self.position is not None:  # bias: the (T, S) bucket index -> this layer's (nh, T, S) bias
            bias = self.position.lookup(bias, x.dtype)
        self_cache = cache["self"] if cache is not None else None
        cross_cache = cache["cross"] if cache is not None else None
        if self.mixer_name is None and cache is not None:
            self_cache["seen"] = self_cache.get("seen", 0) + x.shape[1]
        if self.parallel:
            s = self.residual_scale
            first = getattr(self, f"{self.mixer_name}_norm") if self.mixer_name else None
            h = first(x) if first is not None else x
            out = self.mix(h, self_cache, bias) if self.mixer_name else 0
            if self.mlp is not None:
                out = out + self.mlp(self.mlp_norm(x) if self.mlp_norm is not None else h)
            return x + (out * s if s != 1 else out)
        if self.mixer_name is not None:
            x = self.residual(x, self.mixer_name, lambda h: self.mix(h, self_cache, bias))
        if self.cross_attention is not None:
            x = self.residual(x, "cross_attention", lambda h: self.cross_attention(h, memory, cross_cache))
        if self.mlp is None:
            return x
        if getattr(self.mlp, "dense", None) is not None:  # Gemma 4: the router and experts read x itself
            return self.residual(x, "mlp", lambda h: self.mlp(h, x))
        return self.residual(x, "mlp", self.mlp)


class Stack(nn.Module):
    """Positions added to the embeddings or to the scores (rotary positions live in each layer's
    attention), an optional embedding norm, the blocks (layer i of its kind; one shared block run
    `layers` times with share_layers), an optional final norm."""

    def __init__(self, spec: ModelSpec, layers: int, causal: bool, cross: bool):
        super().__init__()
        p = spec.position
        # positions (and the embedding norm) join at the token table's width (ALBERT), or after the projection
        # to d_model (OPT's project_in)
        e = spec.d_model if spec.embedding.position_width == "d_model" else spec.d_embed
        self.n_layers = layers
        self.position = {
            "learned": lambda: LearnedPosition(spec.max_positions, p.offset, e),
            "sinusoidal": lambda: SinusoidalPosition(spec.max_positions, e),
            "alibi": lambda: Alibi(spec.n_heads),
            "relative": lambda: None if p.per_layer else RelativePosition(p.buckets, p.max_distance, spec.n_heads,
                                                                          not causal),
            "disentangled": lambda: DisentangledPosition(p.buckets, p.max_distance, spec.d_model),
            "transformer_xl": lambda: TransformerXLPosition(spec.d_model, spec.n_heads, spec.d_head, not p.per_layer),
        }.get(p.kind, lambda: None)()  # fmt: skip
        self.per_layer_bias = p.kind == "relative" and p.per_layer
        # DeBERTa's table is normalised once per forward pass, before the layers read it
        self.position_norm = (
            make_norm(spec, kind="layernorm", affine="weight_bias") if p.kind == "disentangled" and p.norm else None
        )
        self.embedding_norm = make_norm(spec, e) if spec.embedding_norm else None
        kinds = layer_kinds(spec, 1 if spec.share_layers else layers)
        self.layers = nn.ModuleList(Block(kind, causal, cross) for _, kind in kinds)
        self.final_norm = make_norm(spec) if spec.final_norm else None

    def embed_positions(self, x, start: int = 0):
        """x: (B, T, e) summed embeddings -> with additive positions and the embedding norm (e: d_embed, or
        d_model after OPT's project_in)."""
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
        elif self.per_layer_bias:  # umT5: the bucket index, which each layer looks up in its own table
            own = next(layer.position for layer in self.layers if layer.position is not None)
            bias = own.index(T, start + T, start, x.device)
        elif isinstance(self.position, DisentangledPosition):  # the table (normalised) and each pair's rows
            table = self.position.weight
            table = self.position_norm(table) if self.position_norm is not None else table
            bias = (table.to(x.dtype), *self.position.indices(T, x.device))
        elif isinstance(self.position, TransformerXLPosition):  # the encodings of every distance, the shift, u, v
            S = start + T
            p = self.position
            bias = (p.encodings(S, x.device).to(x.dtype), p.shift(T, S, x.device), p.u, p.v)
        for i in range(self.n_layers):
            layer = self.layers[i if len(self.layers) > 1 else 0]
            x = layer(x, memory, cache[i] if cache is not None else None, bias)
        return self.final_norm(x) if self.final_norm is not None else x


class EmbeddingProjection(nn.Linear):
    """Factorised embeddings: ALBERT's d_embed -> d_model map (with a bias), OPT's project_in (without);
    OPT's project_out maps d_model -> d_embed back before the head."""

    component = "embed"


class MTPHead(nn.Linear):
    role = "head"


class MTPModule(nn.Module):
    """One multi-token-prediction module (DeepSeek-V3, section 2.2): norms of the hidden state and of
    the next token's embedding, a projection of the two (2 d_model -> d_model), one block of its
    kind, a final norm and, where the checkpoint stores them, its own token table and output head.
    Everything in it is the component 'mtp'. Built only when asked (build(spec, mtp=True)):
    transformers does not build it, and forward does not run it."""

    component = "mtp"
    seals = ("component",)

    def __init__(self, spec: ModelSpec, kind: ModelSpec):
        super().__init__()
        d, V = spec.d_model, spec.vocab_size
        self.embed_norm, self.hidden_norm = make_norm(spec), make_norm(spec)
        self.proj = nn.Linear(2 * d, d, bias=False)
        self.block = Block(kind, causal=True, cross=False)
        self.final_norm = make_norm(spec)
        own = spec.mtp.own_tables
        self.embed = TokenEmbedding(V, d) if own else None
        self.head = MTPHead(d, V, bias=False) if own else None


def mtp_modules(spec: ModelSpec) -> nn.ModuleList:
    """The spec's MTP modules, each a block of mtp.kind (default: the last decoder layer's kind)."""
    m = spec.mtp
    kind = spec.kind_spec(m.kind) if m.kind is not None else layer_kinds(spec, spec.decoder_layers)[-1][1]
    return nn.ModuleList(MTPModule(spec, kind) for _ in range(m.modules))


class Transformer(nn.Module):
    """Decoder-only, encoder-only or encoder-decoder, as the spec's layer counts say.

    - decoder-only and encoder-only: ``model(tokens) -> logits (B, T, V)``
    - encoder-decoder: ``model(src, tgt) -> logits (B, T, V)``
    - with ``head = "none"``: the last hidden states (B, T, d) instead of logits
    """

    def __init__(self, spec: ModelSpec, mtp: bool = False):
        super().__init__()
        self.spec = spec
        d, V, e = spec.d_model, spec.vocab_size, spec.d_embed
        self.kind = spec.kind
        self.embed = TokenEmbedding(V, e)
        untied_pair = self.kind == "encoder-decoder" and not spec.share_embeddings
        self.target_embed = TokenEmbedding(V, e) if untied_pair else None
        emb = spec.embedding
        self.positions_after_projection = emb.position_width == "d_model"  # OPT: positions d_model wide
        joined = d if self.positions_after_projection else e
        self.token_type = TokenTypeEmbedding(spec.type_vocab_size, joined) if spec.type_vocab_size else None
        self.embed_proj = EmbeddingProjection(e, d, bias=emb.projection_bias) if e != d else None
        self.project_out = EmbeddingProjection(d, e, bias=emb.projection_bias) if emb.project_out else None
        # Vaswani et al. 2017, 3.4 (and Gemma): embeddings multiplied by sqrt(d_model)
        # (Granite: a number, its embedding_multiplier)
        scale = spec.embedding_scale
        self.embed_scale = math.sqrt(d) if scale == "sqrt_d_model" else 1.0 if scale == "none" else float(scale)
        # an encoder reads the source (bidirectional); a decoder the target (causal), cross-attending
        # to the encoder's output when there is one
        self.encoder = Stack(spec, spec.encoder_layers, False, False) if spec.encoder_layers else None
        cross = bool(spec.encoder_layers)
        self.decoder = Stack(spec, spec.decoder_layers, True, cross) if spec.decoder_layers else None
        self.pooler = Pooler(d) if spec.pooler else None
        self.head = {"lm": Head, "mlm": MLMHead, "discriminator": DiscriminatorHead,
                     "none": lambda s: None}[spec.head.kind](spec)  # fmt: skip
        self.mtp = mtp_modules(spec) if mtp and spec.mtp is not None else None
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
        if attention not in ATTENTION:
            raise SpecError(f"unknown attention {attention!r}; use one of {', '.join(ATTENTION)}")
        if recompute not in RECOMPUTE:
            raise SpecError(f"unknown recompute {recompute!r}; use one of {', '.join(RECOMPUTE)}")
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
        held = [t for part in cache[0].values() for k, t in part.items() if k != "seen"]
        if held and (not isinstance(held[0], torch.Tensor) or held[0].shape[0] != batch):
            raise ValueError(f"the cache holds a batch of {held[0].shape[0]} sequences, the input {batch}")
        for i, (layer, entry) in enumerate(zip(self.decoder.layers, cache)):  # a cache of another model
            want = _cache_shapes(layer)
            for part, tensors in entry.items():
                if part in want and want[part] is None:  # a recurrent mixer's states
                    continue
                for key, t in tensors.items():
                    if key == "seen" and isinstance(t, int):  # positions seen (a window holds fewer)
                        continue
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
        if self.positions_after_projection:  # OPT: project_in, then positions d_model wide
            x = self.embed_proj(x)
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
        if self.embed_proj is not None and not self.positions_after_projection:  # ALBERT: after the sum
            x = self.embed_proj(x)
        return x  # (B, T, d)

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
        """The last stack's output (B, T, d), before the output head (d_embed wide after OPT's project_out)."""
        out = self._last_stack(*inputs, token_types=token_types, cache=cache)
        return self.project_out(out) if self.project_out is not None else out

    def _last_stack(self, *inputs, token_types=None, cache=None) -> torch.Tensor:
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
