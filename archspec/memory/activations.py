"""Activation bytes: the tensors a rule set (archspec.memory.saved) says each part of the description keeps
for backward, summed over a workload.

They follow Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer Models",
section 4), generalised tensor by tensor to grouped-query attention, d_head · n_heads ≠ d_model,
d_ff ≠ 4 d_model, gated MLPs and cross-attention. For the GPT block with 16-bit activations and
dropout it is exactly their s·b·h·(34 + 5·a·s/h) per layer; selective recomputation drops the a·s²
terms (34·s·b·h); full recomputation keeps each layer's input (2·s·b·h).
"""

from __future__ import annotations

from fractions import Fraction

from archspec.core.errors import SpecError, shown
from archspec.core.vocab import ATTENTION, attention_runs
from archspec.describe.blocks import Lengths, Part, describe
from archspec.memory.saved import DEFAULT_RULES, rule_set, saved
from archspec.memory.storage import dtype_bytes, nbytes
from archspec.spec.model import ModelSpec


def attention_mode(spec: ModelSpec, attention: str) -> str:
    """The attention that actually runs: 'flash' (a fused kernel: scores never stored) or 'eager'
    (explicit products: the probabilities stored), by the rule the reference model runs
    (archspec.core.vocab.attention_runs: soft-caps, sinks and d_head != d_value run eagerly)."""
    if attention not in ATTENTION:
        raise SpecError(f"unknown attention {shown(attention)}; use flash (fused, the default) or eager")
    from archspec.spec.layers import layer_groups

    for stack_layers in (spec.encoder_layers, spec.decoder_layers):
        for group in layer_groups(spec, stack_layers) if stack_layers else ():
            att, standard = group.spec.mixer, group.spec.mixer.kind == "standard"
            runs = attention_runs(attention, softcap=att.softcap if standard else None, sinks=standard and att.sinks,
                                  d_qk=group.spec.d_head, d_v=group.spec.d_value)  # fmt: skip
            if runs == "eager":
                return "eager"
    return attention


def saved_bytes(
    parts: list[Part],
    lengths: Lengths,
    dtype: str,
    recompute: str,
    dropout: bool,
    layers: bool | None = None,
    attention: str = "flash",
    *,
    spec: ModelSpec,
    rules: str = DEFAULT_RULES,
) -> dict[str, int]:
    """Bytes of the tensors autograd saves, summed by '{stack}.{group}' (the head's under 'output.'),
    over the parts given (of `spec`'s description), as the rule set `rules` says each part keeps;
    `layers` True keeps only the blocks' parts, False only the rest."""
    kept = rule_set(rules)
    e = dtype_bytes(dtype)
    per_value = {"act": e, "mask": Fraction(1 if dropout else 0), "fp32": Fraction(4), "int64": Fraction(8),
                 "bool": Fraction(1), "fp32_copy": Fraction(0 if e == 4 else 4),
                 "fp32_self": Fraction(4 if e == 4 else 0)}  # fmt: skip
    out: dict[str, int] = {}
    for part in parts:
        records = saved(spec, part, kept) if layers is None or part.layered == layers else ()
        if not records:
            continue
        where = "output" if part.component == "head" else part.stack.name
        for s in records:
            if recompute not in s.kept or (s.attention is not None and s.attention != attention):
                continue
            if s.rows == "pairs":
                rows = lengths.rows("tokens", part.stack) * lengths.rows(s.keys, part.stack)
            else:
                rows = lengths.rows(s.rows, part.stack)
            copies = 1 if s.shared else part.repeat
            batch = lengths.batch if s.per_batch else 1
            key = f"{where}.{s.group}"
            out[key] = out.get(key, 0) + nbytes(copies * batch * rows * s.width, per_value[s.dtype])
    return out


def activation_bytes_per_layer(
    spec: ModelSpec,
    batch: int,
    seq: int,
    src: int | None,
    stack: str,
    dtype: str,
    recompute: str,
    dropout: bool = False,
    attention: str = "flash",
    kind: str | None = None,
    rules: str = DEFAULT_RULES,
) -> dict[str, int]:
    """Bytes saved by one block of `stack` ('encoder' or 'decoder') of layer kind `kind` (default: the
    kind most of its layers have), by group. `seq` is the stack's own length, `src` the source length
    for cross-attention (the encoder output, which every layer reads, is counted with the first); `rules`:
    the rule set of what is kept (archspec.memory.saved.RULE_SETS)."""
    layered = [p for p in describe(spec) if p.layered and p.stack.name == stack and p.component != "mtp"]
    if not layered:
        raise SpecError(f"{spec.name} has no {stack}")
    kinds = {p.kind: p.repeat for p in layered}
    if kind is None:
        kind = max(kinds, key=kinds.get)
    elif kind not in kinds:
        raise SpecError(f"{spec.name}'s {stack} has no layers of kind {shown(kind)}; its kinds: {', '.join(kinds)}")
    parts = [p for p in layered if p.kind == kind]
    lengths = Lengths(batch, seq, src) if stack == "decoder" else Lengths(batch, seq, seq)
    attention_mode(spec, attention)  # checks the mode; a layer that always runs explicit products says so itself
    per_stack = saved_bytes([p._replace(repeat=1) for p in parts], lengths, dtype, recompute, dropout, True, attention,
                            spec=spec, rules=rules)  # fmt: skip
    return {key.removeprefix(f"{stack}."): v for key, v in per_stack.items()}


def korthikanti_bytes_per_layer(spec: ModelSpec, batch: int, seq: int, recompute: str = "none") -> int:
    """Korthikanti et al. 2022 (section 4) for one GPT block with 16-bit activations and dropout:
    s·b·h·(34 + 5·a·s/h); 34·s·b·h with selective recomputation; 2·s·b·h with full. A published
    approximation, shown beside the exact figure (it assumes d_ff = 4h, the attention scores stored,
    dropout, no fused kernel, no norm statistics, no fp32 upcasts)."""
    s, b, h, a = seq, batch, spec.d_model, spec.n_heads
    return {"none": s * b * h * 34 + 5 * a * s * s * b, "selective": 34 * s * b * h, "full": 2 * s * b * h}[recompute]
