"""Safetensors headers: the stored tensors of a file or a checkpoint folder, read from the headers alone.

A safetensors file is an 8-byte little-endian header length N, N bytes of JSON (tensor name ->
dtype, shape, data_offsets; an optional ``__metadata__``), then the data. Only the first 8 + N bytes
are read. A header is trusted only when its offsets tile the data exactly (no gap, no overlap, each
tensor's bytes its dtype times its shape) and, where the file's size is known, end where it ends.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

from archspec.core.errors import SpecError, clip, shown
from archspec.sources.stored import StoredTensor

# bits per value of each safetensors dtype (the format's own list)
DTYPE_BITS = {
    "BOOL": 8,
    "U8": 8,
    "I8": 8,
    "F8_E5M2": 8,
    "F8_E4M3": 8,
    "F8_E8M0": 8,
    "I16": 16,
    "U16": 16,
    "F16": 16,
    "BF16": 16,
    "I32": 32,
    "U32": 32,
    "F32": 32,
    "F64": 64,
    "I64": 64,
    "U64": 64,
    "C64": 64,
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
}

# A header above this is refused before it is read (huggingface_hub refuses above 25 MB: DeepSeek-V3's
# largest shard header is about 0.2 MB).
MAX_HEADER = 100_000_000
INDEX = "model.safetensors.index.json"


def header_length(first8: bytes, where: str, size: int | None = None) -> int:
    """N of the 8-byte prefix, refused when the file is shorter than 8 bytes, N is absurd or beyond the file."""
    if len(first8) < 8:
        raise SpecError(f"{where}: not a safetensors file ({len(first8)} bytes, shorter than its 8-byte header length)")
    (n,) = struct.unpack("<Q", first8[:8])
    if n > MAX_HEADER:
        raise SpecError(
            f"{where}: the safetensors header claims {n:,} bytes (more than {MAX_HEADER:,}): a corrupt file"
        )
    if size is not None and 8 + n > size:
        raise SpecError(
            f"{where}: the safetensors header claims {n:,} bytes, beyond the file's {size:,} bytes "
            "(a truncated download?)"
        )
    return n


def parse_header(raw: bytes, where: str, size: int | None = None) -> list[StoredTensor]:
    """The tensors of a header's JSON bytes (without the 8-byte prefix), checked: dtypes known, shapes of
    non-negative ints, offsets tiling the data; with `size` (the whole file's bytes), ending at its end."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise SpecError(f"{where}: the safetensors header is not valid JSON (a corrupt or truncated file)") from None
    if not isinstance(data, dict):
        raise SpecError(f"{where}: the safetensors header is not a JSON object")
    out, spans = [], []
    for name, info in data.items():
        if name == "__metadata__":
            continue
        out.append(_tensor(name, info, where, spans))
    spans.sort()
    end = 0
    for begin, stop, name in spans:
        if begin != end:
            what = "overlaps another" if begin < end else f"leaves a gap of {begin - end:,} bytes before it"
            raise SpecError(f"{where}: tensor {clip(name, 120)!r} {what} (data_offsets do not tile the data)")
        end = stop
    if size is not None and 8 + len(raw) + end != size:
        raise SpecError(
            f"{where}: the header's tensors hold {end:,} bytes of data, the file {size - 8 - len(raw):,} "
            "(a truncated or corrupt file)"
        )
    return out


def _tensor(name: str, info: Any, where: str, spans: list) -> StoredTensor:
    at = f"{where}: tensor {clip(name, 120)!r}"
    if not isinstance(info, dict):
        raise SpecError(f"{at}: expected {{dtype, shape, data_offsets}}, got {shown(info)}")
    dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    if dtype not in DTYPE_BITS:
        raise SpecError(f"{at}: unknown dtype {shown(dtype)} (safetensors has {', '.join(DTYPE_BITS)})")
    if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
        raise SpecError(f"{at}: shape {shown(shape)} is not a list of non-negative ints")
    ok = isinstance(offsets, list) and len(offsets) == 2 and all(type(o) is int for o in offsets)
    if not ok or not 0 <= offsets[0] <= offsets[1]:
        raise SpecError(f"{at}: data_offsets {shown(offsets)} is not [begin, end] with begin <= end")
    numel = 1
    for d in shape:
        numel *= d
    bits = numel * DTYPE_BITS[dtype]
    if bits % 8 or bits // 8 != offsets[1] - offsets[0]:
        raise SpecError(
            f"{at}: {dtype} {tuple(shape)} is {bits / 8:g} bytes, its data_offsets hold {offsets[1] - offsets[0]:,}"
        )
    spans.append((offsets[0], offsets[1], name))
    return StoredTensor(name, tuple(shape), dtype, offsets[1] - offsets[0])


def read_file(path: Path) -> list[StoredTensor]:
    """The stored tensors of a local .safetensors file, from its header alone."""
    where = str(path)
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            n = header_length(f.read(8), where, size)
            raw = f.read(n)
    except OSError as exc:
        raise SpecError(f"{where}: cannot read ({exc.strerror or exc})") from None
    return parse_header(raw, where, size)


def read_index(path: Path) -> dict[str, str]:
    """The weight map (tensor name -> shard file) of a model.safetensors.index.json."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise SpecError(f"{path}: not a readable safetensors index ({exc})") from None
    wmap = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(wmap, dict) or not all(isinstance(v, str) and "/" not in v for v in wmap.values()):
        raise SpecError(f"{path}: no weight_map of tensor name -> shard file")
    return wmap


def agree(index: dict[str, str], shards: dict[str, list[StoredTensor]], where: str) -> list[StoredTensor]:
    """All tensors of the shards, held against the index: every tensor where the index says, each once."""
    out, seen = [], {}
    for shard, tensors in shards.items():
        for t in tensors:
            if t.name in seen:
                raise SpecError(f"{where}: tensor {clip(t.name, 120)!r} is stored twice ({seen[t.name]} and {shard})")
            seen[t.name] = shard
            if index.get(t.name) != shard:
                said = f"says {index[t.name]}" if t.name in index else "does not list it"
                raise SpecError(
                    f"{where}: the shards disagree with their index: {clip(t.name, 120)!r} is in "
                    f"{shard}, the index {said}"
                )
            out.append(t)
    missing = sorted(set(index) - set(seen))
    if missing:
        raise SpecError(
            f"{where}: the shards disagree with their index: {len(missing)} tensor(s) it lists are in no "
            f"shard, e.g. {clip(missing[0], 120)!r} (in {index[missing[0]]})"
        )
    return out


def read_folder(folder: Path) -> tuple[list[StoredTensor], list[str]]:
    """The stored tensors of a checkpoint folder (an index and its shards, or *.safetensors) and the files read."""
    if (folder / INDEX).is_file():
        index = read_index(folder / INDEX)
        files = sorted(set(index.values()))
        shards = {}
        for name in files:
            if not (folder / name).is_file():
                raise SpecError(f"{folder}: the index names shard {name!r}, which is not in the folder")
            shards[name] = read_file(folder / name)
        return agree(index, shards, str(folder / INDEX)), files
    files = sorted(p.name for p in folder.glob("*.safetensors"))
    out: list[StoredTensor] = []
    for name in files:
        out += read_file(folder / name)
    return out, files
