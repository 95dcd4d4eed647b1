"""`archspec hardware`: the accelerator table: dense peaks per dtype, memory, bandwidth and
interconnect, with their sources; --gpu FILE adds your own."""

from __future__ import annotations

import argparse

from archspec.cli.options import accelerators, gpu_option
from archspec.cli.output import EXIT_OK, render

HELP = (
    "the accelerator table: dense peaks per dtype, memory, bandwidth and interconnect, with their sources; "
    "--gpu FILE adds your own"
)
EXAMPLES = (
    "archspec hardware\n  archspec hardware --gpu h100 --gpu mi355x --format json\n"
    "  archspec hardware --gpu my-gpu.toml"
)
MODELS = None


def _tflops(x) -> str:
    return "-" if x is None else f"{x:,.4g}"


def add_args(p: argparse.ArgumentParser) -> None:
    gpu_option(p, "only these accelerators")


def run(args) -> int:
    from archspec.render.text import table

    accs = accelerators(args.gpu)
    objects = [a.to_dict() for a in accs]

    def people() -> str:
        headers = ["name", "accelerator", "bf16 TFLOPS", "fp8 TFLOPS", "fp32 TFLOPS", "memory GiB", "bandwidth GB/s",
                   "interconnect GB/s"]  # fmt: skip
        rows = [[a.name, a.title, _tflops(a.bf16_tflops if a.bf16_tflops is not None else a.fp16_tflops),
                 _tflops(a.fp8_tflops), _tflops(a.fp32_tflops), f"{a.memory_gib:g}", f"{a.bandwidth_gbs:,g}",
                 "-" if a.interconnect_gbs is None else f"{a.interconnect_gbs:,g}"] for a in accs]  # fmt: skip
        align = ("left", "left", "right", "right", "right", "right", "right", "right")
        sources = [f"{a.name}: {a.source}; {a.bandwidth_source}; {a.interconnect_source}" for a in accs]
        note = (
            "Dense peaks (a figure printed with sparsity is halved); bf16 is fp16 where the chip has no bf16 "
            "path; - where the vendor publishes none (fp8: no fp8 tensor path). Interconnect: device to device, "
            "per direction per device. GB/s = 10^9 bytes per second."
        )
        return (
            table(rows, headers, args.format, colalign=align)
            + "\n\n"
            + note
            + "\n\nsources:\n"
            + "\n".join(f"  {s}" for s in sources)
        )

    render(args, objects, people)
    return EXIT_OK
