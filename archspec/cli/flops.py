"""`archspec flops`: exact forward/backward/training FLOPs by component, the published approximations
beside them, and training cost for --tokens on --gpus."""

from __future__ import annotations

import argparse
from fractions import Fraction

from archspec.cli.models import MEASURED_LINE, is_measured, read_models
from archspec.cli.options import (
    dtype_name,
    mfu,
    one_gpu_option,
    positive_int,
    positive_number,
    price_option,
    workload_args,
)
from archspec.cli.output import EXIT_OK, by_kind, fraction, render
from archspec.core.errors import SpecError

HELP = (
    "exact forward/backward/training FLOPs by component, the published approximations beside them, "
    "and training cost for --tokens on --gpus"
)
EXAMPLES = (
    "archspec flops gpt2 --batch 8 --seq-len 1024\n  archspec flops gpt3-175b --tokens 300e9\n"
    "  archspec flops gpt3-175b --tokens 300e9 --gpu h100 --gpus 1024 --mfu 0.4\n"
    "  archspec flops transformer-base --seq-len 30 --src-len 32 --format json"
)
# options this command has that change nothing in some uses of it: (dest, used, what it needs)
UNUSED_UNLESS = [
    ("mfu", lambda a: bool(a.gpu or a.peak_tflops),
     "--mfu changes nothing without --gpu NAME or --peak-tflops N (it scales the peak of a training-time estimate)"),
    ("dtype", lambda a: bool(a.gpu or a.peak_tflops),
     "--dtype changes nothing without --gpu NAME or --peak-tflops N (it chooses the precision of the peak)"),
]  # fmt: skip


def _measured_flops_block(m, fmt: str) -> str:
    from archspec.render.text import human, sci, table

    if m.forward is None:
        rows = [["forward (FlopCounterMode)", "not measured", ""]]
    else:
        per_token = human(Fraction(m.forward, m.batch * m.seq_len))
        rows = [["forward (FlopCounterMode, matmul)", sci(m.forward), per_token],
                ["training (3 x forward)", sci(3 * m.forward), ""]]  # fmt: skip
    lines = [
        f"{m.name}: batch {m.batch} x {m.seq_len} tokens; {m.source} ({m.architecture}, model_type {m.model_type})",
        MEASURED_LINE,
        table(rows, ["", "FLOPs", "per token"], fmt, colalign=("left", "right", "right")),
    ]
    if m.flops_note:
        lines.append(f"FLOPs: {m.flops_note}")
    return "\n".join(lines)


def _price(args, peak, acc):
    """The price of a device-hour: --price-per-hour, else the accelerator file's; only with a training time."""
    if args.price_per_hour is not None and not peak:
        raise SpecError("--price-per-hour prices a training run on an accelerator: give --tokens D and --gpu NAME "
                        "(or --peak-tflops N)")  # fmt: skip
    return args.price_per_hour if args.price_per_hour is not None else acc.price_per_hour if acc else None


def _price_record(cost) -> dict:
    from archspec.plan.cost import exact_number

    return {} if cost.cost is None else {"price_per_hour": exact_number(cost.price_per_hour), "cost": cost.cost}


def _price_line(cost) -> list[str]:
    from archspec.plan.cost import money
    from archspec.render.text import fixed

    if cost.cost is None:
        return []
    return [f"cost: {fixed(cost.device_hours, 0)} device-hours x {money(cost.price_per_hour)} an hour = "
            f"{money(cost.cost)}"]  # fmt: skip


def add_args(p: argparse.ArgumentParser) -> None:
    from archspec.plan.hardware import MATH_DTYPES

    workload_args(p)
    p.add_argument("--tokens", "-D", type=positive_int, help="training tokens D, e.g. 300e9: total compute and PF-days")
    p.add_argument(
        "--causal-half",
        action="store_true",
        help="count only the causal half of the decoder's self-attention score matrix (default: full matrix)",
    )
    one_gpu_option(p, "accelerator for a training-time estimate (needs --tokens)")
    p.add_argument(
        "--gpus", type=positive_int, help="number of accelerators (default 1 when --gpu or --peak-tflops is given)"
    )
    p.add_argument(
        "--peak-tflops", type=positive_number, help="peak TFLOP/s per accelerator, overriding --gpu's table value"
    )
    p.add_argument("--mfu", type=mfu, default=0.4, help="model-FLOPs utilisation in (0, 1] (default 0.4)")
    price_option(p, "adds what the training run costs (needs --tokens and --gpu or --peak-tflops)")
    p.add_argument(
        "--dtype",
        default="bf16",
        type=dtype_name,
        choices=list(MATH_DTYPES),
        help="math precision for the peak (default bf16; torch names such as bfloat16 accepted too)",
    )


def run(args) -> int:
    from archspec.count.flops import count_flops
    from archspec.plan.hardware import resolve_peak

    if (args.gpu or args.peak_tflops or args.gpus) and not args.tokens:
        raise SpecError("a training-time estimate needs --tokens D (e.g. --tokens 300e9)")
    peak, acc = resolve_peak(args.gpu, args.peak_tflops, args.dtype)
    if args.gpus and not peak:
        raise SpecError("--gpus needs --gpu NAME or --peak-tflops N")
    price = _price(args, peak, acc)
    objects, blocks = [], []
    for spec in read_models(args, args.batch, args.seq_len):
        if is_measured(spec):
            objects.append(spec.flops_dict())
            blocks.append(_measured_flops_block(spec, args.format))
            continue
        f = count_flops(spec, args.batch, args.seq_len, args.src_len, args.causal_half)
        obj = f.to_dict()
        lines = _flops_lines(spec, f, args.format)
        if args.tokens:
            cost = _training_cost(f, args, peak, acc, price)
            obj.update(_cost_record(cost))
            lines += _cost_lines(cost, acc)
        objects.append(obj)
        blocks.append("\n".join(lines))
    render(args, objects, lambda: "\n\n".join(blocks))
    return EXIT_OK


def _training_cost(f, args, peak, acc, price):
    """Training on --tokens: the total, 6ND and PF-days; the time and its price on the accelerators when a
    peak is given."""
    from archspec.count.flops import training_cost

    return training_cost(f, args.tokens, (args.gpus or 1) if peak else None, peak, args.mfu if peak else None,
                         acc.name if acc else None, price if peak else None)  # fmt: skip


def _cost_record(cost) -> dict:
    """The training cost's fields of the JSON object."""
    from archspec.core.limits import float_or_int

    out = dict(
        tokens=cost.tokens,
        training_total=cost.training_total,
        training_total_6nd=cost.training_total_6nd,
        pf_days=cost.pf_days,
        pf_days_exact=cost.pf_days_exact,
        chinchilla_tokens=cost.chinchilla_tokens,
    )
    if cost.active_params is not None:
        out.update(active_params=cost.active_params, training_total_6nd_active=cost.training_total_6nd_active)
    if cost.seconds is not None:
        days = float_or_int(fraction(cost.seconds) / 86400)
        out.update(gpus=cost.gpus, accelerator=cost.accelerator, peak_flops=cost.peak_flops, mfu=cost.mfu,
                   time_seconds=cost.seconds, time_days=days, device_hours=cost.device_hours)  # fmt: skip
    return out | _price_record(cost)


def _flops_lines(spec, f, fmt: str) -> list[str]:
    """One model's FLOPs: by component, per token, per layer kind, and the published approximations."""
    from archspec.render.text import fixed, human, pct, sci, signed_pct, table

    shape = f"batch {f.batch} x {f.seq_len} tokens" + (f" (source {f.src_len})" if f.src_len else "")
    rows = [[c, sci(v), pct(v / f.forward)] for c, v in f.components.items() if v]
    non_matmul = f.non_matmul_estimate_total
    rows += [["forward (exact, matmul)", sci(f.forward), pct(1.0)],
             ["backward (2 x forward)", sci(f.backward), ""],
             ["training (3 x forward)", sci(f.training), ""],
             ["non-matmul (estimate)", sci(non_matmul), pct(non_matmul / f.forward)]]  # fmt: skip
    scores = "full matrix"
    if f.causal_half:
        scores = "causal half" if spec.kind == "decoder-only" else "causal half in the decoder's self-attention"
    return [
        f"{spec.name}: {shape}; FLOPs = 2 per multiply-accumulate; attention scores: {scores}",
        table(rows, ["", "FLOPs", "share"], fmt, colalign=("left", "right", "right")),
        f"per token: forward {human(f.forward_per_token)} "
        f"({fixed(f.forward_per_token, 0 if f.forward_per_token.denominator == 1 else 2)}), "
        f"training {human(f.training_per_token)}; "
        f"MACs (fvcore's 'flops') {sci(f.macs)}",
        *by_kind(f.kinds, "forward_per_layer", sci, "forward FLOPs per layer by kind"),
        "not modelled: lookups, the loss, the optimizer step, the pooler's tanh, dropout",
        "",
        "published approximations for this batch (training FLOPs):",
        table(
            [[k, sci(a["value"]), sci(a["exact"]), signed_pct(a["deviation"])] for k, a in f.approximations.items()],
            ["formula", "value", "exact", "deviation"],
            fmt,
            colalign=("left", "right", "right", "right"),
        ),
    ]


def _cost_lines(cost, acc) -> list[str]:
    """Training on --tokens in words: 6ND beside the exact total, Chinchilla's data, the time and its price."""
    from archspec.core.limits import float_or_int
    from archspec.render.text import fixed, human, sci

    pf_days = cost.pf_days
    if cost.active_params is not None:
        six = (
            f"6·N_active·D {sci(cost.training_total_6nd_active)} FLOPs (N_active {human(cost.active_params)}, "
            f"the parameters one token uses, as mixture-of-experts compute is counted); with all "
            f"{human(cost.params)} parameters 6ND {sci(cost.training_total_6nd)} ({fixed(pf_days)} PF-days)"
        )
    else:
        six = f"6ND {sci(cost.training_total_6nd)} FLOPs ({fixed(pf_days)} PF-days, as GPT-3's Table D.1 counts)"
    lines = [
        "",
        f"training on {human(cost.tokens)} tokens: {six}; exact {sci(cost.training_total)} "
        f"({fixed(cost.pf_days_exact)} PF-days)",
        f"Chinchilla-optimal data, ~20 tokens per parameter: {human(cost.chinchilla_tokens)} tokens",
    ]
    if cost.seconds is not None:
        what = acc.title if acc else "accelerators"
        tflops = fraction(cost.peak_flops) / 10**12
        days = float_or_int(fraction(cost.seconds) / 86400)
        lines.append(
            f"time on {cost.gpus:,} x {what} at {fixed(tflops, 0 if tflops >= 1 else 6)} TFLOP/s peak, "
            f"{cost.mfu:.0%} MFU: {fixed(days)} days ({fixed(fraction(cost.seconds) / 3600, 0)} hours)"
        )
    return lines + _price_line(cost)
