"""The header of a GGUF file (its key/value metadata and tensor infos), read from a bytes prefix.

The layout is ggml's (docs/gguf.md in ggml-org/ggml): the magic ``GGUF``, a uint32 version, uint64
tensor and key/value counts, the key/value pairs (a string key, a uint32 value type, the value), then
per tensor its name, uint32 number of dimensions, uint64 sizes (ggml's ``ne`` order, innermost first),
uint32 ggml type and uint64 offset into the data section, which starts at the next multiple of
``general.alignment`` (default 32). Strings are a uint64 length and UTF-8 bytes.

``gguf.GGUFReader`` (the gguf package) memory-maps the whole file and makes a numpy view of every
tensor, so it needs the file complete; this parser needs only the header's bytes, which is what a
range request to the Hub returns, and it says how many bytes it needs when the prefix is too short
(``Truncated.needed``). tests/test_gguf.py holds the two readers equal on the same files.

Every count and length is checked against fixed limits (and against the file's size when it is known)
before anything is read or allocated, so a corrupt or hostile header is refused in one line.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from archspec.core.errors import SpecError, clip, shown

MAGIC = b"GGUF"
VERSIONS = (2, 3)  # version 1 (before August 2023) wrote 32-bit counts and lengths
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4  # GGML_MAX_DIMS

# limits on what a header may declare, far beyond any released model (DeepSeek-V3 in GGUF: about 1,100
# tensors, 60 keys; the largest tokenizer arrays hold a few hundred thousand entries)
MAX_TENSORS = 1 << 20
MAX_KEYS = 1 << 20
MAX_ARRAY = 1 << 24  # entries of one array
MAX_STRING = 1 << 26  # bytes of one string (a chat template is a few kilobytes)
MAX_HEADER = 1 << 30  # bytes of the whole header

# value types: GGUFValueType in gguf.constants; scalar ones -> struct format
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9


class Truncated(SpecError):
    """The prefix ends inside the header: at least `needed` bytes from the start are required."""

    def __init__(self, message: str, needed: int):
        super().__init__(message)
        self.needed = needed


@dataclass(frozen=True)
class TensorInfo:
    """One tensor as the header declares it: `ne` in ggml's order (innermost first), its ggml type
    number and its offset from the start of the data section."""

    name: str
    ne: tuple[int, ...]
    ggml_type: int
    offset: int

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape in row-major order (numpy's, torch's, the Hugging Face checkpoint's): `ne` reversed."""
        return tuple(reversed(self.ne))


@dataclass(frozen=True)
class Header:
    version: int
    metadata: dict[str, Any]  # key -> value: int, float, bool, str, or a list of them
    tensors: tuple[TensorInfo, ...]
    alignment: int
    data_offset: int  # where the data section starts: the header's length, padded to the alignment
    big_endian: bool = False


class _Cursor:
    def __init__(self, data: bytes | bytearray | memoryview, where: str, size: int | None, endian: str):
        self.data, self.where, self.size, self.endian = memoryview(data), where, size, endian
        self.pos = 0

    def need(self, n: int, what: str) -> None:
        end = self.pos + n
        if end > MAX_HEADER:
            raise SpecError(f"{self.where}: corrupt GGUF header: {what} at byte {self.pos:,} would end beyond "
                            f"{MAX_HEADER:,} bytes, the most archspec reads of a header")  # fmt: skip
        if self.size is not None and end > self.size:
            raise SpecError(f"{self.where}: truncated or corrupt GGUF file: {what} at byte {self.pos:,} runs past "
                            f"the end of the file ({self.size:,} bytes)")  # fmt: skip
        if end > len(self.data):
            raise Truncated(f"{self.where}: truncated GGUF header: {what} at byte {self.pos:,} needs {end:,} "
                            f"bytes, the data holds {len(self.data):,}", end)  # fmt: skip

    def scalar(self, fmt: str, what: str) -> Any:
        size = struct.calcsize(fmt)
        self.need(size, what)
        (value,) = struct.unpack_from(self.endian + fmt, self.data, self.pos)
        self.pos += size
        return value

    def string(self, what: str) -> str:
        n = self.scalar("Q", f"the length of {what}")
        if n > MAX_STRING:
            raise SpecError(f"{self.where}: corrupt GGUF header: {what} declares {n:,} bytes (at most "
                            f"{MAX_STRING:,} are read)")  # fmt: skip
        self.need(n, what)
        raw = bytes(self.data[self.pos : self.pos + n])
        self.pos += n
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise SpecError(f"{self.where}: corrupt GGUF header: {what} is not UTF-8") from None

    def strings(self, count: int, what: str) -> list[str]:
        """An array of strings (a tokenizer's hundreds of thousands): string()'s checks, in one loop."""
        data, unpack, out = self.data, struct.Struct(self.endian + "Q").unpack_from, []
        size, pos = len(data), self.pos
        for i in range(count):
            if pos + 8 > size:
                self.pos = pos
                self.need(8, f"{what}[{i}]")
            (n,) = unpack(data, pos)
            if n > MAX_STRING:
                self.pos = pos
                raise SpecError(f"{self.where}: corrupt GGUF header: {what}[{i}] declares {n:,} bytes (at most "
                                f"{MAX_STRING:,} are read)")  # fmt: skip
            pos += 8
            if pos + n > size:
                self.pos = pos
                self.need(n, f"{what}[{i}]")
            try:
                out.append(str(data[pos : pos + n], "utf-8"))
            except UnicodeDecodeError:
                raise SpecError(f"{self.where}: corrupt GGUF header: {what}[{i}] is not UTF-8") from None
            pos += n
        self.pos = pos
        return out

    def value(self, kind: int, what: str, depth: int = 0) -> Any:
        if kind in _SCALARS:
            return self.scalar(_SCALARS[kind], what)
        if kind == _STRING:
            return self.string(what)
        if kind != _ARRAY:
            raise SpecError(f"{self.where}: corrupt GGUF header: {what} has value type {kind}, which GGUF does "
                            f"not define (0-12)")  # fmt: skip
        item = self.scalar("I", f"the item type of {what}")
        count = self.scalar("Q", f"the length of {what}")
        if count > MAX_ARRAY:
            raise SpecError(f"{self.where}: corrupt GGUF header: {what} declares {count:,} items (at most "
                            f"{MAX_ARRAY:,} are read)")  # fmt: skip
        if item in _SCALARS:
            fmt = f"{count}{_SCALARS[item]}"
            self.need(struct.calcsize(fmt), what)
            values = list(struct.unpack_from(self.endian + fmt, self.data, self.pos))
            self.pos += struct.calcsize(fmt)
            return values
        if item == _STRING:
            self.need(8 * count, what)  # every string has at least its length
            return self.strings(count, what)
        if item == _ARRAY and depth == 0:  # ggml writes no nested arrays; one level is read, as gguf.cpp does
            return [self.value(_ARRAY, f"{what}[{i}]", depth + 1) for i in range(count)]
        raise SpecError(f"{self.where}: corrupt GGUF header: {what} holds items of type {item}, which a GGUF "
                        "array cannot hold")  # fmt: skip


def parse_header(data: bytes | bytearray | memoryview, where: str = "GGUF file", size: int | None = None) -> Header:
    """The header held by `data`, a prefix of a GGUF file (or the whole file). `size`, the file's full
    length when known, turns a length that runs past it into a SpecError naming the truncation. A prefix
    that ends inside the header raises Truncated with the bytes needed (a lower bound: read more and
    call again). A file that is not GGUF, of another version, or with counts and lengths beyond the
    limits is refused in one line, before anything is allocated for it."""
    head = bytes(memoryview(data)[:4])
    if len(head) < 4 or len(data) < 8:
        if size is not None and size < 8:
            raise SpecError(f"{where}: not a GGUF file: {size} bytes, shorter than a GGUF header")
        if head != MAGIC[: len(head)]:
            raise SpecError(f"{where}: not a GGUF file (it starts with {shown(head)}, not b'GGUF')")
        raise Truncated(f"{where}: truncated GGUF header: {len(data)} bytes", 8)
    if head != MAGIC:
        raise SpecError(f"{where}: not a GGUF file (it starts with {shown(head)}, not b'GGUF')")
    (version,) = struct.unpack_from("<I", data, 4)
    endian = "<"
    if version & 0xFFFF == 0 and version:  # written on a big-endian machine (gguf.GGUFReader's test)
        endian, version = ">", struct.unpack_from(">I", data, 4)[0]
    if version not in VERSIONS:
        raise SpecError(f"{where}: GGUF version {version} is not supported; archspec reads versions "
                        f"{', '.join(map(str, VERSIONS))}")  # fmt: skip
    cur = _Cursor(data, where, size, endian)
    cur.pos = 8
    n_tensors = cur.scalar("Q", "the tensor count")
    n_keys = cur.scalar("Q", "the key/value count")
    if n_tensors > MAX_TENSORS or n_keys > MAX_KEYS:
        raise SpecError(f"{where}: corrupt GGUF header: {n_tensors:,} tensors and {n_keys:,} keys declared (at "
                        f"most {MAX_TENSORS:,} and {MAX_KEYS:,} are read)")  # fmt: skip
    metadata: dict[str, Any] = {}
    for i in range(n_keys):
        key = cur.string(f"key {i}")
        kind = cur.scalar("I", f"the value type of {clip(key, 60)!r}")
        if key in metadata:
            raise SpecError(f"{where}: corrupt GGUF header: key {shown(key)} appears twice")
        metadata[key] = cur.value(kind, f"the value of {clip(key, 60)!r}")
    tensors = []
    names: set[str] = set()
    for i in range(n_tensors):
        name = cur.string(f"the name of tensor {i}")
        what = f"tensor {clip(name, 60)!r}"
        dims = cur.scalar("I", f"the dimension count of {what}")
        if dims > MAX_DIMS:
            raise SpecError(f"{where}: corrupt GGUF header: {what} has {dims} dimensions (ggml has at most "
                            f"{MAX_DIMS})")  # fmt: skip
        cur.need(8 * dims, f"the sizes of {what}")
        ne = struct.unpack_from(f"{endian}{dims}Q", cur.data, cur.pos)
        cur.pos += 8 * dims
        if any(n >= 1 << 62 for n in ne):
            raise SpecError(f"{where}: corrupt GGUF header: {what} has a size beyond 2**62 ({list(ne)})")
        ggml_type = cur.scalar("I", f"the type of {what}")
        offset = cur.scalar("Q", f"the offset of {what}")
        if name in names:
            raise SpecError(f"{where}: corrupt GGUF header: tensor {shown(name)} appears twice")
        names.add(name)
        tensors.append(TensorInfo(name, tuple(ne), ggml_type, offset))
    alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if type(alignment) is not int or alignment <= 0 or alignment & (alignment - 1):
        raise SpecError(f"{where}: corrupt GGUF header: general.alignment {shown(alignment)} is not a power of two")
    data_offset = -(-cur.pos // alignment) * alignment
    return Header(version, metadata, tuple(tensors), alignment, data_offset, endian == ">")
