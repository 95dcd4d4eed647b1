"""GGUF files (llama.cpp, Ollama) as models: the spec from the header's architecture keys, the stored
tensors with their exact bytes, and the names llama.cpp gives the spec's tensors.

- The header is read by archspec.sources.gguf_header (headers only, never tensor data).
- Stored bytes: each tensor's ggml type has a block of `block` values stored in `size` bytes
  (``gguf.constants.GGML_QUANT_SIZES``); a tensor holds numel / block blocks. The file's mixture
  (Q6_K output, Q8_0 embedding, MXFP4 experts...) is read from the file, not guessed.
- The spec: the header's keys (``{arch}.block_count``, ``.embedding_length``, ...) are written back
  as the Hugging Face config keys that llama.cpp's converter read them from (convert_hf_to_gguf.py:
  ``TextModel.set_gguf_parameters`` and each model's own), and that config is read by archspec.hf's
  adapter of the same family: one family table, not two. What a GGUF file does not record (a Mistral
  file is written as ``llama``, without its window) follows the architecture llama.cpp runs.
- Tensor names: the spec's tensors under llama.cpp's names (``gguf.constants.TENSOR_NAMES``, checked
  against ``MODEL_TENSORS[arch]``) with the shapes llama.cpp stores (row-major, ggml's ``ne``
  reversed): q, k and v apart (fused for Phi-3), experts stacked into one 3-D tensor per projection,
  DeepSeek's kv_b split into k_b and v_b as the converter writes it since 2025.

The ``gguf`` package (the optional extra ``[gguf]``) is imported on first use.
"""

from __future__ import annotations

import dataclasses
import os
import re
import stat
from functools import cache
from pathlib import Path
from typing import Any

from archspec.core.errors import SpecError, clip, shown
from archspec.sources.gguf_header import Header, TensorInfo, Truncated, parse_header
from archspec.sources.stored import StoredTensor

FIRST_READ = 1 << 20  # bytes read first; a header that is longer is read again, as long as it says it needs


def _gguf():
    try:
        import gguf
    except ImportError:
        raise SpecError(
            "reading GGUF files needs the gguf package: pip install 'archspec-transformers[gguf]'"
        ) from None
    return gguf


# ---------------------------------------------------------------- reading a file


def read_header(path: str | os.PathLike) -> Header:
    """The header of a local GGUF file, reading only its first bytes (more only as the header needs); a
    file whose tensors' data would run past its end is refused."""
    header, size = _read(path)
    check_data(header, size, clip(str(path), 200))
    return header


def read_header_only(path: str | os.PathLike) -> Header:
    """The header of a local GGUF file, whether or not its data follows (a header-only copy)."""
    return _read(path)[0]


def _read(path: str | os.PathLike) -> tuple[Header, int]:
    where = clip(str(path), 200)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    except FileNotFoundError:
        raise SpecError(f"{where}: no such file") from None
    except OSError as exc:
        raise SpecError(f"{where}: cannot read: {(exc.strerror or str(exc)).lower()}") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise SpecError(f"{where}: not a regular file; give a .gguf file")
        size, want = info.st_size, FIRST_READ
        while True:
            f.seek(0)
            data = f.read(min(want, size))
            try:
                header = parse_header(data, where, size)
            except Truncated as exc:  # the file is longer than what was read: read what the header needs
                want = max(exc.needed, 2 * want)
                continue
            break
    return header, size


_SHARD = r"-(\d{5})-of-(\d{5})\.gguf$"  # a split model's shards: Name-00001-of-00003.gguf


def read_model(path: str | os.PathLike) -> tuple[Header, list[StoredTensor], list[str]]:
    """A local GGUF model: the first file's header, the stored tensors of every shard of a split model
    (its shards beside it: Name-00001-of-00003.gguf ...) and the files read."""
    path = Path(path)
    m = re.search(_SHARD, path.name)
    files = [path]
    if m:
        n = int(m.group(2))
        files = [path.with_name(re.sub(_SHARD, f"-{i:05d}-of-{n:05d}.gguf", path.name)) for i in range(1, n + 1)]
        absent = [f.name for f in files if not f.is_file()]
        if absent:
            raise SpecError(f"{clip(str(path), 200)}: a split GGUF model of {n} files; {absent[0]} is not beside it")
    headers = [read_header(f) for f in files]
    stored = [t for f, h in zip(files, headers) for t in stored_tensors(h, clip(str(f), 200))]
    return headers[0], stored, [f.name for f in files]


def check_data(header: Header, size: int, where: str) -> None:
    """Refuse a file whose tensors' data would run past its end (a download cut short)."""
    for t in header.tensors:
        end = header.data_offset + t.offset + stored_bytes(t, where)
        if end > size:
            raise SpecError(f"{where}: truncated GGUF file: tensor {t.name!r} ends at byte {end:,}, beyond the "
                            f"file's {size:,} bytes")  # fmt: skip


# ---------------------------------------------------------------- stored bytes


def type_name(ggml_type: int) -> str:
    """'Q4_K' for 12: the ggml type's name as gguf.constants.GGMLQuantizationType spells it."""
    gguf = _gguf()
    try:
        return gguf.GGMLQuantizationType(ggml_type).name
    except ValueError:
        return str(ggml_type)


def stored_bytes(t: TensorInfo, where: str = "GGUF file") -> int:
    """The bytes a tensor's data takes: numel / block blocks of `size` bytes (GGML_QUANT_SIZES). ggml
    stores whole blocks along the innermost dimension, so ne[0] must be a multiple of the block."""
    gguf = _gguf()
    try:
        kind = gguf.GGMLQuantizationType(t.ggml_type)
        block, size = gguf.GGML_QUANT_SIZES[kind]
    except (ValueError, KeyError):
        raise SpecError(f"{where}: tensor {t.name!r} has ggml type {t.ggml_type}, which the gguf package does not "
                        "know (a newer llama.cpp type? upgrade gguf)") from None  # fmt: skip
    inner = t.ne[0] if t.ne else 1
    if inner % block:
        raise SpecError(f"{where}: corrupt GGUF header: tensor {t.name!r} of type {kind.name} has rows of {inner} "
                        f"values, not a multiple of the type's block of {block}")  # fmt: skip
    numel = 1
    for n in t.ne:
        numel *= n
    return numel // block * size


def stored_tensors(header: Header, where: str = "GGUF file") -> list[StoredTensor]:
    """Every tensor of the file: its name, row-major shape, ggml type name and exact stored bytes."""
    return [StoredTensor(t.name, t.shape, type_name(t.ggml_type), stored_bytes(t, where)) for t in header.tensors]


# ---------------------------------------------------------------- the spec


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


def spec_name(path: str | os.PathLike) -> str:
    """'Qwen3-8B-Q4_K_M.gguf' -> 'qwen3-8b-q4_k_m' (the first shard of a split model by its model's name)."""
    from archspec import hf

    return hf.spec_name(Path(re.sub(_SHARD, ".gguf", str(path))))


def imported(header: Header, name: str, where: str = "GGUF file", stored: list[StoredTensor] | None = None):
    """The spec data of a GGUF header (an archspec.hf.Imported), through archspec.hf's adapter of the family;
    `stored`: every shard's tensors of a split model."""
    from archspec import hf

    out = hf.from_mapping(hf_config(header, where, stored), name, where)
    note = f"read from a GGUF header (llama.cpp's architecture {architecture(header, where)!r})"
    return dataclasses.replace(out, notes=(note, *out.notes))


def spec_of(header: Header, name: str, where: str = "GGUF file", stored: list[StoredTensor] | None = None):
    """The ModelSpec of a GGUF header (and, for a split model, every shard's tensors)."""
    from archspec.io.loading import build_spec

    return build_spec(imported(header, name, where, stored).data, where)


def load_gguf(path: str | os.PathLike):
    """The ModelSpec of a local .gguf file, from its header."""
    return spec_of(read_header(path), spec_name(path), clip(str(path), 200))


# ---------------------------------------------------------------- tensor names


@cache
def _tensor_ids() -> dict[str, Any]:
    """llama.cpp's tensor name pattern ('blk.{bid}.attn_q') -> its MODEL_TENSOR member."""
    gguf = _gguf()
    return {name: member for member, name in gguf.TENSOR_NAMES.items()}


def _arch_tensors(arch: str) -> set:
    gguf = _gguf()
    found = [a for a, n in gguf.MODEL_ARCH_NAMES.items() if n == arch]
    if not found:
        raise SpecError(f"GGUF architecture {shown(arch)} is not one the gguf package knows")
    return set(gguf.MODEL_TENSORS[found[0]])


def _name(member_name: str, arch_tensors: set, layer: int | None, suffix: str) -> str:
    gguf = _gguf()
    member = gguf.MODEL_TENSOR[member_name]
    if member not in arch_tensors:  # a row of the table below that llama.cpp has no place for in this architecture
        raise SpecError(f"llama.cpp's architecture has no tensor {gguf.TENSOR_NAMES[member]!r}")
    pattern = gguf.TENSOR_NAMES[member]
    return (pattern.format(bid=layer) if layer is not None else pattern) + suffix


# archspec's tensor path inside a layer -> llama.cpp's MODEL_TENSOR member
_LAYER = {
    "attention_norm": "ATTN_NORM",
    "attention.q": "ATTN_Q",
    "attention.out": "ATTN_OUT",
    "attention.q_norm": "ATTN_Q_NORM",
    "attention.k_norm": "ATTN_K_NORM",
    "attention.sinks": "ATTN_SINKS",
    "attention_post_norm": "ATTN_POST_NORM",
    "mlp_post_norm": "FFN_POST_NORM",
    "mlp.gate": "FFN_GATE",
    "mlp.up": "FFN_UP",
    "mlp.down": "FFN_DOWN",
    "mlp.router": "FFN_GATE_INP",
    "mlp.experts.gate": "FFN_GATE_EXP",
    "mlp.experts.up": "FFN_UP_EXP",
    "mlp.experts.down": "FFN_DOWN_EXP",
    "mlp.shared.gate": "FFN_GATE_SHEXP",
    "mlp.shared.up": "FFN_UP_SHEXP",
    "mlp.shared.down": "FFN_DOWN_SHEXP",
    "mlp.shared_gate": "FFN_GATE_INP_SHEXP",
    # latent attention (DeepSeek): q_norm and kv_norm are the latents' norms
    "attention.q_a": "ATTN_Q_A",
    "attention.q_b": "ATTN_Q_B",
    "attention.kv_a": "ATTN_KV_A_MQA",
}
_LATENT = {"attention.q_norm": "ATTN_Q_A_NORM", "attention.kv_norm": "ATTN_KV_A_NORM"}
_TOP = {"embed.weight": ("TOKEN_EMBD", ".weight"), "head.weight": ("OUTPUT", ".weight"),
        "decoder.final_norm.weight": ("OUTPUT_NORM", ".weight")}  # fmt: skip
# parameters of the spec that llama.cpp writes under one name without the usual suffix
_BARE = {"attention.sinks": ".weight"}


def expected_tensors(spec, arch: str, kv_b_split: bool = True) -> dict[str, tuple[tuple[int, ...], str]]:
    """llama.cpp's name -> (row-major shape, archspec component) of every parameter tensor of `spec`, as
    llama.cpp's converter writes a model of architecture `arch`. `kv_b_split`: DeepSeek's kv_b as k_b and
    v_b (the converter since 2025), else one attn_kv_b (older files)."""
    from archspec.describe.blocks import describe
    from archspec.describe.parts import tensors

    wanted = _arch_tensors(arch)
    gguf = _gguf()
    fused_qkv = gguf.MODEL_TENSOR.ATTN_Q not in wanted or arch == "phi3"  # Phi-3's checkpoints fuse q, k, v
    fused_up = gguf.MODEL_TENSOR.FFN_GATE not in wanted  # Phi-3: gate and up in one ffn_up
    latent = spec.attention.kind == "latent"
    out: dict[str, tuple[tuple[int, ...], str]] = {}

    def put(member: str, layer: int | None, suffix: str, shape: tuple[int, ...], component: str,
            stacked: bool = False) -> None:  # fmt: skip
        name = _name(member, wanted, layer, suffix)
        if name in out and stacked:  # archspec's gate and up, which Phi-3 stores as one ffn_up
            old, _ = out[name]
            shape = (old[0] + shape[0], *shape[1:])
        elif name in out:  # pragma: no cover - a table that names two tensors alike
            raise RuntimeError(f"{name} would hold two of archspec's tensors")
        out[name] = (shape, component)

    for t in tensors(describe(spec)):
        if t.path in _TOP:
            member, suffix = _TOP[t.path]
            put(member, None, suffix, t.shape, t.component)
            continue
        parts = t.path.split(".")
        if parts[:2] != ["decoder", "layers"]:
            raise SpecError(f"{spec.name}: tensor {t.path} has no GGUF name (only decoder-only models are read)")
        layer, inner = int(parts[2]), ".".join(parts[3:])
        module, _, param = inner.rpartition(".")
        if inner in _BARE:
            module, param = inner, ""
        suffix = f".{param}" if param else _BARE[inner]
        if module == "attention.qkv":
            if fused_qkv:
                put("ATTN_QKV", layer, suffix, t.shape, t.component)
                continue
            q = spec.n_heads * spec.d_head
            k = spec.n_kv_heads * spec.d_head
            v = spec.n_kv_heads * spec.d_value
            if q + k + v != t.shape[0]:
                raise SpecError(f"{spec.name}: {t.path} of {t.shape[0]} rows is not q, k and v of {q}, {k}, {v}")
            for member, rows in (("ATTN_Q", q), ("ATTN_K", k), ("ATTN_V", v)):
                put(member, layer, suffix, (rows, *t.shape[1:]), t.component)
            continue
        if module == "attention.kv_b" and kv_b_split:
            # (heads * (nope + v), kv_rank) -> k_b (heads, kv_rank, nope) and v_b (heads, v, kv_rank)
            heads, nope = spec.n_heads, spec.d_head - spec.attention.rope_dims
            put("ATTN_K_B", layer, suffix, (heads, t.shape[1], nope), t.component)
            put("ATTN_V_B", layer, suffix, (heads, spec.d_value, t.shape[1]), t.component)
            continue
        if module == "attention.kv_b":
            put("ATTN_KV_B", layer, suffix, t.shape, t.component)
            continue
        if module == "mlp_norm":  # Gemma: ffn_norm is FFN_PRE_NORM; gpt-oss: post_attention_norm
            member = next(m for m in ("FFN_NORM", "FFN_PRE_NORM", "ATTN_POST_NORM") if gguf.MODEL_TENSOR[m] in wanted)
            put(member, layer, suffix, t.shape, t.component)
            continue
        if fused_up and module in ("mlp.gate", "mlp.up"):
            put("FFN_UP", layer, suffix, t.shape, t.component, stacked=True)
            continue
        member = (_LATENT if latent else {}).get(module) or _LAYER.get(module)
        if member is None:
            raise SpecError(f"{spec.name}: tensor {t.path} has no GGUF name in archspec's table")
        put(member, layer, suffix, t.shape, t.component)
    return out


# tensors llama.cpp stores that are not parameters of the model: frequency tables of rotary positions and
# DeepSeek-V3's router score correction (a buffer in transformers)
BUFFERS = ("ROPE_FREQS", "ROPE_FACTORS_LONG", "ROPE_FACTORS_SHORT", "ATTN_ROT_EMBD", "FFN_EXP_PROBS_B")
_COMPONENTS = {
    "TOKEN_EMBD": "embed", "OUTPUT": "head", "OUTPUT_NORM": "norm", "ATTN_NORM": "norm", "ATTN_POST_NORM": "norm",
    "FFN_NORM": "norm", "FFN_PRE_NORM": "norm", "FFN_POST_NORM": "norm",
    "FFN_GATE": "mlp", "FFN_UP": "mlp", "FFN_DOWN": "mlp",
    "FFN_GATE_INP": "router", "FFN_GATE_EXP": "experts", "FFN_UP_EXP": "experts", "FFN_DOWN_EXP": "experts",
    "FFN_GATE_SHEXP": "shared_experts", "FFN_UP_SHEXP": "shared_experts", "FFN_DOWN_SHEXP": "shared_experts",
    "FFN_GATE_INP_SHEXP": "shared_experts", **dict.fromkeys(BUFFERS, "buffers"),
}  # fmt: skip


def component_of(name: str) -> str:
    """The component a GGUF tensor belongs to ('blk.3.attn_q.weight' -> 'attention', 'blk.3.nextn.eh_proj.weight'
    -> 'mtp'), for tensors the spec does not name; 'unknown' for a name llama.cpp does not define."""
    base = re.sub(r"\.(weight|bias)$", "", name)
    pattern = re.sub(r"^blk\.\d+\.", "blk.{bid}.", base)
    member = _tensor_ids().get(pattern)
    if member is None:
        return "unknown"
    if member.name.startswith("NEXTN_"):
        return "mtp"
    if member.name.startswith(("ATTN_", "INDEXER_")):
        return "attention"
    if member.name.startswith(("V_", "A_", "ENC_")) or member.name.startswith("MM_"):
        return "towers"
    return _COMPONENTS.get(member.name, member.name.lower())


# ---------------------------------------------------------------- archspec check and the resolver


def file_type(header: Header) -> str | None:
    """The mixture llama.cpp's quantiser names in general.file_type ('Q4_K_M' for 15), or None."""
    gguf = _gguf()
    value = header.metadata.get("general.file_type")
    try:
        return gguf.LlamaFileType(value).name.removeprefix("MOSTLY_") if isinstance(value, int) else None
    except ValueError:
        return None


def weights_format(file_type_name: str | None) -> str | None:
    """The --weights format that models a GGUF file type ('Q4_K_M' -> 'q4_k_m', 'F16' -> 'fp16'), or None."""
    from archspec.core.vocab import dtype_key
    from archspec.memory.storage import STORAGE

    if not file_type_name:
        return None
    key = dtype_key(file_type_name)
    key = {"f16": "fp16", "f32": "fp32", "all_f32": "fp32"}.get(key, key)
    return key if key in STORAGE else None


def check(spec, stored: list[StoredTensor], arch: str, ref: str, files: tuple[str, ...] = (),
          file_type_name: str | None = None):  # fmt: skip
    """archspec check of a GGUF file: its tensors against the spec's under llama.cpp's names (a
    archspec.sources.check.CheckReport). Rotary tables and DeepSeek-V3's score correction are buffers;
    nextn (multi-token prediction) tensors a hidden component; anything else not the spec's is extra."""
    from archspec.count.params import COMPONENTS, count_params
    from archspec.memory.parallel import stored_weights_bytes
    from archspec.sources.check import CheckReport, Misshapen, Tally

    names = {t.name for t in stored}
    split = "blk.0.attn_kv_b.weight" not in names
    expected = expected_tensors(spec, arch, kv_b_split=split)
    by_name = {t.name: t for t in stored}
    missing = tuple(n for n in expected if n not in by_name)
    misshapen = tuple(
        Misshapen((n,), (by_name[n].shape,), (shape,))
        for n, (shape, _) in expected.items()
        if n in by_name and tuple(by_name[n].shape) != tuple(shape)
    )
    component = {n: comp for n, (_, comp) in expected.items() if n in by_name}
    extra: list[str] = []
    hidden: dict[str, Tally] = {}
    buffers = Tally()
    for t in stored:
        if t.name in component:
            continue
        comp = component_of(t.name)
        if comp == "buffers":
            buffers = buffers.add(t)
        elif comp in ("mtp", "towers"):
            hidden[comp] = hidden.get(comp, Tally()).add(t)
        else:
            comp = "extra"
            extra.append(t.name)
        component[t.name] = comp
    by_dtype: dict[str, Tally] = {}
    by_component: dict[str, Tally] = {}
    total = Tally()
    for t in stored:
        by_dtype[t.dtype] = by_dtype.get(t.dtype, Tally()).add(t)
        by_component[component[t.name]] = by_component.get(component[t.name], Tally()).add(t)
        total = total.add(t)
    order = {c: i for i, c in enumerate(COMPONENTS)}
    by_component = dict(sorted(by_component.items(), key=lambda kv: order.get(kv[0], len(order))))
    fmt = weights_format(file_type_name)
    layout = f"llama.cpp {arch}" + (" (file type " + file_type_name + ")" if file_type_name else "")
    return CheckReport(
        name=spec.name, source=ref, layout=layout, ok=not (missing or misshapen or extra or hidden),
        missing=missing, misshapen=misshapen, extra=tuple(extra), hidden=hidden, scales=Tally(), buffers=buffers,
        by_dtype=by_dtype, by_component=by_component, stored=total, spec_params=count_params(spec).total,
        weights_format=fmt, predicted_bytes=stored_weights_bytes(spec, weights=fmt) if fmt else None, files=files,
    )  # fmt: skip
