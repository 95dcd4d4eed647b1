"""`archspec sweep`: one row per combination of --vary values: the varied fields, total and active
parameters, forward FLOPs per token, weights and KV cache per token."""

from __future__ import annotations

import argparse
import sys

from archspec.cli.models import read_specs
from archspec.cli.options import DTYPE_HELP, dtype_name, positive_int
from archspec.cli.output import EXIT_MISMATCH, EXIT_OK, ROUNDING_NOTE, fmt_value, progress_callback, render
from archspec.errors import SpecError

HELP = (
    "one row per combination of --vary values: the varied fields, total and active parameters, forward FLOPs "
    "per token, weights and KV cache per token"
)
EXAMPLES = (
    "archspec sweep gpt2 --vary d_model=512:1024:256 --vary n_heads=8,16\n"
    "  archspec sweep gpt3-6.7b --vary n_kv_heads=1,8,32 --dtype bfloat16\n"
    "  archspec sweep gpt2 --vary activation=gelu,swiglu --set d_ff=2048 --format csv > sweep.csv"
)


def add_args(p: argparse.ArgumentParser) -> None:
    from archspec.memory import DTYPE_BYTES
    from archspec.sweep import KEEP

    p.add_argument(
        "--vary",
        action="append",
        required=True,
        metavar="FIELD=VALUES",
        help="a field and its values: a list (d_model=512,1024; activation=gelu,swiglu) or an inclusive range "
        "START:STOP[:STEP] (d_model=512:4096:512); repeat for more fields: one row per combination",
    )
    p.add_argument(
        "--zip",
        action="append",
        metavar="FIELD,FIELD",
        default=[],
        help="vary these --vary fields in lock-step (equal-length lists: the first values together, then the "
        "second...) instead of in every combination; repeatable, e.g. --zip d_model,n_heads",
    )
    p.add_argument(
        "--keep",
        choices=list(KEEP),
        help="d_head: keep the head width while d_model varies, so that n_heads = d_model / d_head",
    )
    p.add_argument(
        "--seq-len", type=positive_int, help="sequence length for FLOPs per token (default: each row's max_positions)"
    )
    p.add_argument("--dtype", default="bf16", type=dtype_name, choices=list(DTYPE_BYTES), help=DTYPE_HELP)


def run(args) -> int:
    from archspec.render import human, human_bytes, table
    from archspec.sweep import parse_vary, sweep

    varies = [parse_vary(v) for v in args.vary]
    zipped = [[f.strip() for f in z.split(",")] for z in args.zip]
    specs = read_specs(args)
    objects, skipped = [], []
    for i, spec in enumerate(specs):
        progress = progress_callback(f"sweep {spec.name}" + (f" ({i + 1}/{len(specs)})" if len(specs) > 1 else ""))
        objects += sweep(spec, varies, args.seq_len, args.dtype, progress, zipped, args.keep, skipped)
    if not objects:
        raise SpecError(f"no combination of the sweep is a valid spec; the first: {skipped[0]}")
    for s in skipped:
        sys.stderr.write(f"archspec: skipped {s}\n")

    def people() -> str:
        fields = [v.field for v in varies] + (["n_heads"] if args.keep else [])
        headers = ["model", *fields, "params", "active", "FLOPs/token", f"weights {args.dtype}", "KV/token"]
        rows = [
            [o["name"], *(fmt_value(o[f]) for f in fields), human(o["total"]), human(o["active"]),
             human(float(o["forward_per_token"])), human_bytes(o["weights_bytes"]),
             human_bytes(o["kv_cache_bytes_per_token"])]
            for o in objects
        ]  # fmt: skip
        at = f"{args.seq_len:,}-token sequences" if args.seq_len else "each row's max_positions"
        note = (
            f"FLOPs/token: exact forward matmul FLOPs per token over {at} (2 per multiply-accumulate); "
            f"weights and KV cache per token in {args.dtype}."
        )
        if args.keep:
            note += " n_heads follows d_model (--keep d_head)."
        if skipped:
            note += f"\n{len(skipped)} combination(s) skipped (the spec refuses them; see stderr)."
        return table(rows, headers, args.format) + "\n\n" + ROUNDING_NOTE + "\n" + note

    render(args, objects, people)
    return EXIT_MISMATCH if skipped else EXIT_OK
