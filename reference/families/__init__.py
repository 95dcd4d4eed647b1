"""The transformers classes the reference model is checked against, one ``Checkpoint`` entry each.

An entry is the spec -> config direction of archspec.hf's adapter of the same ``model_type``: the
adapter's key maps (spec field <-> config key) and fixed values are read backwards (engine.py), and
the entry adds what only this direction needs: what the class cannot represent (``needs`` and
``relations``, each refusal naming its field), the config keys that need arithmetic (``config``), and
how its state dict fills the reference model (``weights``: weight maps as tables, one per checkpoint
layout, transformers 5's first; see archspec.reference.weights). Grouped by lineage as archspec.hf is:
``gpt``, ``llama``, ``gemma``, ``encoders``, ``t5``, ``hybrids``.

Where a family's default computation differs from what a spec can say, the config asks for the
spec's: exact GELU where GPT-2, Gemma 2 and T5 v1.1 default to its tanh approximation, no dropout.
"""

from __future__ import annotations

from archspec.reference.families import encoders, gemma, gpt, hybrids, llama, t5
from archspec.reference.families.engine import ACT, GATED, NON_GATED, Checkpoint, Need

__all__ = ["ACT", "CHECKPOINTS", "GATED", "LINEAGES", "NON_GATED", "Checkpoint", "Need", "checkpoint"]

LINEAGES = (gpt, llama, encoders, gemma, hybrids, t5)

CHECKPOINTS: dict[str, Checkpoint] = {}
for _c in (c for lineage in LINEAGES for c in lineage.CHECKPOINTS):
    if _c.name in CHECKPOINTS or any(c.model_type == _c.model_type for c in CHECKPOINTS.values()):
        raise RuntimeError(f"checkpoint {_c.name!r} ({_c.model_type}) registered twice")  # pragma: no cover
    CHECKPOINTS[_c.name] = _c


def checkpoint(name: str) -> Checkpoint:
    """A checkpoint entry by its name ('GPT-2') or transformers model_type ('gpt2')."""
    for c in CHECKPOINTS.values():
        if name in (c.name, c.model_type):
            return c
    known = ", ".join(f"{c.name} ({c.model_type})" for c in CHECKPOINTS.values())
    raise ValueError(f"unknown family {name!r}; use one of {known}")
