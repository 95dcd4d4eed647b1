"""What every command shares on the way out: exit codes, the one path to standard output, the
formats, the progress line and the small text helpers of the tables."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from archspec.core.errors import SpecError

EXIT_OK, EXIT_MISMATCH, EXIT_BAD_INPUT = 0, 1, 2


ROUNDING_NOTE = (
    "Counts rounded for reading (K = 10^3, M = 10^6, B = 10^9, T = 10^12); --format json gives exact integers."
)


class OutputError(Exception):
    """Standard output cannot be written (a full disk, a closed file): not the input's fault, one line."""


def emit(text: str) -> None:
    """The one way results reach standard output: written and flushed here, so that a write error is
    raised where main() can say it in one line (a closed pipe is left to main(), which ends quietly)."""
    write_stdout(text.rstrip("\n") + "\n")


def write_stdout(text: str | None) -> None:
    try:
        if text is not None:
            sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except (OSError, ValueError) as exc:  # ValueError: stdout already closed
        raise OutputError(str(exc)) from None


def render(args, objects: list[dict[str, Any]], people: Callable[[], str]) -> None:
    from archspec.render.text import to_csv, to_json

    if args.format == "json":
        try:
            text = to_json(objects)
        except ValueError as exc:  # a value that is not a finite number, which JSON cannot hold
            raise SpecError(f"a result cannot be written as JSON: {exc}") from None
        emit(text)
    elif args.format == "csv":
        emit(to_csv(objects))
    else:
        emit(people())


PROGRESS = {"live": False}


def progress_write(text: str | None) -> None:
    """Redraw the progress line on stderr (None clears it, and closes any progress bar)."""
    if text is None:
        from archspec.core.progress import close_all

        close_all()
    sys.stderr.write("\r\033[K" + (text or ""))
    sys.stderr.flush()
    PROGRESS["live"] = text is not None


def progress(items: list, label: str, describe: Callable[[Any], str] = str):
    """Yield `items`; when stderr is a terminal, a progress bar there says which item of how many runs."""
    from archspec.core.progress import bar, done, on_terminal

    if len(items) < 2 or not on_terminal():
        yield from items
        return
    b = bar(len(items), label)
    PROGRESS["live"] = True
    try:
        for item in items:
            b.set_postfix_str(describe(item), refresh=False)
            yield item
            b.update(1)
    finally:
        done(b)
        PROGRESS["live"] = False


def progress_callback(label: str) -> Callable[[int, int], None] | None:
    """A (done, total) callback for library loops, drawing a progress bar on a terminal; else None."""
    from archspec.core.progress import bar, done, on_terminal

    if not on_terminal():
        return None
    drawn: list = []

    def show(n: int, total: int) -> None:
        if not drawn:
            drawn.append(bar(total, label))
            PROGRESS["live"] = True
        drawn[0].update(n - drawn[0].n)
        if n >= total:
            done(drawn[0])
            PROGRESS["live"] = False

    return show


def fmt_value(v: Any) -> str:
    """A value as a spec file writes it: true/false, null, inline tables {key = value} without the
    fields left unset, lists in brackets."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {fmt_value(x)}" for k, x in v.items() if x is not None) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(fmt_value(x) for x in v) + "]"
    if isinstance(v, str) and v not in ("none",) and " " in v:
        return repr(v)
    return str(v)


def layers_of(spec) -> str:
    if spec.kind == "encoder-decoder":
        return f"{spec.encoder_layers} enc + {spec.decoder_layers} dec"
    return str(spec.encoder_layers or spec.decoder_layers)


def heads_of(spec) -> str:
    return str(spec.n_heads) if spec.n_kv_heads == spec.n_heads else f"{spec.n_heads} (kv {spec.n_kv_heads})"


def by_kind(kinds: dict[str, dict[str, int]], key: str, fmt: Callable[[Any], str], label: str) -> list[str]:
    """One line for a heterogeneous stack: each kind's layers and its figure for one layer (nothing when
    every layer of each stack is alike)."""
    stacks: dict[str, list[str]] = {}
    for name, row in kinds.items():
        stack, _, kind = name.partition(".")
        stacks.setdefault(stack, []).append(f"{row['layers']:,} x {kind} {fmt(row[key])}")
    shown_ = [f"{stack}: {', '.join(rows)}" for stack, rows in stacks.items() if len(rows) > 1]
    return [f"{label}: {'; '.join(shown_)}"] if shown_ else []


def fraction(x):
    """An exact rational from an int, a Fraction or a float (by its shortest decimal form)."""
    from fractions import Fraction

    return Fraction(repr(x)) if isinstance(x, float) else Fraction(x)


def check_writable(path, what: str) -> None:
    """Refuse, before any work, an output file that cannot be written: one that exists read-only, or a folder
    that takes no new file (a temporary one is made and removed there, so that what the mode bits do not
    show, a read-only or special file system, or a user for whom every bit is open, is found too)."""
    import os
    import tempfile
    from pathlib import Path

    path = Path(path)
    if path.exists() and not os.access(path, os.W_OK):
        raise SpecError(f"{what}: cannot write there (permission denied)")
    try:
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".archspec-"):
            pass
    except OSError as exc:
        raise SpecError(f"{what}: cannot write in {str(path.parent)!r}: {exc.strerror or exc}") from None
