"""What attention keeps for backward in one training step on torch's CPU kernels (the rule set
'torch-cpu'), measured storage by storage on the reference model: standard, cross and latent
attention (``attention_saved``, ``latent_saved``), with the QK- and value-norm, and the position terms
of DeBERTa and Transformer-XL, per layer (``disentangled_saved``, ``relative_xl_saved``) and per stack
(``disentangled_stack_saved``, ``relative_xl_stack_saved``).

Which products run is the kernels' choice, so it lives here too (``explicit_attention``): a GPU rule
set, whose fused kernels accept what the CPU's refuse, answers it in its own way.
"""

from typing import Literal

from archspec.describe.attention import SCORE_BIASES, AttentionShape, LatentShape
from archspec.describe.entries import Rows
from archspec.describe.parts import Part
from archspec.memory.saved.norms import norm_saved
from archspec.memory.saved.record import ALWAYS, LAYER, SCORES, SELECTIVE, Saved
from archspec.spec.model import ModelSpec


def attention(spec: ModelSpec, part: Part) -> tuple[Saved, ...]:
    """The rule of an attention sub-layer (its part's form 'attention' or 'cross_attention')."""
    cross = part.form == "cross_attention"
    component = part.form
    if spec.mixer.kind == "latent":
        lat = LatentShape.of(spec)
        return latent_saved(spec, lat, lat.attend_shape(), component)
    a = AttentionShape.of(spec)
    keys: Rows = "source" if cross else "tokens"
    saved = attention_saved(spec, a, component, keys, cross, causal=part.stack.causal)
    if spec.position.kind == "disentangled" and not cross:
        saved += disentangled_saved(spec, a, component)
    if spec.position.kind == "transformer_xl" and not cross:
        saved += relative_xl_saved(a, component)
    return saved


def explicit_attention(spec: ModelSpec, a: AttentionShape, cross: bool) -> Literal["explicit", "fallback", None]:
    """How this attention runs when the fused kernel is asked for: 'explicit' when it always runs
    the explicit products (soft-capped scores and sinks have no fused kernel; the CPU's fused kernel
    needs d_head = d_value, and in training the reference model then runs eager attention);
    'fallback' when a bias on the scores (ALiBi, T5's relative bias) sends torch's fused call to its
    math fallback, which keeps what the explicit products keep, in fp32 (it upcasts 16-bit inputs
    on the CPU); None: the fused kernel."""
    att = spec.mixer
    if a.d_head != a.d_value or (att.kind == "standard" and (att.softcap is not None or att.sinks)):
        return "explicit"
    return "fallback" if not cross and (spec.position.kind == "alibi" or spec.position.kind in SCORE_BIASES) else None


def attention_saved(spec: ModelSpec, a: AttentionShape, component: str, keys: Rows, cross: bool,
                    causal: bool = True) -> tuple[Saved, ...]:  # fmt: skip
    """What one attention sublayer keeps for backward, measured storage by storage on the reference
    model (torch's CPU kernels): always the projection's input and the output projection's input;
    with the fused kernel ('flash') the fused Q/K/V output (the rotated q and k besides, with rotary)
    and the fp32 log-sum-exp; with explicit attention ('eager') head-major copies of q, of k and v
    expanded to every query head, and the probabilities; selective recomputation keeps the core's
    inputs and output, in either mode. Rotary keeps its cos and sin (per position, not per batch).
    A layer that always runs explicit products (explicit_attention) keeps the eager tensors in
    either mode. Options: a window or chunk hands the fused kernel a mask, which it keeps as a
    (T, S) tensor of the computation's dtype; sinks keep one more probability per row and the
    argmax of each row (int64); an output gate keeps sigmoid(gate) and the heads' output it scales;
    T5's relative bias, masked to the causal triangle inside the core, keeps the (T, S) boolean mask."""
    d, nh, dk, dv = spec.d_model, a.heads, a.d_head, a.d_value
    att = spec.mixer
    std = att.kind == "standard" and not cross
    kv = (a.k + a.v) if cross else (a.q + a.gate + a.k + a.v)
    saved = [Saved(component, d), Saved(component, a.out_in), Saved(component, d, dtype="mask")]
    if cross:  # the query projection's own output (K and V come from the encoder output)
        saved += [Saved(component, a.q, attention="flash", kept=SCORES), Saved(component, a.q, kept=SELECTIVE),
                  Saved(component, d, rows="source", kept=LAYER, shared=True)]  # fmt: skip
    saved += [
        Saved(component, kv, rows=keys, attention="flash", kept=SCORES),  # the fused projection's output
        Saved(component, kv, rows=keys, kept=SELECTIVE),
        Saved(component, nh, dtype="fp32", attention="flash", kept=SCORES),  # log-sum-exp per head
        Saved(component, nh * dk, attention="eager", kept=SCORES),  # q, head-major
        Saved(component, nh * (dk + dv), rows=keys, attention="eager", kept=SCORES),  # k and v, every head
        Saved(f"{component}_scores", nh, rows="pairs", keys=keys, attention="eager", kept=SCORES),  # probabilities
        Saved(f"{component}_scores", 2 * nh, rows="pairs", keys=keys, dtype="mask", kept=SCORES),  # with dropout
    ]
    if a.rotary_dims and not cross:
        rotated = a.q + a.k  # the rotated q and k: storages of their own
        saved += [Saved(component, rotated, attention="flash", kept=SCORES), Saved(component, rotated, kept=SELECTIVE),
                  Saved("positions", 4 * a.rotary_dims, per_batch=False)]  # fmt: skip
        if a.rotary_dims < dk:  # a partial rotation makes the output head-major: the out projection copies it
            saved += [Saved(component, a.out_in, attention="flash", kept=SCORES)]
    if std and att.qk_norm:
        saved += _qk_norm_saved(spec, a, component, kv)
    if std and (att.sliding_window or att.chunk):  # the fused kernel's mask, one (T, S) per layer
        saved += [Saved(component, 1, rows="pairs", keys=keys, per_batch=False, attention="flash", kept=SCORES)]
    if std and att.sinks:  # the sink's probability per row and head, the row maxima's indices
        saved += [Saved(f"{component}_scores", nh, attention="eager", kept=SCORES),
                  Saved(component, nh, dtype="int64", attention="eager", kept=SCORES)]  # fmt: skip
    if std and att.gate:  # sigmoid(gate) and the heads' output before the gate
        saved += [Saved(component, a.gate), Saved(component, a.out_in)]
    if std and att.value_norm:
        saved = _value_norm_saved(spec, a, component, kv, keys, saved)
    runs = explicit_attention(spec, a, cross)
    if runs == "explicit":  # the eager tensors in either mode, never the fused kernel's
        saved = [s._replace(attention=None) if s.attention == "eager" else s for s in saved if s.attention != "flash"]
    elif runs == "fallback":  # asked for 'flash': the eager tensors, in fp32
        fused = [s._replace(attention="flash", dtype="fp32") for s in saved if s.attention == "eager"]
        saved = [s for s in saved if s.attention != "flash"] + fused
    if not cross and causal and spec.position.kind in ("relative", "transformer_xl"):  # the bias masked in the core
        saved += [Saved(component, 1, rows="pairs", keys=keys, dtype="bool", per_batch=False, attention="flash",
                        kept=SCORES)]  # fmt: skip
    return tuple(saved)


def disentangled_stack_saved(spec: ModelSpec) -> tuple[Saved, ...]:
    """What DeBERTa's relative-position table keeps, once per stack whatever the batch (measured on the
    reference model): its LayerNorm's mean and 1/std per row (outside the blocks: in every mode), the
    normalised table that the layers' projections read (an unnormalised one is the parameter itself) and
    the (T, T) row index of each term, which the layers' gathers share."""
    p, d = spec.position, spec.d_model
    rows = 2 * p.span
    saved = (Saved("positions", 2 * rows, rows="first", per_batch=False, kept=ALWAYS),) if p.norm else ()
    if p.norm:
        saved += (Saved("positions", rows * d, rows="first", per_batch=False),)
    terms = int(p.c2p) + int(p.p2c)
    return saved + (Saved("positions", terms, rows="pairs", dtype="int64", per_batch=False),)


def disentangled_saved(spec: ModelSpec, a: AttentionShape, component: str) -> tuple[Saved, ...]:
    """What one layer's position terms keep (measured on the reference model): per term, the batched
    product's copies of the projected table (heads · d_head · 2 · span per sequence) and of q (c2p) or
    k (p2c), and the product itself, which the gather keeps; with the core recomputed (selective), the
    bias it adds to the scores, one per head and pair."""
    rows = 2 * spec.position.span
    per_term = (Saved(component, a.heads * a.d_head * rows, rows="first"), Saved(component, a.heads * a.d_head),
                Saved(component, a.heads * rows))  # fmt: skip
    terms = int(spec.position.c2p) + int(spec.position.p2c)
    return per_term * terms + (Saved(component, a.heads, rows="pairs", kept=SELECTIVE),)


def relative_xl_stack_saved(spec: ModelSpec) -> tuple[Saved, ...]:
    """What Transformer-XL's relative encodings keep, once per stack whatever the batch (measured on the
    reference model): the encodings of the distances, the input of every layer's W_r (one storage), and the
    relative shift's (T, S) row index, which every layer's gather keeps."""
    return (Saved("positions", spec.d_model, per_batch=False),
            Saved("positions", 1, rows="pairs", dtype="int64", per_batch=False))  # fmt: skip


def relative_xl_saved(a: AttentionShape, component: str) -> tuple[Saved, ...]:
    """What one layer's relative term keeps (measured on the reference model): the batched product's q + v and
    its copy of the projected encodings over the batch (heads · d_head per key), the product by distance,
    which the gather keeps; with the core recomputed (selective), the core's inputs that are new tensors:
    q + u and the shifted term added to the scores."""
    return (Saved(component, a.q), Saved(component, a.q), Saved(component, a.heads, rows="pairs"),
            Saved(component, a.q, kept=SELECTIVE), Saved(component, a.heads, rows="pairs", kept=SELECTIVE))  # fmt: skip


def latent_saved(spec: ModelSpec, lat: LatentShape, a: AttentionShape, component: str) -> tuple[Saved, ...]:
    """What latent attention keeps for backward, measured storage by storage on the reference model:
    the input, the query's norm over q_rank (as a norm sub-layer keeps it) and q_b's input; the
    latent's norm, whose input is a view of kv_a's output (so in fp32, and for a LayerNorm in any
    dtype, the whole of kv_a's output with the rotary key; a 16-bit RMSNorm keeps an fp32 copy of the
    latent alone), and kv_b's input; cos and sin of the rotations of q and of the shared key; the
    output projection's input. The core's q and k are new tensors (the concatenations of their
    rotary and no-rope parts), its v a view of kv_b's output: the fused kernel keeps q, k, kv_b's
    output, its own output (the output projection reads a copy) and the log-sum-exp; selective
    recomputation keeps q, k and kv_b's output; explicit products (d_head != d_value, or asked for)
    q, k, a copy of v and the probabilities."""
    d, nh, dk, dv = spec.d_model, a.heads, a.d_head, a.d_value
    kv_norm = norm_saved(spec, lat.kv_rank)
    if spec.norm == "layernorm":  # LayerNorm keeps its input: the view, so the whole of kv_a's output
        kv_norm = (kv_norm[0], Saved("norms", lat.kv_a))
    else:  # fp32 keeps the view's storage (the rotary key besides); 16 bits an fp32 copy of the latent
        kv_norm += (Saved("norms", lat.rope_dims, dtype="fp32_self"),)
    q_norm = norm_saved(spec, lat.q_rank) + (Saved("norms", lat.q_rank),) if lat.q_rank else ()
    saved = [Saved(component, d), Saved(component, a.out_in), Saved(component, d, dtype="mask"),
             *(s._replace(group=component, kept=LAYER) for s in (*q_norm, *kv_norm)), Saved(component, lat.kv_rank),
             Saved("positions", 4 * lat.rope_dims, per_batch=False)]  # fmt: skip
    core = nh * dk * 2 + lat.kv_b  # q, k, and kv_b's output which v is a view of
    explicit = explicit_attention(spec, a, False) == "explicit"
    eager = None if explicit else "eager"
    if not explicit:
        saved += [Saved(component, core, attention="flash", kept=SCORES),
                  Saved(component, nh, dtype="fp32", attention="flash", kept=SCORES),
                  Saved(component, a.out_in, attention="flash", kept=SCORES)]  # fmt: skip
    saved += [Saved(component, core, kept=SELECTIVE),
              Saved(component, nh * (2 * dk + dv), attention=eager, kept=SCORES),
              Saved(f"{component}_scores", nh, rows="pairs", attention=eager, kept=SCORES),
              Saved(f"{component}_scores", 2 * nh, rows="pairs", dtype="mask", attention=eager,
                    kept=SCORES)]  # fmt: skip
    return tuple(saved)


def _value_norm_saved(spec: ModelSpec, a: AttentionShape, component: str, kv: int, keys: Rows,
                      saved: list[Saved]) -> list[Saved]:  # fmt: skip
    """What the weightless norm per value head (Gemma 4's v_norm, in fp32) changes: it keeps 1/rms per row and
    its fp32 input, a view of the fused output in fp32 (so kept then in every mode) and a copy in 16 bits; the
    normed v is a new tensor, the core's input in the fused kernel and under selective recomputation. The fused
    output, which the core kept through its v view, stays kept in 16 bits only where q and k are views of it
    too (no rotation and no QK-norm)."""
    v, mode = a.kv_heads * a.d_value, spec.mixer.qk_norm
    if a.rotary_dims or mode:  # q and k are new tensors: the fused output is now kept by the norm's input alone
        saved = list(saved)
        # the first of each: a later entry may be alike (with shared_kv, the rotated q and k are as wide)
        for fused in (Saved(component, kv, rows=keys, attention="flash", kept=SCORES),
                      Saved(component, kv, rows=keys, kept=SELECTIVE)):  # fmt: skip
            i = saved.index(fused)
            saved[i] = fused._replace(dtype="fp32_self")
    saved += [Saved(component, v, attention="flash", kept=SCORES), Saved(component, v, kept=SELECTIVE),
              Saved(component, a.kv_heads, dtype="fp32"), Saved(component, v, dtype="fp32_copy")]  # fmt: skip
    if not mode or (mode == "l2" and a.rotary_dims):  # no QK-norm keeps the fused output in eager mode already
        saved += [Saved(component, kv, dtype="fp32_self", attention="eager", kept=SCORES)]
    return saved


def _qk_norm_saved(spec: ModelSpec, a: AttentionShape, component: str, kv: int) -> list[Saved]:
    """What a QK-norm adds. Per head ('head'/true) or over all heads ('full'), before the rotation,
    on views of the fused projection's output: the norm's own tensors (RMSNorm: the fp32 input,
    1/rms per row and, with a weight, the normalised x; LayerNorm: mean and 1/std per row), so the
    fused output is kept in eager mode too; without rotary the normalised q and k are the core's
    inputs; a per-head norm leaves q head-major, and so the fused kernel's output, which the output
    projection then copies. The L2 norm ('l2', after the rotation): its fp32 input and 1/rms per row."""
    mode = "head" if spec.mixer.qk_norm is True else spec.mixer.qk_norm
    qk, rows = a.q + a.k, a.heads + a.kv_heads
    rotary = a.rotary_dims > 0
    out: list[Saved] = []
    if mode == "l2" or spec.norm == "rmsnorm":
        per_row = 2 if mode == "full" else rows
        weight = qk if mode != "l2" and spec.norm_affine != "none" else 0
        out += [Saved(component, per_row + weight, dtype="fp32"),
                Saved(component, qk, dtype="fp32" if mode == "l2" and rotary else "fp32_copy")]  # fmt: skip
    else:
        out += [Saved(component, 2 * (2 if mode == "full" else rows))]
    if mode != "l2" or not rotary:  # the norm reads the fused output: kept in eager mode too (an
        # upcasting norm keeps it only in fp32, and in 16 bits its fp32 copy instead)
        upcast = mode == "l2" or spec.norm == "rmsnorm"
        out += [Saved(component, kv, dtype="fp32_self" if upcast else "act", attention="eager", kept=SCORES)]
    if not rotary:  # the normalised q and k are the core's inputs
        out += [Saved(component, qk, attention="flash", kept=SCORES), Saved(component, qk, kept=SELECTIVE)]
    if mode == "head" and a.rotary_dims == a.d_head or (mode == "head" and not rotary):
        out += [Saved(component, a.out_in, attention="flash", kept=SCORES)]
    return out
