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
import sys

from timing import byte_compile_archspec, command, interleaved  # this folder is on sys.path

BASELINE = [sys.executable, "-c", "from pydantic import BaseModel; import tabulate"]
ARCHSPEC = [sys.executable, "-m", "archspec", "compare", "transformer-base", "gpt2", "gpt3-175b"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=21)
    args = ap.parse_args()
    byte_compile_archspec()
    b, o = interleaved(args.runs, command(BASELINE), command(ARCHSPEC))
    print(f"baseline (pydantic + tabulate import): median {b * 1000:.1f} ms over {args.runs} runs")
    print(f"archspec compare transformer-base gpt2 gpt3-175b: median {o * 1000:.1f} ms")
    print(f"ratio: {o / b:.2f} (budget 1.50, aim 1.25)")


if __name__ == "__main__":
    main()
