"""Presets: family files in the presets package, one model per ``[models.NAME]`` table.

A family file (``presets/*.toml``) has this shape, which ``archspec validate FILE`` also reads::

    [family]                      # name, title, source
    [defaults]                    # spec fields shared by every model of the family
    [models.NAME]                 # spec fields of one model, plus:
    summary = "..."               #   one line for `archspec list`
    source = "..."                #   where the numbers come from
    [models.NAME.printed]         #   values as printed where the preset reads them differently
    [[models.NAME.claims]]        #   published claims (see archspec.claims.Claim)

Every number carries its provenance as a comment beside it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from archspec.checks import check_args
from archspec.errors import SpecError, clip, did_you_mean, shown
from archspec.loading import build_spec, is_hf_config, parse_text, read_mapping
from archspec.records import Record
from archspec.spec import ModelSpec

RESERVED = ("summary", "source", "printed", "claims")


@dataclass(init=False, eq=False, repr=False)  # init, frozen, eq, hash and repr: Record
class Preset(Record):
    """One model of a family file: its spec plus provenance and published claims."""

    name: str
    family: str
    summary: str
    source: str
    spec_data: dict[str, Any]
    claims_data: tuple[dict[str, Any], ...] = ()
    printed: dict[str, Any] = field(default_factory=dict)
    path: str = ""
    trusted: bool = False  # packaged presets skip re-validation at run time (see _spec_of)

    @property
    def spec(self) -> ModelSpec:
        return _spec_of(self)

    @property
    def claims(self):
        from archspec.claims import parse_claims

        return parse_claims(self.claims_data, f"{self.path}: models.{self.name}.claims")


_SPECS: dict[tuple[str, str, bool], ModelSpec] = {}


def _spec_of(p: Preset) -> ModelSpec:
    """The preset's spec; a packaged one is built once (keyed by where it comes from, since spec data
    may hold sub-tables, which are not hashable)."""
    if not p.trusted:
        return build_spec(dict(p.spec_data), f"{clip(p.path, 200)}: models.{clip(p.name, 60)}")
    key = (p.path, p.name, p.trusted)
    if key not in _SPECS:
        # Package presets are trusted data: tests/test_presets.py validates every one of them
        # (test_packaged_presets_are_valid) and checks this construction gives the same spec.
        _SPECS[key] = ModelSpec.construct_trusted(p.spec_data)
    return _SPECS[key]


def parse_family(data: dict[str, Any], where: str, trusted: bool = False) -> list[Preset]:
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
        spec_data = {**defaults, **{k: v for k, v in table.items() if k not in RESERVED}}
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
                trusted=trusted,
            )
        )
    return out


def load_family_file(path: str | Path, trusted: bool = False) -> list[Preset]:
    """The presets of a family file; `trusted` only for the package's own files."""
    return parse_family(read_mapping(path), str(path), trusted)


# compiled on first use (re caches it): with the cache of preset names, a command may never need it
_HEADER = r'(?m)^\[models\.(?:"([^"]+)"|([A-Za-z0-9_-]+))\][ \t]*(?:#.*)?$'


def _data_files() -> list[Path]:
    import importlib

    # The data package (presets/); `archspec.presets` the attribute is the listing function.
    return importlib.import_module("archspec.presets").files()


@cache
def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


class _Cache:
    """The packaged family files as read before: per file its stat (mtime in ns, size), its preset
    names and, once parsed, its checked data, kept with marshal in the presets' __pycache__ folder
    as Python keeps bytecode, and trusted under the same rule: an entry counts only while the file
    has the same mtime and size (and the same archspec and Python). A folder that cannot be written
    leaves it empty; every command still reads the files."""

    FORMAT = 1

    def __init__(self) -> None:
        self.folders: dict[Path, dict[str, list]] = {}

    @staticmethod
    def _key() -> tuple:
        import sys

        from archspec import __version__

        return (_Cache.FORMAT, __version__, sys.implementation.cache_tag)

    @staticmethod
    def _file(folder: Path, key: tuple) -> Path:
        return folder / "__pycache__" / f"presets.{key[2]}.marshal"

    def _entries(self, folder: Path) -> dict[str, list]:
        if folder not in self.folders:
            import marshal

            self.folders[folder] = {}
            key = self._key()
            try:
                with open(self._file(folder, key), "rb") as f:
                    # loads of the bytes: marshal.load of the file reads it a few bytes at a time (10 x slower)
                    stored, entries = marshal.loads(f.read())
                if tuple(stored) == key and isinstance(entries, dict):
                    self.folders[folder] = entries
            except (OSError, EOFError, ValueError, TypeError):
                pass
        return self.folders[folder]

    def get(self, path: Path) -> list | None:
        """[mtime_ns, size, names, data or None] of `path`, if it is the file as last read."""
        entry = self._entries(path.parent).get(path.name)
        try:
            st = path.stat()
        except OSError:
            return None
        if isinstance(entry, list) and len(entry) == 4 and entry[:2] == [st.st_mtime_ns, st.st_size]:
            return entry
        return None

    def put(self, path: Path, names: list[str], data: dict | None) -> None:
        import marshal
        import os

        entries = self._entries(path.parent)
        try:
            st = path.stat()
            entries[path.name] = [st.st_mtime_ns, st.st_size, names, data]
            target = self._file(path.parent, self._key())
            target.parent.mkdir(exist_ok=True)
            tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
            tmp.write_bytes(marshal.dumps((self._key(), entries)))
            os.replace(tmp, target)  # whole or not at all, whoever else writes it
        except (OSError, ValueError):  # a read-only install, or data marshal cannot hold: not cached
            pass


_CACHE = _Cache()


def _names_in(path: Path) -> list[str]:
    entry = _CACHE.get(path)
    if entry is not None:
        return entry[2]
    names = [quoted or bare for quoted, bare in re.findall(_HEADER, _text(path))]
    _CACHE.put(path, names, None)
    return names


@cache
def _index() -> dict[str, Path]:
    """Preset name -> family file, from the `[models.NAME]` headers: reading text, not parsing TOML,
    so a command parses only the files of the models it names (and, cached, reads neither)."""
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
    entry = _CACHE.get(path)
    if entry is not None and entry[3] is not None:
        data = entry[3]
    else:
        data = parse_text(path, ".toml", _text(path))
        _CACHE.put(path, [quoted or bare for quoted, bare in re.findall(_HEADER, _text(path))], data)
    return {p.name: p for p in parse_family(data, str(path), trusted=True)}


def preset_names() -> list[str]:
    """All preset names, in file order (families in presets.ORDER, then by file name)."""
    return list(_index())


def get_preset(name: str) -> Preset:
    check_args("get_preset", name=name)
    index = _index()
    if name not in index:
        raise SpecError(f"unknown preset {shown(name)}{did_you_mean(name, index)} (see `archspec list`)")
    return _family(index[name])[name]


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


def resolve_model(ref: str, overrides: dict[str, Any] | None = None) -> ModelSpec:
    """The spec of a MODEL argument, with `--set` overrides applied and re-validated. In this order: a
    preset name; a local path (a spec file, a Hugging Face config.json, a folder holding one, a checkpoint
    folder or .safetensors file with its config.json); a Hub id `org/name[@REV]` (archspec.sources)."""
    if isinstance(ref, Path):
        ref = str(ref)
    check_args("resolve_model", ref=ref)
    if _looks_like_path(ref) or (ref not in _index() and (_is_file(ref) or _is_dir(ref))):
        from archspec.sources.resolve import resolve

        spec = resolve(ref)
        if spec is None:
            from archspec.loading import load_spec

            spec = load_spec(ref)
    else:
        spec = preset(ref)
    return with_overrides(spec, overrides, ref)


def claim_sets(refs: list[str] | None, overrides: dict[str, Any] | None = None) -> list[tuple[ModelSpec, tuple]]:
    """(spec, claims) for each preset named, each model of each family file named, or all presets,
    with `--set` overrides applied to every spec."""
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
