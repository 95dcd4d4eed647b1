"""The two budgets of the one-description design, side by side in one run:

1. `archspec compare transformer-base gpt2 gpt3-175b` against the import floor of its own
   dependencies: importing exactly the names archspec's modules on that command's path import from
   pydantic and tabulate, derived from their source (see cli_latency.py, which also times the old
   floor, `from pydantic import BaseModel; import tabulate`, beside it): budget 1.5x;
2. `archspec verify` of every preset (builds each on the meta device, compares every tensor, the
   parameters and FlopCounterMode's FLOPs): budget 1 s a preset on average (it was 10 s for the
   first 16 presets, then 30 s for 38; the catalog now holds 1T-parameter mixtures of 61 layers, whose
   one forward pass under FlopCounterMode is some 15,000 dispatched operations), at least 30 s.

    python benchmarks/budgets.py [--runs 15]

Both run as subprocesses from bytecode, medians over interleaved runs (verify: fewer runs). Exits 1
when either is past its budget.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cli_latency import BUDGET, measure, report, wall  # noqa: E402
from results import run  # noqa: E402

VERIFY = [sys.executable, "-m", "archspec", "verify"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--verify-runs", type=int, default=3)
    args = ap.parse_args()
    m = measure(args.runs)
    ratio = m.paired  # the wall-time ratio the verdict of cli_latency.py is on
    verify = [wall(VERIFY) for _ in range(args.verify_runs)]
    import archspec

    n = len(archspec.presets())
    v = statistics.median(verify)
    print("\n".join(report(m, args.runs)))
    budget = max(30.0, 1.0 * n)
    print(f"archspec verify ({n} presets):                     median {v:7.2f} s over {args.verify_runs} runs")
    print(f"  budget {budget:.1f} s (1 s a preset, at least 30 s): {'within' if v <= budget else 'OVER BUDGET'}")
    return 0 if ratio <= BUDGET and v <= budget else 1


if __name__ == "__main__":
    sys.exit(run("budgets.py", main))
