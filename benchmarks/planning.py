"""Planning at scale, side by side in one run: the path a planning script takes today against the full
path (full validation and a fresh description of every shape).

    python benchmarks/planning.py            # writes its section of benchmarks/RESULTS.md
    python benchmarks/planning.py --quick    # fewer shapes and a 10^4 sweep (a smoke run)

Figures:

- `replace` + `count_params`, shapes a second: the full path is `ModelSpec.model_validate(fields)` and a
  description of every layer kind afresh (the kind table emptied); the fast path is `spec.replace(...)`.
  Two grids: depth and width together (the layer kinds repeat across depths), and width alone (every
  shape a new layer kind). Goal: >= 20,000 a second.
- `count_flops` + `estimate_memory`, shapes a second, both paths. Goal: >= 2,000 a second.
- `archspec.sweep` of 10^5 combinations (params, FLOPs, KV cache and weights per row): seconds, goal
  < 20 s; peak memory by tracemalloc at 10^4 and 10^5 combinations (it must not grow with them).
- `archspec sweep ... -o FILE.csv` of 10^5 rows, wall seconds of the command. Goal: < 30 s.

Every figure is a median of interleaved runs where it is short, or one run where it is long; the
machine it ran on and its load are in RESULTS.md beside the figures.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from results import run  # writes the figures into RESULTS.md

import archspec
import archspec.describe.blocks as blocks
from archspec.count.flops import count_flops
from archspec.memory import estimate_memory
from archspec.spec.model import ModelSpec

MODEL = "llama-3-8b"


def full_path(spec: ModelSpec, changes: dict) -> ModelSpec:
    """Today's path: every given field validated again, every layer kind described afresh."""
    blocks._BLOCKS.clear()
    return ModelSpec.model_validate({k: getattr(spec, k) for k in spec.model_fields_set} | changes)


def fast_path(spec: ModelSpec, changes: dict) -> ModelSpec:
    return spec.replace(**changes)


def rate(make, count, spec, shapes) -> float:
    """Shapes a second of make(spec, changes) then count(shape), over `shapes`."""
    t0 = time.perf_counter()
    for changes in shapes:
        count(make(spec, changes))
    return len(shapes) / (time.perf_counter() - t0)


MISSED: list[str] = []  # the goals a run misses: the script exits 1 when there is one


def side_by_side(label: str, count, spec, shapes, goal: int, rounds: int = 3) -> None:
    full, fast = [], []
    for _ in range(rounds):  # interleaved, so that the machine's drift hits both alike
        full.append(rate(full_path, count, spec, shapes))
        fast.append(rate(fast_path, count, spec, shapes))
    full.sort()
    fast.sort()
    f, g = full[len(full) // 2], fast[len(fast) // 2]
    verdict = "meets" if g >= goal else "misses"
    if g < goal:
        MISSED.append(label)
    print(f"{label}: full path {f:,.0f}/s ({1e6 / f:,.0f} us), fast path {g:,.0f}/s ({1e6 / g:,.0f} us): "
          f"{g / f:.1f}x; goal >= {goal:,}/s: {verdict}")  # fmt: skip


def flops_and_memory(shape: ModelSpec) -> None:
    count_flops(shape, 1, 2048)
    estimate_memory(shape, batch=1, seq_len=2048)


SWEEP = """
import resource, sys, time, archspec
n = int(sys.argv[1])
s = archspec.sweep(archspec.preset("{model}"), {{"d_model": range(2048, 2048 + 128 * 100, 128),
                   "decoder_layers": range(1, n // 100 + 1)}}, seq_len=2048)
t0 = time.perf_counter()
rows = sum(1 for _ in s)
print(time.perf_counter() - t0, rows, s.n_combinations, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def api_sweep(n: int) -> tuple[float, int, int, int]:
    """(seconds, rows, combinations, peak resident KiB) of a sweep of 100 widths x n/100 depths, in a
    process of its own (its peak resident memory is the sweep's and the interpreter's)."""
    out = subprocess.run([sys.executable, "-c", SWEEP.format(model=MODEL), str(n)], check=True, capture_output=True,
                         text=True).stdout.split()  # fmt: skip
    return float(out[0]), int(out[1]), int(out[2]), int(out[3])


def traced_peak(n: int) -> int:
    """tracemalloc's peak of the Python objects a sweep of `n` combinations holds while it is iterated."""
    spec = archspec.preset(MODEL)
    s = archspec.sweep(spec, {"d_model": range(2048, 2048 + 128 * 100, 128), "decoder_layers": range(1, n // 100 + 1)},
                       seq_len=2048)  # fmt: skip
    tracemalloc.start()
    for _ in s:
        pass
    size = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return size


def main() -> int:
    quick = "--quick" in sys.argv
    spec = archspec.preset(MODEL)
    print(f"model {MODEL}; {'quick run' if quick else 'full run'}")
    widths = range(3072, 3072 + 128 * (10 if quick else 20), 128)
    depth_and_width = [{"d_model": d, "decoder_layers": n} for d, n in itertools.product(widths, range(16, 66))]
    width = [{"d_model": d} for d in range(2048, 2048 + 128 * (200 if quick else 1000), 128)]
    params = archspec.count_params
    side_by_side(f"replace + count_params, {len(depth_and_width):,} shapes (depth x width)", params, spec,
                 depth_and_width, 20_000)  # fmt: skip
    side_by_side(f"replace + count_params, {len(width):,} shapes (every shape a new layer kind)", params, spec,
                 width, 20_000)  # fmt: skip
    fm = depth_and_width[:: 10 if quick else 5]
    side_by_side(f"count_flops + estimate_memory, {len(fm):,} shapes (depth x width)", flops_and_memory, spec, fm,
                 2_000, rounds=1)  # fmt: skip

    sizes = (10**3, 10**4) if quick else (10**4, 10**5)
    runs = {n: api_sweep(n) for n in sizes}
    for n, (seconds, rows, combos, rss) in runs.items():
        goal = "" if n < 10**5 else f"; goal 10^5 under 20 s: {'meets' if seconds < 20 else 'misses'}"
        if n >= 10**5 and seconds >= 20:
            MISSED.append("API sweep")
        print(f"archspec.sweep of {combos:,} combinations (params, FLOPs, KV, weights): {seconds:.1f} s, "
              f"{rows:,} rows, {combos / seconds:,.0f} rows/s, peak resident {rss / 1024:.0f} MiB{goal}")  # fmt: skip
    small = sizes[0] // 10
    traced_peak(small)  # warm: validators and caches built once, before either figure
    p1, p2 = traced_peak(small), traced_peak(sizes[0])
    print(f"tracemalloc peak while iterating: {p1 / 2**20:.2f} MiB at {small:,} combinations, {p2 / 2**20:.2f} MiB "
          f"at {sizes[0]:,} ({p2 / p1:.2f}x)")  # fmt: skip

    layers = "1:1000" if not quick else "1:10"
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "shapes.csv")
        cmd = [sys.executable, "-m", "archspec", "sweep", MODEL, "--vary", "d_model=2048:14720:128", "--vary",
               f"decoder_layers={layers}", "--seq-len", "2048", "-o", out]  # fmt: skip
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True)
        wall = time.perf_counter() - t0
        lines = Path(out).read_text().count("\n") - 1
    verdict = "meets" if wall * (10**5 / lines) < 30 else "misses"
    if verdict == "misses":
        MISSED.append("CLI sweep")
    print(f"archspec sweep -o shapes.csv, {lines:,} rows: {wall:.1f} s; goal 10^5 rows under 30 s: {verdict}")
    return 1 if MISSED else 0


if __name__ == "__main__":
    sys.exit(run("planning.py", main))
