"""`archspec fit`: which accelerators, and how many of each, hold each MODEL: one row per accelerator
and weight dtype, with the fewest devices and the layout (tensor parallel degree for inference, ZeRO
stage for training and LoRA)."""

from __future__ import annotations

import argparse

from archspec.cli.models import read_loaded
from archspec.cli.options import accelerators, gpu_option, positive_int, positive_length
from archspec.cli.output import EXIT_OK, render
from archspec.core.errors import SpecError
from archspec.core.vocab import TRAINING_FLAGS, TRAINING_OPTIONS

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
    ("engine", lambda a: a.task == "inference",
     "--engine changes nothing without --task inference (it is the serving engine's share of memory)"),
    *((dest, lambda a: a.task == "inference",
       f"--{dest.replace('_', '-')} changes nothing without --task inference (it is the serving engine's reserve)")
      for dest in ("gpu_memory_utilization", "max_batched_tokens", "context_reserve")),
    ("weights", lambda a: a.task == "inference",
     "--weights changes nothing without --task inference (training and lora plan their own dtypes)"),
    *((dest, lambda a: a.task != "inference",
       f"--{dest.replace('_', '-')} changes nothing with --task inference (it is a training option)")
      for dest in TRAINING_OPTIONS),
    ("price_per_hour", lambda a: a.task == "inference",
     "--price-per-hour changes nothing without --task inference (it prices serving; `archspec flops --tokens` "
     "prices a training run)"),
    ("lora_rank", lambda a: a.task == "lora",
     "--lora-rank changes nothing without --task lora (it is the rank of the adapters a LoRA fine-tune trains)"),
    ("lora_targets", lambda a: a.task == "lora",
     "--lora-targets changes nothing without --task lora (they are the projections a LoRA fine-tune adapts)"),
]  # fmt: skip


def add_args(p: argparse.ArgumentParser) -> None:
    from archspec.plan.compare import DEFAULT_SEQ_LEN
    from archspec.plan.fit import LORA_RANK, LORA_TARGETS, TASKS

    p.add_argument("--task", default="inference", choices=TASKS,
                   help="inference (weights + KV cache; default), training (weights, gradients, AdamW states, "
                   "activations) or lora (a frozen base, adapters with their gradients and AdamW states, "
                   "activations)")  # fmt: skip
    p.add_argument(
        "--seq-len",
        "-s",
        type=positive_length,
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
    from archspec.cli.options import engine_args, weights_name
    from archspec.core.vocab import ATTENTION, OFFLOAD, RECOMPUTE
    from archspec.memory import OPTIMIZERS

    p.add_argument("--weights", type=weights_name, metavar="FORMAT|MAP|LAYOUT",
                   help="with --task inference: only this weight storage (a format, a map by role such as "
                   "mlp=fp8_row,attention=bf16, or a layout such as deepseek-fp8; see `archspec memory --help`); "
                   "default: every format, or a checkpoint's stored formats")  # fmt: skip
    p.add_argument("--recompute", choices=list(RECOMPUTE),
                   help="activation recomputation: none, selective, full (default: full for lora, gradient "
                   "checkpointing as peft's and the trainers' QLoRA/LoRA guides run it; none for training)",
                   )  # fmt: skip
    p.add_argument("--attention", choices=list(ATTENTION), help="flash (default) or eager, as `archspec memory`")
    p.add_argument("--optimizer", choices=list(OPTIMIZERS), help="optimizer states (default adamw)")
    p.add_argument("--fp32-grads", action="store_true", help="keep gradients in fp32")
    p.add_argument("--dropout", action="store_true", help="count dropout masks in the activations")
    p.add_argument("--offload", choices=list(OFFLOAD), help="optimizer: the optimizer states in host memory")
    engine_args(p)
    from archspec.cli.options import price_option

    price_option(p, "with one --gpu and --task inference, adds the cost per million tokens generated and "
                 "prefilled of each row")  # fmt: skip
    gpu_option(p, "only these accelerators")


COST_HEADERS = ["per M generated", "per M prefilled"]
COST_NOTE = (
    " Cost per million tokens at {price} a device-hour: the layout's devices, paid for the request that fills the "
    "context (a prompt of the sequence's tokens but one, then the decode step of the last) as `archspec inference` "
    "times it; - where it does not fit or the model generates nothing."
)


def _costs(f) -> list[str]:
    """The row's cost cells, when it has a price."""
    from archspec.plan.cost import money

    if f.price_per_hour is None:
        return []
    return ["-" if c is None else money(c) for c in (f.cost_per_million_generated, f.cost_per_million_prefilled)]


def _accelerators(args):
    """The accelerators of --gpu (or all of them); --price-per-hour is the price of one."""
    accs = accelerators(args.gpu)
    if args.price_per_hour is not None and len(accs) != 1:
        raise SpecError("--price-per-hour is what one accelerator costs an hour: give exactly one --gpu (or give "
                        "each accelerator file its own price_per_hour)")  # fmt: skip
    return accs


def _price(args) -> str:
    from archspec.plan.cost import money

    if args.price_per_hour is not None:
        return f"{money(args.price_per_hour)} (--price-per-hour)"
    return "the price_per_hour of its accelerator file"


def _reserve_lines(fits) -> list[str]:
    """The engine's reserve on each accelerator of the rows, at the first row's tensor-parallel degree: a
    line per item."""
    from archspec.render.text import human_bytes

    out, seen = [], set()
    for f in fits:
        if f.reserve is None or f.accelerator in seen:
            continue
        seen.add(f.accelerator)
        tp = f" (TP {f.tensor_parallel})" if f.tensor_parallel and f.tensor_parallel > 1 else ""
        out.append(f"reserve per {f.accelerator} device, {f.reserve.engine}{tp}:")
        out += [f"  - {line}" for line in f.reserve.lines(human_bytes)]
    return out


def run(args) -> int:
    from archspec.memory import STORAGE
    from archspec.plan.compare import context_seq_len
    from archspec.plan.fit import DTYPES, fit, native
    from archspec.render.text import GREEN, RED, human_bytes, paint, table

    accs = _accelerators(args)
    lora = dict(lora_rank=args.lora_rank, lora_targets=args.lora_targets) if args.task == "lora" else {}
    training = {
        k: getattr(args, k) for k in TRAINING_OPTIONS if k not in TRAINING_FLAGS and getattr(args, k) is not None
    }
    training |= {k: True for k in TRAINING_FLAGS if getattr(args, k)}
    recompute = training.get("recompute", "full" if args.task == "lora" else "none")
    objects, blocks, fitted = [], [], []
    from archspec.sources.resolve import stored, weights_of

    for loaded in read_loaded(args):
        spec = loaded.spec
        seq_len, clamped = context_seq_len(spec, args.seq_len)
        rows, memo = [], {}
        given = args.weights if args.task == "inference" else None
        as_stored, stored_note = weights_of(loaded.source, given) if args.task == "inference" else (None, None)
        extra = (
            {"weights_source": "stored", "stored": stored(loaded.source).to_dict()} if as_stored and not given else {}
        )
        every = tuple(STORAGE) if args.task == "inference" else DTYPES[args.task]
        for acc in accs:
            for dtype in (as_stored,) if as_stored else every:
                serve = (
                    dict(engine=args.engine, memory_fraction=args.gpu_memory_utilization,
                         max_batched_tokens=args.max_batched_tokens, context_reserve=args.context_reserve)
                    if args.task == "inference"
                    else {}
                )  # fmt: skip
                f = fit(spec, acc, dtype, args.task, args.batch, seq_len, memo, training=training or None, **lora,
                        **serve, price_per_hour=args.price_per_hour)  # fmt: skip
                emulated = args.task == "inference" and not native(acc, f.dtype)
                objects.append({**f.to_dict(), "native": not emulated, "seq_len_clamped": clamped, **extra})
                of = f"{acc.memory_gib:g} GiB"
                if f.usable_bytes is not None and f.usable_bytes != acc.memory_bytes:
                    of = f"{human_bytes(f.usable_bytes)} ({of} less the reserve)"
                fitted.append(f)
                used = "" if f.per_device_bytes is None else f"{human_bytes(f.per_device_bytes)} of {of}"
                devices = paint(f"{f.devices:,}", GREEN if f.devices == 1 else "") if f.devices else paint("-", RED)
                rows.append([acc.name, f.dtype + (" (emulated)" if emulated else ""), devices, f.layout, used,
                             *_costs(f)])  # fmt: skip
        at = f"{seq_len:,}" + (f" (its context; {args.seq_len:,} asked)" if clamped else "")
        head = f"{spec.name}: {args.task}, batch {args.batch} x {at} tokens; {_held(args, recompute)} per device"
        priced = any(len(r) > 5 for r in rows)
        rows = [r + ["", ""] if priced and len(r) == 5 else r for r in rows]
        headers = ["gpu", "dtype", "devices", "layout", "per device"] + (COST_HEADERS if priced else [])
        align = ("left", "left", "right", "left", "right") + (("right", "right") if priced else ())
        head += f"\nnote: {stored_note}" if stored_note else ""
        blocks.append(head + "\n" + table(rows, headers, args.format, colalign=align))
    note = "\n".join([*_reserve_lines(fitted), _note(args, objects)])
    render(args, objects, lambda: "\n\n".join(blocks) + "\n\n" + note)
    return EXIT_OK


def _held(args, recompute: str) -> str:
    """What each device holds for the task, in words."""
    return {"inference": "weights + KV cache",
            "training": "weights, gradients, optimizer states (mixed precision: 16 bytes per parameter for bf16 "
            f"with AdamW) and activations ({args.attention or 'flash'} attention, recompute {recompute})",
            "lora": f"the frozen base in the dtype, rank-{args.lora_rank} adapters on {args.lora_targets} with "
            "their gradients and optimizer states (bf16 mixed precision) and activations "
            f"({args.attention or 'flash'} attention, recompute {recompute}"
            + (": gradient checkpointing, as peft's QLoRA guide runs it)" if recompute == "full" else ")")
            }[args.task]  # fmt: skip


def _note(args, objects: list[dict]) -> str:
    """The closing note: what the devices and layouts mean, what the formats store, what is not counted."""
    from archspec.plan.fit import MAX_DEVICES

    lora = args.task == "lora"
    layouts = (
        "TP: tensor parallel (1, 2, 4 or 8, dividing the heads and d_ff), PP: pipeline stages beyond that"
        if args.task == "inference"
        else "ZeRO stage over DP data-parallel devices, with TP tensor parallelism (1, 2, 4 or 8) when needed"
    )
    return (
        f"devices: the fewest that hold it ({layouts}), as `archspec memory` plans each layout; - : not on "
        f"{MAX_DEVICES:,}."
        + (
            " The KV cache is bf16 beside every weight format but fp32 and fp16; every format but fp32, bf16 and "
            "fp16 is weight-only (computed in bf16). (emulated): an FP8 format on an accelerator without an FP8 "
            "matrix path (the hardware table's fp8 '-'), run as weight-only FP8 kernels."
            if args.task == "inference"
            else ""
        )
        + (" bf16, int8 and nf4 (QLoRA) store the frozen base; the adapters train in bf16." if lora else "")
        + (COST_NOTE.format(price=_price(args)) if any("price_per_hour" in o for o in objects) else "")
        + ("" if args.task == "inference" else " Workspace, fragmentation and framework overhead are not counted.")
        + " GiB = 2^30 bytes."
    )
