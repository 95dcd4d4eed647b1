"""The parts of the MLP: its widths and gate factor (``MLPShape``), the dense MLP of a block
(``mlp_part``) and a mixture of experts (``moe_parts``: router, routed and shared experts, Gemma 4's
dense MLP beside them). What each keeps for backward is the rule sets' (archspec.memory.saved.mlp).
"""

# Annotations are objects, not strings (no `from __future__ import annotations`): typing.NamedTuple
# compiles a ForwardRef for every string field when the class is made, at every start-up.
from typing import NamedTuple

from archspec.core.vocab import ACTIVATIONS
from archspec.describe.entries import Entry, Linear, Norm, Param, Pointwise, StackShape
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


def mlp_part(spec: ModelSpec, stack: StackShape, layer: str) -> Part:
    """The dense MLP of one block, with its residual add."""
    m = MLPShape.of(spec)
    entries = _mlp_entries(m) + (Pointwise("residual", "residual", m.d_model, "residual_adds"),)
    return Part(f"{layer}.mlp", "mlp", "dense", entries, stack=stack, form="mlp")


def moe_parts(spec: ModelSpec, stack: StackShape, layer: str) -> list[Part]:
    """A mixture of experts: the router d_model -> experts (with a score-correction bias where it is
    a parameter), the routed experts (stacked, each token through top_k of them) and the shared
    expert with its optional gate. Gemma 4's options: the router's weightless RMSNorm with its
    per-channel scale (`router_scale`) and d_model^-0.5, a scale per expert on the routing weights
    (`expert_scale`); a dense MLP beside the experts (`dense`, component 'mlp') with a norm after it
    (`dense_post_norm`) and the experts' own norms before and after them (`experts_norm`,
    `experts_post_norm`), the block's mlp_norm and mlp_post_norm around the sum."""
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
    experts = _mlp_entries(expert, "experts.", moe.experts, moe.top_k) + (Pointwise("residual", "residual", d,
                                                                                     "residual_adds"),)  # fmt: skip
    parts = [Part(path, "router", "router", router, stack=stack, form="router"),
             Part(path, "experts", "expert", experts, stack=stack, form="experts")]  # fmt: skip
    if moe.d_shared:
        shared = _mlp_entries(MLPShape.of(spec, moe.d_shared), "shared.")
        if moe.shared_gate:
            shared += (Linear("shared_gate", d, 1, False),)
        parts.append(Part(path, "shared_experts", "shared_expert", shared, stack=stack, form="shared_experts"))
    if moe.d_dense:
        dense = MLPShape.of(spec, moe.d_dense)
        parts += [Part(path, "mlp", "dense", _mlp_entries(dense, "dense."), stack=stack, form="mlp"),
                  norm_part(spec, f"{path}.dense_post_norm", stack),
                  norm_part(spec, f"{path}.experts_norm", stack, shared_input=True),  # the input mlp_norm keeps
                  norm_part(spec, f"{path}.experts_post_norm", stack)]  # fmt: skip
    return parts
