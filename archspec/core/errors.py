"""One exception type for bad input, with a one-line message the CLI prints as is."""

from __future__ import annotations

import re
import reprlib
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from archspec.core.limits import ECHO_CHARS, digits_of


class SpecError(ValueError):
    """Bad input: an unknown preset, an invalid field, a malformed file, a bad option."""


class NoAdapter(SpecError):
    """A Hugging Face config whose model_type has no adapter: there is no spec, but transformers (when
    installed) can build and measure the model (archspec.reference.hf_fallback). Carries the file's object."""

    def __init__(self, message: str, raw: dict, name: str, where: str):
        super().__init__(message)
        self.raw, self.name, self.where = raw, name, where


class _Repr(reprlib.Repr):
    """reprlib with small limits, and integers shown by size beyond a few dozen digits (repr of a
    huge integer costs quadratic time and fails beyond 4,300 digits)."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel, self.maxdict, self.maxlist, self.maxtuple, self.maxset = 3, 4, 4, 4, 4
        self.maxstring, self.maxother = ECHO_CHARS, ECHO_CHARS

    def repr_int(self, x: int, level: int) -> str:
        digits = digits_of(x)
        return repr(x) if digits <= 40 else f"<an integer of {digits:,} digits>"


_REPR = _Repr()


def shown(value: Any, limit: int = ECHO_CHARS) -> str:
    """repr(value) for a message, at most `limit` characters, in time that does not grow with the value."""
    if isinstance(value, str):
        text = repr(value[: limit + 1])
    else:
        try:
            text = _REPR.repr(value)
        except Exception:  # a value whose repr fails: say what it is
            text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def clip(text: str, limit: int = ECHO_CHARS) -> str:
    """Plain text for a message, at most `limit` characters."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


# patterns are compiled on first use (re caches them), not by every start-up: most commands never need them
_LONG_DIGITS = r"[0-9]{41,}"


def one_line(message: str, limit: int = 1000) -> str:
    """A message on one line, long digit runs shortened, at most `limit` characters."""
    text = " ".join(message.split())
    text = re.sub(_LONG_DIGITS, lambda m: f"{m.group()[:8]}...({len(m.group()):,} digits)", text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def closest(word: str, choices: Iterable[str], n: int = 3) -> list[str]:
    if not isinstance(word, str) or len(word) > 200:
        return []
    import difflib  # only on the error path

    by_lower: dict[str, str] = {}
    for choice in choices:  # case does not hide a match: 'GPT2' is close to 'gpt2'
        by_lower.setdefault(choice.lower(), choice)
    return [by_lower[m] for m in difflib.get_close_matches(word.lower(), list(by_lower), n=n, cutoff=0.5)]


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    near = closest(word, choices)
    return f"; did you mean {' or '.join(repr(c) for c in near)}?" if near else ""


def describe_validation_error(
    err: ValidationError,
    where: str = "",
    fields: Iterable[str] = (),
    unions: Mapping[str, Iterable[str]] = {},
    written: Mapping[str, str] = {},
) -> str:
    """pydantic's multi-line report as one line: 'where: field: problem (got value)'. `fields`: the
    model's field names (an unknown one gets a suggestion); `unions`: field -> the kinds of its tagged
    union, whose tag pydantic writes into the location ('mlp.moe.experts' is shown as 'mlp.experts');
    `written`: field -> the name the input gave it (an older name), shown instead."""
    fields = list(fields)
    parts = []
    either = set()  # fields given as one of two forms (bias: a bool or a table), reported once
    for e in err.errors(include_url=False):
        if len(e["loc"]) >= 2 and e["loc"][0] == "bias" and e["loc"][1] in ("bool", "Biases"):
            if len(e["loc"]) == 2:
                if "bias" not in either:
                    either.add("bias")
                    parts.append(f"bias: Input should be a valid boolean or a table {{qkv, out, mlp}} "
                                 f"(got {shown(e.get('input'))})")  # fmt: skip
                continue
            e = {**e, "loc": ("bias", *e["loc"][2:])}  # a field of the table
        if len(e["loc"]) >= 2 and e["loc"][0] in unions and e["loc"][1] in unions[e["loc"][0]]:
            e = {**e, "loc": (e["loc"][0], *e["loc"][2:])}  # 'mlp.moe.experts' -> 'mlp.experts'
        if e["loc"] and e["loc"][0] in written:
            e = {**e, "loc": (written[e["loc"][0]], *e["loc"][1:])}
        loc = ".".join(clip(str(p)) for p in e["loc"])
        msg = e["msg"]
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
        kind = e["type"]
        if kind == "default_factory_not_called":  # a consequence of another field's error
            continue
        if kind == "union_tag_invalid":
            ctx = e.get("ctx", {})
            parts.append(f"{loc}: unknown kind {shown(ctx.get('tag'))}; use one of {ctx.get('expected_tags')}")
        elif kind == "union_tag_not_found":
            parts.append(f"{loc}: a table here needs a 'kind' (or give the kind as a string)")
        elif kind == "extra_forbidden":
            parts.append(f"unknown field {loc!r}{did_you_mean(loc, fields)}")
        elif kind == "missing":
            parts.append(f"missing required field {loc!r}")
        elif loc and kind == "value_error" and isinstance(e.get("input"), dict):  # a table's rule names its values
            parts.append(f"{loc}: {msg}")
        elif kind == "literal_error" or loc:
            parts.append(f"{loc}: {msg} (got {shown(e.get('input'))})")
        else:
            parts.append(msg)
    prefix = f"{where}: " if where else ""
    return one_line(prefix + "; ".join(parts))
