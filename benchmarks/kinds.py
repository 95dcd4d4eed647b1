"""Specs of many layer kinds through the Python API, side by side in one run: every planner on a stack
whose layers each have their own kind, beside the same number of layers of one kind; specs over the
limit (archspec.core.limits.MAX_KINDS) refused; and where each kind sits in the stack counted by the
placement's index, beside the scan of the pattern once per kind that it replaced.

    python benchmarks/kinds.py            # writes its section of benchmarks/RESULTS.md

Figures are processor seconds of one call each (the machine is shared; its load is in RESULTS.md).
Goal: every planner answers within a second at the limit (exit 1 otherwise); a refusal takes
milliseconds however many kinds it names.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from results import run  # writes the figures into RESULTS.md

import archspec
from archspec.core.limits import MAX_KINDS
from archspec.io.loading import build_spec
from archspec.plan.fit import fit
from archspec.plan.inference import estimate_inference
from archspec.plan.sweep import sweep_row
from archspec.spec.layers import Placement, _progression

BUDGET = 1.0  # processor seconds of each planner at the limit

PLANNERS = {
    "params": lambda s: archspec.count_params(s),
    "flops": lambda s: archspec.count_flops(s, 1, 2048),
    "memory": lambda s: archspec.estimate_memory(s, 1, 2048),
    "memory ZeRO-3 tp 2 pp 4": lambda s: archspec.estimate_memory(s, 1, 2048, zero_stage=3, data_parallel=8,
                                                                  tensor_parallel=2, pipeline_parallel=4),
    "inference": lambda s: estimate_inference(s, "h100"),
    "inference q4_k_m pp 4": lambda s: estimate_inference(s, "h100", dtype="q4_k_m", pipeline_parallel=4),
    "fit": lambda s: fit(s, "h100", "bf16"),
    "fit training": lambda s: fit(s, "h100", "bf16", task="training", seq_len=2048),
    "sweep row": lambda s: sweep_row(s, 2048),
}


def stack(layers: int, kinds: bool) -> dict:
    """llama-3-8b with `layers` layers: each of its own kind (its own d_ff), or all of one."""
    data = archspec.preset("llama-3-8b").model_dump(mode="json", exclude_none=True)
    data.update(name="kinds", decoder_layers=layers)
    if kinds:
        data["kinds"] = {f"k{i}": {"d_ff": 14336 + 256 * i} for i in range(layers)}
        data["layers"] = {"pattern": [f"k{i}" for i in range(layers)]}
    return data


def seconds(call) -> tuple[float, object]:
    t0 = time.process_time()
    out = call()
    return time.process_time() - t0, out


def scanned(where: Placement, kind: str, lo: int, hi: int) -> int:
    """The replaced count_in: layers of `kind` in lo .. hi - 1, by a pass over the runs and the whole pattern."""
    hi, out, at = min(hi, where.depth), 0, 0
    for k, n in where.runs:
        if k == kind:
            out += _progression(at, 1, min(at + n, where.depth), lo, hi, 1, 0)
        at += n
    for j, k in enumerate(where.pattern):
        if k == kind:
            out += _progression(at + j, len(where.pattern), where.depth, lo, hi, 1, 0)
    return out


def main() -> int:
    over = []
    build_spec(stack(2, True))  # the validators of a spec and of its kinds are built on first use
    print("| layers | kinds | validate s | " + " | ".join(f"{p} s" for p in PLANNERS) + " |")
    print("|---:|---:|---:|" + "---:|" * len(PLANNERS))
    for layers in (100, MAX_KINDS):
        for kinds in (True, False):
            took, spec = seconds(lambda layers=layers, kinds=kinds: build_spec(stack(layers, kinds)))
            row = [f"{took:.3f}"]
            for name, planner in PLANNERS.items():
                took, _ = seconds(lambda planner=planner, spec=spec: planner(spec))
                row.append(f"{took:.3f}")
                if kinds and layers == MAX_KINDS and took > BUDGET:
                    over.append(f"{name} {took:.2f} s")
            print(f"| {layers:,} | {layers if kinds else 1:,} | " + " | ".join(row) + " |")
    print()
    print("| kinds | refused in s |")
    print("|---:|---:|")
    for count in (MAX_KINDS + 1, 10**3, 10**4, 10**6):
        data = stack(1, False) | {"kinds": dict.fromkeys(map(str, range(count)), {}),
                                  "layers": {"pattern": [str(i) for i in range(count)]}, "decoder_layers": count}
        took, _ = seconds(lambda data=data: _refused(data))
        print(f"| {count:,} | {took:.4f} |")
    print()
    print("| kinds, one layer each | counted by the index s | by the replaced scan s |")
    print("|---:|---:|---:|")
    rng = random.Random(31)
    for count in (10**2, 10**3, 10**4, 10**5):
        names = [f"k{i}" for i in range(count)]
        where = Placement((), tuple(names), count)
        cuts = [sorted(rng.randrange(count + 1) for _ in range(2)) for _ in names]
        took, new = seconds(lambda where=where, names=names, cuts=cuts: [
            (where.count(k), where.count_in(k, lo, hi)) for k, (lo, hi) in zip(names, cuts)])  # fmt: skip
        old = "not run"
        if count <= 10**3:
            t, got = seconds(lambda where=where, names=names, cuts=cuts: [
                (where.pattern.count(k), scanned(where, k, lo, hi)) for k, (lo, hi) in zip(names, cuts)])  # fmt: skip
            assert got == new
            old = f"{t:.3f}"
        print(f"| {count:,} | {took:.3f} | {old} |")
    if over:
        print(f"\nover the budget of {BUDGET} s at {MAX_KINDS} kinds: {', '.join(over)}")
        return 1
    return 0


def _refused(data: dict) -> None:
    try:
        build_spec(data)
    except archspec.SpecError:
        return
    raise AssertionError("a spec over the limit was read")


if __name__ == "__main__":
    sys.exit(run("kinds.py", main))
