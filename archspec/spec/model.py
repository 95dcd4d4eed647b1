"""The declarative model spec: one frozen, validated pydantic model per architecture.

Field names are a public file format (see docs/architecture.md). Fields whose default depends on other
fields (``d_head``, ``d_value``, ``n_kv_heads``, ``d_ff``, ``final_norm``) are resolved from the
validated data when they are not given; a given value is never rewritten. ``replace`` rebuilds a
spec from the fields that were given plus the changes, so derived defaults follow the change.
The sub-tables it holds (positions, attention and mixers, MLP, heads, layer kinds) are defined in
``archspec.spec.subtables`` and re-exported here.
"""

# Annotations are objects, not strings (no `from __future__ import annotations`): pydantic evaluates
# every string annotation when the class is defined, at every start-up.
import math
from collections.abc import Mapping
from functools import cached_property
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from archspec.core.errors import SpecError, describe_validation_error
from archspec.core.limits import MAX_KINDS, too_many_kinds
from archspec.core.vocab import GATED_ACTIVATIONS, ActivationName
from archspec.spec.replace import _plain_fields, fast_replace, replaced
from archspec.spec.rules import check_spec

# the sub-tables live in archspec.spec.subtables; every name is re-exported here, the spec's one import path
from archspec.spec.subtables import (
    BOTH_NAMES,
    KIND_FIELDS,
    MIXERS,
    MLP,
    MTP,
    SUBTABLES,
    TABLES,
    AlibiPosition,
    Attention,
    Biases,
    Block,
    DenseMLP,
    DiscriminatorHead,
    DisentangledPosition,
    Embedding,
    FrozenDict,
    GatedDeltaNet,
    Head,
    Indexer,
    LatentAttention,
    LayerKind,
    Layers,
    LearnedPosition,
    LMHead,
    Mamba2Mixer,
    MambaMixer,
    Mixer,
    MLMHead,
    MoEMLP,
    NoHead,
    NoMixer,
    NoMLP,
    NoPosition,
    Override,
    ParallelBlock,
    Position,
    QKNorm,
    RelativePosition,
    RotaryPosition,
    SequentialBlock,
    SinusoidalPosition,
    StandardAttention,
    TransformerXLPosition,
    _Member,
    _shorthand,
    _Table,
    newer_key,
    newer_names,
)

__all__ = [
    "GATED_ACTIVATIONS", "KIND_FIELDS", "MIXERS", "MLP", "MTP", "NORM_AFFINE", "NORM_EPS", "SUBTABLES",
    "TABLES", "Activation", "AlibiPosition", "Attention", "Biases", "Block", "DenseMLP", "DisentangledPosition",
    "DiscriminatorHead", "Embedding", "EmbeddingScale", "GatedDeltaNet", "Head", "Indexer", "Init", "Kind",
    "LatentAttention", "LayerKind", "LearnedPosition", "Layers", "LMHead", "Mamba2Mixer", "MambaMixer", "Mixer",
    "MLMHead", "ModelSpec", "MoEMLP", "NoHead", "NoMixer", "NoMLP", "NoPosition", "Norm", "NormAffine", "NormPosition",
    "Override", "ParallelBlock", "Position", "QKNorm", "RelativePosition", "RotaryPosition", "SequentialBlock",
    "SinusoidalPosition", "StandardAttention", "TransformerXLPosition",
]  # fmt: skip

Norm = Literal["layernorm", "rmsnorm"]
NormAffine = Literal["weight_bias", "weight", "none"]
NormPosition = Literal["pre", "post", "sandwich", "post_sublayer"]
Activation = ActivationName  # archspec.core.vocab.ACTIVATIONS: one table of what each is
Kind = Literal["decoder-only", "encoder-only", "encoder-decoder"]

EmbeddingScale = Literal["none", "sqrt_d_model"]
Init = Literal["gpt2", "xavier"]

NORM_AFFINE = {"layernorm": "weight_bias", "rmsnorm": "weight"}  # each norm's default parameters
NORM_EPS = {"layernorm": 1e-5, "rmsnorm": 1e-6}  # GPT-2 and nn.Transformer; LLaMA 1


def _merged(base: Any, override: str | dict[str, Any]) -> dict[str, Any]:
    """A sub-table with a kind's changes: `override` names fields to change, or another kind to start
    from (its defaults); `base` is the model's member."""
    table = _shorthand(override)
    fields = {f: getattr(base, f) for f in type(base).model_fields} if isinstance(base, _Member) else _shorthand(base)
    if "kind" in table and table["kind"] != fields.get("kind"):
        return dict(table)
    return {**fields, **table}


def _whole(x: Any) -> bool:
    """An int, or a whole number archspec.tracing records (a kind's derived defaults are recorded too)."""
    return isinstance(x, int) or getattr(x, "archspec_whole", False)


def _quotient(data: dict[str, Any], num: str, den: str) -> int:
    """d_model // n_heads for a default; the divisibility check lives in the validator."""
    n, d = data.get(num), data.get(den)
    if _whole(n) and _whole(d) and d > 0:
        return max(n // d, 1)
    return 1


class ModelSpec(BaseModel):
    """A Transformer architecture, as the counter and the reference builder both read it."""

    # defer_build: the validator is built on first validation, not at import (`archspec list` and
    # `--help` validate nothing)
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
        default_factory=lambda data: 4 * data["d_model"] if _whole(data.get("d_model")) else 1,
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
    mixer: Mixer = Field(
        default_factory=StandardAttention.model_construct,
        description="the token mixer: standard (multi-head, grouped-query) or latent (DeepSeek) attention, a "
        "recurrent mixer (mamba, mamba2, gated_deltanet) or none; files may call it attention, its older name",
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
    kinds: Annotated[dict[str, LayerKind], AfterValidator(FrozenDict)] = Field(
        default_factory=FrozenDict, description="named layer kinds, each changing parts of the defaults above"
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
    def _only_the_wrong_fields(cls, data: Any, handler: Any) -> "ModelSpec":
        """One bad field, one error: a derived default whose inputs failed (pydantic's
        default_factory_not_called) is a consequence, not a second problem, so it is left out."""
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

    @model_validator(mode="before")
    @classmethod
    def _older_names(cls, data: Any) -> Any:
        """`attention`, the token mixer's older name, is read as `mixer` (archspec.spec.mixer_tables.newer_names);
        more layer kinds than MAX_KINDS are refused by their count, before any of them is validated."""
        kinds = data.get("kinds") if isinstance(data, dict) else None
        if isinstance(kinds, Mapping) and len(kinds) > MAX_KINDS:
            raise ValueError(too_many_kinds(len(kinds)))
        return newer_names(data)

    @model_validator(mode="after")
    def _check_consistency(self) -> "ModelSpec":
        """The rules across fields and sub-tables (archspec.spec.rules; each sub-table checks its own fields)."""
        check_spec(self)
        return self

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
    def _kind_specs(self) -> "dict[str, ModelSpec]":
        # _check_kinds validated each kind's data as a spec; the view holds that data as it is (its
        # sub-tables validated, pydantic's model_construct for the rest), so that the integers of a
        # traced spec (archspec.count.formula) stay what they are
        out = {}
        for name in self.kinds:
            data = self._kind_data(name)
            for f in SUBTABLES:
                if isinstance(data.get(f), dict):
                    table = _shorthand(data[f], next(iter(SUBTABLES[f])))
                    data[f] = SUBTABLES[f][table["kind"]].model_validate(table)
            out[name] = type(self).model_construct(_fields_set=set(data), **data)
        return out

    def _recorded_kind(self, name: str) -> "ModelSpec":
        """The spec of kind `name` as archspec.core.compiled records the rules of a structure: what varies
        within a structure is the model's whole numbers, so the kind's whole numbers are held to their
        fields' bounds and the kind to the rules (the rest of its data was validated with the structure's
        first spec, and does not vary)."""
        kind = self.kind_spec(name)
        for field, least in fast_replace(type(self))[1].items():
            if getattr(kind, field) < least:
                raise ValueError(f"kinds.{name}: {field} must be at least {least}")
        check_spec(kind)
        return kind

    def kind_spec(self, name: str) -> "ModelSpec":
        """The spec that layers of kind `name` see (the model's fields with the kind's changes)."""
        return self._kind_specs[name]

    # ---- derived views (never stored twice) ----

    @property
    def attention(self) -> Mixer:
        """The token mixer under its older name: the same as `mixer`, for scripts that read it."""
        return self.mixer

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
        return math.floor(self.d_head * self.position.fraction)  # int() of a product >= 0, as it records

    @property
    def d_embed(self) -> int:
        """Width of the token table: embedding.d_embed, or d_model."""
        return self.embedding.d_embed or self.d_model

    @property
    def d_position(self) -> int:
        """Width where positions, token types and the embedding norm join the token embeddings: d_embed
        (before a factorised embedding's projection), or d_model (after it: embedding.position_width)."""
        return self.d_model if self.embedding.position_width == "d_model" else self.d_embed

    @property
    def d_head_input(self) -> int:
        """Width of the values the output head reads: d_embed after OPT's project_out, else d_model."""
        return self.d_embed if self.embedding.project_out else self.d_model

    def replace(self, **changes: Any) -> "ModelSpec":
        """A new spec with `changes`, validated again; derived defaults are re-derived. A dotted key
        changes one field of a sub-table (`**{"mlp.top_k": 1}`, `**{"position.base": 5e5}`); naming a
        new kind (`**{"mlp.kind": "moe"}`) starts that kind's table from its defaults. `attention` (and
        `attention.FIELD`) is `mixer`, the token mixer's older name; naming both is a SpecError."""
        renamed = {newer_key(k): v for k, v in changes.items()}
        older = renamed.keys() != changes.keys()
        if older:
            if any(k.partition(".")[0] == "mixer" for k in changes):
                raise SpecError(BOTH_NAMES)
            changes = renamed
        if changes and changes.keys() <= _plain_fields(type(self)):
            fast = replaced(self, changes)
            if fast is not None:
                return fast
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
        try:
            return type(self).model_validate(data)
        except ValidationError as err:  # the API's one error type for bad input, on one line
            raise SpecError(describe_spec_error(err, older=older)) from None

    def resolved(self) -> dict[str, Any]:
        """Every field with its value, defaults resolved, in the table's order."""
        return self.model_dump()

    def given(self) -> dict[str, Any]:
        """Only the fields that were set explicitly."""
        return {k: getattr(self, k) for k in type(self).model_fields if k in self.model_fields_set}


def describe_spec_error(err: ValidationError, where: str = "", older: bool = False) -> str:
    """A spec's validation error on one line, its fields and sub-tables named as a spec file writes them
    (`older`: the input calls the mixer `attention`, and so does the message)."""
    written = {"mixer": "attention"} if older else {}
    return describe_validation_error(err, where, ModelSpec.model_fields, SUBTABLES, written)
