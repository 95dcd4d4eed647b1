"""Cost follows the layer kinds, not the depth: params, flops, memory (training and the per-rank
parallel plan) and inference of a Gemma-3-shaped heterogeneous spec at 10 and at 10^6 layers, side by
side in one run (medians of interleaved runs, in-process, after a warm-up).

    python benchmarks/depth.py [--runs 9] [--budget 2.0]

Exits 1 when a 10^6-layer plan takes more than `budget` times the 10-layer one.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

from results import run  # writes the figures into RESULTS.md
from timing import interleaved  # this folder is on sys.path

from archspec.count.flops import count_flops
from archspec.count.params import count_params
from archspec.memory import estimate_memory
from archspec.plan.hardware import ACCELERATORS
from archspec.plan.inference import estimate_inference
from archspec.spec.model import ModelSpec


def spec(layers: int) -> ModelSpec:
    return ModelSpec(
        name=f"deep-{layers}", vocab_size=32000, d_model=1024, decoder_layers=layers, n_heads=16, n_kv_heads=4,
        max_positions=8192, position="rotary", norm="rmsnorm", activation="swiglu", bias=False, d_ff=4096,
        kinds={"local": {"attention": {"sliding_window": 512}}, "global": {"position": {"base": 1e6}},
               "moe": {"mlp": {"kind": "moe", "experts": 16, "top_k": 2, "d_expert": 1024}}},
        layers={"pattern": ["local", "local", "moe", "local", "local", "global"]},
    )  # fmt: skip


# an H200 with room for a million layers, so that both plans take the path of a plan that fits
ROOMY = dataclasses.replace(ACCELERATORS["h200"], name="h200-roomy", memory_gib=10**9)

TASKS = {
    "params": lambda s: count_params(s),
    "flops": lambda s: count_flops(s, seq_len=4096),
    "memory (ZeRO-3, tp 2, pp 4)": lambda s: estimate_memory(
        s, seq_len=4096, zero_stage=3, data_parallel=8, tensor_parallel=2, pipeline_parallel=4
    ),  # fmt: skip
    "inference (tp 2)": lambda s: estimate_inference(
        s, ROOMY, batch=8, prompt_len=1024, gen_len=256, tensor_parallel=2
    ),  # fmt: skip
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--budget", type=float, default=2.0)
    args = ap.parse_args()
    shallow, deep = spec(12), spec(10**6 - 4)
    worst = 0.0
    for name, task in TASKS.items():
        ma, mb = interleaved(args.runs, lambda t=task: t(shallow), lambda t=task: t(deep))
        worst = max(worst, mb / ma)
        print(f"{name:30s} 12 layers {ma * 1000:8.2f} ms   999,996 layers {mb * 1000:8.2f} ms   ratio {mb / ma:5.2f}")
    print(f"worst ratio {worst:.2f} (budget {args.budget:g})")
    return 0 if worst <= args.budget else 1


if __name__ == "__main__":
    sys.exit(run("depth.py", main))
