"""The declarative model spec: one frozen, validated pydantic model per architecture.

Field names are a public file format (see DESIGN.md). Fields whose default depends on other
fields (``d_head``, ``d_value``, ``n_kv_heads``, ``d_ff``, ``final_norm``) are resolved from the
validated data when they are not given; a given value is never rewritten. ``replace`` rebuilds a
spec from the fields that were given plus the changes, so derived defaults follow the change.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

Position = Literal["learned", "sinusoidal", "rotary", "none"]
Norm = Literal["layernorm", "rmsnorm"]
NormPosition = Literal["pre", "post"]
Activation = Literal["relu", "gelu", "silu", "swiglu", "geglu"]
Kind = Literal["decoder-only", "encoder-only", "encoder-decoder"]

EmbeddingScale = Literal["none", "sqrt_d_model"]
Init = Literal["gpt2", "xavier"]

GATED_ACTIVATIONS = frozenset({"swiglu", "geglu"})
NORM_EPS = {"layernorm": 1e-5, "rmsnorm": 1e-6}  # GPT-2 and nn.Transformer; LLaMA 1


# ---------------------------------------------------------------- sub-tables
#
# A feature that brings fields of its own is a small typed model, one member of a union that a
# `kind` tag discriminates (`head = {kind = "lm", bias = true}`). A bare string names a member
# with its defaults (`head = "none"` is `head = {kind = "none"}`), so a flat field can grow into a
# table without breaking any file that used the string. New kinds are new members, not new flags.


class _Member(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


class LMHead(_Member):
    """An output projection d_model -> vocab_size (the token embedding's matrix when tied)."""

    kind: Literal["lm"] = "lm"
    bias: bool = Field(False, description="a bias of vocab_size on the output projection (Phi-2)")


class NoHead(_Member):
    """No output projection: the model returns its last hidden states (BertModel)."""

    kind: Literal["none"] = "none"


def _shorthand(value: Any) -> Any:
    """'lm' -> {'kind': 'lm'}: a bare string names a member with its defaults."""
    return {"kind": value} if isinstance(value, str) else value


Head = Annotated[LMHead | NoHead, Field(discriminator="kind"), BeforeValidator(_shorthand)]

# field -> {kind: member}: every sub-table field of the spec, for constructing trusted data
SUBTABLES: dict[str, dict[str, type[_Member]]] = {"head": {"lm": LMHead, "none": NoHead}}


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
    position: Position = Field("learned", description="position information")
    norm: Norm = Field("layernorm", description="LayerNorm (weight and bias) or RMSNorm (weight)")
    norm_position: NormPosition = Field("pre", description="pre: x + f(N(x)); post: N(x + f(x))")
    final_norm: bool = Field(
        default_factory=lambda data: data.get("norm_position", "pre") == "pre",
        description="a norm after the last block of each stack; default true for pre, false for post",
    )
    activation: Activation = Field("gelu", description="MLP activation; swiglu/geglu are gated")
    bias: bool = Field(True, description="biases on attention and MLP linear layers")
    tie_embeddings: bool = Field(
        True, description="the output projection reuses the token embedding (encoder-decoder: all three)"
    )
    type_vocab_size: int = Field(0, ge=0, description="rows of a token-type (segment) table (BERT: 2)")
    embedding_norm: bool = Field(False, description="a norm right after the summed embeddings (BERT)")
    pooler: bool = Field(False, description="a d_model x d_model dense layer with bias over the first token (BERT)")
    head: Head = Field(
        default_factory=LMHead,
        description='the output head: "lm" (d_model -> vocab_size, tied or not) or "none" (hidden states out)',
    )
    norm_eps: float = Field(
        default_factory=lambda data: NORM_EPS.get(data.get("norm", "layernorm"), 1e-5),
        gt=0,
        description="epsilon of every norm; default 1e-5 for layernorm, 1e-6 for rmsnorm (LLaMA 2/3 use 1e-5)",
    )
    embedding_scale: EmbeddingScale = Field(
        default_factory=lambda data: (
            "sqrt_d_model" if data.get("encoder_layers") and data.get("decoder_layers") else "none"
        ),
        description="token embeddings multiplied by sqrt(d_model) (Vaswani et al. 2017, 3.4; Gemma); "
        "default sqrt_d_model for an encoder-decoder, none otherwise",
    )
    init: Init = Field(
        default_factory=lambda data: "xavier" if data.get("encoder_layers") and data.get("decoder_layers") else "gpt2",
        description="initialisation of the reference model: gpt2 (N(0, 0.02), scaled residual projections) or "
        "xavier (nn.Transformer); default xavier for an encoder-decoder, gpt2 otherwise",
    )

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
        if self.position == "sinusoidal" and self.d_model % 2:
            raise ValueError(f"sinusoidal positions need an even d_model, got d_model={self.d_model}")
        if self.position == "rotary" and self.d_head % 2:
            raise ValueError(f"rotary positions need an even d_head, got d_head={self.d_head}")
        if self.pooler and self.encoder_layers == 0:
            raise ValueError("pooler=true needs an encoder (encoder_layers > 0)")
        return self

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

    @classmethod
    def construct_trusted(cls, data: dict[str, Any]) -> ModelSpec:
        """A spec from data already known to be valid (the packaged presets, which the tests validate),
        without building the validator: sub-tables are built from their `kind`, nothing is checked."""
        data = dict(data)
        for name, members in SUBTABLES.items():
            if name in data and not isinstance(data[name], _Member):
                table = _shorthand(data[name])
                data[name] = members[table["kind"]].model_construct(**table)
        return cls.model_construct(**data)

    def replace(self, **changes: Any) -> ModelSpec:
        """A new spec with `changes`, validated again; derived defaults are re-derived."""
        data = {k: getattr(self, k) for k in self.model_fields_set}
        data.update(changes)
        return type(self).model_validate(data)

    def resolved(self) -> dict[str, Any]:
        """Every field with its value, defaults resolved, in the table's order."""
        return self.model_dump()

    def given(self) -> dict[str, Any]:
        """Only the fields that were set explicitly."""
        return {k: getattr(self, k) for k in type(self).model_fields if k in self.model_fields_set}


def field_names() -> list[str]:
    return list(ModelSpec.model_fields)
