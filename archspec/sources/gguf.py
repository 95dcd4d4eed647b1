"""GGUF files (llama.cpp, Ollama) as models: the header and the stored tensors with their exact bytes,
and the spec the header describes.

- The header is read by archspec.sources.gguf_header (headers only, never tensor data).
- Stored bytes: each tensor's ggml type has a block of `block` values stored in `size` bytes
  (``gguf.constants.GGML_QUANT_SIZES``); a tensor holds numel / block blocks. The file's mixture
  (Q6_K output, Q8_0 embedding, MXFP4 experts...) is read from the file, not guessed.
- The spec: the header's keys written back as the Hugging Face config llama.cpp's converter read them
  from (archspec.sources.gguf_config), read by archspec.hf's adapter of the family.
- Tensor names and `archspec check` of a GGUF file: archspec.sources.gguf_names.

The ``gguf`` package (the optional extra ``[gguf]``) is imported on first use.
"""

from __future__ import annotations

import dataclasses
import os
import re
import stat
from pathlib import Path

from archspec.core.errors import SpecError, clip
from archspec.sources.gguf_config import architecture, hf_config
from archspec.sources.gguf_header import Header, TensorInfo, Truncated, parse_header
from archspec.sources.stored import StoredTensor

FIRST_READ = 1 << 20  # bytes read first; a header that is longer is read again, as long as it says it needs


def gguf_package():
    """The ``gguf`` package, or one line saying how to install it."""
    try:
        import gguf
    except ImportError:
        raise SpecError(
            "reading GGUF files needs the gguf package: pip install 'archspec-transformers[gguf]'"
        ) from None
    return gguf


# ---------------------------------------------------------------- reading a file


def read_header(path: str | os.PathLike) -> Header:
    """The header of a local GGUF file, reading only its first bytes (more only as the header needs); a
    file whose tensors' data would run past its end is refused."""
    header, size = _read(path)
    check_data(header, size, clip(str(path), 200))
    return header


def read_header_only(path: str | os.PathLike) -> Header:
    """The header of a local GGUF file, whether or not its data follows (a header-only copy)."""
    return _read(path)[0]


def _read(path: str | os.PathLike) -> tuple[Header, int]:
    where = clip(str(path), 200)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    except FileNotFoundError:
        raise SpecError(f"{where}: no such file") from None
    except OSError as exc:
        raise SpecError(f"{where}: cannot read: {(exc.strerror or str(exc)).lower()}") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise SpecError(f"{where}: not a regular file; give a .gguf file")
        size, want = info.st_size, FIRST_READ
        while True:
            f.seek(0)
            data = f.read(min(want, size))
            try:
                header = parse_header(data, where, size)
            except Truncated as exc:  # the file is longer than what was read: read what the header needs
                want = max(exc.needed, 2 * want)
                continue
            break
    return header, size


_SHARD = r"-(\d{5})-of-(\d{5})\.gguf$"  # a split model's shards: Name-00001-of-00003.gguf


def read_model(path: str | os.PathLike) -> tuple[Header, list[StoredTensor], list[str]]:
    """A local GGUF model: the first file's header, the stored tensors of every shard of a split model
    (its shards beside it: Name-00001-of-00003.gguf ...) and the files read."""
    path = Path(path)
    m = re.search(_SHARD, path.name)
    files = [path]
    if m:
        n = int(m.group(2))
        files = [path.with_name(re.sub(_SHARD, f"-{i:05d}-of-{n:05d}.gguf", path.name)) for i in range(1, n + 1)]
        absent = [f.name for f in files if not f.is_file()]
        if absent:
            raise SpecError(f"{clip(str(path), 200)}: a split GGUF model of {n} files; {absent[0]} is not beside it")
    headers = [read_header(f) for f in files]
    stored = [t for f, h in zip(files, headers) for t in stored_tensors(h, clip(str(f), 200))]
    return headers[0], stored, [f.name for f in files]


def check_data(header: Header, size: int, where: str) -> None:
    """Refuse a file whose tensors' data would run past its end (a download cut short)."""
    for t in header.tensors:
        end = header.data_offset + t.offset + stored_bytes(t, where)
        if end > size:
            raise SpecError(f"{where}: truncated GGUF file: tensor {t.name!r} ends at byte {end:,}, beyond the "
                            f"file's {size:,} bytes")  # fmt: skip


# ---------------------------------------------------------------- stored bytes


def type_name(ggml_type: int) -> str:
    """'Q4_K' for 12: the ggml type's name as gguf.constants.GGMLQuantizationType spells it."""
    gguf = gguf_package()
    try:
        return gguf.GGMLQuantizationType(ggml_type).name
    except ValueError:
        return str(ggml_type)


def stored_bytes(t: TensorInfo, where: str = "GGUF file") -> int:
    """The bytes a tensor's data takes: numel / block blocks of `size` bytes (GGML_QUANT_SIZES). ggml
    stores whole blocks along the innermost dimension, so ne[0] must be a multiple of the block."""
    gguf = gguf_package()
    try:
        kind = gguf.GGMLQuantizationType(t.ggml_type)
        block, size = gguf.GGML_QUANT_SIZES[kind]
    except (ValueError, KeyError):
        raise SpecError(f"{where}: tensor {t.name!r} has ggml type {t.ggml_type}, which the gguf package does not "
                        "know (a newer llama.cpp type? upgrade gguf)") from None  # fmt: skip
    inner = t.ne[0] if t.ne else 1
    if inner % block:
        raise SpecError(f"{where}: corrupt GGUF header: tensor {t.name!r} of type {kind.name} has rows of {inner} "
                        f"values, not a multiple of the type's block of {block}")  # fmt: skip
    numel = 1
    for n in t.ne:
        numel *= n
    return numel // block * size


def stored_tensors(header: Header, where: str = "GGUF file") -> list[StoredTensor]:
    """Every tensor of the file: its name, row-major shape, ggml type name and exact stored bytes."""
    return [StoredTensor(t.name, t.shape, type_name(t.ggml_type), stored_bytes(t, where)) for t in header.tensors]


def file_type(header: Header) -> str | None:
    """The mixture llama.cpp's quantiser names in general.file_type ('Q4_K_M' for 15), or None."""
    gguf = gguf_package()
    value = header.metadata.get("general.file_type")
    try:
        return gguf.LlamaFileType(value).name.removeprefix("MOSTLY_") if isinstance(value, int) else None
    except ValueError:
        return None


def weights_format(file_type_name: str | None) -> str | None:
    """The --weights format that models a GGUF file type ('Q4_K_M' -> 'q4_k_m', 'F16' -> 'fp16'), or None."""
    from archspec.core.vocab import dtype_key
    from archspec.memory.storage import STORAGE

    if not file_type_name:
        return None
    key = dtype_key(file_type_name)
    key = {"f16": "fp16", "f32": "fp32", "all_f32": "fp32"}.get(key, key)
    return key if key in STORAGE else None


# ---------------------------------------------------------------- the spec


def spec_name(path: str | os.PathLike) -> str:
    """'Qwen3-8B-Q4_K_M.gguf' -> 'qwen3-8b-q4_k_m' (the first shard of a split model by its model's name)."""
    from archspec import hf

    return hf.spec_name(Path(re.sub(_SHARD, ".gguf", str(path))))


def imported(header: Header, name: str, where: str = "GGUF file", stored: list[StoredTensor] | None = None):
    """The spec data of a GGUF header (an archspec.hf.Imported), through archspec.hf's adapter of the family;
    `stored`: every shard's tensors of a split model."""
    from archspec import hf

    out = hf.from_mapping(hf_config(header, where, stored), name, where)
    note = f"read from a GGUF header (llama.cpp's architecture {architecture(header, where)!r})"
    return dataclasses.replace(out, notes=(note, *out.notes))


def spec_of(header: Header, name: str, where: str = "GGUF file", stored: list[StoredTensor] | None = None):
    """The ModelSpec of a GGUF header (and, for a split model, every shard's tensors)."""
    from archspec.io.loading import build_spec

    return build_spec(imported(header, name, where, stored).data, where)


def load_gguf(path: str | os.PathLike):
    """The ModelSpec of a local .gguf file, from its header."""
    return spec_of(read_header(path), spec_name(path), clip(str(path), 200))
