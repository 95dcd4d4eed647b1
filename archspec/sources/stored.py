"""What a checkpoint stores: one tensor as a file stores it (its name, shape, dtype and exact bytes), and
a model's `Source`, the files read and their tensors."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class StoredTensor:
    name: str  # as the file names it
    shape: tuple[int, ...]
    dtype: str  # the file's own dtype name: "BF16", "F8_E4M3", "F32", "Q4_K", "MXFP4", ...
    nbytes: int  # exact stored bytes

    @property
    def numel(self) -> int:
        """The values the tensor holds (1 for a scalar)."""
        n = 1
        for d in self.shape:
            n *= d
        return n


@dataclass(frozen=True)
class Source:
    """Where a spec came from: `kind` 'checkpoint' (a local folder or file) or 'hub'; `format` the weights'
    file format ('safetensors', 'gguf', or 'config' where there are none); the files read and their tensors."""

    ref: str
    kind: str
    format: str
    config: Path | None
    where: str  # what messages call the config
    model_type: str | None
    files: tuple[str, ...]
    tensors: tuple[StoredTensor, ...]
    commit: str | None = None
    file_type: str | None = None  # a GGUF file's general.file_type, as llama.cpp names it ('Q4_K_M')

    @property
    def stored_bytes(self) -> int:
        return sum(t.nbytes for t in self.tensors)
