"""Progress bars for long runs (a sweep, `verify` of many presets): tqdm on standard error.

The command line draws one only when standard error is a terminal; a script asks for one
(``archspec.sweep(..., progress=True)``). tqdm is imported when a bar is drawn, never by ``import archspec``.
"""

from __future__ import annotations

import sys
from typing import Any

LIVE: list[Any] = []  # the bars drawn now, closed by close_all() before an error line is written


def on_terminal() -> bool:
    """stderr is a terminal that redraws a line (not TERM=dumb, which shows escape codes as they are)."""
    import os

    if os.environ.get("TERM") == "dumb":
        return False
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # no stderr, or a closed one
        return False


def bar(total: int, label: str) -> Any:
    """A tqdm bar of `total` steps on stderr, labelled; close it with done(bar)."""
    from tqdm import tqdm

    b = tqdm(total=total, desc=label, file=sys.stderr, leave=False, dynamic_ncols=True, mininterval=0.25)
    LIVE.append(b)
    return b


def done(b: Any) -> None:
    b.close()
    if b in LIVE:
        LIVE.remove(b)


def close_all() -> None:
    for b in list(LIVE):
        done(b)
