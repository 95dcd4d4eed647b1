"""The one timing harness of benchmarks/: wall times of commands and callables, interleaved.

    from timing import command, interleaved       # benchmarks/ is on sys.path when a script runs

    base, ours = interleaved(21, command(BASELINE), command(ARCHSPEC))   # median seconds of each

Each candidate runs once to warm the file cache (and whatever else warms), then all run in turn,
`runs` times, so that drift of the machine hits them alike; the figures are medians. Commands run
as subprocesses from bytecode: byte_compile_archspec() compiles archspec's own modules as a wheel
install would have (pip compiled the dependencies when it installed them).
"""

from __future__ import annotations

import statistics
import subprocess
import time
from collections.abc import Callable


def command(cmd: list[str], env: dict[str, str] | None = None) -> Callable[[], None]:
    """A callable that runs `cmd` to the end (its output discarded), failing if it fails; `env`: its environment."""
    return lambda: subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)


def seconds(fn: Callable[[], object]) -> float:
    """Wall time of one call of `fn`."""
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def interleaved(runs: int, *fns: Callable[[], object], warm: bool = True) -> list[float]:
    """Median wall time of each of `fns`, timed in turn `runs` times (after one warm-up call each)."""
    if warm:
        for fn in fns:
            fn()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(runs):
        for fn, out in zip(fns, times, strict=True):
            out.append(seconds(fn))
    return [statistics.median(t) for t in times]


def byte_compile_archspec() -> None:
    import compileall
    import importlib.util

    for package in ("archspec", "archspec.presets"):
        spec = importlib.util.find_spec(package)
        for folder in spec.submodule_search_locations or []:
            compileall.compile_dir(folder, quiet=1)  # subpackages too (archspec.cli, archspec.hf), as a wheel install
