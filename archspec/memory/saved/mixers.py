"""What the recurrent mixers keep for backward on torch's CPU kernels (the rule set 'torch-cpu'): Mamba
(Jamba), Mamba-2 and Gated DeltaNet, storage by storage as one training step of the reference model
keeps them (held equal in tests/test_activations_kinds.py). The reference runs each scan under
``torch.utils.checkpoint``, as fused SSM kernels keep no per-step state, so the group ``mixer_scan`` is
the scan's inputs (fp32) and the group ``mixer`` the projections' inputs, the conv's input and output,
the gates' and the norms' tensors. A mixer whose input another part keeps (Falcon-H1's Mamba-2 beside
its attention, on the same norm) leaves that first record out."""

from archspec.describe.parts import Part
from archspec.memory.saved.record import Saved
from archspec.spec.model import ModelSpec


def _own(part: Part, saved: tuple[Saved, ...]) -> tuple[Saved, ...]:
    """The mixer's records, its input (the first) left out where another part keeps it."""
    return saved[1:] if part.shares_input else saved


def _conv_saved(channels: int, K: int) -> tuple[Saved, Saved]:
    """The conv's output before it is cut to the sequence (the silu's input): T + K - 1 columns."""
    return Saved("mixer", channels), Saved("mixer", channels * (K - 1), rows="first")


def mamba(spec: ModelSpec, part: Part) -> tuple[Saved, ...]:
    """Mamba (Jamba's JambaMambaMixer), the rule of the form 'mamba'."""
    m, d = spec.mixer, spec.d_model
    I, N, R, K = m.d_inner, m.d_state, m.dt_rank, m.d_conv
    per_model = dict(rows="first", dtype="fp32", per_batch=False)
    if m.dt_norms:  # each norm: its input in fp32, 1/rms, the normalised input; then dt_proj's input
        norms_saved: tuple[Saved, ...] = (
            Saved("mixer", R + 2 * N, dtype="fp32_self"), Saved("mixer", R + 2 * N, dtype="fp32_copy"),
            Saved("mixer", 3, dtype="fp32"), Saved("mixer", R + 2 * N), Saved("mixer", R))  # fmt: skip
        bc = Saved("mixer_scan", 2 * N, dtype="fp32")
    else:  # dt_proj's input is a view of x_proj's output; B and C in fp32 are views of it too
        norms_saved, bc = (Saved("mixer", R + 2 * N),), Saved("mixer_scan", 2 * N, dtype="fp32_copy")
    scan = (Saved("mixer_scan", I, dtype="fp32_copy"), Saved("mixer_scan", I, dtype="fp32"),  # u in fp32, dt
            Saved("mixer_scan", I * N, **per_model), bc,  # A, B and C
            Saved("mixer_scan", I * N, rows="first", dtype="fp32"))  # the zero state  # fmt: skip
    saved = (Saved("mixer", d), Saved("mixer", 2 * I),  # the projections' input and output
             *_conv_saved(I, K),
             Saved("mixer", 2 * I),  # u (the silu's output) and x_proj's input (its contiguous copy)
             *norms_saved,
             Saved("mixer", I, dtype="fp32"), Saved("mixer", I * N, **per_model),  # softplus's input, exp(A_log)
             *scan,
             Saved("mixer", I, dtype="fp32"), Saved("mixer", 2 * I))  # y + D u; silu(z), out_proj's input  # fmt: skip
    return _own(part, saved)


def mamba2(spec: ModelSpec, part: Part) -> tuple[Saved, ...]:
    """Mamba-2 (Mamba2Mixer, NemotronHMamba2Mixer, FalconH1Mixer), the rule of the form 'mamba2': the
    layer's mixer table, or Falcon-H1's beside its attention (attention.ssm)."""
    m, d = spec.mixer if spec.mixer.kind == "mamba2" else spec.mixer.ssm, spec.d_model
    H, P, N, G, K = m.heads, m.head_dim, m.d_state, m.groups, m.d_conv
    I = H * P
    conv = I + 2 * G * N
    scan = (Saved("mixer_scan", conv, dtype="fp32_self"), Saved("mixer_scan", I, dtype="fp32_copy"),  # x
            Saved("mixer_scan", H + 2 * H * N, dtype="fp32"),  # dt; B and C repeated to every head
            Saved("mixer_scan", H, rows="first", dtype="fp32", per_batch=False),  # A
            Saved("mixer_scan", H * P * N, rows="first", dtype="fp32"))  # the zero state  # fmt: skip
    saved = (Saved("mixer", d), Saved("mixer", I + conv + H),  # the projections' input and output
             *_conv_saved(conv, K),
             Saved("mixer", 2 * H),  # softplus's and the clamp's inputs
             Saved("mixer", H, rows="first", dtype="fp32", per_batch=False),  # exp(A_log)
             *scan,
             *_mamba2_output_saved(m.norm, I, G),
             Saved("mixer", I))  # out_proj's input  # fmt: skip
    return _own(part, saved)


def _mamba2_output_saved(norm: str, I: int, G: int) -> tuple[Saved, ...]:
    """What Mamba-2's output gate and norm keep, in fp32: y, silu(z) and z's fp32 copy; with a norm, the
    gated y (or, norm before the gate, the weighted norm), 1/rms per group and the normalised y."""
    if norm == "none":
        return Saved("mixer", 2 * I, dtype="fp32"), Saved("mixer", I, dtype="fp32_copy")
    return Saved("mixer", 4 * I, dtype="fp32"), Saved("mixer", I, dtype="fp32_copy"), Saved("mixer", G, dtype="fp32")


def gated_deltanet(spec: ModelSpec, part: Part) -> tuple[Saved, ...]:
    """Gated DeltaNet (Qwen3NextGatedDeltaNet, Qwen3_5GatedDeltaNet), the rule of the form 'gated_deltanet'."""
    m, d = spec.mixer, spec.d_model
    Hk, Hv, dk, dv, K = m.key_heads, m.value_heads, m.d_key, m.d_value_head, m.d_conv
    kd, vd = Hk * dk, Hv * dv
    conv = 2 * kd + vd
    per_model = dict(rows="first", dtype="fp32", per_batch=False)
    # z in fp32: a copy, but in fp32 with one value head per key head a view of in_proj_qkvz's output
    z_fp32 = (Saved("mixer", vd, dtype="fp32"),)
    if m.projections == "fused" and Hv == Hk:
        z_fp32 = (Saved("mixer", 2 * kd + 2 * vd, dtype="fp32_self"), Saved("mixer", vd, dtype="fp32_copy"))
    scan = (Saved("mixer_scan", 2 * Hv * dk + Hv, dtype="fp32"),  # q and k normalised, the decay g
            Saved("mixer_scan", conv, dtype="fp32_self"), Saved("mixer_scan", vd, dtype="fp32_copy"),  # v
            Saved("mixer_scan", Hv, dtype="fp32_copy"),  # beta in fp32
            Saved("mixer_scan", Hv * dk * dv, rows="first", dtype="fp32"))  # the zero state  # fmt: skip
    saved = (Saved("mixer", d), Saved("mixer", conv),  # the projections' input, the conv's
             *_conv_saved(conv, K),
             Saved("mixer", 2 * Hv * dk + 2 * Hv, dtype="fp32"),  # q and k repeated, 1/|q| and 1/|k|
             Saved("mixer", Hv),  # beta (the sigmoid's output)
             Saved("mixer", Hv, **per_model), Saved("mixer", Hv, **per_model),  # exp(A_log), -exp(A_log)
             Saved("mixer", 2 * Hv, dtype="fp32"),  # softplus's input and output
             *scan,
             # the norm per value head in fp32, then the gate: o, 1/rms, silu(z), and z in fp32
             Saved("mixer", 2 * vd + Hv, dtype="fp32"), *z_fp32,
             Saved("mixer", 3 * vd))  # the normalised o, times the weight, out_proj's input  # fmt: skip
    return _own(part, saved)
