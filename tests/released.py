"""The test set's released config.json files (tests/data/hf/, sources in SOURCES.md) and the model_type
archspec reads each as, for the tests that go through them (test_hf.py, test_readme_hf_table.py)."""

from __future__ import annotations

import json
from pathlib import Path

from archspec import hf

DATA = Path(__file__).parent / "data" / "hf"


def read_as_type(raw: dict) -> str:
    """The model_type archspec reads a file as: a wrapper's text model, an alias's class's type."""
    if raw.get("model_type") in hf.WRAPPERS:
        return (raw.get("text_config") or {}).get("model_type") or hf.WRAPPERS[raw["model_type"]].text_type
    if raw.get("model_type") in hf.FAMILIES:
        return raw["model_type"]
    return hf.CLASSES[raw["architectures"][0]]  # ALBERT's hub files name only the class; kimi_k2 names DeepSeek-V3's


def file_types() -> dict[str, set[str]]:
    """model_type -> the stems of the files archspec reads as that type."""
    out: dict[str, set[str]] = {}
    for path in DATA.glob("*.json"):
        out.setdefault(read_as_type(json.loads(path.read_text())), set()).add(path.stem)
    return out
