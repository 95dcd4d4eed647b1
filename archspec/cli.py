"""The `archspec` command line: a thin renderer over the pure functions of the package.

Every command takes MODEL arguments (a preset name or a spec file), ``--format`` and ``--set``.
Exit codes: 0 done, 1 a check found a mismatch, 2 bad input.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from archspec.errors import SpecError, clip, one_line
from archspec.render import FORMATS

EXIT_OK, EXIT_MISMATCH, EXIT_BAD_INPUT = 0, 1, 2

ROUNDING_NOTE = (
    "Counts rounded for reading (K = 10^3, M = 10^6, B = 10^9, T = 10^12); --format json gives exact integers."
)


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors and exit code 2."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"archspec: error: {one_line(message)} (see `{self.prog} --help`)\n")
        sys.exit(EXIT_BAD_INPUT)


# ---------------------------------------------------------------- option types


def _number_type(kind: str, *, minimum: float | None = None, strict_min: bool = True, integer: bool = True):
    def parse(text: str):
        from archspec.loading import parse_number

        try:
            value = parse_number(text, kind, integer=integer)
        except SpecError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        if minimum is not None and (value <= minimum if strict_min else value < minimum):
            bound = f"greater than {minimum:g}" if strict_min else f"at least {minimum:g}"
            raise argparse.ArgumentTypeError(f"{kind}: must be {bound}, got {clip(text.strip())}")
        return value

    parse.__name__ = kind
    return parse


positive_int = _number_type("a positive whole number", minimum=0)
positive_number = _number_type("a positive number", minimum=0, integer=False)


# ---------------------------------------------------------------- shared plumbing


def _common(p: argparse.ArgumentParser, models: str | None = "+") -> None:
    if models:
        p.add_argument(
            "models",
            metavar="MODEL",
            nargs=models,
            help="a preset name (see `archspec list`) or a spec file (.toml, .json, .yaml)",
        )
    p.add_argument(
        "--format",
        "-f",
        choices=FORMATS,
        default="table",
        help="output format: table (default), markdown, json (exact numbers), csv",
    )
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        metavar="FIELD=VALUE",
        default=[],
        help="override a spec field for every MODEL (repeatable), e.g. --set d_model=1024",
    )


def _specs(args: argparse.Namespace, default_all: bool = False):
    from archspec.catalog import preset_names, resolve_model
    from archspec.loading import parse_assignments

    overrides = parse_assignments(args.overrides)
    refs = list(args.models or [])
    if not refs and default_all:
        refs = preset_names()
    return [resolve_model(ref, overrides) for ref in refs]


def _emit(text: str) -> None:
    sys.stdout.write(text.rstrip("\n") + "\n")


def _render(args, objects: list[dict[str, Any]], people: Callable[[], str]) -> None:
    from archspec.render import to_csv, to_json

    if args.format == "json":
        try:
            text = to_json(objects)
        except ValueError as exc:  # a value that is not a finite number, which JSON cannot hold
            raise SpecError(f"a result cannot be written as JSON: {exc}") from None
        _emit(text)
    elif args.format == "csv":
        _emit(to_csv(objects))
    else:
        _emit(people())


# ---------------------------------------------------------------- list


def cmd_list(args) -> int:
    from archspec.catalog import get_preset, preset_names
    from archspec.params import count_params
    from archspec.render import human, table

    objects, rows = [], []
    for name in preset_names():
        p = get_preset(name)
        spec = p.spec
        total = count_params(spec).total
        objects.append(
            {
                "name": name,
                "family": p.family,
                "kind": spec.kind,
                "total": total,
                "summary": p.summary,
                "source": p.source,
            }
        )
        rows.append([name, spec.kind, _layers(spec), spec.d_model, human(total), p.summary])
    _render(
        args,
        objects,
        lambda: (
            table(rows, ["preset", "kind", "layers", "d_model", "params", "summary"], args.format)
            + "\n\n"
            + ROUNDING_NOTE
        ),
    )
    return EXIT_OK


# ---------------------------------------------------------------- show


def cmd_show(args) -> int:
    from archspec.render import table

    specs = _specs(args)
    objects = [
        {"name": s.name, **{k: v for k, v in s.resolved().items() if k != "name"}, "kind": s.kind} for s in specs
    ]

    def people() -> str:
        blocks = []
        for s in specs:
            given = s.model_fields_set
            rows = [[k, _fmt_value(v), "" if k in given else "default"] for k, v in s.resolved().items()]
            rows.append(["(kind)", s.kind, "derived"])
            blocks.append(table(rows, ["field", "value", ""], args.format))
        return "\n\n".join(blocks)

    _render(args, objects, people)
    return EXIT_OK


def _fmt_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _layers(spec) -> str:
    if spec.kind == "encoder-decoder":
        return f"{spec.encoder_layers} enc + {spec.decoder_layers} dec"
    return str(spec.encoder_layers or spec.decoder_layers)


def _heads(spec) -> str:
    return str(spec.n_heads) if spec.n_kv_heads == spec.n_heads else f"{spec.n_heads} (kv {spec.n_kv_heads})"


# ---------------------------------------------------------------- params


def cmd_params(args) -> int:
    from archspec.params import COMPONENTS, count_params
    from archspec.render import exact, human, pct, signed_pct, table

    specs = _specs(args)
    counts = [count_params(s) for s in specs]
    objects = [c.to_dict() for c in counts]

    def people() -> str:
        blocks = []
        for spec, c in zip(specs, counts):
            rows = [[name, human(n), exact(n), pct(c.share(name))] for name in COMPONENTS if (n := c.components[name])]
            rows.append(["total", human(c.total), exact(c.total), pct(1.0)])
            head = f"{spec.name}: {spec.kind}, {_layers(spec)} layers, d_model {spec.d_model}"
            per = "; ".join(
                f"{stack} layer {human(v['total'])} ({exact(v['total'])})" for stack, v in c.per_layer.items()
            )
            dev = (c.estimate - c.total) / c.total
            lines = [
                head,
                table(
                    rows,
                    ["component", "params", "exact", "share"],
                    args.format,
                    colalign=("left", "right", "right", "right"),
                ),
                f"per layer: {per}",
                f"non-embedding (Kaplan's N): {human(c.non_embedding)} ({exact(c.non_embedding)})",
                f"seed estimate 12*L*d^2 + V*d: {human(c.estimate)} ({exact(c.estimate)}), {signed_pct(dev)} vs exact; "
                "leaves out biases, norms, position tables, cross-attention and any other departure "
                "from the GPT-2 block",
            ]
            blocks.append("\n".join(lines))
        return "\n\n".join(blocks) + "\n\n" + ROUNDING_NOTE

    _render(args, objects, people)
    return EXIT_OK


# ---------------------------------------------------------------- compare


def compare_columns(spec, count, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "name": spec.name,
        "kind": spec.kind,
        "encoder_layers": spec.encoder_layers,
        "decoder_layers": spec.decoder_layers,
        "d_model": spec.d_model,
        "n_heads": spec.n_heads,
        "n_kv_heads": spec.n_kv_heads,
        "d_head": spec.d_head,
        "d_ff": spec.d_ff,
        "vocab_size": spec.vocab_size,
        "max_positions": spec.max_positions,
        "total": count.total,
        "non_embedding": count.non_embedding,
        "estimate": count.estimate,
        "components": dict(count.components),
        **(extra or {}),
    }


def cmd_compare(args) -> int:
    from archspec.params import count_params
    from archspec.render import human, table

    specs = _specs(args)
    counts = [count_params(s) for s in specs]
    extras = [_compare_extras(args, s, c) for s, c in zip(specs, counts)]
    objects = [compare_columns(s, c, {k: v["value"] for k, v in e.items()}) for s, c, e in zip(specs, counts, extras)]

    def people() -> str:
        headers = ["model", "layers", "d_model", "heads", "d_head", "d_ff", "vocab", "ctx", "params", "non-emb"]
        rows = []
        for s, c, e in zip(specs, counts, extras):
            row = [
                s.name,
                _layers(s),
                s.d_model,
                _heads(s),
                s.d_head,
                s.d_ff,
                f"{s.vocab_size:,}",
                s.max_positions,
                human(c.total),
                human(c.non_embedding),
            ]
            row += [v["text"] for v in e.values() if not v.get("json_only")]
            rows.append(row)
        headers += [v["label"] for v in (extras[0].values() if extras else []) if not v.get("json_only")]
        note = _compare_note(args)
        return table(rows, headers, args.format) + "\n\n" + ROUNDING_NOTE + (("\n" + note) if note else "")

    _render(args, objects, people)
    return EXIT_OK


def _compare_extras(args, spec, count) -> dict[str, dict[str, Any]]:
    """Planning columns: {json key: {"label", "value", "text"}}."""
    from archspec.flops import count_flops, exact_number
    from archspec.memory import kv_cache_bytes, training_bytes_per_param, weights_bytes
    from archspec.render import human, human_bytes

    T = args.seq_len or spec.max_positions
    f = _planning(count_flops, spec, 1, T)
    weights = weights_bytes(spec, args.dtype)
    per_param = float(sum(training_bytes_per_param(args.dtype, "adamw")))
    kv_per_token = kv_cache_bytes(spec, 1, 1, args.dtype, 1 if spec.kind == "encoder-decoder" else None)
    return {
        "forward_per_token": {"label": "FLOPs/token", "value": exact_number(f.forward_per_token),
                              "text": human(f.forward_per_token)},
        "training_per_token": {"label": "train FLOPs/token", "value": exact_number(f.training_per_token),
                               "text": human(f.training_per_token), "json_only": True},
        "weights_bytes": {"label": f"weights {args.dtype}", "value": weights, "text": human_bytes(weights)},
        "training_bytes_per_param": {"label": "train B/param", "value": per_param, "text": f"{per_param:g}",
                                     "json_only": True},
        "kv_cache_bytes_per_token": {"label": "KV/token", "value": kv_per_token, "text": human_bytes(kv_per_token)},
    }  # fmt: skip


def _compare_note(args) -> str:
    return (
        f"FLOPs/token: exact forward matmul FLOPs per token at each model's context length"
        f"{'' if not args.seq_len else f' (here {args.seq_len})'} (2 per multiply-accumulate).\n"
        f"Weights and KV cache in {args.dtype}; `archspec flops` and `archspec memory` give the breakdowns."
    )


def _planning(fn, *a, **kw):
    """Call a planning function; its ValueErrors are bad input (exit 2)."""
    from pydantic import ValidationError

    try:
        return fn(*a, **kw)
    except ValidationError as err:
        from archspec.errors import describe_validation_error

        raise SpecError(describe_validation_error(err, "--set")) from None
    except ValueError as exc:
        raise SpecError(str(exc)) from None


def _compare_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--seq-len", type=positive_int, help="sequence length for FLOPs per token (default: each model's max_positions)"
    )
    p.add_argument(
        "--dtype",
        default="bf16",
        choices=["fp32", "bf16", "fp16", "fp8", "int8", "int4"],
        help="bytes per value for weights and KV cache (default bf16)",
    )


# ---------------------------------------------------------------- schema


def cmd_schema(args) -> int:
    import json

    from archspec.render import table
    from archspec.spec import ModelSpec

    schema = ModelSpec.model_json_schema()
    if args.format in ("json", None):
        _emit(json.dumps(schema, indent=2))
        return EXIT_OK
    props = schema.get("properties", {})
    required = set(schema.get("required", []))
    rows = []
    for name, info in props.items():
        kind = info.get("type") or " | ".join(str(x.get("const", x.get("type"))) for x in info.get("anyOf", []))
        if "enum" in info:
            kind = " | ".join(info["enum"])
        default = "required" if name in required else _fmt_value(info.get("default", "derived"))
        rows.append([name, kind, default, info.get("description", "")])
    if args.format == "csv":
        from archspec.render import to_csv

        _emit(to_csv([dict(zip(["field", "type", "default", "meaning"], r)) for r in rows]))
    else:
        _emit(table(rows, ["field", "type", "default", "meaning"], args.format))
    return EXIT_OK


# ---------------------------------------------------------------- flops


def _workload_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--batch", "-b", type=positive_int, default=1, help="sequences per step (default 1)")
    p.add_argument(
        "--seq-len",
        "-s",
        type=positive_int,
        help="tokens per sequence (target length for an encoder-decoder; default: max_positions)",
    )
    p.add_argument("--src-len", type=positive_int, help="encoder-decoder source length (default: --seq-len)")


def _flops_args(p: argparse.ArgumentParser) -> None:
    from archspec.hardware import ACCELERATORS

    _workload_args(p)
    p.add_argument("--tokens", "-D", type=positive_int, help="training tokens D, e.g. 300e9: total compute and PF-days")
    p.add_argument(
        "--causal-half",
        action="store_true",
        help="count only the causal half of the decoder's self-attention score matrix (default: full matrix)",
    )
    p.add_argument(
        "--gpu", choices=list(ACCELERATORS), help="accelerator for a training-time estimate (needs --tokens)"
    )
    p.add_argument(
        "--gpus", type=positive_int, help="number of accelerators (default 1 when --gpu or --peak-tflops is given)"
    )
    p.add_argument(
        "--peak-tflops", type=positive_number, help="peak TFLOP/s per accelerator, overriding --gpu's table value"
    )
    p.add_argument("--mfu", type=_mfu, default=0.4, help="model-FLOPs utilisation in (0, 1] (default 0.4)")
    p.add_argument(
        "--dtype", default="bf16", choices=["fp32", "bf16", "fp16"], help="math precision for the peak (default bf16)"
    )


def _fraction(x):
    """An exact rational from an int, a Fraction or a float (by its shortest decimal form)."""
    from fractions import Fraction

    return Fraction(repr(x)) if isinstance(x, float) else Fraction(x)


def _peak_flops(tflops) -> int | float:
    """--peak-tflops in FLOP/s: exact for an integer, and within the float range."""
    peak = tflops * 10**12
    if isinstance(peak, float) and not math.isfinite(peak) or isinstance(peak, int) and peak.bit_length() > 1024:
        from archspec.render import sci

        raise SpecError(f"--peak-tflops {sci(tflops)} is too large: the peak is beyond 1.8e308 FLOP/s")
    return peak


def _mfu(text: str) -> float:
    value = positive_number(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {text}")
    return float(value)


def cmd_flops(args) -> int:
    from fractions import Fraction

    from archspec.flops import PF_DAY, count_flops, training_cost
    from archspec.hardware import accelerator
    from archspec.limits import float_or_int
    from archspec.render import fixed, human, pct, sci, signed_pct, table

    if (args.gpu or args.peak_tflops or args.gpus) and not args.tokens:
        raise SpecError("a training-time estimate needs --tokens D (e.g. --tokens 300e9)")
    peak = _peak_flops(args.peak_tflops) if args.peak_tflops else None
    acc = accelerator(args.gpu) if args.gpu else None
    if acc and not peak:
        peak = acc.peak(args.dtype)
    if args.gpus and not peak:
        raise SpecError("--gpus needs --gpu NAME or --peak-tflops N")
    objects, blocks = [], []
    for spec in _specs(args):
        f = _planning(count_flops, spec, args.batch, args.seq_len, args.src_len, args.causal_half)
        obj = f.to_dict()
        cost = None
        if args.tokens:
            cost = _planning(training_cost, f, args.tokens, (args.gpus or 1) if peak else None, peak,
                             args.mfu if peak else None, acc.name if acc else None)  # fmt: skip
            pf_days = float_or_int(Fraction(cost.training_total_6nd, PF_DAY))
            pf_days_exact = float_or_int(Fraction(cost.training_total, PF_DAY))
            obj.update(
                tokens=cost.tokens,
                training_total=cost.training_total,
                training_total_6nd=cost.training_total_6nd,
                pf_days=pf_days,
                pf_days_exact=pf_days_exact,
                chinchilla_tokens=cost.chinchilla_tokens,
            )
            if cost.seconds is not None:
                days = float_or_int(_fraction(cost.seconds) / 86400)
                obj.update(gpus=cost.gpus, accelerator=cost.accelerator, peak_flops=cost.peak_flops, mfu=cost.mfu,
                           time_seconds=cost.seconds, time_days=days)  # fmt: skip
        objects.append(obj)

        shape = f"batch {f.batch} x {f.seq_len} tokens" + (f" (source {f.src_len})" if f.src_len else "")
        rows = [[c, sci(v), pct(v / f.forward)] for c, v in f.components.items() if v]
        rows += [["forward (exact, matmul)", sci(f.forward), pct(1.0)],
                 ["backward (2 x forward)", sci(f.backward), ""],
                 ["training (3 x forward)", sci(f.training), ""],
                 ["non-matmul (estimate)", sci(f.non_matmul_total), pct(f.non_matmul_total / f.forward)]]  # fmt: skip
        scores = "full matrix"
        if f.causal_half:
            scores = "causal half" if spec.kind == "decoder-only" else "causal half in the decoder's self-attention"
        lines = [
            f"{spec.name}: {shape}; FLOPs = 2 per multiply-accumulate; attention scores: {scores}",
            table(rows, ["", "FLOPs", "share"], args.format, colalign=("left", "right", "right")),
            f"per token: forward {human(f.forward_per_token)} "
            f"({fixed(f.forward_per_token, 0 if f.forward_per_token.denominator == 1 else 2)}), "
            f"training {human(f.training_per_token)}; "
            f"MACs (fvcore's 'flops') {sci(f.macs)}",
            "not modelled: lookups, the loss, the optimizer step, the pooler, dropout",
            "",
            "published approximations for this batch (training FLOPs):",
            table(
                [
                    [k, sci(a["value"]), sci(a["exact"]), signed_pct(a["deviation"])]
                    for k, a in f.approximations.items()
                ],
                ["formula", "value", "exact", "deviation"],
                args.format,
                colalign=("left", "right", "right", "right"),
            ),
        ]
        if cost is not None:
            lines += [
                "",
                f"training on {human(cost.tokens)} tokens: 6ND {sci(cost.training_total_6nd)} FLOPs "
                f"({fixed(pf_days)} PF-days, as GPT-3's Table D.1 counts); exact {sci(cost.training_total)} "
                f"({fixed(pf_days_exact)} PF-days)",
                f"Chinchilla-optimal data, ~20 tokens per parameter: {human(cost.chinchilla_tokens)} tokens",
            ]
            if cost.seconds is not None:
                what = acc.title if acc else "accelerators"
                tflops = _fraction(cost.peak_flops) / 10**12
                lines.append(
                    f"time on {cost.gpus:,} x {what} at {fixed(tflops, 0 if tflops >= 1 else 6)} TFLOP/s peak, "
                    f"{cost.mfu:.0%} MFU: {fixed(days)} days ({fixed(_fraction(cost.seconds) / 3600, 0)} hours)"
                )
        blocks.append("\n".join(lines))
    _render(args, objects, lambda: "\n\n".join(blocks))
    return EXIT_OK


# ---------------------------------------------------------------- memory


def _memory_args(p: argparse.ArgumentParser) -> None:
    from archspec.hardware import ACCELERATORS
    from archspec.memory import DTYPE_BYTES, OPTIMIZERS, RECOMPUTE

    _workload_args(p)
    p.add_argument("--dtype", default="bf16", choices=list(DTYPE_BYTES), help="weights and activations (default bf16)")
    p.add_argument("--optimizer", default="adamw", choices=list(OPTIMIZERS), help="optimizer states (default adamw)")
    p.add_argument(
        "--recompute",
        default="none",
        choices=list(RECOMPUTE),
        help="activation recomputation (Korthikanti et al. 2022): none, selective, full",
    )
    p.add_argument("--fp32-grads", action="store_true", help="keep gradients in fp32 (the 18 bytes/param convention)")
    p.add_argument("--no-dropout", action="store_true", help="no dropout masks in the activations")
    p.add_argument("--zero", type=int, default=0, choices=[0, 1, 2, 3], help="ZeRO stage over the data-parallel GPUs")
    p.add_argument("--gpus", type=positive_int, default=1, help="GPUs in all (data parallel = gpus / (tp * pp))")
    p.add_argument("--tp", type=positive_int, default=1, help="tensor-parallel degree (with sequence parallelism)")
    p.add_argument("--pp", type=positive_int, default=1, help="pipeline-parallel degree")
    p.add_argument("--gpu", choices=list(ACCELERATORS), help="say whether the per-GPU total fits this accelerator")


def cmd_memory(args) -> int:
    from archspec.hardware import accelerator
    from archspec.memory import estimate_memory
    from archspec.render import exact, fixed, human_bytes, pct, table

    if args.gpus % (args.tp * args.pp):
        raise SpecError(f"--gpus {args.gpus} is not divisible by --tp {args.tp} x --pp {args.pp}")
    dp = args.gpus // (args.tp * args.pp)
    acc = accelerator(args.gpu) if args.gpu else None
    objects, blocks = [], []
    for spec in _specs(args):
        m = _planning(estimate_memory, spec, args.batch, args.seq_len, args.dtype, args.optimizer, args.recompute,
                      args.src_len, args.fp32_grads, not args.no_dropout, args.zero, dp, args.tp, args.pp)  # fmt: skip
        obj = m.to_dict()
        if acc:
            obj.update(accelerator=acc.name, accelerator_memory_bytes=int(acc.memory_gib * 2**30),
                       fits_training=m.training_total_bytes <= acc.memory_gib * 2**30,
                       fits_inference=m.inference_total_bytes <= acc.memory_gib * 2**30)  # fmt: skip
        objects.append(obj)
        per_token = m.kv_cache_bytes_per_token
        rows = [
            ["weights", human_bytes(m.weights_bytes), exact(m.weights_bytes)],
            ["gradients", human_bytes(m.gradients_bytes), exact(m.gradients_bytes)],
            ["optimizer states", human_bytes(m.optimizer_bytes), exact(m.optimizer_bytes)],
            [f"activations (recompute: {m.recompute})", human_bytes(m.activations_bytes), exact(m.activations_bytes)],
            ["training total", human_bytes(m.training_total_bytes), exact(m.training_total_bytes)],
            ["KV cache", human_bytes(m.kv_cache_bytes), exact(m.kv_cache_bytes)],
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
            table(rows, ["", "memory", "bytes"], args.format, colalign=("left", "right", "right")),
            f"training bytes per parameter: {m.per_param_note}",
        ]
        if acc:
            cap = acc.memory_gib * 2**30
            verdict = {True: "fits", False: "does not fit"}
            lines.append(
                f"{acc.title} ({acc.memory_gib:g} GiB): training {verdict[obj['fits_training']]} "
                f"({pct(_fraction(m.training_total_bytes) / _fraction(cap), 0)}), inference "
                f"{verdict[obj['fits_inference']]} ({pct(_fraction(m.inference_total_bytes) / _fraction(cap), 0)})"
            )
        blocks.append("\n".join(lines))
    _render(args, objects, lambda: "\n\n".join(blocks) + "\nGiB = 2^30 bytes; --format json gives exact bytes.")
    return EXIT_OK


# ---------------------------------------------------------------- validate


def _claim_sets(args):
    """(spec, claims) for each preset named, each model of each family file named, or all presets."""
    from archspec.catalog import get_preset, load_family_file, preset_names
    from archspec.loading import parse_assignments

    overrides = parse_assignments(args.overrides)
    refs = list(args.models or []) or preset_names()
    out = []
    for ref in refs:
        is_file = any(ref.lower().endswith(x) for x in (".toml", ".json", ".yaml", ".yml")) or "/" in ref
        presets = load_family_file(ref) if is_file else [get_preset(ref)]
        for p in presets:
            spec = p.spec
            if overrides:
                from archspec.catalog import resolve_model

                spec = resolve_model(p.name, overrides) if not is_file else _planning(spec.replace, **overrides)
            out.append((spec, p.claims))
    return out


def _fmt_quantity(quantity: str, value) -> str:
    from archspec.render import human_sig, sci

    if quantity == "params":
        return f"{human_sig(value)} ({value:,})"
    if quantity == "pf_days":
        return f"{value:,.4g}" if abs(value) < 10**15 else sci(value, 4)
    return sci(value, 4)


def cmd_validate(args) -> int:
    import textwrap

    from archspec.claims import assess
    from archspec.render import signed_pct

    objects, rows, notes = [], [], []
    unexplained = []
    for spec, claims in _claim_sets(args):
        assessed = [assess(spec, c) for c in claims]
        objects.append({"name": spec.name, "claims": [a.to_dict() for a in assessed]})
        for a in assessed:
            c = a.claim
            lines = []
            if c.explanation:
                lines.append(c.explanation)
            if a.what_if:
                w = a.what_if
                changes = ", ".join(f"{k}={v}" for k, v in w["changes"].items())
                lines.append(
                    f"what if {changes}: {_fmt_quantity(c.quantity, w['computed'])}, {w['status']} "
                    f"({signed_pct(w['deviation'])}) [{w['label']}]"
                )
            if a.implied:
                i = a.implied
                if i["low"] is None:
                    lines.append(f"implied: {i['note']} (the spec has {i['field']} = {i['current']:,})")
                else:
                    lines.append(
                        f"implied: {c.printed} needs {i['field']} between {i['low']:,} and {i['high']:,} "
                        f"(the spec has {i['current']:,})"
                    )
            if a.using_params:
                u = a.using_params
                lines.append(
                    f"with N = {u['params']} as the source prints it: {_fmt_quantity(c.quantity, u['computed'])}, "
                    f"{u['status']} ({signed_pct(u['deviation'])})"
                )
            ref = ""
            if lines:
                notes.append((len(notes) + 1, spec.name, c.printed, lines))
                ref = f"[{len(notes)}]"
            if a.unexplained_off:
                unexplained.append(f"{spec.name} {c.quantity} {c.printed} ({c.source})")
            rows.append([spec.name, c.quantity, c.printed, _fmt_quantity(c.quantity, a.computed),
                         signed_pct(a.deviation), a.status, c.source, ref])  # fmt: skip

    def people() -> str:
        headers = ["model", "quantity", "claimed", "computed", "deviation", "status", "source", "note"]
        widths = [None, None, None, None, None, None, 48, None] if args.format == "table" else None
        from tabulate import tabulate

        out = tabulate(rows, headers=headers, tablefmt="github" if args.format == "markdown" else "simple",
                       disable_numparse=True, maxcolwidths=widths)  # fmt: skip
        blocks = [out, ""]
        for n, name, printed, lines in notes:
            body = [f"[{n}] {name} {printed}: {lines[0]}"] + [f"    {x}" for x in lines[1:]]
            blocks.append("\n".join(textwrap.fill(b, 110, subsequent_indent="    ") for b in body))
        counts = {k: sum(r[5] == k for r in rows) for k in ("match", "near", "off")}
        blocks.append(
            f"\n{len(rows)} claims: {counts['match']} match, {counts['near']} near (within 1%), {counts['off']} off; "
            "match = the exact value rounds to the printed figure at its printed precision"
        )
        if unexplained:
            blocks.append("off with no recorded explanation: " + "; ".join(unexplained))
        return "\n".join(blocks)

    _render(args, objects, people)
    return EXIT_MISMATCH if unexplained else EXIT_OK


# ---------------------------------------------------------------- verify


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


def cmd_verify(args) -> int:
    from archspec.flops import count_flops
    from archspec.params import COMPONENTS, count_params
    from archspec.render import exact, table

    reference = _reference()
    from archspec.reference.measure import example_inputs, measure_flops

    specs = _specs(args, default_all=True)
    objects, rows = [], []
    for spec in specs:
        analytic = count_params(spec)
        model = reference.build(spec, device="meta")
        measured = reference.count_by_component(model)
        instantiated = reference.count_total(model)
        bad = [c for c in COMPONENTS if analytic.components[c] != measured[c]]
        params_ok = not bad and analytic.total == instantiated
        # FLOPs: one forward pass at the context length, batch 1, counted by torch on the meta device
        flops = count_flops(spec, 1, spec.max_positions)
        flops_measured, flops_by_component = measure_flops(model, example_inputs(spec, 1, spec.max_positions))
        bad_flops = [c for c, v in flops.components.items() if flops_by_component.get(c, 0) != v]
        flops_ok = not bad_flops and flops.forward == flops_measured
        ok = params_ok and flops_ok
        objects.append(
            {
                "name": spec.name,
                "analytic": analytic.total,
                "instantiated": instantiated,
                "ok": ok,
                "params_ok": params_ok,
                "components": {
                    c: {"analytic": analytic.components[c], "instantiated": measured[c]} for c in COMPONENTS
                },
                "mismatched_components": bad,
                "flops_seq_len": spec.max_positions,
                "flops_analytic": flops.forward,
                "flops_measured": flops_measured,
                "flops_ok": flops_ok,
                "flops_components": {
                    c: {"analytic": v, "measured": flops_by_component.get(c, 0)} for c, v in flops.components.items()
                },
                "mismatched_flops_components": bad_flops,
            }
        )
        detail = []
        if bad:
            detail += [f"params {c} {analytic.components[c]:,} vs {measured[c]:,}" for c in bad]
        if bad_flops:
            detail += [f"FLOPs {c} {flops.components[c]:,} vs {flops_by_component.get(c, 0):,}" for c in bad_flops]
        rows.append(
            [
                spec.name,
                exact(analytic.total),
                exact(instantiated),
                exact(flops.forward),
                exact(flops_measured),
                "; ".join(detail) or "all components equal",
                "ok" if ok else "MISMATCH",
            ]
        )

    def people() -> str:
        n_bad = sum(not o["ok"] for o in objects)
        summary = (
            f"{len(objects)} model(s): analytic == instantiated for parameters and FLOPs, component by component"
            if not n_bad
            else f"{n_bad} of {len(objects)} model(s) differ"
        )
        note = (
            "instantiated: unique parameters of archspec.reference.build(spec, device='meta'); measured: torch's "
            "FlopCounterMode over one forward pass, batch 1 x max_positions tokens, on the meta device"
        )
        headers = ["model", "params analytic", "instantiated", "FLOPs analytic", "measured", "components", "check"]
        align = ("left", "right", "right", "right", "right", "left", "left")
        return table(rows, headers, args.format, colalign=align) + f"\n\n{summary}\n{note}"

    _render(args, objects, people)
    return EXIT_OK if all(o["ok"] for o in objects) else EXIT_MISMATCH


# ---------------------------------------------------------------- the parser


COMMANDS: dict[str, dict[str, Any]] = {}


def register(
    name: str,
    run: Callable[[argparse.Namespace], int],
    help: str,
    examples: str,
    models: str | None = "+",
    add_args: Callable[[argparse.ArgumentParser], None] | None = None,
    default_format: str | None = "table",
) -> None:
    """Add a subcommand: `models` is argparse's nargs for MODEL ('+', '*', or None for none)."""
    COMMANDS[name] = dict(run=run, help=help, examples=examples, models=models, add_args=add_args,
                          default_format=default_format)  # fmt: skip


register("list", cmd_list, "presets with a one-line summary", "archspec list\n  archspec list --format json",
         models=None)  # fmt: skip
register(
    "show",
    cmd_show,
    "the full spec of each MODEL, defaults resolved",
    "archspec show gpt2\n  archspec show my-model.toml --format json\n  archspec show gpt2 --set n_kv_heads=4",
)
register(
    "params",
    cmd_params,
    "exact parameter count by component, with the seed estimate and Kaplan's N",
    "archspec params gpt2\n  archspec params gpt3-175b --format json\n  archspec params gpt2 --set vocab_size=50_304",
)
register(
    "compare",
    cmd_compare,
    "models side by side: shape, parameters, FLOPs per token, memory",
    "archspec compare transformer-base gpt2\n  archspec compare gpt2 gpt2-medium gpt2-large gpt2-xl --format markdown",
    add_args=_compare_args,
)
register(
    "flops",
    cmd_flops,
    "exact forward/backward/training FLOPs by component, the published approximations beside them, "
    "and training cost for --tokens on --gpus",
    "archspec flops gpt2 --batch 8 --seq-len 1024\n  archspec flops gpt3-175b --tokens 300e9\n"
    "  archspec flops gpt3-175b --tokens 300e9 --gpu h100 --gpus 1024 --mfu 0.4\n"
    "  archspec flops transformer-base --seq-len 30 --src-len 32 --format json",
    add_args=_flops_args,
)
register(
    "memory",
    cmd_memory,
    "memory for training (weights, gradients, optimizer states, activations) and inference (KV cache)",
    "archspec memory gpt2 --batch 8 --seq-len 1024\n  archspec memory gpt3-175b --gpus 1024 --tp 8 --pp 8 --zero 1\n"
    "  archspec memory gpt3-175b --gpus 64 --zero 3 --recompute full --gpu h100",
    add_args=_memory_args,
)
register(
    "validate",
    cmd_validate,
    "published claims (parameters, training compute) against the exact computation: source, deviation, "
    "status and explanation; all presets when no MODEL is given; a MODEL file in the presets' format "
    "checks your own claims",
    "archspec validate\n  archspec validate gpt2 transformer-base\n  archspec validate my-claims.toml --format json",
    models="*",
)
register(
    "verify",
    cmd_verify,
    "build the reference model on the meta device and check analytic == instantiated for parameters and "
    "forward FLOPs, component by component; all presets when no MODEL is given (needs torch)",
    "archspec verify\n  archspec verify gpt2 my-model.toml --format json",
    models="*",
)
register(
    "schema",
    cmd_schema,
    "the JSON Schema of a spec file (--format table lists the fields)",
    "archspec schema > modelspec.schema.json\n  archspec schema --format table",
    models=None,
    default_format=None,
)


def build_parser(command: str | None = None) -> Parser:
    """The argument parser. With `command`, only that subcommand gets its own options (the others
    are listed for --help but never parsed), which keeps start-up to what the command needs."""
    parser = Parser(
        prog="archspec",
        description=(
            "Exact parameter counts, FLOPs and memory for Transformer architectures, "
            "checked against the real PyTorch model and against published claims."
        ),
        epilog="examples:\n  archspec compare transformer-base gpt2 gpt3-175b\n  archspec params gpt2 --format json\n"
        "  archspec COMMAND --help",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from archspec import __version__

    parser.add_argument("--version", action="version", version=f"archspec {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    for name, c in COMMANDS.items():
        p = sub.add_parser(
            name,
            help=c["help"],
            description=c["help"][0].upper() + c["help"][1:] + ".",
            epilog="examples:\n  " + c["examples"],
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        _common(p, c["models"])
        p.set_defaults(format=c["default_format"])
        if c["add_args"] and (command is None or command == name):
            c["add_args"](p)
        p.set_defaults(run=c["run"])
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(next((a for a in argv if a in COMMANDS), None))
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except SpecError as exc:
        sys.stderr.write(f"archspec: error: {one_line(str(exc))}\n")
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # `archspec list | head`
        return EXIT_OK
    except KeyboardInterrupt:
        sys.stderr.write("archspec: interrupted\n")
        return 130
