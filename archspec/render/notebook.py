"""Results in the tools people use: a pandas DataFrame (``to_pandas``) and a table in Jupyter
(``_repr_html_`` of counts, FLOPs, memory estimates, comparisons and sweeps).

The results stay plain records (``to_dict()``); these are views of them. pandas is the optional extra
``archspec-transformers[pandas]``, imported only by ``to_pandas``. Exact integers too large for int64
(the FLOPs of a large training run) stay Python ints, in a column of dtype object.
"""

from __future__ import annotations

import html
import itertools
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

SWEEP_SHOWN = 20  # rows of a sweep that its notebook table shows (to_pandas() has them all)


def record_of(result: Any) -> dict[str, Any]:
    """A result (anything with to_dict(), or a dict) as one flat record: nested dicts become
    'parent.child' keys, as the CSV output writes them."""
    from archspec.render.text import _flatten

    if isinstance(result, Mapping):
        data = dict(result)
    elif callable(getattr(result, "to_dict", None)):
        data = result.to_dict()
    else:
        raise TypeError(f"to_pandas: expected archspec results (count_params(...), estimate_memory(...), ...) or "
                        f"dicts, got {type(result).__name__}")  # fmt: skip
    return _flatten(data)


def to_pandas(results: Any, columns: list[str] | None = None):
    """A pandas DataFrame with one row per result: a sweep's rows, or a list of results (each flattened
    to 'parent.child' columns: components.attention, ...)."""
    if isinstance(results, Mapping) or callable(getattr(results, "to_dict", None)):
        results = [results]
    if isinstance(results, str | bytes) or not isinstance(results, Iterable):
        raise TypeError(f"to_pandas: expected a sweep or a list of results, got {type(results).__name__}")
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("to_pandas needs pandas: pip install 'archspec-transformers[pandas]'") from None
    rows = [record_of(r) for r in results]
    frame = pd.DataFrame.from_records(rows, columns=columns)
    return frame


def _cell(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return html.escape(str(value))
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, Fraction):
        return f"{value.numerator:,}" if value.denominator == 1 else html.escape(f"{float(value):,.6g}")
    if isinstance(value, float):
        return html.escape(f"{value:,.6g}")
    return html.escape(str(value))


def _table(headers: list[str], rows: Iterable[list[Any]], caption: str) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{_cell(v)}</td>" for v in row) + "</tr>" for row in rows)
    return (f"<table><caption>{html.escape(caption)}</caption><thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table>")  # fmt: skip


def result_html(result: Any) -> str:
    """One result as a two-column table of its record (exact integers, with thousands separators)."""
    rec = record_of(result)
    title = f"{type(result).__name__} of {rec['name']}" if "name" in rec else type(result).__name__
    return _table(["", "value"], ([k, v] for k, v in rec.items() if k != "name"), title)


def sweep_html(sweep: Any) -> str:
    """A sweep's first rows as a table (it streams: the rest is made only when asked, by to_pandas())."""
    columns = sweep.columns
    rows = [[row.get(c) for c in columns] for row in itertools.islice(iter(sweep), SWEEP_SHOWN)]
    caption = (f"sweep of {sweep.spec.name}: {sweep.n_combinations:,} combinations; the first "
               f"{len(rows)} rows (to_pandas() for all)")  # fmt: skip
    return _table(columns, rows, caption)
