"""The declarative model spec: one frozen, validated pydantic model per architecture.

Field names are a public file format (see DESIGN.md). Fields whose default depends on other
fields (``d_head``, ``d_value``, ``n_kv_heads``, ``d_ff``, ``final_norm``) are resolved from the
validated data when they are not given; a given value is never rewritten. ``replace`` rebuilds a
spec from the fields that were given plus the changes, so derived defaults follow the change.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_serializer, model_validator

Norm = Literal["layernorm", "rmsnorm"]
NormPosition = Literal["pre", "post", "sandwich"]
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


def _shorthand(value: Any) -> Any:
    """'lm' -> {'kind': 'lm'}: a bare string names a member with its defaults."""
    return {"kind": value} if isinstance(value, str) else value


def _union(*members: type[_Member]):
    return Annotated[Union[members], Field(discriminator="kind"), BeforeValidator(_shorthand)]  # noqa: UP007


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


class AlibiPosition(_Member):
    """ALiBi (Press et al. 2022): a per-head linear bias on the scores (BLOOM); no parameters."""

    kind: Literal["alibi"] = "alibi"


class RelativePosition(_Member):
    """T5's relative position bias: one table of buckets x n_heads per stack, added to the scores."""

    kind: Literal["relative"] = "relative"
    buckets: int = Field(32, ge=2, description="relative position buckets (T5: 32)")
    max_distance: int = Field(128, ge=1, description="distance of the last bucket (T5: 128)")


class NoPosition(_Member):
    kind: Literal["none"] = "none"


Position = _union(LearnedPosition, SinusoidalPosition, RotaryPosition, AlibiPosition, RelativePosition, NoPosition)


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
    qk_norm: bool = Field(False, description="a norm over d_head on queries and keys, shared by the heads")
    scale: float | None = Field(
        None, gt=0, strict=False, description="score scale; default 1/sqrt(d_head) (T5, GPT-Neo: 1)"
    )
    softcap: float | None = Field(
        None, gt=0, strict=False, description="scores soft-capped as c * tanh(s / c) (Gemma 2: 50)"
    )
    sliding_window: int | None = Field(None, ge=1, description="keys within this many positions (Mistral: 4096)")
    sliding_layers: Literal["all", "even", "odd"] = Field(
        "all", description="layers that use the window: all, even (Gemma 2: 0, 2, ...) or odd (GPT-Neo)"
    )


class LatentAttention(_Member):
    """Multi-head latent attention (DeepSeek-V2/V3): queries and keys/values through low-rank
    projections with their norms, and a decoupled rotary part of rope_dims per head; d_head is the
    query/key width (no-rope + rope), d_value the value width."""

    kind: Literal["latent"] = "latent"
    q_rank: int | None = Field(None, ge=1, description="query low-rank width (absent: a full query projection)")
    kv_rank: int = Field(ge=1, description="key/value low-rank width (the cached latent)")
    rope_dims: int = Field(ge=2, description="rotary width per head, shared by the keys")


Attention = _union(StandardAttention, LatentAttention)


class DenseMLP(_Member):
    kind: Literal["dense"] = "dense"


class MoEMLP(_Member):
    """A mixture of experts: a router picks top_k of `experts` MLPs (each d_expert wide) per token,
    beside an optional shared-expert MLP d_shared wide; the first dense_layers layers stay dense."""

    kind: Literal["moe"] = "moe"
    experts: int = Field(ge=1, description="routed experts per layer")
    top_k: int = Field(ge=1, description="experts each token is routed to")
    d_expert: int = Field(ge=1, description="hidden width of each expert")
    d_shared: int = Field(0, ge=0, description="hidden width of the shared-expert MLP (0: none)")
    shared_gate: bool = Field(False, description="a sigmoid gate Linear(d_model, 1) on the shared expert (Qwen2-MoE)")
    router_bias: bool = Field(False, description="a bias on the router")
    normalize: bool = Field(True, description="renormalise the top-k routing weights to sum to 1")
    dense_layers: int = Field(0, ge=0, description="leading layers with a dense MLP of d_ff (DeepSeek: 1 or 3)")


MLP = _union(DenseMLP, MoEMLP)


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
    table and a vocabulary bias (d_embed wide with factorised embeddings)."""

    kind: Literal["mlm"] = "mlm"


class NoHead(_Member):
    """No output projection: the model returns its last hidden states (BertModel)."""

    kind: Literal["none"] = "none"


Head = _union(LMHead, MLMHead, NoHead)

# field -> {kind: member}: every sub-table field of the spec, for constructing trusted data
SUBTABLES: dict[str, dict[str, type[_Member]]] = {
    "position": {m.model_fields["kind"].default: m for m in (LearnedPosition, SinusoidalPosition, RotaryPosition,
                                                             AlibiPosition, RelativePosition, NoPosition)},
    "block": {"sequential": SequentialBlock, "parallel": ParallelBlock},
    "attention": {"standard": StandardAttention, "latent": LatentAttention},
    "mlp": {"dense": DenseMLP, "moe": MoEMLP},
    "head": {"lm": LMHead, "mlm": MLMHead, "none": NoHead},
}  # fmt: skip
TABLES: dict[str, type[_Table]] = {"bias": Biases, "embedding": Embedding}


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
    norm_position: NormPosition = Field(
        "pre", description="pre: x + f(N(x)); post: N(x + f(x)); sandwich: x + N2(f(N1(x))) (Gemma 2)"
    )
    final_norm: bool = Field(
        default_factory=lambda data: data.get("norm_position", "pre") != "post",
        description="a norm after the last block of each stack; default true for pre and sandwich, false for post",
    )
    activation: Activation = Field("gelu", description="MLP activation; swiglu/geglu are gated")
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
        description='the output head: "lm" (d_model -> vocab_size, tied or not), "mlm" (BERT\'s masked-LM head) '
        'or "none" (hidden states out)',
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
        if self.position.kind == "rotary" and (self.rotary_dims % 2 or self.rotary_dims < 2):
            if self.position.fraction == 1:
                raise ValueError(f"rotary positions need an even d_head, got d_head={self.d_head}")
            raise ValueError(
                f"rotary positions need an even rotated width of at least 2, got d_head={self.d_head} x "
                f"position.fraction={self.position.fraction} = {self.d_head * self.position.fraction:g}"
            )
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
        m = self.mlp
        if m.kind == "moe":
            if m.top_k > m.experts:
                raise ValueError(f"mlp.top_k={m.top_k} is more than mlp.experts={m.experts}")
            if m.dense_layers > max(self.encoder_layers, self.decoder_layers):
                raise ValueError(f"mlp.dense_layers={m.dense_layers} is more than the stack has layers")
            if m.shared_gate and not m.d_shared:
                raise ValueError("mlp.shared_gate=true needs a shared expert (mlp.d_shared > 0)")
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
        if self.head.kind == "mlm" and not self.tie_embeddings:
            raise ValueError("head kind 'mlm' decodes with the token table: it needs tie_embeddings=true")
        if self.share_layers and self.mlp.kind == "moe" and self.mlp.dense_layers:
            raise ValueError("share_layers=true needs every layer alike; mlp.dense_layers makes them differ")
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
                table = _shorthand(data[name])
                data[name] = members[table["kind"]].model_construct(**table)
        for name, table_type in TABLES.items():
            if isinstance(data.get(name), dict):
                data[name] = table_type.model_construct(**data[name])
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


def field_names() -> list[str]:
    return list(ModelSpec.model_fields)
