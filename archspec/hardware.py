"""Accelerator peaks: dense (no sparsity) matrix throughput by precision, memory capacity and memory
bandwidth, with sources.

Planning layer only: the counters never read it. Any figure can be overridden by a number
(``--peak-tflops``).
"""

from __future__ import annotations

import math
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
    bandwidth_gbs: float  # peak memory bandwidth, GB/s (10^9 bytes per second), as the vendor prints it
    bandwidth_source: str
    interconnect_gbs: float | None = None  # device-to-device bandwidth, GB/s per direction per device (vendor)
    interconnect_source: str = "not in the table"

    @property
    def memory_bytes(self) -> int:
        """Memory capacity in bytes (memory_gib x 2^30)."""
        return int(self.memory_gib * 2**30)

    @property
    def bandwidth(self) -> float:
        """Peak memory bandwidth in bytes per second."""
        return self.bandwidth_gbs * 1e9

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
                    "NVIDIA Tesla V100 datasheet: 125 TFLOPS tensor (fp16), 15.7 TFLOPS fp32",
                    900.0, "NVIDIA Tesla V100 datasheet: SXM2 HBM2 bandwidth 900 GB/s",
                    150.0, "NVIDIA Tesla V100 datasheet: NVLink 300 GB/s (both directions) = 150 GB/s each way"),
        Accelerator("a100", "NVIDIA A100 SXM4", 312.0, 312.0, 19.5, 80,
                    "NVIDIA A100 datasheet: bf16/fp16 tensor 312 TFLOPS dense (624 with sparsity), fp32 19.5",
                    2039.0, "NVIDIA A100 datasheet: A100 80GB SXM HBM2e bandwidth 2,039 GB/s",
                    300.0, "NVIDIA A100 datasheet: NVLink 600 GB/s (both directions) = 300 GB/s each way"),
        Accelerator("h100", "NVIDIA H100 SXM5", 989.0, 989.0, 67.0, 80,
                    "NVIDIA H100 datasheet: bf16/fp16 tensor 1,979 TFLOPS with sparsity = 989 dense, fp32 67",
                    3350.0, "NVIDIA H100 datasheet: H100 SXM HBM3 bandwidth 3.35 TB/s",
                    450.0, "NVIDIA H100 datasheet: NVLink 900 GB/s (both directions) = 450 GB/s each way"),
        Accelerator("h200", "NVIDIA H200 SXM", 989.0, 989.0, 67.0, 141,
                    "NVIDIA H200 datasheet: bf16/fp16 tensor 1,979 TFLOPS with sparsity = 989 dense, fp32 67",
                    4800.0, "NVIDIA H200 datasheet: H200 SXM HBM3e bandwidth 4.8 TB/s",
                    450.0, "NVIDIA H200 datasheet: NVLink 900 GB/s (both directions) = 450 GB/s each way"),
        Accelerator("mi300x", "AMD Instinct MI300X", 1307.4, 1307.4, 163.4, 192,
                    "AMD MI300X datasheet: bf16/fp16 1,307.4 TFLOPS dense, fp32 matrix 163.4",
                    5300.0, "AMD MI300X datasheet: HBM3 peak bandwidth 5.3 TB/s",
                    448.0, "AMD MI300X datasheet: Infinity Fabric 7 links x 128 GB/s (both directions) = 896 GB/s "
                    "aggregate = 448 GB/s each way"),
        Accelerator("tpu-v4", "Google TPU v4", 275.0, 275.0, 275.0 / 4, 32,
                    "Google Cloud TPU v4 documentation: 275 TFLOPS bf16 per chip",
                    1200.0, "Google Cloud TPU v4 documentation: HBM2 bandwidth 1,200 GB/s per chip",
                    None, "Google Cloud TPU v4 documentation prints no per-chip ICI bandwidth (all-reduce "
                    "1.1 PB/s per pod only)"),
        Accelerator("tpu-v5p", "Google TPU v5p", 459.0, 459.0, 459.0 / 4, 95,
                    "Google Cloud TPU v5p documentation: 459 TFLOPS bf16 per chip",
                    2765.0, "Google Cloud TPU v5p documentation: HBM2e bandwidth 2,765 GB/s per chip",
                    600.0, "Google Cloud TPU v5p documentation: bidirectional ICI 1,200 GB/s per chip = "
                    "600 GB/s each way"),
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


def resolve_peak(gpu: str | None, peak_tflops: float | None, dtype: str) -> tuple[float | None, Accelerator | None]:
    """Peak FLOP/s per device for a time estimate: `peak_tflops` (TFLOP/s) when given, else the table
    value of `gpu` at the math precision of `dtype`; (None, None) when neither is given."""
    acc = accelerator(gpu) if gpu else None
    if peak_tflops:
        peak = peak_tflops * 10**12  # exact for an integer
        if isinstance(peak, float) and not math.isfinite(peak) or isinstance(peak, int) and peak.bit_length() > 1024:
            raise SpecError(f"--peak-tflops {peak_tflops:.3g} is too large: the peak is beyond 1.8e308 FLOP/s")
        return peak, acc
    return (acc.peak(dtype), acc) if acc else (None, None)
