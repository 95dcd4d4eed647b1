"""The two budgets of the one-description design, side by side in one run:

1. `archspec compare transformer-base gpt2 gpt3-175b` against the import floor of its own
   dependencies (`python -c "from pydantic import BaseModel; import tabulate"`): budget 1.5x, aim 1.25x;
2. `archspec verify` of every preset (builds each on the meta device, compares every tensor, the
   parameters and FlopCounterMode's FLOPs): budget 10 s for the first 16 presets, 30 s as presets grow.

    python benchmarks/budgets.py [--runs 15]

Both run as subprocesses from bytecode, medians over interleaved runs (verify: fewer runs).
"""

from __future__ import annotations

import argparse
import sys

from cli_latency import ARCHSPEC, BASELINE  # this folder is on sys.path
from timing import byte_compile_archspec, command, interleaved

VERIFY = [sys.executable, "-m", "archspec", "verify"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--verify-runs", type=int, default=3)
    args = ap.parse_args()
    byte_compile_archspec()
    b, o = interleaved(args.runs, command(BASELINE), command(ARCHSPEC))
    (v,) = interleaved(args.verify_runs, command(VERIFY), warm=False)
    import archspec

    n = len(archspec.presets())
    print(f"import floor (pydantic + tabulate):                 median {b * 1000:7.1f} ms over {args.runs} runs")
    print(f"archspec compare transformer-base gpt2 gpt3-175b:  median {o * 1000:7.1f} ms")
    print(f"  ratio {o / b:.2f} (budget 1.50, aim 1.25)")
    budget = 10 if n <= 16 else 30
    print(f"archspec verify ({n} presets):                     median {v:7.2f} s over {args.verify_runs} runs")
    print(f"  budget {budget} s: {'within' if v <= budget else 'OVER'}")


if __name__ == "__main__":
    main()
