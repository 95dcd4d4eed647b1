"""Stacks of a million layers, side by side in one run: a per-layer list of kinds written as its compact
pattern (archspec.spec.layers.compact) against the search it replaced (a failure-function pass from every
start), and a 10^6-layer Qwen3.5 config.json object read into a spec and counted.

    python benchmarks/scale.py            # writes its section of benchmarks/RESULTS.md

Figures are processor seconds of one run each (the machine is shared; its load is in RESULTS.md). Goal:
the config read and counted in under a second; the replaced search is timed on 10^4 layers only (it is
quadratic without a short unit, and minutes at 10^6).
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from results import run  # writes the figures into RESULTS.md

import archspec
from archspec.hf import from_mapping
from archspec.io.loading import build_spec
from archspec.spec.layers import compact

HF = Path(__file__).parent.parent / "tests" / "data" / "hf"


def searched(kinds: list[str]) -> tuple[list[str], list[str]]:
    """The replaced search: a Knuth-Morris-Pratt pass over the rest from every start."""

    def period(seq: list[str]) -> int:
        border, k = [0] * len(seq), 0
        for i in range(1, len(seq)):
            while k and seq[i] != seq[k]:
                k = border[k - 1]
            if seq[i] == seq[k]:
                k += 1
            border[i] = k
        return len(seq) - (border[-1] if seq else 0)

    best: tuple[list[str], list[str]] = ([], list(kinds))
    for start in range(len(kinds)):
        p = period(kinds[start:])
        if start + p < len(best[0]) + len(best[1]):
            best = (kinds[:start], kinds[start : start + p])
        if start >= len(best[0]) + len(best[1]):
            break
    return best


def seconds(call) -> tuple[float, object]:
    t0 = time.process_time()
    out = call()
    return time.process_time() - t0, out


def main() -> None:
    rng = random.Random(31)
    cases = {
        "unit of 4 (Qwen3.5)": lambda n: ["d" if (i + 1) % 4 else "a" for i in range(n)],
        "3 dense, then unit of 6": lambda n: ["x"] * 3 + ["l" if (i + 1) % 6 else "g" for i in range(n - 3)],
        "no short unit (random)": lambda n: [rng.choice("ab") for _ in range(n)],
    }
    print("| stack | layers | compact s | replaced search s |")
    print("|---|---:|---:|---:|")
    for name, make in cases.items():
        for n in (10**4, 10**6):
            kinds = make(n)
            new, got = seconds(lambda kinds=kinds: compact(kinds))
            old = "not run" if n > 10**4 else f"{seconds(lambda kinds=kinds: searched(kinds))[0]:.2f}"
            if n <= 10**4:
                assert searched(kinds) == got
            print(f"| {name} | {n:,} | {new:.2f} | {old} |")
    print()
    print("| config.json object, 10^6 layers | read s | params s | memory s |")
    print("|---|---:|---:|---:|")
    for model in ("qwen3.5-27b", "qwen3.5-35b-a3b"):
        raw = json.loads((HF / f"{model}.json").read_text(encoding="utf-8"))
        raw["text_config"]["num_hidden_layers"] = 10**6
        raw["text_config"]["layer_types"] = ["linear_attention" if (i + 1) % 4 else "full_attention"
                                             for i in range(10**6)]  # fmt: skip
        read, spec = seconds(lambda raw=raw, model=model: build_spec(from_mapping(raw, model).data))
        params, _ = seconds(lambda spec=spec: archspec.count_params(spec))
        memory, _ = seconds(lambda spec=spec: archspec.estimate_memory(spec))
        print(f"| {model} | {read:.2f} | {params:.2f} | {memory:.2f} |")


if __name__ == "__main__":
    sys.exit(run("scale.py", main))
