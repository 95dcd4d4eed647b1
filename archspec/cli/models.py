"""MODEL arguments to specs: presets, spec files and Hugging Face configs with --set applied, and
for a config.json whose model_type has no adapter, what building transformers' model measures."""

from __future__ import annotations

import argparse

from archspec.core.errors import NoAdapter, SpecError


def read_specs(args: argparse.Namespace, default_all: bool = False):
    return [loaded.spec for loaded in read_loaded(args, default_all)]


def read_loaded(args: argparse.Namespace, default_all: bool = False) -> list:
    """archspec.io.loading.Loaded per MODEL argument (every preset where none is given and `default_all`):
    the spec with --set applied, its notes and, for a checkpoint or a Hub id, its source."""
    from archspec.io.catalog import preset_names, resolve
    from archspec.io.loading import parse_assignments

    overrides = parse_assignments(args.overrides)
    refs = list(args.models or [])
    if not refs and default_all:
        refs = preset_names()
    return [resolve(ref, overrides) for ref in refs]


def read_models(args: argparse.Namespace, batch: int = 1, seq_len: int | None = None) -> list:
    """Specs, and for a config.json whose model_type has no adapter, what building transformers' model on
    the meta device measures (archspec.reference.hf_fallback.Measured: labelled measured, never analytic)."""
    return [model for model, _, _ in read_models_and_notes(args, batch, seq_len)]


def read_models_and_notes(args: argparse.Namespace, batch: int = 1, seq_len: int | None = None) -> list[tuple]:
    """(model, notes, source) per MODEL argument: read_models' models, each with what reading it told the
    user (a Hugging Face config.json's notes; nothing for a preset, a spec file or a measured model) and
    where a checkpoint or a Hub id was read from (None for anything else)."""
    from archspec.io.catalog import resolve
    from archspec.io.loading import parse_assignments

    overrides = parse_assignments(args.overrides)
    out = []
    for ref in list(args.models or []):
        try:
            loaded = resolve(ref, overrides)
            out.append((loaded.spec, loaded.notes, loaded.source))
        except NoAdapter as exc:
            out.append((measure(exc, bool(overrides), batch, seq_len), (), None))
    return out


def install_hint(exc: NoAdapter, missing: str) -> str:
    from archspec import hf

    near = hf.nearest_types(exc.raw.get("model_type"))
    return (
        f"{exc.where}: model_type {exc.raw.get('model_type')!r} has no adapter"
        + (f" (nearest supported: {', '.join(near)})" if near else "")
        + f"; without an adapter archspec counts a model by building transformers' model, which needs {missing}: "
        "pip install 'archspec-transformers[hf]'"
    )


def measure(exc: NoAdapter, overrides: bool, batch: int, seq_len: int | None):
    if overrides:
        raise SpecError(
            f"{exc.where}: --set changes spec fields, and model_type {exc.raw.get('model_type')!r} has no adapter, "
            "so there is no spec (it is measured by building transformers' model)"
        )
    try:
        from archspec.reference import hf_fallback

        hf_fallback._import()
    except ImportError as err:
        name = (getattr(err, "name", None) or "torch").split(".")[0]
        raise SpecError(
            install_hint(exc, "torch and transformers" if name not in ("transformers",) else name)
        ) from None
    try:
        return hf_fallback.measure(exc.raw, exc.name, exc.where, batch, seq_len)
    except SpecError as err:
        raise SpecError(f"model_type {exc.raw.get('model_type')!r} has no adapter, and {err}") from None


def no_spec(exc: NoAdapter, command: str) -> str:
    """The refusal of a command that needs a spec, for a model_type without an adapter."""
    from archspec import hf

    near = hf.nearest_types(exc.raw.get("model_type"))
    return (
        f"{exc.where}: model_type {exc.raw.get('model_type')!r} has no adapter, so there is no spec for "
        f"`archspec {command}`"
        + (f" (nearest supported: {', '.join(near)})" if near else "")
        + "; `archspec params`, `compare` and `flops` count it by building transformers' model"
    )


def is_measured(m) -> bool:
    return type(m).__name__ == "Measured"


MEASURED_LINE = (
    "not analytic: this model_type has no adapter, so there is no spec; the counts are measured on transformers' model"
)
