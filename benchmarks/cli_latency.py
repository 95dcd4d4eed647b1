"""Wall time of `archspec compare transformer-base gpt2 gpt3-175b` against the cost of its own
dependencies, in the same run.

    python benchmarks/cli_latency.py [--runs 21]

The floor is importing exactly what archspec imports from its dependencies on this command's path:
every name that an archspec module the command loads imports from pydantic or tabulate (today
`from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ...; from tabulate import
tabulate`). pydantic 2 loads its submodules lazily: `from pydantic import BaseModel` alone does not
load `pydantic.fields`, `pydantic.types` or `annotated_types`, which importing `Field` (or defining
any model with a field) does, so the bare `BaseModel` import is not the cost of the dependencies
archspec uses. The list is derived, not typed: the command runs once in a subprocess that reports
the archspec modules it loaded, and an AST scan of their source collects the names (imports inside
functions too: tabulate is imported where a table is drawn), so the floor follows the code. The
command exits without the interpreter's last garbage collection (archspec.cli.entry freezes the
collector's objects); the floor ends with the same `gc.freeze()`, so that what is measured is
archspec's own start-up, not the collection of pydantic's objects that one side would skip. The old
floor, `python -c "from pydantic import BaseModel; import tabulate"`, is timed beside it and its
ratio printed for comparison.

Prints the medians and minima (wall and processor time) and the ratio to the floor, and exits 1 when
the wall-time ratio is past the budget (1.5, "within 1.5 x"), so that a drift fails
wherever the script runs. The verdict's ratio is paired: each round runs the floor and the command one
after the other, and the ratio is the median of the rounds' ratios, so that a slow spell of the machine
(a shared one varies by a third within the hour) weighs on both sides of the rounds it falls in, rather
than on whichever side's median it happens to move; the ratio of the two medians is printed beside it.

Both sides run from bytecode: the dependencies were byte-compiled when pip installed them, and so
is archspec when installed from a wheel; for an editable checkout (or with PYTHONDONTWRITEBYTECODE
set) this script byte-compiles archspec's own modules first, as a wheel install would.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import statistics
import subprocess
import sys
import time
from typing import NamedTuple

from results import run  # writes the figures into RESULTS.md
from timing import byte_compile_archspec  # this folder is on sys.path

BUDGET = 1.5
DEPENDENCIES = ("pydantic", "tabulate")
COMMAND = ["compare", "transformer-base", "gpt2", "gpt3-175b"]
ARCHSPEC = [sys.executable, "-m", "archspec", *COMMAND]
BASEMODEL_FLOOR = [sys.executable, "-c", "from pydantic import BaseModel; import tabulate"]

# runs a command in-process (its output discarded) and prints the files of the archspec modules it loaded
_LOADED = """
import contextlib, io, json, runpy, sys
sys.argv = ["archspec", *json.loads(sys.argv[1])]
with contextlib.redirect_stdout(io.StringIO()):
    try:
        runpy.run_module("archspec", run_name="__main__", alter_sys=True)
    except SystemExit:
        pass
print(json.dumps(sorted({m.__file__ for n, m in list(sys.modules.items())
                         if n.split(".")[0] == "archspec" and getattr(m, "__file__", None)})))
"""


def loaded_modules(command: list[str] = COMMAND) -> list[str]:
    """The source files of the archspec modules that `archspec COMMAND...` loads."""
    cmd = [sys.executable, "-c", _LOADED, json.dumps(command)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def dependency_names(files: list[str]) -> dict[str, list[str]]:
    """dependency -> the names those files import from it, at any depth (`import x` as the name '')."""
    names: dict[str, set[str]] = {}
    for path in files:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and not node.level and node.module:
                if node.module.split(".")[0] in DEPENDENCIES:
                    names.setdefault(node.module, set()).update(a.name for a in node.names)
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] in DEPENDENCIES:
                        names.setdefault(a.name, set()).add("")
    return {module: sorted(n) for module, n in sorted(names.items())}


def floor_statement(names: dict[str, list[str]]) -> str:
    """One line of Python that imports exactly those names."""
    lines = []
    for module, imported in names.items():
        if "" in imported:
            lines.append(f"import {module}")
        if [n for n in imported if n]:
            lines.append(f"from {module} import {', '.join(n for n in imported if n)}")
    return "; ".join(lines)


# archspec's command exits without the interpreter's last collection (archspec.cli.entry freezes the
# collector's objects first); the floor exits the same way, so the ratio is archspec's own work and not
# the collection of pydantic's objects, which the floor would pay and the command would not
SAME_EXIT = "import gc; gc.freeze()"


def floor_command(command: list[str] = COMMAND) -> list[str]:
    """`python -c` of the import line of what `archspec COMMAND...` imports from its dependencies, then
    the same exit as the command's."""
    return [sys.executable, "-c", floor_statement(dependency_names(loaded_modules(command))) + "; " + SAME_EXIT]


CPU: list[float] = []  # user + system seconds of each run, in the order run (see measure)


def wall(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status):
        raise subprocess.CalledProcessError(os.waitstatus_to_exitcode(status), cmd)
    CPU.append(usage.ru_utime + usage.ru_stime)
    return time.perf_counter() - t0


class Side(NamedTuple):
    """Seconds of one side over the runs: median and least, of the wall time and of the processor time."""

    wall: float
    wall_min: float
    cpu: float
    cpu_min: float


class Measured(NamedTuple):
    floor: Side  # the names archspec imports from its dependencies
    basemodel: Side  # the old floor: `from pydantic import BaseModel; import tabulate`
    archspec: Side
    statement: str  # the floor's import line
    paired: float  # the median over the rounds of the command's wall time over the floor's in that round
    paired_cpu: float  # the same of the processor times


def measure(runs: int) -> Measured:
    """The three sides, interleaved so that drift hits them alike."""
    byte_compile_archspec()
    floor = floor_command()
    cmds = (floor, BASEMODEL_FLOOR, ARCHSPEC)
    for cmd in cmds:  # warm the file cache
        wall(cmd)
    walls: list[list[float]] = [[] for _ in cmds]
    CPU.clear()
    for _ in range(runs):
        for cmd, out in zip(cmds, walls, strict=True):
            out.append(wall(cmd))
    cpus = [CPU[i :: len(cmds)] for i in range(len(cmds))]
    sides = [Side(statistics.median(w), min(w), statistics.median(c), min(c)) for w, c in zip(walls, cpus, strict=True)]
    paired = [statistics.median(a / f for f, a in zip(side[0], side[2], strict=True)) for side in (walls, cpus)]
    return Measured(*sides, floor[-1], *paired)


def verdict(ratio: float, budget: float = BUDGET) -> str:
    return f"ratio {ratio:.2f} (budget {budget:.2f}): {'within' if ratio <= budget else 'OVER BUDGET'}"


def report(m: Measured, runs: int) -> list[str]:
    """The figures, in ms, and the ratios to both floors (the verdict is on the paired wall-time ratio)."""

    def ms(s: Side) -> str:
        return (f"wall median {s.wall * 1000:6.1f} ms (min {s.wall_min * 1000:6.1f}), "
                f"processor median {s.cpu * 1000:6.1f} ms (min {s.cpu_min * 1000:6.1f})")  # fmt: skip

    a, f, b = m.archspec, m.floor, m.basemodel
    return [
        f"floor: python -c {m.statement!r}",
        f"floor (what archspec imports from pydantic and tabulate): {ms(f)}",
        f"old floor (from pydantic import BaseModel; import tabulate): {ms(b)}",
        f"archspec {' '.join(COMMAND)}: {ms(a)}   [{runs} runs each, interleaved]",
        f"ratio to the floor, paired (the median of each round's): wall {m.paired:.2f}, processor {m.paired_cpu:.2f}",
        f"ratio of the medians: wall {a.wall / f.wall:.2f} (of the minima {a.wall_min / f.wall_min:.2f}), "
        f"processor {a.cpu / f.cpu:.2f} (of the minima {a.cpu_min / f.cpu_min:.2f})",
        f"ratio to the old floor: wall {a.wall / b.wall:.2f}, processor {a.cpu / b.cpu:.2f}",
        verdict(m.paired),
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=21)
    args = ap.parse_args()
    m = measure(args.runs)
    print("\n".join(report(m, args.runs)))
    return 0 if m.paired <= BUDGET else 1


if __name__ == "__main__":
    sys.exit(run("cli_latency.py", main))
