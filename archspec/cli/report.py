"""`archspec report`: one self-contained HTML page (inline CSS and SVG, nothing loaded at view time):
the comparison, the breakdowns, the three pictures, memory for training and inference, where each
model fits, and the published claims with their sources; needs the [plot] extra."""

from __future__ import annotations

import argparse

from archspec.cli.models import read_specs
from archspec.cli.options import accelerators, gpu_option, positive_int, positive_length
from archspec.cli.output import EXIT_OK, render
from archspec.core.errors import SpecError

HELP = (
    "one self-contained HTML page (inline CSS and SVG, nothing loaded at view time): the comparison, the "
    "breakdowns, the three pictures, memory for training and inference, where each model fits, and the "
    "published claims with their sources; needs the [plot] extra"
)
EXAMPLES = (
    "archspec report gpt2 llama-3-8b mixtral-8x7b -o report.html\n"
    "  archspec report deepseek-v3 --seq-len 32768 --gpu h200 --gpu b200 -o deepseek.html"
)


def add_args(p: argparse.ArgumentParser) -> None:
    from archspec.plan.compare import DEFAULT_SEQ_LEN

    p.add_argument("--output", "-o", required=True, metavar="FILE.html", help="the page to write (.html)")
    p.add_argument("--seq-len", "-s", type=positive_length, default=DEFAULT_SEQ_LEN,
                   help=f"tokens per sequence for FLOPs, memory and fit (default {DEFAULT_SEQ_LEN:,}; a model whose "
                   "context is shorter at its context, marked)")  # fmt: skip
    p.add_argument("--batch", "-b", type=positive_int, default=1, help="sequences for memory and fit (default 1)")
    gpu_option(p, "the accelerators of the fit section (default: the whole table)")


def run(args) -> int:
    from pathlib import Path

    from archspec.cli.output import check_writable
    from archspec.render.report import ReportInputs, build_report

    out = Path(args.output)
    if out.suffix.lower() not in (".html", ".htm"):
        raise SpecError(f"{args.output}: the report is an HTML page; name it FILE.html")
    if not out.parent.is_dir():
        raise SpecError(f"{args.output}: no such folder {str(out.parent)!r}")
    if out.is_dir():  # the output is checked before any work starts
        raise SpecError(f"{args.output} is a folder; name the page inside it, e.g. {out / 'report.html'}")
    check_writable(out, args.output)
    specs = read_specs(args)
    page = build_report(ReportInputs(specs, list(args.models), args.seq_len, args.batch, accelerators(args.gpu)))
    try:
        out.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise SpecError(f"{args.output}: cannot write: {exc}") from None
    objects = [{"name": s.name, "output": str(out), "bytes": len(page.encode("utf-8"))} for s in specs]
    render(args, objects, lambda: f"wrote {out} ({len(page.encode('utf-8')):,} bytes): "
            f"{', '.join(s.name for s in specs)}; open it in any browser, it loads nothing from elsewhere")  # fmt: skip
    return EXIT_OK
