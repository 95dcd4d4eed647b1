"""What the MLP and a mixture of experts keep for backward on torch's CPU kernels (the rule set
'torch-cpu'), measured on the reference model: the dense MLP (``mlp``), the router (``router``), the
routed experts (``experts``) and the shared expert (``shared_experts``)."""

from archspec.describe.entries import Linear
from archspec.describe.parts import Part
from archspec.memory.saved.record import Saved
from archspec.spec.model import ModelSpec

# values per row of d_ff that an MLP's hidden layer keeps: relu its output (shared with the down
# projection); gelu, silu, relu2 the projection's output and the activation's; gated: the gate's and
# up's outputs, act(gate) and the product; clamped SwiGLU the two outputs, the clamped gate,
# sigmoid(1.702 gate), their product, up + 1 and the product of the two
HIDDEN_KEPT = {"relu": 1, "gelu": 2, "silu": 2, "relu2": 2, "swiglu": 4, "geglu": 4, "clamped_swiglu": 7}


def mlp_saved(spec: ModelSpec, part: Part) -> tuple[Saved, ...]:
    """The input and the hidden layer's tensors (HIDDEN_KEPT), once per row through the part's maps (an
    expert: once per routed row); the dropout mask after the block (with dropout). The widths are the
    part's first input projection's: d_model -> d_ff."""
    up = next(e for e in part.entries if isinstance(e, Linear))
    per_token = up.per_row
    return (Saved("mlp", per_token * up.n_in), Saved("mlp", HIDDEN_KEPT[spec.activation] * per_token * up.n_out),
            Saved("mlp", up.n_in, dtype="mask"))  # fmt: skip


def mlp(spec: ModelSpec, part: Part) -> tuple[Saved, ...]:
    """The rule of a dense MLP (form 'mlp'); its input left out where another part keeps it."""
    saved = mlp_saved(spec, part)
    return saved[1:] if part.shares_input else saved


def router(spec: ModelSpec, part: Part) -> tuple[Saved, ...]:
    """The router keeps its input, the fp32 scores, the chosen experts (int64) and, renormalising, the
    chosen scores and their sum (fp32); beside a dense MLP (or where another part keeps it), its input
    is the block's input, which the block's norm keeps already. Gemma 4's router norm and expert scales
    are measured in fp32 only (the 16-bit rows of the router's and the experts' norm inputs are not)."""
    moe, d, k = spec.mlp, spec.d_model, spec.mlp.top_k
    own_input = not moe.d_dense and not part.shares_input
    routed = ((Saved("router", d),) if own_input else ()) + (Saved("router", moe.experts, dtype="fp32"),
                                                              Saved("router", k, dtype="int64"))  # fmt: skip
    if moe.normalize:
        routed += (Saved("router", k + 1, dtype="fp32"),)
    if moe.router_norm:  # 1/rms per row (fp32), the normalised input and the scaled one the router reads
        routed += (Saved("router", 1, dtype="fp32"), Saved("router", 2 * d))
    if moe.expert_scales:  # the weights and the chosen experts' scales they are multiplied by
        routed += (Saved("router", 2 * k, dtype="fp32"),)
    return routed


def experts(spec: ModelSpec, part: Part) -> tuple[Saved, ...]:
    """Per routed row (N·k rows in all, however the router spreads them: every tensor an expert keeps
    has one row per routed row): the expert's input and hidden tensors, the row and slot indices
    (int64), the routing weight, the expert's output and the weighted output added back."""
    k, d = spec.mlp.top_k, spec.d_model
    combine = (Saved("experts", 2 * k, dtype="int64"), Saved("experts", k), Saved("experts", 2 * k * d))
    return mlp_saved(spec, part) + combine


def shared_experts(spec: ModelSpec, part: Part) -> tuple[Saved, ...]:
    """The shared expert: its input is the router's; with a gate, sigmoid(gate) and the expert's output
    it scales."""
    kept = mlp_saved(spec, part)[1:]
    if spec.mlp.shared_gate:
        kept += (Saved("shared_experts", 1), Saved("shared_experts", spec.d_model))
    return kept
