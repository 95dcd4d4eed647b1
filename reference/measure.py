"""Measuring the reference model: unique parameters by component (and, in flops.py, FLOPs)."""

from __future__ import annotations

from torch import nn

from archspec.params import COMPONENTS


def owners(model: nn.Module) -> dict[str, str]:
    """Module path -> component, for each tagged module with no tagged ancestor."""
    out: dict[str, str] = {}
    for path, module in model.named_modules():
        comp = getattr(module, "component", None)
        if comp is None:
            continue
        if any(path == p or path.startswith(p + ".") for p in out):
            continue
        out[path] = comp
    return out


def count_by_component(model: nn.Module) -> dict[str, int]:
    """Unique parameters rolled up by the component tag of the module that holds them.

    A tied tensor counts once, under the first module that registers it (the token embedding,
    which the model registers before the output head). A parameter held by no tagged module is an
    error, not a silent zero.
    """
    counts = dict.fromkeys(COMPONENTS, 0)
    seen: set[int] = set()
    for path, module in model.named_modules():
        comp = _component_of(model, path)
        for name, p in module.named_parameters(recurse=False):
            if id(p) in seen:
                continue
            seen.add(id(p))
            if comp is None:
                raise ValueError(f"parameter {path}.{name} belongs to no component")
            counts[comp] += p.numel()
    return counts


def _component_of(model: nn.Module, path: str) -> str | None:
    """The component tag of the nearest tagged module on `path` (itself or an ancestor)."""
    parts = path.split(".") if path else []
    module, found = model, getattr(model, "component", None)
    for part in parts:
        module = getattr(module, part) if not part.isdigit() else module[int(part)]
        found = getattr(module, "component", None) or found
    return found


def count_total(model: nn.Module) -> int:
    """Sum of unique parameter sizes (nn.Module.parameters() already skips tied duplicates)."""
    return sum(p.numel() for p in model.parameters())
