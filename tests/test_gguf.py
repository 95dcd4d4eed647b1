"""GGUF files: the header parser against gguf.GGUFReader, stored bytes against the file's offsets, and the
spec of a GGUF file against the spec of the released config.json it was converted from.

The GGUF files are written here with gguf.GGUFWriter. Their metadata is what llama.cpp's converter writes
from the released config.json (ggml-org/llama.cpp, conversion/base.py TextModel.set_gguf_parameters and
each model's own set_gguf_parameters: conversion/llama.py, qwen.py, gemma.py, phi.py, deepseek.py,
gpt_oss.py), through the writer's own add_* methods (the key names are gguf-py's). Their tensors are
transformers' model of the same config, built on the meta device, renamed by gguf-py's TensorNameMap
and reshaped as the converter does (experts stacked, gpt-oss's gate_up split, DeepSeek's kv_b split): an
oracle archspec did not write.
"""

from __future__ import annotations

import json
import math
import struct
from functools import cache
from pathlib import Path

import pytest

gguf = pytest.importorskip("gguf")
np = pytest.importorskip("numpy")

from archspec.core.errors import SpecError  # noqa: E402
from archspec.count.flops import count_flops  # noqa: E402
from archspec.count.params import count_params  # noqa: E402
from archspec.io.loading import load_spec  # noqa: E402
from archspec.memory.cache import kv_cache_bytes_per_token  # noqa: E402
from archspec.sources import gguf as ggufsrc  # noqa: E402
from archspec.sources import gguf_names  # noqa: E402
from archspec.sources.gguf_header import Truncated, parse_header  # noqa: E402

HF = Path(__file__).parent / "data" / "hf"
T = gguf.GGMLQuantizationType


# ---------------------------------------------------------------- what llama.cpp's converter writes


def _rope_theta(raw: dict):
    params = raw.get("rope_parameters") or raw.get("rope_scaling") or {}
    return params.get("rope_theta", raw.get("rope_theta")) if isinstance(params, dict) else raw.get("rope_theta")


def converter_metadata(w, raw: dict, arch: str) -> None:
    """The keys convert_hf_to_gguf.py writes for a config (architecture keys only; the tokenizer's are
    left out: the vocabulary is token_embd's rows)."""
    n_heads = raw["num_attention_heads"]
    if arch in ("gemma2", "gemma3"):  # Gemma2Model / Gemma3Model.set_gguf_parameters write their own set
        w.add_context_length(raw["max_position_embeddings"])
        w.add_embedding_length(raw["hidden_size"])
        w.add_block_count(raw["num_hidden_layers"])
        w.add_feed_forward_length(raw["intermediate_size"])
        w.add_head_count(n_heads)
        w.add_head_count_kv(raw.get("num_key_value_heads", 4))
        w.add_layer_norm_rms_eps(raw.get("rms_norm_eps", 1e-6))
        w.add_key_length(raw["head_dim"])
        w.add_value_length(raw["head_dim"])
        if arch == "gemma2":
            w.add_attn_logit_softcapping(raw["attn_logit_softcapping"])
            w.add_final_logit_softcapping(raw["final_logit_softcapping"])
        else:
            w.add_rope_freq_base(_rope_theta(raw))
        w.add_sliding_window(raw["sliding_window"])
        return
    if arch == "phi3":  # Phi3MiniModel.set_gguf_parameters
        w.add_context_length(raw["max_position_embeddings"])
        w.add_rope_scaling_orig_ctx_len(raw["original_max_position_embeddings"])
        w.add_embedding_length(raw["hidden_size"])
        w.add_feed_forward_length(raw["intermediate_size"])
        w.add_block_count(raw["num_hidden_layers"])
        w.add_head_count(n_heads)
        w.add_head_count_kv(raw["num_key_value_heads"])
        w.add_layer_norm_rms_eps(raw["rms_norm_eps"])
        w.add_rope_dimension_count(raw["hidden_size"] // n_heads)
        w.add_rope_freq_base(_rope_theta(raw))
        w.add_sliding_window(raw.get("sliding_window") or 0)
        return
    # TextModel.set_gguf_parameters
    w.add_block_count(raw["num_hidden_layers"])
    w.add_context_length(raw["max_position_embeddings"])
    w.add_embedding_length(raw["hidden_size"])
    w.add_feed_forward_length(raw["intermediate_size"])
    w.add_head_count(n_heads)
    if raw.get("num_key_value_heads") is not None:
        w.add_head_count_kv(raw["num_key_value_heads"])
    if _rope_theta(raw) is not None:
        w.add_rope_freq_base(_rope_theta(raw))
    w.add_layer_norm_rms_eps(raw["rms_norm_eps"])
    if raw.get("num_local_experts") is not None:
        w.add_expert_count(raw["num_local_experts"])
    if raw.get("num_experts_per_tok") is not None:
        w.add_expert_used_count(raw["num_experts_per_tok"])
    if raw.get("head_dim") is not None:
        w.add_key_length(raw["head_dim"])
        w.add_value_length(raw["head_dim"])
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_K_M)
    if arch in ("llama", "granite"):  # LlamaModel: the vocabulary and the rotary width
        w.add_vocab_size(raw["vocab_size"])
        w.add_rope_dimension_count(raw.get("head_dim") or raw["hidden_size"] // n_heads)
    if arch == "granite":  # GraniteModel.set_gguf_parameters: the multipliers
        w.add_embedding_scale(raw["embedding_multiplier"])
        w.add_residual_scale(raw["residual_multiplier"])
        w.add_attention_scale(raw["attention_multiplier"])
        w.add_logit_scale(raw["logits_scaling"])
    elif arch == "olmoe":  # OlmoeModel.set_gguf_parameters
        w.add_expert_count(raw["num_experts"])
    elif arch in ("qwen2moe", "qwen3moe"):  # Qwen2MoeModel.set_gguf_parameters
        w.add_expert_count(raw["num_experts"])
        w.add_expert_feed_forward_length(raw["moe_intermediate_size"])
        if raw.get("shared_expert_intermediate_size"):
            w.add_expert_shared_feed_forward_length(raw["shared_expert_intermediate_size"])
    elif arch == "gpt-oss":  # GptOssModel.set_gguf_parameters
        w.add_sliding_window(raw["sliding_window"])
        w.add_expert_feed_forward_length(raw["intermediate_size"])
    elif arch == "deepseek2":  # DeepseekV2Model.set_gguf_parameters (MLA written as llama.cpp runs it)
        w.add_leading_dense_block_count(raw["first_k_dense_replace"])
        w.add_vocab_size(raw["vocab_size"])
        if raw.get("q_lora_rank") is not None:
            w.add_q_lora_rank(raw["q_lora_rank"])
        w.add_kv_lora_rank(raw["kv_lora_rank"])
        w.add_key_length(raw["kv_lora_rank"] + raw["qk_rope_head_dim"])
        w.add_value_length(raw["kv_lora_rank"])
        w.add_key_length_mla(raw["qk_nope_head_dim"] + raw["qk_rope_head_dim"])
        w.add_value_length_mla(raw["v_head_dim"])
        w.add_expert_feed_forward_length(raw["moe_intermediate_size"])
        w.add_expert_count(raw["n_routed_experts"])
        w.add_expert_shared_count(raw["n_shared_experts"])
        w.add_expert_weights_scale(raw["routed_scaling_factor"])
        w.add_expert_weights_norm(raw["norm_topk_prob"])
        sigmoid = raw.get("scoring_func", "sigmoid" if raw["model_type"] == "deepseek_v3" else "softmax") == "sigmoid"
        w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID if sigmoid else gguf.ExpertGatingFuncType.SOFTMAX)
        w.add_rope_dimension_count(raw["qk_rope_head_dim"])


def converter_tensors(raw: dict, arch: str) -> dict[str, tuple[int, ...]]:
    """GGUF name -> row-major shape: transformers' model of `raw` on the meta device, as the converter
    renames and reshapes it."""
    from test_hf import build_transformers

    model = build_transformers(raw)
    n = raw["num_hidden_layers"]
    member = next(a for a, name in gguf.MODEL_ARCH_NAMES.items() if name == arch)
    names = gguf.get_tensor_name_map(member, n)
    out: dict[str, tuple[int, ...]] = {}

    def put(hf_name: str, shape) -> None:
        name = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        assert name is not None, hf_name
        out[name] = tuple(shape)

    for key, tensor in model.state_dict().items():
        shape = tuple(tensor.shape)
        if key.endswith("rotary_emb.inv_freq") or (key == "lm_head.weight" and model.config.tie_word_embeddings):
            continue  # a buffer; a tied head (state_dict lists it under both names)
        if key.endswith("experts.gate_up_proj") and arch == "gpt-oss":  # (E, d, 2I) interleaved, as x @ w
            e, d, two = shape
            put(key.replace("gate_up_proj", "gate_proj.weight"), (e, two // 2, d))
            put(key.replace("gate_up_proj", "up_proj.weight"), (e, two // 2, d))
        elif key.endswith("experts.gate_up_proj_bias"):
            put(key.replace("gate_up_proj_bias", "gate_proj.bias"), (shape[0], shape[1] // 2))
            put(key.replace("gate_up_proj_bias", "up_proj.bias"), (shape[0], shape[1] // 2))
        elif key.endswith("experts.down_proj") and arch == "gpt-oss":  # (E, I, d) as x @ w
            put(key + ".weight", (shape[0], shape[2], shape[1]))
        elif key.endswith("experts.down_proj_bias"):
            put(key.replace("down_proj_bias", "down_proj.bias"), shape)
        elif key.endswith("experts.gate_up_proj"):  # transformers 5: (E, 2I, d), [gate | up]; checkpoints per expert
            e, two, d = shape
            put(key.replace("gate_up_proj", "gate_proj.weight"), (e, two // 2, d))
            put(key.replace("gate_up_proj", "up_proj.weight"), (e, two // 2, d))
        elif key.endswith("experts.down_proj") or key.endswith("self_attn.sinks"):
            put(key + ".weight", shape)
        elif key.endswith("kv_b_proj.weight") and arch == "deepseek2":  # split, k_b transposed
            heads, nope, v = raw["num_attention_heads"], raw["qk_nope_head_dim"], raw["v_head_dim"]
            put(key.replace("kv_b_proj", "k_b_proj"), (heads, shape[1], nope))
            put(key.replace("kv_b_proj", "v_b_proj"), (heads, v, shape[1]))
        elif key.endswith("e_score_correction_bias"):  # DeepseekV2Model.modify_tensors renames it
            put(key.replace("e_score_correction_bias", "e_score_correction.bias"), shape)
        else:
            put(key, shape)
    return out


def mixture(name: str, shape: tuple[int, ...], arch: str) -> int:
    """A Q4_K_M-like choice: 1-D tensors F32, the head Q6_K, the embedding Q8_0, gpt-oss's experts MXFP4 (kept as
    released), the value and down projections Q6_K, the rest Q4_K where rows hold whole blocks of 256."""
    if len(shape) == 1 or name.endswith(".bias") or "attn_sinks" in name or "exp_probs_b" in name:
        return T.F32
    if arch == "gpt-oss" and "_exps" in name:
        return T.MXFP4
    if name == "token_embd.weight" or shape[-1] % 256:  # k-quants need rows of whole 256-blocks
        return T.Q8_0
    if name == "output.weight":
        return T.Q6_K
    if "attn_v" in name or "ffn_down" in name:
        return T.Q6_K
    return T.Q4_K


def nbytes(shape: tuple[int, ...], kind: int) -> int:
    """The bytes of a tensor as gguf-py's quants module shapes its bytes."""
    from gguf.quants import quant_shape_to_byte_shape

    return (
        int(np.prod(quant_shape_to_byte_shape(shape, T(kind)))) if T(kind) not in (T.F32,) else int(np.prod(shape)) * 4
    )


def write_header_only(path: Path, raw: dict, arch: str) -> dict[str, tuple[tuple[int, ...], int]]:
    """A GGUF file of the model: the converter's metadata and tensor infos, the data section left sparse
    (the file has its full length; nothing is written there)."""
    tensors = converter_tensors(raw, arch)
    w = gguf.GGUFWriter(path, arch)
    converter_metadata(w, raw, arch)
    types = {}
    for name, shape in tensors.items():
        kind = mixture(name, shape, arch)
        types[name] = (shape, kind)
        w.add_tensor_info(name, shape, np.float32, nbytes(shape, kind), raw_dtype=T(kind))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    pad = 32  # the total length: the header padded to the alignment, then each tensor padded
    total = -(-path.stat().st_size // pad) * pad
    for shape, kind in types.values():
        total += -(-nbytes(shape, kind) // pad) * pad
    with open(path, "r+b") as f:
        f.truncate(total)
    return types


# the released configs and llama.cpp's architecture for each
MODELS = {
    "llama-3-8b": "llama",
    "mixtral-8x7b-instruct": "llama",
    "qwen2.5-7b": "qwen2",
    "qwen3-8b": "qwen3",
    "qwen3-30b-a3b": "qwen3moe",
    "qwen1.5-moe-a2.7b": "qwen2moe",
    "granite-3.3-8b-instruct": "granite",
    "olmo-2-1124-13b": "olmo2",
    "olmoe-1b-7b-0125-instruct": "olmoe",
    "seed-oss-36b-instruct": "seed_oss",
    "ernie-4.5-0.3b-pt": "ernie4_5",
    "gemma-2-9b": "gemma2",
    "gemma-3-1b-it": "gemma3",
    "phi-3-mini-4k-instruct": "phi3",
    "gpt-oss-20b": "gpt-oss",
    "deepseek-v3": "deepseek2",
    "deepseek-coder-v2-lite-base": "deepseek2",  # DeepSeek-V2: no q_lora_rank, a softmax router
}


@cache
def _written(model: str, tmp: Path) -> tuple[Path, dict]:
    raw = json.loads((HF / f"{model}.json").read_text())
    path = tmp / f"{model}.gguf"
    types = write_header_only(path, raw, MODELS[model])
    return path, types


@pytest.fixture(scope="module")
def gguf_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("gguf")


@pytest.mark.parametrize("model", list(MODELS))
def test_spec_of_gguf_counts_as_its_config(model, gguf_dir):
    path, _ = _written(model, gguf_dir)
    from_gguf = ggufsrc.load_gguf(path)
    from_config = load_spec(HF / f"{model}.json")
    a, b = count_params(from_gguf), count_params(from_config)
    assert (a.total, a.active, dict(a.components)) == (b.total, b.active, dict(b.components))
    assert kv_cache_bytes_per_token(from_gguf, seq_len=8192) == kv_cache_bytes_per_token(from_config, seq_len=8192)
    assert (
        count_flops(from_gguf, batch=1, seq_len=512).forward == count_flops(from_config, batch=1, seq_len=512).forward
    )


@pytest.mark.parametrize("model", list(MODELS))
def test_gguf_names_of_the_spec_are_the_converters(model, gguf_dir):
    path, types = _written(model, gguf_dir)
    header = ggufsrc.read_header(path)
    spec = ggufsrc.load_gguf(path)
    expected = {name: shape for name, (shape, _) in gguf_names.expected_tensors(spec, MODELS[model]).items()}
    written = {name: shape for name, (shape, _) in types.items()}
    buffers = {name for name in written if gguf_names.component_of(name) == "buffers"}
    assert expected == {k: v for k, v in written.items() if k not in buffers}
    report = gguf_names.check(spec, ggufsrc.stored_tensors(header), MODELS[model], str(path))
    assert report.ok and not (report.missing or report.misshapen or report.extra or report.hidden)
    assert report.buffers.tensors == len(buffers) and report.stored.params == count_params(spec).total + sum(
        math.prod(written[b]) for b in buffers
    )


def test_stored_bytes_read_the_mixture(gguf_dir):
    """gpt-oss in a Q4_K_M-like mixture: each tensor's type and bytes as written, the experts MXFP4."""
    path, types = _written("gpt-oss-20b", gguf_dir)
    stored = {t.name: t for t in ggufsrc.stored_tensors(ggufsrc.read_header(path))}
    assert {n: (t.shape, t.dtype) for n, t in stored.items()} == {n: (s, T(k).name) for n, (s, k) in types.items()}
    assert {n: t.nbytes for n, t in stored.items()} == {n: nbytes(s, k) for n, (s, k) in types.items()}
    assert stored["blk.0.ffn_gate_exps.weight"].dtype == "MXFP4"
    assert stored["token_embd.weight"].dtype == "Q8_0" and stored["blk.0.attn_q.weight"].dtype == "Q8_0"
    path, _ = _written("qwen3-30b-a3b", gguf_dir)  # rows of 2048: the head Q6_K, the experts Q4_K and Q6_K
    stored = {t.name: t.dtype for t in ggufsrc.stored_tensors(ggufsrc.read_header(path))}
    assert (stored["output.weight"], stored["blk.0.ffn_gate_exps.weight"], stored["blk.0.ffn_down_exps.weight"]) == (
        "Q6_K",
        "Q4_K",
        "Q6_K",
    )


# ---------------------------------------------------------------- the header parser against gguf.GGUFReader


def _small_file(path: Path) -> None:
    """A small complete GGUF file: every value type, arrays, and tensors with real data of several types."""
    w = gguf.GGUFWriter(path, "llama")
    w.add_uint8("t.u8", 7)
    w.add_int8("t.i8", -7)
    w.add_uint16("t.u16", 65000)
    w.add_int16("t.i16", -300)
    w.add_uint32("t.u32", 4_000_000_000)
    w.add_int32("t.i32", -5)
    w.add_float32("t.f32", 0.5)
    w.add_uint64("t.u64", 1 << 60)
    w.add_int64("t.i64", -(1 << 60))
    w.add_float64("t.f64", 1e-300)
    w.add_bool("t.bool", True)
    w.add_string("t.str", "héllo")
    w.add_array("t.ints", [1, 2, 3])
    w.add_array("t.strs", ["a", "bc", ""])
    w.add_token_list([f"tok{i}" for i in range(300)])
    w.add_token_scores([float(i) for i in range(300)])
    rng = np.random.default_rng(0)
    for name, shape, kind in (("a", (4, 64), T.Q8_0), ("b", (2, 256), T.Q6_K), ("c", (3, 64), T.MXFP4),
                              ("d", (5,), T.F32), ("e", (2, 512), T.Q4_K), ("f", (3, 32), T.F16)):  # fmt: skip
        data = rng.standard_normal(shape).astype(np.float32)
        if kind == T.F32:
            w.add_tensor(name, data)
        elif kind == T.F16:
            w.add_tensor(name, data.astype(np.float16))
        elif kind in (T.Q8_0, T.MXFP4):  # gguf-py quantizes these itself
            w.add_tensor(name, gguf.quants.quantize(data, kind), raw_dtype=kind)
        else:  # k-quants: bytes of the shape gguf-py gives the type (it has no quantizer for them)
            raw = rng.integers(0, 255, gguf.quants.quant_shape_to_byte_shape(shape, kind), dtype=np.uint8)
            w.add_tensor(name, raw, raw_dtype=kind)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("small") / "small.gguf"
    _small_file(path)
    return path


def test_header_equals_gguf_reader(small):
    reader = gguf.GGUFReader(small)
    header = parse_header(small.read_bytes(), str(small))
    fields = {k: f.contents() for k, f in reader.fields.items() if not k.startswith("GGUF.")}
    assert header.metadata.keys() == fields.keys()
    for key, value in fields.items():
        assert (
            header.metadata[key] == pytest.approx(value) if isinstance(value, float) else header.metadata[key] == value
        )
    assert header.version == reader.fields["GGUF.version"].contents()
    assert [(t.name, t.ne, t.ggml_type, header.data_offset + t.offset) for t in header.tensors] == [
        (t.name, tuple(int(n) for n in t.shape), int(t.tensor_type), t.data_offset) for t in reader.tensors
    ]
    assert header.data_offset == reader.data_offset


def test_stored_bytes_are_the_data_between_offsets(small):
    """Each tensor's bytes from its type's block and size equal the data the writer wrote for it: the
    distance to the next tensor's offset (or the end of the file), less the alignment padding."""
    header = ggufsrc.read_header(small)
    starts = [t.offset for t in header.tensors] + [small.stat().st_size - header.data_offset]
    for t, end in zip(header.tensors, starts[1:]):
        size = ggufsrc.stored_bytes(t)
        assert end - t.offset == -(-size // header.alignment) * header.alignment, t.name
    reader = gguf.GGUFReader(small)
    assert [ggufsrc.stored_bytes(t) for t in header.tensors] == [int(t.data.nbytes) for t in reader.tensors]


def test_a_short_prefix_says_how_much_more_it_needs(small):
    data = small.read_bytes()
    full = parse_header(data)
    prefix = 16
    while True:
        try:
            header = parse_header(data[:prefix])
            break
        except Truncated as exc:
            assert exc.needed > prefix
            prefix = exc.needed
    assert header == full and prefix <= full.data_offset


def _bad(data: bytes, tmp_path: Path) -> str:
    path = tmp_path / "bad.gguf"
    path.write_bytes(data)
    with pytest.raises(SpecError) as err:
        ggufsrc.load_gguf(path)
    message = str(err.value)
    assert "\n" not in message and str(path) in message
    return message


def test_corrupt_files_are_refused_in_one_line(small, tmp_path):
    data = small.read_bytes()
    assert "not a GGUF file" in _bad(b"GGML" + data[4:], tmp_path)
    assert "GGUF version 1 is not supported" in _bad(data[:4] + struct.pack("<I", 1) + data[8:], tmp_path)
    assert "GGUF version 9 is not supported" in _bad(data[:4] + struct.pack("<I", 9) + data[8:], tmp_path)
    assert "tensors" in _bad(data[:8] + struct.pack("<Q", 1 << 40) + data[16:], tmp_path)
    # the first key's length made absurd: refused by the limit, not allocated
    assert "declares" in _bad(data[:24] + struct.pack("<Q", 1 << 50) + data[32:], tmp_path)
    # a key length that runs past the end of the file
    assert "runs past the end of the file" in _bad(data[:24] + struct.pack("<Q", 1 << 20) + data[32:], tmp_path)
    at = data.index(struct.pack("<Q", 4) + b"tok7")  # one token of the tokenizer's array of strings
    assert "tokenizer.ggml.tokens'[7] declares" in _bad(
        data[:at] + struct.pack("<Q", 1 << 50) + data[at + 8 :], tmp_path
    )
    assert "[7] is not UTF-8" in _bad(data.replace(b"tok7", b"\xff\xfek7", 1), tmp_path)
    assert "truncated GGUF file" in _bad(data[: len(data) - 100], tmp_path)
    assert "runs past the end" in _bad(data[:200], tmp_path)


def test_unknown_architecture_is_refused_by_name(tmp_path):
    path = tmp_path / "bert.gguf"
    w = gguf.GGUFWriter(path, "bert")
    w.add_block_count(2)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    with pytest.raises(SpecError, match=r"GGUF architecture 'bert' is not supported; supported: deepseek2, ") as err:
        ggufsrc.load_gguf(path)
    named = str(err.value).split("supported: ")[-1].split(", ")
    assert {"llama", "qwen2", "qwen3", "qwen3moe", "gemma2", "gemma3", "phi3", "deepseek2", "gpt-oss"} <= set(named)


def test_a_missing_head_ties_the_embedding(gguf_dir, tmp_path):
    """A file without output.weight ties the head to token_embd (llama.cpp's fallback)."""
    raw = json.loads((HF / "llama-3-8b.json").read_text())
    raw = {**raw, "tie_word_embeddings": True}
    path = tmp_path / "tied.gguf"
    write_header_only(path, raw, "llama")
    spec = ggufsrc.load_gguf(path)
    assert spec.tie_embeddings and not count_params(spec).components.get("head")
    assert count_params(spec).total == count_params(load_spec(HF / "llama-3-8b.json")).total - 128256 * 4096


# ---------------------------------------------------------------- the command line


def test_a_gguf_file_is_a_model_on_the_command_line(gguf_dir, run_json):
    path, _ = _written("qwen3-30b-a3b", gguf_dir)
    (from_gguf,) = run_json("params", str(path))
    (from_config,) = run_json("params", str(HF / "qwen3-30b-a3b.json"))
    assert from_gguf["name"] == "qwen3-30b-a3b"
    assert {k: from_gguf[k] for k in ("total", "active", "components")} == {
        k: from_config[k] for k in ("total", "active", "components")
    }


def test_check_of_a_gguf_file_holds_it_against_its_spec(gguf_dir, run_json):
    path, types = _written("gpt-oss-20b", gguf_dir)
    (report,) = run_json("check", str(path))
    assert report["ok"] and report["layout"] == "llama.cpp gpt-oss (file type Q4_K_M)"
    assert report["weights_format"] == "q4_k_m" and report["predicted_bytes"] > 0
    by_type: dict[str, int] = {}
    for shape, kind in types.values():
        by_type[T(kind).name] = by_type.get(T(kind).name, 0) + nbytes(shape, kind)
    assert {d: t["bytes"] for d, t in report["by_dtype"].items()} == by_type
    assert report["stored_params"] == report["spec_params"] == count_params(load_spec(HF / "gpt-oss-20b.json")).total
    assert report["by_component"]["experts"]["bytes"] == sum(
        nbytes(s, k) for n, (s, k) in types.items() if "_exps" in n
    )


def test_check_names_what_a_gguf_file_lacks_or_adds(gguf_dir, tmp_path, run_cli):
    """A file of Qwen3-8B without one layer's attn_k, with an extra tensor and an MTP layer's tensor: exit 1,
    each named."""
    raw = json.loads((HF / "qwen3-8b.json").read_text())
    tensors = converter_tensors(raw, "qwen3")
    del tensors["blk.3.attn_k.weight"]
    tensors["blk.3.attn_k.weight"] = (1024, 4096 + 32)  # misshapen
    tensors["blk.36.nextn.eh_proj.weight"] = (4096, 8192)
    tensors["stray.weight"] = (32,)
    path = tmp_path / "qwen3-8b-changed.gguf"
    w = gguf.GGUFWriter(path, "qwen3")
    converter_metadata(w, raw, "qwen3")
    for name, shape in tensors.items():
        w.add_tensor_info(name, shape, np.float32, nbytes(shape, T.F16), raw_dtype=T.F16)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    with open(path, "r+b") as f:
        f.truncate(path.stat().st_size + sum(nbytes(s, T.F16) + 32 for s in tensors.values()))
    code, out, err = run_cli("check", str(path), "--format", "json")
    assert code == 1, err
    (report,) = json.loads(out)
    assert report["misshapen"] == [{"names": ["blk.3.attn_k.weight"], "stored": [[1024, 4128]],
                                    "expected": [[1024, 4096]]}]  # fmt: skip
    assert report["extra"] == ["stray.weight"] and list(report["hidden"]) == ["mtp"]
    code, out, err = run_cli("check", str(path))
    assert code == 1 and "blk.3.attn_k.weight" in out and "stray.weight" in out


def test_a_corrupt_gguf_file_is_one_line_and_exit_2(small, tmp_path, run_cli):
    path = tmp_path / "cut.gguf"
    path.write_bytes(small.read_bytes()[:300])
    code, out, err = run_cli("params", str(path))
    assert code == 2 and out == "" and err.count("\n") == 1 and "runs past the end of the file" in err


def test_the_documents_toy_file_is_what_its_script_writes(tmp_path):
    """tests/data/gguf/toy-qwen3-Q4_K_M.gguf, which the documents' examples read, is reproducible; typed as
    llama.cpp's quantiser types Q4_K_M, its stored bytes are what archspec's q4_k_m format predicts."""
    import runpy

    toy = Path(__file__).parent / "data" / "gguf" / "toy-qwen3-Q4_K_M.gguf"
    script = runpy.run_path(str(toy.with_name("make_toy.py")))
    script["write"](tmp_path / "toy.gguf")
    assert (tmp_path / "toy.gguf").read_bytes() == toy.read_bytes()
    header, stored, _ = ggufsrc.read_model(toy)
    report = gguf_names.check(ggufsrc.spec_of(header, "toy"), stored, "qwen3", str(toy), (), ggufsrc.file_type(header))
    assert report.ok and report.weights_format == "q4_k_m" and report.predicted_bytes == report.stored.bytes


def test_fit_of_a_gguf_file_plans_its_stored_format(run_json):
    """fit of a GGUF file plans the weights as stored (its file type's format, computed in bf16)."""
    toy = Path(__file__).parent / "data" / "gguf" / "toy-qwen3-Q4_K_M.gguf"
    rows = run_json("fit", str(toy), "--gpu", "h100")
    assert [(r["dtype"], r["devices"], r["weights_source"]) for r in rows] == [("q4_k_m", 1, "stored")]
    (memory,) = run_json("memory", str(toy), "--seq-len", "4096")
    assert rows[0]["per_device_bytes"] == memory["inference_total_bytes"]


@pytest.mark.parametrize("model", list(MODELS))
def test_spec_of_gguf_is_its_configs_spec(model, gguf_dir):
    """Beyond the counts: every field of the spec (but the name) as the config.json gives it."""
    path, _ = _written(model, gguf_dir)
    from_gguf = ggufsrc.load_gguf(path).model_dump(exclude={"name"})
    from_config = load_spec(HF / f"{model}.json").model_dump(exclude={"name"})
    if ggufsrc.load_gguf(path).mtp is None:  # llama.cpp's DeepseekV2Model (V3 too) skips the MTP layers
        from_config["mtp"] = None
    assert {k: v for k, v in from_gguf.items() if from_config[k] != v} == {}


def test_import_of_a_gguf_file_writes_its_configs_spec(gguf_dir, run_cli):
    path, _ = _written("gpt-oss-20b", gguf_dir)
    code, from_gguf, err = run_cli("import", str(path))
    assert code == 0 and "read from a GGUF header (llama.cpp's architecture 'gpt-oss')" in err
    code, from_config, _ = run_cli("import", str(HF / "gpt-oss-20b.json"))

    def body(text: str) -> list[str]:
        return [line for line in text.splitlines() if not line.startswith(("#", "name = "))]

    assert code == 0 and body(from_gguf) == body(from_config)


def test_a_big_endian_file_reads_as_its_little_endian_twin(tmp_path):
    def write(path: Path, endianess) -> None:
        w = gguf.GGUFWriter(path, "qwen3", endianess=endianess)
        w.add_block_count(2)
        w.add_rope_freq_base(1e6)
        w.add_token_list(["a", "b", "c"])
        w.add_tensor_info("token_embd.weight", (3, 64), np.float32, 3 * 68, raw_dtype=T.Q8_0)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_ti_data_to_file()
        w.close()

    write(tmp_path / "le.gguf", gguf.GGUFEndian.LITTLE)
    write(tmp_path / "be.gguf", gguf.GGUFEndian.BIG)
    le = parse_header((tmp_path / "le.gguf").read_bytes())
    be = parse_header((tmp_path / "be.gguf").read_bytes())
    assert be.big_endian and not le.big_endian
    assert (be.metadata, be.tensors, be.data_offset) == (le.metadata, le.tensors, le.data_offset)


def test_without_the_gguf_package_a_gguf_file_names_the_extra(monkeypatch, run_cli):
    monkeypatch.setitem(__import__("sys").modules, "gguf", None)  # import gguf raises ImportError
    toy = Path(__file__).parent / "data" / "gguf" / "toy-qwen3-Q4_K_M.gguf"
    code, out, err = run_cli("params", str(toy))
    assert code == 2 and "pip install 'archspec-transformers[gguf]'" in err and err.count("\n") == 1


def test_a_mistral_model_is_written_as_llama_without_its_window(gguf_dir, tmp_path):
    """llama.cpp's converter writes Mistral-7B-v0.1 as `llama` (MistralModel is a LlamaModel) and records no
    sliding window: the spec read back counts as Mistral's config, and differs from it in the window alone."""
    raw = json.loads((HF / "mistral-7b-v0.1.json").read_text())
    path = tmp_path / "mistral-7b-v0.1.gguf"
    write_header_only(path, raw, "llama")
    from_gguf, from_config = ggufsrc.load_gguf(path), load_spec(HF / "mistral-7b-v0.1.json")
    a, b = count_params(from_gguf), count_params(from_config)
    assert (a.total, dict(a.components)) == (b.total, dict(b.components))
    differ = {k for k, v in from_gguf.model_dump(exclude={"name"}).items() if from_config.model_dump()[k] != v}
    assert differ == {"mixer"} and from_config.mixer.sliding_window == 4096
    assert from_gguf.mixer.sliding_window is None
