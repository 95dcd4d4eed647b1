"""FLOPs: the analytic count against torch's FlopCounterMode and fvcore on the reference model,
and training cost against GPT-3's Table D.1."""

import math

import pytest
from matrix import fast_only

import archspec
from archspec import ModelSpec
from archspec.count.flops import PF_DAY, count_flops, training_cost

torch = pytest.importorskip("torch")
from archspec.reference import build  # noqa: E402
from archspec.reference.measure import example_inputs, fvcore_macs, measure_flops  # noqa: E402

BASE = dict(name="v", vocab_size=97, d_model=64, n_heads=8, max_positions=48)
VARIANTS = {
    "gqa": ModelSpec(**BASE, decoder_layers=2, n_kv_heads=2),
    "mqa-rotary": ModelSpec(**BASE, decoder_layers=2, n_kv_heads=1, position="rotary", norm="rmsnorm", bias=False),
    "d_head-ne-d_model/n_heads": ModelSpec(**{**BASE, "d_model": 70}, decoder_layers=2, d_head=10),
    "d_value-ne-d_head": ModelSpec(**BASE, decoder_layers=2, d_value=24),
    "sinusoidal": ModelSpec(**BASE, decoder_layers=2, position="sinusoidal"),
    "swiglu-untied": ModelSpec(**BASE, decoder_layers=2, activation="swiglu", d_ff=172, tie_embeddings=False),
    "encoder-only-bert": ModelSpec(**BASE, encoder_layers=2, norm_position="post", type_vocab_size=2,
                                   embedding_norm=True, pooler=True),
    "enc2-dec3": ModelSpec(**BASE, encoder_layers=2, decoder_layers=3, norm_position="post", position="sinusoidal"),
    "enc3-dec1-gqa-dvalue": ModelSpec(**BASE, encoder_layers=3, decoder_layers=1, n_kv_heads=4, d_value=12),
}  # fmt: skip


def measured(spec, batch, T, S=None, backward=False):
    model = build(spec, device="meta")
    return measure_flops(model, example_inputs(spec, batch, T, S), backward=backward)


@pytest.mark.parametrize("spec", VARIANTS.values(), ids=VARIANTS.keys())
@pytest.mark.parametrize("batch, T, S", [(1, 48, None), (3, 17, 29)])
def test_variant_forward_flops_equal_flopcountermode(spec, batch, T, S):
    S = S if spec.kind == "encoder-decoder" else None
    total, by_component = measured(spec, batch, T, S)
    analytic = count_flops(spec, batch, T, S)
    assert analytic.forward == total
    assert all(by_component.get(c, 0) == v for c, v in analytic.components.items())


@pytest.mark.parametrize(
    "spec",
    fast_only(
        [archspec.preset("gpt2"), archspec.preset("transformer-base"), VARIANTS["mqa-rotary"],
         VARIANTS["enc3-dec1-gqa-dvalue"]],
        {"mqa-rotary", "enc3-dec1"},  # the toys; the presets' backward passes take seconds
        ids=["gpt2", "transformer-base", "mqa-rotary", "enc3-dec1"],
    ),
)  # fmt: skip
def test_forward_plus_backward_is_three_forwards(spec):
    """Every matmul's backward computes two matmuls of its size (input and weight gradients); the first
    layer's input gradient is needed too, because the embeddings it reads are trained."""
    forward, _ = measured(spec, 2, 32, 24 if spec.kind == "encoder-decoder" else None)
    both, _ = measured(spec, 2, 32, 24 if spec.kind == "encoder-decoder" else None, backward=True)
    analytic = count_flops(spec, 2, 32, 24 if spec.kind == "encoder-decoder" else None)
    assert both == 3 * forward == analytic.training


def test_causal_half_counts_the_lower_triangle():
    spec = VARIANTS["gqa"]
    T = 40
    kept = int(torch.ones(T, T).tril().sum())  # the pairs a causal mask keeps, counted by torch
    full, half = count_flops(spec, 1, T), count_flops(spec, 1, T, causal_half=True)
    per_pair = 2 * spec.n_heads * (spec.d_head + spec.d_value) * spec.decoder_layers
    assert full.forward - half.forward == per_pair * (T * T - kept)


@pytest.mark.parametrize(
    "spec",
    [VARIANTS["gqa"], VARIANTS["d_value-ne-d_head"], VARIANTS["enc2-dec3"], VARIANTS["encoder-only-bert"]],
    ids=["gqa", "d_value", "enc2-dec3", "bert"],
)
def test_fvcore_agrees_in_macs_for_the_matmul_ops(spec):
    model = build(spec).eval()
    S = 13 if spec.kind == "encoder-decoder" else None
    macs, by_op = fvcore_macs(model, example_inputs(spec, 2, 11, S, device="cpu"))
    assert macs == count_flops(spec, 2, 11, S).macs
    assert by_op["scaled_dot_product_attention"] > 0


def test_fvcore_without_a_handler_silently_drops_attention():
    spec = VARIANTS["gqa"]
    model = build(spec).eval()
    inputs = example_inputs(spec, 2, 11, device="cpu")
    with_handler, ops = fvcore_macs(model, inputs)
    without, _ = fvcore_macs(model, inputs, attention_handler=False)
    analytic = count_flops(spec, 2, 11)
    scores_and_values = (analytic.operations["attention.scores"] + analytic.operations["attention.values"]) // 2
    assert with_handler - without == scores_and_values == ops["scaled_dot_product_attention"]


def test_attention_grows_quadratically_with_sequence_length():
    spec = archspec.preset("gpt2")
    a, b = count_flops(spec, 1, 256), count_flops(spec, 1, 512)
    assert b.operations["attention.scores"] == 4 * a.operations["attention.scores"]
    assert b.operations["mlp.up"] == 2 * a.operations["mlp.up"]


# ---------------------------------------------------------------- GPT-3 Table D.1

# Brown et al. 2020, Table D.1: params (millions), total train compute (flops), PF-days; 300B tokens.
TABLE_D1 = {
    "gpt3-small": (125, 2.25e20, 2.60),
    "gpt3-medium": (356, 6.41e20, 7.42),
    "gpt3-large": (760, 1.37e21, 15.8),
    "gpt3-xl": (1320, 2.38e21, 27.5),
    "gpt3-2.7b": (2650, 4.77e21, 55.2),
    "gpt3-6.7b": (6660, 1.20e22, 139),
    "gpt3-13b": (12850, 2.31e22, 268),
    "gpt3-175b": (174600, 3.14e23, 3640),
}


def round_sig(x: float, digits: int = 3) -> float:
    return round(float(x), digits - 1 - math.floor(math.log10(abs(x))))


@pytest.mark.parametrize("name", TABLE_D1)
def test_table_d1_rows_come_out(name):
    """Table D.1 computes 6 N D with N as its own params column prints it; that column is the exact
    count rounded, and 6 N D with the exact count lies within 0.6% (the rounding of N)."""
    params_m, flops, pf_days = TABLE_D1[name]
    spec = archspec.preset(name)
    cost = training_cost(count_flops(spec), 300 * 10**9)
    n_exact = cost.params
    assert round_sig(n_exact / 1e6, len(str(params_m).rstrip("0"))) == params_m  # the params column
    n_printed = params_m * 10**6
    assert round_sig(6 * n_printed * 300e9) == flops
    assert round_sig(6 * n_printed * 300e9 / PF_DAY) == pf_days
    assert abs(cost.training_total_6nd - flops) / flops < 0.006
    assert abs(cost.training_total_6nd / PF_DAY - pf_days) / pf_days < 0.006


def test_gpt3_175b_training_compute_reproduces_3_14e23_and_3640_pf_days(run_json):
    (obj,) = run_json("flops", "gpt3-175b", "--tokens", "300e9")
    assert obj["training_total_6nd"] == 6 * 174_604_259_328 * 300 * 10**9
    assert round_sig(obj["training_total_6nd"]) == 3.14e23 and round_sig(obj["pf_days"]) == 3640
    assert obj["training_total"] > obj["training_total_6nd"]  # the exact count adds attention and the head
    assert obj["pf_days_exact"] == obj["training_total"] / 8.64e19


def test_training_time_on_accelerators(run_json):
    (obj,) = run_json("flops", "gpt3-175b", "--tokens", "300e9", "--gpu", "h100", "--gpus", "1024", "--mfu", "0.4")
    assert obj["time_seconds"] == pytest.approx(obj["training_total"] / (1024 * 989e12 * 0.4))


def test_flops_json_keys(run_json):
    (obj,) = run_json("flops", "gpt2", "--batch", "4", "--seq-len", "512")
    assert list(obj)[:3] == ["name", "batch", "seq_len"]
    assert obj["forward"] == count_flops(archspec.preset("gpt2"), 4, 512).forward
    assert obj["training"] == 3 * obj["forward"] and obj["forward_per_token"] * 4 * 512 == obj["forward"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["flops", "gpt2", "--batch", "0"], "must be greater than 0"),
        (["flops", "gpt2", "--batch", "-2"], "must be greater than 0"),
        (["flops", "gpt2", "--seq-len", "2048"], "longer than the learned position table (max_positions=1024)"),
        (["flops", "gpt2", "--tokens", "lots"], "is not a number"),
        (["flops", "gpt2", "--tokens", "0"], "must be greater than 0"),
        (["flops", "gpt2", "--seq-len", "0"], "must be greater than 0"),
        (["memory", "gpt2", "--batch", "-1"], "must be greater than 0"),
        (["memory", "gpt2", "--seq-len", "1025"], "longer than the learned position table"),
        (["flops", "transformer-base", "--src-len", "0"], "must be greater than 0"),
        (["flops", "gpt2", "--tokens", "1e9", "--mfu", "1.5"], "must be in (0, 1]"),
        (["flops", "gpt2", "--tokens", "1e9", "--mfu", "0"], "must be greater than 0"),
        (["flops", "gpt2", "--tokens", "1e9", "--gpu", "tpu9"], "unknown accelerator 'tpu9'"),
        (["flops", "gpt2", "--gpu", "h100"], "needs --tokens"),
        (["flops", "gpt2", "--src-len", "12"], "src_len applies to encoder-decoder models"),
        (["memory", "gpt2", "--dtype", "fp7"], "invalid choice: 'fp7'"),
        (["memory", "gpt2", "--optimizer", "lion"], "invalid choice: 'lion'"),
        (["memory", "gpt2", "--gpus", "12", "--tp", "8"], "not divisible"),
        (["compare", "gpt2", "--seq-len", "0"], "must be greater than 0"),
    ],
)
def test_bad_planning_input_is_one_line_and_exit_2(run_cli, argv, message):
    code, out, err = run_cli(*argv)
    assert code == 2 and out == "" and message in err and err.count("\n") == 1
