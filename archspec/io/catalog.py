"""Presets: family files in the presets package, one model per ``[models.NAME]`` table.

A family file (``presets/*.toml``) has this shape, which ``archspec validate FILE`` also reads::

    [family]                      # name, title, source
    [defaults]                    # spec fields shared by every model of the family
    [models.NAME]                 # spec fields of one model, plus:
    summary = "..."               #   one line for `archspec list`
    source = "..."                #   where the numbers come from
    [models.NAME.printed]         #   values as printed where the preset reads them differently
    [[models.NAME.claims]]        #   published claims (see archspec.validate.claims.Claim)

Every number carries its provenance as a comment beside it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from functools import cache, cached_property
from pathlib import Path
from typing import Any

from archspec.core.checks import check_args
from archspec.core.errors import SpecError, clip, did_you_mean, shown
from archspec.io.loading import Loaded, build_spec, is_hf_config, parse_text, read_mapping
from archspec.spec.mixer_tables import over
from archspec.spec.model import ModelSpec

RESERVED = ("summary", "source", "printed", "claims")


@dataclass(frozen=True)
class Preset:
    """One model of a family file: its spec plus provenance and published claims."""

    name: str
    family: str
    summary: str
    source: str
    spec_data: dict[str, Any]
    claims_data: tuple[dict[str, Any], ...] = ()
    printed: dict[str, Any] = field(default_factory=dict)
    path: str = ""

    @cached_property
    def spec(self) -> ModelSpec:
        """The preset's spec, validated as any spec file is, once per preset (the package's presets are
        read once per process: get_preset)."""
        return build_spec(dict(self.spec_data), f"{clip(self.path, 200)}: models.{clip(self.name, 60)}")

    @property
    def claims(self):
        from archspec.validate.claims import parse_claims

        return parse_claims(self.claims_data, f"{self.path}: models.{self.name}.claims")


def parse_family(data: dict[str, Any], where: str) -> list[Preset]:
    """The presets of one family file's mapping."""
    unknown = set(data) - {"family", "defaults", "models"}
    if unknown and is_hf_config(data):
        raise SpecError(
            f"{where}: this is a Hugging Face config.json, which holds no claims; this command reads the presets' "
            "format: [defaults], [models.NAME] tables and [[models.NAME.claims]] (see docs/validation.md); "
            "`archspec params` counts the config itself"
        )
    if unknown and {"name", "vocab_size"} <= set(data):
        raise SpecError(
            f"{where}: this is a spec file; this command reads the presets' format: [defaults], "
            "[models.NAME] tables and [[models.NAME.claims]] (see docs/validation.md)"
        )
    if unknown:
        raise SpecError(f"{where}: unknown top-level key(s) {sorted(unknown)}; expected family, defaults, models")
    family = data.get("family", {})
    defaults = data.get("defaults", {})
    models = data.get("models")
    if not isinstance(family, dict) or not isinstance(defaults, dict):
        raise SpecError(f"{where}: [family] and [defaults] must be tables")
    if not isinstance(models, dict) or not models:
        raise SpecError(f"{where}: no [models.NAME] tables found")
    out = []
    for name, table in models.items():
        at = f"{where}: models.{clip(name, 60)}"
        if not isinstance(table, dict):
            raise SpecError(f"{at} must be a table")
        try:
            spec_data = over(defaults, {k: v for k, v in table.items() if k not in RESERVED})
        except ValueError as err:  # the mixer under both its names
            raise SpecError(f"{at}: {err}") from None
        if spec_data.setdefault("name", name) != name:
            raise SpecError(f"{at} has name={shown(spec_data['name'])}; drop it or make them equal")
        claims = table.get("claims", [])
        if not isinstance(claims, list):
            raise SpecError(f"{at}.claims must be an array of tables ([[models.{clip(name, 60)}.claims]])")
        for key in ("summary", "source"):
            if not isinstance(table.get(key, ""), str):
                raise SpecError(f"{at}.{key} must be text, got {shown(table[key])}")
        if not isinstance(table.get("printed", {}), dict):
            raise SpecError(f"{at}.printed must be a table of values as printed, got {shown(table['printed'])}")
        out.append(
            Preset(
                name=name,
                family=str(family.get("name", Path(where).stem)),
                summary=str(table.get("summary", "")),
                source=str(table.get("source", family.get("source", ""))),
                spec_data=spec_data,
                claims_data=tuple(claims),
                printed=dict(table.get("printed", {})),
                path=where,
            )
        )
    return out


def load_family_file(path: str | Path) -> list[Preset]:
    """The presets of a family file."""
    return parse_family(read_mapping(path), str(path))


_HEADER = r'(?m)^\[models\.(?:"([^"]+)"|([A-Za-z0-9_-]+))\][ \t]*(?:#.*)?$'


def _data_files() -> list[Path]:
    import importlib

    # The data package (presets/); `archspec.presets` the attribute is the listing function.
    return importlib.import_module("archspec.presets").files()


@cache
def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _names_in(path: Path) -> list[str]:
    return [quoted or bare for quoted, bare in re.findall(_HEADER, _text(path))]


@cache
def _index() -> dict[str, Path]:
    """Preset name -> family file, from the `[models.NAME]` headers: reading text, not parsing TOML,
    so a command parses only the files of the models it names."""
    out: dict[str, Path] = {}
    for path in _data_files():
        for name in _names_in(path):
            if name in out:
                raise SpecError(f"preset {name!r} is defined twice ({out[name]} and {path})")
            out[name] = path
    return out


@cache
def _family(path: Path) -> dict[str, Preset]:
    """The parsed presets of one packaged family file (its text was read once, by _index)."""
    return {p.name: p for p in parse_family(parse_text(path, ".toml", _text(path)), str(path))}


def preset_names() -> list[str]:
    """All preset names, in file order (families in presets.ORDER, then by file name)."""
    return list(_index())


def get_preset(name: str) -> Preset:
    check_args("get_preset", name=name)
    index = _index()
    key = _preset_key(name)
    if key is None:
        raise SpecError(f"unknown preset {shown(name)}{did_you_mean(name.lower(), index)} (see `archspec list`)")
    return _family(index[key])[key]


def _preset_key(name: str) -> str | None:
    """The preset `name` names, in any case (preset names are lowercase: Llama-3-8B is llama-3-8b)."""
    index = _index()
    return name if name in index else name.lower() if name.lower() in index else None


def preset(name: str) -> ModelSpec:
    """The ModelSpec of a preset, e.g. preset('gpt2')."""
    check_args("preset", name=name)
    return get_preset(name).spec


def _looks_like_path(ref: str) -> bool:
    return any(ref.lower().endswith(s) for s in (".toml", ".json", ".yaml", ".yml")) or "/" in ref


def with_overrides(spec: ModelSpec, overrides: dict[str, Any] | None, where: str) -> ModelSpec:
    """`spec` with `--set` overrides applied and validated again; a bad one is a SpecError."""
    if not overrides:
        return spec
    try:
        return spec.replace(**overrides)
    except SpecError as exc:  # replace names the field; say where the change came from
        raise SpecError(f"{clip(where, 200)} with --set: {exc}") from None


def resolve(ref: str, overrides: dict[str, Any] | None = None) -> Loaded:
    """The model of a MODEL argument, with `--set` overrides applied and re-validated, what reading it
    told (a config's notes) and, for a checkpoint or a Hub id, where it was read from (its source). In this
    order: a preset name; a local path (a spec file, a Hugging Face config.json, a folder holding one, a
    checkpoint folder or .safetensors file with its config.json); a Hub id `org/name[@REV]` (archspec.sources)."""
    if isinstance(ref, Path):
        ref = str(ref)
    check_args("resolve_model", ref=ref)
    if _looks_like_path(ref) or (_preset_key(ref) is None and (_is_file(ref) or _is_dir(ref))):
        from archspec.io.loading import import_config, load
        from archspec.sources.resolve import resolve as resolve_source

        found = resolve_source(ref)
        if found is None:
            loaded = load(ref)
        else:
            spec, source = found
            # a checkpoint's config.json tells what the file tells
            notes = import_config(source.config, where=source.where).notes if source.config is not None else ()
            loaded = Loaded(spec, tuple(notes), source)
    else:
        loaded = Loaded(preset(ref))
    loaded = replace(loaded, spec=with_overrides(loaded.spec, overrides, ref))
    if loaded.source is not None:  # a head the checkpoint stores apart from the table the spec ties it to
        from archspec.sources.check import stored_head_note

        head = stored_head_note(loaded.spec, list(loaded.source.tensors))
        loaded = replace(loaded, notes=(*loaded.notes, head)) if head else loaded
    return loaded


def resolve_model(ref: str, overrides: dict[str, Any] | None = None) -> ModelSpec:
    """A preset name, a spec-file path, a Hugging Face config.json or a folder holding one, with `--set`
    overrides applied and re-validated."""
    return resolve(ref, overrides).spec


def claim_sets(refs: list[str] | None, overrides: dict[str, Any] | None = None) -> list[tuple[ModelSpec, tuple]]:
    """(spec, claims) for each preset named, each model of each family file named, or all presets,
    with `--set` overrides applied to every spec."""
    if refs is not None and (isinstance(refs, str) or not isinstance(refs, list | tuple)
                             or not all(isinstance(r, str) for r in refs)):  # fmt: skip
        raise TypeError(f"claim_sets: refs must be a list of preset names or family files, or None, got "
                        f"{type(refs).__name__} {shown(refs, 60)}")  # fmt: skip
    if overrides is not None and not isinstance(overrides, dict):
        raise TypeError(f"claim_sets: overrides must be a dict of spec fields or None, got {type(overrides).__name__}")
    out = []
    for ref in list(refs or []) or preset_names():
        presets = load_family_file(ref) if _looks_like_path(ref) else [get_preset(ref)]
        for p in presets:
            out.append((with_overrides(p.spec, overrides, p.name), p.claims))
    return out


def _is_dir(ref: str) -> bool:
    """Whether `ref` names an existing folder (one holding a config.json is a MODEL); '' names none."""
    if not ref:
        return False
    try:
        return Path(ref).is_dir()
    except (OSError, ValueError):
        return False


def _is_file(ref: str) -> bool:
    """Whether `ref` names an existing file; False for names the system cannot look up (too long, a NUL)."""
    try:
        return Path(ref).is_file()
    except (OSError, ValueError):
        return False
