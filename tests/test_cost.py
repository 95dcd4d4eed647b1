"""What a plan costs at the user's price of a device-hour (archspec.plan.cost), recomputed by hand from the
documented formula and the times archspec prints; and the collectives' latency in the decode bound
(archspec.plan.collectives), recomputed from the layer count of the released config and the latency table."""

import json
from fractions import Fraction

import pytest

import archspec
from archspec.core.errors import SpecError
from archspec.count.flops import count_flops, training_cost
from archspec.plan.collectives import LINKS
from archspec.plan.cost import exact_price
from archspec.plan.hardware import ACCELERATORS
from archspec.plan.inference import estimate_inference

# meta-llama/Llama-2-7b-hf config.json: "num_hidden_layers": 32, "hidden_size": 4096
LLAMA2_7B_LAYERS, LLAMA2_7B_D = 32, 4096
# mistralai/Mixtral-8x7B-v0.1 config.json: "num_hidden_layers": 32, "num_local_experts": 8 (every layer MoE)
MIXTRAL_MOE_LAYERS = 32


def inference_json(run_cli, *argv):
    code, out, err = run_cli("inference", *argv, "--format", "json")
    assert code == 0, err
    (obj,) = json.loads(out)
    return obj


def test_cost_per_million_tokens_is_the_devices_price_over_the_printed_throughput(run_cli):
    price, B, P, G = 2.49, 4, 1000, 200
    o = inference_json(run_cli, "llama-2-7b", "--gpu", "h100", "--tp", "2", "-b", str(B), "-p", str(P), "-g", str(G),
                       "--price-per-hour", str(price))  # fmt: skip
    hourly = 2 * price  # two devices
    assert o["price_per_hour"] == price and o["cost_per_hour"] == pytest.approx(hourly, rel=1e-15)
    # a decode step makes one token for each of the B sequences; the prefill reads B x P prompt tokens
    assert o["cost_per_million_generated"] == pytest.approx(hourly / 3600 * o["decode_seconds_per_token"] / B * 1e6,
                                                            rel=1e-12)  # fmt: skip
    assert o["cost_per_million_prefilled"] == pytest.approx(hourly / 3600 * o["prefill_seconds"] / (B * P) * 1e6,
                                                            rel=1e-12)  # fmt: skip
    # the two together pay for the whole request, as long as it takes
    whole = o["cost_per_million_generated"] * B * G / 1e6 + o["cost_per_million_prefilled"] * B * P / 1e6
    assert whole == pytest.approx(hourly * o["total_seconds"] / 3600, rel=1e-12)


def test_the_price_is_the_users_alone():
    e = estimate_inference(archspec.preset("gpt2"), "h100")
    assert e.price_per_hour is None and e.cost is None
    assert "price_per_hour" not in e.to_dict() and "cost_per_million_generated" not in e.to_dict()
    assert all(a.price_per_hour is None for a in ACCELERATORS.values())


def test_a_price_in_the_accelerator_file_prices_every_command(tmp_path, run_cli):
    gpu = tmp_path / "rented.toml"
    gpu.write_text('name = "rented"\nmemory_gib = 80\nbandwidth_gbs = 3350\nbf16_tflops = 989\nprice_per_hour = 1.75\n')
    o = inference_json(run_cli, "gpt2", "--gpu", str(gpu))
    assert o["price_per_hour"] == 1.75
    assert o["cost_per_million_generated"] == pytest.approx(1.75 / 3600 * o["decode_seconds_per_token"] * 1e6,
                                                            rel=1e-12)  # fmt: skip
    assert inference_json(run_cli, "gpt2", "--gpu", str(gpu), "--price-per-hour", "3")["price_per_hour"] == 3
    code, out, _ = run_cli("flops", "gpt2", "--tokens", "1e9", "--gpu", str(gpu), "--format", "json")
    assert code == 0 and json.loads(out)[0]["price_per_hour"] == 1.75


def test_a_training_run_costs_its_device_hours_at_the_price(run_cli):
    code, out, err = run_cli("flops", "gpt3-175b", "--tokens", "300e9", "--gpu", "h100", "--gpus", "1024", "--mfu",
                             "0.4", "--price-per-hour", "2.5", "--format", "json")  # fmt: skip
    assert code == 0, err
    (o,) = json.loads(out)
    assert o["cost"] == pytest.approx(2.5 * 1024 * o["time_seconds"] / 3600, rel=1e-12)
    # device-hours = training FLOPs / (H100's dense bf16 989 TFLOP/s x MFU) / 3600, whatever the device count
    assert o["device_hours"] == pytest.approx(o["training_total"] / (989e12 * 0.4) / 3600, rel=1e-12)
    _, fewer, _ = run_cli("flops", "gpt3-175b", "--tokens", "300e9", "--gpu", "h100", "--gpus", "256",
                          "--price-per-hour", "2.5", "--format", "json")  # fmt: skip
    assert json.loads(fewer)[0]["cost"] == o["cost"]


def test_training_cost_is_exact_on_exact_inputs():
    f = count_flops(archspec.preset("gpt2"), 1, 1024)
    c = training_cost(f, 10**9, gpus=8, peak_flops=10**15, mfu=Fraction(1, 2), price_per_hour=Fraction(3, 2))
    # the nearest float to the exact figure: no rounding on the way
    assert c.cost == float(Fraction(c.training_total, 10**15 // 2) / 3600 * Fraction(3, 2))


def test_fit_prices_each_row_as_inference_times_it(run_cli):
    code, out, err = run_cli("fit", "llama-2-7b", "--gpu", "h100", "--seq-len", "2048", "--batch", "2",
                             "--price-per-hour", "3", "--format", "json")  # fmt: skip
    assert code == 0, err
    rows = {o["dtype"]: o for o in json.loads(out)}
    bf16 = rows["bf16"]
    assert bf16["devices"] == 1 and bf16["price_per_hour"] == 3
    o = inference_json(run_cli, "llama-2-7b", "--gpu", "h100", "-b", "2", "-p", "2047", "-g", "1")
    assert bf16["cost_per_million_generated"] == pytest.approx(3 / 3600 * o["decode_seconds_per_token"] / 2 * 1e6,
                                                               rel=1e-12)  # fmt: skip
    assert bf16["cost_per_million_prefilled"] == pytest.approx(3 / 3600 * o["prefill_seconds"] / (2 * 2047) * 1e6,
                                                               rel=1e-12)  # fmt: skip
    code, out, _ = run_cli("fit", "llama-2-7b", "--gpu", "h100", "--weights", "bf16", "--price-per-hour", "3")
    assert "per M generated" in out and "at 3 (--price-per-hour) a device-hour" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (("inference", "gpt2", "--gpu", "h100", "--price-per-hour", "-1"), "must be greater than 0"),
        (("inference", "gpt2", "--gpu", "h100", "--price-per-hour", "0"), "must be greater than 0"),
        (("inference", "gpt2", "--gpu", "h100", "--price-per-hour", "cheap"), "'cheap' is not a number"),
        (("fit", "gpt2", "--price-per-hour", "2"), "give exactly one --gpu"),
        (("fit", "gpt2", "--gpu", "h100", "--task", "training", "--price-per-hour", "2"), "--task inference"),
        (("flops", "gpt2", "--tokens", "1e9", "--price-per-hour", "2"), "give --tokens D and --gpu NAME"),
        (("flops", "gpt2", "--price-per-hour", "2"), "give --tokens D and --gpu NAME"),
    ],
    ids=[
        "negative",
        "zero",
        "not-a-number",
        "fit-without-one-gpu",
        "fit-training",
        "flops-without-gpu",
        "flops-without-tokens",
    ],  # fmt: skip
)
def test_a_bad_price_is_one_line_and_exit_2(run_cli, argv, message):
    code, out, err = run_cli(*argv)
    assert code == 2 and out == ""
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("price", [0, -2.5, float("nan"), float("inf"), "2.5", True, [2.5]])
def test_a_bad_price_is_a_spec_error_in_the_api(price):
    with pytest.raises(SpecError, match="price_per_hour"):
        exact_price(price)
    with pytest.raises(SpecError, match="price_per_hour"):
        estimate_inference(archspec.preset("gpt2"), "h100", price_per_hour=price)


def test_a_price_needs_a_training_time_in_the_api():
    with pytest.raises(SpecError, match="price_per_hour prices the training time"):
        training_cost(count_flops(archspec.preset("gpt2"), 1, 1024), 10**9, price_per_hour=2)


def test_a_typed_price_is_exact():
    assert exact_price(2.49) == Fraction(249, 100) and exact_price(3) == 3


# ---------------------------------------------------------------- the collectives' latency


def test_tensor_parallel_decode_pays_two_all_reduce_latencies_per_layer():
    e = estimate_inference(archspec.preset("llama-2-7b"), "h100", 1, 512, 64, tensor_parallel=8)
    latency = 2 * LLAMA2_7B_LAYERS * 2.3e-6  # NVLink 4: 2.3 µs per all-reduce at 8 GPUs (NVIDIA/nccl#1940)
    assert e.communication_latency_seconds_per_token == pytest.approx(latency, rel=1e-12)
    ring = 2 * LLAMA2_7B_LAYERS * 2 * 7 / 8 * LLAMA2_7B_D * 2 / 450e9  # 2 (t-1)/t of a bf16 row, 450 GB/s
    assert e.communication_seconds_per_token == pytest.approx(ring + latency, rel=1e-12)
    assert "64 all-reduces x 2.3 µs (https://github.com/NVIDIA/nccl/issues/1940)" in " ".join(e.assumptions)


def test_expert_parallel_decode_pays_a_dispatch_and_a_combine_per_moe_layer():
    e = estimate_inference(archspec.preset("mixtral-8x7b"), "h100", 8, 256, 32, expert_parallel=4)
    latency = 2 * MIXTRAL_MOE_LAYERS * 3.7e-6  # NVLink 4: 3.7 µs a point-to-point send (NVIDIA/nccl#1984)
    assert e.communication_latency_seconds_per_token == pytest.approx(latency, rel=1e-12)


def test_an_interconnect_without_a_published_latency_says_so():
    e = estimate_inference(archspec.preset("llama-2-7b"), "a100", 1, 512, 64, tensor_parallel=2)
    assert e.communication_latency_seconds_per_token == 0
    assert "no published all-reduce latency for NVLink 3 (Ampere): not counted" in " ".join(e.assumptions)
    one = estimate_inference(archspec.preset("llama-2-7b"), "h100", 1, 512, 64)
    assert one.communication_latency_seconds_per_token == 0 == one.communication_seconds_per_token


def test_every_accelerator_names_a_link_and_every_figure_has_its_source():
    assert {a.link for a in ACCELERATORS.values()} <= set(LINKS)
    for link in LINKS.values():
        for us, source in ((link.all_reduce_us, link.all_reduce_source), (link.all_to_all_us, link.all_to_all_source)):
            assert source.startswith("https://") if us is not None else "not counted" in source


def test_an_unknown_link_in_an_accelerator_file_is_refused(tmp_path, run_cli):
    gpu = tmp_path / "mine.toml"
    gpu.write_text('name = "mine"\nmemory_gib = 80\nbandwidth_gbs = 3350\nbf16_tflops = 989\nlink = "nvlink9"\n')
    code, _, err = run_cli("hardware", "--gpu", str(gpu))
    assert code == 2 and "unknown link 'nvlink9'" in err and err.count("\n") == 1


def test_the_decode_output_names_what_the_bound_leaves_out(run_cli):
    _, dense, _ = run_cli("inference", "llama-2-7b", "--gpu", "h100")
    _, moe, _ = run_cli("inference", "mixtral-8x7b", "--gpu", "h200")
    assert "lower bound" in dense and "kernel efficiency" in dense and "routing skew" not in dense
    assert "routing skew" in moe
    assert "routing skew" in " ".join(inference_json(run_cli, "mixtral-8x7b", "--gpu", "h200")["decode_leaves_out"])
