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


def _links(accs, fmt: str) -> str:
    """The interconnects of `accs` with the published latency of one collective over each, and its source."""
    from archspec.plan.collectives import LINKS
    from archspec.render.text import table

    links = [LINKS[k] for k in dict.fromkeys(a.link for a in accs if a.link)]
    rows = [[k.name, k.title, "-" if k.all_reduce_us is None else f"{k.all_reduce_us:g}",
             "-" if k.all_to_all_us is None else f"{k.all_to_all_us:g}"] for k in links]  # fmt: skip
    figures = [(k, "all-reduce", k.all_reduce_us, k.all_reduce_source) for k in links]
    figures += [(k, "all-to-all", k.all_to_all_us, k.all_to_all_source) for k in links]
    sources = [f"  {k.name} {what}: {src}" for k, what, us, src in figures if us is not None]
    return (
        "latency of one collective (small message, 8 devices), added per collective to a parallel layout's decode "
        "step (archspec.plan.collectives); - : no published figure, not counted\n"
        + table(rows, ["link", "interconnect", "all-reduce µs", "all-to-all µs"], fmt,
                colalign=("left", "left", "right", "right"))
        + ("\n" + "\n".join(sources) if sources else "")
    )  # fmt: skip


def add_args(p: argparse.ArgumentParser) -> None:
    gpu_option(p, "only these accelerators")


def run(args) -> int:
    from archspec.render.text import table

    accs = accelerators(args.gpu)
    objects = [a.to_dict() for a in accs]

    def people() -> str:
        headers = ["name", "accelerator", "bf16 TFLOPS", "fp8 TFLOPS", "fp32 TFLOPS", "memory GiB", "bandwidth GB/s",
                   "interconnect GB/s", "link"]  # fmt: skip
        rows = [[a.name, a.title, _tflops(a.bf16_tflops if a.bf16_tflops is not None else a.fp16_tflops),
                 _tflops(a.fp8_tflops), _tflops(a.fp32_tflops), f"{a.memory_gib:g}", f"{a.bandwidth_gbs:,g}",
                 "-" if a.interconnect_gbs is None else f"{a.interconnect_gbs:,g}", a.link or "-"]
                for a in accs]  # fmt: skip
        align = ("left", "left", "right", "right", "right", "right", "right", "right", "left")
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
            + "\n\n"
            + _links(accs, args.format)
        )

    render(args, objects, people)
    return EXIT_OK
