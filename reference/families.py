"""The transformers families the reference model is checked against, each one entry of data.

A family says what it can represent (``needs``: spec fields with the values its config can express,
and relations between fields, each refusal naming its field), how its transformers config is built
from a spec (``config``: one transformers key per line, from the spec), and how its state dict fills
the reference model (``weights``: weight maps as tables, one per checkpoint layout, transformers 5's
first; see archspec.reference.weights).

Where a family's default computation differs from what a spec can say, the config asks for the
spec's: exact GELU where GPT-2, Gemma 2 and T5 v1.1 default to its tanh approximation, no dropout.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from archspec.layers import layer_kinds
from archspec.reference.model import sliding_window
from archspec.reference.weights import WeightMap, each, row
from archspec.spec import ModelSpec, StandardAttention

# ---------------------------------------------------------------- what a family can represent

_ABSENT = object()
NON_GATED = ("relu", "gelu", "silu")
GATED = ("swiglu", "geglu")
ACT = {"relu": "relu", "gelu": "gelu", "silu": "silu", "swiglu": "silu", "geglu": "gelu"}  # ACT2FN names (exact GELU)


def _get(spec: ModelSpec, name: str):
    """A field as families compare it: a flat field as written (a sub-table by its shorthand), or a
    dotted path into a sub-table ('attention.qk_norm', 'bias.qkv'); absent where the member has none."""
    if "." not in name:
        if name not in type(spec).model_fields:  # a derived view such as kind
            return getattr(spec, name)
        return spec.model_dump(include={name})[name]
    first, *rest = name.split(".")
    value = spec.biases if first == "bias" else getattr(spec, first)
    for part in rest:
        if not hasattr(value, part):
            return _ABSENT
        value = getattr(value, part)
    return value


def _show(name: str, value) -> str:
    """A flat field or a member's kind as Python writes it; a sub-table's field as the spec file does."""
    if "." not in name or name.endswith(".kind"):
        return repr(value)
    return "absent" if value is None else json.dumps(value)


@dataclass(frozen=True)
class Need:
    """A spec field (or a dotted path into a sub-table) and the values a family can express (or a
    function of the spec giving them). A member's kind is named by its field: 'head', not 'head.kind'."""

    name: str
    allowed: tuple | Callable[[ModelSpec], tuple]
    why: str = ""

    def problem(self, spec: ModelSpec) -> str | None:
        value = _get(spec, self.name)
        allowed = self.allowed(spec) if callable(self.allowed) else self.allowed
        if value is _ABSENT or value in allowed:
            return None
        why = self.why or "needs " + " or ".join(_show(self.name, a) for a in allowed)
        return f"{self.name.removesuffix('.kind')}={_show(self.name, value)} ({why})"


def _needs(fields: Mapping[str, tuple | Callable | None], *relations: Callable) -> tuple:
    """Field needs (a None value drops a need of the base it extends) and relation checks."""
    return tuple(Need(k, v) for k, v in fields.items() if v is not None) + relations


# Relations between fields: each returns why the family cannot represent the spec, or None.


def mha(s: ModelSpec) -> str | None:
    ok = s.n_kv_heads == s.n_heads
    return None if ok else f"n_kv_heads={s.n_kv_heads} (needs n_kv_heads = n_heads = {s.n_heads})"


def heads_span_d_model(s: ModelSpec) -> str | None:
    ok = s.d_head * s.n_heads == s.d_model
    return None if ok else f"d_head={s.d_head} (needs n_heads * d_head = d_model = {s.d_model})"


def d_value_is_d_head(s: ModelSpec) -> str | None:
    return None if s.d_value == s.d_head else f"d_value={s.d_value} (needs d_value = d_head = {s.d_head})"


def embedding_is_d_model(s: ModelSpec) -> str | None:
    d = s.embedding.d_embed
    return None if d in (None, s.d_model) else f"embedding.d_embed={d} (needs d_model)"


def one_attention_bias(s: ModelSpec) -> str | None:
    b = s.biases
    return None if b.qkv == b.out else f"bias qkv={b.qkv}, out={b.out} (one attention_bias sets both)"


def one_bias(s: ModelSpec) -> str | None:
    b = s.biases
    ok = b.qkv == b.out == b.mlp
    return None if ok else f"bias qkv={b.qkv}, out={b.out}, mlp={b.mlp} (one enable_bias sets all three)"


def _scale(s: ModelSpec) -> float:
    """The score scale the spec computes with (1/sqrt(d_head) unless attention.scale says otherwise)."""
    scale = getattr(s.attention, "scale", None)
    return s.d_head**-0.5 if scale is None else scale


def default_scale(s: ModelSpec) -> str | None:
    ok = abs(_scale(s) - s.d_head**-0.5) <= 1e-12 * _scale(s)
    return None if ok else f"attention.scale={_scale(s)!r} (needs 1/sqrt(d_head))"


def unscaled(s: ModelSpec) -> str | None:
    return None if _scale(s) == 1.0 else f"attention.scale={_scale(s)!r} (needs 1.0: T5 does not scale scores)"


def query_pre_attn_scalar(s: ModelSpec) -> int:
    """Gemma 2 scales scores by query_pre_attn_scalar^-0.5, an integer."""
    return round(_scale(s) ** -2)


def integer_query_scalar(s: ModelSpec) -> str | None:
    ok = abs(query_pre_attn_scalar(s) ** -0.5 - _scale(s)) <= 1e-12 * _scale(s)
    return None if ok else f"attention.scale={_scale(s)!r} (needs n^-0.5 for an integer query_pre_attn_scalar n)"


def window_on_every_layer(s: ModelSpec) -> str | None:
    att = s.attention
    ok = att.kind != "standard" or not att.sliding_window or att.sliding_layers == "all"
    return None if ok else f"attention.sliding_layers={att.sliding_layers!r} (needs 'all': one window for every layer)"


def _layer_specs(s: ModelSpec) -> list[ModelSpec]:
    return [k for _, k in layer_kinds(s, s.decoder_layers)]


def gemma3_layers(s: ModelSpec) -> str | None:
    """Gemma 3: the layers differ only in their window and rotary base, one window and one base for the
    sliding layers, one base for the global ones (rope_parameters per layer type)."""
    first: dict[bool, int] = {}
    layers = _layer_specs(s)
    unwindowed = s.attention.model_copy(update={"sliding_window": None})
    for i, k in enumerate(layers):
        sliding = k.attention.kind == "standard" and k.attention.sliding_window is not None
        f = layers[first.setdefault(sliding, i)]
        if k.attention != f.attention or k.position != f.position:
            kind = "sliding" if sliding else "global"
            return f"layer {i}: attention or position differs from layer {first[sliding]}'s (one per {kind} type)"
        widths = (k.d_ff, k.d_head, k.n_heads, k.n_kv_heads) == (s.d_ff, s.d_head, s.n_heads, s.n_kv_heads)
        if not widths or k.mlp != s.mlp or k.attention.model_copy(update={"sliding_window": None}) != unwindowed:
            return f"layer {i}: differs from the model in more than its window and rotary base"
    return None


def llama4_layers(s: ModelSpec) -> str | None:
    """Llama 4: rotary layers (with the L2 QK-norm where any has it) and NoPE layers (without), chunked or
    full attention, one chunk; a dense MLP of one width or one MoE: sigmoid scores scaling the experts'
    inputs, not renormalised, a shared expert as wide as an expert."""
    layers = _layer_specs(s)
    if any(k.attention.kind != "standard" for k in layers):
        return "attention.kind (needs standard attention on every layer)"
    l2 = any(k.attention.qk_norm == "l2" for k in layers)
    chunks = {k.attention.chunk for k in layers} - {None}
    if len(chunks) > 1:
        return f"attention.chunk: {sorted(chunks)} (one attention_chunk_size)"
    for i, k in enumerate(layers):
        a, m, rotary = k.attention, k.mlp, k.position.kind == "rotary"
        bare = a.model_copy(update={"chunk": None, "qk_norm": False})
        plain = bare == StandardAttention.model_construct()
        if not plain or a.qk_norm not in (False, "l2") or (a.qk_norm == "l2") != (l2 and rotary):
            return f"layer {i}: attention (needs plain attention, the L2 QK-norm on every rotary layer or none)"
        if k.position.kind not in ("rotary", "none") or (rotary and k.position != s.position):
            return f"layer {i}: position (needs the model's rotary or none)"
        if m.kind == "moe" and (m != _moe(s) or m.normalize or not m.weight_input or m.scoring != "sigmoid"
                                or m.d_shared != m.d_expert or m.shared_gate or m.router_bias or m.correction_bias
                                or m.routed_scale != 1 or m.dense_layers):  # fmt: skip
            return f"layer {i}: mlp (needs one sigmoid MoE weighting the experts' inputs, a shared expert of d_expert)"
        if m.kind == "none" or (m.kind == "dense" and k.d_ff != (_dense_kind(s) or s).d_ff):
            return f"layer {i}: mlp (needs experts or a dense MLP of one d_ff)"
        if (k.d_head, k.n_heads, k.n_kv_heads) != (s.d_head, s.n_heads, s.n_kv_heads):
            return f"layer {i}: heads differ from the model's"
    return None


def _any_window(s: ModelSpec) -> int | None:
    """The window of the sliding layers (one for all of them), or None where no layer has one."""
    return next(filter(None, (sliding_window(s, i) for i in range(s.decoder_layers))), None)


def _kind_base(s: ModelSpec, sliding: bool) -> float:
    """The rotary base of Gemma 3's sliding (or global) layers; the model's where it has none."""
    for k in _layer_specs(s):
        if (k.attention.kind == "standard" and k.attention.sliding_window is not None) == sliding:
            return k.position.base
    return s.position.base


def final_norm_with_pre(s: ModelSpec) -> str | None:
    ok = s.final_norm == (s.norm_position == "pre")
    return None if ok else f"final_norm={s.final_norm} (needs a final norm with pre-norm, none with post-norm)"


def token_types(s: ModelSpec) -> str | None:
    return None if s.type_vocab_size else "type_vocab_size=0 (BertModel always has a token-type table)"


# A transformers decoder-only language model; each family changes what it has
BASE: dict[str, tuple | Callable | None] = {
    "kind": ("decoder-only",),
    "type_vocab_size": (0,),
    "embedding_norm": (False,),
    "pooler": (False,),
    "embedding_scale": ("none",),
    "share_layers": (False,),
    "norm_position": ("pre",),
    "final_norm": (True,),
    "block.kind": ("sequential",),
    "attention.kind": ("standard",),
    "attention.qk_norm": (False,),
    "attention.softcap": (None,),
    "attention.sliding_window": (None,),
    "mlp.kind": ("dense",),
    "head.kind": ("lm",),
    "head.bias": (False,),
    "head.scale": (1.0,),
    "head.softcap": (None,),
}
LEARNED = {"position.kind": ("learned",), "position.offset": (0,)}
ROTARY = {"position.kind": ("rotary",), "position.fraction": (1.0,), "position.interleaved": (False,)}
ALL_BIASES = {"bias.qkv": (True,), "bias.out": (True,), "bias.mlp": (True,)}
NO_BIASES = {"bias.qkv": (False,), "bias.out": (False,), "bias.mlp": (False,)}
LLAMA_LIKE = {**BASE, **ROTARY, "norm": ("rmsnorm",), "activation": GATED}

# ---------------------------------------------------------------- config keys from a spec


def _layer_types(s: ModelSpec) -> list[str]:
    return ["sliding_attention" if sliding_window(s, i) else "full_attention" for i in range(s.decoder_layers)]


def _window(s: ModelSpec) -> int | None:
    return getattr(s.attention, "sliding_window", None)


LLAMA_CONFIG: dict[str, Callable[[ModelSpec], Any]] = {
    "vocab_size": lambda s: s.vocab_size,
    "hidden_size": lambda s: s.d_model,
    "intermediate_size": lambda s: s.d_ff,
    "num_hidden_layers": lambda s: s.decoder_layers,
    "num_attention_heads": lambda s: s.n_heads,
    "num_key_value_heads": lambda s: s.n_kv_heads,
    "head_dim": lambda s: s.d_head,
    "max_position_embeddings": lambda s: s.max_positions,
    "rms_norm_eps": lambda s: s.norm_eps,
    "rope_theta": lambda s: s.position.base,
    "hidden_act": lambda s: ACT[s.activation],
    "tie_word_embeddings": lambda s: s.tie_embeddings,
    "attention_dropout": lambda s: 0.0,
}

# ---------------------------------------------------------------- weight maps

DEC, ENC = "decoder.layers.{}.", "encoder.layers.{}."

GPT2_WEIGHTS = WeightMap("GPT-2", strip=("transformer.",), ignore=(r"h\.\d+\.attn\.(masked_)?bias",), rows=(
    row("wte.weight", "embed.weight"),
    row("wpe.weight", "decoder.position.weight"),
    row("h.{}.ln_1.{w}", DEC + "attention_norm.{w}"),
    row("h.{}.attn.c_attn.{w}", DEC + "attention.qkv.{w}", "transpose"),  # Conv1D: (in, out)
    row("h.{}.attn.c_proj.{w}", DEC + "attention.out.{w}", "transpose"),
    row("h.{}.ln_2.{w}", DEC + "mlp_norm.{w}"),
    row("h.{}.mlp.c_fc.{w}", DEC + "mlp.up.{w}", "transpose"),
    row("h.{}.mlp.c_proj.{w}", DEC + "mlp.down.{w}", "transpose"),
    row("ln_f.{w}", "decoder.final_norm.{w}"),
    row("lm_head.weight", "head.weight"),
))  # fmt: skip

LLAMA_ATTENTION = (
    row("embed_tokens.weight", "embed.weight"),
    row("layers.{}.input_layernorm.weight", DEC + "attention_norm.weight"),
    row(each("layers.{}.self_attn.{x}_proj.{w}", "q", "k", "v"), DEC + "attention.qkv.{w}", "cat"),
    row("layers.{}.self_attn.o_proj.{w}", DEC + "attention.out.{w}"),
    row("layers.{}.post_attention_layernorm.weight", DEC + "mlp_norm.weight"),
    row("norm.weight", "decoder.final_norm.weight"),
    row("lm_head.weight", "head.weight"),
)
LLAMA_MLP = (
    row("layers.{}.mlp.gate_proj.{w}", DEC + "mlp.gate.{w}"),
    row("layers.{}.mlp.up_proj.{w}", DEC + "mlp.up.{w}"),
    row("layers.{}.mlp.down_proj.{w}", DEC + "mlp.down.{w}"),
)
ROTARY_BUFFERS = (r"layers\.\d+\.self_attn\.rotary_emb\.inv_freq",)  # kept by older checkpoints
LLAMA_WEIGHTS = WeightMap("LLaMA", LLAMA_ATTENTION + LLAMA_MLP, strip=("model.",), ignore=ROTARY_BUFFERS)

MIXTRAL_WEIGHTS = (
    WeightMap("Mixtral", LLAMA_ATTENTION + (
        row("layers.{}.mlp.gate.weight", DEC + "mlp.router.weight"),
        # transformers 5 keeps the experts stacked, gate and up fused: (E, 2 * d_expert, d_model)
        row("layers.{}.mlp.experts.gate_up_proj", (DEC + "mlp.experts.gate.weight", DEC + "mlp.experts.up.weight"),
            "split"),
        row("layers.{}.mlp.experts.down_proj", DEC + "mlp.experts.down.weight"),
    ), strip=("model.",)),
    # the published checkpoints: one w1 (gate), w3 (up), w2 (down) per expert
    WeightMap("Mixtral (per-expert checkpoint)", LLAMA_ATTENTION + (
        row("layers.{}.block_sparse_moe.gate.weight", DEC + "mlp.router.weight"),
        row("layers.{}.block_sparse_moe.experts.{e}.w1.weight", DEC + "mlp.experts.gate.weight", "stack"),
        row("layers.{}.block_sparse_moe.experts.{e}.w3.weight", DEC + "mlp.experts.up.weight", "stack"),
        row("layers.{}.block_sparse_moe.experts.{e}.w2.weight", DEC + "mlp.experts.down.weight", "stack"),
    ), strip=("model.",), ignore=ROTARY_BUFFERS),
)  # fmt: skip

GEMMA2_WEIGHTS = WeightMap("Gemma 2", strip=("model.",), rows=(
    row("embed_tokens.weight", "embed.weight"),
    # Gemma's RMSNorm stores w and scales by 1 + w
    row("layers.{}.input_layernorm.weight", DEC + "attention_norm.weight", "plus_one"),
    row(each("layers.{}.self_attn.{x}_proj.{w}", "q", "k", "v"), DEC + "attention.qkv.{w}", "cat"),
    row("layers.{}.self_attn.o_proj.{w}", DEC + "attention.out.{w}"),
    row("layers.{}.post_attention_layernorm.weight", DEC + "attention_post_norm.weight", "plus_one"),
    row("layers.{}.pre_feedforward_layernorm.weight", DEC + "mlp_norm.weight", "plus_one"),
    *LLAMA_MLP,
    row("layers.{}.post_feedforward_layernorm.weight", DEC + "mlp_post_norm.weight", "plus_one"),
    row("norm.weight", "decoder.final_norm.weight", "plus_one"),
    row("lm_head.weight", "head.weight"),
))  # fmt: skip

# OLMo 2: no norm before a sub-layer; q_norm and k_norm over all heads at once, before the rotation
OLMO2_WEIGHTS = WeightMap("OLMo 2", strip=("model.",), rows=(
    row("embed_tokens.weight", "embed.weight"),
    row(each("layers.{}.self_attn.{x}_proj.{w}", "q", "k", "v"), DEC + "attention.qkv.{w}", "cat"),
    row("layers.{}.self_attn.q_norm.weight", DEC + "attention.q_norm.weight"),
    row("layers.{}.self_attn.k_norm.weight", DEC + "attention.k_norm.weight"),
    row("layers.{}.self_attn.o_proj.{w}", DEC + "attention.out.{w}"),
    row("layers.{}.post_attention_layernorm.weight", DEC + "attention_post_norm.weight"),
    *LLAMA_MLP,
    row("layers.{}.post_feedforward_layernorm.weight", DEC + "mlp_post_norm.weight"),
    row("norm.weight", "decoder.final_norm.weight"),
    row("lm_head.weight", "head.weight"),
))  # fmt: skip

# Gemma 3: Gemma 2's four (1 + w) norms, and a per-head QK-norm stored the same way
GEMMA3_WEIGHTS = WeightMap("Gemma 3", strip=("model.",), rows=(
    *GEMMA2_WEIGHTS.rows,
    row("layers.{}.self_attn.q_norm.weight", DEC + "attention.q_norm.weight", "plus_one"),
    row("layers.{}.self_attn.k_norm.weight", DEC + "attention.k_norm.weight", "plus_one"),
))  # fmt: skip

# Llama 4: a dense MLP or experts on each layer (feed_forward); the experts stored as x @ w computes,
# gate_up_proj (E, d, 2·d_ff) as [gate | up] and down_proj (E, d_ff, d), beside a shared expert
LLAMA4_WEIGHTS = WeightMap("Llama 4", strip=("model.",), rows=(
    *LLAMA_ATTENTION,
    *(row(f"layers.{{}}.feed_forward.{x}_proj.weight", DEC + f"mlp.{x}.weight") for x in ("gate", "up", "down")),
    row("layers.{}.feed_forward.router.weight", DEC + "mlp.router.weight"),
    row("layers.{}.feed_forward.experts.gate_up_proj", (DEC + "mlp.experts.gate.weight",
                                                        DEC + "mlp.experts.up.weight"), "split_io"),
    row("layers.{}.feed_forward.experts.down_proj", DEC + "mlp.experts.down.weight", "io"),
    *(row(f"layers.{{}}.feed_forward.shared_expert.{x}_proj.weight", DEC + f"mlp.shared.{x}.weight")
      for x in ("gate", "up", "down")),
))  # fmt: skip

# gpt-oss: attention with biases and one sink logit per head; every MLP a mixture of experts with biases,
# stored as x @ w computes: gate_up_proj (E, d, 2·d_ff) with gate and up interleaved, down_proj (E, d_ff, d)
GPT_OSS_WEIGHTS = WeightMap("gpt-oss", strip=("model.",), rows=(
    row("embed_tokens.weight", "embed.weight"),
    row("layers.{}.input_layernorm.weight", DEC + "attention_norm.weight"),
    row(each("layers.{}.self_attn.{x}_proj.{w}", "q", "k", "v"), DEC + "attention.qkv.{w}", "cat"),
    row("layers.{}.self_attn.o_proj.{w}", DEC + "attention.out.{w}"),
    row("layers.{}.self_attn.sinks", DEC + "attention.sinks"),
    row("layers.{}.post_attention_layernorm.weight", DEC + "mlp_norm.weight"),
    row("layers.{}.mlp.router.{w}", DEC + "mlp.router.{w}"),
    row("layers.{}.mlp.experts.gate_up_proj", (DEC + "mlp.experts.gate.weight", DEC + "mlp.experts.up.weight"),
        "interleaved"),
    row("layers.{}.mlp.experts.gate_up_proj_bias", (DEC + "mlp.experts.gate.bias", DEC + "mlp.experts.up.bias"),
        "interleaved"),
    row("layers.{}.mlp.experts.down_proj", DEC + "mlp.experts.down.weight", "io"),
    row("layers.{}.mlp.experts.down_proj_bias", DEC + "mlp.experts.down.bias"),
    row("norm.weight", "decoder.final_norm.weight"),
    row("lm_head.weight", "head.weight"),
))  # fmt: skip

NEOX_ROWS = (
    row("embed_in.weight", "embed.weight"),
    row("layers.{}.input_layernorm.{w}", DEC + "attention_norm.{w}"),
    row("layers.{}.attention.query_key_value.{w}", DEC + "attention.qkv.{w}", "heads"),  # per head: q, k, v
    row("layers.{}.attention.dense.{w}", DEC + "attention.out.{w}"),
    row("layers.{}.post_attention_layernorm.{w}", DEC + "mlp_norm.{w}"),
    row("layers.{}.mlp.dense_h_to_4h.{w}", DEC + "mlp.up.{w}"),
    row("layers.{}.mlp.dense_4h_to_h.{w}", DEC + "mlp.down.{w}"),
    row("final_layer_norm.{w}", "decoder.final_norm.{w}"),
)
GPT_NEOX_WEIGHTS = (
    WeightMap("GPT-NeoX", NEOX_ROWS + (row("lm_head.weight", "head.weight"),), strip=("gpt_neox.",)),
    # transformers 4 and the Pythia checkpoints: the head is embed_out; masks and frequencies are buffers
    WeightMap("GPT-NeoX (embed_out checkpoint)", NEOX_ROWS + (row("embed_out.weight", "head.weight"),),
              strip=("gpt_neox.",),
              ignore=(r"layers\.\d+\.attention\.(bias|masked_bias|rotary_emb\.inv_freq)",)),
)  # fmt: skip

OPT_WEIGHTS = WeightMap("OPT", strip=("model.decoder.", "decoder."), rows=(
    row("embed_tokens.weight", "embed.weight"),
    row("embed_positions.weight", "decoder.position.weight"),  # 2 rows in front: position p reads row p + 2
    row("layers.{}.self_attn_layer_norm.{w}", DEC + "attention_norm.{w}"),
    row(each("layers.{}.self_attn.{x}_proj.{w}", "q", "k", "v"), DEC + "attention.qkv.{w}", "cat"),
    row("layers.{}.self_attn.out_proj.{w}", DEC + "attention.out.{w}"),
    row("layers.{}.final_layer_norm.{w}", DEC + "mlp_norm.{w}"),
    row("layers.{}.fc1.{w}", DEC + "mlp.up.{w}"),
    row("layers.{}.fc2.{w}", DEC + "mlp.down.{w}"),
    row("final_layer_norm.{w}", "decoder.final_norm.{w}"),
    row("lm_head.weight", "head.weight"),
))  # fmt: skip


def _t5_rows(gated: bool) -> tuple:
    """T5's encoder and decoder blocks: layer.0 self-attention, (decoder) layer.1 cross-attention, then
    the feed-forward layer; the relative bias table lives in block 0 and serves the whole stack."""
    gated_ff = ((".DenseReluDense.wi_0.weight", "mlp.gate.weight"), (".DenseReluDense.wi_1.weight", "mlp.up.weight"))
    ff = gated_ff if gated else ((".DenseReluDense.wi.weight", "mlp.up.weight"),)
    rows = [
        row("shared.weight", "embed.weight"),
        row("encoder.embed_tokens.weight", "embed.weight", "tied"),
        row("decoder.embed_tokens.weight", "embed.weight", "tied"),
    ]
    for stack in ("encoder", "decoder"):
        block, layer, ff_at = stack + ".block.{}.layer.", stack + ".layers.{}.", "2" if stack == "decoder" else "1"
        rows += [
            row(stack + ".block.0.layer.0.SelfAttention.relative_attention_bias.weight", stack + ".position.weight"),
            row(block + "0.layer_norm.weight", layer + "attention_norm.weight"),
            row(each(block + "0.SelfAttention.{x}.weight", "q", "k", "v"), layer + "attention.qkv.weight", "cat"),
            row(block + "0.SelfAttention.o.weight", layer + "attention.out.weight"),
            row(block + ff_at + ".layer_norm.weight", layer + "mlp_norm.weight"),
            *(row(block + ff_at + src, layer + dst) for src, dst in ff),
            row(block + ff_at + ".DenseReluDense.wo.weight", layer + "mlp.down.weight"),
            row(stack + ".final_layer_norm.weight", stack + ".final_norm.weight"),
        ]
    rows += [
        row("decoder.block.{}.layer.1.layer_norm.weight", DEC + "cross_attention_norm.weight"),
        row("decoder.block.{}.layer.1.EncDecAttention.q.weight", DEC + "cross_attention.q.weight"),
        row(each("decoder.block.{}.layer.1.EncDecAttention.{x}.weight", "k", "v"), DEC + "cross_attention.kv.weight",
            "cat"),
        row("decoder.block.{}.layer.1.EncDecAttention.o.weight", DEC + "cross_attention.out.weight"),
        row("lm_head.weight", "head.weight"),
    ]  # fmt: skip
    return tuple(rows)


# a table some old checkpoints carry and T5 never reads
T5_UNUSED = (r"decoder\.block\.0\.layer\.1\.EncDecAttention\.relative_attention_bias\.weight",)
T5_WEIGHTS = (
    WeightMap("T5 (gated feed-forward)", _t5_rows(gated=True), ignore=T5_UNUSED),
    WeightMap("T5", _t5_rows(gated=False), ignore=T5_UNUSED),
)

BERT_WEIGHTS = WeightMap("BERT", strip=("bert.",), ignore=(r"embeddings\.(position_ids|token_type_ids)",), rows=(
    row("embeddings.word_embeddings.weight", "embed.weight"),
    row("embeddings.position_embeddings.weight", "encoder.position.weight"),
    row("embeddings.token_type_embeddings.weight", "token_type.weight"),
    row("embeddings.LayerNorm.{w}", "encoder.embedding_norm.{w}"),
    row(each("encoder.layer.{}.attention.self.{x}.{w}", "query", "key", "value"), ENC + "attention.qkv.{w}", "cat"),
    row("encoder.layer.{}.attention.output.dense.{w}", ENC + "attention.out.{w}"),
    row("encoder.layer.{}.attention.output.LayerNorm.{w}", ENC + "attention_norm.{w}"),
    row("encoder.layer.{}.intermediate.dense.{w}", ENC + "mlp.up.{w}"),
    row("encoder.layer.{}.output.dense.{w}", ENC + "mlp.down.{w}"),
    row("encoder.layer.{}.output.LayerNorm.{w}", ENC + "mlp_norm.{w}"),
    row("pooler.dense.{w}", "pooler.dense.{w}"),
))  # fmt: skip

# ---------------------------------------------------------------- hybrids: recurrent mixers among attention layers


def _kinds(s: ModelSpec) -> list[ModelSpec]:
    """The spec each decoder layer sees."""
    return [k for _, k in layer_kinds(s, s.decoder_layers)]


def _mixer(s: ModelSpec, kind: str):
    """The first layer's mixer of `kind` (its fields configure every such layer), or None."""
    return next((k.attention for k in _kinds(s) if k.attention.kind == kind), None)


def _dense_kind(s: ModelSpec) -> ModelSpec | None:
    return next((k for k in _kinds(s) if k.mlp.kind == "dense"), None)


def gemma4_moe(s: ModelSpec) -> str | None:
    """Gemma 4's MoE options, which no family here builds: refused by every one."""
    for k in _kinds(s):
        m = k.mlp
        if m.kind == "moe" and (m.d_dense or m.router_norm or m.expert_scales):
            return "mlp.d_dense, mlp.router_norm, mlp.expert_scales (Gemma 4's MoE: no family here builds them)"
    return None


def input_weighting(s: ModelSpec) -> str | None:
    """Llama 4's routing weights on the experts' inputs: only the Llama 4 family builds them."""
    if any(k.mlp.kind == "moe" and k.mlp.weight_input for k in _kinds(s)):
        return "mlp.weight_input=true (routing weights on the experts' inputs: Llama 4's family only)"
    return None


def _moe(s: ModelSpec):
    return next((k.mlp for k in _kinds(s) if k.mlp.kind == "moe"), None)


def qwen3_next_layers(s: ModelSpec) -> str | None:
    """Qwen3-Next: Gated DeltaNet (fused projections) or gated attention with per-head QK-norm; dense or
    MoE MLPs with a gated shared expert, all experts alike."""
    for i, k in enumerate(_kinds(s)):
        a, m = k.attention, k.mlp
        if a.kind == "gated_deltanet" and a.projections != "fused":
            return f"layer {i}: attention.projections={a.projections!r} (needs 'fused')"
        if a.kind == "standard" and (a.qk_norm not in (True, "head") or not a.gate or a.scale is not None or
                                     a.sliding_window or a.chunk or a.sinks or a.shared_kv or a.softcap):  # fmt: skip
            return f"layer {i}: attention (needs gate=true, qk_norm='head', nothing else)"
        if a.kind not in ("standard", "gated_deltanet"):
            return f"layer {i}: attention.kind={a.kind!r} (needs 'standard' or 'gated_deltanet')"
        if m.kind == "moe" and (m != _moe(s) or not m.shared_gate or not m.d_shared or m.router_bias or
                                m.scoring != "softmax" or m.correction_bias or m.routed_scale != 1):  # fmt: skip
            return f"layer {i}: mlp (needs one softmax MoE with a gated shared expert)"
        if m.kind == "dense" and k.d_ff != _dense_kind(s).d_ff:
            return f"layer {i}: d_ff={k.d_ff} (one intermediate_size for dense layers)"
        if m.kind == "none" or k.d_head != s.d_head or k.n_heads != s.n_heads or k.n_kv_heads != s.n_kv_heads:
            return f"layer {i}: mlp or heads differ from the model's"
    return None


def nemotron_h_layers(s: ModelSpec) -> str | None:
    """Nemotron-H: each layer one sub-layer: a Mamba-2 mixer, attention (no positions), or a dense MLP."""
    for i, k in enumerate(_kinds(s)):
        a, m = k.attention, k.mlp
        one = (a.kind in ("mamba2", "standard")) != (m.kind == "dense")
        if not one or a.kind not in ("mamba2", "standard", "none") or m.kind not in ("dense", "none"):
            return f"layer {i}: attention={a.kind!r}, mlp={m.kind!r} (needs one of a Mamba-2 mixer, attention, MLP)"
        if a.kind == "mamba2" and (a != _mixer(s, "mamba2") or a.dt_max is not None):
            return f"layer {i}: one Mamba-2 mixer without dt_max for every such layer"
        if a.kind == "standard" and a != StandardAttention.model_construct():
            return f"layer {i}: attention (needs plain attention)"
        if m.kind == "dense" and k.d_ff != _dense_kind(s).d_ff:
            return f"layer {i}: d_ff={k.d_ff} (one intermediate_size)"
    return None


def _qwen3_next_types(s: ModelSpec) -> list[str]:
    return ["linear_attention" if k.attention.kind == "gated_deltanet" else "full_attention" for k in _kinds(s)]


def _nemotron_h_types(s: ModelSpec) -> list[str]:
    names = {"mamba2": "linear_attention", "standard": "full_attention"}
    return [names.get(k.attention.kind, "mlp") for k in _kinds(s)]


def _deltanet(s: ModelSpec, name: str, default: int = 1):
    a = _mixer(s, "gated_deltanet")
    return getattr(a, name) if a is not None else default


def _mamba2(s: ModelSpec, name: str, default=1):
    a = _mixer(s, "mamba2")
    return getattr(a, name) if a is not None else default


QWEN3_NEXT_CONFIG: dict[str, Callable[[ModelSpec], Any]] = {
    **{k: v for k, v in LLAMA_CONFIG.items() if k not in ("rope_theta", "intermediate_size")},
    "attention_bias": lambda s: s.biases.qkv,
    "rope_parameters": lambda s: {"rope_type": "default", "rope_theta": s.position.base,
                                  "partial_rotary_factor": s.position.fraction},
    "layer_types": _qwen3_next_types,
    "linear_num_key_heads": lambda s: _deltanet(s, "key_heads"),
    "linear_num_value_heads": lambda s: _deltanet(s, "value_heads"),
    "linear_key_head_dim": lambda s: _deltanet(s, "d_key"),
    "linear_value_head_dim": lambda s: _deltanet(s, "d_value_head"),
    "linear_conv_kernel_dim": lambda s: _deltanet(s, "d_conv", 4),
    "intermediate_size": lambda s: (_dense_kind(s) or s).d_ff,
    "num_experts": lambda s: _moe(s).experts if _moe(s) else 0,
    "num_experts_per_tok": lambda s: _moe(s).top_k if _moe(s) else 1,
    "moe_intermediate_size": lambda s: _moe(s).d_expert if _moe(s) else 1,
    "shared_expert_intermediate_size": lambda s: _moe(s).d_shared if _moe(s) else 1,
    "norm_topk_prob": lambda s: _moe(s).normalize if _moe(s) else True,
    "mlp_only_layers": lambda s: [i for i, k in enumerate(_kinds(s)) if k.mlp.kind == "dense"],
    "decoder_sparse_step": lambda s: 1,
}  # fmt: skip

NEMOTRON_H_CONFIG: dict[str, Callable[[ModelSpec], Any]] = {
    "vocab_size": lambda s: s.vocab_size,
    "hidden_size": lambda s: s.d_model,
    "layers_block_type": _nemotron_h_types,
    "num_attention_heads": lambda s: s.n_heads,
    "num_key_value_heads": lambda s: s.n_kv_heads,
    "head_dim": lambda s: s.d_head,
    "max_position_embeddings": lambda s: s.max_positions,
    "intermediate_size": lambda s: (_dense_kind(s) or s).d_ff,
    "mlp_hidden_act": lambda s: s.activation,
    "mlp_bias": lambda s: s.biases.mlp,
    "layer_norm_epsilon": lambda s: s.norm_eps,
    "mamba_num_heads": lambda s: _mamba2(s, "heads"),
    "mamba_head_dim": lambda s: _mamba2(s, "head_dim"),
    "ssm_state_size": lambda s: _mamba2(s, "d_state"),
    "n_groups": lambda s: _mamba2(s, "groups"),
    "conv_kernel": lambda s: _mamba2(s, "d_conv", 4),
    "use_conv_bias": lambda s: _mamba2(s, "conv_bias", True),
    "use_bias": lambda s: _mamba2(s, "bias", False),
    "time_step_min": lambda s: _mamba2(s, "dt_min", 0.0),
    "chunk_size": lambda s: 4,  # several chunks at toy lengths: the chunked scan's joins are exercised
    "tie_word_embeddings": lambda s: s.tie_embeddings,
    "attention_dropout": lambda s: 0.0,
}

# zero-centred RMSNorms (1 + w) around the layers; the Gated DeltaNet's own gated norm stores w
QWEN3_NEXT_WEIGHTS = WeightMap("Qwen3-Next", strip=("model.",), rows=(
    row("embed_tokens.weight", "embed.weight"),
    row("layers.{}.input_layernorm.weight", DEC + "attention_norm.weight", "plus_one"),
    row("layers.{}.input_layernorm.weight", DEC + "mixer_norm.weight", "plus_one"),
    row(each("layers.{}.self_attn.{x}_proj.{w}", "q", "k", "v"), DEC + "attention.qkv.{w}", "q_gate"),
    row("layers.{}.self_attn.o_proj.{w}", DEC + "attention.out.{w}"),
    row("layers.{}.self_attn.q_norm.weight", DEC + "attention.q_norm.weight", "plus_one"),
    row("layers.{}.self_attn.k_norm.weight", DEC + "attention.k_norm.weight", "plus_one"),
    row("layers.{}.linear_attn.{w}", DEC + "mixer.{w}"),  # dt_bias, A_log
    *(row(f"layers.{{}}.linear_attn.{m}.{{w}}", DEC + f"mixer.{m}.{{w}}")
      for m in ("in_proj_qkvz", "in_proj_ba", "conv1d", "norm", "out_proj")),
    row("layers.{}.post_attention_layernorm.weight", DEC + "mlp_norm.weight", "plus_one"),
    *LLAMA_MLP,
    row("layers.{}.mlp.gate.weight", DEC + "mlp.router.weight"),
    row("layers.{}.mlp.experts.gate_up_proj", (DEC + "mlp.experts.gate.weight", DEC + "mlp.experts.up.weight"),
        "split"),
    row("layers.{}.mlp.experts.down_proj", DEC + "mlp.experts.down.weight"),
    *(row(f"layers.{{}}.mlp.shared_expert.{x}_proj.weight", DEC + f"mlp.shared.{x}.weight")
      for x in ("gate", "up", "down")),
    row("layers.{}.mlp.shared_expert_gate.weight", DEC + "mlp.shared_gate.weight"),
    row("norm.weight", "decoder.final_norm.weight", "plus_one"),
    row("lm_head.weight", "head.weight"),
))  # fmt: skip

# every layer is `mixer` with one norm before it: a Mamba-2 mixer, attention or an MLP by its tensors
NEMOTRON_H_WEIGHTS = WeightMap("Nemotron-H", strip=("model.", "backbone."), rows=(
    row("embeddings.weight", "embed.weight"),
    *(row("layers.{}.norm.weight", DEC + f"{n}_norm.weight") for n in ("mixer", "attention", "mlp")),
    row("layers.{}.mixer.{w}", DEC + "mixer.{w}"),  # dt_bias, A_log, D
    *(row(f"layers.{{}}.mixer.{m}.{{w}}", DEC + f"mixer.{m}.{{w}}") for m in ("in_proj", "conv1d", "norm", "out_proj")),
    row(each("layers.{}.mixer.{x}_proj.{w}", "q", "k", "v"), DEC + "attention.qkv.{w}", "cat"),
    row("layers.{}.mixer.o_proj.{w}", DEC + "attention.out.{w}"),
    row("layers.{}.mixer.up_proj.{w}", DEC + "mlp.up.{w}"),
    row("layers.{}.mixer.down_proj.{w}", DEC + "mlp.down.{w}"),
    row("norm_f.weight", "decoder.final_norm.weight"),
    row("lm_head.weight", "head.weight"),
))  # fmt: skip


def jamba_layers(s: ModelSpec) -> str | None:
    """Jamba: Mamba (with dt/B/C norms) or plain attention without positions; a dense MLP or one MoE of
    un-renormalised softmax top-k, experts as wide as the dense MLP."""
    for i, k in enumerate(_kinds(s)):
        a, m = k.attention, k.mlp
        if a.kind == "mamba" and (a != _mixer(s, "mamba") or not a.dt_norms):
            return f"layer {i}: one Mamba mixer with dt_norms for every such layer"
        if a.kind == "standard" and a != StandardAttention.model_construct():
            return f"layer {i}: attention (needs plain attention)"
        if a.kind not in ("mamba", "standard"):
            return f"layer {i}: attention.kind={a.kind!r} (needs 'mamba' or 'standard')"
        if m.kind == "none" or k.d_ff != s.d_ff:
            return f"layer {i}: mlp (needs a dense MLP or experts of d_ff={s.d_ff})"
        if m.kind == "moe" and (m != _moe(s) or m.normalize or m.d_shared or m.router_bias or m.d_expert != s.d_ff
                                or m.scoring != "softmax" or m.correction_bias or m.routed_scale != 1):  # fmt: skip
            return f"layer {i}: mlp (needs one softmax MoE, not renormalised, experts of d_ff)"
    return None


def _period(s: ModelSpec, hit) -> tuple[int, int]:
    """(period, offset) with layer i a hit exactly when i % period == offset; (n + 1, n) when none is."""
    hits = [i for i, k in enumerate(_kinds(s)) if hit(k)]
    n = s.decoder_layers
    if not hits:
        return n + 1, n
    period = hits[1] - hits[0] if len(hits) > 1 else n + 1
    return period, hits[0]


def jamba_periodic(s: ModelSpec) -> str | None:
    checks = (("attention", lambda k: k.attention.kind == "standard"), ("experts", lambda k: k.mlp.kind == "moe"))
    for what, hit in checks:
        period, offset = _period(s, hit)
        if [hit(k) for k in _kinds(s)] != [i % period == offset for i in range(s.decoder_layers)]:
            return f"layers: {what} must sit on the layers i % period == offset"
    return None


JAMBA_CONFIG: dict[str, Callable[[ModelSpec], Any]] = {
    **{k: v for k, v in LLAMA_CONFIG.items() if k not in ("rope_theta", "head_dim")},
    "num_experts": lambda s: _moe(s).experts if _moe(s) else 1,
    "num_experts_per_tok": lambda s: _moe(s).top_k if _moe(s) else 1,
    "attn_layer_period": lambda s: _period(s, lambda k: k.attention.kind == "standard")[0],
    "attn_layer_offset": lambda s: _period(s, lambda k: k.attention.kind == "standard")[1],
    "expert_layer_period": lambda s: _period(s, lambda k: k.mlp.kind == "moe")[0],
    "expert_layer_offset": lambda s: _period(s, lambda k: k.mlp.kind == "moe")[1],
    "mamba_d_state": lambda s: _mixer(s, "mamba").d_state,
    "mamba_d_conv": lambda s: _mixer(s, "mamba").d_conv,
    "mamba_expand": lambda s: _mixer(s, "mamba").d_inner // s.d_model,
    "mamba_dt_rank": lambda s: _mixer(s, "mamba").dt_rank,
    "mamba_conv_bias": lambda s: _mixer(s, "mamba").conv_bias,
    "mamba_proj_bias": lambda s: _mixer(s, "mamba").bias,
    "use_mamba_kernels": lambda s: False,
}


def jamba_expand(s: ModelSpec) -> str | None:
    a = _mixer(s, "mamba")
    ok = a is not None and a.d_inner % s.d_model == 0
    return None if ok else "attention.d_inner (needs a Mamba mixer, d_inner a multiple of d_model: mamba_expand)"


JAMBA_WEIGHTS = WeightMap("Jamba", strip=("model.",), rows=(
    row("embed_tokens.weight", "embed.weight"),
    row("layers.{}.input_layernorm.weight", DEC + "attention_norm.weight"),
    row("layers.{}.input_layernorm.weight", DEC + "mixer_norm.weight"),
    row(each("layers.{}.self_attn.{x}_proj.{w}", "q", "k", "v"), DEC + "attention.qkv.{w}", "cat"),
    row("layers.{}.self_attn.o_proj.{w}", DEC + "attention.out.{w}"),
    row("layers.{}.mamba.{w}", DEC + "mixer.{w}"),  # A_log, D
    *(row(f"layers.{{}}.mamba.{m}.{{w}}", DEC + f"mixer.{m}.{{w}}") for m in (
        "in_proj", "conv1d", "x_proj", "dt_proj", "out_proj", "dt_layernorm", "b_layernorm", "c_layernorm")),
    row("layers.{}.pre_ff_layernorm.weight", DEC + "mlp_norm.weight"),
    *(row(f"layers.{{}}.feed_forward.{x}_proj.{{w}}", DEC + f"mlp.{x}.{{w}}") for x in ("gate", "up", "down")),
    row("layers.{}.feed_forward.router.weight", DEC + "mlp.router.weight"),
    row("layers.{}.feed_forward.experts.gate_up_proj", (DEC + "mlp.experts.gate.weight",
                                                        DEC + "mlp.experts.up.weight"), "split"),
    row("layers.{}.feed_forward.experts.down_proj", DEC + "mlp.experts.down.weight"),
    row("final_layernorm.weight", "decoder.final_norm.weight"),
    row("lm_head.weight", "head.weight"),
))  # fmt: skip

HYBRID_BASE = {**BASE, "attention.kind": None, "attention.qk_norm": None, "mlp.kind": None, "norm": ("rmsnorm",)}

# ---------------------------------------------------------------- the families


@dataclass(frozen=True)
class Family:
    """One transformers family: what it represents, its config from a spec, its weight maps.

    `after`: config attributes set after construction, where the config class overrides what it was
    given (T5 turns gated-gelu into the tanh approximation). `untie`: a head transformers 5 ties
    whatever the config says (T5); a checkpoint with a head of its own unties it on load, and so
    does `transformers_model`."""

    name: str
    model_type: str
    model_class: str
    config_class: str
    needs: tuple
    config: Mapping[str, Callable[[ModelSpec], Any]]
    weights: tuple[WeightMap, ...]
    after: Mapping[str, Callable[[ModelSpec], Any]] = field(default_factory=dict)
    untie: str | None = None

    def unsupported(self, spec: ModelSpec) -> list[str]:
        """Why this family cannot represent `spec`: one phrase per field (empty: it can)."""
        out = []
        shared = (gemma4_moe,) if self.model_type == "llama4_text" else (gemma4_moe, input_weighting)
        for need in (*self.needs, *shared):
            why = need.problem(spec) if isinstance(need, Need) else need(spec)
            if why:
                out.append(why)
        return out


FAMILIES: dict[str, Family] = {f.name: f for f in (
    Family(
        "GPT-2", "gpt2", "GPT2LMHeadModel", "GPT2Config",
        _needs({**BASE, **LEARNED, **ALL_BIASES, "norm": ("layernorm",), "activation": NON_GATED},
               mha, heads_span_d_model, d_value_is_d_head, embedding_is_d_model),
        {
            "vocab_size": lambda s: s.vocab_size,
            "n_positions": lambda s: s.max_positions,
            "n_embd": lambda s: s.d_model,
            "n_layer": lambda s: s.decoder_layers,
            "n_head": lambda s: s.n_heads,
            "n_inner": lambda s: s.d_ff,
            "activation_function": lambda s: ACT[s.activation],  # GPT-2's own default is gelu_new (tanh)
            "layer_norm_epsilon": lambda s: s.norm_eps,
            "tie_word_embeddings": lambda s: s.tie_embeddings,
            "resid_pdrop": lambda s: 0.0, "embd_pdrop": lambda s: 0.0, "attn_pdrop": lambda s: 0.0,
        },
        (GPT2_WEIGHTS,),
    ),
    Family(
        "LLaMA", "llama", "LlamaForCausalLM", "LlamaConfig",
        _needs(LLAMA_LIKE, one_attention_bias, d_value_is_d_head, default_scale, embedding_is_d_model),
        {**LLAMA_CONFIG, "attention_bias": lambda s: s.biases.qkv, "mlp_bias": lambda s: s.biases.mlp},
        (LLAMA_WEIGHTS,),
    ),
    Family(
        "BERT", "bert", "BertModel", "BertConfig",
        _needs({**BASE, **LEARNED, **ALL_BIASES, "kind": ("encoder-only",), "norm": ("layernorm",),
                "norm_position": ("post",), "final_norm": (False,), "embedding_norm": (True,), "pooler": (True,),
                "type_vocab_size": None, "head.kind": ("none",), "activation": NON_GATED},
               token_types, mha, heads_span_d_model, d_value_is_d_head, default_scale, embedding_is_d_model),
        {
            "vocab_size": lambda s: s.vocab_size,
            "hidden_size": lambda s: s.d_model,
            "num_hidden_layers": lambda s: s.encoder_layers,
            "num_attention_heads": lambda s: s.n_heads,
            "intermediate_size": lambda s: s.d_ff,
            "max_position_embeddings": lambda s: s.max_positions,
            "type_vocab_size": lambda s: s.type_vocab_size,
            "layer_norm_eps": lambda s: s.norm_eps,
            "hidden_act": lambda s: ACT[s.activation],
            "hidden_dropout_prob": lambda s: 0.0, "attention_probs_dropout_prob": lambda s: 0.0,
        },
        (BERT_WEIGHTS,),
    ),
    Family(
        "Mixtral", "mixtral", "MixtralForCausalLM", "MixtralConfig",
        _needs({**LLAMA_LIKE, **NO_BIASES, "attention.sliding_window": None, "mlp.kind": ("moe",),
                "mlp.d_shared": (0,), "mlp.shared_gate": (False,), "mlp.router_bias": (False,),
                "mlp.normalize": (True,), "mlp.dense_layers": (0,)},
               window_on_every_layer, d_value_is_d_head, default_scale, embedding_is_d_model),
        {
            **LLAMA_CONFIG,
            "intermediate_size": lambda s: s.mlp.d_expert,  # every layer is a mixture of experts
            "num_local_experts": lambda s: s.mlp.experts,
            "num_experts_per_tok": lambda s: s.mlp.top_k,
            "sliding_window": _window,
            "router_jitter_noise": lambda s: 0.0,
        },
        MIXTRAL_WEIGHTS,
    ),
    Family(
        "Qwen2", "qwen2", "Qwen2ForCausalLM", "Qwen2Config",
        _needs({**LLAMA_LIKE, "bias.qkv": (True,), "bias.out": (False,), "bias.mlp": (False,),
                "attention.sliding_window": None},
               d_value_is_d_head, default_scale, embedding_is_d_model),
        {
            **LLAMA_CONFIG,
            "use_sliding_window": lambda s: _window(s) is not None,
            "sliding_window": _window,
            "layer_types": _layer_types,
        },
        (WeightMap("Qwen2", LLAMA_WEIGHTS.rows, strip=("model.",)),),
    ),
    Family(
        "Gemma 2", "gemma2", "Gemma2ForCausalLM", "Gemma2Config",
        _needs({**LLAMA_LIKE, "norm_position": ("sandwich",), "embedding_scale": ("sqrt_d_model",),
                "bias.mlp": (False,), "attention.softcap": None, "attention.sliding_window": None,
                "head.softcap": None},
               one_attention_bias, integer_query_scalar, d_value_is_d_head, embedding_is_d_model),
        {
            **LLAMA_CONFIG,
            "hidden_activation": lambda s: ACT[s.activation],  # Gemma's own default is gelu_pytorch_tanh
            "hidden_act": None,
            "attention_bias": lambda s: s.biases.qkv,
            "query_pre_attn_scalar": query_pre_attn_scalar,
            "attn_logit_softcapping": lambda s: s.attention.softcap,
            "final_logit_softcapping": lambda s: s.head.softcap,
            "sliding_window": _window,
            "layer_types": _layer_types,
        },
        (GEMMA2_WEIGHTS,),
    ),
    Family(
        "Gemma 3", "gemma3_text", "Gemma3ForCausalLM", "Gemma3TextConfig",
        _needs({**LLAMA_LIKE, "norm_position": ("sandwich",), "embedding_scale": ("sqrt_d_model",),
                "bias.mlp": (False,), "attention.qk_norm": ("head", True), "attention.softcap": None,
                "attention.sliding_window": None, "head.softcap": None},
               gemma3_layers, one_attention_bias, integer_query_scalar, d_value_is_d_head, embedding_is_d_model),
        {
            **LLAMA_CONFIG,
            "rope_theta": None,
            "rope_parameters": lambda s: {
                "full_attention": {"rope_type": "default", "rope_theta": _kind_base(s, False)},
                "sliding_attention": {"rope_type": "default", "rope_theta": _kind_base(s, True)},
            },
            "hidden_activation": lambda s: ACT[s.activation],  # Gemma's own default is gelu_pytorch_tanh
            "hidden_act": None,
            "attention_bias": lambda s: s.biases.qkv,
            "query_pre_attn_scalar": query_pre_attn_scalar,
            "attn_logit_softcapping": lambda s: s.attention.softcap,
            "final_logit_softcapping": lambda s: s.head.softcap,
            "sliding_window": _any_window,
            "layer_types": _layer_types,
        },
        (GEMMA3_WEIGHTS,),
    ),
    Family(
        "OLMo 2", "olmo2", "Olmo2ForCausalLM", "Olmo2Config",
        _needs({**LLAMA_LIKE, "norm_position": ("post_sublayer",), "attention.qk_norm": ("full",),
                "bias.mlp": (False,)},
               one_attention_bias, d_value_is_d_head, default_scale, embedding_is_d_model),
        {**LLAMA_CONFIG, "attention_bias": lambda s: s.biases.qkv},
        (OLMO2_WEIGHTS,),
    ),
    Family(
        "Llama 4", "llama4_text", "Llama4ForCausalLM", "Llama4TextConfig",
        _needs({**LLAMA_LIKE, **NO_BIASES, "activation": ("swiglu",), "position.interleaved": (True,),
                "attention.qk_norm": None, "mlp.kind": None},
               llama4_layers, d_value_is_d_head, default_scale, embedding_is_d_model),
        {
            **LLAMA_CONFIG,
            "rope_theta": None,
            "rope_parameters": lambda s: {"rope_type": "default", "rope_theta": s.position.base},  # not llama3's
            "intermediate_size": lambda s: _moe(s).d_expert if _moe(s) else 1,
            "intermediate_size_mlp": lambda s: (_dense_kind(s) or s).d_ff,
            "num_local_experts": lambda s: _moe(s).experts if _moe(s) else 1,
            "num_experts_per_tok": lambda s: _moe(s).top_k if _moe(s) else 1,
            "moe_layers": lambda s: [i for i, k in enumerate(_layer_specs(s)) if k.mlp.kind == "moe"],
            "no_rope_layers": lambda s: [int(k.position.kind == "rotary") for k in _layer_specs(s)],
            "use_qk_norm": lambda s: any(getattr(k.attention, "qk_norm", False) == "l2" for k in _layer_specs(s)),
            "attention_chunk_size": lambda s: next((k.attention.chunk for k in _layer_specs(s) if k.attention.chunk),
                                                   None),
            "layer_types": lambda s: ["chunked_attention" if k.attention.chunk else "full_attention"
                                      for k in _layer_specs(s)],
            "attention_bias": lambda s: s.biases.qkv,
            "router_jitter_noise": lambda s: 0.0,
        },
        (LLAMA4_WEIGHTS,),
    ),
    Family(
        "gpt-oss", "gpt_oss", "GptOssForCausalLM", "GptOssConfig",
        _needs({**LLAMA_LIKE, "activation": ("clamped_swiglu",), "bias.mlp": (True,), "attention.sinks": (True,),
                "attention.sliding_window": None, "mlp.kind": ("moe",), "mlp.d_shared": (0,),
                "mlp.shared_gate": (False,), "mlp.router_bias": (True,), "mlp.normalize": (True,),
                "mlp.dense_layers": (0,), "mlp.scoring": ("softmax",), "mlp.correction_bias": (False,),
                "mlp.routed_scale": (1.0,)},
               one_attention_bias, d_value_is_d_head, default_scale, embedding_is_d_model),
        {
            **LLAMA_CONFIG,
            "rope_theta": None,
            "rope_parameters": lambda s: {"rope_type": "default", "rope_theta": s.position.base},  # not its yarn
            "hidden_act": None,
            "intermediate_size": lambda s: s.mlp.d_expert,  # every layer is a mixture of experts
            "num_local_experts": lambda s: s.mlp.experts,
            "num_experts_per_tok": lambda s: s.mlp.top_k,
            "swiglu_limit": lambda s: s.swiglu_limit,
            "attention_bias": lambda s: s.biases.qkv,
            "sliding_window": _window,
            "layer_types": _layer_types,
        },
        (GPT_OSS_WEIGHTS,),
    ),
    Family(
        "GPT-NeoX", "gpt_neox", "GPTNeoXForCausalLM", "GPTNeoXConfig",
        _needs({**BASE, **ROTARY, "position.fraction": None, "norm": ("layernorm",),
                "block.kind": ("sequential", "parallel"), "block.shared_norm": (False,), "bias.mlp": (True,),
                "activation": NON_GATED},
               one_attention_bias, mha, heads_span_d_model, d_value_is_d_head, default_scale),
        {
            "vocab_size": lambda s: s.vocab_size,
            "hidden_size": lambda s: s.d_model,
            "num_hidden_layers": lambda s: s.decoder_layers,
            "num_attention_heads": lambda s: s.n_heads,
            "intermediate_size": lambda s: s.d_ff,
            "hidden_act": lambda s: ACT[s.activation],
            "rotary_pct": lambda s: s.position.fraction,  # transformers 5 folds both into rope_parameters
            "rotary_emb_base": lambda s: s.position.base,
            "max_position_embeddings": lambda s: s.max_positions,
            "layer_norm_eps": lambda s: s.norm_eps,
            "use_parallel_residual": lambda s: s.block.kind == "parallel",
            "attention_bias": lambda s: s.biases.qkv,
            "tie_word_embeddings": lambda s: s.tie_embeddings,
            "hidden_dropout": lambda s: 0.0, "attention_dropout": lambda s: 0.0,
        },
        GPT_NEOX_WEIGHTS,
    ),
    Family(
        "OPT", "opt", "OPTForCausalLM", "OPTConfig",
        _needs({**BASE, "position.kind": ("learned",), "position.offset": (2,), "norm": ("layernorm",),
                "norm_eps": (1e-5,), "norm_position": ("pre", "post"), "final_norm": None, "activation": NON_GATED},
               final_norm_with_pre, one_bias, mha, heads_span_d_model, d_value_is_d_head, default_scale,
               embedding_is_d_model),
        {
            "vocab_size": lambda s: s.vocab_size,
            "hidden_size": lambda s: s.d_model,
            "word_embed_proj_dim": lambda s: s.d_model,
            "num_hidden_layers": lambda s: s.decoder_layers,
            "num_attention_heads": lambda s: s.n_heads,
            "ffn_dim": lambda s: s.d_ff,
            "max_position_embeddings": lambda s: s.max_positions,
            "do_layer_norm_before": lambda s: s.norm_position == "pre",
            "enable_bias": lambda s: s.biases.qkv,
            "activation_function": lambda s: ACT[s.activation],
            "tie_word_embeddings": lambda s: s.tie_embeddings,
            "dropout": lambda s: 0.0, "attention_dropout": lambda s: 0.0, "layerdrop": lambda s: 0.0,
        },
        (OPT_WEIGHTS,),
    ),
    Family(
        "Qwen3-Next", "qwen3_next", "Qwen3NextForCausalLM", "Qwen3NextConfig",
        _needs({**HYBRID_BASE, "position.kind": ("rotary",), "position.interleaved": (False,),
                "activation": ("swiglu",), "bias.mlp": (False,)},
               qwen3_next_layers, one_attention_bias, d_value_is_d_head, embedding_is_d_model),
        QWEN3_NEXT_CONFIG,
        (QWEN3_NEXT_WEIGHTS,),
    ),
    Family(
        "Nemotron-H", "nemotron_h", "NemotronHForCausalLM", "NemotronHConfig",
        _needs({**HYBRID_BASE, "position.kind": ("none",), "activation": ("relu2", "relu", "silu", "gelu"),
                "bias.qkv": (False,), "bias.out": (False,)},
               nemotron_h_layers, d_value_is_d_head, embedding_is_d_model),
        NEMOTRON_H_CONFIG,
        (NEMOTRON_H_WEIGHTS,),
    ),
    Family(
        "Jamba", "jamba", "JambaForCausalLM", "JambaConfig",
        _needs({**HYBRID_BASE, "position.kind": ("none",), "activation": ("swiglu",), **NO_BIASES},
               jamba_layers, jamba_periodic, jamba_expand, heads_span_d_model, d_value_is_d_head, default_scale,
               embedding_is_d_model),
        JAMBA_CONFIG,
        (JAMBA_WEIGHTS,),
    ),
    Family(
        "T5", "t5", "T5ForConditionalGeneration", "T5Config",
        _needs({**BASE, **NO_BIASES, "kind": ("encoder-decoder",), "position.kind": ("relative",),
                "norm": ("rmsnorm",), "share_embeddings": (True,), "activation": NON_GATED + GATED,
                "head.scale": lambda s: (1.0, s.d_model**-0.5)},
               unscaled, mha, d_value_is_d_head, embedding_is_d_model),
        {
            "vocab_size": lambda s: s.vocab_size,
            "d_model": lambda s: s.d_model,
            "d_kv": lambda s: s.d_head,
            "d_ff": lambda s: s.d_ff,
            "num_layers": lambda s: s.encoder_layers,
            "num_decoder_layers": lambda s: s.decoder_layers,
            "num_heads": lambda s: s.n_heads,
            "relative_attention_num_buckets": lambda s: s.position.buckets,
            "relative_attention_max_distance": lambda s: s.position.max_distance,
            "layer_norm_epsilon": lambda s: s.norm_eps,
            "feed_forward_proj": lambda s: ("gated-" if s.gated else "") + ACT[s.activation],
            "tie_word_embeddings": lambda s: s.tie_embeddings,
            "dropout_rate": lambda s: 0.0,
        },
        T5_WEIGHTS,
        after={
            "dense_act_fn": lambda s: ACT[s.activation],  # gated-gelu means the tanh approximation to T5
            "scale_decoder_outputs": lambda s: s.head.scale != 1.0,  # the head's input times d_model^-0.5
        },
        untie="lm_head",
    ),
)}  # fmt: skip


def family(name: str) -> Family:
    """A family by its name ('GPT-2') or transformers model_type ('gpt2')."""
    for f in FAMILIES.values():
        if name in (f.name, f.model_type):
            return f
    known = ", ".join(f"{f.name} ({f.model_type})" for f in FAMILIES.values())
    raise ValueError(f"unknown family {name!r}; use one of {known}")
