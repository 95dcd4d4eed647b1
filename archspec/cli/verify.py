"""`archspec verify`: build the reference model on the meta device and check analytic == instantiated
for every tensor, the parameters and forward FLOPs, component by component; --memory and --ranks
measure memory too; all presets when no MODEL is given (needs torch)."""

from __future__ import annotations

import argparse

from archspec.cli.models import read_specs
from archspec.cli.options import positive_int
from archspec.cli.output import EXIT_MISMATCH, EXIT_OK, progress, render
from archspec.core.errors import SpecError

HELP = (
    "build the reference model on the meta device and check analytic == instantiated for every tensor, the "
    "parameters and forward FLOPs, component by component; --memory and --ranks measure memory too; "
    "all presets when no MODEL is given (needs torch)"
)
EXAMPLES = (
    "archspec verify\n  archspec verify gpt2 my-model.toml --format json\n"
    "  archspec verify gpt2 --memory --recompute selective\n"
    "  archspec verify gpt2 --set decoder_layers=2 --ranks 2 --zero 3"
)
MODELS = "*"
# options this command has that change nothing in some uses of it: (dest, used, what it needs)
UNUSED_UNLESS = [
    ("recompute", lambda a: a.memory,
     "--recompute changes nothing without --memory (it is the recomputation --memory measures)"),
    ("zero", lambda a: bool(a.ranks),
     "--zero changes nothing without --ranks N (it is the ZeRO stage of the sharded step)"),
    ("tp", lambda a: bool(a.ranks),
     "--tp changes nothing without --ranks N (it is the tensor-parallel degree of the sharded step)"),
]  # fmt: skip


def _reference():
    """archspec.reference, or a clear message naming the extra to install."""
    try:
        import torch  # noqa: F401
    except ImportError:
        raise SpecError(
            "this command builds the PyTorch reference model and needs torch: "
            "pip install 'archspec-transformers[reference]'"
        ) from None
    import archspec.reference as reference

    return reference


def _verify_all(reference, specs: list) -> list:
    """reference.verify of every spec, in order; across the machine's cores when there are many (each
    worker builds and counts its own models; the reports are plain data)."""
    import os

    workers = min(os.cpu_count() or 1, 4, len(specs) // 4)
    if workers < 2:
        return [reference.verify(spec) for spec in progress(specs, "verify", lambda s: s.name)]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        # the largest models first, so that no worker is left with one at the end
        order = sorted(range(len(specs)), key=lambda i: -specs[i].n_layers)
        futures = {i: pool.submit(reference.verify, specs[i]) for i in order}
        done = progress(range(len(specs)), "verify", lambda i: specs[i].name)
        return [futures[i].result() for i in done]


def _verify_memory(args, reference) -> int:
    """verify --memory / --ranks: planned against measured bytes, one row per check."""
    from archspec.render.text import exact, table

    specs = read_specs(args, default_all=True)
    reports = []
    for spec in progress(specs, "verify", lambda s: s.name):
        if args.memory:
            reports.append(reference.verify_memory(spec, recompute=args.recompute))
        if args.ranks:
            reports.append(reference.verify_ranks(spec, args.ranks, args.zero, args.tp))
    objects = [r.to_dict() for r in reports]
    rows = []
    for r in reports:
        what = f"{r.ranks} ranks, ZeRO {r.zero}, tp {r.tp} (largest rank)" if hasattr(r, "ranks") else (
            f"batch {r.batch} x {r.seq_len}, recompute {r.recompute}")  # fmt: skip
        for k, p in r.checks.items():
            rows.append([r.name, what, k, exact(p.analytic), exact(p.measured), "ok" if p.ok else "MISMATCH"])
        if getattr(r, "skipped", None):
            rows.append([r.name, what, "activations", "", "", "skipped: " + r.skipped.split(": ", 1)[1]])

    def people() -> str:
        bad = sum(not r.ok and not getattr(r, "skipped", None) for r in reports)
        note = ("measured: real fp32 tensors on the CPU (saved tensors through autograd's hooks, each storage once, "
                "the loss included); ranks: gloo processes, one AdamW step; the optimizer's plan includes torch's "
                "4-byte step counter per tensor")  # fmt: skip
        head = ["model", "workload", "quantity", "planned", "measured", "check"]
        summary = "all planned figures equal the measured ones" if not bad else f"{bad} report(s) differ"
        return table(rows, head, args.format, colalign=("left", "left", "left", "right", "right", "left")) + (
            f"\n\n{summary}\n{note}")  # fmt: skip

    render(args, objects, people)
    return EXIT_OK if all(r.ok or getattr(r, "skipped", None) for r in reports) else EXIT_MISMATCH


def add_args(p: argparse.ArgumentParser) -> None:
    from archspec.core.vocab import RECOMPUTE, ZERO_STAGES

    p.add_argument(
        "--memory",
        action="store_true",
        help="also train one step on the CPU and compare the saved-tensor bytes (flash and eager attention), "
        "the weights and the KV cache with the plan",
    )
    p.add_argument("--recompute", default="none", choices=list(RECOMPUTE),
                   help="with --memory: the recomputation to measure (default none)")  # fmt: skip
    p.add_argument("--ranks", type=positive_int, help="run a sharded AdamW step in N local processes and compare "
                   "each quantity of the largest rank with `archspec memory --gpus N`")  # fmt: skip
    p.add_argument("--zero", type=int, default=3, choices=ZERO_STAGES, help="with --ranks: ZeRO stage (default 3)")
    p.add_argument("--tp", type=positive_int, default=1, help="with --ranks: tensor-parallel degree (default 1)")


def run(args) -> int:
    from archspec.render.text import exact, table

    reference = _reference()
    if args.memory or args.ranks:
        return _verify_memory(args, reference)
    reports = _verify_all(reference, read_specs(args, default_all=True))
    objects = [r.to_dict() for r in reports]
    rows = [[r.name, exact(r.params.analytic), exact(r.params.measured), exact(r.flops.analytic),
             exact(r.flops.measured), "; ".join(r.mismatches()) or "all tensors and components equal",
             "ok" if r.ok else "MISMATCH"] for r in reports]  # fmt: skip

    def people() -> str:
        n_bad = sum(not r.ok for r in reports)
        summary = (
            f"{len(reports)} model(s): analytic == instantiated for every tensor (path and shape), parameters "
            "and FLOPs, component by component"
            if not n_bad
            else f"{n_bad} of {len(reports)} model(s) differ"
        )
        note = (
            "instantiated: the parameters of archspec.reference.build(spec, device='meta'); measured: torch's "
            "FlopCounterMode over one forward pass, batch 1 x max_positions tokens, on the meta device"
        )
        headers = [
            "model",
            "params analytic",
            "instantiated",
            "FLOPs analytic",
            "measured",
            "tensors and components",
            "check",
        ]
        align = ("left", "right", "right", "right", "right", "left", "left")
        return table(rows, headers, args.format, colalign=align) + f"\n\n{summary}\n{note}"

    render(args, objects, people)
    return EXIT_OK if all(r.ok for r in reports) else EXIT_MISMATCH
