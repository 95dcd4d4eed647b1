"""stored_weights_bytes computes the bytes of the stages distinct_stages picks; every stage of a pipeline
holds what one of those holds. Checked against the straightforward count: each stage's slots, every
slot's bytes computed afresh, the largest sum."""

import math
from collections import Counter

import pytest

import archspec
from archspec.memory.parallel import distinct_stages, slot_bytes, stage_slots, stored_weights_bytes

PRESETS = archspec.presets()


def per_stage(spec, weights, tp, pp) -> list[int]:
    tied = spec.head.kind != "none" and spec.tie_embeddings
    return [math.ceil(sum(slot_bytes(s, weights, None, tp, 1, tied) for s in stage)) for stage in stage_slots(spec, pp)]


def degrees(spec) -> list[int]:
    n = spec.n_layers
    return sorted({d for d in (1, 2, 3, 5, 7, 8, 13, n // 3, n // 2, n - 1, n) if 1 <= d <= n})


@pytest.mark.parametrize("name", PRESETS)
def test_stage_groups_match_every_stage(name):
    spec = archspec.preset(name)
    for pp in degrees(spec):
        full = per_stage(spec, "bf16", 1, pp)
        assert stored_weights_bytes(spec, "bf16", pipeline_parallel=pp) == max(full), (name, pp)
        for more_bits in (True, False):  # bf16 picks no layers for more bits: the fewer stages stand for all too
            picked = distinct_stages(spec, pp, more_bits)
            assert picked[0][0] == 0 and picked[-1][0] == pp - 1
            # every stage's bytes are some picked stage's, as many times as the picked stages stand for
            grouped = Counter()
            for s, c in picked:
                grouped[full[s]] += c
            assert Counter(full) == grouped, (name, pp, more_bits)


@pytest.mark.parametrize("name", ["llama-3-8b", "gemma-3-1b", "qwen3-30b-a3b", "deepseek-v3", "nemotron-h-56b", "gpt2"])
@pytest.mark.parametrize("weights", ["q4_k_m", "fp8_block", "deepseek-fp8"])
def test_stage_groups_in_stored_formats(name, weights):
    from archspec.core.errors import SpecError

    spec = archspec.preset(name)
    for pp in degrees(spec):
        for tp in (1, 2):
            try:
                got = stored_weights_bytes(spec, weights, tensor_parallel=tp, pipeline_parallel=pp)
            except SpecError:  # a layout the model's roles do not carry
                continue
            full = per_stage(spec, weights, tp, pp)
            assert got == max(full), (name, weights, tp, pp)
            grouped = Counter()  # every stage stood for by a picked one of the same bytes, more bits and all
            for s, c in distinct_stages(spec, pp):
                grouped[full[s]] += c
            assert Counter(full) == grouped, (name, weights, tp, pp)


def test_stage_groups_of_a_deep_stack():
    # 1,000 layers of a local/global pattern over 997 and 250 stages: uneven splits, stretches of like stages
    spec = archspec.preset("gemma-3-1b")
    spec = spec.model_copy(update={"decoder_layers": 1000}) if hasattr(spec, "model_copy") else spec
    for pp in (997, 250, 333):
        for weights in ("q4_k_m", "int4"):
            assert stored_weights_bytes(spec, weights, pipeline_parallel=pp) == max(per_stage(spec, weights, 1, pp))
        assert len(distinct_stages(spec, pp, more_bits=False)) <= len(distinct_stages(spec, pp))
        full, grouped = per_stage(spec, "q4_k_m", 1, pp), Counter()
        for s, c in distinct_stages(spec, pp):
            grouped[full[s]] += c
        assert Counter(full) == grouped, pp
        assert len(distinct_stages(spec, pp)) < pp
        assert sum(c for _, c in distinct_stages(spec, pp)) == pp


@pytest.mark.parametrize("name", ["llama-3-8b", "gemma-3-1b", "qwen3-30b-a3b", "nemotron-h-56b", "gpt2", "deepseek-v3"])
def test_inference_over_stage_groups_matches_every_stage(name, monkeypatch):
    """estimate_inference over the stages distinct_stages picks, each counted for the stages it stands for,
    against the same estimate over every stage."""
    import dataclasses

    import archspec.memory as memory
    from archspec.plan.inference import estimate_inference

    spec = archspec.preset(name)
    n = spec.n_layers
    for pp in {p for p in (2, 3, 7, n // 3, n // 2) if p > 1 and -(-n // p) * (p - 1) < n}:  # no empty stage
        grouped = estimate_inference(spec, "h100", 3, 100, 20, "bf16", pipeline_parallel=pp)
        with monkeypatch.context() as m:
            m.setattr(memory, "distinct_stages", lambda spec, p: [(s, 1) for s in range(p)])
            every = estimate_inference(spec, "h100", 3, 100, 20, "bf16", pipeline_parallel=pp)
        assert dataclasses.asdict(grouped) == dataclasses.asdict(every), (name, pp)
