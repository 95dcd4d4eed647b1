"""`archspec plot`: draw a PNG or SVG (by the suffix of -o): breakdown (parameters by component),
memory (training and inference memory against sequence length), scaling (parameters and FLOPs per
token against a --vary field); needs the [plot] extra."""

from __future__ import annotations

import argparse

from archspec.cli.models import read_specs
from archspec.cli.options import DTYPE_HELP, OneGpu, dtype_name, positive_int, positive_length
from archspec.cli.output import EXIT_OK, check_writable, render
from archspec.core.errors import SpecError

HELP = (
    "draw a PNG or SVG (by the suffix of -o): breakdown (parameters by component), memory (training and inference "
    "memory against sequence length), scaling (parameters and FLOPs per token against a --vary field); "
    "needs the [plot] extra"
)
EXAMPLES = (
    "archspec plot breakdown transformer-base gpt2 bert-base gpt3-175b -o breakdown.svg\n"
    "  archspec plot memory gpt3-xl gpt3-6.7b --gpu h100 --batch 4 -o memory.png\n"
    "  archspec plot scaling gpt2 --vary d_model=384:2304:192 --seq-len 1024 -o scaling.svg\n"
    "  archspec plot memory gpt2 -o memory.svg --format json"
)
MODELS = None
OVERRIDES = True
# options this command has that change nothing in some uses of it: (dest, used, what it needs)
UNUSED_UNLESS = [
    ("format", lambda a: a.format != "markdown",
     "--format markdown changes nothing for `archspec plot` (it prints one line; json or csv give the numbers drawn)"),
]  # fmt: skip


# options that change one kind of plot only: a value given for another kind is refused, not ignored
_PLOT_OPTIONS = {"vary": "scaling", "gpu": "memory", "batch": "memory", "recompute": "memory", "dtype": "memory"}


def add_args(p: argparse.ArgumentParser) -> None:
    from archspec.core.vocab import RECOMPUTE
    from archspec.memory import DTYPE_BYTES
    from archspec.plan.hardware import ACCELERATORS
    from archspec.render.plot import KINDS

    p.add_argument(
        "kind",
        choices=KINDS,
        help="breakdown: parameters by component, models side by side; memory: training and inference memory "
        "against sequence length; scaling: parameters and FLOPs per token against a --vary field",
    )
    p.add_argument("models", metavar="MODEL", nargs="+", help="a preset name (see `archspec list`) or a spec file")
    p.add_argument("--output", "-o", required=True, metavar="FILE", help="the picture to write: .png or .svg")
    p.add_argument("--vary", action="append", metavar="FIELD=VALUES", help="scaling: the field and its values, "
                   "e.g. d_model=512:4096:512 (one field)")  # fmt: skip
    p.add_argument("--gpu", action=OneGpu, metavar="NAME|FILE", help="memory: draw this accelerator's capacity (a "
                   f"name from {', '.join(list(ACCELERATORS)[:3])}, ... (`archspec hardware`), "
                   "or a .toml file)")  # fmt: skip
    p.add_argument("--batch", "-b", type=positive_int, help="memory: sequences per step (default 1)")
    p.add_argument("--dtype", type=dtype_name, choices=list(DTYPE_BYTES), help="memory: " + DTYPE_HELP)
    p.add_argument("--recompute", choices=list(RECOMPUTE), help="memory: activation recomputation (default none)")
    p.add_argument(
        "--seq-len",
        "-s",
        type=positive_length,
        help="memory: the longest sequence (default max_positions); scaling: the sequence for FLOPs per token",
    )


def run(args) -> int:
    from archspec.render import plot

    for option, kind in _PLOT_OPTIONS.items():
        if getattr(args, option) is not None and args.kind != kind:
            flag = "--" + option.replace("_", "-")
            raise SpecError(f"{flag} applies to `archspec plot {kind}`, not to `plot {args.kind}`")
    plot.output_format(args.output)
    check_writable(args.output, args.output)  # before any work starts
    plot.require_matplotlib()
    specs = read_specs(args)
    if args.kind == "breakdown":
        if args.seq_len is not None:
            raise SpecError("--seq-len applies to `plot memory` and `plot scaling`, not to `plot breakdown`")
        data = plot.breakdown_data(specs)
    elif args.kind == "memory":
        data = plot.memory_data(specs, args.batch or 1, args.dtype or "bf16", "adamw", args.recompute or "none",
                                args.gpu, args.seq_len)  # fmt: skip
    else:
        if not args.vary or len(args.vary) != 1:
            raise SpecError("plot scaling needs exactly one --vary FIELD=VALUES, e.g. --vary d_model=512:4096:512")
        data = plot.scaling_data(specs, args.vary[0], args.seq_len)
    plot.draw(args.kind, data, args.output)

    def people() -> str:
        from pathlib import Path

        size = Path(args.output).stat().st_size
        names = ", ".join(s.name for s in specs)
        return f"wrote {args.output} ({size:,} bytes): {args.kind} of {names}; --format json gives the numbers drawn"

    render(args, data.to_dicts(), people)
    return EXIT_OK
