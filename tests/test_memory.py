"""Memory: weights against the reference model's tensors, the KV cache against the tensors its
attention produces, activations against Korthikanti et al.'s published formulas."""

import math

import pytest

import archspec
from archspec import ModelSpec
from archspec.core.vocab import RECOMPUTE
from archspec.memory import activation_bytes_per_layer, estimate_memory, korthikanti_bytes_per_layer, kv_cache_bytes

torch = pytest.importorskip("torch")
from archspec.reference import build, cache_bytes  # noqa: E402

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16, "fp8": torch.float8_e4m3fn}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["gpt2", pytest.param("transformer-base", marks=pytest.mark.slow),
                                  pytest.param("gpt3-175b", marks=pytest.mark.slow)])  # fmt: skip
def test_weights_equal_the_reference_models_tensors(name, dtype):
    spec = archspec.preset(name)
    model = build(spec, device="meta", dtype=DTYPES[dtype])
    measured = sum(p.numel() * p.element_size() for p in model.parameters())
    assert estimate_memory(spec, dtype=dtype).weights_bytes == measured


@pytest.mark.parametrize(
    "spec, dtype",
    [
        (ModelSpec(name="gqa", vocab_size=50, d_model=64, decoder_layers=3, n_heads=8, n_kv_heads=2, max_positions=32,
                   d_value=12), "fp32"),
        (ModelSpec(name="mha", vocab_size=50, d_model=64, decoder_layers=2, n_heads=4, max_positions=32), "bf16"),
        (ModelSpec(name="encdec", vocab_size=50, d_model=64, encoder_layers=2, decoder_layers=3, n_heads=4,
                   n_kv_heads=2, max_positions=32, position="sinusoidal"), "fp32"),
    ],
    ids=["gqa-dvalue", "mha-bf16", "encoder-decoder"],
)  # fmt: skip
def test_kv_cache_equals_the_tensors_attention_produces(spec, dtype):
    model = build(spec, dtype=DTYPES[dtype]).eval()
    B, T, S = 3, 9, 14
    cache = model.new_cache()
    with torch.no_grad():
        if spec.kind == "encoder-decoder":
            memory = model.encode(torch.randint(0, 50, (B, S)))
            model.decode(torch.randint(0, 50, (B, T)), memory, cache)
        else:
            model(torch.randint(0, 50, (B, T)), cache=cache)
    src = S if spec.kind == "encoder-decoder" else None
    assert kv_cache_bytes(spec, B, T, dtype, src) == cache_bytes(cache)
    assert estimate_memory(spec, B, T, dtype, src_len=src).kv_cache_bytes == cache_bytes(cache)


def test_activations_follow_korthikanti_2022():
    """Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer Models"), section
    4, per GPT layer with 16-bit activations and dropout: s·b·h·(34 + 5·a·s/h) bytes, 34·s·b·h with
    selective recomputation, 2·s·b·h with full. The reference model's exact figure (held to the
    measurement in tests/test_memory_measured.py) against the paper's, at GPT-3 175B's shape with the
    scores stored (eager attention, as the paper assumes), each difference named."""
    from fractions import Fraction

    spec = archspec.preset("gpt3-175b")
    s, b, h, a = 2048, 2, 12288, 96  # the paper's GPT-3 175B: s = 2048, h = 12288, a = 96
    paper = {"none": s * b * h * (34 + Fraction(5 * a * s, h)), "selective": 34 * s * b * h, "full": 2 * s * b * h}
    assert {r: korthikanti_bytes_per_layer(spec, b, s, r) for r in RECOMPUTE} == paper

    def exact(recompute):
        return sum(activation_bytes_per_layer(spec, b, s, None, "decoder", "bf16", recompute, dropout=True,
                                              attention="eager").values())  # fmt: skip

    norm_statistics = 2 * 2 * 2 * s * b  # two LayerNorms' mean and 1/std per token in 16 bits: not in the paper
    assert exact("full") == paper["full"]  # each layer's input
    assert exact("selective") == paper["selective"] + norm_statistics
    # per score the paper counts 5 bytes (the softmax output, the dropout mask, the dropout output); the
    # reference model keeps 4 (the probabilities in 16 bits and two one-byte dropout masks)
    assert exact("none") == paper["none"] - a * s * s * b + norm_statistics


def test_tensor_parallel_with_sequence_parallel_divides_activations():
    spec = archspec.preset("gpt3-175b")
    one = estimate_memory(spec, 1, 2048)
    eight = estimate_memory(spec, 1, 2048, tensor_parallel=8, data_parallel=1)
    assert eight.activations_bytes == -(-one.activations_bytes // 8)


def test_mixed_precision_adamw_is_16_bytes_per_parameter_and_18_with_fp32_gradients():
    """Rajbhandari et al. 2020 (ZeRO), 3.1: 2Ψ + 2Ψ + 12Ψ; with fp32 gradients 2Ψ + 4Ψ + 12Ψ."""
    spec = archspec.preset("gpt2")
    N = 124_439_808
    m = estimate_memory(spec)
    assert (m.weights_bytes, m.gradients_bytes, m.optimizer_bytes) == (2 * N, 2 * N, 12 * N)
    m18 = estimate_memory(spec, fp32_grads=True)
    assert m18.weights_bytes + m18.gradients_bytes + m18.optimizer_bytes == 18 * N
    fp32 = estimate_memory(spec, dtype="fp32")
    assert (fp32.weights_bytes, fp32.gradients_bytes, fp32.optimizer_bytes) == (4 * N, 4 * N, 8 * N)


@pytest.mark.parametrize("stage, divided", [(0, ()), (1, ("optimizer",)), (2, ("optimizer", "gradients")),
                                             (3, ("optimizer", "gradients", "weights"))])  # fmt: skip
def test_zero_stages_divide_what_they_divide(stage, divided):
    spec = archspec.preset("gpt2")
    N, dp = 124_439_808, 4
    m = estimate_memory(spec, zero_stage=stage, data_parallel=dp)
    # the largest rank holds ceil(rows / 4) rows of every tensor (FSDP2's dim-0 shards), written out
    from archspec.describe.blocks import describe, tensors

    shard = sum(-(-t.shape[0] // dp) * (math.prod(t.shape) // t.shape[0]) for t in tensors(describe(spec)))
    assert N // dp < shard < N // dp + 200 * 768  # a little more than a quarter: the first rank's ceil
    full = {"weights": 2 * N, "gradients": 2 * N, "optimizer": 12 * N}
    per = {"weights": 2, "gradients": 2, "optimizer": 12}
    got = {"weights": m.weights_bytes, "gradients": m.gradients_bytes, "optimizer": m.optimizer_bytes}
    assert got == {k: (per[k] * shard if k in divided else v) for k, v in full.items()}


def test_int4_weights_are_the_awq_layout_of_the_blocks_matrices():
    # AWQ / GPTQ: per group of 128 weights 64 bytes of nibbles, an fp16 scale and a 4-bit zero (2.5 bytes);
    # GPT-2's blocks' matrices (qkv, out, up, down) only, everything else stays bf16
    d, L, total = 768, 12, 124_439_808
    matrices = L * (d * 3 * d + d * d + 2 * d * 4 * d)
    assert estimate_memory(archspec.preset("gpt2"), dtype="int4").inference_weights_bytes == (
        matrices // 128 * (64 + 2.5) + (total - matrices) * 2
    )


def test_memory_json_keys(run_json):
    (obj,) = run_json("memory", "gpt2", "--batch", "2", "--seq-len", "512")
    for key in ("name", "weights_bytes", "gradients_bytes", "optimizer_bytes", "activations_bytes", "kv_cache_bytes"):
        assert isinstance(obj[key], int if key != "name" else str)
    assert obj["kv_cache_bytes"] == 12 * 12 * (64 + 64) * 512 * 2 * 2


def test_memory_per_gpu_under_zero_3(run_json):
    (obj,) = run_json("memory", "gpt3-175b", "--gpus", "1024", "--zero", "3", "--gpu", "h100")
    assert 2 * 174_604_259_328 // 1024 <= obj["weights_bytes"] <= 1.001 * 2 * 174_604_259_328 / 1024
    assert obj["accelerator_memory_bytes"] == 80 * 2**30
    assert obj["fits_training"] == (obj["training_total_bytes"] <= 80 * 2**30)
    (eager,) = run_json("memory", "gpt3-175b", "--gpus", "1024", "--zero", "3", "--gpu", "h100", "--attention", "eager")
    assert eager["fits_training"] is False  # the stored probabilities: 96 heads x 2048^2 per layer


# ---------------------------------------------------------------- storage formats, written from their layouts

# bytes per block, values per block, from each format's published layout (not from archspec's table)
BLOCKS = {
    "q8_0": (2 + 32, 32),  # ggml block_q8_0: ggml_half d; int8_t qs[32]
    "q6_k": (128 + 64 + 16 + 2, 256),  # block_q6_K: ql[QK_K/2], qh[QK_K/4], int8 scales[QK_K/16], ggml_half d
    "q5_k": (2 + 2 + 12 + 32 + 128, 256),  # block_q5_K: d, dmin, scales[K_SCALE_SIZE], qh[QK_K/8], qs[QK_K/2]
    "q4_k": (2 + 2 + 12 + 128, 256),  # block_q4_K: d, dmin, scales[K_SCALE_SIZE], qs[QK_K/2]
    "mxfp4": (16 + 1, 32),  # OCP MX v1.0: 32 FP4 E2M1 elements and one E8M0 scale
    "int4": (64 + 2 + 0.5, 128),  # AWQ/GPTQ group of 128: nibbles, fp16 scale, 4-bit zero
}


@pytest.mark.parametrize("fmt, key", [("q8_0", "q8_0"), ("q6_k", "q6_k"), ("mxfp4", "mxfp4"), ("int4", "int4"),
                                      ("q5_k_m", "q5_k"), ("q4_k_m", "q4_k")])  # fmt: skip
def test_bits_per_value_are_the_published_block_layouts(fmt, key):
    from archspec.memory import STORAGE

    nbytes, values = BLOCKS[key]
    assert STORAGE[fmt].bits == pytest.approx(8 * nbytes / values, abs=0)


def test_nf4_bits_are_qloras_double_quantisation():
    from fractions import Fraction

    from archspec.memory import STORAGE

    # QLoRA section 3: 4-bit values; 8/64 + 32/(64 * 256) = 0.127 bits of constants per parameter
    assert STORAGE["nf4"].bits == 4 + Fraction(8, 64) + Fraction(32, 64 * 256)
    assert float(STORAGE["nf4"].bits - 4) == pytest.approx(0.127, abs=5e-4)


def use_more_bits(i: int, n: int) -> bool:  # llama.cpp src/llama-quant.cpp, as written there
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


@pytest.mark.parametrize("n", [1, 7, 12, 32, 61, 80, 126])
@pytest.mark.parametrize("pattern", [["a"], ["a", "b"], ["a", "a", "b"], ["b", "a", "a", "a", "a", "a"]])
def test_use_more_bits_count_equals_the_rule_layer_by_layer(n, pattern):
    from archspec.describe.blocks import describe
    from archspec.memory import more_bits_layers
    from archspec.spec.layers import layer_kinds

    if len(pattern) > n:
        pytest.skip("the pattern is longer than the stack")
    spec = archspec.ModelSpec(name="t", vocab_size=64, d_model=16, decoder_layers=n, n_heads=2, max_positions=8,
                              kinds={k: {} for k in pattern}, layers={"pattern": pattern})  # fmt: skip
    per_layer = [k for k, _ in layer_kinds(spec, n)]
    for part in (p for p in describe(spec) if p.layered and p.component == "mlp"):
        for lo, hi in ((0, n), (min(3, n), max(min(3, n), n - 1))):
            rule = sum(use_more_bits(i, n) for i in range(lo, hi) if per_layer[i] == part.kind)
            assert more_bits_layers(part, lo, hi) == rule


def test_q4_k_m_gguf_of_llama_2_7b_tensor_by_tensor():
    from archspec.memory import weights_bytes

    # llama.cpp Q4_K_M: Q4_K everywhere, Q6_K for output.weight and for attn_v and ffn_down of the
    # use_more_bits layers; 1-D tensors (norms) F32
    L, d, f, V = 32, 4096, 11008, 32000
    q4, q6 = BLOCKS["q4_k"][0] / 256, BLOCKS["q6_k"][0] / 256
    total = V * d * q4 + V * d * q6 + (2 * L + 1) * d * 4  # token_embd Q4_K, output Q6_K, norms
    for i in range(L):
        more = use_more_bits(i, L)
        total += 3 * d * d * q4 + d * d * (q6 if more else q4)  # q, k, o; v
        total += 2 * d * f * q4 + f * d * (q6 if more else q4)  # gate, up; down
    assert weights_bytes(archspec.preset("llama-2-7b"), "q4_k_m") == total


def test_experts_format_applies_to_routed_experts_alone():
    from archspec.memory import stored_weights_bytes

    spec = archspec.preset("mixtral-8x7b")
    L, d, f, E = 32, 4096, 14336, 8
    experts = L * E * 3 * d * f
    bf16 = stored_weights_bytes(spec, "bf16")
    assert bf16 == 2 * archspec.count_params(spec).total
    assert stored_weights_bytes(spec, "bf16", "mxfp4") == bf16 - 2 * experts + experts // 32 * 17


def test_tensor_and_pipeline_parallel_inference_weights_are_the_fullest_device():
    from archspec.memory import stored_weights_bytes

    spec = archspec.preset("llama-2-7b")
    L, d, f, V = 32, 4096, 11008, 32000
    layer = 4 * d * d // 2 + 3 * d * f // 2 + 2 * d  # tp 2 halves every matrix; norms stay whole
    assert stored_weights_bytes(spec, "bf16", tensor_parallel=2) == 2 * (L * layer + V * d // 2 * 2 + d)
    # pp 2: 16 layers a stage; the first holds the embedding, the last the final norm and the head
    per_layer = 4 * d * d + 3 * d * f + 2 * d
    assert stored_weights_bytes(spec, "bf16", pipeline_parallel=2) == 2 * (16 * per_layer + V * d + d)


def test_offload_moves_optimizer_states_to_host():
    spec = archspec.preset("gpt2")
    on, off = estimate_memory(spec), estimate_memory(spec, offload="optimizer")
    assert off.host_bytes == on.optimizer_bytes == 12 * 124_439_808
    assert off.training_total_bytes == on.training_total_bytes - on.optimizer_bytes


def test_global_batch_sets_accumulation_steps():
    m = estimate_memory(archspec.preset("gpt2"), batch=4, global_batch=64, data_parallel=2)
    assert (m.batch, m.accumulation_steps) == (4, 8)
    assert m.activations_bytes == estimate_memory(archspec.preset("gpt2"), batch=4).activations_bytes


def test_max_micro_batch_is_the_largest_that_fits():
    from archspec.memory import max_micro_batch

    spec = archspec.preset("gpt2")
    cap = 40 * 2**30
    b = max_micro_batch(spec, cap, seq_len=1024)
    assert b > 1
    assert (
        estimate_memory(spec, b, 1024).training_total_bytes
        <= cap
        < estimate_memory(spec, b + 1, 1024).training_total_bytes
    )


def test_what_autograd_keeps_is_a_rule_set_chosen_by_name(monkeypatch):
    """The rule sets of archspec.memory.saved are chosen by name: torch-cpu's is the default, a set with one
    rule replaced (as a GPU's fused attention would be) changes that part's records alone, and a name no set
    has is refused in one line naming the known ones."""
    from archspec.core.errors import SpecError
    from archspec.memory.saved import RULE_SETS, TORCH_CPU

    spec = archspec.preset("llama-3.1-8b")
    args = (spec, 2, 256, None, "decoder", "bf16", "none")
    cpu = activation_bytes_per_layer(*args)
    assert activation_bytes_per_layer(*args, rules="torch-cpu") == cpu and cpu["attention"] > 0
    monkeypatch.setitem(RULE_SETS, "no-attention", {**TORCH_CPU, "attention": lambda spec, part: ()})
    other = activation_bytes_per_layer(*args, rules="no-attention")
    assert other == {k: v for k, v in cpu.items() if k not in ("attention", "attention_scores", "positions")}
    with pytest.raises(SpecError, match=r"^unknown rule set 'cuda' for saved tensors; use torch-cpu, no-attention$"):
        activation_bytes_per_layer(*args, rules="cuda")
