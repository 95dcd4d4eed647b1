"""A GGUF header's architecture keys as the Hugging Face config they were written from.

The header's keys (``{arch}.block_count``, ``.embedding_length``, ...) are written back as the config keys
that llama.cpp's converter read them from (convert_hf_to_gguf.py: ``TextModel.set_gguf_parameters`` and
each model's own), and that config is read by archspec.hf's adapter of the same family: one family table,
not two. What a GGUF file does not record (a Mistral file is written as ``llama``, without its window)
follows the architecture llama.cpp runs. One function per llama.cpp architecture (``ARCHITECTURES``)
adds its family's keys to the ones every architecture shares. Nothing here needs the ``gguf`` package.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from archspec.core.errors import SpecError, shown
from archspec.sources.gguf_header import Header, TensorInfo
from archspec.sources.stored import StoredTensor


def architecture(header: Header, where: str = "GGUF file") -> str:
    arch = header.metadata.get("general.architecture")
    if not isinstance(arch, str):
        raise SpecError(f"{where}: the GGUF header has no general.architecture")
    return arch


def _decimal(x: float) -> float:
    """A float32 value as the shortest decimal that float32 rounds to it (1e-06 for the float32 nearest
    1e-6): the number the converter was given, not its float32 approximation."""
    import struct

    single = struct.pack("<f", x)
    if struct.unpack("<f", single)[0] != x:  # not a float32 value: as it is
        return x
    for digits in range(1, 10):
        shortest = float(f"{x:.{digits}g}")
        if struct.pack("<f", shortest) == single:
            return shortest
    return x


def _key(meta: dict[str, Any], arch: str, name: str, where: str, default: Any = None, required: bool = False) -> Any:
    """{arch}.name, one number: a per-layer array (llama.cpp allows one) must hold one value; a float as the
    decimal it was written from."""
    value = meta.get(f"{arch}.{name}", default)
    if type(value) is float:
        value = _decimal(value)
    if value is None and required:
        raise SpecError(f"{where}: the GGUF header has no {arch}.{name}")
    if isinstance(value, list):
        if value and all(v == value[0] for v in value):
            return value[0]
        raise SpecError(f"{where}: {arch}.{name} differs from layer to layer ({shown(value)}); archspec reads one "
                        "value for every layer")  # fmt: skip
    return value


def _vocab(header: Header, arch: str, where: str) -> int:
    """The rows of token_embd (the table the file stores); else {arch}.vocab_size, else the tokenizer's list."""
    for t in header.tensors:
        if t.name == "token_embd.weight" and len(t.ne) == 2:
            return t.ne[1]
    meta = header.metadata
    if isinstance(meta.get(f"{arch}.vocab_size"), int):
        return meta[f"{arch}.vocab_size"]
    if isinstance(meta.get("tokenizer.ggml.tokens"), list):
        return len(meta["tokenizer.ggml.tokens"])
    raise SpecError(f"{where}: the GGUF file gives no vocabulary size (no token_embd.weight, {arch}.vocab_size or "
                    "tokenizer.ggml.tokens)")  # fmt: skip


def _common(header: Header, arch: str, where: str) -> dict[str, Any]:
    """The keys TextModel.set_gguf_parameters writes, as the config keys it read them from."""
    meta = header.metadata

    def key(name: str, default: Any = None, required: bool = False) -> Any:
        return _key(meta, arch, name, where, default, required)

    heads = key("attention.head_count", required=True)
    names = {t.name for t in header.tensors}
    cfg: dict[str, Any] = {
        "vocab_size": _vocab(header, arch, where),
        "hidden_size": key("embedding_length", required=True),
        "num_hidden_layers": key("block_count", required=True),
        "num_attention_heads": heads,
        "num_key_value_heads": key("attention.head_count_kv", heads),
        "tie_word_embeddings": "output.weight" not in names,  # no output tensor: llama.cpp uses token_embd
    }
    optional = {"intermediate_size": "feed_forward_length", "max_position_embeddings": "context_length",
                "rope_theta": "rope.freq_base", "rms_norm_eps": "attention.layer_norm_rms_epsilon",
                "head_dim": "attention.key_length", "sliding_window": "attention.sliding_window"}  # fmt: skip
    for hf_key, gguf_key in optional.items():
        value = key(gguf_key)
        if value is not None:
            cfg[hf_key] = value
    mla = arch == "deepseek2"  # value_length is the latent's width (MLA run as MQA)
    if "head_dim" in cfg and not mla and key("attention.value_length", cfg["head_dim"]) != cfg["head_dim"]:
        raise SpecError(f"{where}: {arch}.attention.value_length differs from key_length; archspec reads "
                        f"{arch} with one head width")  # fmt: skip
    return cfg


def _has(header: Header, name: str) -> bool:
    return any(t.name == name for t in header.tensors)


def _experts(header: Header, arch: str, where: str) -> dict[str, Any]:
    meta = header.metadata
    return {"experts": _key(meta, arch, "expert_count", where, required=True),
            "used": _key(meta, arch, "expert_used_count", where, required=True),
            "d_expert": _key(meta, arch, "expert_feed_forward_length", where)}  # fmt: skip


def _dense_layers(header: Header, n: int) -> list[int]:
    """The layers that hold a dense MLP (blk.N.ffn_gate) rather than experts."""
    return [i for i in range(n) if not _has(header, f"blk.{i}.ffn_gate_exps.weight")]


def _llama(header: Header, cfg: dict[str, Any], where: str) -> dict[str, Any]:
    """llama: Llama and Mistral (dense), Mixtral (experts); biases where the file holds them."""
    cfg["attention_bias"] = _has(header, "blk.0.attn_q.bias")
    cfg["mlp_bias"] = _has(header, "blk.0.ffn_up.bias")
    if header.metadata.get("llama.expert_count"):
        e = _experts(header, "llama", where)
        return {**cfg, "model_type": "mixtral", "architectures": ["MixtralForCausalLM"],
                "num_local_experts": e["experts"], "num_experts_per_tok": e["used"]}  # fmt: skip
    return {**cfg, "model_type": "llama", "architectures": ["LlamaForCausalLM"]}


def _qwen3moe(header: Header, cfg: dict[str, Any], where: str) -> dict[str, Any]:
    e = _experts(header, "qwen3moe", where)
    return {**cfg, "model_type": "qwen3_moe", "architectures": ["Qwen3MoeForCausalLM"], "num_experts": e["experts"],
            "num_experts_per_tok": e["used"], "moe_intermediate_size": e["d_expert"],
            "norm_topk_prob": bool(header.metadata.get("qwen3moe.expert_weights_norm", True)),
            "mlp_only_layers": _dense_layers(header, cfg["num_hidden_layers"])}  # fmt: skip


def _qwen2moe(header: Header, cfg: dict[str, Any], where: str) -> dict[str, Any]:
    e = _experts(header, "qwen2moe", where)
    shared = _key(header.metadata, "qwen2moe", "expert_shared_feed_forward_length", where, 0)
    return {**cfg, "model_type": "qwen2_moe", "architectures": ["Qwen2MoeForCausalLM"], "num_experts": e["experts"],
            "num_experts_per_tok": e["used"], "moe_intermediate_size": e["d_expert"],
            "shared_expert_intermediate_size": shared, "norm_topk_prob": False,
            "qkv_bias": _has(header, "blk.0.attn_q.bias"),
            "mlp_only_layers": _dense_layers(header, cfg["num_hidden_layers"])}  # fmt: skip


def _gpt_oss(header: Header, cfg: dict[str, Any], where: str) -> dict[str, Any]:
    e = _experts(header, "gpt-oss", where)
    return {
        **cfg,
        "model_type": "gpt_oss",
        "architectures": ["GptOssForCausalLM"],
        "num_local_experts": e["experts"],
        "num_experts_per_tok": e["used"],
        "intermediate_size": e["d_expert"] or cfg.get("intermediate_size"),
    }


def _phi3(header: Header, cfg: dict[str, Any], where: str) -> dict[str, Any]:
    cfg = {**cfg, "model_type": "phi3", "architectures": ["Phi3ForCausalLM"]}
    cfg["sliding_window"] = cfg.get("sliding_window") or None  # 0: none (the converter's mark for Phi-4)
    cfg.pop("head_dim", None)  # Phi-3's heads are hidden_size / heads
    return cfg


def _deepseek2(header: Header, cfg: dict[str, Any], where: str) -> dict[str, Any]:
    """DeepSeek-V2 and V3 (V3: a sigmoid router, expert_gating_func 2). The converter writes the latent
    attention as llama.cpp runs it (MQA over kv_lora_rank + rope dims); the head widths are the _mla keys,
    or, in files written before them, key_length and value_length."""
    meta = header.metadata

    def key(name: str, default: Any = None, required: bool = False) -> Any:
        return _key(meta, "deepseek2", name, where, default, required)

    rope_dims = key("rope.dimension_count", required=True)
    k_len = key("attention.key_length_mla") or key("attention.key_length", required=True)
    v_len = key("attention.value_length_mla") or key("attention.value_length", required=True)
    e = _experts(header, "deepseek2", where)
    sigmoid = key("expert_gating_func") == 2
    out = {**cfg, "model_type": "deepseek_v3" if sigmoid else "deepseek_v2",
           "architectures": ["DeepseekV3ForCausalLM" if sigmoid else "DeepseekV2ForCausalLM"],
           "num_key_value_heads": cfg["num_attention_heads"],
           "kv_lora_rank": key("attention.kv_lora_rank", required=True),
           "q_lora_rank": key("attention.q_lora_rank"), "qk_rope_head_dim": rope_dims,
           "qk_nope_head_dim": k_len - rope_dims, "v_head_dim": v_len, "n_routed_experts": e["experts"],
           "num_experts_per_tok": e["used"], "moe_intermediate_size": e["d_expert"],
           "n_shared_experts": key("expert_shared_count", 0),
           "first_k_dense_replace": key("leading_dense_block_count", 0),
           "norm_topk_prob": bool(key("expert_weights_norm", False))}  # fmt: skip
    if key("expert_weights_scale") is not None:  # routed_scaling_factor, as the converter writes it
        out["routed_scaling_factor"] = key("expert_weights_scale")
    out.pop("head_dim", None)
    return out


def _granite(header: Header, cfg: dict[str, Any], where: str) -> dict[str, Any]:
    """Granite: GraniteModel.set_gguf_parameters writes its four multipliers under llama.cpp's names."""
    meta, out = header.metadata, {**cfg, "model_type": "granite", "architectures": ["GraniteForCausalLM"]}
    scales = {"embedding_multiplier": "embedding_scale", "residual_multiplier": "residual_scale",
              "attention_multiplier": "attention.scale", "logits_scaling": "logit_scale"}  # fmt: skip
    for hf_key, gguf_key in scales.items():
        if f"granite.{gguf_key}" in meta:
            out[hf_key] = _key(meta, "granite", gguf_key, where)
    out["attention_bias"] = _has(header, "blk.0.attn_q.bias")
    out["mlp_bias"] = _has(header, "blk.0.ffn_up.bias")
    return out


def _olmoe(header: Header, cfg: dict[str, Any], where: str) -> dict[str, Any]:
    """OLMoE: every layer experts of feed_forward_length (its config's intermediate_size), none normalised."""
    e = _experts(header, "olmoe", where)
    return {**cfg, "model_type": "olmoe", "architectures": ["OlmoeForCausalLM"], "num_experts": e["experts"],
            "num_experts_per_tok": e["used"], "norm_topk_prob": False}  # fmt: skip


def _biased(model_type: str, cls: str, **keys: str):
    """A family whose biases are config keys: each key is true where the file holds that bias tensor."""

    def config(header: Header, cfg: dict[str, Any], where: str) -> dict[str, Any]:
        out = {**cfg, "model_type": model_type, "architectures": [cls]}
        return out | {key: _has(header, f"blk.0.{tensor}.bias") for key, tensor in keys.items()}

    return config


def _plain(model_type: str, cls: str):
    return lambda header, cfg, where: {**cfg, "model_type": model_type, "architectures": [cls]}


# llama.cpp's architecture name -> its config (the family archspec.hf reads it as)
ARCHITECTURES = {
    "llama": _llama,
    "qwen2": _plain("qwen2", "Qwen2ForCausalLM"),
    "qwen2moe": _qwen2moe,
    "qwen3": _plain("qwen3", "Qwen3ForCausalLM"),
    "qwen3moe": _qwen3moe,
    "granite": _granite,
    "olmo2": _plain("olmo2", "Olmo2ForCausalLM"),
    "olmoe": _olmoe,
    "seed_oss": _biased(
        "seed_oss", "SeedOssForCausalLM", attention_bias="attn_q", attention_out_bias="attn_output", mlp_bias="ffn_up"
    ),
    "ernie4_5": _biased("ernie4_5", "Ernie4_5ForCausalLM", use_bias="attn_q"),
    "gemma2": _plain("gemma2", "Gemma2ForCausalLM"),
    "gemma3": _plain("gemma3_text", "Gemma3ForCausalLM"),
    "phi3": _phi3,
    "deepseek2": _deepseek2,
    "gpt-oss": _gpt_oss,
}


def hf_config(header: Header, where: str = "GGUF file", stored: list[StoredTensor] | None = None) -> dict[str, Any]:
    """The Hugging Face config.json keys that llama.cpp's converter wrote this header from. `stored`: the
    tensors of every shard of a split model, whose first header holds the metadata and its own tensors
    only (the config reads their names and shapes)."""
    if stored is not None:
        infos = tuple(TensorInfo(t.name, tuple(reversed(t.shape)), -1, -1) for t in stored)  # no type, no offset
        header = dataclasses.replace(header, tensors=infos)
    arch = architecture(header, where)
    if arch not in ARCHITECTURES:
        raise SpecError(f"{where}: GGUF architecture {shown(arch)} is not supported; supported: "
                        f"{', '.join(sorted(ARCHITECTURES))}")  # fmt: skip
    return ARCHITECTURES[arch](header, _common(header, arch, where), where)
