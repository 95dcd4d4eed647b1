"""The exact parameter counter: one pure function from a spec to a breakdown by component.

Conventions (DESIGN.md, "Counting conventions"):

- a parameter is a unique tensor: a tied matrix counts once; buffers (sinusoidal tables, rotary
  frequencies, masks) are not parameters;
- component names are the reference model's module names, so analytic and instantiated counts
  compare key by key;
- counts are Python ints, exact at any size.

Layout decisions the reference model shares:

- learned positions: one table per stack (an encoder-decoder has a source and a target table);
- token types: one table, added to the first stack's input (the encoder when there is one);
- embedding norm: one per stack; final norm: one per stack;
- tie_embeddings=false on an encoder-decoder: source embedding, target embedding and output
  projection are three matrices; true: one matrix serves all three (Vaswani et al. 2017, 3.4).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from archspec.checks import check_args
from archspec.spec import ModelSpec

# Component names, in the order tables show them. They are also the reference model's module
# names (see reference/model.py), so "analytic == instantiated" compares two dicts.
COMPONENTS = (
    "embed",
    "position",
    "token_type",
    "attention",
    "cross_attention",
    "mlp",
    "norm",
    "pooler",
    "head",
)
EMBEDDING_COMPONENTS = ("embed", "position", "token_type", "head")

ESTIMATE_OMITS = (
    "biases",
    "norms",
    "position and token-type tables",
    "cross-attention",
    "untied output projection",
    "pooler",
    "deviations from d_ff = 4 d_model, n_heads * d_head = d_model, n_kv_heads = n_heads",
)


def linear_params(n_in: int, n_out: int, bias: bool) -> int:
    """A dense layer n_in -> n_out: weight n_in * n_out, plus n_out biases."""
    return n_in * n_out + (n_out if bias else 0)


def norm_params(spec: ModelSpec) -> int:
    """LayerNorm: weight and bias; RMSNorm: weight only."""
    return 2 * spec.d_model if spec.norm == "layernorm" else spec.d_model


def attention_params(spec: ModelSpec) -> int:
    """Q, K, V projections (grouped-query aware) and the output projection."""
    d = spec.d_model
    return (
        linear_params(d, spec.d_q, spec.bias)
        + linear_params(d, spec.d_k_total, spec.bias)
        + linear_params(d, spec.d_v_total, spec.bias)
        + linear_params(spec.d_attn_out, d, spec.bias)
    )


def mlp_params(spec: ModelSpec) -> int:
    """Up projection(s) d -> d_ff (two for gated activations) and the down projection d_ff -> d."""
    n_in = 2 if spec.gated else 1
    return n_in * linear_params(spec.d_model, spec.d_ff, spec.bias) + linear_params(spec.d_ff, spec.d_model, spec.bias)


def layer_params(spec: ModelSpec, stack: str) -> dict[str, int]:
    """One block of `stack` ('encoder' or 'decoder'), by component."""
    cross = stack == "decoder" and spec.encoder_layers > 0
    out = {
        "attention": attention_params(spec),
        "cross_attention": attention_params(spec) if cross else 0,
        "mlp": mlp_params(spec),
        "norm": (3 if cross else 2) * norm_params(spec),
    }
    out["total"] = sum(out.values())
    return out


@dataclass(frozen=True)
class ParamCount:
    """An exact parameter count with its breakdown. Returned, never printed."""

    name: str
    total: int
    components: dict[str, int]
    per_layer: dict[str, dict[str, int]]
    non_embedding: int
    estimate: int
    active: int = 0  # parameters one token uses; == total for a dense model
    estimate_omits: tuple[str, ...] = field(default=ESTIMATE_OMITS)

    def share(self, component: str) -> float:
        return self.components[component] / self.total if self.total else 0.0

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "total": self.total,
            "active": self.active,
            "non_embedding": self.non_embedding,
            "estimate": self.estimate,
            "components": dict(self.components),
            "per_layer": {k: dict(v) for k, v in self.per_layer.items()},
        }


def seed_estimate(spec: ModelSpec) -> int:
    """The seed formula 12 * L * d^2 + V * d, with L all blocks of all stacks."""
    return 12 * spec.n_layers * spec.d_model**2 + spec.vocab_size * spec.d_model


def count_params(spec: ModelSpec) -> ParamCount:
    """Exact parameter count of `spec`, by component."""
    check_args("count_params", spec=spec)
    d, V = spec.d_model, spec.vocab_size
    stacks = spec.stacks()
    n_layers = {"encoder": spec.encoder_layers, "decoder": spec.decoder_layers}
    per_layer = {s: layer_params(spec, s) for s in stacks}

    components = dict.fromkeys(COMPONENTS, 0)
    # Token embeddings: one matrix, or one per stack when an encoder-decoder is untied.
    n_embed = len(stacks) if (spec.kind == "encoder-decoder" and not spec.tie_embeddings) else 1
    components["embed"] = n_embed * V * d
    if spec.position == "learned":
        components["position"] = len(stacks) * spec.max_positions * d
    components["token_type"] = spec.type_vocab_size * d
    for s in stacks:
        for c in ("attention", "cross_attention", "mlp", "norm"):
            components[c] += n_layers[s] * per_layer[s][c]
    stack_norms = (1 if spec.final_norm else 0) + (1 if spec.embedding_norm else 0)
    components["norm"] += len(stacks) * stack_norms * norm_params(spec)
    if spec.pooler:
        components["pooler"] = linear_params(d, d, True)
    if not spec.tie_embeddings:
        components["head"] = V * d

    total = sum(components.values())
    non_embedding = total - sum(components[c] for c in EMBEDDING_COMPONENTS)
    return ParamCount(
        name=spec.name,
        total=total,
        components=components,
        per_layer=per_layer,
        non_embedding=non_embedding,
        estimate=seed_estimate(spec),
        active=total,  # every parameter takes part in every token's forward pass (no experts yet)
    )
