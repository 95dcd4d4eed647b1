"""Reading spec files (.toml, .json, .yaml) and parsing command-line values."""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from archspec.errors import SpecError, describe_validation_error
from archspec.spec import ModelSpec

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

SUFFIXES = (".toml", ".json", ".yaml", ".yml")


def read_mapping(path: str | Path) -> dict[str, Any]:
    """The top-level table of a .toml, .json or .yaml file, or a SpecError naming the problem."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise SpecError(f"{path}: unsupported file type {suffix or '(none)'!r}; use .toml, .json or .yaml")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise SpecError(f"{path}: is a directory, not a spec file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"{path}: cannot read: {exc}") from None
    if not text.strip():
        raise SpecError(f"{path}: file is empty; a spec file holds the spec fields at its top level")
    data = parse_text(path, suffix, text)
    if not isinstance(data, dict):
        raise SpecError(f"{path}: the top level must be a table of spec fields, not {type(data).__name__}")
    return data


def parse_text(path: Path, suffix: str, text: str) -> Any:
    """Parse TOML, JSON or YAML (safe loading only), naming the format in the error."""
    if suffix == ".toml":
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise SpecError(f"{path}: malformed TOML: {exc}") from None
    if suffix == ".json":
        import json

        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise SpecError(f"{path}: malformed JSON: {exc}") from None
    try:
        import yaml
    except ImportError:
        raise SpecError(f"{path}: reading YAML needs PyYAML (pip install pyyaml); or use .toml or .json") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SpecError(f"{path}: malformed YAML: {' '.join(str(exc).split())}") from None


def build_spec(data: dict[str, Any], where: str = "") -> ModelSpec:
    try:
        return ModelSpec.model_validate(data)
    except ValidationError as err:
        raise SpecError(describe_validation_error(err, where)) from None


def load_spec(path: str | Path) -> ModelSpec:
    """A ModelSpec from a .toml, .json or .yaml file holding the fields at its top level, or from a
    Hugging Face config.json (a JSON object with model_type) or a folder holding one."""
    if Path(path).is_dir():
        from archspec import hf

        return hf.load_config(path)
    data = read_mapping(path)
    if Path(path).suffix.lower() == ".json" and is_hf_config(data):
        from archspec import hf

        file = Path(path)
        return build_spec(hf.from_mapping(data, hf.spec_name(file), str(file)).data, str(file))
    if "models" in data and "name" not in data:
        raise SpecError(
            f"{path}: this looks like a preset family file (it has [models]); "
            "a spec file holds one model's fields at its top level"
        )
    return build_spec(data, str(path))


def is_hf_config(data: Any) -> bool:
    """A Hugging Face config rather than a spec: a JSON object with model_type, or one that names
    `architectures` and has no spec `name` (ALBERT's files have no model_type)."""
    return isinstance(data, dict) and ("model_type" in data or ("architectures" in data and "name" not in data))


_INT = re.compile(r"^[+-]?[0-9][0-9_]*$")
_FLOAT = re.compile(r"^[+-]?([0-9][0-9_]*\.?[0-9_]*|\.[0-9_]+)([eE][+-]?[0-9]+)?$")


def parse_number(text: str, what: str = "value") -> int | float:
    """'50_257' -> 50257, '300e9' -> 300000000000 (exact int when integral), '0.4' -> 0.4."""
    s = text.strip()
    if _INT.match(s):
        return int(s.replace("_", ""))
    if _FLOAT.match(s):
        value = float(s.replace("_", ""))
        if math.isfinite(value) and value == int(value) and abs(value) < 2**63:
            # exact integer reading of '300e9' etc.
            from decimal import Decimal

            return int(Decimal(s.replace("_", "")))
        return value
    raise SpecError(f"{what}: {text!r} is not a number")


def parse_value(text: str) -> Any:
    """A --set value: a number, true/false, or a string."""
    s = text.strip()
    low = s.lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        return parse_number(s)
    except SpecError:
        return s


def parse_assignments(items: list[str] | None) -> dict[str, Any]:
    """['d_model=1024', 'bias=false'] -> {'d_model': 1024, 'bias': False}."""
    out: dict[str, Any] = {}
    for item in items or []:
        if "=" not in item:
            raise SpecError(f"--set {item!r}: expected FIELD=VALUE, e.g. --set d_model=1024")
        key, value = item.split("=", 1)
        key = key.strip()
        if not key:
            raise SpecError(f"--set {item!r}: the field name is empty; expected FIELD=VALUE")
        out[key] = parse_value(value)
    return out
