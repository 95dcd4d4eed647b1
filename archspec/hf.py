"""Hugging Face ``config.json`` files as specs, without torch or transformers.

One declarative adapter per ``model_type`` (a ``Family``), all in ``FAMILIES``. An adapter says

- which config keys it reads and the spec field each one becomes (``fields``),
- the defaults that transformers' config class of that type applies to missing keys (``defaults``,
  copied from ``transformers/models/<type>/configuration_<type>.py``, transformers 5.24), and the
  other names a key goes by (``aliases``: the class's ``attribute_map`` and legacy keys),
- the spec values every model of the family shares (``fixed``: norm, norm position, positions,
  biases, block layout),
- the keys it refuses when they hold a shape- or computation-changing value that the spec cannot
  represent (``refuse``), each with the reason,
- small functions for the fields that need arithmetic (``derive``: rotary fractions, MoE widths),
- the classes of ``architectures`` it counts, by suffix: ``...ForCausalLM`` has an output head,
  ``...Model`` none (a pooler where the class has one), ``...ForMaskedLM`` a masked-LM head.

Keys that do not change the architecture (dropout, token ids, dtype, ``use_cache``,
``rope_scaling``, quantisation) are ignored. Adding a family is one entry here plus its test
against transformers' own model (tests/test_hf.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from archspec.errors import SpecError, clip, shown
from archspec.loading import is_hf_config

Config = Mapping[str, Any]

__all__ = ["FAMILIES", "Family", "Imported", "from_mapping", "is_hf_config", "load_config", "read_config"]


# ---------------------------------------------------------------- activations

# transformers' ACT2FN names -> the spec's activation, for a plain MLP and for a gated one. The GELU
# variants (erf, tanh approximation) differ in the computation only; counts and matmul FLOPs agree.
_GELUS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast", "gelu_python", "gelu_accurate")
PLAIN_ACTIVATIONS = {**dict.fromkeys(_GELUS, "gelu"), "relu": "relu", "silu": "silu", "swish": "silu"}
GATED_ACTIVATIONS = {**dict.fromkeys(_GELUS, "geglu"), "silu": "swiglu", "swish": "swiglu"}


def activation(cfg: Config, key: str, gated: bool, where: str) -> str:
    name = cfg[key]
    table = GATED_ACTIVATIONS if gated else PLAIN_ACTIVATIONS
    if name not in table:
        raise SpecError(f"{where}: {key}={shown(name)} is not supported; supported: {', '.join(sorted(table))}")
    return table[name]


# ---------------------------------------------------------------- refusals


@dataclass(frozen=True)
class Refusal:
    """A key whose value must pass `ok` (given the whole config); otherwise the file is refused."""

    key: str
    ok: Callable[[Config], bool]
    why: str


def must_be(key: str, value: Any, why: str) -> Refusal:
    return Refusal(key, lambda cfg: cfg.get(key, value) == value, why)


def must_be_falsy(key: str, why: str) -> Refusal:
    return Refusal(key, lambda cfg: not cfg.get(key), why)


# ---------------------------------------------------------------- heads by class

# suffix of the class name in `architectures` -> what the class puts on top of the stacks
HEAD_SUFFIXES = {
    "ForCausalLM": "lm",
    "LMHeadModel": "lm",
    "ForConditionalGeneration": "lm",
    "MTModel": "lm",
    "ForMaskedLM": "mlm",
    "EncoderModel": "encoder",
    "Model": "none",
}


@dataclass(frozen=True)
class Family:
    """How one transformers `model_type` maps onto the spec."""

    model_type: str
    prefix: str  # class-name prefix: "Llama" for LlamaForCausalLM, LlamaModel
    classes: tuple[str, ...]  # suffixes it counts, the first is the default when `architectures` is absent
    fields: dict[str, str]  # spec field <- config key
    defaults: dict[str, Any]  # transformers' config-class defaults for missing keys
    fixed: dict[str, Any] = field(default_factory=dict)  # spec values of every model of the family
    aliases: dict[str, str] = field(default_factory=dict)  # other name -> config key
    refuse: tuple[Refusal, ...] = ()
    derive: Callable[[Config, str], dict[str, Any]] | None = None  # fields that need arithmetic
    pooler: bool = False  # the bare `...Model` class has a pooler (BERT)
    tie_lm: bool = True  # an LM head's tying follows tie_word_embeddings (else: `derive` decides)
    notes: Callable[[Config, dict[str, Any]], list[str]] | None = None

    @property
    def class_names(self) -> list[str]:
        return [self.prefix + s for s in self.classes]


@dataclass(frozen=True)
class Imported:
    """A config read into spec data: the fields an archspec spec file needs, plus what to tell the user."""

    data: dict[str, Any]
    model_type: str
    architecture: str
    notes: tuple[str, ...] = ()


# ---------------------------------------------------------------- shared derivations


def rope(cfg: Config, default_theta: float = 10000.0, default_fraction: float = 1.0, **extra: Any) -> dict[str, Any]:
    """The rotary sub-table: transformers 5 reads `rope_parameters` (or `rope_scaling`) first, then the flat
    `rope_theta` / `partial_rotary_factor` keys, then the class defaults. Scaling types (llama3, yarn,
    longrope) change the frequencies only and are not represented."""
    params = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    if not isinstance(params, dict):
        params = {}
    theta = params.get("rope_theta", cfg.get("rope_theta", default_theta))
    fraction = params.get("partial_rotary_factor", cfg.get("partial_rotary_factor", default_fraction))
    table: dict[str, Any] = {"kind": "rotary", "base": float(theta)}
    if fraction != 1.0:
        table["fraction"] = float(fraction)
    table.update(extra)
    return table


def biases(qkv: bool, out: bool, mlp: bool) -> bool | dict[str, bool]:
    """The spec's bias field: one bool when every projection agrees, else the per-projection table."""
    qkv, out, mlp = bool(qkv), bool(out), bool(mlp)
    return qkv if qkv == out == mlp else {"qkv": qkv, "out": out, "mlp": mlp}


def gated_mlp(act_key: str = "hidden_act") -> Callable[[Config, str], dict[str, Any]]:
    return lambda cfg, where: {"activation": activation(cfg, act_key, True, where)}


def plain_mlp(act_key: str) -> Callable[[Config, str], dict[str, Any]]:
    return lambda cfg, where: {"activation": activation(cfg, act_key, False, where)}


def combine(*parts: Callable[[Config, str], dict[str, Any]]) -> Callable[[Config, str], dict[str, Any]]:
    def derive(cfg: Config, where: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for part in parts:
            out.update(part(cfg, where))
        return out

    return derive


def ff(key: str, hidden: str, factor: int = 4) -> Callable[[Config, str], dict[str, Any]]:
    """d_ff from a key that may be null, defaulting to factor * hidden (GPT-2's n_inner)."""
    return lambda cfg, where: {"d_ff": cfg.get(key) or factor * cfg[hidden]}


def head_dim(cfg: Config, where: str) -> dict[str, Any]:
    """An explicit head_dim (q width nh * head_dim may differ from hidden_size)."""
    return {"d_head": cfg["head_dim"]} if cfg.get("head_dim") else {}


def kv_heads(cfg: Config, where: str) -> dict[str, Any]:
    return {"n_kv_heads": cfg["num_key_value_heads"]} if cfg.get("num_key_value_heads") else {}


def window(key: str = "sliding_window") -> Callable[[Config, str], dict[str, Any]]:
    """A sliding window on every layer (Mistral, Phi-3, StarCoder2); null means full attention."""
    return lambda cfg, where: {"attention": {"kind": "standard", "sliding_window": cfg[key]}} if cfg.get(key) else {}


# ---------------------------------------------------------------- family-specific derivations


def _gpt2(cfg: Config, where: str) -> dict[str, Any]:
    return {"attention": {"kind": "standard", "scale": 1.0}} if not cfg["scale_attn_weights"] else {}


def _gpt_neo_layers(cfg: Config) -> list[str]:
    """GPTNeoConfig.expand_attention_types_params: [[["global", "local"], 12]] -> global, local, ... (24)."""
    kinds = cfg.get("attention_types") or [[["global", "local"], 12]]
    return [kind for pattern, repeat in kinds for _ in range(repeat) for kind in pattern]


# which layers use the window -> the spec's sliding_layers
_SLIDING_LAYERS = {(True, True): "all", (True, False): "even", (False, True): "odd"}


def _sliding_layers(local: list[bool]) -> str | None:
    """'all', 'even' or 'odd' for a per-layer list of windowed layers; None for a pattern the spec lacks."""
    even, odd = local[0::2], local[1::2]
    if len(set(even)) > 1 or len(set(odd)) > 1:
        return None
    return _SLIDING_LAYERS.get((bool(even and even[0]), bool(odd and odd[0])), "none")


def _gpt_neo_pattern_ok(cfg: Config) -> bool:
    layers = _gpt_neo_layers(cfg)
    return set(layers) <= {"global", "local"} and _sliding_layers([k == "local" for k in layers]) is not None


def _gpt_neo(cfg: Config, where: str) -> dict[str, Any]:
    """No score scaling; the local layers of attention_types see window_size tokens."""
    attention: dict[str, Any] = {"kind": "standard", "scale": 1.0}
    layers = _sliding_layers([k == "local" for k in _gpt_neo_layers(cfg)])
    if layers != "none":
        attention.update(sliding_window=cfg["window_size"], sliding_layers=layers)
    return {"attention": attention}


def _gptj(cfg: Config, where: str) -> dict[str, Any]:
    d_head = cfg["n_embd"] // cfg["n_head"]
    fraction = cfg["rotary_dim"] / d_head if cfg.get("rotary_dim") else 1.0
    position: dict[str, Any] = {"kind": "rotary", "base": 10000.0, "interleaved": True}
    if fraction != 1.0:
        position["fraction"] = fraction
    return {"position": position}


def _gpt_neox(cfg: Config, where: str) -> dict[str, Any]:
    theta = cfg.get("rotary_emb_base", 10000.0)
    fraction = cfg.get("rotary_pct", 0.25)
    parallel = cfg["use_parallel_residual"]
    return {
        "position": rope(cfg, default_theta=theta, default_fraction=fraction),
        "block": {"kind": "parallel", "shared_norm": False} if parallel else "sequential",
        "bias": biases(cfg["attention_bias"], cfg["attention_bias"], True),
    }


def _opt(cfg: Config, where: str) -> dict[str, Any]:
    pre = cfg["do_layer_norm_before"]
    return {
        "norm_position": "pre" if pre else "post",
        "final_norm": bool(pre and not cfg.get("_remove_final_layer_norm", False)),
    }


def _falcon(cfg: Config, where: str) -> dict[str, Any]:
    heads = cfg["num_attention_heads"]
    new = cfg["new_decoder_architecture"]
    # new_decoder_architecture (40B, 180B): num_kv_heads groups; else multi_query (7B): one key/value head
    kv = (cfg.get("num_kv_heads") or heads) if new else (1 if cfg["multi_query"] else heads)
    out: dict[str, Any] = {
        "n_kv_heads": kv,
        "d_ff": cfg.get("ffn_hidden_size") or 4 * cfg["hidden_size"],
        "position": {"kind": "alibi"} if cfg["alibi"] else rope(cfg),
    }
    if cfg["parallel_attn"]:
        lns = cfg.get("num_ln_in_parallel_attn") or (2 if new else 1)
        out["block"] = {"kind": "parallel", "shared_norm": lns == 1}
    return out


def _llama(cfg: Config, where: str) -> dict[str, Any]:
    return {
        "position": rope(cfg),
        "bias": biases(cfg["attention_bias"], cfg["attention_bias"], cfg["mlp_bias"]),
    }


def _mixtral(cfg: Config, where: str) -> dict[str, Any]:
    return {
        "position": rope(cfg, default_theta=1e6),
        "mlp": {
            "kind": "moe",
            "experts": cfg["num_local_experts"],
            "top_k": cfg["num_experts_per_tok"],
            "d_expert": cfg["intermediate_size"],
        },
    }


def _dense_prefix(cfg: Config) -> int | None:
    """Qwen2-MoE's mlp_only_layers as a count of leading dense layers, or None when it is not a prefix."""
    layers = sorted(cfg.get("mlp_only_layers") or [])
    return len(layers) if layers == list(range(len(layers))) else None


def _qwen2_moe(cfg: Config, where: str) -> dict[str, Any]:
    moe: dict[str, Any] = {
        "kind": "moe",
        "experts": cfg["num_experts"],
        "top_k": cfg["num_experts_per_tok"],
        "d_expert": cfg["moe_intermediate_size"],
        "normalize": bool(cfg["norm_topk_prob"]),
    }
    if cfg["shared_expert_intermediate_size"]:
        moe.update(d_shared=cfg["shared_expert_intermediate_size"], shared_gate=True)
    if _dense_prefix(cfg):
        moe["dense_layers"] = _dense_prefix(cfg)
    return {
        "position": rope(cfg),
        "bias": biases(cfg["qkv_bias"], False, False),
        "mlp": moe,
    }


def _gemma(cfg: Config, where: str) -> dict[str, Any]:
    return {"position": rope(cfg), "bias": biases(cfg["attention_bias"], cfg["attention_bias"], False)}


def _gemma2_alternating(cfg: Config) -> bool:
    types = cfg.get("layer_types")
    if types is None:
        return True
    expected = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(cfg["num_hidden_layers"])]
    return list(types) == expected


def _gemma2(cfg: Config, where: str) -> dict[str, Any]:
    attention: dict[str, Any] = {"kind": "standard", "scale": cfg["query_pre_attn_scalar"] ** -0.5}
    if cfg.get("attn_logit_softcapping"):
        attention["softcap"] = float(cfg["attn_logit_softcapping"])
    if cfg.get("sliding_window"):
        # layer_types: sliding_attention on layers 0, 2, 4, ..., full attention on the others
        attention.update(sliding_window=cfg["sliding_window"], sliding_layers="even")
    out = _gemma(cfg, where) | {"attention": attention}
    if cfg.get("final_logit_softcapping"):
        out["head"] = {"kind": "lm", "softcap": float(cfg["final_logit_softcapping"])}
    return out


def _phi(cfg: Config, where: str) -> dict[str, Any]:
    out: dict[str, Any] = {"position": rope(cfg, default_fraction=0.5), "head": {"kind": "lm", "bias": True}}
    if cfg["qk_layernorm"]:
        out["attention"] = {"kind": "standard", "qk_norm": True}
    return out


def _latent(cfg: Config, where: str) -> dict[str, Any]:
    """DeepSeek-V2/V3: multi-head latent attention and mixture of experts after `first_k_dense_replace` dense
    layers. The router's `e_score_correction_bias` (V3) is a buffer, not a parameter; the multi-token-
    prediction layers (`num_nextn_predict_layers`) are not part of the model transformers builds."""
    attention: dict[str, Any] = {
        "kind": "latent",
        "kv_rank": cfg["kv_lora_rank"],
        "rope_dims": cfg["qk_rope_head_dim"],
    }
    if cfg.get("q_lora_rank"):
        attention["q_rank"] = cfg["q_lora_rank"]
    moe: dict[str, Any] = {
        "kind": "moe",
        "experts": cfg["n_routed_experts"],
        "top_k": cfg["num_experts_per_tok"],
        "d_expert": cfg["moe_intermediate_size"],
        "normalize": bool(cfg["norm_topk_prob"]),
    }
    if cfg.get("n_shared_experts"):
        moe["d_shared"] = cfg["n_shared_experts"] * cfg["moe_intermediate_size"]
    if cfg.get("first_k_dense_replace"):
        moe["dense_layers"] = cfg["first_k_dense_replace"]
    interleaved = cfg.get("rope_interleave", True)
    return {
        # attention_bias: on q_a (or none on a full q projection), kv_a and o_proj, as bias.qkv and bias.out
        "bias": biases(cfg["attention_bias"], cfg["attention_bias"], False),
        "d_head": cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"],
        "d_value": cfg["v_head_dim"],
        "attention": attention,
        "mlp": moe,
        "position": rope(cfg, interleaved=bool(interleaved)),
    }


T5_ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_new": "gelu", "silu": "silu", "swish": "silu"}
T5_GATED = {"gated-gelu": "geglu", "gated-gelu_new": "geglu", "gated-silu": "swiglu", "gated-swish": "swiglu"}


def _t5(cfg: Config, where: str) -> dict[str, Any]:
    proj = cfg["feed_forward_proj"]
    act = {**T5_ACTIVATIONS, **T5_GATED}.get(proj)
    if act is None:
        supported = ", ".join(sorted({**T5_ACTIVATIONS, **T5_GATED}))
        raise SpecError(f"{where}: feed_forward_proj={shown(proj)} is not supported; supported: {supported}")
    # transformers 5 ties T5's head to the shared embedding whatever the file says; a file with
    # tie_word_embeddings=false (v1.1, Flan-T5, mT5) only turns off the d_model**-0.5 rescaling of the
    # decoder output that tying brings (T5Config.scale_decoder_outputs).
    scaled = cfg.get("tie_word_embeddings", True) is not False
    out: dict[str, Any] = {
        "activation": act,
        "decoder_layers": cfg["num_decoder_layers"] if cfg.get("num_decoder_layers") is not None else cfg["num_layers"],
        "position": {
            "kind": "relative",
            "buckets": cfg["relative_attention_num_buckets"],
            "max_distance": cfg["relative_attention_max_distance"],
        },
        "tie_embeddings": True,
    }
    if scaled:
        out["head"] = {"kind": "lm", "scale": cfg["d_model"] ** -0.5}
    return out


def _t5_notes(cfg: Config, data: dict[str, Any]) -> list[str]:
    if cfg.get("tie_word_embeddings", True) is not False:
        return []
    extra = data["vocab_size"] * data["d_model"]
    return [
        "the file says tie_word_embeddings = false, but transformers 5 builds T5 with its output head tied to the "
        "shared embedding (the file's value only turns off the d_model**-0.5 rescaling), and this spec counts what "
        f"transformers builds; the released checkpoint has a separate head: set tie_embeddings = false to count "
        f"it (+{extra:,} parameters)"
    ]


def _encoder_decoder(cfg: Config, where: str) -> dict[str, Any]:
    """BART and Marian: one spec n_heads and d_ff for both stacks."""
    return {"embedding_scale": "sqrt_d_model" if cfg["scale_embedding"] else "none"}


def _same(a: str, b: str) -> Refusal:
    why = f"the spec has one value for both stacks: {a}"
    return Refusal(b, lambda cfg: cfg.get(b) is None or cfg[b] == cfg[a], why)


# transformers 5 ties the encoder's and decoder's token tables to `shared` only when the head is tied too
_UNTIED_SHARED = "untied, transformers builds an unused shared table beside the encoder's and decoder's"


def _distilbert_notes(cfg: Config, data: dict[str, Any]) -> list[str]:
    if not cfg["sinusoidal_pos_embds"]:
        return []
    return [
        "sinusoidal_pos_embds: transformers 5 fills the position table with sinusoids but keeps it a trainable "
        'nn.Embedding, so this spec counts a learned table (position = "sinusoidal" would count none)'
    ]


def _marian(cfg: Config, where: str) -> dict[str, Any]:
    return _encoder_decoder(cfg, where) | {"share_embeddings": bool(cfg["share_encoder_decoder_embeddings"])}


def _roberta(cfg: Config, where: str) -> dict[str, Any]:
    # position ids start after the padding index: max_position_embeddings rows, the first pad_token_id + 1 unused
    offset = (cfg.get("pad_token_id") or 0) + 1
    return {
        "max_positions": cfg["max_position_embeddings"] - offset,
        "position": {"kind": "learned", "offset": offset},
    }


# ---------------------------------------------------------------- the registry

_BERT_REFUSE = (
    must_be("position_embedding_type", "absolute", "relative position embeddings are not represented"),
    must_be_falsy("is_decoder", "a causal BERT is not represented"),
    must_be_falsy("add_cross_attention", "cross-attention in an encoder-only model is not represented"),
    Refusal(
        "tie_word_embeddings",
        lambda cfg: cfg.get("tie_word_embeddings", True) is not False,
        "the masked-LM decoder is tied to the token embedding",
    ),
)
_BERT_FIXED = {
    "position": "learned",
    "norm": "layernorm",
    "norm_position": "post",
    "final_norm": False,
    "embedding_norm": True,
    "bias": True,
}

_LLAMA_FIELDS = {
    "vocab_size": "vocab_size",
    "d_model": "hidden_size",
    "decoder_layers": "num_hidden_layers",
    "n_heads": "num_attention_heads",
    "d_ff": "intermediate_size",
    "max_positions": "max_position_embeddings",
    "norm_eps": "rms_norm_eps",
}
_LLAMA_FIXED = {"norm": "rmsnorm", "norm_position": "pre"}

# fmt: off
_FAMILIES = [
    Family(
        "gpt2",
        "GPT2",
        ("LMHeadModel", "Model"),
        {"vocab_size": "vocab_size", "d_model": "n_embd", "decoder_layers": "n_layer", "n_heads": "n_head",
         "max_positions": "n_positions", "norm_eps": "layer_norm_epsilon"},
        {"vocab_size": 50257, "n_positions": 1024, "n_embd": 768, "n_layer": 12, "n_head": 12, "n_inner": None,
         "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5, "scale_attn_weights": True,
         "tie_word_embeddings": True},
        fixed={"position": "learned", "norm": "layernorm", "norm_position": "pre", "bias": True},
        aliases={"hidden_size": "n_embd", "max_position_embeddings": "n_positions", "num_attention_heads": "n_head",
                 "num_hidden_layers": "n_layer"},
        refuse=(
            must_be_falsy("add_cross_attention", "cross-attention in a decoder-only model is not represented"),
            must_be_falsy("scale_attn_by_inverse_layer_idx", "per-layer attention scaling is not represented"),
        ),
        derive=combine(ff("n_inner", "n_embd"), plain_mlp("activation_function"), _gpt2),
    ),
    Family(
        "gpt_neo",
        "GPTNeo",
        ("ForCausalLM", "Model"),
        {"vocab_size": "vocab_size", "d_model": "hidden_size", "decoder_layers": "num_layers", "n_heads": "num_heads",
         "max_positions": "max_position_embeddings", "norm_eps": "layer_norm_epsilon"},
        {"vocab_size": 50257, "max_position_embeddings": 2048, "hidden_size": 2048, "num_layers": 24,
         "attention_types": None, "num_heads": 16, "intermediate_size": None, "window_size": 256,
         "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5, "tie_word_embeddings": True},
        fixed={"position": "learned", "norm": "layernorm", "norm_position": "pre",
               "bias": {"qkv": False, "out": True, "mlp": True}},
        aliases={"num_attention_heads": "num_heads", "num_hidden_layers": "num_layers"},
        refuse=(Refusal("attention_types", _gpt_neo_pattern_ok,
                        "only all-global, all-local or alternating global and local layers are represented"),),
        derive=combine(ff("intermediate_size", "hidden_size"), plain_mlp("activation_function"), _gpt_neo),
    ),
    Family(
        "gptj",
        "GPTJ",
        ("ForCausalLM", "Model"),
        {"vocab_size": "vocab_size", "d_model": "n_embd", "decoder_layers": "n_layer", "n_heads": "n_head",
         "max_positions": "n_positions", "norm_eps": "layer_norm_epsilon"},
        {"vocab_size": 50400, "n_positions": 2048, "n_embd": 4096, "n_layer": 28, "n_head": 16, "rotary_dim": 64,
         "n_inner": None, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5, "tie_word_embeddings": False},
        fixed={"norm": "layernorm", "norm_position": "pre", "block": {"kind": "parallel", "shared_norm": True},
               "bias": {"qkv": False, "out": False, "mlp": True}, "head": {"kind": "lm", "bias": True}},
        aliases={"max_position_embeddings": "n_positions", "hidden_size": "n_embd", "num_attention_heads": "n_head",
                 "num_hidden_layers": "n_layer"},
        derive=combine(ff("n_inner", "n_embd"), plain_mlp("activation_function"), _gptj),
    ),
    Family(
        "gpt_neox",
        "GPTNeoX",
        ("ForCausalLM", "Model"),
        {"vocab_size": "vocab_size", "d_model": "hidden_size", "decoder_layers": "num_hidden_layers",
         "n_heads": "num_attention_heads", "d_ff": "intermediate_size", "max_positions": "max_position_embeddings",
         "norm_eps": "layer_norm_eps"},
        {"vocab_size": 50432, "hidden_size": 6144, "num_hidden_layers": 44, "num_attention_heads": 64,
         "intermediate_size": 24576, "hidden_act": "gelu", "max_position_embeddings": 2048, "layer_norm_eps": 1e-5,
         "tie_word_embeddings": False, "use_parallel_residual": True, "attention_bias": True},
        fixed={"norm": "layernorm", "norm_position": "pre"},
        derive=combine(plain_mlp("hidden_act"), _gpt_neox),
    ),
    Family(
        "opt",
        "OPT",
        ("ForCausalLM", "Model"),
        {"vocab_size": "vocab_size", "d_model": "hidden_size", "decoder_layers": "num_hidden_layers",
         "n_heads": "num_attention_heads", "d_ff": "ffn_dim", "max_positions": "max_position_embeddings",
         "bias": "enable_bias"},
        {"vocab_size": 50272, "hidden_size": 768, "num_hidden_layers": 12, "ffn_dim": 3072,
         "max_position_embeddings": 2048, "do_layer_norm_before": True, "word_embed_proj_dim": None,
         "num_attention_heads": 12, "activation_function": "relu", "enable_bias": True,
         "layer_norm_elementwise_affine": True, "tie_word_embeddings": True},
        # learned positions keep 2 extra rows (position ids start at 2); nn.LayerNorm's eps 1e-5
        fixed={"position": {"kind": "learned", "offset": 2}, "norm": "layernorm", "norm_eps": 1e-5},
        refuse=(
            Refusal(
                "word_embed_proj_dim",
                lambda c: c.get("word_embed_proj_dim") in (None, c["hidden_size"]),
                "token embeddings narrower than hidden_size (project_in/project_out) are not represented",
            ),
            must_be("layer_norm_elementwise_affine", True, "LayerNorms without weight and bias are not represented"),
        ),
        derive=combine(plain_mlp("activation_function"), _opt),
    ),
    Family(
        "bloom",
        "Bloom",
        ("ForCausalLM", "Model"),
        # no position table (ALiBi): max_positions is the training sequence length (Megatron's seq_length)
        {"vocab_size": "vocab_size", "d_model": "hidden_size", "decoder_layers": "n_layer", "n_heads": "n_head",
         "max_positions": "seq_length", "norm_eps": "layer_norm_epsilon"},
        {"vocab_size": 250880, "hidden_size": 64, "n_layer": 2, "n_head": 8, "layer_norm_epsilon": 1e-5,
         "apply_residual_connection_post_layernorm": False, "tie_word_embeddings": True, "seq_length": 2048},
        fixed={"position": "alibi", "norm": "layernorm", "norm_position": "pre", "embedding_norm": True, "bias": True,
               "activation": "gelu"},
        aliases={"n_embed": "hidden_size", "num_hidden_layers": "n_layer", "num_attention_heads": "n_head"},
        refuse=(
            must_be_falsy("apply_residual_connection_post_layernorm", "a residual after the norm is not represented"),
        ),
        derive=lambda cfg, where: {"d_ff": 4 * cfg["hidden_size"]},  # BloomMLP: 4 * hidden_size, no key
    ),
    Family(
        "falcon",
        "Falcon",
        ("ForCausalLM", "Model"),
        {"vocab_size": "vocab_size", "d_model": "hidden_size", "decoder_layers": "num_hidden_layers",
         "n_heads": "num_attention_heads", "max_positions": "max_position_embeddings",
         "norm_eps": "layer_norm_epsilon", "bias": "bias"},
        {"vocab_size": 65024, "hidden_size": 4544, "num_hidden_layers": 32, "num_attention_heads": 71,
         "num_ln_in_parallel_attn": None, "layer_norm_epsilon": 1e-5, "num_kv_heads": None, "alibi": False,
         "new_decoder_architecture": False, "multi_query": True, "parallel_attn": True, "bias": False,
         "max_position_embeddings": 2048, "ffn_hidden_size": None, "activation": "gelu", "tie_word_embeddings": True},
        fixed={"norm": "layernorm", "norm_position": "pre"},
        # the RefinedWeb keys of the first Falcon files (transformers 5 no longer reads them)
        aliases={"n_embed": "hidden_size", "n_head": "num_attention_heads", "n_layer": "num_hidden_layers"},
        refuse=(
            Refusal(
                "parallel_attn",
                lambda c: c["parallel_attn"] or not c["new_decoder_architecture"],
                "new_decoder_architecture with sequential blocks is not represented",
            ),
            Refusal(
                "num_ln_in_parallel_attn",
                lambda c: c.get("num_ln_in_parallel_attn") in (None, 1) or c["new_decoder_architecture"],
                "two norms per parallel block exist only with new_decoder_architecture",
            ),
        ),
        derive=combine(plain_mlp("activation"), _falcon),
    ),
    Family(
        "llama",
        "Llama",
        ("ForCausalLM", "Model"),
        _LLAMA_FIELDS,
        {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
         "num_attention_heads": 32, "num_key_value_heads": None, "hidden_act": "silu",
         "max_position_embeddings": 2048, "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "attention_bias": False,
         "mlp_bias": False, "head_dim": None},
        fixed=_LLAMA_FIXED,
        derive=combine(gated_mlp(), head_dim, kv_heads, _llama),
    ),
    Family(
        "mistral",
        "Mistral",
        ("ForCausalLM", "Model"),
        _LLAMA_FIELDS,
        {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
         "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": None, "hidden_act": "silu",
         "max_position_embeddings": 131072, "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "sliding_window": 4096},
        fixed={**_LLAMA_FIXED, "bias": False},
        derive=combine(gated_mlp(), head_dim, kv_heads, window(), lambda cfg, where: {"position": rope(cfg)}),
    ),
    Family(
        "mixtral",
        "Mixtral",
        ("ForCausalLM", "Model"),
        _LLAMA_FIELDS,
        {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
         "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": None, "hidden_act": "silu",
         "max_position_embeddings": 131072, "rms_norm_eps": 1e-5, "tie_word_embeddings": False,
         "sliding_window": None, "num_experts_per_tok": 2, "num_local_experts": 8},
        fixed={**_LLAMA_FIXED, "bias": False},
        aliases={"num_experts": "num_local_experts"},
        derive=combine(gated_mlp(), head_dim, kv_heads, window(), _mixtral),
    ),
    Family(
        "qwen2",
        "Qwen2",
        ("ForCausalLM", "Model"),
        _LLAMA_FIELDS,
        {"vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016, "num_hidden_layers": 32,
         "num_attention_heads": 32, "num_key_value_heads": 32, "hidden_act": "silu", "max_position_embeddings": 32768,
         "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "use_sliding_window": False},
        # Qwen2Attention: q, k, v with bias, o_proj without
        fixed={**_LLAMA_FIXED, "bias": {"qkv": True, "out": False, "mlp": False}},
        refuse=(must_be_falsy("use_sliding_window", "windows after max_window_layers are not represented"),),
        derive=combine(gated_mlp(), kv_heads, lambda cfg, where: {"position": rope(cfg)}),
    ),
    Family(
        "qwen2_moe",
        "Qwen2Moe",
        ("ForCausalLM", "Model"),
        _LLAMA_FIELDS,
        {"vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 24,
         "num_attention_heads": 16, "num_key_value_heads": 16, "hidden_act": "silu", "max_position_embeddings": 32768,
         "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "use_sliding_window": False, "decoder_sparse_step": 1,
         "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632, "num_experts_per_tok": 4,
         "num_experts": 60, "mlp_only_layers": None, "qkv_bias": True,
         "norm_topk_prob": False},
        fixed=_LLAMA_FIXED,
        refuse=(
            must_be_falsy("use_sliding_window", "windows on some layers are not represented"),
            must_be("decoder_sparse_step", 1, "MoE on every n-th layer only is not represented"),
            Refusal(
                "mlp_only_layers",
                lambda c: _dense_prefix(c) is not None,
                "dense layers other than the first ones are not represented",
            ),
            Refusal("num_experts", lambda c: bool(c["num_experts"]), "a model without experts is a qwen2 model"),
            Refusal("shared_expert_intermediate_size", lambda c: bool(c["shared_expert_intermediate_size"]),
                    "transformers keeps the shared expert's gate without a shared expert"),
        ),
        derive=combine(gated_mlp(), kv_heads, _qwen2_moe),
    ),
    Family(
        "gemma",
        "Gemma",
        ("ForCausalLM", "Model"),
        _LLAMA_FIELDS,
        {"vocab_size": 256000, "hidden_size": 3072, "intermediate_size": 24576, "num_hidden_layers": 28,
         "num_attention_heads": 16, "num_key_value_heads": 16, "head_dim": 256, "hidden_act": "gelu_pytorch_tanh",
         "max_position_embeddings": 8192, "rms_norm_eps": 1e-6, "tie_word_embeddings": True, "attention_bias": False},
        fixed={**_LLAMA_FIXED, "embedding_scale": "sqrt_d_model"},
        refuse=(must_be_falsy("use_bidirectional_attention", "bidirectional Gemma is not represented"),),
        derive=combine(gated_mlp(), head_dim, kv_heads, _gemma),
    ),
    Family(
        "gemma2",
        "Gemma2",
        ("ForCausalLM", "Model"),
        _LLAMA_FIELDS,
        {"vocab_size": 256000, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
         "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
         "hidden_activation": "gelu_pytorch_tanh", "max_position_embeddings": 8192, "rms_norm_eps": 1e-6,
         "tie_word_embeddings": True, "attention_bias": False, "query_pre_attn_scalar": 256, "sliding_window": 4096,
         "layer_types": None, "final_logit_softcapping": 30.0, "attn_logit_softcapping": 50.0},
        # four RMSNorms per layer: before and after attention, before and after the MLP
        fixed={**_LLAMA_FIXED, "norm_position": "sandwich", "embedding_scale": "sqrt_d_model"},
        refuse=(
            Refusal("layer_types", _gemma2_alternating, "only alternating sliding and full layers are represented"),
            must_be_falsy("use_bidirectional_attention", "bidirectional Gemma is not represented"),
        ),
        derive=combine(gated_mlp("hidden_activation"), head_dim, kv_heads, _gemma2),
    ),
    Family(
        "phi",
        "Phi",
        ("ForCausalLM", "Model"),
        {**_LLAMA_FIELDS, "norm_eps": "layer_norm_eps"},
        {"vocab_size": 51200, "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 24,
         "num_attention_heads": 32, "num_key_value_heads": None, "hidden_act": "gelu_new",
         "max_position_embeddings": 2048, "layer_norm_eps": 1e-5, "tie_word_embeddings": False, "qk_layernorm": False},
        fixed={"norm": "layernorm", "norm_position": "pre", "bias": True,
               "block": {"kind": "parallel", "shared_norm": True}},
        derive=combine(plain_mlp("hidden_act"), kv_heads, _phi),
    ),
    Family(
        "phi3",
        "Phi3",
        ("ForCausalLM", "Model"),
        _LLAMA_FIELDS,
        {"vocab_size": 32064, "hidden_size": 3072, "intermediate_size": 8192, "num_hidden_layers": 32,
         "num_attention_heads": 32, "num_key_value_heads": None, "hidden_act": "silu",
         "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "tie_word_embeddings": False, "sliding_window": None},
        fixed={**_LLAMA_FIXED, "bias": False},
        derive=combine(gated_mlp(), kv_heads, window(), lambda cfg, where: {"position": rope(cfg)}),
    ),
    Family(
        "starcoder2",
        "Starcoder2",
        ("ForCausalLM", "Model"),
        {**_LLAMA_FIELDS, "norm_eps": "norm_epsilon", "bias": "use_bias"},
        {"vocab_size": 49152, "hidden_size": 3072, "intermediate_size": 12288, "num_hidden_layers": 30,
         "num_attention_heads": 24, "num_key_value_heads": 2, "hidden_act": "gelu_pytorch_tanh",
         "max_position_embeddings": 4096, "norm_epsilon": 1e-5, "sliding_window": None, "use_bias": True,
         "tie_word_embeddings": True},
        fixed={"norm": "layernorm", "norm_position": "pre"},
        derive=combine(plain_mlp("hidden_act"), kv_heads, window(), lambda cfg, where: {"position": rope(cfg)}),
    ),
    *(
        Family(
            model_type,
            prefix,
            ("ForCausalLM", "Model"),
            _LLAMA_FIELDS,
            defaults,
            fixed={**_LLAMA_FIXED, "bias": False},
            aliases=aliases,
            refuse=(
                must_be_falsy("mlp_bias", "biases on the MLPs of a mixture of experts are not represented"),
                Refusal("n_routed_experts", lambda c: bool(c.get("n_routed_experts")), "a model without experts"),
                Refusal(
                    "num_experts_per_tok",
                    lambda c: bool(c.get("num_experts_per_tok")),
                    "experts per token must be given",
                ),
            ),
            derive=combine(gated_mlp(), _latent),
        )
        for model_type, prefix, defaults, aliases in (
            (
                "deepseek_v2",
                "DeepseekV2",
                {"vocab_size": 102400, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
                 "num_attention_heads": 32, "hidden_act": "silu", "max_position_embeddings": 2048,
                 "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "attention_bias": False, "mlp_bias": False,
                 "first_k_dense_replace": 0, "kv_lora_rank": 512, "q_lora_rank": 1536, "n_routed_experts": 64,
                 "n_shared_experts": 2, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
                 "num_experts_per_tok": None, "moe_intermediate_size": 1407, "norm_topk_prob": False,
                 "rope_interleave": True},
                {"num_experts": "n_routed_experts"},
            ),
            (
                "deepseek_v3",
                "DeepseekV3",
                {"vocab_size": 129280, "hidden_size": 7168, "intermediate_size": 18432, "moe_intermediate_size": 2048,
                 "num_hidden_layers": 61, "num_attention_heads": 128, "n_shared_experts": 1, "n_routed_experts": 256,
                 "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_rope_head_dim": 64, "v_head_dim": 128,
                 "qk_nope_head_dim": 128, "num_experts_per_tok": 8, "first_k_dense_replace": 3, "hidden_act": "silu",
                 "max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "tie_word_embeddings": False,
                 "rope_interleave": True, "attention_bias": False, "norm_topk_prob": True},
                {"num_local_experts": "n_routed_experts"},
            ),
        )
    ),
    Family(
        "t5",
        "T5",
        ("ForConditionalGeneration", "Model", "EncoderModel"),
        {"vocab_size": "vocab_size", "d_model": "d_model", "d_head": "d_kv", "d_ff": "d_ff",
         "encoder_layers": "num_layers", "n_heads": "num_heads", "max_positions": "n_positions",
         "norm_eps": "layer_norm_epsilon"},
        {"vocab_size": 32128, "d_model": 512, "d_kv": 64, "d_ff": 2048, "num_layers": 6, "num_decoder_layers": None,
         "num_heads": 8, "relative_attention_num_buckets": 32, "relative_attention_max_distance": 128,
         "layer_norm_epsilon": 1e-6, "feed_forward_proj": "relu", "n_positions": 512},
        # (n_positions: the released files' pre-training length; T5 has no position table)
        # no score scaling, no biases, RMS norms, one token table for encoder and decoder, unscaled embeddings
        fixed={"norm": "rmsnorm", "norm_position": "pre", "bias": False, "share_embeddings": True,
               "attention": {"kind": "standard", "scale": 1.0}, "embedding_scale": "none"},
        aliases={"hidden_size": "d_model", "num_attention_heads": "num_heads", "num_hidden_layers": "num_layers",
                 "head_dim": "d_kv"},
        derive=_t5,
        tie_lm=False,
        notes=_t5_notes,
    ),
    Family(
        "bart",
        "Bart",
        ("ForConditionalGeneration", "Model"),
        {"vocab_size": "vocab_size", "d_model": "d_model", "encoder_layers": "encoder_layers",
         "decoder_layers": "decoder_layers", "n_heads": "encoder_attention_heads", "d_ff": "encoder_ffn_dim",
         "max_positions": "max_position_embeddings"},
        {"vocab_size": 50265, "max_position_embeddings": 1024, "encoder_layers": 12, "encoder_ffn_dim": 4096,
         "encoder_attention_heads": 16, "decoder_layers": 12, "decoder_ffn_dim": 4096, "decoder_attention_heads": 16,
         "activation_function": "gelu", "d_model": 1024, "scale_embedding": False, "tie_word_embeddings": True},
        # post-norm blocks, a norm on the embeddings of each stack, learned positions with 2 extra rows,
        # one token table for encoder and decoder; final_logits_bias is a buffer
        fixed={"position": {"kind": "learned", "offset": 2}, "norm": "layernorm", "norm_position": "post",
               "final_norm": False, "embedding_norm": True, "bias": True, "share_embeddings": True, "norm_eps": 1e-5},
        aliases={"num_attention_heads": "encoder_attention_heads", "hidden_size": "d_model",
                 "num_hidden_layers": "encoder_layers"},
        refuse=(
            _same("encoder_attention_heads", "decoder_attention_heads"),
            _same("encoder_ffn_dim", "decoder_ffn_dim"),
            Refusal("tie_word_embeddings", lambda c: c["tie_word_embeddings"] is not False, _UNTIED_SHARED),
        ),
        derive=combine(plain_mlp("activation_function"), _encoder_decoder),
    ),
    Family(
        "marian",
        "Marian",
        ("MTModel", "Model"),
        {"vocab_size": "vocab_size", "d_model": "d_model", "encoder_layers": "encoder_layers",
         "decoder_layers": "decoder_layers", "n_heads": "encoder_attention_heads", "d_ff": "encoder_ffn_dim",
         "max_positions": "max_position_embeddings"},
        {"vocab_size": 58101, "decoder_vocab_size": None, "max_position_embeddings": 1024, "encoder_layers": 12,
         "encoder_ffn_dim": 4096, "encoder_attention_heads": 16, "decoder_layers": 12, "decoder_ffn_dim": 4096,
         "decoder_attention_heads": 16, "activation_function": "gelu", "d_model": 1024, "scale_embedding": False,
         "share_encoder_decoder_embeddings": True, "tie_word_embeddings": True},
        # sinusoidal positions: transformers keeps them as frozen nn.Parameters (requires_grad=False), which
        # archspec, like the Transformer paper, counts as the constants they are
        fixed={"position": "sinusoidal", "norm": "layernorm", "norm_position": "post", "final_norm": False,
               "bias": True, "norm_eps": 1e-5},
        aliases={"num_attention_heads": "encoder_attention_heads", "hidden_size": "d_model",
                 "num_hidden_layers": "encoder_layers"},
        refuse=(
            _same("encoder_attention_heads", "decoder_attention_heads"),
            _same("encoder_ffn_dim", "decoder_ffn_dim"),
            _same("vocab_size", "decoder_vocab_size"),
            Refusal("tie_word_embeddings",
                    lambda c: c["tie_word_embeddings"] is not False or not c["share_encoder_decoder_embeddings"],
                    _UNTIED_SHARED),
        ),
        derive=combine(plain_mlp("activation_function"), _marian),
    ),
    Family(
        "bert",
        "Bert",
        ("ForMaskedLM", "Model"),
        {"vocab_size": "vocab_size", "d_model": "hidden_size", "encoder_layers": "num_hidden_layers",
         "n_heads": "num_attention_heads", "d_ff": "intermediate_size", "max_positions": "max_position_embeddings",
         "type_vocab_size": "type_vocab_size", "norm_eps": "layer_norm_eps"},
        {"vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
         "intermediate_size": 3072, "hidden_act": "gelu", "max_position_embeddings": 512, "type_vocab_size": 2,
         "layer_norm_eps": 1e-12, "tie_word_embeddings": True},
        fixed=_BERT_FIXED,
        refuse=_BERT_REFUSE,
        derive=plain_mlp("hidden_act"),
        pooler=True,
    ),
    Family(
        "roberta",
        "Roberta",
        ("ForMaskedLM", "Model"),
        {"vocab_size": "vocab_size", "d_model": "hidden_size", "encoder_layers": "num_hidden_layers",
         "n_heads": "num_attention_heads", "d_ff": "intermediate_size", "type_vocab_size": "type_vocab_size",
         "norm_eps": "layer_norm_eps"},
        {"vocab_size": 50265, "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
         "intermediate_size": 3072, "hidden_act": "gelu", "max_position_embeddings": 512, "type_vocab_size": 2,
         "layer_norm_eps": 1e-12, "tie_word_embeddings": True, "pad_token_id": 1},
        fixed=_BERT_FIXED,
        refuse=(
            *_BERT_REFUSE,
            Refusal(
                "max_position_embeddings",
                lambda c: c["max_position_embeddings"] > (c.get("pad_token_id") or 0) + 1,
                "the table must be longer than the padding offset",
            ),
        ),
        derive=combine(plain_mlp("hidden_act"), _roberta),
        pooler=True,
    ),
    Family(
        "distilbert",
        "DistilBert",
        ("ForMaskedLM", "Model"),
        {"vocab_size": "vocab_size", "d_model": "dim", "encoder_layers": "n_layers", "n_heads": "n_heads",
         "d_ff": "hidden_dim", "max_positions": "max_position_embeddings"},
        {"vocab_size": 30522, "max_position_embeddings": 512, "sinusoidal_pos_embds": False, "n_layers": 6,
         "n_heads": 12, "dim": 768, "hidden_dim": 3072, "activation": "gelu", "tie_word_embeddings": True},
        # no token types; the LayerNorm eps is fixed at 1e-12 in the modelling code
        fixed={**_BERT_FIXED, "norm_eps": 1e-12},
        aliases={"hidden_size": "dim", "num_attention_heads": "n_heads", "num_hidden_layers": "n_layers"},
        refuse=(_BERT_REFUSE[-1],),
        derive=plain_mlp("activation"),
        notes=_distilbert_notes,  # sinusoidal_pos_embds: a trainable table in transformers 5, counted as learned
    ),
    Family(
        "albert",
        "Albert",
        ("ForMaskedLM", "Model"),
        {"vocab_size": "vocab_size", "d_model": "hidden_size", "encoder_layers": "num_hidden_layers",
         "n_heads": "num_attention_heads", "d_ff": "intermediate_size", "max_positions": "max_position_embeddings",
         "type_vocab_size": "type_vocab_size", "norm_eps": "layer_norm_eps"},
        {"vocab_size": 30000, "embedding_size": 128, "hidden_size": 4096, "num_hidden_layers": 12,
         "num_hidden_groups": 1, "num_attention_heads": 64, "intermediate_size": 16384, "inner_group_num": 1,
         "hidden_act": "gelu_new", "max_position_embeddings": 512, "type_vocab_size": 2, "layer_norm_eps": 1e-12,
         "tie_word_embeddings": True},
        # factorised embeddings (embedding_size wide, then a Linear to hidden_size) and one layer's
        # parameters shared by every layer
        fixed={**_BERT_FIXED, "share_layers": True},
        refuse=(
            must_be("num_hidden_groups", 1, "more than one group of shared layers is not represented"),
            must_be("inner_group_num", 1, "more than one layer per shared group is not represented"),
            _BERT_REFUSE[-1],
        ),
        derive=combine(plain_mlp("hidden_act"), lambda cfg, where: {"embedding": {"d_embed": cfg["embedding_size"]}}),
        pooler=True,
    ),
]
# fmt: on

FAMILIES: dict[str, Family] = {}
for _f in _FAMILIES:
    if _f.model_type in FAMILIES:  # pragma: no cover - a programming error
        raise RuntimeError(f"family {_f.model_type!r} registered twice")
    FAMILIES[_f.model_type] = _f

# class name -> model_type, for files without model_type (ALBERT's hub files have only `architectures`)
CLASSES: dict[str, str] = {name: f.model_type for f in FAMILIES.values() for name in f.class_names}


# ---------------------------------------------------------------- reading


def spec_name(path: Path) -> str:
    """A spec name from a file or folder name: 'Llama-2-7b-hf/config.json' -> 'llama-2-7b-hf'."""
    stem = path.parent.name if path.name == "config.json" and path.parent.name else path.stem
    name = re.sub(r"[^a-z0-9._-]+", "-", stem.lower()).lstrip("._-")
    return name or "model"


def read_config(path: str | Path) -> tuple[dict[str, Any], Path]:
    """The JSON object of a config.json (or of folder/config.json), and the file's path; read as spec
    files are (archspec.loading: regular files of bounded size, strict JSON)."""
    from archspec.loading import parse_text, read_text

    path = Path(path)
    if _is_dir(path):
        path = path / "config.json"
        if not path.is_file():
            raise SpecError(f"{clip(str(path.parent), 200)}: no config.json in this folder")
    data = parse_text(path, ".json", read_text(path))
    if not isinstance(data, dict):
        raise SpecError(f"{clip(str(path), 200)}: a config.json holds a JSON object, not {type(data).__name__}")
    return data, path


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except (OSError, ValueError):
        return False


def _supported_types() -> str:
    return ", ".join(sorted(FAMILIES))


def _architecture(raw: dict[str, Any], where: str) -> str | None:
    archs = raw.get("architectures")
    if archs is None or archs == []:
        return None
    if not isinstance(archs, list) or not all(isinstance(a, str) for a in archs):
        raise SpecError(f"{where}: architectures must be a list of class names, got {shown(archs)}")
    return archs[0]


def _family_of(raw: dict[str, Any], where: str) -> Family:
    model_type = raw.get("model_type")
    if model_type is None:
        arch = _architecture(raw, where)
        if arch in CLASSES:
            return FAMILIES[CLASSES[arch]]
        raise SpecError(
            f"{where}: no model_type, and architectures {shown(raw.get('architectures'))} names no supported "
            f"class; supported model_types: {_supported_types()}"
        )
    if not isinstance(model_type, str) or model_type not in FAMILIES:
        raise SpecError(f"{where}: model_type {shown(model_type)} is not supported; supported: {_supported_types()}")
    return FAMILIES[model_type]


def _canonical(family: Family, raw: dict[str, Any]) -> dict[str, Any]:
    """The file's keys under their canonical names, over transformers' defaults. An alias gives way to its
    canonical key when the file has both."""
    cfg = dict(family.defaults)
    for key, value in raw.items():
        target = family.aliases.get(key, key)
        if target != key and target in raw:
            continue
        cfg[target] = value
    return cfg


def _head(family: Family, raw: dict[str, Any], cfg: Config, data: dict[str, Any], where: str) -> str:
    arch = _architecture(raw, where) or family.class_names[0]
    kind = None
    if arch.startswith(family.prefix):
        suffix = arch[len(family.prefix) :]
        if suffix in family.classes:
            kind = HEAD_SUFFIXES[suffix]
    if kind is None:
        raise SpecError(
            f"{where}: architecture {shown(arch)} is not supported for model_type {family.model_type!r}; "
            f"supported: {', '.join(family.class_names)}"
        )
    if kind == "lm":
        data.setdefault("head", "lm")
        if family.tie_lm:
            data["tie_embeddings"] = bool(cfg["tie_word_embeddings"])
    elif kind == "mlm":
        data["head"] = "mlm"
    else:
        data["head"] = "none"
        data.pop("tie_embeddings", None)
        if kind == "encoder":  # T5EncoderModel: the shared table and the encoder
            data["decoder_layers"] = 0
            for key in ("share_embeddings", "embedding_scale"):
                data.pop(key, None)
        elif family.pooler:
            data["pooler"] = True
    return arch


def from_mapping(raw: dict[str, Any], name: str, where: str = "") -> Imported:
    """Spec data (the given fields) of a config.json's object."""
    where = where or name
    family = _family_of(raw, where)
    cfg = _canonical(family, raw)
    data: dict[str, Any] = {"name": name}
    try:
        for refusal in family.refuse:
            if not refusal.ok(cfg):
                raise SpecError(
                    f"{where}: {family.model_type} key {refusal.key}={shown(cfg.get(refusal.key))} is not "
                    f"supported ({refusal.why})"
                )
        data.update(family.fixed)
        for spec_field, key in family.fields.items():
            if cfg.get(key) is not None:
                data[spec_field] = cfg[key]
        if family.derive is not None:
            data.update(family.derive(cfg, where))
        arch = _head(family, raw, cfg, data, where)
        if data.get("head") == "lm":
            del data["head"]
        notes = tuple(family.notes(cfg, data)) if family.notes else ()
    except SpecError:
        raise
    except KeyError as exc:  # a key without a default that the family needs
        raise SpecError(f"{where}: {family.model_type} config has no {shown(exc.args[0])}") from None
    except (TypeError, ValueError, ArithmeticError, AttributeError) as exc:  # a value of the wrong type, zero, huge
        raise SpecError(
            f"{where}: {family.model_type} config has a value of the wrong type or size ({clip(str(exc))})"
        ) from None
    return Imported(data, family.model_type, arch, notes)


def load_config(path: str | Path):
    """The ModelSpec of a Hugging Face config.json, or of a folder holding one."""
    from archspec.loading import build_spec

    raw, file = read_config(path)
    where = clip(str(file), 200)
    return build_spec(from_mapping(raw, spec_name(file), where).data, where)


def import_config(path: str | Path) -> Imported:
    """What `archspec import` writes: the spec data of a config.json with its notes."""
    raw, file = read_config(path)
    return from_mapping(raw, spec_name(file), clip(str(file), 200))
