"""The declarative model spec: one frozen, validated pydantic model per architecture.

Field names are a public file format (see docs/architecture.md). Fields whose default depends on other
fields (``d_head``, ``d_value``, ``n_kv_heads``, ``d_ff``, ``final_norm``) are resolved from the
validated data when they are not given; a given value is never rewritten. ``replace`` rebuilds a
spec from the fields that were given plus the changes, so derived defaults follow the change.
"""

from __future__ import annotations

import re
from functools import cached_property
from typing import Annotated, Any, Literal, Union

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    model_serializer,
    model_validator,
)

Norm = Literal["layernorm", "rmsnorm"]
NormAffine = Literal["weight_bias", "weight", "none"]
NormPosition = Literal["pre", "post", "sandwich", "post_sublayer"]
Activation = Literal["relu", "gelu", "silu", "swiglu", "geglu", "relu2", "clamped_swiglu"]
QKNorm = Literal["head", "full", "l2"]
Kind = Literal["decoder-only", "encoder-only", "encoder-decoder"]

EmbeddingScale = Literal["none", "sqrt_d_model"]
Init = Literal["gpt2", "xavier"]

GATED_ACTIVATIONS = frozenset({"swiglu", "geglu", "clamped_swiglu"})
NORM_AFFINE = {"layernorm": "weight_bias", "rmsnorm": "weight"}  # each norm's default parameters
NORM_EPS = {"layernorm": 1e-5, "rmsnorm": 1e-6}  # GPT-2 and nn.Transformer; LLaMA 1


# ---------------------------------------------------------------- sub-tables
#
# A feature that brings fields of its own is a small typed model, one member of a union that a
# `kind` tag discriminates (`head = {kind = "lm", bias = true}`). A bare string names a member
# with its defaults (`head = "none"` is `head = {kind = "none"}`), so a flat field can grow into a
# table without breaking any file that used the string; a member with nothing but defaults is
# written back as that string. New kinds are new members, not new flags.


class _Table(BaseModel):
    # defer_build: each validator is built on first use, not at import (see ModelSpec)
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, defer_build=True)


class _Member(_Table):
    kind: str

    @model_serializer(mode="wrap")
    def _as_shorthand(self, handler):
        """A member with only default fields is written as its kind: `position = "rotary"`."""
        defaults = all(getattr(self, f) == info.get_default(call_default_factory=True)
                       for f, info in type(self).model_fields.items() if f != "kind")  # fmt: skip
        return self.kind if defaults else handler(self)


def _shorthand(value: Any, default: str | None = None) -> Any:
    """'lm' -> {'kind': 'lm'}: a bare string names a member with its defaults; a table without a kind
    is of the field's default kind (`[attention] qk_norm = "head"` is standard attention)."""
    if isinstance(value, str):
        return {"kind": value}
    if default is not None and isinstance(value, dict) and "kind" not in value:
        return {"kind": default, **value}
    return value


def _union(*members: type[_Member]):
    """A sub-table field: one of `members` by its `kind`, the first member when the table names none."""
    default = members[0].model_fields["kind"].default
    return Annotated[
        Union[members],  # noqa: UP007
        Field(discriminator="kind"),
        BeforeValidator(lambda value: _shorthand(value, default)),
    ]


# -- positions


class LearnedPosition(_Member):
    """A learned table of max_positions + offset rows added to the embeddings (OPT, BART and RoBERTa
    keep 2 rows more than their context)."""

    kind: Literal["learned"] = "learned"
    offset: int = Field(0, ge=0, description="extra rows beyond max_positions (OPT, BART, RoBERTa: 2)")


class SinusoidalPosition(_Member):
    """Vaswani et al.'s fixed sines and cosines, added to the embeddings (a buffer, no parameters)."""

    kind: Literal["sinusoidal"] = "sinusoidal"


class RotaryPosition(_Member):
    """Rotary embedding (Su et al. 2021) of queries and keys, on a fraction of each head."""

    kind: Literal["rotary"] = "rotary"
    base: float = Field(10000.0, gt=0, strict=False, description="rotary base theta (LLaMA 3: 500000)")
    fraction: float = Field(
        1.0, gt=0, le=1, strict=False, description="fraction of d_head rotated (GPT-NeoX 0.25, Phi-2 0.4)"
    )
    interleaved: bool = Field(False, description="rotate pairs (x0, x1) as GPT-J does, not the two halves")
    proportional: bool = Field(
        False,
        description="Gemma 4's proportional rotary (rope_type 'proportional'): frequencies base^(-2i/d_head) over "
        "the whole head on its first fraction * d_head / 2 pairs of the two halves (x_i, x_i+d_head/2); the other "
        "pairs pass unrotated (frequency 0). Counts and matmul FLOPs are those of fraction",
    )


class AlibiPosition(_Member):
    """ALiBi (Press et al. 2022): a per-head linear bias on the scores (BLOOM); no parameters."""

    kind: Literal["alibi"] = "alibi"


class RelativePosition(_Member):
    """T5's relative position bias: a table of buckets x n_heads added to the self-attention scores, one
    per stack shared by its layers (T5, mT5), or one in every layer's self-attention (umT5, Chung et al.
    2023: per_layer)."""

    kind: Literal["relative"] = "relative"
    buckets: int = Field(32, ge=2, description="relative position buckets (T5: 32)")
    max_distance: int = Field(128, ge=1, description="distance of the last bucket (T5: 128)")
    per_layer: bool = Field(
        False, description="every layer's self-attention has its own table (umT5); false: one per stack (T5)"
    )


class DisentangledPosition(_Member):
    """DeBERTa's disentangled attention (He et al. 2021; transformers' DisentangledSelfAttention): one table
    of 2 · span relative-position embeddings d_model wide per stack (span = buckets, or max_distance without
    buckets), normalised by a LayerNorm with `norm`, shared by the layers. Each layer projects the table to
    position keys (c2p) and position queries (p2c) with its own key and query projections (`share_key`) or
    with pos_key / pos_query of its own (with biases), once per forward pass whatever the batch, and adds to
    q · k the content-to-position term q · k_pos and the position-to-content term k · q_pos, each gathered
    at the pair's relative position (log-bucketed beyond buckets / 2) and scaled as the scores are
    (attention.scale: DeBERTa's 1 / sqrt(d_head · (1 + terms)))."""

    kind: Literal["disentangled"] = "disentangled"
    buckets: int = Field(256, ge=0, description="position buckets, log-spaced beyond half of them (0: none)")
    max_distance: int = Field(
        512, ge=1, description="the longest relative distance the buckets reach (max_relative_positions)"
    )
    c2p: bool = Field(True, description="the content-to-position term q · k_pos")
    p2c: bool = Field(True, description="the position-to-content term k · q_pos")
    share_key: bool = Field(True, description="the layer's query and key projections also project the table")
    norm: bool = Field(True, description="a LayerNorm over the table (norm_rel_ebd = layer_norm)")

    @property
    def span(self) -> int:
        """Relative positions each side: the table has 2 · span rows."""
        return self.buckets or self.max_distance


class NoPosition(_Member):
    kind: Literal["none"] = "none"


Position = _union(
    LearnedPosition,
    SinusoidalPosition,
    RotaryPosition,
    AlibiPosition,
    RelativePosition,
    DisentangledPosition,
    NoPosition,
)


# -- blocks, attention, MLP


class Biases(_Table):
    """Biases per projection: Q/K/V, attention output, MLP (Qwen2: qkv only; GPT-J: MLP only)."""

    qkv: bool = Field(True, description="biases on the query, key and value projections")
    out: bool = Field(True, description="a bias on the attention output projection")
    mlp: bool = Field(True, description="biases on every MLP projection")


class SequentialBlock(_Member):
    """Attention, then the MLP, each with its own residual."""

    kind: Literal["sequential"] = "sequential"


class ParallelBlock(_Member):
    """x + attention(N1(x)) + mlp(N2(x)) (GPT-J, GPT-NeoX, Falcon, Phi-2, PaLM)."""

    kind: Literal["parallel"] = "parallel"
    shared_norm: bool = Field(True, description="one norm feeds both (GPT-J, Falcon-7B, Phi-2); false: two")


Block = _union(SequentialBlock, ParallelBlock)


class StandardAttention(_Member):
    """Multi-head attention over Q, K, V projections (grouped-query by n_kv_heads)."""

    kind: Literal["standard"] = "standard"
    qk_norm: bool | QKNorm = Field(
        False,
        description='a norm on queries and keys: true or "head" (over d_head, shared by the heads; Qwen3), "full" '
        '(over all heads at once; OLMo 2), "l2" (weightless L2 norm over d_head; Llama 4)',
    )
    scale: float | None = Field(
        None, gt=0, strict=False, description="score scale; default 1/sqrt(d_head) (T5, GPT-Neo: 1)"
    )
    softcap: float | None = Field(
        None, gt=0, strict=False, description="scores soft-capped as c * tanh(s / c) (Gemma 2: 50)"
    )
    sliding_window: int | None = Field(
        None,
        ge=1,
        description="keys within this many positions (Mistral: 4096): a causal layer sees keys i - w < j <= i; a "
        "bidirectional (encoder) layer keys on either side, |i - j| < w (ModernBERT: local_attention / 2 + 1)",
    )
    sliding_layers: Literal["all", "even", "odd"] = Field(
        "all", description="layers that use the window: all, even (Gemma 2: 0, 2, ...) or odd (GPT-Neo)"
    )
    chunk: int | None = Field(
        None, ge=1, description="chunked attention: keys in the query's own chunk of this many positions (Llama 4)"
    )
    sinks: bool = Field(False, description="one learned sink logit per head, joining the softmax (gpt-oss)")
    gate: bool = Field(
        False, description="the query projection also emits a sigmoid gate on each head's output (Qwen3-Next)"
    )
    shared_kv: bool = Field(
        False, description="keys serve as values: no value projection (Gemma 4's global layers; needs d_value = d_head)"
    )
    ssm: Mamba2Mixer | None = Field(
        None,
        description="a Mamba-2 mixer beside the attention, reading the same normalised input; the two outputs add "
        "before the residual (Falcon-H1's parallel hybrid layer)",
    )
    value_norm: bool = Field(
        False, description="a weightless RMSNorm over each value head of self-attention (Gemma 4's v_norm)"
    )


class Indexer(_Table):
    """DeepSeek-V3.2's sparse-attention indexer (DSA; transformers' DeepseekV32Indexer): from the query
    latent (q_rank wide) a query projection wq_b to heads x d_head; from the layer's input one shared key
    wk (d_head, through a LayerNorm with weight and bias, k_norm) and one weight per head (weights_proj);
    its first rope_dims of each head rotated. The index score of a query and a key is the sum over heads of
    weight x relu(q . k / sqrt(d_head)), over every key (the full score matrix, as transformers computes
    it); the attention then keeps the top `topk` keys of each query. The keys are cached, d_head per token."""

    heads: int = Field(ge=1, description="indexer heads (index_n_heads)")
    d_head: int = Field(ge=1, description="per-head width of the indexer's queries and of its one key (index_head_dim)")
    topk: int = Field(ge=1, description="keys each query attends to (index_topk)")


class LatentAttention(_Member):
    """Multi-head latent attention (DeepSeek-V2/V3): queries and keys/values through low-rank
    projections with their norms, and a decoupled rotary part of rope_dims per head; d_head is the
    query/key width (no-rope + rope), d_value the value width."""

    kind: Literal["latent"] = "latent"
    q_rank: int | None = Field(None, ge=1, description="query low-rank width (absent: a full query projection)")
    kv_rank: int = Field(ge=1, description="key/value low-rank width (the cached latent)")
    rope_dims: int = Field(ge=2, description="rotary width per head, shared by the keys")
    indexer: Indexer | None = Field(
        None, description="DeepSeek-V3.2's sparse-attention indexer {heads, d_head, topk} (absent: dense attention)"
    )


class MambaMixer(_Member):
    """Mamba's selective state-space mixer (Gu and Dao 2023; Jamba): in-projection to 2 * d_inner,
    a depthwise causal conv1d, x -> (dt, B, C) and dt -> d_inner projections, A_log and D, an
    out-projection; Jamba adds RMSNorms on dt, B and C."""

    kind: Literal["mamba"] = "mamba"
    d_inner: int = Field(ge=1, description="inner width (expand * d_model)")
    d_state: int = Field(16, ge=1, description="state size per channel (N)")
    d_conv: int = Field(4, ge=1, description="conv1d kernel width")
    dt_rank: int = Field(ge=1, description="width of the dt projection's input")
    conv_bias: bool = Field(True, description="a bias on the conv1d")
    bias: bool = Field(False, description="biases on the in- and out-projections")
    dt_norms: bool = Field(False, description="RMSNorms on dt, B and C (Jamba)")


class Mamba2Mixer(_Member):
    """Mamba-2's state-space duality mixer (Dao and Gu 2024; Mamba-Codestral, Nemotron-H): one
    in-projection to (z, x, B, C, dt), a depthwise causal conv1d over (x, B, C), per-head A_log, D
    and dt_bias, a gated RMSNorm over d_inner (heads * head_dim), an out-projection."""

    kind: Literal["mamba2"] = "mamba2"
    heads: int = Field(ge=1, description="SSM heads")
    head_dim: int = Field(ge=1, description="channels per head (d_inner = heads * head_dim)")
    d_state: int = Field(128, ge=1, description="state size (N)")
    groups: int = Field(
        1, ge=1, description="groups sharing B and C, also the groups of the gated RMSNorm (as transformers builds it)"
    )
    d_conv: int = Field(4, ge=1, description="conv1d kernel width")
    conv_bias: bool = Field(True, description="a bias on the conv1d")
    bias: bool = Field(False, description="biases on the in- and out-projections")
    dt_min: float = Field(
        0.0, ge=0, strict=False, description="dt clamped below at this after the softplus (Nemotron-H: time_step_min)"
    )
    dt_max: float | None = Field(None, gt=0, strict=False, description="dt clamped above at this (absent: no limit)")
    norm: Literal["gated", "before_gate", "none"] = Field(
        "gated",
        description="the output norm: gated, RMSNorm(y * silu(z)) in groups (Mamba-2); before_gate, RMSNorm(y) * "
        "silu(z) (Falcon-H1's mamba_norm_before_gate); none, y * silu(z) without a norm (Falcon-H1's mamba_rms_norm "
        "false)",
    )
    out_bias: bool | None = Field(
        None, description="a bias on the out-projection (absent: as `bias`; Falcon-H1's projectors_bias)"
    )


class GatedDeltaNet(_Member):
    """Gated DeltaNet linear attention (Yang et al. 2025; Qwen3-Next, Qwen3.5): projections to
    q, k (key_heads x d_key), v and the output gate z (value_heads x d_value_head), the decay and
    step inputs a, b (value_heads each), a depthwise causal conv1d over q, k, v, A_log and dt_bias,
    a gated RMSNorm over each value head, an out-projection."""

    kind: Literal["gated_deltanet"] = "gated_deltanet"
    key_heads: int = Field(ge=1, description="query/key heads")
    value_heads: int = Field(ge=1, description="value heads (a multiple of key_heads)")
    d_key: int = Field(ge=1, description="per-head query/key width")
    d_value_head: int = Field(ge=1, description="per-head value width")
    d_conv: int = Field(4, ge=1, description="conv1d kernel width")
    projections: Literal["fused", "split"] = Field(
        "fused",
        description="fused: in_proj_qkvz and in_proj_ba, interleaved per key head (Qwen3-Next); split: in_proj_qkv, "
        "in_proj_z, in_proj_b, in_proj_a (Qwen3.5)",
    )


class NoMixer(_Member):
    """No token mixer: the layer is its MLP alone (Nemotron-H's MLP layers)."""

    kind: Literal["none"] = "none"


Attention = _union(StandardAttention, LatentAttention, MambaMixer, Mamba2Mixer, GatedDeltaNet, NoMixer)
MIXERS = ("mamba", "mamba2", "gated_deltanet")  # recurrent mixers: a constant state per sequence


class DenseMLP(_Member):
    kind: Literal["dense"] = "dense"


class MoEMLP(_Member):
    """A mixture of experts: a router picks top_k of `experts` MLPs (each d_expert wide) per token,
    beside an optional shared-expert MLP d_shared wide; the first dense_layers layers stay dense.

    Gemma 4's block (d_dense): a dense MLP d_dense wide and the experts both read the sub-layer's
    input x, out = x + N(N1(mlp(N0(x))) + N2(experts(N3(x)))), the router reading x itself; with
    router_norm the router normalises its input (no weight), times a learned scale per channel and
    d_model^-0.5; with expert_scales the routing weights are multiplied by a learned scale of the
    chosen expert."""

    kind: Literal["moe"] = "moe"
    experts: int = Field(ge=1, description="routed experts per layer")
    top_k: int = Field(ge=1, description="experts each token is routed to")
    d_expert: int = Field(ge=1, description="hidden width of each expert")
    d_shared: int = Field(0, ge=0, description="hidden width of the shared-expert MLP (0: none)")
    shared_gate: bool = Field(False, description="a sigmoid gate Linear(d_model, 1) on the shared expert (Qwen2-MoE)")
    router_bias: bool = Field(False, description="a bias on the router")
    normalize: bool = Field(True, description="renormalise the top-k routing weights to sum to 1")
    dense_layers: int = Field(0, ge=0, description="leading layers with a dense MLP of d_ff (DeepSeek: 1 or 3)")
    scoring: Literal["softmax", "sigmoid"] = Field(
        "softmax", description="router scores: softmax over the experts, or a sigmoid per expert (DeepSeek-V3)"
    )
    correction_bias: bool = Field(
        False, description="a learned per-expert bias added to the scores for choosing experts (ERNIE 4.5)"
    )
    routed_scale: float = Field(
        1.0, gt=0, strict=False, description="routed experts' output multiplied by this (DeepSeek-V3: 2.5)"
    )
    weight_input: bool = Field(False, description="routing weights scale each expert's input, not its output (Llama 4)")
    d_dense: int = Field(
        0, ge=0, description="a dense MLP this wide beside the experts, each with its own norms (Gemma 4; 0: none)"
    )
    router_norm: bool = Field(
        False, description="a weightless RMSNorm and a learned per-channel scale before the router (Gemma 4)"
    )
    expert_scales: bool = Field(False, description="a learned scale per expert on the routing weights (Gemma 4)")


class NoMLP(_Member):
    """No MLP: the layer is its mixer alone (Nemotron-H, Mamba-2 stacks)."""

    kind: Literal["none"] = "none"


MLP = _union(DenseMLP, MoEMLP, NoMLP)


class Embedding(_Table):
    """Factorised embeddings (ALBERT): tables and their norm d_embed wide, then a d_embed -> d_model
    projection with a bias."""

    d_embed: int | None = Field(None, ge=1, description="width of the embedding tables (absent: d_model)")


# -- heads


class LMHead(_Member):
    """An output projection d_model -> vocab_size (the token embedding's matrix when tied)."""

    kind: Literal["lm"] = "lm"
    bias: bool = Field(False, description="a bias of vocab_size on the output projection (GPT-J, Phi-2)")
    scale: float = Field(
        1.0, gt=0, strict=False, description="the hidden states are scaled by this first (tied T5: d_model^-0.5)"
    )
    softcap: float | None = Field(
        None, gt=0, strict=False, description="logits soft-capped as c * tanh(x / c) (Gemma 2: 30)"
    )


class MLMHead(_Member):
    """BERT's masked-LM head: dense with a bias, the activation, a LayerNorm, then the tied token
    table and a vocabulary bias (d_embed wide with factorised embeddings). ModernBERT drops the dense
    layer's and the norm's biases (classifier_bias, norm_bias) and keeps the vocabulary bias (decoder_bias)."""

    kind: Literal["mlm"] = "mlm"
    dense_bias: bool = Field(True, description="a bias on the dense layer (ModernBERT: classifier_bias)")
    norm_bias: bool = Field(True, description="a bias on the head's LayerNorm (ModernBERT: norm_bias)")
    bias: bool = Field(True, description="a vocabulary bias on the tied decoder (ModernBERT: decoder_bias)")


class DiscriminatorHead(_Member):
    """ELECTRA's replaced-token detection (ElectraForPreTraining): dense d_model -> d_model with a bias, the
    activation, then one logit per token (d_model -> 1 with a bias), trained with a binary cross-entropy on
    whether each token was replaced; no vocabulary projection, nothing tied."""

    kind: Literal["discriminator"] = "discriminator"


class NoHead(_Member):
    """No output projection: the model returns its last hidden states (BertModel)."""

    kind: Literal["none"] = "none"


Head = _union(LMHead, MLMHead, DiscriminatorHead, NoHead)

# field -> {kind: member}: every sub-table field of the spec, for constructing trusted data
SUBTABLES: dict[str, dict[str, type[_Member]]] = {
    "position": {m.model_fields["kind"].default: m for m in (LearnedPosition, SinusoidalPosition, RotaryPosition,
                                                             AlibiPosition, RelativePosition, DisentangledPosition,
                                                             NoPosition)},
    "block": {"sequential": SequentialBlock, "parallel": ParallelBlock},
    "attention": {"standard": StandardAttention, "latent": LatentAttention, "mamba": MambaMixer,
                  "mamba2": Mamba2Mixer, "gated_deltanet": GatedDeltaNet, "none": NoMixer},
    "mlp": {"dense": DenseMLP, "moe": MoEMLP, "none": NoMLP},
    "head": {"lm": LMHead, "mlm": MLMHead, "discriminator": DiscriminatorHead, "none": NoHead},
}  # fmt: skip


# -- layer kinds (heterogeneous stacks)

KIND_FIELDS = ("attention", "mlp", "position", "n_heads", "n_kv_heads", "d_head", "d_value", "d_ff", "attention_norm")
Override = Annotated[str | dict[str, Any], Field(description="a kind name, or a table of the fields to change")]


class LayerKind(_Table):
    """One kind of layer: the parts of the model's defaults it changes. A table overrides only the
    fields it names (`attention = {sliding_window = 512}` keeps the model's other attention fields);
    naming another kind (`attention = "mamba2"` or `{kind = "mamba2", ...}`) starts from that kind's
    defaults. Everything else comes from the model."""

    attention: Override | None = Field(
        None, description="the token mixer: attention (its options) or a recurrent mixer"
    )
    mlp: Override | None = Field(None, description="the MLP: dense, moe (its options) or none")
    position: Override | None = Field(
        None, description='rotary options of this kind (`{base = 1e6}`), or "none" for a layer without rotary (NoPE)'
    )
    n_heads: int | None = Field(None, ge=1, description="query heads of this kind")
    n_kv_heads: int | None = Field(None, ge=1, description="key/value heads of this kind")
    d_head: int | None = Field(None, ge=1, description="per-head query/key width of this kind")
    d_value: int | None = Field(None, ge=1, description="per-head value width of this kind")
    d_ff: int | None = Field(None, ge=1, description="MLP hidden width of this kind")
    attention_norm: bool | None = Field(
        None, description="false: no norm before this kind's token mixer (ModernBERT's first layer)"
    )

    @model_serializer(mode="wrap")
    def _only_changes(self, handler):
        """A kind is written as the fields it changes."""
        return {k: v for k, v in handler(self).items() if v is not None}


class Layers(_Table):
    """Which kind each layer of a stack has: the `prefix` kinds for its first layers, then `pattern`
    repeated over the rest (cut short at the stack's end). A pattern as long as the stack is an
    explicit per-layer list."""

    prefix: list[str] = Field(default_factory=list, description="kinds of the first layers, in order")
    pattern: list[str] = Field(min_length=1, description="kinds repeated over the remaining layers")

    @model_serializer(mode="wrap")
    def _compact(self, handler):
        """Written without an empty prefix."""
        return {k: v for k, v in handler(self).items() if v or k == "pattern"}


class MTP(_Table):
    """Multi-token-prediction modules (DeepSeek-V3, GLM-4.5): each projects [norm(h); norm(embed)] from
    2 * d_model to d_model and runs one more block of the `kind` (default: the last layer's), with a
    final norm and, in released checkpoints, its own copies of the token table and output head.
    Counted only when asked: transformers does not build them."""

    modules: int = Field(1, ge=1, description="prediction modules (num_nextn_predict_layers)")
    kind: str | None = Field(None, description="the layer kind of each module's block (default: the last layer's)")
    own_tables: bool = Field(True, description="each module stores its own token table and output head")


NESTED: dict[str, type[_Table]] = {"indexer": Indexer, "ssm": Mamba2Mixer}  # tables inside a sub-table member
TABLES: dict[str, type[_Table]] = {"bias": Biases, "embedding": Embedding, "layers": Layers, "mtp": MTP}


def _names(names) -> str:
    return f" ({', '.join(names)})" if names else " (none are defined)"


def _merged(base: Any, override: str | dict[str, Any]) -> dict[str, Any]:
    """A sub-table with a kind's changes: `override` names fields to change, or another kind to start
    from (its defaults); `base` is the model's member."""
    table = _shorthand(override)
    fields = {f: getattr(base, f) for f in type(base).model_fields} if isinstance(base, _Member) else _shorthand(base)
    if "kind" in table and table["kind"] != fields.get("kind"):
        return dict(table)
    return {**fields, **table}


def _check_mamba2(m: Mamba2Mixer, where: str) -> None:
    if m.heads % m.groups:
        raise ValueError(f"{where}.groups={m.groups} does not divide {where}.heads={m.heads}")
    if m.dt_max is not None and m.dt_max < m.dt_min:
        raise ValueError(f"{where}.dt_max={m.dt_max} is below {where}.dt_min={m.dt_min}")


def _quotient(data: dict[str, Any], num: str, den: str) -> int:
    """d_model // n_heads for a default; the divisibility check lives in the validator."""
    n, d = data.get(num), data.get(den)
    if isinstance(n, int) and isinstance(d, int) and d > 0:
        return max(n // d, 1)
    return 1


class ModelSpec(BaseModel):
    """A Transformer architecture, as the counter and the reference builder both read it."""

    # defer_build: the validator is built on first validation, not at import, so commands that
    # only read presets (trusted package data, validated by the test suite) start fast.
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, defer_build=True)

    name: str = Field(
        pattern=r"^[a-z0-9][a-z0-9._-]*$",
        description="lowercase id, e.g. gpt2-medium",
    )
    vocab_size: int = Field(ge=1, description="V: rows of the token embedding")
    d_model: int = Field(ge=1, description="width of the residual stream")
    encoder_layers: int = Field(0, ge=0, description="encoder blocks (bidirectional)")
    decoder_layers: int = Field(
        0, ge=0, description="decoder blocks (causal; cross-attention when there is an encoder)"
    )
    n_heads: int = Field(ge=1, description="query heads")
    d_head: int = Field(
        default_factory=lambda data: _quotient(data, "d_model", "n_heads"),
        ge=1,
        description="per-head width of queries and keys (d_k); default d_model / n_heads",
    )
    d_value: int = Field(
        default_factory=lambda data: data.get("d_head", 1),
        ge=1,
        description="per-head width of values (d_v); default d_head",
    )
    n_kv_heads: int = Field(
        default_factory=lambda data: data.get("n_heads", 1),
        ge=1,
        description="key/value heads (grouped-query attention); default n_heads",
    )
    d_ff: int = Field(
        default_factory=lambda data: 4 * data["d_model"] if isinstance(data.get("d_model"), int) else 1,
        ge=1,
        description="MLP hidden width (for gated activations, each input projection's width); default 4 * d_model",
    )
    max_positions: int = Field(ge=1, description="context length: rows of a learned position table")
    position: Position = Field(default_factory=LearnedPosition.model_construct, description="position information")
    norm: Norm = Field("layernorm", description="LayerNorm (weight and bias) or RMSNorm (weight)")
    norm_affine: NormAffine = Field(
        default_factory=lambda data: NORM_AFFINE.get(data.get("norm", "layernorm"), "weight_bias"),
        description="the parameters of every norm: weight_bias, weight (LayerNorm without bias: Cohere, OLMo 2, "
        "ModernBERT) or none (OLMo 1); default weight_bias for layernorm, weight for rmsnorm",
    )
    norm_position: NormPosition = Field(
        "pre",
        description="pre: x + f(N(x)); post: N(x + f(x)); sandwich: x + N2(f(N1(x))) (Gemma 2); "
        "post_sublayer: x + N(f(x)) (OLMo 2)",
    )
    attention_norm: bool = Field(
        True,
        description="a pre-norm before the token mixer (attention or recurrent mixer); false: the mixer reads the "
        "residual stream itself (ModernBERT's first layer, whose input is the embedding norm's output)",
    )
    final_norm: bool = Field(
        default_factory=lambda data: data.get("norm_position", "pre") != "post",
        description="a norm after the last block of each stack; default true for pre and sandwich, false for post",
    )
    activation: Activation = Field(
        "gelu",
        description="MLP activation; swiglu, geglu and clamped_swiglu are gated; relu2 is squared ReLU (Nemotron-H); "
        "clamped_swiglu is gpt-oss's (up + 1) * gate * sigmoid(1.702 gate), both clamped to swiglu_limit",
    )
    swiglu_limit: float = Field(7.0, gt=0, strict=False, description="the clamp of clamped_swiglu (gpt-oss: 7)")
    bias: bool | Biases = Field(
        True, description="biases on attention and MLP linear layers: true, false, or a table {qkv, out, mlp}"
    )
    tie_embeddings: bool = Field(
        True, description="the output projection reuses the token embedding (encoder-decoder: all three)"
    )
    share_embeddings: bool = Field(
        default_factory=lambda data: data.get("tie_embeddings", True),
        description="encoder-decoder: source and target share one token table; default tie_embeddings "
        "(T5 v1.1: shared tables, untied head)",
    )
    type_vocab_size: int = Field(0, ge=0, description="rows of a token-type (segment) table (BERT: 2)")
    embedding_norm: bool = Field(False, description="a norm right after the summed embeddings (BERT)")
    pooler: bool = Field(False, description="a d_model x d_model dense layer with bias over the first token (BERT)")
    head: Head = Field(
        default_factory=LMHead.model_construct,
        description='the output head: "lm" (d_model -> vocab_size, tied or not), "mlm" (BERT\'s masked-LM head), '
        '"discriminator" (ELECTRA\'s one logit per token) or "none" (hidden states out)',
    )
    block: Block = Field(
        default_factory=SequentialBlock.model_construct, description="sequential, or parallel attention and MLP"
    )
    attention: Attention = Field(
        default_factory=StandardAttention.model_construct,
        description="standard (multi-head, grouped-query) or latent (DeepSeek)",
    )
    mlp: MLP = Field(default_factory=DenseMLP.model_construct, description="dense, or a mixture of experts")
    embedding: Embedding = Field(
        default_factory=Embedding.model_construct, description="factorised embeddings (ALBERT: d_embed)"
    )
    share_layers: bool = Field(False, description="one block's parameters serve every layer of a stack (ALBERT)")
    norm_eps: float = Field(
        default_factory=lambda data: NORM_EPS.get(data.get("norm", "layernorm"), 1e-5),
        gt=0,
        strict=False,  # an integer epsilon (1) is a number too
        description="epsilon of every norm; default 1e-5 for layernorm, 1e-6 for rmsnorm (LLaMA 2/3 use 1e-5)",
    )
    embedding_scale: EmbeddingScale | float = Field(
        default_factory=lambda data: (
            "sqrt_d_model" if data.get("encoder_layers") and data.get("decoder_layers") else "none"
        ),
        description="token embeddings multiplied by sqrt(d_model) (Vaswani et al. 2017, 3.4; Gemma) or by a number "
        "(Granite's embedding_multiplier); default sqrt_d_model for an encoder-decoder, none otherwise",
    )
    residual_scale: float = Field(
        1.0,
        gt=0,
        strict=False,
        description="each sub-layer's output multiplied by this before its residual add "
        "(Granite's residual_multiplier)",
    )
    kinds: dict[str, LayerKind] = Field(
        default_factory=dict, description="named layer kinds, each changing parts of the defaults above"
    )
    layers: Layers | None = Field(None, description="the kind of each layer: a prefix, then a repeating pattern")
    mtp: MTP | None = Field(None, description="multi-token-prediction modules (counted only when asked)")
    init: Init = Field(
        default_factory=lambda data: "xavier" if data.get("encoder_layers") and data.get("decoder_layers") else "gpt2",
        description="initialisation of the reference model: gpt2 (N(0, 0.02), scaled residual projections) or "
        "xavier (nn.Transformer); default xavier for an encoder-decoder, gpt2 otherwise",
    )

    @model_validator(mode="wrap")
    @classmethod
    def _only_the_wrong_fields(cls, data: Any, handler: Any) -> ModelSpec:
        """One bad field, one error: a derived default whose inputs failed (pydantic's
        default_factory_not_called) is a consequence, not a second problem, so it is left out."""
        from pydantic import ValidationError

        try:
            return handler(data)
        except ValidationError as err:
            errors = err.errors(include_url=False)
            causes = [e for e in errors if e["type"] != "default_factory_not_called"]
            if not causes or len(causes) == len(errors):
                raise
            try:
                filtered = ValidationError.from_exception_data(err.title, causes)  # type: ignore[arg-type]
            except (TypeError, KeyError, ValueError):  # an error pydantic cannot rebuild: all of them, then
                raise err from None
            raise filtered from None

    @model_validator(mode="after")
    def _check_consistency(self) -> ModelSpec:
        given = self.model_fields_set
        if self.encoder_layers == 0 and self.decoder_layers == 0:
            raise ValueError(
                "encoder_layers and decoder_layers are both 0; set at least one of them to a positive number"
            )
        if "d_head" not in given and self.d_model % self.n_heads:
            raise ValueError(
                f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}; "
                "change one of them or set d_head explicitly"
            )
        if self.n_heads % self.n_kv_heads:
            raise ValueError(
                f"n_heads={self.n_heads} is not divisible by n_kv_heads={self.n_kv_heads}; "
                "n_kv_heads must divide n_heads"
            )
        if self.position.kind == "sinusoidal" and self.d_model % 2:
            raise ValueError(f"sinusoidal positions need an even d_model, got d_model={self.d_model}")
        if self.position.kind == "rotary" and self.position.proportional:
            if self.position.interleaved:
                raise ValueError(
                    "position.proportional turns pairs of the two halves; it excludes position.interleaved"
                )
            if self.attention.kind == "latent":
                raise ValueError("position.proportional is for standard attention, not attention kind 'latent'")
        if self.position.kind == "rotary" and (self.rotary_dims % 2 or self.rotary_dims < 2):
            if self.position.fraction == 1:
                raise ValueError(f"rotary positions need an even d_head, got d_head={self.d_head}")
            raise ValueError(
                f"rotary positions need an even rotated width of at least 2, got d_head={self.d_head} x "
                f"position.fraction={self.position.fraction} = {self.d_head * self.position.fraction:g}"
            )
        if self.position.kind == "disentangled":
            if self.decoder_layers or self.attention.kind != "standard":
                raise ValueError("disentangled positions (DeBERTa) are for an encoder of standard attention; set "
                                 "decoder_layers=0")  # fmt: skip
            if self.n_kv_heads != self.n_heads:
                raise ValueError(f"disentangled positions project the table to every head: n_kv_heads="
                                 f"{self.n_kv_heads} must equal n_heads={self.n_heads}")  # fmt: skip
            if not (self.position.c2p or self.position.p2c):
                raise ValueError("disentangled positions need position.c2p or position.p2c (or use position='none')")
        if self.pooler and self.encoder_layers == 0:
            raise ValueError("pooler=true needs an encoder (encoder_layers > 0)")
        if self.block.kind == "parallel" and self.encoder_layers and self.decoder_layers:
            raise ValueError("block kind 'parallel' has no place for cross-attention; use it without an encoder")
        if self.block.kind == "parallel" and self.norm_position != "pre":
            raise ValueError(f"block kind 'parallel' needs norm_position='pre', got {self.norm_position!r}")
        a = self.attention
        if a.kind == "latent":
            if self.encoder_layers:
                raise ValueError("latent attention is a decoder-only feature; set encoder_layers=0")
            if self.n_kv_heads != self.n_heads:
                raise ValueError(f"latent attention has n_kv_heads = n_heads; got n_kv_heads={self.n_kv_heads}")
            if a.rope_dims >= self.d_head or a.rope_dims % 2:
                raise ValueError(
                    f"attention.rope_dims={a.rope_dims} must be even and smaller than d_head={self.d_head} "
                    "(d_head = the no-rope width + rope_dims)"
                )
            if self.position.kind != "rotary":
                raise ValueError("latent attention rotates its decoupled part: set position='rotary'")
            if a.indexer is not None and not a.q_rank:
                raise ValueError("attention.indexer reads the query latent: it needs attention.q_rank")
            if a.indexer is not None and a.indexer.d_head < a.rope_dims:
                raise ValueError(
                    f"attention.indexer.d_head={a.indexer.d_head} is narrower than attention.rope_dims={a.rope_dims}, "
                    "the part of each indexer head it rotates"
                )
        m = self.mlp
        if m.kind == "moe":
            if m.top_k > m.experts:
                raise ValueError(f"mlp.top_k={m.top_k} is more than mlp.experts={m.experts}")
            if m.dense_layers > max(self.encoder_layers, self.decoder_layers):
                raise ValueError(f"mlp.dense_layers={m.dense_layers} is more than the stack has layers")
            if m.shared_gate and not m.d_shared:
                raise ValueError("mlp.shared_gate=true needs a shared expert (mlp.d_shared > 0)")
            if m.d_dense and self.norm_position != "sandwich":
                raise ValueError(
                    f"mlp.d_dense (Gemma 4's dense MLP beside the experts) needs norm_position='sandwich', "
                    f"not {self.norm_position!r}"
                )
        if self.embedding.d_embed not in (None, self.d_model):
            if self.encoder_layers and self.decoder_layers:
                raise ValueError(
                    "embedding.d_embed (factorised embeddings) is for one stack; this is an encoder-decoder"
                )
            if self.head.kind == "lm" and self.tie_embeddings:
                raise ValueError(
                    "a tied lm head needs embedding tables d_model wide, not "
                    f"embedding.d_embed={self.embedding.d_embed}"
                )
        if self.head.kind == "discriminator" and self.tie_embeddings:
            raise ValueError("head kind 'discriminator' has no vocabulary projection to tie: set tie_embeddings=false")
        if self.head.kind == "mlm" and not self.tie_embeddings:
            raise ValueError("head kind 'mlm' decodes with the token table: it needs tie_embeddings=true")
        if self.share_layers and self.mlp.kind == "moe" and self.mlp.dense_layers:
            raise ValueError("share_layers=true needs every layer alike; mlp.dense_layers makes them differ")
        self._check_features()
        self._check_kinds()
        return self

    def _check_features(self) -> None:
        """The block features of 2025-2026 models, each against the fields it needs."""
        if self.norm == "rmsnorm" and self.norm_affine == "weight_bias":
            raise ValueError("norm_affine='weight_bias' needs norm='layernorm'; RMSNorm has no bias")
        if self.swiglu_limit != 7.0 and self.activation != "clamped_swiglu":
            raise ValueError(f"swiglu_limit is the clamp of activation='clamped_swiglu', not of {self.activation!r}")
        if not self.attention_norm and (self.norm_position != "pre" or self.block.kind != "sequential"):
            raise ValueError(
                "attention_norm=false (no norm before the token mixer) needs norm_position='pre' and a sequential "
                f"block, not norm_position={self.norm_position!r} with block kind {self.block.kind!r}"
            )
        if self.norm_position == "post_sublayer" and self.block.kind == "parallel":
            raise ValueError("norm_position='post_sublayer' is for sequential blocks, not block kind 'parallel'")
        a = self.attention
        if a.kind == "standard":
            if a.shared_kv and self.d_value != self.d_head:
                raise ValueError(
                    f"attention.shared_kv=true needs d_value = d_head, got {self.d_value} and {self.d_head}"
                )
            if a.chunk and a.sliding_window:
                raise ValueError("attention.chunk and attention.sliding_window exclude each other; set one of them")
            if a.ssm is not None:
                if self.encoder_layers:
                    raise ValueError("attention.ssm (a Mamba-2 mixer beside the attention) is for decoder layers; "
                                     "set encoder_layers=0")  # fmt: skip
                if self.block.kind == "parallel":
                    raise ValueError("attention.ssm runs beside the attention in the mixer sub-layer; it needs block "
                                     "kind 'sequential', not 'parallel'")  # fmt: skip
                _check_mamba2(a.ssm, "attention.ssm")
        elif a.kind in MIXERS or a.kind == "none":
            if self.encoder_layers:
                raise ValueError(f"attention kind {a.kind!r} is for decoder layers; set encoder_layers=0")
            if a.kind == "gated_deltanet" and a.value_heads % a.key_heads:
                raise ValueError(
                    f"attention.value_heads={a.value_heads} is not a multiple of attention.key_heads={a.key_heads}"
                )
            if a.kind == "mamba2":
                _check_mamba2(a, "attention")
        if a.kind == "none" and self.mlp.kind == "none":
            raise ValueError("a layer with attention='none' and mlp='none' does nothing; give it one of them")
        if self.mtp is not None and self.kind != "decoder-only":
            raise ValueError("mtp (multi-token prediction) is a decoder-only feature; set encoder_layers=0")
        if self.mtp is not None and self.mtp.kind is not None and self.mtp.kind not in self.kinds:
            raise ValueError(f"mtp.kind={self.mtp.kind!r} is not one of the kinds{_names(self.kinds)}")

    def _check_kinds(self) -> None:
        """Layer kinds and the pattern that places them; every kind is validated as the spec it makes."""
        if not self.kinds and self.layers is None:
            return
        if self.layers is None:
            raise ValueError("kinds are placed by [layers]: give layers.pattern (and layers.prefix) with their names")
        unknown = [k for k in (*self.layers.prefix, *self.layers.pattern) if k not in self.kinds]
        if unknown:
            raise ValueError(f"layers names kind {unknown[0]!r}, which is not one of the kinds{_names(self.kinds)}")
        used = {*self.layers.prefix, *self.layers.pattern}
        unused = [k for k in self.kinds if k not in used]
        if unused:
            raise ValueError(f"kinds.{unused[0]} is never used: layers.prefix and layers.pattern do not name it")
        for stack, depth in (("encoder_layers", self.encoder_layers), ("decoder_layers", self.decoder_layers)):
            fit = len(self.layers.prefix) + len(self.layers.pattern)
            if depth and fit > depth:
                raise ValueError(
                    f"layers.prefix and layers.pattern name {fit} layers, more than {stack}={depth}; the pattern "
                    "repeats over the stack and must fit in it"
                )
        if (
            self.attention.kind == "standard"
            and self.attention.sliding_window
            and self.attention.sliding_layers != "all"
        ):
            raise ValueError(
                "attention.sliding_layers places windows by parity; with [layers], give the window to a kind"
            )
        if self.mlp.kind == "moe" and self.mlp.dense_layers:
            raise ValueError("mlp.dense_layers places dense layers first; with [layers], give them a kind of their own")
        if self.share_layers and len(self.kinds) > 1:
            raise ValueError("share_layers=true needs every layer alike; [layers] gives them different kinds")
        for name, kind in self.kinds.items():
            if not re.fullmatch(r"[a-z0-9][a-z0-9_-]*", name):
                raise ValueError(f"kind name {name!r} must be lowercase letters, digits, '_' or '-'")
            try:
                spec = type(self).model_validate(self._kind_data(name))
            except ValidationError as err:
                first = err.errors()[0]
                where = ".".join(str(x) for x in first["loc"] if not str(x).startswith(("function-", "tagged-")))
                msg = first["msg"].removeprefix("Value error, ")
                raise ValueError(f"kinds.{name}: {where + ': ' if where else ''}{msg}") from None
            if kind.position is not None and spec.position.kind not in ("rotary", "none"):
                raise ValueError(
                    f"kinds.{name}.position: a kind may set rotary options or 'none', not {spec.position.kind!r}"
                )
            if kind.position is not None and self.position.kind not in ("rotary", "none"):
                raise ValueError(
                    f"kinds.{name}.position: the model's {self.position.kind!r} positions are added to the embeddings "
                    "for every layer; a kind can change rotary positions only"
                )

    def _kind_data(self, name: str) -> dict[str, Any]:
        """The fields of the spec that layers of kind `name` see: the model's, with the kind's changes."""
        data: dict[str, Any] = {
            k: getattr(self, k) for k in self.model_fields_set if k not in ("kinds", "layers", "mtp")
        }
        kind = self.kinds[name]
        for f in KIND_FIELDS:
            value = getattr(kind, f)
            if value is None:
                continue
            data[f] = _merged(getattr(self, f), value) if f in SUBTABLES else value
        return data

    @cached_property
    def _kind_specs(self) -> dict[str, ModelSpec]:
        # valid by construction: _check_kinds validated each kind's data with the spec (or, for the
        # trusted presets, the tests did)
        return {name: type(self).construct_trusted(self._kind_data(name)) for name in self.kinds}

    def kind_spec(self, name: str) -> ModelSpec:
        """The spec that layers of kind `name` see (the model's fields with the kind's changes)."""
        return self._kind_specs[name]

    # ---- derived views (never stored twice) ----

    @property
    def kind(self) -> Kind:
        if self.encoder_layers and self.decoder_layers:
            return "encoder-decoder"
        return "encoder-only" if self.encoder_layers else "decoder-only"

    @property
    def n_layers(self) -> int:
        return self.encoder_layers + self.decoder_layers

    @property
    def gated(self) -> bool:
        return self.activation in GATED_ACTIVATIONS

    @property
    def biases(self) -> Biases:
        """The biases per projection, from `bias = true/false` or its table."""
        if isinstance(self.bias, Biases):
            return self.bias
        return Biases.model_construct(qkv=self.bias, out=self.bias, mlp=self.bias)  # valid by construction

    @property
    def rotary_dims(self) -> int:
        """Width of each head that rotary positions rotate (0 without rotary positions)."""
        if self.position.kind != "rotary":
            return 0
        return int(self.d_head * self.position.fraction)

    @property
    def d_embed(self) -> int:
        """Width of the embedding tables: embedding.d_embed, or d_model."""
        return self.embedding.d_embed or self.d_model

    @classmethod
    def construct_trusted(cls, data: dict[str, Any]) -> ModelSpec:
        """A spec from data already known to be valid (the packaged presets, which the tests validate),
        without building the validator: sub-tables are built from their `kind`, nothing is checked."""
        data = dict(data)
        for name, members in SUBTABLES.items():
            if name in data and not isinstance(data[name], _Member):
                table = _shorthand(data[name], next(iter(members)))
                nested = {k: NESTED[k].model_construct(**v) for k, v in table.items()
                          if k in NESTED and isinstance(v, dict)}  # fmt: skip
                data[name] = members[table["kind"]].model_construct(**{**table, **nested})
        for name, table_type in TABLES.items():
            if isinstance(data.get(name), dict):
                data[name] = table_type.model_construct(**data[name])
        if isinstance(data.get("kinds"), dict):  # a table of tables: each kind's overrides stay as written
            data["kinds"] = {k: LayerKind.model_construct(**v) if isinstance(v, dict) else v
                             for k, v in data["kinds"].items()}  # fmt: skip
        return cls.model_construct(**data)

    def replace(self, **changes: Any) -> ModelSpec:
        """A new spec with `changes`, validated again; derived defaults are re-derived. A dotted key
        changes one field of a sub-table (`**{"mlp.top_k": 1}`, `**{"position.base": 5e5}`); naming a
        new kind (`**{"mlp.kind": "moe"}`) starts that kind's table from its defaults."""
        data: dict[str, Any] = {k: getattr(self, k) for k in self.model_fields_set}
        for key, value in changes.items():
            table, dot, field = key.partition(".")
            if not dot:
                data[key] = value
                continue
            current = data.get(table, getattr(self, table, None))
            if isinstance(current, _Table):
                current = {f: getattr(current, f) for f in type(current).model_fields}
            elif isinstance(current, str):
                current = {"kind": current}
            elif not isinstance(current, dict):
                current = {}  # `bias = true` becomes a table of its own
            if field == "kind" and current.get("kind") != value:
                current = {}
            data[table] = {**current, field: value}
        from pydantic import ValidationError

        try:
            return type(self).model_validate(data)
        except ValidationError as err:  # the API's one error type for bad input, on one line
            from archspec.errors import SpecError, describe_validation_error

            raise SpecError(describe_validation_error(err)) from None

    def resolved(self) -> dict[str, Any]:
        """Every field with its value, defaults resolved, in the table's order."""
        return self.model_dump()

    def given(self) -> dict[str, Any]:
        """Only the fields that were set explicitly."""
        return {k: getattr(self, k) for k in type(self).model_fields if k in self.model_fields_set}
