"""archspec: exact sizes, costs and checks for Transformer architectures.

Import cost is kept to pydantic and the standard library; torch is loaded only by
``archspec.reference``.
"""

from __future__ import annotations

# From a clone, the sibling folders presets/ and reference/ are archspec.presets and archspec.reference
from archspec import (
    _moved,  # noqa: F401  (the module paths from before the folders)
    _source_tree,  # noqa: F401  (must come first)
)

# Import the preset data package before defining the `presets()` function below: once the
# submodule is in sys.modules, later `import archspec.presets` leaves the attribute alone.
from archspec import presets as _presets_data  # noqa: F401  (data package, see presets/)
from archspec.core.errors import SpecError
from archspec.count.params import COMPONENTS, ParamCount, count_params
from archspec.io.catalog import get_preset, preset, preset_names, resolve_model
from archspec.io.loading import load_spec
from archspec.spec.model import ModelSpec

__version__ = "0.4.0"  # the package's version (pyproject reads it here); CHANGELOG.md says what each holds


def presets() -> list[str]:
    """The names of all presets, e.g. ['transformer-base', ..., 'gpt3-175b']."""
    return preset_names()


def __getattr__(name: str):
    # Heavier layers load on first use, so `import archspec` stays cheap.
    if name in ("count_flops", "FlopCount"):
        from archspec.count import flops

        return getattr(flops, name)
    if name == "sweep":
        from archspec.plan.sweep import sweep

        return sweep
    if name == "to_pandas":
        from archspec.render.notebook import to_pandas

        return to_pandas
    if name in ("estimate_memory", "MemoryEstimate"):
        from archspec import memory

        return getattr(memory, name)
    if not name.startswith("_"):  # a module (archspec.memory, or archspec.hardware by its old path): on first use
        import importlib
        import importlib.util

        if importlib.util.find_spec(f"{__name__}.{name}") is not None:
            return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'archspec' has no attribute {name!r}")


__all__ = [
    "COMPONENTS",
    "ModelSpec",
    "ParamCount",
    "SpecError",
    "count_params",
    "get_preset",
    "load_spec",
    "preset",
    "preset_names",
    "presets",
    "resolve_model",
    "sweep",
    "__version__",
]
