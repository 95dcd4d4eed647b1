"""Model sources beyond presets and spec files: checkpoint folders, .safetensors files and Hub ids.

`resolve(ref)` gives the spec of a checkpoint folder (config.json beside *.safetensors or an index),
a .safetensors file with a config.json beside it, or a Hub id (`org/name[@REV]`), with its `Source`, or
None where `ref` is none of these (archspec.io.catalog then reads it as before). The source travels with
the spec in archspec.io.catalog.resolve's `Loaded`: the stored tensors and their formats for later steps
(`check`, and the weights of `memory`, `inference` and `fit`: `stored(source)`, `weights_of(source, ...)`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from archspec.core.errors import SpecError
from archspec.sources.stored import Source
from archspec.spec.model import ModelSpec


def _exists(ref: str) -> bool:
    try:
        return Path(ref).exists()
    except (OSError, ValueError):
        return False


def resolve(ref: str) -> tuple[ModelSpec, Source] | None:
    """The spec of a checkpoint folder, a .safetensors file or a Hub id, and its source; None where `ref`
    names none of these (a spec file, a config.json, a folder with a config only)."""
    if _exists(ref):
        return _local(ref)
    from archspec.sources.hub import parse_ref

    hub_ref = parse_ref(ref)
    if hub_ref is None:
        return None
    return _hub(ref, hub_ref)


def _model_type(config: Path) -> str | None:
    """The model_type archspec reads a config as (whose weight map names its tensors): a multimodal
    wrapper's text model's, an alias's class's."""
    from archspec import hf
    from archspec.io.loading import read_config

    raw, _ = read_config(config)
    mt = raw.get("model_type")
    if isinstance(mt, str) and mt in hf.WRAPPERS and mt not in hf.FAMILIES:
        text = raw.get("text_config")
        inner = text.get("model_type") if isinstance(text, dict) else None
        return inner if isinstance(inner, str) else hf.WRAPPERS[mt].text_type
    if isinstance(mt, str) and mt in hf.FAMILIES:
        return mt
    arch = raw.get("architectures")
    cls = arch[0] if isinstance(arch, list) and arch and isinstance(arch[0], str) else None
    return hf.CLASSES.get(cls, mt if isinstance(mt, str) else None)


def _local(ref: str) -> tuple[ModelSpec, Source] | None:
    from archspec.sources import headers

    path = Path(ref)
    if path.is_dir():
        has_weights = (path / headers.INDEX).is_file() or any(path.glob("*.safetensors"))
        if not has_weights or not (path / "config.json").is_file():
            return None  # a config-only folder, or none: archspec.io.loading says what it holds
        tensors, files = headers.read_folder(path)
        config = path / "config.json"
    elif path.suffix.lower() == ".gguf":
        return _gguf(ref, path)
    elif path.suffix.lower() == ".safetensors" or path.name == headers.INDEX:
        config = path.parent / "config.json"
        if not config.is_file():
            raise SpecError(
                f"{ref}: a safetensors file needs the model's config.json beside it (none in {path.parent})"
            )
        if path.name == headers.INDEX:
            tensors, files = headers.read_folder(path.parent)
        else:
            tensors, files = headers.read_file(path), [path.name]
    else:
        return None
    from archspec.io.loading import load_config

    name = _name(path.parent if path.is_file() else path)
    spec = load_config(config, name=name)
    source = Source(
        ref, "checkpoint", "safetensors", config, str(config), _model_type(config), tuple(files), tuple(tensors)
    )
    _same_model(spec, source)
    return spec, source


def _gguf(ref: str, path: Path) -> tuple[ModelSpec, Source]:
    """A .gguf file: its header's architecture keys give the spec, its tensor infos the stored tensors."""
    from archspec.sources import gguf

    header, stored, files = gguf.read_model(path)
    spec = gguf.spec_of(header, gguf.spec_name(path), ref, stored)
    source = Source(
        ref, "checkpoint", "gguf", None, ref, gguf.architecture(header, ref), tuple(files), tuple(stored),
        file_type=gguf.file_type(header),
    )  # fmt: skip
    return spec, source


def _name(folder: Path) -> str:
    from archspec import hf

    return hf.spec_name(folder.resolve() / "config.json")


def _hub(ref: str, hub_ref) -> tuple[ModelSpec, Source]:
    from archspec import hf
    from archspec.io.loading import load_config
    from archspec.sources import hub

    fetched = hub.fetch(hub_ref)
    if fetched.format == "gguf":
        return _hub_gguf(ref, hub_ref, fetched)
    where = f"{hub_ref.repo} (config.json)"
    name = hf.spec_name(Path(hub_ref.repo.split("/")[1]) / "config.json")
    spec = load_config(fetched.config, name=name, where=where)
    source = Source(
        ref,
        "hub",
        fetched.format,
        fetched.config,
        where,
        _model_type(fetched.config),
        fetched.files,
        fetched.tensors,
        fetched.commit,
    )
    _same_model(spec, source)
    fetched.save()  # only a model that resolved is kept for later calls
    return spec, source


def _hub_gguf(ref: str, hub_ref, fetched) -> tuple[ModelSpec, Source]:
    """A GGUF file of a Hub repository: the spec from its header (kept in the cache), its tensors."""
    from archspec.sources import gguf
    from archspec.sources.gguf_header import parse_header

    where = f"{hub_ref}: {fetched.files[0]}"
    header = parse_header(fetched.gguf_header_bytes or fetched.gguf_header.read_bytes(), where)
    name = gguf.spec_name(Path(fetched.files[0].rsplit("/", 1)[-1]))
    spec = gguf.spec_of(header, name, where, list(fetched.tensors))
    source = Source(
        ref, "hub", "gguf", None, where, gguf.architecture(header, where), fetched.files, fetched.tensors,
        fetched.commit, file_type=gguf.file_type(header),
    )  # fmt: skip
    fetched.save()
    return spec, source


def _same_model(spec: ModelSpec, source: Source) -> None:
    from archspec.sources.check import plausible

    plausible(spec, list(source.tensors), source.ref)


@dataclass(frozen=True)
class Stored:
    """The weights' formats as a checkpoint stores them: the --weights format of most stored values (scales
    aside), the exact stored bytes, and values and bytes by the file's dtype."""

    format: str | None
    bytes: int
    by_dtype: dict[str, int]  # dtype -> bytes
    values: dict[str, int]  # dtype -> values

    def to_dict(self) -> dict:
        return {"format": self.format, "bytes": self.bytes, "by_dtype": self.by_dtype, "values": self.values}

    def line(self) -> str:
        from archspec.render.text import human_bytes

        total = sum(self.values.values()) or 1
        mix = ", ".join(f"{d} {n / total:.0%}" for d, n in sorted(self.values.items(), key=lambda kv: -kv[1]))
        return f"stored as {mix} of values, {human_bytes(self.bytes)} ({self.bytes:,} bytes) in the checkpoint's files"


def stored(source: Source | None) -> Stored | None:
    """The stored formats of a checkpoint, a GGUF file or a Hub repository with weights (None for a model
    read from anything else: `source` None, or a repository of configs only)."""
    if source is None or not source.tensors:
        return None
    from collections import Counter

    from archspec.sources.check import format_values

    by_dtype: Counter = Counter()
    values: Counter = Counter()
    formats: Counter = Counter()
    for t in source.tensors:
        by_dtype[t.dtype] += t.nbytes
        values[t.dtype] += t.numel
        held = format_values(t)
        if held:
            formats[held[0]] += held[1]
    if source.format == "gguf":
        from archspec.sources import gguf

        fmt = gguf.weights_format(source.file_type)
    else:
        fmt = formats.most_common(1)[0][0] if formats else None
    return Stored(fmt, sum(by_dtype.values()), dict(by_dtype), dict(values))


def weights_of(source: Source | None, given: str | None) -> tuple[str | None, str | None]:
    """The --weights format to plan a model read from `source` with and the note that says where it comes
    from: the option where given, else the checkpoint's stored format (None, None without stored weights)."""
    s = stored(source)
    if s is None:
        return given, None
    if given:
        return given, f"--weights {given}, not the checkpoint's stored formats ({s.line()})"
    if s.format is None:
        return None, f"the checkpoint's stored formats have no --weights format ({s.line()}); planned with the default"
    return s.format, f"weights as stored: --weights {s.format}, the format of most values ({s.line()})"
