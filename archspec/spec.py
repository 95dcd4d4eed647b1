"""The declarative model spec: one frozen, validated pydantic model per architecture.

Field names are a public file format (see DESIGN.md). Fields whose default depends on other
fields (``d_head``, ``d_value``, ``n_kv_heads``, ``d_ff``, ``final_norm``) are resolved from the
validated data when they are not given; a given value is never rewritten. ``replace`` rebuilds a
spec from the fields that were given plus the changes, so derived defaults follow the change.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Position = Literal["learned", "sinusoidal", "rotary", "none"]
Norm = Literal["layernorm", "rmsnorm"]
NormPosition = Literal["pre", "post"]
Activation = Literal["relu", "gelu", "silu", "swiglu", "geglu"]
Kind = Literal["decoder-only", "encoder-only", "encoder-decoder"]

GATED_ACTIVATIONS = frozenset({"swiglu", "geglu"})


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

    @property
    def d_q(self) -> int:
        """Width of all query (and key-compatible) heads: n_heads * d_head."""
        return self.n_heads * self.d_head

    @property
    def d_attn_out(self) -> int:
        """Width of the concatenated head outputs: n_heads * d_value."""
        return self.n_heads * self.d_value

    @property
    def d_k_total(self) -> int:
        return self.n_kv_heads * self.d_head

    @property
    def d_v_total(self) -> int:
        return self.n_kv_heads * self.d_value

    def stacks(self) -> list[str]:
        """The stacks present, in data-flow order: 'encoder', 'decoder'."""
        return [s for s, n in (("encoder", self.encoder_layers), ("decoder", self.decoder_layers)) if n]

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
