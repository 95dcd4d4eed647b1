"""`archspec inference`: roofline estimate of generation on one accelerator: prefill time (compute-
bound), decode time per token (memory-bound), tokens per second, and the largest batch whose KV
cache fits beside the weights."""

from __future__ import annotations

import argparse
import sys

from archspec.cli.models import read_loaded
from archspec.cli.options import (
    DTYPE_HELP,
    dtype_name,
    engine_args,
    mfu,
    one_gpu_option,
    positive_int,
    positive_length,
    price_option,
    storage_args,
)
from archspec.cli.output import EXIT_MISMATCH, EXIT_OK, render
from archspec.core.errors import SpecError

HELP = (
    "roofline estimate of generation on one accelerator: prefill time (compute-bound), decode time per token "
    "(memory-bound), tokens per second, and the largest batch whose KV cache fits beside the weights"
)
EXAMPLES = (
    "archspec inference gpt2 --gpu h100 --batch 8 --prompt-len 512 --gen-len 256\n"
    "  archspec inference gpt3-175b --gpu h200 --prompt-len 1024 --gen-len 256 --dtype float8_e4m3fn\n"
    "  archspec inference gpt3-6.7b --gpu a100 --batch 32 -p 1500 -g 500 --mbu 0.7 --format json"
)


def _duration(seconds: float) -> str:
    """0.00275 -> '2.75 ms'; three significant figures in s, ms or µs."""
    for scale, unit in ((1, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if seconds >= scale or unit == "µs":
            return f"{seconds / scale:.3g} {unit}"
    raise AssertionError("unreachable")


def _communication(e) -> str:
    """A parallel layout's communication time per step, and the collectives' latency within it."""
    if e.layout.devices == 1:
        return ""
    latency = e.communication_latency_seconds_per_token
    return f"; communication {_duration(e.communication_seconds_per_token)}" + (
        f" (latency {_duration(latency)})" if latency else ""
    )


def _cost_rows(e) -> list[list[str]]:
    """The cost rows at the user's price, when there is one and the plan fits."""
    from archspec.plan.cost import money

    if e.cost is None or not e.fits:
        return []
    devices = e.layout.devices
    paid = f"{devices} device{'s' if devices > 1 else ''} x {money(e.price_per_hour)} an hour"
    paid += f" = {money(e.cost.cost_per_hour)} an hour" if devices > 1 else ""
    return [
        ["cost per million generated", money(e.cost.cost_per_million_generated),
         f"{paid}, over the {e.batch:,} token{'s' if e.batch > 1 else ''} of a decode step"],
        ["cost per million prefilled", money(e.cost.cost_per_million_prefilled),
         f"the same, over the {e.batch * e.prompt_len:,} prompt tokens of the prefill"],
    ]  # fmt: skip


def add_args(p: argparse.ArgumentParser) -> None:
    from archspec.memory import DTYPE_BYTES

    one_gpu_option(p, "the accelerator (each device)", required=True)
    p.add_argument("--batch", "-b", type=positive_int, default=1, help="sequences generated together (default 1)")
    from archspec.plan.inference import GEN_LEN, PROMPT_LEN

    p.add_argument("--prompt-len", "-p", type=positive_length, default=PROMPT_LEN,
                   help=f"prompt tokens per sequence (P; default {PROMPT_LEN}; 8K = 8,192)")  # fmt: skip
    p.add_argument("--gen-len", "-g", type=positive_length, default=GEN_LEN,
                   help=f"generated tokens per sequence (G; default {GEN_LEN})")  # fmt: skip
    p.add_argument("--dtype", type=dtype_name, choices=list(DTYPE_BYTES), help="weights: " + DTYPE_HELP)
    storage_args(p, "default --dtype, else bf16")
    p.add_argument("--tp", type=positive_int, default=1, help="tensor-parallel devices (Megatron-LM splits)")
    p.add_argument("--ep", type=positive_int, default=1, help="expert-parallel devices (routed experts spread)")
    p.add_argument("--pp", type=positive_int, default=1, help="pipeline stages")
    engine_args(p)
    price_option(p, "adds the cost per million tokens generated and prefilled")
    p.add_argument("--mfu", type=mfu, default=0.4, help="share of the peak FLOP/s prefill reaches (default 0.4)")
    p.add_argument(
        "--mbu",
        type=mfu,
        default=1.0,
        help="share of the peak memory bandwidth decode reaches (default 1: a lower bound on the time)",
    )


def run(args) -> int:
    from archspec.plan.hardware import accelerator

    acc = accelerator(args.gpu)
    if args.weights and args.dtype and args.weights != args.dtype:
        raise SpecError(f"--dtype {args.dtype} and --weights {args.weights}: give one of them")
    objects, blocks, code = [], [], EXIT_OK
    for loaded in read_loaded(args):
        spec = loaded.spec
        e, obj, stored_note = _estimate(loaded, acc, args)
        if not e.fits:
            code = EXIT_MISMATCH
        lines = _text(spec, e, acc, obj, args.format)
        if stored_note:
            lines.append(f"note: {stored_note}")
        from archspec.render.text import human_bytes

        lines += [f"reserve per device ({e.reserve.engine}):", *(f"  - {x}" for x in e.reserve.lines(human_bytes))]
        lines += ["assumptions:", *(f"  - {a}" for a in e.assumptions)]
        objects.append(obj)
        blocks.append("\n".join(lines))
    note = f"estimates, not measurements; {acc.name}: {acc.source}; {acc.bandwidth_source}. GiB = 2^30 bytes."
    render(args, objects, lambda: "\n\n".join(blocks) + "\n" + note)
    for obj in objects if args.format != "table" else ():
        if not obj["fits"]:
            sys.stderr.write(f"archspec: {obj['message']}\n")
    return code


def _estimate(loaded, acc, args):
    """One model's estimate, its JSON object (with what it is short by when it does not fit), and the note on
    where its weights' format came from (None: from the options)."""
    from archspec.plan.inference import estimate_inference
    from archspec.render.text import human_bytes
    from archspec.sources.resolve import stored, weights_of

    spec = loaded.spec
    weights, stored_note = weights_of(loaded.source, args.weights or args.dtype)
    weights = weights or "bf16"
    e = estimate_inference(spec, acc, args.batch, args.prompt_len, args.gen_len, weights, args.kv_dtype,
                           args.mfu, args.mbu, experts=args.experts, tensor_parallel=args.tp,
                           expert_parallel=args.ep, pipeline_parallel=args.pp, engine=args.engine,
                           memory_fraction=args.gpu_memory_utilization, price_per_hour=args.price_per_hour,
                           max_batched_tokens=args.max_batched_tokens,
                           context_reserve=args.context_reserve)  # fmt: skip
    obj = e.to_dict()
    if stored_note:
        obj.update(weights_source="option" if args.weights or args.dtype else "stored",
                   stored=stored(loaded.source).to_dict())  # fmt: skip
    if not e.fits:
        used = e.weights_bytes + e.kv_cache_bytes
        remedy = "; ".join(f"{s} would fit" for s in e.suggestions) or "no larger --tp or narrower --weights fits"
        obj["message"] = (
            f"{spec.name} does not fit: weights {human_bytes(e.weights_bytes)} + KV cache "
            f"{human_bytes(e.kv_cache_bytes)} = {human_bytes(used)} on the fullest device, "
            f"{human_bytes(e.shortfall_bytes)} more than {_capacity(e, acc)}; {remedy}"
        )
    return e, obj, stored_note


def _capacity(e, acc) -> str:
    """What the weights and cache may use of each device, in words."""
    from archspec.render.text import human_bytes

    where = (
        f"{human_bytes(e.capacity_bytes)} ({acc.memory_gib:g} GiB less the {e.reserve.engine} reserve)"
        if (e.capacity_bytes != acc.memory_bytes)
        else f"{acc.memory_gib:g} GiB"
    )
    return where + (" per device" if e.layout.devices > 1 else "")


def _rows(spec, e, acc) -> list[list[str]]:
    """The table: the timings (when it fits), the cost, the largest batch, the memory, the experts read."""
    from archspec.render.text import human_bytes

    used = e.weights_bytes + e.kv_cache_bytes
    context = e.prompt_len + e.gen_len
    verdict = f"{'fits' if e.fits else 'does not fit'} ({used / e.capacity_bytes:.0%} of {_capacity(e, acc)})"
    rows = []
    if e.fits:
        comm = _communication(e)
        rows += [
            ["prefill", _duration(e.prefill_seconds), f"{e.prefill_flops:,} FLOPs at {e.mfu:g} x peak"],
            ["decode, per token", _duration(e.decode_seconds_per_token),
             f"{human_bytes(float(e.decode_bytes_per_token))} read per step at {e.mbu:g} x bandwidth{comm}"],
            ["whole request", _duration(e.total_seconds), f"prefill + {e.gen_len:,} decode steps"],
            ["tokens per second", f"{e.tokens_per_second:,.0f}" if e.tokens_per_second >= 100
             else f"{e.tokens_per_second:.3g}", f"{e.batch} x {e.gen_len:,} generated tokens"],
        ]  # fmt: skip
    rows += _cost_rows(e)
    rows += [
        ["max batch", f"{e.max_batch:,}", f"sequences of {context:,} tokens beside the weights"
         + (" (the weights alone do not fit)" if e.weights_bytes > e.capacity_bytes else "")],
        ["memory" + (" per device" if e.layout.devices > 1 else "") + " at this batch", human_bytes(used),
         f"weights {human_bytes(e.weights_bytes)} + KV cache {human_bytes(e.kv_cache_bytes)}: {verdict}"],
    ]  # fmt: skip
    if e.expected_experts is not None:
        tokens = f"{e.batch} token{'s' if e.batch > 1 else ''}"
        rows.append(["routed experts read per MoE layer", f"{e.expected_experts:.3g}",
                     f"of {spec.mlp.experts}, top-{spec.mlp.top_k}, {tokens} per step"])  # fmt: skip
    return rows


def _text(spec, e, acc, obj, fmt: str) -> list[str]:
    """One model's block: what it runs, the table, and whether prefill is compute-bound (or why it does not fit)."""
    from archspec.render.text import table

    lay = e.layout
    degrees = f"tp {lay.tensor_parallel} x ep {lay.expert_parallel} x pp {lay.pipeline_parallel}"
    layout = "" if lay.devices == 1 else f"; {degrees} = {lay.devices} devices"
    lines = [
        f"{spec.name} on {acc.title}: batch {e.batch}, prompt {e.prompt_len:,} + {e.gen_len:,} generated tokens, "
        f"weights {e.dtype}"
        + (f", experts {e.experts_dtype}" if e.experts_dtype else "")
        + f", KV cache {e.kv_dtype}{layout}",
        table(_rows(spec, e, acc), ["roofline estimate", "value", "from"], fmt, colalign=("left", "right", "left")),
    ]
    if e.fits:
        bound = "compute-bound" if e.prefill_compute_bound else "memory-bound, so its time above is an underestimate"
        lines.append(f"prefill intensity {e.prefill_intensity:,.0f} FLOPs/byte vs ridge {e.ridge_intensity:,.0f}: "
                     f"{bound}")  # fmt: skip
        lines.append(
            "decode time is a lower bound (engines reach a share of it): it leaves out "
            + "; ".join(e.decode_leaves_out)
        )
    else:
        lines.append(obj["message"] + "; no timings")
    return lines
