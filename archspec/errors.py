"""One exception type for bad input, with a one-line message the CLI prints as is."""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import ValidationError


class SpecError(ValueError):
    """Bad input: an unknown preset, an invalid field, a malformed file, a bad option."""


def closest(word: str, choices: Iterable[str], n: int = 3) -> list[str]:
    import difflib  # only on the error path

    return difflib.get_close_matches(word, list(choices), n=n, cutoff=0.5)


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    near = closest(word, choices)
    return f"; did you mean {' or '.join(repr(c) for c in near)}?" if near else ""


def describe_validation_error(err: ValidationError, where: str = "") -> str:
    """pydantic's multi-line report as one line: 'where: field: problem (got value)'."""
    from archspec.spec import ModelSpec

    fields = list(ModelSpec.model_fields)
    parts = []
    for e in err.errors(include_url=False):
        loc = ".".join(str(p) for p in e["loc"])
        msg = e["msg"]
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
        kind = e["type"]
        if kind == "default_factory_not_called":  # a consequence of another field's error
            continue
        if kind == "union_tag_invalid":
            ctx = e.get("ctx", {})
            parts.append(f"{loc}: unknown kind {ctx.get('tag')!r}; use one of {ctx.get('expected_tags')}")
        elif kind == "union_tag_not_found":
            parts.append(f"{loc}: a table here needs a 'kind' (or give the kind as a string)")
        elif kind == "extra_forbidden":
            parts.append(f"unknown field {loc!r}{did_you_mean(loc, fields)}")
        elif kind == "missing":
            parts.append(f"missing required field {loc!r}")
        elif kind == "literal_error" or loc:
            parts.append(f"{loc}: {msg} (got {e.get('input')!r})")
        else:
            parts.append(msg)
    prefix = f"{where}: " if where else ""
    return prefix + "; ".join(parts)
