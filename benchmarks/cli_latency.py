"""Wall time of `archspec compare transformer-base gpt2 gpt3-175b` against the cost of its own
dependencies (`python -c "from pydantic import BaseModel; import tabulate"`), in the same run.

    python benchmarks/cli_latency.py [--runs 21]

Prints the medians and their ratio, and exits 1 when the ratio is past the budget (1.3, DESIGN's
"within 1.3 x"; the aim is 1.2), so that a drift fails wherever the script runs.

Both sides run from bytecode: the dependencies were byte-compiled when pip installed them, and so
is archspec when installed from a wheel; for an editable checkout (or with PYTHONDONTWRITEBYTECODE
set) this script byte-compiles archspec's own modules first, as a wheel install would.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

from timing import byte_compile_archspec  # this folder is on sys.path

BUDGET, AIM = 1.3, 1.2
BASELINE = [sys.executable, "-c", "from pydantic import BaseModel; import tabulate"]
ARCHSPEC = [sys.executable, "-m", "archspec", "compare", "transformer-base", "gpt2", "gpt3-175b"]


CPU: list[float] = []  # user + system seconds of each run, in the order run (see measure)


def wall(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status):
        raise subprocess.CalledProcessError(os.waitstatus_to_exitcode(status), cmd)
    CPU.append(usage.ru_utime + usage.ru_stime)
    return time.perf_counter() - t0


def measure(runs: int) -> tuple[float, float]:
    """Medians of the baseline and of archspec's command, interleaved so that drift hits both alike."""
    byte_compile_archspec()
    wall(BASELINE), wall(ARCHSPEC)  # warm the file cache (and write the presets' cache)
    base, ours = [], []
    CPU.clear()
    for _ in range(runs):
        base.append(wall(BASELINE))
        ours.append(wall(ARCHSPEC))
    cpu_base, cpu_ours = statistics.median(CPU[0::2]), statistics.median(CPU[1::2])
    # on a shared machine other work stretches the wall time of both sides unevenly; the processor
    # time they use is steadier, and is printed beside the figure the budget is judged by
    print(f"processor time (user + system): baseline {cpu_base * 1000:.1f} ms, archspec {cpu_ours * 1000:.1f} ms, "
          f"ratio {cpu_ours / cpu_base:.2f}")  # fmt: skip
    return statistics.median(base), statistics.median(ours)


def verdict(ratio: float, budget: float = BUDGET, aim: float = AIM) -> str:
    return f"ratio {ratio:.2f} (budget {budget:.2f}, aim {aim:.2f}): {'within' if ratio <= budget else 'OVER BUDGET'}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=21)
    args = ap.parse_args()
    b, o = measure(args.runs)
    print(f"baseline (pydantic + tabulate import): median {b * 1000:.1f} ms over {args.runs} runs")
    print(f"archspec compare transformer-base gpt2 gpt3-175b: median {o * 1000:.1f} ms")
    print(verdict(o / b))
    return 0 if o / b <= BUDGET else 1


if __name__ == "__main__":
    sys.exit(main())
