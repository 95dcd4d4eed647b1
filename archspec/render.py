"""Rendering rows for people (table, markdown) and for scripts (json, csv). No spec logic here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

FORMATS = ("table", "markdown", "json", "csv")

_SUFFIXES = ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K"))


def human(n: int | float, digits: int = 1) -> str:
    """124439808 -> '124.4M', 174604259328 -> '174.6B', 512 -> '512'."""
    for scale, suffix in _SUFFIXES:
        if abs(n) >= scale:
            return f"{n / scale:.{digits}f}{suffix}"
    return f"{n:,}" if isinstance(n, int) else f"{n:.{digits}f}"


def human_sig(n: int | float, sig: int = 4) -> str:
    """Four significant figures: 1517123584 -> '1.517B', 124439808 -> '124.4M'."""
    for scale, suffix in _SUFFIXES:
        if abs(n) >= scale:
            v = n / scale
            decimals = max(0, sig - len(str(int(abs(v)))))
            return f"{v:.{decimals}f}{suffix}"
    return f"{n:,}"


def human_bytes(n: int | float) -> str:
    """Binary units: 1,610,612,736 -> '1.50 GiB'."""
    units = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
    value, i = float(n), 0
    while abs(value) >= 1024 and i < len(units) - 1:
        value /= 1024
        i += 1
    return f"{value:g} B" if i == 0 else f"{value:.2f} {units[i]}"


def sci(x: int | float, digits: int = 3) -> str:
    """3.1428e23 -> '3.14e+23'."""
    return f"{float(x):.{digits - 1}e}"


def exact(n: int) -> str:
    return f"{n:,}"


def pct(x: float, digits: int = 1) -> str:
    return f"{100 * x:.{digits}f}%"


def signed_pct(x: float, digits: int = 2) -> str:
    return f"{100 * x:+.{digits}f}%"


def table(rows: Sequence[Sequence[Any]], headers: Sequence[str], fmt: str, colalign=None) -> str:
    """A table for people: 'table' is plain text, 'markdown' a GitHub pipe table."""
    from tabulate import tabulate

    style = "github" if fmt == "markdown" else "simple"
    kw = {"disable_numparse": True}
    if colalign:
        kw["colalign"] = colalign
    return tabulate([list(r) for r in rows], headers=list(headers), tablefmt=style, **kw)


def to_json(objects: list[dict[str, Any]]) -> str:
    import json

    return json.dumps(objects, indent=2)


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
