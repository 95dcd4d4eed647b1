"""The spec's sub-tables: each feature that brings fields of its own, as a small typed model.

Positions, blocks, attention and the recurrent mixers, the MLP and mixtures of experts, factorised
embeddings, output heads, and the tables of layer kinds (``kinds``, ``layers``, ``mtp``). Each union
member is discriminated by its ``kind``; ``SUBTABLES`` lists them per spec field. The model that
holds them, its validation and its derived views are ``archspec.spec.ModelSpec``, which re-exports
every name here (``from archspec.spec import StandardAttention`` keeps working).
"""

# Annotations are objects, not strings (no `from __future__ import annotations`): pydantic evaluates
# every string annotation when the class is defined, at every start-up.
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_serializer, model_validator

QKNorm = Literal["head", "full", "l2"]

# ---------------------------------------------------------------- sub-tables
#
# A feature that brings fields of its own is a small typed model, one member of a union that a
# `kind` tag discriminates (`head = {kind = "lm", bias = true}`). Each checks its own fields; the
# rules that reach across tables are archspec.spec.ModelSpec's. A bare string names a member
# with its defaults (`head = "none"` is `head = {kind = "none"}`), so a flat field can grow into a
# table without breaking any file that used the string; a member with nothing but defaults is
# written back as that string. New kinds are new members, not new flags.


class _Table(BaseModel):
    # defer_build: each validator is built on first validation, not at import (see ModelSpec)
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

    @model_validator(mode="after")
    def _check(self) -> "RotaryPosition":
        if self.proportional and self.interleaved:
            raise ValueError("proportional turns pairs of the two halves; it excludes interleaved")
        return self


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

    @model_validator(mode="after")
    def _check(self) -> "DisentangledPosition":
        if not (self.c2p or self.p2c):
            raise ValueError("disentangled positions need c2p or p2c (or use position='none')")
        return self


class TransformerXLPosition(_Member):
    """Transformer-XL's relative positional attention (Dai et al. 2019, section 3.3; Gopher and Chinchilla, Rae
    et al. 2021 section 3): no position is added to the embeddings; each layer projects sinusoidal encodings of
    the relative distances (d_model wide, one row per distance to every key) with a projection of its own,
    W_r (d_model -> n_heads * d_head, no bias), and scores a query against key j as
    (q + u) . k_j + (q + v) . W_r R_(i - j), the second term brought to its distance by the relative shift.
    u and v (n_heads x d_head) are learned: one pair in every layer (Transformer-XL's untie_r), or one pair
    shared by the stack's layers (the paper's equations)."""

    kind: Literal["transformer_xl"] = "transformer_xl"
    per_layer: bool = Field(
        True,
        description="every layer has its own u and v (Transformer-XL's untie_r; Gopher, whose printed counts hold "
        "them per layer); false: one pair per stack, shared by its layers (Dai et al. 2019's equations)",
    )


class NoPosition(_Member):
    kind: Literal["none"] = "none"


Position = _union(
    LearnedPosition,
    SinusoidalPosition,
    RotaryPosition,
    AlibiPosition,
    RelativePosition,
    DisentangledPosition,
    TransformerXLPosition,
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

    @model_validator(mode="after")
    def _check(self) -> "Mamba2Mixer":
        if self.heads % self.groups:
            raise ValueError(f"groups={self.groups} does not divide heads={self.heads}")
        if self.dt_max is not None and self.dt_max < self.dt_min:
            raise ValueError(f"dt_max={self.dt_max} is below dt_min={self.dt_min}")
        return self


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

    @model_validator(mode="after")
    def _check(self) -> "StandardAttention":
        if self.chunk and self.sliding_window:
            raise ValueError("chunk and sliding_window exclude each other; set one of them")
        return self


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

    @model_validator(mode="after")
    def _check(self) -> "LatentAttention":
        if self.indexer is not None and not self.q_rank:
            raise ValueError("indexer reads the query latent: it needs q_rank")
        if self.indexer is not None and self.indexer.d_head < self.rope_dims:
            raise ValueError(f"indexer.d_head={self.indexer.d_head} is narrower than rope_dims={self.rope_dims}, "
                             "the part of each indexer head it rotates")  # fmt: skip
        return self


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

    @model_validator(mode="after")
    def _check(self) -> "GatedDeltaNet":
        if self.value_heads % self.key_heads:
            raise ValueError(f"value_heads={self.value_heads} is not a multiple of key_heads={self.key_heads}")
        return self


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

    @model_validator(mode="after")
    def _check(self) -> "MoEMLP":
        if self.top_k > self.experts:
            raise ValueError(f"top_k={self.top_k} is more than experts={self.experts}")
        if self.shared_gate and not self.d_shared:
            raise ValueError("shared_gate=true needs a shared expert (d_shared > 0)")
        return self


class NoMLP(_Member):
    """No MLP: the layer is its mixer alone (Nemotron-H, Mamba-2 stacks)."""

    kind: Literal["none"] = "none"


MLP = _union(DenseMLP, MoEMLP, NoMLP)


class Embedding(_Table):
    """Factorised embeddings: a token table d_embed wide and a d_embed -> d_model projection. ALBERT's: the
    position and token-type tables and their norm d_embed wide too, summed before the projection, which has
    a bias. OPT-350M's (word_embed_proj_dim): project_in without a bias, learned positions d_model wide added
    after it, and project_out (d_model -> d_embed, no bias) after the last layer, so that the head, tied or
    not, reads d_embed values."""

    d_embed: int | None = Field(None, ge=1, description="width of the token table (absent: d_model)")
    projection_bias: bool = Field(
        True, description="biases on the projections in (and out): ALBERT's has one, OPT's project_in none"
    )
    project_out: bool = Field(
        False,
        description="a d_model -> d_embed projection after the last layer (OPT's project_out): the head, tied or "
        "not, reads d_embed values",
    )
    position_width: Literal["d_embed", "d_model"] = Field(
        "d_embed",
        description="where positions (and the embedding norm) join: d_embed, on the tables before the projection "
        "(ALBERT); d_model, after it (OPT's learned positions, hidden_size wide)",
    )


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

# field -> {kind: member}: every sub-table field of the spec (error messages, sweeps, layer kinds)
SUBTABLES: dict[str, dict[str, type[_Member]]] = {
    "position": {m.model_fields["kind"].default: m for m in (LearnedPosition, SinusoidalPosition, RotaryPosition,
                                                             AlibiPosition, RelativePosition, DisentangledPosition,
                                                             TransformerXLPosition, NoPosition)},
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


TABLES: dict[str, type[_Table]] = {"bias": Biases, "embedding": Embedding, "layers": Layers, "mtp": MTP}
