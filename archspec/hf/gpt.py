"""GPT-2, its ancestor and descendants: GPT (2018), GPT-Neo, GPT-J, GPT-NeoX, OPT, BLOOM, Falcon, Phi-2,
GPTBigCode (StarCoder), MPT and DBRX."""

from __future__ import annotations

from typing import Any

from archspec.hf.engine import (
    Config,
    Family,
    Refusal,
    activation,
    biases,
    combine,
    ff,
    kv_heads,
    must_be,
    must_be_falsy,
    plain_mlp,
    rope,
)
from archspec.hf.llama import _LLAMA_FIELDS


def _gpt2(cfg: Config, where: str) -> dict[str, Any]:
    return {"mixer": {"kind": "standard", "scale": 1.0}} if not cfg["scale_attn_weights"] else {}


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
    return {"mixer": attention}


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
    """Pre- or post-norm (OPT-350M is post-norm, without a final norm); token embeddings narrower than
    hidden_size (word_embed_proj_dim, OPT-350M's 512): project_in and project_out without biases around the
    layers, the positions hidden_size wide, the head (tied or not) word_embed_proj_dim wide."""
    pre = cfg["do_layer_norm_before"]
    out: dict[str, Any] = {
        "norm_position": "pre" if pre else "post",
        "final_norm": bool(pre and not cfg.get("_remove_final_layer_norm", False)),
    }
    width = cfg.get("word_embed_proj_dim")
    if width not in (None, cfg["hidden_size"]):
        out["embedding"] = {"d_embed": width, "projection_bias": False, "project_out": True,
                            "position_width": "d_model"}  # fmt: skip
    return out


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


def _phi(cfg: Config, where: str) -> dict[str, Any]:
    out: dict[str, Any] = {"position": rope(cfg, default_fraction=0.5), "head": {"kind": "lm", "bias": True}}
    if cfg["qk_layernorm"]:
        out["mixer"] = {"kind": "standard", "qk_norm": True}
    return out


def _gpt_bigcode(cfg: Config, where: str) -> dict[str, Any]:
    """GPTBigCode: GPT-2's block with one key/value head when multi_query (c_attn: d + 2 * d_head rows)."""
    out: dict[str, Any] = {"n_kv_heads": 1 if cfg["multi_query"] else cfg["n_head"]}
    if not cfg["scale_attn_weights"]:
        out["mixer"] = {"kind": "standard", "scale": 1.0}
    return out


def _table(cfg: Config, key: str) -> dict[str, Any]:
    """A nested config (MPT's attn_config, DBRX's attn_config and ffn_config): a dict, or absent."""
    value = cfg.get(key)
    return value if isinstance(value, dict) else {}


def _nested(key: str, sub: str, ok: Any, why: str) -> Refusal:
    return Refusal(f"{key}.{sub}", lambda c: ok(_table(c, key).get(sub)), why)


def _mpt(cfg: Config, where: str) -> dict[str, Any]:
    """MptBlock: LayerNorms without bias, Wqkv and out_proj without bias, up_proj to 4 * d_model, exact GELU,
    ALiBi over n_heads; softmax_scale replaces 1/sqrt(d_head) when given."""
    out: dict[str, Any] = {"d_ff": 4 * cfg["d_model"]}
    scale = _table(cfg, "attn_config").get("softmax_scale")
    if scale is not None:
        out["mixer"] = {"kind": "standard", "scale": float(scale)}
    return out


def _dbrx(cfg: Config, where: str) -> dict[str, Any]:
    """DBRX: fused Wqkv for kv_n_heads key/value heads, rotary positions, LayerNorms without bias, a router
    without bias (ffn.router.layer) over moe_num_experts gated experts of ffn_hidden_size (w1, v1, w2)."""
    attn, ffn = _table(cfg, "attn_config"), _table(cfg, "ffn_config")
    act = (ffn.get("ffn_act_fn") or {"name": "silu"}).get("name", "silu")
    return {
        "n_kv_heads": attn.get("kv_n_heads", 1),
        "activation": activation({"ffn_act_fn.name": act}, "ffn_act_fn.name", True, where),
        "position": {"kind": "rotary", "base": float(attn.get("rope_theta", 10000.0))},
        "mlp": {
            "kind": "moe",
            "experts": ffn.get("moe_num_experts", 4),
            "top_k": ffn.get("moe_top_k", 1),
            "d_expert": ffn.get("ffn_hidden_size", 3584),
            "normalize": ffn.get("moe_normalize_expert_weights", 1.0) is not None,
        },
    }


def _dbrx_normalize_ok(value: Any) -> bool:
    return value in (None, 1, 1.0)


# fmt: off
FAMILIES = [
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
        {**_LLAMA_FIELDS, "norm_eps": "layer_norm_eps"},
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
        "openai-gpt",
        "OpenAIGPT",
        ("LMHeadModel", "Model"),
        {"vocab_size": "vocab_size", "d_model": "n_embd", "decoder_layers": "n_layer", "n_heads": "n_head",
         "max_positions": "n_positions", "norm_eps": "layer_norm_epsilon"},
        {"vocab_size": 40478, "n_positions": 512, "n_embd": 768, "n_layer": 12, "n_head": 12, "afn": "gelu",
         "layer_norm_epsilon": 1e-5, "tie_word_embeddings": True},
        # Radford et al. 2018: LayerNorm after each residual add, learned positions, no final norm
        fixed={"position": "learned", "norm": "layernorm", "norm_position": "post", "final_norm": False,
               "bias": True},
        aliases={"hidden_size": "n_embd", "max_position_embeddings": "n_positions", "num_attention_heads": "n_head",
                 "num_hidden_layers": "n_layer"},
        derive=combine(lambda cfg, where: {"d_ff": 4 * cfg["n_embd"]}, plain_mlp("afn")),
    ),
    Family(
        "gpt_bigcode",
        "GPTBigCode",
        ("ForCausalLM", "Model"),
        {"vocab_size": "vocab_size", "d_model": "n_embd", "decoder_layers": "n_layer", "n_heads": "n_head",
         "max_positions": "n_positions", "norm_eps": "layer_norm_epsilon"},
        {"vocab_size": 50257, "n_positions": 1024, "n_embd": 768, "n_layer": 12, "n_head": 12, "n_inner": None,
         "activation_function": "gelu_pytorch_tanh", "layer_norm_epsilon": 1e-5, "scale_attn_weights": True,
         "multi_query": True, "add_cross_attention": False, "tie_word_embeddings": True},
        fixed={"position": "learned", "norm": "layernorm", "norm_position": "pre", "bias": True},
        aliases={"hidden_size": "n_embd", "max_position_embeddings": "n_positions", "num_attention_heads": "n_head",
                 "num_hidden_layers": "n_layer"},
        refuse=(must_be_falsy("add_cross_attention", "cross-attention in a decoder-only model is not represented"),),
        derive=combine(ff("n_inner", "n_embd"), plain_mlp("activation_function"), _gpt_bigcode),
    ),
    Family(
        "mpt",
        "Mpt",
        ("ForCausalLM", "Model"),
        # no position table (ALiBi): max_positions is max_seq_len
        {"vocab_size": "vocab_size", "d_model": "d_model", "decoder_layers": "n_layers", "n_heads": "n_heads",
         "max_positions": "max_seq_len", "norm_eps": "layer_norm_epsilon"},
        {"d_model": 2048, "n_heads": 16, "n_layers": 24, "expansion_ratio": 4, "max_seq_len": 2048,
         "vocab_size": 50368, "layer_norm_epsilon": 1e-5, "attn_config": None, "logit_scale": None, "no_bias": True,
         "tie_word_embeddings": True},
        fixed={"position": "alibi", "norm": "layernorm", "norm_affine": "weight", "norm_position": "pre",
               "bias": False, "activation": "gelu"},
        aliases={"hidden_size": "d_model", "num_attention_heads": "n_heads", "num_hidden_layers": "n_layers",
                 "max_position_embeddings": "max_seq_len"},
        refuse=(
            # transformers' MptMLP and MptAttention ignore these keys; a checkpoint that sets them has other shapes
            must_be("expansion_ratio", 4, "transformers builds up_proj 4 * d_model wide whatever expansion_ratio says"),
            must_be("no_bias", True, "transformers builds MPT without biases whatever no_bias says"),
            must_be("logit_scale", None, "transformers' MptForCausalLM does not scale the logits"),
            _nested("attn_config", "attn_type", lambda v: v in (None, "multihead_attention"),
                    "multi-query MPT attention is not built by transformers"),
            _nested("attn_config", "qk_ln", lambda v: not v, "QK LayerNorms are not built by transformers' MPT"),
            _nested("attn_config", "alibi", lambda v: v in (None, True),
                    "transformers' MPT always uses ALiBi"),
            _nested("attn_config", "prefix_lm", lambda v: not v, "a bidirectional prefix is not represented"),
        ),
        derive=_mpt,
    ),
    Family(
        "dbrx",
        "Dbrx",
        ("ForCausalLM", "Model"),
        {"vocab_size": "vocab_size", "d_model": "d_model", "decoder_layers": "n_layers", "n_heads": "n_heads",
         "max_positions": "max_seq_len"},
        {"d_model": 2048, "n_heads": 16, "n_layers": 24, "max_seq_len": 2048, "vocab_size": 32000,
         "attn_config": None, "ffn_config": None, "tie_word_embeddings": False},
        # nn.LayerNorm(d_model, bias=False): default eps 1e-5
        fixed={"norm": "layernorm", "norm_affine": "weight", "norm_position": "pre", "norm_eps": 1e-5, "bias": False},
        aliases={"hidden_size": "d_model", "num_attention_heads": "n_heads", "num_hidden_layers": "n_layers",
                 "max_position_embeddings": "max_seq_len"},
        refuse=(
            _nested("ffn_config", "moe_normalize_expert_weights", _dbrx_normalize_ok,
                    "routing weights normalised by a p-norm other than p=1 are not represented"),
        ),
        derive=_dbrx,
    ),
]
# fmt: on
