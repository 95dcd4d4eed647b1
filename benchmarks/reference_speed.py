"""Reference-model speed, side by side with transformers in the same run.

    python benchmarks/reference_speed.py [--repeats 7]

1. Build GPT-3 175B on the meta device and count its parameters: archspec.reference.build vs
   transformers' GPT2LMHeadModel from the same configuration (target ratio <= 1).
2. CPU forward pass of gpt2 at batch 1 x 256 tokens, same weights: archspec vs transformers'
   GPT2LMHeadModel (target ratio <= 1, ours no slower); tokens per second.
3. `archspec verify` over all presets, as a subprocess: wall time and peak memory (max RSS).
"""

from __future__ import annotations

import argparse
import subprocess
import sys

import torch
import transformers
from results import run  # writes the figures into RESULTS.md
from timing import interleaved  # this folder is on sys.path

import archspec
from archspec.reference import build, count_total, load_gpt2, transformers_config


def bench_meta_build(repeats: int) -> None:
    spec = archspec.preset("gpt3-175b")
    cfg = transformers_config(spec)

    def ours():
        return count_total(build(spec, device="meta"))

    def theirs():
        with torch.device("meta"):
            return sum(p.numel() for p in transformers.GPT2LMHeadModel(cfg).parameters())

    assert ours() == theirs() == archspec.count_params(spec).total  # same model, same count (also warms up)
    a, b = interleaved(repeats, ours, theirs, warm=False)
    print(f"[1] build + count gpt3-175b on meta: archspec {a * 1e3:.0f} ms, transformers {b * 1e3:.0f} ms, "
          f"ratio {a / b:.2f} (target <= 1)")  # fmt: skip


def bench_cpu_forward(repeats: int, seq: int = 256) -> None:
    spec = archspec.preset("gpt2")
    torch.manual_seed(0)
    hf = transformers.GPT2LMHeadModel(transformers_config(spec)).eval()
    ours = load_gpt2(build(spec), hf.state_dict()).eval()
    x = torch.randint(0, spec.vocab_size, (1, seq))
    with torch.inference_mode():
        diff = (ours(x) - hf(x).logits).abs().max().item()  # also a first warm-up of both
        a, b = interleaved(repeats, lambda: ours(x), lambda: hf(x))
    print(f"[2] gpt2 CPU forward, batch 1 x {seq} tokens ({torch.get_num_threads()} threads), max |diff| {diff:.1e}: "
          f"archspec {a * 1e3:.1f} ms ({seq / a:,.0f} tokens/s), transformers {b * 1e3:.1f} ms "
          f"({seq / b:,.0f} tokens/s), ratio {a / b:.2f} (target <= 1)")  # fmt: skip


def bench_verify() -> None:
    # A small intermediate process runs verify and reports its child's peak RSS, so the figure is
    # not inflated by this (large) benchmark process, which a forked child would start as a copy of.
    probe = (
        "import resource, subprocess, sys, time; t0 = time.perf_counter(); "
        "rc = subprocess.run([sys.executable, '-m', 'archspec', 'verify', '--format', 'json'], "
        "stdout=subprocess.DEVNULL).returncode; "
        "print(time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, rc)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    wall, peak_kib, rc = float(out[0]), int(out[1]), int(out[2])
    status = "all ok" if rc == 0 else f"exit {rc}"
    print(f"[3] archspec verify over {len(archspec.presets())} presets: {wall:.2f} s wall, "
          f"peak RSS {peak_kib / 1024:.0f} MiB ({status})")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    print(f"torch {torch.__version__}, transformers {transformers.__version__}")
    bench_meta_build(args.repeats)
    bench_cpu_forward(args.repeats)
    bench_verify()


if __name__ == "__main__":
    sys.exit(run("reference_speed.py", main))
