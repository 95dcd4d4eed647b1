"""Writing a spec back out as a spec file (TOML, JSON or YAML): what `archspec import` prints.

Only the fields that change the spec are written, so a file reads like one written by hand: a
given field, or a key of a sub-table, that equals what the spec resolves to without it is left
out, and a sub-table left with its `kind` alone becomes the bare string (``position = "rotary"``).
The file loads back to an equal spec; the tests hold every imported config to that.
"""

from __future__ import annotations

import json
import math
from typing import Any

from pydantic import BaseModel, ValidationError

from archspec.core.errors import SpecError
from archspec.spec.model import ModelSpec, _Member

SUFFIXES = (".toml", ".json", ".yaml", ".yml")


def _plain(value: Any) -> Any:
    """A sub-table member as the dict a file would hold: its kind and the keys that were given (a table
    of tables, such as [kinds], table by table)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, BaseModel):
        dumped = value.model_dump(exclude_unset=True)  # a member of defaults only dumps as its kind
        if isinstance(dumped, dict) and hasattr(value, "kind"):
            dumped = {"kind": value.kind, **dumped}
        return dumped
    if isinstance(value, dict):  # kinds: a table of LayerKind tables
        return {k: _plain(v) for k, v in value.items()}
    return value


def _resolves_to(data: dict[str, Any], target: dict[str, Any]) -> bool:
    try:
        return ModelSpec.model_validate(data).resolved() == target
    except ValidationError:
        return False


def essential(spec: ModelSpec) -> dict[str, Any]:
    """The spec's given fields, less those that equal what the spec resolves to without them."""
    target = spec.resolved()
    given = spec.given()
    data = {k: _plain(v) for k, v in given.items()}
    for key in list(data):
        if key == "name":
            continue
        value = data[key]
        if isinstance(value, dict):
            # a member's `kind` is its tag and stays; a plain table's `kind` (mtp.kind) is a field like another
            tag = ("kind",) if isinstance(given[key], _Member) else ()
            for sub in [k for k in value if k not in tag]:
                trial = {**data, key: {k: v for k, v in value.items() if k != sub}}
                if _resolves_to(trial, target):
                    data, value = trial, trial[key]
            if list(value) == ["kind"] and _resolves_to({**data, key: value["kind"]}, target):
                data[key] = value["kind"]
        trial = {k: v for k, v in data.items() if k != key}
        if _resolves_to(trial, target):
            data = trial
    return data


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # JSON's escapes are TOML basic-string escapes
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        if not value:
            return "{}"
        return "{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise SpecError(f"cannot write {value!r} ({type(value).__name__}) to TOML")


def to_toml(data: dict[str, Any], comments: list[str] = ()) -> str:
    """Flat fields first, then each sub-table as a [section]."""
    lines = [f"# {c}" for c in comments] + ([""] if comments else [])
    lines += [f"{k} = {_toml_value(v)}" for k, v in data.items() if not isinstance(v, dict)]
    for key, table in data.items():
        if isinstance(table, dict):
            lines += ["", f"[{key}]"] + [f"{k} = {_toml_value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


def dump(data: dict[str, Any], suffix: str = ".toml", comments: list[str] = ()) -> str:
    """Spec data as the text of a .toml, .json or .yaml file (comments only in TOML and YAML)."""
    suffix = suffix.lower()
    if suffix == ".toml":
        return to_toml(data, comments)
    if suffix == ".json":
        return json.dumps(data, indent=2) + "\n"
    if suffix in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise SpecError("writing YAML needs PyYAML (pip install pyyaml); or write .toml or .json") from None
        head = "".join(f"# {c}\n" for c in comments)
        return head + yaml.safe_dump(data, sort_keys=False)
    raise SpecError(f"unsupported spec file type {suffix or '(none)'!r}; use .toml, .json or .yaml")
