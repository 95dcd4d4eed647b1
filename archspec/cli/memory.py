"""`archspec memory`: memory for training (weights, gradients, optimizer states, activations) and
inference (KV cache)."""

from __future__ import annotations

import argparse

from archspec.cli.models import read_loaded
from archspec.cli.options import (
    dtype_name,
    engine_args,
    one_gpu_option,
    positive_int,
    storage_args,
    workload_args,
)
from archspec.cli.output import EXIT_OK, by_kind, fraction, render
from archspec.core.errors import SpecError

HELP = "memory for training (weights, gradients, optimizer states, activations) and inference (KV cache)"
EXAMPLES = (
    "archspec memory gpt2 --batch 8 --seq-len 1024\n  archspec memory gpt3-175b --gpus 1024 --tp 8 --pp 8 --zero 1\n"
    "  archspec memory gpt3-175b --gpus 64 --zero 3 --recompute full --gpu h100"
)


def _memory_batch(args) -> int:
    if args.micro_batch is not None and args.batch not in (1, args.micro_batch):
        raise SpecError(f"--micro-batch {args.micro_batch} and --batch {args.batch}: give one of them")
    if args.lora_targets is not None and args.lora is None:
        raise SpecError("--lora-targets needs --lora RANK")
    if args.max_micro_batch and not args.gpu:
        raise SpecError("--max-micro-batch needs --gpu (the accelerator whose memory the micro-batch must fit)")
    for dest in ("engine", "gpu_memory_utilization", "max_batched_tokens", "context_reserve"):
        if getattr(args, dest) is not None and not args.gpu:
            raise SpecError(f"--{dest.replace('_', '-')} needs --gpu (the device whose serving reserve it sets)")
    return args.micro_batch or args.batch


def add_args(p: argparse.ArgumentParser) -> None:
    from archspec.core.vocab import ATTENTION, OFFLOAD, RECOMPUTE, ZERO_STAGES
    from archspec.memory import DTYPE_BYTES, OPTIMIZERS

    workload_args(p)
    p.add_argument(
        "--dtype",
        default="bf16",
        type=dtype_name,
        choices=list(DTYPE_BYTES),
        help="weights and activations (default bf16; torch names such as bfloat16 accepted too)",
    )
    p.add_argument("--optimizer", default="adamw", choices=list(OPTIMIZERS), help="optimizer states (default adamw)")
    p.add_argument(
        "--recompute",
        default="none",
        choices=list(RECOMPUTE),
        help="activation recomputation (Korthikanti et al. 2022): none, selective, full",
    )
    p.add_argument("--fp32-grads", action="store_true", help="keep gradients in fp32 (the 18 bytes/param convention)")
    p.add_argument(
        "--attention",
        default="flash",
        choices=list(ATTENTION),
        help="flash: a fused kernel, the score matrix never stored (default, as modern trainers run); "
        "eager: the attention probabilities stored",
    )
    p.add_argument(
        "--dropout",
        action="store_true",
        help="add dropout masks to the activations (Korthikanti et al.; the reference model runs no dropout)",
    )
    p.add_argument("--zero", type=int, default=0, choices=ZERO_STAGES, help="ZeRO stage over the data-parallel GPUs")
    p.add_argument("--gpus", type=positive_int, default=1, help="GPUs in all (data parallel = gpus / (tp * pp))")
    p.add_argument("--tp", type=positive_int, default=1, help="tensor-parallel degree (with sequence parallelism)")
    p.add_argument("--pp", type=positive_int, default=1, help="pipeline-parallel degree")
    one_gpu_option(p, "say whether the per-GPU total fits this accelerator")
    storage_args(p, "the inference figures' weights and a LoRA's frozen base (default: --dtype)")
    p.add_argument(
        "--lora",
        type=positive_int,
        metavar="RANK",
        help="fine-tune rank-RANK LoRA adapters over a frozen base (QLoRA: with --weights nf4)",
    )
    p.add_argument(
        "--lora-targets",
        metavar="LIST",
        default=None,
        help="with --lora: attention, mlp, all (default) or projections q,k,v,o,gate,up,down, comma-separated",
    )
    p.add_argument("--micro-batch", type=positive_int, metavar="B", help="sequences per device per step (as --batch)")
    p.add_argument(
        "--global-batch",
        type=positive_int,
        metavar="G",
        help="sequences per optimizer step: G / (B x data parallel) gradient accumulation steps",
    )
    p.add_argument(
        "--max-micro-batch",
        action="store_true",
        help="with --gpu: the largest micro-batch whose training memory fits on it in this layout",
    )
    p.add_argument("--offload", choices=list(OFFLOAD), help="optimizer: the optimizer states in host memory")
    engine_args(p)  # with --gpu: what the serving engine's reserve leaves for inference weights and KV cache


def run(args) -> int:
    from archspec.plan.hardware import accelerator

    acc = accelerator(args.gpu) if args.gpu else None
    batch = _memory_batch(args)
    objects, blocks = [], []
    for loaded in read_loaded(args):
        m, obj, stored_note = _estimate(loaded, args, batch, acc)
        objects.append(obj)
        blocks.append(_text(loaded.spec, args, m, obj, acc, stored_note))
    render(args, objects, lambda: "\n\n".join(blocks) + "\nGiB = 2^30 bytes; --format json gives exact bytes.")
    return EXIT_OK


def _estimate(loaded, args, batch: int, acc):
    """One model's estimate under the options (archspec.io.loading.Loaded: its spec, and its source for the
    stored weights), its JSON object (with what the accelerator holds), and the note on where its weights'
    format came from (None: from --dtype)."""
    from archspec.memory import estimate_memory, fits, max_micro_batch, parallel_layout
    from archspec.sources.resolve import stored, weights_of

    spec = loaded.spec
    weights, stored_note = weights_of(loaded.source, args.weights)
    lay = parallel_layout(spec, args.gpus, args.tp, args.pp, args.zero)
    options = dict(seq_len=args.seq_len, dtype=args.dtype, optimizer=args.optimizer, recompute=args.recompute,
                   src_len=args.src_len, fp32_grads=args.fp32_grads, dropout=args.dropout,
                   zero_stage=lay.zero_stage, data_parallel=lay.data_parallel,
                   tensor_parallel=lay.tensor_parallel, pipeline_parallel=lay.pipeline_parallel,
                   attention=args.attention, weights=weights, experts=args.experts, kv_dtype=args.kv_dtype,
                   lora_rank=args.lora, lora_targets=args.lora_targets or "all", offload=args.offload)  # fmt: skip
    m = estimate_memory(spec, batch, global_batch=args.global_batch, **options)
    obj = m.to_dict()
    if stored_note:
        obj.update(weights_source="option" if args.weights else "stored", stored=stored(loaded.source).to_dict())
    if acc:
        verdict, serving = fits(m, acc.memory_bytes), _serving(args, spec, acc, m)
        obj.update(accelerator=acc.name, accelerator_memory_bytes=acc.memory_bytes,
                   fits_training=verdict["training"], fits_inference=serving["fits"],
                   reserve=serving["reserve"].to_dict(), kv_capacity_tokens=serving["tokens"])  # fmt: skip
        if args.max_micro_batch:
            obj["max_micro_batch"] = max_micro_batch(spec, acc.memory_bytes, **options)
    return m, obj, stored_note


def _serving(args, spec, acc, m) -> dict:
    """The engine's reserve on one device of `acc` at the estimate's tensor-parallel degree, whether the
    inference weights and cache fit what it leaves, and the tokens of cache the rest holds (stage 0)."""
    from archspec.memory import stage_slots
    from archspec.memory.paging import paging
    from archspec.memory.serving import Serving

    tp, pp = m.parallel["tensor_parallel"], m.parallel["pipeline_parallel"]
    r = Serving(args.engine, args.gpu_memory_utilization, args.max_batched_tokens, args.context_reserve).reserve(
        spec, acc, tp
    )
    pages = paging(spec, stage_slots(spec, pp, sorted({0, pp - 1}))[0], m.kv_cache_dtype, r.engine, tp)
    tokens = pages.capacity_tokens(r.usable_bytes - m.inference_weights_bytes)
    return {"reserve": r, "fits": m.inference_total_bytes <= r.usable_bytes, "tokens": tokens}


def _rows(m) -> list[list[str]]:
    """The table: training's memory by kind and its total, then inference's."""
    from archspec.render.text import exact, fixed, human_bytes

    per_token = m.kv_cache_bytes_per_token
    weights_label = f"frozen base ({m.weights_format}) + adapters" if m.lora else "weights"
    optim_label = "optimizer states (offloaded to host)" if m.offload else "optimizer states"
    return [
        [weights_label, human_bytes(m.weights_bytes), exact(m.weights_bytes)],
        ["gradients", human_bytes(m.gradients_bytes), exact(m.gradients_bytes)],
        [optim_label, human_bytes(m.optimizer_bytes), exact(m.optimizer_bytes)],
        [
            f"activations ({m.attention} attention, recompute {m.recompute})",
            human_bytes(m.activations_bytes),
            exact(m.activations_bytes),
        ],
        [
            "training total" + (" on the device" if m.offload else ""),
            human_bytes(m.training_total_bytes),
            exact(m.training_total_bytes),
        ],
        *([["host memory (optimizer states)", human_bytes(m.host_bytes), exact(m.host_bytes)]] if m.offload else []),
        [
            f"inference weights ({m.weights_format}"
            + (f", experts {m.experts_format}" if m.experts_format else "")
            + ")",
            human_bytes(m.inference_weights_bytes),
            exact(m.inference_weights_bytes),
        ],
        [f"KV cache ({m.kv_cache_dtype})", human_bytes(m.kv_cache_bytes), exact(m.kv_cache_bytes)],
        [
            "KV cache per token",
            human_bytes(per_token),
            exact(int(per_token)) if per_token.denominator == 1 else fixed(per_token, 2),
        ],  # fmt: skip
        [
            "inference total (weights + KV cache)",
            human_bytes(m.inference_total_bytes),
            exact(m.inference_total_bytes),
        ],
    ]


def _text(spec, args, m, obj, acc, stored_note: str | None) -> str:
    """One model's block: its shape and layout, the table, and the notes its options ask for."""
    from archspec.render.text import human_bytes, pct, table

    shape = f"batch {m.batch} x {m.seq_len} tokens" + (f" (source {m.src_len})" if m.src_len else "")
    par = m.parallel
    scope = (
        "whole model"
        if args.gpus == 1
        else f"per GPU: {args.gpus} GPUs = dp {par['data_parallel']} x tp {par['tensor_parallel']} x pp "
        f"{par['pipeline_parallel']}, ZeRO stage {par['zero_stage']}"
    )
    lines = [
        f"{spec.name}: {shape}, {m.dtype}, {m.optimizer}; {scope}",
        table(_rows(m), ["", "memory", "bytes"], args.format, colalign=("left", "right", "right")),
        f"training bytes per parameter: {m.per_param_note}",
        *by_kind(m.kinds, "activations_bytes_per_layer", human_bytes, "activations per layer by kind"),
        *by_kind(m.kinds, "kv_cache_bytes_per_layer", human_bytes, "KV cache or state per layer by kind"),
    ]
    if stored_note:
        lines.append(f"note: {stored_note}")
    if m.lora:
        lines.append(f"LoRA rank {m.lora['rank']} on {m.lora['targets']}: {m.trainable_params:,} trainable "
                     f"parameters ({m.trainable_params / m.params:.3%} of {m.params:,})")  # fmt: skip
    if m.global_batch:
        lines.append(f"global batch {m.global_batch:,} = micro-batch {m.batch:,} x data parallel "
                     f"{par['data_parallel']} x {m.accumulation_steps:,} accumulation steps")  # fmt: skip
    if acc and args.max_micro_batch:
        lines.append(f"largest micro-batch that fits on {acc.title} ({acc.memory_gib:g} GiB): "
                     f"{obj['max_micro_batch']:,}")  # fmt: skip
    if acc:
        from archspec.memory.runtime import engine
        from archspec.memory.serving import reserve_note

        cap, usable = acc.memory_gib * 2**30, obj["reserve"]["usable_bytes"]
        verdict = {True: "fits", False: "does not fit"}
        share = pct(fraction(m.inference_total_bytes) / fraction(usable), 0)
        r = _serving(args, spec, acc, m)["reserve"]
        lines += [
            f"{acc.title} ({acc.memory_gib:g} GiB): training {verdict[obj['fits_training']]} "
            f"({pct(fraction(m.training_total_bytes) / fraction(cap), 0)}), inference "
            f"{verdict[obj['fits_inference']]} ({share} of {human_bytes(usable)})",
            f"inference: {reserve_note(r, human_bytes)}; KV cache beside the inference weights: "
            f"{obj['kv_capacity_tokens']:,} tokens ({engine(r.engine).page_source})",
        ]
    return "\n".join(lines)
