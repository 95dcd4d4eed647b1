"""A measured CPU decode step against archspec's roofline for it, with this machine's bandwidth.

    python benchmarks/decode_cpu.py [--preset gpt2-medium] [--prompt 256] [--steps 32] [--threads 1]

1. This machine's memory read bandwidth: the sum of a 1 GiB fp32 tensor (far beyond the caches),
   bytes read / seconds; its fp32 matmul rate: a 2048 x 2048 x 2048 product.
2. The reference model (archspec.reference.build, fp32, on the CPU) decodes at batch 1 with its
   key/value cache (model(token, cache=cache)) after a prompt of --prompt tokens: one decode step
   per timing, one warm-up step first. One torch thread by default: on a shared, loaded machine two
   threads spend most of a step waiting for each other.
3. archspec's roofline for the same steps: archspec.plan.inference.estimate_inference with an accelerator
   made of the measured bandwidth and matmul rate, so the prediction is the weights read plus the
   mean cache read per step (decode_bytes_per_token) over the measured bandwidth.

The three probes run in turn (benchmarks/timing.py), so drift of the machine hits them alike; the
figures are medians. The arithmetic intensity of a step (archspec.count_flops, FLOPs per byte) is
printed beside the machine's balance (matmul FLOP/s per byte/s): far below it, the step is bound by
memory. Exits 1 when the measured step is faster than the bound allows (physically impossible: the
bytes would be undercounted; --floor, default 0.9, leaves room for the noise of two medians taken on
a shared machine, as the sum of a tensor and a matrix-vector product stream at nearly the same rate)
or more than --slack (default 3) times slower.
"""

from __future__ import annotations

import argparse
import os
import sys
from fractions import Fraction

import torch
from results import run  # writes the figures into RESULTS.md
from timing import interleaved  # this folder is on sys.path

import archspec
from archspec.plan.hardware import Accelerator
from archspec.plan.inference import estimate_inference
from archspec.reference import build, cache_bytes, count_total

DTYPE = "fp32"
RAM_GIB = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30  # capacity: the RAM


def cpu_accelerator(bandwidth: float, flops: float) -> Accelerator:
    """This machine as archspec's roofline sees it: measured bandwidth (bytes/s) and fp32 FLOP/s."""
    return Accelerator(
        name="cpu", title="this CPU (measured)", bf16_tflops=None, fp16_tflops=None, fp32_tflops=flops / 1e12,
        memory_gib=RAM_GIB, source="measured by benchmarks/decode_cpu.py", bandwidth_gbs=bandwidth / 1e9,
        bandwidth_source="measured by benchmarks/decode_cpu.py",
    )  # fmt: skip


def decode_bytes(spec, prompt: int, steps: int) -> tuple[Fraction, Fraction]:
    """archspec's (weights, mean cache) bytes a decode step reads over `steps` steps at batch 1 whose
    caches hold prompt, prompt + 1, ..., prompt + steps - 1 tokens before each step."""
    e = estimate_inference(spec, cpu_accelerator(1e9, 1e12), 1, prompt, steps, dtype=DTYPE)
    return e.decode_weights_bytes, e.decode_kv_bytes_per_token


def step_flops(spec, cached: int) -> int:
    """Forward FLOPs of one decode step with `cached` tokens before it (causal: the new row of scores)."""
    return (archspec.count_flops(spec, 1, cached + 1, causal_half=True).forward
            - archspec.count_flops(spec, 1, cached, causal_half=True).forward)  # fmt: skip


class Decoder:
    """Incremental decoding at batch 1: each call feeds one token and records the cache bytes it found."""

    def __init__(self, model, spec, prompt: int):
        self.model, self.cache = model, model.new_cache()
        g = torch.Generator().manual_seed(0)
        with torch.inference_mode():
            logits = model(torch.randint(0, spec.vocab_size, (1, prompt), generator=g), cache=self.cache)
        self.token = logits[:, -1:].argmax(-1)
        self.seen: list[int] = []  # cache bytes before each step

    def __call__(self) -> None:
        self.seen.append(cache_bytes(self.cache))
        with torch.inference_mode():
            self.token = self.model(self.token, cache=self.cache)[:, -1:].argmax(-1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="gpt2-medium")
    ap.add_argument("--prompt", type=int, default=256)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--slack", type=float, default=3.0)
    ap.add_argument(
        "--floor",
        type=float,
        default=0.9,
        help="lowest measured/predicted ratio accepted (default 0.9: the noise of two medians)",
    )
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1: steadiest on a shared machine)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    spec = archspec.preset(args.preset)
    torch.manual_seed(0)

    big = torch.ones(2**28)  # 1 GiB of fp32
    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    model = build(spec, device="cpu", dtype=torch.float32).eval()
    params = count_total(model)
    step = Decoder(model, spec, args.prompt)
    # one warm-up call each, then `steps` timed decode steps with caches of prompt + 1 ... prompt + steps
    t_sum, t_step, t_mm = interleaved(args.steps, lambda: big.sum().item(), step, lambda: (a @ b).sum().item())
    bandwidth, flops = big.numel() * big.element_size() / t_sum, 2 * 2048**3 / t_mm

    e = estimate_inference(spec, cpu_accelerator(bandwidth, flops), 1, args.prompt + 1, args.steps, dtype=DTYPE)
    weights, kv = e.decode_weights_bytes, e.decode_kv_bytes_per_token
    measured_kv = Fraction(sum(step.seen[1:]), args.steps)  # the timed steps' caches (the first was warm-up)
    predicted = e.decode_seconds_per_token
    intensity = step_flops(spec, args.prompt + args.steps // 2) / float(weights + kv)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.preset} fp32, "
          f"{params:,} parameters, prompt {args.prompt}, {args.steps} decode steps at batch 1")  # fmt: skip
    print(f"machine: read bandwidth {bandwidth / 1e9:.2f} GB/s (sum of 1 GiB), fp32 matmul {flops / 1e9:.1f} GFLOP/s; "
          f"balance {flops / bandwidth:.1f} FLOP/byte")  # fmt: skip
    print(f"bytes per step: weights {float(weights) / 1e6:.1f} MB (model's parameters {params * 4 / 1e6:.1f} MB), "
          f"mean cache {float(kv) / 1e6:.2f} MB (model's own cache {float(measured_kv) / 1e6:.2f} MB)")  # fmt: skip
    print(f"arithmetic intensity {intensity:.2f} FLOP/byte, {flops / bandwidth / intensity:.0f}x below the balance: "
          "memory-bound")  # fmt: skip
    ratio = t_step / predicted
    print(f"decode step: measured {t_step * 1e3:.1f} ms, predicted {predicted * 1e3:.1f} ms "
          f"(bytes / measured bandwidth), ratio {ratio:.2f} (allowed {args.floor:g} to {args.slack:g})")  # fmt: skip
    if ratio < args.floor:
        print("FAIL: faster than the bandwidth bound allows; the bytes are undercounted", file=sys.stderr)
        return 1
    if ratio > args.slack:
        print(f"FAIL: more than {args.slack:g}x slower than the bandwidth bound", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(run("decode_cpu.py", main))
