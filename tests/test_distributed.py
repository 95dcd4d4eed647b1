"""The reference model across processes: per-rank bytes of a real sharded AdamW step equal the
dim-0 sharding rule derived from the built model's parameter shapes (2 ranks, gloo on the CPU)."""

import math

import pytest

torch = pytest.importorskip("torch")

import archspec  # noqa: E402
from archspec.core.errors import SpecError  # noqa: E402
from archspec.core.vocab import ZERO_STAGES  # noqa: E402
from archspec.reference import build  # noqa: E402
from archspec.reference.distributed import DistributedUnavailable, measure_plans, measure_ranks  # noqa: E402
from archspec.reference.memory_measure import random_batch, training_loss  # noqa: E402
from archspec.reference.model import MLP, CrossAttention, SelfAttention  # noqa: E402

RANKS = 2
FP32 = 4
STEP = 4  # AdamW's step counter: one fp32 scalar per parameter tensor
# GPT-2's width and layout (layernorm, gelu, learned positions, biases, tied head), 2 layers, a small
# vocabulary and an odd one, so that dim-0 chunks are uneven
GPT2_TOY = archspec.preset("gpt2").replace(
    decoder_layers=2, vocab_size=1001, d_model=64, n_heads=4, max_positions=33, d_ff=250
)
# LLaMA's layout (rmsnorm, swiglu, rotary, grouped-query, no biases), untied, with a head bias
LLAMA_TOY = archspec.ModelSpec(
    name="llama-toy", vocab_size=999, d_model=64, decoder_layers=2, n_heads=4, n_kv_heads=2, d_ff=172,
    max_positions=64, position="rotary", norm="rmsnorm", activation="swiglu", bias=False, tie_embeddings=False,
    head={"kind": "lm", "bias": True},
)  # fmt: skip
# (3, 2): tensor parallelism over every rank leaves no data-parallel dimension, so ZeRO 3 is the
# same plan as ZeRO 0 (accepted, and measured to hold the same bytes)
PLANS = [(0, 1), (1, 1), (2, 1), (3, 1), (0, 2), (3, 2)]


def run(spec, plans):
    """All plans in one set of processes: starting them is the slow part."""
    try:
        return dict(zip(plans, measure_plans(spec, RANKS, plans)))
    except DistributedUnavailable as exc:
        pytest.skip(f"cannot run {RANKS} local processes with gloo here: {exc}")


@pytest.fixture(scope="module")
def reports():
    return run(GPT2_TOY, PLANS)


@pytest.fixture(scope="module")
def llama_reports():
    return run(LLAMA_TOY, [(3, 1), (0, 2)])


def single_process_loss(spec) -> float:
    """The loss of rank 0's batch on the unsharded model, in this process."""
    model = build(spec, seed=0)
    inputs, targets = random_batch(spec, 2, 16, None, "cpu", seed=0)
    with torch.no_grad():
        return training_loss(model, inputs, targets).item()


def rows(n: int, ranks: int) -> int:
    """Rows of dim 0 that rank 0 (the largest) holds: torch.chunk's ceil(n / ranks)."""
    return math.ceil(n / ranks)


def dim0_shard(p: torch.Tensor, ranks: int) -> int:
    return rows(p.shape[0], ranks) * (p.numel() // p.shape[0])


def parameters(spec):
    model = build(spec, device="meta")
    return model, list(model.named_parameters())  # unique tensors: the tied head once


def expected_zero(spec, zero: int, ranks: int) -> dict[str, int]:
    """Largest rank's bytes under ZeRO stage `zero`, from the parameter shapes."""
    _, named = parameters(spec)
    full = sum(p.numel() for _, p in named)
    shard = sum(dim0_shard(p, ranks) for _, p in named)
    states = 2 * FP32 * (shard if zero >= 1 else full) + STEP * len(named)
    return {
        "params_bytes": FP32 * (shard if zero >= 3 else full),
        "grads_bytes": FP32 * (shard if zero >= 2 else full),
        "optimizer_bytes": states,
    }


def expected_tp(spec, t: int) -> dict[str, int]:
    """Largest rank's bytes under tensor parallelism t: column-parallel projections split their output
    rows, row-parallel ones their input columns (bias whole), embeddings their vocabulary rows."""
    model, named = parameters(spec)
    column, row = set(), set()
    for m in model.modules():
        if isinstance(m, (SelfAttention, CrossAttention, MLP)):
            for name, lin in m.named_children():
                if name in ("qkv", "q", "kv", "up", "gate"):
                    column.update(id(p) for p in lin.parameters())
                elif name in ("out", "down"):
                    row.add(id(lin.weight))
    column.add(id(model.embed.weight))
    column.update(id(p) for p in model.head.parameters())
    local = 0
    for _, p in named:
        if id(p) in column:
            local += dim0_shard(p, t)
        elif id(p) in row:
            local += p.shape[0] * rows(p.shape[1], t)
        else:
            local += p.numel()
    return {
        "params_bytes": FP32 * local,
        "grads_bytes": FP32 * local,
        "optimizer_bytes": 2 * FP32 * local + STEP * len(named),
    }


@pytest.mark.slow  # starts local processes (torch.distributed), seconds each run
@pytest.mark.parametrize("zero", ZERO_STAGES)
def test_zero_largest_rank_holds_ceil_of_dim0_over_ranks(reports, zero):
    assert reports[(zero, 1)].largest == expected_zero(GPT2_TOY, zero, RANKS)


@pytest.mark.slow  # starts local processes (torch.distributed), seconds each run
def test_fsdp2_pads_every_rank_to_the_largest_parameter_shard(reports):
    """FSDP2 stores each parameter (and gradient) shard padded to ceil(dim0 / N) rows on every rank;
    the optimizer's moments are the unpadded local shard, so rank 1 holds less."""
    per_rank = reports[(3, 1)].per_rank
    assert per_rank[0].params_bytes == per_rank[1].params_bytes
    assert per_rank[0].grads_bytes == per_rank[1].grads_bytes
    _, named = parameters(GPT2_TOY)
    full = sum(p.numel() for _, p in named)
    shard0 = sum(dim0_shard(p, RANKS) for _, p in named)
    assert per_rank[1].optimizer_bytes == 2 * FP32 * (full - shard0) + STEP * len(named)


@pytest.mark.slow  # starts local processes (torch.distributed), seconds each run
def test_tensor_parallel_largest_rank_follows_the_megatron_split(reports):
    assert reports[(0, 2)].largest == expected_tp(GPT2_TOY, RANKS)


@pytest.mark.slow  # starts local processes (torch.distributed), seconds each run
def test_llama_layout_shards_the_same_way(llama_reports):
    """Grouped-query heads, a gated MLP, an untied head with a bias: every gradient as its parameter."""
    assert llama_reports[(3, 1)].largest == expected_zero(LLAMA_TOY, 3, RANKS)
    assert llama_reports[(0, 2)].largest == expected_tp(LLAMA_TOY, RANKS)


@pytest.mark.slow  # starts local processes (torch.distributed), seconds each run
@pytest.mark.parametrize("spec", [GPT2_TOY, LLAMA_TOY], ids=["gpt2", "llama"])
def test_sharded_runs_compute_the_same_loss_as_one_process(reports, llama_reports, spec):
    """Both tensor-parallel ranks see rank 0's batch; FSDP2's rank 0 sees it too."""
    single = single_process_loss(spec)
    runs = reports if spec is GPT2_TOY else llama_reports
    assert runs[(0, 2)].losses == pytest.approx((single, single), abs=1e-5)
    assert runs[(3, 1)].losses[0] == pytest.approx(single, abs=1e-5)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(zero=4), "zero must be one of 0, 1, 2, 3, got 4"),
        (dict(tp=3), "tp=3 must be a positive integer dividing ranks=2"),
        (dict(ranks=4, zero=0, tp=2), r"tp must equal ranks \(4\), not leave 2 data-parallel replicas"),
        (dict(ranks=0), "ranks must be a positive integer"),
    ],
)
def test_bad_plans_are_refused_before_starting_processes(kwargs, message):
    with pytest.raises(SpecError, match=message):
        measure_ranks(GPT2_TOY, **{"ranks": RANKS, **kwargs})


def test_tensor_parallel_needs_whole_heads_per_rank():
    with pytest.raises(SpecError, match="tp=2 must divide n_heads=4 and n_kv_heads=1"):
        measure_ranks(GPT2_TOY.replace(n_kv_heads=1), ranks=2, zero=0, tp=2)


@pytest.mark.skipif(torch.cuda.device_count() < RANKS, reason=f"needs {RANKS} CUDA GPUs and NCCL; none here")
def test_gpu_ranks_in_bf16_hold_fp32_shards_and_peak_above_them():
    """NCCL, FSDP2 with bf16 compute: the resident shards are fp32 as on the CPU; the peak
    (torch.cuda.max_memory_allocated) holds them plus the step's activations and gathered weights."""
    report = measure_ranks(GPT2_TOY, RANKS, zero=3, dtype="bf16", device="cuda", batch=4, seq_len=32)
    assert report.largest == expected_zero(GPT2_TOY, 3, RANKS)
    for r in report.per_rank:
        assert r.peak_bytes > r.params_bytes + r.grads_bytes + r.optimizer_bytes


def test_tensor_parallel_refuses_what_it_does_not_split():
    """ALiBi's per-head biases span every head; a rank holds only its own."""
    with pytest.raises(SpecError, match="tensor parallelism is not implemented here for position kind 'alibi'"):
        measure_ranks(GPT2_TOY.replace(position="alibi"), ranks=2, zero=0, tp=2)


@pytest.mark.slow  # starts local processes (torch.distributed), seconds each run
def test_with_no_data_parallel_dimension_every_zero_stage_holds_the_same_bytes(reports):
    assert reports[(3, 2)].largest == reports[(0, 2)].largest
    assert reports[(3, 2)].largest != reports[(3, 1)].largest  # the two runs did shard differently


@pytest.mark.slow  # starts local processes (torch.distributed), seconds each run
@pytest.mark.parametrize("plan", PLANS, ids=[f"zero{z}-tp{t}" for z, t in PLANS])
def test_the_planner_equals_the_largest_rank_of_a_real_run(reports, plan):
    """archspec memory --gpus 2 --zero S --tp T, fp32 AdamW, against the measured largest rank: weights
    and gradients exactly; optimizer states exactly but for torch's per-tensor step counters (4 bytes
    a tensor, which the planner leaves out: well inside 0.1%)."""
    from archspec.memory import estimate_memory

    zero, tp = plan
    planned = estimate_memory(GPT2_TOY, dtype="fp32", zero_stage=zero, data_parallel=RANKS // tp, tensor_parallel=tp)
    measured = reports[plan].largest
    _, named = parameters(GPT2_TOY)
    assert planned.weights_bytes == measured["params_bytes"]
    assert planned.gradients_bytes == measured["grads_bytes"]
    assert planned.optimizer_bytes + STEP * len(named) == measured["optimizer_bytes"]
    assert abs(planned.optimizer_bytes - measured["optimizer_bytes"]) / measured["optimizer_bytes"] < 1e-3


def test_verify_ranks_without_processes_is_one_line(run_cli, monkeypatch):
    import archspec.reference.distributed as distributed

    def unavailable(*args, **kwargs):
        raise DistributedUnavailable("this build of torch has no gloo backend for CPU processes")

    monkeypatch.setattr(distributed, "measure_ranks", unavailable)
    code, out, err = run_cli("verify", "gpt2", "--set", "decoder_layers=2", "--ranks", "2")
    assert code == 2 and out == "" and err.count("\n") == 1 and "no gloo backend" in err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--ranks", "3", "--tp", "2"], "gpus=3 is not divisible by tensor_parallel=2"),
        (["--ranks", "2", "--zero", "5"], "invalid choice: 5"),
        (["--ranks", "0"], "a positive whole number"),
    ],
)
def test_verify_ranks_refuses_impossible_plans_before_starting(run_cli, argv, message):
    code, out, err = run_cli("verify", "gpt2", "--set", "decoder_layers=2", *argv)
    assert code == 2 and out == "" and err.count("\n") == 1 and message in err


@pytest.mark.slow  # starts local processes (torch.distributed), seconds each run
def test_verify_ranks_with_tensor_parallelism_over_every_rank_takes_the_default_zero_stage(run_cli):
    """--ranks 2 --tp 2 leaves no data-parallel dimension: the default ZeRO stage (3) means what 0 means."""
    import json

    toy = ["--set", "decoder_layers=1", "--set", "d_model=64", "--set", "n_heads=4", "--set", "vocab_size=1001"]
    code, out, err = run_cli("verify", "gpt2", *toy, "--ranks", "2", "--tp", "2", "--format", "json")
    if code == 2 and "cannot run 2 local processes" in err:
        pytest.skip(err)
    assert code == 0 and err == "", err
    (obj,) = json.loads(out)
    assert obj["ok"] and obj["tp"] == 2
    same = archspec.preset("gpt2").replace(decoder_layers=1, d_model=64, n_heads=4, vocab_size=1001)
    assert obj["checks"]["weights"]["measured"] == expected_tp(same, 2)["params_bytes"]
