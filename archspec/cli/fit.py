"""`archspec fit`: which accelerators, and how many of each, hold each MODEL: one row per accelerator
and weight dtype, with the fewest devices and the layout (tensor parallel degree for inference, ZeRO
stage for training and LoRA)."""

from __future__ import annotations

import argparse

from archspec.cli.models import read_specs
from archspec.cli.options import accelerators, gpu_option, positive_int
from archspec.cli.output import EXIT_OK, render

HELP = (
    "which accelerators, and how many of each, hold each MODEL: one row per accelerator and weight dtype, "
    "with the fewest devices and the layout (tensor parallel degree for inference, ZeRO stage for training "
    "and LoRA)"
)
EXAMPLES = (
    "archspec fit llama-3-70b\n  archspec fit gpt3-175b --task training --gpu h100 --gpu b200\n"
    "  archspec fit llama-2-7b --task lora --lora-rank 64 --lora-targets attention --gpu rtx4090\n"
    "  archspec fit mixtral-8x7b --seq-len 32768 --batch 8 --format json"
)
# options this command has that change nothing in some uses of it: (dest, used, what it needs)
UNUSED_UNLESS = [
    ("lora_rank", lambda a: a.task == "lora",
     "--lora-rank changes nothing without --task lora (it is the rank of the adapters a LoRA fine-tune trains)"),
    ("lora_targets", lambda a: a.task == "lora",
     "--lora-targets changes nothing without --task lora (they are the projections a LoRA fine-tune adapts)"),
]  # fmt: skip


def add_args(p: argparse.ArgumentParser) -> None:
    from archspec.compare import DEFAULT_SEQ_LEN
    from archspec.fit import LORA_RANK, LORA_TARGETS, TASKS

    p.add_argument("--task", default="inference", choices=TASKS,
                   help="inference (weights + KV cache; default), training (weights, gradients, AdamW states, "
                   "activations) or lora (a frozen base, adapters with their gradients and AdamW states, "
                   "activations)")  # fmt: skip
    p.add_argument(
        "--seq-len",
        "-s",
        type=positive_int,
        default=DEFAULT_SEQ_LEN,
        help=f"tokens per sequence (default {DEFAULT_SEQ_LEN:,}; a model whose context is shorter is planned at "
        "its context, and marked)",
    )
    p.add_argument("--batch", "-b", type=positive_int, default=1,
                   help="sequences: served together (inference) or per micro-batch on each device (training); "
                   "default 1")  # fmt: skip
    p.add_argument("--lora-rank", type=positive_int, metavar="RANK", default=LORA_RANK,
                   help=f"with --task lora: the adapters' rank (default {LORA_RANK})")  # fmt: skip
    p.add_argument("--lora-targets", metavar="LIST", default=LORA_TARGETS,
                   help=f"with --task lora: attention, mlp, all (default {LORA_TARGETS}) or projections "
                   "q,k,v,o,gate,up,down, comma-separated")  # fmt: skip
    gpu_option(p, "only these accelerators")


def run(args) -> int:
    from archspec.compare import context_seq_len
    from archspec.fit import DTYPES, MAX_DEVICES, fit
    from archspec.render import GREEN, RED, human_bytes, paint, table

    accs = accelerators(args.gpu)
    lora = dict(lora_rank=args.lora_rank, lora_targets=args.lora_targets) if args.task == "lora" else {}
    objects, blocks = [], []
    from archspec.sources.resolve import stored, weights_of

    for spec in read_specs(args):
        seq_len, clamped = context_seq_len(spec, args.seq_len)
        rows, memo = [], {}
        as_stored, stored_note = weights_of(spec, None) if args.task == "inference" else (None, None)
        extra = {"weights_source": "stored", "stored": stored(spec).to_dict()} if as_stored else {}
        for acc in accs:
            for dtype in (as_stored,) if as_stored else DTYPES[args.task]:
                f = fit(spec, acc, dtype, args.task, args.batch, seq_len, memo, **lora)
                objects.append({**f.to_dict(), "seq_len_clamped": clamped, **extra})
                used = "" if f.per_device_bytes is None else (
                    f"{human_bytes(f.per_device_bytes)} of {acc.memory_gib:g} GiB")  # fmt: skip
                devices = paint(f"{f.devices:,}", GREEN if f.devices == 1 else "") if f.devices else paint("-", RED)
                rows.append([acc.name, dtype, devices, f.layout, used])
        what = {"inference": "weights + KV cache",
                "training": "weights, gradients, AdamW states (mixed precision: 16 bytes per parameter for bf16) "
                "and activations (flash attention, no recomputation)",
                "lora": f"the frozen base in the dtype, rank-{args.lora_rank} adapters on {args.lora_targets} with "
                "their gradients and AdamW states (bf16 mixed precision) and activations (flash attention, no "
                "recomputation)"}[args.task]  # fmt: skip
        at = f"{seq_len:,}" + (f" (its context; {args.seq_len:,} asked)" if clamped else "")
        head = f"{spec.name}: {args.task}, batch {args.batch} x {at} tokens; {what} per device"
        align = ("left", "left", "right", "left", "right")
        head += f"\nnote: {stored_note}" if as_stored else ""
        blocks.append(head + "\n" + table(rows, ["gpu", "dtype", "devices", "layout", "per device"], args.format,
                                         colalign=align))  # fmt: skip
    layouts = (
        "TP: tensor parallel (1, 2, 4 or 8, dividing the heads and d_ff), PP: pipeline stages beyond that"
        if args.task == "inference"
        else "ZeRO stage over DP data-parallel devices, with TP tensor parallelism (1, 2, 4 or 8) when needed"
    )
    note = (
        f"devices: the fewest that hold it ({layouts}), as `archspec memory` plans each layout; - : not on "
        f"{MAX_DEVICES:,}."
        + (" int8/int4 are weight-only (the KV cache stays bf16 for int4)." if args.task == "inference" else "")
        + (" bf16, int8 and nf4 (QLoRA) store the frozen base; the adapters train in bf16." if lora else "")
        + " Workspace, fragmentation and framework overhead are not counted. GiB = 2^30 bytes."
    )
    render(args, objects, lambda: "\n\n".join(blocks) + "\n\n" + note)
    return EXIT_OK
