"""Rendering rows for people (table, markdown) and for scripts (json, csv). No spec logic here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

FORMATS = ("table", "markdown", "json", "csv")

_SUFFIXES = ((10**12, "T"), (10**9, "B"), (10**6, "M"), (10**3, "K"))
_SCI_FROM = 10**15  # beyond 1000T, scientific notation reads better than a long run of digits

# Numbers arrive as exact ints and Fractions (counts, FLOPs, bytes, per-token figures) or as floats
# (ratios). Exact ones are never converted to a float whole: a float ends at about 1.8e308, and
# counts can go beyond it. A quotient small enough to be a float is computed exactly, then rounded.


def _small(x) -> float:
    """x as a float, for a value known to be far inside the float range."""
    return x if isinstance(x, float) else float(x)


def human(n, digits: int = 1) -> str:
    """124439808 -> '124.4M', 174604259328 -> '174.6B', 512 -> '512', 3e21 -> '3.00e+21'."""
    if abs(n) >= _SCI_FROM:
        return sci(n, digits + 2)
    for scale, suffix in _SUFFIXES:
        if abs(n) >= scale:
            return f"{_small(n / scale):.{digits}f}{suffix}"
    if isinstance(n, int) or (not isinstance(n, float) and n == int(n)):
        return f"{int(n):,}"
    return f"{_small(n):.{digits}f}"


def human_sig(n, sig: int = 4) -> str:
    """Four significant figures: 1517123584 -> '1.517B', 124439808 -> '124.4M'."""
    if abs(n) >= _SCI_FROM:
        return sci(n, sig)
    for scale, suffix in _SUFFIXES:
        if abs(n) >= scale:
            v = _small(n / scale)
            decimals = max(0, sig - len(str(int(abs(v)))))
            return f"{v:.{decimals}f}{suffix}"
    return f"{n:,}" if isinstance(n, int) else f"{_small(n):.{sig}g}"


_BINARY = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB")


def human_bytes(n) -> str:
    """Binary units: 1,610,612,736 -> '1.50 GiB'; beyond YiB, '1.23e+30 B'."""
    a, i = abs(n), 0
    while a >= 1024 ** (i + 1) and i < len(_BINARY) - 1:
        i += 1
    if i == len(_BINARY) - 1 and a >= 1024 ** (i + 1):
        return f"{sci(n)} B"
    value = _small(n / 1024**i) if i else _small(n)
    return f"{value:g} B" if i == 0 else f"{value:.2f} {_BINARY[i]}"


def sci(x, digits: int = 3) -> str:
    """3.1428e23 -> '3.14e+23', exactly rounded for ints and Fractions of any size."""
    if isinstance(x, float):
        return f"{x:.{digits - 1}e}"
    if not isinstance(x, int):
        if abs(x) < 10**300:
            return f"{float(x):.{digits - 1}e}"
        x = round(x)
    if x == 0:
        return f"{0.0:.{digits - 1}e}"
    sign, n = ("-" if x < 0 else ""), abs(x)
    from archspec.core.limits import digits_of

    e = digits_of(n) - 1
    shift = e - (digits - 1)
    m = _round_half_even(n, 10**shift) if shift >= 0 else n * 10**-shift
    if m >= 10**digits:  # rounding carried into a new digit: 9.995e5 -> 1.00e6
        m, e = m // 10, e + 1
    text = str(m)
    mantissa = text[0] + ("." + text[1:] if digits > 1 else "")
    return f"{sign}{mantissa}e{'+' if e >= 0 else '-'}{abs(e):02d}"


def _round_half_even(a: int, b: int) -> int:
    q, r = divmod(a, b)
    if 2 * r > b or (2 * r == b and q % 2):
        q += 1
    return q


def fixed(x, digits: int = 1) -> str:
    """A number with thousands separators and `digits` decimals ('1,234.5'); scientific beyond 1e15."""
    if abs(x) >= _SCI_FROM:
        return sci(x, digits + 3)
    return f"{_small(x):,.{digits}f}"


def exact(n: int) -> str:
    return f"{n:,}"


def pct(x, digits: int = 1) -> str:
    if abs(x) >= _SCI_FROM:
        return f"{sci(100 * x)}%"
    return f"{100 * _small(x):.{digits}f}%"


def signed_pct(x, digits: int = 2) -> str:
    if abs(x) >= _SCI_FROM:
        return f"{'+' if x > 0 else ''}{sci(100 * x)}%"
    return f"{100 * _small(x):+.{digits}f}%"


def terminal_width() -> int | None:
    """The terminal's width in columns when standard output is a terminal; None when it is piped or
    redirected (tables are then printed at full width, for files and scripts)."""
    import shutil
    import sys

    try:
        if not sys.stdout.isatty():
            return None
    except (AttributeError, ValueError):  # a closed or replaced stream
        return None
    return shutil.get_terminal_size().columns


def colour_enabled(stream=None) -> bool:
    """Colour only on a terminal that shows it: never when NO_COLOR is set to anything but '' (no-color.org),
    nor when TERM is 'dumb' (a terminal that shows no escape codes)."""
    import os
    import sys

    stream = sys.stdout if stream is None else stream
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


BOLD, RED, GREEN, RESET = "\033[1m", "\033[31m", "\033[32m", "\033[0m"


def paint(text: str, colour: str) -> str:
    """`text` in `colour` (an ANSI code above) when colour is enabled; `text` unchanged otherwise."""
    return f"{colour}{text}{RESET}" if text and colour_enabled() else text


def table(rows: Sequence[Sequence[Any]], headers: Sequence[str], fmt: str, colalign=None,
          width: int | None = None, transpose: bool = False) -> str:  # fmt: skip
    """A table for people: 'table' is plain text, 'markdown' a GitHub pipe table.

    A plain-text table wider than the terminal (`width`, default: the terminal's when standard output is
    one) wraps its headers and cells at spaces; when even that does not fit, each row becomes a block of
    `header: value` lines. With `transpose` (rows that are records side by side, their first cell the
    name), a table too wide is first turned: headers as rows, one column per record, as many records
    side by side as the width holds. Piped output keeps its full width. On a terminal, headers are bold."""
    from tabulate import tabulate

    style = "github" if fmt == "markdown" else "simple"
    kw = {"disable_numparse": True}
    if colalign:
        kw["colalign"] = colalign
    body = [[str(c) for c in r] for r in rows]
    heads = [str(h) for h in headers]
    text = tabulate(body, headers=heads, tablefmt=style, **kw)
    if fmt != "table":
        return text
    width = terminal_width() if width is None else width
    if width and _widest(text) > width and transpose and body:
        turned = _turned(body, heads, width)
        if turned is not None:
            return turned
    if width and _widest(text) > width:
        limits = _column_limits(body, heads, width)
        if limits is not None:  # wrapped here: tabulate's own wrapping reads "1,555" as an int and fails
            text = tabulate([_wrap_cells(r, limits) for r in body], headers=_wrap_cells(heads, limits),
                            tablefmt=style, **kw)  # fmt: skip
        if limits is None or _widest(text) > width:
            return _records(body, heads)
    return _bold_headers(text) if colour_enabled() else text


def _turned(rows: list[list[str]], headers: list[str], width: int) -> str | None:
    """The records of `rows` as columns beside a column of the headers, in groups as wide as `width` holds
    (one table per group, a blank line between); None when not even one record fits beside the headers."""
    from tabulate import tabulate

    def turned(group: list[list[str]]) -> str:
        body = [[h, *(r[i] for r in group)] for i, h in enumerate(headers[1:], start=1)]
        return tabulate(body, headers=[headers[0], *(r[0] for r in group)], tablefmt="simple", disable_numparse=True)

    tables, group = [], []
    for row in rows:
        if group and _widest(turned([*group, row])) > width:
            tables.append(turned(group))
            group = []
        group.append(row)
    tables.append(turned(group))
    if any(_widest(t) > width for t in tables):
        return None
    bold = colour_enabled()
    return "\n\n".join(_bold_headers(t) if bold else t for t in tables)


def wrapped(text: str, width: int | None = None) -> str:
    """`text` with each line wrapped at spaces to `width` (default: the terminal's when standard output is
    one; piped output keeps its lines whole)."""
    import textwrap

    width = terminal_width() if width is None else width
    if not width:
        return text
    return "\n".join(textwrap.fill(line, width, break_on_hyphens=False) if line else line
                     for line in text.split("\n"))  # fmt: skip


def _widest(text: str) -> int:
    return max((len(line) for line in text.splitlines()), default=0)


def _column_limits(rows: list[list[str]], headers: list[str], width: int) -> list[int] | None:
    """Column widths that fit `width` (two spaces between columns), each no narrower than its longest
    word; None when even the narrowest layout is too wide."""
    cols = range(len(headers))
    cells = [[headers[j], *(r[j] for r in rows)] for j in cols]
    natural = [max(len(line) for c in col for line in c.splitlines() or [""]) for col in cells]
    floor = [max((len(w) for c in col for w in c.split()), default=1) for col in cells]
    budget = width - 2 * (len(headers) - 1)
    if sum(floor) > budget:
        return None
    limits = list(natural)
    while sum(limits) > budget:
        j = max(cols, key=lambda j: limits[j] - floor[j])  # the column with the most room to give
        limits[j] -= 1
    return limits


def _wrap_cells(cells: list[str], limits: list[int]) -> list[str]:
    """Each cell wrapped at spaces to its column's limit (a word longer than the limit is broken)."""
    import textwrap

    def wrap(cell: str, limit: int) -> str:
        if all(len(line) <= limit for line in cell.splitlines()):
            return cell
        return "\n".join(w for line in cell.splitlines() if line.strip() for w in textwrap.wrap(line, limit))

    return [wrap(c, n) for c, n in zip(cells, limits)]


def _records(rows: list[list[str]], headers: list[str]) -> str:
    """The narrow layout: one block per row, `header: value` per line."""
    pad = max(len(h) for h in headers)
    bold = colour_enabled()
    return "\n\n".join(
        "\n".join(f"{BOLD}{h.ljust(pad)}{RESET}  {v}" if bold else f"{h.ljust(pad)}  {v}" for h, v in zip(headers, r))
        for r in rows
    )


def _bold_headers(text: str) -> str:
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line and set(line) <= {"-", " "}:  # the rule under the headers
            return "\n".join([*(f"{BOLD}{h}{RESET}" for h in lines[:i]), *lines[i:]])
    return text


def to_json(objects: list[dict[str, Any]]) -> str:
    """JSON as the standard defines it: a value that is not a finite number is an error (ValueError),
    never an Infinity or NaN in the output."""
    import json

    return json.dumps(objects, indent=2, allow_nan=False)


def to_csv(objects: list[dict[str, Any]]) -> str:
    """Flat CSV: nested dicts become 'parent.child' columns."""
    import csv
    import io

    flat = [_flatten(o) for o in objects]
    columns: list[str] = []
    for row in flat:
        for k in row:
            if k not in columns:
                columns.append(k)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for row in flat:
        writer.writerow(row)
    return buf.getvalue().rstrip("\n")


def _flatten(obj: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in obj.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        elif isinstance(v, list):
            import json

            out[key] = json.dumps(v)
        else:
            out[key] = v
    return out
