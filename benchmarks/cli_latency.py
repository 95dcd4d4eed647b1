"""Wall time of `archspec compare transformer-base gpt2 gpt3-175b` against the cost of its own
dependencies (`python -c "from pydantic import BaseModel; import tabulate"`), in the same run.

    python benchmarks/cli_latency.py [--runs 21]

Prints the medians and their ratio; the budget is <= 1.5, the aim <= 1.25.

Both sides run from bytecode: the dependencies were byte-compiled when pip installed them, and so
is archspec when installed from a wheel; for an editable checkout (or with PYTHONDONTWRITEBYTECODE
set) this script byte-compiles archspec's own modules first, as a wheel install would.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

BASELINE = [sys.executable, "-c", "from pydantic import BaseModel; import tabulate"]
ARCHSPEC = [sys.executable, "-m", "archspec", "compare", "transformer-base", "gpt2", "gpt3-175b"]


def wall(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def byte_compile_archspec() -> None:
    import compileall
    import importlib.util

    for package in ("archspec", "archspec.presets"):
        spec = importlib.util.find_spec(package)
        for folder in spec.submodule_search_locations or []:
            compileall.compile_dir(folder, quiet=1, maxlevels=0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=21)
    args = ap.parse_args()
    byte_compile_archspec()
    wall(BASELINE), wall(ARCHSPEC)  # warm the file cache
    base, ours = [], []
    for _ in range(args.runs):  # interleaved, so drift hits both alike
        base.append(wall(BASELINE))
        ours.append(wall(ARCHSPEC))
    b, o = statistics.median(base), statistics.median(ours)
    print(f"baseline (pydantic + tabulate import): median {b * 1000:.1f} ms over {args.runs} runs")
    print(f"archspec compare transformer-base gpt2 gpt3-175b: median {o * 1000:.1f} ms")
    print(f"ratio: {o / b:.2f} (budget 1.50, aim 1.25)")


if __name__ == "__main__":
    main()
