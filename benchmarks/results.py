"""benchmarks/RESULTS.md: each script's latest figures, in a section of its own.

    from results import run                       # benchmarks/ is on sys.path when a script runs

    if __name__ == "__main__":
        sys.exit(run("depth.py", main))

`run` copies what the script prints while it runs (it still prints it) and then rewrites the
script's own section of RESULTS.md, and nothing else: the command as run, the machine, the date, the
commit of the tree, the exit code and the printed figures. The file keeps the latest figures of each
script; their history is the file's history.
"""

from __future__ import annotations

import contextlib
import datetime
import io
import os
import platform
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

RESULTS = Path(__file__).with_name("RESULTS.md")
HEADER = """# Benchmark results

The latest figures of each script in `benchmarks/`, written by the script itself when it runs
(`benchmarks/results.py` rewrites the script's own section): the machine, the date and what the script
printed. What each script measures and its budget: `docs/benchmarks.md`. Older figures are in the
history of this file.
"""


def _first(path: str, key: str) -> str | None:
    with contextlib.suppress(OSError):
        for line in Path(path).read_text().splitlines():
            if line.startswith(key):
                return line.split(":", 1)[1].strip()
    return None


def machine() -> str:
    """One line: the processor, its cores, the memory, the system and Python."""
    cpu = _first("/proc/cpuinfo", "model name") or platform.processor() or platform.machine()
    memory = _first("/proc/meminfo", "MemTotal")
    gib = f", {int(memory.split()[0]) / 2**20:.0f} GiB memory" if memory else ""
    load = f", load {os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else ""
    return (f"{cpu}, {os.cpu_count()} cores{gib}{load}; {platform.system()} {platform.release()}; "
            f"Python {platform.python_version()}")  # fmt: skip


def commit() -> str:
    """The tree's commit (with `+` when it has uncommitted changes), or `unknown` outside git."""
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()  # fmt: skip
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+" if dirty else "")


def section(script: str, argv: list[str], output: str, code: int, when: datetime.datetime) -> str:
    command = " ".join(["python", f"benchmarks/{script}", *argv])
    return (
        f"## {script}\n\n"
        f"`{command}`, {when:%Y-%m-%d %H:%M} UTC, commit {commit()}, exit code {code}  \n"
        f"{machine()}\n\n"
        f"```text\n{output.rstrip()}\n```\n"
    )


def sections(text: str) -> dict[str, str]:
    """The file's sections by script name (each from its `## name` line to the next)."""
    parts = re.split(r"^(?=## )", text, flags=re.M)
    return {p.split("\n", 1)[0][3:].strip(): p.rstrip() + "\n" for p in parts if p.startswith("## ")}


def write(script: str, new_section: str, path: Path = RESULTS) -> None:
    """Rewrite `path` with `script`'s section replaced (or added); every other section as it was."""
    found = sections(path.read_text(encoding="utf-8")) if path.exists() else {}
    found[script] = new_section
    path.write_text(HEADER + "".join("\n" + found[name] for name in sorted(found)), encoding="utf-8")


class _Tee(io.TextIOBase):
    def __init__(self, stream):
        self.stream, self.copy = stream, io.StringIO()

    def write(self, s: str) -> int:
        self.copy.write(s)
        return self.stream.write(s)

    def flush(self) -> None:
        self.stream.flush()


def run(script: str, main: Callable[[], int | None], path: Path = RESULTS) -> int:
    """Run `main()`, printing as usual; then write what it printed into `script`'s section of `path` and
    return its exit code. A run that ends otherwise (--help, a usage error, an exception) writes nothing."""
    tee, stdout = _Tee(sys.stdout), sys.stdout
    when = datetime.datetime.now(datetime.timezone.utc)
    sys.stdout = tee
    try:
        code = main() or 0
    finally:
        sys.stdout = stdout
    write(script, section(script, sys.argv[1:], tee.copy.getvalue(), code, when), path)
    return code
