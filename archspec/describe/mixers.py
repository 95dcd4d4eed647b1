"""The recurrent mixers: Mamba (Jamba), Mamba-2 (Mamba-Codestral, Nemotron-H) and Gated DeltaNet
(Qwen3-Next, Qwen3.5), each one Part at ``<layer>.mixer`` with its tensors named and shaped as
transformers builds them.

Conventions (shared with archspec.describe.entries):

- matmul FLOPs are the projections and the depthwise conv1d (padded by d_conv - 1 on both sides
  and cut to the sequence, as FlopCounterMode counts ``nn.Conv1d``); the scan is not a matmul;
- the scan is one ``Pointwise`` in the non-matmul bin ``recurrence``: per token, the state elements
  times the element-wise operations one step applies to state-sized tensors (``mamba_scan``,
  ``mamba2_scan``, ``deltanet_scan`` in NON_MATMUL_COST); per-channel and per-head work (softplus
  of dt, the D skip, beta, the gates, the norms) is counted with the activations and norms;
- the cache holds, per sequence and whatever the length, the conv state (the last d_conv inputs of
  the conv, conv channels x d_conv, in the cache's dtype) and the recurrent state in fp32, as
  transformers' ``LinearAttentionLayer`` holds them after a forward (its conv state keeps d_conv
  columns, one more than the conv needs; the state is the fp32 result of the scan);
- what each keeps for backward is the rule sets' (archspec.memory.saved.mixers).
"""

from __future__ import annotations

from collections.abc import Callable

from archspec.describe.entries import Cached, Conv, Entry, Linear, Norm, Param, Pointwise, StackShape
from archspec.describe.parts import Part
from archspec.spec.model import Mamba2Mixer, ModelSpec


def _part(spec: ModelSpec, stack: StackShape, layer: str, entries: tuple[Entry, ...], cached: tuple[Cached, ...],
          form: str) -> Part:  # fmt: skip
    """The mixer's part, with its residual add."""
    entries += (Pointwise("residual", "residual", spec.d_model, "residual_adds"),)
    return Part(f"{layer}.mixer", "mixer", "dense", entries, stack=stack, form=form, cached=cached)


def mamba_part(spec: ModelSpec, stack: StackShape, layer: str) -> Part:
    """Mamba (Jamba's JambaMambaMixer): in_proj d -> 2 I (x and the gate z), conv1d over I, x_proj
    I -> R + 2 N (dt, B, C; Jamba's RMSNorms on each), dt_proj R -> I with a bias, A_log (I, N), D
    (I), out_proj I -> d. State: I x N per sequence."""
    m, d = spec.mixer, spec.d_model
    I, N, R, K = m.d_inner, m.d_state, m.dt_rank, m.d_conv
    norms: tuple[Entry, ...] = ()
    if m.dt_norms:
        norms = tuple(Norm(name, width, "rmsnorm", affine="weight")
                      for name, width in (("dt_layernorm", R), ("b_layernorm", N), ("c_layernorm", N)))  # fmt: skip
    entries = (
        Linear("in_proj", d, 2 * I, m.bias),
        Conv("conv1d", I, K, m.conv_bias),
        Pointwise("conv_act", "silu", I, "activations"),
        Linear("x_proj", I, R + 2 * N, False),
        *norms,
        Linear("dt_proj", R, I, True),
        Pointwise("dt_softplus", "softplus", I, "activations"),
        Param("A_log", (I, N)),
        Param("D", (I,)),
        Pointwise("scan", "mamba_scan", I * N, "recurrence"),
        Pointwise("skip", "gate", 2 * I, "recurrence"),  # + D x: a multiply and an add per channel
        Pointwise("gate", "silu", I, "activations"),
        Pointwise("gate_product", "gate", I, "activations"),
        Linear("out_proj", I, d, m.bias),
    )
    cached = (Cached(I * K, rows="state"), Cached(I * N, rows="state", dtype="fp32"))
    return _part(spec, stack, layer, entries, cached, "mamba")


def mamba2_part(spec: ModelSpec, stack: StackShape, layer: str, m: Mamba2Mixer | None = None) -> Part:
    """Mamba-2 (Mamba2Mixer, NemotronHMamba2Mixer, FalconH1Mixer): in_proj d -> I + (I + 2 G N) + H (z;
    x, B, C; dt), conv1d over x, B, C, dt_bias, A_log and D per head, the gated RMSNorm over I in G
    groups (or none: y * silu(z)), out_proj I -> d. State: H x P x N per sequence. `m`: the mixer
    table (default: the layer's attention; Falcon-H1's, beside its attention, attention.ssm)."""
    m, d = m or spec.mixer, spec.d_model
    H, P, N, G, K = m.heads, m.head_dim, m.d_state, m.groups, m.d_conv
    I = H * P
    conv = I + 2 * G * N
    entries = (
        Linear("in_proj", d, I + conv + H, m.bias),
        Conv("conv1d", conv, K, m.conv_bias),
        Pointwise("conv_act", "silu", conv, "activations"),
        Param("dt_bias", (H,)),
        Param("A_log", (H,)),
        Param("D", (H,)),
        Pointwise("dt_softplus", "softplus", H, "activations"),
        Pointwise("scan", "mamba2_scan", H * P * N, "recurrence"),
        Pointwise("skip", "gate", 2 * I, "recurrence"),
        Pointwise("gate", "silu", I, "activations"),
        Pointwise("gate_product", "gate", I, "activations"),
        *((Norm("norm", I, "rmsnorm", affine="weight"),) if m.norm != "none" else ()),  # over I in G groups of I / G
        Linear("out_proj", I, d, m.bias if m.out_bias is None else m.out_bias),
    )
    cached = (Cached(conv * K, rows="state"), Cached(H * P * N, rows="state", dtype="fp32"))
    return _part(spec, stack, layer, entries, cached, "mamba2")


def gated_deltanet_part(spec: ModelSpec, stack: StackShape, layer: str) -> Part:
    """Gated DeltaNet (Qwen3NextGatedDeltaNet, Qwen3_5GatedDeltaNet): projections to q, k (Hk x dk
    each), v and z (Hv x dv each), b and a (Hv each), fused as in_proj_qkvz and in_proj_ba or split
    as in_proj_qkv, in_proj_z, in_proj_b, in_proj_a; conv1d over q, k, v without a bias; dt_bias and
    A_log per value head; the gated RMSNorm over each value head (one weight of dv); out_proj
    Hv dv -> d. State: Hv x dk x dv per sequence."""
    m, d = spec.mixer, spec.d_model
    Hk, Hv, dk, dv, K = m.key_heads, m.value_heads, m.d_key, m.d_value_head, m.d_conv
    kd, vd = Hk * dk, Hv * dv
    conv = 2 * kd + vd
    if m.projections == "fused":
        projections: tuple[Entry, ...] = (Linear("in_proj_qkvz", d, 2 * kd + 2 * vd, False),
                                          Linear("in_proj_ba", d, 2 * Hv, False))  # fmt: skip
    else:
        projections = (Linear("in_proj_qkv", d, conv, False), Linear("in_proj_z", d, vd, False),
                       Linear("in_proj_b", d, Hv, False), Linear("in_proj_a", d, Hv, False))  # fmt: skip
    entries = (
        *projections,
        Conv("conv1d", conv, K, False),
        Pointwise("conv_act", "silu", conv, "activations"),
        Param("dt_bias", (Hv,)),
        Param("A_log", (Hv,)),
        Pointwise("beta", "sigmoid", Hv, "activations"),
        Pointwise("decay", "softplus", Hv, "activations"),
        Norm("q_l2norm", dk, "l2norm", per_row=Hv * dk),  # q and k repeated to every value head, then normalised
        Norm("k_l2norm", dk, "l2norm", per_row=Hv * dk),
        Pointwise("scan", "deltanet_scan", Hv * dk * dv, "recurrence"),
        Norm("norm", dv, "rmsnorm", per_row=vd, affine="weight"),
        Pointwise("gate", "silu", vd, "activations"),
        Pointwise("gate_product", "gate", vd, "activations"),
        Linear("out_proj", vd, d, False),
    )
    cached = (Cached(conv * K, rows="state"), Cached(Hv * dk * dv, rows="state", dtype="fp32"))
    return _part(spec, stack, layer, entries, cached, "gated_deltanet")


PARTS: dict[str, Callable[[ModelSpec, StackShape, str], Part]] = {
    "mamba": mamba_part,
    "mamba2": mamba2_part,
    "gated_deltanet": gated_deltanet_part,
}
