"""Activation memory proven by measurement: archspec's activations_bytes equals the bytes autograd
saves in one training step of the reference model (real tensors on the CPU, each storage once,
weights excluded, the loss included), for both attention modes, every recomputation mode, fp32 and
bf16 — the issue's target was 2%; the description is exact."""

import pytest

torch = pytest.importorskip("torch")

from matrix import fast_corner  # noqa: E402

from archspec import ModelSpec  # noqa: E402
from archspec.core.vocab import ATTENTION, RECOMPUTE  # noqa: E402
from archspec.memory import estimate_memory  # noqa: E402
from archspec.reference.memory_measure import measure_activations  # noqa: E402

GPT2_WIDTH = dict(name="gpt2-width", vocab_size=2048, d_model=768, n_heads=12, max_positions=128)
LLAMA_STYLE = dict(name="llama-style", vocab_size=2048, d_model=512, n_heads=8, n_kv_heads=2, d_ff=1376,
                   max_positions=128, position="rotary", norm="rmsnorm", activation="swiglu", bias=False,
                   tie_embeddings=False)  # fmt: skip


@pytest.mark.parametrize("layers", [2, pytest.param(4, marks=pytest.mark.slow)])  # seconds each, at these widths
@pytest.mark.parametrize("base", [GPT2_WIDTH, pytest.param(LLAMA_STYLE, marks=pytest.mark.slow)],
                         ids=["gpt2-width", "llama-style"])  # fmt: skip
@pytest.mark.parametrize("attention", ATTENTION)
def test_activations_equal_the_saved_tensors_in_fp32(base, layers, attention):
    spec = ModelSpec(**base, decoder_layers=layers)
    measured = measure_activations(spec, 2, 64, "fp32", attention)
    planned = estimate_memory(spec, 2, 64, "fp32", attention=attention)
    assert planned.activations_bytes == measured.total_bytes


SMALL = dict(vocab_size=300, d_model=48, n_heads=4, max_positions=32)
VARIANTS = {
    "gpt2": ModelSpec(name="a", **SMALL, decoder_layers=2),
    "llama-gqa": ModelSpec(name="b", **{**SMALL, "n_heads": 6}, n_kv_heads=2, decoder_layers=2, position="rotary",
                           norm="rmsnorm", activation="swiglu", bias=False),
    "post-relu-encdec": ModelSpec(name="c", **SMALL, encoder_layers=2, decoder_layers=2, norm_position="post",
                                  activation="relu", position="sinusoidal"),
    "bert": ModelSpec(name="d", **SMALL, encoder_layers=2, norm_position="post", type_vocab_size=2,
                      embedding_norm=True, pooler=True, head="none"),
    "partial-rotary": ModelSpec(name="e", **SMALL, decoder_layers=2, position={"kind": "rotary", "fraction": 0.5}),
    "d_value": ModelSpec(name="f", **SMALL, decoder_layers=2, d_value=8, activation="geglu"),
}  # fmt: skip


@pytest.mark.parametrize(
    "spec, dtype, attention, recompute",
    fast_corner(VARIANTS.values(), ["fp32", "bf16"], ATTENTION, RECOMPUTE, corner=("bf16", "flash", "none"),
                ids=VARIANTS.keys()),
)  # fmt: skip
def test_activations_equal_the_saved_tensors_in_every_mode(spec, dtype, attention, recompute):
    S = 7 if spec.kind == "encoder-decoder" else None
    measured = measure_activations(spec, 2, 9, dtype, attention, recompute, src_len=S)
    planned = estimate_memory(spec, 2, 9, dtype, recompute=recompute, src_len=S, attention=attention)
    assert planned.activations_bytes == measured.total_bytes


def test_eager_attention_stores_the_probabilities():
    spec = VARIANTS["gpt2"]
    flash = estimate_memory(spec, 2, 16, "fp32", attention="flash")
    eager = estimate_memory(spec, 2, 16, "fp32", attention="eager")
    probabilities = 2 * 2 * 4 * 16 * 16 * 4  # layers x batch x heads x T x T x 4 bytes
    copies = 2 * 2 * 16 * (48 + 48 + 48) * 4  # q, k, v head-major; the fused output is not kept
    fused = 2 * 2 * 16 * (3 * 48) * 4 + 2 * 2 * 16 * 4 * 4  # the fused q/k/v output and the log-sum-exp
    assert eager.activations_bytes - flash.activations_bytes == probabilities + copies - fused


def test_verify_memory_renders_planned_against_measured(run_cli):
    code, out, err = run_cli("verify", "gpt2", "--set", "decoder_layers=1", "--memory", "--recompute", "selective",
                             "--format", "json")  # fmt: skip
    import json

    (report,) = json.loads(out)
    assert code == 0 and report["ok"] and report["recompute"] == "selective"
    assert set(report["checks"]) == {"weights fp32", "weights bf16", "kv cache fp32", "activations flash",
                                     "activations eager"}  # fmt: skip
    assert all(c["planned"] == c["measured"] for c in report["checks"].values())


def test_verify_memory_exits_1_when_the_plan_drifts(run_cli, monkeypatch):
    """A rule set that forgets one saved tensor (the MLP's input) is caught by the measurement."""
    from archspec.memory.saved import TORCH_CPU

    real = TORCH_CPU["mlp"]
    monkeypatch.setitem(TORCH_CPU, "mlp", lambda spec, part: real(spec, part)[1:])
    code, out, _ = run_cli("verify", "gpt2", "--set", "decoder_layers=1", "--memory")
    assert code == 1 and "MISMATCH" in out


@pytest.mark.slow  # GPT-3 175B planned and refused: seconds
def test_verify_memory_of_a_model_too_large_to_train_here_says_so(run_cli):
    code, out, _ = run_cli("verify", "gpt3-175b", "--memory")
    assert code == 0 and "skipped: gpt3-175b is too large to train on this CPU" in out.replace("\n", " ")
