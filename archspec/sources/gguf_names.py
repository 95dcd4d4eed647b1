"""llama.cpp's names for the spec's tensors, and `archspec check` of a GGUF file under them.

The spec's tensors get llama.cpp's names (``gguf.constants.TENSOR_NAMES``, checked against
``MODEL_TENSORS[arch]``) with the shapes llama.cpp stores (row-major, ggml's ``ne`` reversed): q, k and v
apart (fused for Phi-3), experts stacked into one 3-D tensor per projection, DeepSeek's kv_b split into
k_b and v_b as the converter writes it since 2025. A stored tensor the spec does not name is placed by
its llama.cpp name (rotary tables are buffers, nextn tensors multi-token prediction).
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from archspec.core.errors import SpecError, shown
from archspec.sources.gguf import gguf_package, weights_format
from archspec.sources.stored import StoredTensor


@cache
def _tensor_ids() -> dict[str, Any]:
    """llama.cpp's tensor name pattern ('blk.{bid}.attn_q') -> its MODEL_TENSOR member."""
    gguf = gguf_package()
    return {name: member for member, name in gguf.TENSOR_NAMES.items()}


def _arch_tensors(arch: str) -> set:
    gguf = gguf_package()
    found = [a for a, n in gguf.MODEL_ARCH_NAMES.items() if n == arch]
    if not found:
        raise SpecError(f"GGUF architecture {shown(arch)} is not one the gguf package knows")
    return set(gguf.MODEL_TENSORS[found[0]])


def _name(member_name: str, arch_tensors: set, layer: int | None, suffix: str) -> str:
    gguf = gguf_package()
    member = gguf.MODEL_TENSOR[member_name]
    if member not in arch_tensors:  # a row of the table below that llama.cpp has no place for in this architecture
        raise SpecError(f"llama.cpp's architecture has no tensor {gguf.TENSOR_NAMES[member]!r}")
    pattern = gguf.TENSOR_NAMES[member]
    return (pattern.format(bid=layer) if layer is not None else pattern) + suffix


# archspec's tensor path inside a layer -> llama.cpp's MODEL_TENSOR member
_LAYER = {
    "attention_norm": "ATTN_NORM",
    "attention.q": "ATTN_Q",
    "attention.out": "ATTN_OUT",
    "attention.q_norm": "ATTN_Q_NORM",
    "attention.k_norm": "ATTN_K_NORM",
    "attention.sinks": "ATTN_SINKS",
    "attention_post_norm": "ATTN_POST_NORM",
    "mlp_post_norm": "FFN_POST_NORM",
    "mlp.gate": "FFN_GATE",
    "mlp.up": "FFN_UP",
    "mlp.down": "FFN_DOWN",
    "mlp.router": "FFN_GATE_INP",
    "mlp.experts.gate": "FFN_GATE_EXP",
    "mlp.experts.up": "FFN_UP_EXP",
    "mlp.experts.down": "FFN_DOWN_EXP",
    "mlp.shared.gate": "FFN_GATE_SHEXP",
    "mlp.shared.up": "FFN_UP_SHEXP",
    "mlp.shared.down": "FFN_DOWN_SHEXP",
    "mlp.shared_gate": "FFN_GATE_INP_SHEXP",
    # latent attention (DeepSeek): q_norm and kv_norm are the latents' norms
    "attention.q_a": "ATTN_Q_A",
    "attention.q_b": "ATTN_Q_B",
    "attention.kv_a": "ATTN_KV_A_MQA",
}
_LATENT = {"attention.q_norm": "ATTN_Q_A_NORM", "attention.kv_norm": "ATTN_KV_A_NORM"}
_TOP = {"embed.weight": ("TOKEN_EMBD", ".weight"), "head.weight": ("OUTPUT", ".weight"),
        "decoder.final_norm.weight": ("OUTPUT_NORM", ".weight")}  # fmt: skip
# parameters of the spec that llama.cpp writes under one name without the usual suffix
_BARE = {"attention.sinks": ".weight"}


def expected_tensors(spec, arch: str, kv_b_split: bool = True) -> dict[str, tuple[tuple[int, ...], str]]:
    """llama.cpp's name -> (row-major shape, archspec component) of every parameter tensor of `spec`, as
    llama.cpp's converter writes a model of architecture `arch`. `kv_b_split`: DeepSeek's kv_b as k_b and
    v_b (the converter since 2025), else one attn_kv_b (older files)."""
    from archspec.describe.blocks import describe
    from archspec.describe.parts import tensors

    wanted = _arch_tensors(arch)
    gguf = gguf_package()
    fused_qkv = gguf.MODEL_TENSOR.ATTN_Q not in wanted or arch == "phi3"  # Phi-3's checkpoints fuse q, k, v
    fused_up = gguf.MODEL_TENSOR.FFN_GATE not in wanted  # Phi-3: gate and up in one ffn_up
    latent = spec.mixer.kind == "latent"
    out: dict[str, tuple[tuple[int, ...], str]] = {}

    def put(member: str, layer: int | None, suffix: str, shape: tuple[int, ...], component: str,
            stacked: bool = False) -> None:  # fmt: skip
        name = _name(member, wanted, layer, suffix)
        if name in out and stacked:  # archspec's gate and up, which Phi-3 stores as one ffn_up
            old, _ = out[name]
            shape = (old[0] + shape[0], *shape[1:])
        elif name in out:  # pragma: no cover - a table that names two tensors alike
            raise RuntimeError(f"{name} would hold two of archspec's tensors")
        out[name] = (shape, component)

    for t in tensors(describe(spec)):
        if t.path in _TOP:
            member, suffix = _TOP[t.path]
            put(member, None, suffix, t.shape, t.component)
            continue
        parts = t.path.split(".")
        if parts[:2] != ["decoder", "layers"]:
            raise SpecError(f"{spec.name}: tensor {t.path} has no GGUF name (only decoder-only models are read)")
        layer, inner = int(parts[2]), ".".join(parts[3:])
        module, _, param = inner.rpartition(".")
        if inner in _BARE:
            module, param = inner, ""
        suffix = f".{param}" if param else _BARE[inner]
        if module == "attention.qkv":
            if fused_qkv:
                put("ATTN_QKV", layer, suffix, t.shape, t.component)
                continue
            q = spec.n_heads * spec.d_head
            k = spec.n_kv_heads * spec.d_head
            v = spec.n_kv_heads * spec.d_value
            if q + k + v != t.shape[0]:
                raise SpecError(f"{spec.name}: {t.path} of {t.shape[0]} rows is not q, k and v of {q}, {k}, {v}")
            for member, rows in (("ATTN_Q", q), ("ATTN_K", k), ("ATTN_V", v)):
                put(member, layer, suffix, (rows, *t.shape[1:]), t.component)
            continue
        if module == "attention.kv_b" and kv_b_split:
            # (heads * (nope + v), kv_rank) -> k_b (heads, kv_rank, nope) and v_b (heads, v, kv_rank)
            heads, nope = spec.n_heads, spec.d_head - spec.mixer.rope_dims
            put("ATTN_K_B", layer, suffix, (heads, t.shape[1], nope), t.component)
            put("ATTN_V_B", layer, suffix, (heads, spec.d_value, t.shape[1]), t.component)
            continue
        if module == "attention.kv_b":
            put("ATTN_KV_B", layer, suffix, t.shape, t.component)
            continue
        if module == "mlp_norm":  # Gemma: ffn_norm is FFN_PRE_NORM; gpt-oss: post_attention_norm
            member = next(m for m in ("FFN_NORM", "FFN_PRE_NORM", "ATTN_POST_NORM") if gguf.MODEL_TENSOR[m] in wanted)
            put(member, layer, suffix, t.shape, t.component)
            continue
        if fused_up and module in ("mlp.gate", "mlp.up"):
            put("FFN_UP", layer, suffix, t.shape, t.component, stacked=True)
            continue
        member = (_LATENT if latent else {}).get(module) or _LAYER.get(module)
        if member is None:
            raise SpecError(f"{spec.name}: tensor {t.path} has no GGUF name in archspec's table")
        put(member, layer, suffix, t.shape, t.component)
    return out


# tensors llama.cpp stores that are not parameters of the model: frequency tables of rotary positions and
# DeepSeek-V3's router score correction (a buffer in transformers)
BUFFERS = ("ROPE_FREQS", "ROPE_FACTORS_LONG", "ROPE_FACTORS_SHORT", "ATTN_ROT_EMBD", "FFN_EXP_PROBS_B")
_COMPONENTS = {
    "TOKEN_EMBD": "embed", "OUTPUT": "head", "OUTPUT_NORM": "norm", "ATTN_NORM": "norm", "ATTN_POST_NORM": "norm",
    "FFN_NORM": "norm", "FFN_PRE_NORM": "norm", "FFN_POST_NORM": "norm",
    "FFN_GATE": "mlp", "FFN_UP": "mlp", "FFN_DOWN": "mlp",
    "FFN_GATE_INP": "router", "FFN_GATE_EXP": "experts", "FFN_UP_EXP": "experts", "FFN_DOWN_EXP": "experts",
    "FFN_GATE_SHEXP": "shared_experts", "FFN_UP_SHEXP": "shared_experts", "FFN_DOWN_SHEXP": "shared_experts",
    "FFN_GATE_INP_SHEXP": "shared_experts", **dict.fromkeys(BUFFERS, "buffers"),
}  # fmt: skip


def component_of(name: str) -> str:
    """The component a GGUF tensor belongs to ('blk.3.attn_q.weight' -> 'attention', 'blk.3.nextn.eh_proj.weight'
    -> 'mtp'), for tensors the spec does not name; 'unknown' for a name llama.cpp does not define."""
    base = re.sub(r"\.(weight|bias)$", "", name)
    pattern = re.sub(r"^blk\.\d+\.", "blk.{bid}.", base)
    member = _tensor_ids().get(pattern)
    if member is None:
        return "unknown"
    if member.name.startswith("NEXTN_"):
        return "mtp"
    if member.name.startswith(("ATTN_", "INDEXER_")):
        return "attention"
    if member.name.startswith(("V_", "A_", "ENC_")) or member.name.startswith("MM_"):
        return "towers"
    return _COMPONENTS.get(member.name, member.name.lower())


def check(spec, stored: list[StoredTensor], arch: str, ref: str, files: tuple[str, ...] = (),
          file_type_name: str | None = None):  # fmt: skip
    """archspec check of a GGUF file: its tensors against the spec's under llama.cpp's names (a
    archspec.sources.check.CheckReport). Rotary tables and DeepSeek-V3's score correction are buffers;
    nextn (multi-token prediction) tensors a hidden component; anything else not the spec's is extra."""
    from archspec.count.params import COMPONENTS, count_params
    from archspec.memory.parallel import stored_weights_bytes
    from archspec.sources.check import CheckReport, Misshapen, Tally

    names = {t.name for t in stored}
    split = "blk.0.attn_kv_b.weight" not in names
    expected = expected_tensors(spec, arch, kv_b_split=split)
    by_name = {t.name: t for t in stored}
    missing = tuple(n for n in expected if n not in by_name)
    misshapen = tuple(
        Misshapen((n,), (by_name[n].shape,), (shape,))
        for n, (shape, _) in expected.items()
        if n in by_name and tuple(by_name[n].shape) != tuple(shape)
    )
    component = {n: comp for n, (_, comp) in expected.items() if n in by_name}
    extra: list[str] = []
    hidden: dict[str, Tally] = {}
    buffers = Tally()
    for t in stored:
        if t.name in component:
            continue
        comp = component_of(t.name)
        if comp == "buffers":
            buffers = buffers.add(t)
        elif comp in ("mtp", "towers"):
            hidden[comp] = hidden.get(comp, Tally()).add(t)
        else:
            comp = "extra"
            extra.append(t.name)
        component[t.name] = comp
    by_dtype: dict[str, Tally] = {}
    by_component: dict[str, Tally] = {}
    total = Tally()
    for t in stored:
        by_dtype[t.dtype] = by_dtype.get(t.dtype, Tally()).add(t)
        by_component[component[t.name]] = by_component.get(component[t.name], Tally()).add(t)
        total = total.add(t)
    order = {c: i for i, c in enumerate(COMPONENTS)}
    by_component = dict(sorted(by_component.items(), key=lambda kv: order.get(kv[0], len(order))))
    fmt = weights_format(file_type_name)
    layout = f"llama.cpp {arch}" + (" (file type " + file_type_name + ")" if file_type_name else "")
    return CheckReport(
        name=spec.name, source=ref, layout=layout, ok=not (missing or misshapen or extra or hidden),
        missing=missing, misshapen=misshapen, extra=tuple(extra), hidden=hidden, scales=Tally(), buffers=buffers,
        by_dtype=by_dtype, by_component=by_component, stored=total, spec_params=count_params(spec).total,
        weights_format=fmt, predicted_bytes=stored_weights_bytes(spec, weights=fmt) if fmt else None, files=files,
    )  # fmt: skip
