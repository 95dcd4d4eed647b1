"""The serving engine's reserve (archspec.memory.runtime) and pages (archspec.memory.paging): each rule held
to figures typed here from the engines' code and the model's released config, not from archspec's
description; and the refusals of bad settings."""

from __future__ import annotations

import pytest

import archspec
from archspec.core.errors import SpecError
from archspec.memory import stage_slots
from archspec.memory.paging import LayerCache, Paging, paging
from archspec.memory.runtime import reserve, sglang_fraction
from archspec.plan.hardware import ACCELERATORS

GiB = 2**30
H100 = ACCELERATORS["h100"]


def test_vllm_reserve_is_its_fraction_the_larger_of_chunk_and_sampler_and_the_context_share():
    """Llama 3 8B (hidden 4096, intermediate 14336, 32 heads and 8 key/value heads of 128, vocab 128256) on
    an H100 under `vllm serve`'s defaults there (8,192 tokens, 1,024 sequences)."""
    r = reserve(archspec.preset("llama-3-8b"), H100)
    forward = 8192 * (2 * 4096 + 3 * 14336 + 4096) * 2  # residual + normed input, gate, up, product, down
    sampler = 1024 * 128256 * 28
    assert [i.bytes for i in r.items] == [80 * GiB - int(80 * GiB * 0.9), max(forward, sampler), int(80 * GiB * 0.032)]
    assert r.usable_bytes == 80 * GiB - sum(i.bytes for i in r.items) and r.page_tokens == 16
    # below 70 GiB (and on any A100) `vllm serve` profiles 2,048 tokens and 256 sequences
    a100 = reserve(archspec.preset("llama-3-8b"), ACCELERATORS["a100"])
    assert a100.max_batched_tokens == 2048 and a100.items[1].bytes == 256 * 128256 * 28
    # tensor parallelism splits the chunk's activations, not the sampler's rows
    chunk = reserve(archspec.preset("llama-3-8b"), H100, tp=4, max_batched_tokens=65536, max_num_seqs=1)
    assert chunk.items[1].bytes == 65536 * (2 * 4096 + (3 * 14336 + 4096) // 4) * 2


def test_sglang_fraction_is_its_own_formula():
    """server_args.py: reserved MB = 512 + 1.5 x chunked_prefill_size (8192 on 80 GB) + 2 x cuda_graph_max_bs
    (256 below TP 4, 512 from it) + tp/8 x 1024, at least 10 GB above 60 GB; f = round((mem - reserved) / mem, 3)."""
    mem = 80 * 1024
    assert sglang_fraction(80 * GiB, 1, 8192) == round((mem - (512 + 8192 * 1.5 + 256 * 2 + 1024 / 8)) / mem, 3)
    assert sglang_fraction(80 * GiB, 4, 8192) == round((mem - (512 + 8192 * 1.5 + 512 * 2 + 512)) / mem, 3)
    small = 24 * 1024  # a 24 GB card: 2,048-token chunks, 24 graphs below TP 4, no 10 GB floor
    assert sglang_fraction(24 * GiB, 1, 2048) == round((small - (512 + 2048 * 1.5 + 24 * 2 + 128)) / small, 3)
    r = reserve(archspec.preset("qwen3-8b"), H100, "sglang", 1)
    assert r.fraction == sglang_fraction(80 * GiB, 1, 8192) and r.items[1].bytes == 0  # in the share it leaves


def test_vllm_pages_blocks_of_16_tokens_sglang_one_and_llama_cpp_contexts_of_256_cells():
    """Llama 3 8B, bf16: 32 layers x 8 heads x 128 x (key + value) x 2 bytes = 131,072 bytes a token."""
    spec = archspec.preset("llama-3-8b")
    slots = stage_slots(spec, 1)[0]
    per = 32 * 8 * 128 * 2 * 2
    assert paging(spec, slots, "bf16", "vllm").sequence_bytes(17) == 32 * per
    assert paging(spec, slots, "bf16", "sglang").sequence_bytes(17) == 17 * per
    assert paging(spec, slots, "bf16", "llama.cpp").sequence_bytes(17) == 256 * per
    assert paging(spec, slots, "bf16", "vllm").capacity_tokens(10 * GiB) == 10 * GiB // (16 * per) * 16
    # two tensor-parallel devices hold 4 of the 8 heads each; sixteen hold one each (vLLM replicates them)
    assert paging(spec, slots, "bf16", "vllm", 2).sequence_bytes(16) == 16 * per // 2
    assert paging(spec, slots, "bf16", "vllm", 16).sequence_bytes(16) == 16 * per // 8


def test_vllm_groups_a_hybrid_models_layers_and_pads_the_last_group():
    """Gemma 3 27B (62 layers, 5 local of window 1024 : 1 global, 16 key/value heads of 128): 52 sliding and
    10 full layers; vLLM's group size is the fewest layers of a kind, 10, so the sliding layers make 6 groups
    (the last padded with 8 empty layers) and the full ones 1: 7 groups sharing pages of 16 x 8,192 bytes."""
    spec = archspec.preset("gemma-3-27b")
    pages = paging(spec, stage_slots(spec, 1)[0], "bf16", "vllm")
    page, group = 16 * 16 * 128 * 2 * 2, 10
    full, sliding = -(-4096 // 16), min(-(-4096 // 16), -(-1023 // 16) + 1)
    assert pages.sequence_bytes(4096) == (1 * full + 6 * sliding) * page * group
    free = 20 * GiB
    assert pages.capacity_tokens(free) == free // (page * group) // 7 * 16
    assert pages.max_sequences(free, 4096) == free // (page * group) // (full + 6 * sliding)


def test_vllm_grows_the_attention_block_until_its_page_holds_a_state_and_pads_the_state():
    """A hybrid of 36 recurrent layers (a state of 2,000,000 bytes each) and 12 attention layers (2,048 bytes a
    token): the attention block grows to 16 x ceil(2,000,000 / (16 x 2,048)) = 992 tokens, a page of 2,031,616
    bytes, the state padded to it; groups of 12 layers: 3 of states, 1 of attention."""
    pages = Paging("vllm", (LayerCache(36, state_bytes=2_000_000), LayerCache(12, token_bytes=2048)))
    page = 992 * 2048
    assert pages.sequence_bytes(5000) == (3 * 1 + 1 * -(-5000 // 992)) * page * 12
    assert pages.capacity_tokens(10 * GiB) == 10 * GiB // (page * 12) // 4 * 992


def test_the_reserve_lowers_inference_max_batch_and_says_why(run_cli):
    from archspec.plan.inference import estimate_inference

    spec = archspec.preset("llama-3-8b")
    e = estimate_inference(spec, "h100", 1, 1000, 24)
    r = reserve(spec, H100)
    assert e.capacity_bytes == r.usable_bytes and e.reserve == r
    blocks = -(-1024 // 16) * 16 * 131072  # a sequence of 1,024 tokens in blocks of 16
    assert e.max_batch == (r.usable_bytes - e.weights_bytes) // blocks
    code, out, _ = run_cli("inference", "llama-3-8b", "--gpu", "h100", "-p", "1000", "-g", "24")
    assert code == 0 and "reserve per device (vllm):" in out
    for item in ("engine's memory fraction: 8.00 GiB", "prefill activations:", "CUDA context and allocator slack:"):
        assert item in out


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--gpu-memory-utilization", "1.5"], "must be in (0, 1]"),
        (["--gpu-memory-utilization", "0"], "must be in (0, 1]"),
        (["--engine", "tgi"], "invalid choice: 'tgi'"),
        (["--context-reserve", "-1"], "must be at least 0 GiB"),
        (["--context-reserve", "100"], "context reserve must be a whole number of bytes from 0 to the device's"),
        (["--max-batched-tokens", "0"], "must be greater than 0"),
    ],
)
def test_bad_reserve_settings_are_one_line_and_exit_2(run_cli, argv, words):
    for command in (["inference", "gpt2", "--gpu", "h100"], ["fit", "gpt2", "--gpu", "h100"],
                    ["memory", "gpt2", "--gpu", "h100"]):  # fmt: skip
        code, _, err = run_cli(*command, *argv)
        assert code == 2 and words in err and err.count("\n") == 1 and "Traceback" not in err, (command, err)


def test_bad_reserve_settings_in_the_api_are_spec_errors(run_cli):
    spec = archspec.preset("gpt2")
    for kwargs, words in [({"fraction": 0}, "must be in (0, 1]"), ({"fraction": 1.01}, "must be in (0, 1]"),
                          ({"engine_name": "tgi"}, "unknown engine 'tgi'"),
                          ({"max_batched_tokens": 0}, "positive whole number"),
                          ({"context_bytes": -1}, "context reserve")]:  # fmt: skip
        with pytest.raises(SpecError, match=words.replace("(", r"\(").replace("]", r"\]")):
            reserve(spec, H100, **kwargs)
    code, _, err = run_cli("memory", "gpt2", "--engine", "sglang")  # a reserve with no device to reserve on
    assert code == 2 and "--engine needs --gpu" in err and err.count("\n") == 1
