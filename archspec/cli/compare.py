"""`archspec compare`: models side by side: shape, parameters, FLOPs per token, memory."""

from __future__ import annotations

import argparse
from fractions import Fraction
from typing import Any

from archspec.cli.models import is_measured, read_models
from archspec.cli.options import dtype_name, positive_length
from archspec.cli.output import EXIT_OK, ROUNDING_NOTE, heads_of, layers_of, render

HELP = "models side by side: shape, parameters, FLOPs per token, memory"
EXAMPLES = (
    "archspec compare transformer-base gpt2\n  archspec compare gpt2 gpt2-medium gpt2-large gpt2-xl --format markdown"
)


def _measured_compare_dict(m) -> dict[str, Any]:
    from archspec.count.flops import exact_number

    out = m.params_dict()
    per_token = None if m.forward is None else exact_number(Fraction(m.forward, m.batch * m.seq_len))
    out.update(seq_len=m.seq_len, forward_per_token=per_token)
    return out


def _measured_compare_table(measured: list, fmt: str) -> str:
    from archspec.render.text import human, table, wrapped

    body = [[m.name, m.model_type, m.layers or "-", m.d_model or "-", f"{m.vocab_size:,}" if m.vocab_size else "-",
             human(m.total), human(m.active) if m.active is not None else "not known", human(m.non_embedding),
             human(Fraction(m.forward, m.batch * m.seq_len)) if m.forward is not None else "not measured"]
            for m in measured]  # fmt: skip
    headers = ["model", "model_type", "layers", "d_model", "vocab", "params", "active", "non-emb",
               f"FLOPs/token at {measured[0].seq_len:,}"]  # fmt: skip
    sources = sorted({m.source for m in measured})

    def note(text: str) -> str:
        return wrapped(text) if fmt == "table" else text

    return (
        note("measured, not analytic (model_types without an adapter; FlopCounterMode over one forward pass):")
        + "\n"
        + table(body, headers, fmt, transpose=True)
        + "\n"
        + note("; ".join(sources))
    )


def add_args(p: argparse.ArgumentParser) -> None:
    from archspec.memory import DTYPE_BYTES
    from archspec.plan.compare import DEFAULT_SEQ_LEN

    p.add_argument(
        "--seq-len",
        type=positive_length,
        default=DEFAULT_SEQ_LEN,
        help=f"one sequence length for every model's FLOPs per token (default {DEFAULT_SEQ_LEN:,}; a model whose "
        "context is shorter is counted at its context, and marked)",
    )
    p.add_argument(
        "--dtype",
        default="bf16",
        type=dtype_name,
        choices=list(DTYPE_BYTES),
        help="bytes per value for weights and KV cache (default bf16; torch names such as bfloat16 accepted too)",
    )


def run(args) -> int:
    from archspec.memory import default_kv_dtype
    from archspec.plan.compare import compare
    from archspec.render.text import human, human_bytes, table, wrapped

    models = read_models(args, 1, args.seq_len)
    measured = [m for m in models if is_measured(m)]
    rows = [compare(s, args.seq_len, args.dtype) for s in models if not is_measured(s)]
    by_name = iter(r.to_dict() for r in rows)
    objects = [_measured_compare_dict(m) if is_measured(m) else next(by_name) for m in models]

    def people() -> str:
        text = analytic() if rows else ""
        if measured:
            text = (text + "\n\n" if text else "") + _measured_compare_table(measured, args.format)
        return text

    def analytic() -> str:
        kv = default_kv_dtype(args.dtype)
        moe = any(r.count.active != r.count.total for r in rows)
        headers = ["model", "layers", "d_model", "heads", "d_head", "d_ff", "vocab", "ctx", "params",
                   *(["active"] if moe else []), "non-emb", f"FLOPs/token at {args.seq_len:,}",
                   f"weights {args.dtype}", "KV/token"]  # fmt: skip
        body = [[r.spec.name, layers_of(r.spec), r.spec.d_model, heads_of(r.spec), r.spec.d_head, r.spec.d_ff,
                 f"{r.spec.vocab_size:,}", r.spec.max_positions, human(r.count.total),
                 *([human(r.count.active)] if moe else []), human(r.count.non_embedding),
                 human(r.forward_per_token) + (f" (at {r.seq_len:,}*)" if r.seq_len_clamped else ""),
                 human_bytes(r.weights_bytes), human_bytes(r.kv_cache_bytes_per_token)] for r in rows]  # fmt: skip
        clamped = [r.spec.name for r in rows if r.seq_len_clamped]
        note = (
            f"FLOPs/token: exact forward matmul FLOPs per token over one {args.seq_len:,}-token sequence "
            "(2 per multiply-accumulate)"
            + (
                f"; * beyond the context of {', '.join(clamped)}: at its context length (ctx) instead"
                if clamped
                else ""
            )
            + (".\nactive: parameters one token uses (the routed experts it is sent to)" if moe else "")
            + ".\n"
            + (
                f"Weights in {args.dtype}, KV cache in {kv} (int4 is weight-only)"
                if kv != args.dtype
                else f"Weights and KV cache in {kv}"
            )  # fmt: skip
            + "; "
            "`archspec flops` and `archspec memory` give the breakdowns."
        )
        notes = ROUNDING_NOTE + "\n" + note
        return table(body, headers, args.format, transpose=True) + "\n\n" + (
            wrapped(notes) if args.format == "table" else notes)  # fmt: skip

    render(args, objects, people)
    return EXIT_OK
