"""Accelerator peaks: dense (no sparsity) matrix throughput by precision, memory capacity and memory
bandwidth, with sources.

Planning layer only: the counters never read it. Any figure can be overridden by a number
(``--peak-tflops``).
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, fields

from archspec.core.checks import check_args
from archspec.core.errors import SpecError, did_you_mean, shown
from archspec.core.records import record, rendered

# the math precisions an accelerator's peak is read for (Accelerator.peak; flops --dtype)
MATH_DTYPES = ("fp32", "bf16", "fp16")


@dataclass(frozen=True, kw_only=True)
class Accelerator:
    """One accelerator's published peaks and memory, with sources; its JSON record is its fields, in this
    order, with memory_bytes after memory_gib."""

    name: str
    title: str
    bf16_tflops: float | None  # dense; None where the chip has no bf16 tensor path
    fp16_tflops: float | None  # dense; None where the vendor publishes no fp16 matrix peak
    fp32_tflops: float | None  # dense fp32 (not TF32); None where the vendor publishes none
    fp8_tflops: float | None = None  # dense fp8 matrix peak; None where the chip has no fp8 tensor path
    memory_gib: float
    bandwidth_gbs: float  # peak memory bandwidth, GB/s (10^9 bytes per second), as the vendor prints it
    interconnect_gbs: float | None = None  # device-to-device bandwidth, GB/s per direction per GPU (vendor figure)
    link: str | None = None  # the interconnect's kind: a key of archspec.plan.collectives.LINKS
    source: str
    bandwidth_source: str
    interconnect_source: str = ""
    # what one device costs an hour, in the user's currency: only ever the user's figure (an accelerator file)
    price_per_hour: float | None = dataclasses.field(default=None, metadata=rendered(omit_none=True))

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
            value, what = self.fp32_tflops, "fp32"
        elif dtype == "fp16" or self.bf16_tflops is None:
            value, what = self.fp16_tflops, "fp16"
        else:
            value, what = self.bf16_tflops, "bf16"
        if value is None:
            raise SpecError(f"{self.title} has no published dense {what} peak; give --peak-tflops")
        return value * 1e12

    def to_dict(self) -> dict:
        return record(self, derived=(("memory_bytes", "memory_gib"),))


_NVLINK3 = "NVLink 3: 600 GB/s total (both directions) = 300 GB/s per direction"
_NVLINK4 = "NVLink 4: 900 GB/s total (both directions) = 450 GB/s per direction"
_NVLINK5 = "NVLink 5: 1.8 TB/s total (both directions) = 900 GB/s per direction"
_TPU_FP32 = "fp32: no published figure, bf16/4 assumed (fp32 matmuls run as several bf16 passes)"

# the documents the rows cite, and figures that several rows print alike: each named once
_V100 = "NVIDIA Tesla V100 datasheet"
_A100 = "NVIDIA A100 datasheet"
_H100 = "NVIDIA H100 datasheet"
_H200 = "NVIDIA H200 datasheet"
_H20 = "NVIDIA H20 specifications"
_B200 = "NVIDIA HGX B200 datasheet"
_B300 = "NVIDIA HGX B300 datasheet"
_GB200 = "NVIDIA GB200 NVL72 datasheet"
_L40S = "NVIDIA L40S datasheet"
_ADA = "NVIDIA Ada Lovelace architecture whitepaper"
_RTX4090 = "NVIDIA GeForce RTX 4090 specifications"
_BLACKWELL = "NVIDIA RTX Blackwell GPU architecture whitepaper"
_RTX5090 = "NVIDIA GeForce RTX 5090 specifications"
_MI300X = "AMD MI300X datasheet"
_MI325X = "AMD MI325X datasheet"
_MI355X = "AMD MI355X datasheet"
_TPU_V4 = "Google Cloud TPU v4 documentation"
_TPU_V5E = "Google Cloud TPU v5e documentation"
_TPU_V5P = "Google Cloud TPU v5p documentation"
_TPU_V6E = "Google Cloud TPU v6e documentation"
_GAUDI3 = "Intel Gaudi 3 AI accelerator white paper"
_A100_PEAKS = "bf16/fp16 tensor 312 TFLOPS dense (624 with sparsity), fp32 19.5"
_HOPPER_PEAKS = (
    "bf16/fp16 tensor 1,979 TFLOPS with sparsity = 989 dense, fp32 67; fp8 3,958 with sparsity = 1,979 dense"
)
_MI300_PEAKS = "bf16/fp16 1,307.4 TFLOPS dense, fp32 matrix 163.4; fp8 2,614.9 dense"
_MI300_LINKS = "7 Infinity Fabric links x 128 GB/s total = 896 GB/s = 448 GB/s per direction"
_HGX_BLACKWELL = (
    "per GPU (one eighth of the 8-GPU board): bf16/fp16 tensor 36 PFLOPS with sparsity / 8 = 4.5 = 2.25 dense; fp8 "
    "72 / 8 = 9 with sparsity = 4.5 dense; fp32 600 TFLOPS / 8 = 75"
)

# Dense peaks: where a vendor prints a figure "with sparsity" (2:4 structured), it is halved here and
# the source says so. GB/s are 10^9 bytes per second as printed; capacity as the vendor names it.
ACCELERATORS = {
    a.name: a
    for a in (
        Accelerator(
            name="v100", title="NVIDIA V100 SXM2",
            bf16_tflops=None, fp16_tflops=125.0, fp32_tflops=15.7,
            memory_gib=32, bandwidth_gbs=900.0, interconnect_gbs=150.0, link="nvlink2",
            source=f"{_V100}: 125 TFLOPS tensor (fp16), 15.7 TFLOPS fp32",
            bandwidth_source=f"{_V100}: SXM2 HBM2 bandwidth 900 GB/s",
            interconnect_source=f"{_V100}: NVLink 2: 300 GB/s total = 150 GB/s per direction",
        ),
        Accelerator(
            name="a100-40gb", title="NVIDIA A100 40GB SXM4",
            bf16_tflops=312.0, fp16_tflops=312.0, fp32_tflops=19.5,
            memory_gib=40, bandwidth_gbs=1555.0, interconnect_gbs=300.0, link="nvlink3",
            source=f"{_A100}: {_A100_PEAKS}",
            bandwidth_source=f"{_A100}: A100 40GB SXM HBM2 bandwidth 1,555 GB/s",
            interconnect_source=f"{_A100}: {_NVLINK3}",
        ),
        Accelerator(
            name="a100", title="NVIDIA A100 80GB SXM4",
            bf16_tflops=312.0, fp16_tflops=312.0, fp32_tflops=19.5,
            memory_gib=80, bandwidth_gbs=2039.0, interconnect_gbs=300.0, link="nvlink3",
            source=f"{_A100}: {_A100_PEAKS}",
            bandwidth_source=f"{_A100}: A100 80GB SXM HBM2e bandwidth 2,039 GB/s",
            interconnect_source=f"{_A100}: {_NVLINK3}",
        ),
        Accelerator(
            name="h100", title="NVIDIA H100 SXM5",
            bf16_tflops=989.0, fp16_tflops=989.0, fp32_tflops=67.0, fp8_tflops=1979.0,
            memory_gib=80, bandwidth_gbs=3350.0, interconnect_gbs=450.0, link="nvlink4",
            source=f"{_H100}: {_HOPPER_PEAKS}",
            bandwidth_source=f"{_H100}: H100 SXM HBM3 bandwidth 3.35 TB/s",
            interconnect_source=f"{_H100}: {_NVLINK4}",
        ),
        Accelerator(
            name="h100-pcie", title="NVIDIA H100 PCIe",
            bf16_tflops=756.0, fp16_tflops=756.0, fp32_tflops=51.0, fp8_tflops=1513.0,
            memory_gib=80, bandwidth_gbs=2000.0, interconnect_gbs=300.0, link="nvlink4",
            source=f"{_H100}: H100 PCIe bf16/fp16 tensor 1,513 TFLOPS with sparsity = 756 dense, fp32 51; fp8 3,026 "
                   "with sparsity = 1,513 dense",
            bandwidth_source=f"{_H100}: H100 PCIe HBM2e bandwidth 2 TB/s",
            interconnect_source=f"{_H100}: H100 PCIe NVLink bridge 600 GB/s total = 300 GB/s per direction (PCIe "
                                "Gen5 128 GB/s total without the bridge)",
        ),
        Accelerator(
            name="h200", title="NVIDIA H200 SXM",
            bf16_tflops=989.0, fp16_tflops=989.0, fp32_tflops=67.0, fp8_tflops=1979.0,
            memory_gib=141, bandwidth_gbs=4800.0, interconnect_gbs=450.0, link="nvlink4",
            source=f"{_H200}: {_HOPPER_PEAKS}",
            bandwidth_source=f"{_H200}: H200 SXM HBM3e bandwidth 4.8 TB/s",
            interconnect_source=f"{_H200}: {_NVLINK4}",
        ),
        Accelerator(
            name="h20", title="NVIDIA H20",
            bf16_tflops=148.0, fp16_tflops=148.0, fp32_tflops=44.0, fp8_tflops=296.0,
            memory_gib=96, bandwidth_gbs=4000.0, interconnect_gbs=450.0, link="nvlink4",
            source=f"{_H20} (published through NVIDIA's partners; no public datasheet): bf16/fp16 tensor 148 TFLOPS "
                   "dense, fp8 296 dense, fp32 44",
            bandwidth_source=f"{_H20}: HBM3 bandwidth 4.0 TB/s",
            interconnect_source=f"{_H20}: {_NVLINK4}",
        ),
        Accelerator(
            name="b200", title="NVIDIA B200 (HGX, per GPU)",
            bf16_tflops=2250.0, fp16_tflops=2250.0, fp32_tflops=75.0, fp8_tflops=4500.0,
            memory_gib=180, bandwidth_gbs=8000.0, interconnect_gbs=900.0, link="nvlink5",
            source=f"{_B200}, {_HGX_BLACKWELL}; 1,440 GB / 8 = 180 GB",
            bandwidth_source=f"{_B200}: HBM3e bandwidth 8 TB/s per GPU (64 TB/s per board)",
            interconnect_source=f"{_B200}: {_NVLINK5}",
        ),
        Accelerator(
            name="b300", title="NVIDIA B300 (HGX, per GPU)",
            bf16_tflops=2250.0, fp16_tflops=2250.0, fp32_tflops=75.0, fp8_tflops=4500.0,
            memory_gib=288, bandwidth_gbs=8000.0, interconnect_gbs=900.0, link="nvlink5",
            source=f"{_B300}, {_HGX_BLACKWELL}; 2.3 TB / 8 = 288 GB",
            bandwidth_source=f"{_B300}: HBM3e bandwidth 8 TB/s per GPU",
            interconnect_source=f"{_B300}: {_NVLINK5}",
        ),
        Accelerator(
            name="gb200", title="NVIDIA GB200 (NVL72, per GPU)",
            bf16_tflops=2500.0, fp16_tflops=2500.0, fp32_tflops=80.0, fp8_tflops=5000.0,
            memory_gib=186, bandwidth_gbs=8000.0, interconnect_gbs=900.0, link="nvlink5",
            source=f"{_GB200}, per GPU (one 72nd of the rack): bf16/fp16 tensor 360 PFLOPS with sparsity / 72 = 5 = "
                   "2.5 dense; fp8 720 / 72 = 10 with sparsity = 5 dense; fp32 5,760 TFLOPS / 72 = 80; 13.4 TB "
                   "HBM3e / 72 = 186 GB",
            bandwidth_source=f"{_GB200}: HBM3e bandwidth 8 TB/s per GPU (576 TB/s / 72)",
            interconnect_source=f"{_GB200}: {_NVLINK5} (130 TB/s / 72)",
        ),
        Accelerator(
            name="l40s", title="NVIDIA L40S",
            bf16_tflops=362.05, fp16_tflops=362.05, fp32_tflops=91.6, fp8_tflops=733.0,
            memory_gib=48, bandwidth_gbs=864.0, interconnect_gbs=32.0, link="pcie4",
            source=f"{_L40S}: bf16/fp16 tensor 733 TFLOPS with sparsity = 362.05 dense, fp32 91.6; fp8 1,466 with "
                   "sparsity = 733 dense",
            bandwidth_source=f"{_L40S}: GDDR6 bandwidth 864 GB/s",
            interconnect_source=f"{_L40S}: no NVLink; PCIe Gen4 x16 64 GB/s total = 32 GB/s per direction",
        ),
        Accelerator(
            name="rtx4090", title="NVIDIA GeForce RTX 4090",
            bf16_tflops=165.2, fp16_tflops=165.2, fp32_tflops=82.6, fp8_tflops=330.3,
            memory_gib=24, bandwidth_gbs=1008.0, interconnect_gbs=32.0, link="pcie4",
            source=f"{_ADA}, RTX 4090: fp16/bf16 tensor with fp32 accumulate 165.2 TFLOPS dense (330.4 with "
                   "sparsity), fp8 with fp32 accumulate 330.3 dense, fp32 82.6",
            bandwidth_source=f"{_ADA}: RTX 4090 GDDR6X bandwidth 1,008 GB/s",
            interconnect_source=f"{_RTX4090}: no NVLink; PCIe Gen4 x16 = 32 GB/s per direction",
        ),
        Accelerator(
            name="rtx5090", title="NVIDIA GeForce RTX 5090",
            bf16_tflops=209.5, fp16_tflops=209.5, fp32_tflops=104.8, fp8_tflops=419.0,
            memory_gib=32, bandwidth_gbs=1792.0, interconnect_gbs=64.0, link="pcie5",
            source=f"{_BLACKWELL}, RTX 5090: fp16/bf16 tensor with fp32 accumulate 419 TFLOPS with sparsity = 209.5 "
                   "dense, fp8 with fp32 accumulate 838 with sparsity = 419 dense, fp32 104.8",
            bandwidth_source=f"{_RTX5090}: GDDR7 bandwidth 1,792 GB/s",
            interconnect_source=f"{_RTX5090}: no NVLink; PCIe Gen5 x16 = 64 GB/s per direction",
        ),
        Accelerator(
            name="mi300x", title="AMD Instinct MI300X",
            bf16_tflops=1307.4, fp16_tflops=1307.4, fp32_tflops=163.4, fp8_tflops=2614.9,
            memory_gib=192, bandwidth_gbs=5300.0, interconnect_gbs=448.0, link="infinity-fabric",
            source=f"{_MI300X}: {_MI300_PEAKS}",
            bandwidth_source=f"{_MI300X}: HBM3 peak bandwidth 5.3 TB/s",
            interconnect_source=f"{_MI300X}: {_MI300_LINKS}",
        ),
        Accelerator(
            name="mi325x", title="AMD Instinct MI325X",
            bf16_tflops=1307.4, fp16_tflops=1307.4, fp32_tflops=163.4, fp8_tflops=2614.9,
            memory_gib=256, bandwidth_gbs=6000.0, interconnect_gbs=448.0, link="infinity-fabric",
            source=f"{_MI325X}: {_MI300_PEAKS}",
            bandwidth_source=f"{_MI325X}: HBM3E peak bandwidth 6 TB/s",
            interconnect_source=f"{_MI325X}: {_MI300_LINKS}",
        ),
        Accelerator(
            name="mi355x", title="AMD Instinct MI355X",
            bf16_tflops=2516.6, fp16_tflops=2516.6, fp32_tflops=157.3, fp8_tflops=5033.2,
            memory_gib=288, bandwidth_gbs=8000.0, interconnect_gbs=537.6, link="infinity-fabric",
            source=f"{_MI355X}: bf16/fp16 2,516.6 TFLOPS dense (5,033.2 with sparsity), fp32 matrix 157.3; fp8 "
                   "5,033.2 dense",
            bandwidth_source=f"{_MI355X}: HBM3E peak bandwidth 8 TB/s",
            interconnect_source=f"{_MI355X}: 7 Infinity Fabric links x 153.6 GB/s total = 1,075 GB/s = 537.6 GB/s "
                                "per direction",
        ),
        Accelerator(
            name="tpu-v4", title="Google TPU v4",
            bf16_tflops=275.0, fp16_tflops=275.0, fp32_tflops=275.0 / 4,
            memory_gib=32, bandwidth_gbs=1200.0, interconnect_gbs=None, link="ici",
            source=f"{_TPU_V4}: 275 TFLOPS bf16 per chip; {_TPU_FP32}",
            bandwidth_source=f"{_TPU_V4}: HBM2 bandwidth 1,200 GB/s per chip",
            interconnect_source=f"{_TPU_V4}: no per-chip inter-chip interconnect figure",
        ),
        Accelerator(
            name="tpu-v5e", title="Google TPU v5e",
            bf16_tflops=197.0, fp16_tflops=197.0, fp32_tflops=197.0 / 4,
            memory_gib=16, bandwidth_gbs=819.0, interconnect_gbs=200.0, link="ici",
            source=f"{_TPU_V5E}: 197 TFLOPS bf16 per chip (int8 393 TOPS, no fp8); {_TPU_FP32}",
            bandwidth_source=f"{_TPU_V5E}: HBM2 bandwidth 819 GB/s per chip",
            interconnect_source=f"{_TPU_V5E}: inter-chip interconnect 400 GB/s bidirectional = 200 GB/s per "
                                "direction per chip",
        ),
        Accelerator(
            name="tpu-v5p", title="Google TPU v5p",
            bf16_tflops=459.0, fp16_tflops=459.0, fp32_tflops=459.0 / 4, fp8_tflops=459.0,
            memory_gib=95, bandwidth_gbs=2765.0, interconnect_gbs=600.0, link="ici",
            source=f"{_TPU_V5P}: 459 TFLOPS bf16 per chip, fp8 459; {_TPU_FP32}",
            bandwidth_source=f"{_TPU_V5P}: HBM2e bandwidth 2,765 GB/s per chip",
            interconnect_source=f"{_TPU_V5P}: inter-chip interconnect 1,200 GB/s bidirectional = 600 GB/s per "
                                "direction per chip",
        ),
        Accelerator(
            name="tpu-v6e", title="Google TPU v6e (Trillium)",
            bf16_tflops=918.0, fp16_tflops=918.0, fp32_tflops=918.0 / 4,
            memory_gib=32, bandwidth_gbs=1638.0, interconnect_gbs=400.0, link="ici",
            source=f"{_TPU_V6E}: 918 TFLOPS bf16 per chip (int8 1,836 TOPS, no fp8); {_TPU_FP32}",
            bandwidth_source=f"{_TPU_V6E}: HBM bandwidth 1,638 GB/s per chip",
            interconnect_source=f"{_TPU_V6E}: inter-chip interconnect 800 GB/s bidirectional = 400 GB/s per "
                                "direction per chip",
        ),
        Accelerator(
            name="gaudi3", title="Intel Gaudi 3",
            bf16_tflops=1835.0, fp16_tflops=None, fp32_tflops=None, fp8_tflops=1835.0,
            memory_gib=128, bandwidth_gbs=3670.0, interconnect_gbs=600.0, link="roce",
            source=f"{_GAUDI3}: bf16 matrix 1,835 TFLOPS, fp8 matrix 1,835; no fp16 or fp32 matrix peak published",
            bandwidth_source=f"{_GAUDI3}: HBM2e bandwidth 3.67 TB/s",
            interconnect_source=f"{_GAUDI3}: 24 x 200 GbE RoCE, 1,200 GB/s bidirectional = 600 GB/s per direction",
        ),
    )
}  # fmt: skip

# names kept from earlier tables and common spellings: the same rows
ALIASES = {
    "a100-80gb": "a100",
    "a100-sxm": "a100",
    "h100-sxm": "h100",
    "rtx-4090": "rtx4090",
    "rtx-5090": "rtx5090",
    "gaudi-3": "gaudi3",
    "trillium": "tpu-v6e",
}


def accelerator(name: str) -> Accelerator:
    """A row of the table by name (case-insensitive, or an alias such as a100-80gb), or, for a path to
    a .toml file, the accelerator it describes (see :func:`load_accelerator`)."""
    check_args("accelerator", name=name)
    if name.lower().endswith(".toml") or "/" in name or os.sep in name:
        return load_accelerator(name)
    key = ALIASES.get(name.lower(), name.lower())
    if key not in ACCELERATORS:
        raise SpecError(
            f"unknown accelerator {shown(name)}{did_you_mean(key, ACCELERATORS)}; known: {', '.join(ACCELERATORS)} "
            "(or a .toml file describing your own, or give --peak-tflops)"
        )
    return ACCELERATORS[key]


# the fields an accelerator file must give; the others default (title: the name, peaks: none published)
ACCELERATOR_FILE_REQUIRED = ("name", "memory_gib", "bandwidth_gbs")
# field: (required, kind), every field of Accelerator in its order: text where it is declared str, else a number
ACCELERATOR_FILE_FIELDS = {f.name: (f.name in ACCELERATOR_FILE_REQUIRED,
                                    "str" if f.type in (str, "str", "str | None") else "number")
                           for f in fields(Accelerator)}  # fmt: skip


def load_accelerator(path: str) -> Accelerator:
    """Your own accelerator from a small TOML file with the table's fields (``name``, ``memory_gib``
    and ``bandwidth_gbs`` required, and at least one of ``bf16_tflops``/``fp16_tflops``); numbers
    positive and finite, no other keys. Any problem is a SpecError naming the file and the field."""
    from archspec.io.loading import read_mapping

    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str):
        raise TypeError(f"load_accelerator: path must be a str or a path, got {type(path).__name__} {shown(path, 60)}")
    if not path.lower().endswith(".toml"):
        raise SpecError(f"--gpu {shown(path)}: an accelerator file is a .toml file")
    data = read_mapping(path)
    where = f"{path}"
    unknown = [k for k in data if k not in ACCELERATOR_FILE_FIELDS]
    if unknown:
        k = unknown[0]
        raise SpecError(f"{where}: unknown field {shown(k)}{did_you_mean(k, ACCELERATOR_FILE_FIELDS)}; "
                        f"an accelerator file has {', '.join(ACCELERATOR_FILE_FIELDS)}")  # fmt: skip
    for field, (required, kind) in ACCELERATOR_FILE_FIELDS.items():
        if field not in data:
            if required:
                raise SpecError(f"{where}: missing field {field!r} (required: {', '.join(ACCELERATOR_FILE_REQUIRED)})")
            continue
        value = data[field]
        if kind == "str":
            if not isinstance(value, str) or not value.strip():
                raise SpecError(f"{where}: {field} must be non-empty text, got {shown(value)}")
        elif isinstance(value, bool) or not isinstance(value, (int, float)):
            raise SpecError(f"{where}: {field} must be a number, got {shown(value)}")
        elif not math.isfinite(value) or value <= 0 or value > 1e9:
            raise SpecError(f"{where}: {field} must be a positive finite number up to 1e9, got {shown(value)}")
    if "bf16_tflops" not in data and "fp16_tflops" not in data:
        raise SpecError(f"{where}: give bf16_tflops or fp16_tflops (the dense 16-bit matrix peak, TFLOP/s)")
    name = data["name"].strip()
    if not name.isprintable() or len(name) > 60:
        raise SpecError(f"{where}: name must be one line of printable text up to 60 characters, got {shown(name)}")
    if name.lower() in ACCELERATORS or name.lower() in ALIASES:
        builtin = ALIASES.get(name.lower(), name.lower())
        raise SpecError(f"{where}: name {name!r} is the built-in accelerator {builtin!r}; give yours a name of its own")
    for field in ("title", "source", "bandwidth_source", "interconnect_source"):
        if field in data and not data[field].isprintable():
            raise SpecError(f"{where}: {field} must be one line of printable text, got {shown(data[field])}")
    if "link" in data:
        from archspec.plan.collectives import LINKS

        if data["link"] not in LINKS:
            raise SpecError(f"{where}: unknown link {shown(data['link'])}{did_you_mean(data['link'], LINKS)}; "
                            f"known: {', '.join(LINKS)}")  # fmt: skip
    given = f"your accelerator file {path}"

    def num(field):
        return float(data[field]) if field in data else None

    return Accelerator(
        name=name,
        title=data.get("title", name),
        bf16_tflops=num("bf16_tflops"),
        fp16_tflops=num("fp16_tflops"),
        fp32_tflops=num("fp32_tflops"),
        memory_gib=float(data["memory_gib"]),
        source=data.get("source", given),
        bandwidth_gbs=float(data["bandwidth_gbs"]),
        bandwidth_source=data.get("bandwidth_source", given),
        interconnect_gbs=num("interconnect_gbs"),
        interconnect_source=data.get("interconnect_source", given if "interconnect_gbs" in data else ""),
        fp8_tflops=num("fp8_tflops"),
        link=data.get("link"),
        price_per_hour=num("price_per_hour"),
    )


def resolve_peak(gpu: str | None, peak_tflops: float | None, dtype: str) -> tuple[float | None, Accelerator | None]:
    """Peak FLOP/s per device for a time estimate: `peak_tflops` (TFLOP/s) when given, else the table
    value of `gpu` at the math precision of `dtype`; (None, None) when neither is given."""
    from archspec.core.checks import check_real

    check_real("peak_tflops", peak_tflops, "resolve_peak", optional=True)
    acc = accelerator(gpu) if gpu is not None else None
    if peak_tflops is not None:
        peak = peak_tflops * 10**12  # exact for an integer
        if isinstance(peak, float) and not math.isfinite(peak) or isinstance(peak, int) and peak.bit_length() > 1024:
            raise SpecError(f"--peak-tflops {peak_tflops:.3g} is too large: the peak is beyond 1.8e308 FLOP/s")
        return peak, acc
    return (acc.peak(dtype), acc) if acc else (None, None)
