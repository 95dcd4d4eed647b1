"""`archspec inference` and archspec.plan.inference: the roofline recomputed by hand from bytes, FLOPs and the
accelerator table."""

import re

import pytest

import archspec
from archspec.core.errors import SpecError
from archspec.plan.hardware import ACCELERATORS
from archspec.plan.inference import estimate_inference
from archspec.render.text import human_bytes

H100_FLOPS, H100_BYTES_PER_S, H100_CAPACITY = 989e12, 3.35e12, 80 * 2**30


def gpt2_by_hand(batch: int, tokens: int) -> tuple[int, int]:
    """GPT-2 small: (exact forward matmul FLOPs of `batch` sequences of `tokens`, bf16 KV bytes of that cache)."""
    L, d, V = 12, 768, 50257
    per_token = L * (24 * d * d + 4 * tokens * d) + 2 * d * V  # QKV, out, MLP; Q.K^T and scores.V; the head
    kv = batch * tokens * L * 2 * d * 2  # K and V, d wide each, 2 bytes
    return batch * tokens * per_token, kv


def test_decode_time_is_weights_plus_mean_cache_over_bandwidth():
    B, P, G = 8, 512, 256
    e = estimate_inference(archspec.preset("gpt2"), "h100", B, P, G)
    weights = 2 * 124_439_808
    # step i of G reads the cache of P + i - 1 tokens: the mean is P + (G - 1) / 2 tokens
    mean_cache = B * (P + (G - 1) / 2) * 12 * 2 * 768 * 2
    assert e.decode_seconds_per_token == pytest.approx((weights + mean_cache) / H100_BYTES_PER_S, rel=1e-12)


def test_prefill_time_is_exact_flops_over_peak_times_mfu():
    B, P = 4, 300
    e = estimate_inference(archspec.preset("gpt2"), "h100", B, P, 10, mfu=0.5)
    flops, _ = gpt2_by_hand(B, P)
    assert e.prefill_flops == flops
    assert e.prefill_seconds == pytest.approx(flops / (H100_FLOPS * 0.5), rel=1e-12)


def test_tokens_per_second_counts_generated_tokens_over_the_whole_request():
    B, P, G = 2, 100, 50
    e = estimate_inference(archspec.preset("gpt2"), "a100", B, P, G, mbu=0.8)
    flops, _ = gpt2_by_hand(B, P)
    prefill = flops / (312e12 * 0.4)
    decode = (2 * 124_439_808 + B * (P + (G - 1) / 2) * 12 * 2 * 768 * 2) / (2039e9 * 0.8)
    assert e.tokens_per_second == pytest.approx(B * G / (prefill + G * decode), rel=1e-12)


def test_max_batch_is_the_largest_batch_whose_cache_fits_beside_the_weights():
    P, G = 1000, 24
    e = estimate_inference(archspec.preset("gpt2"), "h100", 1, P, G, engine="none")  # the whole device
    weights = 2 * 124_439_808
    kv = lambda b: gpt2_by_hand(b, P + G)[1]  # noqa: E731
    assert weights + kv(e.max_batch) <= H100_CAPACITY < weights + kv(e.max_batch + 1)


@pytest.mark.parametrize("dtype", ["int4", "fp8", "fp32"])
def test_max_batch_holds_for_every_dtype(dtype):
    from archspec.memory import kv_cache_bytes, weights_bytes

    spec = archspec.preset("gpt3-6.7b")
    e = estimate_inference(spec, "a100", 1, 2000, 48, dtype=dtype)
    # vLLM's reserve on an 80 GiB A100: 10 % of the device, the larger of a 2,048-token chunk's activations
    # (2 x 4096 residual values + the MLP's 16384 + 4096 outputs, bf16) and the sampler on 256 sequences of
    # 50,257 logits at 28 bytes, and 3.2 % of the device for the CUDA context; 2,048 tokens are 128 whole blocks
    device = 80 * 2**30
    cap = int(device * 0.9) - max(2048 * (2 * 4096 + 16384 + 4096) * 2, 256 * 50257 * 28) - int(device * 0.032)
    assert e.capacity_bytes == cap
    w = weights_bytes(spec, dtype)
    kv_dtype = "fp32" if dtype == "fp32" else "bf16"  # the engines keep a bf16 cache beside fp8 or int4 weights
    assert e.kv_dtype == kv_dtype
    assert w + kv_cache_bytes(spec, e.max_batch, 2048, kv_dtype) <= cap
    assert w + kv_cache_bytes(spec, e.max_batch + 1, 2048, kv_dtype) > cap


def test_max_batch_is_zero_when_the_weights_alone_do_not_fit(run_cli):
    e = estimate_inference(archspec.preset("gpt3-175b"), "h100", 1, 100, 10)
    assert e.weights_bytes == 2 * archspec.count_params(archspec.preset("gpt3-175b")).total > H100_CAPACITY
    assert e.max_batch == 0 and not e.fits
    code, out, _ = run_cli("inference", "gpt3-175b", "--gpu", "h100", "-p", "100", "-g", "10")
    assert code == 1 and "the weights alone do not fit" in out  # a plan that does not fit is a finding


def test_fits_compares_weights_and_cache_with_capacity():
    e = estimate_inference(archspec.preset("gpt2"), "h100", 4000, 512, 256)
    _, kv = gpt2_by_hand(4000, 768)
    assert e.kv_cache_bytes == kv
    assert e.fits == (2 * 124_439_808 + kv <= H100_CAPACITY) and e.max_batch < 4000 and not e.fits


def test_cli_json_is_the_library_estimate(run_json):
    (out,) = run_json("inference", "gpt2", "--gpu", "h100", "--batch", "8", "--prompt-len", "512", "--gen-len", "256")
    e = estimate_inference(archspec.preset("gpt2"), "h100", 8, 512, 256)
    assert list(out)[0] == "name" and out["name"] == "gpt2"
    for key in ("prefill_seconds", "decode_seconds_per_token", "tokens_per_second", "max_batch"):
        assert out[key] == getattr(e, key)
    assert isinstance(out["max_batch"], int) and isinstance(out["prefill_flops"], int)
    assert "roofline" in out["estimate"] and len(out["assumptions"]) >= 4


def test_table_labels_estimates_and_names_assumptions(run_cli):
    code, out, _ = run_cli("inference", "gpt2", "--gpu", "h100", "-b", "8", "-p", "512", "-g", "256")
    assert code == 0
    assert "roofline estimate" in out and "assumptions:" in out and "estimates, not measurements" in out
    assert "3.35 TB/s" in out  # the bandwidth's source


def test_small_prefill_is_flagged_memory_bound():
    e = estimate_inference(archspec.preset("gpt2"), "h100", 1, 8, 8)
    flops, _ = gpt2_by_hand(1, 8)
    assert e.prefill_intensity == pytest.approx(flops / (2 * 124_439_808))
    assert e.ridge_intensity == pytest.approx(989e12 * 0.4 / 3.35e12)
    assert not e.prefill_compute_bound


@pytest.mark.parametrize("name", list(ACCELERATORS))
def test_bandwidth_matches_its_printed_source(name):
    acc = ACCELERATORS[name]
    value, unit = re.search(r"([\d.,]+) (GB|TB)/s", acc.bandwidth_source).groups()
    printed = float(value.replace(",", "")) * (1000 if unit == "TB" else 1)
    assert acc.bandwidth_gbs == printed and acc.bandwidth == printed * 1e9


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--gpu", "h900", "-p", "10", "-g", "10"], "unknown accelerator 'h900'"),
        (["--gpu", "h100", "-p", "0", "-g", "10"], "must be greater than 0"),
        (["--gpu", "h100", "-p", "10", "-g", "-5"], "must be greater than 0"),
        (["--gpu", "h100", "-p", "10", "-g", "10", "--batch", "0"], "must be greater than 0"),
        (["--gpu", "h100", "-p", "1000", "-g", "100"], "longer than gpt2's learned position table"),
        (["--gpu", "h100", "-p", "10", "-g", "10", "--mfu", "1.5"], "must be in (0, 1]"),
        (["--gpu", "h100", "-p", "10", "-g", "10", "--dtype", "fp64"], "invalid choice: 'fp64'"),
        (["--gpu", "h100", "-g", "1000"], "prompt_len + gen_len = 1512"),  # -p defaults to 512
    ],
)
def test_bad_input_is_one_line_exit_2(run_cli, argv, words):
    code, out, err = run_cli("inference", "gpt2", *argv)
    assert code == 2 and out == "" and words in err and len(err.strip().splitlines()) == 1


def test_models_without_a_decoder_stack_alone_are_refused(run_cli):
    for name in ("bert-base", "transformer-base"):
        code, _, err = run_cli("inference", name, "--gpu", "h100", "-p", "10", "-g", "10")
        assert code == 2 and "decoder-only" in err


def test_library_refuses_bad_input_with_spec_errors():
    gpt2 = archspec.preset("gpt2")
    with pytest.raises(SpecError, match="unknown accelerator 'h900'"):
        estimate_inference(gpt2, "h900", 1, 10, 10)
    with pytest.raises(SpecError, match="gen_len must be a positive"):
        estimate_inference(gpt2, "h100", 1, 10, 0)
    with pytest.raises(SpecError, match="unknown dtype"):
        estimate_inference(gpt2, "h100", 1, 10, 10, dtype="fp64")
    with pytest.raises(SpecError, match="kv_dtype .fp64. is an unknown dtype"):
        estimate_inference(gpt2, "h100", 1, 10, 10, kv_dtype="fp64")


def test_kv_dtype_sets_the_cache_bytes_alone():
    gpt2 = archspec.preset("gpt2")
    e = estimate_inference(gpt2, "h100", 2, 100, 28, dtype="bfloat16", kv_dtype="float32")
    assert (e.dtype, e.kv_dtype) == ("bf16", "fp32")
    assert e.weights_bytes == 2 * 124_439_808
    assert e.kv_cache_bytes == 2 * gpt2_by_hand(2, 128)[1]  # fp32: twice the bf16 cache


# ---------------------------------------------------------------- mixtures of experts, layouts, quantised storage


def test_moe_decode_reads_the_experts_the_batch_touches():
    spec = archspec.preset("mixtral-8x7b")
    L, d, f, E, k = 32, 4096, 14336, 8, 2
    expert = 3 * d * f * 2  # one expert's gate, up and down in bf16
    all_weights = 2 * archspec.count_params(spec).total
    for B in (1, 3, 16):
        e = estimate_inference(spec, "h200", B, 64, 8)
        touched = E * (1 - (1 - k / E) ** B)
        assert e.expected_experts == pytest.approx(touched, rel=1e-12)
        assert float(e.decode_weights_bytes) == pytest.approx(all_weights - L * (E - touched) * expert, rel=1e-12)
    assert estimate_inference(spec, "h200", 1, 64, 8).decode_weights_bytes == all_weights - L * 6 * expert


def test_moe_prefill_counts_the_active_flops():
    from archspec.count.flops import count_flops

    spec = archspec.preset("mixtral-8x7b")
    e = estimate_inference(spec, "h200", 2, 128, 8)
    dense = count_flops(spec.replace(mlp={**spec.mlp.model_dump(), "top_k": 8}), 2, 128).forward
    assert e.prefill_flops == count_flops(spec, 2, 128).forward < dense


def test_tensor_parallel_splits_weights_and_cache_and_pays_all_reduces():
    spec = archspec.preset("llama-2-70b")
    one = estimate_inference(spec, "h200", 4, 512, 64, dtype="fp8")
    four = estimate_inference(spec, "h200", 4, 512, 64, dtype="fp8", tensor_parallel=4)
    assert four.kv_cache_bytes == one.kv_cache_bytes // 4  # 8 key/value heads, 2 a device
    norms = (2 * 80 + 1) * 8192  # whole on every device; every matrix and table splits 4 ways
    assert four.weights_bytes == (one.weights_bytes - norms) // 4 + norms
    # two ring all-reduces of 4 x 8192 bf16 values per layer, 2 (t - 1) / t of them sent, over 450 GB/s, each
    # with NVLink 4's published latency of 2.3 µs (archspec.plan.collectives)
    ring = 80 * 2 * 1.5 * 4 * 8192 * 2 / 450e9
    assert four.communication_seconds_per_token == pytest.approx(ring + 80 * 2 * 2.3e-6, rel=1e-12)


def test_expert_parallel_spreads_experts_and_serves_a_share_of_the_batch():
    spec = archspec.preset("mixtral-8x7b")
    e = estimate_inference(spec, "h100", 8, 256, 32, expert_parallel=4)
    L, d, f = 32, 4096, 14336
    assert e.layout.devices == 4
    one = estimate_inference(spec, "h200", 8, 256, 32)
    assert e.weights_bytes == one.weights_bytes - L * 6 * 3 * d * f * 2  # 2 of the 8 experts on each device
    assert e.kv_cache_bytes == one.kv_cache_bytes // 4  # 2 of the 8 sequences on each device


def test_a_plan_that_does_not_fit_has_no_timings_and_names_a_remedy(run_cli):
    import json

    code, out, err = run_cli("inference", "llama-2-70b", "--gpu", "h100", "-p", "512", "-g", "64", "--format", "json")
    (obj,) = json.loads(out)
    assert code == 1 and obj["fits"] is False
    assert [obj[k] for k in ("prefill_seconds", "decode_seconds_per_token", "tokens_per_second")] == [None] * 3
    # q8_0 (8.5 bits a weight) fits the 72 GiB of vLLM's fraction but not what its reserve leaves; fp8 does
    assert obj["suggestions"] == ["--tp 2", "--weights fp8"]
    assert estimate_inference(archspec.preset("llama-2-70b"), "h100", 1, 512, 64, tensor_parallel=2).fits
    assert estimate_inference(archspec.preset("llama-2-70b"), "h100", 1, 512, 64, dtype="fp8").fits
    assert not estimate_inference(archspec.preset("llama-2-70b"), "h100", 1, 512, 64, dtype="q8_0").fits
    assert estimate_inference(archspec.preset("llama-2-70b"), "h100", 1, 512, 64, dtype="q8_0", engine="none").fits
    usable = human_bytes(obj["capacity_bytes"])
    assert (
        "short" not in err and f"more than {usable} (80 GiB less the vllm reserve)" in err and "--tp 2 would fit" in err
    )


def test_quantised_weights_leave_the_cache_in_bf16():
    e = estimate_inference(archspec.preset("llama-2-7b"), "h100", 1, 100, 10, dtype="q4_k_m")
    assert e.kv_dtype == "bf16"
    assert e.kv_cache_bytes == estimate_inference(archspec.preset("llama-2-7b"), "h100", 1, 100, 10).kv_cache_bytes


@pytest.mark.parametrize(
    "argv, message",
    [
        (["llama-2-7b", "--tp", "3"], "tensor_parallel=3 does not divide n_heads=32"),
        (["llama-3-8b", "--tp", "16"], "does not divide n_kv_heads=8"),
        (["mixtral-8x7b", "--ep", "3"], "expert_parallel=3 does not divide mlp.experts=8"),
        (["llama-2-7b", "--ep", "2"], "has no routed experts"),
        (["llama-2-7b", "--experts", "mxfp4"], "has no routed experts"),
        (["llama-2-7b", "--pp", "33"], "more stages than llama-2-7b has layers"),
        (["llama-2-7b", "--tp", "0"], "must be greater than 0"),
        (["llama-2-7b", "--weights", "q3_k"], "unknown --weights format 'q3_k'"),
        (["llama-2-7b", "--experts", "fp4"], "invalid choice: 'fp4'"),
        (["llama-2-7b", "--kv-dtype", "nf4"], "invalid choice: 'nf4'"),
        (["llama-2-7b", "--dtype", "bf16", "--weights", "fp8"], "give one of them"),
    ],
)
def test_bad_layouts_and_formats_are_refused_by_name(run_cli, argv, message):
    code, out, err = run_cli("inference", *argv, "--gpu", "h100", "-p", "8", "-g", "8")
    assert code == 2 and message in err and "Traceback" not in err and err.count("\n") == 1


def test_a_layout_needs_an_interconnect_figure(run_cli):
    code, _, err = run_cli("inference", "llama-2-7b", "--gpu", "tpu-v4", "--tp", "2", "-p", "8", "-g", "8")
    assert code == 2 and "tpu-v4 has no interconnect bandwidth" in err


def test_decode_cpu_benchmark_counts_the_reference_models_parameters_and_cache():
    """benchmarks/decode_cpu.py's roofline bytes (archspec) against the reference model's own: the
    bytes of its parameters and the mean of cache_bytes before each decode step (no timing)."""
    import sys
    from fractions import Fraction
    from pathlib import Path

    torch = pytest.importorskip("torch")
    sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
    from decode_cpu import Decoder, decode_bytes

    from archspec import ModelSpec
    from archspec.reference import build, count_total

    spec = ModelSpec(name="toy", vocab_size=61, d_model=32, n_heads=4, max_positions=24, decoder_layers=2)
    model = build(spec, device="cpu", dtype=torch.float32).eval()
    prompt, steps = 5, 7
    step = Decoder(model, spec, prompt)
    for _ in range(steps):
        step()
    weights, kv = decode_bytes(spec, prompt, steps)
    assert weights == count_total(model) * 4 == sum(p.numel() * p.element_size() for p in model.parameters())
    assert kv == Fraction(sum(step.seen), steps)  # exact: the mean over the steps
    assert step.seen[0] == 2 * 2 * prompt * 32 * 4  # 2 layers, K and V, prompt tokens, d wide, fp32
