"""Accelerator peaks: dense (no sparsity) matrix throughput, by precision, with sources.

Planning layer only: the counters never read it. Any figure can be overridden by a number
(``--peak-tflops``).
"""

from __future__ import annotations

from dataclasses import dataclass

from archspec.checks import check_args
from archspec.errors import SpecError, did_you_mean, shown


@dataclass(frozen=True)
class Accelerator:
    name: str
    title: str
    bf16_tflops: float | None  # dense; None where the chip has no bf16 tensor path
    fp16_tflops: float
    fp32_tflops: float
    memory_gib: float
    source: str

    def peak(self, dtype: str) -> float:
        """Peak FLOP/s for the math precision of `dtype` (fp8/int8/int4 weights count as bf16 math)."""
        if dtype == "fp32":
            return self.fp32_tflops * 1e12
        if dtype == "fp16" or self.bf16_tflops is None:
            return self.fp16_tflops * 1e12
        return self.bf16_tflops * 1e12


ACCELERATORS = {
    a.name: a
    for a in (
        Accelerator("v100", "NVIDIA V100 SXM2", None, 125.0, 15.7, 32,
                    "NVIDIA Tesla V100 datasheet: 125 TFLOPS tensor (fp16), 15.7 TFLOPS fp32"),
        Accelerator("a100", "NVIDIA A100 SXM4", 312.0, 312.0, 19.5, 80,
                    "NVIDIA A100 datasheet: bf16/fp16 tensor 312 TFLOPS dense (624 with sparsity), fp32 19.5"),
        Accelerator("h100", "NVIDIA H100 SXM5", 989.0, 989.0, 67.0, 80,
                    "NVIDIA H100 datasheet: bf16/fp16 tensor 1,979 TFLOPS with sparsity = 989 dense, fp32 67"),
        Accelerator("h200", "NVIDIA H200 SXM", 989.0, 989.0, 67.0, 141,
                    "NVIDIA H200 datasheet: bf16/fp16 tensor 1,979 TFLOPS with sparsity = 989 dense, fp32 67"),
        Accelerator("mi300x", "AMD Instinct MI300X", 1307.4, 1307.4, 163.4, 192,
                    "AMD MI300X datasheet: bf16/fp16 1,307.4 TFLOPS dense, fp32 matrix 163.4"),
        Accelerator("tpu-v4", "Google TPU v4", 275.0, 275.0, 275.0 / 4, 32,
                    "Google Cloud TPU v4 documentation: 275 TFLOPS bf16 per chip"),
        Accelerator("tpu-v5p", "Google TPU v5p", 459.0, 459.0, 459.0 / 4, 95,
                    "Google Cloud TPU v5p documentation: 459 TFLOPS bf16 per chip"),
    )
}  # fmt: skip


def accelerator(name: str) -> Accelerator:
    check_args("accelerator", name=name)
    key = name.lower()
    if key not in ACCELERATORS:
        raise SpecError(
            f"unknown accelerator {shown(name)}{did_you_mean(key, ACCELERATORS)}; known: {', '.join(ACCELERATORS)} "
            "(or give --peak-tflops)"
        )
    return ACCELERATORS[key]
