"""Storage by role (archspec.memory.roles): maps by role, the released checkpoints' layouts and the scales of
block-quantised formats, each held to a count typed here from the released config's numbers, not from
archspec's description; and the refusals of bad --weights values."""

from __future__ import annotations

import json
from math import ceil

import pytest

import archspec
from archspec.core.errors import SpecError
from archspec.memory import estimate_memory, stored_weights_bytes
from archspec.memory.roles import LAYOUTS, ROLES, canonical_weights, model_roles
from archspec.spec.model import MTP

GiB = 2**30


def _llama_405b_bytes(tp: int, mlp_fp8_layers: int) -> int:
    """Meta's FP8 Llama 3.1 405B on the fullest of `tp` tensor-parallel devices, typed from its config.json
    (hidden_size 16384, intermediate_size 53248, 126 layers, 128 heads, 8 key/value heads of 128, vocab
    128256, untied head): `mlp_fp8_layers` MLPs in FP8 with one fp32 scale per output row, all else bf16."""
    d, ff, layers, kv, vocab = 16384, 53248, 126, 8 * 128, 128256
    attention = (d * d + 2 * d * kv + d * d) // tp * 2  # q, k, v, o in bf16
    mlp_values = 3 * d * ff // tp
    mlp_rows = (2 * ff // tp + d) * 4  # gate and up: ff/tp rows each; down: d rows (its columns are split)
    fp8 = mlp_values + mlp_rows
    bf16 = mlp_values * 2
    norms = 2 * d * 2
    tables = 2 * vocab // tp * d * 2  # the token table and the head, split by vocabulary rows
    return layers * (attention + norms) + mlp_fp8_layers * fp8 + (layers - mlp_fp8_layers) * bf16 + tables + d * 2


def test_meta_fp8_is_the_llama3_rule_mlps_but_the_first_and_last_layer_in_fp8_with_row_scales():
    spec = archspec.preset("llama-3.1-405b")
    assert stored_weights_bytes(spec, "meta-fp8", tensor_parallel=8) == _llama_405b_bytes(8, 124)
    assert stored_weights_bytes(spec, "mlp=fp8_row", tensor_parallel=8) == _llama_405b_bytes(8, 126)
    # one format for everything undercounts what Meta's checkpoint keeps in bf16
    assert stored_weights_bytes(spec, "fp8", tensor_parallel=8) < 0.85 * _llama_405b_bytes(8, 124)


def test_fp8_block_scales_are_one_fp32_per_128x128_block_of_each_matrix():
    """DeepSeek-V3's first dense layer as its config.json gives it (hidden 7168, q_lora_rank 1536,
    kv_lora_rank 512, rope 64, 128 heads of nope 128 + rope 64 and value 128, intermediate 18432): every
    matrix in FP8 beside ceil(rows/128) x ceil(cols/128) fp32 scales; the latent norms and the layer norms bf16."""
    spec = archspec.preset("deepseek-v3")
    d, qr, kvr, rope, h, nope, v, ff = 7168, 1536, 512, 64, 128, 128, 128, 18432
    mats = [(qr, d), (h * (nope + rope), qr), (kvr + rope, d), (h * (nope + v), kvr), (d, h * v),
            (ff, d), (ff, d), (d, ff)]  # fmt: skip
    fp8 = sum(r * c + ceil(r / 128) * ceil(c / 128) * 4 for r, c in mats)
    norms = (qr + kvr + 2 * d) * 2
    one = archspec.preset("deepseek-v3").model_copy(update={"decoder_layers": 1})
    emb = 2 * spec.vocab_size * d * 2 + d * 2  # token table, head, final norm in bf16
    assert stored_weights_bytes(one, "deepseek-fp8") == fp8 + norms + emb


def test_a_role_map_names_each_role_once_and_only_roles_the_model_has():
    assert canonical_weights("MLP=fp8_row, attention=bfloat16") == "attention=bf16,mlp=fp8_row"
    for bad, words in [
        ("mlp=fp8,mlp=bf16", "role mlp is given twice"),
        ("ffn=fp8", "unknown role 'ffn'"),
        ("mlp=fp9", "unknown format 'fp9' for mlp"),
        ("fp9", "unknown --weights format 'fp9'"),
    ]:
        with pytest.raises(SpecError, match=words):
            canonical_weights(bad)
    with pytest.raises(SpecError, match="llama-3.1-405b has no experts"):
        stored_weights_bytes(archspec.preset("llama-3.1-405b"), "experts=mxfp4")
    assert model_roles(archspec.preset("deepseek-v3")) == set(ROLES)
    assert model_roles(archspec.preset("deepseek-v3").model_copy(update={"mtp": None})) == set(ROLES) - {"mtp"}
    assert "mtp" in model_roles(archspec.preset("glm-4.5-air").model_copy(update={"mtp": MTP(modules=1)}))


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--weights", "mlp=fp8,mlp=bf16"], "role mlp is given twice"),
        (["--weights", "experts=fp8"], "qwen3-8b has no experts"),
        (["--weights", "mlp=q3_k"], "unknown format 'q3_k' for mlp"),
    ],
)
def test_bad_role_maps_are_one_line_and_exit_2(run_cli, argv, words):
    code, _, err = run_cli("memory", "qwen3-8b", "-s", "128", *argv)
    assert code == 2 and words in err and err.count("\n") == 1 and "Traceback" not in err


def test_a_map_a_layout_and_a_format_agree_where_they_say_the_same(run_cli):
    spec = archspec.preset("gpt-oss-120b")
    same = stored_weights_bytes(spec, "bf16", experts="mxfp4")
    assert stored_weights_bytes(spec, "gpt-oss-mxfp4") == stored_weights_bytes(spec, "experts=mxfp4") == same
    code, out, _ = run_cli("memory", "gpt-oss-120b", "-s", "128", "--weights", "gpt-oss-mxfp4", "--format", "json")
    assert code == 0 and json.loads(out)[0]["inference_weights_bytes"] == same


def test_the_kv_cache_stays_bf16_beside_fp8_and_quantised_weights():
    spec = archspec.preset("qwen3-8b")
    for weights in ("fp8", "deepseek-fp8", "mlp=fp8_row", "q4_k_m"):
        assert estimate_memory(spec, 1, 128, weights=weights).kv_cache_dtype == "bf16"
    assert estimate_memory(spec, 1, 128, weights="fp8", kv_dtype="fp8").kv_cache_dtype == "fp8"
    from archspec.plan.inference import estimate_inference

    e = estimate_inference(spec, "h100", 1, 64, 8, dtype="fp8")
    assert e.kv_dtype == "bf16"


def test_every_layout_names_its_source_and_roles_of_the_table():
    for name, lay in LAYOUTS.items():
        assert lay.source and set(lay.roles) <= set(ROLES), name


# "Fits on" statements from the deployment guides and model cards, each with its source and a short quote.
# The planner is held to them with the released layout and the default engine (vLLM's 0.9 share).
FITS_ON = [
    # (model, --weights, accelerator, (most devices it may take, fewest it must need), source, quote)
    ("deepseek-v3", "deepseek-fp8", "h200", (8, 1),
     "https://github.com/sgl-project/sglang/blob/main/benchmark/deepseek_v3/README.md",
     "Hardware Recommendation: 8 x NVIDIA H200 GPUs"),
    ("deepseek-v3", "deepseek-fp8", "h100", (None, 9),
     "https://github.com/sgl-project/sglang/blob/main/benchmark/deepseek_v3/README.md",
     "If you do not have GPUs with large enough memory, please try multi-node tensor parallelism"),
    ("llama-3.1-405b", "meta-fp8", "h100", (8, 1),
     "https://github.com/pytorch/FBGEMM/blob/main/fbgemm_gpu/experimental/gen_ai/README.md",
     "for the 405 B model, FP8 enables the inference on a single node"),
    ("llama-3.1-405b", "bf16", "h100", (None, 9),
     "https://github.com/pytorch/FBGEMM/blob/main/fbgemm_gpu/experimental/gen_ai/README.md",
     "the baseline BF16 running on two nodes with pipeline parallelism"),
    ("gpt-oss-120b", "gpt-oss-mxfp4", "h100", (1, 1),
     "https://huggingface.co/openai/gpt-oss-120b (model card)",
     "gpt-oss-120b ... that fit into a single 80GB GPU (like NVIDIA H100 or AMD MI300X)"),
]  # fmt: skip


@pytest.mark.parametrize(
    "model, weights, gpu, bounds, source, quote",
    FITS_ON,
    ids=lambda x: x if isinstance(x, str) and "/" not in x and " " not in x else "",
)
def test_fit_agrees_with_the_deployment_guides(model, weights, gpu, bounds, source, quote):
    from archspec.plan.fit import fit
    from archspec.plan.hardware import ACCELERATORS

    f = fit(archspec.preset(model), ACCELERATORS[gpu], weights, "inference", 1, 4096)
    most, fewest = bounds
    assert f.devices is not None and f.devices >= fewest, (source, quote)
    assert most is None or f.devices <= most, (source, quote)


def test_the_engine_share_is_what_weights_and_cache_may_use(run_cli):
    from archspec.memory.runtime import usable_bytes
    from archspec.plan.fit import fit
    from archspec.plan.hardware import ACCELERATORS

    h100 = ACCELERATORS["h100"]
    spec = archspec.preset("deepseek-v3")
    assert usable_bytes(h100.memory_bytes) == int(80 * GiB * 0.9)
    # 8 x H100 hold DeepSeek's FP8 weights only on the whole device, which no engine gives them
    assert fit(spec, h100, "deepseek-fp8", batch=1, seq_len=4096, engine="none").devices == 8
    assert fit(spec, h100, "deepseek-fp8", batch=1, seq_len=4096).devices > 8
    bad = [(["--gpu-memory-utilization", "0"], "must be in (0, 1]"), (["--engine", "tgi"], "invalid choice")]
    for argv, words in bad:
        code, _, err = run_cli("fit", "gpt2", "--gpu", "h100", *argv)
        assert code == 2 and words in err and err.count("\n") == 1


def test_fit_marks_fp8_emulated_where_the_hardware_table_has_no_fp8(run_json):
    rows = run_json("fit", "gpt2", "--gpu", "a100", "--gpu", "h100")
    native = {(r["accelerator"], r["dtype"]): r["native"] for r in rows}
    from archspec.plan.hardware import ACCELERATORS

    assert ACCELERATORS["a100"].fp8_tflops is None and ACCELERATORS["h100"].fp8_tflops is not None
    for fmt in ("fp8", "fp8_block", "fp8_row"):
        assert native["a100", fmt] is False and native["h100", fmt] is True
    assert native["a100", "int4"] and native["a100", "bf16"]


def test_lora_fit_plans_gradient_checkpointing_by_default_as_qlora_users_run_it():
    """QLoRA of Qwen3-8B on one RTX 4090 (24 GiB): with full recomputation (peft's
    prepare_model_for_kbit_training turns gradient checkpointing on by default) it fits one card."""
    from archspec.plan.fit import fit
    from archspec.plan.hardware import ACCELERATORS

    spec, card = archspec.preset("qwen3-8b"), ACCELERATORS["rtx4090"]
    f = fit(spec, card, "nf4", "lora", 1, 2048)
    m = estimate_memory(spec, 1, 2048, "bf16", weights="nf4", lora_rank=16, lora_targets="all", recompute="full")
    assert f.devices == 1 and f.per_device_bytes == m.training_total_bytes <= card.memory_bytes
    assert (
        fit(spec, card, "nf4", "lora", 1, 2048, training={"recompute": "none"}).per_device_bytes
        > m.training_total_bytes
    )


def test_flops_gives_6nd_with_the_active_parameters_of_a_mixture_of_experts(run_json):
    """Mixtral 8x7B's model card: "46.7B total parameters but only uses 12.9B parameters per token"."""
    (obj,) = run_json("flops", "mixtral-8x7b", "--tokens", "1e12")
    total = obj["training_total_6nd"] // (6 * 10**12)
    assert abs(obj["active_params"] / 12.9e9 - 1) < 0.005 and abs(total / 46.7e9 - 1) < 0.005
    assert obj["training_total_6nd_active"] == 6 * obj["active_params"] * 10**12
