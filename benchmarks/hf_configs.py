"""Wall time of counting every Hugging Face config.json of the test set in one `archspec params` call,
against the cost of archspec's own dependencies, in the same run: importing exactly what the
archspec modules this command loads import from pydantic and tabulate, derived from their source as
benchmarks/cli_latency.py derives it.

    python benchmarks/hf_configs.py [--runs 21]

Prints the medians and their ratio (the processor times' beside them) and exits 1 past the budget, 2.0.
The configs are the real files in tests/data/hf/ that archspec reads (the ones it refuses are left out:
they stop the command).

Both sides run from bytecode (see benchmarks/cli_latency.py): archspec's own modules are
byte-compiled first, as a wheel install would have done.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from cli_latency import CPU, floor_command, wall  # this folder is on sys.path
from results import run  # writes the figures into RESULTS.md
from timing import byte_compile_archspec

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "hf"


def readable_configs() -> list[str]:
    """The test set's configs that archspec counts (a refused one would end the command with exit 2)."""
    from archspec import load_spec
    from archspec.core.errors import SpecError

    out = []
    for path in sorted(DATA.glob("*.json")):
        try:
            load_spec(path)
        except SpecError:
            continue
        out.append(str(path))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=21)
    args = ap.parse_args()
    byte_compile_archspec()
    configs = readable_configs()
    params = [sys.executable, "-m", "archspec", "params", *configs, "--format", "json"]
    counted = json.loads(subprocess.run(params, check=True, capture_output=True, text=True).stdout)
    assert len(counted) == len(configs)
    floor = floor_command(params[3:])
    print(f"floor: python -c {floor[-1]!r}")
    wall(floor), wall(params)  # warm the file cache
    CPU.clear()
    times = [(wall(floor), wall(params)) for _ in range(args.runs)]  # interleaved: drift hits both alike
    b, o = (statistics.median(t) for t in zip(*times, strict=True))
    cpu_b, cpu_o = statistics.median(CPU[0::2]), statistics.median(CPU[1::2])
    # on a shared machine other work stretches both wall times unevenly; processor time is steadier
    print(f"processor time (user + system): baseline {cpu_b * 1000:.1f} ms, archspec {cpu_o * 1000:.1f} ms, "
          f"ratio {cpu_o / cpu_b:.2f}")  # fmt: skip
    print(f"floor (what archspec imports from pydantic and tabulate): median {b * 1000:.1f} ms over {args.runs} runs")
    print(f"archspec params of {len(configs)} config.json files: median {o * 1000:.1f} ms")
    print(f"ratio: {o / b:.2f} (budget 2.00): {'within' if o / b <= 2.0 else 'OVER BUDGET'}")
    return 0 if o / b <= 2.0 else 1


if __name__ == "__main__":
    sys.exit(run("hf_configs.py", main))
