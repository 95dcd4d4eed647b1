"""One tensor as a checkpoint file stores it: its name, shape, dtype and exact bytes."""

from __future__ import annotations

from dataclasses import dataclass


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
