"""fit's layout search and its early refusals, against the search without them (archspec.plan.fit.unbounded:
every tensor-parallel degree searched from one device up by halving, no bound, no refusal from the whole
model or from the largest layout). The bounds may only save work: every answer, a refusal included, is the
one the plain search gives, on a range of sizes that crosses the threshold where no number of devices
holds the model. The threshold is brought within reach by a small MAX_DEVICES and small devices, so that
the plain search stays cheap; one case runs at the real MAX_DEVICES on a 10^15-parameter spec.

How long the searches take is measured by benchmarks/slow_paths.py, not asserted here.
"""

from __future__ import annotations

import dataclasses

import pytest

import archspec
from archspec.memory.storage import DTYPE_BYTES
from archspec.plan import fit as fitting
from archspec.plan.fit import fit, unbounded
from archspec.plan.hardware import ACCELERATORS


def small(gib: int):
    """An H100 of `gib` GiB (inference runs with engine none: no reserve)."""
    return dataclasses.replace(ACCELERATORS["h100"], name=f"h100-{gib}gib", memory_gib=gib)


CASES = [  # (preset, task, weights, GiB a device): dense, a local/global pattern, experts, a hybrid; k-quants, a
    # layout's edges; devices that hold a layer or two
    ("gpt2", "inference", "bf16", 1),
    ("gpt2", "inference", "q4_k_m", 1),
    ("gemma-3-1b", "inference", "int4", 1),
    ("mixtral-8x7b", "inference", "fp8", 1),
    ("jamba-1.5-large", "inference", "q6_k", 8),
    ("llama-3-8b", "inference", "meta-fp8", 1),
    ("gpt2", "training", "bf16", 1),
    ("gemma-3-1b", "training", "fp32", 8),
    ("gpt2", "lora", "nf4", 1),
]


def both(spec, acc, weights, task, **kw):
    """(the bounded search's fit, the plain search's), each with a memo of its own."""
    bounded = fit(spec, acc, weights, task, memo={}, **kw)
    with unbounded():
        plain = fit(spec, acc, weights, task, memo={}, **kw)
    return bounded, plain


def layers_around(spec, acc, weights, task, **kw) -> list[int]:
    """Depths from the shortest the layer pattern allows to one that no number of devices holds, doubling."""
    out, n = [], max(2, len(spec.layers.prefix) + len(spec.layers.pattern)) if spec.layers else 2
    while n < 2**30:
        out.append(n)
        if fit(spec.replace(decoder_layers=n), acc, weights, task, **kw).devices is None:
            break
        n *= 2
    return out


@pytest.mark.parametrize(("name", "task", "weights", "gib"), CASES)
def test_the_bounds_answer_as_the_plain_search_on_both_sides_of_the_threshold(monkeypatch, name, task, weights, gib):
    monkeypatch.setattr(fitting, "MAX_DEVICES", 64)
    spec, acc = archspec.preset(name), small(gib)
    kw = dict(batch=2, seq_len=256) | (dict(engine="none") if task == "inference" else {})
    depths = layers_around(spec, acc, weights, task, **kw)
    last = depths[-1]
    # around the threshold: every depth between the last that fits and the first that does not, in steps
    depths += list(range(last // 2 + 1, last, max(1, last // 32)))
    answers = set()
    for n in depths:
        bounded, plain = both(spec.replace(decoder_layers=n), acc, weights, task, **kw)
        assert bounded == plain, (n, bounded.layout, plain.layout)
        answers.add(bounded.devices is None)
    assert answers == {True, False}  # the range holds layouts that fit and plans none holds


@pytest.mark.parametrize("task", ["inference", "training", "lora"])
def test_a_10_to_the_15_parameter_plan_is_answered_as_the_plain_search_answers(task):
    """GPT-3's widths at 98,304 layers and d_model 65,536: 5 x 10^15 parameters. Inference in int4 fits on
    tens of thousands of H100s, in bf16 on none; training and LoRA on none."""
    big = archspec.preset("gpt3-175b").replace(decoder_layers=96 * 1024, d_model=2**16, n_heads=512, d_ff=2**18)
    assert archspec.count_params(big).total > 5 * 10**15
    for weights in ("int4", "bf16") if task == "inference" else ("bf16",) if task == "training" else ("nf4",):
        bounded, plain = both(big, "h100", weights, task, batch=1, seq_len=2048)
        assert bounded == plain
        assert (bounded.devices is not None) == (task == "inference" and weights == "int4")


LAID_OUT = [("gpt2", "bf16"), ("gemma-3-1b", "q4_k_m"), ("mixtral-8x7b", "int8"), ("nemotron-h-56b", "meta-fp8"),
            ("deepseek-v3", "deepseek-fp8")]  # fmt: skip


@pytest.mark.parametrize(("name", "weights"), LAID_OUT)
def test_an_inference_fit_holds_what_estimate_memory_plans_for_its_layout(name, weights):
    """fit reads each layout's weights and cache without estimate_memory's training figures: the same bytes."""
    spec = archspec.preset(name)
    for acc in ("h100", "rtx4090", "v100"):
        f = fit(spec, acc, weights, "inference", 4, 1024)
        if f.devices is None:
            continue
        plan = {"dtype": weights} if weights in DTYPE_BYTES else {"weights": weights}  # stored formats: in bf16
        m = archspec.estimate_memory(spec, 4, 1024, tensor_parallel=f.tensor_parallel,
                                     pipeline_parallel=f.pipeline_parallel, **plan)  # fmt: skip
        assert f.per_device_bytes == m.inference_total_bytes <= f.usable_bytes


def test_the_search_by_layers_a_stage_holds_finds_the_fewest_stages_as_a_scan_does():
    """_fewest_stages: the bytes of p stages are the bytes of ceil(L / ceil(L / p)), flat over many p."""
    from archspec.plan.fit import _fewest_stages

    for layers in (1, 7, 96, 1000, 12345):
        for cap in range(1500, 400_000, 9_973):

            def excess(p, layers=layers, cap=cap):  # 1,000 bytes a layer, 3,000 beside them
                return -(-layers // p) * 1000 + 3000 - cap

            for lo, hi in ((1, layers), (2, max(2, layers // 3)), (layers // 2 or 1, layers)):
                scan = next((p for p in range(lo, hi + 1) if excess(p) <= 0), None)
                assert _fewest_stages(layers, lo, hi, excess) == scan, (layers, cap, lo, hi)


@pytest.mark.parametrize("task", ["inference", "training", "lora"])
def test_a_memo_kept_over_accelerators_and_formats_answers_as_fresh_calls(task):
    """fit keeps the spec's description, its stages' parts and each part's bits in the caller's memo across
    accelerators and formats (as `archspec fit` loops): every answer equals a call with no memo, and a memo
    handed a second spec describes that spec, not the first."""
    from archspec.memory.storage import STORAGE

    formats = tuple(STORAGE) if task == "inference" else fitting.DTYPES[task]
    for name in ("jamba-1.5-large", "gemma-3-1b"):
        spec, memo = archspec.preset(name), {}
        for acc in ("h100", "a100-40gb", "rtx4090"):
            for dtype in formats:
                assert fit(spec, acc, dtype, task, 1, 4096, memo) == fit(spec, acc, dtype, task, 1, 4096)
    first, second, shared = archspec.preset("gemma-3-1b"), archspec.preset("gpt2"), {}
    fit(first, "h100", "bf16", task, 1, 1024, shared)
    assert shared[fitting._DESCRIBED][0] is first
    carried = {fitting._DESCRIBED: shared[fitting._DESCRIBED]}  # what the first spec's description left
    assert fit(second, "h100", "bf16", task, 1, 1024, carried) == fit(second, "h100", "bf16", task, 1, 1024)
    assert carried[fitting._DESCRIBED][0] is second
