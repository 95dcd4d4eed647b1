"""The spec's sub-tables: each feature that brings fields of its own, as a small typed model.

Positions, blocks, attention and the recurrent mixers, the MLP and mixtures of experts, factorised
embeddings, output heads, and the tables of layer kinds (``kinds``, ``layers``, ``mtp``); the token
mixer's members are archspec.spec.mixer_tables', their base archspec.spec.table's. Each union
member is discriminated by its ``kind``; ``SUBTABLES`` lists them per spec field. The model that
holds them, its validation and its derived views are ``archspec.spec.model.ModelSpec``, which re-exports
every name here (``from archspec.spec.model import StandardAttention`` keeps working).
"""

# Annotations are objects, not strings (no `from __future__ import annotations`): pydantic evaluates
# every string annotation when the class is defined, at every start-up.
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field, PlainSerializer, model_serializer, model_validator

# the token mixer's members live in archspec.spec.mixer_tables, re-exported here
from archspec.spec.mixer_tables import (
    BOTH_NAMES,
    MIXERS,
    Attention,
    GatedDeltaNet,
    Indexer,
    LatentAttention,
    Mamba2Mixer,
    MambaMixer,
    Mixer,
    NoMixer,
    QKNorm,
    StandardAttention,
    newer_key,
    newer_names,
)
from archspec.spec.table import _Member, _shorthand, _Table, _union

__all__ = [
    "KIND_FIELDS", "MIXERS", "MLP", "MTP", "SUBTABLES", "TABLES", "AlibiPosition", "Attention", "Biases", "Block",
    "DenseMLP", "DiscriminatorHead", "FrozenDict", "DisentangledPosition", "Embedding", "GatedDeltaNet", "Head",
    "Indexer", "LatentAttention", "LayerKind", "Layers", "LearnedPosition", "LMHead", "Mamba2Mixer", "MambaMixer",
    "Mixer", "MLMHead",
    "MoEMLP", "NoHead", "NoMixer", "NoMLP", "NoPosition", "Override", "ParallelBlock", "Position", "QKNorm",
    "RelativePosition", "RotaryPosition", "SequentialBlock", "SinusoidalPosition", "StandardAttention",
    "TransformerXLPosition", "_Member", "_Table", "_shorthand", "_union", "BOTH_NAMES", "freeze", "newer_key",
    "newer_names",
]  # fmt: skip


class FrozenDict(dict):
    """A dict no caller can change: a spec's tables (kinds, a kind's overrides) are as frozen as the spec
    that holds them, so a spec shared by every caller (archspec.preset) stays what it was."""

    __slots__ = ()

    def _refuse(self, *args, **kwargs):
        raise TypeError("a spec is frozen, its tables too: spec.replace(...) gives a changed copy")

    __setitem__ = __delitem__ = __ior__ = clear = pop = popitem = setdefault = update = _refuse

    def __hash__(self) -> int:
        return hash(frozenset(self.items()))

    def __reduce__(self):  # copy, deepcopy and pickle rebuild it whole, never item by item
        return (type(self), (dict(self),))


def freeze(value: Any) -> Any:
    """`value` with every list a tuple and every dict a FrozenDict, all the way down."""
    if isinstance(value, dict):
        return FrozenDict({k: freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(freeze(v) for v in value)
    return value


# a list of names in a file, held as a tuple; written back as a list
Names = Annotated[tuple[str, ...], BeforeValidator(lambda v: tuple(v) if isinstance(v, list) else v),
                  PlainSerializer(list)]  # fmt: skip


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
    "mixer": {"standard": StandardAttention, "latent": LatentAttention, "mamba": MambaMixer,
                  "mamba2": Mamba2Mixer, "gated_deltanet": GatedDeltaNet, "none": NoMixer},
    "mlp": {"dense": DenseMLP, "moe": MoEMLP, "none": NoMLP},
    "head": {"lm": LMHead, "mlm": MLMHead, "discriminator": DiscriminatorHead, "none": NoHead},
}  # fmt: skip


# -- layer kinds (heterogeneous stacks)

KIND_FIELDS = ("mixer", "mlp", "position", "n_heads", "n_kv_heads", "d_head", "d_value", "d_ff", "attention_norm")
Override = Annotated[str | dict[str, Any], AfterValidator(freeze),
                     Field(description="a kind name, or a table of the fields to change")]  # fmt: skip


class LayerKind(_Table):
    """One kind of layer: the parts of the model's defaults it changes. A table overrides only the
    fields it names (`mixer = {sliding_window = 512}` keeps the model's other mixer fields);
    naming another kind (`mixer = "mamba2"` or `{kind = "mamba2", ...}`) starts from that kind's
    defaults. Everything else comes from the model. `attention` is read as `mixer`, its older name."""

    mixer: Override | None = Field(
        None, description="the token mixer: attention (its options) or a recurrent mixer (older name: attention)"
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

    @model_validator(mode="before")
    @classmethod
    def _older_names(cls, data: Any) -> Any:
        return newer_names(data)

    @property
    def attention(self) -> Any:
        """The token mixer's change under its older name: the same as `mixer`."""
        return self.mixer

    @model_serializer(mode="wrap")
    def _only_changes(self, handler):
        """A kind is written as the fields it changes."""
        return {k: v for k, v in handler(self).items() if v is not None}


class Layers(_Table):
    """Which kind each layer of a stack has: the `prefix` kinds for its first layers, then `pattern`
    repeated over the rest (cut short at the stack's end). A pattern as long as the stack is an
    explicit per-layer list."""

    prefix: Names = Field(default_factory=tuple, description="kinds of the first layers, in order")
    pattern: Names = Field(min_length=1, description="kinds repeated over the remaining layers")

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
