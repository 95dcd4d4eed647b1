"""A paper's whole table of models: shared spec fields once, one row per model, the counts it prints.

A table file (``presets/tables/*.toml`` for the packaged ones; ``archspec validate TABLE`` reads
any file of this shape) looks like this::

    [table]
    title = "Pythia, Table 1"
    source = "Biderman et al. 2023, arXiv:2304.01373, Table 1"

    [defaults]                          # spec fields every row shares
    vocab_size = 50304
    max_positions = 2048

    [[rows]]
    name = "pythia-70m"                 # one name per row
    quote = "70M | 18,915,328 | 6 | 512 | 8 | ..."   # the row as the paper prints it
    decoder_layers = 6                  # the row's own spec fields (override the defaults)
    d_model = 512
    n_heads = 8
    params = "70,426,624"               # the counts it prints, as printed:
    non_embedding_params = "18,915,328" #   params, non_embedding_params, embedding_params, active_params

A printed count is text as printed, or a table with the claim's other fields
(``{ printed = "65.2B", explanation = "..." }``, ``conventions``, ``what_if`` and
``what_if_source``; see archspec.validate.claims). A row may give its own ``source`` (the table's by
default) and further claims as ``[[rows.claims]]``, in the presets' form.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from archspec.core.errors import SpecError, clip, did_you_mean, shown
from archspec.io.loading import build_spec, read_mapping
from archspec.spec.mixer_tables import over
from archspec.spec.model import ModelSpec

PRINTED_COUNTS = ("params", "non_embedding_params", "embedding_params", "active_params")
ROW_KEYS = ("name", "quote", "source", "claims", *PRINTED_COUNTS)
TOP = ("table", "defaults", "rows")


@dataclass(frozen=True)
class Row:
    """One model of a paper's table: its spec, its claims (the printed counts first) and its quote."""

    spec: ModelSpec
    claims: tuple
    quote: str
    source: str


@dataclass(frozen=True)
class PaperTable:
    """A paper's table: its title and source, and its rows in the paper's order."""

    title: str
    source: str
    rows: tuple[Row, ...]
    path: str


def is_table(data: Any) -> bool:
    return isinstance(data, dict) and "rows" in data


def _folder() -> Path:
    import importlib

    return Path(importlib.import_module("archspec.presets").DIR) / "tables"


def packaged() -> dict[str, Path]:
    """The packaged tables by name (their file's stem), sorted."""
    return {p.stem: p for p in sorted(_folder().glob("*.toml"))}


def load_table(ref: str | Path) -> PaperTable:
    """A table by packaged name or by path."""
    path = packaged().get(str(ref)) or Path(ref)
    return parse_table(read_mapping(path), str(path))


def parse_table(data: dict[str, Any], where: str) -> PaperTable:
    from archspec.validate.claims import parse_claim, parse_claims

    unknown = sorted(set(data) - set(TOP))
    if unknown:
        raise SpecError(f"{where}: unknown top-level key {shown(unknown[0])}{did_you_mean(unknown[0], TOP)}; "
                        "a table has [table], [defaults] and [[rows]]")  # fmt: skip
    head, defaults, rows = data.get("table", {}), data.get("defaults", {}), data["rows"]
    if not isinstance(head, dict) or not isinstance(defaults, dict):
        raise SpecError(f"{where}: [table] and [defaults] must be tables")
    if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
        raise SpecError(f"{where}: rows must be a non-empty array of tables ([[rows]])")
    extra = sorted(set(head) - {"title", "source"})
    if extra:
        raise SpecError(f"{where}: unknown key table.{clip(str(extra[0]), 60)}; [table] holds title and source")
    bad = [k for k in ("title", "source") if not isinstance(head.get(k, ""), str)]
    if bad:
        raise SpecError(f"{where}: table.{bad[0]} must be text")
    source = head.get("source", "")
    seen: dict[str, int] = {}
    out = []
    for i, row in enumerate(rows):
        name = row.get("name")
        at = f"{where}: rows[{i}]"
        if not isinstance(name, str) or not name:
            raise SpecError(f'{at} has no name; every row names its model (name = "...")')
        at = f"{where}: rows[{i}] ({clip(name, 60)})"
        if name in seen:
            raise SpecError(f"{at}: the name {shown(name)} is also rows[{seen[name]}]'s; each row names one model")
        seen[name] = i
        for key in ("quote", "source"):
            if not isinstance(row.get(key, ""), str):
                raise SpecError(f"{at}.{key} must be text, got {shown(row[key])}")
        row_source = row.get("source") or source
        if not row_source:
            raise SpecError(f"{at} has no source; give [table] source or the row's own")
        try:
            spec_data = over(defaults, {k: v for k, v in row.items() if k not in ROW_KEYS})
        except ValueError as err:  # the mixer under both its names
            raise SpecError(f"{at}: {err}") from None
        spec_data["name"] = name
        spec = build_spec(spec_data, at)
        claims = []
        for quantity in [k for k in row if k in PRINTED_COUNTS]:  # in the row's order, as the paper's columns
            value = row[quantity]
            if not isinstance(value, (str, dict)):
                raise SpecError(
                    f'{at}.{quantity} must be text as printed (e.g. "70,426,624" or "6.7B"), got {shown(value)}'
                )
            claim = dict(value) if isinstance(value, dict) else {"printed": value}
            if "quantity" in claim:
                raise SpecError(
                    f"{at}.{quantity}: the key names the quantity; drop quantity = {shown(claim['quantity'])}"
                )
            claims.append(parse_claim({"quantity": quantity, "source": row_source, **claim}, f"{at}.{quantity}"))
        more = row.get("claims", [])
        if not isinstance(more, list):
            raise SpecError(f"{at}.claims must be an array of tables ([[rows.claims]])")
        claims += parse_claims(
            [{"source": row_source, **c} if isinstance(c, dict) else c for c in more], f"{at}.claims"
        )
        if not claims:
            raise SpecError(f"{at} prints no count; give {', '.join(PRINTED_COUNTS[:3])} or [[rows.claims]]")
        out.append(Row(spec, tuple(claims), str(row.get("quote", "")), row_source))
    return PaperTable(str(head.get("title", Path(where).stem)), source, tuple(out), where)
