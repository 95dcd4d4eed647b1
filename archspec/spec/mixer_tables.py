"""The token mixer's sub-tables: standard and latent attention (with DeepSeek's indexer), and the
recurrent mixers Mamba, Mamba-2 and Gated DeltaNet, or none; each checks its own fields.
archspec.spec.subtables re-exports them, and archspec.spec.model with it.

The spec's field and a layer kind's key for this table is `mixer`; files written before it had that
name call it `attention`, and both spellings read the same (`newer_names`)."""

# Annotations are objects, not strings (no `from __future__ import annotations`): pydantic evaluates
# every string annotation when the class is defined, at every start-up.
from typing import Any, Literal

from pydantic import Field, model_validator

from archspec.spec.table import _Member, _Table, _union

QKNorm = Literal["head", "full", "l2"]


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


Mixer = _union(StandardAttention, LatentAttention, MambaMixer, Mamba2Mixer, GatedDeltaNet, NoMixer)
Attention = Mixer  # its older name
MIXERS = ("mamba", "mamba2", "gated_deltanet")  # recurrent mixers: a constant state per sequence


BOTH_NAMES = "mixer and attention name the same table (attention is its older name); give one of them"


def newer_names(data: Any) -> Any:
    """Spec (or layer-kind) data with the token mixer's older key `attention` read as `mixer`, in its
    place (the file format is a contract: files that say `attention` keep loading); both is an error."""
    if not isinstance(data, dict) or "attention" not in data:
        return data
    if "mixer" in data:
        raise ValueError(BOTH_NAMES)
    return {("mixer" if k == "attention" else k): v for k, v in data.items()}


def over(defaults: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
    """A row's spec fields over shared defaults (a presets file's [defaults], a paper table's), each read
    under the newer names first, so that a row's `mixer` replaces the defaults' `attention`."""
    return {**newer_names(defaults), **newer_names(row)}


def newer_key(key: str) -> str:
    """A field's path (`attention`, `attention.sliding_window`: `--set`, `replace`) under the newer name."""
    table, dot, field = key.partition(".")
    return f"mixer{dot}{field}" if table == "attention" else key
