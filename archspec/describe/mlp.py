"""The parts of the MLP: its widths and gate factor (``MLPShape``), the dense MLP of a block
(``mlp_part``) and a mixture of experts (``moe_parts``: router, routed and shared experts, Gemma 4's
dense MLP beside them), each with what it keeps for backward.
"""

# Annotations are objects, not strings (no `from __future__ import annotations`): typing.NamedTuple
# compiles a ForwardRef for every string field when the class is made, at every start-up.
from typing import NamedTuple

from archspec.core.vocab import ACTIVATIONS
from archspec.describe.entries import Entry, Linear, Norm, Param, Pointwise, Saved, StackShape
from archspec.describe.parts import Part, norm_part
from archspec.spec.model import ModelSpec


class MLPShape(NamedTuple):
    """d_model -> d_ff (two input projections, gate and up, for gated activations) -> d_model."""

    d_model: int
    d_ff: int
    activation: str
    gated: bool
    bias: bool

    @classmethod
    def of(cls, spec: ModelSpec, d_ff: int | None = None) -> "MLPShape":
        """The dense MLP of `spec` (or, with d_ff, an expert or shared expert of that width)."""
        return cls(spec.d_model, d_ff or spec.d_ff, spec.activation, spec.gated, spec.biases.mlp)

    @property
    def inputs(self) -> tuple[str, ...]:
        """The input projections: ('gate', 'up') for gated activations, ('up',) otherwise."""
        return ("gate", "up") if self.gated else ("up",)

    @property
    def pointwise(self) -> str:
        """What the hidden layer runs per element (archspec.core.vocab.ACTIVATIONS): relu, gelu (gelu, geglu), silu
        (silu, swiglu), relu2 or gpt-oss's clamped SwiGLU."""
        return ACTIVATIONS[self.activation].op


def _mlp_entries(m: MLPShape, prefix: str = "", copies: int = 1, uses: int | None = None) -> tuple[Entry, ...]:
    """Input projection(s) to d_ff, the activation (times the gate), the down projection; `copies`
    stacked experts of which each token passes through `uses`."""
    per_token = copies if uses is None else uses
    entries: tuple[Entry, ...] = tuple(Linear(prefix + n, m.d_model, m.d_ff, m.bias, copies=copies, uses=uses)
                                       for n in m.inputs)  # fmt: skip
    entries += (Pointwise(prefix + "act", m.pointwise, per_token * m.d_ff, "activations"),)
    if m.gated:
        entries += (Pointwise(prefix + "gate_product", "gate", per_token * m.d_ff, "activations"),)
    return entries + (Linear(prefix + "down", m.d_ff, m.d_model, m.bias, copies=copies, uses=uses),)


# values per row of d_ff that an MLP's hidden layer keeps: relu its output (shared with the down
# projection); gelu, silu, relu2 the projection's output and the activation's; gated: the gate's and
# up's outputs, act(gate) and the product; clamped SwiGLU the two outputs, the clamped gate,
# sigmoid(1.702 gate), their product, up + 1 and the product of the two
HIDDEN_KEPT = {"relu": 1, "gelu": 2, "silu": 2, "relu2": 2, "swiglu": 4, "geglu": 4, "clamped_swiglu": 7}


def _mlp_saved(m: MLPShape, per_token: int = 1) -> tuple[Saved, ...]:
    """The input and the hidden layer's tensors (HIDDEN_KEPT), `per_token` times per token (an
    expert: once per routed row); the dropout mask after the block (with dropout)."""
    return (Saved("mlp", per_token * m.d_model), Saved("mlp", HIDDEN_KEPT[m.activation] * per_token * m.d_ff),
            Saved("mlp", m.d_model, dtype="mask"))  # fmt: skip


def mlp_part(spec: ModelSpec, stack: StackShape, layer: str) -> Part:
    """The dense MLP of one block, with its residual add."""
    m = MLPShape.of(spec)
    entries = _mlp_entries(m) + (Pointwise("residual", "residual", m.d_model, "residual_adds"),)
    return Part(f"{layer}.mlp", "mlp", "dense", entries, stack=stack, saved=_mlp_saved(m))


def moe_parts(spec: ModelSpec, stack: StackShape, layer: str) -> list[Part]:
    """A mixture of experts: the router d_model -> experts (with a score-correction bias where it is
    a parameter), the routed experts (stacked, each token through top_k of them) and the shared
    expert with its optional gate. Gemma 4's options: the router's weightless RMSNorm with its
    per-channel scale (`router_scale`) and d_model^-0.5, a scale per expert on the routing weights
    (`expert_scale`); a dense MLP beside the experts (`dense`, component 'mlp') with a norm after it
    (`dense_post_norm`) and the experts' own norms before and after them (`experts_norm`,
    `experts_post_norm`), the block's mlp_norm and mlp_post_norm around the sum. What these options
    keep for backward is measured in fp32 only (the 16-bit rows of the router's and the experts'
    norm inputs are not)."""
    moe, d = spec.mlp, spec.d_model
    path = f"{layer}.mlp"
    expert = MLPShape.of(spec, moe.d_expert)
    router: tuple[Entry, ...] = ()
    if moe.router_norm:
        router += (Norm("router_norm", d, "rmsnorm", affine="none"), Param("router_scale", (d,)),
                   Pointwise("router_scale", "scale", 2 * d, "norms"))  # fmt: skip
    router += (Linear("router", d, moe.experts, moe.router_bias),)
    if moe.correction_bias:
        router += (Param("router_correction", (moe.experts,)),)
    router += (Pointwise("router_scores", "sigmoid" if moe.scoring == "sigmoid" else "softmax", moe.experts,
                         "softmax"),)  # fmt: skip
    k = moe.top_k
    if moe.expert_scales:
        router += (Param("expert_scale", (moe.experts,)), Pointwise("expert_scale", "scale", k, "softmax"))
    # the router keeps its input, the fp32 scores, the chosen experts (int64) and, renormalising,
    # the chosen scores and their sum (fp32)
    # (beside a dense MLP, its input is the block's input, which the block's norm keeps already)
    routed = (() if moe.d_dense else (Saved("router", d),)) + (Saved("router", moe.experts, dtype="fp32"),
                                                               Saved("router", k, dtype="int64"))  # fmt: skip
    if moe.normalize:
        routed += (Saved("router", k + 1, dtype="fp32"),)
    if moe.router_norm:  # 1/rms per row (fp32), the normalised input and the scaled one the router reads
        routed += (Saved("router", 1, dtype="fp32"), Saved("router", 2 * d))
    if moe.expert_scales:  # the weights and the chosen experts' scales they are multiplied by
        routed += (Saved("router", 2 * k, dtype="fp32"),)
    # per routed row (N·k rows in all, however the router spreads them: every tensor an expert keeps
    # has one row per routed row): the expert's input and hidden tensors, the row and slot indices
    # (int64), the routing weight, the expert's output and the weighted output added back
    combine = (Saved("experts", 2 * k, dtype="int64"), Saved("experts", k), Saved("experts", 2 * k * d))
    parts = [
        Part(path, "router", "router", router, stack=stack, saved=routed),
        Part(path, "experts", "expert", _mlp_entries(expert, "experts.", moe.experts, moe.top_k)
             + (Pointwise("residual", "residual", d, "residual_adds"),), stack=stack,
             saved=_mlp_saved(expert, k) + combine),
    ]  # fmt: skip
    if moe.d_shared:
        shared = _mlp_entries(MLPShape.of(spec, moe.d_shared), "shared.")
        # its input is the router's; with a gate, sigmoid(gate) and the expert's output it scales
        kept = _mlp_saved(MLPShape.of(spec, moe.d_shared))[1:]
        if moe.shared_gate:
            shared += (Linear("shared_gate", d, 1, False),)
            kept += (Saved("shared_experts", 1), Saved("shared_experts", d))
        parts.append(Part(path, "shared_experts", "shared_expert", shared, stack=stack, saved=kept))
    if moe.d_dense:
        dense = MLPShape.of(spec, moe.d_dense)
        parts += [Part(path, "mlp", "dense", _mlp_entries(dense, "dense."), stack=stack, saved=_mlp_saved(dense)),
                  norm_part(spec, f"{path}.dense_post_norm", stack),
                  norm_part(spec, f"{path}.experts_norm", stack, shared_input=True),  # the input mlp_norm keeps
                  norm_part(spec, f"{path}.experts_post_norm", stack)]  # fmt: skip
    return parts
