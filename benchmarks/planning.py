"""Planning at scale, side by side in one run: the path a planning script takes (`replace` and the
counters compiled per structure) against the full path (full validation, a fresh description of every
shape, every count made the full way).

    python benchmarks/planning.py            # writes its section of benchmarks/RESULTS.md
    python benchmarks/planning.py --quick    # fewer shapes and a 10^4 sweep (a smoke run)

Figures:

- `replace` + `count_params`, shapes a second: the full path is `ModelSpec.model_validate(fields)`, a
  description of every layer kind afresh (the kind table emptied) and the counters inside
  `archspec.core.compiled.full_way()`; the fast path is `spec.replace(...)` and the counters as a
  script calls them. Two grids: depth and width together, and width alone. Goal: >= 20,000 a second.
- `count_flops` + `estimate_memory`, shapes a second, both paths. Goal: >= 2,000 a second.
- `archspec.sweep` of 10^5 combinations (params, FLOPs, KV cache and weights per row): seconds, goal
  < 20 s, beside the full path's rate over 10^3; peak memory by tracemalloc at 10^3 and 10^4
  combinations (it must not grow with them).
- `archspec sweep ... -o FILE.csv` of 10^5 rows, seconds of the command. Goal: < 30 s.

The machine these run on is shared, and the goals are for a quiet one. So each figure is given twice:
by the wall clock, and by the processor time of this process (or of the command), which another
process's load slows much less; the load average (1 minute) is printed beside each figure. A goal is
judged by the processor time, and said by the wall clock too. Short figures are the best of
interleaved rounds; the sweeps are one run each.
"""

from __future__ import annotations

import itertools
import os
import resource
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
from archspec.core.compiled import full_way
from archspec.count.flops import count_flops
from archspec.memory import estimate_memory
from archspec.spec import ModelSpec

MODEL = "llama-3-8b"
MISSED: list[str] = []  # the goals a run misses (by processor time): the script exits 1 when there is one


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


def full_path(spec: ModelSpec, changes: dict, count) -> None:
    """Every given field validated again, every layer kind described afresh, every count the full way."""
    blocks._BLOCKS.clear()
    shape = ModelSpec.model_validate({k: getattr(spec, k) for k in spec.model_fields_set} | changes)
    with full_way():
        count(shape)


def fast_path(spec: ModelSpec, changes: dict, count) -> None:
    count(spec.replace(**changes))


def rate(path, count, spec, shapes) -> tuple[float, float]:
    """(by the wall clock, by processor time) shapes a second of path(spec, changes, count) over `shapes`."""
    t0, c0 = time.perf_counter(), time.process_time()
    for changes in shapes:
        path(spec, changes, count)
    return len(shapes) / (time.perf_counter() - t0), len(shapes) / max(time.process_time() - c0, 1e-9)


def verdict(label: str, cpu: float, wall: float, goal: float, more_is_better: bool = True) -> str:
    meets = (cpu >= goal) if more_is_better else (cpu <= goal)
    wall_meets = (wall >= goal) if more_is_better else (wall <= goal)
    if not meets:
        MISSED.append(label)
    return f"{'meets' if meets else 'misses'} by processor time, {'meets' if wall_meets else 'misses'} by the wall"


def side_by_side(label: str, count, spec, shapes, goal: int, rounds: int = 3) -> None:
    full, fast = [], []
    for _ in range(rounds):  # interleaved, so that the machine's drift hits both alike
        full.append(rate(full_path, count, spec, shapes))
        fast.append(rate(fast_path, count, spec, shapes))
    (fw, fc), (gw, gc) = max(full, key=lambda r: r[1]), max(fast, key=lambda r: r[1])
    print(f"{label}: full path {fc:,.0f}/s ({fw:,.0f}/s wall), fast path {gc:,.0f}/s ({gw:,.0f}/s wall): "
          f"{gc / fc:.0f}x; goal >= {goal:,}/s: {verdict(label, gc, gw, goal)}; {load()}")  # fmt: skip


def flops_and_memory(shape: ModelSpec) -> None:
    count_flops(shape, 1, 2048)
    estimate_memory(shape, batch=1, seq_len=2048)


SWEEP = """
import resource, sys, time, archspec
from archspec.core.compiled import full_way
n, full = int(sys.argv[1]), sys.argv[2] == "full"
s = archspec.sweep(archspec.preset("{model}"), {{"d_model": range(2048, 2048 + 128 * 100, 128),
                   "decoder_layers": range(1, n // 100 + 1)}}, seq_len=2048)
t0, c0 = time.perf_counter(), time.process_time()
if full:
    with full_way():
        rows = sum(1 for _ in s)
else:
    rows = sum(1 for _ in s)
print(time.perf_counter() - t0, time.process_time() - c0, rows, s.n_combinations,
      resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def api_sweep(n: int, path: str = "fast") -> tuple[float, float, int, int, int]:
    """(wall seconds, processor seconds, rows, combinations, peak resident KiB) of a sweep of 100 widths x
    n/100 depths, in a process of its own (its peak resident memory is the sweep's and the interpreter's)."""
    out = subprocess.run([sys.executable, "-c", SWEEP.format(model=MODEL), str(n), path], check=True,
                         capture_output=True, text=True).stdout.split()  # fmt: skip
    return float(out[0]), float(out[1]), int(out[2]), int(out[3]), int(out[4])


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


def sweeps(quick: bool) -> None:
    wall, cpu, rows, combos, _ = api_sweep(10**3, "full")
    print(f"archspec.sweep, full path, {combos:,} combinations: {combos / cpu:,.0f} rows/s ({combos / wall:,.0f}/s "
          f"wall); {load()}")  # fmt: skip
    sizes = (10**3, 10**4) if quick else (10**4, 10**5)
    for n in sizes:
        wall, cpu, rows, combos, rss = api_sweep(n)
        goal = ""
        if n >= 10**5:
            goal = f"; goal 10^5 under 20 s: {verdict('API sweep', cpu, wall, 20, more_is_better=False)}"
        print(f"archspec.sweep of {combos:,} combinations (params, FLOPs, KV, weights): {cpu:.1f} s ({wall:.1f} s "
              f"wall), {rows:,} rows, {combos / cpu:,.0f} rows/s, peak resident {rss / 1024:.0f} MiB{goal}; "
              f"{load()}")  # fmt: skip
    small = sizes[0] // 10
    traced_peak(small)  # warm: validators and programs made once, before either figure
    p1, p2 = traced_peak(small), traced_peak(sizes[0])
    print(f"tracemalloc peak while iterating: {p1 / 2**20:.2f} MiB at {small:,} combinations, {p2 / 2**20:.2f} MiB "
          f"at {sizes[0]:,} ({p2 / p1:.2f}x)")  # fmt: skip


def cli_sweep(quick: bool) -> None:
    layers = "1:1000" if not quick else "1:10"
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "shapes.csv")
        cmd = [sys.executable, "-m", "archspec", "sweep", MODEL, "--vary", "d_model=2048:14720:128", "--vary",
               f"decoder_layers={layers}", "--seq-len", "2048", "-o", out]  # fmt: skip
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        lines = Path(out).read_text().count("\n") - 1
    scale = 10**5 / lines
    print(f"archspec sweep -o shapes.csv, {lines:,} rows: {cpu:.1f} s ({wall:.1f} s wall); goal 10^5 rows under "
          f"30 s: {verdict('CLI sweep', cpu * scale, wall * scale, 30, more_is_better=False)}; {load()}")  # fmt: skip


def main() -> int:
    quick = "--quick" in sys.argv
    spec = archspec.preset(MODEL)
    print(f"model {MODEL}; {'quick run' if quick else 'full run'}; rates by processor time (wall clock in brackets)")
    widths = range(3072, 3072 + 128 * (10 if quick else 20), 128)
    depth_and_width = [{"d_model": d, "decoder_layers": n} for d, n in itertools.product(widths, range(16, 66))]
    width = [{"d_model": d} for d in range(2048, 2048 + 128 * (200 if quick else 1000), 128)]
    params = archspec.count_params
    side_by_side(f"replace + count_params, {len(depth_and_width):,} shapes (depth x width)", params, spec,
                 depth_and_width, 20_000)  # fmt: skip
    side_by_side(f"replace + count_params, {len(width):,} shapes (width alone)", params, spec, width, 20_000)
    fm = depth_and_width[:: 10 if quick else 2]
    side_by_side(f"count_flops + estimate_memory, {len(fm):,} shapes (depth x width)", flops_and_memory, spec, fm,
                 2_000, rounds=2)  # fmt: skip
    sweeps(quick)
    cli_sweep(quick)
    return 1 if MISSED else 0


if __name__ == "__main__":
    sys.exit(run("planning.py", main))
