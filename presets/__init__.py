"""Preset data: one TOML file per model family, with provenance for every number.

This package holds data only; ``archspec.presets()`` (the function) lists the names and
``archspec.preset(name)`` loads one. See ``archspec/io/catalog.py`` for the format.
"""

from pathlib import Path

DIR = Path(__file__).resolve().parent


# Families in historical order; any other file follows, sorted by name.
ORDER = (
    "transformer",
    "gpt2",
    "gpt3",
    "bert",
    "t5",
    "opt",
    "bloom",
    "chinchilla",
    "palm",
    "llama",
    "falcon",
    "mistral",
    "phi",
    "qwen",
    "gemma",
    "deepseek",
)


def files() -> list[Path]:
    """The family files, in ORDER first, then the rest by name."""
    rank = {name: i for i, name in enumerate(ORDER)}
    return sorted(DIR.glob("*.toml"), key=lambda p: (rank.get(p.stem, len(ORDER)), p.name))
